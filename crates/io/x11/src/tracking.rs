//! Window tracking (FR-PERC-002, INV-GND-002): ConfigureNotify on the client and its window-manager
//! frame, TranslateCoordinates for the true client origin under a reparenting WM, RandR for monitor
//! changes and `Xft.dpi` for scale changes; any change rebuilds the `TransformChain` with
//! `generation + 1` before the next action. Also FR-PERC-009: telling an unsupported window mode
//! (unmapped or minimised, fullscreen bypassing Composite, a GL window whose pixmap stays black) from a
//! transient failure, each with its own message and fix.

use crate::conn::X11;
use crate::error::X11Error;
use crate::windows::gone_or;
use gamepilot_core::{Frame, MonoTime, Point, Rect, Size, TransformChain};
use x11rb::connection::Connection;
use x11rb::protocol::randr::{ConnectionExt as _, NotifyMask};
use x11rb::protocol::xproto::{AtomEnum, ChangeWindowAttributesAux, ConnectionExt as _, EventMask, Window};
use x11rb::protocol::Event;

/// What changed about the target window since the last chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowChange {
    Moved,
    Resized,
    ScaleChanged,
    MonitorChanged,
}

/// A monitor as RandR reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Monitor {
    pub name: String,
    pub geometry: Rect,
}

/// Follows one window on its own X connection (so that its events are never taken by another reader).
pub struct WindowTracker {
    x11: X11,
    window: Window,
    chain: TransformChain,
    monitor: Option<Monitor>,
    dirty: bool,
}

/// Parse `Xft.dpi` out of the RESOURCE_MANAGER string.
pub fn parse_xft_dpi(resources: &str) -> Option<f32> {
    resources.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "Xft.dpi")
            .then(|| v.trim().parse::<f32>().ok())
            .flatten()
            .filter(|d| *d > 0.0)
    })
}

impl WindowTracker {
    /// Open a dedicated connection to `display` and start following `window`.
    pub fn open(display: Option<&str>, window: Window) -> Result<WindowTracker, X11Error> {
        let x11 = X11::connect(display)?;
        let mut t = WindowTracker {
            x11,
            window,
            chain: TransformChain::new(Point::new(0, 0), Size::new(0, 0)),
            monitor: None,
            dirty: true,
        };
        t.select_events()?;
        let (chain, monitor) = t.measure()?;
        t.chain = chain;
        t.monitor = monitor;
        t.dirty = false;
        Ok(t)
    }

    pub fn window(&self) -> Window {
        self.window
    }

    /// The current chain (call [`WindowTracker::poll`] or [`WindowTracker::refresh`] first).
    pub fn chain(&self) -> TransformChain {
        self.chain
    }

    pub fn monitor(&self) -> Option<&Monitor> {
        self.monitor.as_ref()
    }

    fn select_events(&mut self) -> Result<(), X11Error> {
        let c = &self.x11.conn;
        // The client and every ancestor below the root: a reparenting WM moves its frame, not the client.
        let mut w = self.window;
        loop {
            c.change_window_attributes(
                w,
                &ChangeWindowAttributesAux::new().event_mask(EventMask::STRUCTURE_NOTIFY),
            )?
            .check()
            .map_err(|e| gone_or(e, w))?;
            let tree = c.query_tree(w)?.reply().map_err(|e| gone_or(e, w))?;
            if tree.parent == self.x11.root || tree.parent == x11rb::NONE {
                break;
            }
            w = tree.parent;
        }
        c.change_window_attributes(
            self.x11.root,
            &ChangeWindowAttributesAux::new().event_mask(EventMask::PROPERTY_CHANGE),
        )?;
        if self.x11.extensions().randr {
            let _ = c.randr_select_input(
                self.x11.root,
                NotifyMask::SCREEN_CHANGE | NotifyMask::CRTC_CHANGE | NotifyMask::OUTPUT_CHANGE,
            );
        }
        self.x11.flush()
    }

    fn scale_factor(&self) -> f32 {
        let atom = match self
            .x11
            .conn
            .intern_atom(true, b"RESOURCE_MANAGER")
            .ok()
            .and_then(|c| c.reply().ok())
        {
            Some(r) if r.atom != x11rb::NONE => r.atom,
            _ => return 1.0,
        };
        let prop = self
            .x11
            .conn
            .get_property(false, self.x11.root, atom, AtomEnum::STRING, 0, 1 << 16)
            .ok()
            .and_then(|c| c.reply().ok());
        prop.and_then(|p| parse_xft_dpi(&String::from_utf8_lossy(&p.value)))
            .map(|d| d / 96.0)
            .unwrap_or(1.0)
    }

