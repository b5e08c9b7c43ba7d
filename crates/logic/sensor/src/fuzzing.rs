//! The fuzzing entry point shared by the cargo-fuzz target (fuzz/) and the in-tree property test:
//! compile arbitrary text and, when it compiles, evaluate it for a few ticks over a small frame.

use crate::{compile, EvalContext, Evaluator, NoTemplates, RecognitionCache};
use gamepilot_core::{FrameView, PixelFormat, Point, Size, TransformChain};

/// Run `src` through lexer, parser, checker, compiler and evaluator. Panics only when an invariant breaks
/// (a diagnostic that points outside the source, an error without diagnostics, a wrong value count).
pub fn exercise(src: &str) {
    const W: u32 = 16;
    const H: u32 = 12;
    let mut px = Vec::with_capacity((W * H * 4) as usize);
    for i in 0..W * H {
        px.extend_from_slice(&[(i * 7) as u8, (i * 13) as u8, (i * 29) as u8, 255]);
    }
    let lines = src.split('\n').count() as u32;
    match compile(src) {
        Ok(p) => {
            let n = p.len();
            let first = p.sensors().first().map(|s| s.name.clone());
            let mut ev = Evaluator::new(p, Size::new(W, H));
            let mut cache = RecognitionCache::default();
            let Some(view) = FrameView::new(W, H, W as usize * 4, PixelFormat::Rgba, &px) else {
                return;
            };
            let chain = TransformChain::new(Point::new(0, 0), Size::new(W, H));
            for _ in 0..3 {
                let mut ctx = EvalContext {
                    frame: view,
                    chain,
                    atlas: &NoTemplates,
                    recognition: &mut cache,
                };
                assert_eq!(ev.tick(&mut ctx).len(), n);
                for r in ctx.recognition.take_requests() {
                    ctx.recognition.fulfil(r.key, Some(r.crop.width as i64));
                }
            }
            if let Some(name) = first {
                if let Ok(e) = ev
                    .program()
                    .compile_expression(&format!("{name} == @{name} or not {name}"))
                {
                    let mut ctx = EvalContext {
                        frame: view,
                        chain,
                        atlas: &NoTemplates,
                        recognition: &mut cache,
                    };
                    let _ = ev.verdict(&e, &mut ctx);
                }
            }
            let _ = ev.program().compile_expression(src.lines().next().unwrap_or(""));
        }
        Err(e) => {
            let d = e.diagnostics();
            assert!(!d.is_empty(), "an error without diagnostics for {src:?}");
            for d in d {
                assert!(
                    d.span.line >= 1 && d.span.line <= lines.max(1),
                    "{d:?} outside {src:?}"
                );
                assert!(!d.hint.is_empty() && !d.message.is_empty());
                let _ = d.render("fuzz", src);
            }
        }
    }
}
