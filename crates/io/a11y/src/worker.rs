//! The accessibility worker: probes on its own thread and its own D-Bus connection, so that a busy or
//! stopped target can never hold the agent's loop (FR-PERC-010's open question: off the critical path
//! entirely). The caller asks for a refresh and reads the latest report; neither call waits on D-Bus.

use crate::error::A11yError;
use crate::probe::{A11yConfig, A11ySnapshot, A11yTarget, Prober};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The outcome of one probe the worker ran.
#[derive(Debug, Clone)]
pub struct A11yReport {
    /// The request this answers (1, 2, … in the order of [`A11yWorker::request_refresh`] calls).
    pub seq: u64,
    pub window: u32,
    /// The transform chain generation the request carried; boxes are stale once the chain moved on.
    pub generation: u64,
    pub result: Result<A11ySnapshot, A11yError>,
    pub finished_at: Instant,
}

struct Request {
    seq: u64,
    target: A11yTarget,
}

type Slot = Arc<Mutex<Option<Arc<A11yReport>>>>;

/// A thread that runs accessibility probes on request and keeps the latest report.
pub struct A11yWorker {
    tx: Sender<Request>,
    latest: Slot,
    /// Sequence number of the newest finished probe.
    done: Arc<AtomicU64>,
    seq: AtomicU64,
}

impl A11yWorker {
    /// Start the worker thread. It connects lazily (on the first request) and reconnects after a D-Bus
    /// failure; it ends when the worker is dropped (after the probe in flight, which is bounded).
    pub fn spawn(config: A11yConfig) -> Result<A11yWorker, A11yError> {
        let (tx, rx) = channel();
        let latest: Slot = Arc::new(Mutex::new(None));
        let done = Arc::new(AtomicU64::new(0));
        let (l, d) = (latest.clone(), done.clone());
        std::thread::Builder::new()
            .name("a11y-worker".into())
            .spawn(move || worker_loop(config, rx, l, d))
            .map_err(|e| A11yError::DBus(format!("cannot start the accessibility worker: {e}")))?;
        Ok(A11yWorker {
            tx,
            latest,
            done,
            seq: AtomicU64::new(0),
        })
    }

    /// Ask for a fresh probe of `target`; returns its sequence number at once. Requests that pile up while
    /// a probe runs collapse into the newest one.
    pub fn request_refresh(&self, target: A11yTarget) -> Result<u64, A11yError> {
        let seq = self.seq.fetch_add(1, Ordering::AcqRel) + 1;
        self.tx
            .send(Request { seq, target })
            .map_err(|_| A11yError::WorkerGone)?;
        Ok(seq)
    }

    /// The latest finished report, if any. Never waits on D-Bus: the worker holds this lock only to
    /// swap a pointer.
    pub fn latest(&self) -> Option<Arc<A11yReport>> {
        match self.latest.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Whether a requested probe has not finished yet.
    pub fn in_flight(&self) -> bool {
        self.seq.load(Ordering::Acquire) > self.done.load(Ordering::Acquire)
    }
}

fn worker_loop(config: A11yConfig, rx: Receiver<Request>, latest: Slot, done: Arc<AtomicU64>) {
    let mut prober: Option<Prober> = None;
    while let Ok(mut req) = rx.recv() {
        // Only the newest request matters.
        while let Ok(newer) = rx.try_recv() {
            req = newer;
        }
        let start = Instant::now();
        // A probe that panics loses that probe, not the worker: it is reported as this request's error and
        // the connection is rebuilt on the next one (restarting is safe: it holds no input).
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match prober.as_mut() {
            Some(p) => p.probe(&req.target, start),
            None => match Prober::connect(&config, start + config.limits.timeout) {
                Ok(mut p) => {
                    let r = p.probe(&req.target, start);
                    prober = Some(p);
                    r
                }
                Err(e) => Err(e),
            },
        }))
        .unwrap_or_else(|_| Err(A11yError::DBus("the accessibility probe panicked".into())));
        // A broken connection is rebuilt on the next request.
        if matches!(result, Err(A11yError::DBus(_))) {
            prober = None;
        }
        let report = Arc::new(A11yReport {
            seq: req.seq,
            window: req.target.window,
            generation: req.target.chain.generation,
            result,
            finished_at: Instant::now(),
        });
        match latest.lock() {
            Ok(mut g) => *g = Some(report),
            Err(p) => *p.into_inner() = Some(report),
        }
        done.store(req.seq, Ordering::Release);
    }
}
