//! Foreground queries: `_NET_ACTIVE_WINDOW`, input focus, and the server's own held keys and buttons.

use crate::conn::X11;
use crate::error::X11Error;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _, Window};

/// What the X server itself says is held (INV-ACT-002: checked against the executor's record).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ServerHeld {
    /// Keycodes down according to XQueryKeymap.
    pub keycodes: Vec<u8>,
    /// Pointer buttons down (1..=5) according to QueryPointer's mask.
    pub buttons: Vec<u8>,
}

impl ServerHeld {
    pub fn is_empty(&self) -> bool {
        self.keycodes.is_empty() && self.buttons.is_empty()
    }
}

impl X11 {
    /// `_NET_ACTIVE_WINDOW` on the root, if a window manager publishes it.
    pub fn active_window(&self) -> Result<Option<Window>, X11Error> {
        let r = self
            .conn
            .get_property(
                false,
                self.root,
                self.atoms.net_active_window,
                AtomEnum::WINDOW,
                0,
                1,
            )?
            .reply()?;
        Ok(r.value32().and_then(|mut v| v.next()).filter(|w| *w != 0))
    }

    pub fn input_focus(&self) -> Result<Window, X11Error> {
        Ok(self.conn.get_input_focus()?.reply()?.focus)
    }

    /// True when `target` (or a descendant/ancestor frame of it, or one of the game's own dialogs, see
    /// [`X11::is_family`]) has the input focus and, where the window manager publishes one, is the
    /// active window (INV-ACT-001). Focus on the root window (or
    /// PointerRoot, or none) is never the game's, though the root is every window's ancestor: keys then
    /// go to whatever is under the pointer, or nowhere.
    pub fn is_foreground(&self, target: Window) -> Result<bool, X11Error> {
        let focus = self.input_focus()?;
        if focus <= 1 || focus == self.root {
            return Ok(false);
        }
        if !self.is_family(target, focus)? {
            return Ok(false);
        }
        match self.active_window()? {
            Some(active) => self.is_family(target, active),
            None => Ok(true),
        }
    }

    /// True when `ancestor` is a strict ancestor of `w`.
    pub fn is_ancestor(&self, ancestor: Window, mut w: Window) -> Result<bool, X11Error> {
        if ancestor <= 1 || w <= 1 {
            return Ok(false);
        }
        for _ in 0..16 {
            let t = match self.conn.query_tree(w)?.reply() {
                Ok(t) => t,
                Err(_) => return Ok(false),
            };
            if t.parent == ancestor {
                return Ok(true);
            }
            if t.parent == self.root || t.parent == 0 {
                return Ok(false);
            }
            w = t.parent;
        }
        Ok(false)
    }

    /// The server's own view of held keys and buttons.
    pub fn server_held(&self) -> Result<ServerHeld, X11Error> {
        let km = self.conn.query_keymap()?.reply()?;
        let mut keycodes = Vec::new();
        for (byte_i, byte) in km.keys.iter().enumerate() {
            for bit in 0..8 {
                if byte & (1 << bit) != 0 {
                    keycodes.push((byte_i * 8 + bit) as u8);
                }
            }
        }
        let p = self.conn.query_pointer(self.root)?.reply()?;
        let mask = u16::from(p.mask);
        let buttons = (1u8..=5).filter(|b| mask & (1u16 << (7 + b)) != 0).collect();
        Ok(ServerHeld { keycodes, buttons })
    }

    /// Ask the window manager to bring `win` to the front, again every 250 ms until it has the focus or
    /// `within` has passed (a busy window manager may still be working through older requests). Returns
    /// whether it is in front. Never synthesises input.
    pub fn bring_to_front(&self, win: Window, within: std::time::Duration) -> Result<bool, X11Error> {
        let until = std::time::Instant::now() + within;
        loop {
            if self.is_foreground(win)? {
                return Ok(true);
            }
            if std::time::Instant::now() >= until {
                return Ok(false);
            }
            self.activate(win)?;
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    }

    /// Ask the window manager to activate `win` (EWMH `_NET_ACTIVE_WINDOW` client message), and set focus.
    pub fn activate(&self, win: Window) -> Result<(), X11Error> {
        use x11rb::protocol::xproto::{ClientMessageEvent, EventMask, InputFocus};
        let ev = ClientMessageEvent::new(32, win, self.atoms.net_active_window, [2u32, 0, 0, 0, 0]);
        self.conn.send_event(
            false,
            self.root,
            EventMask::SUBSTRUCTURE_REDIRECT | EventMask::SUBSTRUCTURE_NOTIFY,
            ev,
        )?;
        let _ = self
            .conn
            .set_input_focus(InputFocus::PARENT, win, x11rb::CURRENT_TIME);
        self.flush()
    }
}
