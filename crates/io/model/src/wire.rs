//! The OpenAI-compatible wire format: a [`Prompt`] becomes a chat-completions request body, its reply
//! schema carried in the fields the host kind reads ([`structured_output_fields`]); a reply body becomes
//! a [`ChatReply`] with its timings and cached-prefix figures (llama.cpp's `timings` object, else the
//! OpenAI `usage.prompt_tokens_details.cached_tokens`).

use crate::host_kind::HostKind;
use crate::ModelError;
use gamepilot_context::{Part, Prompt, Role};
use serde::Serialize;
use serde_json::{json, Value};

/// A chat-completions request: the prompt plus sampling settings and an optional schema.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub model: String,
    /// `(role, content)` messages in wire form.
    pub messages: Vec<Value>,
    pub max_tokens: u32,
    pub temperature: f32,
    /// JSON Schema the reply must follow, sent as `response_format: {type: json_schema}` plus the host
    /// kind's own fields (FR-MODEL-003, [`structured_output_fields`]).
    pub schema: Option<Value>,
    /// Pixel area of the attached image (the visual budget actually spent), for the recording.
    pub image_pixels: Option<u64>,
}

impl ChatRequest {
    /// Converts an assembled prompt. Text-only messages become one string (blocks joined by blank
    /// lines); a message with an image becomes content parts, text blocks first and the image last.
    pub fn from_prompt(model: &str, prompt: &Prompt, max_tokens: u32) -> Self {
        let mut image_pixels = None;
        let messages = prompt
            .messages
            .iter()
            .map(|m| {
                let role = match m.role {
                    Role::System => "system",
                    Role::User => "user",
                };
                match m.image() {
                    None => json!({"role": role, "content": m.joined_text()}),
                    Some(img) => {
                        image_pixels = Some(img.width as u64 * img.height as u64);
                        let parts: Vec<Value> = m
                            .parts
                            .iter()
                            .map(|p| match p {
                                Part::Text { text, .. } => json!({"type": "text", "text": text}),
                                Part::Image { image } => {
                                    json!({"type": "image_url", "image_url": {"url": image.data_url()}})
                                }
                            })
                            .collect();
                        json!({"role": role, "content": parts})
                    }
                }
            })
            .collect();
        ChatRequest {
            model: model.to_string(),
            messages,
            max_tokens,
            temperature: 0.0,
            schema: None,
            image_pixels,
        }
    }

    pub fn with_schema(mut self, schema: Value) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Appends the rejected reply and the reason it was rejected (the one retry of a schema break).
    pub fn with_feedback(&self, bad_reply: &str, violation: &str) -> Self {
        let mut r = self.clone();
        r.messages
            .push(json!({"role": "assistant", "content": bad_reply}));
        r.messages.push(json!({
            "role": "user",
            "content": format!(
                "Your previous reply was rejected: {violation}. Reply again with exactly one JSON object that matches the schema."
            )
        }));
        r
    }

    /// The portable JSON body: the schema as OpenAI `response_format` only (what a host of
    /// [`HostKind::Unknown`] gets). [`HostClient::chat`](crate::HostClient::chat) sends
    /// [`ChatRequest::body_for`] its host's kind.
    pub fn body(&self) -> Value {
        self.body_for(HostKind::Unknown)
    }

    /// The JSON body for a host of `kind`: the schema, when set, in every field that kind reads.
    pub fn body_for(&self, kind: HostKind) -> Value {
        let mut b = json!({
            "model": self.model,
            "messages": self.messages,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stream": false,
        });
        if let Some(s) = &self.schema {
            for (key, value) in structured_output_fields(kind, s) {
                b[key] = value;
            }
        }
        b
    }
}

/// The top-level body fields that carry `schema` to a host of `kind`, each holding the same schema
/// (FR-MODEL-003); their keys are [`HostKind::structured_output_keys`]:
///
/// - llama.cpp: a compact GBNF `grammar` compiled from the schema ([`crate::gbnf`]: the same choices with
///   no whitespace, so a small model decodes 15 tokens for a mark click instead of 24–39), with the
///   schema itself beside it in `reply_schema` (llama.cpp ignores the key; stand-in hosts and proxies
///   read it); a schema the compiler does not express goes as `response_format` like every other kind;
/// - every other kind: OpenAI `response_format: {type: json_schema, json_schema: {name, strict, schema}}`
///   (llama.cpp, LM Studio and vLLM constrain decoding with it; Ollama's `/v1/chat/completions` turns
///   it into its `format`);
/// - vLLM: also `guided_json: <schema>` (older vLLM) and `structured_outputs: {json: <schema>}` (newer
///   vLLM); a version that reads both gets the same schema from each, one that knows only one logs the
///   other as ignored (read from vLLM's request model, not checked against a running vLLM);
/// - Ollama: also its native `format: <schema>` (what `/api/chat` reads; its OpenAI endpoint ignores
///   unknown fields).
pub fn structured_output_fields(kind: HostKind, schema: &Value) -> Vec<(&'static str, Value)> {
    if kind == HostKind::LlamaCpp {
        if let Some(grammar) = crate::gbnf::compact_grammar(schema) {
            return vec![
                ("grammar", Value::String(grammar)),
                ("reply_schema", schema.clone()),
            ];
        }
    }
    let mut out = vec![(
        "response_format",
        json!({
            "type": "json_schema",
            "json_schema": {"name": "reply", "strict": true, "schema": schema},
        }),
    )];
    match kind {
        HostKind::Vllm => {
            out.push(("guided_json", schema.clone()));
            out.push(("structured_outputs", json!({ "json": schema })));
        }
        HostKind::Ollama => out.push(("format", schema.clone())),
        HostKind::LlamaCpp | HostKind::LmStudio | HostKind::Unknown => {}
    }
    out
}

