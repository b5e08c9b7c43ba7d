//! Screen rectangles from the accessibility tree into capture space through the window's transform chain,
//! clipped to the window so that every box lies wholly inside the captured region (INV-PERC-001).

use gamepilot_core::{Rect, TransformChain};

/// Map a rectangle in root-window (screen) coordinates into the capture space of `chain`. The part outside
/// the window's client area is cut off; `None` when nothing of it is inside, or when the chain is
/// degenerate. The result always lies inside `chain.capture_bounds()`.
pub fn screen_rect_to_capture(chain: &TransformChain, r: Rect) -> Option<Rect> {
    let (cw, ch) = (chain.client_size.w as i64, chain.client_size.h as i64);
    let (kw, kh) = (chain.capture_size.w as i64, chain.capture_size.h as i64);
    if cw == 0 || ch == 0 || kw == 0 || kh == 0 || r.w == 0 || r.h == 0 {
        return None;
    }
    // Window-relative, clipped to the client area (half-open ranges).
    let x0 = (r.x as i64 - chain.client_origin.x as i64).max(0);
    let y0 = (r.y as i64 - chain.client_origin.y as i64).max(0);
    let x1 = (r.x as i64 + r.w as i64 - chain.client_origin.x as i64).min(cw);
    let y1 = (r.y as i64 + r.h as i64 - chain.client_origin.y as i64).min(ch);
    if x1 <= x0 || y1 <= y0 {
        return None;
    }
    // Scale to capture pixels: floor the start, ceil the end, so the box covers every capture pixel the
    // element touches, then clamp to the capture (rounding must not push it out).
    let cx0 = (x0 * kw / cw).min(kw - 1);
    let cy0 = (y0 * kh / ch).min(kh - 1);
    let cx1 = ((x1 * kw + cw - 1) / cw).clamp(cx0 + 1, kw);
    let cy1 = ((y1 * kh + ch - 1) / ch).clamp(cy0 + 1, kh);
    Some(Rect::new(
        cx0 as i32,
        cy0 as i32,
        (cx1 - cx0) as u32,
        (cy1 - cy0) as u32,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::{Point, Size};

    #[test]
    fn identity_chain_offsets_by_the_client_origin() {
        // FR-PERC-010, INV-GND-002
        let chain = TransformChain::new(Point::new(100, 50), Size::new(400, 300));
        assert_eq!(
            screen_rect_to_capture(&chain, Rect::new(110, 60, 40, 20)),
            Some(Rect::new(10, 10, 40, 20))
        );
    }

    #[test]
    fn boxes_are_clipped_to_the_capture_or_dropped() {
        // INV-PERC-001: partly outside → clipped; wholly outside → none.
        let chain = TransformChain::new(Point::new(100, 50), Size::new(400, 300));
        let r = screen_rect_to_capture(&chain, Rect::new(80, 40, 60, 30)).unwrap();
        assert_eq!(r, Rect::new(0, 0, 40, 20));
        assert!(chain.capture_bounds().contains_rect(&r));
        let r = screen_rect_to_capture(&chain, Rect::new(480, 330, 100, 100)).unwrap();
        assert_eq!(r, Rect::new(380, 280, 20, 20));
        assert_eq!(screen_rect_to_capture(&chain, Rect::new(0, 0, 100, 50)), None);
        assert_eq!(screen_rect_to_capture(&chain, Rect::new(500, 60, 10, 10)), None);
        // AT-SPI reports hidden menu items at i32::MIN with size 1x1.
        assert_eq!(
            screen_rect_to_capture(&chain, Rect::new(i32::MIN, i32::MIN, 1, 1)),
            None
        );
        assert_eq!(screen_rect_to_capture(&chain, Rect::new(120, 60, 0, 10)), None);
    }

    #[test]
    fn scaled_capture_covers_the_element_and_stays_inside() {
        // INV-PERC-001 with a half-size capture (thumbnail-like scale).
        let chain =
            TransformChain::new(Point::new(0, 0), Size::new(401, 301)).with_capture_size(Size::new(200, 150));
        for &(x, y, w, h) in &[
            (0, 0, 401, 301),
            (399, 299, 2, 2),
            (3, 3, 1, 1),
            (100, 33, 57, 21),
        ] {
            let r = screen_rect_to_capture(&chain, Rect::new(x, y, w, h)).unwrap();
            assert!(chain.capture_bounds().contains_rect(&r), "{r:?}");
            assert!(r.w >= 1 && r.h >= 1);
        }
        assert_eq!(
            screen_rect_to_capture(&chain, Rect::new(100, 40, 50, 20)),
            Some(Rect::new(49, 19, 26, 11))
        );
    }
}
