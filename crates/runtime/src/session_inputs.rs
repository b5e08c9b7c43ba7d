//! What the model hosts' GPU-memory ladder tells the session (FR-MODEL-004), as the session's inputs: the
//! only translation left between a worker and `gamepilot_session::Input` (the reflex, tactical and
//! deliberative workers speak the session's types themselves).

/// A GPU-memory degrade command as the session's degrade step (FR-MODEL-004).
pub fn degrade_step(c: &gamepilot_model::DegradeCommand) -> gamepilot_session::DegradeStep {
    use gamepilot_model::DegradeCommand as D;
    let (visual_factor, context_tokens) = match c {
        D::ReduceVisualBudget { factor } => (Some(*factor), None),
        D::RestoreVisualBudget => (Some(1.0), None),
        D::ReduceContext { to_tokens } | D::RestoreContext { to_tokens } => (None, Some(*to_tokens)),
        D::MoveDeliberativeOffGpu | D::RestoreDeliberativeGpu => (None, None),
    };
    gamepilot_session::DegradeStep {
        level: format!("{c:?}"),
        visual_factor,
        context_tokens,
    }
}

/// A host restart of the degrade ladder as the session's input.
pub fn host_restart(n: &gamepilot_model::HostNotice) -> gamepilot_session::HostRestart {
    gamepilot_session::HostRestart {
        host: n.role.as_str().to_string(),
        restarting: n.done.is_none(),
        failed: n.done.as_ref().and_then(|d| d.as_ref().err().cloned()),
        detail: n.describe(),
    }
}
