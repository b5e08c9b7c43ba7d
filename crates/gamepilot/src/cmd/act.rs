//! `gamepilot act --window W --actions FILE [--dry-run]`: run a JSON-lines script of intentions through the
//! full executor with every interlock (guardian, foreground guard, user-input pause, denied keys, budgets,
//! indicator), printing each accepted/rejected action and the held set as JSON lines on stdout.
//!
//! Lines start in order, each as soon as the previous one is accepted; only `wait` holds the next line back.
//! `act` exits when every action has finished or was rejected (0), when halted (2: panic key, hung-core
//! release, budget) or when paused by user input (3: resuming is the user's act — run it again).

use super::common::{now, WindowArgs};
use anyhow::Context as _;
use gamepilot_core::action::{Action, Intention};
use gamepilot_core::Chord;
use gamepilot_executor::{
    ActionId, Context, DeniedList, ExecState, Executor, ExecutorConfig, HeldRecord, TickInput, TickOutput,
};
use gamepilot_guardian::SharedState;
use gamepilot_x11::indicator::Indicator;
use gamepilot_x11::input::{DryRunSink, InputSink, XTestSink};
use gamepilot_x11::userinput::{RawInputWatch, Watch};
use serde_json::json;
use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
        let hz = self.hz.clamp(1, 1000);
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
}

/// The guardian child and the shared page it watches.
pub struct GuardianHandle {
    pub shm: SharedState,
    child: Child,
}

