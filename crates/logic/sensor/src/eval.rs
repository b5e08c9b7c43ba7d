//! The tri-state evaluator: runs a compiled program over one frame per reflex tick in constant time,
//! reading only the declared regions; keeps the previous tick's values for `@name`.

use crate::pixels::{region_fraction, PixelFilter};
use crate::program::{Expression, Op, Primitive, Program};
use crate::recognition::{Lookup, RecognitionCache};
use crate::template::TemplateAtlas;
use crate::value::{verdict_of, Value, Verdict};
use gamepilot_core::{FrameView, Rect, Size, TransformChain};

/// What one evaluation reads: the frame (capture space), the transform chain it was captured under,
/// the session's template atlas and the recognition cache.
pub struct EvalContext<'a> {
    pub frame: FrameView<'a>,
    pub chain: TransformChain,
    pub atlas: &'a dyn TemplateAtlas,
    pub recognition: &'a mut RecognitionCache,
}

/// Evaluates one program tick after tick.
#[derive(Debug, Clone)]
pub struct Evaluator {
    program: Program,
    filters: Vec<Option<PixelFilter>>,
    /// Capture size the regions were declared against.
    declared: Size,
    /// Capture size of the last tick; regions are rescaled when it changes.
    capture: Option<Size>,
    rects: Vec<Option<Rect>>,
    resized_this_tick: bool,
    prim_vals: Vec<Value>,
    cur: Vec<Value>,
    prev: Vec<Value>,
    stack: Vec<Value>,
    scratch: Vec<u8>,
    /// Primitive values of the expression being evaluated (reused; no allocation per call).
    expr_vals: Vec<Value>,
    ticks: u64,
}

impl Evaluator {
    /// An evaluator for `program` whose regions are in the capture space of size `declared`.
    pub fn new(program: Program, declared: Size) -> Self {
        let n = program.sensors.len();
        let filters = program
            .prims
            .iter()
            .map(|p| match p {
                Primitive::Fraction(f) => Some(PixelFilter::new(f)),
                _ => None,
            })
            .collect();
        let rects = program.prims.iter().map(|p| p.region()).collect();
        let np = program.prims.len();
        let depth = program.max_stack.max(1);
        Evaluator {
            program,
            filters,
            declared,
            capture: None,
            rects,
            resized_this_tick: false,
            prim_vals: vec![Value::Undefined; np],
            cur: vec![Value::Undefined; n],
            prev: vec![Value::Undefined; n],
            stack: Vec::with_capacity(depth),
            scratch: Vec::new(),
            expr_vals: Vec::new(),
            ticks: 0,
        }
    }

    pub fn program(&self) -> &Program {
        &self.program
    }

    /// This tick's values, in declaration order.
    pub fn values(&self) -> &[Value] {
        &self.cur
    }

    /// Each sensor's last reading before this tick (what `@name` reads).
    pub fn previous(&self) -> &[Value] {
        &self.prev
    }

    pub fn value(&self, name: &str) -> Option<Value> {
        self.program.index_of(name).and_then(|i| self.cur.get(i).copied())
    }

    pub fn ticks(&self) -> u64 {
        self.ticks
    }

    /// The capture-space rectangle primitive `k` reads now (after any rescale).
    pub fn region_of(&self, k: usize) -> Option<Rect> {
        self.rects.get(k).copied().flatten()
    }

    /// One reflex tick: this tick's defined values become the previous ones (`@name` is a sensor's last
    /// reading: a counter read asynchronously is undefined on the tick its digits change, so with the
    /// previous tick's value alone `x > @x` would never see a rise), then every sensor is evaluated.
    pub fn tick(&mut self, ctx: &mut EvalContext<'_>) -> &[Value] {
        for (prev, cur) in self.prev.iter_mut().zip(&self.cur) {
            if !matches!(cur, Value::Undefined) {
                *prev = *cur;
            }
        }
        self.ticks += 1;
        let size = ctx.chain.capture_size;
        self.resized_this_tick = false;
        match self.capture {
            Some(old) if old == size => {}
            old => {
                // Regions follow the window through the transform chain; on the tick of a change every
                // primitive is undefined (the frame may still be mid-resize).
                self.rects = self
                    .program
                    .prims
                    .iter()
                    .map(|p| p.region().map(|r| ctx.chain.rescale_rect_from(r, self.declared)))
                    .collect();
                self.resized_this_tick = old.is_some();
                self.capture = Some(size);
            }
        }
        self.compute(ctx);
        &self.cur
    }

    /// Evaluate the current tick again without advancing (e.g. after recognition results arrived).
    pub fn recompute(&mut self, ctx: &mut EvalContext<'_>) -> &[Value] {
        self.compute(ctx);
        &self.cur
    }

    fn compute(&mut self, ctx: &mut EvalContext<'_>) {
        let consistent = ctx.frame.size() == ctx.chain.capture_size && !self.resized_this_tick;
        for k in 0..self.program.prims.len() {
            let v = if consistent {
                eval_prim(
                    &self.program.prims[k],
                    self.filters[k].as_ref(),
                    self.rects[k],
                    ctx,
                    &mut self.scratch,
                )
            } else {
                Value::Undefined
            };
            self.prim_vals[k] = v;
        }
        for i in 0..self.program.sensors.len() {
            let range = self.program.sensors[i].code.clone();
            let code = self.program.code.get(range).unwrap_or(&[]);
            let v = run(code, &self.prim_vals, &self.cur, &self.prev, &mut self.stack);
            self.cur[i] = v;
        }
    }

