//! Window capture through Composite (`NameWindowPixmap`, so a covered window still captures whole) and
//! MIT-SHM (no socket copy), falling back to plain GetImage when SHM is unavailable.

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

/// Captures one window repeatedly. Re-names the window pixmap when the window's size changes.
pub struct WindowCapturer {
    window: Window,
    pixmap: Option<(Pixmap, u16, u16)>,
    shm: Option<ShmBuffer>,
    use_shm: bool,
    use_composite: bool,
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
        Ok(WindowCapturer { window, pixmap: None, shm: None, use_shm: ext.shm, use_composite: ext.composite })
    }

    pub fn window(&self) -> Window {
        self.window
    }

    /// Capture the window's client area at full resolution as a BGRX frame.
    pub fn capture(&mut self, x11: &X11, now: MonoTime) -> Result<Frame, X11Error> {
        let geo = x11.conn.get_geometry(self.window)?.reply().map_err(|e| gone_or(e, self.window))?;
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
        Ok(Frame { width: w as u32, height: h as u32, stride: w as usize * 4, format: PixelFormat::Bgrx, data, captured_at: now })
    }

    /// Capture with plain GetImage on the window itself (the obvious alternative, kept for benchmarks).
    pub fn capture_plain_getimage(&self, x11: &X11, now: MonoTime) -> Result<Frame, X11Error> {
        let geo = x11.conn.get_geometry(self.window)?.reply().map_err(|e| gone_or(e, self.window))?;
        let r = x11
            .conn
            .get_image(ImageFormat::Z_PIXMAP, self.window, 0, 0, geo.width, geo.height, !0)?
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
                x11.conn.composite_name_window_pixmap(self.window, p)?.check().map_err(|e| gone_or(e, self.window))?;
                self.pixmap = Some((p, w, h));
                Ok(p)
            }
        }
    }

    fn capture_shm(&mut self, x11: &X11, drawable: u32, w: u16, h: u16, len: usize) -> Result<Vec<u8>, X11Error> {
        if self.shm.as_ref().map(|s| s.map.len() < len).unwrap_or(true) {
            if let Some(old) = self.shm.take() {
                let _ = x11.conn.shm_detach(old.seg);
            }
            self.shm = Some(ShmBuffer::new(x11, len)?);
        }
        let shm = self.shm.as_ref().ok_or_else(|| X11Error::Shm("no segment".into()))?;
        x11.conn
            .shm_get_image(drawable, 0, 0, w, h, !0, ImageFormat::Z_PIXMAP.into(), shm.seg, 0)?
            .reply()
            .map_err(|e| gone_or(e, self.window))?;
        Ok(shm.map[..len].to_vec())
    }

    /// Release server-side resources.
    pub fn close(mut self, x11: &X11) {
        if let Some((p, _, _)) = self.pixmap.take() {
            let _ = x11.conn.free_pixmap(p);
        }
        if let Some(s) = self.shm.take() {
            let _ = x11.conn.shm_detach(s.seg);
        }
        let _ = x11.conn.flush();
    }
}

impl ShmBuffer {
    fn new(x11: &X11, len: usize) -> Result<ShmBuffer, X11Error> {
        // SAFETY: memfd_create with a valid NUL-terminated name; the returned fd is owned below.
        let fd = unsafe { libc::memfd_create(c"gamepilot-capture".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(X11Error::Shm(format!("memfd_create: {}", std::io::Error::last_os_error())));
        }
        // SAFETY: fd is a fresh, valid descriptor that nothing else owns.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        let file = std::fs::File::from(owned);
        file.set_len(len as u64).map_err(|e| X11Error::Shm(format!("ftruncate: {e}")))?;
        // SAFETY: the memfd is private to this process and the X server, which only writes into it on request.
        let map = unsafe { MmapMut::map_mut(&file) }.map_err(|e| X11Error::Shm(format!("mmap: {e}")))?;
        let seg = x11.conn.generate_id()?;
        let dup = file.try_clone().map_err(|e| X11Error::Shm(format!("dup: {e}")))?;
        x11.conn.shm_attach_fd(seg, OwnedFd::from(dup), false)?.check()?;
        Ok(ShmBuffer { seg, map })
    }
}
