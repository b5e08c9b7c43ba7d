//! Monotonic time passed into logic as a value (microseconds since an arbitrary session origin).

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A point on the session's monotonic clock, in microseconds. Logic crates receive it as an argument
/// and never read a clock themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct MonoTime(pub u64);

impl MonoTime {
    pub const ZERO: MonoTime = MonoTime(0);

    pub fn from_millis(ms: u64) -> Self {
        MonoTime(ms.saturating_mul(1000))
    }

    pub fn as_micros(self) -> u64 {
        self.0
    }

    pub fn as_millis(self) -> u64 {
        self.0 / 1000
    }

    /// Time elapsed since `earlier`, zero if `earlier` is later (never panics).
    pub fn since(self, earlier: MonoTime) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }

    pub fn plus(self, d: Duration) -> MonoTime {
        MonoTime(self.0.saturating_add(d.as_micros().min(u64::MAX as u128) as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_saturates_and_plus_adds() {
        let a = MonoTime::from_millis(10);
        let b = a.plus(Duration::from_millis(5));
        assert_eq!(b.as_millis(), 15);
        assert_eq!(b.since(a), Duration::from_millis(5));
        assert_eq!(a.since(b), Duration::ZERO);
    }
}
