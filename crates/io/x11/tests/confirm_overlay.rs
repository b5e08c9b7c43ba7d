//! The confirmation overlay on a real X server (FR-SAFE-005, FR-SAFE-007): under a nested Xephyr, the
//! agent's own XTest clicks on "Allow" do not confirm, the nested server's own pointer (the "user") does,
//! and the overlay never covers the practice game's pixels.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use gamepilot_core::{Point, Rect};
use gamepilot_testbed::{Arena, ArenaOptions, TestBed};
use gamepilot_x11::confirm::{Answer, Choice, ConfirmOverlay, ConfirmRequest};
use gamepilot_x11::input::XTestInput;
use gamepilot_x11::X11;
use std::time::{Duration, Instant};

fn request(timeout: Duration) -> ConfirmRequest {
    ConfirmRequest {
        action: "click (520, 436) in the practice arena".into(),
        pattern: "spend".into(),
        text: "Spend 100 gold?".into(),
        timeout,
    }
}

/// The agent's input path: XTest on the display the agent drives, to a screen point reached through a
/// transform chain (the root window's: capture space is screen space).
fn xtest_click_screen(x: &X11, p: Point) {
    let input = XTestInput::new(x).unwrap();
    let chain = x.transform_for(x.root).unwrap();
    input.motion_to(x, chain.capture_to_screen(p).unwrap()).unwrap();
    input.sync(x).unwrap();
    std::thread::sleep(Duration::from_millis(60));
    input.button(x, 1, true).unwrap();
    input.sync(x).unwrap();
    std::thread::sleep(Duration::from_millis(40));
    input.button(x, 1, false).unwrap();
    input.sync(x).unwrap();
}

/// A click in the game window's capture space through the agent's input path.
fn agent_click(x: &X11, win: u32, p: Point) {
    let input = XTestInput::new(x).unwrap();
    let chain = x.transform_for(win).unwrap();
    input.motion_to(x, chain.capture_to_screen(p).unwrap()).unwrap();
    input.sync(x).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    input.button(x, 1, true).unwrap();
    input.sync(x).unwrap();
    std::thread::sleep(Duration::from_millis(80));
    input.button(x, 1, false).unwrap();
    input.sync(x).unwrap();
}

/// The "user": XTest on the OUTER display over Xephyr's window, which reaches the nested server from
/// Xephyr's own pointer device (not an XTEST device there). Returns when the release was sent.
fn user_click(bed: &TestBed, nested_p: Point) -> Instant {
    let outer = X11::connect(bed.outer_display.as_deref()).unwrap();
    let xephyr = bed.xephyr_window.unwrap();
    let origin = outer.client_rect(xephyr).unwrap();
    let input = XTestInput::new(&outer).unwrap();
    let chain = outer.transform_for(outer.root).unwrap();
    let p = Point::new(origin.x + nested_p.x, origin.y + nested_p.y);
    input
        .motion_to(&outer, chain.capture_to_screen(p).unwrap())
        .unwrap();
    input.sync(&outer).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    input.button(&outer, 1, true).unwrap();
    input.sync(&outer).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    input.button(&outer, 1, false).unwrap();
    input.sync(&outer).unwrap();
    Instant::now()
}

