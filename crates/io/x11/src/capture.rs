//! Window capture through Composite (`NameWindowPixmap`, so a covered window still captures whole) and
//! MIT-SHM (no socket copy), falling back to plain GetImage when SHM is unavailable.
//!
//! A fast path that fails (an SHM read, the RENDER scaler) is not given up for the session: the frame is
//! taken on the slow path and the fast path is tried again after a back-off ([`FastPathBackoff`], 1 s
//! doubling to 30 s, reset on success), timed by the `now` each capture is given, never by a clock read
//! (so a fast path that keeps failing costs a bounded share of an hour's captures).
//! [`WindowCapturer::stats`] says which path the last frame took and how often the fast paths failed. A
//! zero-area window is [`X11Error::EmptyWindow`].
//!
//! The reflex tick never reads back the full frame (NFR-PERC-002): [`WindowCapturer::capture_thumbnail`]
//! scales the window pixmap on the server with a RENDER transform and reads only the small result, and
//! [`WindowCapturer::capture_region`] reads just the rectangles that declared sensors cover.

use crate::conn::X11;
use crate::error::X11Error;
use crate::family::FamilyMember;
use crate::windows::gone_or;
use gamepilot_core::{Frame, LayerRegion, MonoTime, PixelFormat, Rect};
use memmap2::MmapMut;
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Duration;
use x11rb::connection::Connection;
use x11rb::protocol::composite::{ConnectionExt as _, Redirect};
use x11rb::protocol::shm::ConnectionExt as _;
use x11rb::protocol::xproto::{ConnectionExt as _, ImageFormat, Pixmap, Window};

struct ShmBuffer {
    seg: u32,
    map: MmapMut,
}

/// Server-side scaler: the window pixmap as a RENDER picture with a scaling transform, composited into
/// a small pixmap that is then read with SHM.
struct Scaler {
    src_pixmap: Pixmap,
    src_pic: u32,
    dst_pix: Pixmap,
    dst_pic: u32,
    dst: (u16, u16),
    shm: Option<ShmBuffer>,
}

/// First wait before a failed fast path is tried again.
pub const FAST_PATH_BACKOFF_MIN: Duration = Duration::from_secs(1);
/// Longest wait between tries of a failing fast path: one slow-path hour costs at most 120 retries.
pub const FAST_PATH_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// When to try a fast capture path again after it failed: at once until the first failure, then after
/// [`FAST_PATH_BACKOFF_MIN`], doubling on every further failure up to [`FAST_PATH_BACKOFF_MAX`]; a
/// success resets it. Pure: time comes in as `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastPathBackoff {
    retry_at: Option<MonoTime>,
    next_delay: Duration,
    consecutive: u32,
    failures: u64,
}

impl Default for FastPathBackoff {
    fn default() -> Self {
        FastPathBackoff::new()
    }
}

impl FastPathBackoff {
    pub fn new() -> Self {
        FastPathBackoff {
            retry_at: None,
            next_delay: FAST_PATH_BACKOFF_MIN,
            consecutive: 0,
            failures: 0,
        }
    }

    /// True when the fast path may be tried at `now`: never failed, succeeded since, or the wait passed.
    pub fn should_try_fast(&self, now: MonoTime) -> bool {
        self.retry_at.is_none_or(|t| now >= t)
    }

    /// The fast path failed at `now`: take the slow path until the returned wait has passed.
    pub fn on_failure(&mut self, now: MonoTime) -> Duration {
        let wait = self.next_delay;
        self.retry_at = Some(now.plus(wait));
        self.next_delay = (wait * 2).min(FAST_PATH_BACKOFF_MAX);
        self.consecutive = self.consecutive.saturating_add(1);
        self.failures = self.failures.saturating_add(1);
        wait
    }

    /// The fast path worked: no wait, and the next failure starts again from the shortest wait.
    pub fn on_success(&mut self) {
        self.retry_at = None;
        self.next_delay = FAST_PATH_BACKOFF_MIN;
        self.consecutive = 0;
    }

    /// When the fast path is next tried (`None`: at once).
    pub fn retry_at(&self) -> Option<MonoTime> {
        self.retry_at
    }

    /// Failures since the last success.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive
    }

    /// Failures over the capturer's life.
    pub fn failures(&self) -> u64 {
        self.failures
    }
}

/// How a full-resolution or region frame was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CapturePath {
    /// MIT-SHM: the server wrote into shared memory (the fast path).
    Shm,
    /// Plain GetImage over the socket (the slow path: no SHM, or SHM backing off after a failure).
    GetImage,
}

