//! `gamepilot observe`: one observation of a window or an image — OCR text with confidences, element
//! proposals with stable ids, Set-of-Marks image — written as `DIR/observation.json` and `DIR/marks.png`
//! (FR-PERC-004..007). A window's accessibility tree, when it exposes one, adds exact elements (source
//! `accessibility`) within a bound; a skipped probe is reported on stderr and never fails the command
//! (FR-PERC-010).

use super::common::{load_image, now, WindowArgs};
use anyhow::Context as _;
use gamepilot_core::{Frame, LayerRegion};
use gamepilot_ocr::{default_engine, OcrEngine};
use gamepilot_vision::{Candidate, FrameChange, MarkRenderer, Ocr, Perceiver};
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
    /// Do not consult the window's accessibility tree (AT-SPI).
    #[arg(long)]
    pub no_a11y: bool,
    /// Bound of the accessibility probe in milliseconds.
    #[arg(long, default_value_t = 300)]
    pub a11y_timeout_ms: u64,
}

/// Capture the target window once at full resolution, with the game's open popups and dialogs
/// composed over it (their regions returned beside the frame).
pub fn capture_window(target: &WindowArgs) -> anyhow::Result<(Frame, Vec<LayerRegion>)> {
    let (x, w) = target.resolve()?;
    let mut cap = WindowCapturer::new(&x, w.id)?;
    let f = cap
        .capture(&x, now())
        .with_context(|| format!("capturing window 0x{:x}", w.id));
    let layers = cap.layers();
    cap.close(&x);
    Ok((f?, layers))
}

/// Elements of the target window's accessibility tree in the frame's capture space, probed within
/// `timeout`. `Err` says why the probe was skipped (no bus, no tree, timeout …).
pub fn accessibility_candidates(
    target: &WindowArgs,
    frame: &Frame,
    timeout: std::time::Duration,
) -> Result<(Vec<Candidate>, gamepilot_a11y::A11ySnapshot), gamepilot_a11y::A11yError> {
    let (x, w) = target
        .resolve()
        .map_err(|e| gamepilot_a11y::A11yError::Window(format!("{e:#}")))?;
    let t = gamepilot_a11y::A11yTarget::from_window(&x, w.id)?
        .with_capture_size(gamepilot_core::Size::new(frame.width, frame.height));
    let config = gamepilot_a11y::A11yConfig {
        session_bus: None,
        limits: gamepilot_a11y::ProbeLimits {
            timeout,
            ..Default::default()
        },
    };
    let snap = gamepilot_a11y::probe(&t, &config)?;
    Ok((snap.candidates(), snap))
}

/// Observe one frame: OCR (unless disabled), proposals merged with the accessibility tree's elements
/// (whose geometry wins, FR-PERC-010), ids, marks.
pub fn observe_frame(
    frame: &Frame,
    ocr: Option<&mut OcrEngine>,
    font: &Path,
    accessibility: &[Candidate],
) -> anyhow::Result<(gamepilot_vision::Observation, image::RgbaImage)> {
    let view = frame.view();
    let texts = match ocr {
        Some(o) => o.recognize(&view, view.bounds()).context("OCR of the frame")?,
        None => Vec::new(),
    };
    let mut p = Perceiver::new();
    let class = p.classify_view(&view).class;
    debug_assert_eq!(class, FrameChange::Scene);
    let obs = p.observe_with_accessibility(&view, frame.captured_at, class, &texts, accessibility);
    let bytes = std::fs::read(font).with_context(|| format!("reading the mark font {}", font.display()))?;
    let r = MarkRenderer::from_font_bytes(bytes)?;
    let (img, _) = r.render(&view, &obs.elements);
    Ok((obs, img))
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let (frame, layers) = match &args.image {
        Some(p) => (load_image(p)?, Vec::new()),
        None => capture_window(&args.target)?,
    };
    if frame.view().is_all_black() {
        eprintln!("warning: the frame is all black; run `gamepilot doctor --window ...` to find out why");
    }
    let mut ocr = if args.no_ocr {
        None
    } else {
        Some(default_engine()?)
    };
    let mut a11y = Vec::new();
    if args.image.is_none() && !args.no_a11y {
        let bound = std::time::Duration::from_millis(args.a11y_timeout_ms);
        match accessibility_candidates(&args.target, &frame, bound) {
            Ok((c, snap)) => {
                eprintln!(
                    "accessibility: {} elements from the tree ({} nodes, {} ms)",
                    c.len(),
                    snap.nodes_visited,
                    snap.elapsed.as_millis()
                );
                a11y = c;
            }
            Err(e) => eprintln!("accessibility: skipped ({}): {e}", e.reason()),
        }
    }
    let (mut obs, img) = observe_frame(&frame, ocr.as_mut(), &args.font, &a11y)?;
    obs.place_layers(&layers);
    for l in &layers {
        let inside = obs.elements.iter().filter(|e| e.layer == Some(l.layer)).count();
        eprintln!(
            "the game's {} at {:?}: {inside} elements",
            l.layer.as_str(),
            l.rect
        );
    }
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
