//! Software drawing into a BGRX pixel buffer: shapes, text (ab_glyph, DejaVu fonts) and every screen.
//! Drawing depends only on the game state, quantised to whole pixels (see [`ViewKey`]), so an idle game
//! redraws nothing and equal states give equal pictures, pixel for pixel.

use crate::game::{Button, Game, Screen, COINS_PER_ZONE, COIN_R, HAZARD_SIZE, PLAYER_R, WORLD_H, WORLD_W};
use crate::ArenaError;
use ab_glyph::{point, Font, FontArc, GlyphId, PxScale, ScaleFont};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

pub const FONT_DIR: &str = "/usr/share/fonts/truetype/dejavu";
const REGULAR: &str = "DejaVuSans.ttf";
const BOLD: &str = "DejaVuSans-Bold.ttf";

/// Compass scale: pixels per degree of yaw.
const COMPASS_PX_PER_DEG: f64 = 4.0;
const COMPASS_H: i32 = 44;

const ZONE_COLOURS: [u32; 6] = [0x2f5d3a, 0x34507c, 0x6a4a2c, 0x523a70, 0x2c6767, 0x6a2e4c];

/// A glyph's coverage, rasterised once per size (positions are whole pixels, so it never changes).
struct Raster {
    ox: i32,
    oy: i32,
    w: i32,
    h: i32,
    cov: Vec<u8>,
}

type GlyphCache = RefCell<HashMap<(GlyphId, u32), Rc<Option<Raster>>>>;

/// A font with a cache of rasterised glyphs.
pub struct Face {
    font: FontArc,
    cache: GlyphCache,
}

impl Face {
    fn raster(&self, id: GlyphId, size: f32) -> Rc<Option<Raster>> {
        let key = (id, size.to_bits());
        if let Some(r) = self.cache.borrow().get(&key) {
            return Rc::clone(r);
        }
        let glyph = id.with_scale_and_position(PxScale::from(size), point(0.0, 0.0));
        let r = self.font.outline_glyph(glyph).map(|og| {
            let b = og.px_bounds();
            let (w, h) = (b.width() as i32, b.height() as i32);
            let mut cov = vec![0u8; (w.max(0) * h.max(0)) as usize];
            og.draw(|gx, gy, c| {
                let i = (gy as i32 * w + gx as i32) as usize;
                if let Some(p) = cov.get_mut(i) {
                    *p = (c.clamp(0.0, 1.0) * 255.0).round() as u8;
                }
            });
            Raster {
                ox: b.min.x as i32,
                oy: b.min.y as i32,
                w,
                h,
                cov,
            }
        });
        let r = Rc::new(r);
        self.cache.borrow_mut().insert(key, Rc::clone(&r));
        r
    }
}

/// The two fonts the game draws with.
pub struct Fonts {
    pub regular: Face,
    pub bold: Face,
}

