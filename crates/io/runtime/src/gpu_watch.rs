//! The GPU-memory watcher thread of `run` (FR-MODEL-004): samples graphics memory (NVML where it opens)
//! about once a second, feeds the pure degrade ladder (`gamepilot_model::DegradeLadder`) and sends each
//! typed `DegradeCommand` on a channel the loop reads. Where NVML does not open (no driver, no GPU) the
//! watch is a named skip — "no GPU: …" — logged once and handed back for the recording; it never fails
//! the session. Tests feed it a `ScriptedMemory` source.

use gamepilot_model::gpu::{GpuWatch, MemorySource};
use gamepilot_model::{DegradeCommand, DegradeLadder, LadderConfig, Nvml};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A running watch (or a skipped one: `skipped` says why and `commands` never yields).
pub struct GpuWatcher {
    pub commands: Receiver<DegradeCommand>,
    /// Why there is no watch ("no GPU: NVML not available: …"); `None` when it runs.
    pub skipped: Option<String>,
    /// The device's name when NVML opened it.
    pub device: Option<String>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl GpuWatcher {
    /// Start on NVML device `index`. The library is opened on the watch thread (its handle is not
    /// `Send`); the caller learns within a second whether it opened.
    pub fn start_nvml(index: u32, ladder: LadderConfig, period: Duration) -> GpuWatcher {
        let (open_tx, open_rx) = mpsc::channel::<Result<String, String>>();
        let mut w = Self::spawn_with(
            move || match Nvml::open(index) {
                Ok(n) => {
                    let _ = open_tx.send(Ok(n.name().to_string()));
                    Ok(n)
                }
                Err(e) => {
                    let _ = open_tx.send(Err(format!("NVML not available: {e}")));
                    Err(())
                }
            },
            ladder,
            period,
        );
        let (skipped, device) = match open_rx.recv_timeout(Duration::from_secs(5)) {
            Ok(Ok(name)) => (None, Some(name)),
            Ok(Err(why)) => (Some(format!("no GPU: {why}")), None),
            Err(_) => (Some("no GPU: NVML did not answer within 5 s".to_string()), None),
        };
        w.skipped = skipped;
        w.device = device;
        w
    }

    /// Start on a given source (tests: a `ScriptedMemory`).
    #[cfg(test)]
    pub fn start_with<S: MemorySource + Send + 'static>(
        source: S,
        ladder: LadderConfig,
        period: Duration,
    ) -> GpuWatcher {
        Self::spawn_with(move || Ok(source), ladder, period)
    }

    fn spawn_with<S: MemorySource + 'static>(
        open: impl FnOnce() -> Result<S, ()> + Send + 'static,
        ladder: LadderConfig,
        period: Duration,
    ) -> GpuWatcher {
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("gpu-watch".into())
            .spawn(move || {
                let Ok(source) = open() else { return };
                let Ok(ladder) = DegradeLadder::new(ladder) else {
                    return;
                };
                let mut watch = GpuWatch::new(source, ladder);
                let mut errors = 0u32;
                while !stop2.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    match watch.poll(crate::now()) {
                        Ok((_, Some(cmd))) => {
                            if tx.send(cmd).is_err() {
                                return;
                            }
                        }
                        Ok((_, None)) => errors = 0,
                        // A GPU that vanished mid-session: keep trying a while, then stop quietly (the
                        // ladder keeps whatever rung it reached).
                        Err(_) => {
                            errors += 1;
                            if errors > 30 {
                                return;
                            }
                        }
                    }
                    let left = period.saturating_sub(started.elapsed());
                    // Sleep in slices so that `stop` is seen promptly.
                    let until = Instant::now() + left;
                    while Instant::now() < until && !stop2.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(10).min(until - Instant::now()));
                    }
                }
            })
            .ok();
        GpuWatcher {
            commands: rx,
            skipped: None,
            device: None,
            stop,
            thread,
        }
    }

    /// The line for the log and the recording.
    pub fn describe(&self) -> String {
        match (&self.skipped, &self.device) {
            (Some(why), _) => format!("gpu watch skipped: {why}"),
            (None, Some(d)) => format!("gpu watch: NVML on {d}"),
            (None, None) => "gpu watch: running".to_string(),
        }
    }

    /// Hand the command channel to the loop, keeping the thread's stop handle here.
    pub fn take_commands(&mut self) -> Receiver<DegradeCommand> {
        let (_tx, dead) = mpsc::channel();
        std::mem::replace(&mut self.commands, dead)
    }
}

impl Drop for GpuWatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_model::gpu::ScriptedMemory;
    use gamepilot_model::GpuMemory;

    const GIB: u64 = 1 << 30;

    fn mem(free: u64) -> GpuMemory {
        GpuMemory {
            total_bytes: 16 * GIB,
            used_bytes: 16 * GIB - free,
            free_bytes: free,
        }
    }

    #[test]
    fn scripted_memory_pressure_sends_the_ladders_commands_in_order() {
        // FR-MODEL-004: the watcher thread drives the ladder and sends typed commands on its channel
        let mut samples = vec![mem(GIB / 4); 12];
        samples.extend(vec![mem(8 * GIB); 12]);
        let ladder = LadderConfig {
            confirm_samples: 2,
            cooldown: Duration::ZERO,
            ..LadderConfig::default()
        };
        let w = GpuWatcher::start_with(ScriptedMemory::new(samples), ladder, Duration::from_millis(2));
        assert!(w.skipped.is_none());
        let mut got = Vec::new();
        while got.len() < 6 {
            match w.commands.recv_timeout(Duration::from_secs(5)) {
                Ok(c) => got.push(c),
                Err(e) => panic!("only {got:?} before {e}"),
            }
        }
        assert_eq!(
            got,
            vec![
                DegradeCommand::ReduceContext { to_tokens: 4096 },
                DegradeCommand::ReduceVisualBudget { factor: 0.5 },
                DegradeCommand::MoveDeliberativeOffGpu,
                DegradeCommand::RestoreDeliberativeGpu,
                DegradeCommand::RestoreVisualBudget,
                DegradeCommand::RestoreContext { to_tokens: 8192 },
            ]
        );
        drop(w); // stops and joins the thread
    }

    #[test]
    fn nvml_runs_or_is_a_named_skip() {
        // FR-MODEL-004: NVML where it opens, else "no GPU: NVML not available: …"
        let w = GpuWatcher::start_nvml(0, LadderConfig::default(), Duration::from_millis(50));
        match &w.skipped {
            Some(why) => {
                assert!(why.starts_with("no GPU: NVML not available: "), "{why}");
                assert!(w.describe().starts_with("gpu watch skipped: no GPU"));
                assert!(w.commands.recv_timeout(Duration::from_millis(100)).is_err());
            }
            None => assert!(w.device.is_some(), "{}", w.describe()),
        }
    }
}
