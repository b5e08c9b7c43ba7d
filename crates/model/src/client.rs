//! The chat-completions client for any OpenAI-compatible host (llama.cpp server, vLLM, SGLang, Ollama,
//! LM Studio): timeouts, cancellation, named errors, the capability probe, and schema-constrained calls
//! whose broken reply is retried once with the violation fed back, then reported. Every body is read with
//! a size limit ([`MAX_REPLY_BYTES`] by default, [`HostClient::with_reply_limit`]): a host that streams
//! without end is a named error ([`ModelError::ReplyTooLarge`]), never an unbounded allocation.

use crate::cancel::CancelToken;
use crate::wire::{ChatReply, ChatRequest};
use crate::ModelError;
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

/// What a host says it can do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    /// `Some(true)` when the host takes images (llama.cpp: `GET /props` → `modalities.vision`);
    /// `None` when the host does not say (send text only, or ask the user).
    pub vision: Option<bool>,
    /// The context size of one slot, when reported.
    pub n_ctx: Option<u64>,
    pub model_path: Option<String>,
}

/// A reply that validated against its schema.
#[derive(Debug, Clone, PartialEq)]
pub struct StructuredReply {
    pub value: Value,
    pub reply: ChatReply,
    /// 1, or 2 when the first reply broke the schema and the retry succeeded.
    pub attempts: u32,
    /// Every call's reply (for timings and the recording), in order.
    pub calls: Vec<ChatReply>,
}

/// The largest reply body read by default (a chat completion is a few KiB; a `/props` a few hundred).
pub const MAX_REPLY_BYTES: u64 = 8 << 20;
/// How much of an error body is read (it is cut to 600 characters for the message anyway).
const MAX_ERROR_BODY_BYTES: u64 = 64 << 10;

/// A client of one host.
#[derive(Debug, Clone)]
pub struct HostClient {
    base_url: String,
    timeouts: HostTimeouts,
    agent: ureq::Agent,
    reply_limit: u64,
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
        })
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
                            timeout_ms: self.timeouts.call.as_millis() as u64,
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

    fn get_json(&self, path: &str) -> Result<Value, ModelError> {
        let url = format!("{}{}", self.base_url, path);
        let resp = self.agent.get(&url).call().map_err(|e| self.map_err(&url, e))?;
        read_json(&url, resp, self.reply_limit)
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

    /// The capability probe. llama.cpp answers `GET /props`; a host without that endpoint (404) is
    /// reported as "does not say" rather than failing.
    pub fn probe(&self) -> Result<Capabilities, ModelError> {
        match self.get_json("/props") {
            Ok(p) => Ok(Capabilities {
                vision: p.pointer("/modalities/vision").and_then(Value::as_bool),
                n_ctx: p
                    .pointer("/default_generation_settings/n_ctx")
                    .and_then(Value::as_u64),
                model_path: p.get("model_path").and_then(Value::as_str).map(str::to_string),
            }),
            Err(ModelError::Http { status: 404, .. }) => Ok(Capabilities {
                vision: None,
                n_ctx: None,
                model_path: None,
            }),
            Err(e) => Err(e),
        }
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
        let body = req.body();
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

    /// A call constrained by `schema` (sent as `response_format` json_schema). The reply is parsed and
    /// re-validated here; a reply that breaks the schema (not JSON, or not matching) is retried ONCE
    /// with the violation fed back, then reported as [`ModelError::SchemaBroken`].
    pub fn chat_structured(
        &self,
        req: &ChatRequest,
        schema: &Value,
        cancel: &CancelToken,
    ) -> Result<StructuredReply, ModelError> {
        let first_req = req.clone().with_schema(schema.clone());
        let mut calls = Vec::new();
        let mut current = first_req.clone();
        for attempt in 1..=2u32 {
            let reply = self.chat(&current, cancel)?;
            calls.push(reply.clone());
            match check_reply(&reply, schema) {
                Ok(value) => {
                    return Ok(StructuredReply {
                        value,
                        reply,
                        attempts: attempt,
                        calls,
                    })
                }
                Err(violation) => {
                    if attempt == 2 {
                        return Err(ModelError::SchemaBroken {
                            attempts: 2,
                            violation,
                            reply: reply.content,
                        });
                    }
                    current = first_req.with_feedback(&reply.content, &violation);
                }
            }
        }
        Err(ModelError::SchemaBroken {
            attempts: 2,
            violation: "unreachable".into(),
            reply: String::new(),
        })
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
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
                    body.len(),
                    body
                );
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
        // issue 14 (bounded everything): model replies are read with a size limit
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
}
