//! Digit recognition for `region_integer` without blocking: a cache keyed by the region's pixel content and
//! a queue of requests that an off-thread worker (in the binary) fulfils.
//!
//! The evaluator only looks up the cache. A region whose current content has not been read yet is
//! undefined (never the stale number, never zero) and a request carrying a copy of its pixels is queued.

use crate::pixels::region_hash;
use gamepilot_core::{Frame, FrameView, MonoTime, PixelFormat, Rect};
use std::collections::{HashMap, HashSet, VecDeque};

/// Reads an integer from a region of a frame. Implemented by the OCR edge (tesseract); synchronous.
pub trait DigitReader {
    /// The integer shown in `region` of `view`, or `None` when no digits can be read.
    /// `digits` is the most digits the number may have (a hint; longer readings are rejected anyway).
    fn read_integer(&mut self, view: FrameView<'_>, region: Rect, digits: Option<u32>) -> Option<i64>;
}

/// Identifies one region content: a hash of its pixels, its size and the digits hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecognitionKey {
    pub hash: u64,
    pub width: u32,
    pub height: u32,
    pub digits: Option<u32>,
}

/// A region's pixels to be read off the reflex thread.
#[derive(Debug, Clone)]
pub struct RecognitionRequest {
    pub key: RecognitionKey,
    /// An owned copy of the region (tightly packed, same pixel format as the frame).
    pub crop: Frame,
    pub digits: Option<u32>,
}

impl RecognitionRequest {
    /// Read this request with `reader` (what the worker does).
    pub fn read_with(&self, reader: &mut dyn DigitReader) -> Option<i64> {
        let v = self.crop.view();
        let bounds = v.bounds();
        reader.read_integer(v, bounds, self.digits)
    }
}

/// The state of one lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// This content has been read: the number, or `None` when it had no readable digits.
    Read(Option<i64>),
    /// Not read yet; a request is queued (or already pending).
    Pending,
    /// The region is not wholly inside the frame; nothing to read.
    OutOfFrame,
}

/// Readings a default cache keeps (oldest reading forgotten first; it is read again if it comes back).
pub const DEFAULT_CACHED_READINGS: usize = 512;
/// Requests a default cache queues for the worker (oldest request dropped first, counted in
/// [`RecognitionCache::dropped`], and asked for again on the next lookup of that content).
pub const DEFAULT_QUEUED_REQUESTS: usize = 32;
/// Pending marks (queued, or handed to the worker and not yet answered) kept per queued request: at
/// most `PENDING_PER_QUEUED × max_queue`. Past it, the marks of requests the worker holds are forgotten
/// (a worker that stopped answering cannot grow the set over an hour); their content is asked for
/// again on its next lookup, and a late answer still lands in the cache.
pub const PENDING_PER_QUEUED: usize = 4;

/// The recognition cache and its request queue. Pure: no threads; the binary's worker drains requests
/// with [`RecognitionCache::take_requests`] and returns readings with [`RecognitionCache::fulfil`].
/// Everything in it is bounded: readings by `capacity`, queued requests by `max_queue`, pending marks
/// by [`PENDING_PER_QUEUED`] × `max_queue`.
#[derive(Debug, Clone)]
pub struct RecognitionCache {
    results: HashMap<RecognitionKey, Option<i64>>,
    order: VecDeque<RecognitionKey>,
    capacity: usize,
    pending: HashSet<RecognitionKey>,
    queue: VecDeque<RecognitionRequest>,
    max_queue: usize,
    dropped: u64,
}

impl Default for RecognitionCache {
    fn default() -> Self {
        RecognitionCache::new(DEFAULT_CACHED_READINGS, DEFAULT_QUEUED_REQUESTS)
    }
}

impl RecognitionCache {
    /// A cache of at most `capacity` readings and at most `max_queue` queued requests (oldest dropped).
    pub fn new(capacity: usize, max_queue: usize) -> Self {
        RecognitionCache {
            results: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            pending: HashSet::new(),
            queue: VecDeque::new(),
            max_queue: max_queue.max(1),
            dropped: 0,
        }
    }

    /// Look up the current content of `region`; queue a request when it has not been read.
    pub fn lookup(&mut self, view: &FrameView<'_>, region: Rect, digits: Option<u32>) -> Lookup {
        let Some(hash) = region_hash(view, region) else {
            return Lookup::OutOfFrame;
        };
        let key = RecognitionKey {
            hash,
            width: region.w,
            height: region.h,
            digits,
        };
        if let Some(r) = self.results.get(&key) {
            return Lookup::Read(*r);
        }
        if !self.pending.contains(&key) && self.pending.len() >= self.max_queue * PENDING_PER_QUEUED {
            let queue = &self.queue;
            self.pending.retain(|k| queue.iter().any(|q| q.key == *k));
        }
        if self.pending.insert(key) {
            if self.queue.len() >= self.max_queue {
                if let Some(old) = self.queue.pop_front() {
                    self.pending.remove(&old.key);
                    self.dropped += 1;
                }
            }
            self.queue.push_back(RecognitionRequest {
                key,
                crop: crop(view, region),
                digits,
            });
        }
        Lookup::Pending
    }

