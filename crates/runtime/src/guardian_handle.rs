//! The guardian child process (FR-SAFE-003) as the core holds it: started in its own session with the shared
//! page it watches, checked every tick, and let go at the end; and the fixed-rate tick schedule of the reflex
//! cadence with its bounded lateness record (NFR-ACT-001, issue 14).

use crate::RuntimeError;
use gamepilot_core::Chord;
use gamepilot_guardian::SharedState;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The guardian child and the shared page it watches.
pub struct GuardianHandle {
    pub shm: SharedState,
    child: Child,
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
        // Its own session and process group (issue 14): Ctrl+C, Ctrl+Z, a hang-up and `kill -- -PGID`
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
        Ok(GuardianHandle { shm, child })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// False once the guardian has exited: input must not stay armed without it.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Disarm and let the guardian go (closing its pipe; it releases whatever is left and exits).
    pub fn finish(mut self) {
        self.shm.set_armed(false);
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(2);
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

/// A fixed-rate tick schedule that records how late each tick woke (NFR-ACT-001) in a bounded histogram.
pub struct Ticker {
    period: Duration,
    next: Instant,
    pub lateness: Lateness,
}

impl Ticker {
    pub fn new(hz: u32) -> Ticker {
        let period = Duration::from_micros(1_000_000 / hz.max(1) as u64);
        Ticker {
            period,
            next: Instant::now(),
            lateness: Lateness::default(),
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
            .add(woke.saturating_duration_since(self.next).as_micros() as u64);
        self.next += self.period;
        if self.next < woke {
            self.next = woke + self.period;
        }
    }
}

/// The width of one lateness bucket in microseconds, and the lateness the last bucket starts at.
pub const LATENESS_BUCKET_US: u64 = 10;
pub const LATENESS_CAP_US: u64 = 100_000;

/// Tick lateness over a whole session in constant memory (issue 14: an hour at 60 Hz is 216,000 samples):
/// a histogram of 10 µs buckets up to 100 ms (the last bucket holds everything later), with the exact
/// count, maximum and last sample. Percentiles are exact to one bucket.
#[derive(Debug, Clone)]
pub struct Lateness {
    buckets: Vec<u64>,
    count: u64,
    max_us: u64,
    last_us: u64,
}

impl Default for Lateness {
    fn default() -> Self {
        Lateness {
            buckets: vec![0; (LATENESS_CAP_US / LATENESS_BUCKET_US) as usize + 1],
            count: 0,
            max_us: 0,
            last_us: 0,
        }
    }
}

impl Lateness {
    pub fn add(&mut self, us: u64) {
        let i = (us.min(LATENESS_CAP_US) / LATENESS_BUCKET_US) as usize;
        if let Some(b) = self.buckets.get_mut(i) {
            *b += 1;
        }
        self.count += 1;
        self.max_us = self.max_us.max(us);
        self.last_us = us;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn last_us(&self) -> u64 {
        self.last_us
    }

    pub fn max_us(&self) -> u64 {
        self.max_us
    }

    /// The `p` quantile (0..=1), the lower edge of its bucket (the maximum for the top sample); 0 when empty.
    pub fn percentile_us(&self, p: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((self.count - 1) as f64 * p.clamp(0.0, 1.0)) as u64;
        let mut seen = 0u64;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen > rank {
                return (i as u64 * LATENESS_BUCKET_US).min(self.max_us);
            }
        }
        self.max_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // NFR-ACT-001, issue 14: lateness over an hour stays in constant memory and its percentiles hold.
    #[test]
    fn lateness_is_bounded_and_its_percentiles_are_exact_to_a_bucket() {
        let mut l = Lateness::default();
        let size = l.buckets.len();
        for i in 0..216_000u64 {
            l.add(i % 1000);
        }
        l.add(5_000_000);
        assert_eq!(l.buckets.len(), size);
        assert_eq!(l.count(), 216_001);
        assert_eq!(l.max_us(), 5_000_000);
        assert_eq!(l.last_us(), 5_000_000);
        let p50 = l.percentile_us(0.5);
        assert!((490..=500).contains(&p50), "{p50}");
        let p99 = l.percentile_us(0.99);
        assert!((980..=990).contains(&p99), "{p99}");
        assert_eq!(l.percentile_us(1.0), LATENESS_CAP_US);
        assert_eq!(Lateness::default().percentile_us(0.99), 0);
    }
}
