//! `gamepilot bench executor`: executor tick cost with 8 sustained actions, reflex tick lateness at 60 Hz,
//! panic latency (press → last release, NFR-SAFE-001 budget 30 ms), crash-release latency (FR-SAFE-003,
//! budget 100 ms) and hung-core release through the stale heartbeat.
//!
//! The latency parts drive a real `gamepilot act` against a window this command creates on the display.

use crate::BenchError;
use gamepilot_core::action::Intention;
use gamepilot_core::{Keysym, MonoTime, Point, Size, TransformChain};
use gamepilot_executor::{Executor, ExecutorConfig, SubmitContext, TickInput};
use gamepilot_guardian::{monotonic_us, send_signal, SharedState, Signal};
use gamepilot_runtime::Ticker;
use gamepilot_x11::input::{DryRunSink, InputSink, XTestInput};
use gamepilot_x11::X11;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{ConnectionExt as _, CreateWindowAux, InputFocus, WindowClass};

/// What to measure (the binary's `bench executor` flags).
#[derive(Debug, Clone)]
pub struct BenchArgs {
    /// X display for the latency parts (default: $DISPLAY; they are skipped without one).
    pub display: Option<String>,
    /// Ticks for the cost measurement.
    pub ticks: usize,
    /// Seconds of 60 Hz ticking for the lateness measurement.
    pub seconds: u64,
    /// Repetitions of each latency measurement.
    pub reps: usize,
}

