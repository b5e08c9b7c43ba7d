//! IO edge: the guardian process and the shared-memory layout it reads (held set, heartbeat, halt flag).
//!
//! The guardian is a separate process with its own X connection (FR-SAFE-001/003). It releases everything
//! held when the core dies (learned at once through a pidfd and the EOF of a pipe), when the heartbeat goes
//! stale (a hung or stopped core), and when the user presses the panic chord — seen through a passive grab
//! and an XInput2 raw-key watch, which still fires while a game holds an active keyboard grab. Releases go
//! through the single input module (`gamepilot_x11::input`, FR-ACT-008).
//!
//! It survives what stops the core: the core starts it in a session and process group of its
//! own (`setsid` before exec), so Ctrl+C, Ctrl+Z, a hang-up or `kill -- -PGID` aimed at the core's group do
//! not reach it; [`GuardianSignals`] ignores SIGINT, SIGHUP, SIGTSTP, SIGUSR1, SIGTTIN and SIGTTOU should one be sent
//! to it directly, and turns SIGTERM into "release everything, then exit". The stale-heartbeat backstop keeps
//! working after a halt, so a core that stalls right after a panic release cannot leave a key down.

pub mod shm;

pub use shm::{monotonic_us, HaltCause, SharedState};

use gamepilot_core::{Chord, Keysym};
use gamepilot_x11::input::XTestInput;
use gamepilot_x11::userinput::{RawInputWatch, RawKind, Watch};
use gamepilot_x11::{X11Error, X11};
use std::collections::BTreeSet;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{ConnectionExt as _, GrabMode, ModMask};
use x11rb::protocol::Event;

/// The guardian crate's one error enum.
#[derive(Debug, thiserror::Error)]
pub enum GuardianError {
    #[error("guardian shared memory: {0}")]
    Shm(String),
    #[error("guardian X11: {0}")]
    X11(#[from] X11Error),
    #[error("guardian: {0}")]
    Os(String),
}

/// How the guardian is configured (by the core, from the user's configuration only: INV-SAFE-001).
#[derive(Debug, Clone)]
pub struct GuardianOptions {
    pub display: Option<String>,
    pub core_pid: u32,
    pub panic: Chord,
    /// Heartbeat age after which the core counts as hung (decisions.md: 250 ms).
    pub stale_after: Duration,
    /// A descriptor whose EOF means the core is gone (the guardian's stdin pipe), if any.
    pub death_pipe: Option<RawFd>,
}

/// Why the guardian loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardianExit {
    /// The core is gone (pidfd, pipe EOF or a failed liveness check); everything was released.
    CoreDied,
    /// The guardian was sent SIGTERM; it released everything and set the halt flag before exiting.
    Terminated,
}

impl GuardianExit {
    /// The process exit status of `gamepilot guardian` for this ending: 0 when the core died, 143
    /// (128 + SIGTERM, the shell's convention) when it was terminated.
    pub fn code(self) -> i32 {
        match self {
            GuardianExit::CoreDied => 0,
            GuardianExit::Terminated => 128 + libc::SIGTERM,
        }
    }
}

/// The guardian's signal dispositions (installed through `signal-hook`, never a hand-rolled handler).
///
/// - SIGTERM sets a flag: the loop releases everything, sets the halt flag and exits
///   ([`GuardianExit::Terminated`]).
/// - SIGINT, SIGHUP, SIGTSTP and SIGUSR1 get a handler that only counts them, which replaces their default
///   action (terminate, or stop): a Ctrl+C, a closed terminal, a Ctrl+Z or the user's resume
///   (`pkill -USR1 -x gamepilot` reaches both processes) meant for the core never stops the guardian.
/// - SIGTTIN and SIGTTOU are set to "ignore" (`SIG_IGN`, not a handler: with a handler the kernel restarts
///   a background write to the terminal and sends the signal again, forever), so output to a terminal the
///   guardian no longer controls never stops it.
///
/// SIGKILL and SIGSTOP cannot be caught; the core notices a dead guardian (its child exits) and a stopped
/// one through the same check, and disarms.
#[derive(Debug, Clone)]
pub struct GuardianSignals {
    term: Arc<AtomicBool>,
    ignored: Arc<AtomicUsize>,
}

