//! Corpus test of perception (FR-PERC-003, FR-PERC-004, FR-PERC-005, FR-PERC-007, FR-PERC-008,
//! INV-PERC-001): OCR recall/precision of labelled strings (overall and per game), `region_integer` on
//! labelled HUD counters, element recall of labelled clickables, classification accuracy on labelled pairs
//! and on camera-turn pairs in particular, over `corpus/` (practice-game and Debian-game frames labelled by
//! eye), with the default OCR engine (PP-OCR). The thresholds are printed and enforced.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gamepilot_core::{Frame, LayerRegion, MonoTime, Rect};
use gamepilot_ocr::default_engine;
use gamepilot_vision::{classify, ClassifierParams, FrameChange, MarkRenderer, Ocr, Perceiver, Thumb};
use serde_json::Value;
use std::path::PathBuf;

// The bar: recall 0.9, precision 0.9, region_integer 0.95 and camera turns 0.9. Measured with
// PP-OCR on this corpus (2026-12-01): recall 0.954 (230/241), precision 0.933, region_integer 19/19, camera
// pairs 5/5, element recall 0.937, classification 26/26. The floors sit a little under the figures (other
// CPUs' kernels may round differently) and never under the bar, so a regression fails.
const OCR_RECALL_MIN: f64 = 0.93;
const OCR_PRECISION_MIN: f64 = 0.92;
const INTEGER_MIN: f64 = 0.95;
const CAMERA_MOTION_MIN: f64 = 0.90;
const ELEMENT_RECALL_MIN: f64 = 0.92;
const CLASS_ACCURACY_MIN: f64 = 0.90;
// The game's own windows and list cursors (FR-PERC-006): 23 labelled frames of LTris, LBreakout2,
// SuperTux, Freedoom, aisleriot, sgt-puzzles (Net's and Mines' Type popups, Net's About dialog, five
// other puzzles with no list cursor) and the practice game. Measured 2026-12-03: the selected item (or
// that none is) right in 22 of 23 (0.957; Freedoom's skull cursor beside OCR-garbled red letters is
// missed), the items of 7 open popups and dialogs (sgt-net, sgt-mines, aisleriot) found inside their layer
// 37 of 38 (0.974; OCR reads Net's "11x11" as "1lx11").
const SELECTED_ACCURACY_MIN: f64 = 0.9;
const LAYERED_RECALL_MIN: f64 = 0.94;

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../corpus")
}

fn load(name: &str) -> Frame {
    let p = corpus().join("frames").join(name);
    let img = image::open(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .to_rgba8();
    let (w, h) = img.dimensions();
    Frame::from_rgba(w, h, img.into_raw(), MonoTime(0)).unwrap()
}

/// Lower-case letters and digits only (so "4−" matches "4-", "[0:00] Marked: 0 / 10" matches "0:00 Marked 0/10").
fn norm(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric() && c.is_ascii())
        .flat_map(|c| c.to_lowercase())
        .collect()
}

fn rect(v: &Value) -> Rect {
    let a: Vec<i64> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect();
    Rect::new(a[0] as i32, a[1] as i32, a[2] as u32, a[3] as u32)
}

fn clickables(f: &Value) -> Vec<(String, Rect)> {
    let mut out: Vec<(String, Rect)> = f["clickables"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| (c["label"].as_str().unwrap_or("").to_string(), rect(&c["bbox"])))
                .collect()
        })
        .unwrap_or_default();
    for g in f["grids"].as_array().into_iter().flatten() {
        let (o, p, c) = (&g["origin"], &g["pitch"], &g["cell"]);
        for row in 0..g["rows"].as_i64().unwrap() {
            for col in 0..g["cols"].as_i64().unwrap() {
                let x = o[0].as_i64().unwrap() + col * p[0].as_i64().unwrap();
                let y = o[1].as_i64().unwrap() + row * p[1].as_i64().unwrap();
                out.push((
                    format!("cell {col},{row}"),
                    Rect::new(
                        x as i32,
                        y as i32,
                        c[0].as_u64().unwrap() as u32,
                        c[1].as_u64().unwrap() as u32,
                    ),
                ));
            }
        }
    }
    out
}

