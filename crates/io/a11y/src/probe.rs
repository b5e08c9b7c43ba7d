//! One accessibility probe: session bus → accessibility bus (`org.a11y.Bus.GetAddress`) → the registry's
//! applications → the one owned by the target window's process → its showing window's tree, walked within
//! bounds (nodes, depth, deadline) → actionable elements in capture space (FR-PERC-010, INV-PERC-001).

use crate::error::A11yError;
use crate::geometry::screen_rect_to_capture;
use futures_lite::FutureExt as _;
use gamepilot_core::{Rect, Size, TransformChain};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};
use zbus::zvariant::{OwnedObjectPath, OwnedValue};

const REGISTRY: &str = "org.a11y.atspi.Registry";
const ROOT_PATH: &str = "/org/a11y/atspi/accessible/root";
const ACCESSIBLE: &str = "org.a11y.atspi.Accessible";
const COMPONENT: &str = "org.a11y.atspi.Component";
/// `ATSPI_COORD_TYPE_SCREEN`.
const COORD_SCREEN: u32 = 0;
// AtspiStateType bits (the state set is two u32 words).
const STATE_EDITABLE: u32 = 7;
const STATE_SENSITIVE: u32 = 24;
const STATE_SHOWING: u32 = 25;
const STATE_VISIBLE: u32 = 30;

/// Roles (AT-SPI role names, lower case, words separated by spaces) whose nodes are targets an agent can
/// click or type into. `text` counts only when the node is editable.
pub const ACTIONABLE_ROLES: &[&str] = &[
    "push button",
    "button",
    "toggle button",
    "check box",
    "radio button",
    "menu",
    "menu item",
    "check menu item",
    "radio menu item",
    "tearoff menu item",
    "link",
    "list item",
    "tree item",
    "page tab",
    "entry",
    "password text",
    "text",
    "combo box",
    "spin button",
    "slider",
    "icon",
];

/// Bounds of one probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeLimits {
    /// Overall deadline of one probe, connection included; also the bound of each D-Bus call.
    pub timeout: Duration,
    /// Most tree nodes visited (the walk stops there and reports itself truncated).
    pub max_nodes: usize,
    /// Deepest level walked below the window's node.
    pub max_depth: usize,
}

impl Default for ProbeLimits {
    fn default() -> Self {
        ProbeLimits {
            timeout: Duration::from_millis(300),
            max_nodes: 2000,
            max_depth: 32,
        }
    }
}

/// Where to find the buses, and the bounds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct A11yConfig {
    /// Session bus address; `None`: `$DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`.
    pub session_bus: Option<String>,
    pub limits: ProbeLimits,
}

impl A11yConfig {
    /// The session bus address this configuration resolves to.
    pub fn session_address(&self) -> Result<String, A11yError> {
        if let Some(a) = &self.session_bus {
            return Ok(a.clone());
        }
        if let Ok(a) = std::env::var("DBUS_SESSION_BUS_ADDRESS") {
            if !a.trim().is_empty() {
                return Ok(a);
            }
        }
        if let Ok(d) = std::env::var("XDG_RUNTIME_DIR") {
            let p = std::path::Path::new(&d).join("bus");
            if p.exists() {
                return Ok(format!("unix:path={}", p.display()));
            }
        }
        Err(A11yError::NoSessionBus(
            "DBUS_SESSION_BUS_ADDRESS is unset and $XDG_RUNTIME_DIR/bus does not exist".into(),
        ))
    }
}

/// The window a probe is about: its process and its transform chain (capture ↔ screen).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct A11yTarget {
    pub window: u32,
    /// `_NET_WM_PID` of the window (`None`: the window does not say, so it cannot be matched).
    pub pid: Option<u32>,
    pub chain: TransformChain,
}

impl A11yTarget {
    /// Describe a window on `x`: its pid and its current transform chain (capture size = client size).
    pub fn from_window(x: &gamepilot_x11::X11, window: u32) -> Result<A11yTarget, A11yError> {
        let info = x.window_info(window)?;
        let chain = x.transform_for(window)?;
        Ok(A11yTarget {
            window,
            pid: info.pid,
            chain,
        })
    }

    /// The same target with capture size `size` (the frame perception works on).
    pub fn with_capture_size(mut self, size: Size) -> A11yTarget {
        self.chain = self.chain.with_capture_size(size);
        self
    }

