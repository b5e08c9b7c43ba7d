//! Benchmarks of the sensor evaluator: 32 mixed sensors per reflex tick over a 1280×720 frame (p50/p99,
//! budget 0.5 ms without OCR), and the cost of one `region_fraction` by region size.
//!
//! Run: `cargo bench -p gamepilot-sensor --bench sensors`. The percentile table is printed first, then
//! criterion's own estimates.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a broken fixture should stop it loudly

use criterion::{black_box, BenchmarkId, Criterion};
use gamepilot_core::{FrameView, PixelFormat, Point, Rect, Size, TransformChain};
use gamepilot_sensor::{compile, Atlas, DigitReader, EvalContext, Evaluator, RecognitionCache, Template};
use std::time::Instant;

const W: u32 = 1280;
const H: u32 = 720;

/// A HUD-like BGRX frame: a gradient background, coloured bars, and a textured panel.
fn frame() -> Vec<u8> {
    let mut d = vec![0u8; (W * H * 4) as usize];
    for y in 0..H {
        for x in 0..W {
            let i = ((y * W + x) * 4) as usize;
            let (r, g, b) = match (x, y) {
                (20..=319, 20..=43) => (30, 200, 40),   // health bar (green)
                (20..=219, 50..=65) => (40, 60, 220),   // mana bar (blue)
                (1000..=1200, 20..=60) => (10, 10, 10), // counter background
                (600..=679, 300..=359) => (((x / 4 + y / 3) % 2 * 200) as u8, 180, 60), // panel
                _ => ((x / 5) as u8, (y / 3) as u8, ((x + y) / 8) as u8),
            };
            d[i..i + 4].copy_from_slice(&[b, g, r, 0]);
        }
    }
    d
}

struct Fixed(i64);
impl DigitReader for Fixed {
    fn read_integer(&mut self, _v: FrameView<'_>, _r: Rect, _d: Option<u32>) -> Option<i64> {
        Some(self.0)
    }
}

