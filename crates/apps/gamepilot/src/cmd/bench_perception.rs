//! `gamepilot bench perception --window W`: perception costs per frame with the obvious alternative
//! measured in the same run — thumbnail (RENDER-scaled) and sensor-region capture vs full-frame
//! Composite+SHM vs plain GetImage (NFR-PERC-002); classification per frame (NFR-PERC-001); OCR of one
//! region, a `region_integer` read and the full frame, PP-OCR beside tesseract (FR-PERC-004); proposals per frame (FR-PERC-005); the two-stage
//! expensive pass's crop perception vs the one-pass whole frame (FR-GND-005).

use super::common::{now, WindowArgs};
use gamepilot_core::Rect;
use gamepilot_ocr::{default_engine, OcrEngine, PpOcr, TesseractOcr};
use gamepilot_runtime::refine;
use gamepilot_vision::{classify, propose, ClassifierParams, ProposalParams, Thumb};
use gamepilot_x11::WindowCapturer;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: WindowArgs,
    /// Frames per capture/classification method.
    #[arg(long, default_value_t = 200)]
    pub frames: usize,
    /// OCR runs per method (tesseract is slow; a few suffice).
    #[arg(long, default_value_t = 5)]
    pub ocr_runs: usize,
    /// Thumbnail width for the reflex path.
    #[arg(long, default_value_t = 320)]
    pub thumb_width: u16,
    /// OCR region `x,y,w,h` in client pixels (default: a 240x48 box at the top right, where HUDs live).
    #[arg(long)]
    pub region: Option<String>,
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[(((v.len() - 1) as f64) * p).round() as usize]
}

fn line(name: &str, v: &mut [f64]) {
    let (p50, p99) = (pct(v, 0.5), pct(v, 0.99));
    println!("  {name:<44} p50 {p50:>9.3} ms   p99 {p99:>9.3} ms");
}

fn time<T>(n: usize, mut f: impl FnMut() -> anyhow::Result<T>) -> anyhow::Result<Vec<f64>> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(v)
}

