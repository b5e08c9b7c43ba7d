//! The practice game on a real Xvfb test bed: its window is found (title, class, pid, size), it reports
//! its state, its own frame dump (SIGUSR1) is a PNG of the window's size that matches a Composite capture
//! pixel for pixel, and real XTest input reaches it as the game's rules say. Needs Xvfb and openbox
//! (scripts/install-deps.sh); build the binary first: `cargo build -p practice-arena`.

// Test helpers outside #[test] functions may panic too.
#![allow(clippy::expect_used)]

use gamepilot_core::{Keysym, MonoTime};
use gamepilot_testbed::{Arena, ArenaOptions, TestBed};
use gamepilot_x11::input::XTestInput;
use gamepilot_x11::{WindowCapturer, X11};
use std::time::Duration;
use x11rb::protocol::xproto::ConnectionExt as _;

#[test]
fn arena_window_state_and_frame_dump() {
    // Capture of the practice game window is non-black and matches the game's own frame.
    let mut bed = TestBed::start().expect("test bed (Xvfb + openbox)");
    let opts = ArenaOptions {
        seed: 11,
        width: 960,
        height: 600,
        extra_args: Vec::new(),
    };
    let arena = Arena::launch(&mut bed, &opts).expect("practice-arena window");
    assert_eq!(arena.window.title, "Practice Arena");
    assert_eq!(arena.window.class, "PracticeArena");
    assert_eq!(arena.window.instance, "practice-arena");
    assert_eq!(arena.window.pid, Some(arena.pid));
    assert_eq!((arena.window.geometry.w, arena.window.geometry.h), (960, 600));

    let first = arena
        .states()
        .expect("state lines")
        .into_iter()
        .next()
        .expect("a first state line");
    assert_eq!(first["screen"], "menu");
    assert_eq!(first["seed"], 11);
    assert_eq!(first["gold"], 250);

    let state = arena.request_dump().expect("frame dump");
    assert_eq!(state["screen"], "menu");
    let dump = image::open(&arena.frame_file).expect("png").to_rgb8();
    assert_eq!(dump.dimensions(), (960, 600));

    // The window as the X server shows it equals the game's own framebuffer (idle: nothing redraws).
    let x = bed.x11().expect("x11");
    let mut cap = WindowCapturer::new(&x, arena.window.id).expect("capturer");
    let frame = cap.capture(&x, MonoTime::from_millis(0)).expect("capture");
    assert_eq!((frame.width, frame.height), (960, 600));
    let view = frame.view();
    assert!(!view.is_all_black());
    let mut differing = 0u32;
    for y in 0..600 {
        for xx in 0..960 {
            if view.rgb(xx, y) != dump.get_pixel(xx, y).0 {
                differing += 1;
            }
        }
    }
    let after = arena.request_dump().expect("second dump");
    assert_eq!(after["frame"], state["frame"], "an idle game must not redraw");
    assert_eq!(
        differing, 0,
        "captured window differs from the game's own frame in {differing} pixels"
    );
}

fn play_bed() -> (TestBed, Arena) {
    let mut bed = TestBed::start().expect("test bed (Xvfb + openbox)");
    let opts = ArenaOptions {
        extra_args: vec!["--start-screen".into(), "play".into()],
        ..ArenaOptions::default()
    };
    let arena = Arena::launch(&mut bed, &opts).expect("practice-arena window");
    (bed, arena)
}

#[test]
fn autorepeat_of_a_held_key_is_not_a_press() {
    // A key held past the autorepeat delay: one press, one release, repeats counted apart, and the
    // player moves only while it is held.
    let (bed, arena) = play_bed();
    let x = bed.x11().expect("x11");
    let input = XTestInput::new(&x).expect("xtest");
    let d = input
        .locate(Keysym::from_name("d").expect("keysym"))
        .expect("d on the keyboard");
    let before = arena
        .wait_for(Duration::from_secs(5), |s| s["focused"] == true)
        .expect("focused");
    input.key(&x, d.keycode, true).expect("press");
    input.sync(&x).expect("sync");
    std::thread::sleep(Duration::from_millis(1500));
    input.key(&x, d.keycode, false).expect("release");
    input.sync(&x).expect("sync");
    let after = arena
        .wait_for(Duration::from_secs(3), |s| s["key_events"]["d"]["release"] == 1)
        .expect("game sees the release");
    assert_eq!(after["key_events"]["d"]["press"], 1, "{after}");
    assert!(
        after["repeats"].as_u64().unwrap_or(0) > 0,
        "Xvfb autorepeat should have produced repeats: {after}"
    );
    assert_eq!(after["held_keys"], serde_json::json!([]));
    let dx = after["player"]["x"].as_f64().expect("x") - before["player"]["x"].as_f64().expect("x");
    assert!(
        dx > 200.0 && dx < 400.0,
        "moved {dx} px east in ~1.5 s at 200 px/s"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        arena.state().expect("state")["player"],
        after["player"],
        "stops on release"
    );
}

/// Move the pointer to window point (wx, wy) in relative steps of at most 20 px (no jumps).
fn glide(x: &X11, input: &XTestInput, win: &gamepilot_x11::WindowInfo, wx: i32, wy: i32) {
    let p = x
        .conn
        .query_pointer(x.root)
        .expect("query")
        .reply()
        .expect("pointer");
    let (tx, ty) = (win.geometry.x + wx, win.geometry.y + wy);
    let (mut px, mut py) = (i32::from(p.root_x), i32::from(p.root_y));
    while (px, py) != (tx, ty) {
        let (dx, dy) = ((tx - px).clamp(-20, 20), (ty - py).clamp(-20, 20));
        input.motion_relative(x, dx as i16, dy as i16).expect("motion");
        input.sync(x).expect("sync");
        px += dx;
        py += dy;
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn hover_then_click_activates_and_an_instant_click_is_dropped() {
    // FR-ACT-005: interfaces that activate on hover drop an instantaneous click; debounced input drops a
    // zero-duration press.
    let mut bed = TestBed::start().expect("test bed (Xvfb + openbox)");
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).expect("practice-arena window");
    let x = bed.x11().expect("x11");
    let input = XTestInput::new(&x).expect("xtest");
    arena
        .wait_for(Duration::from_secs(5), |s| s["focused"] == true)
        .expect("focused");
    // Menu "Play" button centre for 1280x720 (see game::layout).
    glide(&x, &input, &arena.window, 640, 330);
    std::thread::sleep(Duration::from_millis(150));
    // Zero-duration click: dropped.
    input.button(&x, 1, true).expect("press");
    input.button(&x, 1, false).expect("release");
    input.sync(&x).expect("sync");
    let s = arena
        .wait_for(Duration::from_secs(3), |s| s["dropped_clicks"] == 1)
        .expect("dropped click");
    assert_eq!(s["screen"], "menu");
    // A held press after hovering: activates.
    input.button(&x, 1, true).expect("press");
    input.sync(&x).expect("sync");
    std::thread::sleep(Duration::from_millis(80));
    input.button(&x, 1, false).expect("release");
    input.sync(&x).expect("sync");
    let s = arena
        .wait_for(Duration::from_secs(3), |s| s["screen"] == "play")
        .expect("play screen");
    assert_eq!(s["clicks"]["Play"], 1, "{s}");
    assert_eq!(s["dropped_clicks"], 1, "{s}");
}
