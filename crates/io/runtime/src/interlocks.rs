//! Pieces of the reflex tick shared by `gamepilot act` and `gamepilot run`: sampling the target window
//! (foreground, transform chain, pointer), publishing the held set to the guardian page, and auditing the
//! held record against the X server (INV-ACT-002).

use crate::RuntimeError;
use gamepilot_core::action::InputEvent;
use gamepilot_core::{Point, TransformChain};
use gamepilot_executor::HeldRecord;
use gamepilot_guardian::shm::{monotonic_us, SharedState};
use gamepilot_x11::input::InputSink;
use gamepilot_x11::X11;
use x11rb::protocol::xproto::ConnectionExt as _;

/// What one tick knows about the target window.
#[derive(Debug, Clone, Copy)]
pub struct TargetSample {
    pub foreground: bool,
    pub chain: Option<TransformChain>,
    /// The pointer in capture space, when inside the window.
    pub pointer: Option<Point>,
}

/// Sample the target; `None` when the window has vanished.
pub fn sample_target(x: &X11, window: u32) -> Option<TargetSample> {
    let foreground = match x.is_foreground(window) {
        Ok(f) => f,
        Err(e) if e.is_window_gone() => return None,
        Err(_) => false,
    };
    let chain = match x.transform_for(window) {
        Ok(c) => Some(c),
        Err(e) if e.is_window_gone() => return None,
        Err(_) => None,
    };
    let pointer = x
        .conn
        .query_pointer(x.root)
        .ok()
        .and_then(|c| c.reply().ok())
        .and_then(|p| chain.and_then(|c| c.screen_to_capture(p.root_x as i32, p.root_y as i32)))
        .map(|p| Point::new(p.x, p.y));
    Some(TargetSample {
        foreground,
        chain,
        pointer,
    })
}

/// Publish the held set and a heartbeat to the guardian's page (ADR-0035 step 5).
pub fn publish(shm: &SharedState, held: &HeldRecord) {
    let keys: Vec<u32> = held.keys().map(|k| k.0).collect();
    let buttons: Vec<u8> = held.buttons().collect();
    shm.publish(&keys, &buttons, monotonic_us());
}

/// A difference between the executor's record and what the server holds.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct HeldDivergence {
    pub server_only_keycodes: Vec<u8>,
    pub record_only_keycodes: Vec<u8>,
    pub server_only_buttons: Vec<u8>,
    pub record_only_buttons: Vec<u8>,
}

/// Compare the held record with the server (INV-ACT-002) and release what the server holds that the
/// record does not own. Returns the divergence, if there was one (an execution failure to log).
pub fn audit(sink: &mut dyn InputSink, held: &HeldRecord) -> Result<Option<HeldDivergence>, RuntimeError> {
    let Some(server) = sink.server_held()? else {
        return Ok(None);
    };
    let record: Vec<u8> = held.keys().filter_map(|k| sink.keycode_of(k)).collect();
    let (unowned, missing) = gamepilot_executor::held::divergence(&record, &server.keycodes);
    let rec_buttons: Vec<u8> = held.buttons().collect();
    let (unowned_b, missing_b) = gamepilot_executor::held::divergence(&rec_buttons, &server.buttons);
    if unowned.is_empty() && missing.is_empty() && unowned_b.is_empty() && missing_b.is_empty() {
        return Ok(None);
    }
    if !unowned.is_empty() {
        sink.release_keycodes(&unowned)?;
    }
    if !unowned_b.is_empty() {
        let ev: Vec<InputEvent> = unowned_b
            .iter()
            .map(|b| InputEvent::Button {
                button: *b,
                down: false,
            })
            .collect();
        sink.deliver(&ev)?;
    }
    Ok(Some(HeldDivergence {
        server_only_keycodes: unowned,
        record_only_keycodes: missing,
        server_only_buttons: unowned_b,
        record_only_buttons: missing_b,
    }))
}
