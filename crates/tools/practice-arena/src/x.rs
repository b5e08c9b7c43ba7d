//! X11 glue: the game window (title, class, pid, fixed size), input events translated into game events,
//! PutImage of the software framebuffer, and pointer warps.

use crate::game::Event;
use crate::render::Canvas;
use crate::ArenaError;
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, RawFd};
use x11rb::connection::{Connection, RequestConnection};
use x11rb::properties::{WmHints, WmHintsState, WmSizeHints};
use x11rb::protocol::xkb::{self, ConnectionExt as _};
use x11rb::protocol::xproto::{
    AtomEnum, ClientMessageEvent, ConnectionExt as _, CreateGCAux, CreateWindowAux, EventMask, ImageFormat,
    NotifyDetail, NotifyMode, PropMode, Window, WindowClass,
};
use x11rb::protocol::Event as XEvent;
use x11rb::rust_connection::RustConnection;
use x11rb::wrapper::ConnectionExt as _;

/// What the window tells the main loop.
#[derive(Debug, Clone, PartialEq)]
pub enum WinEvent {
    /// Input for the game, with the X server time stamp when the event has one.
    Input(Event, Option<u32>),
    /// Part of the window must be repainted.
    Expose,
    /// The window manager asked us to close.
    Close,
}

fn xerr(e: impl std::fmt::Display) -> ArenaError {
    ArenaError::X11(e.to_string())
}

/// The game's window on the X server.
pub struct GameWindow {
    conn: RustConnection,
    pub win: Window,
    gc: u32,
    width: u16,
    height: u16,
    wm_protocols: u32,
    wm_delete: u32,
    min_keycode: u8,
    keysyms_per_keycode: u8,
    keysyms: Vec<u32>,
    pending: VecDeque<XEvent>,
    /// Whether XKB detectable autorepeat is on (else autorepeat is recognised by time stamps).
    pub detectable_autorepeat: bool,
    /// Print every X event to stderr (PRACTICE_ARENA_DEBUG=1).
    debug: bool,
}

fn intern(conn: &RustConnection, name: &str) -> Result<u32, ArenaError> {
    Ok(conn
        .intern_atom(false, name.as_bytes())
        .map_err(xerr)?
        .reply()
        .map_err(xerr)?
        .atom)
}

