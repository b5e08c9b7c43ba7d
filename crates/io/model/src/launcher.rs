//! A model host gamepilot starts itself (FR-MODEL-001): llama.cpp's `llama-server` on a free loopback
//! port with a verified GGUF (and mmproj for vision models). Weights are verified BEFORE the process is
//! spawned (FR-MODEL-005); the host is stopped with the session (Drop kills it). Its log is kept in a
//! bounded in-memory tail, never on disk (INV-CTX-001).
//!
//! Fault tolerance:
//! - it dies with gamepilot: the child asks the kernel for SIGTERM when its parent goes
//!   (`PR_SET_PDEATHSIG`), so a `kill -9` of the core cannot leave a model host holding the GPU. The kernel
//!   sends it when the *thread* that spawned the host ends, so start the host from a thread that lives as
//!   long as the session (the main thread);
//! - it is judged by its own `/health`: the loopback port must be listened on by the process we started
//!   (checked in `/proc/net/tcp*` and the child's descriptors), so a stranger that took the port between
//!   the probe and the bind is never mistaken for our host;
//! - it loads the bytes that were verified: the weights are hashed through one open descriptor, which the
//!   child inherits and opens as `/proc/self/fd/N`; a file replaced on disk after the check is not loaded.

use crate::cancel::CancelToken;
use crate::client::{HostClient, HostTimeouts};
use crate::weights::{VerifiedWeights, WeightsSpec};
use crate::ModelError;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The two things the degrade ladder changes on a running host (FR-MODEL-004).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct HostShape {
    /// Context size in tokens (`-c`).
    pub ctx_size: u32,
    /// GPU layers (`-ngl`); `Some(0)`: off the GPU; `None`: llama.cpp's default.
    pub gpu_layers: Option<u32>,
}

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
    /// CPU threads (`-t`).
    pub threads: u32,
    pub health_timeout: Duration,
    pub extra_args: Vec<String>,
    /// Niceness the host runs at (0..=19; default 10): inference yields the CPU to the agent's reflex
    /// thread, which must never wait on a model (FR-LOOP-002).
    pub nice: i32,
    /// Run in the kernel's idle class (`SCHED_IDLE`): the host computes only on CPU time nothing else
    /// asks for. For a host whose calls can wait (the deliberative one): on 2 cores a niced host still
    /// took about half the tactical host's time while both computed.
    pub idle_class: bool,
    /// Prompt n-gram speculation ([`decode_flags`]; default on): for short, formulaic replies such as the
    /// tactical cadence's. Off for free-text replies (a plan), where most drafts fail and each failed
    /// check costs a batch of eleven tokens instead of one decode step.
    pub speculative: bool,
    /// Read while the host starts (loading a model takes seconds to a minute): once cancelled (by a stop
    /// signal, say), the host is stopped and [`ModelError::StartCancelled`] returned.
    pub cancel: CancelToken,
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
            idle_class: false,
            speculative: true,
            cancel: CancelToken::new(),
        }
    }
}

const LOG_LINES: usize = 200;

/// Decoding settings gamepilot adds when the server binary knows them, each measured
/// on the 2-core CPU build machine with the default model (docs/models.md):
/// - self-speculative decoding from the prompt's own n-grams: a reply such as
///   `{"action":"click_mark","mark":12}` repeats the worked examples and the tail's action lines, so a
///   draft of the next ten tokens looked up after the last one is verified in one batch instead of
///   decoded one token at a time. At temperature 0 the verified reply is the one plain decoding gives;
/// - on the CPU only (`-ngl 0`, or no NVIDIA GPU answering), flash attention off: its CPU kernel
///   evaluates the tactical tail more slowly at the prompt's depth.
///
/// Returns the flags `help` (the binary's `--help` text) lists; an older or foreign build gets none.
pub fn decode_flags(help: &str, on_cpu: bool, speculative: bool) -> Vec<String> {
    let mut out = Vec::new();
    if speculative && help.contains("--spec-ngram-simple-size-n") {
        out.extend(
            [
                "--spec-type",
                "ngram-simple",
                "--spec-ngram-simple-size-n",
                "1",
                "--spec-ngram-simple-size-m",
                "10",
            ]
            .map(String::from),
        );
    }
    if on_cpu && help.contains("--flash-attn") {
        out.extend(["--flash-attn", "off"].map(String::from));
    }
    out
}

