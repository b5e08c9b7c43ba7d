//! User configuration of research: backends and every bound. Only the user writes this (INV-SAFE-001).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ResearchError;

/// A search endpoint the user configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SearchBackend {
    /// A SearxNG instance: `GET {base_url}/search?q=…&format=json` → `results[].url/title/content`.
    Searxng { base_url: String },
}

/// Bounds on one research request. Read from the user's configuration; no request, model reply or
/// page content has a way to change them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResearchLimits {
    /// Sources used by search-and-fetch (FR-SKILL-003: one or two).
    pub quick_max_sources: usize,
    /// Sources used by deep research (FR-SKILL-004: several).
    pub deep_max_sources: usize,
    /// Fetch attempts per request, counting failures (a page that is rejected still costs an attempt).
    pub max_fetch_attempts: usize,
    /// Tokens the result may add to the context (excerpts plus brief), estimated as chars / 4.
    pub max_tokens: usize,
    /// Wall-clock limit of one whole request, search, fetches and synthesis included.
    #[serde(with = "millis")]
    pub wall_clock: Duration,
    /// TCP connect timeout of one HTTP request.
    #[serde(with = "millis")]
    pub connect_timeout: Duration,
    /// Read timeout (no byte for this long) of one HTTP request.
    #[serde(with = "millis")]
    pub read_timeout: Duration,
    /// Overall timeout of one HTTP request, body included (further capped by what is left of
    /// `wall_clock`).
    #[serde(with = "millis")]
    pub request_timeout: Duration,
    /// Bytes read from one page before reading stops and the page counts as truncated.
    pub max_page_bytes: usize,
    /// Bytes read from the search endpoint's reply.
    pub max_search_bytes: usize,
    /// Redirects followed per fetch.
    pub max_redirects: u32,
    /// Longest query sent, in characters (cut at a word boundary).
    pub max_query_chars: usize,
    /// Requests that may wait in the runner's queue; more are refused with `Busy`.
    pub queue_capacity: usize,
}

impl Default for ResearchLimits {
    fn default() -> Self {
        ResearchLimits {
            quick_max_sources: 2,
            deep_max_sources: 5,
            max_fetch_attempts: 8,
            max_tokens: 3000,
            wall_clock: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(15),
            max_page_bytes: 2 * 1024 * 1024,
            max_search_bytes: 1024 * 1024,
            max_redirects: 5,
            max_query_chars: 256,
            queue_capacity: 2,
        }
    }
}

/// The whole research configuration. `search: None` means research is unavailable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResearchConfig {
    /// Where to search; `None` ⇒ every request ends as `ResearchOutcome::Unavailable`.
    pub search: Option<SearchBackend>,
    /// The bounds.
    pub limits: ResearchLimits,
    /// Allow fetching pages on loopback, private and link-local addresses. Off by default so a search
    /// result cannot point the agent at the user's own network; the search endpoint itself (which the
    /// user chose) is exempt.
    pub allow_private_addresses: bool,
    /// The User-Agent header sent.
    pub user_agent: String,
}

impl Default for ResearchConfig {
    fn default() -> Self {
        ResearchConfig {
            search: None,
            limits: ResearchLimits::default(),
            allow_private_addresses: false,
            user_agent: concat!("gamepilot-research/", env!("CARGO_PKG_VERSION")).to_string(),
        }
    }
}

