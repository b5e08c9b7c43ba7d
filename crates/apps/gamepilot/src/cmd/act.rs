//! `gamepilot act --window W --actions FILE [--dry-run]`: run a JSON-lines script of intentions through the
//! full executor with every interlock (guardian, foreground guard, user-input pause, denied keys, budgets,
//! indicator), printing each accepted/rejected action and the held set as JSON lines on stdout. The tick
//! itself is the shared reflex driver (`gamepilot_runtime::driver`), the same one `run` uses.
//!
//! A line may carry `"generation": N`, the window-geometry generation it was grounded in: a pointer
//! action grounded in an older one than the current chain is rejected (`stale_generation`, FR-PERC-002).
//! `--calibrate-camera` measures the camera before the script so that `camera_degrees` lines convert.
//!
//! Lines start in order, each as soon as the previous one is accepted; only `wait` holds the next line back.
//! `act` exits when every action has finished or was rejected (0), when halted (2: panic key, hung-core
//! release, budget) or when paused by user input (3: resuming is the user's act — run it again).

use super::common::WindowArgs;
use anyhow::Context as _;
use gamepilot_core::action::{Action, Intention};
use gamepilot_core::Chord;
use gamepilot_executor::{ActionId, DeniedList, ExecutorConfig, HeldRecord};
use gamepilot_runtime::driver::{CalibrationFailure, Driver, DriverEvent, DriverSetup, DriverStop};
use gamepilot_runtime::GuardianHandle;
use serde_json::json;
use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::time::Duration;

/// The reflex cadence's range (decisions.md) and the heartbeat bound's.
pub const MIN_HZ: u32 = 30;
pub const MAX_HZ: u32 = 240;
pub const MIN_STALE_TICKS: u64 = 3;
pub const MAX_STALE_MS: u64 = 10_000;

/// The user's limits (INV-SAFE-001: from the command line or configuration only, never from a model).
#[derive(clap::Args, Debug, Clone)]
pub struct LimitArgs {
    /// Panic chord watched by the guardian (never synthesised by the agent).
    #[arg(long, default_value = "ctrl+Pause")]
    pub panic_key: String,
    /// Reflex tick rate in Hz.
    #[arg(long, default_value_t = 60)]
    pub hz: u32,
    /// Maximum hold per key or button, in ms.
    #[arg(long, default_value_t = 10_000)]
    pub max_hold_ms: u64,
    /// Action-rate budget (discrete actions per second).
    #[arg(long, default_value_t = 20)]
    pub max_actions_per_s: u32,
    /// Event-rate budget (input events per second).
    #[arg(long, default_value_t = 200)]
    pub max_events_per_s: u32,
    /// Wall-clock budget of the session, in seconds.
    #[arg(long, default_value_t = 3600)]
    pub session_budget_s: u64,
    /// Additional denied chord (repeatable), e.g. --deny ctrl+x.
    #[arg(long = "deny")]
    pub deny: Vec<String>,
    /// Replace the default denied list by the --deny chords only.
    #[arg(long)]
    pub no_default_denied: bool,
    /// Seed for hold durations, gaps and pointer paths.
    #[arg(long, default_value_t = 0x6761_6d65)]
    pub seed: u64,
    /// Heartbeat age after which the guardian treats the core as hung, in ms.
    #[arg(long, default_value_t = 250)]
    pub stale_ms: u64,
}

impl LimitArgs {
    /// The session's hands: these limits, a dry run, and how a destructive action is asked about.
    pub fn hands(
        &self,
        dry_run: bool,
        unattended: bool,
        confirm_timeout: std::time::Duration,
    ) -> anyhow::Result<gamepilot_runtime::startup::Hands> {
        let (exec, panic) = self.config()?;
        Ok(gamepilot_runtime::startup::Hands {
            exec,
            panic,
            stale_ms: self.stale_ms,
            hz: self.hz,
            dry_run,
            unattended,
            confirm_timeout,
        })
    }