/// How a thumbnail was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ThumbnailPath {
    /// RENDER scaled it on the server and only the thumbnail was read (the fast path, NFR-PERC-002).
    ServerScaled,
    /// A full frame was read and decimated here (no RENDER/Composite/SHM, or the scaler backing off).
    Decimated,
}

/// What [`WindowCapturer::stats`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CaptureStats {
    /// The path of the last full or region frame (`None` before the first).
    pub last_path: Option<CapturePath>,
    /// The path of the last thumbnail (`None` before the first).
    pub last_thumbnail: Option<ThumbnailPath>,
    /// SHM reads that failed (and were taken with GetImage instead), over the capturer's life.
    pub shm_failures: u64,
    /// SHM failures since its last success; non-zero means SHM is backing off.
    pub shm_consecutive_failures: u32,
    /// When SHM is next tried (`None`: on the next capture).
    pub shm_retry_at: Option<MonoTime>,
    /// Server-side scaling attempts that failed (the thumbnail was decimated instead).
    pub scaler_failures: u64,
    pub scaler_consecutive_failures: u32,
    pub scaler_retry_at: Option<MonoTime>,
}

/// The window's size from GetGeometry, or [`X11Error::EmptyWindow`] when it has no area.
///
/// X itself forbids a zero-width or zero-height window (CreateWindow and ConfigureWindow with a 0 side
/// are BadValue), so no test can make a real one; this check is the guard for a server or a geometry
/// reply that reports one anyway, and is tested as a pure function.
pub fn checked_size(window: Window, width: u16, height: u16) -> Result<(u16, u16), X11Error> {
    if width == 0 || height == 0 {
        return Err(X11Error::EmptyWindow {
            window,
            width: width as u32,
            height: height as u32,
        });
    }
    Ok((width, height))
}

/// How long one reading of the game's window family serves thumbnails and regions.
pub const FAMILY_REFRESH: Duration = Duration::from_millis(100);

/// Captures one window repeatedly. Re-names the window pixmap when the window's size changes.
pub struct WindowCapturer {
    window: Window,
    pixmap: Option<(Pixmap, u16, u16)>,
    shm: Option<ShmBuffer>,
    /// The server offers MIT-SHM; whether it is used now is `shm_backoff`'s call.
    use_shm: bool,
    use_composite: bool,
    scaler: Option<Scaler>,
    region_shm: Option<ShmBuffer>,
    shm_backoff: FastPathBackoff,
    scaler_backoff: FastPathBackoff,
    last_path: Option<CapturePath>,
    last_thumbnail: Option<ThumbnailPath>,
    /// The game's popups and dialogs as last read, and when: regions read on the same tick reuse them.
    family: Vec<FamilyMember>,
    family_at: Option<MonoTime>,
    /// Members already redirected off-screen (Composite refuses a second redirect by the same client).
    redirected: Vec<Window>,
}

impl WindowCapturer {
    /// Prepare capture of `window`: redirect it with Composite (automatic, the server keeps painting it).
    pub fn new(x11: &X11, window: Window) -> Result<WindowCapturer, X11Error> {
        let ext = x11.extensions();
        if ext.composite {
            x11.conn.composite_query_version(0, 4)?.reply()?;
            x11.conn.composite_redirect_window(window, Redirect::AUTOMATIC)?;
        }
        if ext.shm {
            x11.conn.shm_query_version()?.reply()?;
        }
        x11.flush()?;
        Ok(WindowCapturer {
            window,
            pixmap: None,
            shm: None,
            use_shm: ext.shm,
            use_composite: ext.composite,
            scaler: None,
            region_shm: None,
            shm_backoff: FastPathBackoff::new(),
            scaler_backoff: FastPathBackoff::new(),
            last_path: None,
            last_thumbnail: None,
            family: Vec::new(),
            family_at: None,
            redirected: Vec::new(),
        })
    }

    pub fn window(&self) -> Window {
        self.window
    }

    /// The path the last full or region frame took (`None` before the first).
    pub fn capture_path(&self) -> Option<CapturePath> {
        self.last_path
    }