/// Poll the overlay (as the agent's loop does, every 5 ms) until it answers or `within` passes.
fn wait_answer(o: &mut ConfirmOverlay, within: Duration) -> Option<Answer> {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if let Some(a) = o.poll() {
            return Some(a);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

/// The nested game on its "Spend 100 gold?" dialogue, reached by the agent's own click on Shop.
fn game_at_the_dialogue() -> (TestBed, Arena) {
    let mut bed = TestBed::start_nested().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let x = bed.x11().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    agent_click(&x, arena.window.id, Point::new(640, 550)); // the menu's Shop button
    arena
        .wait_for(Duration::from_secs(5), |s| s["screen"] == "confirm")
        .expect("the shop dialogue opens");
    (bed, arena)
}

/// One pixel of the screen as 0xRRGGBB, read back from the server.
fn screen_pixel(x: &X11, p: Point) -> u32 {
    use x11rb::protocol::xproto::{ConnectionExt as _, ImageFormat};
    let img = x
        .conn
        .get_image(ImageFormat::Z_PIXMAP, x.root, p.x as i16, p.y as i16, 1, 1, !0)
        .unwrap()
        .reply()
        .unwrap();
    u32::from_le_bytes([img.data[0], img.data[1], img.data[2], 0])
}

fn centre(r: Rect) -> Point {
    r.center()
}

#[test]
fn the_agents_own_xtest_click_on_allow_does_not_confirm_but_the_users_does() {
    // FR-SAFE-005: only a real device answers; FR-SAFE-007: the overlay sits outside the game's pixels
    let (bed, arena) = game_at_the_dialogue();
    let x = bed.x11().unwrap();
    let target = x.client_rect(arena.window.id).unwrap();
    let mut o = ConfirmOverlay::show(Some(&bed.display), target, &[], &request(Duration::from_secs(30)))
        .unwrap()
        .expect("room for the overlay outside the game");
    assert!(
        o.rect().intersection(&target).is_none(),
        "{:?} {target:?}",
        o.rect()
    );
    // The real geometry on the server: the mapped overlay window against the game's client rectangle.
    let real = x.client_rect(o.window()).unwrap();
    assert_eq!(real, o.rect());
    assert!(real
        .intersection(&x.client_rect(arena.window.id).unwrap())
        .is_none());
    assert!(o.poll().is_none(), "nothing answered yet");
    // What the user sees: the server's pixels under the overlay are its picture (green Allow, red Reject).
    for (which, colour) in [(Choice::Allow, 0x2e7d32u32), (Choice::Reject, 0xb71c1c)] {
        let r = o.button_rect(which);
        assert_eq!(
            screen_pixel(&x, Point::new(r.x + 6, r.y + 6)),
            colour,
            "{which:?}"
        );
    }

    // (a) The agent's input path clicks Allow: ignored.
    let allow = o.button_rect(Choice::Allow);
    xtest_click_screen(&x, centre(allow));
    assert_eq!(wait_answer(&mut o, Duration::from_millis(600)), None);
    assert!(o.ignored_synthetic() >= 2, "press and release seen and ignored");
    assert_eq!(arena.state().unwrap()["gold"], 250, "nothing was spent");
    assert_eq!(
        arena.state().unwrap()["screen"],
        "confirm",
        "the click did not reach the game either"
    );

    // (b) The user clicks Allow: confirmed.
    let sent = user_click(&bed, centre(allow));
    let answer = wait_answer(&mut o, Duration::from_secs(3));
    let took = sent.elapsed();
    assert_eq!(answer, Some(Answer::Allowed));
    eprintln!("user release to Allowed seen by poll: {took:?}");
    drop(o);
    // The hold is released: the agent's click on the dialogue's Yes reaches the game, which spends.
    let st = arena.state().unwrap();
    assert_eq!(st["gold"], 250);
    agent_click(&x, arena.window.id, Point::new(520, 436));
    let after = arena
        .wait_for(Duration::from_secs(5), |s| s["gold"] == 150)
        .expect("the purchase went through once allowed");
    assert_ne!(after["screen"], "confirm");
}

#[test]
fn the_user_rejecting_leaves_the_game_unchanged() {
    // FR-SAFE-005
    let (bed, arena) = game_at_the_dialogue();
    let x = bed.x11().unwrap();
    let target = x.client_rect(arena.window.id).unwrap();
    let before = arena.state().unwrap();
    eprintln!("target {target:?} screen {:?}", x.screen_size());
    let mut o = ConfirmOverlay::show(Some(&bed.display), target, &[], &request(Duration::from_secs(30)))
        .unwrap()
        .expect("room for the overlay");
    user_click(&bed, centre(o.button_rect(Choice::Reject)));
    assert_eq!(
        wait_answer(&mut o, Duration::from_secs(3)),
        Some(Answer::Rejected)
    );
    drop(o);
    std::thread::sleep(Duration::from_millis(200));
    let after = arena.state().unwrap();
    assert_eq!(after["gold"], before["gold"]);
    assert_eq!(after["gold"], 250);
    assert_eq!(
        after["screen"], "confirm",
        "the dialogue is still waiting; nothing was clicked"
    );
}

#[test]
fn no_answer_times_out_and_a_closed_overlay_says_so() {
    // FR-SAFE-005: unattended holds are bounded
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::default()).unwrap();
    let x = bed.x11().unwrap();
    let target = x.client_rect(arena.window.id).unwrap();
    let t0 = Instant::now();
    let mut o = ConfirmOverlay::show(
        Some(&bed.display),
        target,
        &[],
        &request(Duration::from_millis(400)),
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        wait_answer(&mut o, Duration::from_secs(3)),
        Some(Answer::TimedOut)
    );
    assert!(t0.elapsed() >= Duration::from_millis(400));
    let mut o = ConfirmOverlay::show(Some(&bed.display), target, &[], &request(Duration::from_secs(30)))
        .unwrap()
        .unwrap();
    use x11rb::connection::Connection as _;
    use x11rb::protocol::xproto::ConnectionExt as _;
    x.conn.destroy_window(o.window()).unwrap();
    x.conn.flush().unwrap();
    assert_eq!(wait_answer(&mut o, Duration::from_secs(3)), Some(Answer::Closed));
}