    pub fn config(&self) -> anyhow::Result<(ExecutorConfig, Chord)> {
        let panic =
            Chord::parse(&self.panic_key).with_context(|| format!("--panic-key {:?}", self.panic_key))?;
        let mut denied = if self.no_default_denied {
            DeniedList::empty()
        } else {
            DeniedList::defaults()
        };
        for d in &self.deny {
            denied.add(&Chord::parse(d).with_context(|| format!("--deny {d:?}"))?);
        }
        denied.add(&panic);
        // decisions.md: the reflex cadence is 30–240 Hz; the guardian's heartbeat bound must cover
        // several ticks or a merely late tick reads as a hung core.
        anyhow::ensure!(
            (MIN_HZ..=MAX_HZ).contains(&self.hz),
            "--hz {}: the reflex cadence must be {MIN_HZ}–{MAX_HZ} Hz",
            self.hz
        );
        let tick_ms = 1000.0 / self.hz as f64;
        anyhow::ensure!(
            self.stale_ms as f64 >= MIN_STALE_TICKS as f64 * tick_ms && self.stale_ms <= MAX_STALE_MS,
            "--stale-ms {}: the heartbeat bound must cover at least {MIN_STALE_TICKS} reflex ticks ({:.0} ms at {} Hz) and at most {MAX_STALE_MS} ms",
            self.stale_ms,
            (MIN_STALE_TICKS as f64 * tick_ms).ceil(),
            self.hz
        );
        let hz = self.hz;
        let cfg = ExecutorConfig {
            tick: Duration::from_micros(1_000_000 / hz as u64),
            max_hold: Duration::from_millis(self.max_hold_ms),
            max_actions_per_s: self.max_actions_per_s,
            max_events_per_s: self.max_events_per_s,
            session_budget: Duration::from_secs(self.session_budget_s),
            denied,
            seed: self.seed,
            ..ExecutorConfig::default()
        };
        cfg.check()?;
        Ok((cfg, panic))
    }
}

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub target: WindowArgs,
    /// JSON-lines script of actions ("-" reads stdin).
    #[arg(long)]
    pub actions: PathBuf,
    /// Run the same pipeline, validation and logs with an input sink that delivers nothing (FR-SAFE-006).
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub camera: CameraArgs,
}

/// Camera calibration before the session (FR-ACT-004/005).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CameraArgs {
    /// Before the session, turn the camera in small relative steps and measure the view's shift, so that
    /// camera turns in degrees (`camera_degrees`) can be converted into counts.
    #[arg(long)]
    pub calibrate_camera: bool,
    /// The horizontal field of view of the game's camera, for degrees per count.
    #[arg(long, default_value_t = 90.0)]
    pub fov_deg: f64,
    /// Where the view's shift is measured, X,Y,W,H in the window's capture pixels (default: all of it),
    /// e.g. a compass strip or the horizon band.
    #[arg(long, value_name = "X,Y,W,H")]
    pub calibrate_region: Option<String>,
}

impl CameraArgs {
    /// The camera's measurement as the runtime takes it; a bad region or field of view is refused here.
    pub fn plan(&self) -> anyhow::Result<gamepilot_runtime::startup::CameraPlan> {
        Ok(gamepilot_runtime::startup::CameraPlan {
            calibrate: self.calibrate_camera,
            fov_deg: self.fov_deg,
            region: self.region()?,
        })
    }

    pub fn region(&self) -> anyhow::Result<Option<gamepilot_core::Rect>> {
        anyhow::ensure!(
            self.fov_deg > 0.0 && self.fov_deg < 360.0,
            "--fov-deg must be in (0, 360)"
        );
        let Some(s) = &self.calibrate_region else {
            return Ok(None);
        };
        let n: Vec<i64> = s
            .split(',')
            .map(|p| p.trim().parse::<i64>())
            .collect::<Result<_, _>>()
            .with_context(|| format!("--calibrate-region {s:?}: expected X,Y,W,H"))?;
        let [x, y, w, h] = n[..] else {
            anyhow::bail!("--calibrate-region {s:?}: expected four numbers X,Y,W,H");
        };
        anyhow::ensure!(
            x >= 0 && y >= 0 && w > 0 && h > 0 && w <= 1 << 16 && h <= 1 << 16,
            "--calibrate-region {s:?}: a non-empty rectangle inside the window"
        );
        Ok(Some(gamepilot_core::Rect::new(
            x as i32, y as i32, w as u32, h as u32,
        )))
    }
}

fn held_json(held: &HeldRecord) -> serde_json::Value {
    let keys: Vec<String> = held.keys().map(|k| k.name()).collect();
    let buttons: Vec<u8> = held.buttons().collect();
    let owners: Vec<serde_json::Value> = held
        .iter()
        .map(|h| json!({"input": h.input.to_string(), "owner": h.owner.0, "action": h.action.0, "since_ms": h.since.as_millis()}))
        .collect();
    json!({"event": "held", "keys": keys, "buttons": buttons, "owners": owners})
}

