//! Graphics-memory watch (FR-MODEL-004): NVML through `dlopen("libnvidia-ml.so.1")` where present, a
//! clean "no GPU" error otherwise; a scripted source for tests; and the watch that feeds samples to the
//! pure degrade ladder.

use crate::ladder::{DegradeCommand, DegradeLadder};
use crate::ModelError;
use gamepilot_core::MonoTime;
use std::ffi::{c_char, c_int, c_uint, c_void};

/// One memory sample of one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct GpuMemory {
    pub total_bytes: u64,
    pub used_bytes: u64,
    pub free_bytes: u64,
}

/// Anything that reports graphics memory.
pub trait MemorySource {
    fn sample(&mut self) -> Result<GpuMemory, ModelError>;
}

#[repr(C)]
#[derive(Default)]
struct NvmlMemory {
    total: u64,
    free: u64,
    used: u64,
}

type NvmlInit = unsafe extern "C" fn() -> c_int;
type NvmlShutdown = unsafe extern "C" fn() -> c_int;
type NvmlGetHandle = unsafe extern "C" fn(c_uint, *mut *mut c_void) -> c_int;
type NvmlGetMemory = unsafe extern "C" fn(*mut c_void, *mut NvmlMemory) -> c_int;
type NvmlGetName = unsafe extern "C" fn(*mut c_void, *mut c_char, c_uint) -> c_int;

/// NVML, loaded at run time. Dropping it shuts NVML down.
pub struct Nvml {
    // Field order: the function pointers are only valid while `lib` lives; `lib` is dropped last.
    device: *mut c_void,
    get_memory: NvmlGetMemory,
    shutdown: NvmlShutdown,
    name: String,
    _lib: libloading::Library,
}

impl std::fmt::Debug for Nvml {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvml").field("name", &self.name).finish()
    }
}

