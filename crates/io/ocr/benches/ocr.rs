//! Criterion benches of OCR: one HUD region vs the whole 1280×720 frame (the obvious alternative),
//! integer reads, and a cache hit in the worker.

use ab_glyph::{Font, FontVec, PxScale, ScaleFont};
use criterion::{criterion_group, criterion_main, Criterion};
use gamepilot_core::{FrameView, PixelFormat, Rect};
use gamepilot_ocr::{OcrWorker, TesseractOcr};

const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf";

/// A dark 1280×720 frame with light HUD text drawn at (x, y).
fn frame_with(texts: &[(&str, f32, f32)]) -> Vec<u8> {
    let (w, h) = (1280usize, 720usize);
    let mut buf = vec![0u8; w * h * 4];
    for px in buf.chunks_exact_mut(4) {
        px.copy_from_slice(&[40, 24, 20, 0]);
    }
    let Ok(bytes) = std::fs::read(FONT) else {
        return buf;
    };
    let Ok(font) = FontVec::try_from_vec(bytes) else {
        return buf;
    };
    let sf = font.as_scaled(PxScale::from(20.0));
    for (text, x0, y0) in texts {
        let mut pen = *x0;
        for c in text.chars() {
            let g = sf.scaled_glyph(c);
            let adv = sf.h_advance(g.id);
            let g =
                g.id.with_scale_and_position(PxScale::from(20.0), ab_glyph::point(pen, *y0));
            pen += adv;
            if let Some(o) = font.outline_glyph(g) {
                let bb = o.px_bounds();
                o.draw(|gx, gy, cov| {
                    let (x, y) = (bb.min.x as usize + gx as usize, bb.min.y as usize + gy as usize);
                    if x < w && y < h && cov > 0.0 {
                        let i = (y * w + x) * 4;
                        let v = (40.0 + cov * 200.0) as u8;
                        buf[i..i + 3].copy_from_slice(&[v, v, v]);
                    }
                });
            }
        }
    }
    buf
}

fn benches(c: &mut Criterion) {
    let buf = frame_with(&[
        ("Coins 1234", 1080.0, 40.0),
        ("Gold 56", 1080.0, 80.0),
        ("Press Enter to continue", 480.0, 600.0),
    ]);
    let Some(v) = FrameView::new(1280, 720, 1280 * 4, PixelFormat::Bgrx, &buf) else {
        return;
    };
    let Ok(mut ocr) = TesseractOcr::new() else {
        eprintln!("tesseract unavailable; skipping OCR benches");
        return;
    };
    let hud = Rect::new(1060, 20, 200, 30);
    c.bench_function("ocr region 200x30 (HUD counter)", |b| {
        b.iter(|| ocr.lines(&v, hud))
    });
    c.bench_function("read_integer region 200x30", |b| {
        b.iter(|| ocr.read_integer(&v, Rect::new(1130, 20, 130, 30), 6))
    });
    c.bench_function("ocr full frame 1280x720 (alternative)", |b| {
        b.iter(|| ocr.lines(&v, v.bounds()))
    });
    if let Ok(mut w) = OcrWorker::spawn() {
        let _ = w.text(&v, hud);
        w.wait_idle(std::time::Duration::from_secs(10));
        c.bench_function("worker cache hit 200x30 (hash + lookup)", |b| {
            b.iter(|| w.text(&v, hud))
        });
    }
}

criterion_group! {
    name = ocr;
    config = Criterion::default().sample_size(10).measurement_time(std::time::Duration::from_secs(3));
    targets = benches
}
criterion_main!(ocr);
