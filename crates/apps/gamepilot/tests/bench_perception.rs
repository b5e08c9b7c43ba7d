//! `gamepilot bench perception` runs end to end against the practice game under Xvfb and reports every
//! figure with a number: capture (thumbnail, sensor region, full frame, GetImage), classification,
//! proposals, OCR, and the two-stage expensive pass beside the one-pass alternative. It asserts that the
//! figures are produced, not how fast they are (speed is read from the bench, not a timed test).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code

use gamepilot_testbed::{Arena, ArenaOptions, TestBed};
use std::process::{Command, Stdio};

#[test]
fn bench_perception_reports_every_figure() {
    // NFR-PERC-001, NFR-PERC-002, FR-GND-005 (Bench)
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gamepilot"))
        .args([
            "bench",
            "perception",
            "--display",
            &bed.display,
            "--window",
            &format!("0x{:x}", arena.window.id),
            "--frames",
            "20",
            "--ocr-runs",
            "1",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for what in [
        "thumbnail 320x180",
        "full frame Composite + SHM",
        "full frame plain GetImage",
        "from the capture thumbnail",
        "segmentation proposals",
        "region 240x48 tesseract",
        "full frame 1280x720 tesseract",
        "expensive pass: crop OCR",
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no {what:?} line in:\n{text}"));
        let p50: f64 = line
            .split("p50")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no p50 figure in {line:?}"));
        assert!(p50.is_finite() && p50 >= 0.0, "{line}");
    }
    assert!(
        text.contains("model input: cheap pass 320x180"),
        "the two-stage model input sizes are reported:\n{text}"
    );
}