impl Fonts {
    /// Load DejaVu Sans (regular and bold) from `dir`.
    pub fn load(dir: &Path) -> Result<Fonts, ArenaError> {
        let load = |name: &str| -> Result<Face, ArenaError> {
            let path = dir.join(name);
            let data = std::fs::read(&path).map_err(|e| ArenaError::Font {
                path: path.display().to_string(),
                reason: format!("{e} (install the fonts-dejavu-core package)"),
            })?;
            let font = FontArc::try_from_vec(data).map_err(|e| ArenaError::Font {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
            Ok(Face {
                font,
                cache: RefCell::new(HashMap::new()),
            })
        };
        Ok(Fonts {
            regular: load(REGULAR)?,
            bold: load(BOLD)?,
        })
    }
}

/// A framebuffer of 0x00RRGGBB pixels: in little-endian memory that is B, G, R, X, the layout of a
/// depth-24 Z_PIXMAP image.
#[derive(Clone, PartialEq, Eq)]
pub struct Canvas {
    pub w: i32,
    pub h: i32,
    pub px: Vec<u32>,
}

fn rgb(c: u32) -> (u8, u8, u8) {
    ((c >> 16) as u8, (c >> 8) as u8, c as u8)
}

fn mix(a: u8, b: u8, t: f32) -> u8 {
    (f32::from(a) + (f32::from(b) - f32::from(a)) * t)
        .round()
        .clamp(0.0, 255.0) as u8
}

fn lighten(c: u32, t: f32) -> u32 {
    let (r, g, b) = rgb(c);
    (u32::from(mix(r, 255, t)) << 16) | (u32::from(mix(g, 255, t)) << 8) | u32::from(mix(b, 255, t))
}

/// `dst` moved `a`/255 of the way to `src`, per channel, in integers.
#[inline]
fn blend_px(dst: u32, src: u32, a: u32) -> u32 {
    let ch = |shift: u32| {
        let d = ((dst >> shift) & 0xff) as i32;
        let s = ((src >> shift) & 0xff) as i32;
        ((d + ((s - d) * a as i32 + if s >= d { 127 } else { -127 }) / 255) as u32 & 0xff) << shift
    };
    ch(16) | ch(8) | ch(0)
}

impl Canvas {
    pub fn new(w: i32, h: i32) -> Canvas {
        Canvas {
            w,
            h,
            px: vec![0; (w.max(0) * h.max(0)) as usize],
        }
    }

    /// The pixel at (x, y) as 0xRRGGBB.
    pub fn get(&self, x: i32, y: i32) -> u32 {
        self.px[(y * self.w + x) as usize]
    }

    /// The pixels as BGRX bytes (what PutImage sends).
    pub fn bgrx(&self) -> &[u8] {
        bytemuck::cast_slice(&self.px)
    }

    /// RGB bytes, row by row (for PNG).
    pub fn to_rgb(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.px.len() * 3);
        for &p in &self.px {
            let (r, g, b) = rgb(p);
            out.extend_from_slice(&[r, g, b]);
        }
        out
    }

    #[inline]
    fn put(&mut self, x: i32, y: i32, c: u32) {
        if x < 0 || y < 0 || x >= self.w || y >= self.h {
            return;
        }
        self.px[(y * self.w + x) as usize] = c;
    }

    /// Blend with coverage `a` in 0..=255.
    #[inline]
    fn blend8(&mut self, x: i32, y: i32, c: u32, a: u32) {
        if x < 0 || y < 0 || x >= self.w || y >= self.h || a == 0 {
            return;
        }
        let i = (y * self.w + x) as usize;
        self.px[i] = if a >= 255 { c } else { blend_px(self.px[i], c, a) };
    }

    #[inline]
    fn blend(&mut self, x: i32, y: i32, c: u32, a: f32) {
        self.blend8(x, y, c, (a.clamp(0.0, 1.0) * 255.0).round() as u32);
    }

    pub fn fill(&mut self, c: u32) {
        self.px.fill(c);
    }

    fn clip(&self, x: i32, y: i32, w: i32, h: i32) -> (i32, i32, i32, i32) {
        (x.max(0), y.max(0), (x + w).min(self.w), (y + h).min(self.h))
    }

    pub fn fill_rect(&mut self, x: i32, y: i32, w: i32, h: i32, c: u32) {
        let (x0, y0, x1, y1) = self.clip(x, y, w, h);
        if x0 >= x1 || y0 >= y1 {
            return;
        }
        for yy in y0..y1 {
            let row = (yy * self.w) as usize;
            self.px[row + x0 as usize..row + x1 as usize].fill(c);
        }
    }

    /// Tint a rectangle: each pixel moves `a` of the way to `c`.
    pub fn blend_rect(&mut self, x: i32, y: i32, w: i32, h: i32, c: u32, a: f32) {
        let a = (a.clamp(0.0, 1.0) * 255.0).round() as u32;
        let (x0, y0, x1, y1) = self.clip(x, y, w, h);
        for yy in y0..y1 {
            for xx in x0..x1 {
                self.blend8(xx, yy, c, a);
            }
        }
    }

    pub fn border(&mut self, x: i32, y: i32, w: i32, h: i32, t: i32, c: u32) {
        self.fill_rect(x, y, w, t, c);
        self.fill_rect(x, y + h - t, w, t, c);
        self.fill_rect(x, y, t, h, c);
        self.fill_rect(x + w - t, y, t, h, c);
    }

    /// A rectangle with rounded corners (radius `r`), antialiased at the corners.
    pub fn fill_round_rect(&mut self, x: i32, y: i32, w: i32, h: i32, r: i32, c: u32) {
        let r = r.min(w / 2).min(h / 2);
        self.fill_rect(x, y + r, w, h - 2 * r, c);
        self.fill_rect(x + r, y, w - 2 * r, r, c);
        self.fill_rect(x + r, y + h - r, w - 2 * r, r, c);
        let (fx, fy, fr) = (f64::from(x), f64::from(y), f64::from(r));
        let (fw, fh) = (f64::from(w), f64::from(h));
        let corners = [
            (x, y, fx + fr, fy + fr),
            (x + w - r, y, fx + fw - fr, fy + fr),
            (x, y + h - r, fx + fr, fy + fh - fr),
            (x + w - r, y + h - r, fx + fw - fr, fy + fh - fr),
        ];
        for (sx, sy, ccx, ccy) in corners {
            for py in sy..sy + r {
                for px in sx..sx + r {
                    let d = (f64::from(px) + 0.5 - ccx).hypot(f64::from(py) + 0.5 - ccy);
                    self.blend(px, py, c, (fr - d + 0.5) as f32);
                }
            }
        }
    }

    /// A filled circle with an antialiased edge.
    pub fn fill_circle(&mut self, cx: f64, cy: f64, r: f64, c: u32) {
        let (x0, x1) = ((cx - r - 1.0).floor() as i32, (cx + r + 1.0).ceil() as i32);
        let (y0, y1) = ((cy - r - 1.0).floor() as i32, (cy + r + 1.0).ceil() as i32);
        for y in y0.max(0)..=y1.min(self.h - 1) {
            for x in x0.max(0)..=x1.min(self.w - 1) {
                let d = (f64::from(x) + 0.5 - cx).hypot(f64::from(y) + 0.5 - cy);
                self.blend(x, y, c, (r - d + 0.5) as f32);
            }
        }
    }

    /// A filled triangle (pixel centres inside the triangle).
    pub fn fill_triangle(&mut self, p: [(f64, f64); 3], c: u32) {
        let minx = p
            .iter()
            .map(|q| q.0)
            .fold(f64::INFINITY, f64::min)
            .floor()
            .max(0.0) as i32;
        let maxx = p
            .iter()
            .map(|q| q.0)
            .fold(f64::NEG_INFINITY, f64::max)
            .ceil()
            .min(f64::from(self.w - 1)) as i32;
        let miny = p
            .iter()
            .map(|q| q.1)
            .fold(f64::INFINITY, f64::min)
            .floor()
            .max(0.0) as i32;
        let maxy = p
            .iter()
            .map(|q| q.1)
            .fold(f64::NEG_INFINITY, f64::max)
            .ceil()
            .min(f64::from(self.h - 1)) as i32;
        let edge =
            |a: (f64, f64), b: (f64, f64), x: f64, y: f64| (b.0 - a.0) * (y - a.1) - (b.1 - a.1) * (x - a.0);
        let area = edge(p[0], p[1], p[2].0, p[2].1);
        if area == 0.0 {
            return;
        }
        for y in miny..=maxy {
            for x in minx..=maxx {
                let (fx, fy) = (f64::from(x) + 0.5, f64::from(y) + 0.5);
                let w0 = edge(p[1], p[2], fx, fy) * area.signum();
                let w1 = edge(p[2], p[0], fx, fy) * area.signum();
                let w2 = edge(p[0], p[1], fx, fy) * area.signum();
                if w0 >= 0.0 && w1 >= 0.0 && w2 >= 0.0 {
                    self.put(x, y, c);
                }
            }
        }
    }

    /// Vertical gradient from `top` to `bottom`.
    pub fn gradient(&mut self, top: u32, bottom: u32) {
        let (r0, g0, b0) = rgb(top);
        let (r1, g1, b1) = rgb(bottom);
        for y in 0..self.h {
            let t = y as f32 / (self.h.max(2) - 1) as f32;
            let c = (u32::from(mix(r0, r1, t)) << 16)
                | (u32::from(mix(g0, g1, t)) << 8)
                | u32::from(mix(b0, b1, t));
            self.fill_rect(0, y, self.w, 1, c);
        }
    }

    /// Darken everything to 3/8 of its brightness (behind a dialogue).
    pub fn dim(&mut self) {
        for p in self.px.iter_mut() {
            *p = ((*p >> 1) & 0x7f7f7f) - ((*p >> 3) & 0x1f1f1f);
        }
    }
}

/// Width and ascent of `text` at `size` px.
pub fn measure(face: &Face, size: f32, text: &str) -> (i32, i32) {
    let sf = face.font.as_scaled(PxScale::from(size));
    let mut w = 0.0;
    let mut prev = None;
    for ch in text.chars() {
        let id = sf.glyph_id(ch);
        if let Some(p) = prev {
            w += sf.kern(p, id);
        }
        w += sf.h_advance(id);
        prev = Some(id);
    }
    (w.ceil() as i32, sf.ascent().ceil() as i32)
}

/// Draw `text` with its top-left corner (ascent line) at (x, y). Returns the width drawn.
pub fn text(c: &mut Canvas, face: &Face, size: f32, x: i32, y: i32, colour: u32, s: &str) -> i32 {
    let sf = face.font.as_scaled(PxScale::from(size));
    let baseline = y + sf.ascent().round() as i32;
    let mut caret = x as f32;
    let mut prev = None;
    for ch in s.chars() {
        let id = sf.glyph_id(ch);
        if let Some(p) = prev {
            caret += sf.kern(p, id);
        }
        let gx = caret.round() as i32;
        caret += sf.h_advance(id);
        prev = Some(id);
        if let Some(r) = face.raster(id, size).as_ref() {
            for yy in 0..r.h {
                for xx in 0..r.w {
                    let a = u32::from(r.cov[(yy * r.w + xx) as usize]);
                    c.blend8(gx + r.ox + xx, baseline + r.oy + yy, colour, a);
                }
            }
        }
    }
    (caret - x as f32).ceil() as i32
}

/// Draw `s` centred on (cx, cy).
pub fn text_centered(c: &mut Canvas, face: &Face, size: f32, cx: i32, cy: i32, colour: u32, s: &str) {
    let (w, _) = measure(face, size, s);
    let sf = face.font.as_scaled(PxScale::from(size));
    // Centre the cap height (approximately 0.73 of the ascent for DejaVu) on cy.
    let cap = (sf.ascent() * 0.73).round() as i32;
    let top = cy - cap / 2 - (sf.ascent().round() as i32 - cap);
    text(c, face, size, cx - w / 2, top, colour, s);
}

/// Everything the picture depends on, quantised to what changes pixels. Redraw iff this changes.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewKey {
    screen: Screen,
    under: Screen,
    hovered: Option<crate::game::ButtonId>,
    labels: Vec<String>,
    cam: (i32, i32),
    yaw_px: i64,
    pitch_px: i64,
    coins: u64,
    gold: u64,
    health: i32,
    health_px: i32,
    zone: u32,
    taken: Vec<bool>,
    grid: bool,
    seed: u64,
}