    fn client_rect(&self) -> Rect {
        Rect::new(
            self.chain.client_origin.x,
            self.chain.client_origin.y,
            self.chain.client_size.w,
            self.chain.client_size.h,
        )
    }
}

/// One actionable node of the tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct A11yElement {
    /// The accessible name ("Game", "OK"); may be empty.
    pub name: String,
    /// The AT-SPI role name ("menu", "push button").
    pub role: String,
    /// The node's extents on the screen, as the tree reports them.
    pub screen: Rect,
    /// The same box in capture space, wholly inside the capture (INV-PERC-001).
    pub bbox: Rect,
}

impl A11yElement {
    /// The label perception shows: the name, or the role when the node has no name.
    pub fn label(&self) -> String {
        if self.name.trim().is_empty() {
            self.role.clone()
        } else {
            self.name.trim().to_string()
        }
    }
}

/// What one successful probe found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct A11ySnapshot {
    pub window: u32,
    /// The transform chain the boxes were mapped with (its generation tells whether they are current).
    pub chain: TransformChain,
    pub elements: Vec<A11yElement>,
    /// Tree nodes whose state was read.
    pub nodes_visited: usize,
    /// Nodes that answered with an error (gone mid-walk) and were skipped.
    pub nodes_failed: usize,
    /// The walk stopped at `max_nodes`.
    pub truncated: bool,
    pub elapsed: Duration,
}

impl A11ySnapshot {
    /// The elements as perception candidates (source `Accessibility`, label = name or role), ready for
    /// [`gamepilot_vision::Perceiver::observe_with_accessibility`]. Call only while `chain.generation` is
    /// the window's current one: older boxes may point at where the window used to be.
    pub fn candidates(&self) -> Vec<gamepilot_vision::Candidate> {
        self.elements
            .iter()
            .map(|e| gamepilot_vision::Candidate {
                bbox: e.bbox,
                confidence: 0.95,
                source: gamepilot_vision::ElementSource::Accessibility,
                label: Some(e.label()),
            })
            .collect()
    }
}

/// Whether the accessibility bus is reachable: its address and how many applications are registered on
/// it, within `config.limits.timeout` (for `gamepilot doctor`).
pub fn check_bus(config: &A11yConfig) -> Result<(String, usize), A11yError> {
    let bound = config.limits.timeout;
    let (tx, rx) = std::sync::mpsc::channel();
    let c = config.clone();
    std::thread::Builder::new()
        .name("a11y-check".into())
        .spawn(move || {
            let deadline = Instant::now() + c.limits.timeout;
            let r = Prober::connect(&c, deadline).and_then(|p| {
                let apps: Vec<(String, OwnedObjectPath)> =
                    p.call(REGISTRY, ROOT_PATH, ACCESSIBLE, "GetChildren", &(), deadline)?;
                Ok((p.address.clone(), apps.len()))
            });
            let _ = tx.send(r);
        })
        .map_err(|e| A11yError::DBus(format!("cannot start the check thread: {e}")))?;
    rx.recv_timeout(bound + Duration::from_millis(20))
        .unwrap_or(Err(A11yError::Timeout(bound)))
}

/// One probe on a fresh helper thread and connection, waited on for at most `limits.timeout` (plus a few
/// milliseconds to hand the answer over): a target that hangs yields [`A11yError::Timeout`] and the
/// caller goes on. For one-shot commands; the agent's loop uses [`crate::A11yWorker`].
pub fn probe(target: &A11yTarget, config: &A11yConfig) -> Result<A11ySnapshot, A11yError> {
    let bound = config.limits.timeout;
    let (tx, rx) = std::sync::mpsc::channel();
    let (t, c) = (*target, config.clone());
    let spawned = std::thread::Builder::new()
        .name("a11y-probe".into())
        .spawn(move || {
            let start = Instant::now();
            let r = Prober::connect(&c, start + c.limits.timeout).and_then(|mut p| p.probe(&t, start));
            let _ = tx.send(r);
        });
    if let Err(e) = spawned {
        return Err(A11yError::DBus(format!("cannot start the probe thread: {e}")));
    }
    match rx.recv_timeout(bound + Duration::from_millis(20)) {
        Ok(r) => r,
        Err(_) => Err(A11yError::Timeout(bound)),
    }
}

