//! Listing and finding top-level client windows (id, title incl. `_NET_WM_NAME`, class, pid, geometry).

use crate::conn::X11;
use crate::error::X11Error;
use gamepilot_core::{Point, Rect};
use serde::Serialize;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _, MapState, Window};

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WindowInfo {
    pub id: u32,
    pub title: String,
    pub class: String,
    pub instance: String,
    pub pid: Option<u32>,
    /// Client area on the root window.
    pub geometry: Rect,
    pub mapped: bool,
}

/// How the user names the target window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowSelector {
    Id(u32),
    /// Case-insensitive substring of the title.
    Title(String),
    /// Exact WM_CLASS class or instance (case-insensitive).
    Class(String),
    Pid(u32),
}

impl WindowSelector {
    /// `0x1a00003` or `27262979` → id; anything else → title substring.
    pub fn parse(s: &str) -> WindowSelector {
        let t = s.trim();
        if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            if let Ok(v) = u32::from_str_radix(hex, 16) {
                return WindowSelector::Id(v);
            }
        }
        if let Ok(v) = t.parse::<u32>() {
            return WindowSelector::Id(v);
        }
        if let Some(c) = t.strip_prefix("class:") {
            return WindowSelector::Class(c.to_string());
        }
        WindowSelector::Title(t.to_string())
    }

    pub fn matches(&self, w: &WindowInfo) -> bool {
        match self {
            WindowSelector::Id(id) => w.id == *id,
            WindowSelector::Title(t) => w.title.to_lowercase().contains(&t.to_lowercase()),
            WindowSelector::Class(c) => w.class.eq_ignore_ascii_case(c) || w.instance.eq_ignore_ascii_case(c),
            WindowSelector::Pid(p) => w.pid == Some(*p),
        }
    }
}

impl std::fmt::Display for WindowSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WindowSelector::Id(id) => write!(f, "window id 0x{id:x}"),
            WindowSelector::Title(t) => write!(f, "title {t:?}"),
            WindowSelector::Class(c) => write!(f, "class {c:?}"),
            WindowSelector::Pid(p) => write!(f, "pid {p}"),
        }
    }
}

impl X11 {
    fn string_property(&self, win: Window, prop: u32, ty: u32) -> Option<Vec<u8>> {
        let r = self
            .conn
            .get_property(false, win, prop, ty, 0, 4096)
            .ok()?
            .reply()
            .ok()?;
        (r.format == 8 && !r.value.is_empty()).then_some(r.value)
    }

    /// The window's title: `_NET_WM_NAME` (UTF-8) first, then `WM_NAME`.
    pub fn window_title(&self, win: Window) -> String {
        if let Some(v) = self.string_property(win, self.atoms.net_wm_name, self.atoms.utf8_string) {
            return String::from_utf8_lossy(&v).into_owned();
        }
        self.string_property(win, AtomEnum::WM_NAME.into(), AtomEnum::ANY.into())
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default()
    }

    fn window_class(&self, win: Window) -> Option<(String, String)> {
        let v = self.string_property(win, AtomEnum::WM_CLASS.into(), AtomEnum::STRING.into())?;
        let mut parts = v
            .split(|b| *b == 0)
            .map(|p| String::from_utf8_lossy(p).into_owned());
        let instance = parts.next().unwrap_or_default();
        let class = parts.next().unwrap_or_default();
        Some((instance, class))
    }

    fn window_pid(&self, win: Window) -> Option<u32> {
        let r = self
            .conn
            .get_property(false, win, self.atoms.net_wm_pid, AtomEnum::CARDINAL, 0, 1)
            .ok()?
            .reply()
            .ok()?;
        let pid = r.value32()?.next();
        pid
    }

    /// Client-area rectangle on the root window (works under a reparenting window manager).
    pub fn client_rect(&self, win: Window) -> Result<Rect, X11Error> {
        let g = self
            .conn
            .get_geometry(win)?
            .reply()
            .map_err(|e| gone_or(e, win))?;
        let t = self
            .conn
            .translate_coordinates(win, self.root, 0, 0)?
            .reply()
            .map_err(|e| gone_or(e, win))?;
        Ok(Rect::new(
            t.dst_x as i32,
            t.dst_y as i32,
            g.width as u32,
            g.height as u32,
        ))
    }