impl ResearchConfig {
    /// The configuration a user's command line gives (FR-SKILL-003/004): a SearxNG endpoint (`None`:
    /// research unavailable), the most sources one research reads (search-and-fetch reads at most two of
    /// them, deep research all), its token budget and its wall-clock limit, and whether pages on private
    /// addresses may be read. Checked by [`ResearchConfig::validate`].
    pub fn from_user(
        endpoint: Option<String>,
        max_sources: usize,
        max_tokens: usize,
        wall_clock: Duration,
        allow_private_addresses: bool,
    ) -> Result<ResearchConfig, ResearchError> {
        let defaults = ResearchLimits::default();
        let config = ResearchConfig {
            search: endpoint.map(|base_url| SearchBackend::Searxng { base_url }),
            limits: ResearchLimits {
                quick_max_sources: max_sources.min(defaults.quick_max_sources),
                deep_max_sources: max_sources,
                max_fetch_attempts: defaults.max_fetch_attempts.max(max_sources * 2),
                max_tokens,
                wall_clock,
                ..defaults
            },
            allow_private_addresses,
            ..ResearchConfig::default()
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks that every bound is usable (non-zero where zero would make research pointless).
    pub fn validate(&self) -> Result<(), ResearchError> {
        let l = &self.limits;
        let bad = |reason: &str| {
            Err(ResearchError::InvalidConfig {
                reason: reason.to_string(),
            })
        };
        if l.quick_max_sources == 0 || l.deep_max_sources == 0 {
            return bad("max sources must be at least 1");
        }
        if l.max_fetch_attempts == 0 {
            return bad("max_fetch_attempts must be at least 1");
        }
        if l.max_tokens < 16 {
            return bad("max_tokens must be at least 16");
        }
        if l.wall_clock.is_zero()
            || l.connect_timeout.is_zero()
            || l.read_timeout.is_zero()
            || l.request_timeout.is_zero()
        {
            return bad("timeouts and the wall-clock limit must be positive");
        }
        if l.max_page_bytes == 0 || l.max_search_bytes == 0 {
            return bad("byte limits must be positive");
        }
        if l.max_query_chars < 8 {
            return bad("max_query_chars must be at least 8");
        }
        if l.queue_capacity == 0 {
            return bad("queue_capacity must be at least 1");
        }
        if let Some(SearchBackend::Searxng { base_url }) = &self.search {
            match url::Url::parse(base_url) {
                Ok(u) if u.scheme() == "http" || u.scheme() == "https" => {}
                Ok(_) => return bad("search base_url must be http or https"),
                Err(e) => {
                    return Err(ResearchError::InvalidConfig {
                        reason: format!("search base_url: {e}"),
                    })
                }
            }
        }
        Ok(())
    }
}

/// Durations as integer milliseconds in the configuration file.
mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_users_bounds_set_both_skills_and_bad_ones_are_named() {
        // FR-SKILL-003 (one or two sources), FR-SKILL-004 (several), bounds from user configuration only
        let c =
            ResearchConfig::from_user(Some("http://s".into()), 4, 900, Duration::from_secs(9), true).unwrap();
        assert_eq!(c.limits.quick_max_sources, 2);
        assert_eq!(c.limits.deep_max_sources, 4);
        assert_eq!(c.limits.max_fetch_attempts, 8);
        assert_eq!(c.limits.max_tokens, 900);
        assert_eq!(c.limits.wall_clock, Duration::from_secs(9));
        assert!(c.allow_private_addresses);
        let one = ResearchConfig::from_user(None, 1, 900, Duration::from_secs(9), false).unwrap();
        assert_eq!(
            (one.limits.quick_max_sources, one.limits.deep_max_sources),
            (1, 1)
        );
        assert!(one.search.is_none());
        let e = ResearchConfig::from_user(None, 0, 900, Duration::from_secs(9), false).unwrap_err();
        assert!(e.to_string().contains("max sources"), "{e}");
        assert!(ResearchConfig::from_user(None, 2, 900, Duration::ZERO, false).is_err());
        assert!(ResearchConfig::from_user(None, 2, 3, Duration::from_secs(1), false).is_err());
    }

    #[test]
    fn default_is_valid_and_unavailable() {
        // FR-LOOP-006: no backend configured by default means "research unavailable".
        let c = ResearchConfig::default();
        assert!(c.validate().is_ok());
        assert!(c.search.is_none());
        assert!(!c.allow_private_addresses);
    }

    #[test]
    fn rejects_unusable_bounds() {
        let mut c = ResearchConfig::default();
        c.limits.wall_clock = Duration::ZERO;
        assert!(matches!(c.validate(), Err(ResearchError::InvalidConfig { .. })));
        let c = ResearchConfig {
            search: Some(SearchBackend::Searxng {
                base_url: "ftp://x".into(),
            }),
            ..ResearchConfig::default()
        };
        assert!(matches!(c.validate(), Err(ResearchError::InvalidConfig { .. })));
    }

    #[test]
    fn round_trips_through_json() {
        let c = ResearchConfig {
            search: Some(SearchBackend::Searxng {
                base_url: "http://127.0.0.1:8888".into(),
            }),
            ..ResearchConfig::default()
        };
        let s = serde_json::to_string(&c).unwrap();
        let back: ResearchConfig = serde_json::from_str(&s).unwrap();
        assert_eq!(back, c);
    }
}
