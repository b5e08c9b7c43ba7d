//! The binary's fixed surface: every subcommand has --help; doctor, windows and capture work for real
//! under a private Xvfb; bad input (an unknown window) gets a named error.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code

mod common;
use common::gamepilot;

use gamepilot_testbed::TestBed;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn every_subcommand_has_help() {
    let out = gamepilot().arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for sub in [
        "doctor",
        "windows",
        "capture",
        "observe",
        "classify",
        "sensor",
        "act",
        "run",
        "demo",
        "replay",
        "report",
        "calibrate-stuck",
        "bench",
    ] {
        assert!(text.contains(sub), "--help lists {sub}");
        let o = gamepilot().args([sub, "--help"]).output().unwrap();
        assert!(o.status.success(), "{sub} --help exits 0");
    }
}

/// Start a real game from Debian (sgt-puzzles) on the bed and wait for its window.
fn start_puzzle(bed: &mut TestBed) -> u32 {
    let pid = bed.spawn("net", Command::new("/usr/games/sgt-net")).unwrap();
    let x = bed.x11().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(w) = x.find_window(&gamepilot_x11::WindowSelector::Pid(pid)) {
            if w.mapped {
                std::thread::sleep(Duration::from_millis(500));
                return pid;
            }
        }
        assert!(Instant::now() < deadline, "net window did not appear");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn doctor_windows_and_capture_work_under_xvfb() {
    // FR-PERC-001
    let mut bed = TestBed::start().unwrap();
    let doc = gamepilot()
        .args(["doctor", "--display", &bed.display])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&doc.stdout);
    for check in [
        "X connection",
        "Composite",
        "MIT-SHM",
        "XTEST",
        "XInput2",
        "capture",
        "tesseract data",
    ] {
        assert!(
            text.lines().any(|l| l.contains("ok") && l.contains(check)),
            "doctor check {check} ok:\n{text}"
        );
    }
    let pid = start_puzzle(&mut bed);
    let list = gamepilot()
        .args(["windows", "--json", "--display", &bed.display])
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    let win: serde_json::Value = list
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|w| w["pid"] == pid)
        .unwrap_or_else(|| panic!("windows lists the puzzle (pid {pid}):\n{list}"));
    assert!(
        win["title"].as_str().unwrap().contains("Net"),
        "title from _NET_WM_NAME: {win}"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("net.png");
    let cap = gamepilot()
        .args([
            "capture",
            "--pid",
            &pid.to_string(),
            "--display",
            &bed.display,
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        cap.status.success(),
        "capture: {}",
        String::from_utf8_lossy(&cap.stderr)
    );
    let img = image::open(&out).unwrap().to_rgba8();
    let g = &win["geometry"];
    assert_eq!(img.width() as u64, g[2].as_u64().unwrap());
    assert!(
        img.pixels().any(|p| p.0[0] > 30 || p.0[1] > 30 || p.0[2] > 30),
        "capture is not black"
    );
}

#[test]
fn unknown_window_is_a_named_error() {
    let bed = TestBed::start().unwrap();
    let out = gamepilot()
        .args([
            "capture",
            "--window",
            "No Such Game",
            "--display",
            &bed.display,
            "--out",
            "/tmp/never.png",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no window matches title \"No Such Game\""), "{err}");
}

#[test]
fn nested_bed_has_a_second_input_device() {
    let bed = TestBed::start_nested().unwrap();
    assert!(bed.outer_display.is_some() && bed.xephyr_window.is_some());
    let x = bed.x11().unwrap();
    assert!(x.extensions().xtest && x.extensions().xinput2);
}

#[test]
fn a_reflex_rate_or_heartbeat_bound_out_of_range_is_a_named_error() {
    // decisions.md "reflex cadence 30–240 Hz": checked before anything starts
    for (args, names) in [
        (&["--hz", "5"][..], "--hz 5"),
        (&["--hz", "1000"][..], "--hz 1000"),
        (&["--hz", "60", "--stale-ms", "20"][..], "--stale-ms 20"),
        (&["--stale-ms", "600000"][..], "--stale-ms 600000"),
    ] {
        let out = gamepilot()
            .args(["run", "--window", "0x1", "--goal", "g", "--display", ":99"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(names), "{args:?}: {err}");
    }
}

#[test]
fn a_corrupted_multimodal_projector_is_refused_before_the_host_starts() {
    // FR-MODEL-005: --mmproj is verified like the weights; a bad digest names the file
    use sha2::Digest as _;
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny.gguf");
    let proj = dir.path().join("mmproj.gguf");
    std::fs::write(&model, b"GGUF\x03\0\0\0 a stand-in model").unwrap();
    std::fs::write(&proj, b"GGUF\x03\0\0\0 a projector, one byte changed").unwrap();
    let hex = |b: &[u8]| {
        sha2::Sha256::digest(b)
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<String>()
    };
    let good_model = hex(&std::fs::read(&model).unwrap());
    let claimed = hex(b"GGUF\x03\0\0\0 a projector, as published");
    let out = gamepilot()
        .args(["bench", "model", "--server", "/nonexistent/llama-server"])
        .arg("--model")
        .arg(&model)
        .args(["--sha256", &good_model])
        .arg("--mmproj")
        .arg(&proj)
        .args(["--mmproj-sha256", &claimed])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("mmproj.gguf") && err.contains("failed SHA-256 verification"),
        "names the projector and the integrity failure: {err}"
    );
    assert!(
        !err.contains("cannot be started"),
        "refused before looking for the server: {err}"
    );
}

#[test]
fn doctor_says_which_host_it_is_and_whether_it_sees_images() {
    // The same probe run makes, for each host kind the scripted host imitates
    use gamepilot_testbed::{HostConfig, ImitatedHost, Reply, ScriptedHost};
    let bed = TestBed::start().unwrap();
    for (kind, vision, says) in [
        (ImitatedHost::LlamaCpp, true, "llama.cpp host"),
        (ImitatedHost::Ollama, true, "Ollama host"),
        (ImitatedHost::LmStudio, false, "LM Studio host"),
        (ImitatedHost::Vllm, true, "vLLM host"),
    ] {
        let host = ScriptedHost::start(HostConfig::new().kind(kind).vision(vision), |_| {
            Reply::content("unused")
        })
        .unwrap();
        let doc = gamepilot()
            .args([
                "doctor",
                "--display",
                &bed.display,
                "--model-endpoint",
                &host.base_url(),
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&doc.stdout);
        let line = text
            .lines()
            .find(|l| l.contains("model host"))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(line.contains(says), "{kind:?}: {line}");
        let images = match (kind, vision) {
            (ImitatedHost::Vllm, _) => "sees images: not said",
            (_, true) => "sees images: yes",
            (_, false) => "sees images: no",
        };
        assert!(line.contains(images), "{kind:?}: {line}");
    }
}

#[test]
fn a_goal_check_or_sensor_file_that_does_not_compile_is_refused_before_any_window_or_host() {
    // FR-PERC-008 (sensors compile before they are evaluated): what the flags alone decide is refused
    // first, named, in well under 2 s: no display is opened (":999" has none) and no llama-server is
    // started (the `--llama-server` given would leave a mark if it were).
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    let server = dir.path().join("llama-server");
    std::fs::write(
        &server,
        format!("#!/bin/sh\ntouch {}\nsleep 30\n", started.display()),
    )
    .unwrap();
    Command::new("chmod").arg("755").arg(&server).status().unwrap();
    let sensors = dir.path().join("bad.sensors");
    std::fs::write(&sensors, "sensor coins = region_integer([10, 10, 40, 20]\n").unwrap();
    let model = dir.path().join("tiny.gguf");
    std::fs::write(&model, b"GGUF\x03\0\0\0 a stand-in model").unwrap();
    for (extra, names) in [
        (vec!["--goal-check", "coins >="], "--goal-check"),
        (
            vec!["--sensors", sensors.to_str().unwrap()],
            "sensor file has errors",
        ),
    ] {
        let t = Instant::now();
        let out = gamepilot()
            .args([
                "run",
                "--display",
                ":999",
                "--window",
                "0x1",
                "--goal",
                "collect a coin",
            ])
            .arg("--llama-server")
            .arg(&server)
            .arg("--model")
            .arg(&model)
            .args(extra)
            .output()
            .unwrap();
        let took = t.elapsed();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(names), "named: {err}");
        assert!(took < Duration::from_secs(2), "refused in {took:?}: {err}");
        assert!(!started.exists(), "no model host was started: {err}");
        assert!(!err.contains(":999"), "no display was opened first: {err}");
    }
}

#[test]
fn the_scene_benchmark_replays_the_kept_real_game_screens_and_names_a_broken_stream() {
    // The latency benchmark's own plumbing, against a scripted host: the default set (the committed
    // recordings and every gzipped real-game stream in corpus/scenes) reads and replays, each new
    // screen is counted once, and a stream that is not gzip is a named error, not a silent skip.
    use gamepilot_testbed::{plan_reply, HostConfig, Reply, ScriptedHost};
    let host = ScriptedHost::start(HostConfig::new(), |req| {
        if req.prompt_text().contains("deliberative planner") {
            plan_reply(req, &[("click the named item", "")])
        } else {
            Reply::content(r#"{"action":"wait","duration_ms":300}"#)
        }
    })
    .unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let kept = std::fs::read_dir(root.join("corpus/scenes"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .to_string_lossy()
                .ends_with(".jsonl.gz")
        })
        .count();
    assert!(kept >= 10, "the real-game screens are kept: {kept}");
    let out = gamepilot()
        .current_dir(&root)
        .args(["bench", "model", "--scenes", "--url", &host.base_url()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replayed = text
        .lines()
        .filter(|l| l.contains(" new screens acted on "))
        .count();
    assert_eq!(replayed, kept + 2, "{text}");
    let figures: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert!(figures["screens"].as_u64().unwrap() >= 1, "{figures}");
    assert!(
        figures["deliberative_passes"].as_u64().unwrap() >= kept as u64,
        "{figures}"
    );

    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.jsonl.gz");
    std::fs::write(&broken, b"not gzip at all").unwrap();
    let out = gamepilot()
        .args(["bench", "model", "--url", &host.base_url(), "--scenes"])
        .arg(&broken)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("broken.jsonl.gz"), "{err}");
}
