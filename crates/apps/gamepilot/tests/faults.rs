//! The fault matrix of `gamepilot run`: under Xvfb, on the practice game, with the testbed's
//! scripted model host asking for long key holds, one fault per test while the core holds input — a stop
//! signal, the process group stopped, the core killed or stopped, the guardian killed, the model host gone,
//! the game closed, stopped, resized or black, the reflex thread panicking. Each asserts how the session
//! ended (or that it rightly kept going) with a named reason, that nothing is held on the X server
//! (XQueryKeymap and the pointer mask, not our own record), that the recording ends with `session_end` or is
//! readable up to the fault, and that `replay` and `report` read it. Figures go to stderr as `figures:`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support code

mod common;

use common::{gamepilot, outer_keys, run_command, RunSpec};
use gamepilot_testbed::{Arena, ArenaOptions, HostConfig, ReceivedChat, Reply, ScriptedHost, TestBed};
use serde_json::{json, Value};
use sha2::Digest as _;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Send `sig` to `pid` (a negative pid: to that process group).
fn kill(pid: i32, sig: libc::c_int) {
    // SAFETY: kill(2) on processes this test started.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// The host: a plan, then a long hold of `d` on every tactical call (so input is held at the fault).
fn holding_host() -> ScriptedHost {
    ScriptedHost::start(HostConfig::new(), |req: &ReceivedChat| {
        if req.system_text().contains("deliberative planner") {
            // A postcondition that stays false (so the subgoal stays active and tactical ticks run).
            return gamepilot_testbed::plan_reply(req, &[("walk right", "99")]);
        }
        Reply::json(&json!({"action": "hold_key", "key": "d", "duration_ms": 8000}))
    })
    .unwrap()
}

/// One `gamepilot run` under test, in its own process group (so a signal can go to the group).
struct Run {
    bed: TestBed,
    arena: Option<Arena>,
    host: Option<ScriptedHost>,
    child: Child,
    rec: PathBuf,
    out: PathBuf,
    _dir: tempfile::TempDir,
}

fn start(window: Option<u32>, env: &[(&str, &str)]) -> Run {
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::playing()).unwrap();
    start_on(bed, Some(arena), window, env)
}

fn start_on(bed: TestBed, arena: Option<Arena>, window: Option<u32>, env: &[(&str, &str)]) -> Run {
    start_with(bed, arena, window, env, false)
}

/// `piped`: standard output and error are pipes the test holds (and may close), not the log file.
fn start_with(
    bed: TestBed,
    arena: Option<Arena>,
    window: Option<u32>,
    env: &[(&str, &str)],
    piped: bool,
) -> Run {
    let host = holding_host();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("session");
    let out = dir.path().join("run.out");
    let log = std::fs::File::create(&out).unwrap();
    let id = window.or(arena.as_ref().map(|a| a.window.id)).unwrap();
    let spec = RunSpec {
        goal: "Walk right.",
        goal_check: "coins >= 99",
        max_actions: 50,
        budget_s: 120,
        grounding: "mark",
    };
    let mut c = run_command(&bed.display, id, &host.base_url(), &spec, &rec);
    c.envs(env.iter().copied()).stdin(Stdio::null()).process_group(0);
    if piped {
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
    } else {
        c.stdout(log.try_clone().unwrap()).stderr(log);
    }
    let child = c.spawn().unwrap();
    Run {
        bed,
        arena,
        host: Some(host),
        child,
        rec,
        out,
        _dir: dir,
    }
}

impl Run {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    fn held(&self) -> bool {
        !self.bed.x11().unwrap().server_held().unwrap().is_empty()
    }

