//! The writer: creates the session folder, appends lines to `events.jsonl`, writes changed frames as PNG.
//!
//! Crash safety: every record is flushed to the file as soon as it is written (a crash loses at
//! most the line being written, which the reader then skips), the file is fsynced every
//! [`SYNC_EVERY`] and at [`Recorder::finish`]. Images inside prompt records are never inlined: each
//! `data:image/…;base64,…` URL is stored once under `frames/` by content hash and the record names the file
//! ([`externalize_images`]).

use crate::format::{Line, Record, SessionStart};
use crate::RecordingError;
use base64::Engine as _;
use gamepilot_core::action::Action;
use gamepilot_core::{FrameView, MonoTime, SubgoalId};
use gamepilot_grounding::{ActionId, GroundingPath, Target};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use std::collections::{HashSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often the events file is fsynced while the session runs (it is flushed after every record).
pub const SYNC_EVERY: Duration = Duration::from_secs(2);

/// Names of stored prompt images the writer remembers, so a repeated image costs no file system call.
/// Past it the oldest name is forgotten: storing that image again finds its file already there
/// (`create_new` answers AlreadyExists) and writes nothing, so forgetting costs one `open`, never a
/// second copy. A prompt with a fresh image every tactical call would otherwise grow the set all hour.
pub const MAX_REMEMBERED_IMAGES: usize = 1024;

/// Writes one session's recording. Write-only: nothing here reads a recording back (INV-CTX-002).
pub struct Recorder {
    dir: PathBuf,
    out: Option<BufWriter<File>>,
    seq: u64,
    frames: u64,
    last_frame: [Option<u64>; 2],
    last_sync: Instant,
    images: HashSet<String>,
    image_order: VecDeque<String>,
}

/// True for a file name the writer puts under `frames/`: a frame `NNNNNN.png` (six or more digits) or an
/// image stored by content hash, `img-<64 hex>.<png|jpg|webp|gif|bin>`. Readers accept no other name, so
/// a recording cannot point them at `../../.ssh/id_rsa` or `/dev/zero`.
pub fn is_frame_file_name(name: &str) -> bool {
    if let Some(stem) = name.strip_suffix(".png") {
        if stem.len() >= 6 && stem.len() <= 20 && stem.bytes().all(|b| b.is_ascii_digit()) {
            return true;
        }
    }
    let Some(rest) = name.strip_prefix("img-") else {
        return false;
    };
    let Some((hash, ext)) = rest.split_once('.') else {
        return false;
    };
    hash.len() == 64
        && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && matches!(ext, "png" | "jpg" | "webp" | "gif" | "bin")
}

/// The file name an image is stored under: `img-<sha256 of the bytes>.<extension of the MIME type>`.
pub fn image_file_name(bytes: &[u8], mime: &str) -> String {
    let ext = match mime {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpg",
        "image/webp" => "webp",
        "image/gif" => "gif",
        _ => "bin",
    };
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("img-{hex}.{ext}")
}

/// Replaces every string in `value` that is a `data:image/<type>;base64,<data>` URL by what `store`
/// returns for the decoded bytes and the MIME type (the writer stores the file once and returns
/// `frames/<name>`). A URL whose base64 does not decode is replaced by a short note, never kept inline.
/// Returns how many URLs were replaced. Pure apart from what `store` does.
pub fn externalize_images(value: &mut Value, mut store: impl FnMut(&[u8], &str) -> String) -> usize {
    fn walk(v: &mut Value, store: &mut dyn FnMut(&[u8], &str) -> String, n: &mut usize) {
        match v {
            Value::String(s) => {
                let Some(rest) = s.strip_prefix("data:image/") else {
                    return;
                };
                let Some((kind, data)) = rest.split_once(";base64,") else {
                    return;
                };
                // Only a URL: a MIME subtype and nothing but the base64 alphabet after the comma.
                let is_url = !kind.is_empty()
                    && kind
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
                    && !data.is_empty()
                    && data
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
                if !is_url {
                    return;
                }
                let mime = format!("image/{}", kind.to_ascii_lowercase());
                let replacement = match base64::engine::general_purpose::STANDARD.decode(data) {
                    Ok(bytes) => store(&bytes, &mime),
                    Err(_) => format!("(undecodable {mime} data URL of {} bytes, not kept)", data.len()),
                };
                *s = replacement;
                *n += 1;
            }
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, store, n)),
            Value::Object(o) => o.values_mut().for_each(|x| walk(x, store, n)),
            _ => {}
        }
    }
    let mut n = 0;
    walk(value, &mut store, &mut n);
    n
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RecordingError + '_ {
    move |source| RecordingError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A fast 64-bit hash of the pixel rows (colour bytes only; the padding byte of `Bgrx` is ignored), to tell
