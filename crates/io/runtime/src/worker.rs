//! Threads that report their end (no thread dies silently): a worker runs under
//! `catch_unwind`, and whatever way it ends — finished, failed with an error, panicked — one
//! [`WorkerEnd`] reaches the loop, which stops the session with the worker's name and the reason.

use crate::RuntimeError;
use gamepilot_core::Worker;
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::SyncSender;
use std::thread::JoinHandle;

/// The bound of the loop's one inbox (nothing grows over an hour). The reflex never blocks on it: a full
/// inbox means the loop is hung, and the reflex then drops its reports (counted). Other threads wait.
pub const INBOX: usize = 4096;
/// Commands to the reflex (submit, watch, cancel, pause, subgoal).
pub const REFLEX_COMMANDS: usize = 256;
/// Tactical jobs waiting (the session runs one at a time).
pub const TACTICAL_JOBS: usize = 2;

/// Everything a thread tells the session's loop, on one channel: the loop blocks on it.
pub enum Inbox {
    /// A reflex report, already the session's input.
    Reflex(gamepilot_session::Input),
    /// The tactical thread's report (a perception, a model reply, a region) and what the recording keeps
    /// of it.
    Tactical(Box<crate::tactical::TacticalReport>),
    /// A deliberative pass's plan and what the recording keeps of it.
    Deliberation(Box<crate::deliberative::DeliberationResult>),
    /// A worker thread ended, how and why.
    Ended(WorkerEnd),
    /// A line for the recording from a helper whose outcome the session does not act on (the tactical
    /// host's warm-up).
    Note(String),
}

/// How a worker thread ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerOutcome {
    Finished,
    Failed(String),
    Panicked(String),
}

/// One worker's end, named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerEnd {
    pub worker: Worker,
    pub outcome: WorkerOutcome,
}

impl WorkerEnd {
    /// The reason in words, for the stop and the recording.
    pub fn detail(&self) -> String {
        match &self.outcome {
            WorkerOutcome::Finished => "it ended before the session did".into(),
            WorkerOutcome::Failed(e) => format!("it failed: {e}"),
            WorkerOutcome::Panicked(p) => format!("it panicked: {p}"),
        }
    }
}

/// A panic payload's message (`panic!` with a literal or a formatted string), else a placeholder.
pub fn panic_text(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".into()
    }
}

/// Run `f` to its end and report how it ended on `ends` (a closed `ends` is not an error: the loop has
/// gone and nobody is left to tell).
pub fn run_reporting<F>(worker: Worker, ends: &SyncSender<Inbox>, f: F)
where
    F: FnOnce() -> Result<(), RuntimeError>,
{
    let outcome = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => WorkerOutcome::Finished,
        Ok(Err(RuntimeError::Panicked(p))) => WorkerOutcome::Panicked(p),
        Ok(Err(e)) => WorkerOutcome::Failed(e.to_string()),
        Err(p) => WorkerOutcome::Panicked(panic_text(p.as_ref())),
    };
    let _ = ends.try_send(Inbox::Ended(WorkerEnd { worker, outcome }));
}

/// Spawn `f` on a thread named `worker` that reports its end on `ends`.
pub fn spawn_reporting<F>(
    worker: Worker,
    ends: SyncSender<Inbox>,
    f: F,
) -> Result<JoinHandle<()>, RuntimeError>
where
    F: FnOnce() -> Result<(), RuntimeError> + Send + 'static,
{
    std::thread::Builder::new()
        .name(worker.as_str().into())
        .spawn(move || run_reporting(worker, &ends, f))
        .map_err(|e| RuntimeError::io(format!("spawning the {worker} thread"), e))
}

/// Lower the calling thread's scheduling priority (nice 5): the tactical and deliberative threads run OCR,
/// segmentation and model I/O that may wait; the reflex thread must not wait behind them (FR-LOOP-002).
/// Best effort: a failure leaves the thread at the normal priority.
pub fn yield_cpu_to_reflex() {
    // SAFETY: plain syscalls on the calling thread's own id; no memory is shared with the kernel.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 5);
    }
}

/// How the reflex thread ended up scheduled by [`raise_reflex_priority`], in words for the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReflexScheduling {
    /// `SCHED_FIFO` at this real-time priority: it runs the moment its tick is due, ahead of every
    /// normal thread (the model hosts, OCR, the game).
    RealTime(i32),
    /// Not allowed real-time scheduling; a raised nice value instead.
    Nice(i32),
    /// Neither was allowed: the normal priority.
    Normal,
}

impl std::fmt::Display for ReflexScheduling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::RealTime(p) => write!(f, "real-time (SCHED_FIFO {p})"),
            Self::Nice(n) => write!(f, "nice {n} (real-time scheduling not allowed)"),
            Self::Normal => write!(
                f,
                "normal priority (neither real-time scheduling nor a raised nice allowed)"
            ),
        }
    }
}

