//! Pure logic: plan and subgoals, deliberative triggers, no-progress signals, the escalation ladder, stop conditions.
