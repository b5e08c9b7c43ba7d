//! PP-OCR (FR-PERC-004): PaddleOCR's DB text detector and SVTR recogniser (PP-OCRv4, the ONNX files of the
//! `rapidocr-onnxruntime` wheel) run through ONNX Runtime. Detection gives text boxes with a confidence;
//! recognition decodes CTC over the dictionary stored in the recognition model's metadata, and splits
//! words at spaces and at wide gaps between characters. `read_integer` recognises a counter's region
//! directly, digits only, confidence-gated.

use crate::models::{runtime, verified_files, ModelFiles};
use crate::OcrError;
use gamepilot_core::{FrameView, Rect};
use gamepilot_vision::{Ocr, TextLine, TextWord, VisionError};
use ort::session::Session;
use ort::value::Tensor;

/// Recognition input height of PP-OCRv4.
const REC_H: usize = 48;
/// Crops per recognition batch.
const REC_BATCH: usize = 6;
/// Detected lines are padded to at least this many input columns. PaddleOCR pads to 320; on the corpus
/// 160 reads as well (recall 0.954, precision 0.933 at both; 96 loses precision) and a HUD of short words
/// costs a third less (the practice game's play screen: 499 → 378 ms for the whole frame).
const LINE_MIN_W: usize = 160;
/// A region smaller than the detector's preferred size is enlarged at most this much (a 140×68 sensor
/// region would otherwise be enlarged 6.9× to 960×466 for a handful of glyphs).
const DET_MAX_ENLARGE: f32 = 3.0;

/// An RGB copy of a region (row-major, 3 bytes a pixel).
pub(crate) struct Rgb {
    pub w: usize,
    pub h: usize,
    pub px: Vec<u8>,
}

impl Rgb {
    /// Copy `region` (clamped to the frame) out of `view`; an empty image when nothing is left.
    pub fn from_view(view: &FrameView<'_>, region: Rect) -> Rgb {
        let Some(r) = region.clamped_to(&view.bounds()) else {
            return Rgb {
                w: 0,
                h: 0,
                px: Vec::new(),
            };
        };
        let (w, h) = (r.w as usize, r.h as usize);
        let mut px = Vec::with_capacity(w * h * 3);
        for y in 0..r.h {
            for x in 0..r.w {
                px.extend_from_slice(&view.rgb(r.x as u32 + x, r.y as u32 + y));
            }
        }
        Rgb { w, h, px }
    }

    fn get(&self, x: usize, y: usize) -> [u8; 3] {
        let i = (y * self.w + x) * 3;
        match self.px.get(i..i + 3) {
            Some(p) => [p[0], p[1], p[2]],
            None => [0, 0, 0],
        }
    }
}

/// Bilinear resample of `src`'s sub-rectangle (`sx, sy, sw, sh`) to `ow × oh`, written as normalised BGR
/// planes (`(v/255 - 0.5) / 0.5`) into `out` (3 planes of `stride × oh`, left-aligned).
#[allow(clippy::too_many_arguments)]
pub(crate) fn resample_into(
    src: &Rgb,
    (sx, sy, sw, sh): (usize, usize, usize, usize),
    ow: usize,
    oh: usize,
    out: &mut [f32],
    stride: usize,
    plane: usize,
) {
    if src.w == 0 || src.h == 0 || sw == 0 || sh == 0 || ow == 0 || oh == 0 {
        return;
    }
    let (fx, fy) = (sw as f32 / ow as f32, sh as f32 / oh as f32);
    let cols: Vec<(usize, usize, f32)> = (0..ow)
        .map(|x| {
            let s = ((x as f32 + 0.5) * fx - 0.5).max(0.0);
            let x0 = (s as usize).min(sw - 1);
            let x1 = (x0 + 1).min(sw - 1);
            (sx + x0, sx + x1, s - x0 as f32)
        })
        .collect();
    for y in 0..oh {
        let s = ((y as f32 + 0.5) * fy - 0.5).max(0.0);
        let y0 = (s as usize).min(sh - 1);
        let y1 = (y0 + 1).min(sh - 1);
        let wy = s - y0 as f32;
        for (x, &(x0, x1, wx)) in cols.iter().enumerate() {
            let (a, b) = (src.get(x0, sy + y0), src.get(x1, sy + y0));
            let (c, d) = (src.get(x0, sy + y1), src.get(x1, sy + y1));
            for ch in 0..3 {
                let top = a[ch] as f32 * (1.0 - wx) + b[ch] as f32 * wx;
                let bot = c[ch] as f32 * (1.0 - wx) + d[ch] as f32 * wx;
                let v = top * (1.0 - wy) + bot * wy;
                // BGR planes, as PaddleOCR feeds OpenCV images.
                let i = (2 - ch) * plane + y * stride + x;
                if let Some(o) = out.get_mut(i) {
                    *o = v / 127.5 - 1.0;
                }
            }
        }
    }
}