    fn monitor_of(&self, r: &Rect) -> Option<Monitor> {
        if !self.x11.extensions().randr {
            return None;
        }
        let reply = self
            .x11
            .conn
            .randr_get_monitors(self.x11.root, true)
            .ok()?
            .reply()
            .ok()?;
        let c = r.center();
        let m = reply
            .monitors
            .iter()
            .find(|m| Rect::new(m.x as i32, m.y as i32, m.width as u32, m.height as u32).contains(c))
            .or(reply.monitors.first())?;
        let name = self
            .x11
            .conn
            .get_atom_name(m.name)
            .ok()
            .and_then(|c| c.reply().ok())
            .map(|n| String::from_utf8_lossy(&n.name).into_owned())
            .unwrap_or_default();
        Some(Monitor {
            name,
            geometry: Rect::new(m.x as i32, m.y as i32, m.width as u32, m.height as u32),
        })
    }

    fn measure(&self) -> Result<(TransformChain, Option<Monitor>), X11Error> {
        let r = self.x11.client_rect(self.window)?;
        let mut chain = TransformChain::new(Point::new(r.x, r.y), Size::new(r.w, r.h));
        chain.scale_factor = self.scale_factor();
        chain.generation = self.chain.generation;
        Ok((chain, self.monitor_of(&r)))
    }

    /// Drain pending events; when any could matter, measure again. Returns what changed (empty when
    /// nothing did); on a change the chain's generation has been incremented.
    pub fn poll(&mut self) -> Result<Vec<WindowChange>, X11Error> {
        while let Some(ev) = self.x11.conn.poll_for_event()? {
            match ev {
                Event::ConfigureNotify(_)
                | Event::ReparentNotify(_)
                | Event::MapNotify(_)
                | Event::UnmapNotify(_) => self.dirty = true,
                Event::PropertyNotify(_) => self.dirty = true,
                Event::RandrScreenChangeNotify(_) | Event::RandrNotify(_) => self.dirty = true,
                Event::DestroyNotify(d) if d.window == self.window => {
                    return Err(X11Error::WindowGone(self.window))
                }
                _ => {}
            }
        }
        if !self.dirty {
            return Ok(Vec::new());
        }
        self.refresh()
    }

    /// Measure now regardless of events (before an action, as a backstop) and rebuild on any change.
    pub fn refresh(&mut self) -> Result<Vec<WindowChange>, X11Error> {
        self.dirty = false;
        let (mut chain, monitor) = self.measure()?;
        let mut changes = Vec::new();
        if chain.client_origin != self.chain.client_origin {
            changes.push(WindowChange::Moved);
        }
        if chain.client_size != self.chain.client_size {
            changes.push(WindowChange::Resized);
        }
        if (chain.scale_factor - self.chain.scale_factor).abs() > 1e-3 {
            changes.push(WindowChange::ScaleChanged);
        }
        if monitor != self.monitor {
            changes.push(WindowChange::MonitorChanged);
        }
        if !changes.is_empty() {
            chain.generation = self.chain.generation + 1;
            self.chain = chain;
            self.monitor = monitor;
        }
        Ok(changes)
    }
}

pub use gamepilot_core::FrameProblem;

/// A diagnosis with its message and fix, for the session log and `gamepilot doctor`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FrameDiagnosis {
    pub problem: FrameProblem,
    pub unsupported: bool,
    pub message: String,
    pub fix: String,
}

impl FrameDiagnosis {
    /// The diagnosis of `problem` on `window`, with its message and fix for people.
    pub fn of(problem: FrameProblem, window: Window, detail: &str) -> FrameDiagnosis {
        let (message, fix) = match problem {
            FrameProblem::Unmapped => (
                format!("window 0x{window:x} is not mapped, so there is nothing to capture"),
                "show the game window (un-hide it or restore it from the taskbar)",
            ),
            FrameProblem::Minimised => (
                format!("window 0x{window:x} is minimised; X stops painting minimised windows"),
                "restore the game window; it may stay covered by other windows, but not minimised",
            ),
            FrameProblem::FullscreenBypass => (
                format!("window 0x{window:x} runs in exclusive fullscreen that bypasses Composite; its pixmap is empty"),
                "switch the game to windowed or borderless-windowed mode in its video settings",
            ),
            FrameProblem::BlackGlPixmap => (
                format!("window 0x{window:x} draws with GL straight to the screen; its Composite pixmap stays black"),
                "run a compositing manager (e.g. picom) or set the game to a non-exclusive / software-rendered mode",
            ),
            FrameProblem::Transient => (
                format!("capture of window 0x{window:x} failed for now ({detail})"),
                "none needed: gamepilot retries on the next tick",
            ),
            FrameProblem::Gone => (format!("window 0x{window:x} has closed"), "start the game again and name its new window"),
        };
        FrameDiagnosis {
            problem,
            unsupported: problem.is_unsupported(),
            message,
            fix: fix.to_string(),
        }
    }
}

