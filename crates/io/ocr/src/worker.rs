//! The OCR worker: one thread owning the OCR engine ([`crate::default_engine`]), fed with copies of changed regions, answering through a
//! channel; results cached by the region's pixel hash so an unchanged region is never read twice.
//! Callers on the reflex thread never block: they get the cached answer or `None` (undefined) while the
//! region's new content is being read.

use crate::prep::region_hash;
use crate::OcrError;
use gamepilot_core::{FrameView, PixelFormat, Point, Rect};
use gamepilot_vision::TextLine;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Text,
    Integer(u32),
}

struct Job {
    key: (u64, Kind),
    w: u32,
    h: u32,
    format: PixelFormat,
    pixels: Vec<u8>,
}

enum Answer {
    Text(Vec<TextLine>),
    Integer(Option<i64>),
}

/// Counters for tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    pub submitted: u64,
    pub completed: u64,
    pub cache_hits: u64,
}

/// An OCR worker thread with a bounded result cache.
pub struct OcrWorker {
    tx: Option<Sender<Job>>,
    rx: Receiver<((u64, Kind), Result<Answer, String>)>,
    handle: Option<JoinHandle<()>>,
    cache: HashMap<(u64, Kind), Answer>,
    order: VecDeque<(u64, Kind)>,
    pending: HashSet<(u64, Kind)>,
    capacity: usize,
    pub stats: WorkerStats,
    last_error: Option<String>,
}

fn crop(view: &FrameView<'_>, r: Rect) -> Vec<u8> {
    let mut out = Vec::with_capacity(r.area() as usize * 4);
    for y in r.y as u32..r.bottom() as u32 {
        let row = view.row(y);
        out.extend_from_slice(row.get(r.x as usize * 4..r.right() as usize * 4).unwrap_or(&[]));
    }
    out
}

impl OcrWorker {
    /// Start the worker thread (the engine is initialised there; an init failure is returned here).
    pub fn spawn() -> Result<OcrWorker, OcrError> {
        let (tx, jobs) = channel::<Job>();
        let (done_tx, rx) = channel();
        let (ready_tx, ready_rx) = channel::<Result<(), OcrError>>();
        let handle = std::thread::Builder::new()
            .name("gamepilot-ocr".into())
            .spawn(move || {
                let mut ocr = match crate::default_engine() {
                    Ok(o) => {
                        let _ = ready_tx.send(Ok(()));
                        o
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                for job in jobs {
                    let answer =
                        match FrameView::new(job.w, job.h, job.w as usize * 4, job.format, &job.pixels) {
                            None => Err("bad crop".to_string()),
                            Some(v) => {
                                let all = v.bounds();
                                match job.key.1 {
                                    Kind::Text => {
                                        ocr.lines(&v, all).map(Answer::Text).map_err(|e| e.to_string())
                                    }
                                    Kind::Integer(d) => ocr
                                        .read_integer(&v, all, d)
                                        .map(Answer::Integer)
                                        .map_err(|e| e.to_string()),
                                }
                            }
                        };
                    if done_tx.send((job.key, answer)).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| OcrError::Engine(format!("cannot start the OCR thread: {e}")))?;
        ready_rx.recv().map_err(|_| OcrError::WorkerGone)??;
        Ok(OcrWorker {
            tx: Some(tx),
            rx,
            handle: Some(handle),
            cache: HashMap::new(),
            order: VecDeque::new(),
            pending: HashSet::new(),
            capacity: 512,
            stats: WorkerStats::default(),
            last_error: None,
        })
    }

    /// Collect finished jobs into the cache (non-blocking).
    pub fn poll(&mut self) {
        while let Ok((key, answer)) = self.rx.try_recv() {
            self.pending.remove(&key);
            self.stats.completed += 1;
            match answer {
                Ok(a) => {
                    if self.cache.insert(key, a).is_none() {
                        self.order.push_back(key);
                    }
                    while self.order.len() > self.capacity {
                        if let Some(old) = self.order.pop_front() {
                            self.cache.remove(&old);
                        }
                    }
                }
                Err(e) => self.last_error = Some(e),
            }
        }
    }

    /// The last error a job reported, if any.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    fn request(
        &mut self,
        view: &FrameView<'_>,
        region: Rect,
        kind: Kind,
    ) -> Result<Option<(u64, Kind)>, OcrError> {
        if region.is_empty() || !view.bounds().contains_rect(&region) {
            return Err(OcrError::RegionOutside {
                region,
                width: view.width,
                height: view.height,
            });
        }
        self.poll();
        let key = (region_hash(view, region), kind);
        if self.cache.contains_key(&key) {
            self.stats.cache_hits += 1;
            return Ok(Some(key));
        }
        if !self.pending.contains(&key) {
            let tx = self.tx.as_ref().ok_or(OcrError::WorkerGone)?;
            tx.send(Job {
                key,
                w: region.w,
                h: region.h,
                format: view.format,
                pixels: crop(view, region),
            })
            .map_err(|_| OcrError::WorkerGone)?;
            self.pending.insert(key);
            self.stats.submitted += 1;
        }
        Ok(None)
    }

    /// Text lines of `region` as of its current pixels, or `None` while they are being read.
    pub fn text(&mut self, view: &FrameView<'_>, region: Rect) -> Result<Option<Vec<TextLine>>, OcrError> {
        let Some(key) = self.request(view, region, Kind::Text)? else {
            return Ok(None);
        };
        let off = Point::new(region.x, region.y);
        Ok(match self.cache.get(&key) {
            Some(Answer::Text(lines)) => Some(lines.iter().map(|l| translate(l, off)).collect()),
            _ => None,
        })
    }

    /// `region_integer`: the integer in `region` as of its current pixels; `None` (undefined) while the
    /// new content is not yet read or when nothing confident was read — never a stale number, never zero.
    pub fn integer(
        &mut self,
        view: &FrameView<'_>,
        region: Rect,
        digits: u32,
    ) -> Result<Option<i64>, OcrError> {
        let Some(key) = self.request(view, region, Kind::Integer(digits))? else {
            return Ok(None);
        };
        Ok(match self.cache.get(&key) {
            Some(Answer::Integer(v)) => *v,
            _ => None,
        })
    }

    /// Jobs sent but not yet answered.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Wait (for tests and the CLI) until every pending job is answered or `timeout` passes.
    pub fn wait_idle(&mut self, timeout: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            self.poll();
            if self.pending.is_empty() {
                return true;
            }
            if std::time::Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

fn translate(l: &TextLine, off: Point) -> TextLine {
    let mv = |r: Rect| Rect::new(r.x + off.x, r.y + off.y, r.w, r.h);
    TextLine {
        text: l.text.clone(),
        bbox: mv(l.bbox),
        confidence: l.confidence,
        words: l
            .words
            .iter()
            .map(|w| gamepilot_vision::TextWord {
                text: w.text.clone(),
                bbox: mv(w.bbox),
                confidence: w.confidence,
            })
            .collect(),
    }
}

impl Drop for OcrWorker {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