/// One recognised crop: text, mean character confidence and, per kept character, its CTC step.
#[derive(Debug, Clone, PartialEq)]
struct Decoded {
    chars: Vec<(String, usize, f32)>,
    steps: usize,
    /// Width of the crop in the recogniser's input, in pixels.
    scaled_w: usize,
    /// Input pixels per CTC step.
    px_per_step: f32,
}

/// A detected text box with the detector's mean probability inside it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TextBox {
    pub bbox: Rect,
    pub score: f32,
}

/// PP-OCRv4 detection + recognition over ONNX Runtime.
pub struct PpOcr {
    det: Session,
    rec: Session,
    /// CTC classes: 0 is the blank, then the model's dictionary, then a space.
    classes: Vec<String>,
    digits: Vec<(usize, char)>,
    /// Lines below this mean character confidence (0..1) are dropped.
    pub min_confidence: f32,
    /// The detector's input is scaled so its longer side is at most this...
    pub det_max_side: usize,
    /// ...and, within that, its shorter side at least this.
    pub det_min_side: usize,
    /// Binarisation threshold of the detector's probability map.
    pub det_thresh: f32,
    /// Boxes whose mean probability is below this are dropped.
    pub box_thresh: f32,
    /// Counters read below this mean confidence are undefined.
    pub integer_min_confidence: f32,
    /// Look for lone glyphs the detector missed (compass letters, a single "0" beside its label).
    pub lone_glyphs: bool,
    /// A lone glyph's reading is kept at this mean character confidence or above.
    pub glyph_min_confidence: f32,
}

fn ort_err(what: &str) -> impl Fn(ort::Error) -> OcrError + '_ {
    move |e| OcrError::Runtime(format!("{what}: {e}"))
}

/// A session over a model's verified bytes (never re-read from its path).
fn session(
    env: &ort::environment::Environment,
    path: &std::path::Path,
    bytes: &[u8],
    threads: usize,
) -> Result<Session, OcrError> {
    let what = path.display().to_string();
    let b = Session::builder(env).map_err(ort_err(&what))?;
    // No spinning: an idle intra-op thread otherwise busy-waits after each parallel section, taking the
    // CPU the tactical model host needs on 2 cores (measured in the demo: a third of the agent's own CPU
    // time was ONNX Runtime's wait loop while the host evaluated its prompt).
    let b = b
        .with_intra_threads(threads)
        .map_err(|e| OcrError::Runtime(format!("{what}: {e}")))?;
    let mut b = b
        .with_intra_op_spinning(false)
        .map_err(|e| OcrError::Runtime(format!("{what}: {e}")))?;
    b.commit_from_memory(bytes).map_err(ort_err(&what))
}

impl PpOcr {
    /// Load the verified files from the cache (`scripts/setup-ocr.sh` puts them there).
    pub fn new() -> Result<PpOcr, OcrError> {
        let files = verified_files()?;
        PpOcr::from_files(&files)
    }

