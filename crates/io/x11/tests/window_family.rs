//! The game's window family on a real X server (Xvfb with openbox): capture composes the game's own
//! override-redirect popup and its transient dialog over the main window, clipped to it, while another
//! client's window stacked above the game is never captured; focus on the game's dialog counts as the
//! game in front, focus on another client's window never does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use gamepilot_core::{MonoTime, Rect, WindowLayer};
use gamepilot_testbed::TestBed;
use gamepilot_x11::{WindowCapturer, X11};
use std::time::{Duration, Instant};
use x11rb::connection::Connection as _;
use x11rb::protocol::xproto::{
    AtomEnum, ConnectionExt as _, CreateWindowAux, InputFocus, PropMode, Window, WindowClass,
};
use x11rb::wrapper::ConnectionExt as _;

const RED: u32 = 0x00ff_0000;
const GREEN: u32 = 0x0000_ff00;
const BLUE: u32 = 0x0000_00ff;
const YELLOW: u32 = 0x00ff_ff00;

fn window(x: &X11, geometry: (i16, i16, u16, u16), pixel: u32, override_redirect: bool) -> Window {
    let screen = &x.conn.setup().roots[x.screen_num];
    let win = x.conn.generate_id().unwrap();
    let (wx, wy, w, h) = geometry;
    x.conn
        .create_window(
            0,
            win,
            x.root,
            wx,
            wy,
            w,
            h,
            0,
            WindowClass::INPUT_OUTPUT,
            screen.root_visual,
            &CreateWindowAux::new()
                .background_pixel(pixel)
                .override_redirect(u32::from(override_redirect)),
        )
        .unwrap()
        .check()
        .unwrap();
    win
}

