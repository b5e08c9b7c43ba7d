//! The tools the session offers the model: its set, the set for a grounding path, and `unsure` where the
//! session explores for an unsure model.

use super::*;

/// The tools a session may offer the tactical model.
pub const TOOLS: [Tool; 7] = [
    Tool::ClickMark,
    Tool::Click,
    Tool::Key,
    Tool::HoldKey,
    Tool::Camera,
    Tool::Wait,
    Tool::Note,
];

/// The tools of one tactical tick for a grounding path: by mark drops coordinate clicks, by coordinate
/// drops mark clicks (FR-GND-001, FR-GND-002, FR-GND-004).
pub fn tools_for_path(path: Option<GroundingPath>, camera_calibrated: bool) -> Vec<Tool> {
    let drop = match path {
        Some(GroundingPath::Mark) => Some(Tool::Click),
        Some(GroundingPath::Coordinate) => Some(Tool::ClickMark),
        _ => None,
    };
    session_tools(camera_calibrated)
        .into_iter()
        .filter(|t| Some(*t) != drop)
        .collect()
}

/// The session's tools: [`TOOLS`], with the camera turned in degrees once the camera is calibrated
/// (FR-ACT-004: the model reasons in angles; the executor converts them with the measured scale).
pub fn session_tools(camera_calibrated: bool) -> Vec<Tool> {
    TOOLS
        .into_iter()
        .map(|t| match t {
            Tool::Camera if camera_calibrated => Tool::CameraDegrees,
            t => t,
        })
        .collect()
}

/// The tools a session of `cfg` describes to the model: [`session_tools`], and `unsure` where the
/// session explores for an unsure model.
pub fn tools_for(cfg: &SessionConfig) -> Vec<Tool> {
    let mut tools = session_tools(cfg.camera_calibrated);
    if cfg.behaviours.explore_unsure {
        tools.push(Tool::Unsure);
    }
    tools
}