fn bench_err(what: impl std::fmt::Display) -> BenchError {
    BenchError::WorkerStart(format!("bench executor: {what}"))
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

const EIGHT: [&str; 8] = [
    r#"{"action":"hold_key","key":"w","duration_ms":9000}"#,
    r#"{"action":"hold_key","key":"a","duration_ms":9000}"#,
    r#"{"action":"hold_key","key":"shift","duration_ms":9000}"#,
    r#"{"action":"hold_key","key":"e","duration_ms":9000}"#,
    r#"{"action":"hold_key","key":"space","duration_ms":9000}"#,
    r#"{"action":"hold_button","button":"left","duration_ms":9000}"#,
    r#"{"action":"hold_button","button":"right","duration_ms":9000}"#,
    r#"{"action":"camera","dx":4000,"dy":300,"duration_ms":9000}"#,
];

fn eight(now: MonoTime, chain: TransformChain) -> Result<Executor, BenchError> {
    let mut ex = Executor::new(ExecutorConfig {
        max_actions_per_s: 100,
        ..Default::default()
    });
    let ctx = SubmitContext {
        now,
        foreground: true,
        chain: Some(chain),
    };
    for j in EIGHT {
        let i: Intention = serde_json::from_str(j).map_err(bench_err)?;
        ex.submit(&i, &ctx).map_err(bench_err)?;
    }
    Ok(ex)
}

fn tick_cost(ticks: usize) -> Result<Vec<f64>, BenchError> {
    let chain = TransformChain::new(Point::new(0, 0), Size::new(1280, 720));
    let mut ex = eight(MonoTime::ZERO, chain)?;
    let mut t = 0u64;
    let mut costs = Vec::with_capacity(ticks);
    for _ in 0..ticks {
        t += 16_667;
        if t > 8_000_000 {
            t = 16_667;
            ex = eight(MonoTime::ZERO, chain)?;
        }
        let input = TickInput {
            now: MonoTime(t),
            halt: false,
            foreground: true,
            chain: Some(chain),
            pointer: None,
        };
        let s = Instant::now();
        let out = ex.tick(&input);
        costs.push(s.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(out);
    }
    Ok(sorted(costs))
}

/// The act loop's schedule at 60 Hz with the executor, a dry-run sink and the shared-page publish per tick.
fn lateness(seconds: u64) -> Result<Vec<f64>, BenchError> {
    let chain = TransformChain::new(Point::new(0, 0), Size::new(1280, 720));
    let (shm, _fd) = SharedState::create_memfd(std::process::id())?;
    let start = Instant::now();
    let mut ex = eight(MonoTime::ZERO, chain)?;
    let mut sink = DryRunSink::default();
    let mut ticker = Ticker::new(60);
    let n = (seconds * 60) as usize;
    let mut late = Vec::with_capacity(n);
    for _ in 0..n {
        ticker.wait();
        late.push(ticker.lateness.last().unwrap_or(0) as f64);
        let now = MonoTime(start.elapsed().as_micros() as u64);
        let out = ex.tick(&TickInput {
            now,
            halt: false,
            foreground: true,
            chain: Some(chain),
            pointer: None,
        });
        sink.deliver(&out.events)?;
        let keys: Vec<u32> = ex.held().keys().map(|k| k.0).collect();
        let buttons: Vec<u8> = ex.held().buttons().collect();
        shm.publish(&keys, &buttons, monotonic_us());
    }
    Ok(sorted(late))
}

struct Target {
    x: X11,
    input: XTestInput,
    win: u32,
    w_code: u8,
}

fn make_target(display: &str) -> Result<Target, BenchError> {
    let x = X11::connect(Some(display))?;
    let input = XTestInput::new(&x)?;
    let win = x.conn.generate_id().map_err(gamepilot_x11::X11Error::from)?;
    x.conn
        .create_window(
            x11rb::COPY_DEPTH_FROM_PARENT,
            win,
            x.root,
            50,
            50,
            640,
            480,
            0,
            WindowClass::INPUT_OUTPUT,
            x11rb::COPY_FROM_PARENT,
            &CreateWindowAux::new().background_pixel(0x00305070),
        )
        .map_err(gamepilot_x11::X11Error::from)?;
    x.conn.map_window(win).map_err(gamepilot_x11::X11Error::from)?;
    x.flush()?;
    // Focus it (and, under a window manager, activate it) before arming anything.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !x.is_foreground(win).unwrap_or(false) {
        let _ = x.activate(win);
        x.conn
            .set_input_focus(InputFocus::POINTER_ROOT, win, x11rb::CURRENT_TIME)
            .map_err(gamepilot_x11::X11Error::from)?;
        x.conn.flush().map_err(gamepilot_x11::X11Error::from)?;
        if Instant::now() > deadline {
            return Err(bench_err(format!(
                "the bench window 0x{win:x} never became the foreground window"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let w_code = input.locate(Keysym('w' as u32))?.keycode;
    Ok(Target {
        x,
        input,
        win,
        w_code,
    })
}

impl Target {
    fn agent_holds(&self) -> Result<bool, BenchError> {
        let h = self.x.server_held()?;
        Ok(h.keycodes.contains(&self.w_code) || h.buttons.contains(&1))
    }

    fn start_act(&self, display: &str, script: &std::path::Path) -> Result<Child, BenchError> {
        let exe = std::env::current_exe().map_err(|e| BenchError::io("locating the gamepilot binary", e))?;
        let child = Command::new(exe)
            .args([
                "act",
                "--display",
                display,
                "--window",
                &format!("0x{:x}", self.win),
                "--actions",
            ])
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| BenchError::io("starting gamepilot act", e))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let h = self.x.server_held()?;
            if h.keycodes.contains(&self.w_code) && h.buttons.contains(&1) {
                return Ok(child);
            }
            if Instant::now() > deadline {
                return Err(bench_err("gamepilot act did not start holding keys within 10 s"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Microseconds from `t0` until the agent's inputs are released (polling the server's key state).
    fn released_after(&self, t0: Instant, limit: Duration) -> Result<f64, BenchError> {
        loop {
            if !self.agent_holds()? {
                return Ok(t0.elapsed().as_secs_f64() * 1e3);
            }
            if t0.elapsed() > limit {
                return Err(bench_err(format!("still held after {} ms", limit.as_millis())));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

fn signal(child: &Child, sig: Signal) {
    send_signal(child.id(), sig);
}

fn finish(mut child: Child) {
    signal(&child, Signal::Kill);
    let _ = child.wait();
    std::thread::sleep(Duration::from_millis(100));
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Panic,
    Crash,
    Hung,
}

fn latency(
    t: &Target,
    display: &str,
    script: &std::path::Path,
    kind: Kind,
    reps: usize,
) -> Result<Vec<f64>, BenchError> {
    let ctrl = t.input.locate(Keysym(0xffe3))?.keycode;
    let pause = t.input.locate(Keysym(0xff13))?.keycode;
    let mut out = Vec::new();
    for _ in 0..reps {
        let child = t.start_act(display, script)?;
        std::thread::sleep(Duration::from_millis(50));
        let ms = match kind {
            Kind::Panic => {
                signal(&child, Signal::Stop);
                std::thread::sleep(Duration::from_millis(20));
                // From the moment the chord is sent (press -> last release).
                let t0 = Instant::now();
                t.input.key(&t.x, ctrl, true)?;
                t.input.key(&t.x, pause, true)?;
                t.input.sync(&t.x)?;
                let r = t.released_after(t0, Duration::from_secs(2));
                t.input.key(&t.x, pause, false)?;
                t.input.key(&t.x, ctrl, false)?;
                t.input.sync(&t.x)?;
                r
            }
            Kind::Crash => {
                let t0 = Instant::now();
                signal(&child, Signal::Kill);
                t.released_after(t0, Duration::from_secs(2))
            }
            Kind::Hung => {
                let t0 = Instant::now();
                signal(&child, Signal::Stop);
                t.released_after(t0, Duration::from_secs(2))
            }
        };
        finish(child);
        out.push(ms?);
    }
    Ok(sorted(out))
}

/// Measure and print the figures (stdout).
pub fn bench(args: BenchArgs) -> Result<i32, BenchError> {
    println!("executor bench");
    let c = tick_cost(args.ticks)?;
    let mean = c.iter().sum::<f64>() / c.len().max(1) as f64;
    println!(
        "  tick cost, 8 sustained actions: mean {:.2} us, p50 {:.2} us, p99 {:.2} us ({} ticks)",
        mean,
        pct(&c, 0.5),
        pct(&c, 0.99),
        c.len()
    );
    let l = lateness(args.seconds)?;
    println!(
        "  reflex tick lateness at 60 Hz: p50 {:.0} us, p99 {:.0} us, max {:.0} us ({} ticks)",
        pct(&l, 0.5),
        pct(&l, 0.99),
        pct(&l, 1.0),
        l.len()
    );
    let Some(display) = args.display.clone().or_else(|| std::env::var("DISPLAY").ok()) else {
        println!(
            "  panic / crash / hung-core latency: skipped (no X display: pass --display or set DISPLAY)"
        );
        return Ok(0);
    };
    let t = make_target(&display)?;
    let script = std::env::temp_dir().join(format!("gamepilot-bench-{}.jsonl", std::process::id()));
    std::fs::write(
        &script,
        "{\"action\":\"hold_key\",\"key\":\"w\",\"duration_ms\":9000}\n{\"action\":\"hold_button\",\"button\":\"left\",\"duration_ms\":9000}\n",
    )
    .map_err(|e| BenchError::io("writing the bench script", e))?;
    for (kind, name, budget) in [
        (
            Kind::Panic,
            "panic latency, press -> last release (core SIGSTOPped)",
            "budget 30 ms",
        ),
        (
            Kind::Crash,
            "crash release latency (kill -9 of the core)",
            "budget 100 ms",
        ),
        (
            Kind::Hung,
            "hung-core release (SIGSTOP, stale heartbeat 250 ms)",
            "expected ~250 ms",
        ),
    ] {
        let v = latency(&t, &display, &script, kind, args.reps)?;
        println!(
            "  {name}: p50 {:.1} ms, max {:.1} ms ({} reps, {budget})",
            pct(&v, 0.5),
            pct(&v, 1.0),
            v.len()
        );
    }
    let _ = std::fs::remove_file(&script);
    let _ = t.x.conn.destroy_window(t.win);
    let _ = t.x.flush();
    Ok(0)
}