/// Per-call figures, from the reply where the host reports them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CallTimings {
    /// Wall time of the HTTP exchange, measured by the client.
    pub wall_ms: f64,
    /// Prompt tokens in total (cached + processed), when reported.
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens the host reused from its prefix cache.
    pub cached_tokens: Option<u64>,
    /// Prompt tokens the host had to evaluate (llama.cpp `timings.prompt_n`).
    pub prompt_evaluated: Option<u64>,
    pub prompt_ms: Option<f64>,
    pub completion_tokens: Option<u64>,
    pub predicted_ms: Option<f64>,
}

impl CallTimings {
    /// Fraction of the prompt served from the host's cache, when reported.
    pub fn cache_ratio(&self) -> Option<f64> {
        match (self.cached_tokens, self.prompt_tokens) {
            (Some(c), Some(p)) if p > 0 => Some(c as f64 / p as f64),
            _ => None,
        }
    }
}

/// One completion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatReply {
    pub content: String,
    pub finish_reason: Option<String>,
    pub timings: CallTimings,
}

impl ChatReply {
    /// Parses a chat-completions response body.
    pub fn parse(url: &str, body: &Value, wall_ms: f64) -> Result<ChatReply, ModelError> {
        let proto = |detail: &str| ModelError::Protocol {
            url: url.to_string(),
            detail: detail.to_string(),
        };
        let choice = body
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .ok_or_else(|| proto("no choices[0]"))?;
        let content = choice
            .pointer("/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| proto("choices[0].message.content is not a string"))?
            .to_string();
        let finish_reason = choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string);

        let u64_at = |p: &str| body.pointer(p).and_then(Value::as_u64);
        let f64_at = |p: &str| body.pointer(p).and_then(Value::as_f64);
        let mut t = CallTimings {
            wall_ms,
            prompt_tokens: u64_at("/usage/prompt_tokens"),
            cached_tokens: u64_at("/usage/prompt_tokens_details/cached_tokens"),
            completion_tokens: u64_at("/usage/completion_tokens"),
            ..CallTimings::default()
        };
        // llama.cpp: timings.cache_n (reused) + timings.prompt_n (evaluated) = the whole prompt.
        if let Some(cache_n) = u64_at("/timings/cache_n") {
            t.cached_tokens = Some(cache_n);
            if let Some(prompt_n) = u64_at("/timings/prompt_n") {
                t.prompt_evaluated = Some(prompt_n);
                t.prompt_tokens = Some(cache_n + prompt_n);
            }
        }
        t.prompt_ms = f64_at("/timings/prompt_ms");
        t.predicted_ms = f64_at("/timings/predicted_ms");
        if t.completion_tokens.is_none() {
            t.completion_tokens = u64_at("/timings/predicted_n");
        }
        if t.prompt_evaluated.is_none() {
            if let (Some(p), Some(c)) = (t.prompt_tokens, t.cached_tokens) {
                t.prompt_evaluated = Some(p.saturating_sub(c));
            }
        }
        Ok(ChatReply {
            content,
            finish_reason,
            timings: t,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;
    use gamepilot_context::{Block, Cadence, ImagePart, Message};

    fn prompt(image: bool) -> Prompt {
        let mut user = vec![
            Part::Text {
                block: Block::Goal,
                text: "Goal: win".into(),
            },
            Part::Text {
                block: Block::Observation,
                text: "marks: [3] door".into(),
            },
        ];
        if image {
            user.push(Part::Image {
                image: ImagePart {
                    mime: "image/png".into(),
                    width: 4,
                    height: 2,
                    data_base64: "AAAA".into(),
                },
            });
        }
        Prompt {
            cadence: Cadence::Tactical,
            messages: vec![
                Message {
                    role: Role::System,
                    parts: vec![Part::Text {
                        block: Block::System,
                        text: "sys".into(),
                    }],
                },
                Message {
                    role: Role::User,
                    parts: user,
                },
            ],
        }
    }

    #[test]
    fn vision_request_body_snapshot() {
        // FR-CTX-001 on the wire: text blocks first, image_url last; FR-MODEL-003 response_format
        let r = ChatRequest::from_prompt("m", &prompt(true), 64).with_schema(json!({"type": "object"}));
        assert_eq!(r.image_pixels, Some(8));
        expect![[r#"{"max_tokens":64,"messages":[{"content":"sys","role":"system"},{"content":[{"text":"Goal: win","type":"text"},{"text":"marks: [3] door","type":"text"},{"image_url":{"url":"data:image/png;base64,AAAA"},"type":"image_url"}],"role":"user"}],"model":"m","response_format":{"json_schema":{"name":"reply","schema":{"type":"object"},"strict":true},"type":"json_schema"},"stream":false,"temperature":0.0}"#]]
        .assert_eq(&r.body().to_string());
    }

    #[test]
    fn schema_fields_per_host_kind() {
        // FR-MODEL-003: each kind gets the schema in every field it reads, and only those
        let schema =
            json!({"type": "object", "properties": {"mark": {"enum": [3, 7]}}, "required": ["mark"]});
        let r = ChatRequest::from_prompt("m", &prompt(false), 8).with_schema(schema.clone());
        let base: Vec<String> = ChatRequest::from_prompt("m", &prompt(false), 8)
            .body_for(HostKind::Vllm)
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        for kind in HostKind::ALL {
            let body = r.body_for(kind);
            let mut extra: Vec<&str> = body
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| !base.contains(k))
                .map(String::as_str)
                .collect();
            let mut want = kind.structured_output_keys().to_vec();
            extra.sort_unstable();
            want.sort_unstable();
            assert_eq!(extra, want, "{kind}");
            if kind == HostKind::LlamaCpp {
                assert_eq!(body["reply_schema"], schema);
                assert_eq!(
                    body["grammar"],
                    "root ::= r1\nr0 ::= \"3\" | \"7\"\nr1 ::= \"{\" \"\\\"mark\\\":\" r0 \"}\"\n"
                );
            } else {
                assert_eq!(body["response_format"]["json_schema"]["schema"], schema, "{kind}");
            }
        }
        // a schema the grammar compiler does not express goes to llama.cpp as response_format
        let odd = json!({"type": "string", "pattern": "^a$"});
        let b = ChatRequest::from_prompt("m", &prompt(false), 8)
            .with_schema(odd.clone())
            .body_for(HostKind::LlamaCpp);
        assert_eq!(b["response_format"]["json_schema"]["schema"], odd);
        assert!(b.get("grammar").is_none());
        let v = r.body_for(HostKind::Vllm);
        assert_eq!(
            (&v["guided_json"], &v["structured_outputs"]["json"]),
            (&schema, &schema)
        );
        assert_eq!(r.body_for(HostKind::Ollama)["format"], schema);
        assert_eq!(r.body(), r.body_for(HostKind::Unknown));
        // No schema: no schema field for any kind.
        let plain = ChatRequest::from_prompt("m", &prompt(false), 8);
        for kind in HostKind::ALL {
            assert_eq!(plain.body_for(kind), plain.body(), "{kind}");
        }
    }

    #[test]
    fn text_only_request_joins_blocks() {
        let r = ChatRequest::from_prompt("m", &prompt(false), 64);
        assert_eq!(r.image_pixels, None);
        assert_eq!(r.body()["messages"][1]["content"], "Goal: win\n\nmarks: [3] door");
        assert!(r.body().get("response_format").is_none());
        let f = r.with_feedback("{\"action\":\"x\"}", "bad action");
        assert_eq!(f.messages.len(), 4);
        assert_eq!(f.messages[2]["role"], "assistant");
    }

    #[test]
    fn llama_cpp_timings_are_read() {
        let body = json!({
            "choices": [{"message": {"role": "assistant", "content": "{}"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 100}},
            "timings": {"cache_n": 100, "prompt_n": 20, "prompt_ms": 30.5, "predicted_n": 5, "predicted_ms": 12.0}
        });
        let r = ChatReply::parse("u", &body, 50.0).unwrap();
        assert_eq!(r.timings.cached_tokens, Some(100));
        assert_eq!(r.timings.prompt_evaluated, Some(20));
        assert_eq!(r.timings.prompt_tokens, Some(120));
        assert_eq!(r.timings.cache_ratio(), Some(100.0 / 120.0));
        assert_eq!(r.timings.prompt_ms, Some(30.5));
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    }

    #[test]
    fn openai_usage_only_and_malformed_bodies() {
        let body = json!({
            "choices": [{"message": {"content": "hi"}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 4}}
        });
        let r = ChatReply::parse("u", &body, 1.0).unwrap();
        assert_eq!(
            (r.timings.cached_tokens, r.timings.prompt_evaluated),
            (Some(4), Some(6))
        );
        assert!(matches!(
            ChatReply::parse("u", &json!({"choices": []}), 1.0),
            Err(ModelError::Protocol { .. })
        ));
        assert!(matches!(
            ChatReply::parse("u", &json!({"choices": [{"message": {"content": null}}]}), 1.0),
            Err(ModelError::Protocol { .. })
        ));
    }
}
