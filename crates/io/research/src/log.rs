//! The research log: queries, sources, sizes and timings, as serialisable records for the session
//! recording. It lives in memory only; the caller writes it to the recording (INV-CTX-001).

use serde::Serialize;

/// One record. Queries appear here only after the screen-text guard passed them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ResearchLogEntry {
    /// A request began.
    Request {
        id: u64,
        kind: String,
        query: String,
        at: String,
    },
    /// A request ended before any network use because research is unavailable.
    Unavailable { id: u64, reason: String },
    /// One search call.
    Search {
        id: u64,
        endpoint: String,
        query: String,
        results: usize,
        elapsed_ms: u64,
        error: Option<String>,
    },
    /// One fetch attempt.
    Fetch {
        id: u64,
        url: String,
        final_url: Option<String>,
        content_type: Option<String>,
        bytes: usize,
        truncated: bool,
        excerpt_tokens: usize,
        elapsed_ms: u64,
        error: Option<String>,
    },
    /// The synthesis step of deep research.
    Synthesis {
        id: u64,
        synthesizer: String,
        sources: usize,
        brief_tokens: usize,
        elapsed_ms: u64,
        fell_back: bool,
        error: Option<String>,
    },
    /// A request ended.
    Finished {
        id: u64,
        outcome: String,
        sources: Vec<String>,
        tokens: usize,
        elapsed_ms: u64,
        deadline_hit: bool,
    },
}

/// An in-memory list of records for one session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ResearchLog {
    entries: Vec<ResearchLogEntry>,
}

impl ResearchLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a record.
    pub fn push(&mut self, entry: ResearchLogEntry) {
        self.entries.push(entry);
    }

    /// All records, oldest first.
    pub fn entries(&self) -> &[ResearchLogEntry] {
        &self.entries
    }

    /// Takes the records out (for handing to the recording).
    pub fn take(&mut self) -> Vec<ResearchLogEntry> {
        std::mem::take(&mut self.entries)
    }

    /// Every query string in the log (request and search records).
    pub fn queries(&self) -> Vec<&str> {
        self.entries
            .iter()
            .filter_map(|e| match e {
                ResearchLogEntry::Request { query, .. } | ResearchLogEntry::Search { query, .. } => {
                    Some(query.as_str())
                }
                _ => None,
            })
            .collect()
    }

    /// The log as JSON lines.
    pub fn to_json_lines(&self) -> String {
        self.entries
            .iter()
            .filter_map(|e| serde_json::to_string(e).ok())
            .map(|l| l + "\n")
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_tagged_records() {
        let mut log = ResearchLog::new();
        log.push(ResearchLogEntry::Request {
            id: 1,
            kind: "quick".into(),
            query: "untangle rules".into(),
            at: "2026-09-12T14:02:05Z".into(),
        });
        let j = log.to_json_lines();
        assert!(j.starts_with("{\"event\":\"request\",\"id\":1"), "{j}");
        assert_eq!(log.queries(), vec!["untangle rules"]);
        assert_eq!(log.take().len(), 1);
        assert!(log.entries().is_empty());
    }
}
