//! The network edge: a SearxNG JSON search client and a bounded page fetcher (ureq): size limit,
//! content-type check, bounded redirects, connect/read/overall timeouts, and a resolver that keeps
//! fetched pages off loopback and private networks unless the user allows it.

use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::config::{ResearchConfig, ResearchLimits};
use crate::error::ResearchError;
use crate::extract::{extract_readable_text, plain_text_paragraphs, ExtractedPage};
use crate::query::Query;
use crate::time::now_rfc3339;

/// One search result (all of it untrusted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchHit {
    /// The result's URL (http or https).
    pub url: String,
    /// Its title.
    #[serde(default)]
    pub title: String,
    /// The engine's snippet.
    #[serde(default)]
    pub content: String,
}

#[derive(Deserialize)]
struct SearxngReply {
    results: Vec<SearxngResult>,
}

#[derive(Deserialize)]
struct SearxngResult {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    content: Option<String>,
}

/// A page that was fetched and reduced to readable text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPage {
    /// The URL asked for.
    pub requested_url: String,
    /// The URL the content came from, after redirects.
    pub final_url: String,
    /// HTTP status.
    pub status: u16,
    /// The media type (without parameters).
    pub content_type: String,
    /// Body bytes read (at most the page limit).
    pub bytes_read: usize,
    /// Reading stopped at the page limit.
    pub truncated: bool,
    /// The readable text.
    pub page: ExtractedPage,
    /// When it arrived, RFC 3339 UTC.
    pub retrieved_at: String,
}

/// Media types read as pages.
const HTML_TYPES: &[&str] = &["text/html", "application/xhtml+xml"];
const TEXT_TYPES: &[&str] = &["text/plain", "text/markdown"];

/// Fetches pages within the configured bounds.
#[derive(Debug, Clone)]
pub struct Fetcher {
    agent: ureq::Agent,
    limits: ResearchLimits,
}

impl Fetcher {
    /// A fetcher for `config` (its limits and its private-address policy).
    pub fn new(config: &ResearchConfig) -> Self {
        Fetcher {
            agent: agent(config, !config.allow_private_addresses),
            limits: config.limits.clone(),
        }
    }

    /// Fetches `url` and extracts readable text, stopping at the page byte limit, the read
    /// (inactivity) timeout, the request timeout, or `deadline`, whichever comes first.
    pub fn fetch(&self, url: &str, deadline: Instant) -> Result<FetchedPage, ResearchError> {
        let parsed = check_url(url)?;
        let url = parsed.as_str().to_string();
        let raw = bounded_get(
            &self.agent,
            &url,
            Vec::new(),
            time_left(deadline, self.limits.request_timeout)?,
            self.limits.max_page_bytes,
            |ct| HTML_TYPES.contains(&ct) || TEXT_TYPES.contains(&ct),
            self.limits.max_redirects,
        )?;
        if raw.body.iter().take(8192).any(|b| *b == 0) {
            return Err(ResearchError::BinaryContent { url: raw.final_url });
        }
        let retrieved_at = now_rfc3339();
        let text = String::from_utf8_lossy(&raw.body);
        let text = text.trim_end_matches('\u{FFFD}');
        let page = if HTML_TYPES.contains(&raw.content_type.as_str()) {
            extract_readable_text(text)
        } else {
            plain_text_paragraphs(text)
        };
        Ok(FetchedPage {
            requested_url: url,
            final_url: raw.final_url,
            status: raw.status,
            content_type: raw.content_type,
            bytes_read: raw.body.len(),
            truncated: raw.truncated,
            page,
            retrieved_at,
        })
    }
}

/// A SearxNG JSON API client for the user's endpoint.
#[derive(Debug, Clone)]
pub struct SearxngClient {
    agent: ureq::Agent,
    endpoint: String,
    limits: ResearchLimits,
}

impl SearxngClient {
    /// A client for `{base_url}/search`. The endpoint is the user's choice, so it may be local.
    pub fn new(base_url: &str, config: &ResearchConfig) -> Result<Self, ResearchError> {
        let endpoint = format!("{}/search", base_url.trim_end_matches('/'));
        check_url(&endpoint).map_err(|e| ResearchError::InvalidConfig {
            reason: format!("search endpoint: {e}"),
        })?;
        Ok(SearxngClient {
            agent: agent(config, false),
            endpoint,
            limits: config.limits.clone(),
        })
    }

