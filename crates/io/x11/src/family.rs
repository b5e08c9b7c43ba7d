//! The game's window family: its own popups (override-redirect menus, lists, tooltips) and dialogs
//! (top-level windows of the same X client), stacked above its main window. Capture composes them over
//! the main window and the foreground guard accepts focus on them; another client's window is never a
//! member (FR-PERC-001: the user's other windows stay private).

use crate::conn::X11;
use crate::error::X11Error;
use gamepilot_core::{LayerRegion, Point, Rect, WindowLayer};
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _, MapState, Window, WindowClass};

/// A popup or dialog of the game, in capture space of the main window (clipped to its area).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FamilyMember {
    pub window: Window,
    pub layer: WindowLayer,
    /// The member's box relative to the main window's client origin, clipped to the main window.
    pub rect: Rect,
    /// Where that box starts inside the member window itself.
    pub offset: Point,
}

impl FamilyMember {
    pub fn region(&self) -> LayerRegion {
        LayerRegion {
            layer: self.layer,
            rect: self.rect,
        }
    }
}

/// The smallest popup worth composing: toolkits keep 1x1 helper windows mapped.
const MIN_SIDE: u32 = 4;

impl X11 {
    /// True when both windows were created by the same X client: resource ids carry their client's
    /// base outside the server's resource-id mask, so another program's window can never pass.
    pub fn same_client(&self, a: Window, b: Window) -> bool {
        let mask = self.conn.setup().resource_id_mask;
        a > 1 && b > 1 && (a & !mask) == (b & !mask)
    }

    /// The root's child that holds `w`: `w` itself, or the window manager's frame around it.
    pub fn top_level_of(&self, mut w: Window) -> Result<Window, X11Error> {
        for _ in 0..16 {
            let t = self
                .conn
                .query_tree(w)?
                .reply()
                .map_err(|e| crate::windows::gone_or(e, w))?;
            if t.parent == self.root || t.parent == x11rb::NONE {
                return Ok(w);
            }
            w = t.parent;
        }
        Ok(w)
    }

    /// The windows a window manager manages, bottom to top when it publishes the stacking list.
    fn managed_windows(&self) -> Vec<Window> {
        let prop = |atom: u32| {
            self.conn
                .get_property(false, self.root, atom, AtomEnum::WINDOW, 0, 4096)
                .ok()
                .and_then(|c| c.reply().ok())
                .and_then(|r| r.value32().map(|v| v.collect::<Vec<_>>()))
                .filter(|v| !v.is_empty())
        };
        prop(self.atoms.net_client_list_stacking)
            .or_else(|| prop(self.atoms.net_client_list))
            .unwrap_or_default()
    }

    /// The viewable popups and dialogs of `target`'s client stacked above it, bottom to top, each with
    /// its box clipped to the target's client area. A member that vanishes while being read is skipped.
    pub fn window_family(&self, target: Window) -> Result<Vec<FamilyMember>, X11Error> {
        let tree = self.conn.query_tree(self.root)?.reply()?;
        let top = self.top_level_of(target)?;
        let Some(target_at) = tree.children.iter().position(|c| *c == top) else {
            return Ok(Vec::new());
        };
        let mut candidates: Vec<(usize, Window)> = tree
            .children
            .iter()
            .enumerate()
            .skip(target_at + 1)
            .filter(|(_, c)| self.same_client(**c, target))
            .map(|(i, c)| (i, *c))
            .collect();
        // Under a reparenting window manager a dialog sits inside a frame of the manager's own client.
        for m in self.managed_windows() {
            if m == target || !self.same_client(m, target) {
                continue;
            }
            let Ok(frame) = self.top_level_of(m) else { continue };
            if frame == m {
                continue;
            }
            if let Some(i) = tree.children.iter().position(|c| *c == frame) {
                if i > target_at {
                    candidates.push((i, m));
                }
            }
        }
        candidates.sort_by_key(|(i, _)| *i);
        let geo = self
            .conn
            .get_geometry(target)?
            .reply()
            .map_err(|e| crate::windows::gone_or(e, target))?;
        let bounds = Rect::new(0, 0, geo.width as u32, geo.height as u32);
        let mut members = Vec::new();
        for (_, w) in candidates {
            if let Some(m) = self.member(target, w, &bounds) {
                members.push(m);
            }
        }
        Ok(members)
    }

