//! `run --templates DIR`: the session's template atlas for `template_present("name", …)` sensors, loaded
//! from PNG files. A file `NAME@X,Y.png` is the template NAME, seen at (X, Y) in the window's capture
//! pixels (its anchor; `template_present` looks within `--template-radius` of it, as `sensor eval
//! --template NAME=FILE@X,Y` does). The name is the file stem before `@`.

use crate::RuntimeError;
use gamepilot_core::{Point, Size};
use gamepilot_sensor::{Atlas, Template};
use std::path::Path;

/// Split a file stem `NAME@X,Y` into its name and anchor.
pub fn parse_stem(stem: &str) -> Result<(String, Point), String> {
    let Some((name, at)) = stem.rsplit_once('@') else {
        return Err(format!(
            "{stem:?} has no anchor: name the file NAME@X,Y.png (X, Y: where the template appears, in the window's capture pixels)"
        ));
    };
    let bad = || format!("{stem:?}: the anchor after '@' must be X,Y in pixels");
    let (x, y) = at.split_once(',').ok_or_else(bad)?;
    let x: i32 = x.trim().parse().map_err(|_| bad())?;
    let y: i32 = y.trim().parse().map_err(|_| bad())?;
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !ok {
        return Err(format!(
            "{stem:?}: the template name must be letters, digits, '_' or '-'"
        ));
    }
    if x < 0 || y < 0 {
        return Err(format!("{stem:?}: the anchor must lie inside the window"));
    }
    Ok((name.to_string(), Point::new(x, y)))
}

/// Load every `*.png` in `dir` into an atlas for a capture of `capture` size. Any unreadable directory or
/// file, or a badly named one, is an error naming it (a silently missing template would only show as an
/// undefined sensor).
pub fn load_dir(dir: &Path, capture: Size, radius: u32) -> Result<(Atlas, Vec<String>), RuntimeError> {
    let bad = |m: String| RuntimeError::Templates(m);
    let entries = std::fs::read_dir(dir)
        .map_err(|e| bad(format!("{}: cannot read the directory: {e}", dir.display())))?;
    let mut paths = Vec::new();
    for e in entries {
        let e = e.map_err(|e| bad(format!("{}: cannot list the directory: {e}", dir.display())))?;
        let p = e.path();
        if p.extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| x.eq_ignore_ascii_case("png"))
        {
            paths.push(p);
        }
    }
    paths.sort();
    if paths.is_empty() {
        return Err(bad(format!(
            "{}: no .png files (name them NAME@X,Y.png)",
            dir.display()
        )));
    }
    let mut atlas = Atlas::new();
    let mut names = Vec::new();
    for p in paths {
        let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        let (name, anchor) = parse_stem(stem).map_err(|e| bad(format!("{}: {e}", p.display())))?;
        let img = crate::load_image(&p).map_err(|e| bad(e.to_string()))?;
        let mut t = Template::from_frame(&img.view(), img.view().bounds(), radius)
            .map_err(|e| bad(format!("template {name:?} from {}: {e}", p.display())))?;
        if anchor.x as u64 + img.width as u64 > capture.w as u64
            || anchor.y as u64 + img.height as u64 > capture.h as u64
        {
            return Err(bad(format!(
                "{}: a {}x{} template at ({}, {}) does not fit the {}x{} window",
                p.display(),
                img.width,
                img.height,
                anchor.x,
                anchor.y,
                capture.w,
                capture.h
            )));
        }
        t.anchor = anchor;
        t.capture_size = capture;
        if atlas.insert(name.clone(), t).is_some() {
            return Err(bad(format!("two files name the template {name:?}")));
        }
        names.push(name);
    }
    Ok((atlas, names))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_name_the_template_and_its_anchor() {
        // FR-PERC-008: template_present in run, from files the user names
        assert_eq!(
            parse_stem("play_button@560,300"),
            Ok(("play_button".to_string(), Point::new(560, 300)))
        );
        assert!(parse_stem("play_button").unwrap_err().contains("NAME@X,Y"));
        assert!(parse_stem("play@1").is_err());
        assert!(parse_stem("@1,2").is_err());
        assert!(parse_stem("pl ay@1,2").is_err());
        assert!(parse_stem("p@-1,2").is_err());
    }

    #[test]
    fn unreadable_dirs_and_files_are_named() {
        let missing = load_dir(Path::new("/nonexistent/templates"), Size::new(100, 100), 4).unwrap_err();
        assert!(
            format!("{missing:#}").contains("/nonexistent/templates"),
            "{missing:#}"
        );
        let dir = std::env::temp_dir().join(format!("gp-templates-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let empty = load_dir(&dir, Size::new(100, 100), 4).unwrap_err();
        assert!(format!("{empty:#}").contains("no .png"), "{empty:#}");
        std::fs::write(dir.join("broken@1,1.png"), b"not a png").unwrap();
        let broken = load_dir(&dir, Size::new(100, 100), 4).unwrap_err();
        assert!(format!("{broken:#}").contains("broken@1,1.png"), "{broken:#}");
        std::fs::remove_file(dir.join("broken@1,1.png")).unwrap();
        let img =
            image::RgbaImage::from_fn(8, 6, |x, y| image::Rgba([(x * 30) as u8, (y * 40) as u8, 9, 255]));
        img.save(dir.join("tile@10,20.png")).unwrap();
        let (atlas, names) = load_dir(&dir, Size::new(100, 100), 4).unwrap();
        assert_eq!(names, vec!["tile".to_string()]);
        let t = gamepilot_sensor::TemplateAtlas::template(&atlas, "tile").unwrap();
        assert_eq!((t.anchor, t.size()), (Point::new(10, 20), Size::new(8, 6)));
        let too_big = load_dir(&dir, Size::new(12, 12), 4).unwrap_err();
        assert!(format!("{too_big:#}").contains("does not fit"), "{too_big:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
