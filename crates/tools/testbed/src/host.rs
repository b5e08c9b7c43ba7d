//! A scripted OpenAI-compatible model host for tests: a plain `TcpListener` on 127.0.0.1 with a minimal
//! HTTP/1.1 parser, answering the endpoints gamepilot's client uses (`/health`, `/v1/models`, `/props`,
//! `/v1/chat/completions`) from a policy the test supplies instead of a language model.
//!
//! Every request is recorded in arrival order. Prompt tokens are estimated as bytes/4 of the message
//! text; the reported cached tokens are the common prefix with the previous accepted prompt (bytes/4),
//! so tests can check prefix-caching behaviour; a prompt that does not fit the configured `n_ctx` is
//! refused with HTTP 400 the way the imitated host words it. [`ImitatedHost`] switches the metadata
//! endpoints and reply details between llama.cpp, Ollama, vLLM and LM Studio.
//!
//! The host runs on its own threads (one accept thread, one per connection); Drop stops and joins them.

use crate::xserver::TestBedError;
use base64::Engine;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The largest request head (request line and headers) accepted.
const MAX_HEAD: usize = 64 * 1024;
/// The largest request body accepted.
const MAX_BODY: usize = 256 * 1024 * 1024;
/// How often blocked reads, accepts and delays look at the stop flag.
const POLL: Duration = Duration::from_millis(20);

/// Which kind of host to imitate: it decides which metadata endpoints exist and how replies and the
/// context overflow look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ImitatedHost {
    /// llama.cpp `llama-server`: `/health`, `/props`, `/v1/models`, `timings` in replies, HTTP 400
    /// `exceed_context_size_error` when the prompt does not fit.
    #[default]
    LlamaCpp,
    /// Ollama: `GET /`, `/api/tags`, `/api/version`, `POST /api/show` (with `capabilities`), `/v1/models`;
    /// no `/health` or `/props`; a prompt that does not fit is silently truncated (its default), never
    /// refused.
    Ollama,
    /// vLLM: `/health` (empty 200), `/version`, `/v1/models` with `max_model_len`; no `/props`; refuses a
    /// prompt whose tokens plus `max_tokens` exceed the context with a `BadRequestError`.
    Vllm,
    /// LM Studio: `/v1/models`, `/api/v0/models` (with `type` and `max_context_length`); no `/health` or
    /// `/props`. Its overflow wording is an approximation (not checked against a real LM Studio).
    LmStudio,
}

/// What the host says about itself, and how it accounts for tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct HostConfig {
    pub kind: ImitatedHost,
    /// The model name listed by `/v1/models` and echoed in replies.
    pub model: String,
    /// 0: an OS-chosen free port.
    pub port: u16,
    /// Whether the model takes images (`/props` `modalities.vision`, Ollama `capabilities`, LM Studio
    /// `type: vlm`).
    pub vision: bool,
    /// Context size in tokens (`/props` `default_generation_settings.n_ctx`, vLLM `max_model_len`);
    /// a request whose estimate does not fit is refused (see [`ImitatedHost`]).
    pub n_ctx: u64,
    /// Prompt tokens counted for each image part (0: images are free).
    pub image_tokens: u64,
    /// Reported `timings.prompt_ms` per evaluated prompt token.
    pub prompt_ms_per_token: f64,
    /// Reported `timings.predicted_ms` per completion token.
    pub predicted_ms_per_token: f64,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            kind: ImitatedHost::LlamaCpp,
            model: "scripted-model".into(),
            port: 0,
            vision: false,
            n_ctx: 8192,
            image_tokens: 0,
            prompt_ms_per_token: 0.5,
            predicted_ms_per_token: 20.0,
        }
    }
}

impl HostConfig {
    pub fn new() -> Self {
        HostConfig::default()
    }
    pub fn kind(mut self, kind: ImitatedHost) -> Self {
        self.kind = kind;
        self
    }
    pub fn model(mut self, model: &str) -> Self {
        self.model = model.to_string();
        self
    }
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }
    pub fn vision(mut self, vision: bool) -> Self {
        self.vision = vision;
        self
    }
    pub fn n_ctx(mut self, n_ctx: u64) -> Self {
        self.n_ctx = n_ctx;
        self
    }
    pub fn image_tokens(mut self, image_tokens: u64) -> Self {
        self.image_tokens = image_tokens;
        self
    }
}

/// What the policy answers to one chat completion.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A completion whose message content is this text (`finish_reason: "stop"`).
    Content(String),
    /// A completion cut at `max_tokens` (`finish_reason: "length"`).
    Truncated(String),
    /// This HTTP status with this body verbatim (JSON content type when the body parses as JSON).
    Status(u16, String),
    /// The inner reply after a pause (cut short, without an answer, when the host stops).
    Delay(Duration, Box<Reply>),
    /// Close the connection without answering.
    Disconnect,
}

impl Reply {
    pub fn content(text: impl Into<String>) -> Reply {
        Reply::Content(text.into())
    }
    /// A completion whose content is this JSON value, serialised.
    pub fn json(value: &Value) -> Reply {
        Reply::Content(value.to_string())
    }
    pub fn status(code: u16, body: impl Into<String>) -> Reply {
        Reply::Status(code, body.into())
    }
    pub fn delay(pause: Duration, then: Reply) -> Reply {
        Reply::Delay(pause, Box::new(then))
    }
    /// llama.cpp's refusal of a prompt that does not fit its context (what [`ScriptedHost`] sends by
    /// itself when the estimate does not fit `n_ctx`).
    pub fn context_exceeded(n_prompt_tokens: u64, n_ctx: u64) -> Reply {
        Reply::Status(400, llama_exceed_context(n_prompt_tokens, n_ctx).to_string())
    }
}

/// llama.cpp's error body for `ERROR_TYPE_EXCEED_CONTEXT_SIZE` (tools/server: the message with both
/// counts, and `n_prompt_tokens` / `n_ctx` beside it).
fn llama_exceed_context(n_prompt_tokens: u64, n_ctx: u64) -> Value {
    json!({"error": {
        "code": 400,
        "message": format!(
            "request ({n_prompt_tokens} tokens) exceeds the available context size ({n_ctx} tokens), try increasing it"
        ),
        "type": "exceed_context_size_error",
        "n_prompt_tokens": n_prompt_tokens,
        "n_ctx": n_ctx,
    }})
}

/// One image part of a request, decoded from its data URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataImage {
    pub mime: String,
    pub bytes: Vec<u8>,
}

/// One chat-completions request, as the policy sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedChat {
    /// The parsed JSON body.
    pub body: Value,
    /// 0 for the first chat request this host received (with a JSON body), 1 for the next, …
    pub index: usize,
    /// The host's estimate: bytes/4 of all message text, plus `image_tokens` per image.
    pub prompt_tokens: u64,
    /// The common prefix with the previous accepted prompt, in the same units.
    pub cached_tokens: u64,
    pub at: Instant,
}

/// The text of one message: its string content, or its text parts joined by blank lines.
pub fn message_text(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    }
}

