//! `gamepilot observe`: one observation of a window or an image — OCR text with confidences, element
//! proposals with stable ids, Set-of-Marks image — written as `DIR/observation.json` and `DIR/marks.png`
//! (FR-PERC-004..007).

use super::common::{load_image, now, WindowArgs};
use anyhow::Context as _;
use gamepilot_core::Frame;
use gamepilot_ocr::TesseractOcr;
use gamepilot_vision::{FrameClass, MarkRenderer, Ocr, Perceiver};
use gamepilot_x11::WindowCapturer;
use std::path::{Path, PathBuf};

/// The font the marks are drawn with unless `--font` names another.
pub const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: WindowArgs,
    /// Observe a saved image (PNG) instead of a window.
    #[arg(long, conflicts_with_all = ["window", "pid"])]
    pub image: Option<PathBuf>,
    /// Output directory (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Skip OCR (elements from segmentation only).
    #[arg(long)]
    pub no_ocr: bool,
    /// TrueType font for the mark numbers.
    #[arg(long, default_value = DEFAULT_FONT)]
    pub font: PathBuf,
}

/// Capture the target window once at full resolution.
pub fn capture_window(target: &WindowArgs) -> anyhow::Result<Frame> {
    let (x, w) = target.resolve()?;
    let mut cap = WindowCapturer::new(&x, w.id)?;
    let f = cap
        .capture(&x, now())
        .with_context(|| format!("capturing window 0x{:x}", w.id));
    cap.close(&x);
    f
}

/// Observe one frame: OCR (unless disabled), proposals, ids, marks.
pub fn observe_frame(
    frame: &Frame,
    ocr: Option<&mut TesseractOcr>,
    font: &Path,
) -> anyhow::Result<(gamepilot_vision::Observation, image::RgbaImage)> {
    let view = frame.view();
    let texts = match ocr {
        Some(o) => o.recognize(&view, view.bounds()).context("OCR of the frame")?,
        None => Vec::new(),
    };
    let mut p = Perceiver::new();
    let class = p.classify_view(&view).class;
    debug_assert_eq!(class, FrameClass::Scene);
    let obs = p.observe(&view, frame.captured_at, class, &texts);
    let bytes = std::fs::read(font).with_context(|| format!("reading the mark font {}", font.display()))?;
    let r = MarkRenderer::from_font_bytes(bytes)?;
    let (img, _) = r.render(&view, &obs.elements);
    Ok((obs, img))
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let frame = match &args.image {
        Some(p) => load_image(p)?,
        None => capture_window(&args.target)?,
    };
    if frame.view().is_all_black() {
        eprintln!("warning: the frame is all black; run `gamepilot doctor --window ...` to find out why");
    }
    let mut ocr = if args.no_ocr {
        None
    } else {
        Some(TesseractOcr::new()?)
    };
    let (obs, img) = observe_frame(&frame, ocr.as_mut(), &args.font)?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let json = serde_json::to_string_pretty(&obs)?;
    std::fs::write(args.out.join("observation.json"), json + "\n")
        .with_context(|| format!("writing {}", args.out.join("observation.json").display()))?;
    img.save(args.out.join("marks.png"))
        .with_context(|| format!("writing {}", args.out.join("marks.png").display()))?;
    println!(
        "observed {}x{}: {} text lines, {} elements -> {}",
        obs.frame_size.w,
        obs.frame_size.h,
        obs.texts.len(),
        obs.elements.len(),
        args.out.display()
    );
    Ok(0)
}
