//! Crate-level tests: diagnostics of every kind, every operator and primitive through the compiler,
//! the spec's worked example over synthetic frames, postconditions, resize, and a token-soup property test.

use crate::*;
use gamepilot_core::{FrameView, PixelFormat, Point, Rect, Size, TransformChain};

fn kinds(src: &str) -> Vec<(DiagKind, u32, u32)> {
    check(src)
        .iter()
        .map(|d| (d.kind, d.span.line, d.span.col))
        .collect()
}

fn one(src: &str) -> Diagnostic {
    let d = check(src);
    assert_eq!(
        d.len(),
        1,
        "expected exactly one diagnostic for {src:?}, got {d:#?}"
    );
    d.into_iter().next().unwrap()
}

// ---------------------------------------------------------------- diagnostics

#[test]
fn the_worked_example_checks_clean() {
    // FR-PERC-008
    let src = WORKED_EXAMPLE;
    let p = compile(src).unwrap();
    let names: Vec<_> = p.sensors().iter().map(|s| (s.name.as_str(), s.ty)).collect();
    assert_eq!(
        names,
        vec![
            ("carrot_count", Type::Number),
            ("health", Type::Number),
            ("in_menu", Type::Bool),
            ("progressed", Type::Bool),
            ("in_danger", Type::Bool),
            ("blocked", Type::Bool)
        ]
    );
    assert_eq!(p.primitives().len(), 3);
    assert_eq!(p.sensors()[3].source, "carrot_count > @carrot_count");
}

#[test]
fn unknown_function_suggests_the_primitive() {
    let d = one("h = region_fractoin([0, 0, 1, 1])");
    assert_eq!((d.kind, d.span), (DiagKind::UnknownFunction, Span::new(1, 5, 15)));
    assert!(d.hint.contains("region_fraction"), "{}", d.hint);
    let d = one("h = max(1, 2)");
    assert!(d.hint.contains("no user functions"), "{}", d.hint);
    let d = one("a = 1\nb = a(2)");
    assert!(d.hint.contains("is a sensor"), "{}", d.hint);
}

#[test]
fn wrong_arity_for_each_primitive() {
    assert_eq!(one("a = region_integer()").kind, DiagKind::WrongArity);
    assert_eq!(
        one("a = region_integer([0, 0, 1, 1], [0, 0, 1, 1])").kind,
        DiagKind::WrongArity
    );
    assert_eq!(one("a = region_fraction(hue=[0, 10])").kind, DiagKind::WrongArity);
    let d = one("a = template_present(\"x\")");
    assert_eq!(d.kind, DiagKind::WrongArity);
    assert!(d.hint.contains("template_present(\"name\", threshold)"));
}

#[test]
fn bad_regions_are_located_per_number() {
    assert_eq!(
        kinds("a = region_integer([0, 0, 0, 5])"),
        vec![(DiagKind::BadRegion, 1, 27)]
    );
    assert_eq!(
        kinds("a = region_integer([-1, 0, 5, 5])"),
        vec![(DiagKind::BadRegion, 1, 21)]
    );
    assert_eq!(
        kinds("a = region_integer([0, 0, 5])"),
        vec![(DiagKind::BadRegion, 1, 20)]
    );
    assert_eq!(
        kinds("a = region_integer([0.5, 0, 5, 5])"),
        vec![(DiagKind::BadRegion, 1, 21)]
    );
    assert_eq!(kinds("a = region_integer(3)"), vec![(DiagKind::BadRegion, 1, 20)]);
    assert_eq!(
        kinds("a = region_integer([0, 0, 5, 999999])"),
        vec![(DiagKind::BadRegion, 1, 30)]
    );
    // Two bad numbers in one region: both reported.
    assert_eq!(kinds("a = region_integer([0, 0, 0, 0])").len(), 2);
}

