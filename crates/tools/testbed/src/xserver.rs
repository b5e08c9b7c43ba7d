//! Starting Xvfb on a free display (via `-displayfd`), a window manager (openbox) and, for user-input
//! tests, a nested Xephyr whose own input devices play "the user".

use gamepilot_x11::X11;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum TestBedError {
    #[error("cannot start {what}: {reason} (run scripts/install-deps.sh)")]
    Spawn { what: String, reason: String },
    #[error("{what} did not become ready within {secs} s")]
    Timeout { what: String, secs: u64 },
    #[error("X11: {0}")]
    X11(#[from] gamepilot_x11::X11Error),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Other(String),
}

/// A private X server (and window manager) for one test. Everything it started dies with it.
pub struct TestBed {
    /// The display tests and the agent use (the nested Xephyr's when nested).
    pub display: String,
    /// The outer Xvfb display when nested (the "user" types into Xephyr's window there).
    pub outer_display: Option<String>,
    /// The Xephyr window on the outer display, when nested.
    pub xephyr_window: Option<u32>,
    pub dir: tempfile::TempDir,
    children: Vec<(String, Child)>,
}

fn spawn_with_displayfd(
    program: &str,
    args: &[&str],
    envs: &[(&str, &str)],
) -> Result<(Child, String), TestBedError> {
    let mut fds = [0i32; 2];
    // SAFETY: fds is a valid 2-element array; pipe() fills it with two fresh descriptors (inheritable).
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(TestBedError::Io(std::io::Error::last_os_error()));
    }
    // SAFETY: both descriptors were just created and are owned here only.
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let fd_arg = fds[1].to_string();
    let mut cmd = Command::new(program);
    cmd.arg("-displayfd")
        .arg(&fd_arg)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let child = cmd.spawn().map_err(|e| TestBedError::Spawn {
        what: program.into(),
        reason: e.to_string(),
    })?;
    drop(write_end);
    let mut file = std::fs::File::from(read_end);
    let mut buf = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    // The server writes "N\n" when ready; read until newline or EOF.
    let mut byte = [0u8; 1];
    while Instant::now() < deadline {
        match file.read(&mut byte) {
            Ok(0) => break,
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) => buf.push(byte[0] as char),
            Err(e) => return Err(TestBedError::Io(e)),
        }
    }
    let n: u32 = buf.trim().parse().map_err(|_| TestBedError::Timeout {
        what: program.into(),
        secs: 20,
    })?;
    Ok((child, format!(":{n}")))
}

impl TestBed {
    /// Xvfb (1600x900x24 with Composite, SHM, XTest, XInput2) + openbox.
    pub fn start() -> Result<TestBed, TestBedError> {
        let dir = tempfile::tempdir()?;
        let (xvfb, display) = spawn_with_displayfd(
            "Xvfb",
            &[
                "-screen",
                "0",
                "1600x900x24",
                "-nolisten",
                "tcp",
                "+extension",
                "Composite",
                "-ac",
            ],
            &[],
        )?;
        let mut bed = TestBed {
            display,
            outer_display: None,
            xephyr_window: None,
            dir,
            children: vec![("Xvfb".into(), xvfb)],
        };
        bed.start_wm()?;
        Ok(bed)
    }

