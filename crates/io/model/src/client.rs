//! The chat-completions client for any OpenAI-compatible host (llama.cpp server, vLLM, SGLang, Ollama,
//! LM Studio): timeouts, cancellation, named errors, the capability probe that tells the host's kind
//! ([`HostKind`], see [`crate::host_kind`]), and schema-constrained calls whose schema travels in the
//! fields that host kind reads ([`HostClient::with_kind`]) and whose broken reply is retried once with
//! the violation fed back, then reported. Every body is read with a size limit ([`MAX_REPLY_BYTES`] by
//! default, [`HostClient::with_reply_limit`]): a host that streams without end is a named error
//! ([`ModelError::ReplyTooLarge`]), never an unbounded allocation.

use crate::cancel::CancelToken;
use crate::host_kind::HostKind;
use crate::wire::{ChatReply, ChatRequest};
use crate::ModelError;
use serde::Serialize;
use serde_json::Value;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Time limits of one host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostTimeouts {
    pub connect: Duration,
    /// Whole call, request to last byte of the reply.
    pub call: Duration,
}

impl Default for HostTimeouts {
    fn default() -> Self {
        HostTimeouts {
            connect: Duration::from_secs(2),
            call: Duration::from_secs(30),
        }
    }
}

/// What a host says it can do, and how each figure was decided (never guessed: a figure the host does
/// not report is `None`, and its `*_source` says so).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    /// Which kind of host answered (see [`crate::host_kind::host_kind_table`]).
    pub kind: HostKind,
    /// `Some(true)` when the host says the model takes images, `Some(false)` when it says it does not;
    /// `None` when the host does not say (send text only, or ask the user).
    pub vision: Option<bool>,
    /// How `vision` was decided, in words (e.g. "llama.cpp /props modalities.vision",
    /// "Ollama /api/show capabilities", "LM Studio /api/v0/models type=vlm", "vLLM does not say").
    pub vision_source: String,
    /// The context size in tokens, when reported (llama.cpp: of one slot).
    pub n_ctx: Option<u64>,
    /// Where `n_ctx` came from, in words (e.g. "vLLM /v1/models max_model_len").
    pub n_ctx_source: String,
    /// The weights the host loaded, when it says (llama.cpp `model_path`, vLLM `root`).
    pub model_path: Option<String>,
    /// The `/v1/models` id the figures are about: the one named in [`HostClient::probe_for`], or the
    /// first listed for [`HostClient::probe`]; `None` when not listed.
    pub model_id: Option<String>,
}

impl Default for Capabilities {
    /// An unknown host that says nothing.
    fn default() -> Self {
        Capabilities {
            kind: HostKind::Unknown,
            vision: None,
            vision_source: "the host kind is unknown, so nothing says".into(),
            n_ctx: None,
            n_ctx_source: "the host kind is unknown, so nothing says".into(),
            model_path: None,
            model_id: None,
        }
    }
}

/// A reply that validated against its schema.
#[derive(Debug, Clone, PartialEq)]
pub struct StructuredReply {
    pub value: Value,
    pub reply: ChatReply,
    /// Calls made: 1, or 2 when the first reply broke the schema and the retry succeeded. Always
    /// `calls.len()`, and `violations.len() + 1`.
    pub attempts: u32,
    /// Every call's reply (for timings and the recording), in order.
    pub calls: Vec<ChatReply>,
    /// Why each rejected reply was rejected, in order (empty when the first reply validated).
    pub violations: Vec<String>,
}

/// The largest reply body read by default (a chat completion is a few KiB; a `/props` a few hundred).
pub const MAX_REPLY_BYTES: u64 = 8 << 20;
/// The default bound of each metadata request of the probe (the probe makes at most four; see
/// [`crate::host_kind`]).
pub const PROBE_STEP_TIMEOUT: Duration = Duration::from_secs(2);
/// How much of an error body is read (it is cut to 600 characters for the message anyway).
const MAX_ERROR_BODY_BYTES: u64 = 64 << 10;

/// A client of one host.
#[derive(Debug, Clone)]
pub struct HostClient {
    base_url: String,
    timeouts: HostTimeouts,
    agent: ureq::Agent,
    reply_limit: u64,
    kind: HostKind,
    probe_timeout: Duration,
}