#[test]
fn type_mismatch_health_and_3() {
    let src = "health = region_fraction([40, 900, 300, 24], hue=[0, 10], saturation>0.5)\nx = health and 3";
    let d = check(src);
    assert_eq!(d.len(), 2, "{d:#?}");
    assert!(d
        .iter()
        .all(|d| d.kind == DiagKind::TypeMismatch && d.span.line == 2));
    assert_eq!(d[0].span, Span::new(2, 5, 6));
    assert_eq!(d[1].span, Span::new(2, 16, 1));
    assert!(d[0].message.contains("`and` needs booleans"));
    assert!(d[0].hint.contains("comparison"));
    // Comparing booleans, `not` of a number, a bare string or list.
    assert_eq!(one("a = true\nb = a > 1").kind, DiagKind::TypeMismatch);
    assert_eq!(one("b = not 3").kind, DiagKind::TypeMismatch);
    assert_eq!(one("b = \"x\"").kind, DiagKind::TypeMismatch);
    assert_eq!(one("b = [1, 2]").kind, DiagKind::TypeMismatch);
    assert_eq!(one("a = 1\nb = a or true").kind, DiagKind::TypeMismatch);
}

#[test]
fn unknown_later_declared_and_cyclic_names() {
    let d = one("a = coins > 3");
    assert_eq!((d.kind, d.span), (DiagKind::UnknownName, Span::new(1, 5, 5)));
    let d = one("coins = 1\na = coin > 3");
    assert!(d.hint.contains("`coins`"), "{}", d.hint);
    let d = one("a = b > 1\nb = 2");
    assert_eq!(d.kind, DiagKind::DeclaredLater);
    assert!(d.message.contains("line 2"));
    assert!(d.hint.contains("@b"));
    // `@` may refer to later sensors and to itself.
    assert!(check("a = @b > 1\nb = 2\nc = @c or true").is_empty());
    assert_eq!(one("a = @nothing").kind, DiagKind::UnknownName);
    let d = one("a = a or true");
    assert_eq!(d.kind, DiagKind::Cycle);
    assert!(d.hint.contains("@a"));
    let d = one("a = b\nb = c\nc = a");
    assert_eq!((d.kind, d.span.line), (DiagKind::Cycle, 1));
    assert!(d.message.contains("a → b → c → a"), "{}", d.message);
    // Only previous values of itself: never a value, so an error rather than a sensor stuck at undefined.
    let d = one("a = @a");
    assert_eq!((d.kind, d.span), (DiagKind::Cycle, Span::new(1, 5, 2)));
    assert_eq!(check("a = @b\nb = @a").len(), 2);
    assert!(check("a = @a or true").is_empty(), "a real use of @a");
}

#[test]
fn duplicate_bad_and_reserved_names() {
    let d = one("a = 1\na = 2");
    assert_eq!((d.kind, d.span), (DiagKind::DuplicateName, Span::new(2, 1, 1)));
    assert!(d.message.contains("line 1"));
    let d = one("Health = 1");
    assert_eq!(d.kind, DiagKind::BadName);
    assert!(d.hint.contains("`health`"));
    assert_eq!(one("_x = 1").kind, DiagKind::BadName);
    assert_eq!(one("region_integer = 1").kind, DiagKind::ReservedName);
}

#[test]
fn hue_saturation_value_digits_and_threshold_arguments() {
    assert_eq!(
        one("a = region_fraction([0,0,1,1], hue=[0, 400])").kind,
        DiagKind::BadHueRange
    );
    assert_eq!(
        one("a = region_fraction([0,0,1,1], hue=[10])").kind,
        DiagKind::BadHueRange
    );
    assert_eq!(
        one("a = region_fraction([0,0,1,1], hue=5)").kind,
        DiagKind::BadHueRange
    );
    assert_eq!(
        one("a = region_fraction([0,0,1,1], hue>5)").kind,
        DiagKind::BadArgument
    );
    assert_eq!(
        one("a = region_fraction([0,0,1,1], hue=[1,2], hue=[3,4])").kind,
        DiagKind::BadHueRange
    );
    assert_eq!(
        one("a = region_fraction([0,0,1,1], saturation>1.5)").kind,
        DiagKind::BadThreshold
    );
    assert_eq!(
        one("a = region_fraction([0,0,1,1], saturation=0.5)").kind,
        DiagKind::BadArgument
    );
    assert_eq!(
        one("a = region_fraction([0,0,1,1], value>0.1, value>=0.2)").kind,
        DiagKind::BadArgument
    );
    assert!(
        check("a = region_fraction([0,0,1,1], value>0.1, value<0.9, saturation>=0, saturation<=1)")
            .is_empty()
    );
    let d = one("a = region_fraction([0,0,1,1], saturaton>0.5)");
    assert_eq!(d.kind, DiagKind::BadArgument);
    assert!(d.hint.contains("`saturation`"));
    assert_eq!(
        one("a = region_integer([0,0,1,1], digits=0)").kind,
        DiagKind::BadArgument
    );
    assert_eq!(
        one("a = region_integer([0,0,1,1], digits=2.5)").kind,
        DiagKind::BadArgument
    );
    assert_eq!(
        one("a = region_integer([0,0,1,1], hue=[1,2])").kind,
        DiagKind::BadArgument
    );
    assert_eq!(
        one("a = template_present(\"x\", 1.5)").kind,
        DiagKind::BadThreshold
    );
    assert_eq!(one("a = template_present(3, 0.5)").kind, DiagKind::BadArgument);
    assert_eq!(one("a = template_present(\"\", 0.5)").kind, DiagKind::BadArgument);
    assert_eq!(
        one("a = template_present(\"x\", 0.5, digits=3)").kind,
        DiagKind::BadArgument
    );
}