impl GameWindow {
    /// Connect to `$DISPLAY` and create the mapped, fixed-size window "Practice Arena".
    pub fn open(width: u16, height: u16) -> Result<GameWindow, ArenaError> {
        let (conn, screen_num) = x11rb::connect(None)
            .map_err(|e| ArenaError::X11(format!("cannot connect to the X server (is DISPLAY set?): {e}")))?;
        let screen = conn
            .setup()
            .roots
            .get(screen_num)
            .ok_or_else(|| xerr("no screen"))?
            .clone();
        if screen.root_depth != 24 {
            return Err(ArenaError::X11(format!(
                "the screen has depth {}, the game needs depth 24",
                screen.root_depth
            )));
        }
        let bpp = conn
            .setup()
            .pixmap_formats
            .iter()
            .find(|f| f.depth == 24)
            .map(|f| f.bits_per_pixel);
        if bpp != Some(32) {
            return Err(ArenaError::X11(format!(
                "depth-24 images are {bpp:?} bits per pixel, the game needs 32"
            )));
        }
        let win = conn.generate_id().map_err(xerr)?;
        let mask = EventMask::EXPOSURE
            | EventMask::KEY_PRESS
            | EventMask::KEY_RELEASE
            | EventMask::BUTTON_PRESS
            | EventMask::BUTTON_RELEASE
            | EventMask::POINTER_MOTION
            | EventMask::ENTER_WINDOW
            | EventMask::LEAVE_WINDOW
            | EventMask::FOCUS_CHANGE
            | EventMask::KEYMAP_STATE
            | EventMask::STRUCTURE_NOTIFY;
        conn.create_window(
            24,
            win,
            screen.root,
            0,
            0,
            width,
            height,
            0,
            WindowClass::INPUT_OUTPUT,
            screen.root_visual,
            &CreateWindowAux::new().background_pixel(0).event_mask(mask),
        )
        .map_err(xerr)?;
        let title = "Practice Arena";
        conn.change_property8(
            PropMode::REPLACE,
            win,
            AtomEnum::WM_NAME,
            AtomEnum::STRING,
            title.as_bytes(),
        )
        .map_err(xerr)?;
        let net_wm_name = intern(&conn, "_NET_WM_NAME")?;
        let utf8 = intern(&conn, "UTF8_STRING")?;
        conn.change_property8(PropMode::REPLACE, win, net_wm_name, utf8, title.as_bytes())
            .map_err(xerr)?;
        conn.change_property8(
            PropMode::REPLACE,
            win,
            AtomEnum::WM_CLASS,
            AtomEnum::STRING,
            b"practice-arena\0PracticeArena\0",
        )
        .map_err(xerr)?;
        let net_wm_pid = intern(&conn, "_NET_WM_PID")?;
        conn.change_property32(
            PropMode::REPLACE,
            win,
            net_wm_pid,
            AtomEnum::CARDINAL,
            &[std::process::id()],
        )
        .map_err(xerr)?;
        let wm_protocols = intern(&conn, "WM_PROTOCOLS")?;
        let wm_delete = intern(&conn, "WM_DELETE_WINDOW")?;
        conn.change_property32(PropMode::REPLACE, win, wm_protocols, AtomEnum::ATOM, &[wm_delete])
            .map_err(xerr)?;
        let mut size = WmSizeHints::new();
        size.min_size = Some((i32::from(width), i32::from(height)));
        size.max_size = Some((i32::from(width), i32::from(height)));
        size.set_normal_hints(&conn, win).map_err(xerr)?;
        let mut hints = WmHints::new();
        hints.input = Some(true);
        hints.initial_state = Some(WmHintsState::Normal);
        hints.set(&conn, win).map_err(xerr)?;
        let gc = conn.generate_id().map_err(xerr)?;
        conn.create_gc(gc, win, &CreateGCAux::new().graphics_exposures(0))
            .map_err(xerr)?;

        // Autorepeat must not look like release+press: ask XKB for detectable autorepeat.
        let detectable_autorepeat = conn
            .xkb_use_extension(1, 0)
            .ok()
            .and_then(|c| c.reply().ok())
            .filter(|r| r.supported)
            .and_then(|_| {
                let flag = xkb::PerClientFlag::DETECTABLE_AUTO_REPEAT;
                let none = xkb::BoolCtrl::from(0u32);
                conn.xkb_per_client_flags(xkb::ID::USE_CORE_KBD.into(), flag, flag, none, none, none)
                    .ok()
            })
            .and_then(|c| c.reply().ok())
            .map(|r| r.value.contains(xkb::PerClientFlag::DETECTABLE_AUTO_REPEAT))
            .unwrap_or(false);

        let mut w = GameWindow {
            conn,
            win,
            gc,
            width,
            height,
            wm_protocols,
            wm_delete,
            min_keycode: 8,
            keysyms_per_keycode: 1,
            keysyms: Vec::new(),
            pending: VecDeque::new(),
            detectable_autorepeat,
            debug: std::env::var_os("PRACTICE_ARENA_DEBUG").is_some_and(|v| v == "1"),
        };
        w.load_keymap()?;
        w.conn.map_window(win).map_err(xerr)?;
        w.conn.flush().map_err(xerr)?;
        Ok(w)
    }

    fn load_keymap(&mut self) -> Result<(), ArenaError> {
        let setup = self.conn.setup();
        let (min, max) = (setup.min_keycode, setup.max_keycode);
        let r = self
            .conn
            .get_keyboard_mapping(min, max - min + 1)
            .map_err(xerr)?
            .reply()
            .map_err(xerr)?;
        self.min_keycode = min;
        self.keysyms_per_keycode = r.keysyms_per_keycode.max(1);
        self.keysyms = r.keysyms;
        Ok(())
    }

    fn key_name(&self, keycode: u8) -> String {
        let idx =
            usize::from(keycode.saturating_sub(self.min_keycode)) * usize::from(self.keysyms_per_keycode);
        match self.keysyms.get(idx).copied() {
            Some(ks) if ks != 0 => keysym_name(ks),
            _ => format!("keycode_{keycode}"),
        }
    }

    pub fn fd(&self) -> RawFd {
        self.conn.stream().as_raw_fd()
    }

    pub fn flush(&self) -> Result<(), ArenaError> {
        self.conn.flush().map_err(xerr)
    }

