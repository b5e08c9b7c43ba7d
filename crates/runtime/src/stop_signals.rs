//! SIGINT, SIGTERM and SIGHUP as a clean stop of a running session (issue 14): the first one sets a flag
//! the loop reads every iteration (release everything, stop the model host, write the summary and
//! `session_end`, exit 128 + the signal's number); a second SIGINT or SIGTERM exits at once with that
//! code, and the guardian, which sees the core die, releases what was held. Handlers come from
//! `signal-hook`; nothing is done inside them but an atomic store (async-signal-safe).

use crate::RuntimeError;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The stop signals of a session, installed once per process.
#[derive(Clone)]
pub struct StopSignals {
    received: Arc<AtomicUsize>,
}

impl StopSignals {
    /// Install the handlers. A second SIGINT or SIGTERM (after the first of either) exits at once.
    pub fn install() -> Result<StopSignals, RuntimeError> {
        let received = Arc::new(AtomicUsize::new(0));
        let armed = Arc::new(AtomicBool::new(false));
        let os = |e: std::io::Error| RuntimeError::io("installing the stop-signal handlers", e);
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            if sig != SIGHUP {
                // Registered before the arming flag below: the first signal arms, the second exits.
                signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, Arc::clone(&armed))
                    .map_err(os)?;
                signal_hook::flag::register(sig, Arc::clone(&armed)).map_err(os)?;
            }
            signal_hook::flag::register_usize(sig, Arc::clone(&received), sig as usize).map_err(os)?;
        }
        Ok(StopSignals { received })
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

    // issue 14: the exit code and the name of each stop signal
    #[test]
    fn stop_signals_name_themselves_and_their_exit_codes() {
        assert_eq!(StopSignal(SIGINT).exit_code(), 130);
        assert_eq!(StopSignal(SIGTERM).exit_code(), 143);
        assert_eq!(StopSignal(SIGHUP).exit_code(), 129);
        assert_eq!(StopSignal(SIGHUP).name(), "SIGHUP");
    }
}
