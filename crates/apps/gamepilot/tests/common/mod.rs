//! Shared support of the `gamepilot run` integration tests: the command line of a run on the practice game
//! against a scripted model host (one place for the arguments every such test passes).

#![allow(dead_code)] // each test file uses a part

use std::path::{Path, PathBuf};
use std::process::Command;

/// The binary under test.
pub fn gamepilot() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gamepilot"))
}

/// Every record of the recording in `dir`, in order.
pub fn events(dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("events.jsonl")).expect("events.jsonl");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

/// The texts of the recording's notes in `dir`, in order.
pub fn notes(dir: &Path) -> Vec<String> {
    events(dir)
        .iter()
        .filter(|e| e["kind"] == "note")
        .filter_map(|e| e["text"].as_str().map(str::to_string))
        .collect()
}

/// The sensors of the practice game.
pub fn sensors_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../examples/practice-arena.sensors")
}

/// What one test's run is asked to do.
pub struct RunSpec<'a> {
    pub goal: &'a str,
    pub goal_check: &'a str,
    pub max_actions: u32,
    pub budget_s: u32,
    pub grounding: &'a str,
}

/// `gamepilot run` on `window` of `display` with the host at `endpoint`, unattended, tactical ticks every
/// 100 ms, recording into `rec`.
pub fn run_command(display: &str, window: u32, endpoint: &str, spec: &RunSpec<'_>, rec: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gamepilot"));
    c.args(["run", "--display", display])
        .args(["--window", &format!("0x{window:x}")])
        .args(["--goal", spec.goal, "--goal-check", spec.goal_check])
        .arg("--sensors")
        .arg(sensors_file())
        .args(["--max-actions", &spec.max_actions.to_string()])
        .args(["--session-budget-s", &spec.budget_s.to_string()])
        .args([
            "--unattended",
            "--tactical-interval-ms",
            "100",
            "--grounding",
            spec.grounding,
        ])
        .arg("--record")
        .arg(rec);
    // Empty: gamepilot starts its own host (the test adds --llama-server and --model).
    if !endpoint.is_empty() {
        c.args(["--model-endpoint", endpoint]);
    }
    c
}

/// A finished command's stdout then stderr, for assertion messages.
pub fn show(out: &std::process::Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Press (and later release) a chord on the outer display while Xephyr has focus: it arrives in the
/// nested server from Xephyr's own keyboard, a device other than XTEST (the user's input, FR-SAFE-002).
pub fn outer_keys(bed: &gamepilot_testbed::TestBed, names: &[&str], down: bool) {
    let outer = gamepilot_x11::X11::connect(bed.outer_display.as_deref()).unwrap();
    let input = gamepilot_x11::input::XTestInput::new(&outer).unwrap();
    let mut codes: Vec<u8> = names
        .iter()
        .map(|n| {
            let sym = gamepilot_core::Keysym::from_name(n).unwrap();
            input.locate(sym).unwrap().keycode
        })
        .collect();
    if !down {
        codes.reverse();
    }
    for c in codes {
        input.key(&outer, c, down).unwrap();
    }
    input.sync(&outer).unwrap();
}

/// The mark of the element labelled `label` in a tactical prompt's current observation, on a listing
/// line that also contains `with` (" in popup", " selected" …; "" for any line).
pub fn mark_with(prompt: &str, label: &str, with: &str) -> Option<u64> {
    let quoted = format!("{label:?}");
    gamepilot_context::tail::current_listing(prompt)
        .iter()
        .flat_map(|block| block.lines().map(str::to_string).collect::<Vec<_>>())
        .find(|l| l.starts_with('[') && l.contains(&quoted) && l.contains(with))
        .and_then(|l| l[1..].split(']').next().and_then(|n| n.parse().ok()))
}
