//! Reflex tick start lateness (NFR-ACT-001; decisions.md: p99 ≤ 2 ms) kept in fixed memory over any
//! session length: a log-linear histogram of [`LATENESS_BUCKETS`] counters instead of one sample per tick
//! (an hour at the 240 Hz top cadence would be 864 000 samples).
//!
//! Values below [`EXACT_BELOW_US`] µs are counted exactly; above, each power of two is split into
//! [`SUB_BUCKETS`] buckets, so a percentile is reported to within 1/32 (about 3 %) of the true value,
//! and never below it (a bucket reports its upper end, capped at the largest sample seen). Pure: the
//! caller measures lateness and records it.

/// Values below this many µs have a bucket each.
pub const EXACT_BELOW_US: u64 = 64;
/// Buckets per power of two above [`EXACT_BELOW_US`].
pub const SUB_BUCKETS: u64 = 32;
const SUB_BITS: u32 = 5;
const EXACT_BITS: u32 = 6;
/// Every counter the histogram holds: the whole `u64` range of µs, fixed at creation (15 KiB).
pub const LATENESS_BUCKETS: usize = (EXACT_BELOW_US + (64 - EXACT_BITS as u64) * SUB_BUCKETS) as usize;

/// Start lateness of every tick, as a bounded histogram, with the last and the largest sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatenessHistogram {
    counts: Vec<u64>,
    total: u64,
    last: Option<u64>,
    max: u64,
}

impl Default for LatenessHistogram {
    fn default() -> Self {
        LatenessHistogram::new()
    }
}

fn bucket_of(us: u64) -> usize {
    if us < EXACT_BELOW_US {
        return us as usize;
    }
    let e = 63 - us.leading_zeros(); // >= EXACT_BITS
    let mantissa = (us >> (e - SUB_BITS)) & (SUB_BUCKETS - 1);
    (EXACT_BELOW_US + (e - EXACT_BITS) as u64 * SUB_BUCKETS + mantissa) as usize
}

/// The largest value that falls in bucket `i`.
fn bucket_upper(i: usize) -> u64 {
    let i = i as u64;
    if i < EXACT_BELOW_US {
        return i;
    }
    let e = EXACT_BITS as u64 + (i - EXACT_BELOW_US) / SUB_BUCKETS;
    let mantissa = (i - EXACT_BELOW_US) % SUB_BUCKETS;
    let width_bits = e - SUB_BITS as u64;
    let lower = (SUB_BUCKETS + mantissa) << width_bits;
    lower.saturating_add((1u64 << width_bits) - 1)
}

impl LatenessHistogram {
    pub fn new() -> Self {
        LatenessHistogram {
            counts: vec![0; LATENESS_BUCKETS],
            total: 0,
            last: None,
            max: 0,
        }
    }

    /// Count one tick that started `us` µs after it was scheduled.
    pub fn record(&mut self, us: u64) {
        if let Some(c) = self.counts.get_mut(bucket_of(us)) {
            *c = c.saturating_add(1);
        }
        self.total = self.total.saturating_add(1);
        self.last = Some(us);
        self.max = self.max.max(us);
    }

    /// Ticks counted.
    pub fn len(&self) -> u64 {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The last tick's lateness (`None` before the first).
    pub fn last(&self) -> Option<u64> {
        self.last
    }

    /// The largest lateness seen (0 before the first).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The lateness at quantile `q` (0..=1) of every tick counted, as the sorted sample at index
    /// `⌊(n − 1) · q⌋` would give it, rounded up to its bucket's end: never below it, at most 1/32 above.
    /// 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((self.total - 1) as f64 * q.clamp(0.0, 1.0)) as u64;
        let mut seen = 0u64;
        for (i, c) in self.counts.iter().enumerate() {
            seen = seen.saturating_add(*c);
            if seen > rank {
                return bucket_upper(i).min(self.max);
            }
        }
        self.max
    }

    /// Counters held: always [`LATENESS_BUCKETS`], however many ticks were counted.
    pub fn buckets(&self) -> usize {
        self.counts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(sorted: &[u64], q: f64) -> u64 {
        sorted[((sorted.len() - 1) as f64 * q) as usize]
    }

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut prev = 0;
        for us in [
            0,
            1,
            63,
            64,
            65,
            127,
            128,
            1_000,
            2_000,
            65_535,
            1 << 40,
            u64::MAX,
        ] {
            let b = bucket_of(us);
            assert!(b < LATENESS_BUCKETS, "{us} -> {b}");
            assert!(b >= prev, "monotonic");
            assert!(
                bucket_upper(b) >= us,
                "{us} within bucket {b} (upper {})",
                bucket_upper(b)
            );
            if b > 0 {
                assert!(bucket_upper(b - 1) < us, "{us} not in the bucket below");
            }
            prev = b;
        }
        assert_eq!(bucket_of(u64::MAX), LATENESS_BUCKETS - 1);
    }

    #[test]
    fn an_hour_at_the_top_cadence_stays_in_fixed_memory_and_keeps_its_percentiles() {
        // NFR-ACT-001: 240 Hz × 3600 s of samples in LATENESS_BUCKETS counters; p50/p99
        // within 1/32 above the exact sorted-sample answer, never below it.
        let mut h = LatenessHistogram::new();
        let mut all = Vec::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for i in 0..(240 * 3600u64) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Mostly 0..400 µs, one tick in 200 late by 1..9 ms.
            let us = if i % 200 == 7 { 1_000 + x % 8_000 } else { x % 400 };
            h.record(us);
            all.push(us);
        }
        assert_eq!(h.buckets(), LATENESS_BUCKETS);
        assert_eq!(h.len(), 240 * 3600);
        all.sort_unstable();
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let (got, want) = (h.quantile(q), exact(&all, q));
            assert!(got >= want, "q{q}: {got} < {want}");
            assert!(got <= want + want / 32 + 1, "q{q}: {got} vs {want}");
        }
        assert_eq!(h.quantile(1.0), h.max());
        assert_eq!(h.max(), *all.last().unwrap());
    }

    #[test]
    fn small_values_are_exact_and_empty_is_zero() {
        let mut h = LatenessHistogram::new();
        assert_eq!((h.quantile(0.99), h.last(), h.is_empty()), (0, None, true));
        for us in [5, 3, 9, 1] {
            h.record(us);
        }
        assert_eq!(h.quantile(0.5), 3);
        assert_eq!(h.quantile(1.0), 9);
        assert_eq!(h.last(), Some(1));
    }
}