impl Nvml {
    /// Loads NVML and opens device `index`; [`ModelError::NoGpu`] when there is no driver or device.
    pub fn open(index: u32) -> Result<Nvml, ModelError> {
        // SAFETY: loading the NVIDIA management library runs its initialisers, which have no
        // preconditions; the symbols are resolved with their documented C signatures.
        let lib = unsafe { libloading::Library::new("libnvidia-ml.so.1") }
            .map_err(|e| ModelError::NoGpu(format!("libnvidia-ml.so.1 is not loadable ({e})")))?;
        // SAFETY: symbol types match nvml.h (nvmlReturn_t is a C int, nvmlDevice_t an opaque pointer).
        let (init, shutdown, get_handle, get_memory, get_name) = unsafe {
            let sym = |e: libloading::Error| ModelError::NoGpu(format!("NVML lacks a symbol: {e}"));
            (
                *lib.get::<NvmlInit>(b"nvmlInit_v2\0").map_err(sym)?,
                *lib.get::<NvmlShutdown>(b"nvmlShutdown\0").map_err(sym)?,
                *lib.get::<NvmlGetHandle>(b"nvmlDeviceGetHandleByIndex_v2\0")
                    .map_err(sym)?,
                *lib.get::<NvmlGetMemory>(b"nvmlDeviceGetMemoryInfo\0")
                    .map_err(sym)?,
                *lib.get::<NvmlGetName>(b"nvmlDeviceGetName\0").map_err(sym)?,
            )
        };
        // SAFETY: nvmlInit_v2 takes no arguments.
        let rc = unsafe { init() };
        if rc != 0 {
            return Err(ModelError::NoGpu(format!(
                "nvmlInit_v2 failed with NVML error {rc}"
            )));
        }
        let mut device: *mut c_void = std::ptr::null_mut();
        // SAFETY: `device` is a valid out-pointer for the handle.
        let rc = unsafe { get_handle(index, &mut device) };
        if rc != 0 || device.is_null() {
            // SAFETY: balanced with the successful init above.
            unsafe { shutdown() };
            return Err(ModelError::NoGpu(format!(
                "no GPU at index {index} (NVML error {rc})"
            )));
        }
        let mut buf = [0 as c_char; 96];
        // SAFETY: the buffer is writable for its stated length; NVML NUL-terminates.
        let name = if unsafe { get_name(device, buf.as_mut_ptr(), buf.len() as c_uint) } == 0 {
            // SAFETY: NUL-terminated within the buffer on success.
            unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        } else {
            format!("GPU {index}")
        };
        Ok(Nvml {
            device,
            get_memory,
            shutdown,
            name,
            _lib: lib,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl MemorySource for Nvml {
    fn sample(&mut self) -> Result<GpuMemory, ModelError> {
        let mut m = NvmlMemory::default();
        // SAFETY: the handle came from NVML and NVML is initialised while `self` lives.
        let rc = unsafe { (self.get_memory)(self.device, &mut m) };
        if rc != 0 {
            return Err(ModelError::Gpu(format!(
                "nvmlDeviceGetMemoryInfo failed with NVML error {rc}"
            )));
        }
        Ok(GpuMemory {
            total_bytes: m.total,
            used_bytes: m.used,
            free_bytes: m.free,
        })
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: balanced with the init in `open`; the library is still loaded (dropped after).
        unsafe { (self.shutdown)() };
    }
}

/// A scripted memory source (simulation and tests): yields its samples in order, then repeats the last.
#[derive(Debug, Clone)]
pub struct ScriptedMemory {
    samples: Vec<GpuMemory>,
    next: usize,
}

impl ScriptedMemory {
    pub fn new(samples: Vec<GpuMemory>) -> Self {
        ScriptedMemory { samples, next: 0 }
    }
}

impl MemorySource for ScriptedMemory {
    fn sample(&mut self) -> Result<GpuMemory, ModelError> {
        let i = self.next.min(self.samples.len().saturating_sub(1));
        self.next += 1;
        self.samples
            .get(i)
            .copied()
            .ok_or_else(|| ModelError::NoGpu("scripted source is empty".into()))
    }
}

/// Samples a source and drives the ladder. A source error is returned (the caller decides whether a
/// vanished GPU is fatal); it never panics.
#[derive(Debug)]
pub struct GpuWatch<S: MemorySource> {
    source: S,
    ladder: DegradeLadder,
}

impl<S: MemorySource> GpuWatch<S> {
    pub fn new(source: S, ladder: DegradeLadder) -> Self {
        GpuWatch { source, ladder }
    }

    pub fn ladder(&self) -> &DegradeLadder {
        &self.ladder
    }

    pub fn poll(&mut self, now: MonoTime) -> Result<(GpuMemory, Option<DegradeCommand>), ModelError> {
        let m = self.source.sample()?;
        Ok((m, self.ladder.observe(m, now)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ladder::{DegradeLevel, LadderConfig};
    use std::time::Duration;

    const GIB: u64 = 1 << 30;

    #[test]
    fn nvml_opens_or_says_no_gpu() {
        // FR-MODEL-004: NVML where present, a clean "no GPU" otherwise
        match Nvml::open(0) {
            Ok(mut n) => {
                let m = n.sample().unwrap();
                assert!(m.total_bytes > 0 && m.free_bytes <= m.total_bytes, "{m:?}");
            }
            Err(e) => {
                assert!(matches!(e, ModelError::NoGpu(_)), "{e}");
                assert!(e.to_string().starts_with("no GPU: "));
            }
        }
    }

    #[test]
    fn simulated_memory_pressure_walks_the_ladder() {
        // FR-MODEL-004: the game's memory grows; the agent gives way rung by rung, then recovers
        let total = 16 * GIB;
        let mut samples = Vec::new();
        for i in 0..20u64 {
            let used = (12 * GIB + i * GIB / 4).min(total - GIB / 8);
            samples.push(GpuMemory {
                total_bytes: total,
                used_bytes: used,
                free_bytes: total - used,
            });
        }
        for _ in 0..10 {
            samples.push(GpuMemory {
                total_bytes: total,
                used_bytes: 8 * GIB,
                free_bytes: 8 * GIB,
            });
        }
        let ladder = DegradeLadder::new(LadderConfig {
            confirm_samples: 2,
            cooldown: Duration::from_secs(1),
            ..LadderConfig::default()
        })
        .unwrap();
        let mut w = GpuWatch::new(ScriptedMemory::new(samples), ladder);
        let mut cmds = Vec::new();
        for i in 0..30u64 {
            if let (_, Some(c)) = w.poll(MonoTime::from_millis(i * 500)).unwrap() {
                cmds.push(c);
            }
        }
        assert_eq!(
            cmds,
            vec![
                DegradeCommand::ReduceContext { to_tokens: 4096 },
                DegradeCommand::ReduceVisualBudget { factor: 0.5 },
                DegradeCommand::MoveDeliberativeOffGpu,
                DegradeCommand::RestoreDeliberativeGpu,
                DegradeCommand::RestoreVisualBudget,
                DegradeCommand::RestoreContext { to_tokens: 8192 },
            ]
        );
        assert_eq!(w.ladder().level(), DegradeLevel::Normal);
        let mut empty = ScriptedMemory::new(vec![]);
        assert!(empty.sample().is_err());
    }
}
