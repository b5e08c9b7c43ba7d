//! The off-thread recognition worker for `region_integer`: takes the sensor crate's queued requests into a
//! bounded queue (the oldest dropped when the reader falls behind), reads each region with a
//! [`DigitReader`] on its own thread, and hands readings back to the recognition cache.
//!
//! The reflex tick never waits on it (`submit` + `collect` never block on the reader); the CLI, which is
//! one evaluation rather than a tick, waits with `wait`. [`OcrDigits`] adapts the ocr crate's default
//! engine (PP-OCR's recogniser, digits only, confidence-gated; FR-PERC-008).

use crate::RuntimeError;
use gamepilot_core::{FrameView, Rect};
use gamepilot_sensor::{DigitReader, RecognitionCache, RecognitionKey, RecognitionRequest};
use std::collections::VecDeque;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Requests waiting for the reader at most; past this the oldest is dropped (its region stays undefined
/// and is asked for again on a later tick if it still matters).
pub const MAX_QUEUED: usize = 8;

/// `region_integer` over the ocr crate's default engine ([`gamepilot_ocr::default_engine`]).
pub struct OcrDigits(gamepilot_ocr::OcrEngine);

impl OcrDigits {
    pub fn new() -> Result<Self, RuntimeError> {
        Ok(OcrDigits(gamepilot_ocr::default_engine()?))
    }
}

impl DigitReader for OcrDigits {
    fn read_integer(&mut self, view: FrameView<'_>, region: Rect, digits: Option<u32>) -> Option<i64> {
        self.0
            .read_integer(&view, region, digits.unwrap_or(0))
            .ok()
            .flatten()
    }
}

/// The queue between the reflex thread and the reader: bounded, drop-oldest.
#[derive(Default)]
struct Queue {
    jobs: VecDeque<RecognitionRequest>,
    closed: bool,
}

/// A worker thread owning one digit reader.
pub struct SensorWorker {
    queue: Arc<(Mutex<Queue>, Condvar)>,
    rx: Receiver<(RecognitionKey, Option<i64>)>,
    handle: Option<JoinHandle<()>>,
    in_flight: usize,
    capacity: usize,
    dropped: u64,
}

impl SensorWorker {
    /// Start the worker; the reader is built on the worker thread by `make` (its failure is returned here).
    pub fn spawn<R, F>(make: F) -> Result<SensorWorker, RuntimeError>
    where
        R: DigitReader + 'static,
        F: FnOnce() -> Result<R, RuntimeError> + Send + 'static,
    {
        SensorWorker::spawn_bounded(make, MAX_QUEUED)
    }

    /// [`SensorWorker::spawn`] with a queue of at most `capacity` waiting requests.
    pub fn spawn_bounded<R, F>(make: F, capacity: usize) -> Result<SensorWorker, RuntimeError>
    where
        R: DigitReader + 'static,
        F: FnOnce() -> Result<R, RuntimeError> + Send + 'static,
    {
        let queue = Arc::new((Mutex::new(Queue::default()), Condvar::new()));
        let shared = Arc::clone(&queue);
        let (done, rx) = channel();
        let (ready_tx, ready_rx) = channel::<Result<(), String>>();
        let handle = std::thread::Builder::new()
            .name("gamepilot-sensor-ocr".into())
            .spawn(move || {
                // Recognition may take a while; the reflex thread that submits to it must not wait
                // behind it for a core (FR-LOOP-002). Any pool the reader starts inherits this.
                crate::worker::yield_cpu_to_reflex();
                let mut reader = match make() {
                    Ok(r) => {
                        let _ = ready_tx.send(Ok(()));
                        r
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let (lock, cv) = &*shared;
                loop {
                    let req = {
                        let Ok(mut q) = lock.lock() else { return };
                        loop {
                            if let Some(r) = q.jobs.pop_front() {
                                break r;
                            }
                            if q.closed {
                                return;
                            }
                            q = match cv.wait(q) {
                                Ok(q) => q,
                                Err(_) => return,
                            };
                        }
                    };
                    // A reader that panics on some input loses that reading, not the worker.
                    let reading =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| req.read_with(&mut reader)))
                            .unwrap_or(None);
                    if done.send((req.key, reading)).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| RuntimeError::io("spawning the sensor recognition worker", e))?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(RuntimeError::WorkerStart(format!(
                    "the digit reader could not start: {e}"
                )))
            }
            Err(_) => {
                return Err(RuntimeError::WorkerStart(
                    "the sensor recognition worker stopped while starting".into(),
                ))
            }
        }
        Ok(SensorWorker {
            queue,
            rx,
            handle: Some(handle),
            in_flight: 0,
            capacity: capacity.max(1),
            dropped: 0,
        })
    }

    /// Move every queued request to the worker's bounded queue (never waits for the reader); when the
    /// queue is full the oldest waiting request is dropped and abandoned in the cache.
    pub fn submit(&mut self, cache: &mut RecognitionCache) {
        let reqs = cache.take_requests();
        if reqs.is_empty() {
            return;
        }
        let (lock, cv) = &*self.queue;
        let Ok(mut q) = lock.lock() else {
            reqs.iter().for_each(|r| cache.abandon(r.key));
            return;
        };
        for req in reqs {
            if q.jobs.len() >= self.capacity {
                if let Some(old) = q.jobs.pop_front() {
                    cache.abandon(old.key);
                    self.in_flight = self.in_flight.saturating_sub(1);
                    self.dropped += 1;
                }
            }
            q.jobs.push_back(req);
            self.in_flight += 1;
        }
        drop(q);
        cv.notify_one();
    }

    /// Requests dropped because the reader fell behind.
    #[cfg(test)]
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Requests submitted and not yet answered (queued or being read).
    #[cfg(test)]
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Move finished readings into the cache (never blocks); returns how many arrived.
    /// The reflex loop's path (the CLI waits with [`SensorWorker::wait`] instead).
    pub fn collect(&mut self, cache: &mut RecognitionCache) -> usize {
        let mut n = 0;
        while let Ok((key, reading)) = self.rx.try_recv() {
            cache.fulfil(key, reading);
            self.in_flight = self.in_flight.saturating_sub(1);
            n += 1;
        }
        n
    }

    /// Block until every submitted request is answered or `timeout` passes; `false` on timeout.
    pub fn wait(&mut self, cache: &mut RecognitionCache, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.in_flight > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok((key, reading)) => {
                    cache.fulfil(key, reading);
                    self.in_flight = self.in_flight.saturating_sub(1);
                }
                Err(RecvTimeoutError::Timeout) => return false,
                Err(RecvTimeoutError::Disconnected) => return false,
            }
        }
        true
    }
}

