//! `gamepilot capture`: capture one window (never the desktop, FR-PERC-001) to a PNG; and its benchmark.

use super::common::{now, save_png, WindowArgs};
use anyhow::Context as _;
use gamepilot_session::eval::percentile;
use gamepilot_x11::WindowCapturer;
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: WindowArgs,
    /// Output PNG path.
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let (x, w) = args.target.resolve()?;
    let mut cap = WindowCapturer::new(&x, w.id)?;
    let frame = cap
        .capture(&x, now())
        .with_context(|| format!("capturing window 0x{:x}", w.id))?;
    if frame.view().is_all_black() {
        eprintln!(
            "warning: the captured frame is all black (a GL window without a compositor, exclusive fullscreen, or a window not yet drawn); run `gamepilot doctor`"
        );
    }
    save_png(&frame, &args.out)?;
    println!(
        "captured 0x{:x} {}x{} -> {}",
        w.id,
        frame.width,
        frame.height,
        args.out.display()
    );
    cap.close(&x);
    Ok(0)
}

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub target: WindowArgs,
    /// Frames to capture per method.
    #[arg(long, default_value_t = 200)]
    pub frames: usize,
}

/// Time Composite+SHM capture against plain GetImage in the same run.
pub fn bench(args: BenchArgs) -> anyhow::Result<i32> {
    let (x, w) = args.target.resolve()?;
    let mut cap = WindowCapturer::new(&x, w.id)?;
    let mut shm = Vec::with_capacity(args.frames);
    let mut plain = Vec::with_capacity(args.frames);
    for _ in 0..args.frames {
        let t = Instant::now();
        cap.capture(&x, now())?;
        shm.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        cap.capture_plain_getimage(&x, now())?;
        plain.push(t.elapsed().as_secs_f64() * 1e3);
    }
    for v in [&mut shm, &mut plain] {
        v.sort_by(|a, b| a.total_cmp(b));
    }
    println!(
        "capture {}x{} ({} frames each)",
        w.geometry.w, w.geometry.h, args.frames
    );
    println!(
        "  composite+shm full frame: p50 {:.3} ms  p99 {:.3} ms",
        percentile(&shm, 0.5),
        percentile(&shm, 0.99)
    );
    println!(
        "  plain GetImage full frame: p50 {:.3} ms  p99 {:.3} ms",
        percentile(&plain, 0.5),
        percentile(&plain, 0.99)
    );
    cap.close(&x);
    Ok(0)
}
