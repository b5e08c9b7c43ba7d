//! `gamepilot sensor check` and `gamepilot sensor eval` end to end: diagnostics of a broken file, and real
//! practice-game frames (drawn by the arena's renderer, read by tesseract) whose truth is known.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code

use practice_arena::game::{Game, Screen};
use practice_arena::render::{self, Canvas, Fonts};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const W: i32 = 1280;
const H: i32 = 720;

fn gamepilot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gamepilot"))
        .args(args)
        .output()
        .expect("run gamepilot")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Draw one arena frame with the given HUD state and save it as a PNG.
fn arena_png(dir: &Path, name: &str, screen: Screen, coins: u64, gold: u64, health: f64) -> PathBuf {
    let fonts = Fonts::load(Path::new(render::FONT_DIR)).expect("DejaVu fonts (fonts-dejavu-core)");
    let mut g = Game::new(7, W, H, screen);
    g.coins = coins;
    g.gold = gold;
    g.health = health;
    let mut c = Canvas::new(W, H);
    render::draw(&mut c, &fonts, &g);
    let path = dir.join(name);
    image::RgbImage::from_raw(W as u32, H as u32, c.to_rgb())
        .unwrap()
        .save(&path)
        .unwrap();
    path
}

/// Cut `[x, y, w, h]` out of a PNG into another PNG (a template).
fn crop_png(src: &Path, dst: &Path, r: [u32; 4]) {
    let img = image::open(src).unwrap().to_rgb8();
    image::imageops::crop_imm(&img, r[0], r[1], r[2], r[3])
        .to_image()
        .save(dst)
        .unwrap();
}

