//! Developer tool: OCR PNGs with both engines and print lines, words and timings.
//! `cargo run --release -p gamepilot-ocr --example ocr_png -- [--int x,y,w,h] IN.png...`

use gamepilot_core::{Frame, MonoTime, Rect};
use gamepilot_ocr::{OcrEngine, PpOcr, TesseractOcr};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut int: Option<Rect> = None;
    if args.first().map(String::as_str) == Some("--int") && args.len() > 1 {
        let v: Vec<i64> = args[1].split(',').filter_map(|s| s.parse().ok()).collect();
        if v.len() == 4 {
            int = Some(Rect::new(v[0] as i32, v[1] as i32, v[2] as u32, v[3] as u32));
        }
        args.drain(..2);
    }
    let which = std::env::var("ENGINES").unwrap_or_else(|_| "ppocr".into());
    let mut engines: Vec<OcrEngine> = Vec::new();
    if which.contains("ppocr") {
        engines.push(OcrEngine::PpOcr(Box::new(PpOcr::new()?)));
    }
    if which.contains("tesseract") {
        engines.push(OcrEngine::Tesseract(TesseractOcr::new()?));
    }
    for input in &args {
        let img = image::open(input)?.to_rgba8();
        let (w, h) = img.dimensions();
        let frame = Frame::from_rgba(w, h, img.into_raw(), MonoTime(0)).ok_or("bad image")?;
        let view = frame.view();
        for e in engines.iter_mut() {
            if let Some(r) = int {
                let t = std::time::Instant::now();
                let v = e.read_integer(&view, r, 0)?;
                println!(
                    "{input} {} integer {v:?} {:.1} ms",
                    e.backend(),
                    t.elapsed().as_secs_f64() * 1e3
                );
                continue;
            }
            let t = std::time::Instant::now();
            let lines = e.lines(&view, view.bounds())?;
            println!(
                "{input} {} {:.0} ms",
                e.backend(),
                t.elapsed().as_secs_f64() * 1e3
            );
            for l in &lines {
                let words: Vec<&str> = l.words.iter().map(|w| w.text.as_str()).collect();
                println!("  {:?} {:?} {:.2} {:?}", l.text, l.bbox, l.confidence, words);
            }
        }
    }
    Ok(())
}