fn parse_region(s: &str) -> anyhow::Result<Rect> {
    let p: Vec<i64> = s
        .split(',')
        .map(|x| x.trim().parse::<i64>())
        .collect::<Result<_, _>>()?;
    anyhow::ensure!(
        p.len() == 4 && p[2] > 0 && p[3] > 0,
        "region must be x,y,w,h with positive w,h"
    );
    Ok(Rect::new(p[0] as i32, p[1] as i32, p[2] as u32, p[3] as u32))
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let (x, w) = args.target.resolve()?;
    let mut cap = WindowCapturer::new(&x, w.id)?;
    let full = cap.capture(&x, now())?;
    let (fw, fh) = (full.width, full.height);
    let region = match &args.region {
        Some(s) => parse_region(s)?,
        None => Rect::new(
            fw.saturating_sub(250) as i32,
            10.min(fh as i32),
            240.min(fw),
            48.min(fh),
        ),
    };
    let n = args.frames.max(1);
    println!(
        "perception bench: window 0x{:x} {fw}x{fh}, {n} frames per capture method",
        w.id
    );
    println!("capture (NFR-PERC-002: the reflex tick reads the thumbnail and sensor regions only)");
    let mut thumb = time(n, || Ok(cap.capture_thumbnail(&x, args.thumb_width, now())?))?;
    let t = cap.capture_thumbnail(&x, args.thumb_width, now())?;
    line(
        &format!("thumbnail {}x{} (RENDER scale + SHM)", t.width, t.height),
        &mut thumb,
    );
    if !cap.thumbnail_server_scaled() {
        println!("  note: RENDER scaling unavailable; the thumbnail fell back to a decimated full read");
    }
    let mut reg = time(n, || Ok(cap.capture_region(&x, region, now())?))?;
    line(
        &format!("sensor region {}x{} (SHM)", region.w, region.h),
        &mut reg,
    );
    let mut shm = time(n, || Ok(cap.capture(&x, now())?))?;
    line("full frame Composite + SHM (alternative)", &mut shm);
    let mut plain = time(n, || Ok(cap.capture_plain_getimage(&x, now())?))?;
    line("full frame plain GetImage (alternative)", &mut plain);

    println!("classification (NFR-PERC-001 budget 0.5 ms per frame)");
    let frames: Vec<_> = (0..8)
        .map(|_| cap.capture_thumbnail(&x, args.thumb_width, now()))
        .collect::<Result<_, _>>()?;
    let thumbs: Vec<Thumb> = frames.iter().map(|f| Thumb::from_view(&f.view(), 160)).collect();
    let params = ClassifierParams::default();
    let mut i = 0;
    let mut cls = time(n, || {
        i += 1;
        let t = Thumb::from_view(&frames[i % frames.len()].view(), 160);
        Ok(classify(&thumbs[(i + 1) % thumbs.len()], &t, &params)?)
    })?;
    line(
        "thumb (160 wide) + classify, from the capture thumbnail",
        &mut cls,
    );
    let mut cls_full = time(n.min(50), || {
        let t = Thumb::from_view(&full.view(), 160);
        Ok(classify(&thumbs[0], &t, &params)?)
    })?;
    line("thumb + classify from a full frame (alternative)", &mut cls_full);

    println!("proposals (FR-PERC-005)");
    let atlas = gamepilot_sensor::Atlas::new();
    let pp = ProposalParams::default();
    let mut prop = time(n.min(50), || Ok(propose(&full.view(), &[], &atlas, &pp)))?;
    line(&format!("segmentation proposals {fw}x{fh}"), &mut prop);

    println!("OCR (FR-PERC-004), {} runs each", args.ocr_runs.max(1));
    let view = full.view();
    // The new backbone and the old one side by side, same frame, same region.
    let engines: Vec<(&str, anyhow::Result<OcrEngine>)> = vec![
        (
            "ppocr",
            PpOcr::new()
                .map(|e| OcrEngine::PpOcr(Box::new(e)))
                .map_err(Into::into),
        ),
        (
            "tesseract",
            TesseractOcr::new().map(OcrEngine::Tesseract).map_err(Into::into),
        ),
    ];
    for (name, engine) in engines {
        let mut e = match engine {
            Ok(e) => e,
            Err(err) => {
                println!("  {name}: unavailable ({err:#})");
                continue;
            }
        };
        let mut r_ocr = time(args.ocr_runs.max(1), || Ok(e.lines(&view, region)?))?;
        line(&format!("region {}x{} {name}", region.w, region.h), &mut r_ocr);
        let mut r_int = time(args.ocr_runs.max(1), || Ok(e.read_integer(&view, region, 0)?))?;
        line(
            &format!("region_integer {}x{} {name}", region.w, region.h),
            &mut r_int,
        );
        let mut f_ocr = time(args.ocr_runs.max(1), || Ok(e.lines(&view, view.bounds())?))?;
        line(&format!("full frame {fw}x{fh} {name}"), &mut f_ocr);
    }
    let mut worker = gamepilot_ocr::OcrWorker::spawn()?;
    let _ = worker.text(&view, region)?;
    worker.wait_idle(std::time::Duration::from_secs(20));
    let mut hit = time(n, || Ok(worker.text(&view, region)?))?;
    line("region via worker cache hit (unchanged pixels)", &mut hit);
    let mut ocr = default_engine()?;
    // FR-GND-005: the expensive pass perceives only the crop; the one-pass alternative is the full-frame
    // OCR and proposals above. The model's input sizes per pass are printed beside.
    println!("two-stage grounding (FR-GND-005), {} runs", args.ocr_runs.max(1));
    let lines = ocr.lines(&view, view.bounds())?;
    let whole_obs = gamepilot_vision::Perceiver::new().observe(
        &view,
        now(),
        gamepilot_vision::FrameChange::Scene,
        &lines,
    );
    let whole = refine::WholeFrame {
        view,
        lines: &lines,
        observation: &whole_obs,
    };
    let cheap = refine::cheap_size(view.size());
    let centre = gamepilot_core::Point::new(cheap.w as i32 / 2, cheap.h as i32 / 2);
    let budget = fw as u64 * fh as u64 / 2;
    let mut sizes = None;
    let mut crop = time(args.ocr_runs.max(1), || {
        let cv = refine::observe_crop(&whole, centre, cheap, budget, &mut ocr, &[], now())
            .map_err(|e| anyhow::anyhow!(e))?;
        sizes = Some((cv.crop.region, cv.size(), cv.in_crop.elements.len()));
        Ok(())
    })?;
    line("expensive pass: crop OCR + proposals + magnify", &mut crop);
    if let Some((region, size, marks)) = sizes {
        println!(
            "  model input: cheap pass {}x{} (whole frame), expensive pass {}x{} (crop {}x{} magnified), {} crop marks vs {} whole-frame marks",
            cheap.w, cheap.h, size.w, size.h, region.w, region.h, marks, whole_obs.elements.len()
        );
    }
    cap.close(&x);
    Ok(0)
}
