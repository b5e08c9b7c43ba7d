//! Developer tool: time PP-OCR's detection alone and detection + recognition on PNGs.
//! `cargo run --release -p gamepilot-ocr --example ppocr_time -- RUNS IN.png...`

use gamepilot_core::{Frame, MonoTime};
use gamepilot_ocr::PpOcr;
use std::time::Instant;

fn p50(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().ok_or("RUNS")?.parse()?;
    let mut ocr = PpOcr::new()?;
    let knob = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<f32>().ok());
    if let Some(v) = knob("DET_THRESH") {
        ocr.det_thresh = v;
    }
    if let Some(v) = knob("BOX_THRESH") {
        ocr.box_thresh = v;
    }
    if let Some(v) = knob("DET_MIN") {
        ocr.det_min_side = v as usize;
    }
    if let Some(v) = knob("DET_MAX") {
        ocr.det_max_side = v as usize;
    }
    for input in args {
        let img = image::open(&input)?.to_rgba8();
        let (w, h) = img.dimensions();
        let frame = Frame::from_rgba(w, h, img.into_raw(), MonoTime(0)).ok_or("bad image")?;
        let view = frame.view();
        let (mut det, mut all) = (Vec::new(), Vec::new());
        let mut n = 0;
        for _ in 0..runs {
            let t = Instant::now();
            n = ocr.boxes(&view, view.bounds())?.len();
            det.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            ocr.lines(&view, view.bounds())?;
            all.push(t.elapsed().as_secs_f64() * 1e3);
        }
        println!(
            "{input} {w}x{h}: {n} boxes, detection p50 {:.0} ms, detection+recognition p50 {:.0} ms",
            p50(det),
            p50(all)
        );
    }
    Ok(())
}
