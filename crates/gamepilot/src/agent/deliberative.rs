//! The deliberative cadence of `gamepilot run`: on a trigger, ask the model for a plan of subgoals whose
//! postconditions are sensor expressions (FR-LOOP-004). Runs on its own thread, concurrently with the
//! tactical and reflex cadences, which keep acting on the previous plan (NFR-LOOP-001).

use gamepilot_context::{Cadence, Context, ObservationText};
use gamepilot_core::{MonoTime, SubgoalId};
use gamepilot_model::{CancelToken, ChatRequest, HostClient};
use gamepilot_planner::{Budget, PlanSpec, PostconditionRef, SubgoalSpec};
use serde_json::{json, Value};

/// One pass's request.
pub struct DeliberationRequest {
    pub pass: u64,
    pub trigger: String,
    pub context: Context,
    pub observation: String,
    pub now: MonoTime,
    /// The first subgoal id this pass may use (ids are never reused within a session).
    pub first_id: u32,
}

pub struct DeliberationResult {
    pub pass: u64,
    pub plan: Result<PlanSpec, String>,
    pub prompt_json: Value,
    pub reply_text: String,
    pub latency_ms: f64,
}

/// The postconditions a plan may use: expressions that compile against the session's sensors. The
/// schema's enum makes any other postcondition unrepresentable.
#[derive(Clone)]
pub struct Postconditions {
    pub sources: Vec<String>,
}

/// The plan schema for this session's postconditions.
pub fn plan_schema(post: &Postconditions) -> Value {
    json!({
        "type": "object",
        "properties": {
            "subgoals": {
                "type": "array", "minItems": 1, "maxItems": 3,
                "items": {
                    "type": "object",
                    "properties": {
                        "description": {"type": "string", "minLength": 1, "maxLength": 120},
                        "postcondition": {"type": "string", "enum": post.sources},
                        "max_actions": {"type": "integer", "minimum": 3, "maximum": 40},
                        "max_time_s": {"type": "integer", "minimum": 30, "maximum": 600}
                    },
                    "required": ["description", "postcondition", "max_actions", "max_time_s"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["subgoals"],
        "additionalProperties": false
    })
}

/// Turn a schema-valid reply into a plan; handles are indexes into `post.sources`.
pub fn plan_from_reply(value: &Value, post: &Postconditions, first_id: u32) -> Result<PlanSpec, String> {
    let items = value
        .get("subgoals")
        .and_then(Value::as_array)
        .ok_or("reply has no subgoals")?;
    let mut subgoals = Vec::new();
    for (i, it) in items.iter().enumerate() {
        let source = it
            .get("postcondition")
            .and_then(Value::as_str)
            .ok_or("subgoal without postcondition")?;
        let handle = post
            .sources
            .iter()
            .position(|s| s == source)
            .ok_or("postcondition not offered")? as u64;
        subgoals.push(SubgoalSpec {
            id: SubgoalId(first_id + i as u32),
            description: it
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            postcondition: PostconditionRef {
                source: source.to_string(),
                handle,
            },
            budget: Budget {
                max_time_ms: it.get("max_time_s").and_then(Value::as_u64).map(|s| s * 1000),
                max_actions: it.get("max_actions").and_then(Value::as_u64).map(|n| n as u32),
            },
        });
    }
    let plan = PlanSpec { subgoals };
    plan.validate().map_err(|e| e.to_string())?;
    Ok(plan)
}

/// Serve one deliberative pass.
pub fn deliberate(
    client: &HostClient,
    model: &str,
    post: &Postconditions,
    req: &DeliberationRequest,
    cancel: &CancelToken,
) -> DeliberationResult {
    let schema = plan_schema(post);
    let prompt = req.context.assemble(
        Cadence::Deliberative,
        &ObservationText::new(
            req.now,
            format!("{}\nDeliberation trigger: {}", req.observation, req.trigger),
        ),
        None,
    );
    let chat = ChatRequest::from_prompt(model, &prompt, 256);
    let prompt_json = chat.body();
    match client.chat_structured(&chat, &schema, cancel) {
        Ok(r) => DeliberationResult {
            pass: req.pass,
            plan: plan_from_reply(&r.value, post, req.first_id),
            prompt_json,
            reply_text: r.reply.content.clone(),
            latency_ms: r.reply.timings.wall_ms,
        },
        Err(e) => DeliberationResult {
            pass: req.pass,
            plan: Err(e.to_string()),
            prompt_json,
            reply_text: String::new(),
            latency_ms: 0.0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_reply_maps_postconditions_to_handles_and_budgets() {
        // FR-LOOP-004: every subgoal carries a checkable postcondition and a budget.
        let post = Postconditions {
            sources: vec!["coins >= 3".into(), "in_menu".into()],
        };
        let v = json!({"subgoals": [
            {"description": "leave the menu", "postcondition": "in_menu", "max_actions": 5, "max_time_s": 30},
            {"description": "collect", "postcondition": "coins >= 3", "max_actions": 20, "max_time_s": 120}
        ]});
        gamepilot_context::validate(&plan_schema(&post), &v).unwrap();
        let plan = plan_from_reply(&v, &post, 10).unwrap();
        assert_eq!(plan.subgoals[0].id, SubgoalId(10));
        assert_eq!(plan.subgoals[0].postcondition.handle, 1);
        assert_eq!(plan.subgoals[1].budget.max_time_ms, Some(120_000));
        let bad = json!({"subgoals": [{"description": "x", "postcondition": "health > 0", "max_actions": 5, "max_time_s": 30}]});
        assert!(
            gamepilot_context::validate(&plan_schema(&post), &bad).is_err(),
            "an unoffered postcondition is unrepresentable"
        );
    }
}