impl ReceivedChat {
    pub fn messages(&self) -> &[Value] {
        self.body
            .get("messages")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    fn texts_of(&self, role: &str) -> Vec<String> {
        self.messages()
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some(role))
            .map(message_text)
            .collect()
    }

    /// All system messages' text, joined by blank lines.
    pub fn system_text(&self) -> String {
        self.texts_of("system").join("\n\n")
    }

    /// The last user message's text (the one the model answers).
    pub fn user_text(&self) -> String {
        self.texts_of("user").pop().unwrap_or_default()
    }

    /// Every user message's text, in order.
    pub fn user_texts(&self) -> Vec<String> {
        self.texts_of("user")
    }

    /// All message text (every role), joined by blank lines: what substring policies search.
    pub fn prompt_text(&self) -> String {
        self.messages()
            .iter()
            .map(message_text)
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// The `image_url.url` of every image part, in order.
    pub fn image_urls(&self) -> Vec<String> {
        self.messages()
            .iter()
            .filter_map(|m| m.get("content").and_then(Value::as_array))
            .flatten()
            .filter_map(|p| p.pointer("/image_url/url").and_then(Value::as_str))
            .map(str::to_string)
            .collect()
    }

    pub fn has_image(&self) -> bool {
        !self.image_urls().is_empty()
    }

    /// Every image part decoded from its `data:<mime>;base64,<data>` URL; an error names the first part
    /// that is not such a URL or whose base64 does not decode.
    pub fn images(&self) -> Result<Vec<DataImage>, TestBedError> {
        self.image_urls().iter().map(|u| decode_data_url(u)).collect()
    }

    /// The JSON schema the reply must follow: `response_format.json_schema.schema` (OpenAI form), or
    /// `response_format.schema` (llama.cpp's `json_object` form), a top-level `json_schema`, or the
    /// `reply_schema` gamepilot sends beside a llama.cpp grammar.
    pub fn schema(&self) -> Option<&Value> {
        self.body
            .pointer("/response_format/json_schema/schema")
            .or_else(|| self.body.pointer("/response_format/schema"))
            .or_else(|| self.body.get("json_schema"))
            .or_else(|| self.body.get("reply_schema"))
    }

    /// A llama.cpp GBNF `grammar`, when sent.
    pub fn grammar(&self) -> Option<&str> {
        self.body.get("grammar").and_then(Value::as_str)
    }

    pub fn max_tokens(&self) -> Option<u64> {
        self.body
            .get("max_tokens")
            .or_else(|| self.body.get("n_predict"))
            .and_then(Value::as_u64)
    }

    pub fn model(&self) -> Option<&str> {
        self.body.get("model").and_then(Value::as_str)
    }
}

fn decode_data_url(url: &str) -> Result<DataImage, TestBedError> {
    let bad = |why: &str| TestBedError::Other(format!("image part {}: {why}", shorten(url, 60)));
    let rest = url.strip_prefix("data:").ok_or_else(|| bad("not a data: URL"))?;
    let (meta, data) = rest
        .split_once(',')
        .ok_or_else(|| bad("no ',' in the data URL"))?;
    let mime = meta
        .strip_suffix(";base64")
        .ok_or_else(|| bad("the data URL is not base64"))?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| bad(&format!("bad base64: {e}")))?;
    Ok(DataImage {
        mime: mime.to_string(),
        bytes,
    })
}

fn shorten(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &s[..cut])
}

/// One request as the host received it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// Empty when the request line could not be parsed.
    pub method: String,
    /// As sent, query included.
    pub path: String,
    /// Header names in lower case, in order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON; `None` when empty or not JSON.
    pub body: Option<Value>,
    /// The body as text (lossy UTF-8).
    pub raw_body: String,
    /// The chat request the policy saw (chat completions with a JSON body only).
    pub chat: Option<ReceivedChat>,
    pub at: Instant,
    /// Since the host started.
    pub since_start: Duration,
    /// The HTTP status answered, once answered (`None` while pending or when the connection was closed
    /// without an answer).
    pub status: Option<u16>,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

type PolicyFn = dyn Fn(&ReceivedChat) -> Reply + Send + Sync;

/// A piece of the prompt for prefix accounting.
#[derive(Debug, Clone, PartialEq)]
enum Segment {
    Text(String),
    Image(String),
}

#[derive(Default)]
struct State {
    log: Vec<RecordedRequest>,
    chats: usize,
    /// The last accepted prompt (the imitated prefix cache).
    cached: Vec<Segment>,
}

struct Shared {
    config: HostConfig,
    policy: Box<PolicyFn>,
    stop: AtomicBool,
    loading: AtomicBool,
    state: Mutex<State>,
    changed: Condvar,
    started: Instant,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_status(&self, idx: usize, status: u16) {
        let mut st = self.lock();
        if let Some(r) = st.log.get_mut(idx) {
            r.status = Some(status);
        }
        drop(st);
        self.changed.notify_all();
    }
}

/// The running scripted host. Dropping it stops the server and joins its threads.
pub struct ScriptedHost {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ScriptedHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedHost")
            .field("addr", &self.addr)
            .field("config", &self.shared.config)
            .finish()
    }
}