fn cam(g: &Game) -> (i32, i32) {
    (g.player.0.round() as i32, g.player.1.round() as i32)
}

fn yaw_px(g: &Game) -> i64 {
    (g.yaw_deg * COMPASS_PX_PER_DEG).round() as i64
}

fn pitch_px(g: &Game) -> i64 {
    (g.pitch_deg * 100.0 / 60.0).round() as i64
}

fn health_shown(g: &Game) -> i32 {
    g.health.ceil() as i32
}

const HEALTH_BAR_W: i32 = 276;

fn health_px(g: &Game) -> i32 {
    (g.health / 100.0 * f64::from(HEALTH_BAR_W)).round() as i32
}

pub fn view_key(g: &Game) -> ViewKey {
    ViewKey {
        screen: g.screen,
        under: g.confirm_return(),
        hovered: g.hovered(),
        labels: g.buttons().into_iter().map(|b| b.label).collect(),
        cam: cam(g),
        yaw_px: yaw_px(g),
        pitch_px: pitch_px(g),
        coins: g.coins,
        gold: g.gold,
        health: health_shown(g),
        health_px: health_px(g),
        zone: g.zone,
        taken: g.zone_coins.iter().map(|c| c.taken).collect(),
        grid: g.toggles.grid,
        seed: g.seed,
    }
}

