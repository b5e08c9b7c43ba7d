//! Cost of one accessibility probe (FR-PERC-010) on a real GTK game (sgt-puzzles' Net) under a private Xvfb
//! and session bus: the worker's path (connection kept) against the one-shot path (fresh connections and
//! helper thread each time). Prints nodes visited and elements found once.

use criterion::{criterion_group, criterion_main, Criterion};
use gamepilot_a11y::{probe, A11yConfig, A11yTarget, ProbeLimits, Prober};
use gamepilot_testbed::{SessionBus, TestBed};
use gamepilot_x11::WindowSelector;
use std::process::Command;
use std::time::{Duration, Instant};

fn setup() -> Option<(TestBed, SessionBus, A11yTarget, A11yConfig)> {
    let mut bed = TestBed::start().ok()?;
    let bus = SessionBus::start(&bed.display).ok()?;
    let mut cmd = Command::new("/usr/games/sgt-net");
    bus.apply(&mut cmd);
    let pid = bed.spawn("sgt-net", cmd).ok()?;
    let x = bed.x11().ok()?;
    let cfg = A11yConfig {
        session_bus: Some(bus.address.clone()),
        limits: ProbeLimits {
            timeout: Duration::from_secs(2),
            ..ProbeLimits::default()
        },
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(w) = x.find_window(&WindowSelector::Pid(pid)) {
            if let Ok(t) = A11yTarget::from_window(&x, w.id) {
                if let Ok(s) = probe(&t, &cfg) {
                    if !s.elements.is_empty() {
                        eprintln!(
                            "a11y probe on sgt-net: {} nodes visited, {} elements",
                            s.nodes_visited,
                            s.elements.len()
                        );
                        return Some((bed, bus, t, cfg));
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

fn bench(c: &mut Criterion) {
    let Some((_bed, _bus, target, cfg)) = setup() else {
        eprintln!("a11y bench: no accessible sgt-net (Xvfb, dbus-daemon, at-spi2-core, sgt-puzzles needed)");
        return;
    };
    let mut g = c.benchmark_group("a11y_probe");
    g.sample_size(30);
    if let Ok(mut prober) = Prober::connect(&cfg, Instant::now() + Duration::from_secs(2)) {
        g.bench_function("worker_path_connection_kept", |b| {
            b.iter(|| prober.probe(&target, Instant::now()).map(|s| s.elements.len()))
        });
    }
    g.bench_function("one_shot_fresh_connection", |b| {
        b.iter(|| probe(&target, &cfg).map(|s| s.elements.len()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
