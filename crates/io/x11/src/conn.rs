//! One X connection with the atoms and extension versions gamepilot needs.

use crate::error::X11Error;
use x11rb::connection::{Connection, RequestConnection};
use x11rb::protocol::xproto::{Atom, ConnectionExt as _, Window};
use x11rb::rust_connection::RustConnection;

/// Which extensions the server offers (doctor reports each).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Extensions {
    pub composite: bool,
    pub shm: bool,
    pub xtest: bool,
    pub xinput2: bool,
    pub randr: bool,
}

/// Interned atoms used across the crate.
#[derive(Debug, Clone, Copy)]
pub struct Atoms {
    pub net_client_list: Atom,
    pub net_client_list_stacking: Atom,
    pub net_active_window: Atom,
    pub net_wm_name: Atom,
    pub net_wm_pid: Atom,
    pub utf8_string: Atom,
    pub wm_state: Atom,
}

pub struct X11 {
    pub conn: RustConnection,
    pub root: Window,
    pub screen_num: usize,
    pub atoms: Atoms,
    pub display: String,
}

impl X11 {
    /// Connect to `display` (or `$DISPLAY`).
    pub fn connect(display: Option<&str>) -> Result<X11, X11Error> {
        let name = display
            .map(str::to_string)
            .or_else(|| std::env::var("DISPLAY").ok())
            .unwrap_or_default();
        let (conn, screen_num) = x11rb::connect(display).map_err(|e| X11Error::Connect {
            display: name.clone(),
            reason: e.to_string(),
        })?;
        let root = conn
            .setup()
            .roots
            .get(screen_num)
            .map(|s| s.root)
            .ok_or_else(|| X11Error::Connect {
                display: name.clone(),
                reason: "screen not found".into(),
            })?;
        let intern =
            |n: &str| -> Result<Atom, X11Error> { Ok(conn.intern_atom(false, n.as_bytes())?.reply()?.atom) };
        let atoms = Atoms {
            net_client_list: intern("_NET_CLIENT_LIST")?,
            net_client_list_stacking: intern("_NET_CLIENT_LIST_STACKING")?,
            net_active_window: intern("_NET_ACTIVE_WINDOW")?,
            net_wm_name: intern("_NET_WM_NAME")?,
            net_wm_pid: intern("_NET_WM_PID")?,
            utf8_string: intern("UTF8_STRING")?,
            wm_state: intern("WM_STATE")?,
        };
        Ok(X11 {
            conn,
            root,
            screen_num,
            atoms,
            display: name,
        })
    }

    /// Probe the extensions gamepilot relies on.
    pub fn extensions(&self) -> Extensions {
        let has = |n: &'static str| matches!(self.conn.extension_information(n), Ok(Some(_)));
        Extensions {
            composite: has(x11rb::protocol::composite::X11_EXTENSION_NAME),
            shm: has(x11rb::protocol::shm::X11_EXTENSION_NAME),
            xtest: has(x11rb::protocol::xtest::X11_EXTENSION_NAME),
            xinput2: self.xinput2_version().is_some(),
            randr: has(x11rb::protocol::randr::X11_EXTENSION_NAME),
        }
    }

    fn xinput2_version(&self) -> Option<(u16, u16)> {
        use x11rb::protocol::xinput::ConnectionExt as _;
        let r = self.conn.xinput_xi_query_version(2, 2).ok()?.reply().ok()?;
        (r.major_version >= 2).then_some((r.major_version, r.minor_version))
    }

    pub fn screen_size(&self) -> (u16, u16) {
        self.conn
            .setup()
            .roots
            .get(self.screen_num)
            .map(|s| (s.width_in_pixels, s.height_in_pixels))
            .unwrap_or((0, 0))
    }

    pub fn flush(&self) -> Result<(), X11Error> {
        self.conn.flush()?;
        Ok(())
    }
}