impl GuardianHandle {
    /// Start `gamepilot guardian` with its own X connection and wait until it is ready (FR-SAFE-003).
    pub fn spawn(display: Option<&str>, panic: &Chord, stale_ms: u64) -> anyhow::Result<GuardianHandle> {
        let (shm, fd) = SharedState::create_memfd(std::process::id())?;
        let exe = std::env::current_exe().context("locating the gamepilot binary for the guardian")?;
        let mut cmd = Command::new(exe);
        cmd.arg("guardian")
            .arg("--shm-fd")
            .arg(fd.to_string())
            .arg("--core-pid")
            .arg(std::process::id().to_string())
            .arg("--panic-key")
            .arg(panic.to_string())
            .arg("--stale-ms")
            .arg(stale_ms.to_string())
            .arg("--stdin-pipe")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        if let Some(d) = display {
            cmd.arg("--display").arg(d);
        }
        // Its own session and process group (issue 14): Ctrl+C, Ctrl+Z, a hang-up and `kill -- -PGID`
        // reach the core, never the guardian that must release after them.
        {
            use std::os::unix::process::CommandExt as _;
            // SAFETY: setsid(2) is async-signal-safe and touches only the forked child.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::setsid() < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().context("starting the guardian process")?;
        let deadline = Instant::now() + Duration::from_secs(5);
        while !shm.guardian_ready() {
            if let Some(status) = child.try_wait()? {
                anyhow::bail!("the guardian exited during start-up ({status}); refusing to arm input");
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                anyhow::bail!("the guardian did not become ready within 5 s; refusing to arm input");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(GuardianHandle { shm, child })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// False once the guardian has exited: input must not stay armed without it.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Disarm and let the guardian go (closing its pipe; it releases whatever is left and exits).
    pub fn finish(mut self) {
        self.shm.set_armed(false);
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fixed-rate tick schedule that records how late each tick woke (NFR-ACT-001).
pub struct Ticker {
    period: Duration,
    next: Instant,
    pub lateness_us: Vec<u64>,
}

impl Ticker {
    pub fn new(hz: u32) -> Ticker {
        let period = Duration::from_micros(1_000_000 / hz.max(1) as u64);
        Ticker {
            period,
            next: Instant::now(),
            lateness_us: Vec::new(),
        }
    }

    /// Sleep until the next tick; skips missed ticks rather than bursting.
    pub fn wait(&mut self) {
        let now = Instant::now();
        if self.next > now {
            std::thread::sleep(self.next - now);
        }
        let woke = Instant::now();
        self.lateness_us
            .push(woke.saturating_duration_since(self.next).as_micros() as u64);
        self.next += self.period;
        if self.next < woke {
            self.next = woke + self.period;
        }
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

use crate::interlocks::publish;

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

/// Audit against the server (INV-ACT-002) and report any divergence as an event.
fn audit(sink: &mut dyn InputSink, held: &HeldRecord) -> anyhow::Result<()> {
    if let Some(d) = crate::interlocks::audit(sink, held)? {
        let mut v = json!(d);
        v["event"] = json!("divergence");
        emit(v);
    }
    Ok(())
}

fn deliver(sink: &mut dyn InputSink, out: &TickOutput) -> anyhow::Result<()> {
    let skipped = sink.deliver(&out.events)?;
    for k in skipped {
        emit(json!({"event": "undeliverable", "key": k, "why": "no keycode on this keyboard"}));
    }
    Ok(())
}

fn read_script(path: &PathBuf) -> anyhow::Result<Vec<String>> {
    if path.as_os_str() == "-" {
        Ok(std::io::stdin().lock().lines().collect::<Result<_, _>>()?)
    } else {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Ok(text.lines().map(str::to_string).collect())
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let (cfg, panic) = args.limits.config()?;
    let lines = read_script(&args.actions)?;
    let (x, win) = args.target.resolve()?;
    let display = args.target.display.clone();
    let hz = args.limits.hz.clamp(1, 1000);
    // The guardian first: nothing is armed without it (FR-SAFE-003).
    let mut guardian = GuardianHandle::spawn(display.as_deref(), &panic, args.limits.stale_ms)?;
    let mut sink: Box<dyn InputSink> = if args.dry_run {
        Box::new(DryRunSink::default())
    } else {
        Box::new(XTestSink::connect(display.as_deref())?)
    };
    let mut watch =
        RawInputWatch::connect(display.as_deref(), Watch::All).context("starting the user-input watch")?;
    let _ = watch.poll()?; // discard anything queued before arming
    let mut ex = Executor::new(cfg);
    let indicator_text = if args.dry_run {
        format!("gamepilot: DRY RUN (panic {panic})")
    } else {
        format!("gamepilot: INPUT ARMED (panic {panic})")
    };
    let target_rect = x.client_rect(win.id).unwrap_or(win.geometry);
    let mut indicator = Indicator::show(display.as_deref(), target_rect, &indicator_text)
        .ok()
        .flatten();
    let mut status = Status {
        tty: std::io::stderr().is_terminal(),
        last: String::new(),
    };
    publish(&guardian.shm, ex.held());
    guardian.shm.set_armed(true);
    emit(
        json!({"event": "armed", "window": format!("0x{:x}", win.id), "dry_run": args.dry_run,
        "guardian_pid": guardian.pid(), "panic_key": panic.to_string(), "hz": hz}),
    );

    let mut ticker = Ticker::new(hz);
    let mut next_line = 0usize;
    let mut waiting: Option<ActionId> = None;
    let mut last_audit = Instant::now();
    let mut last_raise = Instant::now();
    let mut code = 0;
    let result: anyhow::Result<()> = (|| {
        loop {
            ticker.wait();
            let t = now();
            if !guardian.alive() {
                emit(json!({"event": "guardian_gone", "message": "the guardian exited; disarming"}));
                code = 1;
                return Ok(());
            }
            let halt = guardian.shm.halt();
            let Some(crate::interlocks::TargetSample {
                foreground,
                chain,
                pointer,
            }) = crate::interlocks::sample_target(&x, win.id)
            else {
                emit(json!({"event": "window_gone"}));
                code = 1;
                return Ok(());
            };
            // FR-SAFE-002: real-device input pauses the agent and releases everything at once.
            if let Some(ev) = watch.poll_user()? {
                let out = ex.pause_for_user();
                deliver(sink.as_mut(), &out)?;
                publish(&guardian.shm, ex.held());
                for r in &out.reports {
                    emit(json!({"event": "report", "report": r}));
                }
                let device = watch.device_name(ev.sourceid).unwrap_or("?").to_string();
                emit(
                    json!({"event": "paused", "reason": "user_input", "device": device, "sourceid": ev.sourceid,
                    "input": format!("{:?}", ev.kind)}),
                );
                emit(held_json(ex.held()));
                code = 3;
                return Ok(());
            }
            // Start script lines: each as soon as the previous one is accepted; `wait` holds the rest back.
            if waiting.is_some_and(|id| !ex.is_active(id)) {
                waiting = None;
            }
            let ctx = Context {
                now: t,
                foreground: foreground && halt.is_none(),
                chain,
            };
            while waiting.is_none() && next_line < lines.len() {
                let n = next_line + 1;
                let line = lines[next_line].trim().to_string();
                next_line += 1;
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let intention: Intention = match serde_json::from_str(&line) {
                    Ok(i) => i,
                    Err(e) => {
                        emit(
                            json!({"event": "rejected", "line": n, "reason": {"kind": "bad_json"},
                            "message": format!("not a valid action: {e}")}),
                        );
                        continue;
                    }
                };
                match ex.submit(&intention, &ctx) {
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
            let out = ex.tick(&TickInput {
                now: t,
                halt: halt.is_some(),
                foreground,
                chain,
                pointer,
            });
            deliver(sink.as_mut(), &out)?;
            publish(&guardian.shm, ex.held());
            for r in &out.reports {
                emit(json!({"event": "report", "report": r}));
            }
            if out.held_changed {
                emit(held_json(ex.held()));
            }
            let state = match ex.state() {
                ExecState::Armed if foreground => "ARMED",
                ExecState::Armed => "NOT FOREGROUND",
                ExecState::Paused => "PAUSED",
                ExecState::Halted { .. } => "HALTED",
            };
            status.show(state, ex.held(), args.dry_run);
            if let ExecState::Halted { reason } = ex.state() {
                emit(json!({"event": "halted", "reason": reason, "cause": halt}));
                audit(sink.as_mut(), ex.held())?;
                code = 2;
                return Ok(());
            }
            if out.events.iter().any(|e| e.is_release()) || last_audit.elapsed() >= Duration::from_secs(1) {
                audit(sink.as_mut(), ex.held())?;
                last_audit = Instant::now();
            }
            if last_raise.elapsed() >= Duration::from_secs(1) {
                if let Some(ind) = indicator.as_mut() {
                    let _ = ind.set_text(&format!("{indicator_text} {state}"));
                    let _ = ind.raise_and_draw();
                }
                last_raise = Instant::now();
            }
            if next_line >= lines.len() && waiting.is_none() && ex.active() == 0 {
                return Ok(());
            }
        }
    })();
    // Every exit path releases everything (FR-ACT-001).
    let out = ex.stop(gamepilot_executor::CancelReason::Halted);
    let _ = deliver(sink.as_mut(), &out);
    // A round trip on the sink's connection: the server has processed every release before we go on, and
    // anything the record does not own is released too (INV-ACT-002 on the release path).
    let _ = audit(sink.as_mut(), ex.held());
    publish(&guardian.shm, ex.held());
    if !out.events.is_empty() {
        emit(held_json(ex.held()));
    }
    drop(indicator.take());
    guardian.finish();
    if status.tty {
        eprintln!();
    }
    let mut late = ticker.lateness_us.clone();
    late.sort_unstable();
    let pct = |p: f64| {
        late.get(((late.len().saturating_sub(1)) as f64 * p) as usize)
            .copied()
            .unwrap_or(0)
    };
    emit(
        json!({"event": "done", "code": code, "dry_run": args.dry_run, "delivered": if sink.delivers() { sink.count() } else { 0 },
        "would_deliver": sink.count(), "ticks": late.len(), "lateness_us_p50": pct(0.5), "lateness_us_p99": pct(0.99)}),
    );
    result?;
    Ok(code)
}
