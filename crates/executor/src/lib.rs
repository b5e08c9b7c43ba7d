//! Pure logic: the ADR-0035 executor tick (sustained actions, reconciliation, ownership, conflicts, budgets, denied keys, validation).
