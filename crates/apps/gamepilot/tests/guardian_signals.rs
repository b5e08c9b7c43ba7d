//! The guardian survives what stops the core (FR-SAFE-001/003, INV-SAFE-002), under Xvfb with the
//! server's own key state (XQueryKeymap) as the judge: the guardian runs in a session and process group of
//! its own; SIGTSTP to the core's group stops the core but not the guardian, which releases through the stale
//! heartbeat; SIGINT/SIGHUP/SIGTSTP sent to the guardian itself are ignored; SIGTERM makes it release what the
//! core's page says is held before it exits; and a halted page with a stale heartbeat still gets released.
//!
//! In every test the "core" keeps its X connection open, so a release seen on the server is the guardian's
//! own, never the server's clean-up of a closed XTest client.

// Test helpers outside #[test] functions may unwrap too: this whole file is test code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gamepilot_core::Keysym;
use gamepilot_guardian::{monotonic_us, process_group_and_session, HaltCause, SharedState};
use gamepilot_testbed::{Arena, ArenaOptions, TestBed};
use gamepilot_x11::input::XTestInput;
use gamepilot_x11::X11;
use serde_json::Value;
use std::io::{BufRead as _, Write as _};
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn kill(pid: i32, sig: libc::c_int) {
    // SAFETY: kill(2) with a pid (or -pgid) and a valid signal.
    unsafe {
        libc::kill(pid, sig);
    }
}

fn held(x: &X11, code: u8) -> bool {
    x.server_held().unwrap().keycodes.contains(&code)
}

fn wait_until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "{what} (waited {limit:?})");
        std::thread::sleep(Duration::from_millis(5));
    }
    t0.elapsed()
}

/// A guardian started directly on a page file, with the test process as its "core".
struct DirectGuardian {
    child: Child,
    page: Arc<SharedState>,
    beating: Arc<AtomicBool>,
    log: std::path::PathBuf,
}

