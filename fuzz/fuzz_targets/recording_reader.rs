//! Fuzz target: arbitrary bytes as a recording's `events.jsonl` through the reader, the replay driver and the
//! HTML report. Run: `cargo +nightly fuzz run recording_reader` in fuzz/. The stable stand-in that
//! runs on every `cargo test` is `crates/io/replay/tests/hostile.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let dir = Path::new("/nonexistent-recording");
    if let Ok(rec) = gamepilot_replay::Recording::read(dir, &dir.join("events.jsonl"), data) {
        let outcome = gamepilot_replay::replay(&rec).ok();
        let _ = gamepilot_replay::render_html(&rec, outcome.as_ref());
    }
});
