//! A model host gamepilot starts itself (FR-MODEL-001): llama.cpp's `llama-server` on a free loopback
//! port with a verified GGUF (and mmproj for vision models). Weights are verified BEFORE the process is
//! spawned (FR-MODEL-005); the host is stopped with the session (Drop kills it). Its log is kept in a
//! bounded in-memory tail, never on disk (INV-CTX-001).

use crate::client::{HostClient, HostTimeouts};
use crate::weights::{VerifiedWeights, WeightsSpec};
use crate::ModelError;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How to start one host.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchSpec {
    pub server_bin: PathBuf,
    pub model: WeightsSpec,
    /// The multimodal projector of a vision model.
    pub mmproj: Option<WeightsSpec>,
    pub ctx_size: u32,
    /// GPU layers (`-ngl`); `Some(0)` keeps the model off the GPU; `None` leaves llama.cpp's default.
    pub gpu_layers: Option<u32>,
    /// CPU threads (`-t`); 1 keeps a busy machine responsive (with OMP_WAIT_POLICY=passive).
    pub threads: u32,
    pub health_timeout: Duration,
    pub extra_args: Vec<String>,
    /// Niceness the host runs at (0..=19; default 10): inference yields the CPU to the agent's reflex
    /// thread, which must never wait on a model (FR-LOOP-002).
    pub nice: i32,
}

impl LaunchSpec {
    pub fn new(server_bin: impl Into<PathBuf>, model: WeightsSpec) -> Self {
        LaunchSpec {
            server_bin: server_bin.into(),
            model,
            mmproj: None,
            ctx_size: 4096,
            gpu_layers: None,
            threads: 1,
            health_timeout: Duration::from_secs(60),
            extra_args: Vec::new(),
            nice: 10,
        }
    }
}

const LOG_LINES: usize = 200;

/// A running `llama-server`. Stopped on drop.
#[derive(Debug)]
pub struct LocalHost {
    child: Option<Child>,
    port: u16,
    spec: LaunchSpec,
    verified: Vec<VerifiedWeights>,
    log: Arc<Mutex<VecDeque<String>>>,
}

impl LocalHost {
    /// Verifies the weights, then starts the server and waits until `/health` answers 200.
    pub fn start(spec: LaunchSpec) -> Result<LocalHost, ModelError> {
        // FR-MODEL-005: nothing is spawned unless every weights file verifies.
        let mut verified = vec![spec.model.verify()?];
        if let Some(mm) = &spec.mmproj {
            verified.push(mm.verify()?);
        }
        if !spec.server_bin.is_file() {
            return Err(ModelError::Launch {
                path: spec.server_bin.clone(),
                detail: "no such file (run scripts/setup-llama.sh)".into(),
            });
        }
        let mut last_err = None;
        for _ in 0..3 {
            match Self::spawn(&spec, verified.clone()) {
                Ok(h) => return Ok(h),
                // A port taken between probe and bind: try another.
                Err(ModelError::HostExited { log, status })
                    if log.contains("bind") || log.contains("address already in use") =>
                {
                    last_err = Some(ModelError::HostExited { log, status });
                }
                Err(e) => return Err(e),
            }
        }
        Err(last_err.unwrap_or(ModelError::Config("could not start the host".into())))
    }