    /// Which paths the last frames took and how the fast paths have fared.
    pub fn stats(&self) -> CaptureStats {
        CaptureStats {
            last_path: self.last_path,
            last_thumbnail: self.last_thumbnail,
            shm_failures: self.shm_backoff.failures(),
            shm_consecutive_failures: self.shm_backoff.consecutive_failures(),
            shm_retry_at: self.shm_backoff.retry_at(),
            scaler_failures: self.scaler_backoff.failures(),
            scaler_consecutive_failures: self.scaler_backoff.consecutive_failures(),
            scaler_retry_at: self.scaler_backoff.retry_at(),
        }
    }

    /// GetGeometry of the window: its size, and its depth; a zero-area window is an error.
    fn geometry(&self, x11: &X11) -> Result<(u16, u16, u8), X11Error> {
        let geo = x11
            .conn
            .get_geometry(self.window)?
            .reply()
            .map_err(|e| gone_or(e, self.window))?;
        let (w, h) = checked_size(self.window, geo.width, geo.height)?;
        Ok((w, h, geo.depth))
    }

    /// The SHM read failed (not because the window went): forget its segment, so the retry after the
    /// back-off starts from a fresh one, and take the slow path until then.
    fn shm_failed(&mut self, x11: &X11, region: bool, now: MonoTime) {
        let seg = if region {
            self.region_shm.take()
        } else {
            self.shm.take()
        };
        if let Some(old) = seg {
            let _ = x11.conn.shm_detach(old.seg);
        }
        self.shm_backoff.on_failure(now);
    }

    /// Test support: detach the current SHM segments on the server while this capturer still holds
    /// them, so the next SHM read fails with a real BadShmSeg (the integration test of the back-off).
    #[doc(hidden)]
    pub fn detach_shm_for_test(&mut self, x11: &X11) -> Result<(), X11Error> {
        for s in [self.shm.as_ref(), self.region_shm.as_ref()]
            .into_iter()
            .flatten()
        {
            x11.conn.shm_detach(s.seg)?.check()?;
        }
        Ok(())
    }

    /// Capture the window's client area at full resolution as a BGRX frame.
    /// SHM when the server has it and it is not backing off after a failure; otherwise GetImage.
    pub fn capture(&mut self, x11: &X11, now: MonoTime) -> Result<Frame, X11Error> {
        // What a full frame shows is what the model acts on: its family is read afresh.
        self.family_at = None;
        self.capture_composed(x11, now)
    }

    /// [`WindowCapturer::capture`] with the family as last read (within [`FAMILY_REFRESH`]).
    fn capture_composed(&mut self, x11: &X11, now: MonoTime) -> Result<Frame, X11Error> {
        let (w, h, _) = self.geometry(x11)?;
        if !x11.is_mapped(self.window)? {
            return Err(X11Error::Unmapped { window: self.window });
        }
        let drawable = self.drawable(x11, w, h)?;
        let len = w as usize * h as usize * 4;
        if self.use_shm && self.shm_backoff.should_try_fast(now) {
            match self.capture_shm(x11, drawable, w, h, len) {
                Ok(mut data) => {
                    self.shm_backoff.on_success();
                    self.last_path = Some(CapturePath::Shm);
                    self.compose_family(x11, &mut data, Rect::new(0, 0, w as u32, h as u32), now);
                    return Ok(Frame {
                        width: w as u32,
                        height: h as u32,
                        stride: w as usize * 4,
                        format: PixelFormat::Bgrx,
                        data,
                        captured_at: now,
                    });
                }
                Err(e) if e.is_window_gone() => return Err(e),
                Err(_) => self.shm_failed(x11, false, now),
            }
        }
        let r = x11
            .conn
            .get_image(ImageFormat::Z_PIXMAP, drawable, 0, 0, w, h, !0)?
            .reply()
            .map_err(|e| gone_or(e, self.window))?;
        let mut data = r.data;
        data.truncate(len);
        self.last_path = Some(CapturePath::GetImage);
        self.compose_family(x11, &mut data, Rect::new(0, 0, w as u32, h as u32), now);
        Ok(Frame {
            width: w as u32,
            height: h as u32,
            stride: w as usize * 4,
            format: PixelFormat::Bgrx,
            data,
            captured_at: now,
        })
    }

    /// Capture with plain GetImage on the window itself (the obvious alternative, kept for benchmarks).
    pub fn capture_plain_getimage(&self, x11: &X11, now: MonoTime) -> Result<Frame, X11Error> {
        let (w, h, _) = self.geometry(x11)?;
        let r = x11
            .conn
            .get_image(ImageFormat::Z_PIXMAP, self.window, 0, 0, w, h, !0)?
            .reply()
            .map_err(|e| gone_or(e, self.window))?;
        let mut data = r.data;
        data.truncate(w as usize * h as usize * 4);
        Ok(Frame {
            width: w as u32,
            height: h as u32,
            stride: w as usize * 4,
            format: PixelFormat::Bgrx,
            data,
            captured_at: now,
        })
    }

