//! Rows and columns of grid cells: the grid elements of one size are read as a lattice, counted from the
//! top left (1-based), so that "row 3, column 9" in a goal names one cell the way a person reads a board.

use crate::observation::{Element, ElementSource};
use gamepilot_core::ElementId;
use std::collections::BTreeMap;

/// One grid cell's place in its grid (1-based, from the top left).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GridCell {
    pub id: ElementId,
    pub row: u32,
    pub column: u32,
}

/// The rows and columns of every grid element. Cells are grouped by size (within 8 px, as the proposer
/// groups them); in each group a new column starts where a centre lies more than half a cell's width
/// right of the previous distinct centre, and likewise for rows.
pub fn grid_cells(elements: &[Element]) -> Vec<GridCell> {
    let mut groups: BTreeMap<(u32, u32), Vec<&Element>> = BTreeMap::new();
    for e in elements.iter().filter(|e| e.source == ElementSource::Grid) {
        groups
            .entry(((e.bbox.w + 4) / 8, (e.bbox.h + 4) / 8))
            .or_default()
            .push(e);
    }
    let mut out = Vec::new();
    for cells in groups.values() {
        let w = cells.iter().map(|e| e.bbox.w).min().unwrap_or(1).max(1) as i32;
        let h = cells.iter().map(|e| e.bbox.h).min().unwrap_or(1).max(1) as i32;
        let columns = bands(cells.iter().map(|e| e.bbox.center().x), w / 2);
        let rows = bands(cells.iter().map(|e| e.bbox.center().y), h / 2);
        for e in cells {
            let c = e.bbox.center();
            out.push(GridCell {
                id: e.id,
                row: band_of(&rows, c.y),
                column: band_of(&columns, c.x),
            });
        }
    }
    out
}

/// The starts of the bands the values fall into: sorted, a new band where a value is more than `gap`
/// past the previous one.
fn bands(values: impl Iterator<Item = i32>, gap: i32) -> Vec<i32> {
    let mut v: Vec<i32> = values.collect();
    v.sort_unstable();
    let mut starts: Vec<i32> = Vec::new();
    let mut last: Option<i32> = None;
    for x in v {
        if last.is_none_or(|l| x - l > gap) {
            starts.push(x);
        }
        last = Some(x);
    }
    starts
}

/// The 1-based band a value belongs to: the last band starting at or before it.
fn band_of(starts: &[i32], value: i32) -> u32 {
    starts.iter().filter(|s| **s <= value).count().max(1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::Rect;

    fn cell(id: u32, x: i32, y: i32, side: u32, source: ElementSource) -> Element {
        Element {
            id: ElementId(id),
            bbox: Rect::new(x, y, side, side),
            confidence: 1.0,
            source,
            label: None,
            looks: None,
            layer: None,
            selected: false,
        }
    }

    #[test]
    fn a_lattice_is_counted_from_the_top_left_and_other_elements_are_not_cells() {
        // A 3x2 lattice of 40 px cells, one pixel of jitter, listed out of order; a rect is no cell.
        let mut e = vec![cell(100, 5, 5, 40, ElementSource::Rect)];
        let mut id = 1;
        for y in [100, 144] {
            for (c, x) in [(3, 288), (1, 200), (2, 245)] {
                e.push(cell(id, x, y + (c % 2), 40, ElementSource::Grid));
                id += 1;
            }
        }
        let cells = grid_cells(&e);
        assert_eq!(cells.len(), 6);
        let at = |id: u32| {
            cells
                .iter()
                .find(|c| c.id == ElementId(id))
                .map(|c| (c.row, c.column))
        };
        assert_eq!(at(1), Some((1, 3)));
        assert_eq!(at(2), Some((1, 1)));
        assert_eq!(at(3), Some((1, 2)));
        assert_eq!(at(6), Some((2, 2)));
        assert_eq!(at(100), None);
    }

    #[test]
    fn two_grids_of_different_sizes_count_apart() {
        let e = vec![
            cell(1, 0, 0, 40, ElementSource::Grid),
            cell(2, 44, 0, 40, ElementSource::Grid),
            cell(3, 400, 400, 16, ElementSource::Grid),
            cell(4, 400, 420, 16, ElementSource::Grid),
        ];
        let cells = grid_cells(&e);
        let at = |id: u32| {
            cells
                .iter()
                .find(|c| c.id == ElementId(id))
                .map(|c| (c.row, c.column))
        };
        assert_eq!(at(2), Some((1, 2)));
        assert_eq!(at(3), Some((1, 1)));
        assert_eq!(at(4), Some((2, 1)));
    }
}