    /// Evaluate a compiled expression (postcondition or stuck signal) against this tick's values and frame.
    /// Undefined when the expression was compiled against another program.
    pub fn evaluate(&mut self, expr: &Expression, ctx: &mut EvalContext<'_>) -> Value {
        if expr.sensor_count != self.program.sensors.len() {
            return Value::Undefined;
        }
        let consistent = ctx.frame.size() == ctx.chain.capture_size && !self.resized_this_tick;
        let mut vals = std::mem::take(&mut self.expr_vals);
        vals.clear();
        for (p, filter) in expr.prims.iter().zip(&expr.filters) {
            let rect = p.region().map(|r| ctx.chain.rescale_rect_from(r, self.declared));
            vals.push(if consistent {
                eval_prim(p, filter.as_ref(), rect, ctx, &mut self.scratch)
            } else {
                Value::Undefined
            });
        }
        let v = run(&expr.code, &vals, &self.cur, &self.prev, &mut self.stack);
        self.expr_vals = vals;
        v
    }

    /// The verdict of a postcondition now: confirmed, refuted, or inconclusive when undefined (INV-GND-001).
    pub fn verdict(&mut self, expr: &Expression, ctx: &mut EvalContext<'_>) -> Verdict {
        verdict_of(self.evaluate(expr, ctx))
    }
}

/// An expression's value from sensor values alone (this tick's `cur`, the previous tick's `prev`, in the
/// program's declaration order): for a caller that knows what the sensors read but holds no frame (the
/// session judging whether a proposed postcondition is already true). `None` when the expression reads
/// pixels itself (a primitive) or was compiled against a program of another size.
pub fn evaluate_values(expr: &Expression, cur: &[Value], prev: &[Value]) -> Option<Value> {
    if !expr.prims.is_empty() || expr.sensor_count != cur.len() || prev.len() != cur.len() {
        return None;
    }
    let mut stack = Vec::with_capacity(expr.max_stack.max(1));
    Some(run(&expr.code, &[], cur, prev, &mut stack))
}

fn eval_prim(
    p: &Primitive,
    filter: Option<&PixelFilter>,
    rect: Option<Rect>,
    ctx: &mut EvalContext<'_>,
    scratch: &mut Vec<u8>,
) -> Value {
    match p {
        Primitive::Fraction(_) => match (rect, filter) {
            (Some(r), Some(f)) => region_fraction(&ctx.frame, r, f)
                .map(Value::Num)
                .unwrap_or_default(),
            _ => Value::Undefined,
        },
        Primitive::Integer { digits, .. } => {
            let Some(r) = rect else { return Value::Undefined };
            match ctx.recognition.lookup(&ctx.frame, r, *digits) {
                Lookup::Read(Some(n)) if !matches!(digits, Some(d) if digit_count(n) > *d) => Value::Int(n),
                _ => Value::Undefined,
            }
        }
        Primitive::Template { name, threshold } => match ctx.atlas.template(name) {
            Some(t) => t
                .present(&ctx.frame, *threshold, scratch)
                .map(Value::Bool)
                .unwrap_or_default(),
            None => Value::Undefined,
        },
    }
}

fn digit_count(n: i64) -> u32 {
    let mut n = n.unsigned_abs();
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Run flat postfix code. Malformed code (impossible from the compiler) yields undefined, never a panic.
fn run(code: &[Op], prims: &[Value], cur: &[Value], prev: &[Value], stack: &mut Vec<Value>) -> Value {
    stack.clear();
    for op in code {
        let v = match *op {
            Op::Bool(b) => Value::Bool(b),
            Op::Int(i) => Value::Int(i),
            Op::Num(x) => Value::Num(x),
            Op::Prim(k) => prims.get(k as usize).copied().unwrap_or_default(),
            Op::Cur(j) => cur.get(j as usize).copied().unwrap_or_default(),
            Op::Prev(j) => prev.get(j as usize).copied().unwrap_or_default(),
            Op::Not => !stack.pop().unwrap_or_default(),
            Op::And | Op::Or | Op::Cmp(_) => {
                let b = stack.pop().unwrap_or_default();
                let a = stack.pop().unwrap_or_default();
                match *op {
                    Op::And => a.and(b),
                    Op::Or => a.or(b),
                    Op::Cmp(c) => a.compare(c, b),
                    _ => Value::Undefined,
                }
            }
        };
        stack.push(v);
    }
    stack.pop().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digit_counts() {
        assert_eq!(digit_count(0), 1);
        assert_eq!(digit_count(9), 1);
        assert_eq!(digit_count(10), 2);
        assert_eq!(digit_count(-123456), 6);
        assert_eq!(digit_count(i64::MIN), 19);
    }

    #[test]
    fn malformed_code_is_undefined_not_a_panic() {
        let mut st = Vec::new();
        assert_eq!(run(&[Op::And], &[], &[], &[], &mut st), Value::Undefined);
        assert_eq!(
            run(
                &[Op::Prim(9), Op::Cur(3), Op::Prev(7), Op::Or],
                &[],
                &[],
                &[],
                &mut st
            ),
            Value::Undefined
        );
        assert_eq!(run(&[], &[], &[], &[], &mut st), Value::Undefined);
    }
}