/// A connection to the accessibility bus, reusable across probes (the worker keeps one).
pub struct Prober {
    bus: zbus::Connection,
    /// The accessibility bus's address.
    pub address: String,
    // The blocking wrapper keeps zbus's executor thread alive for the async connection above.
    _blocking: zbus::blocking::Connection,
    limits: ProbeLimits,
}

fn dbus_err(e: zbus::Error) -> A11yError {
    A11yError::DBus(e.to_string())
}

fn is_timeout(e: &zbus::Error) -> bool {
    matches!(e, zbus::Error::InputOutput(io) if io.kind() == std::io::ErrorKind::TimedOut)
}

/// Run `fut` until `deadline`; past it, [`A11yError::Timeout`] with `bound`.
fn until<T>(
    fut: impl std::future::Future<Output = Result<T, zbus::Error>>,
    deadline: Instant,
    bound: Duration,
) -> Result<T, A11yError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(A11yError::Timeout(bound));
    }
    let timer = async move {
        async_io::Timer::after(left).await;
        Err(zbus::Error::InputOutput(
            std::io::Error::new(std::io::ErrorKind::TimedOut, "deadline").into(),
        ))
    };
    async_io::block_on(fut.or(timer)).map_err(|e| {
        if is_timeout(&e) {
            A11yError::Timeout(bound)
        } else {
            dbus_err(e)
        }
    })
}

fn connect_bus(address: &str, limits: &ProbeLimits) -> Result<zbus::blocking::Connection, zbus::Error> {
    zbus::blocking::connection::Builder::address(address)?
        .method_timeout(limits.timeout)
        .build()
}

/// Connect to `address` on a helper thread, waiting until `deadline` (a hung bus cannot hold us).
fn connect_within(
    address: String,
    limits: ProbeLimits,
    deadline: Instant,
) -> Result<zbus::blocking::Connection, A11yError> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("a11y-connect".into())
        .spawn(move || {
            let _ = tx.send(connect_bus(&address, &limits));
        })
        .map_err(|e| A11yError::DBus(format!("cannot start the connect thread: {e}")))?;
    let left = deadline.saturating_duration_since(Instant::now());
    match rx.recv_timeout(left) {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(dbus_err(e)),
        Err(_) => Err(A11yError::Timeout(limits.timeout)),
    }
}

impl Prober {
    /// Ask the session bus for the accessibility bus and connect to it, by `deadline`.
    pub fn connect(config: &A11yConfig, deadline: Instant) -> Result<Prober, A11yError> {
        let limits = config.limits;
        let session_addr = config.session_address()?;
        let session = connect_within(session_addr.clone(), limits, deadline).map_err(|e| match e {
            A11yError::DBus(m) => A11yError::NoSessionBus(format!("{session_addr}: {m}")),
            other => other,
        })?;
        let reply = until(
            session.inner().call_method(
                Some("org.a11y.Bus"),
                "/org/a11y/bus",
                Some("org.a11y.Bus"),
                "GetAddress",
                &(),
            ),
            deadline,
            limits.timeout,
        )
        .map_err(|e| match e {
            A11yError::DBus(m) => A11yError::NoAccessibilityBus(m),
            other => other,
        })?;
        let address: String = reply
            .body()
            .deserialize()
            .map_err(|e| A11yError::NoAccessibilityBus(e.to_string()))?;
        let blocking = connect_within(address.clone(), limits, deadline).map_err(|e| match e {
            A11yError::DBus(m) => A11yError::NoAccessibilityBus(format!("{address}: {m}")),
            other => other,
        })?;
        Ok(Prober {
            address,
            bus: blocking.inner().clone(),
            _blocking: blocking,
            limits,
        })
    }

    pub fn limits(&self) -> ProbeLimits {
        self.limits
    }

    fn call<B, R>(
        &self,
        dest: &str,
        path: &str,
        iface: &str,
        method: &str,
        body: &B,
        deadline: Instant,
    ) -> Result<R, A11yError>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
        R: for<'d> zbus::zvariant::DynamicDeserialize<'d>,
    {
        let m = until(
            self.bus.call_method(Some(dest), path, Some(iface), method, body),
            deadline,
            self.limits.timeout,
        )?;
        m.body().deserialize::<R>().map_err(dbus_err)
    }

    fn children(&self, app: &str, path: &str, deadline: Instant) -> Result<Vec<String>, A11yError> {
        let c: Vec<(String, OwnedObjectPath)> =
            self.call(app, path, ACCESSIBLE, "GetChildren", &(), deadline)?;
        Ok(c.into_iter().map(|(_, p)| p.as_str().to_string()).collect())
    }