/// One metadata answer of the probe.
pub(crate) enum Meta {
    /// A 2xx with a JSON body.
    Json(Value),
    /// "Not here": a 4xx, or a 2xx that is not JSON; the words say which.
    Absent(String),
}

/// Reads at most `limit` bytes of a body; more is [`ModelError::ReplyTooLarge`].
fn read_bounded(url: &str, resp: ureq::Response, limit: u64) -> Result<Vec<u8>, ModelError> {
    use std::io::Read as _;
    let mut body = Vec::new();
    resp.into_reader()
        .take(limit.saturating_add(1))
        .read_to_end(&mut body)
        .map_err(|e| ModelError::Transport {
            url: url.to_string(),
            detail: format!("reading the reply: {e}"),
        })?;
    if body.len() as u64 > limit {
        return Err(ModelError::ReplyTooLarge {
            url: url.to_string(),
            limit,
        });
    }
    Ok(body)
}

/// Reads a bounded body as JSON.
fn read_json(url: &str, resp: ureq::Response, limit: u64) -> Result<Value, ModelError> {
    let body = read_bounded(url, resp, limit)?;
    serde_json::from_slice(&body).map_err(|e| ModelError::Protocol {
        url: url.to_string(),
        detail: format!("the reply body is not JSON: {e}"),
    })
}

