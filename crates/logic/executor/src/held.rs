//! The authoritative record of held keys and buttons: which input, which subgoal owns it, since when
//! (FR-ACT-007). Every release path reads from it.

use gamepilot_core::{Keysym, MonoTime, SubgoalId};
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

pub use gamepilot_core::ActionId;

/// A holdable input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HeldInput {
    Key(Keysym),
    Button(u8),
}

impl HeldInput {
    pub fn is_modifier(&self) -> bool {
        matches!(self, HeldInput::Key(k) if k.is_modifier())
    }

    /// Release order: ordinary keys first, then buttons, then modifiers (a chord lets go of its key
    /// before its modifiers). Press order is the reverse.
    pub fn release_rank(&self) -> u8 {
        match self {
            HeldInput::Key(k) if k.is_modifier() => 2,
            HeldInput::Key(_) => 0,
            HeldInput::Button(_) => 1,
        }
    }
}

impl fmt::Display for HeldInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeldInput::Key(k) => write!(f, "{k}"),
            HeldInput::Button(b) => write!(f, "Button{b}"),
        }
    }
}

impl Serialize for HeldInput {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One held input with its owner and start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Held {
    pub input: HeldInput,
    pub owner: SubgoalId,
    pub action: ActionId,
    pub since: MonoTime,
}

/// What is held right now, as the executor believes it (INV-ACT-002 compares it with the server).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldRecord {
    map: BTreeMap<HeldInput, Held>,
}

impl HeldRecord {
    pub fn get(&self, input: &HeldInput) -> Option<&Held> {
        self.map.get(input)
    }

    pub fn contains(&self, input: &HeldInput) -> bool {
        self.map.contains_key(input)
    }

    pub fn insert(&mut self, held: Held) {
        self.map.insert(held.input, held);
    }

    pub fn remove(&mut self, input: &HeldInput) -> Option<Held> {
        self.map.remove(input)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Held> {
        self.map.values()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Held keys.
    pub fn keys(&self) -> impl Iterator<Item = Keysym> + '_ {
        self.map.keys().filter_map(|i| match i {
            HeldInput::Key(k) => Some(*k),
            HeldInput::Button(_) => None,
        })
    }

    /// Held buttons.
    pub fn buttons(&self) -> impl Iterator<Item = u8> + '_ {
        self.map.keys().filter_map(|i| match i {
            HeldInput::Button(b) => Some(*b),
            HeldInput::Key(_) => None,
        })
    }

    /// Everything held by `owner`.
    pub fn owned_by(&self, owner: SubgoalId) -> Vec<Held> {
        self.map.values().filter(|h| h.owner == owner).copied().collect()
    }

    pub fn snapshot(&self) -> Vec<Held> {
        self.map.values().copied().collect()
    }
}

/// INV-ACT-002: compare the record (as keycodes) with what the server holds. Returns the codes the server
/// holds that the record does not own (to release) and the codes the record holds that the server does not
/// (a divergence to log).
pub fn divergence(record: &[u8], server: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let unowned = server.iter().filter(|c| !record.contains(c)).copied().collect();
    let missing = record.iter().filter(|c| !server.contains(c)).copied().collect();
    (unowned, missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_tracks_owner_and_since() {
        // FR-ACT-007
        let mut r = HeldRecord::default();
        let w = HeldInput::Key(Keysym('w' as u32));
        r.insert(Held {
            input: w,
            owner: SubgoalId(3),
            action: ActionId(1),
            since: MonoTime(5),
        });
        r.insert(Held {
            input: HeldInput::Button(1),
            owner: SubgoalId(4),
            action: ActionId(2),
            since: MonoTime(9),
        });
        assert_eq!(r.get(&w).unwrap().owner, SubgoalId(3));
        assert_eq!(r.get(&w).unwrap().since, MonoTime(5));
        assert_eq!(r.owned_by(SubgoalId(4)).len(), 1);
        assert_eq!(r.keys().collect::<Vec<_>>(), vec![Keysym('w' as u32)]);
        assert_eq!(r.buttons().collect::<Vec<_>>(), vec![1]);
        assert!(r.remove(&w).is_some());
        assert_eq!(r.len(), 1);
        let json = serde_json::to_string(&r.snapshot()).unwrap();
        assert!(json.contains("\"Button1\""), "{json}");
    }

    #[test]
    fn divergence_finds_both_sides() {
        // INV-ACT-002
        let (unowned, missing) = divergence(&[25, 38], &[25, 50]);
        assert_eq!(unowned, vec![50]);
        assert_eq!(missing, vec![38]);
        assert_eq!(divergence(&[], &[]), (vec![], vec![]));
    }

    #[test]
    fn release_rank_orders_keys_before_modifiers() {
        assert!(
            HeldInput::Key(Keysym('a' as u32)).release_rank() < HeldInput::Key(Keysym(0xffe3)).release_rank()
        );
        assert!(HeldInput::Key(Keysym(0xffe3)).is_modifier());
    }
}