const WHITE: u32 = 0xffffff;
const PANEL: u32 = 0x11151c;
const LABEL: u32 = 0xc9d2de;
const BUTTON: u32 = 0x1d3f8f;
const BUTTON_HOT: u32 = 0x2f6fe0;
const BORDER_HOT: u32 = 0xffd23f;

fn draw_button(c: &mut Canvas, f: &Fonts, b: &Button, hot: bool) {
    let r = b.rect;
    let (fill, edge) = if hot {
        (BUTTON_HOT, BORDER_HOT)
    } else {
        (BUTTON, WHITE)
    };
    c.fill_round_rect(r.x, r.y, r.w, r.h, 10, edge);
    c.fill_round_rect(r.x + 4, r.y + 4, r.w - 8, r.h - 8, 7, fill);
    let size = (r.h as f32 * 0.42).min(36.0);
    let (cx, cy) = r.center();
    text_centered(c, &f.bold, size, cx, cy, WHITE, &b.label);
}

fn draw_buttons(c: &mut Canvas, f: &Fonts, g: &Game) {
    let hot = g.hovered();
    for b in g.buttons() {
        draw_button(c, f, &b, Some(b.id) == hot);
    }
}

fn backdrop(c: &mut Canvas) {
    c.gradient(0x16213e, 0x3a1c5c);
    // A faint diagonal pattern of dots, fixed (no animation).
    let mut y = 20;
    while y < c.h {
        let mut x = if (y / 40) % 2 == 0 { 20 } else { 40 };
        while x < c.w {
            c.blend_rect(x, y, 3, 3, WHITE, 0.08);
            x += 40;
        }
        y += 40;
    }
}

