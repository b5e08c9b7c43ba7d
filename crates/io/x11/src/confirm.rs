//! The destructive-action confirmation overlay (FR-SAFE-005): an always-on-top window, never inside the
//! captured window's pixels (FR-SAFE-007), that shows the held action and why it matched, with "Allow" and
//! "Reject" buttons that only a real user device can press.
//!
//! Clicks are read from the XInput2 raw-event watch of `userinput.rs`, which tags every event with its
//! source device: events from an XTEST device (the agent's own synthesis, or any other tool's) are
//! ignored, so the agent can never confirm its own action. Raw events reach us even while the game holds a
//! pointer grab; the button under the pointer is read with QueryPointer. The window itself selects core
//! button events only to swallow them (a click on the overlay reaches neither the game nor the window
//! manager). Nothing here blocks: `poll` reads what is queued and returns.

use crate::conn::X11;
use crate::error::X11Error;
use crate::indicator::place_outside;
use crate::userinput::{RawInputWatch, RawKind, Watch};
use ab_glyph::{point, Font, FontArc, PxScale, ScaleFont};
use gamepilot_core::{Point, Rect};
use std::time::{Duration, Instant};
use x11rb::connection::{Connection, RequestConnection as _};
use x11rb::protocol::xproto::{
    ConfigureWindowAux, ConnectionExt as _, CreateWindowAux, EventMask, Gcontext, ImageFormat, StackMode,
    Window, WindowClass,
};
use x11rb::protocol::Event;
use x11rb::wrapper::ConnectionExt as _;

/// The overlay's size in pixels.
pub const CONFIRM_W: u32 = 560;
pub const CONFIRM_H: u32 = 64;
/// Where DejaVu Sans lives (Debian's fonts-dejavu-core).
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

const BG: u32 = 0x1e2630;
const BORDER: u32 = 0xe0a020;
const FG: u32 = 0xffffff;
const DIM: u32 = 0xc8d0d8;
const WARN: u32 = 0xffd060;
const ALLOW_BG: u32 = 0x2e7d32;
const REJECT_BG: u32 = 0xb71c1c;

/// The user's answer, or why there is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A real device clicked "Allow".
    Allowed,
    /// A real device clicked "Reject".
    Rejected,
    /// Nobody answered within the timeout.
    TimedOut,
    /// The overlay went away (destroyed by someone else, the X connection lost).
    Closed,
}

/// The overlay's two buttons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Allow,
    Reject,
}

/// What the overlay shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmRequest {
    /// The held action, as the agent would perform it.
    pub action: String,
    /// The destructive pattern that matched.
    pub pattern: String,
    /// The on-screen text it matched in.
    pub text: String,
    /// How long to wait before answering `TimedOut`.
    pub timeout: Duration,
}

/// The two buttons, in window coordinates.
fn button_rects() -> [(Choice, Rect); 2] {
    let (bw, bh) = (92u32, 38u32);
    let y = ((CONFIRM_H - bh) / 2) as i32;
    [
        (
            Choice::Allow,
            Rect::new((CONFIRM_W - 2 * bw - 22) as i32, y, bw, bh),
        ),
        (Choice::Reject, Rect::new((CONFIRM_W - bw - 12) as i32, y, bw, bh)),
    ]
}

/// Which button (window coordinates) contains `p`, if any.
pub fn button_at(p: Point) -> Option<Choice> {
    button_rects()
        .into_iter()
        .find(|(_, r)| r.contains(p))
        .map(|(c, _)| c)
}

/// A button's rectangle in screen coordinates for an overlay at `overlay` (tests that find the overlay
/// window on the server click through this).
pub fn button_rect_at(overlay: Rect, which: Choice) -> Rect {
    let r = button_rects()
        .into_iter()
        .find(|(c, _)| *c == which)
        .map(|(_, r)| r)
        .unwrap_or_default();
    Rect::new(overlay.x + r.x, overlay.y + r.y, r.w, r.h)
}

/// A 0x00RRGGBB canvas (BGRX bytes in memory: the depth-24 Z_PIXMAP layout).
struct Canvas {
    w: u32,
    h: u32,
    px: Vec<u32>,
}

