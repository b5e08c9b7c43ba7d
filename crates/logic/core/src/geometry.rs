//! Integer geometry in pixels: points, sizes and rectangles.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Point {
    pub x: i32,
    pub y: i32,
}

impl Point {
    pub const fn new(x: i32, y: i32) -> Self {
        Point { x, y }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Size {
    pub w: u32,
    pub h: u32,
}

impl Size {
    pub const fn new(w: u32, h: u32) -> Self {
        Size { w, h }
    }

    pub fn area(self) -> u64 {
        self.w as u64 * self.h as u64
    }

    /// This size scaled down, keeping its aspect, to at most `max_pixels` of area (FR-MODEL-002's visual
    /// budget); unchanged when it already fits.
    pub fn fit_within(self, max_pixels: u64) -> Size {
        if self.w == 0 || self.h == 0 {
            return Size::new(0, 0);
        }
        if self.area() <= max_pixels {
            return self;
        }
        let scale = (max_pixels as f64 / self.area() as f64).sqrt();
        let mut w = ((self.w as f64 * scale + 1e-6).floor() as u32).max(1);
        let mut h = ((self.h as f64 * scale + 1e-6).floor() as u32).max(1);
        while w as u64 * h as u64 > max_pixels && (w > 1 || h > 1) {
            if w >= h {
                w -= 1;
            } else {
                h -= 1;
            }
        }
        Size::new(w, h)
    }
}

/// An axis-aligned rectangle `[x, y, w, h]`; serialised as that 4-array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Rect {
    pub x: i32,
    pub y: i32,
    pub w: u32,
    pub h: u32,
}

impl Rect {
    pub const fn new(x: i32, y: i32, w: u32, h: u32) -> Self {
        Rect { x, y, w, h }
    }

    pub fn right(&self) -> i64 {
        self.x as i64 + self.w as i64
    }

    pub fn bottom(&self) -> i64 {
        self.y as i64 + self.h as i64
    }

    pub fn area(&self) -> u64 {
        self.w as u64 * self.h as u64
    }

    pub fn is_empty(&self) -> bool {
        self.w == 0 || self.h == 0
    }

    pub fn center(&self) -> Point {
        Point::new(self.x + (self.w / 2) as i32, self.y + (self.h / 2) as i32)
    }

    pub fn contains(&self, p: Point) -> bool {
        (p.x as i64) >= self.x as i64
            && (p.y as i64) >= self.y as i64
            && (p.x as i64) < self.right()
            && (p.y as i64) < self.bottom()
    }

    /// True when `other` lies wholly inside `self`.
    pub fn contains_rect(&self, other: &Rect) -> bool {
        other.x >= self.x
            && other.y >= self.y
            && other.right() <= self.right()
            && other.bottom() <= self.bottom()
    }

    /// The smallest rectangle holding both.
    pub fn union(&self, other: &Rect) -> Rect {
        let x0 = (self.x as i64).min(other.x as i64);
        let y0 = (self.y as i64).min(other.y as i64);
        let x1 = self.right().max(other.right());
        let y1 = self.bottom().max(other.bottom());
        Rect::new(x0 as i32, y0 as i32, (x1 - x0) as u32, (y1 - y0) as u32)
    }

    pub fn intersection(&self, other: &Rect) -> Option<Rect> {
        let x0 = (self.x as i64).max(other.x as i64);
        let y0 = (self.y as i64).max(other.y as i64);
        let x1 = self.right().min(other.right());
        let y1 = self.bottom().min(other.bottom());
        if x1 <= x0 || y1 <= y0 {
            return None;
        }
        Some(Rect::new(
            x0 as i32,
            y0 as i32,
            (x1 - x0) as u32,
            (y1 - y0) as u32,
        ))
    }

    /// Intersection over union, 0..1.
    pub fn iou(&self, other: &Rect) -> f32 {
        let inter = self.intersection(other).map(|r| r.area()).unwrap_or(0) as f64;
        let union = self.area() as f64 + other.area() as f64 - inter;
        if union <= 0.0 {
            0.0
        } else {
            (inter / union) as f32
        }
    }

    /// Clamp into `bounds`; `None` when nothing remains.
    pub fn clamped_to(&self, bounds: &Rect) -> Option<Rect> {
        self.intersection(bounds)
    }
}

impl Serialize for Rect {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        [self.x as i64, self.y as i64, self.w as i64, self.h as i64].serialize(s)
    }
}

impl<'de> Deserialize<'de> for Rect {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let [x, y, w, h] = <[i64; 4]>::deserialize(d)?;
        if w < 0 || h < 0 {
            return Err(serde::de::Error::custom(
                "rectangle width and height must be non-negative",
            ));
        }
        Ok(Rect::new(x as i32, y as i32, w as u32, h as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intersection_iou_and_containment() {
        let a = Rect::new(0, 0, 10, 10);
        let b = Rect::new(5, 5, 10, 10);
        assert_eq!(a.intersection(&b), Some(Rect::new(5, 5, 5, 5)));
        assert!((a.iou(&b) - 25.0 / 175.0).abs() < 1e-6);
        assert!(a.contains(Point::new(9, 9)));
        assert!(!a.contains(Point::new(10, 0)));
        assert!(a.contains_rect(&Rect::new(2, 2, 8, 8)));
        assert!(!a.contains_rect(&b));
        assert_eq!(a.intersection(&Rect::new(20, 20, 1, 1)), None);
        assert_eq!(a.union(&b), Rect::new(0, 0, 15, 15));
    }

    #[test]
    fn rect_serialises_as_array() {
        let r = Rect::new(1, 2, 3, 4);
        let s = serde_json::to_string(&r).unwrap();
        assert_eq!(s, "[1,2,3,4]");
        assert_eq!(serde_json::from_str::<Rect>(&s).unwrap(), r);
        assert!(serde_json::from_str::<Rect>("[1,2,-3,4]").is_err());
    }
}