fn draw_menu(c: &mut Canvas, f: &Fonts, g: &Game) {
    backdrop(c);
    let w = c.w;
    let title_y = g.height / 5;
    text_centered(
        c,
        &f.bold,
        84.0,
        w / 2 + 4,
        title_y + 4,
        0x000000,
        "PRACTICE ARENA",
    );
    text_centered(c, &f.bold, 84.0, w / 2, title_y, 0xffe066, "PRACTICE ARENA");
    text_centered(
        c,
        &f.regular,
        24.0,
        w / 2,
        title_y + 66,
        LABEL,
        &format!("Collect coins, dodge spikes  ·  seed {}", g.seed),
    );
    draw_buttons(c, f, g);
    text_centered(
        c,
        &f.regular,
        18.0,
        w / 2,
        g.height - 30,
        0x9aa6b8,
        "Hover over a button, then click  ·  Esc pauses",
    );
}

fn draw_options(c: &mut Canvas, f: &Fonts, g: &Game) {
    backdrop(c);
    text_centered(c, &f.bold, 64.0, c.w / 2, g.height / 6, WHITE, "OPTIONS");
    draw_buttons(c, f, g);
}

fn compass_label(b: i32) -> Option<(&'static str, bool)> {
    match b.rem_euclid(360) {
        0 => Some(("N", true)),
        90 => Some(("E", true)),
        180 => Some(("S", true)),
        270 => Some(("W", true)),
        45 => Some(("NE", false)),
        135 => Some(("SE", false)),
        225 => Some(("SW", false)),
        315 => Some(("NW", false)),
        _ => None,
    }
}