    fn drawable(&mut self, x11: &X11, w: u16, h: u16) -> Result<u32, X11Error> {
        if !self.use_composite {
            return Ok(self.window);
        }
        match self.pixmap {
            Some((p, pw, ph)) if pw == w && ph == h => Ok(p),
            _ => {
                if let Some((p, _, _)) = self.pixmap.take() {
                    let _ = x11.conn.free_pixmap(p);
                }
                let p = x11.conn.generate_id()?;
                x11.conn
                    .composite_name_window_pixmap(self.window, p)?
                    .check()
                    .map_err(|e| gone_or(e, self.window))?;
                self.pixmap = Some((p, w, h));
                Ok(p)
            }
        }
    }

    fn capture_shm(
        &mut self,
        x11: &X11,
        drawable: u32,
        w: u16,
        h: u16,
        len: usize,
    ) -> Result<Vec<u8>, X11Error> {
        if self.shm.as_ref().map(|s| s.map.len() < len).unwrap_or(true) {
            if let Some(old) = self.shm.take() {
                let _ = x11.conn.shm_detach(old.seg);
            }
            self.shm = Some(ShmBuffer::new(x11, len)?);
        }
        let shm = self
            .shm
            .as_ref()
            .ok_or_else(|| X11Error::Shm("no segment".into()))?;
        x11.conn
            .shm_get_image(drawable, 0, 0, w, h, !0, ImageFormat::Z_PIXMAP.into(), shm.seg, 0)?
            .reply()
            .map_err(|e| gone_or(e, self.window))?;
        Ok(shm.map[..len].to_vec())
    }

    /// The game's popups and dialogs the last capture composed, bottom to top.
    pub fn family(&self) -> &[FamilyMember] {
        &self.family
    }

    /// [`WindowCapturer::family`] as the observation's layer regions.
    pub fn layers(&self) -> Vec<LayerRegion> {
        self.family.iter().map(FamilyMember::region).collect()
    }

    /// Read the family again unless it was read less than [`FAMILY_REFRESH`] ago: the reflex's ticks
    /// share one reading (a popup opens on a person's time scale; the reflex's round trips to a busy
    /// server are its own). A failed reading is an empty family: the main window alone.
    fn refresh_family(&mut self, x11: &X11, now: MonoTime) {
        if self
            .family_at
            .is_some_and(|at| now >= at && now.since(at) < FAMILY_REFRESH)
        {
            return;
        }
        self.family_at = Some(now);
        self.family = x11.window_family(self.window).unwrap_or_default();
        self.redirected
            .retain(|w| self.family.iter().any(|m| m.window == *w));
    }

    /// Paint the family's pixels over `data`, which holds `area` of the main window (client
    /// coordinates, 4 bytes a pixel, rows packed), bottom to top. Each member is read from its own
    /// pixmap, so whatever another client stacks above it never enters the frame.
    fn compose_family(&mut self, x11: &X11, data: &mut [u8], area: Rect, now: MonoTime) {
        self.refresh_family(x11, now);
        for i in 0..self.family.len() {
            let m = self.family[i];
            let Some(part) = m.rect.intersection(&area) else {
                continue;
            };
            let Some(pixels) = self.read_member(x11, &m, part) else {
                continue;
            };
            let row = part.w as usize * 4;
            let stride = area.w as usize * 4;
            for y in 0..part.h as usize {
                let dst = (part.y - area.y) as usize + y;
                let at = dst * stride + (part.x - area.x) as usize * 4;
                if let (Some(d), Some(s)) = (data.get_mut(at..at + row), pixels.get(y * row..(y + 1) * row)) {
                    d.copy_from_slice(s);
                }
            }
        }
    }