impl Canvas {
    fn new(w: u32, h: u32, bg: u32) -> Canvas {
        Canvas {
            w,
            h,
            px: vec![bg; (w * h) as usize],
        }
    }

    fn fill(&mut self, r: Rect, c: u32) {
        let Some(r) = r.clamped_to(&Rect::new(0, 0, self.w, self.h)) else {
            return;
        };
        for y in r.y as u32..r.y as u32 + r.h {
            let row = (y * self.w) as usize;
            if let Some(s) = self
                .px
                .get_mut(row + r.x as usize..row + (r.x as u32 + r.w) as usize)
            {
                s.fill(c);
            }
        }
    }

    fn frame(&mut self, r: Rect, t: u32, c: u32) {
        self.fill(Rect::new(r.x, r.y, r.w, t), c);
        self.fill(Rect::new(r.x, r.bottom() as i32 - t as i32, r.w, t), c);
        self.fill(Rect::new(r.x, r.y, t, r.h), c);
        self.fill(Rect::new(r.right() as i32 - t as i32, r.y, t, r.h), c);
    }

    fn blend(&mut self, x: i32, y: i32, c: u32, a: f32) {
        if x < 0 || y < 0 || x as u32 >= self.w || y as u32 >= self.h {
            return;
        }
        let i = (y as u32 * self.w + x as u32) as usize;
        let Some(d) = self.px.get_mut(i) else { return };
        let a = a.clamp(0.0, 1.0);
        let ch = |s: u32| {
            let (dv, sv) = (((*d >> s) & 0xff) as f32, ((c >> s) & 0xff) as f32);
            ((dv + (sv - dv) * a).round() as u32 & 0xff) << s
        };
        *d = ch(16) | ch(8) | ch(0);
    }

    fn bytes(&self) -> Vec<u8> {
        self.px.iter().flat_map(|p| p.to_le_bytes()).collect()
    }
}

/// Width of `text` at `size` px.
fn text_width(font: &FontArc, size: f32, text: &str) -> f32 {
    let sf = font.as_scaled(PxScale::from(size));
    text.chars().map(|c| sf.h_advance(sf.glyph_id(c))).sum()
}

/// `text` cut (with "…") to fit `max_w` px.
fn fit(font: &FontArc, size: f32, text: &str, max_w: f32) -> String {
    if text_width(font, size, text) <= max_w {
        return text.to_string();
    }
    let mut s: String = text.to_string();
    while !s.is_empty() && text_width(font, size, &format!("{s}…")) > max_w {
        s.pop();
    }
    format!("{s}…")
}

/// Draw `text` with its baseline at `y`, starting at `x`.
fn draw_text(c: &mut Canvas, font: &FontArc, size: f32, x: f32, y: f32, text: &str, colour: u32) {
    let sf = font.as_scaled(PxScale::from(size));
    let mut pen = x;
    for ch in text.chars() {
        let id = sf.glyph_id(ch);
        let g = id.with_scale_and_position(PxScale::from(size), point(pen, y));
        if let Some(og) = font.outline_glyph(g) {
            let b = og.px_bounds();
            og.draw(|gx, gy, cov| {
                c.blend(
                    b.min.x as i32 + gx as i32,
                    b.min.y as i32 + gy as i32,
                    colour,
                    cov,
                );
            });
        }
        pen += sf.h_advance(id);
    }
}

/// The overlay's picture for `req` (pure: used by `show` and by tests).
fn render(font: &FontArc, req: &ConfirmRequest) -> Canvas {
    let mut c = Canvas::new(CONFIRM_W, CONFIRM_H, BG);
    c.frame(Rect::new(0, 0, CONFIRM_W, CONFIRM_H), 3, BORDER);
    let text_w = (CONFIRM_W - 2 * 92 - 22 - 24) as f32;
    let lines = [
        (14.0, FG, format!("gamepilot holds: {}", req.action)),
        (
            13.0,
            WARN,
            format!("matched \"{}\" in \"{}\"", req.pattern, req.text),
        ),
        (
            11.0,
            DIM,
            format!("no answer in {} s = Reject", req.timeout.as_secs()),
        ),
    ];
    let mut y = 19.0;
    for (size, colour, text) in lines {
        let t = fit(font, size, &text, text_w);
        draw_text(&mut c, font, size, 12.0, y, &t, colour);
        y += 18.0;
    }
    for (choice, r) in button_rects() {
        let (bg, label) = match choice {
            Choice::Allow => (ALLOW_BG, "Allow"),
            Choice::Reject => (REJECT_BG, "Reject"),
        };
        c.fill(r, bg);
        c.frame(r, 1, FG);
        let tw = text_width(font, 16.0, label);
        let tx = r.x as f32 + (r.w as f32 - tw) / 2.0;
        draw_text(&mut c, font, 16.0, tx, r.y as f32 + 25.0, label, FG);
    }
    c
}