    fn member(&self, target: Window, w: Window, bounds: &Rect) -> Option<FamilyMember> {
        let attrs = self.conn.get_window_attributes(w).ok()?.reply().ok()?;
        if attrs.map_state != MapState::VIEWABLE || attrs.class != WindowClass::INPUT_OUTPUT {
            return None;
        }
        let geo = self.conn.get_geometry(w).ok()?.reply().ok()?;
        if !matches!(geo.depth, 24 | 32) {
            return None;
        }
        let at = self
            .conn
            .translate_coordinates(w, target, 0, 0)
            .ok()?
            .reply()
            .ok()?;
        let whole = Rect::new(
            at.dst_x as i32,
            at.dst_y as i32,
            geo.width as u32,
            geo.height as u32,
        );
        let rect = whole.intersection(bounds)?;
        if rect.w < MIN_SIDE || rect.h < MIN_SIDE {
            return None;
        }
        Some(FamilyMember {
            window: w,
            layer: if attrs.override_redirect {
                WindowLayer::Popup
            } else {
                WindowLayer::Dialog
            },
            rect,
            offset: Point::new(rect.x - whole.x, rect.y - whole.y),
        })
    }

    /// The game's dialogs that the window manager placed mostly outside its window: viewable, managed
    /// windows of the game's client that say whose dialog they are (`WM_TRANSIENT_FOR`). Capture space is
    /// the game window's, so such a dialog would be invisible to the agent.
    pub fn stray_dialogs(&self, target: Window) -> Result<Vec<Window>, X11Error> {
        let main = self.client_rect(target)?;
        let mut candidates = self.managed_windows();
        candidates.extend(self.conn.query_tree(self.root)?.reply()?.children);
        let mut out = Vec::new();
        for w in candidates {
            if w == target || out.contains(&w) || !self.same_client(w, target) || !self.is_transient(w) {
                continue;
            }
            let Some(attrs) = self
                .conn
                .get_window_attributes(w)
                .ok()
                .and_then(|c| c.reply().ok())
            else {
                continue;
            };
            if attrs.map_state != MapState::VIEWABLE || attrs.override_redirect {
                continue;
            }
            let Ok(r) = self.client_rect(w) else { continue };
            let inside = r.intersection(&main).map(|i| i.area()).unwrap_or(0);
            if r.w >= MIN_SIDE && r.h >= MIN_SIDE && inside * 2 < r.area() {
                out.push(w);
            }
        }
        Ok(out)
    }

    fn is_transient(&self, w: Window) -> bool {
        self.conn
            .get_property(false, w, AtomEnum::WM_TRANSIENT_FOR, AtomEnum::WINDOW, 0, 1)
            .ok()
            .and_then(|c| c.reply().ok())
            .is_some_and(|p| p.value_len > 0)
    }

    /// Ask the window manager to move the game's `dialog` over the game's window (centred, its top-left
    /// corner kept inside): a ConfigureWindow request the manager redirects and carries out, never
    /// synthesised input.
    pub fn centre_over(&self, dialog: Window, target: Window) -> Result<(), X11Error> {
        use x11rb::protocol::xproto::ConfigureWindowAux;
        let main = self.client_rect(target)?;
        let d = self.client_rect(dialog)?;
        let x = (main.x + (main.w as i32 - d.w as i32) / 2).max(main.x);
        let y = (main.y + (main.h as i32 - d.h as i32) / 2).max(main.y);
        self.conn
            .configure_window(dialog, &ConfigureWindowAux::new().x(x).y(y))?;
        self.flush()
    }

    /// True when `w` is `target`, related to it, or one of its family's windows: the focus may rest on
    /// the game's own dialog, never on another client's window.
    pub fn is_family(&self, target: Window, w: Window) -> Result<bool, X11Error> {
        if w <= 1 || w == self.root {
            return Ok(false);
        }
        Ok(w == target
            || self.is_ancestor(target, w)?
            || self.is_ancestor(w, target)?
            || self.same_client(w, target))
    }
}