// HUD geometry of the practice arena (render.rs): counter panels at (16, 60) and (16, 140), 250x72, the
// number drawn at x + 112; the health bar at (32, 264), 276x20, green, red below 30 health.
const SENSORS: &str = "\
# practice arena HUD
coins = region_integer([124, 62, 140, 66])
gold = region_integer([124, 142, 140, 66], digits=6)
health_green = region_fraction([32, 264, 276, 20], hue=[100, 150], saturation>0.5)
health_red = region_fraction([32, 264, 276, 20], hue=[340, 20], saturation>0.5)
nothing = region_integer([1000, 400, 120, 60])
paused = template_present(\"pause_title\", 0.9)
earned = coins > @coins
spent = gold < @gold
in_danger = health_red > 0.05
blocked = paused and not earned
";

#[test]
fn check_reports_every_error_with_caret_and_hint() {
    // FR-PERC-008: all errors, each located with a caret and a one-line fix hint; exit 1.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.sensors");
    std::fs::write(
        &f,
        "coins = region_integer([124, 62, 140, 66])\nHp = region_fractoin([0, 0, 4, 4])\nx = coins and 3\ny = later > 1\nlater = 2\n",
    )
    .unwrap();
    let o = gamepilot(&["sensor", "check", f.to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    for want in [
        "error[E016]",
        "error[E005]",
        "error[E011]",
        "error[E013]",
        ":2:1",
        ":2:6",
        ":3:15",
        ":4:5",
    ] {
        assert!(err.contains(want), "missing {want} in:\n{err}");
    }
    assert!(
        err.contains("3 | x = coins and 3\n  |               ^\n"),
        "{err}"
    );
    // `coins and 3`: both sides are numbers, both are reported.
    assert!(err.contains("3 | x = coins and 3\n  |     ^^^^^\n"), "{err}");
    assert_eq!(err.matches("= hint: ").count(), 5, "{err}");
    assert!(err.contains("bad.sensors: 5 errors"), "{err}");

    // The same errors as JSON, each with line, column, code-kind, message and hint.
    let o = gamepilot(&["sensor", "check", "--json", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(text(&o).0.trim()).unwrap();
    let errs = v["errors"].as_array().unwrap();
    assert_eq!(errs.len(), 5);
    assert_eq!(errs[0]["kind"], "bad_name");
    assert_eq!(
        (errs[1]["span"]["line"].as_u64(), errs[1]["span"]["col"].as_u64()),
        (Some(2), Some(6))
    );
    assert!(errs.iter().all(|e| !e["hint"].as_str().unwrap().is_empty()));

    let ok = dir.path().join("ok.sensors");
    std::fs::write(&ok, SENSORS).unwrap();
    let o = gamepilot(&["sensor", "check", ok.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(out.contains("ok, 10 sensors"), "{out}");
}

#[test]
fn eval_on_practice_arena_frames_with_real_ocr() {
    // FR-PERC-008, FR-LOOP-004: values over frames whose truth is known; @ from --prev; undefined is null.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let s = d.join("hud.sensors");
    std::fs::write(&s, SENSORS).unwrap();
    let f1 = arena_png(d, "f1.png", Screen::Play, 3, 250, 80.0);
    let f2 = arena_png(d, "f2.png", Screen::Play, 14, 150, 20.0);
    let f3 = arena_png(d, "f3.png", Screen::Pause, 14, 150, 20.0);
    // The pause title as a template (what the agent would have confirmed), anchored where it was seen.
    let tpl = d.join("pause_title.png");
    crop_png(&f3, &tpl, [450, 205, 380, 90]);
    let tpl_arg = format!("pause_title={}@450,205", tpl.display());
    let run = |image: &Path, prev: Option<&Path>| {
        let mut a = vec![
            "sensor",
            "eval",
            "--image",
            image.to_str().unwrap(),
            "--sensors",
            s.to_str().unwrap(),
        ];
        a.extend(["--json", "--template", &tpl_arg]);
        if let Some(p) = prev {
            a.extend(["--prev", p.to_str().unwrap()]);
        }
        let o = gamepilot(&a);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{err}");
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
        v
    };

    // First frame alone: no previous tick, so every @-based sensor is null (undefined), never false.
    let v = run(&f1, None);
    assert_eq!(v["coins"], 3, "{v}");
    assert_eq!(v["gold"], 250, "{v}");
    let g = v["health_green"].as_f64().unwrap();
    assert!(
        (g - 221.0 / 276.0).abs() < 0.01,
        "80 health fills 221 of 276 px: {g}"
    );
    assert_eq!(v["health_red"].as_f64(), Some(0.0));
    assert_eq!(
        v["nothing"],
        serde_json::Value::Null,
        "no digits is undefined, not 0: {v}"
    );
    assert_eq!(v["paused"], false);
    assert_eq!(v["earned"], serde_json::Value::Null);
    assert_eq!(v["spent"], serde_json::Value::Null);
    assert_eq!(v["in_danger"], false);
    assert_eq!(v["blocked"], false, "false and undefined is false");

    // Second frame with the first as --prev: coins up, gold down, health red.
    let v = run(&f2, Some(&f1));
    assert_eq!(
        (v["coins"].as_i64(), v["gold"].as_i64()),
        (Some(14), Some(150)),
        "{v}"
    );
    assert_eq!(v["earned"], true);
    assert_eq!(v["spent"], true);
    assert_eq!(v["health_green"].as_f64(), Some(0.0));
    assert!(
        (v["health_red"].as_f64().unwrap() - 55.0 / 276.0).abs() < 0.01,
        "{v}"
    );
    assert_eq!(v["in_danger"], true);
    assert_eq!(v["blocked"], false);

    // The pause menu opens and the counter does not move: blocked (a stuck signal).
    let v = run(&f3, Some(&f2));
    assert_eq!(v["paused"], true, "{v}");
    assert_eq!(v["earned"], false, "{v}");
    assert_eq!(v["blocked"], true, "{v}");

    // Plain text output names every sensor in declaration order with `undefined` spelled out.
    let o = gamepilot(&[
        "sensor",
        "eval",
        "--image",
        f1.to_str().unwrap(),
        "--sensors",
        s.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 10, "{out}");
    assert!(
        lines[0].starts_with("coins") && lines[0].ends_with("= 3"),
        "{out}"
    );
    assert!(
        lines[5].starts_with("paused") && lines[5].ends_with("= undefined"),
        "no atlas: {out}"
    );
    assert!(lines[6].ends_with("= undefined"), "{out}");
}

#[test]
fn eval_refuses_a_broken_file_and_mismatched_frames() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bad = d.join("bad.sensors");
    std::fs::write(&bad, "a = region_integer([0, 0, 0, 1])\n").unwrap();
    let f1 = arena_png(d, "f1.png", Screen::Play, 1, 1, 50.0);
    let o = gamepilot(&[
        "sensor",
        "eval",
        "--image",
        f1.to_str().unwrap(),
        "--sensors",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("error[E008]"));
    let ok = d.join("ok.sensors");
    std::fs::write(&ok, "a = region_fraction([0, 0, 4, 4])\n").unwrap();
    let small = d.join("small.png");
    crop_png(&f1, &small, [0, 0, 64, 64]);
    let o = gamepilot(&[
        "sensor",
        "eval",
        "--image",
        f1.to_str().unwrap(),
        "--prev",
        small.to_str().unwrap(),
        "--sensors",
        ok.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("same capture"), "{}", text(&o).1);
    // A malformed --template is a named error, not a panic.
    let o = gamepilot(&[
        "sensor",
        "eval",
        "--image",
        f1.to_str().unwrap(),
        "--sensors",
        ok.to_str().unwrap(),
        "--template",
        "pause=nowhere",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("NAME=FILE.png@X,Y"), "{}", text(&o).1);
}