impl GuardianSignals {
    /// The signals ignored by a counting handler.
    pub const IGNORED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGHUP, libc::SIGTSTP, libc::SIGUSR1];
    /// The signals set to `SIG_IGN`.
    pub const TTY: [libc::c_int; 2] = [libc::SIGTTIN, libc::SIGTTOU];

    /// Install the dispositions for this process.
    pub fn install() -> Result<GuardianSignals, GuardianError> {
        let term = Arc::new(AtomicBool::new(false));
        let ignored = Arc::new(AtomicUsize::new(0));
        signal_hook::flag::register(libc::SIGTERM, term.clone())
            .map_err(|e| GuardianError::Os(format!("SIGTERM handler: {e}")))?;
        for sig in Self::IGNORED {
            let n = ignored.clone();
            // SAFETY: the action only does an atomic increment, which is async-signal-safe.
            unsafe {
                signal_hook::low_level::register(sig, move || {
                    n.fetch_add(1, Ordering::SeqCst);
                })
            }
            .map_err(|e| GuardianError::Os(format!("handler for signal {sig}: {e}")))?;
        }
        for sig in Self::TTY {
            // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code at all.
            if unsafe { libc::signal(sig, libc::SIG_IGN) } == libc::SIG_ERR {
                return Err(GuardianError::Os(format!(
                    "ignoring signal {sig}: {}",
                    std::io::Error::last_os_error()
                )));
            }
        }
        Ok(GuardianSignals { term, ignored })
    }

    /// True once SIGTERM arrived.
    pub fn terminate_requested(&self) -> bool {
        self.term.load(Ordering::SeqCst)
    }

    /// How many SIGINT/SIGHUP/SIGTSTP were received and ignored.
    pub fn ignored_count(&self) -> usize {
        self.ignored.load(Ordering::SeqCst)
    }
}