impl HostClient {
    /// `base_url` is the server root, e.g. `http://127.0.0.1:8080` (a trailing `/v1` is accepted).
    pub fn new(base_url: &str, timeouts: HostTimeouts) -> Result<Self, ModelError> {
        let mut base = base_url.trim().trim_end_matches('/').to_string();
        if let Some(stripped) = base.strip_suffix("/v1") {
            base = stripped.to_string();
        }
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ModelError::Config(format!(
                "model host URL must start with http:// or https://: {base_url:?}"
            )));
        }
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(timeouts.connect)
            .timeout(timeouts.call)
            .build();
        Ok(HostClient {
            base_url: base,
            timeouts,
            agent,
            reply_limit: MAX_REPLY_BYTES,
            kind: HostKind::Unknown,
            probe_timeout: PROBE_STEP_TIMEOUT,
        })
    }

    /// The same client sending reply schemas in the fields `kind` reads (from
    /// [`Capabilities::kind`]; the default is [`HostKind::Unknown`]: OpenAI `response_format` only).
    pub fn with_kind(mut self, kind: HostKind) -> Self {
        self.kind = kind;
        self
    }

    pub fn kind(&self) -> HostKind {
        self.kind
    }

    /// The same client with another bound on each metadata request of the probe (at least 10 ms; the
    /// call timeout bounds it too).
    pub fn with_probe_timeout(mut self, step: Duration) -> Self {
        self.probe_timeout = step.max(Duration::from_millis(10));
        self
    }

    /// The bound of each metadata request of the probe.
    pub fn probe_timeout(&self) -> Duration {
        self.probe_timeout.min(self.timeouts.call)
    }

    /// The same client with another reply size limit (bytes, at least 1 KiB).
    pub fn with_reply_limit(mut self, bytes: u64) -> Self {
        self.reply_limit = bytes.max(1024);
        self
    }

    pub fn reply_limit(&self) -> u64 {
        self.reply_limit
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn timeouts(&self) -> HostTimeouts {
        self.timeouts
    }

    fn map_err(&self, url: &str, e: ureq::Error) -> ModelError {
        self.map_err_within(url, e, self.timeouts.call)
    }

    /// Maps a ureq error; `limit` is the timeout the request ran under (for the message).
    fn map_err_within(&self, url: &str, e: ureq::Error, limit: Duration) -> ModelError {
        match e {
            ureq::Error::Status(status, resp) => {
                let raw = read_bounded(url, resp, MAX_ERROR_BODY_BYTES).unwrap_or_default();
                let mut body = String::from_utf8_lossy(&raw).into_owned();
                if body.len() > 600 {
                    let mut cut = 600;
                    while !body.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    body.truncate(cut);
                    body.push('…');
                }
                ModelError::Http {
                    url: url.to_string(),
                    status,
                    body,
                }
            }
            ureq::Error::Transport(t) => {
                let detail = t.to_string();
                match t.kind() {
                    ureq::ErrorKind::ConnectionFailed | ureq::ErrorKind::Dns => ModelError::Unreachable {
                        url: url.to_string(),
                        detail,
                    },
                    ureq::ErrorKind::Io if detail.contains("timed out") || detail.contains("WouldBlock") => {
                        ModelError::Timeout {
                            url: url.to_string(),
                            timeout_ms: limit.as_millis() as u64,
                        }
                    }
                    _ => ModelError::Transport {
                        url: url.to_string(),
                        detail,
                    },
                }
            }
        }
    }

    /// One metadata request of the probe (`GET`, or `POST` with `body`), bounded by
    /// [`HostClient::probe_timeout`]. 4xx or a non-JSON 2xx: [`Meta::Absent`]; unreachable, timeout,
    /// 5xx or an oversized body: the error.
    pub(crate) fn meta(&self, path: &str, body: Option<&Value>) -> Result<Meta, ModelError> {
        let url = format!("{}{}", self.base_url, path);
        let limit = self.probe_timeout();
        let r = match body {
            None => self.agent.get(&url).timeout(limit).call(),
            Some(b) => self.agent.post(&url).timeout(limit).send_json(b.clone()),
        };
        match r {
            Ok(resp) => match read_json(&url, resp, self.reply_limit) {
                Ok(v) => Ok(Meta::Json(v)),
                Err(ModelError::Protocol { detail, .. }) => Ok(Meta::Absent(detail)),
                Err(e) => Err(e),
            },
            Err(e) => match self.map_err_within(&url, e, limit) {
                ModelError::Http { status, body, .. } if status < 500 => {
                    Ok(Meta::Absent(format!("HTTP {status}: {body}")))
                }
                other => Err(other),
            },
        }
    }

    /// `GET /health` is 200 (llama.cpp answers 503 while loading).
    pub fn health(&self) -> Result<(), ModelError> {
        let url = format!("{}/health", self.base_url);
        self.agent
            .get(&url)
            .timeout(Duration::from_secs(1))
            .call()
            .map(|_| ())
            .map_err(|e| self.map_err(&url, e))
    }

    /// The capability probe about the first model `/v1/models` lists: tells the host's kind from the
    /// endpoints it really has, and reads vision and the context size where that kind reports them
    /// (see [`crate::host_kind`] for the order and the bounds). Use [`HostClient::probe_for`] when the
    /// model name is known (Ollama and LM Studio describe each model separately).
    pub fn probe(&self) -> Result<Capabilities, ModelError> {
        crate::host_kind::detect(self, None)
    }

    /// The capability probe about `model`, the name the caller will send in its requests.
    pub fn probe_for(&self, model: &str) -> Result<Capabilities, ModelError> {
        crate::host_kind::detect(self, Some(model))
    }

    /// One chat completion. The call runs on a worker thread so that `cancel` (polled every 5 ms)
    /// returns at once; an abandoned call still ends within the call timeout. Known limit: ureq 2
    /// cannot close the socket from outside, so the host finishes generating a cancelled reply (bounded
    /// by `max_tokens`; keep it small for the tactical cadence).
    pub fn chat(&self, req: &ChatRequest, cancel: &CancelToken) -> Result<ChatReply, ModelError> {
        if cancel.is_cancelled() {
            return Err(ModelError::Cancelled);
        }
        let url = format!("{}/v1/chat/completions", self.base_url);
        let body = req.body_for(self.kind);
        let (tx, rx) = mpsc::channel();
        let agent = self.agent.clone();
        let worker_url = url.clone();
        let limit = self.reply_limit;
        let started = Instant::now();
        std::thread::Builder::new()
            .name("model-call".into())
            .spawn(move || {
                let r = match agent.post(&worker_url).send_json(body) {
                    Ok(resp) => read_json(&worker_url, resp, limit).map_err(Err),
                    Err(e) => Err(Ok(e)),
                };
                let _ = tx.send(r);
            })
            .map_err(|e| ModelError::Transport {
                url: url.clone(),
                detail: format!("cannot spawn call thread: {e}"),
            })?;
        let deadline = started + self.timeouts.call + Duration::from_millis(500);
        loop {
            match rx.recv_timeout(Duration::from_millis(5)) {
                Ok(Ok(v)) => {
                    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
                    return ChatReply::parse(&url, &v, wall_ms);
                }
                Ok(Err(Ok(e))) => return Err(self.map_err(&url, e)),
                Ok(Err(Err(e))) => return Err(e),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if cancel.is_cancelled() {
                        return Err(ModelError::Cancelled);
                    }
                    if Instant::now() > deadline {
                        return Err(ModelError::Timeout {
                            url,
                            timeout_ms: self.timeouts.call.as_millis() as u64,
                        });
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(ModelError::Transport {
                        url,
                        detail: "call thread ended without a result".into(),
                    })
                }
            }
        }
    }

    /// A call constrained by `schema` (sent in the fields this client's [`HostKind`] reads, see
    /// [`crate::wire::structured_output_fields`]). The reply is parsed and re-validated here whatever
    /// the host claims; a reply that breaks the schema (not JSON, or not matching) is retried ONCE with
    /// the violation fed back, then reported as [`ModelError::SchemaBroken`] (`attempts: 2`). Each
    /// violation is kept in [`StructuredReply::violations`].
    pub fn chat_structured(
        &self,
        req: &ChatRequest,
        schema: &Value,
        cancel: &CancelToken,
    ) -> Result<StructuredReply, ModelError> {
        let first_req = req.clone().with_schema(schema.clone());
        let first = self.chat(&first_req, cancel)?;
        let violation = match check_reply(&first, schema) {
            Ok(value) => {
                return Ok(StructuredReply {
                    value,
                    reply: first.clone(),
                    attempts: 1,
                    calls: vec![first],
                    violations: Vec::new(),
                })
            }
            Err(v) => v,
        };
        let retry = first_req.with_feedback(&first.content, &violation);
        let second = self.chat(&retry, cancel)?;
        match check_reply(&second, schema) {
            Ok(value) => Ok(StructuredReply {
                value,
                reply: second.clone(),
                attempts: 2,
                calls: vec![first, second],
                violations: vec![violation],
            }),
            Err(violation) => Err(ModelError::SchemaBroken {
                attempts: 2,
                violation,
                reply: second.content,
            }),
        }
    }
}

