//! Criterion bench: the cost of one executor tick with 8 sustained actions running (NFR-ACT-001).
#![allow(clippy::expect_used)]

use criterion::{criterion_group, criterion_main, Criterion};
use gamepilot_core::action::Intention;
use gamepilot_core::{MonoTime, Point, Size, TransformChain};
use gamepilot_executor::{Executor, ExecutorConfig, SubmitContext, TickInput};

fn eight_sustained() -> Executor {
    let mut ex = Executor::new(ExecutorConfig {
        max_actions_per_s: 100,
        ..Default::default()
    });
    let chain = TransformChain::new(Point::new(0, 0), Size::new(1280, 720));
    let ctx = SubmitContext {
        now: MonoTime::ZERO,
        foreground: true,
        chain: Some(chain),
    };
    for j in [
        r#"{"action":"hold_key","key":"w","duration_ms":9000}"#,
        r#"{"action":"hold_key","key":"a","duration_ms":9000}"#,
        r#"{"action":"hold_key","key":"shift","duration_ms":9000}"#,
        r#"{"action":"hold_key","key":"e","duration_ms":9000}"#,
        r#"{"action":"hold_key","key":"space","duration_ms":9000}"#,
        r#"{"action":"hold_button","button":"left","duration_ms":9000}"#,
        r#"{"action":"hold_button","button":"right","duration_ms":9000}"#,
        r#"{"action":"camera","dx":4000,"dy":300,"duration_ms":9000}"#,
    ] {
        let i: Intention = serde_json::from_str(j).expect("valid");
        ex.submit(&i, &ctx).expect("accepted");
    }
    ex
}

fn bench(c: &mut Criterion) {
    let chain = TransformChain::new(Point::new(0, 0), Size::new(1280, 720));
    c.bench_function("executor tick, 8 sustained actions", |b| {
        let mut ex = eight_sustained();
        let mut t = 0u64;
        b.iter(|| {
            t += 16_667;
            if t > 8_000_000 {
                ex = eight_sustained();
                t = 16_667;
            }
            let out = ex.tick(&TickInput {
                now: MonoTime(t),
                halt: false,
                foreground: true,
                chain: Some(chain),
                pointer: Some(Point::new(5, 5)),
            });
            criterion::black_box(out);
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