#[test]
fn perception_corpus_meets_its_thresholds() {
    let labels: Value =
        serde_json::from_str(&std::fs::read_to_string(corpus().join("labels.json")).unwrap()).unwrap();
    let mut ocr = default_engine().expect("scripts/setup-ocr.sh run");
    let font = std::fs::read("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf")
        .expect("fonts-dejavu-core installed");
    let marks = MarkRenderer::from_font_bytes(font).unwrap();
    let (mut t_found, mut t_total, mut l_ok, mut l_total, mut c_hit, mut c_total) = (0, 0, 0, 0, 0, 0);
    let (mut i_ok, mut i_total) = (0, 0);
    // Per game (the frame name's prefix): texts found, texts, lines right, lines.
    let mut per_game: std::collections::BTreeMap<String, [usize; 4]> = Default::default();
    let mut frames: Vec<(&String, &Value)> = labels["frames"].as_object().unwrap().iter().collect();
    frames.sort_by_key(|(k, _)| k.as_str());
    for (name, f) in frames {
        let frame = load(name);
        let view = frame.view();
        let game = name.split('-').next().unwrap_or(name).to_string();
        let (t0, l0, lt0) = (t_found, l_ok, l_total);
        let tt0 = t_total;
        let lines = ocr.recognize(&view, view.bounds()).unwrap();
        // FR-PERC-008: every labelled HUD counter read by region_integer.
        for c in f["integers"].as_array().into_iter().flatten() {
            let want = c["value"].as_i64().unwrap();
            let got = ocr.read_integer(&view, rect(&c["bbox"]), 0).unwrap();
            i_total += 1;
            if got == Some(want) {
                i_ok += 1;
            } else {
                println!(
                    "{name}: region_integer {} read {got:?}, labelled {want}",
                    c["bbox"]
                );
            }
        }
        // FR-PERC-004: recall of labelled strings.
        let wanted: Vec<String> = f["texts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| norm(t.as_str().unwrap()))
            .collect();
        // Optional labels (decorative logos, tiny print) are not required, but reading them is not wrong.
        let optional: Vec<String> = f["optional"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| norm(t.as_str().unwrap()))
            .collect();
        let line_norms: Vec<String> = lines.iter().map(|l| norm(&l.text)).collect();
        let word_norms: Vec<String> = lines
            .iter()
            .flat_map(|l| l.words.iter().map(|w| norm(&w.text)))
            .collect();
        let mut missed = Vec::new();
        for w in &wanted {
            // Short labels (single digits, compass letters) must be a whole word; a clue's operator
            // (keen's "15×" read as "15x") may trail the digits.
            let found = if w.len() <= 2 {
                word_norms.iter().any(|x| {
                    x == w
                        || (w.chars().all(|c| c.is_ascii_digit())
                            && x.trim_end_matches(|c: char| !c.is_ascii_digit()) == w)
                })
            } else {
                line_norms.iter().any(|l| l.contains(w.as_str()))
            };
            t_total += 1;
            if found {
                t_found += 1;
            } else {
                missed.push(w.clone());
            }
        }
        // Precision: a recognised line is right when it is (part of) a labelled string or holds one.
        let mut wrong = Vec::new();
        for (l, raw) in line_norms.iter().zip(&lines) {
            if l.is_empty() {
                continue;
            }
            l_total += 1;
            let ok = wanted.iter().chain(&optional).any(|w| {
                !w.is_empty() && (w.contains(l.as_str()) || (w.len() >= 2 && l.contains(w.as_str())))
            });
            if ok {
                l_ok += 1;
            } else {
                wrong.push(raw.text.clone());
            }
        }
        let g = per_game.entry(game).or_default();
        g[0] += t_found - t0;
        g[1] += t_total - tt0;
        g[2] += l_ok - l0;
        g[3] += l_total - lt0;
        // FR-PERC-005, FR-GND-001: element recall — clicking an element's centre (where `click_mark` on its
        // mark lands) hits the labelled target, and the
        // element is not a much larger container.
        let mut p = Perceiver::new();
        let class = p.classify_view(&view).class;
        let obs = p.observe(&view, MonoTime(0), class, &lines);
        for e in &obs.elements {
            assert!(
                view.bounds().contains_rect(&e.bbox),
                "INV-PERC-001: {e:?} outside {name}"
            );
        }
        let targets = clickables(f);
        let mut unhit = Vec::new();
        for (label, r) in &targets {
            c_total += 1;
            let hit = obs
                .elements
                .iter()
                .any(|e| r.contains(e.bbox.center()) && e.bbox.area() as f64 <= 2.5 * r.area() as f64);
            if hit {
                c_hit += 1;
            } else {
                unhit.push(label.clone());
            }
        }
        // FR-PERC-007: every element gets a mark, labels inside the frame.
        let (_, placed) = marks.render(&view, &obs.elements);
        assert_eq!(placed.len(), obs.elements.len());
        println!(
            "{name}: texts {}/{} missed {:?}; lines wrong {:?}; targets {}/{} unhit {:?}; {} elements",
            wanted.len() - missed.len(),
            wanted.len(),
            missed,
            wrong,
            targets.len() - unhit.len(),
            targets.len(),
            unhit.iter().take(6).collect::<Vec<_>>(),
            obs.elements.len()
        );
    }
    // FR-PERC-003: classification accuracy on labelled pairs.
    let params = ClassifierParams::default();
    let (mut ok, mut total) = (0, 0);
    let (mut cam_ok, mut cam_total) = (0, 0);
    for pair in labels["pairs"].as_array().unwrap() {
        let (a, b) = (
            load(pair["a"].as_str().unwrap()),
            load(pair["b"].as_str().unwrap()),
        );
        let want = FrameChange::parse(pair["class"].as_str().unwrap()).unwrap();
        let (ta, tb) = (Thumb::from_view(&a.view(), 160), Thumb::from_view(&b.view(), 160));
        let got = classify(&ta, &tb, &params).unwrap().class;
        total += 1;
        if pair["camera"].as_bool().unwrap_or(false) {
            cam_total += 1;
            cam_ok += usize::from(got == FrameChange::Motion);
        }
        if got == want {
            ok += 1;
        } else {
            println!(
                "pair {} -> {}: labelled {want}, classified {got}",
                pair["a"], pair["b"]
            );
        }
    }
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let (rec, prec, el, acc) = (
        ratio(t_found, t_total),
        ratio(l_ok, l_total),
        ratio(c_hit, c_total),
        ratio(ok, total),
    );
    for (g, [f, t, o, l]) in &per_game {
        println!(
            "  {g}: recall {:.3} ({f}/{t}), precision {:.3} ({o}/{l})",
            ratio(*f, *t),
            ratio(*o, *l)
        );
    }
    let (int, cam) = (ratio(i_ok, i_total), ratio(cam_ok, cam_total));
    println!("OCR recall {rec:.3} ({t_found}/{t_total}), threshold {OCR_RECALL_MIN}");
    println!("region_integer on HUD counters {int:.3} ({i_ok}/{i_total}), threshold {INTEGER_MIN}");
    println!("camera-turn pairs as motion {cam:.3} ({cam_ok}/{cam_total}), threshold {CAMERA_MOTION_MIN}");
    println!("OCR precision {prec:.3} ({l_ok}/{l_total}), threshold {OCR_PRECISION_MIN}");
    println!("element recall {el:.3} ({c_hit}/{c_total}), threshold {ELEMENT_RECALL_MIN}");
    println!("classification accuracy {acc:.3} ({ok}/{total}), threshold {CLASS_ACCURACY_MIN}");
    assert!(
        rec >= OCR_RECALL_MIN,
        "OCR recall {rec:.3} below {OCR_RECALL_MIN}"
    );
    assert!(
        prec >= OCR_PRECISION_MIN,
        "OCR precision {prec:.3} below {OCR_PRECISION_MIN}"
    );
    assert!(
        i_total > 0 && int >= INTEGER_MIN,
        "region_integer {int:.3} below {INTEGER_MIN}"
    );
    assert!(
        cam_total > 0 && cam >= CAMERA_MOTION_MIN,
        "camera-turn motion {cam:.3} below {CAMERA_MOTION_MIN}"
    );
    assert!(
        el >= ELEMENT_RECALL_MIN,
        "element recall {el:.3} below {ELEMENT_RECALL_MIN}"
    );
    assert!(
        acc >= CLASS_ACCURACY_MIN,
        "classification accuracy {acc:.3} below {CLASS_ACCURACY_MIN}"
    );
}

#[test]
fn the_chosen_item_and_the_games_own_windows_are_seen() {
    // FR-PERC-006, FR-PERC-001: which list item is drawn as chosen (or that none is), and the items of
    // the game's open popup or dialog as elements placed in it.
    let labels: Value =
        serde_json::from_str(&std::fs::read_to_string(corpus().join("labels.json")).unwrap()).unwrap();
    let mut ocr = default_engine().expect("scripts/setup-ocr.sh run");
    let (mut right, mut total, mut found, mut wanted) = (0, 0, 0, 0);
    for case in labels["selection"].as_array().unwrap() {
        let name = case["frame"].as_str().unwrap();
        let frame = load(name);
        let view = frame.view();
        let lines = ocr.recognize(&view, view.bounds()).unwrap();
        let mut p = Perceiver::new();
        let class = p.classify_view(&view).class;
        let mut obs = p.observe(&view, MonoTime(0), class, &lines);
        let layers: Vec<LayerRegion> = serde_json::from_value(case["layers"].clone()).unwrap_or_default();
        obs.place_layers(&layers);
        let chosen: Vec<String> = obs
            .elements
            .iter()
            .filter(|e| e.selected)
            .filter_map(|e| e.label.as_deref().map(norm))
            .collect();
        let expected = case["selected"].as_str().map(norm);
        let ok = match &expected {
            Some(want) => !chosen.is_empty() && chosen.concat() == *want,
            None => chosen.is_empty(),
        };
        total += 1;
        right += usize::from(ok);
        let mut missing = Vec::new();
        for item in case["layered_items"].as_array().into_iter().flatten() {
            let item = norm(item.as_str().unwrap());
            wanted += 1;
            let inside = obs.elements.iter().any(|e| {
                e.layer.is_some()
                    && e.label.as_deref().map(norm).as_deref() == Some(item.as_str())
                    && layers.iter().any(|l| l.rect.contains_rect(&e.bbox))
            });
            if inside {
                found += 1;
            } else {
                missing.push(item);
            }
        }
        println!(
            "{name}: selected {chosen:?}, labelled {expected:?} {}; layered items missing {missing:?}",
            if ok { "ok" } else { "WRONG" }
        );
        if !ok {
            print!("{}", gamepilot_vision::selection::explain(&view, &obs.elements));
        }
    }
    let share = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let (acc, recall) = (share(right, total), share(found, wanted));
    println!("selected item accuracy {acc:.3} ({right}/{total}), threshold {SELECTED_ACCURACY_MIN}");
    println!("popup and dialog item recall {recall:.3} ({found}/{wanted}), threshold {LAYERED_RECALL_MIN}");
    assert!(
        acc >= SELECTED_ACCURACY_MIN,
        "selected item accuracy {acc:.3} below {SELECTED_ACCURACY_MIN}"
    );
    assert!(
        wanted > 0 && recall >= LAYERED_RECALL_MIN,
        "popup and dialog item recall {recall:.3} below {LAYERED_RECALL_MIN}"
    );
}
