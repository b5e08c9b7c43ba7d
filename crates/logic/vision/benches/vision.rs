//! Criterion benches of the vision crate: classification per frame (NFR-PERC-001), thumbnail building,
//! proposals per frame, marks rendering.

use criterion::{criterion_group, criterion_main, Criterion};
use gamepilot_core::{FrameView, PixelFormat};
use gamepilot_vision::{classify, propose, ClassifierParams, ProposalParams, Thumb};

fn synthetic(w: u32, h: u32, t: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity((w * h * 4) as usize);
    for y in 0..h {
        for x in 0..w {
            let inside = (x / 160 + y / 90) % 2 == 0;
            let l = if inside { ((x + t) * 3 % 200) as u8 } else { 40 };
            v.extend_from_slice(&[l, l / 2, 255 - l, 0]);
        }
    }
    v
}

fn benches(c: &mut Criterion) {
    let (a, b) = (synthetic(320, 180, 0), synthetic(320, 180, 4));
    let va = FrameView::new(320, 180, 1280, PixelFormat::Bgrx, &a).unwrap_or_else(|| unreachable!());
    let vb = FrameView::new(320, 180, 1280, PixelFormat::Bgrx, &b).unwrap_or_else(|| unreachable!());
    c.bench_function("thumb from 320x180 capture thumbnail", |bn| {
        bn.iter(|| Thumb::from_view(&vb, 160))
    });
    let (ta, tb) = (Thumb::from_view(&va, 160), Thumb::from_view(&vb, 160));
    let p = ClassifierParams::default();
    c.bench_function("classify thumbnails (per frame)", |bn| {
        bn.iter(|| classify(&ta, &tb, &p))
    });
    c.bench_function("thumb + classify from 320x180 (reflex path)", |bn| {
        bn.iter(|| {
            let t = Thumb::from_view(&vb, 160);
            classify(&ta, &t, &p)
        })
    });
    let full = synthetic(1280, 720, 0);
    let vf = FrameView::new(1280, 720, 5120, PixelFormat::Bgrx, &full).unwrap_or_else(|| unreachable!());
    c.bench_function("thumb from full 1280x720 frame", |bn| {
        bn.iter(|| Thumb::from_view(&vf, 160))
    });
    let atlas = gamepilot_sensor::Atlas::new();
    let pp = ProposalParams::default();
    c.bench_function("propose elements 1280x720", |bn| {
        bn.iter(|| propose(&vf, &[], &atlas, &pp))
    });
}

criterion_group! {
    name = vision;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(2));
    targets = benches
}
criterion_main!(vision);
