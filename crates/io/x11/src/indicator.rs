//! The visible "input armed" indicator (FR-SAFE-007): a small always-on-top, override-redirect window
//! placed on the screen outside the target window's pixels, shown whenever the agent can deliver input.

use crate::conn::X11;
use crate::error::X11Error;
use gamepilot_core::Rect;
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{
    ConfigureWindowAux, ConnectionExt as _, CreateGCAux, CreateWindowAux, EventMask, Gcontext, StackMode,
    Window, WindowClass,
};
use x11rb::wrapper::ConnectionExt as _;

pub const INDICATOR_W: u32 = 260;
pub const INDICATOR_H: u32 = 22;

/// Where the indicator goes: the first screen corner whose rectangle does not overlap `target`, then the
/// strips just above or below the target; `None` when the target covers every candidate.
pub fn placement(screen: (u32, u32), target: Rect) -> Option<Rect> {
    place_outside(screen, (INDICATOR_W, INDICATOR_H), target, &[])
}

/// Where an overlay of `size` goes without covering one pixel of `target` (FR-SAFE-007) nor any rectangle
/// of `avoid` (another overlay): the four screen corners, then the strips just above, below, left and right
/// of the target. Shared by the armed indicator and the confirmation overlay (`confirm.rs`).
pub fn place_outside(screen: (u32, u32), size: (u32, u32), target: Rect, avoid: &[Rect]) -> Option<Rect> {
    let (sw, sh) = screen;
    let (w, h) = (size.0.min(sw), size.1.min(sh));
    let right = sw.saturating_sub(w) as i32;
    let bottom = sh.saturating_sub(h) as i32;
    let candidates = [
        Rect::new(0, 0, w, h),
        Rect::new(right, 0, w, h),
        Rect::new(0, bottom, w, h),
        Rect::new(right, bottom, w, h),
        Rect::new(target.x, target.y - h as i32 - 2, w, h),
        Rect::new(target.x, target.bottom() as i32 + 2, w, h),
        Rect::new(target.x - w as i32 - 2, target.y, w, h),
        Rect::new(target.right() as i32 + 2, target.y, w, h),
    ];
    let screen_r = Rect::new(0, 0, sw, sh);
    candidates.into_iter().find(|c| {
        screen_r.contains_rect(c)
            && c.intersection(&target).is_none()
            && avoid.iter().all(|a| c.intersection(a).is_none())
    })
}

/// The overlay window. Destroyed on drop.
pub struct Indicator {
    x11: X11,
    win: Window,
    gc: Gcontext,
    text: String,
    at: Rect,
}

impl Indicator {
    /// Show the indicator outside `target` (screen coordinates of the target window). Returns `Ok(None)` when
    /// no place outside the target exists (the terminal status line remains).
    pub fn show(display: Option<&str>, target: Rect, text: &str) -> Result<Option<Indicator>, X11Error> {
        let x11 = X11::connect(display)?;
        let (sw, sh) = x11.screen_size();
        let Some(at) = placement((sw as u32, sh as u32), target) else {
            return Ok(None);
        };
        let screen = &x11.conn.setup().roots[x11.screen_num];
        let (white, black) = (screen.white_pixel, screen.black_pixel);
        let red = 0x00c0_1010;
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
                .background_pixel(red)
                .override_redirect(1)
                .event_mask(EventMask::EXPOSURE),
        )?;
        let _ = x11.conn.change_property8(
            x11rb::protocol::xproto::PropMode::REPLACE,
            win,
            x11rb::protocol::xproto::AtomEnum::WM_NAME,
            x11rb::protocol::xproto::AtomEnum::STRING,
            b"gamepilot indicator",
        );
        let gc = x11.conn.generate_id()?;
        let font = x11.conn.generate_id()?;
        let mut gc_aux = CreateGCAux::new().foreground(white).background(red);
        if x11.conn.open_font(font, b"fixed")?.check().is_ok() {
            gc_aux = gc_aux.font(font);
        }
        let _ = black;
        x11.conn.create_gc(gc, win, &gc_aux)?;
        x11.conn.map_window(win)?;
        let ind = Indicator {
            x11,
            win,
            gc,
            text: text.to_string(),
            at,
        };
        ind.raise_and_draw()?;
        Ok(Some(ind))
    }

    pub fn rect(&self) -> Rect {
        self.at
    }

    pub fn window(&self) -> Window {
        self.win
    }

    /// Move the indicator outside `target` again after the target moved or resized (FR-SAFE-007: it must
    /// never cover the captured window's pixels). Returns false when no place outside exists any more, in
    /// which case the indicator is unmapped until a place frees up (the terminal status line remains).
    pub fn follow(&mut self, target: Rect) -> Result<bool, X11Error> {
        let (sw, sh) = self.x11.screen_size();
        match placement((sw as u32, sh as u32), target) {
            Some(at) => {
                if at != self.at {
                    self.x11.conn.configure_window(
                        self.win,
                        &ConfigureWindowAux::new().x(at.x).y(at.y).width(at.w).height(at.h),
                    )?;
                    self.at = at;
                }
                self.x11.conn.map_window(self.win)?;
                self.raise_and_draw()?;
                Ok(true)
            }
            None => {
                self.x11.conn.unmap_window(self.win)?;
                self.x11.flush()?;
                Ok(false)
            }
        }
    }

    /// Change the text (e.g. "gamepilot: INPUT ARMED" / "PAUSED").
    pub fn set_text(&mut self, text: &str) -> Result<(), X11Error> {
        if text != self.text {
            self.text = text.to_string();
            self.raise_and_draw()?;
        }
        Ok(())
    }

    /// Keep it on top and redrawn (call about once a second).
    pub fn raise_and_draw(&self) -> Result<(), X11Error> {
        self.x11
            .conn
            .configure_window(self.win, &ConfigureWindowAux::new().stack_mode(StackMode::ABOVE))?;
        self.x11.conn.clear_area(false, self.win, 0, 0, 0, 0)?;
        let bytes: Vec<u8> = self.text.bytes().filter(|b| b.is_ascii()).take(255).collect();
        self.x11.conn.image_text8(self.win, self.gc, 6, 15, &bytes)?;
        while self.x11.conn.poll_for_event()?.is_some() {}
        self.x11.conn.flush()?;
        Ok(())
    }
}

impl Drop for Indicator {
    fn drop(&mut self) {
        let _ = self.x11.conn.destroy_window(self.win);
        let _ = self.x11.conn.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_avoids_the_target() {
        // FR-SAFE-007: never inside the captured window's pixels
        let p = placement((1600, 900), Rect::new(100, 100, 1280, 720)).unwrap();
        assert!(p.intersection(&Rect::new(100, 100, 1280, 720)).is_none());
        let p = placement((1600, 900), Rect::new(0, 0, 800, 600)).unwrap();
        assert_eq!((p.x, p.y), (1600 - INDICATOR_W as i32, 0));
        assert_eq!(placement((800, 600), Rect::new(0, 0, 800, 600)), None);
    }
}