#[test]
fn lexical_errors_unterminated_string_and_arithmetic() {
    let d = one("a = template_present(\"pause, 0.9)");
    assert_eq!((d.kind, d.span.col), (DiagKind::UnterminatedString, 22));
    let d = one("a = 1\nb = a + 1 > 2");
    assert_eq!(d.kind, DiagKind::UnexpectedCharacter);
    assert!(d.message.contains("no arithmetic"));
}

#[test]
fn all_errors_in_a_file_are_reported_in_order() {
    let src = "\
# a sensor file with one error per line
Coins = region_integer([0, 0, 10, 10])
hp = region_fractoin([0, 0, 10, 10])
a = hp and 3
b = missing > 1
c = 1 < 2 < 3
d = template_present(\"x)
e = region_integer([0, 0, 0, 5])
e = 1
f = f or true
ok = true
";
    let d = check(src);
    let got: Vec<_> = d.iter().map(|d| (d.span.line, d.kind)).collect();
    assert_eq!(
        got,
        vec![
            (2, DiagKind::BadName),
            (3, DiagKind::UnknownFunction),
            (4, DiagKind::TypeMismatch),
            (5, DiagKind::UnknownName),
            (6, DiagKind::Syntax),
            (7, DiagKind::UnterminatedString),
            (8, DiagKind::BadRegion),
            (9, DiagKind::DuplicateName),
            (10, DiagKind::Cycle),
        ],
        "{d:#?}"
    );
    // Line 4 reports only the `3`: `hp` is already broken on line 3, so it does not cascade.
    assert_eq!(d[2].span, Span::new(4, 12, 1));
    let r = render_all(&d, "f.sensors", src);
    assert!(r.ends_with("f.sensors: 9 errors\n"), "{r}");
    assert_eq!(r.matches("= hint: ").count(), 9);
}

#[test]
fn comments_blank_lines_and_crlf() {
    let p = compile("# header\r\n\r\n  a = 1 # trailing\r\nb = a >= 1\r\n").unwrap();
    assert_eq!(p.len(), 2);
}

// ---------------------------------------------------------------- evaluation

/// An RGBA test frame.
struct Img {
    w: u32,
    h: u32,
    px: Vec<u8>,
}

impl Img {
    fn new(w: u32, h: u32, bg: [u8; 3]) -> Self {
        Img {
            w,
            h,
            px: [bg[0], bg[1], bg[2], 255].repeat((w * h) as usize),
        }
    }
    fn fill(&mut self, r: Rect, c: [u8; 3]) {
        for y in r.y as u32..r.y as u32 + r.h {
            for x in r.x as u32..r.x as u32 + r.w {
                let i = ((y * self.w + x) * 4) as usize;
                self.px[i..i + 3].copy_from_slice(&c);
            }
        }
    }
    fn view(&self) -> FrameView<'_> {
        FrameView::new(self.w, self.h, self.w as usize * 4, PixelFormat::Rgba, &self.px).unwrap()
    }
    fn chain(&self) -> TransformChain {
        TransformChain::new(Point::new(0, 0), Size::new(self.w, self.h))
    }
}