    /// The search URL without parameters (for the log).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// `GET {base}/search?q=…&format=json`; returns the http(s) results, duplicates removed.
    pub fn search(&self, query: &Query, deadline: Instant) -> Result<Vec<SearchHit>, ResearchError> {
        let raw = bounded_get(
            &self.agent,
            &self.endpoint,
            vec![
                ("q".to_string(), query.as_str().to_string()),
                ("format".to_string(), "json".to_string()),
            ],
            time_left(deadline, self.limits.request_timeout)?,
            self.limits.max_search_bytes,
            |ct| ct.contains("json"),
            self.limits.max_redirects,
        )?;
        if raw.truncated {
            return Err(ResearchError::MalformedSearchResponse {
                url: self.endpoint.clone(),
                message: format!("reply larger than {} bytes", self.limits.max_search_bytes),
            });
        }
        let reply: SearxngReply =
            serde_json::from_slice(&raw.body).map_err(|e| ResearchError::MalformedSearchResponse {
                url: self.endpoint.clone(),
                message: e.to_string(),
            })?;
        let mut hits: Vec<SearchHit> = Vec::new();
        for r in reply.results {
            let Some(url) = r.url else { continue };
            let Ok(u) = check_url(&url) else { continue };
            let url = u.to_string();
            if hits.iter().any(|h| h.url == url) {
                continue;
            }
            hits.push(SearchHit {
                url,
                title: r.title.unwrap_or_default(),
                content: r.content.unwrap_or_default(),
            });
        }
        Ok(hits)
    }
}

/// A response read within bounds.
struct RawResponse {
    final_url: String,
    status: u16,
    content_type: String,
    body: Vec<u8>,
    truncated: bool,
}