impl Drop for SensorWorker {
    fn drop(&mut self) {
        let (lock, cv) = &*self.queue;
        if let Ok(mut q) = lock.lock() {
            q.closed = true;
            q.jobs.clear();
        }
        cv.notify_all();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::{PixelFormat, Point, Size, TransformChain};
    use gamepilot_sensor::{compile, EvalContext, Evaluator, NoTemplates, Value};

    /// Test double: waits for the test to open the gate, then reads the region's first red value.
    struct Gated(std::sync::mpsc::Receiver<()>);
    impl DigitReader for Gated {
        fn read_integer(&mut self, v: FrameView<'_>, r: Rect, _d: Option<u32>) -> Option<i64> {
            self.0.recv().ok()?;
            Some(v.rgb(r.x as u32, r.y as u32)[0] as i64)
        }
    }

    #[test]
    fn ticks_do_not_wait_for_the_worker_and_readings_arrive_later() {
        // FR-PERC-008: region_integer never blocks a tick; undefined until the worker has read it.
        // The reader is held shut while the ticks run: were a tick to wait for it, this test would hang.
        let px = [42u8, 0, 0, 255].repeat(16);
        let view = FrameView::new(4, 4, 16, PixelFormat::Rgba, &px).unwrap();
        let chain = TransformChain::new(Point::new(0, 0), Size::new(4, 4));
        let mut ev = Evaluator::new(
            compile("n = region_integer([0, 0, 2, 2])").unwrap(),
            Size::new(4, 4),
        );
        let mut cache = RecognitionCache::default();
        let (gate, shut) = channel();
        let mut w = SensorWorker::spawn(move || Ok(Gated(shut))).unwrap();
        let mut ctx = EvalContext {
            frame: view,
            chain,
            atlas: &NoTemplates,
            recognition: &mut cache,
        };
        assert_eq!(ev.tick(&mut ctx), &[Value::Undefined]);
        w.submit(ctx.recognition);
        assert_eq!(w.collect(ctx.recognition), 0);
        assert_eq!(
            ev.tick(&mut ctx),
            &[Value::Undefined],
            "still unread: undefined, not zero"
        );
        assert_eq!(
            ctx.recognition.queued(),
            0,
            "a pending content is not queued twice"
        );
        gate.send(()).unwrap();
        assert!(w.wait(ctx.recognition, Duration::from_secs(30)));
        assert_eq!(ev.tick(&mut ctx), &[Value::Int(42)]);
    }

    #[test]
    fn the_queue_is_bounded_and_drops_the_oldest() {
        // FR-PERC-008: while the reader is held shut, eight distinct regions are asked for at
        // a queue of two: the oldest are dropped (abandoned, so asked for again later), the ticks never
        // wait, and the newest are read once the reader moves.
        let mut px = Vec::new();
        for i in 0..64u8 {
            px.extend_from_slice(&[i, 0, 0, 255]);
        }
        let view = FrameView::new(8, 8, 32, PixelFormat::Rgba, &px).unwrap();
        let mut cache = RecognitionCache::default();
        let (gate, shut) = channel();
        let mut w = SensorWorker::spawn_bounded(move || Ok(Gated(shut)), 2).unwrap();
        for i in 0..8 {
            cache.lookup(&view, Rect::new(0, i, 1, 1), None);
            w.submit(&mut cache);
        }
        // One request may already be with the reader (blocked on the gate); at most two wait behind it.
        assert!(w.in_flight() <= 3, "{}", w.in_flight());
        assert!(w.dropped() >= 5, "{}", w.dropped());
        for _ in 0..8 {
            let _ = gate.send(());
        }
        assert!(w.wait(&mut cache, Duration::from_secs(30)));
        assert_eq!(
            cache.lookup(&view, Rect::new(0, 7, 1, 1), None),
            gamepilot_sensor::Lookup::Read(Some(56)),
            "the newest request was read"
        );
    }

    #[test]
    fn a_reader_that_panics_loses_one_reading_not_the_worker() {
        struct Fragile;
        impl DigitReader for Fragile {
            fn read_integer(&mut self, v: FrameView<'_>, r: Rect, _d: Option<u32>) -> Option<i64> {
                let red = v.rgb(r.x as u32, r.y as u32)[0];
                assert!(red != 0, "boom");
                Some(red as i64)
            }
        }
        let px = [0u8, 0, 0, 255, 9, 0, 0, 255];
        let view = FrameView::new(2, 1, 8, PixelFormat::Rgba, &px).unwrap();
        let mut cache = RecognitionCache::default();
        let mut w = SensorWorker::spawn(|| Ok(Fragile)).unwrap();
        cache.lookup(&view, Rect::new(0, 0, 1, 1), None);
        cache.lookup(&view, Rect::new(1, 0, 1, 1), None);
        w.submit(&mut cache);
        assert!(w.wait(&mut cache, Duration::from_secs(30)));
        assert_eq!(
            cache.lookup(&view, Rect::new(0, 0, 1, 1), None),
            gamepilot_sensor::Lookup::Read(None)
        );
        assert_eq!(
            cache.lookup(&view, Rect::new(1, 0, 1, 1), None),
            gamepilot_sensor::Lookup::Read(Some(9))
        );
    }

    #[test]
    fn a_reader_that_cannot_start_is_a_named_error() {
        let e = SensorWorker::spawn(|| -> Result<Gated, RuntimeError> {
            Err(RuntimeError::WorkerStart("no tessdata".into()))
        })
        .err()
        .unwrap();
        assert!(format!("{e:#}").contains("no tessdata"));
    }
}
