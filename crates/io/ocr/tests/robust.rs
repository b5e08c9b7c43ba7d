//! Uniform, 1×1, 0-area, out-of-frame and huge regions through every OCR path (PP-OCR lines,
//! boxes and integers, tesseract lines and integers, the worker): `undefined` or a clear error, never a
//! panic, and the worker keeps serving afterwards. Needs `scripts/setup-ocr.sh` (CI runs it first).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gamepilot_core::{FrameView, PixelFormat, Rect};
use gamepilot_ocr::{OcrEngine, OcrWorker, PpOcr, TesseractOcr};

fn regions(w: u32, h: u32) -> Vec<Rect> {
    vec![
        Rect::new(0, 0, w, h),
        Rect::new(3, 3, 1, 1),
        Rect::new(3, 3, 0, 0),
        Rect::new(5, 5, 0, 9),
        Rect::new(-10, -10, 5, 5),
        Rect::new(0, 0, u32::MAX, u32::MAX),
        Rect::new(i32::MAX - 1, 0, 1, 1),
        Rect::new(0, 0, w, 2),
        Rect::new(0, 0, 2, h),
    ]
}

fn frames() -> Vec<(u32, u32, Vec<u8>)> {
    let mut out = Vec::new();
    for &(w, h) in &[(1u32, 1u32), (2, 2), (64, 24), (1280, 720)] {
        for v in [0u8, 255, 128] {
            out.push((w, h, [v, v, v, 255].repeat((w * h) as usize)));
        }
    }
    out
}

fn engines() -> Vec<OcrEngine> {
    vec![
        OcrEngine::PpOcr(Box::new(PpOcr::new().expect("scripts/setup-ocr.sh run"))),
        OcrEngine::Tesseract(TesseractOcr::new().expect("tesseract-ocr-eng installed")),
    ]
}

#[test]
fn degenerate_regions_are_undefined_or_an_error_never_a_panic() {
    for mut e in engines() {
        for (w, h, px) in frames() {
            let view = FrameView::new(w, h, w as usize * 4, PixelFormat::Rgba, &px).unwrap();
            for r in regions(w, h) {
                // Uniform pixels hold no text and no number.
                if let Ok(lines) = e.lines(&view, r) {
                    assert!(lines.is_empty(), "{} {w}x{h} {r:?}: {lines:?}", e.backend());
                }
                if let Ok(v) = e.read_integer(&view, r, 0) {
                    assert_eq!(v, None, "{} {w}x{h} {r:?}", e.backend());
                }
            }
        }
    }
    // Boxes alone, too.
    let mut p = PpOcr::new().unwrap();
    let px = [255u8; 4].repeat(100 * 40);
    let view = FrameView::new(100, 40, 400, PixelFormat::Bgrx, &px).unwrap();
    for r in regions(100, 40) {
        if let Ok(b) = p.boxes(&view, r) {
            assert!(b.is_empty(), "{r:?}: {b:?}");
        }
    }
}

#[test]
fn noise_and_hard_edges_are_read_without_a_panic_and_within_bounds() {
    // Random pixels (thousands of glyph-sized specks for the lone-glyph finder) and a frame of
    // 1-pixel stripes through every PP-OCR path: an answer, every box inside the region, never a panic.
    let mut p = PpOcr::new().unwrap();
    let mut seed = 13u64;
    let mut noise = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (seed >> 56) as u8
            })
            .collect()
    };
    let (w, h) = (640u32, 360u32);
    let random = noise((w * h * 4) as usize);
    let stripes: Vec<u8> = (0..w * h)
        .flat_map(|i| {
            if (i % w) % 2 == 0 {
                [255u8, 255, 255, 255]
            } else {
                [0, 0, 0, 255]
            }
        })
        .collect();
    for px in [random, stripes] {
        let view = FrameView::new(w, h, w as usize * 4, PixelFormat::Rgba, &px).unwrap();
        for r in regions(w, h) {
            if let Ok(lines) = p.lines(&view, r) {
                let inside = r.clamped_to(&view.bounds()).unwrap();
                for l in &lines {
                    assert!(inside.contains_rect(&l.bbox), "{r:?}: {l:?} outside {inside:?}");
                }
            }
            let _ = p.read_integer(&view, r, 0);
        }
    }
}

#[test]
fn the_worker_keeps_serving_after_degenerate_regions() {
    let mut w = OcrWorker::spawn().expect("the default engine starts");
    let (fw, fh) = (64u32, 24u32);
    let px = [0u8, 0, 0, 255].repeat((fw * fh) as usize);
    let view = FrameView::new(fw, fh, fw as usize * 4, PixelFormat::Rgba, &px).unwrap();
    for r in regions(fw, fh) {
        let _ = w.integer(&view, r, 0);
        let _ = w.text(&view, r);
    }
    assert!(w.wait_idle(std::time::Duration::from_secs(60)));
    // Still answering: the uniform region reads as undefined, from the cache.
    assert_eq!(w.integer(&view, view.bounds(), 0).unwrap(), None);
    assert_eq!(w.text(&view, view.bounds()).unwrap(), Some(Vec::new()));
}

#[test]
fn files_replaced_or_rewritten_after_the_check_are_never_what_loads() {
    // FR-PERC-004: what is verified is what runs (the pinned bytes, not whatever the path holds later)
    let src = gamepilot_ocr::models::model_dir();
    let dir = tempfile::tempdir().unwrap();
    for name in ["det.onnx", "rec.onnx", "libonnxruntime.so"] {
        std::fs::copy(src.join(name), dir.path().join(name)).expect("scripts/setup-ocr.sh run");
    }
    let files = gamepilot_ocr::models::verify(dir.path()).unwrap();
    // One file rewritten in place, one replaced by rename, one removed.
    std::fs::write(dir.path().join("det.onnx"), b"not a model").unwrap();
    std::fs::write(dir.path().join("other"), b"not a library").unwrap();
    std::fs::rename(dir.path().join("other"), dir.path().join("libonnxruntime.so")).unwrap();
    std::fs::remove_file(dir.path().join("rec.onnx")).unwrap();
    let mut ocr = PpOcr::from_files(&files).expect("the verified bytes load");
    let (w, h) = (64u32, 24u32);
    let px = [255u8, 255, 255, 255].repeat((w * h) as usize);
    let view = FrameView::new(w, h, w as usize * 4, PixelFormat::Bgrx, &px).unwrap();
    assert!(ocr.lines(&view, Rect::new(0, 0, w, h)).is_ok());
    assert!(
        gamepilot_ocr::models::verify(dir.path()).is_err(),
        "the files on disk no longer verify"
    );
}