/// GET with hard bounds. ureq's own overall timeout would replace its read (inactivity) timeout, so
/// the agent keeps connect and read timeouts and the whole request runs on a short-lived thread that
/// the caller waits for no longer than `limit`; the thread notices the cancellation at its next read
/// (each read is bounded by the read timeout) and ends. The content type is checked (by `accept`)
/// before any of the body is read; the body is read up to `max_bytes`.
fn bounded_get(
    agent: &ureq::Agent,
    url: &str,
    params: Vec<(String, String)>,
    limit: Duration,
    max_bytes: usize,
    accept: fn(&str) -> bool,
    redirect_limit: u32,
) -> Result<RawResponse, ResearchError> {
    let hard_deadline = Instant::now() + limit;
    let cancel = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let (agent, url_owned, flag) = (agent.clone(), url.to_string(), Arc::clone(&cancel));
    std::thread::Builder::new()
        .name("research-http".into())
        .spawn(move || {
            let r = get_blocking(
                &agent,
                &url_owned,
                &params,
                hard_deadline,
                &flag,
                max_bytes,
                accept,
                redirect_limit,
            );
            let _ = tx.send(r);
        })
        .map_err(|e| ResearchError::Transport {
            url: url.to_string(),
            message: format!("could not start the HTTP thread: {e}"),
        })?;
    match rx.recv_timeout(limit) {
        Ok(r) => r,
        Err(_) => {
            cancel.store(true, Ordering::SeqCst);
            Err(ResearchError::Timeout { url: url.to_string() })
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn get_blocking(
    agent: &ureq::Agent,
    url: &str,
    params: &[(String, String)],
    hard_deadline: Instant,
    cancel: &AtomicBool,
    max_bytes: usize,
    accept: fn(&str) -> bool,
    redirect_limit: u32,
) -> Result<RawResponse, ResearchError> {
    let mut req = agent.get(url);
    for (k, v) in params {
        req = req.query(k, v);
    }
    let resp = req.call().map_err(|e| map_ureq(e, url, redirect_limit))?;
    let status = resp.status();
    let final_url = resp.get_url().to_string();
    let content_type = media_type(resp.header("content-type"));
    if !accept(&content_type) {
        return Err(ResearchError::UnsupportedContentType {
            url: final_url,
            content_type: if content_type.is_empty() {
                "(none)".into()
            } else {
                content_type
            },
        });
    }
    let mut reader = resp.into_reader();
    let mut body = Vec::with_capacity(max_bytes.min(64 * 1024));
    let mut chunk = vec![0u8; 16 * 1024];
    let mut truncated = false;
    loop {
        if cancel.load(Ordering::SeqCst) || Instant::now() >= hard_deadline {
            return Err(ResearchError::Timeout { url: final_url });
        }
        let n = match reader.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(map_io(&e, &final_url)),
        };
        if n == 0 {
            break;
        }
        let room = max_bytes - body.len();
        if n > room {
            body.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        body.extend_from_slice(&chunk[..n]);
        if body.len() == max_bytes {
            // Full: one more byte would mean truncation.
            let mut probe = [0u8; 1];
            truncated = matches!(reader.read(&mut probe), Ok(1));
            break;
        }
    }
    Ok(RawResponse {
        final_url,
        status,
        content_type,
        body,
        truncated,
    })
}

fn agent(config: &ResearchConfig, block_private: bool) -> ureq::Agent {
    let l = &config.limits;
    ureq::AgentBuilder::new()
        .timeout_connect(l.connect_timeout)
        .timeout_read(l.read_timeout)
        .timeout_write(l.read_timeout)
        .redirects(l.max_redirects)
        .user_agent(&config.user_agent)
        .resolver(GuardedResolver { block_private })
        .build()
}

/// Parses `url` and accepts only http and https; the fragment is dropped.
fn check_url(url: &str) -> Result<url::Url, ResearchError> {
    let mut u = url::Url::parse(url).map_err(|e| ResearchError::InvalidUrl {
        url: url.to_string(),
        reason: e.to_string(),
    })?;
    if u.scheme() != "http" && u.scheme() != "https" {
        return Err(ResearchError::InvalidUrl {
            url: url.to_string(),
            reason: format!("scheme {:?} is not http or https", u.scheme()),
        });
    }
    if u.host_str().is_none() {
        return Err(ResearchError::InvalidUrl {
            url: url.to_string(),
            reason: "no host".into(),
        });
    }
    u.set_fragment(None);
    Ok(u)
}

/// The smaller of `cap` and the time left before `deadline`; none left is `DeadlineExceeded`.
fn time_left(deadline: Instant, cap: Duration) -> Result<Duration, ResearchError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left < Duration::from_millis(1) {
        return Err(ResearchError::DeadlineExceeded);
    }
    Ok(left.min(cap))
}

/// `text/html; charset=utf-8` → `text/html`; missing → empty.
fn media_type(header: Option<&str>) -> String {
    header
        .and_then(|h| h.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

fn map_io(e: &io::Error, url: &str) -> ResearchError {
    match e.kind() {
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
            ResearchError::Timeout { url: url.to_string() }
        }
        _ => ResearchError::Transport {
            url: url.to_string(),
            message: e.to_string(),
        },
    }
}

fn map_ureq(e: ureq::Error, url: &str, redirect_limit: u32) -> ResearchError {
    match e {
        ureq::Error::Status(status, resp) => ResearchError::HttpStatus {
            url: resp.get_url().to_string(),
            status,
        },
        ureq::Error::Transport(t) => {
            if t.kind() == ureq::ErrorKind::TooManyRedirects {
                return ResearchError::TooManyRedirects {
                    url: url.to_string(),
                    limit: redirect_limit,
                };
            }
            let io_err = std::error::Error::source(&t).and_then(|s| s.downcast_ref::<io::Error>());
            if let Some(io_err) = io_err {
                if let Some(b) = io_err.get_ref().and_then(|r| r.downcast_ref::<Blocked>()) {
                    return ResearchError::BlockedAddress { host: b.0.clone() };
                }
                if matches!(io_err.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock) {
                    return ResearchError::Timeout { url: url.to_string() };
                }
            }
            ResearchError::Transport {
                url: url.to_string(),
                message: t.to_string(),
            }
        }
    }
}

/// The resolver's refusal, carried inside the io::Error so it maps to `BlockedAddress`.
#[derive(Debug)]
struct Blocked(String);

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} resolves to a non-public address", self.0)
    }
}

impl std::error::Error for Blocked {}

/// Resolves with the system resolver and, when blocking, refuses hosts with any non-public address
/// (checked at connect time, so redirects are covered too).
struct GuardedResolver {
    block_private: bool,
}

impl ureq::Resolver for GuardedResolver {
    fn resolve(&self, netloc: &str) -> io::Result<Vec<SocketAddr>> {
        let addrs: Vec<SocketAddr> = netloc.to_socket_addrs()?.collect();
        if self.block_private && addrs.iter().any(|a| !is_public(a.ip())) {
            let host = netloc
                .rsplit_once(':')
                .map(|(h, _)| h)
                .unwrap_or(netloc)
                .to_string();
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, Blocked(host)));
        }
        Ok(addrs)
    }
}

/// Globally routable unicast (not loopback, private, link-local, shared, documentation, multicast…).
fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_multicast()
                || o[0] == 0
                || (o[0] == 100 && (o[1] & 0xC0) == 64)
                || (o[0] == 198 && (o[1] & 0xFE) == 18)
                || o[0] >= 240)
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            // Addresses that carry an IPv4 address reach that address: judge them by it.
            if let Some(v4) = embedded_ipv4(&v6) {
                return is_public(IpAddr::V4(v4));
            }
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xFE00) == 0xFC00
                || (s[0] & 0xFFC0) == 0xFE80
                // site-local (deprecated, still routed privately by some networks)
                || (s[0] & 0xFFC0) == 0xFEC0
                || s[0] == 0x2001 && s[1] == 0x0DB8
                // Teredo tunnels to an address we cannot judge
                || s[0] == 0x2001 && s[1] == 0x0000
                // the local-use NAT64 prefix (RFC 8215), whatever it translates to
                || s[0] == 0x0064 && s[1] == 0xff9b && s[2] == 0x0001)
        }
    }
}