/// whether a frame changed. Two pixels per step, multiply-rotate mixing.
fn frame_hash(v: &FrameView<'_>) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mask: u64 = match v.format {
        gamepilot_core::PixelFormat::Bgrx => 0x00ff_ffff_00ff_ffff,
        gamepilot_core::PixelFormat::Rgba => 0xffff_ffff_ffff_ffff,
    };
    let mut h: u64 = (v.width as u64) << 32 | v.height as u64;
    for y in 0..v.height {
        let row = v.row(y);
        let mut chunks = row.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) & mask;
            h = (h ^ w).wrapping_mul(K).rotate_left(29);
        }
        for (i, b) in chunks.remainder().iter().enumerate() {
            if i % 4 == 3 && mask != u64::MAX {
                continue;
            }
            h = (h ^ *b as u64).wrapping_mul(K).rotate_left(29);
        }
    }
    h
}

impl Recorder {
    /// Create the session folder `dir` (and `dir/frames`) and write the header. A folder that already
    /// holds a recording is refused rather than appended to.
    pub fn create(dir: &Path, header: SessionStart) -> Result<Recorder, RecordingError> {
        let frames = dir.join("frames");
        std::fs::create_dir_all(&frames).map_err(io(&frames))?;
        let events = dir.join("events.jsonl");
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&events)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    RecordingError::AlreadyRecorded(dir.to_path_buf())
                } else {
                    RecordingError::Io {
                        path: events.clone(),
                        source: e,
                    }
                }
            })?;
        let mut r = Recorder {
            dir: dir.to_path_buf(),
            out: Some(BufWriter::new(file)),
            seq: 0,
            frames: 0,
            last_frame: [None; 2],
            last_sync: Instant::now(),
            images: HashSet::new(),
            image_order: VecDeque::new(),
        };
        r.record(MonoTime::ZERO, Record::SessionStart(header))?;
        r.flush()?;
        Ok(r)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Append one record and flush it to the file (fsync every [`SYNC_EVERY`]); returns its `seq`.
    /// Images inside a `prompt` record's messages are stored once under `frames/` and referenced
    /// ([`externalize_images`]), whoever built the record.
    pub fn record(&mut self, t: MonoTime, mut record: Record) -> Result<u64, RecordingError> {
        if self.out.is_none() {
            return Err(RecordingError::Finished);
        }
        if let Record::Prompt { messages, .. } = &mut record {
            self.store_images(messages)?;
        }
        let seq = self.seq;
        let line = Line {
            seq,
            t_us: t.as_micros(),
            record,
        };
        let text = serde_json::to_string(&line)?;
        let path = self.dir.join("events.jsonl");
        let out = self.out.as_mut().ok_or(RecordingError::Finished)?;
        out.write_all(text.as_bytes()).map_err(io(&path))?;
        out.write_all(b"\n").map_err(io(&path))?;
        out.flush().map_err(io(&path))?;
        self.seq += 1;
        if self.last_sync.elapsed() >= SYNC_EVERY {
            self.sync()?;
        }
        Ok(seq)
    }

    /// Record a prompt sent to the model; every `data:image/…;base64,` URL in `messages` is written once
    /// as `frames/img-<sha256>.<ext>` and replaced by that path. Returns the record's `seq`.
    pub fn prompt_with_images(
        &mut self,
        t: MonoTime,
        cadence: &str,
        call: u64,
        prefix_bytes: u64,
        messages: Value,
    ) -> Result<u64, RecordingError> {
        self.record(
            t,
            Record::Prompt {
                cadence: cadence.to_string(),
                call,
                prefix_bytes,
                messages,
            },
        )
    }

    /// Replace the images in `value` by references to files under `frames/`, writing each distinct
    /// image once. Returns how many were replaced.
    pub fn store_images(&mut self, value: &mut Value) -> Result<usize, RecordingError> {
        let frames = self.dir.join("frames");
        let images = &mut self.images;
        let order = &mut self.image_order;
        let mut failed: Option<RecordingError> = None;
        let n = externalize_images(value, |bytes, mime| {
            let name = image_file_name(bytes, mime);
            if failed.is_none() && !images.contains(&name) {
                let path = frames.join(&name);
                match OpenOptions::new().write(true).create_new(true).open(&path) {
                    Ok(mut f) => {
                        if let Err(e) = f.write_all(bytes) {
                            failed = Some(RecordingError::Io { path, source: e });
                        }
                    }
                    // Stored by an earlier call under the same content hash.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => failed = Some(RecordingError::Io { path, source: e }),
                }
                if failed.is_none() && images.insert(name.clone()) {
                    order.push_back(name.clone());
                    while order.len() > MAX_REMEMBERED_IMAGES {
                        if let Some(old) = order.pop_front() {
                            images.remove(&old);
                        }
                    }
                }
            }
            format!("frames/{name}")
        });
        match failed {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    /// Flush and fsync the events file now (also done every [`SYNC_EVERY`] and at finish).
    pub fn sync(&mut self) -> Result<(), RecordingError> {
        let path = self.dir.join("events.jsonl");
        let out = self.out.as_mut().ok_or(RecordingError::Finished)?;
        out.flush().map_err(io(&path))?;
        out.get_ref().sync_data().map_err(io(&path))?;
        self.last_sync = Instant::now();
        Ok(())
    }

    /// Record an input of the loop logic (a `gamepilot_planner::Event`); returns its `seq`.
    pub fn loop_event<E: Serialize>(&mut self, t: MonoTime, event: &E) -> Result<u64, RecordingError> {
        let event = serde_json::to_value(event)?;
        self.record(t, Record::LoopEvent { event })
    }

    /// Record the decisions the loop logic made on input `input`.
    pub fn decisions<C: Serialize>(
        &mut self,
        t: MonoTime,
        input: u64,
        commands: &[C],
    ) -> Result<(), RecordingError> {
        for c in commands {
            let command = serde_json::to_value(c)?;
            self.record(t, Record::Decision { input, command })?;
        }
        Ok(())
    }

    /// Record an input of the session core stepped at `t`; returns its `seq`.
    pub fn session_input<I: Serialize>(&mut self, t: MonoTime, input: &I) -> Result<u64, RecordingError> {
        let input = serde_json::to_value(input)?;
        self.record(t, Record::SessionInput { now_us: t.0, input })
    }

    /// Record the effects the session core returned for input `input`.
    pub fn session_effects<E: Serialize>(
        &mut self,
        t: MonoTime,
        input: u64,
        effects: &[E],
    ) -> Result<(), RecordingError> {
        let effects = serde_json::to_value(effects)?;
        self.record(t, Record::SessionEffects { input, effects })?;
        Ok(())
    }

    /// Record an action handed to the executor.
    pub fn action(
        &mut self,
        t: MonoTime,
        action: ActionId,
        subgoal: SubgoalId,
        payload: &Action,
        target: Option<Target>,
        path: Option<GroundingPath>,
    ) -> Result<u64, RecordingError> {
        let payload = serde_json::to_value(payload)?;
        self.record(
            t,
            Record::Action {
                action,
                subgoal: subgoal.0,
                payload,
                target,
                path,
            },
        )
    }

    /// Write `view` as the next frame if it differs from the last frame written of the same kind (plain
    /// or marked). Returns the frame number when written.
    pub fn frame(
        &mut self,
        t: MonoTime,
        view: &FrameView<'_>,
        marked: bool,
        change: &str,
    ) -> Result<Option<u64>, RecordingError> {
        let h = frame_hash(view);
        let slot = usize::from(marked);
        if self.last_frame[slot] == Some(h) {
            return Ok(None);
        }
        self.frames += 1;
        let n = self.frames;
        let file = format!("{n:06}.png");
        let path = self.dir.join("frames").join(&file);
        image::save_buffer(
            &path,
            &view.to_rgba(),
            view.width,
            view.height,
            image::ExtendedColorType::Rgba8,
        )
        .map_err(|e| RecordingError::Png {
            path: path.clone(),
            message: e.to_string(),
        })?;
        self.last_frame[slot] = Some(h);
        self.record(
            t,
            Record::Frame {
                frame: n,
                file,
                width: view.width,
                height: view.height,
                marked,
                change: change.to_string(),
            },
        )?;
        Ok(Some(n))
    }

    /// Push buffered lines to the file.
    pub fn flush(&mut self) -> Result<(), RecordingError> {
        let path = self.dir.join("events.jsonl");
        match self.out.as_mut() {
            Some(out) => out.flush().map_err(io(&path)),
            None => Err(RecordingError::Finished),
        }
    }

    /// Write `session_end`, flush and close. Returns the folder.
    pub fn finish(
        mut self,
        t: MonoTime,
        reason: &str,
        summary: serde_json::Value,
    ) -> Result<PathBuf, RecordingError> {
        self.record(
            t,
            Record::SessionEnd {
                reason: reason.to_string(),
                summary,
            },
        )?;
        self.sync()?;
        self.out = None;
        // The frames and the folder entries themselves (best effort: not every filesystem syncs folders).
        for d in [self.dir.join("frames"), self.dir.clone()] {
            if let Ok(f) = File::open(&d) {
                let _ = f.sync_all();
            }
        }
        Ok(self.dir.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::SCHEMA_VERSION;
    use gamepilot_core::PixelFormat;

    fn header() -> SessionStart {
        SessionStart {
            schema_version: SCHEMA_VERSION,
            tool: "test".into(),
            goal: "g".into(),
            window: "w".into(),
            started_unix_ms: 0,
            config: serde_json::json!({}),
        }
    }

    #[test]
    fn writes_header_lines_and_changed_frames_only() {
        // INV-CTX-002 (recordings are written as output), decisions.md Recordings (frames on change)
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("session-1");
        let mut r = Recorder::create(&dir, header()).unwrap();
        let a = vec![10u8; 4 * 4 * 4];
        let mut b = a.clone();
        b[0] = 200;
        let va = FrameView::new(4, 4, 16, PixelFormat::Bgrx, &a).unwrap();
        let vb = FrameView::new(4, 4, 16, PixelFormat::Bgrx, &b).unwrap();
        assert_eq!(
            r.frame(MonoTime::from_millis(1), &va, false, "scene").unwrap(),
            Some(1)
        );
        assert_eq!(
            r.frame(MonoTime::from_millis(2), &va, false, "unchanged")
                .unwrap(),
            None
        );
        assert_eq!(
            r.frame(MonoTime::from_millis(2), &va, true, "marked").unwrap(),
            Some(2)
        );
        assert_eq!(
            r.frame(MonoTime::from_millis(3), &vb, false, "local").unwrap(),
            Some(3)
        );
        let action = Action::Key { key: "Return".into() };
        r.action(
            MonoTime::from_millis(4),
            ActionId(1),
            SubgoalId(2),
            &action,
            None,
            None,
        )
        .unwrap();
        let seq = r
            .loop_event(
                MonoTime::from_millis(5),
                &serde_json::json!({"event": "user_stop"}),
            )
            .unwrap();
        r.decisions(
            MonoTime::from_millis(5),
            seq,
            &[serde_json::json!({"command": "stop"})],
        )
        .unwrap();
        let out = r
            .finish(MonoTime::from_millis(6), "user_stop", serde_json::Value::Null)
            .unwrap();
        assert!(out.join("frames/000001.png").is_file());
        assert!(out.join("frames/000003.png").is_file());
        assert!(!out.join("frames/000004.png").exists());
        let text = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
        let lines: Vec<Line> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert!(matches!(&lines[0].record, Record::SessionStart(h) if h.schema_version == SCHEMA_VERSION));
        let kinds: Vec<&str> = lines.iter().map(|l| l.record.kind()).collect();
        assert_eq!(
            kinds,
            [
                "session_start",
                "frame",
                "frame",
                "frame",
                "action",
                "loop_event",
                "decision",
                "session_end"
            ]
        );
        assert!(lines.windows(2).all(|w| w[1].seq == w[0].seq + 1));
        match &lines[4].record {
            Record::Action { payload, subgoal, .. } => {
                assert_eq!(payload["action"], "key");
                assert_eq!(*subgoal, 2);
            }
            other => panic!("{other:?}"),
        }
        let png = image::open(out.join("frames/000003.png")).unwrap().to_rgba8();
        assert_eq!(png.get_pixel(0, 0).0, [10, 10, 200, 255]); // Bgrx → RGBA
    }

    #[test]
    fn frame_hash_ignores_bgrx_padding_but_not_colour() {
        // decisions.md Recordings (frames on change)
        let a = vec![7u8; 3 * 2 * 4];
        let mut pad = a.clone();
        pad[3] = 99;
        pad[23] = 1;
        let mut col = a.clone();
        col[22] = 8;
        let h = |d: &[u8]| frame_hash(&FrameView::new(3, 2, 12, PixelFormat::Bgrx, d).unwrap());
        assert_eq!(h(&a), h(&pad));
        assert_ne!(h(&a), h(&col));
    }

    #[test]
    fn every_record_reaches_the_file_before_finish() {
        // Recordings survive crashes: a record is on disk as soon as `record` returns, so a
        // kill -9 at any point loses at most the line being written.
        let tmp = tempfile::tempdir().unwrap();
        let mut r = Recorder::create(tmp.path(), header()).unwrap();
        r.record(MonoTime::from_millis(1), Record::Note { text: "one".into() })
            .unwrap();
        let text = std::fs::read_to_string(tmp.path().join("events.jsonl")).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.ends_with("\n"));
        r.sync().unwrap();
        // Dropped without finish (a crash): everything written so far is there.
        r.record(MonoTime::from_millis(2), Record::Note { text: "two".into() })
            .unwrap();
        std::mem::forget(r);
        let text = std::fs::read_to_string(tmp.path().join("events.jsonl")).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
    }

    #[test]
    fn externalize_images_replaces_data_urls_by_references() {
        // Prompt records reference image files instead of embedding base64
        let png = b"\x89PNG\r\n\x1a\nfake";
        let b64 = base64::engine::general_purpose::STANDARD.encode(png);
        let mut v = serde_json::json!({
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "data:image/png;base64, is just text here"},
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{b64}")}},
                {"type": "image_url", "image_url": {"url": format!("data:image/jpeg;base64,{b64}")}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
                {"type": "text", "text": "data:image/png;base64,!!not a URL"},
            ]}],
            "n": 3,
        });
        let mut seen = Vec::new();
        let n = externalize_images(&mut v, |bytes, mime| {
            seen.push((bytes.to_vec(), mime.to_string()));
            format!("ref:{}", seen.len())
        });
        assert_eq!(n, 3);
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0], (png.to_vec(), "image/png".to_string()));
        assert_eq!(seen[1].1, "image/jpeg");
        let parts = &v["messages"][0]["content"];
        assert_eq!(parts[0]["text"], "data:image/png;base64, is just text here");
        assert_eq!(parts[1]["image_url"]["url"], "ref:1");
        assert_eq!(parts[2]["image_url"]["url"], "ref:2");
        assert!(parts[3]["image_url"]["url"]
            .as_str()
            .unwrap()
            .starts_with("(undecodable image/png"));
        assert_eq!(parts[4]["text"], "data:image/png;base64,!!not a URL");
        assert!(!v.to_string().contains(&b64));
        assert_eq!(v["n"], 3);
    }

    #[test]
    fn remembered_image_names_are_bounded_and_a_forgotten_image_is_not_written_twice() {
        // INV-CTX-002: a fresh image every call for longer than the memo holds
        let tmp = tempfile::tempdir().unwrap();
        let mut r = Recorder::create(tmp.path(), header()).unwrap();
        let n = MAX_REMEMBERED_IMAGES + 40;
        let prompt = |i: usize| {
            let b64 = base64::engine::general_purpose::STANDARD.encode(format!("image {i}"));
            serde_json::json!([{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{b64}")}}
            ]}])
        };
        for i in 0..n {
            let mut m = prompt(i);
            assert_eq!(r.store_images(&mut m).unwrap(), 1);
            assert!(r.images.len() <= MAX_REMEMBERED_IMAGES);
            assert_eq!(r.images.len(), r.image_order.len());
        }
        assert_eq!(r.images.len(), MAX_REMEMBERED_IMAGES);
        // Image 0 was forgotten; storing it again finds its file and references it, one copy on disk.
        let mut again = prompt(0);
        r.store_images(&mut again).unwrap();
        let name = again[0]["content"][0]["image_url"]["url"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(name.starts_with("frames/img-"), "{name}");
        assert!(tmp.path().join(&name).is_file());
        let files = std::fs::read_dir(tmp.path().join("frames")).unwrap().count();
        assert_eq!(files, n, "each distinct image stored once");
    }

    #[test]
    fn prompt_images_are_stored_once_by_content_hash() {
        // An hour of prompts holds each distinct image once, as a file the record names
        let tmp = tempfile::tempdir().unwrap();
        let mut r = Recorder::create(tmp.path(), header()).unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(b"same image bytes");
        let messages = serde_json::json!([{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{b64}")}}
        ]}]);
        for call in 0..3 {
            r.prompt_with_images(MonoTime::from_millis(call), "tactical", call, 0, messages.clone())
                .unwrap();
        }
        // A prompt record built by a caller goes through the same path.
        r.record(
            MonoTime::from_millis(9),
            Record::Prompt {
                cadence: "deliberative".into(),
                call: 1,
                prefix_bytes: 0,
                messages: messages.clone(),
            },
        )
        .unwrap();
        let out = r.finish(MonoTime::from_millis(10), "done", Value::Null).unwrap();
        let name = image_file_name(b"same image bytes", "image/png");
        assert!(is_frame_file_name(&name), "{name}");
        let files: Vec<_> = std::fs::read_dir(out.join("frames")).unwrap().collect();
        assert_eq!(files.len(), 1);
        assert_eq!(
            std::fs::read(out.join("frames").join(&name)).unwrap(),
            b"same image bytes"
        );
        let text = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
        assert!(!text.contains(&b64), "base64 inlined");
        assert_eq!(text.matches(&format!("frames/{name}")).count(), 4);
    }

    #[test]
    fn frame_file_names_are_only_what_the_writer_makes() {
        // Readers accept only these names
        for ok in ["000001.png", "1234567.png", &image_file_name(b"x", "image/jpeg")] {
            assert!(is_frame_file_name(ok), "{ok}");
        }
        for bad in [
            "../../.ssh/id_rsa",
            "/dev/zero",
            "00001.png",
            "000001.png/..",
            "../000001.png",
            "000001.PNG",
            "img-abc.png",
            "",
            ".",
            "..",
            &format!("img-{}.exe", "a".repeat(64)),
            &format!("img-{}.png", "A".repeat(64)),
        ] {
            assert!(!is_frame_file_name(bad), "{bad}");
        }
    }

    #[test]
    fn refuses_to_overwrite_a_recording() {
        let tmp = tempfile::tempdir().unwrap();
        let r = Recorder::create(tmp.path(), header()).unwrap();
        drop(r);
        assert!(matches!(
            Recorder::create(tmp.path(), header()),
            Err(RecordingError::AlreadyRecorded(_))
        ));
    }
}
