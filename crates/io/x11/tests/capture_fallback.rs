//! Capture on a real X server (Xvfb) when the MIT-SHM fast path fails (FR-PERC-001): the frame
//! comes from plain GetImage, the fast path backs off for the wait it was given (timed by the `now`
//! passed in, 1 s after the first failure) and is used again once that has passed, with a fresh segment.
//! The failure is real: the capturer's segment is detached on the server, so ShmGetImage answers
//! BadShmSeg.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use gamepilot_core::{MonoTime, Rect};
use gamepilot_testbed::TestBed;
use gamepilot_x11::capture::{CapturePath, ThumbnailPath, FAST_PATH_BACKOFF_MIN};
use gamepilot_x11::{WindowCapturer, X11};
use std::time::{Duration, Instant};
use x11rb::connection::Connection as _;
use x11rb::protocol::xproto::{ConnectionExt as _, CreateWindowAux, WindowClass};

/// A mapped 200×120 window whose background is pure red.
fn red_window(x: &X11) -> u32 {
    let screen = &x.conn.setup().roots[x.screen_num];
    // The bed's probe window (8x8, on a connection now closed) had this connection's first id, and
    // openbox may still be forgetting it: a new window under that id can be given the probe's geometry.
    // Skip it.
    let _probe_id = x.conn.generate_id().unwrap();
    let win = x.conn.generate_id().unwrap();
    x.conn
        .create_window(
            0,
            win,
            x.root,
            10,
            10,
            200,
            120,
            0,
            WindowClass::INPUT_OUTPUT,
            screen.root_visual,
            &CreateWindowAux::new().background_pixel(0x00ff_0000),
        )
        .unwrap()
        .check()
        .unwrap();
    x.conn.map_window(win).unwrap();
    x.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !x.is_mapped(win).unwrap() {
        assert!(Instant::now() < deadline, "the test window never mapped");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(100));
    win
}

fn is_red(px: &[u8]) -> bool {
    // BGRX
    px[0] == 0 && px[1] == 0 && px[2] == 0xff
}

#[test]
fn a_failed_shm_read_falls_back_to_getimage_and_shm_returns_after_the_back_off() {
    // FR-PERC-001
    let bed = TestBed::start().unwrap();
    let x = bed.x11().unwrap();
    assert!(x.extensions().shm, "Xvfb offers MIT-SHM");
    let win = red_window(&x);
    let mut cap = WindowCapturer::new(&x, win).unwrap();
    let t0 = MonoTime::from_millis(10_000);

    let f = cap.capture(&x, t0).unwrap();
    assert_eq!((f.width, f.height), (200, 120));
    assert!(is_red(&f.data[..4]));
    assert_eq!(cap.capture_path(), Some(CapturePath::Shm));
    assert_eq!(cap.stats().shm_failures, 0);

    // The segment disappears on the server: this frame still arrives, through GetImage.
    cap.detach_shm_for_test(&x).unwrap();
    let f = cap.capture(&x, t0).unwrap();
    assert!(is_red(&f.data[..4]), "the slow path reads the same pixels");
    let s = cap.stats();
    assert_eq!(s.last_path, Some(CapturePath::GetImage));
    assert_eq!((s.shm_failures, s.shm_consecutive_failures), (1, 1));
    assert_eq!(s.shm_retry_at, Some(t0.plus(FAST_PATH_BACKOFF_MIN)));

    // Within the wait: the slow path, without trying SHM (no new failure).
    let half = t0.plus(FAST_PATH_BACKOFF_MIN / 2);
    cap.capture(&x, half).unwrap();
    assert_eq!(cap.capture_path(), Some(CapturePath::GetImage));
    assert_eq!(cap.stats().shm_failures, 1);
    // A region read honours the same back-off.
    let r = cap.capture_region(&x, Rect::new(4, 4, 16, 8), half).unwrap();
    assert_eq!((r.width, r.height), (16, 8));
    assert!(is_red(&r.data[..4]));
    assert_eq!(cap.capture_path(), Some(CapturePath::GetImage));

    // Once the wait has passed, SHM is tried again with a fresh segment, works, and the back-off resets.
    let later = t0.plus(FAST_PATH_BACKOFF_MIN);
    let f = cap.capture(&x, later).unwrap();
    assert!(is_red(&f.data[..4]));
    let s = cap.stats();
    assert_eq!(s.last_path, Some(CapturePath::Shm));
    assert_eq!(
        (s.shm_failures, s.shm_consecutive_failures, s.shm_retry_at),
        (1, 0, None)
    );
    let r = cap.capture_region(&x, Rect::new(4, 4, 16, 8), later).unwrap();
    assert!(is_red(&r.data[..4]));
    assert_eq!(cap.capture_path(), Some(CapturePath::Shm));

    // A failed region read falls back too and backs off the shared SHM path.
    cap.detach_shm_for_test(&x).unwrap();
    let t1 = later.plus(Duration::from_millis(100));
    let r = cap.capture_region(&x, Rect::new(4, 4, 16, 8), t1).unwrap();
    assert!(is_red(&r.data[..4]));
    let s = cap.stats();
    assert_eq!(s.last_path, Some(CapturePath::GetImage));
    assert_eq!((s.shm_failures, s.shm_consecutive_failures), (2, 1));
    assert_eq!(s.shm_retry_at, Some(t1.plus(FAST_PATH_BACKOFF_MIN)));

    // Thumbnails still come from the server-side scaler.
    let th = cap.capture_thumbnail(&x, 64, t1).unwrap();
    assert_eq!(th.width, 64);
    assert_eq!(cap.stats().last_thumbnail, Some(ThumbnailPath::ServerScaled));
    assert!(cap.thumbnail_server_scaled());
    cap.close(&x);
}

#[test]
fn regions_without_area_or_outside_the_window_are_named_errors() {
    // FR-PERC-008, FR-PERC-009: a real window cannot be 0x0 (X answers BadValue), so the zero-area
    // window check is the pure `checked_size` test in capture.rs; here the region side on a real window.
    let bed = TestBed::start().unwrap();
    let x = bed.x11().unwrap();
    let win = red_window(&x);
    let mut cap = WindowCapturer::new(&x, win).unwrap();
    let now = MonoTime::from_millis(1);
    let e = cap.capture_region(&x, Rect::new(5, 5, 0, 4), now).unwrap_err();
    assert!(matches!(e, gamepilot_x11::X11Error::EmptyRegion { .. }), "{e:?}");
    let e = cap.capture_region(&x, Rect::new(190, 0, 20, 4), now).unwrap_err();
    assert!(
        matches!(
            e,
            gamepilot_x11::X11Error::RegionOutside {
                width: 200,
                height: 120,
                ..
            }
        ),
        "{e:?}"
    );
    // A zero-size window is refused by the server itself.
    let screen = &x.conn.setup().roots[x.screen_num];
    let w0 = x.conn.generate_id().unwrap();
    let refused = x
        .conn
        .create_window(
            0,
            w0,
            x.root,
            0,
            0,
            0,
            0,
            0,
            WindowClass::INPUT_OUTPUT,
            screen.root_visual,
            &CreateWindowAux::new(),
        )
        .unwrap()
        .check();
    assert!(refused.is_err(), "X refuses a 0x0 window (BadValue)");
    cap.close(&x);
}
