//! Developer tool: observe a PNG without the gamepilot binary — OCR lines, elements, marks.
//! `cargo run -p gamepilot-ocr --example observe_png -- IN.png OUT_DIR`

use gamepilot_core::{Frame, MonoTime};
use gamepilot_ocr::TesseractOcr;
use gamepilot_vision::{MarkRenderer, Ocr, Perceiver};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (input, out) = match (args.get(1), args.get(2)) {
        (Some(i), Some(o)) => (i, o),
        _ => return Err("usage: observe_png IN.png OUT_DIR".into()),
    };
    let img = image::open(input)?.to_rgba8();
    let (w, h) = img.dimensions();
    let frame = Frame::from_rgba(w, h, img.into_raw(), MonoTime(0)).ok_or("bad image")?;
    let view = frame.view();
    let t = std::time::Instant::now();
    let mut ocr = TesseractOcr::new()?;
    let texts = ocr.recognize(&view, view.bounds())?;
    let ocr_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut p = Perceiver::new();
    let class = p.classify_view(&view).class;
    let t = std::time::Instant::now();
    let obs = p.observe(&view, MonoTime(0), class, &texts);
    let prop_ms = t.elapsed().as_secs_f64() * 1e3;
    std::fs::create_dir_all(out)?;
    std::fs::write(
        format!("{out}/observation.json"),
        serde_json::to_string_pretty(&obs)?,
    )?;
    let r = MarkRenderer::from_font_bytes(std::fs::read(
        "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
    )?)?;
    let (marks, _) = r.render(&view, &obs.elements);
    marks.save(format!("{out}/marks.png"))?;
    println!("ocr {ocr_ms:.1} ms, proposals {prop_ms:.1} ms");
    for t in &obs.texts {
        println!("text {:?} {:?} {:.2}", t.text, t.bbox, t.confidence);
    }
    for e in &obs.elements {
        println!(
            "el {} {:?} {:.2} {} {:?}",
            e.id,
            e.bbox,
            e.confidence,
            e.source.as_str(),
            e.label
        );
    }
    Ok(())
}