/// Load DejaVu Sans.
fn load_font() -> Result<FontArc, X11Error> {
    let data = std::fs::read(FONT_PATH)
        .map_err(|e| X11Error::Font(format!("{FONT_PATH}: {e} (install fonts-dejavu-core)")))?;
    FontArc::try_from_vec(data).map_err(|e| X11Error::Font(format!("{FONT_PATH}: {e}")))
}

/// The confirmation overlay. Withdrawn (destroyed) on drop.
pub struct ConfirmOverlay {
    x11: X11,
    watch: RawInputWatch,
    win: Window,
    gc: Gcontext,
    at: Rect,
    image: Vec<u8>,
    deadline: Instant,
    /// The button a real device pressed on, waiting for its release.
    pressed: Option<Choice>,
    answer: Option<Answer>,
    last_raise: Instant,
    ignored_synthetic: u64,
}

impl ConfirmOverlay {
    /// Show the overlay outside `target` (the captured window's client rectangle in screen coordinates)
    /// and every rectangle of `avoid`. `Ok(None)` when no place on the screen is outside them.
    pub fn show(
        display: Option<&str>,
        target: Rect,
        avoid: &[Rect],
        req: &ConfirmRequest,
    ) -> Result<Option<ConfirmOverlay>, X11Error> {
        let x11 = X11::connect(display)?;
        let (sw, sh) = x11.screen_size();
        let Some(at) = place_outside((sw as u32, sh as u32), (CONFIRM_W, CONFIRM_H), target, avoid) else {
            return Ok(None);
        };
        let screen = &x11.conn.setup().roots[x11.screen_num];
        if screen.root_depth != 24 && screen.root_depth != 32 {
            return Err(X11Error::Font(format!(
                "the overlay draws on a 24-bit screen, this one is {}-bit",
                screen.root_depth
            )));
        }
        let font = load_font()?;
        let image = render(&font, req).bytes();
        // The watch first: a click can only count once the overlay can see where it came from.
        let mut watch = RawInputWatch::connect(display, Watch::All)?;
        let _ = watch.poll()?;
        let win = x11.conn.generate_id()?;
        x11.conn.create_window(
            x11rb::COPY_DEPTH_FROM_PARENT,
            win,
            x11.root,
            at.x as i16,
            at.y as i16,
            at.w as u16,
            at.h as u16,
            0,
            WindowClass::INPUT_OUTPUT,
            x11rb::COPY_FROM_PARENT,
            &CreateWindowAux::new()
                .background_pixel(BG)
                .override_redirect(1)
                .event_mask(
                    EventMask::EXPOSURE
                        | EventMask::STRUCTURE_NOTIFY
                        | EventMask::BUTTON_PRESS
                        | EventMask::BUTTON_RELEASE,
                ),
        )?;
        let _ = x11.conn.change_property8(
            x11rb::protocol::xproto::PropMode::REPLACE,
            win,
            x11rb::protocol::xproto::AtomEnum::WM_NAME,
            x11rb::protocol::xproto::AtomEnum::STRING,
            b"gamepilot confirm",
        );
        let gc = x11.conn.generate_id()?;
        x11.conn
            .create_gc(gc, win, &x11rb::protocol::xproto::CreateGCAux::new())?;
        x11.conn.map_window(win)?;
        let mut o = ConfirmOverlay {
            x11,
            watch,
            win,
            gc,
            at,
            image,
            deadline: Instant::now() + req.timeout,
            pressed: None,
            answer: None,
            last_raise: Instant::now(),
            ignored_synthetic: 0,
        };
        o.raise_and_draw()?;
        Ok(Some(o))
    }

