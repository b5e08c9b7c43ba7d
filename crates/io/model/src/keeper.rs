//! The hosts gamepilot started, reshaped while the session runs by the degrade ladder (FR-MODEL-004): a
//! smaller context restarts every started host with it (the memory is the KV cache each allocated for its
//! context), "deliberative model off the GPU" restarts the deliberative host with no GPU layers, and the
//! restores undo both, never past what a host was started with. Restarts run one at a time on a thread of
//! their own, so the loop that asks never waits (NFR-LOOP-001); each keeps the host's port, so clients keep
//! their address.

use crate::ladder::{host_change, DegradeCommand, HostRole};
use crate::{HostShape, LocalHost};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What happened to a host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostNotice {
    pub role: HostRole,
    pub shape: HostShape,
    /// `None`: the restart has begun; `Some(Ok(ms))`: it serves again after that long; `Some(Err(why))`:
    /// it failed and the host is stopped.
    pub done: Option<Result<u64, String>>,
}

impl HostNotice {
    /// One line for the recording and the terminal.
    pub fn describe(&self) -> String {
        let gpu = match self.shape.gpu_layers {
            Some(0) => "off the GPU".to_string(),
            Some(n) => format!("{n} GPU layers"),
            None => "default GPU layers".to_string(),
        };
        let what = format!(
            "the {} host, context {} tokens, {gpu}",
            self.role.as_str(),
            self.shape.ctx_size
        );
        match &self.done {
            None => format!("GPU memory degrade: restarting {what}"),
            Some(Ok(ms)) => format!("GPU memory degrade: {what}, serving again after {ms} ms"),
            Some(Err(why)) => format!("GPU memory degrade: restarting {what} failed: {why}"),
        }
    }
}

struct Kept {
    role: HostRole,
    host: Arc<Mutex<LocalHost>>,
    started: HostShape,
    /// The shape last asked for (the one it has once the queue is done).
    asked: HostShape,
}

/// The restart thread's two ends: jobs in, results out.
type Worker = (Sender<(usize, HostShape)>, Receiver<Result<u64, String>>);

/// The started hosts and their restarts.
pub struct HostKeeper {
    hosts: Vec<Kept>,
    queue: VecDeque<(usize, HostShape)>,
    running: Option<(usize, HostShape)>,
    /// One long-lived thread restarts every host: a host process asks for SIGTERM when the thread that
    /// started it ends (`PR_SET_PDEATHSIG` is per thread), so it must not be a thread per restart.
    worker: Option<Worker>,
}

impl HostKeeper {
    /// Keeps `hosts` (none when the user's endpoint serves the model: nothing to reshape).
    pub fn new(hosts: Vec<(HostRole, LocalHost)>) -> HostKeeper {
        HostKeeper {
            hosts: hosts
                .into_iter()
                .map(|(role, host)| {
                    let started = host.shape();
                    Kept {
                        role,
                        host: Arc::new(Mutex::new(host)),
                        started,
                        asked: started,
                    }
                })
                .collect(),
            queue: VecDeque::new(),
            running: None,
            worker: None,
        }
    }

    /// Queues the restarts `cmd` asks for and starts the next one if none runs; never waits.
    pub fn apply(&mut self, cmd: &DegradeCommand) -> Vec<HostNotice> {
        for (i, k) in self.hosts.iter_mut().enumerate() {
            if let Some(next) = host_change(cmd, k.role, k.started, k.asked) {
                k.asked = next;
                self.queue.push_back((i, next));
            }
        }
        self.poll()
    }

    /// Finished restarts, and the next one begun; never waits.
    pub fn poll(&mut self) -> Vec<HostNotice> {
        let mut out = Vec::new();
        if let Some((i, shape)) = self.running {
            let done = match self.worker.as_ref().map(|(_, rx)| rx.try_recv()) {
                Some(Ok(r)) => Some(r),
                Some(Err(TryRecvError::Empty)) => None,
                Some(Err(TryRecvError::Disconnected)) | None => {
                    self.worker = None;
                    Some(Err("the restart thread ended without a word".into()))
                }
            };
            if let Some(r) = done {
                out.push(HostNotice {
                    role: self.hosts[i].role,
                    shape,
                    done: Some(r),
                });
                self.running = None;
            }
        }
        if self.running.is_none() {
            if let Some((i, shape)) = self.queue.pop_front() {
                let role = self.hosts[i].role;
                match self.begin(i, shape) {
                    Ok(()) => {
                        out.push(HostNotice {
                            role,
                            shape,
                            done: None,
                        });
                        self.running = Some((i, shape));
                    }
                    Err(why) => out.push(HostNotice {
                        role,
                        shape,
                        done: Some(Err(why)),
                    }),
                }
            }
        }
        out
    }

    /// True while a restart runs or waits.
    pub fn busy(&self) -> bool {
        self.running.is_some() || !self.queue.is_empty()
    }

    fn begin(&mut self, i: usize, shape: HostShape) -> Result<(), String> {
        if self.worker.is_none() {
            let hosts: Vec<Arc<Mutex<LocalHost>>> = self.hosts.iter().map(|k| k.host.clone()).collect();
            let (job_tx, job_rx) = mpsc::channel::<(usize, HostShape)>();
            let (done_tx, done_rx) = mpsc::channel();
            std::thread::Builder::new()
                .name("host-restart".into())
                .spawn(move || {
                    for (i, shape) in job_rx {
                        let t0 = Instant::now();
                        let result = match hosts.get(i).map(|h| h.lock()) {
                            Some(Ok(mut h)) => h
                                .restart_as(shape)
                                .map(|()| t0.elapsed().as_millis() as u64)
                                .map_err(|e| e.to_string()),
                            Some(Err(_)) => Err("the host's lock was poisoned".into()),
                            None => Err(format!("no host {i}")),
                        };
                        if done_tx.send(result).is_err() {
                            return;
                        }
                    }
                })
                .map_err(|e| format!("no restart thread: {e}"))?;
            self.worker = Some((job_tx, done_rx));
        }
        let sent = self.worker.as_ref().map(|(tx, _)| tx.send((i, shape)));
        match sent {
            Some(Ok(())) => Ok(()),
            _ => {
                self.worker = None;
                Err("the restart thread is gone".into())
            }
        }
    }
}