    fn spawn(spec: &LaunchSpec, verified: Vec<VerifiedWeights>) -> Result<LocalHost, ModelError> {
        let port = free_port()?;
        let mut cmd = Command::new(&spec.server_bin);
        cmd.arg("-m")
            .arg(&spec.model.path)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["-c", &spec.ctx_size.to_string()])
            .args(["-t", &spec.threads.max(1).to_string()])
            .args(["-np", "1", "--no-webui"]);
        if let Some(mm) = &spec.mmproj {
            cmd.arg("--mmproj").arg(&mm.path);
        }
        if let Some(n) = spec.gpu_layers {
            cmd.args(["-ngl", &n.to_string()]);
        }
        let nice = spec.nice.clamp(0, 19);
        if nice > 0 {
            use std::os::unix::process::CommandExt;
            // SAFETY: `nice` is async-signal-safe and touches only the forked child's own priority.
            unsafe {
                cmd.pre_exec(move || {
                    libc::nice(nice);
                    Ok(())
                });
            }
        }
        cmd.args(&spec.extra_args)
            .env("OMP_WAIT_POLICY", "passive")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| ModelError::Launch {
            path: spec.server_bin.clone(),
            detail: e.to_string(),
        })?;
        let log = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(out) = child.stdout.take() {
            pump(out, log.clone());
        }
        if let Some(err) = child.stderr.take() {
            pump(err, log.clone());
        }
        let mut host = LocalHost {
            child: Some(child),
            port,
            spec: spec.clone(),
            verified,
            log,
        };
        host.wait_healthy()?;
        Ok(host)
    }

    fn wait_healthy(&mut self) -> Result<(), ModelError> {
        let client = self.client(HostTimeouts {
            connect: Duration::from_millis(500),
            call: Duration::from_secs(2),
        })?;
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    // Let the log pumps drain.
                    std::thread::sleep(Duration::from_millis(50));
                    self.child = None;
                    return Err(ModelError::HostExited {
                        status: status.to_string(),
                        log: self.log_tail(30),
                    });
                }
            }
            if client.health().is_ok() {
                return Ok(());
            }
            if started.elapsed() > self.spec.health_timeout {
                let log = self.log_tail(30);
                self.stop();
                return Err(ModelError::HealthTimeout {
                    timeout_ms: self.spec.health_timeout.as_millis() as u64,
                    log,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn spec(&self) -> &LaunchSpec {
        &self.spec
    }

    /// The weights as verified before launch (digest and length), for the session recording.
    pub fn verified(&self) -> &[VerifiedWeights] {
        &self.verified
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn client(&self, timeouts: HostTimeouts) -> Result<HostClient, ModelError> {
        HostClient::new(&self.base_url(), timeouts)
    }

    /// The last `n` lines the server printed.
    pub fn log_tail(&self, n: usize) -> String {
        let log = self.log.lock().map(|l| l.clone()).unwrap_or_default();
        let skip = log.len().saturating_sub(n);
        log.iter().skip(skip).cloned().collect::<Vec<_>>().join("\n")
    }

    /// Restarts with different GPU layers (the ladder's "deliberative model off the GPU" is `Some(0)`).
    /// The weights are verified again before the new process starts.
    pub fn restart_with_gpu_layers(&mut self, gpu_layers: Option<u32>) -> Result<(), ModelError> {
        let mut spec = self.spec.clone();
        spec.gpu_layers = gpu_layers;
        self.stop();
        *self = LocalHost::start(spec)?;
        Ok(())
    }

    /// Stops the server (kill, then reap). Idempotent.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }
}

impl Drop for LocalHost {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> Result<u16, ModelError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| ModelError::Config(format!("no free loopback port: {e}")))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| ModelError::Config(format!("no free loopback port: {e}")))
}

fn pump(stream: impl std::io::Read + Send + 'static, log: Arc<Mutex<VecDeque<String>>>) {
    let _ = std::thread::Builder::new()
        .name("llama-server-log".into())
        .spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                if let Ok(mut l) = log.lock() {
                    if l.len() >= LOG_LINES {
                        l.pop_front();
                    }
                    l.push_back(line);
                }
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unverified_weights_never_reach_the_binary() {
        // FR-MODEL-005: a sentinel "server" records whether it was ever started
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("started");
        let bin = dir.path().join("fake-server");
        std::fs::write(&bin, format!("#!/bin/sh\ntouch {}\nsleep 5\n", marker.display())).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let model = dir.path().join("m.gguf");
        std::fs::write(&model, b"GGUF\x03\x00\x00\x00 tensors").unwrap();
        let wrong = "0".repeat(64);
        let err = LocalHost::start(LaunchSpec::new(&bin, WeightsSpec::new(&model, &wrong))).unwrap_err();
        assert!(matches!(err, ModelError::WeightsMismatch { .. }), "{err}");
        assert!(err.to_string().contains("m.gguf"));
        assert!(!marker.exists(), "the host was started despite bad weights");
    }

    #[test]
    fn a_host_that_exits_is_reported_with_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("dying-server");
        std::fs::write(&bin, "#!/bin/sh\necho 'error: cannot load model' >&2\nexit 3\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let model = dir.path().join("m.gguf");
        std::fs::write(&model, b"GGUF\x03\x00\x00\x00 tensors").unwrap();
        let digest = crate::weights::sha256_file(&model).unwrap();
        let err = LocalHost::start(LaunchSpec::new(&bin, WeightsSpec::new(&model, &digest))).unwrap_err();
        match err {
            ModelError::HostExited { log, .. } => assert!(log.contains("cannot load model"), "{log}"),
            other => panic!("{other}"),
        }
        let err = LocalHost::start(LaunchSpec::new(
            dir.path().join("none"),
            WeightsSpec::new(&model, &digest),
        ))
        .unwrap_err();
        assert!(matches!(err, ModelError::Launch { .. }), "{err}");
    }
}