fn emit(v: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

struct Status {
    tty: bool,
    last: String,
}

impl Status {
    fn show(&mut self, state: &str, held: &HeldRecord, dry: bool) {
        let names: Vec<String> = held.iter().map(|h| h.input.to_string()).collect();
        let line = format!(
            "gamepilot act: {}{} | held: {}",
            if dry { "DRY RUN " } else { "" },
            state,
            if names.is_empty() {
                "-".to_string()
            } else {
                names.join(" ")
            }
        );
        if line != self.last {
            if self.tty {
                eprint!("\r\x1b[2K{line}");
            } else {
                eprintln!("{line}");
            }
            self.last = line;
        }
    }
}

fn read_script(path: &PathBuf) -> anyhow::Result<Vec<String>> {
    if path.as_os_str() == "-" {
        Ok(std::io::stdin().lock().lines().collect::<Result<_, _>>()?)
    } else {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Ok(text.lines().map(str::to_string).collect())
    }
}

/// Print one driver event as a JSON line.
fn emit_event(e: &DriverEvent, held: &HeldRecord) {
    match e {
        DriverEvent::Report(r) => emit(json!({"event": "report", "report": r})),
        DriverEvent::HeldChanged => emit(held_json(held)),
        DriverEvent::Undeliverable(k) => {
            emit(json!({"event": "undeliverable", "key": k, "why": "no keycode on this keyboard"}))
        }
        DriverEvent::HeldDivergence(d) => {
            let mut v = json!(d);
            v["event"] = json!("divergence");
            emit(v);
        }
        // Printed as `divergence` above.
        DriverEvent::Interlock {
            kind: gamepilot_core::Interlock::HeldDivergence,
            ..
        } => {}
        DriverEvent::Interlock { kind, detail } => {
            let mut v = json!({"event": "interlock", "interlock": kind.name(), "detail": detail});
            if let gamepilot_core::Interlock::WindowChanged { generation } = kind {
                v["generation"] = json!(generation);
            }
            emit(v);
        }
    }
}

/// Print a stop as `act` always has and give its exit code.
fn emit_stop(stop: &DriverStop, held: &HeldRecord) -> i32 {
    match stop {
        DriverStop::GuardianGone(why) => {
            emit(json!({"event": "guardian_gone", "message": why}));
            1
        }
        DriverStop::WindowGone => {
            emit(json!({"event": "window_gone"}));
            1
        }
        DriverStop::UserInput {
            device,
            sourceid,
            input,
        } => {
            emit(
                json!({"event": "paused", "reason": "user_input", "device": device, "sourceid": sourceid,
                "input": format!("{input:?}")}),
            );
            emit(held_json(held));
            3
        }
        DriverStop::Halted { reason, cause } => {
            emit(json!({"event": "halted", "reason": reason, "cause": cause}));
            2
        }
    }
}

/// A script line: an intention, optionally with the chain generation it was grounded in
/// (`"generation": N`; a pointer action grounded in an older one is refused, FR-PERC-002).
fn parse_line(line: &str) -> Result<(Intention, Option<u64>), serde_json::Error> {
    let mut v: serde_json::Value = serde_json::from_str(line)?;
    let generation = v
        .as_object_mut()
        .and_then(|o| o.remove("generation"))
        .and_then(|g| g.as_u64());
    Ok((serde_json::from_value(v)?, generation))
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let (cfg, panic) = args.limits.config()?;
    let lines = read_script(&args.actions)?;
    let (x, win) = args.target.resolve()?;
    drop(x);
    let display = args.target.display.clone();
    let hz = args.limits.hz.clamp(1, 1000);
    let region = args.camera.region()?;
    // The guardian first: nothing is armed without it (FR-SAFE-003).
    let guardian = GuardianHandle::spawn(display.as_deref(), &panic, args.limits.stale_ms)?;
    let mut d = Driver::start(
        DriverSetup {
            display: display.clone(),
            window: win.id,
            exec: cfg,
            dry_run: args.dry_run,
            hz,
            panic: panic.clone(),
            camera: None,
            indicator: true,
        },
        guardian,
    )?;
    let mut status = Status {
        tty: std::io::stderr().is_terminal(),
        last: String::new(),
    };
    emit(
        json!({"event": "armed", "window": format!("0x{:x}", win.id), "dry_run": args.dry_run,
        "guardian_pid": d.guardian_pid(), "panic_key": panic.to_string(), "hz": hz}),
    );

    let mut next_line = 0usize;
    let mut waiting: Option<ActionId> = None;
    let mut code = 0;
    let mut ev: Vec<DriverEvent> = Vec::new();
    let result: anyhow::Result<()> = (|| {
        if args.camera.calibrate_camera {
            let r = d.calibrate_camera(region, args.camera.fov_deg, &mut ev)?;
            for e in ev.drain(..) {
                emit_event(&e, d.executor().held());
            }
            match r {
                Ok(c) => {
                    let mut v = json!(c);
                    v["event"] = json!("camera_calibration");
                    emit(v);
                }
                Err(CalibrationFailure::Stopped(stop)) => {
                    code = emit_stop(&stop, d.executor().held());
                    return Ok(());
                }
                Err(f) => {
                    emit(json!({"event": "camera_calibration_failed", "message": f.to_string()}));
                }
            }
        }
        loop {
            ev.clear();
            let stop = d.begin_tick(|_| true, &mut ev)?;
            for e in ev.drain(..) {
                emit_event(&e, d.executor().held());
            }
            if let Some(stop) = stop {
                code = emit_stop(&stop, d.executor().held());
                return Ok(());
            }
            // Start script lines: each as soon as the previous one is accepted; `wait` holds the rest back.
            if waiting.is_some_and(|id| !d.executor().is_active(id)) {
                waiting = None;
            }
            while waiting.is_none() && next_line < lines.len() {
                let n = next_line + 1;
                let line = lines[next_line].trim().to_string();
                next_line += 1;
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let (intention, generation) = match parse_line(&line) {
                    Ok(i) => i,
                    Err(e) => {
                        emit(
                            json!({"event": "rejected", "line": n, "reason": {"kind": "bad_json"},
                            "message": format!("not a valid action: {e}")}),
                        );
                        continue;
                    }
                };
                match d.submit(&intention, generation) {
                    Ok(id) => {
                        emit(json!({"event": "accepted", "line": n, "id": id.0, "action": &intention}));
                        if matches!(intention.action, Action::Wait { .. }) {
                            waiting = Some(id);
                        }
                    }
                    Err(r) => emit(
                        json!({"event": "rejected", "line": n, "action": r.action, "owner": r.owner.0,
                        "reason": &r.reason, "message": r.to_string()}),
                    ),
                }
            }
            // The five steps (halt, foreground, advance, reconcile, emit + publish).
            let stop = d.step(&mut ev)?;
            for e in ev.drain(..) {
                emit_event(&e, d.executor().held());
            }
            status.show(d.state_label(), d.executor().held(), args.dry_run);
            if let Some(stop) = stop {
                code = emit_stop(&stop, d.executor().held());
                return Ok(());
            }
            if next_line >= lines.len() && waiting.is_none() && d.executor().active() == 0 {
                return Ok(());
            }
        }
    })();
    // Every exit path releases everything (FR-ACT-001), checked against the server.
    let stats = d.finish();
    if stats.released_on_stop {
        emit(held_json(&HeldRecord::default()));
    }
    if status.tty {
        eprintln!();
    }
    emit(
        json!({"event": "done", "code": code, "dry_run": args.dry_run, "delivered": if stats.delivers { stats.events } else { 0 },
        "would_deliver": stats.events, "ticks": stats.ticks, "lateness_us_p50": stats.lateness_p50_us, "lateness_us_p99": stats.lateness_p99_us}),
    );
    result?;
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_lines_may_name_the_generation_they_were_grounded_in() {
        // FR-PERC-002
        let (i, g) = parse_line(r#"{"action":"click","x":1,"y":2,"generation":3}"#).unwrap();
        assert_eq!(i.action.name(), "click");
        assert_eq!(g, Some(3));
        let (_, g) = parse_line(r#"{"action":"key","key":"a"}"#).unwrap();
        assert_eq!(g, None);
        assert!(parse_line(r#"{"action":"nope"}"#).is_err());
    }

    #[test]
    fn calibration_region_and_fov_are_checked() {
        // FR-ACT-004
        let mut a = CameraArgs {
            calibrate_camera: true,
            fov_deg: 90.0,
            calibrate_region: Some("0,0,1280,40".into()),
        };
        assert_eq!(
            a.region().unwrap(),
            Some(gamepilot_core::Rect::new(0, 0, 1280, 40))
        );
        a.calibrate_region = Some("0,0,0,40".into());
        assert!(a.region().is_err());
        a.calibrate_region = Some("1,2,3".into());
        assert!(a.region().is_err());
        a.calibrate_region = None;
        a.fov_deg = 0.0;
        assert!(a.region().is_err());
    }
}
