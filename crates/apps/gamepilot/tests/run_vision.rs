//! `gamepilot run` with a model that sees images, under Xvfb on the practice game, against the
//! testbed's scripted host advertising vision: the tactical and deliberative requests carry the marked
//! screenshot as the last content part within their visual budgets, the marks are visible in it, and with
//! each coordinate convention (image pixels, 0–1000, fractions) a reply pointing at the "Play" button's
//! centre in the image the model was sent lands on it — the game's own state shows the menu left for play.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code

use gamepilot_core::{CoordConvention, CoordSpace, Point, Size};
mod common;

use common::{run_command, RunSpec};
use gamepilot_testbed::{Arena, ArenaOptions, HostConfig, ReceivedChat, Reply, ScriptedHost, TestBed};
use serde_json::{json, Value};
use std::time::Duration;

const TACTICAL_PIXELS: u64 = 480 * 270;
const DELIBERATIVE_PIXELS: u64 = 800 * 450;

fn plan_reply(req: &ReceivedChat) -> Reply {
    gamepilot_testbed::plan_reply(req, &[("start the game, then collect a coin", "coins")])
}

/// The size of the image when it is the last content part of the last message.
fn last_part_image(req: &ReceivedChat) -> Option<Size> {
    let last = req.messages().last()?.get("content")?.as_array()?.last()?.clone();
    last.pointer("/image_url/url")?;
    let bytes = req.images().ok()?.pop()?.bytes;
    let img = image::load_from_memory(&bytes).ok()?;
    Some(Size::new(img.width(), img.height()))
}

fn clicks_play_in(family: &str, convention: CoordConvention) {
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let g = arena.window.geometry;
    let capture = Size::new(g.w, g.h);
    let play = practice_arena::game::menu_button("Play", g.w as i32, g.h as i32).unwrap();
    let (cx, cy) = play.center();
    let centre = Point::new(cx, cy);
    let host = ScriptedHost::start(HostConfig::new().vision(true), move |req: &ReceivedChat| {
        if req.system_text().contains("deliberative planner") {
            return plan_reply(req);
        }
        let Some(image) = last_part_image(req) else {
            return Reply::json(&json!({"action": "wait", "duration_ms": 300}));
        };
        // The model's answer: the Play button's centre in the image it was sent, in its convention.
        let (x, y) = CoordSpace::new(convention, image, capture).from_capture(centre);
        match convention {
            CoordConvention::Fraction => Reply::json(&json!({"action": "click", "x": x, "y": y})),
            _ => Reply::json(&json!({"action": "click", "x": x as i64, "y": y as i64})),
        }
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    let spec = RunSpec {
        goal: "Click Play, then collect a coin.",
        goal_check: "coins >= 1",
        max_actions: 3,
        budget_s: 60,
        grounding: "coordinate",
    };
    let mut c = run_command(&bed.display, arena.window.id, &host.base_url(), &spec, &rec);
    c.args(["--model-family", family])
        .args(["--tactical-pixels", &TACTICAL_PIXELS.to_string()])
        .args(["--deliberative-pixels", &DELIBERATIVE_PIXELS.to_string()]);
    let mut child = c.spawn().unwrap();
    let state = arena.wait_for(Duration::from_secs(60), |s| s["screen"] == "play");
    // The session goes on to its action budget (a replan on the new scene sends its own image).
    let t0 = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let state = state.unwrap_or_else(|e| panic!("{family}: the click did not land on Play: {e}"));
    assert_eq!(state["screen"], "play");

    // What the model was sent: the marked screenshot as the last part, within each cadence's budget.
    let chats = host.chat_requests();
    let tactical: Vec<&ReceivedChat> = chats
        .iter()
        .filter(|r| !r.system_text().contains("deliberative planner"))
        // The one-token warm-up of the prefix at start carries no picture: it decides nothing.
        .filter(|r| r.max_tokens() != Some(1))
        .collect();
    let first = tactical.first().expect("a tactical call");
    let size = last_part_image(first).expect("the tactical request ends with the image");
    assert!(
        size.area() <= TACTICAL_PIXELS && size.area() > TACTICAL_PIXELS * 9 / 10,
        "{size:?}"
    );
    assert!(
        ((size.w as f64 / size.h as f64) - (capture.w as f64 / capture.h as f64)).abs() < 0.02,
        "aspect kept: {size:?} for {capture:?}"
    );
    let prompt = first.prompt_text();
    assert!(
        prompt.contains("Coordinates:"),
        "the convention is stated:\n{prompt}"
    );
    if family == "qwen2.5-vl" {
        // The marks are drawn on the image the model sees: it differs from the first raw capture of the
        // recording (the menu, before the click), scaled the same way, where the outlines and labels are.
        let sent = first.images().unwrap().pop().unwrap();
        let sent = image::load_from_memory(&sent.bytes).unwrap().to_rgba8();
        let text = std::fs::read_to_string(rec.join("events.jsonl")).unwrap();
        let raw = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["kind"] == "frame" && e["marked"] == false)
            .and_then(|e| e["file"].as_str().map(str::to_string))
            .expect("a raw frame is recorded");
        let own = image::open(rec.join("frames").join(&raw)).unwrap().to_rgba8();
        let own = image::imageops::resize(
            &own,
            sent.width(),
            sent.height(),
            image::imageops::FilterType::Triangle,
        );
        let changed = sent
            .pixels()
            .zip(own.pixels())
            .filter(|(a, b)| (0..3).any(|i| (a.0[i] as i32 - b.0[i] as i32).abs() > 60))
            .count();
        assert!(
            changed > 500 && changed < (sent.width() * sent.height() / 5) as usize,
            "marks visible: {changed} pixels differ from the unmarked capture"
        );
        eprintln!(
            "figures: tactical image {size:?} ({} px of {TACTICAL_PIXELS}); marks change {changed} pixels",
            size.area()
        );
    }
    // A deliberative pass after the first tactical tick carries its own, larger image.
    let delib: Vec<Size> = host
        .chat_requests()
        .iter()
        .filter(|r| r.system_text().contains("deliberative planner"))
        .filter_map(last_part_image)
        .collect();
    if let Some(d) = delib.first() {
        assert!(
            d.area() <= DELIBERATIVE_PIXELS && d.area() > TACTICAL_PIXELS,
            "{d:?}"
        );
        eprintln!("figures: {family}: deliberative image {d:?}");
    } else {
        panic!(
            "{family}: no deliberative request carried an image ({} calls)",
            host.chat_requests().len()
        );
    }
}

#[test]
fn qwen25_vl_answers_in_pixels_of_the_sent_image() {
    // FR-MODEL-002, FR-CTX-001, INV-GND-002
    clicks_play_in("qwen2.5-vl", CoordConvention::ImagePixels);
}

#[test]
fn ui_tars_answers_in_thousandths() {
    // INV-GND-002
    clicks_play_in("ui-tars", CoordConvention::Normalized1000);
}

#[test]
fn a_family_without_a_trained_convention_answers_in_fractions() {
    // INV-GND-002
    clicks_play_in("gemma3", CoordConvention::Fraction);
}
