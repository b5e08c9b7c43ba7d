//! Which kind of OpenAI-compatible host answers (llama.cpp, Ollama, vLLM, LM Studio, or unknown), told
//! from the metadata endpoints each kind really has and never guessed; what each kind says about vision
//! and the context size; and which request fields carry a JSON schema to it (FR-MODEL-001,
//! FR-MODEL-003). [`host_kind_table`] is the mapping in one place, for the CLI to print.
//!
//! The probe is one pass of at most four short metadata requests, in this order, each bounded by the
//! client's probe timeout (2 s by default): `GET /v1/models` (every kind; an entry `owned_by: "vllm"`
//! is vLLM), `GET /props` (llama.cpp), `GET /api/version` then `POST /api/show` (Ollama),
//! `GET /api/v0/models` (LM Studio). A 4xx answer, or a 200 that is not JSON or lacks the kind's own
//! fields, means "not this kind"; an unreachable host, a timeout or a 5xx (llama.cpp answers 503 while it
//! loads) is an error, because a kind told from a host that could not answer would be a guess.

use crate::client::{Capabilities, HostClient, Meta};
use crate::ModelError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The kind of model host behind a URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostKind {
    /// llama.cpp `llama-server`.
    LlamaCpp,
    Ollama,
    Vllm,
    LmStudio,
    /// None of the above answered as itself: the portable OpenAI form is used.
    #[default]
    Unknown,
}

impl HostKind {
    /// Every kind, in the table's order.
    pub const ALL: [HostKind; 5] = [
        HostKind::LlamaCpp,
        HostKind::Ollama,
        HostKind::LmStudio,
        HostKind::Vllm,
        HostKind::Unknown,
    ];

    /// The serialized name (`llama_cpp`, `ollama`, `vllm`, `lm_studio`, `unknown`).
    pub fn as_str(self) -> &'static str {
        match self {
            HostKind::LlamaCpp => "llama_cpp",
            HostKind::Ollama => "ollama",
            HostKind::Vllm => "vllm",
            HostKind::LmStudio => "lm_studio",
            HostKind::Unknown => "unknown",
        }
    }

    /// The name people use (`llama.cpp`, `Ollama`, `vLLM`, `LM Studio`, `unknown`).
    pub fn label(self) -> &'static str {
        match self {
            HostKind::LlamaCpp => "llama.cpp",
            HostKind::Ollama => "Ollama",
            HostKind::Vllm => "vLLM",
            HostKind::LmStudio => "LM Studio",
            HostKind::Unknown => "unknown",
        }
    }

    /// This kind's row of [`host_kind_table`].
    pub fn row(self) -> &'static HostKindRow {
        match self {
            HostKind::LlamaCpp => &TABLE[0],
            HostKind::Ollama => &TABLE[1],
            HostKind::LmStudio => &TABLE[2],
            HostKind::Vllm => &TABLE[3],
            HostKind::Unknown => &TABLE[4],
        }
    }

    /// The top-level chat-completions body fields that carry a reply schema to this kind, each holding
    /// the same schema (see [`crate::wire::structured_output_fields`]).
    pub fn structured_output_keys(self) -> &'static [&'static str] {
        self.row().structured_keys
    }
}

impl std::fmt::Display for HostKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

impl std::str::FromStr for HostKind {
    type Err = ModelError;

    /// Accepts the serialized name or the label, case and `.`/`_`/`-`/space insensitive
    /// (`llama.cpp`, `llamacpp`, `lm-studio`, `LMStudio`, …).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let norm: String = s
            .chars()
            .filter(|c| !matches!(c, '.' | '_' | '-' | ' '))
            .flat_map(char::to_lowercase)
            .collect();
        match norm.as_str() {
            "llamacpp" | "llamaserver" => Ok(HostKind::LlamaCpp),
            "ollama" => Ok(HostKind::Ollama),
            "vllm" => Ok(HostKind::Vllm),
            "lmstudio" => Ok(HostKind::LmStudio),
            "unknown" => Ok(HostKind::Unknown),
            _ => Err(ModelError::Config(format!(
                "unknown model host kind {s:?}: expected one of llama_cpp, ollama, vllm, lm_studio, unknown"
            ))),
        }
    }
}

/// One row of the host-kind mapping: how the kind is told, and where each figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostKindRow {
    pub kind: HostKind,
    /// The evidence that makes a host this kind.
    pub detected_by: &'static str,
    /// Where `Capabilities::vision` comes from.
    pub vision: &'static str,
    /// Where `Capabilities::n_ctx` comes from.
    pub context: &'static str,
    /// The body fields that carry the reply schema, in words.
    pub structured_output: &'static str,
    /// The same fields, as top-level body keys.
    pub structured_keys: &'static [&'static str],
}

