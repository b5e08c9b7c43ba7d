//! SIGINT, SIGTERM and SIGHUP as a clean stop of a running session: the first one sets a flag
//! the loop reads every iteration (release everything, stop the model host, write the summary and
//! `session_end`, exit 128 + the signal's number). A person's second Ctrl+C (a second SIGINT) exits at once
//! with that code, and so does a SIGTERM that comes after the first stop signal had time to act; the
//! guardian, which sees the core die, releases what was held. A SIGTERM repeated at once is the same stop
//! (`timeout(1)` signals the process and then its process group), and SIGHUP never exits at once. The
//! handlers (`signal-hook`'s low-level registration) do only atomic loads and stores, `clock_gettime` and
//! `_exit`, all async-signal-safe. SIGUSR1 is not a stop: it is the user's resume after their own input
//! paused the session (FR-SAFE-002).

use crate::RuntimeError;
use gamepilot_model::CancelToken;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// A SIGTERM within this long of the first stop signal is the same stop request delivered twice.
const REPEAT_GRACE_NS: u64 = 1_000_000_000;

/// The stop signals of a session, installed once per process.
#[derive(Clone)]
pub struct StopSignals {
    received: Arc<AtomicUsize>,
    stopping: CancelToken,
    resumes: Arc<AtomicUsize>,
}

/// Whether a stop signal exits at once: `first` is the first stop signal received before it (0: none)
/// and `since_first_ns` how long ago it came.
fn exits_at_once(sig: i32, first: usize, since_first_ns: u64) -> bool {
    first != 0 && (sig == SIGINT || (sig == SIGTERM && since_first_ns >= REPEAT_GRACE_NS))
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

impl StopSignals {
    /// Install the handlers (see the module's doc for what a second signal does).
    pub fn install() -> Result<StopSignals, RuntimeError> {
        let received = Arc::new(AtomicUsize::new(0));
        let first_at = Arc::new(AtomicU64::new(0));
        let stopping = CancelToken::new();
        let os = |e: std::io::Error| RuntimeError::io("installing the stop-signal handlers", e);
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            let (received, first_at, stopping) =
                (Arc::clone(&received), Arc::clone(&first_at), stopping.clone());
            let action = move || {
                let now = monotonic_ns();
                match received.compare_exchange(0, sig as usize, Ordering::SeqCst, Ordering::SeqCst) {
                    Ok(_) => {
                        first_at.store(now, Ordering::SeqCst);
                        stopping.cancel();
                    }
                    Err(first) => {
                        let since = now.saturating_sub(first_at.load(Ordering::SeqCst));
                        if exits_at_once(sig, first, since) {
                            // SAFETY: _exit is async-signal-safe and ends the process at once.
                            unsafe { libc::_exit(128 + sig) };
                        }
                    }
                }
            };
            // SAFETY: the action only does atomic operations, clock_gettime and _exit (async-signal-safe).
            unsafe { signal_hook::low_level::register(sig, action) }.map_err(os)?;
        }
        // SIGUSR1: the user's resume after their own input paused the session (FR-SAFE-002).
        let resumes = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&resumes);
        // SAFETY: the action is one atomic increment (async-signal-safe).
        unsafe {
            signal_hook::low_level::register(SIGUSR1, move || {
                counter.fetch_add(1, Ordering::SeqCst);
            })
        }
        .map_err(os)?;
        Ok(StopSignals {
            received,
            stopping,
            resumes,
        })
    }

    /// How many resume requests (SIGUSR1) have come so far.
    pub fn resume_requests(&self) -> usize {
        self.resumes.load(Ordering::SeqCst)
    }

    /// Cancelled at the first stop signal: what start-up steps that take seconds (a model host loading,
    /// the camera's calibration) watch, so that a signal at any moment ends the run promptly.
    pub fn token(&self) -> CancelToken {
        self.stopping.clone()
    }

    /// The first stop signal seen so far, if any.
    pub fn received(&self) -> Option<StopSignal> {
        match self.received.load(Ordering::SeqCst) {
            0 => None,
            n => Some(StopSignal(n as i32)),
        }
    }
}

/// A received stop signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopSignal(pub i32);

impl StopSignal {
    pub fn name(self) -> &'static str {
        match self.0 {
            SIGINT => "SIGINT",
            SIGTERM => "SIGTERM",
            SIGHUP => "SIGHUP",
            _ => "a stop signal",
        }
    }

    /// The documented exit code after a clean stop by this signal: 128 + its number (130, 143, 129).
    pub fn exit_code(self) -> i32 {
        128 + self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The exit code and the name of each stop signal
    #[test]
    fn stop_signals_name_themselves_and_their_exit_codes() {
        assert_eq!(StopSignal(SIGINT).exit_code(), 130);
        assert_eq!(StopSignal(SIGTERM).exit_code(), 143);
        assert_eq!(StopSignal(SIGHUP).exit_code(), 129);
        assert_eq!(StopSignal(SIGHUP).name(), "SIGHUP");
    }

    #[test]
    fn only_a_persons_second_request_exits_at_once() {
        // FR-SAFE-003: the first signal is a clean stop; a second Ctrl+C exits at once
        let (int, term, hup) = (SIGINT as usize, SIGTERM as usize, SIGHUP as usize);
        assert!(!exits_at_once(SIGINT, 0, 0), "the first is a clean stop");
        assert!(!exits_at_once(SIGTERM, 0, 0));
        assert!(exits_at_once(SIGINT, int, 0), "a second Ctrl+C");
        assert!(
            exits_at_once(SIGINT, term, 5_000_000),
            "Ctrl+C after a supervisor's stop"
        );
        // timeout(1): SIGTERM to the process, then to its group, microseconds apart.
        assert!(!exits_at_once(SIGTERM, term, 40_000), "the same SIGTERM twice");
        assert!(
            exits_at_once(SIGTERM, term, 1_500_000_000),
            "asked again after the first had time"
        );
        assert!(
            !exits_at_once(SIGHUP, hup, 10_000_000_000),
            "a hangup never exits at once"
        );
        assert!(!exits_at_once(SIGHUP, int, 10_000_000_000));
    }
}