    fn states(&self, app: &str, path: &str, deadline: Instant) -> Result<u64, A11yError> {
        let s: Vec<u32> = self.call(app, path, ACCESSIBLE, "GetState", &(), deadline)?;
        Ok(s.first().copied().unwrap_or(0) as u64 | (s.get(1).copied().unwrap_or(0) as u64) << 32)
    }

    fn extents(&self, app: &str, path: &str, deadline: Instant) -> Result<Rect, A11yError> {
        let (x, y, w, h): (i32, i32, i32, i32) =
            self.call(app, path, COMPONENT, "GetExtents", &(COORD_SCREEN,), deadline)?;
        Ok(Rect::new(x, y, w.max(0) as u32, h.max(0) as u32))
    }

    fn name(&self, app: &str, path: &str, deadline: Instant) -> Result<String, A11yError> {
        let v: OwnedValue = self.call(
            app,
            path,
            "org.freedesktop.DBus.Properties",
            "Get",
            &(ACCESSIBLE, "Name"),
            deadline,
        )?;
        Ok(String::try_from(v).unwrap_or_default())
    }

    /// The accessibility-bus name of the application that `pid` runs.
    fn application_of(&self, pid: u32, deadline: Instant) -> Result<String, A11yError> {
        let apps: Vec<(String, OwnedObjectPath)> =
            self.call(REGISTRY, ROOT_PATH, ACCESSIBLE, "GetChildren", &(), deadline)?;
        for (name, _) in &apps {
            let p: Result<u32, A11yError> = self.call(
                "org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus",
                "GetConnectionUnixProcessID",
                &(name.as_str(),),
                deadline,
            );
            match p {
                Ok(p) if p == pid => return Ok(name.clone()),
                Ok(_) => {}
                Err(A11yError::Timeout(d)) => return Err(A11yError::Timeout(d)),
                // An application that left between the two calls.
                Err(_) => {}
            }
        }
        Err(A11yError::TargetNotAccessible(format!(
            "no application of process {pid} is registered on the accessibility bus ({} registered)",
            apps.len()
        )))
    }

    /// One node: its element when it is a showing, actionable node inside the window, and whether it is
    /// showing at all (hidden subtrees, such as closed menus, are not walked).
    fn visit(
        &self,
        app: &str,
        path: &str,
        target: &A11yTarget,
        deadline: Instant,
    ) -> Result<(Option<A11yElement>, bool), A11yError> {
        let st = self.states(app, path, deadline)?;
        if st & (1 << STATE_SHOWING) == 0 || st & (1 << STATE_VISIBLE) == 0 {
            return Ok((None, false));
        }
        let role: String = self.call(app, path, ACCESSIBLE, "GetRoleName", &(), deadline)?;
        let role = normalise_role(&role);
        if !is_actionable(&role, st) {
            return Ok((None, true));
        }
        let screen = self.extents(app, path, deadline)?;
        let Some(bbox) = screen_rect_to_capture(&target.chain, screen) else {
            return Ok((None, true));
        };
        let name = self.name(app, path, deadline)?;
        Ok((
            Some(A11yElement {
                name,
                role,
                screen,
                bbox,
            }),
            true,
        ))
    }

