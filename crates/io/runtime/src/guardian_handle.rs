//! The guardian child process (FR-SAFE-003) as the core holds it: started in its own session with the shared
//! page it watches, checked every tick, and let go at the end; and the fixed-rate tick schedule of the reflex
//! cadence with its bounded lateness record (NFR-ACT-001).

use crate::RuntimeError;
use gamepilot_core::Chord;
use gamepilot_executor::LatenessHistogram;
use gamepilot_guardian::SharedState;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How old the guardian's own heartbeat may grow before the core stops: generous against scheduling delays
/// on a loaded machine (its loop beats every 5 ms), short against a guardian that was stopped.
pub const GUARDIAN_STALE_AFTER: Duration = Duration::from_millis(1000);
/// How long a stale guardian heartbeat must stay stale before the core believes it (see `gone`).
pub const GUARDIAN_STALE_CONFIRM: Duration = Duration::from_millis(100);

/// The guardian child and the shared page it watches.
pub struct GuardianHandle {
    pub shm: SharedState,
    child: Child,
    /// When this core first read the guardian's heartbeat as stale (cleared by a fresh one).
    stale_since: Option<std::time::Instant>,
}

impl GuardianHandle {
    /// Start `gamepilot guardian` with its own X connection and wait until it is ready (FR-SAFE-003).
    pub fn spawn(
        display: Option<&str>,
        panic: &Chord,
        stale_ms: u64,
    ) -> Result<GuardianHandle, RuntimeError> {
        let (shm, fd) = SharedState::create_memfd(std::process::id())?;
        let exe = std::env::current_exe()
            .map_err(|e| RuntimeError::io("locating the gamepilot binary for the guardian", e))?;
        let mut cmd = Command::new(exe);
        cmd.arg("guardian")
            .arg("--shm-fd")
            .arg(fd.to_string())
            .arg("--core-pid")
            .arg(std::process::id().to_string())
            .arg("--panic-key")
            .arg(panic.to_string())
            .arg("--stale-ms")
            .arg(stale_ms.to_string())
            .arg("--stdin-pipe")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        if let Some(d) = display {
            cmd.arg("--display").arg(d);
        }
        // Its own session and process group: Ctrl+C, Ctrl+Z, a hang-up and `kill -- -PGID`
        // reach the core, never the guardian that must release after them.
        {
            use std::os::unix::process::CommandExt as _;
            // SAFETY: setsid(2) is async-signal-safe and touches only the forked child.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::setsid() < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| RuntimeError::io("starting the guardian process", e))?;
        let deadline = Instant::now() + Duration::from_secs(5);
        while !shm.guardian_ready() {
            if let Some(status) = child
                .try_wait()
                .map_err(|e| RuntimeError::io("waiting for the guardian", e))?
            {
                return Err(RuntimeError::GuardianStart(format!(
                    "the guardian exited during start-up ({status}); refusing to arm input"
                )));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return Err(RuntimeError::GuardianStart(
                    "the guardian did not become ready within 5 s; refusing to arm input".into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(GuardianHandle {
            shm,
            child,
            stale_since: None,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Why input must no longer stay armed, if it must not: the guardian exited, or its heartbeat (written
    /// every 5 ms pass of its loop) is older than [`GUARDIAN_STALE_AFTER`] — stopped (SIGSTOP) or hung,
    /// it would not release after a crash of the core.
    pub fn gone(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(None) => {}
            Ok(Some(status)) => return Some(format!("the guardian exited ({status}); disarming")),
            Err(e) => return Some(format!("the guardian cannot be waited for ({e}); disarming")),
        }
        if !self.beat_is_stale() {
            self.stale_since = None;
            return None;
        }
        // A stale beat read once may be the whole machine's stall (a starved VM froze the core too): a
        // live guardian beats again within milliseconds of running, a stopped or hung one does not.
        let first = *self.stale_since.get_or_insert_with(std::time::Instant::now);
        (first.elapsed() >= GUARDIAN_STALE_CONFIRM).then(|| {
            format!(
                "the guardian's heartbeat is {} ms old (stopped or hung); disarming",
                self.beat_age_us() / 1000
            )
        })
    }

    fn beat_age_us(&self) -> u64 {
        gamepilot_guardian::monotonic_us().saturating_sub(self.shm.guardian_beat_us())
    }

    fn beat_is_stale(&self) -> bool {
        self.beat_age_us() > GUARDIAN_STALE_AFTER.as_micros() as u64
    }

    /// Disarm and let the guardian go (closing its pipe; it releases whatever is left and exits).
    pub fn finish(mut self) {
        self.shm.set_armed(false);
        drop(self.child.stdin.take());
        // A guardian that stopped beating will not read its pipe: end it now rather than wait for it.
        let wait = if self.beat_is_stale() {
            Duration::ZERO
        } else {
            Duration::from_secs(2)
        };
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fixed-rate tick schedule that records how late each tick woke (NFR-ACT-001) in the executor's
/// bounded histogram (an hour at 60 Hz is 216,000 samples, kept in fixed memory).
pub struct Ticker {
    period: Duration,
    next: Instant,
    pub lateness: LatenessHistogram,
}

impl Ticker {
    pub fn new(hz: u32) -> Ticker {
        let period = Duration::from_micros(1_000_000 / hz.max(1) as u64);
        Ticker {
            period,
            next: Instant::now(),
            lateness: LatenessHistogram::new(),
        }
    }

    /// Sleep until the next tick; skips missed ticks rather than bursting.
    pub fn wait(&mut self) {
        let now = Instant::now();
        if self.next > now {
            std::thread::sleep(self.next - now);
        }
        let woke = Instant::now();
        self.lateness
            .record(woke.saturating_duration_since(self.next).as_micros() as u64);
        self.next += self.period;
        if self.next < woke {
            self.next = woke + self.period;
        }
    }
}
