//! Unit tests of the executor tick: ordering, reconciliation, ownership, conflicts, budgets, denied keys.

use super::*;
use gamepilot_core::action::MouseButton;
use gamepilot_core::{ScreenPoint, Size};

const TICK: u64 = 16_667;

fn chain() -> TransformChain {
    TransformChain::new(Point::new(100, 50), Size::new(640, 480))
}

fn input(now: MonoTime) -> TickInput {
    TickInput {
        now,
        halt: false,
        foreground: true,
        chain: Some(chain()),
        pointer: Some(Point::new(10, 10)),
    }
}

fn ctx(now: MonoTime) -> SubmitContext {
    SubmitContext {
        now,
        foreground: true,
        chain: Some(chain()),
    }
}

fn intent(json: &str) -> Intention {
    serde_json::from_str(json).unwrap()
}

fn sym(name: &str) -> Keysym {
    Keysym::from_name(name).unwrap()
}

fn key(name: &str, down: bool) -> InputEvent {
    InputEvent::Key { sym: sym(name), down }
}

/// Run ticks from `from` for `ms`, collecting every event with its tick time.
fn run(ex: &mut Executor, from: MonoTime, ms: u64) -> (Vec<(MonoTime, InputEvent)>, Vec<Report>, MonoTime) {
    let mut events = Vec::new();
    let mut reports = Vec::new();
    let mut t = from;
    let end = from.plus(Duration::from_millis(ms));
    while t <= end {
        let out = ex.tick(&input(t));
        events.extend(out.events.into_iter().map(|e| (t, e)));
        reports.extend(out.reports);
        t = MonoTime(t.0 + TICK);
    }
    (events, reports, t)
}

fn count(events: &[(MonoTime, InputEvent)], e: InputEvent) -> usize {
    events.iter().filter(|(_, x)| *x == e).count()
}

#[test]
fn held_key_emits_one_press_and_one_release() {
    // FR-ACT-002, ADR-0035 step 4: a key that stays held emits nothing
    let mut ex = Executor::new(ExecutorConfig::default());
    ex.submit(
        &intent(r#"{"action":"hold_key","key":"w","duration_ms":1500}"#),
        &ctx(MonoTime::ZERO),
    )
    .unwrap();
    let (events, reports, _) = run(&mut ex, MonoTime::ZERO, 2000);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0], (MonoTime::ZERO, key("w", true)));
    assert_eq!(events[1].1, key("w", false));
    let held_ms = events[1].0.since(events[0].0).as_millis();
    assert!((1500..1520).contains(&held_ms), "held {held_ms} ms");
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].kind, ActionEnd::Finished);
    assert!(ex.held().is_empty());
}

