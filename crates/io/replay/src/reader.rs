//! The recording reader: streams `events.jsonl` line by line with a bounded line length, skips and counts
//! corrupt lines wherever they are, checks the schema version, and opens frame files only by the names the
//! writer produces, with bounded reads (a recording is input from outside and may be hostile).

use crate::ReplayError;
use gamepilot_recording::{is_frame_file_name, Line, Record, SessionStart, SCHEMA_VERSION};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// The longest line read; a longer one is skipped (and counted) without holding more than this in memory.
pub const MAX_LINE_BYTES: usize = 8 << 20;
/// The largest frame or image file read.
pub const MAX_FRAME_BYTES: u64 = 64 << 20;
/// How many corrupt lines are described in [`Recording::corrupt`] (all are counted).
pub const MAX_CORRUPT_KEPT: usize = 20;

/// One line that was skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptLine {
    /// 1-based line number in `events.jsonl`.
    pub line: usize,
    pub reason: String,
}

/// A recording read into memory.
#[derive(Debug, Clone)]
pub struct Recording {
    pub dir: PathBuf,
    pub lines: Vec<Line>,
    /// The last line was cut off (the writer died mid-line) and was left out.
    pub truncated: bool,
    /// Lines that were not recording lines (not JSON, not UTF-8, unknown shape, longer than
    /// [`MAX_LINE_BYTES`]) and were skipped, wherever they were; the cut last line is not counted here.
    pub corrupt_lines: usize,
    /// The first [`MAX_CORRUPT_KEPT`] of them, with the reason.
    pub corrupt: Vec<CorruptLine>,
}

/// One raw line from the stream.
enum RawLine {
    Text(Vec<u8>, bool),
    TooLong,
}

/// Reads the next line (without its newline) holding at most `max` bytes; `Text(bytes, ended)` tells
/// whether a newline ended it. Returns `None` at the end of the stream.
fn next_line<R: BufRead>(r: &mut R, max: usize) -> std::io::Result<Option<RawLine>> {
    let mut buf = Vec::new();
    let mut too_long = false;
    let mut any = false;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(match (any, too_long) {
                (false, _) => None,
                (true, true) => Some(RawLine::TooLong),
                (true, false) => Some(RawLine::Text(buf, false)),
            });
        }
        any = true;
        let (take, ended) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if buf.len() + take > max {
                too_long = true;
                buf = Vec::new();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        r.consume(if ended { take + 1 } else { take });
        if ended {
            return Ok(Some(if too_long {
                RawLine::TooLong
            } else {
                RawLine::Text(buf, true)
            }));
        }
    }
}

impl Recording {
    /// Read the recording in folder `dir`. `events.jsonl` must be a regular file (not a device, FIFO or
    /// a link to one); it is streamed, never read whole.
    pub fn open(dir: &Path) -> Result<Recording, ReplayError> {
        let path = dir.join("events.jsonl");
        let io = |source| ReplayError::Io {
            path: path.clone(),
            source,
        };
        let file = open_regular(&path).map_err(io)?;
        Self::read(dir, &path, BufReader::with_capacity(1 << 16, file))
    }

    /// Parse the text of an `events.jsonl` (empty lines are skipped).
    pub fn parse(dir: &Path, path: &Path, text: &str) -> Result<Recording, ReplayError> {
        Self::read(dir, path, text.as_bytes())
    }

