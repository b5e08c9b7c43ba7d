//! THE single input call site (FR-ACT-008): the only code in gamepilot that synthesises input (XTest).
//!
//! Coordinates arrive only as `ScreenPoint`, which only the transform chain can make (INV-GND-002).
//! A CI lint (`cargo xtask lint`) fails the build if any other file uses XTest's fake-input request.

use crate::conn::X11;
use crate::error::X11Error;
use crate::focus::ServerHeld;
use gamepilot_core::action::InputEvent;
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
                        keys.entry(*sym).or_insert(KeyLocation {
                            keycode,
                            shifted: level == 1,
                        });
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
            let other = if c.is_ascii_lowercase() {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            };
            if let Some(l) = self.keys.get(&(other as u32)) {
                return Ok(KeyLocation {
                    keycode: l.keycode,
                    shifted: c.is_ascii_uppercase(),
                });
            }
        }
        Err(X11Error::NoKeycode(sym.name()))
    }

    /// The keysym a keycode produces unshifted (for reporting server state by name).
    pub fn keysym_of(&self, keycode: u8) -> Option<Keysym> {
        self.keys
            .iter()
            .filter(|(_, l)| l.keycode == keycode && !l.shifted)
            .map(|(s, _)| Keysym(*s))
            .min()
    }

    pub fn key(&self, x11: &X11, keycode: u8, down: bool) -> Result<(), X11Error> {
        let ty = if down { KEY_PRESS_EVENT } else { KEY_RELEASE_EVENT };
        x11.conn
            .xtest_fake_input(ty, keycode, x11rb::CURRENT_TIME, self.root, 0, 0, 0)?;
        Ok(())
    }

    pub fn button(&self, x11: &X11, button: u8, down: bool) -> Result<(), X11Error> {
        let ty = if down {
            BUTTON_PRESS_EVENT
        } else {
            BUTTON_RELEASE_EVENT
        };
        x11.conn
            .xtest_fake_input(ty, button, x11rb::CURRENT_TIME, self.root, 0, 0, 0)?;
        Ok(())
    }

    /// A relative pointer movement (camera control, FR-ACT-004).
    pub fn motion_relative(&self, x11: &X11, dx: i16, dy: i16) -> Result<(), X11Error> {
        x11.conn.xtest_fake_input(
            MOTION_NOTIFY_EVENT,
            1,
            x11rb::CURRENT_TIME,
            x11rb::NONE,
            dx,
            dy,
            0,
        )?;
        Ok(())
    }

    /// An absolute pointer movement to a point produced by the transform chain.
    pub fn motion_to(&self, x11: &X11, p: ScreenPoint) -> Result<(), X11Error> {
        let x = p.x().clamp(i16::MIN as i32, i16::MAX as i32) as i16;
        let y = p.y().clamp(i16::MIN as i32, i16::MAX as i32) as i16;
        x11.conn
            .xtest_fake_input(MOTION_NOTIFY_EVENT, 0, x11rb::CURRENT_TIME, self.root, x, y, 0)?;
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

impl XTestInput {
    /// Deliver executor output in order, then flush. Keys with no keycode on this keyboard are skipped and
    /// returned by name (the caller reports them); every other event is sent.
    pub fn apply(&self, x11: &X11, events: &[InputEvent]) -> Result<Vec<String>, X11Error> {
        let mut skipped = Vec::new();
        for e in events {
            match *e {
                InputEvent::Key { sym, down } => match self.locate(sym) {
                    Ok(l) => self.key(x11, l.keycode, down)?,
                    Err(_) => skipped.push(sym.name()),
                },
                InputEvent::Button { button, down } => self.button(x11, button, down)?,
                InputEvent::MotionRelative { dx, dy } => {
                    let c = |v: i32| v.clamp(i16::MIN as i32, i16::MAX as i32) as i16;
                    self.motion_relative(x11, c(dx), c(dy))?
                }
                InputEvent::MotionTo(p) => self.motion_to(x11, p)?,
            }
        }
        x11.conn.flush()?;
        Ok(skipped)
    }

    /// Release the given keys and buttons explicitly (the guardian's and every release path's own release,
    /// not relying on the server dropping a dead client's keys), then whatever else the server reports held.
    /// Returns how many release events were sent.
    pub fn release_all(&self, x11: &X11, keys: &[Keysym], buttons: &[u8]) -> Result<usize, X11Error> {
        let mut n = 0;
        for k in keys {
            if let Ok(l) = self.locate(*k) {
                self.key(x11, l.keycode, false)?;
                n += 1;
            }
        }
        for b in buttons {
            self.button(x11, *b, false)?;
            n += 1;
        }
        self.sync(x11)?;
        n += self.release_everything_server_holds(x11)?;
        Ok(n)
    }

    /// Release specific keycodes (INV-ACT-002: what the server holds that the record does not own).
    pub fn release_keycodes(&self, x11: &X11, keycodes: &[u8]) -> Result<(), X11Error> {
        for k in keycodes {
            self.key(x11, *k, false)?;
        }
        self.sync(x11)
    }
}

/// Where executor output goes: XTest on the display, or nowhere in a dry run (FR-SAFE-006). Both run the
/// same pipeline; only delivery differs.
pub trait InputSink {
    /// Deliver `events` in order; returns the names of keys that could not be delivered.
    fn deliver(&mut self, events: &[InputEvent]) -> Result<Vec<String>, X11Error>;
    /// False for the dry-run sink.
    fn delivers(&self) -> bool;
    /// Events delivered (or, for the dry run, that would have been).
    fn count(&self) -> u64;
    /// The keycode a keysym is typed with, for comparing the held record with the server (INV-ACT-002).
    fn keycode_of(&self, sym: Keysym) -> Option<u8>;
    /// What the server reports held, when this sink delivers.
    fn server_held(&self) -> Result<Option<ServerHeld>, X11Error>;
    /// Release keycodes the server holds that the record does not own.
    fn release_keycodes(&mut self, keycodes: &[u8]) -> Result<(), X11Error>;
}

/// The XTest sink: its own X connection and keyboard map.
pub struct XTestSink {
    x11: X11,
    input: XTestInput,
    count: u64,
}

impl XTestSink {
    pub fn connect(display: Option<&str>) -> Result<XTestSink, X11Error> {
        let x11 = X11::connect(display)?;
        let input = XTestInput::new(&x11)?;
        Ok(XTestSink { x11, input, count: 0 })
    }

    pub fn x11(&self) -> &X11 {
        &self.x11
    }

    pub fn input(&self) -> &XTestInput {
        &self.input
    }
}

impl InputSink for XTestSink {
    fn deliver(&mut self, events: &[InputEvent]) -> Result<Vec<String>, X11Error> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let skipped = self.input.apply(&self.x11, events)?;
        self.count += (events.len() - skipped.len()) as u64;
        Ok(skipped)
    }

    fn delivers(&self) -> bool {
        true
    }

    fn count(&self) -> u64 {
        self.count
    }

    fn keycode_of(&self, sym: Keysym) -> Option<u8> {
        self.input.locate(sym).ok().map(|l| l.keycode)
    }

    fn server_held(&self) -> Result<Option<ServerHeld>, X11Error> {
        self.x11.server_held().map(Some)
    }

    fn release_keycodes(&mut self, keycodes: &[u8]) -> Result<(), X11Error> {
        self.input.release_keycodes(&self.x11, keycodes)
    }
}

/// The dry-run sink (FR-SAFE-006): counts what it is given and delivers nothing.
#[derive(Debug, Default)]
pub struct DryRunSink {
    count: u64,
}

impl InputSink for DryRunSink {
    fn deliver(&mut self, events: &[InputEvent]) -> Result<Vec<String>, X11Error> {
        self.count += events.len() as u64;
        Ok(Vec::new())
    }

    fn delivers(&self) -> bool {
        false
    }

    fn count(&self) -> u64 {
        self.count
    }

    fn keycode_of(&self, _sym: Keysym) -> Option<u8> {
        None
    }

    fn server_held(&self) -> Result<Option<ServerHeld>, X11Error> {
        Ok(None)
    }

    fn release_keycodes(&mut self, _keycodes: &[u8]) -> Result<(), X11Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dry_run_sink_counts_and_delivers_nothing() {
        // FR-SAFE-006
        let mut s = DryRunSink::default();
        let skipped = s
            .deliver(&[InputEvent::Key {
                sym: Keysym(0x77),
                down: true,
            }])
            .unwrap();
        assert!(skipped.is_empty());
        assert_eq!(s.count(), 1);
        assert!(!s.delivers());
        assert_eq!(s.server_held().unwrap(), None);
    }
}
