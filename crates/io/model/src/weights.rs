//! Weight integrity (FR-MODEL-005): a GGUF file is hashed (SHA-256) and compared with the configured
//! or recorded digest BEFORE any host loads it. A mismatch, a truncated file or a missing digest is a
//! loud error naming the file, never a warning.

use crate::ModelError;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A weights file and the digest it must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsSpec {
    pub path: PathBuf,
    /// Expected SHA-256 as 64 hex digits; `None` means "use the recorded `<file>.sha256` sidecar".
    pub sha256: Option<String>,
    /// Expected length in bytes, when known: a shorter file is reported as truncated.
    pub len: Option<u64>,
}

/// Proof that a file verified: its path, digest and length at verification time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedWeights {
    pub path: PathBuf,
    pub sha256: String,
    pub len: u64,
}

impl WeightsSpec {
    pub fn new(path: impl Into<PathBuf>, sha256: &str) -> Self {
        WeightsSpec {
            path: path.into(),
            sha256: Some(sha256.to_string()),
            len: None,
        }
    }

    /// A spec whose digest is the one recorded beside the file (`<file>.sha256`, `sha256sum` format).
    pub fn recorded(path: impl Into<PathBuf>) -> Self {
        WeightsSpec {
            path: path.into(),
            sha256: None,
            len: None,
        }
    }

    pub fn with_len(mut self, len: u64) -> Self {
        self.len = Some(len);
        self
    }

    fn expected_digest(&self) -> Result<String, ModelError> {
        let raw = match &self.sha256 {
            Some(d) => d.clone(),
            None => {
                let mut side = self.path.clone().into_os_string();
                side.push(".sha256");
                let text = std::fs::read_to_string(&side).map_err(|_| ModelError::NoDigest {
                    path: self.path.clone(),
                })?;
                text.split_whitespace().next().unwrap_or("").to_string()
            }
        };
        let d = raw.trim().to_ascii_lowercase();
        if d.len() != 64 || !d.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ModelError::BadDigest {
                path: self.path.clone(),
                digest: raw,
            });
        }
        Ok(d)
    }

    /// Verifies the file. Reads it once, streaming.
    pub fn verify(&self) -> Result<VerifiedWeights, ModelError> {
        self.verify_open().map(|(v, _file)| v)
    }

    /// Verifies the file through one open descriptor and returns that descriptor with the proof: the
    /// bytes hashed are the bytes of the returned [`File`], whatever happens to the path afterwards (a
    /// file renamed over it, a symlink swapped). The launcher hands this descriptor to the host
    /// (`/proc/self/fd/N`) instead of letting it open the path a second time.
    pub fn verify_open(&self) -> Result<(VerifiedWeights, File), ModelError> {
        let expected = self.expected_digest()?;
        let path = &self.path;
        let io = |e: std::io::Error| ModelError::WeightsIo {
            path: path.clone(),
            detail: e.to_string(),
        };
        let mut file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ModelError::WeightsMissing { path: path.clone() })
            }
            Err(e) => return Err(io(e)),
        };
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(ModelError::WeightsIo {
                path: path.clone(),
                detail: "not a regular file".into(),
            });
        }
        let len = meta.len();
        if let Some(expected_len) = self.len {
            if len < expected_len {
                return Err(ModelError::WeightsTruncated {
                    path: path.clone(),
                    expected_len,
                    actual_len: len,
                });
            }
        }
        let (actual, hashed_len) = sha256_reader(&mut file).map_err(io)?;
        if actual != expected {
            return Err(ModelError::WeightsMismatch {
                path: path.clone(),
                expected,
                actual,
                len: hashed_len,
            });
        }
        let mut magic = [0u8; 4];
        let magic_ok = matches!(
            std::os::unix::fs::FileExt::read_exact_at(&file, &mut magic, 0),
            Ok(()) if &magic == b"GGUF"
        );
        if !magic_ok {
            return Err(ModelError::NotGguf { path: path.clone() });
        }
        Ok((
            VerifiedWeights {
                path: path.clone(),
                sha256: actual,
                len: hashed_len,
            },
            file,
        ))
    }
}

/// Hex SHA-256 and length of everything `r` yields.
fn sha256_reader(r: &mut impl Read) -> std::io::Result<(String, u64)> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n_total = 0u64;
    loop {
        let n = match r.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        n_total += n as u64;
        h.update(&buf[..n]);
    }
    Ok((h.finalize().iter().map(|b| format!("{b:02x}")).collect(), n_total))
}