    /// `part` (main-window coordinates, inside the member's box) of one member, or `None` when it
    /// vanished meanwhile.
    fn read_member(&mut self, x11: &X11, m: &FamilyMember, part: Rect) -> Option<Vec<u8>> {
        let (x, y) = (part.x - m.rect.x + m.offset.x, part.y - m.rect.y + m.offset.y);
        let (w, h) = (part.w as u16, part.h as u16);
        let mut pixmap = None;
        if self.use_composite {
            if !self.redirected.contains(&m.window) {
                // Checked at once: an error left unread would surface on another reader's queue.
                if let Ok(c) = x11.conn.composite_redirect_window(m.window, Redirect::AUTOMATIC) {
                    let _ = c.check();
                }
                self.redirected.push(m.window);
            }
            let p = x11.conn.generate_id().ok()?;
            x11.conn
                .composite_name_window_pixmap(m.window, p)
                .ok()?
                .check()
                .ok()?;
            pixmap = Some(p);
        }
        let drawable = pixmap.unwrap_or(m.window);
        let image = x11
            .conn
            .get_image(ImageFormat::Z_PIXMAP, drawable, x as i16, y as i16, w, h, !0)
            .ok()
            .and_then(|c| c.reply().ok());
        if let Some(p) = pixmap {
            let _ = x11.conn.free_pixmap(p);
        }
        let mut data = image?.data;
        data.truncate(w as usize * h as usize * 4);
        (data.len() == w as usize * h as usize * 4).then_some(data)
    }

    /// Release server-side resources.
    pub fn close(mut self, x11: &X11) {
        self.drop_scaler(x11);
        if let Some(s) = self.region_shm.take() {
            let _ = x11.conn.shm_detach(s.seg);
        }
        if let Some((p, _, _)) = self.pixmap.take() {
            let _ = x11.conn.free_pixmap(p);
        }
        if let Some(s) = self.shm.take() {
            let _ = x11.conn.shm_detach(s.seg);
        }
        let _ = x11.conn.flush();
    }
}

/// Thumbnail size for a `w`×`h` window at most `max_w` wide (aspect kept, at least 1×1).
pub fn thumbnail_size(w: u16, h: u16, max_w: u16) -> (u16, u16) {
    if w == 0 || h == 0 {
        return (0, 0);
    }
    let tw = w.min(max_w.max(1));
    let th = ((h as u32 * tw as u32 + w as u32 / 2) / w as u32).max(1) as u16;
    (tw, th)
}

fn to_fixed(v: f64) -> i32 {
    (v * 65536.0).round() as i32
}

impl WindowCapturer {
    /// A downscaled frame (at most `max_w` pixels wide) for the reflex tick, without a full-resolution
    /// read-back: RENDER scales on the server and only the thumbnail crosses to this process
    /// (NFR-PERC-002). Without RENDER, or while the scaler backs off after a failure, it falls back to a
    /// full read decimated here, and says so through [`WindowCapturer::thumbnail_server_scaled`].
    pub fn capture_thumbnail(&mut self, x11: &X11, max_w: u16, now: MonoTime) -> Result<Frame, X11Error> {
        let (w, h, depth) = self.geometry(x11)?;
        if !x11.is_mapped(self.window)? {
            return Err(X11Error::Unmapped { window: self.window });
        }
        let (tw, th) = thumbnail_size(w, h, max_w);
        // The server scales the main window's pixmap alone: while a popup or dialog is open the
        // thumbnail is the composed frame, decimated here.
        self.refresh_family(x11, now);
        if self.family.is_empty()
            && self.use_composite
            && self.use_shm
            && self.scaler_backoff.should_try_fast(now)
        {
            let src = self.drawable(x11, w, h)?;
            match self.scaled_read(x11, src, depth, (w, h), (tw, th)) {
                Ok(data) => {
                    self.scaler_backoff.on_success();
                    self.last_thumbnail = Some(ThumbnailPath::ServerScaled);
                    return Ok(Frame {
                        width: tw as u32,
                        height: th as u32,
                        stride: tw as usize * 4,
                        format: PixelFormat::Bgrx,
                        data,
                        captured_at: now,
                    });
                }
                Err(e) if e.is_window_gone() => return Err(e),
                Err(_) => {
                    self.drop_scaler(x11);
                    self.scaler_backoff.on_failure(now);
                }
            }
        }
        let full = self.capture_composed(x11, now)?;
        self.last_thumbnail = Some(ThumbnailPath::Decimated);
        Ok(decimate(&full, tw, th))
    }

    /// True when thumbnails are scaled by the server (the cheap path); false without RENDER scaling and
    /// while the scaler backs off after a failure (it is tried again, and true again once it works).
    pub fn thumbnail_server_scaled(&self) -> bool {
        self.use_composite && self.use_shm && self.scaler_backoff.consecutive_failures() == 0
    }