#[test]
fn hold_and_camera_and_button_compose() {
    // FR-ACT-003, FR-ACT-004
    let mut ex = Executor::new(ExecutorConfig::default());
    let c = ctx(MonoTime::ZERO);
    ex.submit(
        &intent(r#"{"action":"hold_key","key":"w","duration_ms":1500}"#),
        &c,
    )
    .unwrap();
    ex.submit(
        &intent(r#"{"action":"camera","dx":300,"dy":-40,"duration_ms":400}"#),
        &c,
    )
    .unwrap();
    ex.submit(
        &intent(r#"{"action":"hold_button","button":"left","duration_ms":500}"#),
        &c,
    )
    .unwrap();
    let (events, _, _) = run(&mut ex, MonoTime::ZERO, 1600);
    assert_eq!(count(&events, key("w", true)), 1);
    assert_eq!(count(&events, key("w", false)), 1);
    assert_eq!(
        count(
            &events,
            InputEvent::Button {
                button: 1,
                down: true
            }
        ),
        1
    );
    assert_eq!(
        count(
            &events,
            InputEvent::Button {
                button: 1,
                down: false
            }
        ),
        1
    );
    let rel: Vec<(i32, i32)> = events
        .iter()
        .filter_map(|(_, e)| {
            if let InputEvent::MotionRelative { dx, dy } = e {
                Some((*dx, *dy))
            } else {
                None
            }
        })
        .collect();
    assert!(
        rel.len() >= 20,
        "camera must be many small steps, got {}",
        rel.len()
    );
    assert!(rel.iter().all(|(dx, dy)| dx.abs() <= 20 && dy.abs() <= 5));
    assert_eq!(rel.iter().fold((0, 0), |a, s| (a.0 + s.0, a.1 + s.1)), (300, -40));
    // No cursor warps for the camera.
    assert!(!events.iter().any(|(_, e)| matches!(e, InputEvent::MotionTo(_))));
}

#[test]
fn contending_actions_are_rejected_with_reasons() {
    // FR-ACT-003
    let mut ex = Executor::new(ExecutorConfig::default());
    let c = ctx(MonoTime::ZERO);
    let first = ex
        .submit(
            &intent(r#"{"action":"hold_key","key":"w","duration_ms":1500,"subgoal":1}"#),
            &c,
        )
        .unwrap();
    let e = ex
        .submit(&intent(r#"{"action":"key","key":"W"}"#), &c)
        .unwrap_err();
    assert_eq!(
        e.reason,
        RejectReason::Conflict {
            resource: "w".into(),
            with: first,
            owner: SubgoalId(1)
        }
    );
    let cam = ex
        .submit(
            &intent(r#"{"action":"camera","dx":50,"dy":0,"duration_ms":400}"#),
            &c,
        )
        .unwrap();
    let e = ex
        .submit(&intent(r#"{"action":"click","x":5,"y":5}"#), &c)
        .unwrap_err();
    assert!(
        matches!(e.reason, RejectReason::Conflict { with, .. } if with == cam),
        "{e}"
    );
    // A different key composes.
    ex.submit(
        &intent(r#"{"action":"hold_key","key":"shift","duration_ms":100}"#),
        &c,
    )
    .unwrap();
}

#[test]
fn selective_cancellation_releases_only_that_owner() {
    // ADR-0035 ownership, INV-LOOP-002, FR-ACT-007
    let mut ex = Executor::new(ExecutorConfig::default());
    let c = ctx(MonoTime::ZERO);
    ex.submit(
        &intent(r#"{"action":"hold_key","key":"w","duration_ms":3000,"subgoal":1}"#),
        &c,
    )
    .unwrap();
    ex.submit(
        &intent(r#"{"action":"hold_key","key":"d","duration_ms":3000,"subgoal":2}"#),
        &c,
    )
    .unwrap();
    let (_, _, t) = run(&mut ex, MonoTime::ZERO, 100);
    assert_eq!(ex.held().len(), 2);
    let w = ex.held().get(&HeldInput::Key(sym("w"))).copied().unwrap();
    assert_eq!((w.owner, w.since), (SubgoalId(1), MonoTime::ZERO));
    let reports = ex.cancel_owner(SubgoalId(1));
    assert_eq!(reports.len(), 1);
    assert_eq!(
        reports[0].kind,
        ActionEnd::Cancelled {
            reason: CancelReason::Owner
        }
    );
    let out = ex.tick(&input(t));
    assert_eq!(out.events, vec![key("w", false)]);
    assert!(out.held_changed);
    assert_eq!(ex.held().keys().collect::<Vec<_>>(), vec![sym("d")]);
}

#[test]
fn halt_flag_is_step_one() {
    // ADR-0035 step 1, INV-SAFE-002: release everything; nothing below runs (even without focus)
    let mut ex = Executor::new(ExecutorConfig::default());
    ex.submit(
        &intent(r#"{"action":"hold_key","key":"w","duration_ms":3000}"#),
        &ctx(MonoTime::ZERO),
    )
    .unwrap();
    ex.submit(
        &intent(r#"{"action":"hold_button","duration_ms":3000}"#),
        &ctx(MonoTime::ZERO),
    )
    .unwrap();
    let (_, _, t) = run(&mut ex, MonoTime::ZERO, 50);
    let mut i = input(t);
    i.halt = true;
    i.foreground = false;
    let out = ex.tick(&i);
    assert_eq!(
        out.events,
        vec![
            key("w", false),
            InputEvent::Button {
                button: 1,
                down: false
            }
        ]
    );
    assert!(out.reports.iter().all(|r| r.kind
        == ActionEnd::Cancelled {
            reason: CancelReason::Halted
        }));
    assert_eq!(
        ex.state(),
        ExecState::Halted {
            reason: HaltReason::HaltFlag
        }
    );
    let e = ex
        .submit(&intent(r#"{"action":"key","key":"a"}"#), &ctx(t))
        .unwrap_err();
    assert_eq!(e.reason, RejectReason::Halted);
    // Stays halted and silent even once the flag clears, until re-armed.
    assert!(ex.tick(&input(MonoTime(t.0 + TICK))).events.is_empty());
    ex.rearm();
    assert_eq!(ex.state(), ExecState::Armed);
}

#[test]
fn foreground_guard_releases_and_emits_nothing_else() {
    // INV-ACT-001: no event while not foreground; released within one tick
    let mut ex = Executor::new(ExecutorConfig::default());
    let c = ctx(MonoTime::ZERO);
    ex.submit(
        &intent(r#"{"action":"hold_key","key":"w","duration_ms":3000}"#),
        &c,
    )
    .unwrap();
    ex.submit(
        &intent(r#"{"action":"camera","dx":300,"dy":0,"duration_ms":1000}"#),
        &c,
    )
    .unwrap();
    let (_, _, t) = run(&mut ex, MonoTime::ZERO, 100);
    let mut i = input(t);
    i.foreground = false;
    let out = ex.tick(&i);
    assert_eq!(out.events, vec![key("w", false)]);
    assert_eq!(out.reports.len(), 2);
    for k in 1..10 {
        i.now = MonoTime(t.0 + k * TICK);
        assert!(ex.tick(&i).events.is_empty());
    }
    let e = ex
        .submit(
            &intent(r#"{"action":"key","key":"a"}"#),
            &SubmitContext {
                foreground: false,
                ..c
            },
        )
        .unwrap_err();
    assert_eq!(e.reason, RejectReason::NotForeground);
}

#[test]
fn user_input_pauses_until_resumed() {
    // FR-SAFE-002
    let mut ex = Executor::new(ExecutorConfig::default());
    ex.submit(
        &intent(r#"{"action":"hold_key","key":"a","duration_ms":3000}"#),
        &ctx(MonoTime::ZERO),
    )
    .unwrap();
    let (_, _, t) = run(&mut ex, MonoTime::ZERO, 50);
    let out = ex.pause_for_user();
    assert_eq!(out.events, vec![key("a", false)]);
    assert_eq!(ex.state(), ExecState::Paused);
    assert_eq!(
        ex.submit(&intent(r#"{"action":"key","key":"a"}"#), &ctx(t))
            .unwrap_err()
            .reason,
        RejectReason::Paused
    );
    assert!(ex.tick(&input(t)).events.is_empty());
    ex.resume();
    assert!(ex
        .submit(&intent(r#"{"action":"key","key":"a"}"#), &ctx(t))
        .is_ok());
}

#[test]
fn denied_chords_are_never_synthesised() {
    // INV-ACT-003
    let mut ex = Executor::new(ExecutorConfig::default());
    let c = ctx(MonoTime::ZERO);
    let e = ex
        .submit(&intent(r#"{"action":"key","key":"alt+F4"}"#), &c)
        .unwrap_err();
    assert_eq!(
        e.reason,
        RejectReason::DeniedChord {
            chord: "Alt_L+F4".into()
        }
    );
    assert!(ex
        .submit(&intent(r#"{"action":"key","key":"Super_L"}"#), &c)
        .is_err());
    assert!(ex
        .submit(
            &intent(r#"{"action":"hold_key","key":"ctrl+q","duration_ms":100}"#),
            &c
        )
        .is_err());
    // Composition: alt held by one action, F4 tapped by another.
    ex.submit(
        &intent(r#"{"action":"hold_key","key":"alt","duration_ms":1000}"#),
        &c,
    )
    .unwrap();
    let f4 = ex.submit(&intent(r#"{"action":"key","key":"F4"}"#), &c).unwrap();
    let (events, reports, t) = run(&mut ex, MonoTime::ZERO, 100);
    assert_eq!(count(&events, key("F4", true)), 0, "{events:?}");
    assert!(reports
        .iter()
        .any(|r| r.id == f4 && matches!(r.kind, ActionEnd::Blocked { .. })));
    // Once alt is held, F4 is refused at validation.
    let e = ex
        .submit(&intent(r#"{"action":"key","key":"F4"}"#), &ctx(t))
        .unwrap_err();
    assert!(matches!(e.reason, RejectReason::DeniedChord { .. }));
}

#[test]
fn validation_rejects_with_structured_reasons() {
    // FR-ACT-006
    let mut ex = Executor::new(ExecutorConfig::default());
    let c = ctx(MonoTime::ZERO);
    let reason = |ex: &mut Executor, j: &str| ex.submit(&intent(j), &c).unwrap_err().reason;
    assert_eq!(
        reason(&mut ex, r#"{"action":"click","x":700,"y":10}"#),
        RejectReason::OutsideWindow {
            x: 700,
            y: 10,
            width: 640,
            height: 480
        }
    );
    assert_eq!(
        reason(&mut ex, r#"{"action":"key","key":"Bogus"}"#),
        RejectReason::UnknownKey { key: "Bogus".into() }
    );
    assert_eq!(
        reason(&mut ex, r#"{"action":"hold_key","key":"w","duration_ms":20000}"#),
        RejectReason::HoldTooLong {
            requested_ms: 20000,
            max_ms: 10000
        }
    );
    assert!(matches!(
        reason(
            &mut ex,
            r#"{"action":"camera","dx":5000,"dy":0,"duration_ms":100}"#
        ),
        RejectReason::CameraTooFast { .. }
    ));
    assert_eq!(
        reason(&mut ex, r#"{"action":"type","text":""}"#),
        RejectReason::EmptyText
    );
    assert_eq!(
        reason(&mut ex, r#"{"action":"type","text":"é"}"#),
        RejectReason::UnsupportedChar { ch: 'é' }
    );
    assert_eq!(
        reason(&mut ex, r#"{"action":"camera","dx":0,"dy":0,"duration_ms":100}"#),
        RejectReason::NothingToDo
    );
    let no_geom = SubmitContext { chain: None, ..c };
    let e = ex
        .submit(&intent(r#"{"action":"click","x":1,"y":1}"#), &no_geom)
        .unwrap_err();
    assert_eq!(e.reason, RejectReason::NoWindowGeometry);
    let json = serde_json::to_string(&e).unwrap();
    assert!(json.contains(r#""kind":"no_window_geometry""#), "{json}");
    assert_eq!(ex.active(), 0, "nothing was queued");
}

#[test]
fn action_rate_budget() {
    // FR-SAFE-004
    let cfg = ExecutorConfig {
        max_actions_per_s: 3,
        ..Default::default()
    };
    let mut ex = Executor::new(cfg);
    for i in 0..3 {
        let j = format!(r#"{{"action":"wait","duration_ms":10,"subgoal":{i}}}"#);
        ex.submit(&intent(&j), &ctx(MonoTime::from_millis(i * 10)))
            .unwrap();
    }
    let e = ex
        .submit(
            &intent(r#"{"action":"wait","duration_ms":10}"#),
            &ctx(MonoTime::from_millis(50)),
        )
        .unwrap_err();
    assert_eq!(e.reason, RejectReason::ActionRateExceeded { limit_per_s: 3 });
    assert!(ex
        .submit(
            &intent(r#"{"action":"wait","duration_ms":10}"#),
            &ctx(MonoTime::from_millis(1001))
        )
        .is_ok());
}

#[test]
fn event_rate_budget_throttles_but_never_releases() {
    // FR-SAFE-004
    let cfg = ExecutorConfig {
        max_events_per_s: 10,
        ..Default::default()
    };
    let mut ex = Executor::new(cfg);
    let c = ctx(MonoTime::ZERO);
    ex.submit(
        &intent(r#"{"action":"hold_key","key":"w","duration_ms":300}"#),
        &c,
    )
    .unwrap();
    ex.submit(
        &intent(r#"{"action":"camera","dx":60,"dy":0,"duration_ms":300}"#),
        &c,
    )
    .unwrap();
    let (events, _, _) = run(&mut ex, MonoTime::ZERO, 900);
    let first_second = events
        .iter()
        .filter(|(t, e)| t.as_millis() < 1000 && !e.is_release())
        .count();
    assert!(
        first_second <= 10,
        "{first_second} non-release events in one second"
    );
    assert_eq!(count(&events, key("w", false)), 1, "the release passes");
    let (later, _, _) = run(&mut ex, MonoTime::from_millis(1000), 1000);
    let total: i32 = events
        .iter()
        .chain(later.iter())
        .filter_map(|(_, e)| {
            if let InputEvent::MotionRelative { dx, .. } = e {
                Some(*dx)
            } else {
                None
            }
        })
        .sum();
    assert_eq!(total, 60, "throttled camera steps are caught up, not lost");
}

#[test]
fn max_hold_forces_release() {
    // FR-SAFE-004: an unbounded hold is released at the max hold
    let cfg = ExecutorConfig {
        max_hold: Duration::from_millis(500),
        ..Default::default()
    };
    let mut ex = Executor::new(cfg);
    ex.submit(
        &intent(r#"{"action":"hold_key","key":"w","subgoal":5}"#),
        &ctx(MonoTime::ZERO),
    )
    .unwrap();
    let (events, reports, _) = run(&mut ex, MonoTime::ZERO, 1000);
    let up = events
        .iter()
        .find(|(_, e)| *e == key("w", false))
        .expect("forced release");
    assert!(
        (500..540).contains(&up.0.as_millis()),
        "released at {} ms",
        up.0.as_millis()
    );
    assert!(matches!(&reports[0].kind, ActionEnd::ForcedRelease { input, .. } if input == "w"));
    assert_eq!(reports.len(), 1);
    assert!(ex.held().is_empty());
    assert_eq!(ex.active(), 0);
}

#[test]
fn click_moves_along_a_path_then_presses_in_window() {
    // FR-ACT-005, INV-GND-002
    let mut ex = Executor::new(ExecutorConfig::default());
    ex.submit(
        &intent(r#"{"action":"click","x":400,"y":300,"button":"right"}"#),
        &ctx(MonoTime::ZERO),
    )
    .unwrap();
    let (events, reports, _) = run(&mut ex, MonoTime::ZERO, 1000);
    let moves: Vec<ScreenPoint> = events
        .iter()
        .filter_map(|(_, e)| {
            if let InputEvent::MotionTo(p) = e {
                Some(*p)
            } else {
                None
            }
        })
        .collect();
    assert!(moves.len() >= 5, "a path, not a jump: {}", moves.len());
    let last = moves.last().unwrap();
    assert_eq!(
        (last.x(), last.y()),
        (500, 350),
        "ends at the target via the chain"
    );
    let down = events
        .iter()
        .position(|(_, e)| {
            *e == InputEvent::Button {
                button: 3,
                down: true,
            }
        })
        .unwrap();
    let up = events
        .iter()
        .position(|(_, e)| {
            *e == InputEvent::Button {
                button: 3,
                down: false,
            }
        })
        .unwrap();
    assert!(events[..down]
        .iter()
        .all(|(_, e)| matches!(e, InputEvent::MotionTo(_))));
    assert!(up > down);
    let hold = events[up].0.since(events[down].0).as_millis();
    assert!((50..=140).contains(&hold), "hold {hold} ms");
    assert_eq!(reports[0].kind, ActionEnd::Finished);
}

#[test]
fn double_click_type_and_scroll() {
    // FR-ACT-002, FR-ACT-005
    let mut ex = Executor::new(ExecutorConfig::default());
    ex.submit(
        &intent(r#"{"action":"double_click","x":10,"y":10}"#),
        &ctx(MonoTime::ZERO),
    )
    .unwrap();
    ex.submit(&intent(r#"{"action":"type","text":"Hi!"}"#), &ctx(MonoTime::ZERO))
        .unwrap();
    ex.submit(&intent(r#"{"action":"scroll","dy":-3}"#), &ctx(MonoTime::ZERO))
        .unwrap();
    let (events, reports, _) = run(&mut ex, MonoTime::ZERO, 2000);
    assert_eq!(
        count(
            &events,
            InputEvent::Button {
                button: 1,
                down: true
            }
        ),
        2
    );
    assert_eq!(
        count(
            &events,
            InputEvent::Button {
                button: 4,
                down: true
            }
        ),
        3
    );
    assert_eq!(
        count(
            &events,
            InputEvent::Button {
                button: 4,
                down: false
            }
        ),
        3
    );
    let keys: Vec<InputEvent> = events
        .iter()
        .filter(|(_, e)| matches!(e, InputEvent::Key { .. }))
        .map(|(_, e)| *e)
        .collect();
    assert_eq!(
        keys,
        vec![
            key("Shift_L", true),
            key("h", true),
            key("h", false),
            key("Shift_L", false),
            key("i", true),
            key("i", false),
            key("Shift_L", true),
            InputEvent::Key {
                sym: Keysym('!' as u32),
                down: true
            },
            InputEvent::Key {
                sym: Keysym('!' as u32),
                down: false
            },
            key("Shift_L", false),
        ]
    );
    assert_eq!(reports.len(), 3);
    assert!(ex.held().is_empty());
}

#[test]
fn same_seed_same_events() {
    // FR-ACT-005: varied yet reproducible
    let go = |seed| {
        let mut ex = Executor::new(ExecutorConfig {
            seed,
            ..Default::default()
        });
        ex.submit(
            &intent(r#"{"action":"click","x":300,"y":200}"#),
            &ctx(MonoTime::ZERO),
        )
        .unwrap();
        ex.submit(&intent(r#"{"action":"type","text":"abc"}"#), &ctx(MonoTime::ZERO))
            .unwrap();
        run(&mut ex, MonoTime::ZERO, 1500).0
    };
    assert_eq!(go(1), go(1));
    assert_ne!(go(1), go(2));
}

#[test]
fn wait_and_session_budget() {
    // FR-SAFE-004 wall-clock budget
    let cfg = ExecutorConfig {
        session_budget: Duration::from_secs(2),
        ..Default::default()
    };
    let mut ex = Executor::new(cfg);
    let id = ex
        .submit(
            &intent(r#"{"action":"wait","duration_ms":500}"#),
            &ctx(MonoTime::ZERO),
        )
        .unwrap();
    let (events, reports, _) = run(&mut ex, MonoTime::ZERO, 400);
    assert!(events.is_empty() && reports.is_empty() && ex.is_active(id));
    let (_, reports, _) = run(&mut ex, MonoTime::from_millis(410), 200);
    assert_eq!(reports[0].kind, ActionEnd::Finished);
    ex.submit(
        &intent(r#"{"action":"hold_key","key":"w","duration_ms":5000}"#),
        &ctx(MonoTime::from_millis(700)),
    )
    .unwrap();
    let (events, reports, _) = run(&mut ex, MonoTime::from_millis(700), 1500);
    assert_eq!(count(&events, key("w", false)), 1);
    assert_eq!(
        reports[0].kind,
        ActionEnd::Cancelled {
            reason: CancelReason::BudgetSpent
        }
    );
    assert_eq!(
        ex.state(),
        ExecState::Halted {
            reason: HaltReason::BudgetSpent
        }
    );
    let _ = MouseButton::Left;
}

#[test]
fn nothing_an_action_carries_reaches_the_limits() {
    // INV-SAFE-001: limits come from the configuration only; extra fields in model output change nothing
    let cfg = ExecutorConfig {
        max_hold: Duration::from_millis(500),
        ..Default::default()
    };
    let mut ex = Executor::new(cfg.clone());
    let j = r#"{"action":"hold_key","key":"w","duration_ms":900,"max_hold_ms":100000,"denied":[],"max_events_per_s":9999}"#;
    let e = ex.submit(&intent(j), &ctx(MonoTime::ZERO)).unwrap_err();
    assert_eq!(
        e.reason,
        RejectReason::HoldTooLong {
            requested_ms: 900,
            max_ms: 500
        }
    );
    let e = ex
        .submit(
            &intent(r#"{"action":"key","key":"alt+F4","denied":[]}"#),
            &ctx(MonoTime::ZERO),
        )
        .unwrap_err();
    assert!(matches!(e.reason, RejectReason::DeniedChord { .. }));
    assert_eq!(ex.config(), &cfg);
}

#[test]
fn an_input_that_changes_hands_records_its_new_owner() {
    // FR-ACT-007, INV-LOOP-002
    let mut ex = Executor::new(ExecutorConfig::default());
    ex.submit(
        &intent(r#"{"action":"hold_key","key":"w","duration_ms":3000,"subgoal":1}"#),
        &ctx(MonoTime::ZERO),
    )
    .unwrap();
    let (_, _, t) = run(&mut ex, MonoTime::ZERO, 50);
    ex.cancel_owner(SubgoalId(1));
    let id = ex
        .submit(
            &intent(r#"{"action":"hold_key","key":"w","duration_ms":3000,"subgoal":2}"#),
            &ctx(t),
        )
        .unwrap();
    let out = ex.tick(&input(t));
    assert!(out.events.is_empty(), "w stays held: no release and re-press");
    let h = ex.held().get(&HeldInput::Key(sym("w"))).copied().unwrap();
    assert_eq!((h.owner, h.action, h.since), (SubgoalId(2), id, MonoTime::ZERO));
}

#[test]
fn pointer_actions_grounded_in_an_older_generation_are_dropped() {
    // FR-PERC-002, INV-GND-002: the window moved after the click was grounded; keys are unaffected
    let mut ex = Executor::new(ExecutorConfig::default());
    let mut c = ctx(MonoTime::from_millis(0));
    let mut moved = chain();
    moved.generation = 3;
    c.chain = Some(moved);
    for json in [
        r#"{"action":"click","x":20,"y":30}"#,
        r#"{"action":"double_click","x":20,"y":30}"#,
        r#"{"action":"move_pointer","x":20,"y":30}"#,
        r#"{"action":"scroll","x":20,"y":30,"dy":1}"#,
        r#"{"action":"hold_button","x":20,"y":30,"duration_ms":100}"#,
    ] {
        let err = ex.submit_grounded(&intent(json), 2, &c).unwrap_err();
        assert_eq!(
            err.reason,
            RejectReason::StaleGeneration {
                grounded: 2,
                current: 3
            },
            "{json}"
        );
        assert!(err.to_string().contains("generation 2"), "{err}");
    }
    assert_eq!(ex.active(), 0, "nothing was queued");
    // Keys, camera turns and scrolls without a point do not depend on the window's geometry.
    ex.submit_grounded(&intent(r#"{"action":"key","key":"Return"}"#), 0, &c)
        .unwrap();
    ex.submit_grounded(&intent(r#"{"action":"scroll","dy":1}"#), 0, &c)
        .unwrap();
    // The current generation (or a newer one from a racing observation) is accepted.
    ex.submit_grounded(&intent(r#"{"action":"click","x":20,"y":30}"#), 3, &c)
        .unwrap();
}

#[test]
fn camera_turns_in_degrees_use_the_calibration_or_are_refused() {
    // FR-ACT-004, ADR-0035 "Neutral": degrees → counts through the session's calibration
    let mut ex = Executor::new(ExecutorConfig::default());
    let c = ctx(MonoTime::from_millis(0));
    let turn = intent(r#"{"action":"camera_degrees","yaw_deg":10.0,"pitch_deg":-2.0,"duration_ms":400}"#);
    let err = ex.submit(&turn, &c).unwrap_err();
    assert_eq!(err.reason, RejectReason::CameraNotCalibrated);
    assert_eq!(err.action, "camera_degrees");
    ex.set_camera_scale(Some(CameraScale {
        deg_per_count_x: 0.25,
        deg_per_count_y: 0.5,
    }));
    assert_eq!(
        CameraScale {
            deg_per_count_x: 0.25,
            deg_per_count_y: 0.5
        }
        .counts(10.0, -2.0),
        Some((40, -4))
    );
    ex.submit(&turn, &c).unwrap();
    let (events, reports, _) = run(&mut ex, MonoTime::from_millis(0), 700);
    let (mut dx, mut dy) = (0, 0);
    for (_, e) in &events {
        if let InputEvent::MotionRelative { dx: x, dy: y } = e {
            dx += x;
            dy += y;
        }
    }
    assert_eq!((dx, dy), (40, -4), "10° at 0.25°/count, -2° at 0.5°/count");
    assert!(events
        .iter()
        .all(|(_, e)| matches!(e, InputEvent::MotionRelative { .. })));
    assert!(reports.iter().any(|r| r.kind == ActionEnd::Finished));
    // A turn too small to move a count does nothing and says so; a broken scale is refused too.
    let tiny = intent(r#"{"action":"camera_degrees","yaw_deg":0.01,"duration_ms":400}"#);
    assert_eq!(
        ex.submit(&tiny, &c).unwrap_err().reason,
        RejectReason::NothingToDo
    );
    assert_eq!(
        CameraScale {
            deg_per_count_x: 0.0,
            deg_per_count_y: 1.0
        }
        .counts(1.0, 1.0),
        None
    );
}

#[test]
fn rate_windows_stay_bounded_over_an_hour_at_the_top_cadence() {
    // FR-SAFE-004, NFR-ACT-001: the two rate-budget windows only ever hold the last
    // second: `accepted_at` at most `max_actions_per_s` entries (a submit past it is refused, never
    // queued), `emitted_at` at most one entry per tick of that second (241 at 240 Hz). An hour of a model
    // asking for a key every tick, and a camera turn whenever it may, leaves them there.
    let hz = 240u64;
    let tick_us = 1_000_000 / hz;
    let cfg = ExecutorConfig {
        tick: Duration::from_micros(tick_us),
        session_budget: Duration::from_secs(2 * 3600),
        ..Default::default()
    };
    let max_actions = cfg.max_actions_per_s as usize;
    let mut ex = Executor::new(cfg);
    let letters: Vec<String> = ('a'..='z').map(|c| c.to_string()).collect();
    let (mut accepted, mut refused_for_rate) = (0u64, 0u64);
    let (mut widest_accepted, mut widest_emitted, mut most_active) = (0, 0, 0);
    for i in 0..(hz * 3600) {
        let now = MonoTime(i * tick_us);
        let j = if i % 97 == 0 {
            r#"{"action":"camera","dx":40,"dy":0,"duration_ms":200}"#.to_string()
        } else {
            format!(r#"{{"action":"key","key":"{}"}}"#, letters[(i % 26) as usize])
        };
        match ex.submit(&intent(&j), &ctx(now)) {
            Ok(_) => accepted += 1,
            Err(Rejection {
                reason: RejectReason::ActionRateExceeded { .. },
                ..
            }) => refused_for_rate += 1,
            Err(_) => {}
        }
        let out = ex.tick(&input(now));
        assert!(!matches!(ex.state(), ExecState::Halted { .. }), "{out:?}");
        widest_accepted = widest_accepted.max(ex.accepted_at.len());
        widest_emitted = widest_emitted.max(ex.emitted_at.len());
        most_active = most_active.max(ex.active());
    }
    assert!(widest_accepted <= max_actions, "{widest_accepted}");
    assert!(widest_emitted <= hz as usize + 1, "{widest_emitted}");
    assert!(
        accepted >= 3600 * 10,
        "the budget still lets actions through: {accepted}"
    );
    assert!(refused_for_rate > 0);
    assert!(most_active <= max_actions, "{most_active} actions at once");
}

#[test]
fn steering_holds_only_what_the_controller_wants_among_its_keys_and_ends_on_request() {
    // move_to, ADR-0035 step 4: the controller's wish is reconciled like any other
    let mut ex = Executor::new(ExecutorConfig::default());
    let id = ex
        .submit(
            &intent(r#"{"action":"steer","up":"w","down":"s","left":"a","right":"d","duration_ms":3000}"#),
            &ctx(MonoTime::ZERO),
        )
        .unwrap();
    let (events, _, t) = run(&mut ex, MonoTime::ZERO, 50);
    assert!(events.is_empty(), "nothing wanted yet: {events:?}");
    assert!(ex.steer(id, &["d".into(), "w".into(), "Escape".into()], false));
    let (events, _, t) = run(&mut ex, t, 50);
    let downs: Vec<_> = events.iter().map(|(_, e)| *e).collect();
    assert_eq!(
        downs.len(),
        2,
        "d and w only, never a key it was not given: {downs:?}"
    );
    assert!(downs.contains(&key("d", true)) && downs.contains(&key("w", true)));
    assert!(ex.steer(id, &["d".into()], false));
    let (events, _, t) = run(&mut ex, t, 50);
    assert_eq!(
        events.iter().map(|(_, e)| *e).collect::<Vec<_>>(),
        [key("w", false)]
    );
    assert!(ex.steer(id, &["d".into()], true));
    let (events, reports, _) = run(&mut ex, t, 50);
    assert_eq!(
        events.iter().map(|(_, e)| *e).collect::<Vec<_>>(),
        [key("d", false)]
    );
    assert_eq!(
        reports.iter().map(|r| r.kind.clone()).collect::<Vec<_>>(),
        [ActionEnd::Finished]
    );
    assert!(ex.held().is_empty());
    assert!(
        !ex.steer(id, &[], false),
        "a finished action takes no more wishes"
    );
}

#[test]
fn steering_ends_at_its_bound_whatever_the_controller_wants() {
    // FR-SAFE-004: the time bound is the executor's, not the controller's
    let mut ex = Executor::new(ExecutorConfig::default());
    let id = ex
        .submit(
            &intent(r#"{"action":"steer","up":"w","down":"s","left":"a","right":"d","duration_ms":500}"#),
            &ctx(MonoTime::ZERO),
        )
        .unwrap();
    ex.tick(&input(MonoTime::ZERO));
    assert!(ex.steer(id, &["a".into()], false));
    let (events, reports, _) = run(&mut ex, MonoTime(TICK), 1000);
    assert_eq!(count(&events, key("a", true)), 1);
    assert_eq!(count(&events, key("a", false)), 1);
    let released = events.iter().find(|(_, e)| *e == key("a", false)).unwrap().0;
    assert!(
        (480..540).contains(&released.as_millis()),
        "released at {} ms",
        released.as_millis()
    );
    assert_eq!(reports.len(), 1);
    let too_long =
        intent(r#"{"action":"steer","up":"w","down":"s","left":"a","right":"d","duration_ms":60000}"#);
    assert!(ex.submit(&too_long, &ctx(MonoTime(2_000_000))).is_err());
}