/// The IPv4 address an IPv6 address stands for, where it embeds one: IPv4-mapped `::ffff:a.b.c.d`,
/// IPv4-compatible `::a.b.c.d` (deprecated, but still parsed and routed by some stacks), IPv4-translated
/// `::ffff:0:a.b.c.d`, the NAT64 well-known prefix `64:ff9b::/96` and 6to4 `2002:AABB:CCDD::/16`.
/// `::` and `::1` are left to the IPv6 checks.
fn embedded_ipv4(v6: &std::net::Ipv6Addr) -> Option<std::net::Ipv4Addr> {
    use std::net::Ipv4Addr;
    let s = v6.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    if s[..6] == [0, 0, 0, 0, 0, 0] && !(s[6] == 0 && s[7] <= 1) {
        return Some(low);
    }
    if s[..6] == [0, 0, 0, 0, 0xffff, 0] {
        return Some(low);
    }
    if s[..6] == [0x0064, 0xff9b, 0, 0, 0, 0] {
        return Some(low);
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_address_classification() {
        // FR-SKILL-005: untrusted results cannot aim the fetcher at private networks.
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "172.16.5.5",
            "169.254.1.1",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "0.0.0.0",
        ] {
            assert!(!is_public(a.parse().unwrap()), "{a}");
        }
        for a in ["93.184.216.34", "1.1.1.1", "2606:4700::1111"] {
            assert!(is_public(a.parse().unwrap()), "{a}");
        }
    }

    #[test]
    fn ipv6_forms_that_embed_a_private_ipv4_are_blocked() {
        // FR-SKILL-005: NAT64, 6to4, IPv4-compatible, -mapped and -translated addresses are
        // judged by the IPv4 address they reach
        for a in [
            "64:ff9b::7f00:1",     // NAT64 → 127.0.0.1
            "64:ff9b::10.0.0.1",   // NAT64 → 10.0.0.1
            "64:ff9b::a9fe:a9fe",  // NAT64 → 169.254.169.254 (cloud metadata)
            "64:ff9b:1::1",        // local-use NAT64
            "2002:7f00:1::",       // 6to4 of 127.0.0.1
            "2002:c0a8:0101::1",   // 6to4 of 192.168.1.1
            "2002:0a00:0001:1::5", // 6to4 of 10.0.0.1
            "::127.0.0.1",         // IPv4-compatible
            "::10.1.2.3",
            "::ffff:10.1.2.3",      // mapped
            "::ffff:0:192.168.0.1", // translated
            "::ffff:169.254.169.254",
            "fec0::1",
            "2001:0:4136:e378::1", // Teredo
        ] {
            assert!(!is_public(a.parse().unwrap()), "{a}");
        }
        for a in [
            "64:ff9b::5db8:d822",
            "2002:5db8:d822::1",
            "::ffff:1.1.1.1",
            "::93.184.216.34",
        ] {
            assert!(is_public(a.parse().unwrap()), "{a}");
        }
    }

    #[test]
    fn urls_must_be_http() {
        // FR-SKILL-003: only http(s) URLs are fetched.
        assert!(check_url("https://example.org/a#frag").is_ok());
        assert_eq!(
            check_url("https://example.org/a#frag").unwrap().as_str(),
            "https://example.org/a"
        );
        assert!(matches!(
            check_url("file:///etc/passwd"),
            Err(ResearchError::InvalidUrl { .. })
        ));
        assert!(matches!(
            check_url("javascript:alert(1)"),
            Err(ResearchError::InvalidUrl { .. })
        ));
        assert!(matches!(
            check_url("not a url"),
            Err(ResearchError::InvalidUrl { .. })
        ));
    }

    #[test]
    fn media_types() {
        assert_eq!(media_type(Some("Text/HTML; charset=utf-8")), "text/html");
        assert_eq!(media_type(None), "");
    }

    #[test]
    fn deadline_in_the_past_is_named() {
        let past = Instant::now() - Duration::from_millis(5);
        assert_eq!(
            time_left(past, Duration::from_secs(1)),
            Err(ResearchError::DeadlineExceeded)
        );
    }
}
