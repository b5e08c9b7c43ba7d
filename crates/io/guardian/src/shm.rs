//! The shared-memory page between the core and the guardian (FR-SAFE-003): the held set (published every
//! tick, step 5 of ADR-0035), a heartbeat, the armed flag and the halt flag. Every field is an atomic at a
//! fixed, aligned offset; the held set is written under a sequence counter so readers never see a torn set.

use crate::GuardianError;
use memmap2::MmapMut;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

pub const SIZE: usize = 4096;
const MAGIC: u32 = 0x4750_4744; // "GPGD"
const VERSION: u32 = 2;
pub const MAX_KEYS: usize = 64;
pub const MAX_BUTTONS: usize = 16;

const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = 4;
const OFF_CORE_PID: usize = 8;
const OFF_READY: usize = 12;
const OFF_ARMED: usize = 16;
const OFF_HALT: usize = 20;
const OFF_HEARTBEAT: usize = 24;
const OFF_SEQ: usize = 32;
const OFF_NKEYS: usize = 40;
const OFF_NBUTTONS: usize = 44;
const OFF_KEYS: usize = 48;
const OFF_BUTTONS: usize = OFF_KEYS + 4 * MAX_KEYS;
const OFF_RELEASES: usize = OFF_BUTTONS + 4 * MAX_BUTTONS;
const OFF_LAST_REASON: usize = OFF_RELEASES + 4;
const OFF_LAST_RELEASE_US: usize = OFF_LAST_REASON + 4;
const OFF_GUARDIAN_BEAT: usize = OFF_LAST_RELEASE_US + 8;

pub use gamepilot_core::HaltCause;

/// The halt flag's value for `cause` (0 is "not halted").
fn halt_code(cause: HaltCause) -> u32 {
    match cause {
        HaltCause::Panic => 1,
        HaltCause::StaleHeartbeat => 2,
        HaltCause::CoreDied => 3,
        HaltCause::GuardianStopped => 4,
        HaltCause::BudgetSpent => 5,
        HaltCause::Unknown => u32::MAX,
    }
}

/// The cause a halt flag's value names; a set flag of a code this build does not know is still a halt.
fn halt_cause(code: u32) -> Option<HaltCause> {
    match code {
        0 => None,
        1 => Some(HaltCause::Panic),
        2 => Some(HaltCause::StaleHeartbeat),
        3 => Some(HaltCause::CoreDied),
        4 => Some(HaltCause::GuardianStopped),
        5 => Some(HaltCause::BudgetSpent),
        _ => Some(HaltCause::Unknown),
    }
}

/// CLOCK_MONOTONIC in microseconds: the heartbeat's clock, shared by both processes.
pub fn monotonic_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// The mapped page.
pub struct SharedState {
    map: MmapMut,
    _file: File,
}

impl SharedState {
    /// A new anonymous page (memfd) that a child process inherits; returns the state and the descriptor
    /// number to pass to the guardian.
    pub fn create_memfd(core_pid: u32) -> Result<(SharedState, RawFd), GuardianError> {
        // SAFETY: memfd_create with a valid NUL-terminated name; flags 0 so the guardian child inherits it.
        let fd = unsafe { libc::memfd_create(c"gamepilot-guardian".as_ptr(), 0) };
        if fd < 0 {
            return Err(GuardianError::Shm(format!(
                "memfd_create: {}",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: fd was just created and is owned here.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let raw = file.as_raw_fd();
        let s = SharedState::init(file, core_pid)?;
        Ok((s, raw))
    }

    /// A new page backed by a file at `path` (created or truncated).
    pub fn create_file(path: &Path, core_pid: u32) -> Result<SharedState, GuardianError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| GuardianError::Shm(format!("{}: {e}", path.display())))?;
        SharedState::init(file, core_pid)
    }

    fn init(file: File, core_pid: u32) -> Result<SharedState, GuardianError> {
        file.set_len(SIZE as u64)
            .map_err(|e| GuardianError::Shm(format!("resize: {e}")))?;
        let s = SharedState::map(file)?;
        s.u32(OFF_VERSION).store(VERSION, Ordering::SeqCst);
        s.u32(OFF_CORE_PID).store(core_pid, Ordering::SeqCst);
        s.u32(OFF_MAGIC).store(MAGIC, Ordering::SeqCst);
        Ok(s)
    }

    /// Open a page by inherited descriptor (the guardian side).
    pub fn open_fd(fd: RawFd) -> Result<SharedState, GuardianError> {
        // SAFETY: the caller passes a descriptor inherited from the core for this purpose; we take ownership.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        SharedState::open_file(file)
    }

    /// Open a page by path (the guardian side).
    pub fn open_path(path: &Path) -> Result<SharedState, GuardianError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| GuardianError::Shm(format!("{}: {e}", path.display())))?;
        SharedState::open_file(file)
    }

