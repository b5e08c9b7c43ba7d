//! The pinned PP-OCR files (FR-PERC-004): where `scripts/setup-ocr.sh` puts them, their SHA-256, the check
//! made before anything is loaded, and the one ONNX Runtime environment of the process.

use crate::OcrError;
use sha2::{Digest, Sha256};
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The wheels the files come from (pinned in `scripts/setup-ocr.sh`).
pub const MODEL_SOURCE: &str = "rapidocr-onnxruntime 1.4.4 (PP-OCRv4 det + rec), onnxruntime 1.31.1";
/// SHA-256 of `det.onnx` (`ch_PP-OCRv4_det_infer.onnx`).
pub const DET_SHA256: &str = "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9";
/// SHA-256 of `rec.onnx` (`ch_PP-OCRv4_rec_infer.onnx`).
pub const REC_SHA256: &str = "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b";
/// SHA-256 of `libonnxruntime.so` (`libonnxruntime.so.1.31.1`).
pub const LIB_SHA256: &str = "fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3";

/// The three verified files, held as what was verified: each read once and hashed, the two models loaded
/// from those bytes and the runtime library from an in-memory copy of its bytes — so a file replaced or
/// rewritten after the check is never what runs.
#[derive(Debug, Clone)]
pub struct ModelFiles {
    pub dir: PathBuf,
    pub det: PathBuf,
    pub rec: PathBuf,
    pub lib: PathBuf,
    pub det_bytes: Arc<[u8]>,
    pub rec_bytes: Arc<[u8]>,
    lib_file: Arc<std::fs::File>,
}

impl ModelFiles {
    /// The path the runtime library is loaded from: its verified descriptor.
    pub fn lib_load_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.lib_file.as_raw_fd()))
    }
}

/// `$GAMEPILOT_OCR_DIR`, else `${GAMEPILOT_CACHE:-$HOME/.cache/gamepilot}/ocr`.
pub fn model_dir() -> PathBuf {
    // An empty variable is unset, never the current directory.
    if let Some(d) = std::env::var_os("GAMEPILOT_OCR_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("GAMEPILOT_CACHE")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("."));
            home.join(".cache").join("gamepilot")
        });
    cache.join("ocr")
}

fn missing(path: &Path) -> impl Fn(std::io::Error) -> OcrError + '_ {
    move |e| OcrError::Model {
        path: path.to_path_buf(),
        reason: format!("{e} (run scripts/setup-ocr.sh)"),
    }
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn check_pinned(path: &Path, got: String, want: &str) -> Result<(), OcrError> {
    if got == want {
        return Ok(());
    }
    Err(OcrError::Model {
        path: path.to_path_buf(),
        reason: format!("SHA-256 {got}, pinned {want} (rerun scripts/setup-ocr.sh)"),
    })
}

fn read_pinned(path: &Path, want: &str) -> Result<Arc<[u8]>, OcrError> {
    let bytes = std::fs::read(path).map_err(missing(path))?;
    check_pinned(path, hex_sha256(&bytes), want)?;
    Ok(bytes.into())
}

/// The verified bytes in an anonymous in-memory file (memfd), which the dynamic loader opens through
/// `/proc/self/fd`: neither a rename nor an in-place write to the file on disk reaches it.
fn sealed_copy(bytes: &[u8]) -> std::io::Result<std::fs::File> {
    use std::io::Write as _;
    use std::os::fd::FromRawFd as _;
    // SAFETY: memfd_create takes a NUL-terminated name and flags; it returns a new descriptor or -1.
    let fd = unsafe { libc::memfd_create(c"libonnxruntime.so".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created above and is owned by nothing else.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(bytes)?;
    Ok(file)
}

/// Check each file against its pinned hash and keep what was checked; the error names the file and both
/// hashes.
pub fn verify(dir: &Path) -> Result<ModelFiles, OcrError> {
    let (det, rec, lib) = (
        dir.join("det.onnx"),
        dir.join("rec.onnx"),
        dir.join("libonnxruntime.so"),
    );
    let det_bytes = read_pinned(&det, DET_SHA256)?;
    let rec_bytes = read_pinned(&rec, REC_SHA256)?;
    let lib_bytes = read_pinned(&lib, LIB_SHA256)?;
    let lib_file = sealed_copy(&lib_bytes).map_err(|e| OcrError::Model {
        path: lib.clone(),
        reason: format!("cannot hold the verified library in memory: {e}"),
    })?;
    Ok(ModelFiles {
        dir: dir.to_path_buf(),
        det,
        rec,
        lib,
        det_bytes,
        rec_bytes,
        lib_file: Arc::new(lib_file),
    })
}

static VERIFIED: OnceLock<Result<ModelFiles, String>> = OnceLock::new();
static RUNTIME: OnceLock<Result<ort::environment::Environment, String>> = OnceLock::new();

/// The verified files of [`model_dir`], checked once per process.
pub fn verified_files() -> Result<ModelFiles, OcrError> {
    VERIFIED
        .get_or_init(|| verify(&model_dir()).map_err(|e| e.to_string()))
        .clone()
        .map_err(OcrError::Runtime)
}

/// Load the verified `libonnxruntime.so` and create the process's ONNX Runtime environment (once).
pub(crate) fn runtime(files: &ModelFiles) -> Result<&'static ort::environment::Environment, OcrError> {
    let r = RUNTIME.get_or_init(|| {
        let builder = ort::init_from(files.lib_load_path()).map_err(|e| e.to_string())?;
        builder
            .with_name("gamepilot-ocr")
            .build()
            .map_err(|e| e.to_string())
    });
    match r {
        Ok(env) => Ok(env),
        Err(e) => Err(OcrError::Runtime(format!(
            "ONNX Runtime from {}: {e}",
            files.lib.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrong_or_missing_file_is_a_named_error() {
        let dir = std::env::temp_dir().join(format!("gp-ocr-verify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = verify(&dir).unwrap_err().to_string();
        assert!(e.contains("det.onnx") && e.contains("setup-ocr.sh"), "{e}");
        std::fs::write(dir.join("det.onnx"), b"not a model").unwrap();
        let e = verify(&dir).unwrap_err().to_string();
        assert!(e.contains("pinned") && e.contains(DET_SHA256), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