static TABLE: [HostKindRow; 5] = [
    HostKindRow {
        kind: HostKind::LlamaCpp,
        detected_by: "GET /props answers a JSON object with default_generation_settings",
        vision: "/props modalities.vision (absent on an older llama-server: None)",
        context: "/props default_generation_settings.n_ctx (one slot)",
        structured_output: "grammar: a compact GBNF compiled from the schema (no whitespace), the schema \
                            beside it in reply_schema; response_format json_schema when it does not compile",
        structured_keys: &["grammar", "reply_schema"],
    },
    HostKindRow {
        kind: HostKind::Ollama,
        detected_by: "GET /api/version answers {version: \"…\"}",
        vision: "POST /api/show {model} capabilities contains \"vision\"",
        context: "/api/show parameters num_ctx, else model_info.<arch>.context_length (the model's \
                  maximum; Ollama may run a smaller num_ctx and truncates silently)",
        structured_output: "response_format json_schema (read by /v1/chat/completions) and Ollama's \
                            own format: <schema> (read by /api/chat)",
        structured_keys: &["response_format", "format"],
    },
    HostKindRow {
        kind: HostKind::LmStudio,
        detected_by: "GET /api/v0/models lists entries with a type",
        vision: "/api/v0/models entry type: \"vlm\" = true, \"llm\" = false",
        context: "/api/v0/models entry max_context_length (the model's maximum)",
        structured_output: "response_format {type: json_schema, json_schema: {name, strict, schema}}",
        structured_keys: &["response_format"],
    },
    HostKindRow {
        kind: HostKind::Vllm,
        detected_by: "GET /v1/models lists an entry owned_by \"vllm\"",
        vision: "vLLM does not say: None",
        context: "/v1/models entry max_model_len",
        structured_output: "response_format json_schema, guided_json: <schema> (older vLLM), \
                            structured_outputs: {json: <schema>} (newer vLLM)",
        structured_keys: &["response_format", "guided_json", "structured_outputs"],
    },
    HostKindRow {
        kind: HostKind::Unknown,
        detected_by: "none of the above",
        vision: "nothing says: None",
        context: "nothing says: None",
        structured_output: "response_format json_schema only (the portable OpenAI form; a host that \
                            ignores it is caught by validation and the one retry)",
        structured_keys: &["response_format"],
    },
];

/// The host-kind mapping: for each kind, how it is detected, where vision and the context size come
/// from, and which body fields carry the reply schema.
pub fn host_kind_table() -> &'static [HostKindRow] {
    &TABLE
}

/// [`host_kind_table`] as a Markdown table, for the CLI to print.
pub fn host_kind_table_text() -> String {
    let mut out = String::from(
        "| host kind | detected by | vision | context size | structured output |\n|---|---|---|---|---|\n",
    );
    for r in host_kind_table() {
        out.push_str(&format!(
            "| {} (`{}`) | {} | {} | {} | {} |\n",
            r.kind.label(),
            r.kind.as_str(),
            r.detected_by,
            r.vision,
            r.context,
            r.structured_output
        ));
    }
    out
}

/// The `data` entries of an OpenAI-style model list.
fn entries(list: &Value) -> Vec<Value> {
    list.get("data")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn id_of(entry: &Value) -> Option<&str> {
    entry.get("id").and_then(Value::as_str)
}

/// Whether a listed id names `want` (Ollama lists `name:latest` for a model asked for as `name`).
fn names(id: &str, want: &str) -> bool {
    id == want || id.strip_suffix(":latest") == Some(want)
}

/// The entry the figures are about: the one named `want`, or the first when no name is given.
fn pick<'a>(list: &'a [Value], want: Option<&str>) -> Option<&'a Value> {
    match want {
        Some(w) => list.iter().find(|e| id_of(e).is_some_and(|id| names(id, w))),
        None => list.first(),
    }
}

fn json(meta: Meta) -> Option<Value> {
    match meta {
        Meta::Json(v) => Some(v),
        Meta::Absent(_) => None,
    }
}

