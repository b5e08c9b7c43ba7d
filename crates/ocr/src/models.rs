//! The pinned PP-OCR files (FR-PERC-004): where `scripts/setup-ocr.sh` puts them, their SHA-256, the check
//! made before anything is loaded, and the one ONNX Runtime environment of the process.

use crate::OcrError;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The wheels the files come from (pinned in `scripts/setup-ocr.sh`).
pub const MODEL_SOURCE: &str = "rapidocr-onnxruntime 1.4.4 (PP-OCRv4 det + rec), onnxruntime 1.31.1";
/// SHA-256 of `det.onnx` (`ch_PP-OCRv4_det_infer.onnx`).
pub const DET_SHA256: &str = "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9";
/// SHA-256 of `rec.onnx` (`ch_PP-OCRv4_rec_infer.onnx`).
pub const REC_SHA256: &str = "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b";
/// SHA-256 of `libonnxruntime.so` (`libonnxruntime.so.1.31.1`).
pub const LIB_SHA256: &str = "fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3";

/// The three verified files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFiles {
    pub dir: PathBuf,
    pub det: PathBuf,
    pub rec: PathBuf,
    pub lib: PathBuf,
}

/// `$GAMEPILOT_OCR_DIR`, else `${GAMEPILOT_CACHE:-$HOME/.cache/gamepilot}/ocr`.
pub fn model_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("GAMEPILOT_OCR_DIR") {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("GAMEPILOT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("."));
            home.join(".cache").join("gamepilot")
        });
    cache.join("ocr")
}

/// Hex SHA-256 of a file.
pub fn sha256_file(path: &Path) -> Result<String, OcrError> {
    let missing = |e: std::io::Error| OcrError::Model {
        path: path.to_path_buf(),
        reason: format!("{e} (run scripts/setup-ocr.sh)"),
    };
    let mut f = std::fs::File::open(path).map_err(missing)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(missing)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Check each file against its pinned hash; the error names the file and both hashes.
pub fn verify(dir: &Path) -> Result<ModelFiles, OcrError> {
    let files = ModelFiles {
        dir: dir.to_path_buf(),
        det: dir.join("det.onnx"),
        rec: dir.join("rec.onnx"),
        lib: dir.join("libonnxruntime.so"),
    };
    for (p, want) in [
        (&files.det, DET_SHA256),
        (&files.rec, REC_SHA256),
        (&files.lib, LIB_SHA256),
    ] {
        let got = sha256_file(p)?;
        if got != want {
            return Err(OcrError::Model {
                path: p.clone(),
                reason: format!("SHA-256 {got}, pinned {want} (rerun scripts/setup-ocr.sh)"),
            });
        }
    }
    Ok(files)
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
        let builder = ort::init_from(&files.lib).map_err(|e| e.to_string())?;
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
