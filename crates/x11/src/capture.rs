//! Window capture through Composite (`NameWindowPixmap`, so a covered window still captures whole) and
//! MIT-SHM (no socket copy), falling back to plain GetImage when SHM is unavailable.
//!
//! The reflex tick never reads back the full frame (NFR-PERC-002): [`WindowCapturer::capture_thumbnail`]
//! scales the window pixmap on the server with a RENDER transform and reads only the small result, and
//! [`WindowCapturer::capture_region`] reads just the rectangles that declared sensors cover.

use crate::conn::X11;
use crate::error::X11Error;
use crate::windows::gone_or;
use gamepilot_core::{Frame, MonoTime, PixelFormat};
use memmap2::MmapMut;
use std::os::fd::{FromRawFd, OwnedFd};
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

/// Captures one window repeatedly. Re-names the window pixmap when the window's size changes.
pub struct WindowCapturer {
    window: Window,
    pixmap: Option<(Pixmap, u16, u16)>,
    shm: Option<ShmBuffer>,
    use_shm: bool,
    use_composite: bool,
    scaler: Option<Scaler>,
    /// `None` until tried; `Some(false)` when RENDER scaling is unavailable (decimated fallback).
    render_ok: Option<bool>,
    region_shm: Option<ShmBuffer>,
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
            render_ok: None,
            region_shm: None,
        })
    }

    pub fn window(&self) -> Window {
        self.window
    }

    /// Capture the window's client area at full resolution as a BGRX frame.
    pub fn capture(&mut self, x11: &X11, now: MonoTime) -> Result<Frame, X11Error> {
        let geo = x11
            .conn
            .get_geometry(self.window)?
            .reply()
            .map_err(|e| gone_or(e, self.window))?;
        if !x11.is_mapped(self.window)? {
            return Err(X11Error::Unmapped { window: self.window });
        }
        let (w, h) = (geo.width, geo.height);
        let drawable = self.drawable(x11, w, h)?;
        let len = w as usize * h as usize * 4;
        if self.use_shm {
            match self.capture_shm(x11, drawable, w, h, len) {
                Ok(data) => {
                    return Ok(Frame {
                        width: w as u32,
                        height: h as u32,
                        stride: w as usize * 4,
                        format: PixelFormat::Bgrx,
                        data,
                        captured_at: now,
                    })
                }
                Err(e) if e.is_window_gone() => return Err(e),
                Err(_) => self.use_shm = false,
            }
        }
        let r = x11
            .conn
            .get_image(ImageFormat::Z_PIXMAP, drawable, 0, 0, w, h, !0)?
            .reply()
            .map_err(|e| gone_or(e, self.window))?;
        let mut data = r.data;
        data.truncate(len);
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
        let geo = x11
            .conn
            .get_geometry(self.window)?
            .reply()
            .map_err(|e| gone_or(e, self.window))?;
        let r = x11
            .conn
            .get_image(
                ImageFormat::Z_PIXMAP,
                self.window,
                0,
                0,
                geo.width,
                geo.height,
                !0,
            )?
            .reply()
            .map_err(|e| gone_or(e, self.window))?;
        let mut data = r.data;
        data.truncate(geo.width as usize * geo.height as usize * 4);
        Ok(Frame {
            width: geo.width as u32,
            height: geo.height as u32,
            stride: geo.width as usize * 4,
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
    /// (NFR-PERC-002). Without RENDER it falls back to a full read decimated here, and says so through
    /// [`WindowCapturer::thumbnail_server_scaled`].
    pub fn capture_thumbnail(&mut self, x11: &X11, max_w: u16, now: MonoTime) -> Result<Frame, X11Error> {
        let geo = x11
            .conn
            .get_geometry(self.window)?
            .reply()
            .map_err(|e| gone_or(e, self.window))?;
        if !x11.is_mapped(self.window)? {
            return Err(X11Error::Unmapped { window: self.window });
        }
        let (w, h) = (geo.width, geo.height);
        let (tw, th) = thumbnail_size(w, h, max_w);
        if self.render_ok != Some(false) && self.use_composite && self.use_shm {
            let src = self.drawable(x11, w, h)?;
            match self.scaled_read(x11, src, geo.depth, (w, h), (tw, th)) {
                Ok(data) => {
                    self.render_ok = Some(true);
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
                    self.render_ok = Some(false);
                }
            }
        }
        let full = self.capture(x11, now)?;
        Ok(decimate(&full, tw, th))
    }

    /// True when thumbnails are scaled by the server (the cheap path); false after a fallback.
    pub fn thumbnail_server_scaled(&self) -> bool {
        self.render_ok != Some(false) && self.use_composite && self.use_shm
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
    /// covers, or what OCR needs. The rectangle must lie inside the window.
    pub fn capture_region(
        &mut self,
        x11: &X11,
        region: gamepilot_core::Rect,
        now: MonoTime,
    ) -> Result<Frame, X11Error> {
        let geo = x11
            .conn
            .get_geometry(self.window)?
            .reply()
            .map_err(|e| gone_or(e, self.window))?;
        let bounds = gamepilot_core::Rect::new(0, 0, geo.width as u32, geo.height as u32);
        if region.is_empty() || !bounds.contains_rect(&region) {
            return Err(X11Error::RegionOutside {
                region,
                width: geo.width as u32,
                height: geo.height as u32,
            });
        }
        if !x11.is_mapped(self.window)? {
            return Err(X11Error::Unmapped { window: self.window });
        }
        let drawable = self.drawable(x11, geo.width, geo.height)?;
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
        if self.use_shm {
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
            if let Some(shm) = self.region_shm.as_ref() {
                x11.conn
                    .shm_get_image(drawable, x, y, w, h, !0, ImageFormat::Z_PIXMAP.into(), shm.seg, 0)?
                    .reply()
                    .map_err(|e| gone_or(e, self.window))?;
                return Ok(frame(shm.map[..len].to_vec()));
            }
        }
        let r = x11
            .conn
            .get_image(ImageFormat::Z_PIXMAP, drawable, x, y, w, h, !0)?
            .reply()
            .map_err(|e| gone_or(e, self.window))?;
        let mut data = r.data;
        data.truncate(len);
        Ok(frame(data))
    }
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
