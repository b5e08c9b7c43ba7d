//! The tesseract engine: TSV words with boxes and confidences, garbage filtering, lines, and integers.

use crate::prep::{binarize, prepare, Prepared};
use crate::OcrError;
use gamepilot_core::{FrameView, Rect};
use gamepilot_vision::{Ocr, TextLine, TextWord, VisionError};
use tesseract::{PageSegMode, Tesseract};

/// Tesseract over Debian's libtesseract, English.
pub struct TesseractOcr {
    engine: Option<Tesseract>,
    lang: String,
    /// Words below this confidence (0..1) are dropped.
    pub min_confidence: f32,
    /// Upscale factor for full regions (integers use at least 3).
    pub scale: u32,
}

struct RawWord {
    key: (u32, u32, u32),
    left: i64,
    top: i64,
    w: i64,
    h: i64,
    conf: f32,
    text: String,
}

impl TesseractOcr {
    /// Start tesseract with English data from the system (or `$TESSDATA_PREFIX`).
    pub fn new() -> Result<TesseractOcr, OcrError> {
        TesseractOcr::with_language("eng")
    }

    pub fn with_language(lang: &str) -> Result<TesseractOcr, OcrError> {
        let t = Tesseract::new(None, Some(lang)).map_err(|e| OcrError::Init {
            lang: lang.into(),
            reason: e.to_string(),
        })?;
        Ok(TesseractOcr {
            engine: Some(t),
            lang: lang.into(),
            min_confidence: 0.55,
            scale: 2,
        })
    }

    fn run(
        &mut self,
        p: &Prepared,
        psm: PageSegMode,
        whitelist: Option<&str>,
    ) -> Result<Vec<RawWord>, OcrError> {
        if p.width == 0 || p.height == 0 {
            return Ok(Vec::new());
        }
        let t = match self.engine.take() {
            Some(t) => t,
            None => Tesseract::new(None, Some(&self.lang)).map_err(|e| OcrError::Init {
                lang: self.lang.clone(),
                reason: e.to_string(),
            })?,
        };
        let result = (|| -> Result<(Tesseract, String), OcrError> {
            let mut t = t
                .set_variable("tessedit_char_whitelist", whitelist.unwrap_or(""))
                .map_err(|e| OcrError::Engine(e.to_string()))?;
            // Interword spaces are kept so that menu entries stay separate words.
            t = t
                .set_variable("preserve_interword_spaces", "1")
                .map_err(|e| OcrError::Engine(e.to_string()))?;
            t.set_page_seg_mode(psm);
            let t = t
                .set_frame(&p.gray, p.width as i32, p.height as i32, 1, p.width as i32)
                .map_err(|e| OcrError::Engine(e.to_string()))?
                .set_source_resolution(96 * p.scale as i32);
            let mut t = t.recognize().map_err(|e| OcrError::Engine(e.to_string()))?;
            let tsv = t.get_tsv_text(0).map_err(|e| OcrError::Engine(e.to_string()))?;
            Ok((t, tsv))
        })();
        // A failed call consumed the engine; the next call starts a fresh one.
        let (t, tsv) = result?;
        self.engine = Some(t);
        Ok(parse_tsv(&tsv))
    }

    /// Recognise text lines in `region` of `view` (boxes in frame coordinates, wholly inside the region).
    pub fn lines(&mut self, view: &FrameView<'_>, region: Rect) -> Result<Vec<TextLine>, OcrError> {
        let large = region.w as u64 * region.h as u64 > 200_000;
        self.lines_as(view, region, large)
    }

    /// Lines of a region read as a sparse screen (several elements, both polarities) whatever its size:
    /// for a crop of a game screen, which is small but laid out like a whole one (FR-GND-005).
    pub fn screen_lines(&mut self, view: &FrameView<'_>, region: Rect) -> Result<Vec<TextLine>, OcrError> {
        self.lines_as(view, region, true)
    }

    fn lines_as(
        &mut self,
        view: &FrameView<'_>,
        region: Rect,
        large: bool,
    ) -> Result<Vec<TextLine>, OcrError> {
        let region = check_region(view, region)?;
        let psm = if large {
            PageSegMode::PsmSparseText
        } else {
            PageSegMode::PsmSingleBlock
        };
        let p = prepare(view, region, self.scale, 8, None);
        let words = self.run(&p, psm, None)?;
        let mut lines = self.to_lines(&p, words);
        if large {
            // Game screens mix light-on-dark HUDs, dimmed overlays and dark-on-light panels: two more
            // passes over adaptively binarised images of both polarities add the lines the plain pass
            // could not see.
            for invert in [p.inverted, !p.inverted] {
                let mut q = prepare(view, region, self.scale, 8, Some(invert));
                binarize(&mut q, 12 * self.scale, 24);
                let words = self.run(&q, psm, None)?;
                for l in self.to_lines(&q, words) {
                    let clash = lines.iter().any(|k| {
                        k.bbox.iou(&l.bbox) > 0.2
                            || k.bbox
                                .intersection(&l.bbox)
                                .map(|i| i.area() * 2 > l.bbox.area().min(k.bbox.area()))
                                .unwrap_or(false)
                    });
                    if !clash {
                        lines.push(l);
                    }
                }
            }
            lines.sort_by_key(|l| (l.bbox.y / 8, l.bbox.x));
        }
        Ok(lines)
    }