    /// Outer Xvfb, a Xephyr window on it (the nested server), openbox inside. Input sent with XTest to the
    /// outer server while Xephyr's window has focus arrives in the nested server from Xephyr's own
    /// devices, whose XInput2 sourceid differs from the nested server's XTEST devices: the "user".
    pub fn start_nested() -> Result<TestBed, TestBedError> {
        let dir = tempfile::tempdir()?;
        let (xvfb, outer) = spawn_with_displayfd(
            "Xvfb",
            &["-screen", "0", "1600x900x24", "-nolisten", "tcp", "-ac"],
            &[],
        )?;
        let mut bed = TestBed {
            display: String::new(),
            outer_display: Some(outer.clone()),
            xephyr_window: None,
            dir,
            children: vec![("Xvfb".into(), xvfb)],
        };
        let (xephyr, inner) = spawn_with_displayfd(
            "Xephyr",
            &[
                "-screen",
                "1400x850x24",
                "-nolisten",
                "tcp",
                "-ac",
                "+extension",
                "Composite",
                "-retro",
            ],
            &[("DISPLAY", outer.as_str())],
        )?;
        bed.children.push(("Xephyr".into(), xephyr));
        bed.display = inner;
        // Find Xephyr's window on the outer display and give it focus so outer input flows into it.
        let outer_x = X11::connect(Some(&outer))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let wins = outer_x.list_windows()?;
            if let Some(w) = wins
                .iter()
                .find(|w| w.class.to_lowercase().contains("xephyr") || w.title.contains("Xephyr"))
            {
                bed.xephyr_window = Some(w.id);
                break;
            }
            if Instant::now() > deadline {
                return Err(TestBedError::Timeout {
                    what: "Xephyr window".into(),
                    secs: 10,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Some(w) = bed.xephyr_window {
            use x11rb::protocol::xproto::{ConnectionExt as _, InputFocus};
            outer_x
                .conn
                .set_input_focus(InputFocus::POINTER_ROOT, w, x11rb::CURRENT_TIME)
                .map_err(gamepilot_x11::X11Error::from)?;
            outer_x.flush()?;
        }
        bed.start_wm()?;
        Ok(bed)
    }

    fn start_wm(&mut self) -> Result<(), TestBedError> {
        let home = self.dir.path().to_path_buf();
        let wm = Command::new("openbox")
            .arg("--sm-disable")
            .env("DISPLAY", &self.display)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join("config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| TestBedError::Spawn {
                what: "openbox".into(),
                reason: e.to_string(),
            })?;
        self.children.push(("openbox".into(), wm));
        // Ready when openbox has set _NET_SUPPORTING_WM_CHECK on the root.
        let x = self.x11()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            use x11rb::protocol::xproto::{AtomEnum, ConnectionExt as _};
            let atom = x
                .conn
                .intern_atom(false, b"_NET_SUPPORTING_WM_CHECK")
                .map_err(gamepilot_x11::X11Error::from)?;
            let atom = atom.reply().map_err(gamepilot_x11::X11Error::from)?.atom;
            let r = x
                .conn
                .get_property(false, x.root, atom, AtomEnum::WINDOW, 0, 1)
                .map_err(gamepilot_x11::X11Error::from)?;
            if r.reply().map(|r| r.value_len > 0).unwrap_or(false) {
                return wait_until_wm_manages(&x);
            }
            if Instant::now() > deadline {
                return Err(TestBedError::Timeout {
                    what: "openbox".into(),
                    secs: 10,
                });
            }
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    /// A fresh connection to the test display.
    pub fn x11(&self) -> Result<X11, TestBedError> {
        Ok(X11::connect(Some(&self.display))?)
    }

    /// Start any program on the test display; it is killed with the bed.
    pub fn spawn(&mut self, name: &str, mut cmd: Command) -> Result<u32, TestBedError> {
        cmd.env("DISPLAY", &self.display).stdin(Stdio::null());
        let child = cmd.spawn().map_err(|e| TestBedError::Spawn {
            what: name.into(),
            reason: e.to_string(),
        })?;
        let pid = child.id();
        self.children.push((name.into(), child));
        Ok(pid)
    }

    /// Adopt a child started elsewhere so that it dies with the bed.
    pub fn adopt(&mut self, name: &str, child: Child) {
        self.children.push((name.into(), child));
    }

    /// Path of a workspace binary next to the running test executable (`target/<profile>/<name>`).
    pub fn workspace_binary(name: &str) -> Result<PathBuf, TestBedError> {
        let env_name = format!("{}_BIN", name.to_uppercase().replace('-', "_"));
        if let Ok(p) = std::env::var(&env_name) {
            return Ok(PathBuf::from(p));
        }
        let exe = std::env::current_exe()?;
        let mut dir = exe.parent().map(|p| p.to_path_buf()).unwrap_or_default();
        for _ in 0..3 {
            let cand = dir.join(name);
            if cand.is_file() {
                return Ok(cand);
            }
            if !dir.pop() {
                break;
            }
        }
        Err(TestBedError::Other(format!(
            "binary {name} not found next to {}; run `cargo build --workspace --bins` first or set {env_name}",
            exe.display()
        )))
    }

    /// Send a SIGTERM then SIGKILL to one child by pid and reap it.
    pub fn kill_child(&mut self, pid: u32) {
        if let Some(i) = self.children.iter().position(|(_, c)| c.id() == pid) {
            let (_, mut c) = self.children.remove(i);
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for TestBed {
    fn drop(&mut self) {
        // Reverse order: game and helpers first, the X server last.
        while let Some((_, mut child)) = self.children.pop() {
            // SAFETY: kill(2) on a pid we spawned; SIGCONT first so that a stopped child can die.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGCONT);
                libc::kill(child.id() as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_millis(500);
            loop {
                match child.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                    _ => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                }
            }
        }
    }
}

/// Openbox publishes its check window before it handles MapRequests; a window mapped in that gap stays
/// unmapped. Map a probe window (re-mapping until it becomes viewable) so tests start with a working WM.
fn wait_until_wm_manages(x: &X11) -> Result<(), TestBedError> {
    use x11rb::connection::Connection;
    use x11rb::protocol::xproto::{ConnectionExt as _, CreateWindowAux, WindowClass};
    let e = gamepilot_x11::X11Error::from;
    let screen = &x.conn.setup().roots[x.screen_num];
    let win = x
        .conn
        .generate_id()
        .map_err(|er| TestBedError::X11(gamepilot_x11::X11Error::Id(er)))?;
    x.conn
        .create_window(
            0,
            win,
            x.root,
            0,
            0,
            8,
            8,
            0,
            WindowClass::INPUT_OUTPUT,
            screen.root_visual,
            &CreateWindowAux::new(),
        )
        .map_err(e)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let result = loop {
        x.conn.map_window(win).map_err(e)?;
        x.flush()?;
        let step = Instant::now() + Duration::from_millis(500);
        while Instant::now() < step && !x.is_mapped(win)? {
            std::thread::sleep(Duration::from_millis(10));
        }
        if x.is_mapped(win)? {
            break Ok(());
        }
        if Instant::now() > deadline {
            break Err(TestBedError::Timeout {
                what: "openbox managing windows".into(),
                secs: 10,
            });
        }
    };
    let _ = x.conn.destroy_window(win);
    let _ = x.conn.flush();
    result
}
