//! `gamepilot run` with the game's own windows in view, against the scripted host. In a real GTK game
//! (sgt-puzzles' Net): a menu-bar menu opens as a popup window and an item chosen from it changes the
//! board; the game's About dialog is closed with its own Close button; its configuration dialog, which
//! the window manager puts away from the game, is moved over it, typed into and confirmed. In a real SDL
//! game's key-driven menu (LTris): the observation marks the selected item and two Down presses move it
//! two items. Every outcome is judged by the game itself (its window's size, its dialog window, its menu
//! as OCR reads it), never by the agent. In a tile puzzle (sgt-fifteen) a tile that cannot slide is
//! followed, without a model call, by the nearest tile like it until one slides, and the model is told.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code

mod common;

use common::{events, mark_with, show};
use gamepilot_core::WindowLayer;
use gamepilot_testbed::{HostConfig, ReceivedChat, Reply, ScriptedHost, TestBed};
use serde_json::{json, Value};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use x11rb::protocol::xproto::{ConfigureWindowAux, ConnectionExt as _};

/// Never true: these runs end on their action budget or a signal, and the game's state is the judge.
const NEVER: &str = "region_fraction([0, 0, 8, 8], value>0.99) > 2";

/// Launch `binary` on the bed, niced (a game drawing as fast as it can would take the cores a loaded
/// test machine shares with the agent, whose reflex is what these tests are not about), and wait for
/// its mapped window.
fn launch(bed: &mut TestBed, binary: &str, env: &[(&str, &str)]) -> u32 {
    launch_with(bed, binary, &[], env)
}