impl DirectGuardian {
    fn start(bed: &TestBed, stale_ms: u64) -> DirectGuardian {
        let path = bed.dir.path().join("guardian.page");
        let page = Arc::new(SharedState::create_file(&path, std::process::id()).unwrap());
        page.heartbeat(monotonic_us());
        page.set_armed(true);
        let log = bed.dir.path().join("guardian.stderr");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gamepilot"));
        cmd.args(["guardian", "--display", &bed.display, "--shm"])
            .arg(&path)
            .args(["--core-pid", &std::process::id().to_string()])
            .args(["--stale-ms", &stale_ms.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let child = cmd.spawn().unwrap();
        wait_until(Duration::from_secs(10), "guardian never became ready", || {
            page.guardian_ready()
        });
        let beating = Arc::new(AtomicBool::new(true));
        let (p, b) = (page.clone(), beating.clone());
        std::thread::spawn(move || {
            while Arc::strong_count(&b) > 1 {
                if b.load(Ordering::SeqCst) {
                    p.heartbeat(monotonic_us());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        DirectGuardian {
            child,
            page,
            beating,
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn state(&self) -> char {
        process_group_and_session(self.child.id()).map_or('?', |s| s.2)
    }
}

impl Drop for DirectGuardian {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Press `w` through the test's own XTest connection (which stays open) and publish it as held.
fn press_w(x: &X11, page: &SharedState) -> u8 {
    let input = XTestInput::new(x).unwrap();
    let w = input.locate(Keysym('w' as u32)).unwrap().keycode;
    input.key(x, w, true).unwrap();
    input.sync(x).unwrap();
    page.publish(&['w' as u32], &[], monotonic_us());
    assert!(held(x, w), "the test could not press w");
    w
}

#[test]
fn guardian_ignores_terminal_signals_and_releases_on_sigterm_before_exiting() {
    // The guardian survives what stops the core; FR-SAFE-003, INV-SAFE-002
    let bed = TestBed::start().unwrap();
    let mut g = DirectGuardian::start(&bed, 250);
    let x = bed.x11().unwrap();
    let w = press_w(&x, &g.page);
    // Ctrl+C, a hang-up and Ctrl+Z aimed at it are ignored: it stays running, not stopped.
    for sig in [
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGTSTP,
        libc::SIGTTOU,
        libc::SIGUSR1,
    ] {
        kill(g.child.id() as i32, sig);
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(g.child.try_wait().unwrap().is_none(), "{}", g.log());
    assert!("RS".contains(g.state()), "guardian state {}", g.state());
    assert!(held(&x, w), "nothing should have been released yet: {}", g.log());
    // SIGTERM: what the page says is held is released before the guardian exits.
    kill(g.child.id() as i32, libc::SIGTERM);
    let took = wait_until(Duration::from_secs(2), "w still held after SIGTERM", || {
        !held(&x, w)
    });
    eprintln!("SIGTERM → release took {took:?}");
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = g.child.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(2), "guardian did not exit");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(status.code(), Some(143), "{}", g.log());
    assert_eq!(g.page.halt(), Some(HaltCause::GuardianStopped));
    assert!(x.server_held().unwrap().is_empty());
    let log = g.log();
    assert!(log.contains("guardian: GuardianStopped: released"), "{log}");
    assert!(log.contains("guardian: ignored"), "{log}");
}

#[test]
fn halted_guardian_still_releases_a_key_pressed_after_the_halt_on_a_stale_heartbeat() {
    // The stale check is not skipped once halted (a core that stalls right after a panic
    // release can otherwise leave a key down), FR-SAFE-001, INV-SAFE-002
    let bed = TestBed::start().unwrap();
    let g = DirectGuardian::start(&bed, 150);
    let x = bed.x11().unwrap();
    // The panic release happened; the core has not read the flag yet ...
    g.page.set_halt(HaltCause::Panic);
    std::thread::sleep(Duration::from_millis(50));
    // ... presses a key on its next tick, publishes it, and stalls.
    let w = press_w(&x, &g.page);
    g.beating.store(false, Ordering::SeqCst);
    wait_until(
        Duration::from_secs(2),
        "a key pressed after the halt stayed down on a stale heartbeat",
        || !held(&x, w),
    );
    // Measured from the last heartbeat on the page (a loaded machine may have starved the beating
    // thread before it was stopped), not from the stop.
    let since_beat_ms = monotonic_us().saturating_sub(g.page.heartbeat_us()) / 1000;
    assert!(
        since_beat_ms >= 100,
        "released before stale? {since_beat_ms} ms after the last beat"
    );
    assert!(x.server_held().unwrap().is_empty());
    // The first cause stays on the page.
    assert_eq!(g.page.halt(), Some(HaltCause::Panic));
    // The guardian logs after it released: give the line a moment to reach the file.
    wait_until(
        Duration::from_secs(2),
        "the guardian logs its StaleHeartbeat release",
        || g.log().contains("guardian: StaleHeartbeat"),
    );
}

fn start_act_in_own_group(bed: &TestBed, arena: &Arena) -> (Child, u32) {
    let p = bed.dir.path().join("hold.jsonl");
    let mut f = std::fs::File::create(&p).unwrap();
    writeln!(f, r#"{{"action":"hold_key","key":"w","duration_ms":8000}}"#).unwrap();
    let err = bed.dir.path().join("act.stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_gamepilot"))
        .args([
            "act",
            "--display",
            &bed.display,
            "--window",
            &format!("0x{:x}", arena.window.id),
            "--actions",
        ])
        .arg(&p)
        // The core leads a group of its own, as a shell job would: signals to it spare the test runner.
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let armed: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(armed["event"], "armed", "{first}");
    let guardian = armed["guardian_pid"].as_u64().unwrap() as u32;
    std::thread::spawn(move || for _ in stdout.lines() {});
    (child, guardian)
}

#[test]
fn guardian_has_its_own_session_and_survives_sigtstp_and_sigkill_of_the_cores_group() {
    // Ctrl+Z / kill -- -PGID reach the core, not the guardian; FR-SAFE-003, INV-SAFE-002
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::playing()).unwrap();
    let (mut core, guardian) = start_act_in_own_group(&bed, &arena);
    let x = bed.x11().unwrap();
    let w = XTestInput::new(&x)
        .unwrap()
        .locate(Keysym('w' as u32))
        .unwrap()
        .keycode;
    wait_until(Duration::from_secs(10), "act never held w", || held(&x, w));
    let (core_pgrp, core_sid, _) = process_group_and_session(core.id()).unwrap();
    let (g_pgrp, g_sid, _) = process_group_and_session(guardian).unwrap();
    assert_eq!(core_pgrp, core.id());
    assert_eq!(g_pgrp, guardian, "the guardian leads its own process group");
    assert_eq!(g_sid, guardian, "the guardian leads its own session");
    assert_ne!((g_pgrp, g_sid), (core_pgrp, core_sid));
    // Ctrl+Z of the core's job: the core stops, the guardian does not and releases on the stale heartbeat.
    kill(-(core_pgrp as i32), libc::SIGTSTP);
    let took = wait_until(
        Duration::from_secs(2),
        "w still held after SIGTSTP to the group",
        || !held(&x, w),
    );
    eprintln!("SIGTSTP to the core's group → guardian release after {took:?}");
    assert_eq!(process_group_and_session(core.id()).map(|s| s.2), Some('T'));
    let g_state = process_group_and_session(guardian).unwrap().2;
    assert!("RS".contains(g_state), "guardian state {g_state}");
    assert!(x.server_held().unwrap().is_empty());
    // kill -- -PGID: the whole group of the core dies; the guardian outlives it and exits on its own.
    kill(-(core_pgrp as i32), libc::SIGKILL);
    let _ = core.wait();
    wait_until(
        Duration::from_secs(2),
        "the guardian did not exit after the core",
        || process_group_and_session(guardian).is_none_or(|s| s.2 == 'Z'),
    );
    assert!(x.server_held().unwrap().is_empty());
    let log = std::fs::read_to_string(bed.dir.path().join("act.stderr")).unwrap();
    assert!(log.contains("guardian: StaleHeartbeat"), "{log}");
    assert!(log.contains("guardian: CoreDied"), "{log}");
}