/// Parses and validates a reply's content against the schema.
pub fn check_reply(reply: &ChatReply, schema: &Value) -> Result<Value, String> {
    let text = reply.content.trim();
    let value: Value = serde_json::from_str(text).map_err(|e| {
        let cut = if reply.finish_reason.as_deref() == Some("length") {
            " (the reply hit max_tokens)"
        } else {
            ""
        };
        format!("the reply is not one JSON value: {e}{cut}")
    })?;
    gamepilot_context::validate(schema, &value).map_err(|e| e.to_string())?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::CallTimings;
    use serde_json::json;

    fn reply(content: &str) -> ChatReply {
        ChatReply {
            content: content.into(),
            finish_reason: Some("stop".into()),
            timings: CallTimings::default(),
        }
    }

    #[test]
    fn reply_checks_name_the_violation() {
        // FR-MODEL-003: a reply that breaks the schema is detected with a precise reason
        let s = json!({"type":"object","properties":{"mark":{"enum":[3,7]}},"required":["mark"]});
        assert_eq!(
            check_reply(&reply(" {\"mark\":7} "), &s).unwrap(),
            json!({"mark":7})
        );
        let e = check_reply(&reply("{\"mark\":5}"), &s).unwrap_err();
        assert!(e.contains("5 is not one of [3, 7]"), "{e}");
        let e = check_reply(&reply("sure! {\"mark\":3}"), &s).unwrap_err();
        assert!(e.contains("not one JSON value"), "{e}");
    }

    #[test]
    fn unreachable_host_is_a_named_error() {
        // FR-MODEL-001: clear errors — nothing listens on this port
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let c = HostClient::new(&format!("http://127.0.0.1:{port}/v1/"), HostTimeouts::default()).unwrap();
        assert_eq!(c.base_url(), format!("http://127.0.0.1:{port}"));
        let req = ChatRequest {
            model: "m".into(),
            messages: vec![],
            max_tokens: 1,
            temperature: 0.0,
            schema: None,
            image_pixels: None,
        };
        let err = c.chat(&req, &CancelToken::new()).unwrap_err();
        assert!(matches!(err, ModelError::Unreachable { .. }), "{err}");
        assert!(matches!(c.probe(), Err(ModelError::Unreachable { .. })));
        assert!(HostClient::new("localhost:80", HostTimeouts::default()).is_err());
    }

    #[test]
    fn cancellation_and_timeout_return_promptly() {
        // A listener that accepts and never answers.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let _hold = std::thread::spawn(move || {
            let mut conns = Vec::new();
            for c in l.incoming().take(2) {
                conns.push(c);
            }
            std::thread::sleep(Duration::from_secs(5));
        });
        let t = HostTimeouts {
            connect: Duration::from_secs(1),
            call: Duration::from_millis(300),
        };
        let c = HostClient::new(&format!("http://127.0.0.1:{port}"), t).unwrap();
        let req = ChatRequest {
            model: "m".into(),
            messages: vec![],
            max_tokens: 1,
            temperature: 0.0,
            schema: None,
            image_pixels: None,
        };
        let err = c.chat(&req, &CancelToken::new()).unwrap_err();
        assert!(matches!(err, ModelError::Timeout { .. }), "{err}");

        let slow = HostClient::new(
            &format!("http://127.0.0.1:{port}"),
            HostTimeouts {
                call: Duration::from_secs(20),
                ..t
            },
        )
        .unwrap();
        let cancel = CancelToken::new();
        let c2 = cancel.clone();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            c2.cancel();
        });
        let started = Instant::now();
        let err = slow.chat(&req, &cancel).unwrap_err();
        canceller.join().unwrap();
        assert!(matches!(err, ModelError::Cancelled), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    /// A canned HTTP host (test double): answers each connection with the next body, records requests.
    fn fake_host(replies: Vec<String>) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
        use std::io::{BufRead, BufReader, Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        std::thread::spawn(move || {
            for body in replies {
                let Ok((mut s, _)) = l.accept() else { return };
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    r.read_line(&mut line).unwrap();
                    if line == "\r\n" || line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                }
                let mut req = vec![0u8; len];
                r.read_exact(&mut req).unwrap();
                seen2
                    .lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&req).into_owned());
                // A reply that is a whole HTTP answer (status line first) goes out as it is.
                let resp = if body.starts_with("HTTP/1.1 ") {
                    body
                } else {
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
                        body.len(),
                        body
                    )
                };
                s.write_all(resp.as_bytes()).unwrap();
            }
        });
        (url, seen)
    }

    fn completion(content: &str) -> String {
        json!({"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]})
            .to_string()
    }

    #[test]
    fn an_oversized_reply_is_a_named_error() {
        // Bounded everything: model replies are read with a size limit
        let big = completion(&"x".repeat(64 * 1024));
        let (url, _) = fake_host(vec![big.clone()]);
        let (url2, _) = fake_host(vec![big]);
        let c = HostClient::new(&url, HostTimeouts::default())
            .unwrap()
            .with_reply_limit(16 * 1024);
        let req = ChatRequest {
            model: "m".into(),
            messages: vec![json!({"role":"user","content":"go"})],
            max_tokens: 8,
            temperature: 0.0,
            schema: None,
            image_pixels: None,
        };
        let err = c.chat(&req, &CancelToken::new()).unwrap_err();
        assert!(
            matches!(err, ModelError::ReplyTooLarge { limit: 16384, .. }),
            "{err}"
        );
        // Under the default limit the same reply reads.
        let c = HostClient::new(&url2, HostTimeouts::default()).unwrap();
        assert_eq!(c.reply_limit(), MAX_REPLY_BYTES);
        assert!(c.chat(&req, &CancelToken::new()).is_ok());
    }

    #[test]
    fn schema_break_is_retried_once_with_the_violation_fed_back() {
        // FR-MODEL-003: a reply that breaks the schema is retried once with the error, then reported
        let schema = json!({"type":"object","properties":{"mark":{"type":"integer","enum":[3,7]}},"required":["mark"],"additionalProperties":false});
        let req = ChatRequest {
            model: "m".into(),
            messages: vec![json!({"role":"user","content":"go"})],
            max_tokens: 8,
            temperature: 0.0,
            schema: None,
            image_pixels: None,
        };

        let (url, seen) = fake_host(vec![completion("{\"mark\":5}"), completion("{\"mark\":7}")]);
        let c = HostClient::new(&url, HostTimeouts::default()).unwrap();
        let r = c.chat_structured(&req, &schema, &CancelToken::new()).unwrap();
        assert_eq!((r.attempts, r.value.clone()), (2, json!({"mark":7})));
        assert_eq!(r.calls.len(), 2);
        // The violation is counted and kept
        assert_eq!(r.violations.len(), 1);
        assert!(
            r.violations[0].contains("5 is not one of [3, 7]"),
            "{:?}",
            r.violations
        );
        let bodies = seen.lock().unwrap().clone();
        assert!(bodies[0].contains("\"response_format\""));
        assert!(bodies[1].contains("5 is not one of [3, 7]"), "{}", bodies[1]);
        assert!(bodies[1].contains("\"role\":\"assistant\""));

        let (url, _) = fake_host(vec![completion("no json here"), completion("{\"mark\":9}")]);
        let c = HostClient::new(&url, HostTimeouts::default()).unwrap();
        let err = c.chat_structured(&req, &schema, &CancelToken::new()).unwrap_err();
        match err {
            ModelError::SchemaBroken {
                attempts,
                violation,
                reply,
            } => {
                assert_eq!(attempts, 2);
                assert!(violation.contains("9 is not one of"), "{violation}");
                assert_eq!(reply, "{\"mark\":9}");
            }
            other => panic!("{other}"),
        }

        let (url, _) = fake_host(vec!["{\"not\":\"a completion\"}".into()]);
        let c = HostClient::new(&url, HostTimeouts::default()).unwrap();
        assert!(matches!(
            c.chat(&req, &CancelToken::new()),
            Err(ModelError::Protocol { .. })
        ));
    }

    // ---- host kinds ----------------------------------------------------------------------------

    use gamepilot_testbed::{HostConfig, ImitatedHost as Imitated, Reply, ScriptedHost};

    const MARK_SCHEMA: &str = r#"{"type":"object","properties":{"mark":{"type":"integer","enum":[3,7]}},"required":["mark"],"additionalProperties":false}"#;

    fn mark_request() -> ChatRequest {
        ChatRequest {
            model: "scripted-model".into(),
            messages: vec![json!({"role":"user","content":"go"})],
            max_tokens: 8,
            temperature: 0.0,
            schema: None,
            image_pixels: None,
        }
    }

    /// What one host kind showed: the probe with vision on (`probe()`) and off (`probe_for`), the
    /// metadata paths the first probe asked, and the body of one structured call sent through a client
    /// of the detected kind.
    struct Seen {
        on: Capabilities,
        off: Capabilities,
        probe_paths: Vec<String>,
        probe_bodies: Vec<Option<Value>>,
        body: Value,
    }

    fn probe_and_send(imitated: Imitated) -> Seen {
        let answer = |_: &gamepilot_testbed::ReceivedChat| Reply::content("{\"mark\":3}");
        let on =
            ScriptedHost::start(HostConfig::new().kind(imitated).vision(true).n_ctx(4096), answer).unwrap();
        let off =
            ScriptedHost::start(HostConfig::new().kind(imitated).vision(false).n_ctx(2048), answer).unwrap();
        let client = HostClient::new(&on.base_url(), HostTimeouts::default()).unwrap();
        let caps_on = client.probe().unwrap();
        let probe_log = on.requests();
        let caps_off = HostClient::new(&format!("{}/v1", off.base_url()), HostTimeouts::default())
            .unwrap()
            .probe_for("scripted-model")
            .unwrap();
        let client = client.with_kind(caps_on.kind);
        assert_eq!(client.kind(), caps_on.kind);
        let schema: Value = serde_json::from_str(MARK_SCHEMA).unwrap();
        let r = client
            .chat_structured(&mark_request(), &schema, &CancelToken::new())
            .unwrap();
        assert_eq!(
            (r.attempts, r.violations.len(), r.value),
            (1, 0, json!({"mark": 3}))
        );
        let chats = on.chat_requests();
        assert_eq!(chats.len(), 1);
        assert_eq!(
            chats[0].schema(),
            Some(&schema),
            "response_format carries the schema"
        );
        Seen {
            on: caps_on,
            off: caps_off,
            probe_paths: probe_log.iter().map(|r| r.path.clone()).collect(),
            probe_bodies: probe_log.iter().map(|r| r.body.clone()).collect(),
            body: chats[0].body.clone(),
        }
    }

    /// The schema-carrying fields present in a sent body, sorted.
    fn schema_fields(body: &Value) -> Vec<&str> {
        let mut v: Vec<&str> = [
            "response_format",
            "guided_json",
            "structured_outputs",
            "format",
            "grammar",
            "reply_schema",
        ]
        .into_iter()
        .filter(|k| body.get(*k).is_some())
        .collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn llama_cpp_is_told_by_props() {
        // FR-MODEL-001, FR-MODEL-003: /props → kind, modalities.vision, n_ctx; grammar
        let s = probe_and_send(Imitated::LlamaCpp);
        assert_eq!(s.probe_paths, ["/v1/models", "/props"]);
        assert_eq!(
            (s.on.kind, s.on.vision, s.on.n_ctx),
            (HostKind::LlamaCpp, Some(true), Some(4096))
        );
        assert_eq!(
            (s.off.kind, s.off.vision, s.off.n_ctx),
            (HostKind::LlamaCpp, Some(false), Some(2048))
        );
        assert_eq!(s.on.vision_source, "llama.cpp /props modalities.vision");
        assert_eq!(
            s.on.n_ctx_source,
            "llama.cpp /props default_generation_settings.n_ctx"
        );
        assert_eq!(s.on.model_path.as_deref(), Some("/models/scripted-model.gguf"));
        assert_eq!(s.on.model_id.as_deref(), Some("scripted-model"));
        // A compact grammar (no whitespace) with the schema beside it
        assert_eq!(schema_fields(&s.body), ["grammar", "reply_schema"]);
        let grammar = s.body["grammar"].as_str().unwrap();
        assert!(grammar.starts_with("root ::= "), "{grammar}");
    }

    #[test]
    fn ollama_is_told_by_api_version_and_described_by_api_show() {
        // FR-MODEL-001, FR-MODEL-003: /api/version → kind; /api/show capabilities and
        // model_info context_length; response_format AND Ollama's format
        let s = probe_and_send(Imitated::Ollama);
        assert_eq!(
            s.probe_paths,
            ["/v1/models", "/props", "/api/version", "/api/show"]
        );
        // probe() asks /api/show about the first listed model.
        assert_eq!(s.probe_bodies[3], Some(json!({"model": "scripted-model"})));
        assert_eq!(
            (s.on.kind, s.on.vision, s.on.n_ctx),
            (HostKind::Ollama, Some(true), Some(4096))
        );
        assert_eq!(
            (s.off.kind, s.off.vision, s.off.n_ctx),
            (HostKind::Ollama, Some(false), Some(2048))
        );
        assert_eq!(s.on.vision_source, "Ollama /api/show capabilities");
        assert!(
            s.on.n_ctx_source
                .starts_with("Ollama /api/show model_info.*.context_length"),
            "{}",
            s.on.n_ctx_source
        );
        assert_eq!(s.on.model_id.as_deref(), Some("scripted-model"));
        assert_eq!(schema_fields(&s.body), ["format", "response_format"]);
        let schema: Value = serde_json::from_str(MARK_SCHEMA).unwrap();
        assert_eq!(s.body["format"], schema);
    }

    #[test]
    fn lm_studio_is_told_by_api_v0_models() {
        // FR-MODEL-001, FR-MODEL-003: /api/v0/models type vlm/llm and max_context_length;
        // response_format
        let s = probe_and_send(Imitated::LmStudio);
        assert_eq!(
            s.probe_paths,
            ["/v1/models", "/props", "/api/version", "/api/v0/models"]
        );
        assert_eq!(
            (s.on.kind, s.on.vision, s.on.n_ctx),
            (HostKind::LmStudio, Some(true), Some(4096))
        );
        assert_eq!(
            (s.off.kind, s.off.vision, s.off.n_ctx),
            (HostKind::LmStudio, Some(false), Some(2048))
        );
        assert_eq!(s.on.vision_source, "LM Studio /api/v0/models type=vlm");
        assert_eq!(s.off.vision_source, "LM Studio /api/v0/models type=llm");
        assert_eq!(schema_fields(&s.body), ["response_format"]);

        // A model LM Studio does not list: the kind is known, the figures are not guessed.
        let host = ScriptedHost::start(HostConfig::new().kind(Imitated::LmStudio).vision(true), |_| {
            Reply::content("{}")
        })
        .unwrap();
        let caps = HostClient::new(&host.base_url(), HostTimeouts::default())
            .unwrap()
            .probe_for("other-model")
            .unwrap();
        assert_eq!(
            (caps.kind, caps.vision, caps.n_ctx, caps.model_id),
            (HostKind::LmStudio, None, None, None)
        );
        assert_eq!(
            caps.vision_source,
            "LM Studio /api/v0/models does not list \"other-model\""
        );
    }

    #[test]
    fn vllm_is_told_by_its_model_list_and_vision_stays_unknown() {
        // FR-MODEL-001, FR-MODEL-003: owned_by vllm + max_model_len in one request; vision
        // is None even for a vision model (vLLM does not say); response_format, guided_json and
        // structured_outputs
        let s = probe_and_send(Imitated::Vllm);
        assert_eq!(s.probe_paths, ["/v1/models"]);
        assert_eq!(
            (s.on.kind, s.on.vision, s.on.n_ctx),
            (HostKind::Vllm, None, Some(4096))
        );
        assert_eq!(
            (s.off.kind, s.off.vision, s.off.n_ctx),
            (HostKind::Vllm, None, Some(2048))
        );
        assert_eq!(s.on.vision_source, "vLLM does not say");
        assert_eq!(s.on.n_ctx_source, "vLLM /v1/models max_model_len");
        assert_eq!(s.on.model_path.as_deref(), Some("scripted-model"));
        assert_eq!(
            schema_fields(&s.body),
            ["guided_json", "response_format", "structured_outputs"]
        );
        let schema: Value = serde_json::from_str(MARK_SCHEMA).unwrap();
        assert_eq!(s.body["guided_json"], schema);
        assert_eq!(s.body["structured_outputs"], json!({ "json": schema }));
    }

    #[test]
    fn a_host_that_is_none_of_them_is_unknown_not_guessed() {
        // FR-MODEL-001, FR-MODEL-003: 200s without each kind's own fields are not evidence;
        // the portable response_format only, and validation still runs
        let (url, seen) = fake_host(vec![
            json!({"object": "list", "data": [{"id": "m", "owned_by": "someone"}]}).to_string(),
            "<html>props</html>".into(),
            json!({"error": "no version here"}).to_string(),
            json!({"data": [{"id": "m"}]}).to_string(),
            completion("{\"mark\":5}"),
            completion("{\"mark\":7}"),
        ]);
        let c = HostClient::new(&url, HostTimeouts::default()).unwrap();
        let caps = c.probe().unwrap();
        assert_eq!(
            (caps.kind, caps.vision, caps.n_ctx, caps.model_id.as_deref()),
            (HostKind::Unknown, None, None, Some("m"))
        );
        assert_eq!(caps.vision_source, "the host kind is unknown, so nothing says");
        let c = c.with_kind(caps.kind);
        let schema: Value = serde_json::from_str(MARK_SCHEMA).unwrap();
        let r = c
            .chat_structured(&mark_request(), &schema, &CancelToken::new())
            .unwrap();
        assert_eq!((r.attempts, r.violations.len()), (2, 1));
        let bodies = seen.lock().unwrap().clone();
        let sent: Value = serde_json::from_str(&bodies[4]).unwrap();
        assert_eq!(schema_fields(&sent), ["response_format"]);
    }

    #[test]
    fn the_probe_is_bounded_and_a_failing_host_is_an_error() {
        // FR-MODEL-001: each metadata request has a short bound of its own; a host that
        // cannot answer (5xx, silence) is an error, never a kind
        let (url, _) = fake_host(vec![
            "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}".into(),
        ]);
        let c = HostClient::new(&url, HostTimeouts::default()).unwrap();
        assert!(matches!(c.probe(), Err(ModelError::Http { status: 503, .. })));

        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let _hold = std::thread::spawn(move || {
            let first = l.accept();
            std::thread::sleep(Duration::from_secs(3));
            drop(first);
        });
        let c = HostClient::new(&format!("http://127.0.0.1:{port}"), HostTimeouts::default())
            .unwrap()
            .with_probe_timeout(Duration::from_millis(200));
        assert_eq!(c.probe_timeout(), Duration::from_millis(200));
        let started = Instant::now();
        let err = c.probe().unwrap_err();
        assert!(
            matches!(err, ModelError::Timeout { timeout_ms: 200, .. }),
            "{err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        // The default bound, and the call timeout caps it.
        let c = HostClient::new(&url, HostTimeouts::default()).unwrap();
        assert_eq!(c.probe_timeout(), PROBE_STEP_TIMEOUT);
        let short = HostTimeouts {
            call: Duration::from_millis(500),
            ..HostTimeouts::default()
        };
        assert_eq!(
            HostClient::new(&url, short).unwrap().probe_timeout(),
            Duration::from_millis(500)
        );
    }
}
