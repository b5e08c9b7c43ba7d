//! Identifiers shared across crates: subgoals (input ownership, INV-LOOP-002) and elements (marks).

use serde::{Deserialize, Serialize};
use std::fmt;

/// The subgoal that owns an action and every input it holds (INV-LOOP-002).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct SubgoalId(pub u32);

/// A candidate element's identifier, stable across observations of one scene (FR-PERC-006); it is the
/// number drawn as the element's mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct ElementId(pub u32);

impl fmt::Display for SubgoalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "subgoal#{}", self.0)
    }
}

impl fmt::Display for ElementId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One action from its proposal through execution and verification: the executor, the grounding's
/// verifier, the session and the recording all name an action by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ActionId(pub u64);

impl fmt::Display for ActionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}