    fn drop_scaler(&mut self, x11: &X11) {
        use x11rb::protocol::render::ConnectionExt as _;
        if let Some(s) = self.scaler.take() {
            let _ = x11.conn.render_free_picture(s.src_pic);
            let _ = x11.conn.render_free_picture(s.dst_pic);
            let _ = x11.conn.free_pixmap(s.dst_pix);
            if let Some(b) = s.shm {
                let _ = x11.conn.shm_detach(b.seg);
            }
        }
    }

    fn scaled_read(
        &mut self,
        x11: &X11,
        src: Pixmap,
        depth: u8,
        size: (u16, u16),
        dst: (u16, u16),
    ) -> Result<Vec<u8>, X11Error> {
        use x11rb::protocol::render::{self, ConnectionExt as _, CreatePictureAux, PictOp, Transform};
        let fresh = !matches!(&self.scaler, Some(s) if s.src_pixmap == src && s.dst == dst);
        if fresh {
            self.drop_scaler(x11);
            let formats = x11.conn.render_query_pict_formats()?.reply()?;
            let format = formats
                .formats
                .iter()
                .find(|f| {
                    f.depth == depth
                        && f.type_ == render::PictType::DIRECT
                        && f.direct.red_mask == 0xff
                        && f.direct.red_shift == 16
                })
                .or_else(|| {
                    formats
                        .formats
                        .iter()
                        .find(|f| f.depth == depth && f.type_ == render::PictType::DIRECT)
                })
                .map(|f| f.id)
                .ok_or(X11Error::MissingExtension(
                    "RENDER (no picture format for the window depth)",
                ))?;
            let src_pic = x11.conn.generate_id()?;
            x11.conn
                .render_create_picture(src_pic, src, format, &CreatePictureAux::new())?
                .check()?;
            let dst_pix = x11.conn.generate_id()?;
            x11.conn
                .create_pixmap(depth, dst_pix, src, dst.0, dst.1)?
                .check()?;
            let dst_pic = x11.conn.generate_id()?;
            x11.conn
                .render_create_picture(dst_pic, dst_pix, format, &CreatePictureAux::new())?
                .check()?;
            let sx = size.0 as f64 / dst.0 as f64;
            let sy = size.1 as f64 / dst.1 as f64;
            let t = Transform {
                matrix11: to_fixed(sx),
                matrix12: 0,
                matrix13: 0,
                matrix21: 0,
                matrix22: to_fixed(sy),
                matrix23: 0,
                matrix31: 0,
                matrix32: 0,
                matrix33: to_fixed(1.0),
            };
            x11.conn.render_set_picture_transform(src_pic, t)?.check()?;
            x11.conn
                .render_set_picture_filter(src_pic, b"bilinear", &[])?
                .check()?;
            let len = dst.0 as usize * dst.1 as usize * 4;
            let shm = ShmBuffer::new(x11, len)?;
            self.scaler = Some(Scaler {
                src_pixmap: src,
                src_pic,
                dst_pix,
                dst_pic,
                dst,
                shm: Some(shm),
            });
        }
        let s = self
            .scaler
            .as_ref()
            .ok_or_else(|| X11Error::Shm("no scaler".into()))?;
        x11.conn.render_composite(
            PictOp::SRC,
            s.src_pic,
            x11rb::NONE,
            s.dst_pic,
            0,
            0,
            0,
            0,
            0,
            0,
            dst.0,
            dst.1,
        )?;
        let shm = s.shm.as_ref().ok_or_else(|| X11Error::Shm("no segment".into()))?;
        let len = dst.0 as usize * dst.1 as usize * 4;
        x11.conn
            .shm_get_image(
                s.dst_pix,
                0,
                0,
                dst.0,
                dst.1,
                !0,
                ImageFormat::Z_PIXMAP.into(),
                shm.seg,
                0,
            )?
            .reply()
            .map_err(|e| gone_or(e, self.window))?;
        Ok(shm.map[..len].to_vec())
    }