    fn next_raw(&mut self) -> Result<Option<XEvent>, ArenaError> {
        if let Some(e) = self.pending.pop_front() {
            return Ok(Some(e));
        }
        self.conn.poll_for_event().map_err(xerr)
    }

    /// Every event already received, translated. Never blocks.
    pub fn poll_events(&mut self) -> Result<Vec<WinEvent>, ArenaError> {
        let mut out = Vec::new();
        while let Some(ev) = self.next_raw()? {
            if self.debug {
                eprintln!("practice-arena: {ev:?}");
            }
            match ev {
                XEvent::KeyPress(e) => out.push(WinEvent::Input(
                    Event::Key {
                        name: self.key_name(e.detail),
                        down: true,
                    },
                    Some(e.time),
                )),
                XEvent::KeyRelease(e) => {
                    // Without detectable autorepeat, a repeat is a release and a press with the same time stamp.
                    let next = self.conn.poll_for_event().map_err(xerr)?;
                    if let Some(XEvent::KeyPress(p)) = &next {
                        if p.detail == e.detail && p.time == e.time {
                            out.push(WinEvent::Input(
                                Event::Key {
                                    name: self.key_name(p.detail),
                                    down: true,
                                },
                                Some(p.time),
                            ));
                            continue;
                        }
                    }
                    out.push(WinEvent::Input(
                        Event::Key {
                            name: self.key_name(e.detail),
                            down: false,
                        },
                        Some(e.time),
                    ));
                    if let Some(n) = next {
                        self.pending.push_back(n);
                    }
                }
                XEvent::ButtonPress(e) => out.push(WinEvent::Input(
                    Event::Button {
                        button: e.detail,
                        down: true,
                        x: e.event_x.into(),
                        y: e.event_y.into(),
                    },
                    Some(e.time),
                )),
                XEvent::ButtonRelease(e) => out.push(WinEvent::Input(
                    Event::Button {
                        button: e.detail,
                        down: false,
                        x: e.event_x.into(),
                        y: e.event_y.into(),
                    },
                    Some(e.time),
                )),
                XEvent::MotionNotify(e) => out.push(WinEvent::Input(
                    Event::Motion {
                        x: e.event_x.into(),
                        y: e.event_y.into(),
                    },
                    Some(e.time),
                )),
                XEvent::EnterNotify(e) => out.push(WinEvent::Input(
                    Event::Enter {
                        x: e.event_x.into(),
                        y: e.event_y.into(),
                    },
                    Some(e.time),
                )),
                XEvent::LeaveNotify(e) if e.mode == NotifyMode::NORMAL => {
                    out.push(WinEvent::Input(Event::Leave, Some(e.time)))
                }
                XEvent::FocusIn(e) if focus_counts(e.detail) => {
                    out.push(WinEvent::Input(Event::Focus(true), None))
                }
                XEvent::FocusOut(e) if focus_counts(e.detail) => {
                    out.push(WinEvent::Input(Event::Focus(false), None))
                }
                XEvent::Expose(e) if e.count == 0 => out.push(WinEvent::Expose),
                XEvent::KeymapNotify(e) => {
                    let mut down = Vec::new();
                    for (byte, bits) in e.keys.iter().enumerate() {
                        for bit in 0..8 {
                            if bits & (1 << bit) != 0 {
                                // keys[0] bit 0 is keycode 8.
                                let keycode = (byte * 8 + bit + 8) as u8;
                                down.push(self.key_name(keycode));
                            }
                        }
                    }
                    out.push(WinEvent::Input(Event::KeysDown(down), None))
                }
                XEvent::MappingNotify(_) => self.load_keymap()?,
                XEvent::ClientMessage(e) if is_delete(&e, self.wm_protocols, self.wm_delete) => {
                    out.push(WinEvent::Close)
                }
                XEvent::Error(e) => eprintln!("practice-arena: X11 error {e:?}"),
                _ => {}
            }
        }
        Ok(out)
    }