/// Follows capture results and decides, with the window's state, whether a bad frame is transient or
/// an unsupported mode. Black frames count as transient for `grace` before they are judged.
#[derive(Debug, Clone)]
pub struct BlackFrameCheck {
    black_since: Option<MonoTime>,
    pub grace: std::time::Duration,
}

impl Default for BlackFrameCheck {
    fn default() -> Self {
        BlackFrameCheck {
            black_since: None,
            grace: std::time::Duration::from_millis(1000),
        }
    }
}

impl BlackFrameCheck {
    /// Judge one capture result at `now`. `None` means the frame is usable.
    pub fn check(
        &mut self,
        x11: &X11,
        window: Window,
        result: &Result<Frame, X11Error>,
        now: MonoTime,
    ) -> Option<FrameDiagnosis> {
        let state = WindowState::query(x11, window);
        match result {
            Err(e) if e.is_window_gone() => return Some(FrameDiagnosis::of(FrameProblem::Gone, window, "")),
            Err(X11Error::Unmapped { .. }) => {
                let p = if state.map(|s| s.iconic).unwrap_or(false) {
                    FrameProblem::Minimised
                } else {
                    FrameProblem::Unmapped
                };
                return Some(FrameDiagnosis::of(p, window, ""));
            }
            Err(e) => {
                return Some(FrameDiagnosis::of(
                    FrameProblem::Transient,
                    window,
                    &e.to_string(),
                ))
            }
            Ok(f) if !f.view().is_all_black() => {
                self.black_since = None;
                return None;
            }
            Ok(_) => {}
        }
        let since = *self.black_since.get_or_insert(now);
        if now.since(since) < self.grace {
            return Some(FrameDiagnosis::of(
                FrameProblem::Transient,
                window,
                "the frame is black; the window may not be drawn yet",
            ));
        }
        let state = state.unwrap_or_default();
        if state.fullscreen && state.bypass_compositor {
            return Some(FrameDiagnosis::of(FrameProblem::FullscreenBypass, window, ""));
        }
        if screen_shows_content(x11, window).unwrap_or(false) {
            let p = if state.fullscreen {
                FrameProblem::FullscreenBypass
            } else {
                FrameProblem::BlackGlPixmap
            };
            return Some(FrameDiagnosis::of(p, window, ""));
        }
        Some(FrameDiagnosis::of(
            FrameProblem::Transient,
            window,
            "the window itself shows only black",
        ))
    }
}

/// The screen rectangles of viewable windows stacked above `window` (its top-level ancestor below the
/// root) that overlap its client area, clipped to it (FR-PERC-009's "occluded"). Composite still
/// captures a covered window whole, but a click at a covered point lands on the window on top.
/// Override-redirect windows titled `gamepilot …` (the agent's own overlays) are not counted.
pub fn occluders(x11: &X11, window: Window) -> Result<Vec<Rect>, X11Error> {
    let c = &x11.conn;
    let client = x11.client_rect(window)?;
    // The top-level ancestor: the WM frame under a reparenting WM, else the window itself.
    let mut top = window;
    loop {
        let tree = c.query_tree(top)?.reply().map_err(|e| gone_or(e, top))?;
        if tree.parent == x11.root || tree.parent == x11rb::NONE {
            break;
        }
        top = tree.parent;
    }
    let stack = c.query_tree(x11.root)?.reply()?.children; // bottom to top
    let Some(pos) = stack.iter().position(|w| *w == top) else {
        return Ok(Vec::new());
    };
    // The game's own popups and dialogs (and the frames around them) are the game, not occluders.
    let family: Vec<Window> = x11
        .window_family(window)
        .unwrap_or_default()
        .iter()
        .filter_map(|m| x11.top_level_of(m.window).ok())
        .collect();
    let mut out = Vec::new();
    for &w in &stack[pos + 1..] {
        if x11.same_client(w, window) || family.contains(&w) {
            continue;
        }
        let Ok(attrs) = c.get_window_attributes(w)?.reply() else {
            continue;
        };
        if attrs.map_state != x11rb::protocol::xproto::MapState::VIEWABLE
            || attrs.class == x11rb::protocol::xproto::WindowClass::INPUT_ONLY
        {
            continue;
        }
        if attrs.override_redirect && x11.window_title(w).starts_with("gamepilot ") {
            continue;
        }
        let Ok(g) = c.get_geometry(w)?.reply() else {
            continue;
        };
        let r = Rect::new(g.x as i32, g.y as i32, g.width as u32, g.height as u32);
        if let Some(i) = r.intersection(&client) {
            out.push(i);
        }
    }
    Ok(out)
}

