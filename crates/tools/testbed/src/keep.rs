//! Keeping a real run's session stream as a committed recording: with `GAMEPILOT_KEEP_SESSION` set, an
//! end-to-end test writes its recording's header, every session input with its effects, and its end to
//! `crates/io/replay/tests/fixtures/sessions/<name>.jsonl`, which `gamepilot-replay`'s tests replay through
//! `Session` on every CI run (frames, prompts as sent and replies stay out: the session's inputs carry
//! everything it decided from).

use std::path::{Path, PathBuf};

/// The record kinds a replay through `Session` reads.
const SESSION_STREAM: &[&str] = &["session_start", "session_input", "session_effects", "session_end"];

/// Where the committed session recordings live.
pub fn session_fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../io/replay/tests/fixtures/sessions")
}

/// The session stream of the recording in `dir` (its `events.jsonl`), one JSON line per record.
pub fn session_stream(dir: &Path) -> std::io::Result<String> {
    let text = std::fs::read_to_string(dir.join("events.jsonl"))?;
    let mut out = String::new();
    for line in text.lines() {
        let kind = serde_json::from_str::<serde_json::Value>(line)
            .ok()
            .and_then(|v| v["kind"].as_str().map(str::to_string));
        if kind.is_some_and(|k| SESSION_STREAM.contains(&k.as_str())) {
            out.push_str(line);
            out.push('\n');
        }
    }
    Ok(out)
}

/// With `GAMEPILOT_KEEP_SESSION` set (to `1` or to `name`), write the session stream of the recording in
/// `dir` as the committed recording `name`; otherwise do nothing. Returns whether it wrote.
pub fn keep_session(dir: &Path, name: &str) -> std::io::Result<bool> {
    if !std::env::var("GAMEPILOT_KEEP_SESSION").is_ok_and(|v| v == "1" || v == name) {
        return Ok(false);
    }
    let stream = session_stream(dir)?;
    std::fs::create_dir_all(session_fixtures())?;
    std::fs::write(session_fixtures().join(format!("{name}.jsonl")), stream)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_stream_keeps_only_what_a_replay_through_the_session_reads() {
        let dir = tempfile::tempdir().unwrap();
        let lines = [
            r#"{"seq":0,"t_us":0,"kind":"session_start","config":{}}"#,
            r#"{"seq":1,"t_us":1,"kind":"frame","n":0}"#,
            r#"{"seq":2,"t_us":2,"kind":"session_input","now_us":2,"input":{"input":"start"}}"#,
            r#"{"seq":3,"t_us":2,"kind":"session_effects","input":2,"effects":[]}"#,
            r#"{"seq":4,"t_us":3,"kind":"prompt","cadence":"tactical"}"#,
            r#"{"seq":5,"t_us":4,"kind":"session_end"}"#,
        ];
        std::fs::write(dir.path().join("events.jsonl"), lines.join("\n")).unwrap();
        let kept = session_stream(dir.path()).unwrap();
        let kinds: Vec<String> = kept
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["kind"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            kinds,
            ["session_start", "session_input", "session_effects", "session_end"]
        );
    }
}
