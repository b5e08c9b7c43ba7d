//! The practice game on a real Xvfb test bed: its window is found (title, class, pid, size), it reports
//! its state, and its own frame dump (SIGUSR1) is a PNG of the window's size that matches a Composite
//! capture of the window pixel for pixel. Needs Xvfb and openbox (scripts/install-deps.sh); build the
//! binary first: `cargo build -p practice-arena`.

use gamepilot_core::MonoTime;
use gamepilot_testbed::{Arena, ArenaOptions, TestBed};
use gamepilot_x11::WindowCapturer;

#[test]
fn arena_window_state_and_frame_dump() {
    // Issue 2: capture of the practice game window is non-black and matches the game's own frame.
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