/// Test double for OCR: the number is the count of white 2-pixel-wide vertical bars in the region's top row;
/// a region whose first pixel is magenta (a "tooltip") has no digits.
struct BarCounter;
impl DigitReader for BarCounter {
    fn read_integer(&mut self, v: FrameView<'_>, r: Rect, _d: Option<u32>) -> Option<i64> {
        if v.rgb(r.x as u32, r.y as u32) == [255, 0, 255] {
            return None;
        }
        let mut n = 0;
        let mut prev = false;
        for x in r.x as u32..r.x as u32 + r.w {
            let on = v.rgb(x, r.y as u32 + r.h / 2) == [255, 255, 255];
            n += i64::from(on && !prev);
            prev = on;
        }
        Some(n)
    }
}

fn draw_count(img: &mut Img, region: Rect, n: u32) {
    img.fill(region, [0, 0, 0]);
    for k in 0..n {
        img.fill(
            Rect::new(region.x + 2 + 4 * k as i32, region.y, 2, region.h),
            [255, 255, 255],
        );
    }
}

const WORKED_EXAMPLE: &str = "\
carrot_count = region_integer([1700, 60, 120, 40])
health = region_fraction([40, 900, 300, 24], hue=[0, 10], saturation>0.5)
in_menu = template_present(\"pause_panel\", 0.9)
progressed = carrot_count > @carrot_count
in_danger = health < 0.3
blocked = in_menu and not progressed
";

const PANEL: Rect = Rect::new(800, 400, 40, 30);

fn draw_panel(img: &mut Img) {
    for y in 0..PANEL.h as i32 {
        for x in 0..PANEL.w as i32 {
            let on = (x / 5 + y / 3) % 2 == 0;
            img.fill(
                Rect::new(PANEL.x + x, PANEL.y + y, 1, 1),
                if on { [240, 220, 60] } else { [30, 30, 110] },
            );
        }
    }
}

/// A 1920x1080 game frame: `carrots` bars in the counter, a red health bar filled to `health`, the pause
/// panel when `menu`, a magenta tooltip over the counter when `tooltip`.
fn game_frame(carrots: u32, health: f64, menu: bool, tooltip: bool) -> Img {
    let mut img = Img::new(1920, 1080, [40, 70, 40]);
    draw_count(&mut img, Rect::new(1700, 60, 120, 40), carrots);
    img.fill(Rect::new(40, 900, 300, 24), [60, 60, 60]);
    let filled = (300.0 * health).round() as u32;
    img.fill(Rect::new(40, 900, filled, 24), [220, 20, 15]);
    if menu {
        draw_panel(&mut img);
    }
    if tooltip {
        img.fill(Rect::new(1690, 50, 200, 60), [255, 0, 255]);
    }
    img
}

struct Session {
    ev: Evaluator,
    atlas: Atlas,
    cache: RecognitionCache,
}

impl Session {
    fn new(src: &str) -> Self {
        let p = compile(src).unwrap();
        let mut atlas = Atlas::new();
        let mut with_panel = Img::new(1920, 1080, [40, 70, 40]);
        draw_panel(&mut with_panel);
        atlas.insert(
            "pause_panel",
            Template::from_frame(&with_panel.view(), PANEL, 4).unwrap(),
        );
        Session {
            ev: Evaluator::new(p, Size::new(1920, 1080)),
            atlas,
            cache: RecognitionCache::default(),
        }
    }

    /// One tick, then (as the CLI does) read what was queued and recompute; returns the values by name.
    fn tick(&mut self, img: &Img, wait_for_ocr: bool) -> Vec<(String, Value)> {
        let mut ctx = EvalContext {
            frame: img.view(),
            chain: img.chain(),
            atlas: &self.atlas,
            recognition: &mut self.cache,
        };
        self.ev.tick(&mut ctx);
        if wait_for_ocr && ctx.recognition.fulfil_all_with(&mut BarCounter) > 0 {
            self.ev.recompute(&mut ctx);
        }
        self.named()
    }

    fn named(&self) -> Vec<(String, Value)> {
        self.ev
            .program()
            .sensors()
            .iter()
            .map(|s| s.name.clone())
            .zip(self.ev.values().iter().copied())
            .collect()
    }
}

fn vals(v: &[(String, Value)]) -> Vec<Value> {
    v.iter().map(|(_, v)| *v).collect()
}

use Value::{Bool as B, Int as I, Undefined as U};

#[test]
fn worked_example_over_synthetic_frames() {
    // FR-PERC-008, FR-LOOP-004: the spec's worked example with known truth on each frame.
    let mut s = Session::new(WORKED_EXAMPLE);
    // Tick 1: 3 carrots, health 80 %, no menu. No previous tick: progressed is undefined, not false.
    let v = s.tick(&game_frame(3, 0.8, false, false), true);
    assert_eq!(v[1].1.as_f64().map(|x| (x * 100.0).round()), Some(80.0));
    assert_eq!(vals(&v), vec![I(3), v[1].1, B(false), U, B(false), B(false)]);
    // Tick 2: a carrot collected, health down to 20 %.
    let v = s.tick(&game_frame(4, 0.2, false, false), true);
    assert_eq!(vals(&v)[0], I(4));
    assert_eq!(vals(&v)[2..], [B(false), B(true), B(true), B(false)]);
    // Tick 3: the pause menu opened, counter unchanged: blocked.
    let v = s.tick(&game_frame(4, 0.2, true, false), true);
    assert_eq!(vals(&v)[2..], [B(true), B(false), B(true), B(true)]);
    // Tick 4: a tooltip covers the counter: undefined, and so is everything built on it — never zero.
    let v = s.tick(&game_frame(4, 0.2, true, true), true);
    assert_eq!(vals(&v)[0], U);
    assert_eq!(vals(&v)[3], U, "progressed is inconclusive, not false");
    assert_eq!(vals(&v)[5], U, "in_menu and not undefined is undefined");
    // Tick 5: tooltip gone, menu closed, a carrot collected meanwhile: @carrot_count is the last
    // reading (4, before the tooltip), so the rise is seen; not blocked.
    let v = s.tick(&game_frame(5, 0.5, false, false), true);
    assert_eq!(vals(&v)[0], I(5));
    assert_eq!(vals(&v)[3], B(true));
    assert_eq!(vals(&v)[5], B(false));
    // Tick 6: unchanged: no progress.
    let v = s.tick(&game_frame(5, 0.5, false, false), true);
    assert_eq!(vals(&v)[3], B(false));
}

#[test]
fn region_integer_never_blocks_and_is_undefined_until_read() {
    // FR-PERC-008: in a reflex tick the value is undefined until the worker has read the content.
    let mut s = Session::new("c = region_integer([1700, 60, 120, 40], digits=2)\nup = c > @c");
    let v = s.tick(&game_frame(3, 1.0, false, false), false);
    assert_eq!(vals(&v), vec![U, U]);
    assert_eq!(s.cache.queued(), 1);
    s.cache.fulfil_all_with(&mut BarCounter);
    let v = s.tick(&game_frame(3, 1.0, false, false), false);
    assert_eq!(vals(&v), vec![I(3), U]);
    let v = s.tick(&game_frame(4, 1.0, false, false), false);
    assert_eq!(
        vals(&v),
        vec![U, U],
        "changed content: undefined, not the stale 3"
    );
    s.cache.fulfil_all_with(&mut BarCounter);
    // Read: the rise from the last reading (3) is seen on this one tick, though the tick before was
    // undefined (`x > @x` would never be true otherwise: every change of digits is unread for a tick).
    let v = s.tick(&game_frame(4, 1.0, false, false), false);
    assert_eq!(vals(&v), vec![I(4), B(true)]);
    let v = s.tick(&game_frame(4, 1.0, false, false), false);
    assert_eq!(vals(&v), vec![I(4), B(false)]);
    // digits=2: a reading with more digits is rejected as undefined.
    let mut s = Session::new("c = region_integer([1700, 60, 120, 40], digits=1)");
    let v = s.tick(&game_frame(12, 1.0, false, false), true);
    assert_eq!(vals(&v), vec![U]);
}

#[test]
fn every_operator_through_the_evaluator() {
    let src = "\
n = region_fraction([0, 0, 10, 10], hue=[100, 140])
lt = n < 0.5
le = n <= 0.5
gt = n > 0.5
ge = n >= 0.5
eq = n == 0.5
ne = n != 0.5
t = true
f = false
an = t and not f
o = f or t
lit = 3 > 2.5
neg = -1 < 0
par = not (f or f) and (t or f)
pn = @n
rising = n > @n
";
    let mut s = Session::new(src);
    let mut img = Img::new(20, 20, [0, 0, 0]);
    img.fill(Rect::new(0, 0, 10, 5), [0, 200, 0]);
    s.ev = Evaluator::new(compile(src).unwrap(), Size::new(20, 20));
    let v = s.tick(&img, false);
    let got: Vec<_> = v.iter().map(|(n, v)| format!("{n}={v}")).collect();
    assert_eq!(
        got.join(" "),
        "n=0.5 lt=false le=true gt=false ge=true eq=true ne=false t=true f=false an=true o=true lit=true neg=true par=true pn=undefined rising=undefined"
    );
    img.fill(Rect::new(0, 5, 10, 3), [0, 200, 0]);
    let v = s.tick(&img, false);
    let got: Vec<_> = v.iter().map(|(n, v)| format!("{n}={v}")).collect();
    assert!(
        got.join(" ")
            .starts_with("n=0.8 lt=false le=false gt=true ge=true eq=false ne=true"),
        "{got:?}"
    );
    assert!(got.join(" ").ends_with("pn=0.5 rising=true"), "{got:?}");
}

#[test]
fn undefined_primitives_propagate_through_every_operator() {
    // Out-of-frame region, missing template, unread integer: each undefined, and so is what depends on them,
    // except where Kleene logic decides anyway.
    let src = "\
off = region_fraction([500, 500, 10, 10])
tpl = template_present(\"nope\", 0.5)
num = region_integer([0, 0, 4, 4])
c1 = off > 0.1
c2 = num == 0
n1 = not tpl
a1 = tpl and false
a2 = tpl and true
o1 = tpl or true
o2 = tpl or false
";
    let img = Img::new(20, 20, [0, 0, 0]);
    let mut s = Session::new(src);
    s.ev = Evaluator::new(compile(src).unwrap(), Size::new(20, 20));
    let v = s.tick(&img, false);
    assert_eq!(vals(&v), vec![U, U, U, U, U, U, B(false), U, B(true), U]);
}

#[test]
fn regions_rescale_on_resize_and_are_undefined_on_the_tick_of_change() {
    // FR-PERC-008 / decisions.md: regions follow the transform chain; undefined on the resize tick.
    let src = "g = region_fraction([10, 10, 20, 10], hue=[100, 140], saturation>0.5)";
    let p = compile(src).unwrap();
    let mut ev = Evaluator::new(p, Size::new(100, 50));
    let mut cache = RecognitionCache::default();
    let mut big = Img::new(100, 50, [0, 0, 0]);
    big.fill(Rect::new(10, 10, 10, 10), [0, 200, 0]);
    let mut ctx = EvalContext {
        frame: big.view(),
        chain: big.chain(),
        atlas: &NoTemplates,
        recognition: &mut cache,
    };
    assert_eq!(ev.tick(&mut ctx), &[Value::Num(0.5)]);
    // The window shrinks to half: the same picture at half scale.
    let mut small = Img::new(50, 25, [0, 0, 0]);
    small.fill(Rect::new(5, 5, 5, 5), [0, 200, 0]);
    let mut ctx = EvalContext {
        frame: small.view(),
        chain: small.chain(),
        atlas: &NoTemplates,
        recognition: &mut cache,
    };
    assert_eq!(ev.tick(&mut ctx), &[U]);
    assert_eq!(ev.region_of(0), Some(Rect::new(5, 5, 10, 5)));
    assert_eq!(ev.tick(&mut ctx), &[Value::Num(0.5)]);
    // A frame that does not match its chain is undefined rather than misread.
    let mut ctx = EvalContext {
        frame: big.view(),
        chain: small.chain(),
        atlas: &NoTemplates,
        recognition: &mut cache,
    };
    assert_eq!(ev.tick(&mut ctx), &[U]);
}

#[test]
fn postconditions_and_stuck_signals_use_the_same_compiled_form() {
    // FR-LOOP-004: a subgoal postcondition is an expression; undefined is inconclusive (INV-GND-001).
    let mut s = Session::new(WORKED_EXAMPLE);
    let post =
        s.ev.program()
            .compile_expression("carrot_count > @carrot_count")
            .unwrap();
    let stuck =
        s.ev.program()
            .compile_expression("blocked or region_fraction([40, 900, 300, 24], hue=[0, 10]) < 0.1")
            .unwrap();
    assert_eq!(post.ty, Type::Bool);
    assert_eq!(stuck.primitives().len(), 1);
    let verdicts = |s: &mut Session, img: &Img| {
        let mut ctx = EvalContext {
            frame: img.view(),
            chain: img.chain(),
            atlas: &s.atlas,
            recognition: &mut s.cache,
        };
        (s.ev.verdict(&post, &mut ctx), s.ev.verdict(&stuck, &mut ctx))
    };
    let f1 = game_frame(3, 0.8, false, false);
    s.tick(&f1, true);
    assert_eq!(verdicts(&mut s, &f1), (Verdict::Inconclusive, Verdict::Refuted));
    let f2 = game_frame(4, 0.05, false, false);
    s.tick(&f2, true);
    assert_eq!(verdicts(&mut s, &f2), (Verdict::Confirmed, Verdict::Confirmed));
    let f3 = game_frame(4, 0.8, false, false);
    s.tick(&f3, true);
    assert_eq!(verdicts(&mut s, &f3), (Verdict::Refuted, Verdict::Refuted));
    // Errors in a postcondition are diagnostics like any other.
    let e = s.ev.program().compile_expression("carrot_cont > 1").unwrap_err();
    assert_eq!(e.diagnostics()[0].kind, DiagKind::UnknownName);
    assert!(s.ev.program().compile_expression("x = 1").is_err());
    assert!(s.ev.program().compile_expression("").is_err());
    assert!(s.ev.program().compile_expression("a\nb").is_err());
    // An expression compiled for another program is undefined, not misread.
    let other = compile("z = true").unwrap().compile_expression("z").unwrap();
    let mut ctx = EvalContext {
        frame: f3.view(),
        chain: f3.chain(),
        atlas: &s.atlas,
        recognition: &mut s.cache,
    };
    assert_eq!(s.ev.verdict(&other, &mut ctx), Verdict::Inconclusive);
}

#[test]
fn identical_primitives_are_evaluated_once() {
    let p = compile("a = region_integer([0, 0, 5, 5]) > 1\nb = region_integer([0, 0, 5, 5]) < 9").unwrap();
    assert_eq!(p.primitives().len(), 1);
}

// ---------------------------------------------------------------- property test (the fuzz target's twin)

/// Deterministic token soups and mutated valid files: compile, and if it compiles, evaluate for a few ticks.
/// Nothing may panic; every diagnostic must point inside the source. Runs in `cargo test`; the cargo-fuzz
/// target in fuzz/ drives the same entry point.
#[test]
fn token_soup_never_panics() {
    use rand::{Rng, SeedableRng};
    let pieces = [
        "a",
        "b",
        "c_1",
        "Health",
        "=",
        "==",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "and",
        "or",
        "not",
        "true",
        "false",
        "@",
        "@a",
        "(",
        ")",
        "[",
        "]",
        ",",
        "0",
        "1",
        "0.5",
        "-3",
        "360",
        "99999999999999999999",
        "1.2.3",
        "\"",
        "\"x\"",
        "region_fraction",
        "region_integer",
        "template_present",
        "hue",
        "saturation",
        "value",
        "digits",
        "#",
        "\n",
        " ",
        "\t",
        "+",
        "!",
        "é",
        "[0, 0, 4, 4]",
        "hue=[350, 10]",
        "saturation>0.5",
        "digits=3",
    ];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x005e_450e);
    let img = Img::new(16, 16, [200, 30, 30]);
    for _ in 0..4000 {
        let mut src = String::new();
        if rng.gen_bool(0.5) {
            src.push_str(WORKED_EXAMPLE);
        }
        let n = rng.gen_range(0..40);
        for _ in 0..n {
            src.push_str(pieces[rng.gen_range(0..pieces.len())]);
            if rng.gen_bool(0.6) {
                src.push(' ');
            }
        }
        fuzz_one(&src, &img);
    }
}

fn fuzz_one(src: &str, _img: &Img) {
    crate::fuzzing::exercise(src);
}

/// Inputs that once broke the parser or checker, kept as regressions (from the fuzz target and the soup).
#[test]
fn fuzz_regressions() {
    let img = Img::new(16, 16, [0, 0, 0]);
    for src in FUZZ_REGRESSIONS {
        fuzz_one(src, &img);
    }
}

const FUZZ_REGRESSIONS: &[&str] = &[
    "",
    "=",
    "a =",
    "a = (",
    "a = [[[[[[",
    "a = @",
    "a = not",
    "a = region_integer([0,0,1,1]",
    "a = \"",
    "a = -",
    "a = -.",
    "a = .",
];
