//! The off-thread recognition worker for `region_integer`: drains the sensor crate's request queue, reads
//! each region with a [`DigitReader`] on its own thread, and hands readings back to the recognition cache.
//!
//! The reflex tick never waits on it (`submit` + `collect` never block); the CLI, which is one evaluation
//! rather than a tick, waits with `wait`. [`TesseractDigits`] adapts the ocr crate's tesseract engine.

use anyhow::Context as _;
use gamepilot_core::{FrameView, Rect};
use gamepilot_sensor::{DigitReader, RecognitionCache, RecognitionKey, RecognitionRequest};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `region_integer` over tesseract (the ocr crate's integer reader: upscaled, polarity-normalised,
/// digit whitelist, single-line page mode).
pub struct TesseractDigits(gamepilot_ocr::TesseractOcr);

impl TesseractDigits {
    pub fn new() -> anyhow::Result<Self> {
        Ok(TesseractDigits(
            gamepilot_ocr::TesseractOcr::new().context("starting tesseract for region_integer")?,
        ))
    }
}

impl DigitReader for TesseractDigits {
    fn read_integer(&mut self, view: FrameView<'_>, region: Rect, digits: Option<u32>) -> Option<i64> {
        self.0
            .read_integer(&view, region, digits.unwrap_or(0))
            .ok()
            .flatten()
    }
}

/// A worker thread owning one digit reader.
pub struct SensorWorker {
    tx: Option<Sender<RecognitionRequest>>,
    rx: Receiver<(RecognitionKey, Option<i64>)>,
    handle: Option<JoinHandle<()>>,
    in_flight: usize,
}

impl SensorWorker {
    /// Start the worker; the reader is built on the worker thread by `make` (its failure is returned here).
    pub fn spawn<R, F>(make: F) -> anyhow::Result<SensorWorker>
    where
        R: DigitReader + 'static,
        F: FnOnce() -> anyhow::Result<R> + Send + 'static,
    {
        let (tx, jobs) = channel::<RecognitionRequest>();
        let (done, rx) = channel();
        let (ready_tx, ready_rx) = channel::<Result<(), String>>();
        let handle = std::thread::Builder::new()
            .name("gamepilot-sensor-ocr".into())
            .spawn(move || {
                let mut reader = match make() {
                    Ok(r) => {
                        let _ = ready_tx.send(Ok(()));
                        r
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("{e:#}")));
                        return;
                    }
                };
                for req in jobs {
                    let reading = req.read_with(&mut reader);
                    if done.send((req.key, reading)).is_err() {
                        return;
                    }
                }
            })
            .context("spawning the sensor recognition worker")?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => anyhow::bail!("the digit reader could not start: {e}"),
            Err(_) => anyhow::bail!("the sensor recognition worker stopped while starting"),
        }
        Ok(SensorWorker {
            tx: Some(tx),
            rx,
            handle: Some(handle),
            in_flight: 0,
        })
    }

    /// Send every queued request to the worker (never blocks).
    pub fn submit(&mut self, cache: &mut RecognitionCache) {
        for req in cache.take_requests() {
            let key = req.key;
            match self.tx.as_ref().map(|tx| tx.send(req)) {
                Some(Ok(())) => self.in_flight += 1,
                _ => cache.abandon(key),
            }
        }
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
                    self.in_flight -= 1;
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
        self.tx.take();
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
    fn a_reader_that_cannot_start_is_a_named_error() {
        let e = SensorWorker::spawn(|| -> anyhow::Result<Gated> { anyhow::bail!("no tessdata") })
            .err()
            .unwrap();
        assert!(format!("{e:#}").contains("no tessdata"));
    }
}