/// The probe (see the module text). `want`: the model the caller will name in its requests; `None`
/// asks about the first model `/v1/models` lists.
pub(crate) fn detect(client: &HostClient, want: Option<&str>) -> Result<Capabilities, ModelError> {
    let listed = json(client.meta("/v1/models", None)?)
        .map(|v| entries(&v))
        .unwrap_or_default();
    let entry = pick(&listed, want);
    let model_id = entry.and_then(id_of).map(str::to_string);
    // The name asked about on hosts whose metadata is per model.
    let name = want.map(str::to_string).or_else(|| model_id.clone());

    if listed
        .iter()
        .any(|e| e.get("owned_by").and_then(Value::as_str) == Some("vllm"))
    {
        return Ok(vllm(entry, model_id));
    }
    if let Some(props) = json(client.meta("/props", None)?) {
        if props
            .get("default_generation_settings")
            .is_some_and(Value::is_object)
        {
            return Ok(llama_cpp(&props, model_id));
        }
    }
    if let Some(v) = json(client.meta("/api/version", None)?) {
        if v.get("version").is_some_and(Value::is_string) {
            return ollama(client, name.as_deref(), model_id);
        }
    }
    if let Some(v) = json(client.meta("/api/v0/models", None)?) {
        let lms = entries(&v);
        if lms.iter().any(|e| e.get("type").is_some_and(Value::is_string)) {
            return Ok(lm_studio(&lms, name.as_deref(), model_id));
        }
    }
    Ok(Capabilities {
        model_id,
        ..Capabilities::default()
    })
}

fn vllm(entry: Option<&Value>, model_id: Option<String>) -> Capabilities {
    let n_ctx = entry.and_then(|e| e.get("max_model_len")).and_then(Value::as_u64);
    Capabilities {
        kind: HostKind::Vllm,
        vision: None,
        vision_source: "vLLM does not say".into(),
        n_ctx,
        n_ctx_source: if n_ctx.is_some() {
            "vLLM /v1/models max_model_len".into()
        } else {
            "vLLM /v1/models lists no max_model_len for this model".into()
        },
        model_path: entry
            .and_then(|e| e.get("root"))
            .and_then(Value::as_str)
            .map(str::to_string),
        model_id,
    }
}

fn llama_cpp(props: &Value, model_id: Option<String>) -> Capabilities {
    let vision = props.pointer("/modalities/vision").and_then(Value::as_bool);
    let n_ctx = props
        .pointer("/default_generation_settings/n_ctx")
        .and_then(Value::as_u64);
    Capabilities {
        kind: HostKind::LlamaCpp,
        vision,
        vision_source: if vision.is_some() {
            "llama.cpp /props modalities.vision".into()
        } else {
            "llama.cpp /props has no modalities.vision (an older llama-server does not say)".into()
        },
        n_ctx,
        n_ctx_source: if n_ctx.is_some() {
            "llama.cpp /props default_generation_settings.n_ctx".into()
        } else {
            "llama.cpp /props has no default_generation_settings.n_ctx".into()
        },
        model_path: props
            .get("model_path")
            .and_then(Value::as_str)
            .map(str::to_string),
        model_id,
    }
}

fn ollama(
    client: &HostClient,
    name: Option<&str>,
    model_id: Option<String>,
) -> Result<Capabilities, ModelError> {
    let mut caps = Capabilities {
        kind: HostKind::Ollama,
        model_id,
        ..Capabilities::default()
    };
    let Some(name) = name else {
        caps.vision_source = "no model to ask Ollama /api/show about (/v1/models lists none)".into();
        caps.n_ctx_source = caps.vision_source.clone();
        return Ok(caps);
    };
    let show = match client.meta("/api/show", Some(&serde_json::json!({ "model": name })))? {
        Meta::Json(v) => v,
        Meta::Absent(why) => {
            caps.vision_source = format!("Ollama /api/show for {name:?} failed: {why}");
            caps.n_ctx_source = caps.vision_source.clone();
            return Ok(caps);
        }
    };
    match show.get("capabilities").and_then(Value::as_array) {
        Some(list) => {
            caps.vision = Some(list.iter().any(|c| c.as_str() == Some("vision")));
            caps.vision_source = "Ollama /api/show capabilities".into();
        }
        None => caps.vision_source = "Ollama /api/show lists no capabilities".into(),
    }
    let num_ctx = show.get("parameters").and_then(Value::as_str).and_then(|p| {
        p.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("num_ctx"))
                .then(|| w.next().and_then(|n| n.parse::<u64>().ok()))
                .flatten()
        })
    });
    let info = show.get("model_info");
    let arch_key = info
        .and_then(|i| i.get("general.architecture"))
        .and_then(Value::as_str)
        .map(|a| format!("{a}.context_length"));
    let trained = info.and_then(|i| {
        arch_key
            .as_deref()
            .and_then(|k| i.get(k))
            .or_else(|| {
                i.as_object().and_then(|o| {
                    o.iter()
                        .find(|(k, _)| k.ends_with(".context_length"))
                        .map(|(_, v)| v)
                })
            })
            .and_then(Value::as_u64)
    });
    (caps.n_ctx, caps.n_ctx_source) = match (num_ctx, trained) {
        (Some(n), _) => (Some(n), "Ollama /api/show parameters num_ctx".into()),
        (None, Some(n)) => (
            Some(n),
            "Ollama /api/show model_info.*.context_length (the model's maximum; Ollama may run a smaller \
             num_ctx and truncates longer prompts silently)"
                .into(),
        ),
        (None, None) => (None, "Ollama /api/show gives no context length".into()),
    };
    Ok(caps)
}