/// Window-manager state of a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowState {
    pub mapped: bool,
    pub iconic: bool,
    pub fullscreen: bool,
    pub bypass_compositor: bool,
}

impl WindowState {
    pub fn query(x11: &X11, window: Window) -> Option<WindowState> {
        let c = &x11.conn;
        let atom = |n: &[u8]| c.intern_atom(false, n).ok()?.reply().ok().map(|r| r.atom);
        let mapped = x11.is_mapped(window).ok()?;
        let wm_state = c
            .get_property(false, window, x11.atoms.wm_state, x11.atoms.wm_state, 0, 2)
            .ok()?
            .reply()
            .ok();
        // ICCCM WM_STATE: 3 = IconicState.
        let mut iconic = wm_state
            .and_then(|r| r.value32().and_then(|mut v| v.next()))
            .map(|s| s == 3)
            .unwrap_or(false);
        let net_state = atom(b"_NET_WM_STATE")?;
        let (fs, hidden) = (atom(b"_NET_WM_STATE_FULLSCREEN")?, atom(b"_NET_WM_STATE_HIDDEN")?);
        let states: Vec<u32> = c
            .get_property(false, window, net_state, AtomEnum::ATOM, 0, 64)
            .ok()?
            .reply()
            .ok()
            .and_then(|r| r.value32().map(|v| v.collect()))
            .unwrap_or_default();
        iconic |= states.contains(&hidden);
        let bypass_atom = atom(b"_NET_WM_BYPASS_COMPOSITOR")?;
        let bypass = c
            .get_property(false, window, bypass_atom, AtomEnum::CARDINAL, 0, 1)
            .ok()?
            .reply()
            .ok()
            .and_then(|r| r.value32().and_then(|mut v| v.next()))
            .map(|v| v == 1)
            .unwrap_or(false);
        Some(WindowState {
            mapped,
            iconic,
            fullscreen: states.contains(&fs),
            bypass_compositor: bypass,
        })
    }
}

/// Does the screen, where the window is, show anything but black? (GetImage of the root there.)
fn screen_shows_content(x11: &X11, window: Window) -> Result<bool, X11Error> {
    let r = x11.client_rect(window)?;
    let (sw, sh) = x11.screen_size();
    let Some(r) = r.clamped_to(&Rect::new(0, 0, sw as u32, sh as u32)) else {
        return Ok(false);
    };
    let img = x11
        .conn
        .get_image(
            x11rb::protocol::xproto::ImageFormat::Z_PIXMAP,
            x11.root,
            r.x as i16,
            r.y as i16,
            r.w as u16,
            r.h as u16,
            !0,
        )?
        .reply()?;
    Ok(img
        .data
        .chunks_exact(4)
        .any(|p| p[0] != 0 || p[1] != 0 || p[2] != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xft_dpi_is_read_from_resources() {
        assert_eq!(parse_xft_dpi("Xft.antialias:\t1\nXft.dpi:\t144\n"), Some(144.0));
        assert_eq!(parse_xft_dpi("Xft.antialias: 1"), None);
        assert_eq!(parse_xft_dpi("Xft.dpi: nope"), None);
    }

    #[test]
    fn problems_have_distinct_messages_and_fixes() {
        // FR-PERC-009
        let all = [
            FrameProblem::Unmapped,
            FrameProblem::Minimised,
            FrameProblem::FullscreenBypass,
            FrameProblem::BlackGlPixmap,
            FrameProblem::Transient,
            FrameProblem::Gone,
        ];
        let ds: Vec<FrameDiagnosis> = all.iter().map(|p| FrameDiagnosis::of(*p, 0x42, "x")).collect();
        for (i, a) in ds.iter().enumerate() {
            for b in &ds[i + 1..] {
                assert_ne!(a.message, b.message);
                assert_ne!(a.fix, b.fix);
            }
        }
        assert!(!FrameProblem::Transient.is_unsupported());
        assert!(FrameProblem::BlackGlPixmap.is_unsupported());
    }
}