    /// Show the framebuffer (Z_PIXMAP, depth 24, BGRX), split into requests the server accepts.
    pub fn put(&self, c: &Canvas) -> Result<(), ArenaError> {
        let stride = usize::from(self.width) * 4;
        let bytes = c.bgrx();
        if bytes.len() != stride * usize::from(self.height) {
            return Err(ArenaError::Other(
                "framebuffer size does not match the window".into(),
            ));
        }
        let max_bytes = self.conn.maximum_request_bytes().saturating_sub(64);
        let rows_per = (max_bytes / stride).clamp(1, usize::from(self.height));
        let mut y = 0usize;
        while y < usize::from(self.height) {
            let rows = rows_per.min(usize::from(self.height) - y);
            let data = &bytes[y * stride..(y + rows) * stride];
            self.conn
                .put_image(
                    ImageFormat::Z_PIXMAP,
                    self.win,
                    self.gc,
                    self.width,
                    rows as u16,
                    0,
                    y as i16,
                    0,
                    24,
                    data,
                )
                .map_err(xerr)?;
            y += rows;
        }
        Ok(())
    }

    /// Move the pointer to (x, y) in window coordinates.
    pub fn warp(&self, x: i32, y: i32) -> Result<(), ArenaError> {
        self.conn
            .warp_pointer(x11rb::NONE, self.win, 0, 0, 0, 0, x as i16, y as i16)
            .map_err(xerr)?;
        Ok(())
    }
}

/// Whether a FocusIn/FocusOut is about this window's keyboard focus. A keyboard grab by the window manager
/// (Grab/Ungrab modes) also takes keys away from the game, so those count too.
fn focus_counts(detail: NotifyDetail) -> bool {
    detail != NotifyDetail::POINTER && detail != NotifyDetail::POINTER_ROOT && detail != NotifyDetail::NONE
}

fn is_delete(e: &ClientMessageEvent, protocols: u32, delete: u32) -> bool {
    e.type_ == protocols && e.format == 32 && e.data.as_data32()[0] == delete
}

/// The X keysym name of `ks` as xdotool spells it ("w", "Escape", "Up", "space", "Shift_L").
pub fn keysym_name(ks: u32) -> String {
    match ks {
        0x61..=0x7a | 0x30..=0x39 => char::from_u32(ks).map(String::from).unwrap_or_default(),
        0x41..=0x5a => char::from_u32(ks + 0x20).map(String::from).unwrap_or_default(),
        0x20 => "space".into(),
        0x2c => "comma".into(),
        0x2d => "minus".into(),
        0x2e => "period".into(),
        0x2f => "slash".into(),
        0x3b => "semicolon".into(),
        0x3d => "equal".into(),
        0x27 => "apostrophe".into(),
        0x5b => "bracketleft".into(),
        0x5c => "backslash".into(),
        0x5d => "bracketright".into(),
        0x60 => "grave".into(),
        0xff08 => "BackSpace".into(),
        0xff09 => "Tab".into(),
        0xff0d => "Return".into(),
        0xff1b => "Escape".into(),
        0xff50 => "Home".into(),
        0xff51 => "Left".into(),
        0xff52 => "Up".into(),
        0xff53 => "Right".into(),
        0xff54 => "Down".into(),
        0xff55 => "Prior".into(),
        0xff56 => "Next".into(),
        0xff57 => "End".into(),
        0xff63 => "Insert".into(),
        0xffff => "Delete".into(),
        0xffbe..=0xffc9 => format!("F{}", ks - 0xffbe + 1),
        0xffe1 => "Shift_L".into(),
        0xffe2 => "Shift_R".into(),
        0xffe3 => "Control_L".into(),
        0xffe4 => "Control_R".into(),
        0xffe5 => "Caps_Lock".into(),
        0xffe9 => "Alt_L".into(),
        0xffea => "Alt_R".into(),
        0xffe7 => "Meta_L".into(),
        0xffeb => "Super_L".into(),
        0xffec => "Super_R".into(),
        0xfe03 => "ISO_Level3_Shift".into(),
        other => format!("0x{other:x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::keysym_name;

    #[test]
    fn keysym_names_match_xdotool() {
        assert_eq!(keysym_name(0x77), "w");
        assert_eq!(keysym_name(0x57), "w");
        assert_eq!(keysym_name(0xff1b), "Escape");
        assert_eq!(keysym_name(0xff52), "Up");
        assert_eq!(keysym_name(0x20), "space");
        assert_eq!(keysym_name(0xffc0), "F3");
        assert_eq!(keysym_name(0x1234567), "0x1234567");
    }
}
