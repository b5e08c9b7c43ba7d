//! Pure logic: per-tick output schema, verification verdicts, suppression, failure attribution, grounding path statistics.