fn lm_studio(lms: &[Value], name: Option<&str>, model_id: Option<String>) -> Capabilities {
    let mut caps = Capabilities {
        kind: HostKind::LmStudio,
        model_id,
        ..Capabilities::default()
    };
    let Some(entry) = pick(lms, name) else {
        caps.vision_source = match name {
            Some(n) => format!("LM Studio /api/v0/models does not list {n:?}"),
            None => "LM Studio /api/v0/models lists no model".into(),
        };
        caps.n_ctx_source = caps.vision_source.clone();
        return caps;
    };
    let ty = entry.get("type").and_then(Value::as_str).unwrap_or("");
    (caps.vision, caps.vision_source) = match ty {
        "vlm" => (Some(true), "LM Studio /api/v0/models type=vlm".into()),
        "llm" => (Some(false), "LM Studio /api/v0/models type=llm".into()),
        other => (
            None,
            format!("LM Studio /api/v0/models type={other:?} (neither vlm nor llm)"),
        ),
    };
    caps.n_ctx = entry.get("max_context_length").and_then(Value::as_u64);
    caps.n_ctx_source = if caps.n_ctx.is_some() {
        "LM Studio /api/v0/models max_context_length (the model's maximum)".into()
    } else {
        "LM Studio /api/v0/models gives no max_context_length".into()
    };
    caps
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    #[test]
    fn kinds_parse_print_and_serialize() {
        // FR-MODEL-001: one name per kind, both ways
        for k in HostKind::ALL {
            assert_eq!(k.as_str().parse::<HostKind>().unwrap(), k);
            assert_eq!(k.label().parse::<HostKind>().unwrap(), k);
            assert_eq!(serde_json::to_value(k).unwrap(), Value::from(k.as_str()));
            assert_eq!(k.row().kind, k);
        }
        assert_eq!("LMStudio".parse::<HostKind>().unwrap(), HostKind::LmStudio);
        assert!(matches!("tgi".parse::<HostKind>(), Err(ModelError::Config(_))));
        assert_eq!(HostKind::default(), HostKind::Unknown);
    }

    #[test]
    fn the_mapping_table_snapshot() {
        // FR-MODEL-001, FR-MODEL-003: the table the CLI prints
        expect![[r#"
            | host kind | detected by | vision | context size | structured output |
            |---|---|---|---|---|
            | llama.cpp (`llama_cpp`) | GET /props answers a JSON object with default_generation_settings | /props modalities.vision (absent on an older llama-server: None) | /props default_generation_settings.n_ctx (one slot) | grammar: a compact GBNF compiled from the schema (no whitespace), the schema beside it in reply_schema; response_format json_schema when it does not compile |
            | Ollama (`ollama`) | GET /api/version answers {version: "…"} | POST /api/show {model} capabilities contains "vision" | /api/show parameters num_ctx, else model_info.<arch>.context_length (the model's maximum; Ollama may run a smaller num_ctx and truncates silently) | response_format json_schema (read by /v1/chat/completions) and Ollama's own format: <schema> (read by /api/chat) |
            | LM Studio (`lm_studio`) | GET /api/v0/models lists entries with a type | /api/v0/models entry type: "vlm" = true, "llm" = false | /api/v0/models entry max_context_length (the model's maximum) | response_format {type: json_schema, json_schema: {name, strict, schema}} |
            | vLLM (`vllm`) | GET /v1/models lists an entry owned_by "vllm" | vLLM does not say: None | /v1/models entry max_model_len | response_format json_schema, guided_json: <schema> (older vLLM), structured_outputs: {json: <schema>} (newer vLLM) |
            | unknown (`unknown`) | none of the above | nothing says: None | nothing says: None | response_format json_schema only (the portable OpenAI form; a host that ignores it is caught by validation and the one retry) |
        "#]]
        .assert_eq(&host_kind_table_text());
    }

    #[test]
    fn model_names_match_ollama_latest_tags() {
        // The figures are about the model the caller names
        let list = vec![
            serde_json::json!({"id": "a"}),
            serde_json::json!({"id": "llava:latest"}),
        ];
        assert_eq!(pick(&list, Some("llava")).and_then(id_of), Some("llava:latest"));
        assert_eq!(pick(&list, None).and_then(id_of), Some("a"));
        assert_eq!(pick(&list, Some("b")), None);
    }
}