impl ScriptedHost {
    /// Starts a host on 127.0.0.1 (`config.port`, or an OS-chosen one when 0) answering chat completions
    /// with `policy`.
    pub fn start(
        config: HostConfig,
        policy: impl Fn(&ReceivedChat) -> Reply + Send + Sync + 'static,
    ) -> Result<ScriptedHost, TestBedError> {
        let listener = TcpListener::bind(("127.0.0.1", config.port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            config,
            policy: Box::new(policy),
            stop: AtomicBool::new(false),
            loading: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            started: Instant::now(),
        });
        let worker = shared.clone();
        let accept = std::thread::Builder::new()
            .name("scripted-host".into())
            .spawn(move || accept_loop(listener, worker))?;
        Ok(ScriptedHost {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// A default llama.cpp-like host that answers with `replies` in order, then repeats the last.
    pub fn sequence(replies: Vec<Reply>) -> Result<ScriptedHost, TestBedError> {
        ScriptedHost::start(HostConfig::default(), sequence(replies))
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT` (the server root; append `/v1` for OpenAI clients that want it).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn config(&self) -> &HostConfig {
        &self.shared.config
    }

    /// While set, `/health` answers 503 "Loading model" (llama.cpp) and chat completions 503 too.
    pub fn set_loading(&self, loading: bool) {
        self.shared.loading.store(loading, Ordering::SeqCst);
    }

    /// Forgets the cached prompt (as a restarted host or an evicted slot would): the next request
    /// reports 0 cached tokens.
    pub fn clear_cache(&self) {
        self.shared.lock().cached.clear();
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().log.clone()
    }

    /// The chat completions so far (those with a JSON body), in arrival order.
    pub fn chat_requests(&self) -> Vec<ReceivedChat> {
        self.shared
            .lock()
            .log
            .iter()
            .filter_map(|r| r.chat.clone())
            .collect()
    }

    /// Waits until at least `n` requests arrived; returns them all, or a timeout error.
    pub fn wait_for_requests(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Result<Vec<RecordedRequest>, TestBedError> {
        self.wait_until(timeout, &format!("{n} requests"), |st| st.log.len() >= n)
            .map(|st| st.log)
    }

    /// Waits until at least `n` chat completions arrived; returns them all, or a timeout error.
    pub fn wait_for_chat_requests(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Result<Vec<ReceivedChat>, TestBedError> {
        self.wait_until(timeout, &format!("{n} chat requests"), |st| st.chats >= n)
            .map(|st| st.log.into_iter().filter_map(|r| r.chat).collect())
    }

    fn wait_until(
        &self,
        timeout: Duration,
        what: &str,
        done: impl Fn(&State) -> bool,
    ) -> Result<State, TestBedError> {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        loop {
            if done(&st) {
                return Ok(State {
                    log: st.log.clone(),
                    chats: st.chats,
                    cached: Vec::new(),
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(TestBedError::Timeout {
                    what: format!("the scripted host receiving {what} (got {})", st.log.len()),
                    secs: timeout.as_secs(),
                });
            }
            st = self
                .shared
                .changed
                .wait_timeout(st, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
}

impl Drop for ScriptedHost {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

/// A deliberative planner's reply for the schema the request carries: one subgoal per `(description,
/// prefer)`, each taking the first offered postcondition that contains `prefer` (else the first offered).
pub fn plan_reply(req: &ReceivedChat, subgoals: &[(&str, &str)]) -> Reply {
    Reply::json(&plan_value(req, subgoals))
}

/// [`plan_reply`]'s JSON, for a test that adds to it (a research question, say).
pub fn plan_value(req: &ReceivedChat, subgoals: &[(&str, &str)]) -> Value {
    let offered: Vec<String> = req
        .schema()
        .and_then(|s| s.pointer("/properties/subgoals/items/properties/postcondition/enum"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let subgoals: Vec<Value> = subgoals
        .iter()
        .map(|(description, prefer)| {
            let post = offered
                .iter()
                .find(|p| p.contains(prefer))
                .or(offered.first())
                .cloned()
                .unwrap_or_else(|| prefer.to_string());
            json!({"description": description, "postcondition": post})
        })
        .collect();
    json!({ "subgoals": subgoals })
}

/// A policy that answers with `replies` in order, then repeats the last (HTTP 500 when empty).
pub fn sequence(replies: Vec<Reply>) -> impl Fn(&ReceivedChat) -> Reply + Send + Sync + 'static {
    let next = AtomicUsize::new(0);
    move |_| {
        let i = next.fetch_add(1, Ordering::SeqCst);
        replies
            .get(i)
            .or(replies.last())
            .cloned()
            .unwrap_or_else(|| Reply::status(500, "the scripted sequence is empty"))
    }
}

/// A policy that answers with the reply of the first rule whose substring occurs in the prompt text
/// (all messages, see [`ReceivedChat::prompt_text`]), else with `fallback`.
pub fn by_substring<S: Into<String>>(
    rules: impl IntoIterator<Item = (S, Reply)>,
    fallback: Reply,
) -> impl Fn(&ReceivedChat) -> Reply + Send + Sync + 'static {
    let rules: Vec<(String, Reply)> = rules.into_iter().map(|(s, r)| (s.into(), r)).collect();
    move |req| {
        let text = req.prompt_text();
        rules
            .iter()
            .find(|(needle, _)| text.contains(needle.as_str()))
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| fallback.clone())
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                conns.retain(|h| !h.is_finished());
                let worker = shared.clone();
                if let Ok(h) = std::thread::Builder::new()
                    .name("scripted-host-conn".into())
                    .spawn(move || serve_connection(stream, &worker))
                {
                    conns.push(h);
                }
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    drop(listener);
    for h in conns {
        let _ = h.join();
    }
}

/// A parsed request.
struct Request {
    method: String,
    path: String,
    version: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn keep_alive(&self) -> bool {
        let conn = self.header("connection").map(str::to_ascii_lowercase);
        match conn.as_deref() {
            Some("close") => false,
            Some("keep-alive") => true,
            _ => self.version == "HTTP/1.1",
        }
    }
}

/// Why a request could not be read.
enum ReadError {
    /// The peer closed, the host stopped, or the socket failed: nothing to answer.
    Gone,
    /// A malformed request: answer 400 and close. Carries what could be parsed.
    Bad {
        method: String,
        path: String,
        headers: Vec<(String, String)>,
        why: String,
    },
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

/// Reads more bytes into `buf`; `false` when the peer closed, the host stopped or the socket failed.
fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>, shared: &Shared) -> bool {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            return false;
        }
        match stream.read(&mut chunk) {
            Ok(0) => return false,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return true;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return false,
        }
    }
}

fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>, shared: &Shared) -> Result<Request, ReadError> {
    let head_end = loop {
        if let Some(end) = find_head_end(buf) {
            break end;
        }
        if buf.len() > MAX_HEAD {
            return Err(ReadError::Bad {
                method: String::new(),
                path: String::new(),
                headers: Vec::new(),
                why: format!("request head larger than {MAX_HEAD} bytes"),
            });
        }
        if !fill(stream, buf, shared) {
            return Err(ReadError::Gone);
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end - 4]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut words = request_line.split(' ');
    let (method, path, version) = match (words.next(), words.next(), words.next(), words.next()) {
        (Some(m), Some(p), Some(v), None)
            if !m.is_empty() && p.starts_with('/') && v.starts_with("HTTP/") =>
        {
            (m.to_string(), p.to_string(), v.to_string())
        }
        _ => {
            return Err(ReadError::Bad {
                method: String::new(),
                path: String::new(),
                headers: Vec::new(),
                why: format!("malformed request line {:?}", shorten(request_line, 80)),
            })
        }
    };
    let mut headers = Vec::new();
    for line in lines {
        match line.split_once(':') {
            Some((k, v)) if !k.trim().is_empty() => {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()))
            }
            _ => {
                return Err(ReadError::Bad {
                    method,
                    path,
                    headers,
                    why: format!("malformed header line {:?}", shorten(line, 80)),
                })
            }
        }
    }
    let bad = |method: String, path: String, headers: Vec<(String, String)>, why: String| ReadError::Bad {
        method,
        path,
        headers,
        why,
    };
    let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    if header("transfer-encoding").is_some() {
        let why = "Transfer-Encoding bodies are not supported; send Content-Length".to_string();
        return Err(bad(method, path, headers, why));
    }
    let len = match header("content-length") {
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n <= MAX_BODY => n,
            _ => return Err(bad(method, path, headers, format!("bad Content-Length {v:?}"))),
        },
        None if method == "POST" || method == "PUT" || method == "PATCH" => {
            return Err(bad(method, path, headers, "missing Content-Length".into()))
        }
        None => 0,
    };
    while buf.len() < head_end + len {
        if !fill(stream, buf, shared) {
            return Err(ReadError::Gone);
        }
    }
    let body = buf[head_end..head_end + len].to_vec();
    buf.drain(..head_end + len);
    Ok(Request {
        method,
        path,
        version,
        headers,
        body,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn write_response(stream: &mut TcpStream, status: u16, body: &str, keep_alive: bool) -> bool {
    let ctype = if serde_json::from_str::<Value>(body).is_ok() {
        "application/json; charset=utf-8"
    } else {
        "text/plain; charset=utf-8"
    };
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
        reason(status),
        body.len(),
        if keep_alive { "keep-alive" } else { "close" }
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|_| stream.write_all(body.as_bytes()))
        .and_then(|_| stream.flush())
        .is_ok()
}

fn serve_connection(mut stream: TcpStream, shared: &Shared) {
    if stream.set_nonblocking(false).is_err() || stream.set_read_timeout(Some(POLL)).is_err() {
        return;
    }
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::new();
    loop {
        let at = Instant::now();
        match read_request(&mut stream, &mut buf, shared) {
            Err(ReadError::Gone) => return,
            Err(ReadError::Bad {
                method,
                path,
                headers,
                why,
            }) => {
                let idx = record(shared, method, path, headers, &[], at).0;
                let body = error_body(shared.config.kind, 400, &why, "invalid_request_error");
                let _ = write_response(&mut stream, 400, &body.to_string(), false);
                shared.set_status(idx, 400);
                close_gently(&mut stream);
                return;
            }
            Ok(req) => {
                let keep_alive = req.keep_alive();
                let (idx, chat) = record(
                    shared,
                    req.method.clone(),
                    req.path.clone(),
                    req.headers.clone(),
                    &req.body,
                    at,
                );
                match respond(shared, &req, chat) {
                    Some((status, body)) => {
                        let written = write_response(&mut stream, status, &body, keep_alive);
                        shared.set_status(idx, status);
                        if !written || !keep_alive {
                            return;
                        }
                    }
                    None => return,
                }
            }
        }
    }
}

/// Closes after an early answer: closing with unread request bytes would reset the connection and could
/// destroy the answer before the client reads it, so shut down writing and drain what the client still
/// sends (briefly).
fn close_gently(stream: &mut TcpStream) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut sink = [0u8; 4096];
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        match stream.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

/// The prompt as segments (text of each message and text part, images by URL).
fn segments(body: &Value) -> Vec<Segment> {
    let mut out = Vec::new();
    let messages = body.get("messages").and_then(Value::as_array);
    for m in messages.into_iter().flatten() {
        match m.get("content") {
            Some(Value::String(s)) => out.push(Segment::Text(s.clone())),
            Some(Value::Array(parts)) => {
                for p in parts {
                    if let Some(t) = p.get("text").and_then(Value::as_str) {
                        out.push(Segment::Text(t.to_string()));
                    } else if let Some(u) = p.pointer("/image_url/url").and_then(Value::as_str) {
                        out.push(Segment::Image(u.to_string()));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Size in "bytes" (a text's length; an image counts as `4 * image_tokens`), so that tokens = units/4.
fn units(seg: &Segment, image_tokens: u64) -> u64 {
    match seg {
        Segment::Text(t) => t.len() as u64,
        Segment::Image(_) => 4 * image_tokens,
    }
}

/// The common prefix of two prompts, in units.
fn common_prefix(a: &[Segment], b: &[Segment], image_tokens: u64) -> u64 {
    let mut n = 0;
    for (x, y) in a.iter().zip(b) {
        match (x, y) {
            (Segment::Text(s), Segment::Text(t)) if s == t => n += s.len() as u64,
            (Segment::Text(s), Segment::Text(t)) => {
                n += s.bytes().zip(t.bytes()).take_while(|(p, q)| p == q).count() as u64;
                return n;
            }
            (Segment::Image(s), Segment::Image(t)) if s == t => n += 4 * image_tokens,
            _ => return n,
        }
    }
    n
}

fn route(path: &str) -> &str {
    path.split('?').next().unwrap_or(path)
}

fn is_chat_path(path: &str) -> bool {
    matches!(route(path), "/v1/chat/completions" | "/chat/completions")
}

/// Records the request; for a chat completion with a JSON body also builds what the policy sees.
fn record(
    shared: &Shared,
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: &[u8],
    at: Instant,
) -> (usize, Option<ReceivedChat>) {
    let raw_body = String::from_utf8_lossy(body).into_owned();
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let mut st = shared.lock();
    let chat = match &parsed {
        Some(v @ Value::Object(_)) if method == "POST" && is_chat_path(&path) => {
            let segs = segments(v);
            let it = shared.config.image_tokens;
            let total: u64 = segs.iter().map(|s| units(s, it)).sum();
            let cached = common_prefix(&segs, &st.cached, it);
            let req = ReceivedChat {
                body: v.clone(),
                index: st.chats,
                prompt_tokens: total / 4,
                cached_tokens: cached / 4,
                at,
            };
            st.chats += 1;
            if !overflows(&shared.config, &req) {
                st.cached = segs;
            }
            Some(req)
        }
        _ => None,
    };
    st.log.push(RecordedRequest {
        method,
        path,
        headers,
        body: parsed,
        raw_body,
        chat: chat.clone(),
        at,
        since_start: at.saturating_duration_since(shared.started),
        status: None,
    });
    let idx = st.log.len() - 1;
    drop(st);
    shared.changed.notify_all();
    (idx, chat)
}

/// Whether the host refuses this prompt as too long for its context.
fn overflows(config: &HostConfig, req: &ReceivedChat) -> bool {
    match config.kind {
        // llama.cpp refuses `n_tokens >= n_ctx` (a slot needs one free cell to decode).
        ImitatedHost::LlamaCpp => req.prompt_tokens >= config.n_ctx,
        ImitatedHost::Vllm => req.prompt_tokens + req.max_tokens().unwrap_or(0) > config.n_ctx,
        ImitatedHost::LmStudio => req.prompt_tokens > config.n_ctx,
        ImitatedHost::Ollama => false,
    }
}

fn overflow_body(config: &HostConfig, req: &ReceivedChat) -> Value {
    let (p, n) = (req.prompt_tokens, config.n_ctx);
    match config.kind {
        ImitatedHost::Vllm => {
            let m = req.max_tokens().unwrap_or(0);
            json!({
                "object": "error",
                "message": format!(
                    "This model's maximum context length is {n} tokens. However, you requested {} tokens ({p} in the messages, {m} in the completion). Please reduce the length of the messages or completion.",
                    p + m
                ),
                "type": "BadRequestError",
                "param": null,
                "code": 400,
            })
        }
        ImitatedHost::LmStudio => json!({"error": format!(
            "The number of tokens to keep from the initial prompt ({p}) is greater than the context length ({n})"
        )}),
        ImitatedHost::LlamaCpp | ImitatedHost::Ollama => llama_exceed_context(p, n),
    }
}

fn error_body(kind: ImitatedHost, code: u16, message: &str, ty: &str) -> Value {
    match kind {
        ImitatedHost::Vllm => {
            json!({"object": "error", "message": message, "type": ty, "param": null, "code": code})
        }
        _ => json!({"error": {"code": code, "message": message, "type": ty}}),
    }
}

fn not_found(kind: ImitatedHost, method: &str, path: &str) -> (u16, String) {
    match kind {
        ImitatedHost::LlamaCpp => (
            404,
            json!({"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}})
                .to_string(),
        ),
        ImitatedHost::Ollama => (404, "404 page not found".into()),
        ImitatedHost::Vllm => (404, json!({"detail": "Not Found"}).to_string()),
        ImitatedHost::LmStudio => (
            404,
            json!({"error": format!("Unexpected endpoint or method. ({method} {path})")}).to_string(),
        ),
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The answer to one request; `None`: close without answering.
fn respond(shared: &Shared, req: &Request, chat: Option<ReceivedChat>) -> Option<(u16, String)> {
    let c = &shared.config;
    let path = route(&req.path);
    let method = req.method.as_str();
    let loading = shared.loading.load(Ordering::SeqCst);
    let ok = |v: Value| Some((200, v.to_string()));
    let model_entry = |owned_by: &str| json!({"id": c.model, "object": "model", "created": unix_now(), "owned_by": owned_by});
    match (c.kind, method, path) {
        (_, "POST", "/v1/chat/completions" | "/chat/completions") => {
            if loading {
                return Some((
                    503,
                    error_body(c.kind, 503, "Loading model", "unavailable_error").to_string(),
                ));
            }
            let Some(chat) = chat else {
                let why = match serde_json::from_slice::<Value>(&req.body) {
                    Ok(_) => "the request body is not a JSON object".to_string(),
                    Err(e) => format!("the request body is not JSON: {e}"),
                };
                return Some((
                    400,
                    error_body(c.kind, 400, &why, "invalid_request_error").to_string(),
                ));
            };
            if !chat.body.get("messages").is_some_and(Value::is_array) {
                let why = "'messages' is required and must be an array";
                return Some((
                    400,
                    error_body(c.kind, 400, why, "invalid_request_error").to_string(),
                ));
            }
            if overflows(c, &chat) {
                return Some((400, overflow_body(c, &chat).to_string()));
            }
            // A one-token request is a prefix warm-up (`run` sends one at start): a real host evaluates
            // the prompt, caches it and answers one token; the script is asked only for decisions.
            if chat.max_tokens() == Some(1) {
                return resolve(shared, &chat, Reply::Truncated("{".into()));
            }
            let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (shared.policy)(&chat)))
                .unwrap_or_else(|_| Reply::status(500, "the scripted policy panicked"));
            resolve(shared, &chat, reply)
        }
        (ImitatedHost::LlamaCpp, "GET", "/health") => {
            if loading {
                Some((
                    503,
                    error_body(c.kind, 503, "Loading model", "unavailable_error").to_string(),
                ))
            } else {
                ok(json!({"status": "ok"}))
            }
        }
        (ImitatedHost::LlamaCpp, "GET", "/props") => ok(json!({
            "default_generation_settings": {"n_ctx": c.n_ctx, "params": {"n_predict": -1}},
            "total_slots": 1,
            "model_path": format!("/models/{}.gguf", c.model),
            "modalities": {"vision": c.vision, "audio": false},
            "chat_template": "",
            "build_info": "scripted",
        })),
        (ImitatedHost::LlamaCpp, "GET", "/v1/models" | "/models") => {
            let mut m = model_entry("llamacpp");
            m["meta"] = json!({"n_ctx_train": c.n_ctx});
            ok(json!({"object": "list", "data": [m]}))
        }
        (ImitatedHost::Vllm, "GET", "/health") => Some((200, String::new())),
        (ImitatedHost::Vllm, "GET", "/version") => ok(json!({"version": "scripted"})),
        (ImitatedHost::Vllm, "GET", "/v1/models") => {
            let mut m = model_entry("vllm");
            m["root"] = json!(c.model);
            m["max_model_len"] = json!(c.n_ctx);
            ok(json!({"object": "list", "data": [m]}))
        }
        (ImitatedHost::Ollama, "GET", "/") => Some((200, "Ollama is running".into())),
        (ImitatedHost::Ollama, "GET", "/api/version") => ok(json!({"version": "0.0.0-scripted"})),
        (ImitatedHost::Ollama, "GET", "/api/tags") => {
            ok(json!({"models": [{"name": c.model, "model": c.model}]}))
        }
        (ImitatedHost::Ollama, "POST", "/api/show") => {
            let mut caps = vec!["completion"];
            if c.vision {
                caps.push("vision");
            }
            ok(json!({
                "capabilities": caps,
                "details": {"format": "gguf", "family": "scripted"},
                "model_info": {"general.architecture": "scripted", "scripted.context_length": c.n_ctx},
            }))
        }
        (ImitatedHost::Ollama, "GET", "/v1/models") => {
            ok(json!({"object": "list", "data": [model_entry("library")]}))
        }
        (ImitatedHost::LmStudio, "GET", "/v1/models") => {
            ok(json!({"object": "list", "data": [model_entry("organization_owner")]}))
        }
        (ImitatedHost::LmStudio, "GET", "/api/v0/models") => ok(json!({"object": "list", "data": [{
            "id": c.model,
            "object": "model",
            "type": if c.vision { "vlm" } else { "llm" },
            "state": "loaded",
            "max_context_length": c.n_ctx,
        }]})),
        (kind, _, _) => Some(not_found(kind, method, &req.path)),
    }
}

/// Turns the policy's reply into an HTTP answer (sleeping out delays).
fn resolve(shared: &Shared, chat: &ReceivedChat, reply: Reply) -> Option<(u16, String)> {
    match reply {
        Reply::Content(text) => Some((200, completion(shared, chat, &text, "stop").to_string())),
        Reply::Truncated(text) => Some((200, completion(shared, chat, &text, "length").to_string())),
        Reply::Status(code, body) => Some((code, body)),
        Reply::Disconnect => None,
        Reply::Delay(pause, then) => {
            let until = Instant::now() + pause;
            loop {
                if shared.stop.load(Ordering::SeqCst) {
                    return None;
                }
                let now = Instant::now();
                if now >= until {
                    break;
                }
                std::thread::sleep(POLL.min(until - now));
            }
            resolve(shared, chat, *then)
        }
    }
}

fn completion(shared: &Shared, chat: &ReceivedChat, content: &str, finish: &str) -> Value {
    let c = &shared.config;
    let (mut prompt, mut cached) = (chat.prompt_tokens, chat.cached_tokens);
    if c.kind == ImitatedHost::Ollama {
        // Ollama keeps the tail of an over-long prompt and says nothing.
        prompt = prompt.min(c.n_ctx);
        cached = cached.min(prompt);
    }
    let completion_tokens = (content.len() as u64).div_ceil(4);
    let mut v = json!({
        "id": format!("chatcmpl-scripted-{}", chat.index),
        "object": "chat.completion",
        "created": unix_now(),
        "model": chat.model().unwrap_or(&c.model),
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": finish,
        }],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
        },
    });
    match c.kind {
        ImitatedHost::LlamaCpp => {
            let prompt_n = prompt - cached;
            let prompt_ms = prompt_n as f64 * c.prompt_ms_per_token;
            let predicted_ms = completion_tokens as f64 * c.predicted_ms_per_token;
            v["usage"]["prompt_tokens_details"] = json!({"cached_tokens": cached});
            v["timings"] = json!({
                "cache_n": cached,
                "prompt_n": prompt_n,
                "prompt_ms": prompt_ms,
                "prompt_per_token_ms": c.prompt_ms_per_token,
                "prompt_per_second": if c.prompt_ms_per_token > 0.0 { 1000.0 / c.prompt_ms_per_token } else { 0.0 },
                "predicted_n": completion_tokens,
                "predicted_ms": predicted_ms,
                "predicted_per_token_ms": c.predicted_ms_per_token,
                "predicted_per_second": if c.predicted_ms_per_token > 0.0 { 1000.0 / c.predicted_ms_per_token } else { 0.0 },
            });
        }
        ImitatedHost::Vllm => v["usage"]["prompt_tokens_details"] = json!({"cached_tokens": cached}),
        ImitatedHost::Ollama | ImitatedHost::LmStudio => {}
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One raw HTTP exchange on a fresh connection: `(status, body)`.
    fn raw(addr: SocketAddr, request: &[u8]) -> (u16, String) {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(request).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        parse_response(&String::from_utf8_lossy(&out))
    }

    fn parse_response(text: &str) -> (u16, String) {
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text, ""));
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        (status, body.to_string())
    }

    fn get(host: &ScriptedHost, path: &str) -> (u16, String) {
        raw(
            host.addr(),
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
    }

    fn get_json(host: &ScriptedHost, path: &str) -> (u16, Value) {
        let (status, body) = get(host, path);
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    }

    fn post(host: &ScriptedHost, path: &str, body: &Value) -> (u16, Value) {
        let body = body.to_string();
        let (status, text) = raw(
            host.addr(),
            format!(
                "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        );
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    fn chat_body(system: &str, user: &str) -> Value {
        json!({"model": "m", "max_tokens": 16, "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ]})
    }

    fn chat(host: &ScriptedHost, system: &str, user: &str) -> (u16, Value) {
        post(host, "/v1/chat/completions", &chat_body(system, user))
    }

    #[test]
    fn llama_cpp_metadata_endpoints() {
        let host = ScriptedHost::start(HostConfig::new().model("tiny").vision(true).n_ctx(4096), |_| {
            Reply::content("x")
        })
        .unwrap();
        assert_eq!(get_json(&host, "/health"), (200, json!({"status": "ok"})));
        let (status, models) = get_json(&host, "/v1/models");
        assert_eq!(status, 200);
        assert_eq!(models["data"][0]["id"], "tiny");
        assert_eq!(models["object"], "list");
        let (status, props) = get_json(&host, "/props");
        assert_eq!(status, 200);
        assert_eq!(props["modalities"]["vision"], true);
        assert_eq!(props["default_generation_settings"]["n_ctx"], 4096);
        let (status, nf) = get_json(&host, "/nope?x=1");
        assert_eq!(
            (status, nf["error"]["type"].as_str()),
            (404, Some("not_found_error"))
        );
        host.set_loading(true);
        let (status, body) = get_json(&host, "/health");
        assert_eq!(
            (status, body["error"]["message"].as_str()),
            (503, Some("Loading model"))
        );
        host.set_loading(false);
        assert_eq!(get(&host, "/health").0, 200);
        let reqs = host.requests();
        assert_eq!(reqs.len(), 6);
        assert_eq!(reqs[3].path, "/nope?x=1");
        assert_eq!(reqs[3].status, Some(404));
        assert_eq!(reqs[0].header("HOST"), Some("x"));
        assert!(host.chat_requests().is_empty());
    }

    #[test]
    fn completion_shape_and_prefix_cache_accounting() {
        let host = ScriptedHost::start(HostConfig::new().model("m"), |r| {
            Reply::content(format!("reply {}", r.index))
        })
        .unwrap();
        let system = "s".repeat(400);
        let (status, a) = chat(&host, &system, "first question");
        assert_eq!(status, 200, "{a}");
        assert_eq!(a["choices"][0]["message"]["content"], "reply 0");
        assert_eq!(a["choices"][0]["message"]["role"], "assistant");
        assert_eq!(a["choices"][0]["finish_reason"], "stop");
        assert_eq!(a["object"], "chat.completion");
        // (400 + 14) / 4
        assert_eq!(a["usage"]["prompt_tokens"], 103);
        assert_eq!(a["usage"]["completion_tokens"], 2);
        assert_eq!(a["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
        assert_eq!(a["timings"]["cache_n"], 0);
        assert_eq!(a["timings"]["prompt_n"], 103);
        assert_eq!(a["timings"]["predicted_n"], 2);
        assert!(a["timings"]["prompt_ms"].as_f64().unwrap() > 0.0);
        assert!(a["timings"]["predicted_ms"].as_f64().unwrap() > 0.0);

        // same system prompt, user text shares "first " → (400 + 6) / 4 cached
        let (_, b) = chat(&host, &system, "first answer, longer");
        assert_eq!(b["usage"]["prompt_tokens_details"]["cached_tokens"], 101);
        assert_eq!(b["timings"]["cache_n"], 101);
        assert_eq!(b["usage"]["prompt_tokens"], 105);
        assert_eq!(b["timings"]["prompt_n"], 4);
        // a changed system prompt breaks the cache at its first byte
        let (_, c) = chat(&host, "t", "first answer, longer");
        assert_eq!(c["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
        let (_, d) = chat(&host, "t", "first answer, longer");
        assert_eq!(d["usage"]["prompt_tokens_details"]["cached_tokens"], 5);
        host.clear_cache();
        let (_, e) = chat(&host, "t", "first answer, longer");
        assert_eq!(e["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

        let chats = host.chat_requests();
        assert_eq!(chats.len(), 5);
        assert_eq!(chats.iter().map(|c| c.index).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
        assert_eq!(chats[1].cached_tokens, 101);
        assert_eq!(chats[0].user_text(), "first question");
        let reqs = host.requests();
        assert!(reqs.windows(2).all(|w| w[0].at <= w[1].at));
        assert_eq!(reqs[0].method, "POST");
        assert_eq!(reqs[0].body.as_ref().unwrap()["max_tokens"], 16);
        assert!(reqs.iter().all(|r| r.status == Some(200)));
    }

    #[test]
    fn sequence_replies_in_order_then_repeats_the_last() {
        let host = ScriptedHost::sequence(vec![
            Reply::content("one"),
            Reply::status(
                500,
                "{\"error\":{\"code\":500,\"message\":\"boom\",\"type\":\"server_error\"}}",
            ),
            Reply::Truncated("{\"half".into()),
            Reply::content("last"),
        ])
        .unwrap();
        let replies: Vec<(u16, Value)> = (0..6).map(|_| chat(&host, "s", "u")).collect();
        assert_eq!(replies[0].1["choices"][0]["message"]["content"], "one");
        assert_eq!(
            (replies[1].0, replies[1].1["error"]["message"].as_str()),
            (500, Some("boom"))
        );
        assert_eq!(replies[2].1["choices"][0]["finish_reason"], "length");
        for r in &replies[3..] {
            assert_eq!(r.1["choices"][0]["message"]["content"], "last");
        }
        let empty = ScriptedHost::sequence(vec![]).unwrap();
        assert_eq!(chat(&empty, "s", "u").0, 500);
    }

    #[test]
    fn substring_policy_picks_by_prompt_text() {
        let host = ScriptedHost::start(
            HostConfig::new(),
            by_substring(
                [
                    ("deliberative planner", Reply::content("plan")),
                    ("PRACTICE ARENA", Reply::content("click play")),
                ],
                Reply::content("walk"),
            ),
        )
        .unwrap();
        let content = |v: (u16, Value)| {
            v.1["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(
            content(chat(&host, "You are a deliberative planner", "x")),
            "plan"
        );
        assert_eq!(
            content(chat(&host, "tactical", "menu: PRACTICE ARENA")),
            "click play"
        );
        assert_eq!(content(chat(&host, "tactical", "field")), "walk");
    }

    #[test]
    fn a_prompt_over_n_ctx_is_refused_with_400() {
        let host = ScriptedHost::start(
            HostConfig::new().n_ctx(100),
            sequence(vec![Reply::content("a"), Reply::content("b")]),
        )
        .unwrap();
        let (status, ok) = chat(&host, "s", &"u".repeat(395)); // 99 tokens: fits
        assert_eq!(status, 200, "{ok}");
        let (status, err) = chat(&host, "s", &"u".repeat(399)); // 100 tokens: llama.cpp refuses n >= n_ctx
        assert_eq!(status, 400);
        assert_eq!(
            err,
            json!({"error": {
                "code": 400,
                "message": "request (100 tokens) exceeds the available context size (100 tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 100,
                "n_ctx": 100,
            }})
        );
        // the refused prompt neither reached the policy nor replaced the cached prompt
        let (_, next) = chat(&host, "s", &"u".repeat(395));
        assert_eq!(next["choices"][0]["message"]["content"], "b");
        assert_eq!(next["usage"]["prompt_tokens_details"]["cached_tokens"], 99);
        let statuses: Vec<_> = host.requests().iter().map(|r| r.status).collect();
        assert_eq!(statuses, [Some(200), Some(400), Some(200)]);
        // the refused request is still recorded as a chat request
        assert_eq!(host.chat_requests()[1].prompt_tokens, 100);
        assert_eq!(
            serde_json::from_str::<Value>(match &Reply::context_exceeded(100, 100) {
                Reply::Status(400, b) => b,
                other => panic!("{other:?}"),
            })
            .unwrap(),
            err
        );
    }

    #[test]
    fn delay_holds_the_reply_while_the_request_is_recorded() {
        let host = ScriptedHost::sequence(vec![Reply::delay(
            Duration::from_millis(400),
            Reply::content("late"),
        )])
        .unwrap();
        let addr = host.addr();
        let started = Instant::now();
        let caller = std::thread::spawn(move || {
            let body = chat_body("s", "u").to_string();
            raw(
                addr,
                format!(
                    "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            )
        });
        let seen = host.wait_for_requests(1, Duration::from_secs(5)).unwrap();
        assert_eq!(seen[0].status, None, "recorded before it is answered");
        assert!(host.wait_for_chat_requests(1, Duration::from_secs(1)).is_ok());
        let (status, body) = caller.join().unwrap();
        assert!(started.elapsed() >= Duration::from_millis(400));
        assert_eq!(status, 200);
        assert!(body.contains("late"));
        assert_eq!(host.requests()[0].status, Some(200));
        let err = host.wait_for_requests(2, Duration::from_millis(50)).unwrap_err();
        assert!(matches!(err, TestBedError::Timeout { .. }), "{err}");
    }

    #[test]
    fn drop_stops_the_server_even_mid_delay() {
        let host = ScriptedHost::sequence(vec![Reply::delay(
            Duration::from_secs(60),
            Reply::content("never"),
        )])
        .unwrap();
        let addr = host.addr();
        // an idle keep-alive connection and a call held by a long delay
        let _idle = TcpStream::connect(addr).unwrap();
        let caller = std::thread::spawn(move || {
            let body = chat_body("s", "u").to_string();
            raw(
                addr,
                format!(
                    "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            )
        });
        host.wait_for_chat_requests(1, Duration::from_secs(5)).unwrap();
        let started = Instant::now();
        drop(host);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(caller.join().unwrap().0, 0, "closed without an answer");
        assert!(TcpStream::connect(addr).is_err(), "the port is closed after drop");
    }

    #[test]
    fn malformed_requests_get_400_and_the_server_keeps_serving() {
        let host = ScriptedHost::sequence(vec![Reply::content("fine")]).unwrap();
        let addr = host.addr();
        let bad_json = "{\"messages\": [";
        let (status, body) = raw(
            addr,
            format!(
                "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{bad_json}",
                bad_json.len()
            )
            .as_bytes(),
        );
        assert_eq!(status, 400);
        assert!(body.contains("not JSON"), "{body}");
        let (status, body) = raw(addr, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n{}");
        assert_eq!(status, 400);
        assert!(body.contains("missing Content-Length"), "{body}");
        let (status, _) = raw(addr, b"garbage\r\n\r\n");
        assert_eq!(status, 400);
        let (status, _) = raw(addr, b"GET /health HTTP/1.1\r\nno colon here\r\n\r\n");
        assert_eq!(status, 400);
        let (status, body) = post(&host, "/v1/chat/completions", &json!({"model": "m"}));
        assert_eq!(status, 400);
        assert!(body["error"]["message"].as_str().unwrap().contains("messages"));
        let (status, _) = post(&host, "/v1/chat/completions", &json!([1, 2]));
        assert_eq!(status, 400);
        // a client that connects and goes away
        drop(TcpStream::connect(addr).unwrap());
        assert_eq!(get(&host, "/health").0, 200);
        assert_eq!(
            chat(&host, "s", "u").1["choices"][0]["message"]["content"],
            "fine"
        );
        let reqs = host.requests();
        assert_eq!(
            reqs.iter().map(|r| r.status).collect::<Vec<_>>(),
            [
                Some(400),
                Some(400),
                Some(400),
                Some(400),
                Some(400),
                Some(400),
                Some(200),
                Some(200)
            ]
        );
        assert_eq!(reqs[0].raw_body, bad_json);
        assert_eq!(reqs[0].body, None);
        assert_eq!(reqs[1].path, "/v1/chat/completions");
        assert_eq!(reqs[2].method, "");
        assert_eq!(
            host.chat_requests().len(),
            2,
            "the object with no messages and the good one"
        );
    }

    #[test]
    fn keep_alive_serves_several_requests_on_one_connection() {
        let host = ScriptedHost::sequence(vec![Reply::content("k")]).unwrap();
        let mut s = TcpStream::connect(host.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let body = chat_body("s", "u").to_string();
        let two = format!(
            "GET /health HTTP/1.1\r\n\r\nPOST /v1/chat/completions HTTP/1.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(two.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert_eq!(out.matches("HTTP/1.1 200 OK").count(), 2, "{out}");
        assert!(out.contains("Connection: keep-alive"));
        assert!(out.ends_with("}"));
        assert_eq!(host.requests().len(), 2);
    }

    #[test]
    fn request_helpers_read_texts_images_and_schema() {
        let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG\r\n\x1a\nrest");
        let body = json!({
            "model": "m",
            "max_tokens": 64,
            "grammar": "root ::= \"x\"",
            "response_format": {"type": "json_schema", "json_schema": {"name": "reply", "strict": true, "schema": {"type": "object"}}},
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "old"},
                {"role": "assistant", "content": "bad"},
                {"role": "user", "content": [
                    {"type": "text", "text": "Goal: win"},
                    {"type": "text", "text": "marks"},
                    {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{png}")}},
                ]},
            ],
        });
        let req = ReceivedChat {
            body,
            index: 0,
            prompt_tokens: 0,
            cached_tokens: 0,
            at: Instant::now(),
        };
        assert_eq!(req.system_text(), "sys");
        assert_eq!(req.user_text(), "Goal: win\n\nmarks");
        assert_eq!(req.user_texts().len(), 2);
        assert!(req.prompt_text().contains("bad"));
        assert!(req.has_image());
        let images = req.images().unwrap();
        assert_eq!(images[0].mime, "image/png");
        assert!(images[0].bytes.starts_with(b"\x89PNG"));
        assert_eq!(req.schema(), Some(&json!({"type": "object"})));
        assert_eq!(req.grammar(), Some("root ::= \"x\""));
        assert_eq!((req.max_tokens(), req.model()), (Some(64), Some("m")));

        let mut broken = req.clone();
        broken.body["messages"][3]["content"][2]["image_url"]["url"] = json!("data:image/png;base64,!!!");
        assert!(broken.images().unwrap_err().to_string().contains("bad base64"));
        broken.body["messages"][3]["content"][2]["image_url"]["url"] = json!("http://example/x.png");
        assert!(broken
            .images()
            .unwrap_err()
            .to_string()
            .contains("not a data: URL"));
        let text_only = ReceivedChat {
            body: chat_body("s", "u"),
            ..req
        };
        assert!(!text_only.has_image());
        assert_eq!(text_only.schema(), None);
    }

    #[test]
    fn images_count_toward_prompt_tokens_and_break_the_cache_when_changed() {
        let host =
            ScriptedHost::start(HostConfig::new().image_tokens(100), |_| Reply::content("ok")).unwrap();
        let with_image = |url: &str| {
            json!({"model": "m", "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "abcd"},
                    {"type": "image_url", "image_url": {"url": url}},
                    {"type": "text", "text": "efgh"},
                ]},
            ]})
        };
        let (_, a) = post(
            &host,
            "/v1/chat/completions",
            &with_image("data:image/png;base64,AAAA"),
        );
        assert_eq!(a["usage"]["prompt_tokens"], 102);
        let (_, b) = post(
            &host,
            "/v1/chat/completions",
            &with_image("data:image/png;base64,AAAA"),
        );
        assert_eq!(b["usage"]["prompt_tokens_details"]["cached_tokens"], 102);
        let (_, c) = post(
            &host,
            "/v1/chat/completions",
            &with_image("data:image/png;base64,BBBB"),
        );
        assert_eq!(c["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
    }

    #[test]
    fn a_panicking_policy_answers_500_and_disconnect_closes() {
        let host = ScriptedHost::start(HostConfig::new(), |r| match r.user_text().as_str() {
            "panic" => panic!("scripted panic"),
            "drop" => Reply::Disconnect,
            _ => Reply::content("ok"),
        })
        .unwrap();
        assert_eq!(chat(&host, "s", "panic").0, 500);
        assert_eq!(chat(&host, "s", "drop").0, 0);
        assert_eq!(chat(&host, "s", "fine").0, 200);
        let statuses: Vec<_> = host.requests().iter().map(|r| r.status).collect();
        assert_eq!(statuses, [Some(500), None, Some(200)]);
    }

    #[test]
    fn a_given_port_is_used() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let host = ScriptedHost::start(HostConfig::new().port(port), |_| Reply::content("x")).unwrap();
        assert_eq!(host.port(), port);
        assert_eq!(host.base_url(), format!("http://127.0.0.1:{port}"));
        assert_eq!(get(&host, "/health").0, 200);
        assert!(ScriptedHost::start(HostConfig::new().port(port), |_| Reply::content("x")).is_err());
    }

    #[test]
    fn other_host_kinds_expose_their_own_metadata() {
        let ollama = ScriptedHost::start(
            HostConfig::new()
                .kind(ImitatedHost::Ollama)
                .vision(true)
                .n_ctx(50),
            |_| Reply::content("o"),
        )
        .unwrap();
        assert_eq!(get(&ollama, "/health").0, 404);
        assert_eq!(get(&ollama, "/props").0, 404);
        assert_eq!(get(&ollama, "/"), (200, "Ollama is running".into()));
        let (status, show) = post(&ollama, "/api/show", &json!({"model": "scripted-model"}));
        assert_eq!(
            (status, &show["capabilities"]),
            (200, &json!(["completion", "vision"]))
        );
        assert_eq!(
            get_json(&ollama, "/v1/models").1["data"][0]["id"],
            "scripted-model"
        );
        // Ollama truncates an over-long prompt silently
        let (status, r) = chat(&ollama, "s", &"u".repeat(400));
        assert_eq!((status, &r["usage"]["prompt_tokens"]), (200, &json!(50)));
        assert!(r.get("timings").is_none());

        let vllm = ScriptedHost::start(HostConfig::new().kind(ImitatedHost::Vllm).n_ctx(100), |_| {
            Reply::content("v")
        })
        .unwrap();
        assert_eq!(get(&vllm, "/health"), (200, String::new()));
        assert_eq!(get_json(&vllm, "/props").0, 404);
        assert_eq!(get_json(&vllm, "/v1/models").1["data"][0]["max_model_len"], 100);
        let (status, r) = chat(&vllm, "s", &"u".repeat(300)); // 75 + 16 max_tokens fits
        assert_eq!(status, 200);
        assert_eq!(r["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
        let (status, err) = chat(&vllm, "s", &"u".repeat(340)); // 85 + 16 > 100
        assert_eq!(status, 400);
        assert_eq!(err["type"], "BadRequestError");
        assert!(err["message"]
            .as_str()
            .unwrap()
            .contains("maximum context length is 100 tokens"));

        let lms = ScriptedHost::start(
            HostConfig::new().kind(ImitatedHost::LmStudio).vision(true),
            |_| Reply::content("l"),
        )
        .unwrap();
        assert_eq!(get(&lms, "/props").0, 404);
        let (_, models) = get_json(&lms, "/api/v0/models");
        assert_eq!(models["data"][0]["type"], "vlm");
        assert_eq!(models["data"][0]["max_context_length"], 8192);
        assert_eq!(chat(&lms, "s", "u").0, 200);
    }
}