    /// Load from already-verified files.
    pub fn from_files(files: &ModelFiles) -> Result<PpOcr, OcrError> {
        let env = runtime(files)?;
        let threads = std::thread::available_parallelism()
            .map(|n| n.get().min(4))
            .unwrap_or(2);
        let det = session(env, &files.det, &files.det_bytes, threads)?;
        let rec = session(env, &files.rec, &files.rec_bytes, threads)?;
        let dict = rec
            .metadata()
            .map_err(ort_err("reading the recogniser's metadata"))?
            .custom("character")
            .ok_or_else(|| OcrError::Runtime("the recogniser has no 'character' dictionary".into()))?;
        let mut classes = vec![String::new()];
        classes.extend(dict.lines().map(|s| s.to_string()));
        classes.push(" ".into());
        let digits = classes
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let mut c = s.chars();
                match (c.next(), c.next()) {
                    (Some(ch), None) if ch.is_ascii_digit() || ch == '-' => Some((i, ch)),
                    // A lone "0" in a counter is often read as the letter O; in a digits-only read it is 0.
                    (Some('O' | 'o'), None) => Some((i, '0')),
                    _ => None,
                }
            })
            .collect();
        Ok(PpOcr {
            det,
            rec,
            classes,
            digits,
            min_confidence: 0.6,
            // 960 reads the corpus (frames 533–1280 wide) as well as 1280 did (recall 0.954 vs 0.950,
            // precision 0.934 vs 0.938) at 55% of the detector's pixels.
            det_max_side: 960,
            det_min_side: 736,
            det_thresh: 0.3,
            box_thresh: 0.5,
            integer_min_confidence: 0.7,
            lone_glyphs: true,
            glyph_min_confidence: 0.9,
        })
    }

    /// Text boxes of `img` (in its coordinates), top to bottom, left to right.
    fn detect(&mut self, img: &Rgb) -> Result<Vec<TextBox>, OcrError> {
        if img.w < 4 || img.h < 4 {
            return Ok(Vec::new());
        }
        // PaddleOCR's `limit_type: min`: small frames are enlarged until their shorter side reaches
        // `det_min_side` (small HUD and menu fonts need it), and no side exceeds `det_max_side`.
        let (longer, shorter) = (img.w.max(img.h) as f32, img.w.min(img.h) as f32);
        let mut ratio = (self.det_min_side as f32 / shorter).clamp(1.0, DET_MAX_ENLARGE);
        if longer * ratio > self.det_max_side as f32 {
            ratio = self.det_max_side as f32 / longer;
        }
        let round32 = |v: usize| (((v as f32 * ratio) / 32.0).round() as usize).max(1) * 32;
        let (dw, dh) = (round32(img.w), round32(img.h));
        let plane = dw * dh;
        let mut input = vec![0f32; 3 * plane];
        resample_into(img, (0, 0, img.w, img.h), dw, dh, &mut input, dw, plane);
        let t = Tensor::from_array(([1usize, 3, dh, dw], input)).map_err(ort_err("detector input"))?;
        let out = self.det.run(ort::inputs![t]).map_err(ort_err("detector"))?;
        let (_, prob) = out[0]
            .try_extract_tensor::<f32>()
            .map_err(ort_err("detector output"))?;
        if prob.len() < plane {
            return Err(OcrError::Runtime(format!(
                "detector output has {} values, expected {plane}",
                prob.len()
            )));
        }
        let boxes = db_boxes(&prob[..plane], dw, dh, self.det_thresh, self.box_thresh);
        let (sx, sy) = (img.w as f32 / dw as f32, img.h as f32 / dh as f32);
        let mut out: Vec<TextBox> = boxes
            .into_iter()
            .filter_map(|(x0, y0, x1, y1, score)| {
                let bx0 = (x0 * sx).floor().max(0.0) as i32;
                let by0 = (y0 * sy).floor().max(0.0) as i32;
                let bx1 = ((x1 * sx).ceil() as i32).min(img.w as i32);
                let by1 = ((y1 * sy).ceil() as i32).min(img.h as i32);
                (bx1 > bx0 && by1 > by0).then(|| TextBox {
                    bbox: Rect::new(bx0, by0, (bx1 - bx0) as u32, (by1 - by0) as u32),
                    score,
                })
            })
            .collect();
        out.sort_by_key(|b| (b.bbox.y / 8, b.bbox.x));
        Ok(out)
    }

    /// Run the recogniser on `n` crops of `REC_H × bw` (normalised BGR planes): per-step class
    /// probabilities, CTC steps per crop and classes per step.
    fn run_recogniser(
        &mut self,
        input: Vec<f32>,
        n: usize,
        bw: usize,
    ) -> Result<(Vec<f32>, usize, usize), OcrError> {
        let t = Tensor::from_array(([n, 3, REC_H, bw], input)).map_err(ort_err("recogniser input"))?;
        let res = self.rec.run(ort::inputs![t]).map_err(ort_err("recogniser"))?;
        let (shape, probs) = res[0]
            .try_extract_tensor::<f32>()
            .map_err(ort_err("recogniser output"))?;
        let dims: Vec<i64> = shape.iter().copied().collect();
        match dims.as_slice() {
            [_, t, c] => Ok((probs.to_vec(), *t as usize, *c as usize)),
            _ => Err(OcrError::Runtime(format!("recogniser output shape {dims:?}"))),
        }
    }

    /// Recognise crops of `img`; `min_w` is the smallest batch width (PaddleOCR pads to 320).
    fn recognise(
        &mut self,
        img: &Rgb,
        boxes: &[Rect],
        min_w: usize,
        digits_only: bool,
    ) -> Result<Vec<Decoded>, OcrError> {
        let ratio = |r: &Rect| r.w as f32 / r.h.max(1) as f32;
        let widths: Vec<usize> = boxes
            .iter()
            .map(|r| ((REC_H as f32 * ratio(r)).ceil() as usize).clamp(8, 2400))
            .collect();
        let mut out: Vec<Option<Decoded>> = vec![None; boxes.len()];
        for batch in width_batches(&widths, min_w) {
            let bw = batch
                .iter()
                .map(|&i| widths[i])
                .max()
                .unwrap_or(min_w)
                .max(min_w)
                .div_ceil(8)
                * 8;
            let widths: Vec<usize> = batch.iter().map(|&i| widths[i]).collect();
            let plane = REC_H * bw;
            let mut input = vec![0f32; batch.len() * 3 * plane];
            for (k, (&i, &w)) in batch.iter().zip(&widths).enumerate() {
                let r = boxes[i];
                resample_into(
                    img,
                    (
                        r.x.max(0) as usize,
                        r.y.max(0) as usize,
                        r.w as usize,
                        r.h as usize,
                    ),
                    w.min(bw),
                    REC_H,
                    &mut input[k * 3 * plane..(k + 1) * 3 * plane],
                    bw,
                    plane,
                );
            }
            let (probs, steps, ncls) = self.run_recogniser(input, batch.len(), bw)?;
            for (k, (&i, &w)) in batch.iter().zip(&widths).enumerate() {
                let p = probs.get(k * steps * ncls..(k + 1) * steps * ncls).unwrap_or(&[]);
                let mut d = ctc(&self.classes, &self.digits, p, steps, ncls, digits_only);
                d.scaled_w = w.min(bw);
                d.px_per_step = bw as f32 / steps.max(1) as f32;
                // Steps past the crop's own width saw only padding.
                let last = (d.scaled_w * steps).div_ceil(bw.max(1));
                d.chars.retain(|c| c.1 <= last + 1);
                out[i] = Some(d);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }
}

/// Padding columns before, between and after the crops of a packed strip (a multiple of the recogniser's
/// 8 input columns per CTC step, so each crop's steps start on a step boundary).
const PACK_SEP: usize = 32;
/// Widest packed strip, in input columns.
const PACK_MAX: usize = 1280;

impl PpOcr {
    /// Recognise crops of `img` side by side in strips separated by padding, so short crops are read at the
    /// recogniser's training width for the price of their own widths (six glyphs padded to 320 columns each
    /// cost 1,920 columns; packed, about their sum). Each crop's result holds the characters decoded over
    /// its part of the strip, with steps counted from the crop's own start. Used for lone glyphs only: the
    /// recogniser reads across the strip, and packed words confused letters with digits ("1oo" for "100";
    /// corpus recall 0.871 and precision 0.860 with words packed, 0.954 and 0.933 without).
    fn recognise_packed(&mut self, img: &Rgb, crops: &[Rect]) -> Result<Vec<Decoded>, OcrError> {
        let widths: Vec<usize> = crops
            .iter()
            .map(|r| {
                let w = (REC_H as f32 * r.w as f32 / r.h.max(1) as f32).ceil() as usize;
                w.clamp(8, PACK_MAX - 2 * PACK_SEP).div_ceil(8) * 8
            })
            .collect();
        let mut out: Vec<Decoded> = Vec::with_capacity(crops.len());
        let mut start = 0;
        while start < crops.len() {
            // One strip: as many crops as fit in PACK_MAX columns (at least one).
            let mut end = start;
            let mut x = PACK_SEP;
            let mut offsets = Vec::new();
            while end < crops.len() && (end == start || x + widths[end] + PACK_SEP <= PACK_MAX) {
                offsets.push(x);
                x += widths[end] + PACK_SEP;
                end += 1;
            }
            let bw = x.max(320).div_ceil(8) * 8;
            let plane = REC_H * bw;
            let mut input = vec![0f32; 3 * plane];
            for k in start..end {
                let (r, off) = (crops[k], offsets[k - start]);
                if let Some(slot) = input.get_mut(off..) {
                    let src = (
                        r.x.max(0) as usize,
                        r.y.max(0) as usize,
                        r.w as usize,
                        r.h as usize,
                    );
                    resample_into(img, src, widths[k], REC_H, slot, bw, plane);
                }
            }
            let (probs, steps, ncls) = self.run_recogniser(input, 1, bw)?;
            let strip = ctc(&self.classes, &self.digits, &probs, steps, ncls, false);
            let px_per_step = bw as f32 / steps.max(1) as f32;
            for k in start..end {
                let (off, w) = (offsets[k - start], widths[k]);
                let first_step = (off as f32 / px_per_step) as usize;
                let chars = strip
                    .chars
                    .iter()
                    .filter(|c| {
                        let cx = (c.1 as f32 + 0.5) * px_per_step;
                        cx >= off as f32 - 6.0 && cx <= (off + w) as f32 + 6.0
                    })
                    .map(|c| (c.0.clone(), c.1.saturating_sub(first_step), c.2))
                    .collect();
                out.push(Decoded {
                    chars,
                    steps: (w as f32 / px_per_step).ceil() as usize,
                    scaled_w: w,
                    px_per_step,
                });
            }
            start = end;
        }
        Ok(out)
    }

    /// Recognise lone-glyph candidates (boxes of `img`), each grown by DB's unclip margin, packed into
    /// strips; a reading is kept when it is one to three letters or digits at `glyph_min_confidence`.
    fn read_glyphs(&mut self, img: &Rgb, glyphs: &[Rect]) -> Result<Vec<Option<(String, f32)>>, OcrError> {
        let bounds = Rect::new(0, 0, img.w as u32, img.h as u32);
        let crops: Vec<Rect> = glyphs
            .iter()
            .map(|g| {
                let d = ((g.area() as f32 * 1.6) / (2.0 * (g.w + g.h) as f32))
                    .max(2.0)
                    .round() as u32;
                Rect::new(g.x - d as i32, g.y - d as i32, g.w + 2 * d, g.h + 2 * d)
                    .clamped_to(&bounds)
                    .unwrap_or(*g)
            })
            .collect();
        Ok(self
            .recognise_packed(img, &crops)?
            .into_iter()
            .map(|d| {
                let kept: Vec<&(String, usize, f32)> =
                    d.chars.iter().filter(|c| !c.0.trim().is_empty()).collect();
                let text: String = kept.iter().map(|c| c.0.as_str()).collect();
                let conf = kept.iter().map(|c| c.2).sum::<f32>() / kept.len().max(1) as f32;
                let ok = (1..=3).contains(&kept.len())
                    && text.chars().all(|c| c.is_alphanumeric())
                    && conf >= self.glyph_min_confidence;
                // A lone round glyph beside a label is a counter's zero far more often than the letter O.
                let text = if text == "O" || text == "o" {
                    "0".to_string()
                } else {
                    text
                };
                ok.then_some((text, conf))
            })
            .collect())
    }
}

/// Batches of crop indices (at most `REC_BATCH` each) in order of width, such that no crop in a batch is
/// padded past `PAD_SLACK` times its own padded width: the recogniser's cost grows with the batch's
/// widest input, so one long line must not make every short word pay for its width. Each crop is padded
/// to at least `min_w` (the recogniser reads a short crop better padded to its training width).
fn width_batches(widths: &[usize], min_w: usize) -> Vec<Vec<usize>> {
    /// How much wider than a crop's own padded width its batch may be.
    const PAD_SLACK: f32 = 1.3;
    let mut order: Vec<usize> = (0..widths.len()).collect();
    order.sort_by_key(|&i| widths[i]);
    let mut batches: Vec<Vec<usize>> = Vec::new();
    let mut first_w = 0usize;
    for i in order {
        let w = widths[i].max(min_w);
        match batches.last_mut() {
            Some(b) if b.len() < REC_BATCH && w as f32 <= first_w as f32 * PAD_SLACK => b.push(i),
            _ => {
                batches.push(vec![i]);
                first_w = w;
            }
        }
    }
    batches
}

/// Greedy CTC: best class per step, repeats merged, blanks dropped.
fn ctc(
    classes: &[String],
    digit_classes: &[(usize, char)],
    p: &[f32],
    steps: usize,
    ncls: usize,
    digits_only: bool,
) -> Decoded {
    {
        let mut chars = Vec::new();
        let mut prev = 0usize;
        for t in 0..steps {
            let row = p.get(t * ncls..(t + 1) * ncls).unwrap_or(&[]);
            let (best, prob) = if digits_only {
                // Only the blank and the digit classes compete; a letter's mass is lost, which lowers the
                // confidence of a non-number instead of turning it into digits.
                let mut best = (0usize, row.first().copied().unwrap_or(0.0));
                for &(i, _) in digit_classes {
                    if let Some(&v) = row.get(i) {
                        if v > best.1 {
                            best = (i, v);
                        }
                    }
                }
                // A step where some other class dominates counts as a non-digit mark.
                let top = row.iter().copied().fold(0.0f32, f32::max);
                if best.0 == 0 && top > best.1 + 0.5 {
                    (usize::MAX, 0.0)
                } else {
                    best
                }
            } else {
                row.iter()
                    .enumerate()
                    .fold((0usize, f32::MIN), |b, (i, &v)| if v > b.1 { (i, v) } else { b })
            };
            if best == usize::MAX {
                chars.push(("?".to_string(), t, 0.0));
                prev = best;
                continue;
            }
            if best != 0 && best != prev {
                let digit = digit_classes
                    .iter()
                    .find(|d| d.0 == best)
                    .map(|d| d.1.to_string());
                if let Some(s) = if digits_only {
                    digit
                } else {
                    classes.get(best).cloned()
                } {
                    chars.push((s, t, prob));
                }
            }
            prev = best;
        }
        Decoded {
            chars,
            steps,
            scaled_w: 0,
            px_per_step: 8.0,
        }
    }
}

impl PpOcr {
    /// Words of a decoded crop placed in frame coordinates (`bbox` is the crop's box in the frame).
    fn words(&self, d: &Decoded, bbox: Rect) -> Vec<TextWord> {
        // Each CTC step covers a fixed slice of the recogniser's input; map it back to the frame.
        let step = d.px_per_step * bbox.w as f32 / d.scaled_w.max(1) as f32;
        let gaps: Vec<usize> = d.chars.windows(2).map(|w| w[1].1 - w[0].1).collect();
        let mut sorted = gaps.clone();
        sorted.sort_unstable();
        let median = sorted.get(sorted.len() / 2).copied().unwrap_or(2).max(1);
        let wide = (median * 5 / 2).max(median + 3);
        // Digits are evenly spaced within a number (tabular figures), so between two digits a gap well
        // over the usual digit spacing separates two numbers that stand side by side (Doom's AMMO and
        // HEALTH counters a panel border apart read as "50100%").
        let is_digit = |c: &(String, usize, f32)| c.0.chars().all(|ch| ch.is_ascii_digit());
        let mut digit_gaps: Vec<usize> = d
            .chars
            .windows(2)
            .filter(|w| is_digit(&w[0]) && is_digit(&w[1]))
            .map(|w| w[1].1 - w[0].1)
            .collect();
        digit_gaps.sort_unstable();
        let digit_wide = digit_gaps
            .get(digit_gaps.len() / 2)
            .map(|&m| (m * 3).div_ceil(2).max(m + 2));
        let mut groups: Vec<Vec<&(String, usize, f32)>> = vec![Vec::new()];
        for (k, c) in d.chars.iter().enumerate() {
            let gap = gaps.get(k.wrapping_sub(1)).copied().unwrap_or(0);
            let numbers_apart = k > 0
                && digit_gaps.len() >= 2
                && is_digit(&d.chars[k - 1])
                && is_digit(c)
                && digit_wide.is_some_and(|w| gap >= w);
            let gap_break = k > 0 && (gap >= wide || numbers_apart);
            if c.0.trim().is_empty() || gap_break {
                if groups.last().is_some_and(|g| !g.is_empty()) {
                    groups.push(Vec::new());
                }
                if c.0.trim().is_empty() {
                    continue;
                }
            }
            if let Some(g) = groups.last_mut() {
                g.push(c);
            }
        }
        groups
            .into_iter()
            .filter(|g| !g.is_empty())
            .filter_map(|g| {
                let text: String = g.iter().map(|c| c.0.as_str()).collect();
                let conf = g.iter().map(|c| c.2).sum::<f32>() / g.len() as f32;
                let t0 = g.first()?.1 as f32;
                let t1 = g.last()?.1 as f32;
                let x0 = (bbox.x as f32 + (t0 - 0.5).max(0.0) * step).floor() as i64;
                let x1 = (bbox.x as f32 + (t1 + 1.5) * step).ceil() as i64;
                let x0 = x0.clamp(bbox.x as i64, bbox.right() - 1);
                let x1 = x1.clamp(x0 + 1, bbox.right());
                Some(TextWord {
                    text,
                    bbox: Rect::new(x0 as i32, bbox.y, (x1 - x0) as u32, bbox.h),
                    confidence: conf,
                })
            })
            .collect()
    }

    /// Text boxes of `region` in frame coordinates (detection only).
    pub fn boxes(&mut self, view: &FrameView<'_>, region: Rect) -> Result<Vec<TextBox>, OcrError> {
        let region = crate::engine::check_region(view, region)?;
        let img = Rgb::from_view(view, region);
        Ok(self
            .detect(&img)?
            .into_iter()
            .map(|b| TextBox {
                bbox: Rect::new(b.bbox.x + region.x, b.bbox.y + region.y, b.bbox.w, b.bbox.h),
                score: b.score,
            })
            .collect())
    }

    /// Recognise text lines in `region` of `view` (boxes in frame coordinates, wholly inside the region).
    pub fn lines(&mut self, view: &FrameView<'_>, region: Rect) -> Result<Vec<TextLine>, OcrError> {
        let region = crate::engine::check_region(view, region)?;
        let img = Rgb::from_view(view, region);
        let boxes = self.detect(&img)?;
        let rects: Vec<Rect> = boxes.iter().map(|b| b.bbox).collect();
        let decoded = self.recognise(&img, &rects, LINE_MIN_W, false)?;
        let mut lines = Vec::new();
        if self.lone_glyphs {
            let glyphs = crate::glyphs::lone_glyphs(&img.px, img.w, img.h, &rects, &Default::default());
            if !glyphs.is_empty() {
                for (g, read) in glyphs.iter().zip(self.read_glyphs(&img, &glyphs)?) {
                    let Some((text, confidence)) = read else {
                        continue;
                    };
                    let bbox = Rect::new(g.x + region.x, g.y + region.y, g.w, g.h);
                    lines.extend(TextLine::from_words(vec![TextWord {
                        text,
                        bbox,
                        confidence,
                    }]));
                }
            }
        }
        for (b, d) in boxes.iter().zip(&decoded) {
            let frame_box = Rect::new(b.bbox.x + region.x, b.bbox.y + region.y, b.bbox.w, b.bbox.h);
            let words: Vec<TextWord> = self
                .words(d, frame_box)
                .into_iter()
                .filter(|w| crate::engine::plausible(&w.text, w.confidence, self.min_confidence))
                .collect();
            if let Some(mut line) = TextLine::from_words(words) {
                // The detector's box, not the words' union, is the line's extent.
                line.bbox = frame_box;
                lines.push(line);
            }
        }
        lines.sort_by_key(|l| (l.bbox.y / 8, l.bbox.x));
        Ok(lines)
    }

    /// `lines` of a crop of a game screen (the detector needs no page mode: the same call).
    pub fn screen_lines(&mut self, view: &FrameView<'_>, region: Rect) -> Result<Vec<TextLine>, OcrError> {
        self.lines(view, region)
    }

    /// `region_integer`: the integer in `region` (a counter), digits only, `Ok(None)` — undefined — when
    /// the region is uniform, too small, or nothing was read with confidence.
    pub fn read_integer(
        &mut self,
        view: &FrameView<'_>,
        region: Rect,
        digits: u32,
    ) -> Result<Option<i64>, OcrError> {
        let region = crate::engine::check_region(view, region)?;
        let img = Rgb::from_view(view, region);
        let Some(ink) = crate::prep::ink_bounds(&img.px, img.w, img.h) else {
            return Ok(None);
        };
        // A margin of ground around the ink, as the recogniser saw in training.
        let m = (ink.h / 4).max(2) as i32;
        let crop = Rect::new(ink.x - m, ink.y - m, ink.w + 2 * m as u32, ink.h + 2 * m as u32)
            .clamped_to(&Rect::new(0, 0, img.w as u32, img.h as u32))
            .unwrap_or(ink);
        if crop.h < 4 || crop.w < 2 {
            return Ok(None);
        }
        // A narrow input is fast and reads most counters; a lone small glyph is read with confidence only
        // padded to the recogniser's training width (a 7×9 "0": 0.58 at 48 px, 0.91 at 320 px), so an
        // unsure fast read is retried there.
        let mut best: Option<(String, f32)> = None;
        for min_w in [48, 320] {
            let decoded = self.recognise(&img, &[crop], min_w, true)?;
            let Some(d) = decoded.first() else {
                continue;
            };
            if d.chars.is_empty() || d.chars.iter().any(|c| c.0 == "?") {
                continue;
            }
            let conf = d.chars.iter().map(|c| c.2).sum::<f32>() / d.chars.len() as f32;
            let text: String = d.chars.iter().map(|c| c.0.as_str()).collect();
            if best.as_ref().is_none_or(|b| conf > b.1) {
                best = Some((text, conf));
            }
            if conf >= self.integer_min_confidence {
                break;
            }
        }
        Ok(best
            .filter(|(_, conf)| *conf >= self.integer_min_confidence)
            .and_then(|(s, _)| crate::engine::parse_integer(&s, digits)))
    }
}

/// DB post-processing: threshold the probability map, dilate 2×2, take 8-connected components, score each
/// by the mean probability inside its box, and grow the box by DB's unclip distance (ratio 1.6).
/// Boxes are `(x0, y0, x1, y1, score)` in map coordinates.
pub(crate) fn db_boxes(
    prob: &[f32],
    w: usize,
    h: usize,
    thresh: f32,
    box_thresh: f32,
) -> Vec<(f32, f32, f32, f32, f32)> {
    if w == 0 || h == 0 || prob.len() < w * h {
        return Vec::new();
    }
    let mut mask = vec![false; w * h];
    for y in 0..h {
        for x in 0..w {
            let on = |xx: usize, yy: usize| prob[yy * w + xx] > thresh;
            mask[y * w + x] = on(x, y)
                || (x > 0 && on(x - 1, y))
                || (y > 0 && on(x, y - 1))
                || (x > 0 && y > 0 && on(x - 1, y - 1));
        }
    }
    let mut out = Vec::new();
    crate::prep::components8(&mask, w, h, |_, (x0, y0, x1, y1)| {
        if out.len() >= 1000 {
            return false;
        }
        // A component that two texts share through a faint bridge (HUD counters a panel border apart) is
        // split where the map stays weak across the whole box for a gap wider than the box is tall.
        for (sx0, sx1) in split_at_valleys(prob, w, (x0, y0, x1, y1)) {
            if let Some(b) = scored_box(prob, w, h, (sx0, y0, sx1, y1), box_thresh) {
                out.push(b);
            }
        }
        true
    });
    out
}

/// Column ranges of the box separated by runs of columns whose strongest probability is below 0.5 and
/// that are at least as wide as the box is tall.
fn split_at_valleys(
    prob: &[f32],
    w: usize,
    (x0, y0, x1, y1): (usize, usize, usize, usize),
) -> Vec<(usize, usize)> {
    let min_gap = y1 - y0 + 1;
    let strong: Vec<bool> = (x0..=x1)
        .map(|x| (y0..=y1).any(|y| prob.get(y * w + x).is_some_and(|&p| p >= 0.5)))
        .collect();
    let mut parts = Vec::new();
    let mut start: Option<usize> = None;
    let mut weak_run = 0usize;
    let mut last_strong = x0;
    for (i, &s) in strong.iter().enumerate() {
        let x = x0 + i;
        if s {
            if start.is_none() {
                start = Some(x);
            } else if weak_run >= min_gap {
                if let Some(st) = start {
                    parts.push((st, last_strong));
                }
                start = Some(x);
            }
            weak_run = 0;
            last_strong = x;
        } else {
            weak_run += 1;
        }
    }
    match start {
        Some(st) => parts.push((st, last_strong)),
        None => parts.push((x0, x1)),
    }
    parts
}

/// Score a box by the mean probability inside it and grow it by DB's unclip distance (ratio 1.6).
fn scored_box(
    prob: &[f32],
    w: usize,
    h: usize,
    (x0, y0, x1, y1): (usize, usize, usize, usize),
    box_thresh: f32,
) -> Option<(f32, f32, f32, f32, f32)> {
    let (bw, bh) = ((x1 - x0 + 1) as f32, (y1 - y0 + 1) as f32);
    if bw.min(bh) < 3.0 {
        return None;
    }
    let mut sum = 0.0f32;
    for y in y0..=y1 {
        sum += prob
            .get(y * w + x0..=y * w + x1)
            .map(|r| r.iter().sum::<f32>())
            .unwrap_or(0.0);
    }
    let score = sum / (bw * bh);
    if score < box_thresh {
        return None;
    }
    let d = bw * bh * 1.6 / (2.0 * (bw + bh));
    let (fx0, fy0) = ((x0 as f32 - d).max(0.0), (y0 as f32 - d).max(0.0));
    let (fx1, fy1) = (
        (x1 as f32 + 1.0 + d).min(w as f32),
        (y1 as f32 + 1.0 + d).min(h as f32),
    );
    if (fx1 - fx0).min(fy1 - fy0) < 5.0 {
        return None;
    }
    Some((fx0, fy0, fx1, fy1, score))
}

impl Ocr for PpOcr {
    fn recognize(&mut self, view: &FrameView<'_>, region: Rect) -> Result<Vec<TextLine>, VisionError> {
        Ok(self.lines(view, region)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_boxes_are_grown_components_with_their_score() {
        // FR-PERC-004: one bright 20×6 blob → one box, grown by the unclip distance.
        let (w, h) = (64, 32);
        let mut p = vec![0f32; w * h];
        for y in 10..16 {
            for x in 20..40 {
                p[y * w + x] = 0.9;
            }
        }
        let b = db_boxes(&p, w, h, 0.3, 0.5);
        assert_eq!(b.len(), 1);
        let (x0, y0, x1, y1, s) = b[0];
        assert!(x0 < 20.0 && y0 < 10.0 && x1 > 40.0 && y1 > 16.0, "{:?}", b[0]);
        assert!(s > 0.5);
        assert!(db_boxes(&p, w, h, 0.95, 0.5).is_empty());
        assert!(db_boxes(&[], 0, 0, 0.3, 0.5).is_empty());
        assert!(db_boxes(&p[..10], w, h, 0.3, 0.5).is_empty());
    }

    #[test]
    fn two_texts_joined_by_a_faint_bridge_are_two_boxes() {
        // Doom's AMMO and HEALTH counters, a panel border apart, read as "50100%" when joined.
        let (w, h) = (96, 24);
        let mut p = vec![0f32; w * h];
        for y in 8..16 {
            for x in (10..30).chain(50..80) {
                p[y * w + x] = 0.9;
            }
            for x in 30..50 {
                p[y * w + x] = 0.35;
            }
        }
        let b = db_boxes(&p, w, h, 0.3, 0.3);
        assert_eq!(b.len(), 2, "{b:?}");
        assert!(b[0].2 < 50.0 && b[1].0 > 30.0, "{b:?}");
    }

    #[test]
    fn resampling_an_empty_image_writes_nothing() {
        let img = Rgb {
            w: 0,
            h: 0,
            px: Vec::new(),
        };
        let mut out = vec![5f32; 12];
        resample_into(&img, (0, 0, 0, 0), 2, 2, &mut out, 2, 4);
        assert!(out.iter().all(|&v| v == 5.0));
    }
}