/// The real-time priority the reflex asks for: low among real-time threads (the kernel's own run at 50
/// and above), above every normal one.
const REFLEX_FIFO_PRIORITY: i32 = 10;

/// Schedule the calling thread (the reflex) ahead of the model hosts, OCR and the game, so that its
/// 60 Hz tick is on time on a loaded machine (FR-LOOP-002, NFR reflex lateness): `SCHED_FIFO` where the
/// system allows it (root, `CAP_SYS_NICE` or an `RLIMIT_RTPRIO`), else nice -10, else unchanged. A tick
/// sleeps most of its period and does bounded work, so a real-time reflex cannot starve the machine.
/// Threads started by the caller afterwards inherit the policy: call it after the reflex's helpers start.
pub fn raise_reflex_priority() -> ReflexScheduling {
    let param = libc::sched_param {
        sched_priority: REFLEX_FIFO_PRIORITY,
    };
    // SAFETY: pthread_self names the calling thread; `param` outlives the call.
    if unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) } == 0 {
        return ReflexScheduling::RealTime(REFLEX_FIFO_PRIORITY);
    }
    // SAFETY: plain syscalls on the calling thread's own id.
    unsafe {
        let tid = libc::gettid();
        if libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, -10) == 0 {
            return ReflexScheduling::Nice(-10);
        }
    }
    ReflexScheduling::Normal
}

/// The test-only fault hook (the fault matrix of docs/reliability.md): `GAMEPILOT_FAULT=reflex-panic@N`
/// makes the reflex thread panic, and `reflex-block@N` block for good, at the first tick from its N-th on
/// at which the executor holds input. Only in builds with the `fault-injection` feature (the tests');
/// elsewhere, and with the variable unset, `None`. Read once at thread start: one comparison per tick.
#[cfg(feature = "fault-injection")]
pub fn fault_tick(name: &str) -> Option<u64> {
    let v = std::env::var("GAMEPILOT_FAULT").ok()?;
    let (what, at) = v.split_once('@')?;
    (what == name).then(|| at.parse().ok()).flatten()
}

/// A build without the `fault-injection` feature has no fault hooks: not even the variable's name is
/// in the binary.
#[cfg(not(feature = "fault-injection"))]
pub fn fault_tick(_name: &str) -> Option<u64> {
    None
}

/// Joins `thread` if it ends within `limit`; `None` when it is still running then (it is left to end with
/// the process: a stop must not wait on a thread that may never return).
pub fn join_within<T>(
    thread: std::thread::JoinHandle<T>,
    limit: std::time::Duration,
) -> Option<std::thread::Result<T>> {
    let deadline = std::time::Instant::now() + limit;
    while !thread.is_finished() {
        if std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Some(thread.join())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::sync_channel;

    #[test]
    fn a_join_is_bounded() {
        let quick = std::thread::spawn(|| 7);
        assert_eq!(
            join_within(quick, std::time::Duration::from_secs(5)).map(|r| r.ok()),
            Some(Some(7))
        );
        let (tx, rx) = sync_channel::<()>(1);
        let stuck = std::thread::spawn(move || rx.recv());
        assert!(join_within(stuck, std::time::Duration::from_millis(50)).is_none());
        drop(tx);
    }

    // Every way a worker ends is reported with its name
    #[test]
    fn a_worker_reports_finishing_failing_and_panicking() {
        let (tx, rx) = sync_channel(INBOX);
        run_reporting(Worker::Reflex, &tx, || Ok(()));
        run_reporting(Worker::Tactical, &tx, || {
            Err(RuntimeError::WorkerStart("no reader".into()))
        });
        run_reporting(Worker::Deliberative, &tx, || panic!("boom {}", 7));
        let h = spawn_reporting(Worker::Research, tx.clone(), || {
            Err(RuntimeError::Panicked("caught".into()))
        })
        .unwrap();
        h.join().unwrap();
        let ends: Vec<WorkerEnd> = rx
            .try_iter()
            .filter_map(|m| match m {
                Inbox::Ended(e) => Some(e),
                _ => None,
            })
            .collect();
        assert_eq!(
            ends.iter()
                .map(|e| (e.worker, e.outcome.clone()))
                .collect::<Vec<_>>(),
            vec![
                (Worker::Reflex, WorkerOutcome::Finished),
                (Worker::Tactical, WorkerOutcome::Failed("no reader".into())),
                (Worker::Deliberative, WorkerOutcome::Panicked("boom 7".into())),
                (Worker::Research, WorkerOutcome::Panicked("caught".into())),
            ]
        );
        assert_eq!(ends[2].detail(), "it panicked: boom 7");
    }
}