/// Put the calling process in a new session (and so a new process group) unless it already leads one.
/// The core does this in the guardian child before exec; the guardian calls it again at start-up so that a
/// guardian started some other way is detached too. Returns the session id.
pub fn detach_session() -> Result<u32, GuardianError> {
    // SAFETY: getsid/getpid/setsid take no pointers.
    unsafe {
        let me = libc::getpid();
        if libc::getsid(0) == me {
            return Ok(me as u32);
        }
        let sid = libc::setsid();
        if sid < 0 {
            return Err(GuardianError::Os(format!(
                "setsid: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(sid as u32)
    }
}

/// The nice value the guardian asks for: ahead of the game and the core, so that a loaded machine never
/// leaves it unscheduled past the core's heartbeat bound (the core disarms when the guardian's own
/// heartbeat goes stale).
pub const GUARDIAN_NICE: i32 = -5;

/// Make the calling process the guardian process: its own session ([`detach_session`]), and scheduled
/// ahead of the game and the core where the system allows it ([`raise_priority`]). Returns the session id.
pub fn enter_guardian_process() -> Result<u32, GuardianError> {
    let sid = detach_session()?;
    raise_priority();
    Ok(sid)
}

/// Raise the calling process's scheduling priority to [`GUARDIAN_NICE`] where the system allows it (root
/// or CAP_SYS_NICE); elsewhere it keeps its priority. Returns whether it was raised.
pub fn raise_priority() -> bool {
    // SAFETY: setpriority takes no pointers; `0` is the calling process.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, GUARDIAN_NICE) == 0 }
}

/// Process group and session of `pid` (fields 5 and 6 of `/proc/PID/stat`), and its state letter.
pub fn process_group_and_session(pid: u32) -> Option<(u32, u32, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: parse after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let _ppid = f.next()?;
    let pgrp = f.next()?.parse().ok()?;
    let session = f.next()?.parse().ok()?;
    Some((pgrp, session, state))
}

/// A signal the core, tests and benches send to a process they started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Stop,
    Cont,
    Kill,
    Term,
}

/// Send `sig` to `pid`; false when the process does not exist.
pub fn send_signal(pid: u32, sig: Signal) -> bool {
    let s = match sig {
        Signal::Stop => libc::SIGSTOP,
        Signal::Cont => libc::SIGCONT,
        Signal::Kill => libc::SIGKILL,
        Signal::Term => libc::SIGTERM,
    };
    // SAFETY: kill(2) with a pid and a valid signal number.
    unsafe { libc::kill(pid as libc::pid_t, s) == 0 }
}

fn pidfd_open(pid: u32) -> Option<RawFd> {
    // SAFETY: pidfd_open(2) takes a pid and flags; returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    (fd >= 0).then_some(fd as RawFd)
}

fn process_alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

/// The keycodes that satisfy each key of the chord (both sides for modifiers).
fn chord_codes(input: &XTestInput, chord: &Chord) -> Vec<Vec<u8>> {
    chord
        .0
        .iter()
        .map(|k| {
            let mut alts = vec![*k];
            let other = match k.0 {
                0xffe1 => Some(0xffe2),
                0xffe3 => Some(0xffe4),
                0xffe9 => Some(0xffea),
                0xffe7 => Some(0xffe8),
                0xffeb => Some(0xffec),
                _ => None,
            };
            alts.extend(other.map(Keysym));
            alts.iter()
                .filter_map(|s| input.locate(*s).ok().map(|l| l.keycode))
                .collect()
        })
        .collect()
}

fn mod_mask(k: Keysym) -> Option<ModMask> {
    match k.0 {
        0xffe1 | 0xffe2 => Some(ModMask::SHIFT),
        0xffe3 | 0xffe4 => Some(ModMask::CONTROL),
        0xffe9 | 0xffea => Some(ModMask::M1),
        0xffeb | 0xffec => Some(ModMask::M4),
        _ => None,
    }
}

/// The running guardian.
pub struct Guardian {
    opts: GuardianOptions,
    shm: SharedState,
    x11: X11,
    input: XTestInput,
    watch: RawInputWatch,
    chord: Vec<Vec<u8>>,
    down: BTreeSet<u8>,
    pidfd: Option<RawFd>,
    stale_released: bool,
    grab_key: Option<u8>,
    signals: Option<GuardianSignals>,
    ignored_seen: usize,
}

impl Guardian {
    /// Connect, grab the panic chord, start the raw-key watch and mark the page ready.
    pub fn start(opts: GuardianOptions, shm: SharedState) -> Result<Guardian, GuardianError> {
        let x11 = X11::connect(opts.display.as_deref())?;
        let input = XTestInput::new(&x11)?;
        let watch = RawInputWatch::connect(opts.display.as_deref(), Watch::Keys)?;
        let chord = chord_codes(&input, &opts.panic);
        if chord.iter().any(|alts| alts.is_empty()) {
            return Err(GuardianError::Os(format!(
                "the panic chord {} has a key this keyboard lacks",
                opts.panic
            )));
        }
        // Passive grab of the chord (so the game does not see it), in every lock/numlock combination.
        let mut mods = ModMask::from(0u16);
        let mut grab_key = None;
        for k in &opts.panic.0 {
            match mod_mask(*k) {
                Some(m) => mods |= m,
                None => grab_key = input.locate(*k).ok().map(|l| l.keycode),
            }
        }
        if let Some(code) = grab_key {
            for extra in [
                0u16,
                u16::from(ModMask::LOCK),
                u16::from(ModMask::M2),
                u16::from(ModMask::LOCK | ModMask::M2),
            ] {
                let m = ModMask::from(u16::from(mods) | extra);
                let _ = x11
                    .conn
                    .grab_key(false, x11.root, m, code, GrabMode::ASYNC, GrabMode::ASYNC);
            }
            x11.flush()?;
        }
        let pidfd = pidfd_open(opts.core_pid);
        shm.guardian_beat(monotonic_us());
        shm.set_guardian_ready();
        Ok(Guardian {
            opts,
            shm,
            x11,
            input,
            watch,
            chord,
            down: BTreeSet::new(),
            pidfd,
            stale_released: false,
            grab_key,
            signals: None,
            ignored_seen: 0,
        })
    }

    /// Let the loop act on the signals `signals` watches (SIGTERM: release and exit).
    pub fn with_signals(mut self, signals: GuardianSignals) -> Guardian {
        self.signals = Some(signals);
        self
    }

    pub fn shm(&self) -> &SharedState {
        &self.shm
    }

    /// Release everything the core published as held, then whatever else the server holds; record it.
    pub fn release_all(&mut self, cause: HaltCause) -> Result<usize, GuardianError> {
        let t0 = monotonic_us();
        let (keys, buttons) = self.shm.read_held();
        let keys: Vec<Keysym> = keys.into_iter().map(Keysym).collect();
        let n = self.input.release_all(&self.x11, &keys, &buttons)?;
        let t1 = monotonic_us();
        // The first cause stays on the page (a stale release after a panic is still a panic halt); the
        // panic chord always sets its own.
        if cause != HaltCause::CoreDied && (cause == HaltCause::Panic || self.shm.halt().is_none()) {
            self.shm.set_halt(cause);
        }
        self.shm.record_release(cause, t1);
        eprintln!(
            "guardian: {cause:?}: released {n} input(s) ({} published) in {} us",
            keys.len() + buttons.len(),
            t1.saturating_sub(t0)
        );
        Ok(n)
    }

    fn chord_down(&self) -> bool {
        self.chord
            .iter()
            .all(|alts| alts.iter().any(|c| self.down.contains(c)))
    }

    /// Handle queued X events; true when the panic chord fired.
    fn drain_events(&mut self) -> Result<bool, GuardianError> {
        let mut panic = false;
        for ev in self.watch.poll()? {
            let Ok(code) = u8::try_from(ev.detail) else {
                continue;
            };
            match ev.kind {
                RawKind::KeyPress => {
                    self.down.insert(code);
                    if self.chord_down() {
                        panic = true;
                    }
                }
                RawKind::KeyRelease => {
                    self.down.remove(&code);
                }
                _ => {}
            }
        }
        while let Some(ev) = self.x11.conn.poll_for_event().map_err(X11Error::from)? {
            if let Event::KeyPress(k) = ev {
                if Some(k.detail) == self.grab_key {
                    panic = true;
                }
            }
        }
        Ok(panic)
    }

    /// One pass: wait up to `wait` for events, then act. Returns `Some` when the guardian should exit.
    pub fn step(&mut self, wait: Duration) -> Result<Option<GuardianExit>, GuardianError> {
        self.shm.guardian_beat(monotonic_us());
        if let Some(exit) = self.check_signals()? {
            return Ok(Some(exit));
        }
        if self.drain_events()? {
            self.release_all(HaltCause::Panic)?;
        }
        let mut fds = vec![
            libc::pollfd {
                fd: self.watch.fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: std::os::fd::AsRawFd::as_raw_fd(self.x11.conn.stream()),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        if let Some(p) = self.pidfd {
            fds.push(libc::pollfd {
                fd: p,
                events: libc::POLLIN,
                revents: 0,
            });
        }
        if let Some(p) = self.opts.death_pipe {
            fds.push(libc::pollfd {
                fd: p,
                events: libc::POLLIN,
                revents: 0,
            });
        }
        // SAFETY: fds is a valid array of pollfd of the given length.
        let r = unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                wait.as_millis() as i32,
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(GuardianError::Os(format!("poll: {e}")));
            }
        }
        let mut died = false;
        for f in &fds[2..] {
            if f.revents != 0 {
                if Some(f.fd) == self.opts.death_pipe {
                    // Readable: EOF (core gone) or stray bytes; read to tell them apart.
                    let mut buf = [0u8; 64];
                    // SAFETY: reading into a local buffer from a descriptor we were given.
                    let n = unsafe { libc::read(f.fd, buf.as_mut_ptr().cast(), buf.len()) };
                    if n <= 0 {
                        died = true;
                    }
                } else {
                    died = true;
                }
            }
        }
        if !died && self.pidfd.is_none() && !process_alive(self.opts.core_pid) {
            died = true;
        }
        if died {
            self.release_all(HaltCause::CoreDied)?;
            return Ok(Some(GuardianExit::CoreDied));
        }
        if let Some(exit) = self.check_signals()? {
            return Ok(Some(exit));
        }
        if self.drain_events()? {
            self.release_all(HaltCause::Panic)?;
        }
        // The heartbeat backstop: a hung or stopped core. It runs whether or not the page is halted: a
        // core that pressed a key after a halt (it had not read the flag yet) and then stalled must still
        // be released.
        if self.shm.armed() {
            let age = monotonic_us().saturating_sub(self.shm.heartbeat_us());
            if stale_now(age, self.opts.stale_after) {
                if !self.stale_released {
                    self.release_all(HaltCause::StaleHeartbeat)?;
                }
                self.stale_released = true;
            } else {
                self.stale_released = false;
            }
        }
        Ok(None)
    }

    /// SIGTERM: release everything, set the halt flag, exit. Ignored signals are only logged.
    fn check_signals(&mut self) -> Result<Option<GuardianExit>, GuardianError> {
        let Some(sig) = self.signals.clone() else {
            return Ok(None);
        };
        let n = sig.ignored_count();
        if n != self.ignored_seen {
            eprintln!(
                "guardian: ignored {} SIGINT/SIGHUP/SIGTSTP/SIGUSR1 (they are the core's to act on)",
                n - self.ignored_seen
            );
            self.ignored_seen = n;
        }
        if sig.terminate_requested() {
            self.release_all(HaltCause::GuardianStopped)?;
            return Ok(Some(GuardianExit::Terminated));
        }
        Ok(None)
    }

    /// Run until the core is gone.
    pub fn run(&mut self) -> Result<GuardianExit, GuardianError> {
        loop {
            if let Some(exit) = self.step(Duration::from_millis(5))? {
                return Ok(exit);
            }
        }
    }
}

/// True when a heartbeat `age_us` old means the core is hung.
fn stale_now(age_us: u64, stale_after: Duration) -> bool {
    age_us > stale_after.as_micros() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guardian_is_scheduled_ahead_where_the_system_allows_it() {
        // FR-SAFE-001, FR-ACT-001: the releaser must run on a loaded machine. The raise happens in a
        // forked child (only async-signal-safe calls there), so the test runner keeps its priority.
        let mut fds = [0i32; 2];
        // SAFETY: pipe writes two descriptors into the array; fork's child only makes raw syscalls and
        // _exits; the parent reads the child's two numbers and reaps it.
        let (raised, nice) = unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            let pid = libc::fork();
            assert!(pid >= 0);
            if pid == 0 {
                let raised = i32::from(raise_priority());
                let nice = libc::getpriority(libc::PRIO_PROCESS, 0);
                let out = [raised, nice];
                libc::write(fds[1], out.as_ptr().cast(), std::mem::size_of_val(&out));
                libc::_exit(0);
            }
            libc::close(fds[1]);
            let mut got = [0i32; 2];
            let n = libc::read(fds[0], got.as_mut_ptr().cast(), std::mem::size_of_val(&got));
            libc::close(fds[0]);
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            assert_eq!(n as usize, std::mem::size_of_val(&got));
            (got[0] == 1, got[1])
        };
        // SAFETY: geteuid takes no pointers.
        let root = unsafe { libc::geteuid() } == 0;
        assert!(raised || !root, "root may always raise: nice {nice}");
        if raised {
            assert_eq!(nice, GUARDIAN_NICE);
        }
    }

    #[test]
    fn own_process_group_and_session_are_read_from_proc() {
        // Tests prove the guardian's own session from /proc/PID/stat
        let me = std::process::id();
        let (pgrp, sid, state) = process_group_and_session(me).unwrap();
        // SAFETY: getpgrp/getsid take no pointers.
        let (p, s) = unsafe { (libc::getpgrp() as u32, libc::getsid(0) as u32) };
        assert_eq!((pgrp, sid), (p, s));
        assert!("RS".contains(state), "{state}");
        assert_eq!(process_group_and_session(u32::MAX), None);
    }

    #[test]
    fn exit_codes_are_distinct() {
        assert_eq!(GuardianExit::CoreDied.code(), 0);
        assert_eq!(GuardianExit::Terminated.code(), 143);
        assert!(stale_now(250_001, Duration::from_millis(250)));
        assert!(!stale_now(250_000, Duration::from_millis(250)));
    }

    #[test]
    fn modifier_masks() {
        assert_eq!(mod_mask(Keysym(0xffe3)), Some(ModMask::CONTROL));
        assert_eq!(mod_mask(Keysym(0xffea)), Some(ModMask::M1));
        assert_eq!(mod_mask(Keysym(0xff13)), None);
    }

    #[test]
    fn pidfd_of_self_and_liveness() {
        // FR-SAFE-003: death is learned through a pidfd where the kernel has one
        let me = std::process::id();
        assert!(process_alive(me));
        if let Some(fd) = pidfd_open(me) {
            // SAFETY: closing the descriptor we just opened.
            unsafe { libc::close(fd) };
        }
    }
}