fn draw_compass(c: &mut Canvas, f: &Fonts, g: &Game) {
    let w = c.w;
    c.fill_rect(0, 0, w, COMPASS_H, PANEL);
    c.fill_rect(0, COMPASS_H, w, 2, 0x3b4252);
    let cx = w / 2;
    let yaw_px = yaw_px(g);
    let total = (360.0 * COMPASS_PX_PER_DEG) as i64;
    // Bearing b sits at x = cx + b*scale - yaw_px, wrapped into the visible range.
    let span = f64::from(w / 2) / COMPASS_PX_PER_DEG;
    let first = ((f64::from(yaw_px as i32) / COMPASS_PX_PER_DEG - span) / 5.0).floor() as i32 * 5;
    let last = first + (2.0 * span) as i32 + 10;
    let mut b = first;
    while b <= last {
        let off = (i64::from(b) * COMPASS_PX_PER_DEG as i64 - yaw_px).rem_euclid(total);
        let off = if off > total / 2 { off - total } else { off };
        let x = cx + off as i32;
        if (0..w).contains(&x) {
            let (len, col) = if b % 45 == 0 {
                (14, WHITE)
            } else if b % 15 == 0 {
                (10, 0xaab4c4)
            } else {
                (5, 0x6b7586)
            };
            c.fill_rect(x - 1, COMPASS_H - len, 2, len, col);
            if let Some((label, cardinal)) = compass_label(b) {
                let (font, size, col) = if cardinal {
                    (&f.bold, 24.0, 0xffe066)
                } else {
                    (&f.regular, 16.0, LABEL)
                };
                text_centered(c, font, size, x, 15, col, label);
            }
        }
        b += 5;
    }
    c.fill_triangle(
        [
            (f64::from(cx) - 8.0, f64::from(COMPASS_H) + 12.0),
            (f64::from(cx) + 8.0, f64::from(COMPASS_H) + 12.0),
            (f64::from(cx), f64::from(COMPASS_H) + 1.0),
        ],
        0xffd23f,
    );
}

fn draw_world(c: &mut Canvas, g: &Game) {
    let (px, py) = cam(g);
    let (ox, oy) = (px - c.w / 2, py - c.h / 2);
    let bg = ZONE_COLOURS[((g.zone.max(1) - 1) as usize) % ZONE_COLOURS.len()];
    c.fill(0x0b0d12);
    let (ww, wh) = (WORLD_W as i32, WORLD_H as i32);
    c.fill_rect(-ox, -oy, ww, wh, bg);
    if g.toggles.grid {
        let line = lighten(bg, 0.12);
        let mut gx = 100;
        while gx < ww {
            c.fill_rect(gx - ox, -oy, 1, wh, line);
            gx += 100;
        }
        let mut gy = 100;
        while gy < wh {
            c.fill_rect(-ox, gy - oy, ww, 1, line);
            gy += 100;
        }
    }
    c.border(-ox - 6, -oy - 6, ww + 12, wh + 12, 6, 0xd8dee9);
    let (cw, ch) = (c.w, c.h);
    let visible = |x: f64, y: f64, r: f64| {
        let sx = x.round() as i32 - ox;
        let sy = y.round() as i32 - oy;
        let r = r as i32 + 16;
        sx + r >= 0 && sy + r >= 0 && sx - r < cw && sy - r < ch
    };
    for hz in &g.hazards {
        if !visible(hz.x, hz.y, HAZARD_SIZE) {
            continue;
        }
        let (sx, sy) = (
            f64::from(hz.x.round() as i32 - ox),
            f64::from(hz.y.round() as i32 - oy),
        );
        let half = HAZARD_SIZE / 2.0;
        let spike = 9.0;
        for i in 0..3 {
            let t = -half + HAZARD_SIZE * (f64::from(i) + 0.5) / 3.0;
            let s = HAZARD_SIZE / 6.0;
            c.fill_triangle(
                [
                    (sx + t - s, sy - half),
                    (sx + t + s, sy - half),
                    (sx + t, sy - half - spike),
                ],
                0x8b1010,
            );
            c.fill_triangle(
                [
                    (sx + t - s, sy + half),
                    (sx + t + s, sy + half),
                    (sx + t, sy + half + spike),
                ],
                0x8b1010,
            );
            c.fill_triangle(
                [
                    (sx - half, sy + t - s),
                    (sx - half, sy + t + s),
                    (sx - half - spike, sy + t),
                ],
                0x8b1010,
            );
            c.fill_triangle(
                [
                    (sx + half, sy + t - s),
                    (sx + half, sy + t + s),
                    (sx + half + spike, sy + t),
                ],
                0x8b1010,
            );
        }
        let (x0, y0, s) = ((sx - half) as i32, (sy - half) as i32, HAZARD_SIZE as i32);
        c.fill_rect(x0, y0, s, s, 0x7a0c0c);
        c.fill_rect(x0 + 3, y0 + 3, s - 6, s - 6, 0xe02424);
        c.fill_triangle(
            [(sx - 8.0, sy + 7.0), (sx + 8.0, sy + 7.0), (sx, sy - 9.0)],
            0xffd6d6,
        );
    }
    for coin in g.zone_coins.iter().filter(|k| !k.taken) {
        if !visible(coin.x, coin.y, COIN_R) {
            continue;
        }
        let (sx, sy) = (
            f64::from(coin.x.round() as i32 - ox),
            f64::from(coin.y.round() as i32 - oy),
        );
        c.fill_circle(sx + 2.0, sy + 3.0, COIN_R, 0x000000);
        c.fill_circle(sx, sy, COIN_R, 0xb8860b);
        c.fill_circle(sx, sy, COIN_R - 3.0, 0xffd21f);
        c.fill_circle(sx - 4.0, sy - 4.0, 3.5, 0xfff3b0);
    }
    // The player, always at the centre of the view.
    let (cx, cy) = (f64::from(c.w / 2), f64::from(c.h / 2));
    c.fill_circle(cx + 2.0, cy + 3.0, PLAYER_R, 0x000000);
    c.fill_circle(cx, cy, PLAYER_R, 0x1565c0);
    c.fill_circle(cx, cy, PLAYER_R - 4.0, 0xf5f7fa);
    let h = (yaw_px(g) as f64 / COMPASS_PX_PER_DEG).to_radians();
    let (dx, dy) = (h.sin(), -h.cos());
    let (nx, ny) = (-dy, dx);
    c.fill_triangle(
        [
            (cx + dx * 40.0, cy + dy * 40.0),
            (cx + dx * 20.0 + nx * 11.0, cy + dy * 20.0 + ny * 11.0),
            (cx + dx * 20.0 - nx * 11.0, cy + dy * 20.0 - ny * 11.0),
        ],
        0xffd23f,
    );
    c.fill_circle(cx + dx * 6.0, cy + dy * 6.0, 5.0, 0x0d47a1);
}

