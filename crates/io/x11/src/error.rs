//! The x11 crate's one error enum.

#[derive(Debug, thiserror::Error)]
pub enum X11Error {
    #[error(
        "cannot connect to the X display {display:?}: {reason} (is DISPLAY set and the X server running?)"
    )]
    Connect { display: String, reason: String },
    #[error("X connection failed: {0}")]
    Connection(#[from] x11rb::errors::ConnectionError),
    #[error("X request failed: {0}")]
    Reply(#[from] x11rb::errors::ReplyError),
    #[error("X id allocation failed: {0}")]
    Id(#[from] x11rb::errors::ReplyOrIdError),
    #[error("the X server lacks the {0} extension")]
    MissingExtension(&'static str),
    #[error("no window matches {0} (run `gamepilot windows` to list them)")]
    UnknownWindow(String),
    #[error("{selector} matches {count} windows; pick one by id: {ids}")]
    AmbiguousWindow {
        selector: String,
        count: usize,
        ids: String,
    },
    #[error("window 0x{0:x} has vanished")]
    WindowGone(u32),
    #[error("window 0x{window:x} is not mapped (minimised or hidden); map it to capture it")]
    Unmapped { window: u32 },
    /// GetGeometry reported a zero-area window: there are no pixels to capture, which is neither a
    /// reason to fall back to another capture path nor a frame (an empty frame would read as "black").
    #[error("window 0x{window:x} has no area ({width}x{height}); nothing to capture until it has a size")]
    EmptyWindow { window: u32, width: u32, height: u32 },
    #[error("the region {region:?} has no area; a region to capture needs a width and a height")]
    EmptyRegion { region: gamepilot_core::Rect },
    #[error("the region {region:?} lies outside the {width}x{height} window")]
    RegionOutside {
        region: gamepilot_core::Rect,
        width: u32,
        height: u32,
    },
    #[error("shared memory setup failed: {0}")]
    Shm(String),
    #[error("cannot draw the overlay: {0}")]
    Font(String),
    #[error("no keycode produces keysym {0}")]
    NoKeycode(String),
}

impl X11Error {
    /// True when the error means the target window no longer exists.
    pub fn is_window_gone(&self) -> bool {
        match self {
            X11Error::WindowGone(_) => true,
            X11Error::Reply(x11rb::errors::ReplyError::X11Error(e)) => matches!(
                e.error_kind,
                x11rb::protocol::ErrorKind::Window
                    | x11rb::protocol::ErrorKind::Drawable
                    | x11rb::protocol::ErrorKind::Match
            ),
            _ => false,
        }
    }
}
