//! Corrupt and hostile recordings through the reader, the replay driver and the report: byte
//! flips, cuts, garbage lines, overlong lines, and frame names that point outside the recording. Nothing
//! may panic, and nothing outside the recording's `frames/` may be read. A deterministic stand-in for the
//! cargo-fuzz target `fuzz/fuzz_targets/recording_reader.rs`, run on every `cargo test`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use gamepilot_replay::{render_html, replay, Recording};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// xorshift64*: a fixed, dependency-free sequence.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const HOSTILE_NAMES: &[&str] = &[
    "../../.ssh/id_rsa",
    "/dev/zero",
    "../secret",
    "frames/../../secret",
    "/proc/self/environ",
    "000001.png/../../secret",
    "..",
    "",
];

fn mutate(base: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut out = base.to_vec();
    match rng.below(6) {
        0 => {
            for _ in 0..1 + rng.below(8) {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
        }
        1 => out.truncate(rng.below(out.len())),
        2 => {
            let text = String::from_utf8_lossy(&out).into_owned();
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(lines.len() + 1);
                let junk = match rng.below(4) {
                    0 => "{not json".to_string(),
                    1 => r#"{"seq":1,"t_us":1,"kind":"no_such_kind"}"#.to_string(),
                    2 => "x".repeat(1 + rng.below(5000)),
                    _ => r#"{"seq":18446744073709551615,"t_us":18446744073709551615,"kind":"note","text":"max"}"#
                        .to_string(),
                };
                lines.insert(at.max(1).min(lines.len()), junk);
            }
            out = lines.join("\n").into_bytes();
        }
        3 => {
            let name = HOSTILE_NAMES[rng.below(HOSTILE_NAMES.len())];
            let text = String::from_utf8_lossy(&out).replace("\"000001.png\"", &format!("{name:?}"));
            out = text.into_bytes();
        }
        4 => {
            let text = String::from_utf8_lossy(&out).into_owned();
            let mut lines: Vec<&str> = text.lines().collect();
            if lines.len() > 2 {
                let a = 1 + rng.below(lines.len() - 1);
                let b = 1 + rng.below(lines.len() - 1);
                lines.swap(a, b);
                let dup = lines[rng.below(lines.len())];
                lines.push(dup);
            }
            out = lines.join("\n").into_bytes();
        }
        _ => {
            let i = rng.below(out.len());
            out.splice(i..i, [0xff, 0xfe, b'\n', 0x00]);
        }
    }
    out
}

#[test]
fn hostile_recordings_never_panic_and_never_read_outside_frames() {
    // Recordings survive crashes; report/replay accept only writer frame names; INV-CTX-002
    let tmp = tempfile::tempdir().unwrap();
    let secret = b"SECRET-KEY-MATERIAL-0123456789";
    std::fs::write(tmp.path().join("secret"), secret).unwrap();
    let secret_b64 = gamepilot_replay::report::base64(secret);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut opened = 0;
    let mut skipped_lines = 0;
    for name in ["suppressed", "deliberation", "cycle", "unverified"] {
        let base = std::fs::read(fixture(name).join("events.jsonl")).unwrap();
        for i in 0..60 {
            let dir = tmp.path().join(format!("{name}-{i}"));
            std::fs::create_dir_all(dir.join("frames")).unwrap();
            let frames = fixture(name).join("frames");
            if frames.is_dir() {
                for f in std::fs::read_dir(&frames).unwrap() {
                    let f = f.unwrap();
                    std::fs::copy(f.path(), dir.join("frames").join(f.file_name())).unwrap();
                }
            }
            std::fs::write(dir.join("events.jsonl"), mutate(&base, &mut rng)).unwrap();
            let Ok(rec) = Recording::open(&dir) else {
                continue;
            };
            opened += 1;
            skipped_lines += rec.corrupt_lines;
            let outcome = replay(&rec).ok();
            let html = render_html(&rec, outcome.as_ref());
            assert!(!html.contains(&secret_b64), "{name}-{i}: read outside frames/");
        }
    }
    assert!(opened > 100, "most mutated recordings stay readable: {opened}");
    assert!(skipped_lines > 0);
}