    /// Wait until the X server holds a key the core pressed.
    fn wait_holding(&mut self) {
        let t0 = Instant::now();
        while !self.held() {
            if let Ok(Some(s)) = self.child.try_wait() {
                panic!("run exited ({s}) before holding anything:\n{}", self.output());
            }
            assert!(
                t0.elapsed() < Duration::from_secs(90),
                "nothing held after 90 s:\n{}\nlast records:\n{}",
                self.output(),
                self.last_records(20)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Time from now until the server holds nothing (panics past `limit`).
    fn released_within(&self, limit: Duration) -> Duration {
        let t0 = Instant::now();
        while self.held() {
            assert!(
                t0.elapsed() < limit,
                "still held after {limit:?}:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        t0.elapsed()
    }

    fn wait_exit(&mut self, limit: Duration) -> (ExitStatus, Duration) {
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return (s, t0.elapsed());
            }
            if t0.elapsed() > limit {
                let _ = self.child.kill();
                panic!("run did not exit within {limit:?}:\n{}", self.output());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn signal(&self, sig: libc::c_int) {
        kill(self.pid() as i32, sig);
    }

    fn signal_group(&self, sig: libc::c_int) {
        kill(-(self.pid() as i32), sig);
    }

    fn alive_for(&mut self, d: Duration) {
        let t0 = Instant::now();
        while t0.elapsed() < d {
            if let Ok(Some(s)) = self.child.try_wait() {
                panic!("run should have kept going but exited ({s}):\n{}", self.output());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The guardian the core started (its own session, so found through /proc by its core pid).
    fn guardian_pid(&self) -> u32 {
        let want = format!("--core-pid\0{}\0", self.pid());
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd);
            if cmd.contains("\0guardian\0") && cmd.contains(&want) {
                return pid;
            }
        }
        panic!("no guardian for core {}", self.pid());
    }

    fn last_records(&self, n: usize) -> String {
        let ev: Vec<Value> = self
            .events()
            .into_iter()
            .filter(|e| {
                let t = e.to_string();
                !(t.contains("reflex_tick")
                    || t.contains("\"reflex_timing\"")
                    || t.contains("\"input\":\"reflex\"")
                    || e["kind"] == "timing")
            })
            .collect();
        ev.iter()
            .take(n)
            .map(|e| {
                let mut t = e.to_string();
                t.truncate(300);
                t
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn events(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.rec.join("events.jsonl")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The recording is readable by `replay` and `report`; returns whether it ends with `session_end`.
    fn recording_reads(&self) -> bool {
        let ev = self.events();
        assert!(!ev.is_empty(), "the recording has records");
        let replay = gamepilot().arg("replay").arg(&self.rec).output().unwrap();
        assert!(
            replay.status.success(),
            "replay reads it and reproduces every recorded effect: {}\n{}",
            String::from_utf8_lossy(&replay.stdout),
            String::from_utf8_lossy(&replay.stderr)
        );
        let html = self.rec.join("report.html");
        let report = gamepilot()
            .arg("report")
            .arg(&self.rec)
            .arg("--out")
            .arg(&html)
            .output()
            .unwrap();
        assert!(
            report.status.success() && html.is_file(),
            "report reads it: {}",
            String::from_utf8_lossy(&report.stderr)
        );
        ev.last().map(|e| e["kind"] == "session_end").unwrap_or(false)
    }

    fn stop_reason(&self) -> String {
        self.events()
            .iter()
            .rev()
            .find(|e| e["kind"] == "session_end")
            .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
            .unwrap_or_default()
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// SIGINT, SIGTERM, SIGHUP: release at once, a clean stop with summary and `session_end`, exit 128 + n,
/// all within 2 s.
fn clean_stop_on(sig: libc::c_int, name: &str, code: i32) {
    let mut r = start(None, &[]);
    r.wait_holding();
    let t0 = Instant::now();
    r.signal(sig);
    let released = r.released_within(Duration::from_secs(2));
    let (status, _) = r.wait_exit(Duration::from_secs(10));
    let stopped = t0.elapsed();
    assert!(
        stopped < Duration::from_secs(2),
        "stopped within 2 s: {stopped:?}"
    );
    let out = r.output();
    assert_eq!(status.code(), Some(code), "{out}");
    assert!(
        out.contains(&format!("session stopped: Stopped (signal {name})")),
        "{out}"
    );
    assert!(r.recording_reads(), "the recording ends with session_end");
    assert!(r.stop_reason().contains(name), "{}", r.stop_reason());
    assert!(!r.held());
    eprintln!("figures: {name}: released {released:?} after the signal; run exited {stopped:?} after it");
}

#[test]
fn sigint_stops_the_session_cleanly() {
    // FR-ACT-001, INV-SAFE-002
    clean_stop_on(libc::SIGINT, "SIGINT", 130);
}

#[test]
fn sigterm_stops_the_session_cleanly() {
    // FR-ACT-001, INV-SAFE-002
    clean_stop_on(libc::SIGTERM, "SIGTERM", 143);
}

#[test]
fn sighup_stops_the_session_cleanly() {
    // FR-ACT-001, INV-SAFE-002
    clean_stop_on(libc::SIGHUP, "SIGHUP", 129);
}

#[test]
fn a_closed_terminal_loses_neither_the_run_nor_its_recording() {
    // FR-SAFE-003, INV-SAFE-002: the terminal closes (writes fail: EPIPE here, EIO on a tty), then its
    // SIGHUP arrives; the status lines fail silently and the stop is clean, named and recorded.
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::playing()).unwrap();
    let mut r = start_with(bed, Some(arena), None, &[], true);
    r.wait_holding();
    drop(r.child.stdout.take());
    drop(r.child.stderr.take());
    // Long enough for a status line (every 500 ms) to meet the closed pipe.
    std::thread::sleep(Duration::from_millis(1200));
    assert!(
        r.child.try_wait().unwrap().is_none(),
        "still running with its terminal gone"
    );
    r.signal(libc::SIGHUP);
    let (status, _) = r.wait_exit(Duration::from_secs(10));
    assert_eq!(
        status.code(),
        Some(129),
        "a clean stop by SIGHUP, not a panic's 101"
    );
    assert!(r.recording_reads(), "the recording ends with session_end");
    assert!(r.stop_reason().contains("SIGHUP"), "{}", r.stop_reason());
    assert!(!r.held());
}

#[test]
fn timeouts_sigterm_to_the_process_and_its_group_is_one_clean_stop() {
    // FR-SAFE-003, INV-SAFE-002: `timeout 40 gamepilot run …` signals the child, then its process group
    let mut r = start(None, &[]);
    r.wait_holding();
    r.signal(libc::SIGTERM);
    r.signal_group(libc::SIGTERM);
    let (status, stopped) = r.wait_exit(Duration::from_secs(10));
    let out = r.output();
    assert_eq!(status.code(), Some(143), "{out}");
    assert!(
        out.contains("session stopped: Stopped (signal SIGTERM)"),
        "a clean stop: {out}"
    );
    assert!(r.recording_reads(), "the recording ends with session_end");
    assert!(!r.held());
    eprintln!("figures: SIGTERM to the process and its group: exited {stopped:?} after, cleanly");
}

#[test]
fn a_frozen_guardian_is_noticed_and_the_core_disarms_named() {
    // FR-SAFE-003: a stopped guardian still exists as a process but would release nothing after a crash
    let mut r = start(None, &[]);
    r.wait_holding();
    let guardian = r.guardian_pid();
    kill(guardian as i32, libc::SIGSTOP);
    let t0 = Instant::now();
    let released = r.released_within(Duration::from_secs(3));
    let (status, stopped) = r.wait_exit(Duration::from_secs(10));
    kill(guardian as i32, libc::SIGCONT);
    let out = r.output();
    assert_eq!(status.code(), Some(4), "{out}");
    assert!(r.recording_reads());
    let reason = r.stop_reason();
    assert!(
        reason.contains("guardian_gone") && reason.contains("heartbeat"),
        "the stale heartbeat is named: {reason}"
    );
    assert!(!r.held());
    eprintln!(
        "figures: guardian stopped: released {released:?}, run exited {:?} after the SIGSTOP",
        t0.elapsed().max(stopped)
    );
}

#[test]
fn a_reflex_that_never_returns_cannot_hang_the_stop() {
    // FR-SAFE-003, FR-ACT-001: the stop is bounded, named, recorded; the guardian releases at the exit
    let mut r = start(None, &[("GAMEPILOT_FAULT", "reflex-block@1")]);
    r.wait_holding();
    let t0 = Instant::now();
    r.signal(libc::SIGINT);
    let (status, _) = r.wait_exit(Duration::from_secs(8));
    let exited = t0.elapsed();
    let released = r.released_within(Duration::from_secs(2));
    let out = r.output();
    assert_eq!(status.code(), Some(1), "{out}");
    assert!(
        out.contains("the reflex thread did not stop within 2 s"),
        "named: {out}"
    );
    assert!(exited < Duration::from_secs(5), "bounded: {exited:?}");
    assert!(r.recording_reads(), "the recording ends with session_end");
    eprintln!("figures: blocked reflex: run exited {exited:?} after SIGINT, released {released:?} after");
}

#[test]
fn without_working_ocr_run_refuses_to_start_named() {
    // FR-SAFE-005: without screen text the destructive-action hold is blind; nothing may be sent
    let empty = tempfile::tempdir().unwrap();
    let mut r = start(None, &[("GAMEPILOT_OCR_DIR", empty.path().to_str().unwrap())]);
    let (status, _) = r.wait_exit(Duration::from_secs(20));
    let out = r.output();
    assert_eq!(status.code(), Some(1), "{out}");
    assert!(
        out.contains("OCR does not work") && out.contains("det.onnx"),
        "named: {out}"
    );
    assert!(!r.held());
    let presses = r.arena.as_ref().unwrap().request_dump().unwrap()["key_events"].clone();
    assert!(
        presses.as_object().is_none_or(|m| m.is_empty()),
        "nothing reached the game: {presses}"
    );
}

#[test]
fn ctrl_c_while_the_model_host_starts_ends_the_run_named_and_the_host_with_it() {
    // FR-SAFE-003: a signal at any moment ends `run` within 2 s, named (128 + n), never "host exited"
    let mut bed = TestBed::start().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::playing()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A host that never becomes ready, as a large model loading; it says which process it is.
    let pid_file = dir.path().join("host.pid");
    let server = dir.path().join("slow-server");
    std::fs::write(
        &server,
        format!(
            "#!/bin/sh\n[ \"$1\" = --help ] && exit 0\necho $$ > {}\nexec sleep 600\n",
            pid_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&server, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let weights = dir.path().join("model.gguf");
    std::fs::write(&weights, b"GGUF weights").unwrap();
    let sha: String = sha2::Sha256::digest(b"GGUF weights")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let spec = RunSpec {
        goal: "Walk right.",
        goal_check: "coins >= 99",
        max_actions: 5,
        budget_s: 60,
        grounding: "mark",
    };
    let out = dir.path().join("run.out");
    let log = std::fs::File::create(&out).unwrap();
    let mut child = run_command(
        &bed.display,
        arena.window.id,
        "",
        &spec,
        &dir.path().join("session"),
    )
    .arg("--llama-server")
    .arg(&server)
    .arg("--model")
    .arg(&weights)
    .args(["--model-sha256", &sha])
    .stdin(Stdio::null())
    .stdout(log.try_clone().unwrap())
    .stderr(log)
    .process_group(0)
    .spawn()
    .unwrap();
    let t0 = Instant::now();
    let host_pid = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
        {
            break pid;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "the host never started");
        assert!(
            child.try_wait().unwrap().is_none(),
            "{}",
            std::fs::read_to_string(&out).unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // Ctrl+C: the terminal signals the whole foreground process group.
    let signalled = Instant::now();
    kill(-(child.id() as i32), libc::SIGINT);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(signalled.elapsed() < Duration::from_secs(10), "run did not exit");
        std::thread::sleep(Duration::from_millis(5));
    };
    let exited = signalled.elapsed();
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(status.code(), Some(130), "{text}");
    assert!(exited < Duration::from_secs(2), "within 2 s: {exited:?}");
    assert!(
        text.contains("Stopped (signal SIGINT) during start-up"),
        "named: {text}"
    );
    let gone = Instant::now();
    while std::path::Path::new(&format!("/proc/{host_pid}/cmdline")).exists()
        && std::fs::read_to_string(format!("/proc/{host_pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
    {
        assert!(
            gone.elapsed() < Duration::from_secs(2),
            "the host outlived the run"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!("figures: SIGINT while the host starts: run exited {exited:?} after it, code 130");
}

#[test]
fn the_users_input_pauses_the_run_and_sigusr1_resumes_it() {
    // FR-SAFE-002: the user takes the keyboard: released at once, the agent waits (not stopped), and goes on
    // when the user says so; the pause is recorded with its length
    let mut bed = TestBed::start_nested().unwrap();
    let arena = Arena::launch(&mut bed, &ArenaOptions::playing()).unwrap();
    let mut r = start_on(bed, Some(arena), None, &[]);
    r.wait_holding();
    let t0 = Instant::now();
    outer_keys(&r.bed, &["x"], true);
    outer_keys(&r.bed, &["x"], false);
    let released = r.released_within(Duration::from_secs(1));
    // Paused: still running, and nothing is pressed again while the user has the game.
    let quiet = Instant::now();
    while quiet.elapsed() < Duration::from_secs(3) {
        assert!(
            r.child.try_wait().unwrap().is_none(),
            "paused, not stopped:\n{}",
            r.output()
        );
        assert!(!r.held(), "nothing pressed while paused");
        std::thread::sleep(Duration::from_millis(20));
    }
    r.signal(libc::SIGUSR1);
    let resumed = Instant::now();
    r.wait_holding();
    let holding_again = resumed.elapsed();
    r.signal(libc::SIGINT);
    let (status, _) = r.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(130), "{}", r.output());
    assert!(r.recording_reads());
    let interlocks: Vec<String> = r
        .events()
        .iter()
        .filter(|e| e["kind"] == "interlock")
        .map(|e| e.to_string())
        .collect();
    assert!(
        interlocks.iter().any(|e| e.contains("user_input")),
        "{interlocks:?}"
    );
    assert!(
        interlocks.iter().any(|e| e.contains("user_resume")),
        "{interlocks:?}"
    );
    assert!(!r.held());
    eprintln!(
        "figures: user input: released {released:?} after the key ({:?} in all); holding again {holding_again:?} after SIGUSR1",
        t0.elapsed()
    );
}

#[test]
fn a_second_sigint_exits_at_once_and_the_guardian_releases() {
    // FR-SAFE-003: the second Ctrl+C does not wait for the clean stop
    let mut r = start(None, &[]);
    r.wait_holding();
    r.signal(libc::SIGINT);
    r.signal(libc::SIGINT);
    let (status, exited) = r.wait_exit(Duration::from_secs(2));
    assert_eq!(status.code(), Some(130), "{}", r.output());
    let released = r.released_within(Duration::from_secs(1));
    let _ = r.recording_reads();
    eprintln!("figures: second SIGINT: exited {exited:?}, nothing held {released:?} later");
}

/// SIGTSTP to the process group or SIGSTOP to the core: the guardian (own session) releases on the stale
/// heartbeat while the core is stopped; resumed, the core finds itself halted and stops, named.
fn stopped_core(group: bool) {
    let mut r = start(None, &[]);
    r.wait_holding();
    let guardian = r.guardian_pid();
    if group {
        r.signal_group(libc::SIGTSTP);
    } else {
        r.signal(libc::SIGSTOP);
    }
    let released = r.released_within(Duration::from_secs(2));
    assert!(
        std::path::Path::new(&format!("/proc/{guardian}")).exists(),
        "the guardian is not in the core's group and kept running"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!r.held(), "nothing is pressed again while the core is stopped");
    if group {
        r.signal_group(libc::SIGCONT);
    } else {
        r.signal(libc::SIGCONT);
    }
    let (status, stopped) = r.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(4), "{}", r.output());
    assert!(r.recording_reads());
    let reason = r.stop_reason();
    assert!(
        reason.contains("StaleHeartbeat") || reason.contains("halt"),
        "{reason}"
    );
    assert!(!r.held());
    let what = if group {
        "SIGTSTP to the group"
    } else {
        "SIGSTOP of the core"
    };
    eprintln!("figures: {what}: released {released:?} (stale bound 250 ms); after SIGCONT stopped in {stopped:?}: {reason}");
}

#[test]
fn sigtstp_to_the_process_group_leaves_the_guardian_to_release() {
    // FR-SAFE-003, decisions.md "hung core"
    stopped_core(true);
}

#[test]
fn sigstop_of_the_core_is_a_hung_core_the_guardian_releases() {
    // FR-SAFE-003, decisions.md "hung core"
    stopped_core(false);
}

/// Whether process `pid` has exited: gone, or a zombie its new parent (the core was its parent) has not
/// reaped yet.
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state == 'Z'),
        Err(_) => true,
    }
}

#[test]
fn sigkill_of_the_core_leaves_a_recording_readable_up_to_the_fault() {
    // FR-SAFE-003, INV-CTX-002: every record was flushed when it was written
    let mut r = start(None, &[]);
    r.wait_holding();
    let guardian = r.guardian_pid();
    std::thread::sleep(Duration::from_millis(500));
    r.signal(libc::SIGKILL);
    let released = r.released_within(Duration::from_secs(1));
    let (status, _) = r.wait_exit(Duration::from_secs(2));
    assert_eq!(status.code(), None, "killed");
    let t0 = Instant::now();
    while !exited(guardian) {
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "the guardian exits after releasing"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let ends = r.recording_reads();
    assert!(!ends, "no session_end after a kill -9");
    assert!(
        r.events().iter().any(|e| e["kind"] == "action"),
        "the actions before the kill are in the recording"
    );
    eprintln!("figures: SIGKILL of the core: nothing held {released:?} after (server + guardian)");
}

#[test]
fn sigkill_of_the_guardian_stops_the_session_named() {
    // FR-SAFE-003: `run` checks the guardian every tick and halts when it is gone
    let mut r = start(None, &[]);
    r.wait_holding();
    kill(r.guardian_pid() as i32, libc::SIGKILL);
    let released = r.released_within(Duration::from_secs(2));
    let (status, stopped) = r.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(4), "{}", r.output());
    assert!(r.recording_reads());
    let reason = r.stop_reason();
    assert!(reason.to_lowercase().contains("guardian"), "{reason}");
    eprintln!("figures: SIGKILL of the guardian: released {released:?}, run stopped {stopped:?}: {reason}");
}

#[test]
fn a_model_host_that_dies_stops_the_session_named() {
    // FR-MODEL-001: a killed host is a named stop, not an idle session until its budget
    let mut r = start(None, &[]);
    r.wait_holding();
    drop(r.host.take()); // the host's socket closes: every later call is refused
    let (status, stopped) = r.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(4), "{}", r.output());
    assert!(r.recording_reads());
    let reason = r.stop_reason();
    assert!(reason.contains("ModelHostGone"), "{reason}");
    assert!(!r.held());
    eprintln!("figures: model host gone: run stopped {stopped:?} later: {reason}");
}

#[test]
fn the_game_window_closed_stops_the_session_named() {
    // FR-PERC-002: a vanished window is a named stop
    let mut r = start(None, &[]);
    r.wait_holding();
    let pid = r.arena.take().unwrap().pid;
    r.bed.kill_child(pid);
    let (status, stopped) = r.wait_exit(Duration::from_secs(15));
    assert_eq!(status.code(), Some(4), "{}", r.output());
    assert!(r.recording_reads());
    let reason = r.stop_reason();
    assert!(
        reason.contains("WindowClosed") || reason.contains("Capture"),
        "{reason}"
    );
    assert!(!r.held());
    eprintln!("figures: game window closed: run stopped {stopped:?} later: {reason}");
}

#[test]
fn a_stopped_game_keeps_the_session_going_and_a_signal_still_ends_it() {
    // A game that stops drawing is not our fault to stop for (it may resume); the session
    // keeps going and still stops cleanly
    let mut r = start(None, &[]);
    r.wait_holding();
    let pid = r.arena.as_ref().unwrap().pid;
    kill(pid as i32, libc::SIGSTOP);
    r.alive_for(Duration::from_secs(4));
    r.signal(libc::SIGINT);
    let released = r.released_within(Duration::from_secs(2));
    let (status, _) = r.wait_exit(Duration::from_secs(10));
    kill(pid as i32, libc::SIGCONT);
    assert_eq!(status.code(), Some(130), "{}", r.output());
    assert!(r.recording_reads());
    eprintln!("figures: game SIGSTOPped: kept going 4 s; SIGINT released {released:?}");
}

#[test]
fn a_window_resized_mid_action_is_tracked_and_the_session_goes_on() {
    // FR-PERC-002: the transform chain is rebuilt (generation++) and the session continues
    let mut r = start(None, &[]);
    r.wait_holding();
    let id = r.arena.as_ref().unwrap().window.id;
    {
        use x11rb::connection::Connection as _;
        use x11rb::protocol::xproto::{ConfigureWindowAux, ConnectionExt as _};
        // The practice game fixes its size hints, so the window manager applies the move and refuses
        // the new size (as it would for a user dragging a fixed-size game window).
        let x = r.bed.x11().unwrap();
        let before = x.client_rect(id).unwrap();
        x.conn
            .configure_window(
                id,
                &ConfigureWindowAux::new()
                    .x(before.x - 37)
                    .y(before.y - 21)
                    .width(1000)
                    .height(600),
            )
            .unwrap();
        x.conn.flush().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert_ne!(x.client_rect(id).unwrap(), before, "the window manager moved it");
    }
    r.alive_for(Duration::from_secs(3));
    let changed = r.events().iter().any(|e| {
        serde_json::to_string(e)
            .unwrap_or_default()
            .contains("window_changed")
    });
    r.signal(libc::SIGINT);
    let (status, _) = r.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(130), "{}", r.output());
    assert!(
        changed,
        "the window change is recorded:\n{}",
        r.last_records(400)
            .lines()
            .filter(|l| l.contains("interlock") || l.contains("generation\":1"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(r.recording_reads());
    assert!(!r.held());
}

#[test]
fn a_black_window_is_named_and_the_session_goes_on() {
    // FR-PERC-009: a black frame is named in the recording; the session keeps going
    use x11rb::connection::Connection as _;
    use x11rb::protocol::xproto::{ConnectionExt as _, CreateWindowAux, WindowClass};
    let bed = TestBed::start().unwrap();
    let (conn, screen_num) = x11rb::connect(Some(&bed.display)).unwrap();
    let screen = &conn.setup().roots[screen_num];
    let id = conn.generate_id().unwrap();
    conn.create_window(
        screen.root_depth,
        id,
        screen.root,
        0,
        0,
        800,
        600,
        0,
        WindowClass::INPUT_OUTPUT,
        screen.root_visual,
        &CreateWindowAux::new().background_pixel(screen.black_pixel),
    )
    .unwrap();
    conn.map_window(id).unwrap();
    conn.flush().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let mut r = start_on(bed, None, Some(id), &[]);
    r.alive_for(Duration::from_secs(8));
    let named = r.events().iter().any(|e| {
        let s = serde_json::to_string(e).unwrap_or_default().to_lowercase();
        s.contains("black")
    });
    r.signal(libc::SIGINT);
    let (status, _) = r.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(130), "{}", r.output());
    assert!(named, "the black frame is named in the recording");
    assert!(r.recording_reads());
    assert!(!r.held());
    drop(conn);
}

#[test]
fn a_reflex_thread_panic_releases_and_stops_the_session_named() {
    // No thread dies silently; the reflex's releases run before it reports its end
    let mut r = start(None, &[("GAMEPILOT_FAULT", "reflex-panic@60")]);
    r.wait_holding();
    let released = r.released_within(Duration::from_secs(30));
    let (status, stopped) = r.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(4), "{}", r.output());
    assert!(r.recording_reads(), "session_end written");
    let reason = r.stop_reason();
    assert!(
        reason.contains("reflex") && reason.contains("panicked"),
        "{reason}"
    );
    eprintln!("figures: reflex panic: released then stopped {stopped:?} later: {reason} (released {released:?} after holding was seen)");
}