fn map_and_wait(x: &X11, win: Window) {
    x.conn.map_window(win).unwrap();
    x.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !x.is_mapped(win).unwrap() {
        assert!(Instant::now() < deadline, "window {win:#x} never mapped");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
}

/// Map `dialog` as a dialog of `main` (`WM_TRANSIENT_FOR`), as toolkits do, and wait for it.
fn map_transient(x: &X11, dialog: Window, main: Window) {
    x.conn
        .change_property32(
            PropMode::REPLACE,
            dialog,
            AtomEnum::WM_TRANSIENT_FOR,
            AtomEnum::WINDOW,
            &[main],
        )
        .unwrap();
    map_and_wait(x, dialog);
}

fn pixel_at(data: &[u8], width: u32, x: i32, y: i32) -> u32 {
    let i = (y as usize * width as usize + x as usize) * 4;
    // BGRX
    u32::from(data[i + 2]) << 16 | u32::from(data[i + 1]) << 8 | u32::from(data[i])
}

fn colours(data: &[u8]) -> Vec<u32> {
    let mut seen: Vec<u32> = data
        .chunks_exact(4)
        .map(|p| u32::from(p[2]) << 16 | u32::from(p[1]) << 8 | u32::from(p[0]))
        .collect();
    seen.sort_unstable();
    seen.dedup();
    seen
}

#[test]
fn capture_composes_the_games_popup_and_dialog_and_never_another_clients_window() {
    // FR-PERC-001, FR-PERC-002, INV-ACT-001
    let bed = TestBed::start().unwrap();
    let game = bed.x11().unwrap();
    let other = bed.x11().unwrap();
    let agent = bed.x11().unwrap();
    let _probe_id = game.conn.generate_id().unwrap();

    let main = window(&game, (10, 10, 300, 200), RED, false);
    map_and_wait(&game, main);
    let main_rect = agent.client_rect(main).unwrap();
    // The game's popup menu: override-redirect, taller than the main window below it.
    let popup = window(
        &game,
        (main_rect.x as i16 + 10, main_rect.y as i16 + 30, 60, 400),
        GREEN,
        true,
    );
    map_and_wait(&game, popup);
    // The game's dialog, transient for the main window (openbox places and frames it).
    let dialog = window(
        &game,
        (main_rect.x as i16 + 180, main_rect.y as i16 + 120, 80, 50),
        BLUE,
        false,
    );
    map_transient(&game, dialog, main);
    // Another client's window, stacked above everything, overlapping the game.
    let foreign = window(
        &other,
        (main_rect.x as i16 + 200, main_rect.y as i16, 90, 90),
        YELLOW,
        true,
    );
    map_and_wait(&other, foreign);
    let foreign_managed = window(
        &other,
        (main_rect.x as i16, main_rect.y as i16 + 150, 60, 40),
        YELLOW,
        false,
    );
    map_and_wait(&other, foreign_managed);

    let family = agent.window_family(main).unwrap();
    let mut layers: Vec<(Window, WindowLayer)> = family.iter().map(|m| (m.window, m.layer)).collect();
    layers.sort_unstable_by_key(|(w, _)| *w);
    assert_eq!(
        layers,
        vec![(popup, WindowLayer::Popup), (dialog, WindowLayer::Dialog)],
        "the family is the game's popup and its dialog; never another client's window"
    );
    let of = |w: Window| family.iter().find(|m| m.window == w).unwrap().rect;
    assert_eq!(
        of(popup),
        Rect::new(10, 30, 60, 170),
        "the popup is clipped to the main window"
    );
    let dialog_box = of(dialog);
    assert!(
        dialog_box.intersection(&of(popup)).is_none(),
        "openbox placed the dialog at {dialog_box:?}, over the popup: the test's layout needs changing"
    );

    // Frame health: the game's own popup and dialog never count as occluding it; the other client's do.
    let occluding = gamepilot_x11::tracking::occluders(&agent, main).unwrap();
    assert!(
        occluding.contains(&Rect::new(main_rect.x + 200, main_rect.y, 90, 90)),
        "{occluding:?}"
    );
    assert!(occluding.iter().all(|r| r
        .intersection(&Rect::new(main_rect.x + 10, main_rect.y + 30, 60, 170))
        .is_none()));

    let mut cap = WindowCapturer::new(&agent, main).unwrap();
    let t = MonoTime::from_millis(1_000);
    let f = cap.capture(&agent, t).unwrap();
    assert_eq!(
        (f.width, f.height),
        (300, 200),
        "capture space stays the main window's"
    );
    assert_eq!(pixel_at(&f.data, f.width, 5, 5), RED);
    assert_eq!(
        pixel_at(&f.data, f.width, 30, 100),
        GREEN,
        "the popup is in the frame"
    );
    let c = dialog_box.center();
    assert_eq!(
        pixel_at(&f.data, f.width, c.x, c.y),
        BLUE,
        "the dialog is in the frame"
    );
    assert!(
        !colours(&f.data).contains(&YELLOW),
        "another client's windows above the game never enter the frame"
    );
    assert_eq!(cap.layers().len(), 2);

    // The reflex's thumbnail and a sensor's region see the popup too.
    let th = cap
        .capture_thumbnail(&agent, 150, MonoTime::from_millis(2_000))
        .unwrap();
    assert!(colours(&th.data).contains(&GREEN));
    assert!(!colours(&th.data).contains(&YELLOW));
    let r = cap
        .capture_region(&agent, Rect::new(20, 90, 20, 20), MonoTime::from_millis(2_000))
        .unwrap();
    assert_eq!(colours(&r.data), vec![GREEN]);
    let r = cap
        .capture_region(&agent, Rect::new(200, 5, 40, 40), MonoTime::from_millis(2_000))
        .unwrap();
    assert_eq!(
        colours(&r.data),
        vec![RED],
        "under another client's window: the game's own pixels"
    );

    // Focus: the game's dialog is the game in front; another client's window never is.
    let focus = |w: Window| {
        agent
            .conn
            .set_input_focus(InputFocus::PARENT, w, x11rb::CURRENT_TIME)
            .unwrap()
            .check()
            .unwrap();
        agent.flush().unwrap();
    };
    focus(foreign_managed);
    assert!(
        !agent.is_foreground(main).unwrap(),
        "another client's window has the focus"
    );
    focus(dialog);
    // openbox follows the focus into _NET_ACTIVE_WINDOW on its own time.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !agent.is_foreground(main).unwrap() {
        assert!(
            Instant::now() < deadline,
            "focus on the game's own dialog counts as the game in front"
        );
        agent.activate(dialog).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    focus(foreign_managed);
    assert!(!agent.is_foreground(main).unwrap());

    // The popup closes: the frame is the main window alone again.
    game.conn.unmap_window(popup).unwrap();
    game.conn.unmap_window(dialog).unwrap();
    game.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let f = cap.capture(&agent, MonoTime::from_millis(3_000)).unwrap();
    assert_eq!(colours(&f.data), vec![RED]);
    assert!(cap.layers().is_empty());
}

#[test]
fn a_dialog_placed_away_from_the_game_is_moved_over_it_by_the_window_manager() {
    // FR-PERC-001: capture space is the game window's; a dialog of the game the window manager put
    // elsewhere is found and asked (never with synthesised input) to come over the game's window.
    let bed = TestBed::start().unwrap();
    let game = bed.x11().unwrap();
    let agent = bed.x11().unwrap();
    let _probe_id = game.conn.generate_id().unwrap();
    let main = window(&game, (10, 10, 300, 200), RED, false);
    map_and_wait(&game, main);
    let dialog = window(&game, (0, 0, 80, 50), BLUE, false);
    map_transient(&game, dialog, main);
    // The game's dialog ends up far from its window (as sgt-mines' "Custom…" does under openbox).
    game.conn
        .configure_window(
            dialog,
            &x11rb::protocol::xproto::ConfigureWindowAux::new().x(1200).y(700),
        )
        .unwrap();
    game.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while agent.stray_dialogs(main).unwrap().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the dialog never left the game's window"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(agent.stray_dialogs(main).unwrap(), vec![dialog]);
    assert!(
        agent.window_family(main).unwrap().is_empty(),
        "outside capture space"
    );
    agent.centre_over(dialog, main).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !agent
        .window_family(main)
        .unwrap()
        .iter()
        .any(|m| m.window == dialog && m.layer == WindowLayer::Dialog)
    {
        assert!(
            Instant::now() < deadline,
            "the window manager never moved the dialog over the game"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(agent.stray_dialogs(main).unwrap().is_empty());
    let mut cap = WindowCapturer::new(&agent, main).unwrap();
    let f = cap.capture(&agent, MonoTime::from_millis(1)).unwrap();
    assert!(colours(&f.data).contains(&BLUE), "the dialog is in the frame");
}
