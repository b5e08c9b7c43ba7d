//! Launching the practice game on a test bed and reading the true state it reports (JSON lines).

use crate::xserver::{TestBed, TestBedError};
use gamepilot_x11::{WindowInfo, WindowSelector};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct ArenaOptions {
    pub seed: u64,
    pub width: u32,
    pub height: u32,
    pub extra_args: Vec<String>,
}

impl Default for ArenaOptions {
    fn default() -> Self {
        ArenaOptions {
            seed: 7,
            width: 1280,
            height: 720,
            extra_args: Vec::new(),
        }
    }
}

impl ArenaOptions {
    /// The default game, started on its play screen (no menu to click first).
    pub fn playing() -> Self {
        ArenaOptions {
            extra_args: vec!["--start-screen".into(), "play".into()],
            ..Default::default()
        }
    }
}

/// A running practice game.
pub struct Arena {
    pub pid: u32,
    pub window: WindowInfo,
    pub state_file: PathBuf,
    pub frame_file: PathBuf,
}

impl Arena {
    /// Launch the game on `bed` and wait until its window is mapped and focused.
    pub fn launch(bed: &mut TestBed, opts: &ArenaOptions) -> Result<Arena, TestBedError> {
        let bin = TestBed::workspace_binary("practice-arena")?;
        let state_file = bed.dir.path().join(format!("arena-{}.jsonl", opts.seed));
        let frame_file = bed.dir.path().join(format!("arena-{}-frame.png", opts.seed));
        let mut cmd = Command::new(bin);
        cmd.arg("--seed")
            .arg(opts.seed.to_string())
            .arg("--width")
            .arg(opts.width.to_string())
            .arg("--height")
            .arg(opts.height.to_string())
            .arg("--state-file")
            .arg(&state_file)
            .arg("--frame-dump")
            .arg(&frame_file)
            .args(&opts.extra_args);
        let pid = bed.spawn("practice-arena", cmd)?;
        let x = bed.x11()?;
        let deadline = Instant::now() + Duration::from_secs(15);
        let window = loop {
            if let Ok(w) = x.find_window(&WindowSelector::Pid(pid)) {
                if w.mapped && x.is_foreground(w.id).unwrap_or(false) && state_file.exists() {
                    break w;
                }
                if w.mapped {
                    let _ = x.activate(w.id);
                }
            }
            if Instant::now() > deadline {
                return Err(TestBedError::Timeout {
                    what: "practice-arena window".into(),
                    secs: 15,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        Ok(Arena {
            pid,
            window,
            state_file,
            frame_file,
        })
    }

    /// The most recent state line the game wrote.
    pub fn state(&self) -> Result<Value, TestBedError> {
        let text = std::fs::read_to_string(&self.state_file)?;
        let line = text
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .ok_or_else(|| TestBedError::Other("empty state file".into()))?;
        serde_json::from_str(line).map_err(|e| TestBedError::Other(format!("bad state line: {e}")))
    }

    /// Every state line so far.
    pub fn states(&self) -> Result<Vec<Value>, TestBedError> {
        let text = std::fs::read_to_string(&self.state_file)?;
        Ok(text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect())
    }

    /// Ask the game for a fresh state line and its own frame (SIGUSR1), waiting until both are written.
    pub fn request_dump(&self) -> Result<Value, TestBedError> {
        let before = std::fs::metadata(&self.frame_file)
            .and_then(|m| m.modified())
            .ok();
        let lines_before = self.states()?.len();
        // SAFETY: sending SIGUSR1 to the game process we started.
        unsafe {
            libc::kill(self.pid as i32, libc::SIGUSR1);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let after = std::fs::metadata(&self.frame_file)
                .and_then(|m| m.modified())
                .ok();
            if after.is_some() && after != before && self.states()?.len() > lines_before {
                return self.state();
            }
            if Instant::now() > deadline {
                return Err(TestBedError::Timeout {
                    what: "practice-arena dump".into(),
                    secs: 5,
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Poll the state until `pred` holds.
    pub fn wait_for(&self, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Result<Value, TestBedError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(s) = self.state() {
                if pred(&s) {
                    return Ok(s);
                }
            }
            if Instant::now() > deadline {
                return Err(TestBedError::Timeout {
                    what: "practice-arena state".into(),
                    secs: timeout.as_secs(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
