//! The platform accessibility tree (AT-SPI over D-Bus) of one target window, time-bounded and off the
//! critical path (FR-PERC-010).
//!
//! Where a game (a GTK launcher, a puzzle collection, a browser-hosted game) exposes an accessibility tree,
//! its geometry is exact: this crate asks the session bus for the accessibility bus (`org.a11y.Bus`),
//! finds the application whose process owns the target window (`_NET_WM_PID`), walks that window's tree
//! within bounds (nodes, depth, an overall deadline) and returns the showing, actionable nodes (buttons,
//! menus, menu items, check boxes, tabs, entries …) with their name, role and box in capture space (through
//! the window's transform chain, clipped inside the capture, INV-PERC-001).
//!
//! A busy or stopped target cannot hold the caller: every D-Bus call carries the probe's bound, the
//! one-shot [`probe`] waits on a helper thread for at most that bound, and the agent's [`A11yWorker`] runs
//! probes on its own thread and connection while the caller only ever reads [`A11yWorker::latest`].

pub mod error;
pub mod geometry;
pub mod probe;
pub mod worker;

pub use error::A11yError;
pub use geometry::screen_rect_to_capture;
pub use probe::{
    check_bus, probe, A11yConfig, A11yElement, A11ySnapshot, A11yTarget, ProbeLimits, Prober,
    ACTIONABLE_ROLES,
};
pub use worker::{A11yReport, A11yWorker};
