//! A private D-Bus session bus for one test (FR-PERC-010 tests): `dbus-daemon --session --nofork` with its
//! own runtime directory, so that the accessibility bus it starts on demand (at-spi-bus-launcher, D-Bus
//! activated from /usr/share/dbus-1/services) is private too. Games and the tested binary join it through
//! `DBUS_SESSION_BUS_ADDRESS`; the daemon dies with the value, and the launcher and registry it activated
//! leave when their session bus goes.

use crate::xserver::TestBedError;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running private session bus.
pub struct SessionBus {
    /// The address to hand to clients (`DBUS_SESSION_BUS_ADDRESS`).
    pub address: String,
    /// The runtime directory its children use (`XDG_RUNTIME_DIR`; the accessibility bus socket lives here).
    pub runtime_dir: PathBuf,
    child: Child,
    _dir: tempfile::TempDir,
}

impl SessionBus {
    /// Start a session bus whose activated services see `display` (at-spi-bus-launcher publishes the
    /// accessibility bus on that display's root window too).
    pub fn start(display: &str) -> Result<SessionBus, TestBedError> {
        let dir = tempfile::tempdir()?;
        let runtime_dir = dir.path().join("run");
        std::fs::create_dir_all(&runtime_dir)?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&runtime_dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let mut child = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile", "--print-address=1"])
            .env("DISPLAY", display)
            .env("XDG_RUNTIME_DIR", &runtime_dir)
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| TestBedError::Spawn {
                what: "dbus-daemon".into(),
                reason: e.to_string(),
            })?;
        let Some(out) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(TestBedError::Other("dbus-daemon gave no stdout".into()));
        };
        // The daemon prints its address once it listens; read it on a thread so that a daemon that never
        // answers cannot hang the test.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(out).read_line(&mut line);
            let _ = tx.send(line);
        });
        let address = match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(l) if !l.trim().is_empty() => l.trim().to_string(),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(TestBedError::Timeout {
                    what: "dbus-daemon".into(),
                    secs: 10,
                });
            }
        };
        Ok(SessionBus {
            address,
            runtime_dir,
            child,
            _dir: dir,
        })
    }

    /// Put this bus into a command's environment (and the runtime directory with it).
    pub fn apply(&self, cmd: &mut Command) {
        cmd.env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .env("XDG_RUNTIME_DIR", &self.runtime_dir)
            .env_remove("NO_AT_BRIDGE");
    }
}

impl Drop for SessionBus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