fn counter_panel(c: &mut Canvas, f: &Fonts, x: i32, y: i32, label: &str, value: u64) {
    c.fill_round_rect(x, y, 250, 72, 8, PANEL);
    text(c, &f.regular, 26.0, x + 16, y + 22, LABEL, label);
    text(c, &f.regular, 44.0, x + 112, y + 12, WHITE, &value.to_string());
}

fn draw_hud(c: &mut Canvas, f: &Fonts, g: &Game) {
    draw_compass(c, f, g);
    counter_panel(c, f, 16, 60, "Coins", g.coins);
    counter_panel(c, f, 16, 140, "Gold", g.gold);
    // Health: label, number and a horizontal bar.
    let (hx, hy) = (16, 220);
    c.fill_round_rect(hx, hy, 308, 80, 8, PANEL);
    text(c, &f.regular, 22.0, hx + 16, hy + 10, LABEL, "Health");
    text(
        c,
        &f.bold,
        22.0,
        hx + 110,
        hy + 10,
        WHITE,
        &health_shown(g).to_string(),
    );
    let (bx, by) = (hx + 16, hy + 44);
    c.fill_rect(bx - 2, by - 2, HEALTH_BAR_W + 4, 24, 0x000000);
    c.fill_rect(bx, by, HEALTH_BAR_W, 20, 0x2b2f36);
    let fill = if g.health < 30.0 { 0xe53935 } else { 0x2ecc40 };
    c.fill_rect(bx, by, health_px(g), 20, fill);
    // Zone and coins left, bottom left.
    let zy = c.h - 56;
    c.fill_round_rect(16, zy, 330, 40, 8, PANEL);
    let left = g.zone_coins.iter().filter(|k| !k.taken).count();
    text(
        c,
        &f.regular,
        22.0,
        30,
        zy + 8,
        WHITE,
        &format!("Zone {}  ·  {}/{} coins left", g.zone, left, COINS_PER_ZONE),
    );
    // Pitch gauge, right edge.
    let (gx, gy0, gh) = (c.w - 46, 170, 200);
    c.fill_round_rect(gx - 10, gy0 - 10, 32, gh + 20, 6, PANEL);
    c.fill_rect(gx + 5, gy0, 2, gh, 0x6b7586);
    c.fill_rect(gx, gy0 + gh / 2, 12, 2, 0x6b7586);
    let my = gy0 + gh / 2 - pitch_px(g) as i32;
    c.fill_rect(gx - 3, my - 3, 18, 6, 0xffd23f);
    draw_buttons(c, f, g);
}