    /// Read an `events.jsonl` from a stream: lines longer than [`MAX_LINE_BYTES`] or that are not
    /// recording lines are skipped and counted; a final line without its newline that does not parse is
    /// a write cut short by a crash (`truncated`). The first readable line must be `session_start`.
    pub fn read<R: BufRead>(dir: &Path, path: &Path, mut r: R) -> Result<Recording, ReplayError> {
        let mut lines = Vec::new();
        let mut truncated = false;
        let mut corrupt_lines = 0usize;
        let mut corrupt = Vec::new();
        let mut first_bad: Option<CorruptLine> = None;
        let mut n = 0usize;
        loop {
            let raw = next_line(&mut r, MAX_LINE_BYTES).map_err(|source| ReplayError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            let Some(raw) = raw else { break };
            n += 1;
            let bad = match raw {
                RawLine::TooLong => Some((format!("longer than {MAX_LINE_BYTES} bytes"), true)),
                RawLine::Text(bytes, ended) => match std::str::from_utf8(&bytes) {
                    Err(e) => Some((format!("not UTF-8: {e}"), ended)),
                    Ok(t) if t.trim().is_empty() => None,
                    Ok(t) => match serde_json::from_str::<Line>(t) {
                        Ok(line) => {
                            lines.push(line);
                            None
                        }
                        Err(e) => Some((e.to_string(), ended)),
                    },
                },
            };
            if let Some((reason, ended)) = bad {
                let c = CorruptLine { line: n, reason };
                if lines.is_empty() && first_bad.is_none() {
                    first_bad = Some(c.clone());
                }
                if !ended && !lines.is_empty() {
                    // A final line without its newline: a write cut short by a crash.
                    truncated = true;
                    continue;
                }
                corrupt_lines += 1;
                if corrupt.len() < MAX_CORRUPT_KEPT {
                    corrupt.push(c);
                }
            }
        }
        match lines.first().map(|l| &l.record) {
            Some(Record::SessionStart(h)) if h.schema_version != SCHEMA_VERSION => Err(ReplayError::Schema {
                path: path.to_path_buf(),
                found: h.schema_version,
                supported: SCHEMA_VERSION,
            }),
            Some(Record::SessionStart(_)) if first_bad.is_none() => Ok(Recording {
                dir: dir.to_path_buf(),
                lines,
                truncated,
                corrupt_lines,
                corrupt,
            }),
            // The header itself is unreadable: nothing after it can be trusted to belong to it.
            _ => match first_bad {
                Some(c) => Err(ReplayError::BadLine {
                    path: path.to_path_buf(),
                    line: c.line,
                    message: c.reason,
                }),
                None => Err(ReplayError::NoHeader(path.to_path_buf())),
            },
        }
    }

    pub fn header(&self) -> Option<&SessionStart> {
        match self.lines.first().map(|l| &l.record) {
            Some(Record::SessionStart(h)) => Some(h),
            _ => None,
        }
    }

    /// The path of a frame file named in a record, or `None` when the name is not one the writer produces
    /// ([`gamepilot_recording::is_frame_file_name`]): no `..`, no absolute path, nothing outside `frames/`.
    /// A `frames/` prefix (how prompt records name their images) is accepted.
    pub fn frame_path(&self, file: &str) -> Option<PathBuf> {
        let name = file.strip_prefix("frames/").unwrap_or(file);
        is_frame_file_name(name).then(|| self.dir.join("frames").join(name))
    }

    /// Read a frame or image file named in a record: only names the writer produces, only regular files
    /// (a link to a device or to a file elsewhere is refused), at most [`MAX_FRAME_BYTES`].
    pub fn read_frame(&self, file: &str) -> Result<Vec<u8>, ReplayError> {
        let path = self
            .frame_path(file)
            .ok_or_else(|| ReplayError::BadFrameName(file.chars().take(200).collect()))?;
        let io = |source| ReplayError::Io {
            path: path.clone(),
            source,
        };
        let f = open_regular(&path).map_err(io)?;
        let mut data = Vec::new();
        f.take(MAX_FRAME_BYTES + 1).read_to_end(&mut data).map_err(io)?;
        if data.len() as u64 > MAX_FRAME_BYTES {
            return Err(ReplayError::FrameTooLarge {
                path,
                limit: MAX_FRAME_BYTES,
            });
        }
        Ok(data)
    }
}

/// Opens `path` for reading without following a final symbolic link and without blocking on a FIFO, and
/// refuses anything but a regular file.
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_flags())
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(f)
}

