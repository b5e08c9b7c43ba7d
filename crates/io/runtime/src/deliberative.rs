//! The deliberative cadence of `gamepilot run`: on a trigger, ask the model for a plan of subgoals whose
//! postconditions are sensor expressions (FR-LOOP-004). Runs on its own thread, concurrently with the
//! tactical and reflex cadences, which keep acting on the previous plan (NFR-LOOP-001).

use crate::tactical::attach;
use gamepilot_model::{CallTimings, CancelToken, ChatRequest, HostClient};
use gamepilot_session::ImagePart;
use gamepilot_session::PlanSpec;
use serde_json::Value;

/// One pass's request: the session's job (its prompt, schema and first subgoal id), and the picture for
/// the place the job held, encoded at the deliberative budget for a model that sees images.
pub struct DeliberationRequest {
    pub job: gamepilot_session::DeliberationJob,
    pub image: Option<ImagePart>,
}

pub struct DeliberationResult {
    pub pass: u64,
    pub plan: Result<PlanSpec, String>,
    /// The research question the reply wrote (kept even when its plan is refused).
    pub research: Option<String>,
    pub prompt_json: Value,
    pub reply_text: String,
    pub latency_ms: f64,
    /// The schema-valid reply (a session whose agent declares its checks compiles it itself).
    pub value: Option<Value>,
    pub first_id: u32,
    /// Each call's figures (two when the first reply broke the schema); none when the pass failed.
    pub calls: Vec<CallTimings>,
}

pub use gamepilot_session::plan::{plan_from_reply, research_question, Postconditions};

/// Serve one deliberative pass.
pub fn deliberate(
    client: &HostClient,
    model: &str,
    post: &Postconditions,
    req: &DeliberationRequest,
    cancel: &CancelToken,
) -> DeliberationResult {
    let job = &req.job;
    let mut prompt = job.prompt.clone();
    attach(&mut prompt, req.image.clone());
    let schema = &job.schema;
    let chat = ChatRequest::from_prompt(model, &prompt, 256);
    let prompt_json = chat.body_for(client.kind());
    match client.chat_structured(&chat, schema, cancel) {
        Ok(r) => DeliberationResult {
            pass: job.pass,
            plan: plan_from_reply(&r.value, post, job.first_id),
            research: research_question(&r.value),
            prompt_json,
            reply_text: r.reply.content.clone(),
            latency_ms: r.reply.timings.wall_ms,
            value: Some(r.value.clone()),
            first_id: job.first_id,
            calls: r.calls.iter().map(|c| c.timings.clone()).collect(),
        },
        Err(e) => DeliberationResult {
            pass: job.pass,
            plan: Err(e.to_string()),
            research: None,
            prompt_json,
            reply_text: String::new(),
            latency_ms: 0.0,
            value: None,
            first_id: job.first_id,
            calls: Vec::new(),
        },
    }
}