    fn to_lines(&self, p: &Prepared, words: Vec<RawWord>) -> Vec<TextLine> {
        let mut lines: Vec<((u32, u32, u32), Vec<TextWord>)> = Vec::new();
        for w in words {
            let text = w.text.trim().to_string();
            if !plausible(&text, w.conf, self.min_confidence) {
                continue;
            }
            let Some(bbox) = p.to_frame(w.left, w.top, w.w, w.h) else {
                continue;
            };
            let word = TextWord {
                text,
                bbox,
                confidence: w.conf,
            };
            match lines.iter_mut().find(|(k, _)| *k == w.key) {
                Some((_, v)) => v.push(word),
                None => lines.push((w.key, vec![word])),
            }
        }
        lines
            .into_iter()
            .filter_map(|(_, v)| TextLine::from_words(v))
            .collect()
    }

    /// Read an integer of at most `digits` digits from `region` (a counter): `Ok(None)` when nothing
    /// confident was read — undefined, never zero.
    pub fn read_integer(
        &mut self,
        view: &FrameView<'_>,
        region: Rect,
        digits: u32,
    ) -> Result<Option<i64>, OcrError> {
        let region = check_region(view, region)?;
        let scale = if region.h < 24 {
            4
        } else if region.h < 48 {
            3
        } else {
            2
        };
        let p = prepare(view, region, scale, 12, None);
        let words = self.run(&p, PageSegMode::PsmSingleLine, Some("0123456789-"))?;
        let good: Vec<&RawWord> = words
            .iter()
            .filter(|w| w.conf >= 0.5 && !w.text.trim().is_empty())
            .collect();
        if good.is_empty() {
            return Ok(None);
        }
        let joined: String = good.iter().map(|w| w.text.trim()).collect::<Vec<_>>().join("");
        Ok(parse_integer(&joined, digits))
    }
}

pub(crate) fn check_region(view: &FrameView<'_>, region: Rect) -> Result<Rect, OcrError> {
    if region.is_empty() || !view.bounds().contains_rect(&region) {
        return Err(OcrError::RegionOutside {
            region,
            width: view.width,
            height: view.height,
        });
    }
    Ok(region)
}

/// Digits (with an optional leading minus) of a recognised counter; `None` when there are none or more
/// than `digits` (0 = any count).
pub fn parse_integer(s: &str, digits: u32) -> Option<i64> {
    let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let neg = t.starts_with('-');
    let ds: String = t.chars().filter(|c| c.is_ascii_digit()).collect();
    if ds.is_empty() || (digits > 0 && ds.len() > digits as usize) || ds.len() > 18 {
        return None;
    }
    // A minus anywhere but the front is noise; digits split by a stray minus are not one number.
    if t.chars().skip(usize::from(neg)).any(|c| c == '-') {
        return None;
    }
    let v: i64 = ds.parse().ok()?;
    Some(if neg { -v } else { v })
}

/// Low-confidence garbage filter: confident enough, mostly letters and digits, not a lone stray mark.
pub(crate) fn plausible(text: &str, conf: f32, min: f32) -> bool {
    if text.is_empty() || conf < min {
        return false;
    }
    let n = text.chars().count();
    let alnum = text.chars().filter(|c| c.is_alphanumeric()).count();
    if alnum == 0 {
        return false;
    }
    if n == 1 && conf < 0.8 {
        return false;
    }
    alnum * 2 >= n
}

fn parse_tsv(tsv: &str) -> Vec<RawWord> {
    let mut out = Vec::new();
    for line in tsv.lines() {
        let f: Vec<&str> = line.splitn(12, '\t').collect();
        if f.len() < 12 || f[0] != "5" {
            continue;
        }
        let num = |i: usize| f[i].trim().parse::<i64>().ok();
        let (Some(b), Some(pa), Some(l), Some(left), Some(top), Some(w), Some(h)) =
            (num(2), num(3), num(4), num(6), num(7), num(8), num(9))
        else {
            continue;
        };
        let conf = f[10].trim().parse::<f32>().unwrap_or(-1.0);
        if conf < 0.0 {
            continue;
        }
        out.push(RawWord {
            key: (b as u32, pa as u32, l as u32),
            left,
            top,
            w,
            h,
            conf: (conf / 100.0).clamp(0.0, 1.0),
            text: f[11].to_string(),
        });
    }
    out
}

impl Ocr for TesseractOcr {
    fn recognize(&mut self, view: &FrameView<'_>, region: Rect) -> Result<Vec<TextLine>, VisionError> {
        Ok(self.lines(view, region)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_strictly() {
        assert_eq!(parse_integer("1234", 6), Some(1234));
        assert_eq!(parse_integer(" -12 ", 6), Some(-12));
        assert_eq!(parse_integer("1234567", 6), None);
        assert_eq!(parse_integer("", 6), None);
        assert_eq!(parse_integer("12-3", 6), None);
        assert_eq!(parse_integer("1 2", 0), Some(12));
    }

    #[test]
    fn garbage_is_filtered() {
        // FR-PERC-004
        assert!(plausible("Coins", 0.9, 0.55));
        assert!(!plausible("Coins", 0.3, 0.55));
        assert!(!plausible("|", 0.95, 0.55));
        assert!(!plausible("i", 0.6, 0.55));
        assert!(!plausible("~\\/.", 0.9, 0.55));
        assert!(plausible("15+", 0.9, 0.55));
    }

    #[test]
    fn tsv_words_are_read() {
        let tsv =
            "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext\n\
                   5\t1\t1\t1\t1\t1\t10\t20\t30\t12\t91.5\tGold\n4\t1\t1\t1\t1\t0\t10\t20\t30\t12\t-1\t\n";
        let w = parse_tsv(tsv);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].text, "Gold");
        assert!((w[0].conf - 0.915).abs() < 1e-4);
    }
}
