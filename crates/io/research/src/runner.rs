//! Research never blocks a cadence: [`ResearchRunner`] runs requests on its own thread and delivers
//! each result as a [`ResearchEvent`] over a channel (the loop turns `Finished` into a deliberative
//! trigger). Submitting never waits: a full queue is refused with `Busy`.

use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

use serde::Serialize;

use crate::config::ResearchConfig;
use crate::error::ResearchError;
use crate::log::{ResearchLog, ResearchLogEntry};
use crate::research::{ResearchOutcome, ResearchRequest, Researcher, UnavailableReason};
use crate::synth::Synthesizer;

/// Identifies a submitted request in its events and log records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct RequestId(pub u64);

/// What the runner reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResearchEvent {
    /// The worker picked the request up.
    Started { id: RequestId },
    /// The request ended; `log` holds its records for the session recording.
    Finished {
        id: RequestId,
        outcome: Box<ResearchOutcome>,
        log: Vec<ResearchLogEntry>,
    },
}

/// Runs research on a dedicated thread.
#[derive(Debug)]
pub struct ResearchRunner {
    tx: Option<SyncSender<(RequestId, ResearchRequest)>>,
    worker: Option<JoinHandle<()>>,
    next_id: u64,
    config: ResearchConfig,
}

impl ResearchRunner {
    /// Starts the worker thread. Events arrive on the returned receiver.
    pub fn spawn(
        config: ResearchConfig,
        synthesizer: Arc<dyn Synthesizer>,
    ) -> Result<(Self, Receiver<ResearchEvent>), ResearchError> {
        let researcher = Researcher::new(config.clone(), synthesizer)?;
        let (tx, rx) = mpsc::sync_channel::<(RequestId, ResearchRequest)>(config.limits.queue_capacity);
        let (events_tx, events_rx) = mpsc::channel();
        let worker = std::thread::Builder::new()
            .name("research".into())
            .spawn(move || {
                for (id, request) in rx {
                    if events_tx.send(ResearchEvent::Started { id }).is_err() {
                        return;
                    }
                    let mut log = ResearchLog::new();
                    // A panic loses this request, not the worker: it is reported as the request's
                    // outcome and the next request runs (restarting research is safe).
                    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        researcher.run(id.0, &request, &mut log)
                    }))
                    .unwrap_or_else(|p| {
                        let detail = p
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| p.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "a panic without a message".into());
                        ResearchOutcome::Unavailable(UnavailableReason::SearchFailed {
                            error: ResearchError::WorkerPanicked { detail },
                        })
                    });
                    let event = ResearchEvent::Finished {
                        id,
                        outcome: Box::new(outcome),
                        log: log.take(),
                    };
                    if events_tx.send(event).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| ResearchError::InvalidConfig {
                reason: format!("could not start the research thread: {e}"),
            })?;
        Ok((
            ResearchRunner {
                tx: Some(tx),
                worker: Some(worker),
                next_id: 1,
                config,
            },
            events_rx,
        ))
    }

    /// Queues a request and returns at once. `Busy` when the queue is full, `RunnerStopped` when the
    /// worker is gone.
    pub fn submit(&mut self, request: ResearchRequest) -> Result<RequestId, ResearchError> {
        let tx = self.tx.as_ref().ok_or(ResearchError::RunnerStopped)?;
        let id = RequestId(self.next_id);
        match tx.try_send((id, request)) {
            Ok(()) => {
                self.next_id += 1;
                Ok(id)
            }
            Err(TrySendError::Full(_)) => Err(ResearchError::Busy),
            Err(TrySendError::Disconnected(_)) => Err(ResearchError::RunnerStopped),
        }
    }

    /// The configuration in force (read-only).
    pub fn config(&self) -> &ResearchConfig {
        &self.config
    }

    /// Stops accepting requests and waits for the worker to finish what it has (each request is
    /// bounded by its wall-clock limit).
    pub fn shutdown(mut self) {
        self.tx = None;
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

impl Drop for ResearchRunner {
    /// Closes the queue without waiting; the worker ends after its current request.
    fn drop(&mut self) {
        self.tx = None;
    }
}
