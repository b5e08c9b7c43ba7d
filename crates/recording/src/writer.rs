//! The writer: creates the session folder, appends lines to `events.jsonl`, writes changed frames as PNG.

use crate::format::{Line, Record, SessionStart};
use crate::RecordingError;
use gamepilot_core::action::Action;
use gamepilot_core::{FrameView, MonoTime, SubgoalId};
use gamepilot_grounding::{ActionId, GroundingPath, Target};
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Writes one session's recording. Write-only: nothing here reads a recording back (INV-CTX-002).
pub struct Recorder {
    dir: PathBuf,
    out: Option<BufWriter<File>>,
    seq: u64,
    frames: u64,
    last_frame: [Option<u64>; 2],
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
        };
        r.record(MonoTime::ZERO, Record::SessionStart(header))?;
        r.flush()?;
        Ok(r)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Append one record; returns its `seq`.
    pub fn record(&mut self, t: MonoTime, record: Record) -> Result<u64, RecordingError> {
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
        self.seq += 1;
        Ok(seq)
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
        self.flush()?;
        self.out = None;
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