/// `O_NOFOLLOW | O_NONBLOCK` (O_NONBLOCK has no effect on a regular file; it keeps a FIFO from blocking).
fn libc_flags() -> i32 {
    libc::O_NONBLOCK | libc::O_NOFOLLOW
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
        // a bad line that is not the last one is skipped and counted
        let bad = format!("{v1}\n{{\"seq\":1\n{note}");
        let r = Recording::parse(d, p, &bad).unwrap();
        assert_eq!((r.lines.len(), r.corrupt_lines, r.truncated), (2, 1, false));
        assert_eq!(r.corrupt[0].line, 2);
    }

    #[test]
    fn corrupt_lines_anywhere_are_skipped_and_counted() {
        // Recordings survive crashes: the reader reads on past garbage
        let d = Path::new("/x");
        let p = Path::new("/x/events.jsonl");
        let v1 = r#"{"seq":0,"t_us":0,"kind":"session_start","schema_version":1,"tool":"t","goal":"g","window":"w","started_unix_ms":0,"config":{}}"#;
        let note = |i: u32| format!(r#"{{"seq":{i},"t_us":{i},"kind":"note","text":"n{i}"}}"#);
        let mut text = format!("{v1}\n{}\n", note(1));
        text.push_str("garbage\n");
        text.push_str(r#"{"seq":2,"t_us":2,"kind":"no_such_kind"}"#);
        text.push('\n');
        let mut bytes = text.into_bytes();
        bytes.extend_from_slice(b"\xff\xfe not utf-8\n");
        bytes.extend_from_slice(format!("{}\n", note(3)).as_bytes());
        // one line longer than the bound, then a good one
        bytes.extend(std::iter::repeat_n(b'x', MAX_LINE_BYTES + 10));
        bytes.push(b'\n');
        bytes.extend_from_slice(format!("{}\n", note(4)).as_bytes());
        bytes.extend_from_slice(b"{\"seq\":5,\"t_");
        let r = Recording::read(d, p, &bytes[..]).unwrap();
        let texts: Vec<_> = r
            .lines
            .iter()
            .filter_map(|l| match &l.record {
                Record::Note { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(texts, ["n1", "n3", "n4"]);
        assert_eq!(r.corrupt_lines, 4);
        assert!(r.truncated);
        let at: Vec<usize> = r.corrupt.iter().map(|c| c.line).collect();
        assert_eq!(at, [3, 4, 5, 7]);
        assert!(r.corrupt[3].reason.contains("longer than"));
    }

    #[test]
    fn frames_are_read_only_by_writer_names_and_bounded() {
        // A recording naming ../../.ssh/id_rsa or /dev/zero is refused
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("rec");
        std::fs::create_dir_all(dir.join("frames")).unwrap();
        std::fs::write(tmp.path().join("secret"), b"private key").unwrap();
        std::fs::write(dir.join("frames/000001.png"), b"png bytes").unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.join("frames/000002.png")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret"), dir.join("frames/000003.png")).unwrap();
        let rec = Recording {
            dir: dir.clone(),
            lines: vec![],
            truncated: false,
            corrupt_lines: 0,
            corrupt: vec![],
        };
        assert_eq!(rec.read_frame("000001.png").unwrap(), b"png bytes");
        assert_eq!(rec.read_frame("frames/000001.png").unwrap(), b"png bytes");
        for bad in [
            "../../.ssh/id_rsa",
            "/dev/zero",
            "../secret",
            "frames/../../secret",
        ] {
            assert!(
                matches!(rec.read_frame(bad), Err(ReplayError::BadFrameName(_))),
                "{bad}"
            );
            assert_eq!(rec.frame_path(bad), None);
        }
        // writer-shaped names that are links to a device or elsewhere are refused too
        assert!(matches!(
            rec.read_frame("000002.png"),
            Err(ReplayError::Io { .. })
        ));
        assert!(matches!(
            rec.read_frame("000003.png"),
            Err(ReplayError::Io { .. })
        ));
        // events.jsonl that is a device is refused instead of read forever
        std::os::unix::fs::symlink("/dev/zero", dir.join("events.jsonl")).unwrap();
        assert!(matches!(Recording::open(&dir), Err(ReplayError::Io { .. })));
    }
}