/// [`launch`] with arguments for the game (a game ID, say).
fn launch_with(bed: &mut TestBed, binary: &str, args: &[&str], env: &[(&str, &str)]) -> u32 {
    let mut cmd = Command::new("nice");
    cmd.args(["-n", "10", binary]).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let pid = bed.spawn(binary, cmd).unwrap();
    let x = bed.x11().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(w) = x.find_window(&gamepilot_x11::WindowSelector::Pid(pid)) {
            if w.mapped {
                return w.id;
            }
        }
        assert!(Instant::now() < deadline, "{binary}'s window did not appear");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `run` on `window` in the background with `host` as its model and `extra` arguments, recording into
/// a fresh directory (returned, with the recording's path, so it outlives the run).
fn spawn_run(
    bed: &TestBed,
    window: u32,
    host: &ScriptedHost,
    goal: &str,
    extra: &[&str],
) -> (tempfile::TempDir, std::path::PathBuf, std::process::Child) {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    let child = Command::new(env!("CARGO_BIN_EXE_gamepilot"))
        .args(["run", "--display", &bed.display])
        .args(["--window", &format!("0x{window:x}")])
        .args(["--goal", goal, "--goal-check", NEVER])
        .args(["--max-actions", "16", "--session-budget-s", "150", "--unattended"])
        .args(["--tactical-interval-ms", "150", "--grounding", "mark"])
        .args(["--model-endpoint", &host.base_url()])
        .args(extra)
        .arg("--record")
        .arg(&rec)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    (dir, rec, child)
}

fn stop(child: std::process::Child) -> std::process::Output {
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    child.wait_with_output().unwrap()
}

/// Wait up to `within` for `done`; on timeout stop the run and fail with its output.
fn wait_or_fail(
    child: std::process::Child,
    within: Duration,
    what: &str,
    mut done: impl FnMut() -> bool,
) -> std::process::Child {
    let deadline = Instant::now() + within;
    while !done() {
        if Instant::now() >= deadline {
            let out = stop(child);
            panic!("{what}:\n{}", show(&out));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child
}

/// Whether the game of `win` shows a dialog of its own (the X server's word, not the agent's).
fn has_dialog(x: &gamepilot_x11::X11, win: u32) -> bool {
    x.window_family(win)
        .unwrap_or_default()
        .iter()
        .any(|m| m.layer == WindowLayer::Dialog)
}

/// sgt-puzzles' Net, its window sized so its menus fit, as a person would: capture space is the main
/// window's, and a popup's part beyond it is clipped.
fn net(bed: &mut TestBed) -> (u32, gamepilot_x11::X11) {
    let win = launch(bed, "/usr/games/sgt-net", &[]);
    let x = bed.x11().unwrap();
    x.conn
        .configure_window(win, &ConfigureWindowAux::new().width(420).height(460))
        .unwrap();
    x.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while x.client_rect(win).unwrap().w < 400 {
        assert!(
            Instant::now() < deadline,
            "the game's window never took its new size"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    (win, x)
}

#[test]
fn observe_lists_an_open_popups_items_with_marks_inside_it() {
    // FR-PERC-001, FR-PERC-006, FR-PERC-007, INV-PERC-001
    let mut bed = TestBed::start().unwrap();
    let (win, x) = net(&mut bed);
    let at = x.client_rect(win).unwrap();
    // Open the Type menu as a person would: a click on the menu bar.
    let click = Command::new("xdotool")
        .env("DISPLAY", &bed.display)
        .args([
            "mousemove",
            &(at.x + 78).to_string(),
            &(at.y + 12).to_string(),
            "click",
            "1",
        ])
        .status()
        .unwrap();
    assert!(click.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let popup = loop {
        let family = x.window_family(win).unwrap();
        if let Some(m) = family.iter().find(|m| m.layer == WindowLayer::Popup) {
            break m.rect;
        }
        assert!(Instant::now() < deadline, "the Type menu never opened");
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(300));
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gamepilot"))
        .args([
            "observe",
            "--display",
            &bed.display,
            "--window",
            &format!("0x{win:x}"),
        ])
        .args(["--no-a11y", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = show(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("the game's popup at"), "{text}");
    let obs: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("observation.json")).unwrap()).unwrap();
    let in_popup: Vec<(String, gamepilot_core::Rect)> = obs["elements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["layer"] == "popup")
        .filter_map(|e| {
            Some((
                e["label"].as_str()?.to_string(),
                serde_json::from_value(e["bbox"].clone()).ok()?,
            ))
        })
        .collect();
    for item in ["5x5", "9x9", "7x7 wrapping", "Custom..."] {
        let found = in_popup.iter().find(|(l, _)| l == item);
        assert!(found.is_some(), "{item} listed in the popup: {in_popup:?}");
        let (_, b) = found.unwrap();
        assert!(
            popup.contains_rect(b),
            "{item}'s box {b:?} lies inside the popup {popup:?}"
        );
    }
    assert!(dir.path().join("marks.png").exists());
}

#[test]
fn run_chooses_from_a_gtk_games_popup_menu_and_answers_its_dialog() {
    // FR-PERC-001 (the game's popups and dialogs are the game), FR-PERC-006 (their elements marked,
    // said to lie in a popup or dialog), INV-ACT-001 (focus on the game's dialog is the game in front)
    let mut bed = TestBed::start().unwrap();
    let (win, x) = net(&mut bed);
    let before = x.client_rect(win).unwrap();
    let clicked: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    let log = clicked.clone();
    let host = ScriptedHost::start(HostConfig::new(), move |req: &ReceivedChat| {
        if req.system_text().contains("deliberative planner") {
            return gamepilot_testbed::plan_reply(
                req,
                &[
                    ("choose a bigger board", "region"),
                    ("read about the game and close it", "region"),
                ],
            );
        }
        let prompt = req.prompt_text();
        let mut log = log.lock().unwrap();
        let done = |what: &str| log.contains(&what);
        // In the configuration dialog the Width field has the focus, its value selected: press 7 over it
        // (keys to the game's own dialog, which has the focus).
        if done("Custom...") && !done("7") && mark_with(&prompt, "OK", " in dialog").is_some() {
            log.push("7");
            return Reply::json(&json!({"action": "key", "key": "7"}));
        }
        let pick = [
            ("Close", " in dialog", !done("Close")),
            ("9x9", " in popup", !done("9x9")),
            ("Type", "", !done("9x9")),
            ("About", " in popup", done("9x9") && !done("About")),
            ("Help", "", done("9x9") && !done("About")),
            // The game's configuration dialog, which the window manager puts away from the game.
            ("OK", " in dialog", done("Custom...") && !done("OK")),
            ("Custom...", " in popup", done("Close") && !done("Custom...")),
            ("Type", "", done("Close") && !done("Custom...")),
        ]
        .into_iter()
        .filter(|(_, _, wanted)| *wanted)
        .find_map(|(label, with, _)| mark_with(&prompt, label, with).map(|m| (label, m)));
        match pick {
            Some((label, mark)) => {
                log.push(label);
                Reply::json(&json!({"action": "click_mark", "mark": mark}))
            }
            None => Reply::json(&json!({"action": "wait", "duration_ms": 300})),
        }
    })
    .unwrap();
    let (_dir, rec, child) = spawn_run(
        &bed,
        win,
        &host,
        "Choose the 9x9 board, then read the About box and close it.",
        &[],
    );
    // The game's own state: a 9x9 board makes its window taller.
    let child = wait_or_fail(child, Duration::from_secs(120), "the board never changed", || {
        x.client_rect(win).is_ok_and(|r| r.h > before.h + 20)
    });
    let dialog = || has_dialog(&x, win);
    let child = wait_or_fail(
        child,
        Duration::from_secs(90),
        "the About dialog never opened",
        dialog,
    );
    let child = wait_or_fail(
        child,
        Duration::from_secs(90),
        "the About dialog was never answered",
        || !dialog() && clicked.lock().unwrap().contains(&"Close"),
    );
    // Type → Custom… opens "Net configuration" at the screen's corner; run has it moved over the game,
    // types a width of 7 into it and presses its OK: a 7-by-9 board makes the game's window narrower.
    let grown = x.client_rect(win).unwrap();
    let child = wait_or_fail(
        child,
        Duration::from_secs(120),
        "the configuration dialog was never answered",
        || {
            clicked.lock().unwrap().contains(&"OK")
                && !dialog()
                && x.client_rect(win).is_ok_and(|r| r.w + 20 < grown.w)
        },
    );
    let out = stop(child);
    let text = show(&out);
    assert_eq!(out.status.code(), Some(130), "{text}");
    let ev = events(&rec);
    let layered = |layer: &str| {
        ev.iter()
            .filter(|e| e["kind"] == "observation")
            .flat_map(|o| o["marks"].as_array().cloned().unwrap_or_default())
            .filter(|m| m["layer"] == layer)
            .filter_map(|m| m["label"].as_str().map(str::to_string))
            .collect::<Vec<_>>()
    };
    assert!(
        layered("popup").iter().any(|l| l == "9x9"),
        "{:?}",
        layered("popup")
    );
    assert!(
        layered("dialog").iter().any(|l| l == "Close"),
        "{:?}",
        layered("dialog")
    );
    assert!(
        layered("dialog").iter().any(|l| l == "OK"),
        "{:?}",
        layered("dialog")
    );
    assert!(
        text.contains("moved the game's dialog \"Net configuration\""),
        "{text}"
    );
    // A click may go again when its menu had not opened by the next look.
    let mut clicks = clicked.lock().unwrap().clone();
    clicks.dedup();
    assert_eq!(
        clicks,
        [
            "Type",
            "9x9",
            "Help",
            "About",
            "Close",
            "Type",
            "Custom...",
            "7",
            "OK"
        ],
        "each click found its item where the game showed it"
    );
    assert!(x.server_held().unwrap().is_empty());
    gamepilot_testbed::keep_session(&rec, "sgt-net-menus-and-dialogs").unwrap();
}

#[test]
fn run_switches_mines_to_16x16_from_its_type_menu_in_a_small_window() {
    // FR-PERC-001, FR-PERC-005, FR-PERC-006, FR-GND-001: before any plan, the goal's words hold the whole
    // label "Type" (the session opens the menu without a model call); the model picks the item
    mines_board_from_the_type_menu("open the Type menu, then pick the 16x16 board", false);
}

#[test]
fn run_switches_mines_to_16x16_when_the_plan_names_type_and_the_session_clicks_it() {
    // FR-GND-001 as well: the plan's step names Type, clicked without a model call; the model picks the item
    mines_board_from_the_type_menu("click Type", true);
}

/// sgt-mines at its own 9x9 size (no resize: the Type menu's popup covers most of the 240 px window, and
/// its menu bar is one detected rectangle holding "Game", "Type" and "Help"): Type, then "16x16, 40
/// mines" switches the board, judged by the game's window widening.
fn mines_board_from_the_type_menu(step: &'static str, direct: bool) {
    let mut bed = TestBed::start().unwrap();
    let win = launch(&mut bed, "/usr/games/sgt-mines", &[("MINES_DEFAULT", "9x9n10")]);
    let x = bed.x11().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let before = x.client_rect(win).unwrap();
    assert!(before.w < 300, "a 9x9 board: {before:?}");
    const ITEM: &str = "16x16, 40 mines";
    let clicked: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    let log = clicked.clone();
    let host = ScriptedHost::start(HostConfig::new(), move |req: &ReceivedChat| {
        if req.system_text().contains("deliberative planner") {
            return gamepilot_testbed::plan_reply(req, &[(step, "region")]);
        }
        let prompt = req.prompt_text();
        let mut log = log.lock().unwrap();
        let pick = [(ITEM, " in popup"), ("Type", "")]
            .into_iter()
            .find_map(|(label, with)| mark_with(&prompt, label, with).map(|m| (label, m)));
        match pick {
            Some((label, mark)) if !log.contains(&ITEM) => {
                log.push(label);
                Reply::json(&json!({"action": "click_mark", "mark": mark}))
            }
            _ => Reply::json(&json!({"action": "wait", "duration_ms": 300})),
        }
    })
    .unwrap();
    let (_dir, rec, child) = spawn_run(
        &bed,
        win,
        &host,
        "Switch to the 16x16 board with 40 mines using the Type menu",
        // The session's own click needs the plan's step first (the goal alone names no element to click).
        if direct { &["--wait-for-plan"] } else { &[] },
    );
    let child = wait_or_fail(child, Duration::from_secs(120), "the board never grew", || {
        x.client_rect(win).is_ok_and(|r| r.w > before.w + 100)
    });
    let out = stop(child);
    let text = show(&out);
    assert_eq!(out.status.code(), Some(130), "{text}");
    assert_eq!(clicked.lock().unwrap().last(), Some(&ITEM), "{text}");
    let ev = events(&rec);
    assert!(ev.iter().any(|e| e["kind"] == "observation"
        && e["marks"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["label"] == ITEM && m["layer"] == "popup"))));
    let opened_by = |how: &str| {
        ev.iter()
            .any(|e| e["kind"] == "note" && e["text"].as_str().is_some_and(|t| t.starts_with(how)))
    };
    let named = opened_by("grounded without a model call: the subgoal names 'type'");
    let worded = opened_by("grounded without a model call: the subgoal's words hold the whole label 'type'");
    assert_eq!((named, worded), (direct, !direct), "who opened the menu:\n{text}");
    assert!(x.server_held().unwrap().is_empty());
}

/// The LTris menu item a tactical prompt's observation marks selected.
fn selected_item(prompt: &str) -> Option<&'static str> {
    ["New", "Controls", "Graphics", "Audio"]
        .into_iter()
        .find(|l| mark_with(prompt, l, " selected").is_some())
}

#[test]
fn run_sees_the_cursor_of_an_sdl_games_key_driven_menu_move_two_items() {
    // FR-PERC-006 (the selected item marked), FR-GND-006 (a key press verified by the cursor moving)
    let mut bed = TestBed::start().unwrap();
    let home = tempfile::tempdir().unwrap();
    let home_dir = home.path().to_str().unwrap().to_string();
    let win = launch(
        &mut bed,
        "/usr/games/ltris",
        &[("HOME", &home_dir), ("SDL_AUDIODRIVER", "dummy")],
    );
    let prompts: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = prompts.clone();
    let downs = Arc::new(AtomicU32::new(0));
    let pressed = downs.clone();
    let at_last_press: Mutex<Option<&'static str>> = Mutex::new(None);
    let host = ScriptedHost::start(HostConfig::new(), move |req: &ReceivedChat| {
        if req.system_text().contains("deliberative planner") {
            return gamepilot_testbed::plan_reply(req, &[("move the menu cursor to Controls", "region")]);
        }
        let prompt = req.prompt_text();
        let now_selected = selected_item(&prompt);
        seen.lock().unwrap().push(prompt);
        // LTris fades the old item out over about a second (two items stand out meanwhile, and none is
        // marked): like a person, press again once the cursor is seen resting on a new item.
        let mut last = at_last_press.lock().unwrap();
        let n = pressed.load(Ordering::SeqCst);
        if n < 3 && (n == 0 || (now_selected.is_some() && now_selected != *last)) {
            pressed.fetch_add(1, Ordering::SeqCst);
            *last = now_selected;
            return Reply::json(&json!({"action": "key", "key": "Down"}));
        }
        Reply::json(&json!({"action": "wait", "duration_ms": 300}))
    })
    .unwrap();
    let (_dir, rec, child) = spawn_run(&bed, win, &host, "Move the menu cursor down to Graphics.", &[]);
    let child = wait_or_fail(child, Duration::from_secs(120), "three Down presses", || {
        downs.load(Ordering::SeqCst) >= 3
    });
    // Looks after the third press, until the cursor is seen resting (LTris fades the old item out and
    // fades a tooltip in over its neighbours; meanwhile two items stand apart and none is marked).
    let child = wait_or_fail(
        child,
        Duration::from_secs(30),
        "the cursor seen on Graphics",
        || {
            prompts
                .lock()
                .unwrap()
                .iter()
                .any(|p| selected_item(p) == Some("Graphics"))
        },
    );
    let out = stop(child);
    let text = show(&out);
    let prompts = prompts.lock().unwrap();
    // Which item each prompt's observation marks selected.
    let selected: Vec<Option<&str>> = prompts.iter().map(|p| selected_item(p)).collect();
    // LTris starts with no item chosen (its heading stands out alone); the first Down chooses New Game,
    // and each Down after moves the cursor one item.
    let from = selected
        .iter()
        .position(|s| *s == Some("New"))
        .unwrap_or_else(|| {
            panic!(
                "New Game selected after the first Down: {selected:?}\n{}\n{text}",
                prompts
                    .last()
                    .map(|p| gamepilot_context::tail::current_listing(p).join("\n"))
                    .unwrap_or_default()
            )
        });
    let after: Vec<&str> = selected[from..].iter().flatten().copied().collect();
    let mut moves = after.clone();
    moves.dedup();
    assert!(
        moves.starts_with(&["New", "Controls", "Graphics"]),
        "two more Down presses move the cursor two items: {selected:?}\n{text}"
    );
    let ev = events(&rec);
    let keys: Vec<&Value> = ev
        .iter()
        .filter(|e| e["kind"] == "action" && e["payload"]["action"] == "key")
        .collect();
    assert!(keys.len() >= 2, "{text}");
    for k in &keys[1..] {
        let id = k["action"].as_u64();
        assert!(
            ev.iter()
                .any(|e| e["kind"] == "verdict" && e["action"].as_u64() == id && e["verdict"] == "confirmed"),
            "each Down press is verified: {k}\n{text}"
        );
    }
}

/// How many dark pixels (digits drawn on a tile) the window shows in `region`.
fn dark_pixels(x: &gamepilot_x11::X11, win: u32, region: gamepilot_core::Rect) -> usize {
    let mut cap = gamepilot_x11::WindowCapturer::new(x, win).unwrap();
    let frame = cap.capture(x, gamepilot_core::MonoTime::ZERO).unwrap();
    let view = frame.view();
    let mut n = 0;
    for y in region.y..region.y + region.h as i32 {
        for x in region.x..region.x + region.w as i32 {
            let [r, g, b] = view.rgb(x as u32, y as u32);
            if u32::from(r) + u32::from(g) + u32::from(b) < 200 {
                n += 1;
            }
        }
    }
    n
}

#[test]
fn a_tile_that_cannot_slide_is_followed_by_its_nearest_like_until_one_slides_and_the_model_is_told() {
    // FR-LOOP-002, FR-GND-006, FR-CTX-004: the model picks a tile away from the gap; its click is
    // refuted (nothing moved); the session clicks the nearest tiles like it without a model call, each
    // verified, until one slides into the gap; the note of what worked reaches the next prompt.
    let mut bed = TestBed::start().unwrap();
    // The gap at row 1, column 4: of "9"'s neighbours only "8" (above) and "15" (right) can slide.
    let board = "4x4:13,11,8,0,1,5,9,15,10,6,7,2,14,4,12,3";
    let win = launch_with(&mut bed, "/usr/games/sgt-fifteen", &[board], &[]);
    let x = bed.x11().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let gap = gamepilot_core::Rect::new(174, 57, 36, 32);
    assert_eq!(dark_pixels(&x, win, gap), 0, "the gap is empty at the start");
    let prompts: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = prompts.clone();
    let asked = Arc::new(AtomicU32::new(0));
    let clicks = asked.clone();
    let host = ScriptedHost::start(HostConfig::new(), move |req: &ReceivedChat| {
        if req.system_text().contains("deliberative planner") {
            return gamepilot_testbed::plan_reply(
                req,
                &[(
                    "Make a first move: slide a tile next to the empty space into it",
                    "",
                )],
            );
        }
        let prompt = req.prompt_text();
        let nine = mark_with(&prompt, "9", "row 2 column 3");
        seen.lock().unwrap().push(prompt);
        match nine {
            Some(mark) if clicks.fetch_add(1, Ordering::SeqCst) == 0 => {
                Reply::json(&json!({"action": "click_mark", "mark": mark}))
            }
            _ => Reply::json(&json!({"action": "wait", "duration_ms": 300})),
        }
    })
    .unwrap();
    let (_dir, rec, child) = spawn_run(
        &bed,
        win,
        &host,
        "Make a first move: slide a tile next to the empty space into it",
        &[],
    );
    let child = wait_or_fail(
        child,
        Duration::from_secs(120),
        "no tile slid into the gap",
        || dark_pixels(&x, win, gap) > 20,
    );
    let child = wait_or_fail(
        child,
        Duration::from_secs(60),
        "the model was never told what worked",
        || {
            prompts
                .lock()
                .unwrap()
                .iter()
                .any(|p| p.contains("changed the screen"))
        },
    );
    let out = stop(child);
    let text = show(&out);
    assert_eq!(out.status.code(), Some(130), "{text}");
    let ev = events(&rec);
    let clicked: Vec<&Value> = ev
        .iter()
        .filter(|e| e["kind"] == "action" && e["payload"]["action"] == "click")
        .collect();
    let verdict = |a: &Value| {
        ev.iter()
            .find(|e| e["kind"] == "verdict" && e["action"] == a["action"])
            .and_then(|e| e["verdict"].as_str())
            .unwrap_or("none")
            .to_string()
    };
    let verdicts: Vec<String> = clicked.iter().map(|a| verdict(a)).collect();
    println!("clicks: {verdicts:?}\n{text}");
    assert_eq!(
        verdicts.first().map(String::as_str),
        Some("refuted"),
        "the model's tile: {text}"
    );
    assert_eq!(
        verdicts.last().map(String::as_str),
        Some("confirmed"),
        "the tile that slid: {verdicts:?}\n{text}"
    );
    assert!(
        (2..=4).contains(&clicked.len()),
        "the model's click, then at most three tried: {verdicts:?}"
    );
    let explored = ev
        .iter()
        .filter(|e| {
            e["kind"] == "note"
                && e["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("exploring without a model call"))
        })
        .count();
    assert_eq!(
        explored,
        clicked.len() - 1,
        "every click after the model's was exploration's: {text}"
    );
    assert!(
        asked.load(Ordering::SeqCst) >= 2,
        "the model was asked again after: {text}"
    );
    assert!(x.server_held().unwrap().is_empty());
}

#[test]
fn an_unsure_model_gets_menus_explored_noted_and_closed_until_the_one_that_helps() {
    // FR-LOOP-002 (exploration: try, verify, note, go back, try the next), FR-CTX-004 (what each try
    // opened reaches the model's notes): on sgt-net the model answers `unsure` wherever "About" is not
    // listed; the session opens the game's menus in turn without a model call, notes what each shows,
    // closes each with Escape when the model is unsure there too, and the About dialog opens from the
    // menu that has it. Judged by the game's own dialog window.
    let mut bed = TestBed::start().unwrap();
    let (win, x) = net(&mut bed);
    let goal = "Learn which version of this puzzle is installed";
    let prompts: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = prompts.clone();
    let host = ScriptedHost::start(HostConfig::new(), move |req: &ReceivedChat| {
        if req.system_text().contains("deliberative planner") {
            return gamepilot_testbed::plan_reply(req, &[("learn which version this is", "region")]);
        }
        let prompt = req.prompt_text();
        let about = mark_with(&prompt, "About", " in popup");
        let dialog = mark_with(&prompt, "Close", " in dialog");
        seen.lock().unwrap().push(prompt);
        match (about, dialog) {
            (_, Some(_)) => Reply::json(&json!({"action": "wait", "duration_ms": 300})),
            (Some(mark), None) => Reply::json(&json!({"action": "click_mark", "mark": mark})),
            (None, None) => Reply::json(&json!({"action": "unsure"})),
        }
    })
    .unwrap();
    let (_dir, rec, child) = spawn_run(&bed, win, &host, goal, &[]);
    let dialog = || has_dialog(&x, win);
    let child = wait_or_fail(
        child,
        Duration::from_secs(150),
        "the About dialog never opened",
        dialog,
    );
    let out = stop(child);
    let text = show(&out);
    assert_eq!(out.status.code(), Some(130), "{text}");
    let notes = common::notes(&rec);
    let tries: Vec<&str> = notes
        .iter()
        .filter_map(|n| n.strip_prefix("exploring (unsure): '"))
        .filter_map(|n| n.split('\'').next())
        .collect();
    println!("tries: {tries:?}\n{}", notes.join("\n"));
    assert_eq!(
        tries.last(),
        Some(&"Help"),
        "the menus tried in turn, Help the last: {tries:?}"
    );
    assert!(tries.len() >= 2, "{tries:?}");
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("the model is unsure: exploring from")),
        "{}",
        notes.join("\n")
    );
    let opened = notes
        .iter()
        .filter(|n| n.starts_with("exploring: '") && n.contains("' opens a menu showing"))
        .count();
    assert_eq!(opened, tries.len(), "each try's menu noted: {}", notes.join("\n"));
    let closed = notes
        .iter()
        .filter(|n| n.starts_with("exploring (unsure): back by Escape"))
        .count();
    assert_eq!(
        closed,
        tries.len() - 1,
        "every menu but Help's closed again: {}",
        notes.join("\n")
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("exploring ended with a choice made where 'help' opens a menu")),
        "{}",
        notes.join("\n")
    );
    // The model read what the first menu held when it was asked on the next.
    let first = tries[0].to_lowercase();
    assert!(
        prompts
            .lock()
            .unwrap()
            .iter()
            .any(|p| p.contains(&format!("'{first}' opens a menu showing"))),
        "the note reached the model"
    );
    assert!(x.server_held().unwrap().is_empty());
}
