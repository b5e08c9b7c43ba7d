//! THE single input call site (FR-ACT-008): the only code in gamepilot that synthesises input (XTest).
//!
//! Coordinates arrive only as `ScreenPoint`, which only the transform chain can make (INV-GND-002).
//! A CI lint (`cargo xtask lint`) fails the build if any other file uses XTest's fake-input request.

use crate::conn::X11;
use crate::error::X11Error;
use gamepilot_core::{Keysym, ScreenPoint};
use std::collections::HashMap;
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{
    ConnectionExt as _, BUTTON_PRESS_EVENT, BUTTON_RELEASE_EVENT, KEY_PRESS_EVENT, KEY_RELEASE_EVENT,
    MOTION_NOTIFY_EVENT,
};
use x11rb::protocol::xtest::ConnectionExt as _;

/// Where a keysym lives on the keyboard: its keycode and whether Shift selects it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyLocation {
    pub keycode: u8,
    pub shifted: bool,
}

/// Sends XTest events. Owns a keysym→keycode table read from the server once.
pub struct XTestInput {
    keys: HashMap<u32, KeyLocation>,
    root: u32,
}

impl XTestInput {
    pub fn new(x11: &X11) -> Result<XTestInput, X11Error> {
        if !x11.extensions().xtest {
            return Err(X11Error::MissingExtension("XTEST"));
        }
        let setup = x11.conn.setup();
        let (min, max) = (setup.min_keycode, setup.max_keycode);
        let map = x11.conn.get_keyboard_mapping(min, max - min + 1)?.reply()?;
        let per = map.keysyms_per_keycode as usize;
        let mut keys = HashMap::new();
        if per > 0 {
            for (i, syms) in map.keysyms.chunks(per).enumerate() {
                let keycode = min + i as u8;
                for (level, sym) in syms.iter().take(2).enumerate() {
                    if *sym != 0 {
                        keys.entry(*sym).or_insert(KeyLocation { keycode, shifted: level == 1 });
                    }
                }
            }
        }
        Ok(XTestInput { keys, root: x11.root })
    }

    /// Where `sym` lives; lower-case letters also match upper-case-only maps and vice versa.
    pub fn locate(&self, sym: Keysym) -> Result<KeyLocation, X11Error> {
        if let Some(l) = self.keys.get(&sym.0) {
            return Ok(*l);
        }
        if let Some(c) = char::from_u32(sym.0).filter(|c| c.is_ascii_alphabetic()) {
            let other = if c.is_ascii_lowercase() { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() };
            if let Some(l) = self.keys.get(&(other as u32)) {
                return Ok(KeyLocation { keycode: l.keycode, shifted: c.is_ascii_uppercase() });
            }
        }
        Err(X11Error::NoKeycode(sym.name()))
    }

    /// The keysym a keycode produces unshifted (for reporting server state by name).
    pub fn keysym_of(&self, keycode: u8) -> Option<Keysym> {
        self.keys.iter().filter(|(_, l)| l.keycode == keycode && !l.shifted).map(|(s, _)| Keysym(*s)).min()
    }

    pub fn key(&self, x11: &X11, keycode: u8, down: bool) -> Result<(), X11Error> {
        let ty = if down { KEY_PRESS_EVENT } else { KEY_RELEASE_EVENT };
        x11.conn.xtest_fake_input(ty, keycode, x11rb::CURRENT_TIME, self.root, 0, 0, 0)?;
        Ok(())
    }

    pub fn button(&self, x11: &X11, button: u8, down: bool) -> Result<(), X11Error> {
        let ty = if down { BUTTON_PRESS_EVENT } else { BUTTON_RELEASE_EVENT };
        x11.conn.xtest_fake_input(ty, button, x11rb::CURRENT_TIME, self.root, 0, 0, 0)?;
        Ok(())
    }

    /// A relative pointer movement (camera control, FR-ACT-004).
    pub fn motion_relative(&self, x11: &X11, dx: i16, dy: i16) -> Result<(), X11Error> {
        x11.conn.xtest_fake_input(MOTION_NOTIFY_EVENT, 1, x11rb::CURRENT_TIME, x11rb::NONE, dx, dy, 0)?;
        Ok(())
    }

    /// An absolute pointer movement to a point produced by the transform chain.
    pub fn motion_to(&self, x11: &X11, p: ScreenPoint) -> Result<(), X11Error> {
        let x = p.x().clamp(i16::MIN as i32, i16::MAX as i32) as i16;
        let y = p.y().clamp(i16::MIN as i32, i16::MAX as i32) as i16;
        x11.conn.xtest_fake_input(MOTION_NOTIFY_EVENT, 0, x11rb::CURRENT_TIME, self.root, x, y, 0)?;
        Ok(())
    }

    /// Push queued events to the server and wait until it has processed them.
    pub fn sync(&self, x11: &X11) -> Result<(), X11Error> {
        x11.conn.flush()?;
        x11.conn.get_input_focus()?.reply()?;
        Ok(())
    }

    /// Release every key and button the server reports held (used on every release path, INV-SAFE-002).
    pub fn release_everything_server_holds(&self, x11: &X11) -> Result<usize, X11Error> {
        let held = x11.server_held()?;
        for b in &held.buttons {
            self.button(x11, *b, false)?;
        }
        for k in &held.keycodes {
            self.key(x11, *k, false)?;
        }
        self.sync(x11)?;
        Ok(held.buttons.len() + held.keycodes.len())
    }
}