fn draw_play(c: &mut Canvas, f: &Fonts, g: &Game) {
    draw_world(c, g);
    draw_hud(c, f, g);
}

fn panel(c: &mut Canvas, w: i32, h: i32) -> (i32, i32) {
    let (x, y) = ((c.w - w) / 2, (c.h - h) / 2);
    c.fill_round_rect(x - 3, y - 3, w + 6, h + 6, 14, 0xd8dee9);
    c.fill_round_rect(x, y, w, h, 12, 0x1b2230);
    (x, y)
}

fn draw_pause(c: &mut Canvas, f: &Fonts, g: &Game) {
    draw_play(c, f, g);
    c.dim();
    let (_, y) = panel(c, 460, 330);
    text_centered(c, &f.bold, 56.0, c.w / 2, y + 52, WHITE, "PAUSED");
    draw_buttons(c, f, g);
}

fn draw_confirm(c: &mut Canvas, f: &Fonts, g: &Game) {
    match g.confirm_return() {
        Screen::Play | Screen::Pause => draw_play(c, f, &g.as_screen(Screen::Play)),
        _ => draw_menu(c, f, &g.as_screen(Screen::Menu)),
    }
    c.dim();
    let (_, y) = panel(c, 560, 260);
    text_centered(c, &f.bold, 40.0, c.w / 2, y + 50, WHITE, "Spend 100 gold?");
    text_centered(
        c,
        &f.regular,
        24.0,
        c.w / 2,
        y + 100,
        LABEL,
        &format!("You have {} gold", g.gold),
    );
    draw_buttons(c, f, g);
}

/// Draw the whole picture for the game's current state.
pub fn draw(c: &mut Canvas, f: &Fonts, g: &Game) {
    match g.screen {
        Screen::Menu => draw_menu(c, f, g),
        Screen::Options => draw_options(c, f, g),
        Screen::Play => draw_play(c, f, g),
        Screen::Pause => draw_pause(c, f, g),
        Screen::Confirm => draw_confirm(c, f, g),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::game::Event;

    fn fonts() -> Fonts {
        Fonts::load(Path::new(FONT_DIR)).expect("DejaVu fonts installed")
    }

    #[test]
    fn equal_states_draw_equal_pictures() {
        let f = fonts();
        let g = Game::new(3, 640, 400, Screen::Play);
        let mut a = Canvas::new(640, 400);
        let mut b = Canvas::new(640, 400);
        draw(&mut a, &f, &g);
        draw(&mut b, &f, &g);
        assert!(a == b);
        assert_eq!(view_key(&g), view_key(&g.clone()));
    }

    #[test]
    fn moving_changes_the_view_key_and_the_picture() {
        let f = fonts();
        let mut g = Game::new(3, 640, 400, Screen::Play);
        g.handle(Event::Focus(true), 0.0);
        let k0 = view_key(&g);
        let mut a = Canvas::new(640, 400);
        draw(&mut a, &f, &g);
        g.handle(
            Event::Key {
                name: "d".into(),
                down: true,
            },
            0.0,
        );
        g.advance(100.0);
        assert_ne!(view_key(&g), k0);
        let mut b = Canvas::new(640, 400);
        draw(&mut b, &f, &g);
        assert!(a != b);
    }

    #[test]
    fn health_bar_turns_red_below_thirty() {
        let f = fonts();
        let mut g = Game::new(3, 640, 400, Screen::Play);
        let mut c = Canvas::new(640, 400);
        draw(&mut c, &f, &g);
        assert_eq!(c.get(16 + 20, 220 + 50), 0x2ecc40);
        g.health = 20.0;
        draw(&mut c, &f, &g);
        assert_eq!(c.get(16 + 20, 220 + 50), 0xe53935);
    }

    #[test]
    fn missing_font_dir_is_a_named_error() {
        let e = Fonts::load(Path::new("/nonexistent-fonts")).err().expect("error");
        assert!(e.to_string().contains("DejaVuSans.ttf"), "{e}");
    }
}