    fn open_file(file: File) -> Result<SharedState, GuardianError> {
        let len = file
            .metadata()
            .map_err(|e| GuardianError::Shm(e.to_string()))?
            .len();
        if len < SIZE as u64 {
            return Err(GuardianError::Shm(format!(
                "shared page is {len} bytes, expected {SIZE}"
            )));
        }
        let s = SharedState::map(file)?;
        if s.u32(OFF_MAGIC).load(Ordering::SeqCst) != MAGIC
            || s.u32(OFF_VERSION).load(Ordering::SeqCst) != VERSION
        {
            return Err(GuardianError::Shm(
                "not a gamepilot guardian page (bad magic or version)".into(),
            ));
        }
        Ok(s)
    }

    fn map(file: File) -> Result<SharedState, GuardianError> {
        // SAFETY: the file is a private memfd or a file we created for this purpose; both processes access it
        // only through atomics at aligned offsets, so concurrent modification is well-defined.
        let map = unsafe { MmapMut::map_mut(&file) }.map_err(|e| GuardianError::Shm(format!("mmap: {e}")))?;
        if map.len() < SIZE {
            return Err(GuardianError::Shm("mapping too small".into()));
        }
        Ok(SharedState { map, _file: file })
    }

    fn u32(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off.is_multiple_of(4) && off + 4 <= SIZE);
        // SAFETY: off is 4-aligned within the page-aligned, SIZE-long mapping that lives as long as self;
        // AtomicU32 has the same layout as u32.
        unsafe { &*(self.map.as_ptr().add(off) as *const AtomicU32) }
    }

    fn u64(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off.is_multiple_of(8) && off + 8 <= SIZE);
        // SAFETY: as for u32, with 8-byte alignment.
        unsafe { &*(self.map.as_ptr().add(off) as *const AtomicU64) }
    }

    pub fn core_pid(&self) -> u32 {
        self.u32(OFF_CORE_PID).load(Ordering::SeqCst)
    }

    /// Publish the held set (keysyms and buttons) and beat the heart.
    pub fn publish(&self, keys: &[u32], buttons: &[u8], now_us: u64) {
        let seq = self.u64(OFF_SEQ);
        seq.fetch_add(1, Ordering::SeqCst); // odd: writing
        let nk = keys.len().min(MAX_KEYS);
        let nb = buttons.len().min(MAX_BUTTONS);
        for (i, k) in keys.iter().take(nk).enumerate() {
            self.u32(OFF_KEYS + 4 * i).store(*k, Ordering::SeqCst);
        }
        for (i, b) in buttons.iter().take(nb).enumerate() {
            self.u32(OFF_BUTTONS + 4 * i).store(*b as u32, Ordering::SeqCst);
        }
        self.u32(OFF_NKEYS).store(nk as u32, Ordering::SeqCst);
        self.u32(OFF_NBUTTONS).store(nb as u32, Ordering::SeqCst);
        seq.fetch_add(1, Ordering::SeqCst); // even: stable
        self.heartbeat(now_us);
    }

    pub fn heartbeat(&self, now_us: u64) {
        self.u64(OFF_HEARTBEAT).store(now_us, Ordering::SeqCst);
    }

    pub fn heartbeat_us(&self) -> u64 {
        self.u64(OFF_HEARTBEAT).load(Ordering::SeqCst)
    }

    /// The guardian's own heartbeat, written every pass of its loop: a guardian that is stopped or hung
    /// still exists as a process, and only this says it no longer watches.
    pub fn guardian_beat(&self, now_us: u64) {
        self.u64(OFF_GUARDIAN_BEAT).store(now_us, Ordering::SeqCst);
    }

    pub fn guardian_beat_us(&self) -> u64 {
        self.u64(OFF_GUARDIAN_BEAT).load(Ordering::SeqCst)
    }

    /// The held set as last published (keysyms, buttons). Retries while a write is in progress.
    pub fn read_held(&self) -> (Vec<u32>, Vec<u8>) {
        let seq = self.u64(OFF_SEQ);
        for _ in 0..1000 {
            let s0 = seq.load(Ordering::SeqCst);
            if s0 % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let nk = (self.u32(OFF_NKEYS).load(Ordering::SeqCst) as usize).min(MAX_KEYS);
            let nb = (self.u32(OFF_NBUTTONS).load(Ordering::SeqCst) as usize).min(MAX_BUTTONS);
            let keys = (0..nk)
                .map(|i| self.u32(OFF_KEYS + 4 * i).load(Ordering::SeqCst))
                .collect();
            let buttons = (0..nb)
                .map(|i| self.u32(OFF_BUTTONS + 4 * i).load(Ordering::SeqCst) as u8)
                .collect();
            if seq.load(Ordering::SeqCst) == s0 {
                return (keys, buttons);
            }
        }
        // A writer stopped mid-write (SIGSTOP): return the full arrays, which over-approximate the held set.
        let keys = (0..MAX_KEYS)
            .map(|i| self.u32(OFF_KEYS + 4 * i).load(Ordering::SeqCst))
            .filter(|k| *k != 0);
        let buttons = (0..MAX_BUTTONS)
            .map(|i| self.u32(OFF_BUTTONS + 4 * i).load(Ordering::SeqCst) as u8)
            .filter(|b| *b != 0);
        (keys.collect(), buttons.collect())
    }

    pub fn set_armed(&self, armed: bool) {
        self.u32(OFF_ARMED).store(armed as u32, Ordering::SeqCst);
    }

    pub fn armed(&self) -> bool {
        self.u32(OFF_ARMED).load(Ordering::SeqCst) != 0
    }

    pub fn set_guardian_ready(&self) {
        self.u32(OFF_READY).store(1, Ordering::SeqCst);
    }

    pub fn guardian_ready(&self) -> bool {
        self.u32(OFF_READY).load(Ordering::SeqCst) != 0
    }

    /// Set the halt flag (the core reads it first thing every tick).
    pub fn set_halt(&self, cause: HaltCause) {
        self.u32(OFF_HALT).store(halt_code(cause), Ordering::SeqCst);
    }

    pub fn halt(&self) -> Option<HaltCause> {
        halt_cause(self.u32(OFF_HALT).load(Ordering::SeqCst))
    }

    /// Clear the halt flag (the user re-arms).
    pub fn clear_halt(&self) {
        self.u32(OFF_HALT).store(0, Ordering::SeqCst);
    }

    /// The guardian records each release it performed.
    pub fn record_release(&self, cause: HaltCause, at_us: u64) {
        self.u32(OFF_LAST_REASON)
            .store(halt_code(cause), Ordering::SeqCst);
        self.u64(OFF_LAST_RELEASE_US).store(at_us, Ordering::SeqCst);
        self.u32(OFF_RELEASES).fetch_add(1, Ordering::SeqCst);
    }

    /// How many releases the guardian has performed, the last one's cause and time.
    pub fn releases(&self) -> (u32, Option<HaltCause>, u64) {
        (
            self.u32(OFF_RELEASES).load(Ordering::SeqCst),
            halt_cause(self.u32(OFF_LAST_REASON).load(Ordering::SeqCst)),
            self.u64(OFF_LAST_RELEASE_US).load(Ordering::SeqCst),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_and_read_across_two_mappings() {
        // FR-SAFE-003: the held set and heartbeat cross the process boundary through the page
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("page");
        let core = SharedState::create_file(&p, 42).unwrap();
        let guardian = SharedState::open_path(&p).unwrap();
        assert_eq!(guardian.core_pid(), 42);
        core.publish(&[0x77, 0xffe3], &[1], 1234);
        assert_eq!(guardian.read_held(), (vec![0x77, 0xffe3], vec![1]));
        assert_eq!(guardian.heartbeat_us(), 1234);
        core.publish(&[], &[], 2000);
        assert_eq!(guardian.read_held(), (vec![], vec![]));
        assert_eq!(core.halt(), None);
        guardian.set_halt(HaltCause::StaleHeartbeat);
        assert_eq!(core.halt(), Some(HaltCause::StaleHeartbeat));
        core.clear_halt();
        assert_eq!(guardian.halt(), None);
        guardian.record_release(HaltCause::Panic, 99);
        assert_eq!(core.releases(), (1, Some(HaltCause::Panic), 99));
    }

    #[test]
    fn rejects_foreign_pages() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("junk");
        std::fs::write(&p, vec![0u8; SIZE]).unwrap();
        assert!(matches!(SharedState::open_path(&p), Err(GuardianError::Shm(_))));
        std::fs::write(&p, b"short").unwrap();
        assert!(SharedState::open_path(&p).is_err());
    }

    #[test]
    fn memfd_page_works() {
        let (s, fd) = SharedState::create_memfd(7).unwrap();
        assert!(fd >= 0);
        s.publish(&[1, 2, 3], &[], monotonic_us());
        assert_eq!(s.read_held().0, vec![1, 2, 3]);
        assert!(monotonic_us() >= s.heartbeat_us());
    }
}