/// 32 sensors: 12 region_fraction of HUD sizes, 4 region_integer (cached), 4 template_present, 12 derived.
const MIXED: &str = "\
health = region_fraction([20, 20, 300, 24], hue=[90, 150], saturation>0.5)
mana = region_fraction([20, 50, 200, 16], hue=[200, 250], saturation>0.4, value>0.5)
stamina = region_fraction([20, 70, 200, 12], hue=[40, 70])
xp = region_fraction([340, 700, 600, 8], hue=[270, 320], saturation>0.3)
danger_tint = region_fraction([0, 0, 1280, 8], hue=[350, 10], saturation>0.6)
cooldown_1 = region_fraction([400, 640, 48, 48], value<0.3)
cooldown_2 = region_fraction([452, 640, 48, 48], value<0.3)
cooldown_3 = region_fraction([504, 640, 48, 48], value<0.3)
cooldown_4 = region_fraction([556, 640, 48, 48], value<0.3)
minimap_red = region_fraction([1120, 540, 150, 150], hue=[350, 10], saturation>0.5)
boss_bar = region_fraction([440, 40, 400, 12], hue=[0, 20], saturation>0.5, value>0.3)
loading = region_fraction([560, 340, 160, 40], saturation<0.1, value>0.9)
coins = region_integer([1000, 20, 200, 40], digits=6)
gems = region_integer([1000, 62, 120, 30])
level = region_integer([20, 90, 60, 24], digits=3)
ammo = region_integer([1180, 660, 80, 40], digits=3)
in_menu = template_present(\"pause_panel\", 0.9)
dialog = template_present(\"dialog_box\", 0.8)
shop = template_present(\"shop_sign\", 0.85)
quest = template_present(\"quest_marker\", 0.9)
low_health = health < 0.3
took_damage = health < @health
earned = coins > @coins
leveled = level > @level
out_of_ammo = ammo == 0
casting = cooldown_1 > 0.5 or cooldown_2 > 0.5 or cooldown_3 > 0.5 or cooldown_4 > 0.5
menu_open = in_menu or dialog or shop
blocked = menu_open and not earned
fleeing = low_health and took_damage
boss_fight = boss_bar > 0.1 and not in_menu
progress = earned or leveled or quest
stuck = loading > 0.8 and not progress
";

struct Setup {
    px: Vec<u8>,
    atlas: Atlas,
    cache: RecognitionCache,
    ev: Evaluator,
}

fn setup(src: &str) -> Setup {
    let px = frame();
    let view = FrameView::new(W, H, W as usize * 4, PixelFormat::Bgrx, &px).unwrap();
    let mut atlas = Atlas::new();
    atlas.insert(
        "pause_panel",
        Template::from_frame(&view, Rect::new(600, 300, 80, 60), 4).unwrap(),
    );
    atlas.insert(
        "dialog_box",
        Template::from_frame(&view, Rect::new(100, 200, 120, 40), 4).unwrap(),
    );
    atlas.insert(
        "shop_sign",
        Template::from_frame(&view, Rect::new(900, 400, 48, 48), 4).unwrap(),
    );
    atlas.insert(
        "quest_marker",
        Template::from_frame(&view, Rect::new(300, 500, 24, 24), 4).unwrap(),
    );
    let prog = compile(src).unwrap();
    let mut s = Setup {
        px,
        atlas,
        cache: RecognitionCache::default(),
        ev: Evaluator::new(prog, Size::new(W, H)),
    };
    // Warm: read every integer region once, as the worker would have.
    tick(&mut s);
    s.cache.fulfil_all_with(&mut Fixed(42));
    tick(&mut s);
    tick(&mut s);
    s
}

fn tick(s: &mut Setup) -> usize {
    let view = FrameView::new(W, H, W as usize * 4, PixelFormat::Bgrx, &s.px).unwrap();
    let chain = TransformChain::new(Point::new(0, 0), Size::new(W, H));
    let mut ctx = EvalContext {
        frame: view,
        chain,
        atlas: &s.atlas,
        recognition: &mut s.cache,
    };
    s.ev.tick(&mut ctx).len()
}

/// CPU time of this thread (excludes time the scheduler gave to other processes on a loaded machine).
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid pointer we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

/// Wall-clock and thread-CPU p50/p99 of `n` calls, in milliseconds.
fn percentiles(name: &str, mut f: impl FnMut(), n: usize) {
    let mut wall = Vec::with_capacity(n);
    let mut cpu = Vec::with_capacity(n);
    for _ in 0..n {
        let (s, c) = (Instant::now(), thread_cpu());
        f();
        cpu.push(thread_cpu() - c);
        wall.push(s.elapsed().as_secs_f64() * 1e3);
    }
    for t in [&mut wall, &mut cpu] {
        t.sort_by(|a, b| a.total_cmp(b));
    }
    let p = |t: &[f64], q: f64| t[((t.len() - 1) as f64 * q).round() as usize];
    println!(
        "{name:<40} wall p50 {:>8.4} p99 {:>8.4} | cpu p50 {:>8.4} p99 {:>8.4} ms",
        p(&wall, 0.5),
        p(&wall, 0.99),
        p(&cpu, 0.5),
        p(&cpu, 0.99)
    );
}

const SIZES: [(u32, u32); 6] = [(16, 16), (64, 16), (300, 24), (128, 128), (400, 300), (1280, 720)];

fn main() {
    let mut s = setup(MIXED);
    assert_eq!(s.ev.program().len(), 32);
    let undefined: Vec<_> =
        s.ev.program()
            .sensors()
            .iter()
            .zip(s.ev.values())
            .filter(|(_, v)| v.is_undefined())
            .map(|(d, _)| d.name.as_str())
            .collect();
    println!("undefined after warm-up (expected: only @-based on the 2nd tick, none here): {undefined:?}");
    println!("--- sensor evaluation, {W}x{H} BGRX frame (wall clock, and this thread's CPU time) ---");
    percentiles(
        "32 mixed sensors per tick (no OCR)",
        || {
            black_box(tick(&mut s));
        },
        5000,
    );
    for (w, h) in SIZES {
        let src = format!("f = region_fraction([0, 0, {w}, {h}], hue=[90, 150], saturation>0.5, value>0.2)");
        let mut one = setup(&src);
        percentiles(
            &format!("region_fraction {w}x{h} ({} px)", w * h),
            || {
                black_box(tick(&mut one));
            },
            2000,
        );
    }
    let mut c = Criterion::default().configure_from_args();
    c.bench_function("tick_32_mixed_sensors_1280x720", |b| {
        b.iter(|| black_box(tick(&mut s)))
    });
    let mut g = c.benchmark_group("region_fraction_by_size");
    for (w, h) in SIZES {
        let src = format!("f = region_fraction([0, 0, {w}, {h}], hue=[90, 150], saturation>0.5, value>0.2)");
        let mut one = setup(&src);
        g.bench_with_input(BenchmarkId::from_parameter(format!("{w}x{h}")), &(), |b, _| {
            b.iter(|| black_box(tick(&mut one)))
        });
    }
    g.finish();
    c.final_summary();
}