    /// Take every queued request (for the worker). They stay pending until fulfilled.
    pub fn take_requests(&mut self) -> Vec<RecognitionRequest> {
        self.queue.drain(..).collect()
    }

    /// Record a reading for `key` (the worker's answer).
    pub fn fulfil(&mut self, key: RecognitionKey, reading: Option<i64>) {
        self.pending.remove(&key);
        if self.results.insert(key, reading).is_none() {
            self.order.push_back(key);
            while self.order.len() > self.capacity {
                if let Some(old) = self.order.pop_front() {
                    self.results.remove(&old);
                }
            }
        }
    }

    /// Forget that a request is in flight (the worker lost it), so the next lookup queues it again.
    pub fn abandon(&mut self, key: RecognitionKey) {
        self.pending.remove(&key);
    }

    /// Read every queued request now with `reader` (the CLI waits for recognition this way).
    pub fn fulfil_all_with(&mut self, reader: &mut dyn DigitReader) -> usize {
        let reqs = self.take_requests();
        for r in &reqs {
            let v = r.read_with(reader);
            self.fulfil(r.key, v);
        }
        reqs.len()
    }

    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    pub fn cached(&self) -> usize {
        self.results.len()
    }

    /// Requests dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// Copy `region` (inside the frame) into a tightly packed frame of the same format.
fn crop(view: &FrameView<'_>, region: Rect) -> Frame {
    let mut data = Vec::with_capacity(region.area() as usize * 4);
    let (x0, x1) = (region.x as usize * 4, (region.x as usize + region.w as usize) * 4);
    for y in region.y as u32..region.y as u32 + region.h {
        match view.row(y).get(x0..x1) {
            Some(px) => data.extend_from_slice(px),
            None => data.resize(data.len() + (x1 - x0), 0),
        }
    }
    let format: PixelFormat = view.format;
    Frame {
        width: region.w,
        height: region.h,
        stride: region.w as usize * 4,
        format,
        data,
        captured_at: MonoTime::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test double: reads the region's mean red channel as the number (enough to prove the plumbing).
    struct MeanRed(u32);
    impl DigitReader for MeanRed {
        fn read_integer(&mut self, view: FrameView<'_>, region: Rect, _digits: Option<u32>) -> Option<i64> {
            self.0 += 1;
            let mut sum = 0u64;
            for y in region.y as u32..region.y as u32 + region.h {
                for x in region.x as u32..region.x as u32 + region.w {
                    sum += view.rgb(x, y)[0] as u64;
                }
            }
            let m = sum / region.area();
            (m > 0).then_some(m as i64)
        }
    }

    fn frame(v: u8) -> Vec<u8> {
        [v, 0, 0, 255].repeat(8 * 4)
    }

    #[test]
    fn unread_content_is_pending_then_read_and_changes_are_pending_again() {
        // FR-PERC-008: region_integer never blocks; undefined while unread, never the stale number.
        let mut c = RecognitionCache::new(8, 4);
        let a = frame(7);
        let va = FrameView::new(8, 4, 32, PixelFormat::Rgba, &a).unwrap();
        let r = Rect::new(1, 1, 4, 2);
        assert_eq!(c.lookup(&va, r, None), Lookup::Pending);
        assert_eq!(c.lookup(&va, r, None), Lookup::Pending);
        assert_eq!(c.queued(), 1, "one request per content");
        let mut reader = MeanRed(0);
        assert_eq!(c.fulfil_all_with(&mut reader), 1);
        assert_eq!(c.lookup(&va, r, None), Lookup::Read(Some(7)));
        let b = frame(9);
        let vb = FrameView::new(8, 4, 32, PixelFormat::Rgba, &b).unwrap();
        assert_eq!(
            c.lookup(&vb, r, None),
            Lookup::Pending,
            "changed content is not the stale 7"
        );
        c.fulfil_all_with(&mut reader);
        assert_eq!(c.lookup(&vb, r, None), Lookup::Read(Some(9)));
        assert_eq!(
            c.lookup(&va, r, None),
            Lookup::Read(Some(7)),
            "old content still cached"
        );
        assert_eq!(reader.0, 2);
        let z = frame(0);
        let vz = FrameView::new(8, 4, 32, PixelFormat::Rgba, &z).unwrap();
        c.lookup(&vz, r, None);
        c.fulfil_all_with(&mut reader);
        assert_eq!(
            c.lookup(&vz, r, None),
            Lookup::Read(None),
            "no digits is not zero"
        );
        assert_eq!(c.lookup(&vz, Rect::new(6, 0, 4, 4), None), Lookup::OutOfFrame);
    }

    /// Distinct 8×4 contents: frame `i` has red `i % 256` and green `i / 256`.
    fn distinct(i: usize) -> Vec<u8> {
        [(i % 256) as u8, (i / 256) as u8, 0, 255].repeat(8 * 4)
    }

    #[test]
    fn default_bounds_hold_past_an_hour_of_new_contents() {
        // FR-PERC-008: a counter that changes every tick for an hour at 60 Hz would be
        // 216 000 contents (here four times the cache bound); the default cache holds DEFAULT_CACHED_READINGS readings and
        // DEFAULT_QUEUED_REQUESTS requests (oldest dropped), whatever the worker does.
        let mut c = RecognitionCache::default();
        let r = Rect::new(0, 0, 8, 4);
        let n = 4 * DEFAULT_CACHED_READINGS;
        for i in 0..n {
            let f = distinct(i);
            let v = FrameView::new(8, 4, 32, PixelFormat::Rgba, &f).unwrap();
            assert_eq!(c.lookup(&v, r, None), Lookup::Pending);
            assert!(c.queued() <= DEFAULT_QUEUED_REQUESTS);
            // The worker answers every second tick's requests.
            if i % 2 == 1 {
                for q in c.take_requests() {
                    c.fulfil(q.key, Some(i as i64));
                }
            }
            assert!(c.cached() <= DEFAULT_CACHED_READINGS);
        }
        assert_eq!(
            c.cached(),
            DEFAULT_CACHED_READINGS,
            "oldest readings forgotten, newest kept"
        );
        let newest = distinct(n - 1);
        let v = FrameView::new(8, 4, 32, PixelFormat::Rgba, &newest).unwrap();
        assert!(matches!(c.lookup(&v, r, None), Lookup::Read(Some(_))));
        let oldest = distinct(0);
        let v = FrameView::new(8, 4, 32, PixelFormat::Rgba, &oldest).unwrap();
        assert_eq!(c.lookup(&v, r, None), Lookup::Pending, "forgotten: read again");
    }

    #[test]
    fn pending_marks_are_bounded_when_the_worker_never_answers() {
        // Requests handed to a worker that never answers (nor abandons) do not grow the
        // pending set past PENDING_PER_QUEUED × max_queue; late answers still land.
        let mut c = RecognitionCache::new(16, 2);
        let r = Rect::new(0, 0, 8, 4);
        let bound = 2 * PENDING_PER_QUEUED;
        let mut taken = Vec::new();
        for i in 0..200 {
            let f = distinct(i);
            let v = FrameView::new(8, 4, 32, PixelFormat::Rgba, &f).unwrap();
            assert_eq!(c.lookup(&v, r, None), Lookup::Pending);
            taken.extend(c.take_requests());
            assert!(c.pending() <= bound, "{} pending after {i}", c.pending());
        }
        assert_eq!(taken.len(), 200, "every content was requested once");
        // A late answer for a forgotten mark is still a reading.
        c.fulfil(taken[0].key, Some(42));
        let f = distinct(0);
        let v = FrameView::new(8, 4, 32, PixelFormat::Rgba, &f).unwrap();
        assert_eq!(c.lookup(&v, r, None), Lookup::Read(Some(42)));
        // Queued (not yet taken) requests keep their marks: no duplicate request while one waits.
        for i in 300..302 {
            let f = distinct(i);
            let v = FrameView::new(8, 4, 32, PixelFormat::Rgba, &f).unwrap();
            c.lookup(&v, r, None);
            c.lookup(&v, r, None);
        }
        assert_eq!(c.queued(), 2);
    }

    #[test]
    fn queue_and_cache_are_bounded() {
        // Oldest request dropped (counted), oldest reading forgotten.
        let mut c = RecognitionCache::new(2, 2);
        let frames: Vec<Vec<u8>> = (1..=5).map(frame).collect();
        let r = Rect::new(0, 0, 8, 4);
        for f in &frames {
            let v = FrameView::new(8, 4, 32, PixelFormat::Rgba, f).unwrap();
            assert_eq!(c.lookup(&v, r, Some(3)), Lookup::Pending);
        }
        assert_eq!(c.queued(), 2);
        assert_eq!(c.dropped(), 3);
        assert_eq!(c.pending(), 2);
        let reqs = c.take_requests();
        assert_eq!(reqs[0].crop.width, 8);
        for (i, q) in reqs.iter().enumerate() {
            c.fulfil(q.key, Some(i as i64));
        }
        c.fulfil(
            RecognitionKey {
                hash: 1,
                width: 1,
                height: 1,
                digits: None,
            },
            Some(1),
        );
        assert_eq!(c.cached(), 2);
        // A dropped request is queued again on the next lookup.
        let v = FrameView::new(8, 4, 32, PixelFormat::Rgba, &frames[0]).unwrap();
        assert_eq!(c.lookup(&v, r, Some(3)), Lookup::Pending);
        assert_eq!(c.queued(), 1);
    }
}
