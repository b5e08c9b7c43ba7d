//! What the model hosts' GPU-memory ladder tells the session (FR-MODEL-004), as the session's inputs: the
//! only translation left between a worker and `gamepilot_session::Input` (the reflex, tactical and
//! deliberative workers speak the session's types themselves; a degrade command is one type throughout).

/// A host restart of the degrade ladder as the session's input.
pub fn host_restart(n: &gamepilot_model::HostNotice) -> gamepilot_session::HostRestart {
    gamepilot_session::HostRestart {
        host: n.role.as_str().to_string(),
        restarting: n.done.is_none(),
        failed: n.done.as_ref().and_then(|d| d.as_ref().err().cloned()),
        detail: n.describe(),
    }
}
