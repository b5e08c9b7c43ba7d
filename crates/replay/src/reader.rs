//! The recording reader: parses `events.jsonl`, checks the schema version, locates frames.

use crate::ReplayError;
use gamepilot_recording::{Line, Record, SessionStart, SCHEMA_VERSION};
use std::path::{Path, PathBuf};

/// A recording read into memory.
#[derive(Debug, Clone)]
pub struct Recording {
    pub dir: PathBuf,
    pub lines: Vec<Line>,
    /// The last line was cut off (the writer died mid-line) and was left out.
    pub truncated: bool,
}

impl Recording {
    /// Read the recording in folder `dir`.
    pub fn open(dir: &Path) -> Result<Recording, ReplayError> {
        let path = dir.join("events.jsonl");
        let text = std::fs::read_to_string(&path).map_err(|source| ReplayError::Io {
            path: path.clone(),
            source,
        })?;
        Self::parse(dir, &path, &text)
    }

    /// Parse the text of an `events.jsonl` (empty lines are skipped).
    pub fn parse(dir: &Path, path: &Path, text: &str) -> Result<Recording, ReplayError> {
        let mut lines = Vec::new();
        let mut truncated = false;
        let all: Vec<(usize, &str)> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .collect();
        for (k, (i, l)) in all.iter().enumerate() {
            match serde_json::from_str::<Line>(l) {
                Ok(line) => lines.push(line),
                // A final line without its newline is a write cut short by a crash: leave it out.
                Err(_) if k + 1 == all.len() && !text.ends_with('\n') && k > 0 => truncated = true,
                Err(e) => {
                    return Err(ReplayError::BadLine {
                        path: path.to_path_buf(),
                        line: i + 1,
                        message: e.to_string(),
                    })
                }
            }
        }
        match lines.first().map(|l| &l.record) {
            Some(Record::SessionStart(h)) if h.schema_version != SCHEMA_VERSION => Err(ReplayError::Schema {
                path: path.to_path_buf(),
                found: h.schema_version,
                supported: SCHEMA_VERSION,
            }),
            Some(Record::SessionStart(_)) => Ok(Recording {
                dir: dir.to_path_buf(),
                lines,
                truncated,
            }),
            _ => Err(ReplayError::NoHeader(path.to_path_buf())),
        }
    }

    pub fn header(&self) -> Option<&SessionStart> {
        match self.lines.first().map(|l| &l.record) {
            Some(Record::SessionStart(h)) => Some(h),
            _ => None,
        }
    }

    /// The path of a frame file named in a `frame` record.
    pub fn frame_path(&self, file: &str) -> PathBuf {
        self.dir.join("frames").join(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_gives_named_errors() {
        let d = Path::new("/x");
        let p = Path::new("/x/events.jsonl");
        assert!(matches!(
            Recording::parse(d, p, ""),
            Err(ReplayError::NoHeader(_))
        ));
        assert!(matches!(
            Recording::parse(d, p, "{not json"),
            Err(ReplayError::BadLine { line: 1, .. })
        ));
        let note = r#"{"seq":0,"t_us":0,"kind":"note","text":"hi"}"#;
        assert!(matches!(
            Recording::parse(d, p, note),
            Err(ReplayError::NoHeader(_))
        ));
        let v2 = r#"{"seq":0,"t_us":0,"kind":"session_start","schema_version":2,"tool":"t","goal":"g","window":"w","started_unix_ms":0,"config":{}}"#;
        assert!(matches!(
            Recording::parse(d, p, v2),
            Err(ReplayError::Schema { found: 2, .. })
        ));
        let v1 = v2.replace("\"schema_version\":2", "\"schema_version\":1");
        let text = format!("{v1}\n\n{note}\n");
        let r = Recording::parse(d, p, &text).unwrap();
        assert_eq!(r.lines.len(), 2);
        assert!(!r.truncated);
        assert_eq!(r.header().unwrap().goal, "g");
        // a crash mid-line: the cut line is left out and flagged
        let cut = format!("{v1}\n{note}\n{{\"seq\":2,\"t_us\":5,\"ki");
        let r = Recording::parse(d, p, &cut).unwrap();
        assert_eq!(r.lines.len(), 2);
        assert!(r.truncated);
        // a bad line that is not the last one is still an error
        let bad = format!("{v1}\n{{\"seq\":1\n{note}");
        assert!(matches!(
            Recording::parse(d, p, &bad),
            Err(ReplayError::BadLine { line: 2, .. })
        ));
    }
}