    /// Probe `target`; the walk's deadline is `start + limits.timeout`.
    pub fn probe(&mut self, target: &A11yTarget, start: Instant) -> Result<A11ySnapshot, A11yError> {
        let deadline = start + self.limits.timeout;
        let pid = target.pid.ok_or_else(|| {
            A11yError::TargetNotAccessible(format!(
                "window 0x{:x} has no _NET_WM_PID, so no application can be matched to it",
                target.window
            ))
        })?;
        let app = self.application_of(pid, deadline)?;
        let client = target.client_rect();
        // The application's showing top-level windows over the target window: the one that covers it
        // most (the game's own window) first, then the others (its dialogs), all within one budget.
        let mut nodes_visited = 0usize;
        let mut tops: Vec<(u64, String)> = Vec::new();
        for top in self.children(&app, ROOT_PATH, deadline)? {
            nodes_visited += 1;
            let e = match self
                .states(&app, &top, deadline)
                .and_then(|st| Ok((st, self.extents(&app, &top, deadline)?)))
            {
                Ok((st, e)) if st & (1 << STATE_SHOWING) != 0 => e,
                Ok(_) => continue,
                Err(A11yError::Timeout(d)) => return Err(A11yError::Timeout(d)),
                Err(_) => continue,
            };
            let overlap = e.intersection(&client).map(|i| i.area()).unwrap_or(0);
            if overlap > 0 {
                tops.push((overlap, top));
            }
        }
        if tops.is_empty() {
            return Err(A11yError::TargetNotAccessible(format!(
                "process {pid} exposes no showing accessible window over window 0x{:x}",
                target.window
            )));
        }
        // The stack pops its last entry first: the largest overlap goes last.
        tops.sort_by_key(|(overlap, _)| *overlap);
        let mut elements = Vec::new();
        let mut truncated = false;
        let mut skipped = 0usize;
        let mut stack: Vec<(String, usize)> = tops.into_iter().map(|(_, top)| (top, 0usize)).collect();
        while let Some((path, depth)) = stack.pop() {
            if nodes_visited >= self.limits.max_nodes {
                truncated = true;
                break;
            }
            nodes_visited += 1;
            match self.visit(&app, &path, target, deadline) {
                Ok((element, showing)) => {
                    elements.extend(element);
                    if showing && depth < self.limits.max_depth {
                        match self.children(&app, &path, deadline) {
                            // Reverse so that the walk visits children in document order.
                            Ok(kids) => stack.extend(kids.into_iter().rev().map(|k| (k, depth + 1))),
                            Err(A11yError::Timeout(d)) => return Err(A11yError::Timeout(d)),
                            Err(_) => skipped += 1,
                        }
                    }
                }
                Err(A11yError::Timeout(d)) => return Err(A11yError::Timeout(d)),
                // A node that went away mid-walk (a menu closing) is skipped, not fatal.
                Err(_) => skipped += 1,
            }
        }
        Ok(A11ySnapshot {
            window: target.window,
            chain: target.chain,
            elements,
            nodes_visited,
            nodes_failed: skipped,
            truncated,
            elapsed: start.elapsed(),
        })
    }
}

/// AT-SPI role names come as "push button" (2.4x) or "push-button"/"push_button" elsewhere.
fn normalise_role(r: &str) -> String {
    r.trim().to_lowercase().replace(['-', '_'], " ")
}

/// Whether a node with this role and state set is a target: an actionable role, sensitive, and for plain
/// text, editable.
fn is_actionable(role: &str, states: u64) -> bool {
    if states & (1 << STATE_SENSITIVE) == 0 || !ACTIONABLE_ROLES.contains(&role) {
        return false;
    }
    role != "text" || states & (1 << STATE_EDITABLE) != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::Point;

    #[test]
    fn actionable_roles_need_sensitive_and_editable_text() {
        // FR-PERC-010
        let sensitive = 1u64 << STATE_SENSITIVE;
        assert!(is_actionable("menu", sensitive));
        assert!(is_actionable(&normalise_role("push-button"), sensitive));
        assert!(!is_actionable("menu", 0));
        assert!(!is_actionable("drawing area", sensitive));
        assert!(!is_actionable("text", sensitive));
        assert!(is_actionable("text", sensitive | 1 << STATE_EDITABLE));
    }

    #[test]
    fn labels_fall_back_to_the_role() {
        let e = A11yElement {
            name: "  ".into(),
            role: "push button".into(),
            screen: Rect::new(0, 0, 1, 1),
            bbox: Rect::new(0, 0, 1, 1),
        };
        assert_eq!(e.label(), "push button");
    }

    #[test]
    fn no_session_bus_is_a_named_error() {
        // FR-PERC-010: an explicit address wins; without any, the error names the fix.
        let c = A11yConfig {
            session_bus: Some("unix:path=/nonexistent".into()),
            limits: ProbeLimits::default(),
        };
        assert_eq!(c.session_address().unwrap(), "unix:path=/nonexistent");
        let t = A11yTarget {
            window: 1,
            pid: Some(1),
            chain: TransformChain::new(Point::new(0, 0), Size::new(10, 10)),
        };
        let e = probe(&t, &c).unwrap_err();
        assert!(matches!(e, A11yError::NoSessionBus(_)), "{e:?}");
        assert!(e.to_string().contains("/nonexistent"), "{e}");
    }
}