    /// Read one rectangle of the window (client coordinates) at full resolution: what a declared sensor
    /// covers, or what OCR needs. The rectangle must lie inside the window and have an area; the window
    /// too ([`X11Error::EmptyWindow`]). SHM backs off after a failure as in [`WindowCapturer::capture`].
    pub fn capture_region(
        &mut self,
        x11: &X11,
        region: gamepilot_core::Rect,
        now: MonoTime,
    ) -> Result<Frame, X11Error> {
        let (gw, gh, _) = self.geometry(x11)?;
        check_region(region, gw, gh)?;
        if !x11.is_mapped(self.window)? {
            return Err(X11Error::Unmapped { window: self.window });
        }
        let drawable = self.drawable(x11, gw, gh)?;
        let (x, y, w, h) = (region.x as i16, region.y as i16, region.w as u16, region.h as u16);
        let len = w as usize * h as usize * 4;
        let frame = |data: Vec<u8>| Frame {
            width: w as u32,
            height: h as u32,
            stride: w as usize * 4,
            format: PixelFormat::Bgrx,
            data,
            captured_at: now,
        };
        if self.use_shm && self.shm_backoff.should_try_fast(now) {
            match self.region_shm_read(x11, drawable, (x, y, w, h), len) {
                Ok(mut data) => {
                    self.shm_backoff.on_success();
                    self.last_path = Some(CapturePath::Shm);
                    self.compose_family(x11, &mut data, region, now);
                    return Ok(frame(data));
                }
                Err(e) if e.is_window_gone() => return Err(e),
                Err(_) => self.shm_failed(x11, true, now),
            }
        }
        let r = x11
            .conn
            .get_image(ImageFormat::Z_PIXMAP, drawable, x, y, w, h, !0)?
            .reply()
            .map_err(|e| gone_or(e, self.window))?;
        let mut data = r.data;
        data.truncate(len);
        self.last_path = Some(CapturePath::GetImage);
        self.compose_family(x11, &mut data, region, now);
        Ok(frame(data))
    }

    fn region_shm_read(
        &mut self,
        x11: &X11,
        drawable: u32,
        (x, y, w, h): (i16, i16, u16, u16),
        len: usize,
    ) -> Result<Vec<u8>, X11Error> {
        if self
            .region_shm
            .as_ref()
            .map(|s| s.map.len() < len)
            .unwrap_or(true)
        {
            if let Some(old) = self.region_shm.take() {
                let _ = x11.conn.shm_detach(old.seg);
            }
            self.region_shm = Some(ShmBuffer::new(x11, len.max(64 * 1024))?);
        }
        let shm = self
            .region_shm
            .as_ref()
            .ok_or_else(|| X11Error::Shm("no region segment".into()))?;
        x11.conn
            .shm_get_image(drawable, x, y, w, h, !0, ImageFormat::Z_PIXMAP.into(), shm.seg, 0)?
            .reply()
            .map_err(|e| gone_or(e, self.window))?;
        Ok(shm.map[..len].to_vec())
    }
}

/// A region to read from a `width`×`height` window: it must have an area ([`X11Error::EmptyRegion`]) and
/// lie wholly inside ([`X11Error::RegionOutside`]). The window's own size is [`checked_size`]'s, first.
pub fn check_region(region: gamepilot_core::Rect, width: u16, height: u16) -> Result<(), X11Error> {
    if region.is_empty() {
        return Err(X11Error::EmptyRegion { region });
    }
    let bounds = gamepilot_core::Rect::new(0, 0, width as u32, height as u32);
    if !bounds.contains_rect(&region) {
        return Err(X11Error::RegionOutside {
            region,
            width: width as u32,
            height: height as u32,
        });
    }
    Ok(())
}

/// Nearest-sample decimation of a full frame to `tw`×`th` (the fallback thumbnail path).
pub fn decimate(full: &Frame, tw: u16, th: u16) -> Frame {
    let (tw, th) = (tw.max(1) as usize, th.max(1) as usize);
    let mut data = Vec::with_capacity(tw * th * 4);
    for ty in 0..th {
        let y = (ty * full.height as usize + full.height as usize / (2 * th)) / th;
        let row = full.view().row(y as u32);
        for tx in 0..tw {
            let x = (tx * full.width as usize + full.width as usize / (2 * tw)) / tw;
            data.extend_from_slice(row.get(x * 4..x * 4 + 4).unwrap_or(&[0, 0, 0, 0]));
        }
    }
    Frame {
        width: tw as u32,
        height: th as u32,
        stride: tw * 4,
        format: full.format,
        data,
        captured_at: full.captured_at,
    }
}