    pub fn is_mapped(&self, win: Window) -> Result<bool, X11Error> {
        let a = self
            .conn
            .get_window_attributes(win)?
            .reply()
            .map_err(|e| gone_or(e, win))?;
        Ok(a.map_state == MapState::VIEWABLE)
    }

    /// Describe one window.
    pub fn window_info(&self, win: Window) -> Result<WindowInfo, X11Error> {
        let geometry = self.client_rect(win)?;
        let (instance, class) = self.window_class(win).unwrap_or_default();
        Ok(WindowInfo {
            id: win,
            title: self.window_title(win),
            class,
            instance,
            pid: self.window_pid(win),
            geometry,
            mapped: self.is_mapped(win)?,
        })
    }

    /// Top-level client windows: `_NET_CLIENT_LIST` when a window manager publishes it, plus any window
    /// with a WM_CLASS found at most two levels below the root (bare X servers, reparenting frames).
    pub fn list_windows(&self) -> Result<Vec<WindowInfo>, X11Error> {
        let mut ids: Vec<Window> = Vec::new();
        if let Ok(c) = self.conn.get_property(
            false,
            self.root,
            self.atoms.net_client_list,
            AtomEnum::WINDOW,
            0,
            4096,
        ) {
            if let Ok(r) = c.reply() {
                if let Some(v) = r.value32() {
                    ids.extend(v);
                }
            }
        }
        let top = self.conn.query_tree(self.root)?.reply()?.children;
        for w in top {
            if self.window_class(w).is_some() {
                ids.push(w);
                continue;
            }
            if let Ok(c) = self.conn.query_tree(w) {
                if let Ok(r) = c.reply() {
                    ids.extend(r.children.into_iter().filter(|c| self.window_class(*c).is_some()));
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        ids.retain(|w| seen.insert(*w));
        // A window may vanish between listing and describing it: skip it, do not fail the list.
        Ok(ids.into_iter().filter_map(|w| self.window_info(w).ok()).collect())
    }

    /// Resolve a selector to exactly one window; ids resolve even without WM_CLASS.
    pub fn find_window(&self, sel: &WindowSelector) -> Result<WindowInfo, X11Error> {
        if let WindowSelector::Id(id) = sel {
            return self.window_info(*id).map_err(|e| {
                if e.is_window_gone() {
                    X11Error::UnknownWindow(sel.to_string())
                } else {
                    e
                }
            });
        }
        let all: Vec<WindowInfo> = self
            .list_windows()?
            .into_iter()
            .filter(|w| sel.matches(w))
            .collect();
        // Prefer mapped windows when several match.
        let mapped: Vec<&WindowInfo> = all.iter().filter(|w| w.mapped).collect();
        let pick: Vec<&WindowInfo> = if mapped.is_empty() {
            all.iter().collect()
        } else {
            mapped
        };
        match pick.len() {
            0 => Err(X11Error::UnknownWindow(sel.to_string())),
            1 => Ok(pick[0].clone()),
            n => Err(X11Error::AmbiguousWindow {
                selector: sel.to_string(),
                count: n,
                ids: pick
                    .iter()
                    .map(|w| format!("0x{:x}", w.id))
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// The transform chain for a window's client area with capture size == client size.
    pub fn transform_for(&self, win: Window) -> Result<gamepilot_core::TransformChain, X11Error> {
        let r = self.client_rect(win)?;
        Ok(gamepilot_core::TransformChain::new(
            Point::new(r.x, r.y),
            gamepilot_core::Size::new(r.w, r.h),
        ))
    }
}

/// Map a BadWindow/BadDrawable reply into `WindowGone`.
pub(crate) fn gone_or(e: x11rb::errors::ReplyError, win: Window) -> X11Error {
    let err = X11Error::Reply(e);
    if err.is_window_gone() {
        X11Error::WindowGone(win)
    } else {
        err
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_parsing() {
        assert_eq!(WindowSelector::parse("0x1a00003"), WindowSelector::Id(0x1a00003));
        assert_eq!(WindowSelector::parse("42"), WindowSelector::Id(42));
        assert_eq!(
            WindowSelector::parse("Practice Arena"),
            WindowSelector::Title("Practice Arena".into())
        );
        assert_eq!(
            WindowSelector::parse("class:practice-arena"),
            WindowSelector::Class("practice-arena".into())
        );
    }
}