/// The `--help` text of a server binary ("" when it cannot be run), for [`decode_flags`].
fn help_text(server_bin: &std::path::Path) -> String {
    Command::new(server_bin)
        .arg("--help")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// A running `llama-server`. Stopped on drop.
#[derive(Debug)]
pub struct LocalHost {
    child: Option<Child>,
    port: u16,
    spec: LaunchSpec,
    verified: Vec<VerifiedWeights>,
    /// The verified weights' descriptors (model first), inherited by the host as `/proc/self/fd/N`.
    weights: Vec<Arc<File>>,
    log: Arc<Mutex<VecDeque<String>>>,
}

/// The path under which a process opens its own descriptor `fd`.
pub fn fd_path(fd: RawFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{fd}"))
}

/// Exponential back-off between tries: `first`, doubled each time, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Backoff {
        Backoff {
            next: first.min(max),
            max,
        }
    }

    /// The wait before the next try (and doubles the one after).
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.max);
        d
    }
}

impl LocalHost {
    /// Verifies the weights, then starts the server and waits until `/health` answers 200.
    pub fn start(spec: LaunchSpec) -> Result<LocalHost, ModelError> {
        let (verified, weights, decode) = Self::prepare(&spec)?;
        let mut last_err = None;
        let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_millis(400));
        for _ in 0..3 {
            if spec.cancel.is_cancelled() {
                return Err(ModelError::StartCancelled);
            }
            match Self::spawn(&spec, &decode, verified.clone(), weights.clone(), free_port()?) {
                Ok(h) => return Ok(h),
                // A port taken between probe and bind: try another.
                Err(ModelError::HostExited { log, status })
                    if log.contains("bind") || log.contains("address already in use") =>
                {
                    last_err = Some(ModelError::HostExited { log, status });
                }
                Err(e @ ModelError::PortTaken { .. }) => last_err = Some(e),
                Err(e) => return Err(e),
            }
            std::thread::sleep(backoff.next_delay());
        }
        Err(last_err.unwrap_or(ModelError::Config("could not start the host".into())))
    }

    /// Everything a start needs before a process is spawned: the verified weights (FR-MODEL-005: nothing
    /// is spawned unless every weights file verifies; the descriptors that were hashed are the ones the
    /// host reads), the server binary's presence, and the decoding flags it knows.
    #[allow(clippy::type_complexity)]
    fn prepare(spec: &LaunchSpec) -> Result<(Vec<VerifiedWeights>, Vec<Arc<File>>, Vec<String>), ModelError> {
        let (v, f) = spec.model.verify_open()?;
        let mut verified = vec![v];
        let mut weights = vec![Arc::new(f)];
        if let Some(mm) = &spec.mmproj {
            let (v, f) = mm.verify_open()?;
            verified.push(v);
            weights.push(Arc::new(f));
        }
        if !spec.server_bin.is_file() {
            return Err(ModelError::Launch {
                path: spec.server_bin.clone(),
                detail: "no such file (run scripts/setup-llama.sh)".into(),
            });
        }
        // On the CPU: told so (`-ngl 0`), or left to llama.cpp's default where no NVIDIA GPU answers.
        let on_cpu =
            spec.gpu_layers == Some(0) || (spec.gpu_layers.is_none() && crate::gpu::Nvml::open(0).is_err());
        Ok((
            verified,
            weights,
            decode_flags(&help_text(&spec.server_bin), on_cpu, spec.speculative),
        ))
    }

    fn spawn(
        spec: &LaunchSpec,
        decode: &[String],
        verified: Vec<VerifiedWeights>,
        weights: Vec<Arc<File>>,
        port: u16,
    ) -> Result<LocalHost, ModelError> {
        let fds: Vec<RawFd> = weights.iter().map(|f| f.as_raw_fd()).collect();
        let Some(&model_fd) = fds.first() else {
            return Err(ModelError::Config("no verified weights to load".into()));
        };
        let mut cmd = Command::new(&spec.server_bin);
        cmd.arg("-m")
            .arg(fd_path(model_fd))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["-c", &spec.ctx_size.to_string()])
            .args(["-t", &spec.threads.max(1).to_string()])
            .args(["-np", "1", "--no-webui"]);
        if let (Some(_), Some(&mm_fd)) = (&spec.mmproj, fds.get(1)) {
            cmd.arg("--mmproj").arg(fd_path(mm_fd));
        }
        if let Some(n) = spec.gpu_layers {
            cmd.args(["-ngl", &n.to_string()]);
        }
        configure_child(&mut cmd, spec.nice.clamp(0, 19), spec.idle_class, fds);
        // Its own process group: the terminal's Ctrl+C is the agent's to act on (stop, then stop the host);
        // the host still ends with the agent (PR_SET_PDEATHSIG below).
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        cmd.args(decode)
            .args(&spec.extra_args)
            // OpenMP's threads spin a bounded while between a token's operations, then sleep: a purely
            // passive wait put a futex wake-up between every two of a token's hundreds of operations
            // (tactical call p50 1.26 s -> 1.05 s without it); an idle host still
            // sleeps within a millisecond, and runs niced below the reflex thread.
            .env_remove("OMP_WAIT_POLICY")
            .env("GOMP_SPINCOUNT", "300000")
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
            weights,
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
        let mut backoff = Backoff::new(Duration::from_millis(20), Duration::from_millis(250));
        loop {
            // Read first: a Ctrl+C that also reached the host must be the stop it is, not "host exited".
            if self.spec.cancel.is_cancelled() {
                self.stop();
                return Err(ModelError::StartCancelled);
            }
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
            let mut stranger = false;
            if client.health().is_ok() {
                // Our /health only: the port must be listened on by the process we started.
                match self.pid() {
                    Some(pid) if listens_on(pid, self.port) => return Ok(()),
                    _ => stranger = true,
                }
            }
            if started.elapsed() > self.spec.health_timeout {
                let log = self.log_tail(30);
                self.stop();
                if stranger {
                    return Err(ModelError::PortTaken { port: self.port, log });
                }
                return Err(ModelError::HealthTimeout {
                    timeout_ms: self.spec.health_timeout.as_millis() as u64,
                    log,
                });
            }
            std::thread::sleep(backoff.next_delay());
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

    /// The descriptors of the verified weights the host was given (model first).
    pub fn weights_fds(&self) -> Vec<RawFd> {
        self.weights.iter().map(|f| f.as_raw_fd()).collect()
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

    /// How the host runs now: its context size and GPU layers.
    pub fn shape(&self) -> HostShape {
        HostShape {
            ctx_size: self.spec.ctx_size,
            gpu_layers: self.spec.gpu_layers,
        }
    }

    /// Restarts as `shape` on the same port, so every client of it keeps its address (the degrade
    /// ladder's context reduction and "deliberative model off the GPU", FR-MODEL-004). The weights are
    /// verified again before the new process starts. `Err` when the port could not be had again or the
    /// new process failed; the host is then stopped.
    pub fn restart_as(&mut self, shape: HostShape) -> Result<(), ModelError> {
        let mut spec = self.spec.clone();
        spec.ctx_size = shape.ctx_size;
        spec.gpu_layers = shape.gpu_layers;
        let port = self.port;
        self.stop();
        let (verified, weights, decode) = Self::prepare(&spec)?;
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(800));
        let mut last = None;
        // The old process's listening socket is gone once it is reaped; a few tries cover a slow release.
        for _ in 0..4 {
            match Self::spawn(&spec, &decode, verified.clone(), weights.clone(), port) {
                Ok(h) => {
                    *self = h;
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
            std::thread::sleep(backoff.next_delay());
        }
        Err(last.unwrap_or(ModelError::Config("could not restart the host".into())))
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

/// The child side of the spawn, run between fork and exec: lower the priority, ask for SIGTERM when the
/// parent (thread) goes, refuse to start if it is already gone, and let the verified weights' descriptors
/// survive exec.
fn configure_child(cmd: &mut Command, nice: i32, idle_class: bool, keep_fds: Vec<RawFd>) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: only async-signal-safe calls (nice, sched_setscheduler, prctl, getppid, fcntl) on the
    // forked child's own state.
    unsafe {
        cmd.pre_exec(move || {
            if nice > 0 {
                libc::nice(nice);
            }
            // Lowering one's own class needs no privilege and the server's threads inherit it; where a
            // sandbox refuses it anyway the host still runs, niced (best effort, like `nice`).
            if idle_class {
                let param = libc::sched_param { sched_priority: 0 };
                libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died before prctl took effect: do not outlive it.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("the parent exited during the spawn"));
            }
            for &fd in &keep_fds {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// True when process `pid` holds a socket listening on loopback TCP `port` (IPv4 or IPv6).
pub fn listens_on(pid: u32, port: u16) -> bool {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        inodes.extend(listening_inodes(&text, port));
    }
    if inodes.is_empty() {
        return false;
    }
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    dir.filter_map(Result::ok).any(|e| {
        std::fs::read_link(e.path())
            .ok()
            .and_then(|l| {
                l.to_str()
                    .and_then(|s| s.strip_prefix("socket:["))
                    .and_then(|s| s.strip_suffix(']'))
                    .and_then(|s| s.parse::<u64>().ok())
            })
            .is_some_and(|ino| inodes.contains(&ino))
    })
}

/// The inodes of the sockets in a `/proc/net/tcp{,6}` table that listen (state 0A) on `port`.
fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local = f.get(1)?;
            let (_, p) = local.rsplit_once(':')?;
            let p = u16::from_str_radix(p, 16).ok()?;
            (p == port && *f.get(3)? == "0A").then_some(())?;
            f.get(9)?.parse().ok()
        })
        .collect()
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

    #[test]
    fn a_background_host_runs_niced_in_the_idle_class() {
        // FR-LOOP-002 (the reflex never waits on a model) and the deliberative pass off the tactical
        // host's cores: what the kernel says of the child, not what we asked for.
        let policy = |text: &str| {
            text.lines()
                .next()
                .and_then(|l| l.split(':').nth(1))
                .map(|v| v.trim().to_string())
        };
        let read = |nice: i32, idle: bool| {
            let mut cmd = Command::new("sh");
            cmd.args([
                "-c",
                "grep -E '^policy' /proc/self/sched; cut -d' ' -f19 /proc/self/stat",
            ]);
            configure_child(&mut cmd, nice, idle, Vec::new());
            let out = cmd.output().unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8_lossy(&out.stdout).to_string()
        };
        // SCHED_IDLE is policy 5; the children that read /proc/self inherit it and the niceness.
        let background = read(19, true);
        assert_eq!(policy(&background).as_deref(), Some("5"), "{background}");
        assert_eq!(background.lines().last().unwrap().trim(), "19", "{background}");
        let tactical = read(10, false);
        assert_eq!(policy(&tactical).as_deref(), Some("0"), "{tactical}");
        assert_eq!(tactical.lines().last().unwrap().trim(), "10", "{tactical}");
    }
    use super::*;

    #[test]
    fn decode_flags_are_added_only_where_the_server_lists_them() {
        // A build without speculative decoding or the flash-attention switch still starts
        let modern = "  --spec-type [none|ngram-simple]\n  --spec-ngram-simple-size-n N\n  -fa, --flash-attn [on|off|auto]\n";
        let flags = decode_flags(modern, true, true);
        assert_eq!(flags[..2], ["--spec-type", "ngram-simple"]);
        assert_eq!(flags[flags.len() - 2..], ["--flash-attn", "off"]);
        assert!(!decode_flags(modern, false, true).contains(&"--flash-attn".to_string()));
        assert_eq!(decode_flags(modern, true, false), ["--flash-attn", "off"]);
        assert!(decode_flags("usage: llama-server -m FILE\n", true, true).is_empty());
    }

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

    fn script(dir: &std::path::Path, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let bin = dir.join(name);
        std::fs::write(&bin, body).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        bin
    }

    fn model(dir: &std::path::Path, bytes: &[u8]) -> (PathBuf, String) {
        let model = dir.join("m.gguf");
        std::fs::write(&model, bytes).unwrap();
        let digest = crate::weights::sha256_file(&model).unwrap();
        (model, digest)
    }

    #[test]
    fn the_host_loads_the_verified_descriptor_not_the_path() {
        // FR-MODEL-005: a verified file replaced after the check is not what gets loaded
        let dir = tempfile::tempdir().unwrap();
        let seen = dir.path().join("seen");
        // The fake host copies what its -m argument names, then exits.
        let bin = script(
            dir.path(),
            "copying-server",
            &format!(
                "#!/bin/sh\ncat \"$2\" > {}\necho \"$2\" >> {}.arg\nexit 3\n",
                seen.display(),
                seen.display()
            ),
        );
        let original = b"GGUF\x03\x00\x00\x00 the verified tensors";
        let (path, digest) = model(dir.path(), original);
        let spec = LaunchSpec::new(&bin, WeightsSpec::new(&path, &digest));
        let (v, f) = spec.model.verify_open().unwrap();
        // Replaced between the check and the spawn.
        let evil = dir.path().join("evil");
        std::fs::write(&evil, b"GGUF\x03\x00\x00\x00 something else entirely").unwrap();
        std::fs::rename(&evil, &path).unwrap();
        let err = LocalHost::spawn(&spec, &[], vec![v], vec![Arc::new(f)], free_port().unwrap()).unwrap_err();
        assert!(matches!(err, ModelError::HostExited { .. }), "{err}");
        assert_eq!(std::fs::read(&seen).unwrap(), original);
        let arg = std::fs::read_to_string(format!("{}.arg", seen.display())).unwrap();
        assert!(arg.starts_with("/proc/self/fd/"), "{arg}");
    }

    #[test]
    fn a_stranger_on_the_port_is_not_our_health() {
        // The host is checked by its own /health on the port it was given
        use std::io::{Read, Write};
        let dir = tempfile::tempdir().unwrap();
        let bin = script(dir.path(), "idle-server", "#!/bin/sh\nexec sleep 10\n");
        let (path, digest) = model(dir.path(), b"GGUF\x03\x00\x00\x00 tensors");
        // Someone else answers /health 200 on the port.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 15\r\nConnection: close\r\n\r\n{\"status\":\"ok\"}",
                );
            }
        });
        assert!(listens_on(std::process::id(), port));
        assert!(!listens_on(std::process::id(), free_port().unwrap()));
        let mut spec = LaunchSpec::new(&bin, WeightsSpec::new(&path, &digest));
        spec.health_timeout = Duration::from_millis(800);
        let (v, f) = spec.model.verify_open().unwrap();
        let err = LocalHost::spawn(&spec, &[], vec![v], vec![Arc::new(f)], port).unwrap_err();
        assert!(
            matches!(err, ModelError::PortTaken { port: p, .. } if p == port),
            "{err}"
        );
    }

    #[test]
    fn the_host_gets_sigterm_when_its_spawning_thread_ends() {
        // The model host dies with gamepilot (PR_SET_PDEATHSIG)
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        configure_child(&mut cmd, 0, false, Vec::new());
        let mut child = std::thread::spawn(move || cmd.spawn().unwrap()).join().unwrap();
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if t0.elapsed() > Duration::from_secs(5) {
                let _ = child.kill();
                panic!("the child outlived its parent thread");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGTERM));
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let mut b = Backoff::new(Duration::from_millis(20), Duration::from_millis(100));
        let d: Vec<u64> = (0..5).map(|_| b.next_delay().as_millis() as u64).collect();
        assert_eq!(d, [20, 40, 80, 100, 100]);
    }

    #[test]
    fn listening_inodes_parse_proc_net_tcp() {
        let t = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0\n   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 999 1 0000000000000000 100 0 0 10 0\n";
        assert_eq!(listening_inodes(t, 8080), vec![12345]);
        assert!(listening_inodes(t, 8081).is_empty());
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