    /// Where the overlay is, in screen coordinates.
    pub fn rect(&self) -> Rect {
        self.at
    }

    pub fn window(&self) -> Window {
        self.win
    }

    /// A button's rectangle in screen coordinates (for tests).
    pub fn button_rect(&self, which: Choice) -> Rect {
        button_rect_at(self.at, which)
    }

    /// How many button events from synthetic (XTEST) devices were ignored so far.
    pub fn ignored_synthetic(&self) -> u64 {
        self.ignored_synthetic
    }

    fn raise_and_draw(&mut self) -> Result<(), X11Error> {
        self.x11
            .conn
            .configure_window(self.win, &ConfigureWindowAux::new().stack_mode(StackMode::ABOVE))?;
        let stride = self.at.w as usize * 4;
        let max = self.x11.conn.maximum_request_bytes().saturating_sub(64);
        let rows_per = (max / stride.max(1)).clamp(1, self.at.h as usize);
        let mut y = 0usize;
        while y < self.at.h as usize {
            let rows = rows_per.min(self.at.h as usize - y);
            let data = self.image.get(y * stride..(y + rows) * stride).unwrap_or(&[]);
            self.x11.conn.put_image(
                ImageFormat::Z_PIXMAP,
                self.win,
                self.gc,
                self.at.w as u16,
                rows as u16,
                0,
                y as i16,
                0,
                24,
                data,
            )?;
            y += rows;
        }
        self.x11.conn.flush()?;
        self.last_raise = Instant::now();
        Ok(())
    }

    /// The button under the pointer now, if the pointer is on the overlay.
    fn button_under_pointer(&self) -> Result<Option<Choice>, X11Error> {
        let p = self.x11.conn.query_pointer(self.x11.root)?.reply()?;
        let (x, y) = (p.root_x as i32 - self.at.x, p.root_y as i32 - self.at.y);
        Ok(button_at(Point::new(x, y)))
    }

    fn step(&mut self) -> Result<Option<Answer>, X11Error> {
        // The window's own events: redraw on expose, closed when someone else destroys or unmaps it.
        let mut redraw = false;
        while let Some(ev) = self.x11.conn.poll_for_event()? {
            match ev {
                Event::Expose(_) => redraw = true,
                Event::DestroyNotify(e) if e.window == self.win => return Ok(Some(Answer::Closed)),
                Event::UnmapNotify(e) if e.window == self.win => return Ok(Some(Answer::Closed)),
                _ => {}
            }
        }
        // Button 1 from a real device: pressed and released on the same button answers.
        for ev in self.watch.poll()? {
            if !matches!(ev.kind, RawKind::ButtonPress | RawKind::ButtonRelease) || ev.detail != 1 {
                continue;
            }
            if ev.synthetic {
                self.ignored_synthetic += 1;
                continue;
            }
            let under = self.button_under_pointer()?;
            match ev.kind {
                RawKind::ButtonPress => self.pressed = under,
                _ => {
                    if under.is_some() && under == self.pressed {
                        return Ok(Some(match under {
                            Some(Choice::Allow) => Answer::Allowed,
                            _ => Answer::Rejected,
                        }));
                    }
                    self.pressed = None;
                }
            }
        }
        if Instant::now() >= self.deadline {
            return Ok(Some(Answer::TimedOut));
        }
        if redraw || self.last_raise.elapsed() >= Duration::from_millis(500) {
            self.raise_and_draw()?;
        }
        Ok(None)
    }

    /// The answer, once there is one (never blocks). A lost X connection answers `Closed`. Once answered,
    /// the overlay keeps that answer; drop it to withdraw the window.
    pub fn poll(&mut self) -> Option<Answer> {
        if self.answer.is_none() {
            self.answer = self.step().unwrap_or(Some(Answer::Closed));
        }
        self.answer
    }
}

