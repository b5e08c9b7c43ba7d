//! The accessibility crate's one error enum: every way a probe can be skipped or fail, each with a message
//! that says what is missing and how to get it.

use std::time::Duration;

/// Why an accessibility probe gave no elements.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum A11yError {
    #[error("no D-Bus session bus ({0}); run the game and gamepilot under one (`dbus-run-session`, or `dbus-daemon --session` and DBUS_SESSION_BUS_ADDRESS)")]
    NoSessionBus(String),
    #[error("the session bus has no accessibility bus (org.a11y.Bus): {0} (install at-spi2-core, whose at-spi-bus-launcher the session bus starts on demand)")]
    NoAccessibilityBus(String),
    #[error("the target window exposes no accessibility tree: {0}")]
    TargetNotAccessible(String),
    #[error("the accessibility probe ran past its {}-ms bound (a busy or stopped target)", .0.as_millis())]
    Timeout(Duration),
    #[error("D-Bus: {0}")]
    DBus(String),
    #[error("the target window: {0}")]
    Window(String),
    #[error("the accessibility worker has stopped")]
    WorkerGone,
}

impl A11yError {
    /// A short kebab-case reason for logs and stderr lines (`skipped (timeout)`).
    pub fn reason(&self) -> &'static str {
        match self {
            A11yError::NoSessionBus(_) => "no-session-bus",
            A11yError::NoAccessibilityBus(_) => "no-accessibility-bus",
            A11yError::TargetNotAccessible(_) => "target-not-accessible",
            A11yError::Timeout(_) => "timeout",
            A11yError::DBus(_) => "dbus",
            A11yError::Window(_) => "window",
            A11yError::WorkerGone => "worker-gone",
        }
    }
}

impl From<gamepilot_x11::X11Error> for A11yError {
    fn from(e: gamepilot_x11::X11Error) -> Self {
        A11yError::Window(e.to_string())
    }
}
