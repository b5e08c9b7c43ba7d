//! The session's threads and their IO edges around the pure crates (the binary is wiring, the
//! session decides, this crate runs): the one reflex driver of `act` and `run` ([`driver`]), the reflex,
//! tactical and deliberative cadences ([`reflex`], [`tactical`], [`deliberative`]), the off-thread
//! recognition worker, the GPU watch, the destructive hold's prompts, the guardian handle and the template
//! loader. Nothing here decides what the agent does next: that is `gamepilot_session::Session::step`.

pub mod agent;
pub mod console;
pub mod declared;
pub mod deliberative;
pub mod destructive;
pub mod driver;
mod error;
pub mod gpu_watch;
pub mod guardian_handle;
pub mod interlocks;
pub mod refine;
pub mod reflex;
pub mod reflex_core;
pub mod sensor_worker;
pub mod session_inputs;
pub mod session_records;
pub mod startup;
pub mod steering;
pub mod stop_signals;
pub mod synthesis;
pub mod tactical;
pub mod templates;
pub mod worker;

pub use error::RuntimeError;
pub use guardian_handle::{GuardianHandle, Ticker};

/// Monotonic microseconds since the first call in this process: the one clock of the binary and its
/// threads (logic crates take time as a value).
pub fn now() -> gamepilot_core::MonoTime {
    use std::sync::OnceLock;
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    let start = START.get_or_init(std::time::Instant::now);
    gamepilot_core::MonoTime(start.elapsed().as_micros() as u64)
}

/// Read a PNG (or any supported image) into an RGBA frame stamped with [`now`].
pub fn load_image(path: &std::path::Path) -> Result<gamepilot_core::Frame, RuntimeError> {
    let bad = |detail: String| RuntimeError::Image {
        path: path.display().to_string(),
        detail,
    };
    let img = image::open(path).map_err(|e| bad(e.to_string()))?.to_rgba8();
    let (w, h) = img.dimensions();
    gamepilot_core::Frame::from_rgba(w, h, img.into_raw(), now()).ok_or_else(|| bad("unexpected size".into()))
}
