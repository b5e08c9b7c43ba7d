//! IO edge: the guardian process and the shared-memory layout it reads (held set, heartbeat, halt flag).
//!
//! The guardian is a separate process with its own X connection (FR-SAFE-001/003). It releases everything
//! held when the core dies (learned at once through a pidfd and the EOF of a pipe), when the heartbeat goes
//! stale (a hung or stopped core), and when the user presses the panic chord — seen through a passive grab
//! and an XInput2 raw-key watch, which still fires while a game holds an active keyboard grab. Releases go
//! through the single input module (`gamepilot_x11::input`, FR-ACT-008).

pub mod shm;

pub use shm::{monotonic_us, HaltCause, SharedState};

use gamepilot_core::{Chord, Keysym};
use gamepilot_x11::input::XTestInput;
use gamepilot_x11::userinput::{RawInputWatch, RawKind, Watch};
use gamepilot_x11::{X11Error, X11};
use std::collections::BTreeSet;
use std::os::fd::RawFd;
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
    CoreDied,
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
        })
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
        if cause != HaltCause::CoreDied {
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
        if self.drain_events()? {
            self.release_all(HaltCause::Panic)?;
        }
        // The heartbeat backstop: a hung or stopped core.
        if self.shm.armed() {
            let age = monotonic_us().saturating_sub(self.shm.heartbeat_us());
            if age > self.opts.stale_after.as_micros() as u64 {
                if !self.stale_released && self.shm.halt().is_none() {
                    self.release_all(HaltCause::StaleHeartbeat)?;
                }
                self.stale_released = true;
            } else {
                self.stale_released = false;
            }
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

#[cfg(test)]
mod tests {
    use super::*;

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
