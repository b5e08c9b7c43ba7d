//! The reflex's side of the sensors the agent declares (sensor-expressions.md, "Declaration and
//! lifetime"): the session's whole sensor source, goal check and postconditions compiled again in the
//! reflex, and the templates of `present` declarations cut from the current frame into the reflex's atlas.

use gamepilot_core::{Frame, Rect, Size, TransformChain};
use gamepilot_sensor::{Atlas, Expression, Program, Template};

/// How far (pixels) a declared template is looked for around where it was cut.
pub use gamepilot_session::declare::TEMPLATE_RADIUS_PX;

/// The sensors, goal check and postconditions the reflex evaluates from now on.
#[derive(Debug)]
pub struct Compiled {
    pub program: Program,
    pub goal: Option<Expression>,
    pub postconditions: Vec<Expression>,
}

/// Compile the session's declared sensors; `Err` names what failed with the compiler's diagnostics.
pub fn compile(source: &str, goal: Option<&str>, postconditions: &[String]) -> Result<Compiled, String> {
    let program = gamepilot_sensor::compile(source)
        .map_err(|e| gamepilot_sensor::render_all(e.diagnostics(), "declared", source))?;
    let expr = |s: &str| {
        program
            .compile_expression(s)
            .map_err(|e| gamepilot_sensor::render_all(e.diagnostics(), "expression", s))
    };
    let goal = goal.map(expr).transpose()?;
    let postconditions = postconditions
        .iter()
        .map(|s| expr(s))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Compiled {
        program,
        goal,
        postconditions,
    })
}

/// Cut each named box (declared capture space) from `frame` into `atlas`; what could not be cut is said
/// in the returned lines (its `template_present` then reads undefined, never a guess).
pub fn cut_templates(
    atlas: &mut Atlas,
    frame: Option<&Frame>,
    wanted: &[(String, Rect)],
    chain: Option<TransformChain>,
    declared: Size,
) -> Vec<String> {
    let Some(view) = frame.map(Frame::view) else {
        return vec![format!(
            "no frame to cut {} declared template(s) from",
            wanted.len()
        )];
    };
    let mut notes = Vec::new();
    for (name, rect) in wanted {
        let r = chain
            .as_ref()
            .map_or(*rect, |c| c.rescale_rect_from(*rect, declared));
        match Template::from_frame(&view, r, TEMPLATE_RADIUS_PX) {
            Ok(t) => {
                atlas.insert(name.clone(), t);
            }
            Err(e) => notes.push(format!("declared template `{name}` not cut: {e}")),
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use gamepilot_core::PixelFormat;

    #[test]
    fn a_declared_template_is_cut_where_its_box_is_and_found_there() {
        // FR-PERC-008: the atlas gains the element the agent declared
        let (w, h) = (64u32, 48u32);
        let mut data = vec![0u8; (w * h * 4) as usize];
        for y in 10..20 {
            for x in 20..40 {
                let i = ((y * w + x) * 4) as usize;
                data[i..i + 4].copy_from_slice(&[255, 255, 255, 0]);
                if (x + y) % 3 == 0 {
                    data[i..i + 3].copy_from_slice(&[30, 30, 30]);
                }
            }
        }
        let frame = Frame {
            width: w,
            height: h,
            stride: (w * 4) as usize,
            format: PixelFormat::Bgrx,
            data,
            captured_at: gamepilot_core::MonoTime::ZERO,
        };
        let mut atlas = Atlas::new();
        let wanted = vec![
            ("play_shown".to_string(), Rect::new(20, 10, 20, 10)),
            ("outside".to_string(), Rect::new(60, 40, 20, 20)),
        ];
        let notes = cut_templates(&mut atlas, Some(&frame), &wanted, None, Size::new(w, h));
        assert_eq!(atlas.len(), 1);
        assert!(notes.len() == 1 && notes[0].contains("outside"), "{notes:?}");
        let c = compile(
            "play_shown = template_present(\"play_shown\", 0.8)",
            Some("not play_shown"),
            &["play_shown".into()],
        )
        .unwrap();
        assert!(c.goal.is_some() && c.postconditions.len() == 1);
        assert!(compile("x = ", None, &[]).is_err());
        assert!(compile("", Some("nope"), &[]).unwrap_err().contains("nope"));
    }
}