impl ShmBuffer {
    fn new(x11: &X11, len: usize) -> Result<ShmBuffer, X11Error> {
        // SAFETY: memfd_create with a valid NUL-terminated name; the returned fd is owned below.
        let fd = unsafe { libc::memfd_create(c"gamepilot-capture".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(X11Error::Shm(format!(
                "memfd_create: {}",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: fd is a fresh, valid descriptor that nothing else owns.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        let file = std::fs::File::from(owned);
        file.set_len(len as u64)
            .map_err(|e| X11Error::Shm(format!("ftruncate: {e}")))?;
        // SAFETY: the memfd is private to this process and the X server, which only writes into it on request.
        let map = unsafe { MmapMut::map_mut(&file) }.map_err(|e| X11Error::Shm(format!("mmap: {e}")))?;
        let seg = x11.conn.generate_id()?;
        let dup = file.try_clone().map_err(|e| X11Error::Shm(format!("dup: {e}")))?;
        x11.conn.shm_attach_fd(seg, OwnedFd::from(dup), false)?.check()?;
        Ok(ShmBuffer { seg, map })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::Rect;

    fn at(ms: u64) -> MonoTime {
        MonoTime::from_millis(ms)
    }

    #[test]
    fn a_failed_fast_path_is_retried_after_a_doubling_back_off_capped_at_30_s() {
        // FR-PERC-001: one SHM failure no longer means GetImage for the rest of the session.
        let mut b = FastPathBackoff::new();
        assert!(b.should_try_fast(at(0)), "untried: fast");
        let mut now = 0;
        let mut waits = Vec::new();
        for _ in 0..8 {
            let wait = b.on_failure(at(now));
            assert!(!b.should_try_fast(at(now)), "slow path right after a failure");
            let ms = wait.as_millis() as u64;
            assert!(
                !b.should_try_fast(at(now + ms - 1)),
                "slow path until the wait has passed"
            );
            assert!(
                b.should_try_fast(at(now + ms)),
                "fast path tried again once it has"
            );
            waits.push(ms / 1000);
            now += ms;
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!((b.failures(), b.consecutive_failures()), (8, 8));
        assert_eq!(b.retry_at(), Some(at(now)));
        b.on_success();
        assert!(b.should_try_fast(at(now)));
        assert_eq!(
            (b.failures(), b.consecutive_failures(), b.retry_at()),
            (8, 0, None)
        );
        assert_eq!(
            b.on_failure(at(now)),
            FAST_PATH_BACKOFF_MIN,
            "a success resets the wait"
        );
    }

    #[test]
    fn an_hour_of_failures_costs_a_bounded_number_of_fast_path_tries() {
        // Bounded over an hour — a fast path that never works is tried at most every 30 s.
        let mut b = FastPathBackoff::new();
        let mut tries = 0;
        for tick in 0..(3600 * 60u64) {
            let now = MonoTime(tick * 16_667);
            if b.should_try_fast(now) {
                tries += 1;
                b.on_failure(now);
            }
        }
        assert!(tries <= 5 + 3600 / 30, "{tries} tries");
        assert!(
            tries >= 3600 / 30,
            "{tries} tries: the fast path is still retried"
        );
    }

    #[test]
    fn a_zero_area_window_is_a_named_error() {
        // FR-PERC-009. X refuses to create a 0-wide or 0-high window (BadValue), so the
        // geometry check is tested here as a pure function rather than on a real window.
        for (w, h) in [(0, 0), (0, 480), (640, 0)] {
            match checked_size(0x42, w, h) {
                Err(X11Error::EmptyWindow {
                    window,
                    width,
                    height,
                }) => {
                    assert_eq!((window, width, height), (0x42, w as u32, h as u32))
                }
                other => panic!("{w}x{h}: {other:?}"),
            }
        }
        assert_eq!(checked_size(0x42, 1, 1).unwrap(), (1, 1));
        let e = checked_size(0x42, 0, 0).unwrap_err();
        assert!(!e.is_window_gone(), "not a vanished window");
        assert!(e.to_string().contains("no area"), "{e}");
    }

    #[test]
    fn region_checks_name_an_empty_region_and_one_outside() {
        // FR-PERC-008: sensor regions; a zero-area region is its own error, not "outside".
        assert!(matches!(
            check_region(Rect::new(3, 3, 0, 5), 64, 48),
            Err(X11Error::EmptyRegion { .. })
        ));
        assert!(matches!(
            check_region(Rect::new(60, 0, 8, 8), 64, 48),
            Err(X11Error::RegionOutside {
                width: 64,
                height: 48,
                ..
            })
        ));
        assert!(check_region(Rect::new(0, 0, 64, 48), 64, 48).is_ok());
    }
}
