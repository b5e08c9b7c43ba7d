//! Criterion bench: one planner + grounding step (a reflex tick, an evidence sample, a proposed action).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use gamepilot_core::{ElementId, MonoTime, SubgoalId};
use gamepilot_grounding::{ActionId, Evidence, ExpectedChange, Target};
use gamepilot_planner::{
    Budget, Event, FrameChange, LoopConfig, LoopState, PlanSpec, PostconditionRef, SubgoalSpec,
};

fn ready_state() -> LoopState {
    let mut s = LoopState::new(LoopConfig::default());
    s.step(Event::Start { goal: "bench".into() }, MonoTime::ZERO);
    let plan = PlanSpec {
        subgoals: vec![SubgoalSpec {
            id: SubgoalId(1),
            description: "bench".into(),
            postcondition: PostconditionRef {
                source: "done".into(),
                handle: 1,
            },
            budget: Budget {
                max_time_ms: Some(u64::MAX / 2),
                max_actions: Some(u32::MAX),
            },
        }],
    };
    s.step(
        Event::DeliberationDone {
            pass: 1,
            plan: Some(plan),
        },
        MonoTime::from_millis(1),
    );
    s
}

fn bench_step(c: &mut Criterion) {
    let mut s = ready_state();
    let mut t = 10_000u64;
    let mut n = 0u64;
    c.bench_function("planner_grounding_step", |b| {
        b.iter(|| {
            t += 16_667;
            n += 1;
            let now = MonoTime(t);
            let a = s.step(
                Event::ReflexTick {
                    tick: n,
                    change: FrameChange::Local,
                    signature: n % 7,
                    held: 1,
                    progress: Some(n as f64),
                    goal_met: Some(false),
                    subgoal: None,
                },
                now,
            );
            let b2 = s.step(
                Event::Observation {
                    scene: "world".into(),
                    signature: n,
                },
                now,
            );
            let c2 = s.step(
                Event::ActionProposed {
                    action: ActionId(n),
                    key: format!("click {}", n % 5),
                    target: Some(Target::Mark {
                        element: ElementId((n % 5) as u32),
                    }),
                    path: None,
                    expected: ExpectedChange::ElementChanged {
                        element: ElementId((n % 5) as u32),
                    },
                    settle_ms: Some(100),
                },
                now,
            );
            let d = s.step(
                Event::Evidence {
                    action: ActionId(n),
                    evidence: Evidence::ElementChanged { changed: Some(true) },
                    facts: Default::default(),
                },
                now,
            );
            black_box((a, b2, c2, d))
        })
    });
}

criterion_group!(benches, bench_step);
criterion_main!(benches);