impl Drop for ConfirmOverlay {
    fn drop(&mut self) {
        let _ = self.x11.conn.destroy_window(self.win);
        let _ = self.x11.conn.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> ConfirmRequest {
        ConfirmRequest {
            action: "click (520, 436)".into(),
            pattern: "spend".into(),
            text: "Spend 100 gold?".into(),
            timeout: Duration::from_secs(30),
        }
    }

    #[test]
    fn the_overlay_is_placed_outside_the_target_and_the_indicator() {
        // FR-SAFE-007, FR-SAFE-005: never inside the captured window's pixels
        for (screen, target) in [
            ((1600, 900), Rect::new(0, 0, 1280, 720)),
            ((1600, 900), Rect::new(100, 100, 1280, 720)),
            ((1400, 850), Rect::new(1, 22, 1280, 720)),
            ((1400, 850), Rect::new(60, 72, 1280, 720)),
            ((1920, 1080), Rect::new(320, 180, 1280, 720)),
        ] {
            let indicator = crate::indicator::placement(screen, target).unwrap();
            let at = place_outside(screen, (CONFIRM_W, CONFIRM_H), target, &[indicator])
                .unwrap_or_else(|| panic!("no place on {screen:?} around {target:?}"));
            assert!(at.intersection(&target).is_none(), "{at:?} {target:?}");
            assert!(at.intersection(&indicator).is_none(), "{at:?} {indicator:?}");
            assert!(Rect::new(0, 0, screen.0, screen.1).contains_rect(&at));
            assert_eq!((at.w, at.h), (CONFIRM_W, CONFIRM_H));
        }
        // A target covering the screen leaves no place: the caller falls back to the terminal.
        assert_eq!(
            place_outside(
                (1280, 720),
                (CONFIRM_W, CONFIRM_H),
                Rect::new(0, 0, 1280, 720),
                &[]
            ),
            None
        );
    }

    #[test]
    fn buttons_do_not_overlap_and_hit_testing_finds_them() {
        let [(_, allow), (_, reject)] = button_rects();
        assert!(allow.intersection(&reject).is_none());
        assert_eq!(button_at(allow.center()), Some(Choice::Allow));
        assert_eq!(button_at(reject.center()), Some(Choice::Reject));
        assert_eq!(button_at(Point::new(10, 10)), None);
        assert!(Rect::new(0, 0, CONFIRM_W, CONFIRM_H).contains_rect(&allow));
        assert!(Rect::new(0, 0, CONFIRM_W, CONFIRM_H).contains_rect(&reject));
    }

    #[test]
    fn the_picture_shows_text_and_both_buttons() {
        // FR-SAFE-005: the held action and why it matched are drawn (ink in the text area)
        let font = load_font().expect("fonts-dejavu-core installed");
        let c = render(&font, &req());
        // Pixels at least half-way from the background to `colour` (anti-aliased glyph ink counts).
        let ink = |r: Rect, colour: u32| {
            let d = |a: u32, b: u32| {
                (0..3)
                    .map(|i| (((a >> (8 * i)) & 0xff) as i32 - ((b >> (8 * i)) & 0xff) as i32).abs())
                    .sum::<i32>()
            };
            let mut n = 0;
            for y in r.y as u32..r.bottom() as u32 {
                for x in r.x as u32..r.right() as u32 {
                    let p = c.px[(y * c.w + x) as usize];
                    if d(p, colour) < d(p, BG) {
                        n += 1;
                    }
                }
            }
            n
        };
        assert!(ink(Rect::new(10, 5, 300, 18), FG) > 30, "action line drawn");
        assert!(ink(Rect::new(10, 24, 300, 16), WARN) > 30, "match line drawn");
        let [(_, allow), (_, reject)] = button_rects();
        assert!(ink(allow, ALLOW_BG) > 1000);
        assert!(ink(reject, REJECT_BG) > 1000);
        assert!(ink(allow, FG) > 30, "Allow label");
        let long = ConfirmRequest {
            text: "x".repeat(400),
            ..req()
        };
        let c2 = render(&font, &long);
        assert_eq!(c2.px.len(), (CONFIRM_W * CONFIRM_H) as usize);
        assert!(fit(&font, 13.0, &"y".repeat(400), 200.0).ends_with('…'));
    }
}
