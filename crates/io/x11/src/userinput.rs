//! XInput2 raw-event watch (FR-SAFE-002, FR-SAFE-001): key, button and motion events from every device,
//! each tagged with its source device so real devices are told apart from XTEST (our own synthesis).
//!
//! Raw events are delivered to the root window even while another client (a game) holds an active grab,
//! which is why the panic key relies on this watch and not only on a passive key grab.

use crate::conn::X11;
use crate::error::X11Error;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, RawFd};
use x11rb::connection::Connection;
use x11rb::protocol::xinput::{self, ConnectionExt as _, XIEventMask};
use x11rb::protocol::Event;

/// XIAllMasterDevices: raw events carry the slave that produced them in `sourceid`.
const ALL_MASTER_DEVICES: u16 = 1;
const ALL_DEVICES: u16 = 0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawKind {
    KeyPress,
    KeyRelease,
    ButtonPress,
    ButtonRelease,
    Motion,
}

/// One raw input event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawInput {
    pub kind: RawKind,
    /// Keycode or button number (0 for motion).
    pub detail: u32,
    /// The slave device that produced it.
    pub sourceid: u16,
    /// True when the source is an XTEST device (synthesised input, ours or another tool's).
    pub synthetic: bool,
}

/// Which events to watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// Keys only (the guardian's panic chord).
    Keys,
    /// Keys, buttons and motion (user-input detection).
    All,
}

/// A raw-event watch on its own X connection.
pub struct RawInputWatch {
    x11: X11,
    devices: HashMap<u16, String>,
}

impl RawInputWatch {
    pub fn connect(display: Option<&str>, watch: Watch) -> Result<RawInputWatch, X11Error> {
        let x11 = X11::connect(display)?;
        // Raw events during grabs need a client that announced XI 2.1 or later.
        let v = x11
            .conn
            .xinput_xi_query_version(2, 2)?
            .reply()
            .map_err(|_| X11Error::MissingExtension("XInputExtension 2"))?;
        if v.major_version < 2 {
            return Err(X11Error::MissingExtension("XInputExtension 2"));
        }
        let mut mask = XIEventMask::RAW_KEY_PRESS | XIEventMask::RAW_KEY_RELEASE;
        if watch == Watch::All {
            mask = mask
                | XIEventMask::RAW_BUTTON_PRESS
                | XIEventMask::RAW_BUTTON_RELEASE
                | XIEventMask::RAW_MOTION;
        }
        x11.conn.xinput_xi_select_events(
            x11.root,
            &[xinput::EventMask {
                deviceid: ALL_MASTER_DEVICES,
                mask: vec![mask],
            }],
        )?;
        let mut w = RawInputWatch {
            x11,
            devices: HashMap::new(),
        };
        w.refresh_devices()?;
        w.x11.conn.flush()?;
        Ok(w)
    }

    fn refresh_devices(&mut self) -> Result<(), X11Error> {
        let r = self.x11.conn.xinput_xi_query_device(ALL_DEVICES)?.reply()?;
        self.devices = r
            .infos
            .iter()
            .map(|d| (d.deviceid, String::from_utf8_lossy(&d.name).into_owned()))
            .collect();
        Ok(())
    }

    /// The device's name (`"Virtual core XTEST keyboard"`, `"Xephyr virtual keyboard"`).
    pub fn device_name(&self, id: u16) -> Option<&str> {
        self.devices.get(&id).map(String::as_str)
    }

    fn is_synthetic(&mut self, id: u16) -> bool {
        if !self.devices.contains_key(&id) {
            let _ = self.refresh_devices();
        }
        self.devices.get(&id).is_some_and(|n| n.contains("XTEST"))
    }

    /// The connection's file descriptor, for poll(2).
    pub fn fd(&self) -> RawFd {
        self.x11.conn.stream().as_raw_fd()
    }

    pub fn x11(&self) -> &X11 {
        &self.x11
    }

    /// Every raw event queued now (never blocks).
    pub fn poll(&mut self) -> Result<Vec<RawInput>, X11Error> {
        let mut out = Vec::new();
        while let Some(ev) = self.x11.conn.poll_for_event()? {
            let (kind, detail, sourceid) = match ev {
                Event::XinputRawKeyPress(e) => (RawKind::KeyPress, e.detail, e.sourceid),
                Event::XinputRawKeyRelease(e) => (RawKind::KeyRelease, e.detail, e.sourceid),
                Event::XinputRawButtonPress(e) => (RawKind::ButtonPress, e.detail, e.sourceid),
                Event::XinputRawButtonRelease(e) => (RawKind::ButtonRelease, e.detail, e.sourceid),
                Event::XinputRawMotion(e) => (RawKind::Motion, 0, e.sourceid),
                _ => continue,
            };
            let synthetic = self.is_synthetic(sourceid);
            out.push(RawInput {
                kind,
                detail,
                sourceid,
                synthetic,
            });
        }
        Ok(out)
    }

    /// The first real-device (non-XTEST) event queued now, if any (FR-SAFE-002). Drains the queue.
    pub fn poll_user(&mut self) -> Result<Option<RawInput>, X11Error> {
        Ok(self.poll()?.into_iter().find(|e| !e.synthetic))
    }
}