/// Hex SHA-256 of a file.
pub fn sha256_file(path: &Path) -> Result<String, ModelError> {
    let io = |e: std::io::Error| ModelError::WeightsIo {
        path: path.to_path_buf(),
        detail: e.to_string(),
    };
    let mut f = File::open(path).map_err(io)?;
    sha256_reader(&mut f).map(|(hex, _)| hex).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    const BODY: &[u8] = b"GGUF\x03\x00\x00\x00 pretend tensors";

    #[test]
    fn good_file_verifies_and_one_flipped_byte_is_a_named_error() {
        // FR-MODEL-005
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "m.gguf", BODY);
        let digest = sha256_file(&p).unwrap();
        let ok = WeightsSpec::new(&p, &digest).verify().unwrap();
        assert_eq!(ok.len, BODY.len() as u64);

        let mut bad = BODY.to_vec();
        bad[10] ^= 0x01;
        let q = write(dir.path(), "bad.gguf", &bad);
        let err = WeightsSpec::new(&q, &digest).verify().unwrap_err();
        assert!(matches!(err, ModelError::WeightsMismatch { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("bad.gguf") && msg.contains(&digest), "{msg}");
    }

    #[test]
    fn truncated_missing_and_undigested_files_are_refused() {
        // FR-MODEL-005
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "m.gguf", BODY);
        let digest = sha256_file(&p).unwrap();
        let short = write(dir.path(), "short.gguf", &BODY[..8]);
        let err = WeightsSpec::new(&short, &digest)
            .with_len(BODY.len() as u64)
            .verify()
            .unwrap_err();
        assert!(
            matches!(err, ModelError::WeightsTruncated { actual_len: 8, .. }),
            "{err}"
        );
        let err = WeightsSpec::new(&short, &digest).verify().unwrap_err();
        assert!(matches!(err, ModelError::WeightsMismatch { len: 8, .. }), "{err}");

        let err = WeightsSpec::new(dir.path().join("nope.gguf"), &digest)
            .verify()
            .unwrap_err();
        assert!(matches!(err, ModelError::WeightsMissing { .. }), "{err}");
        let err = WeightsSpec::recorded(&p).verify().unwrap_err();
        assert!(matches!(err, ModelError::NoDigest { .. }), "{err}");
        let err = WeightsSpec::new(&p, "abc").verify().unwrap_err();
        assert!(matches!(err, ModelError::BadDigest { .. }), "{err}");
    }

    #[test]
    fn recorded_sidecar_digest_is_used() {
        // FR-MODEL-005: "configured or recorded value"
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "m.gguf", BODY);
        let digest = sha256_file(&p).unwrap();
        std::fs::write(
            dir.path().join("m.gguf.sha256"),
            format!("{}  m.gguf\n", digest.to_uppercase()),
        )
        .unwrap();
        assert!(WeightsSpec::recorded(&p).verify().is_ok());
    }

    #[test]
    fn verified_descriptor_keeps_the_checked_bytes_when_the_path_is_replaced() {
        // FR-MODEL-005: the file that was checked is the one loaded, not a second open by path
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "m.gguf", BODY);
        let digest = sha256_file(&p).unwrap();
        let (v, file) = WeightsSpec::new(&p, &digest).verify_open().unwrap();
        assert_eq!(v.sha256, digest);
        // Replaced after the check (renamed over, as a download or an attacker would).
        let evil = write(dir.path(), "evil.gguf", b"GGUF\x03\x00\x00\x00 other tensors!!");
        std::fs::rename(&evil, &p).unwrap();
        assert_ne!(sha256_file(&p).unwrap(), digest);
        // What the host opens: /proc/self/fd/N of the verified descriptor.
        let via_fd = crate::launcher::fd_path(std::os::fd::AsRawFd::as_raw_fd(&file));
        assert_eq!(std::fs::read(&via_fd).unwrap(), BODY);
        assert_eq!(sha256_file(&via_fd).unwrap(), digest);
    }

    #[test]
    fn non_gguf_with_matching_digest_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "x.bin", b"not a model");
        let digest = sha256_file(&p).unwrap();
        assert!(matches!(
            WeightsSpec::new(&p, &digest).verify(),
            Err(ModelError::NotGguf { .. })
        ));
    }
}
