//! The plan a deliberative pass may propose: its JSON schema (postconditions an enum of the session's
//! compiled expressions, so no other is representable, FR-LOOP-004) and the reply → `PlanSpec` mapping.

use gamepilot_core::SubgoalId;
use gamepilot_planner::{Budget, PlanSpec, PostconditionRef, SubgoalSpec};
use serde_json::{json, Value};

/// The postconditions a plan may use: expressions that compile against the session's sensors. The
/// schema's enum makes any other postcondition unrepresentable.
#[derive(Clone)]
pub struct Postconditions {
    pub sources: Vec<String>,
}

/// Each subgoal's budget (FR-LOOP-004). The plan's reply does not write one: the default model wrote
/// 10 actions and 100 s for 26 of the 31 subgoals of the real-game runs whatever the step, and those
/// ~12 tokens a subgoal were a sixth of what a pass generated. Twice its actions, so that a step the
/// tactical cadence needs a few tries for is not abandoned for a count nobody weighed; the session's
/// own budgets still bound the whole. A reply recorded with its own budget keeps it.
pub const SUBGOAL_BUDGET: Budget = Budget {
    max_time_ms: Some(120_000),
    max_actions: Some(20),
};

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
                        "postcondition": {"type": "string", "enum": post.sources}
                    },
                    "required": ["description", "postcondition"],
                    "additionalProperties": false
                }
            },
            "research": {"type": "string", "maxLength": RESEARCH_QUESTION_MAX_CHARS}
        },
        "required": ["subgoals"],
        "additionalProperties": false
    })
}

/// The plan schema for a session whose agent declares its own checks: beside the subgoals, up to
/// [`crate::declare::MAX_PER_REPLY`] sensor declarations (`checks`) and the goal's own check (`goal`,
/// required until one is accepted). The goal and each postcondition are either a typed choice a small
/// model can make — a mark of the screen (`marks`, the ids the pass sees) and what becomes of it: `gone`
/// (its pixels no longer there), `rises` or `falls` (the number it shows goes up, or down: coins left)
/// — or the name of a boolean
/// sensor or an offered postcondition (`named`: the user's, or those declared before, an expression
/// declared in `checks` among them). A free expression is not offered there: the default small model
/// restated the goal in it every time. Keys sort in the order a reply should fill them (the host's
/// grammar writes properties in the schema's key order): checks, goal, subgoals.
pub fn declare_schema(named: &[String], need_goal: bool, marks: &[u64], numbers: &Numbers) -> Value {
    let mut schema = plan_schema(&Postconditions {
        sources: named.to_vec(),
    });
    let typed = |marks: &[u64], then: &[&str]| {
        json!({
            "type": "object",
            "properties": {
                "mark": {"type": "integer", "enum": marks},
                "then": {"type": "string", "enum": then}
            },
            "required": ["mark", "then"],
            "additionalProperties": false
        })
    };
    // Only a mark that shows a number can rise or fall (the small model chose "Type rises" on a menu
    // bar).
    let mut choices = Vec::new();
    if !marks.is_empty() {
        choices.push(typed(marks, &["gone"]));
    }
    // A count of what is left only falls, any other number only rises: the direction is the
    // grammar's, not the model's (the default model checked "8/8 coins left" for rising past 8).
    if !numbers.rising.is_empty() {
        choices.push(typed(&numbers.rising, &["rises"]));
    }
    if !numbers.falling.is_empty() {
        choices.push(typed(&numbers.falling, &["falls"]));
    }
    if !named.is_empty() {
        choices.push(json!({"type": "string", "enum": named}));
    }
    let check = match choices.len() {
        // Nothing to name yet: only a sensor declared in `checks` can be the check.
        0 => json!({"type": "string", "minLength": 1, "maxLength": 32}),
        1 => choices.remove(0),
        _ => json!({"anyOf": choices}),
    };
    schema["properties"]["subgoals"]["items"]["properties"]["postcondition"] = check.clone();
    schema["properties"]["checks"] = json!({
        "type": "array", "maxItems": crate::declare::MAX_PER_REPLY,
        "items": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 32},
                "reads": {"type": "string", "enum": ["present", "number", "colour", "expression"]},
                "mark": {"type": "integer", "minimum": 0},
                "colour": {"type": "string", "maxLength": 16},
                "expression": {"type": "string", "maxLength": 160}
            },
            "required": ["name", "reads"],
            "additionalProperties": false
        }
    });
    schema["properties"]["goal"] = check;
    let mut required = Vec::new();
    if need_goal {
        required.push(json!("goal"));
    }
    required.push(json!("subgoals"));
    schema["required"] = Value::Array(required);
    schema
}

/// The marks showing numbers a check may name: those that rise as a goal is done (a score), and the
/// counts of what is left, which fall.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Numbers {
    pub rising: Vec<u64>,
    pub falling: Vec<u64>,
}

impl Numbers {
    pub fn is_empty(&self) -> bool {
        self.rising.is_empty() && self.falling.is_empty()
    }
}

/// A declaring schema for a question that wants checks alone: no subgoals, the goal's check required.
pub fn without_subgoals(schema: &Value) -> Value {
    let mut s = schema.clone();
    if let Some(props) = s.get_mut("properties").and_then(Value::as_object_mut) {
        props.remove("subgoals");
        props.remove("research");
    }
    s["required"] = json!(["goal"]);
    s
}

/// The schema of the second look at an agent-declared goal check that turned true: is the goal met?
/// What the screen shows comes first (`evidence`, before `met` in the grammar's key order), so the
/// answer follows from it; with `met` first the small model answered, then copied the question.
pub fn goal_look_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "evidence": {"type": "string", "minLength": 3, "maxLength": 160},
            "met": {"type": "boolean"}
        },
        "required": ["evidence", "met"],
        "additionalProperties": false
    })
}

/// The second look's answer: met or not, and why in its words (`evidence`; `why` in older recordings).
pub fn goal_look_answer(value: &Value) -> Option<(bool, String)> {
    let met = value.get("met")?.as_bool()?;
    let why = value
        .get("evidence")
        .or_else(|| value.get("why"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_string();
    Some((met, why))
}

/// What becomes of a mark, in a typed goal or postcondition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Becomes {
    /// Its pixels are no longer there (a menu's button once the game started).
    Gone,
    /// The number it shows goes up (a score, a lines counter).
    Rises,
    /// The number it shows goes down (coins left, mines left, time left).
    Falls,
}

/// A goal or postcondition as a reply wrote it: a typed choice over a mark, or an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckChoice {
    Typed { mark: u64, becomes: Becomes },
    Expression(String),
}

/// The check a reply's value holds (a goal, or a subgoal's postcondition); `None` when absent or blank.
pub fn check_choice(value: &Value) -> Option<CheckChoice> {
    match value {
        Value::String(s) if !s.trim().is_empty() => Some(CheckChoice::Expression(s.trim().to_string())),
        Value::Object(o) => {
            let mark = o.get("mark")?.as_u64()?;
            let becomes = match o.get("then")?.as_str()? {
                "gone" => Becomes::Gone,
                "rises" => Becomes::Rises,
                "falls" => Becomes::Falls,
                _ => return None,
            };
            Some(CheckChoice::Typed { mark, becomes })
        }
        _ => None,
    }
}

/// The declarations and the goal check a reply wrote (absent: none).
pub fn declarations_from_reply(value: &Value) -> (Vec<crate::declare::SensorRequest>, Option<CheckChoice>) {
    let checks = value
        .get("checks")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|w| serde_json::from_value(w.clone()).ok())
                .collect()
        })
        .unwrap_or_default();
    (checks, value.get("goal").and_then(check_choice))
}

/// The postconditions a reply's subgoals name, in order (`None` where one is missing or malformed).
pub fn postcondition_choices(value: &Value) -> Vec<Option<CheckChoice>> {
    value
        .get("subgoals")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|s| s.get("postcondition").and_then(check_choice))
                .collect()
        })
        .unwrap_or_default()
}

/// The reply with each subgoal's postcondition replaced by its expression (`sources`, in order).
pub fn with_postconditions(value: &Value, sources: &[String]) -> Value {
    let mut v = value.clone();
    if let Some(items) = v.get_mut("subgoals").and_then(Value::as_array_mut) {
        for (item, source) in items.iter_mut().zip(sources) {
            item["postcondition"] = Value::String(source.clone());
        }
    }
    v
}

/// Longest research question a plan may carry.
pub const RESEARCH_QUESTION_MAX_CHARS: usize = 160;

/// The research question a deliberative reply wrote (FR-LOOP-006's research rung asks it when the ladder
/// gets there): trimmed, whitespace folded, cut to [`RESEARCH_QUESTION_MAX_CHARS`]; `None` when absent or
/// blank.
pub fn research_question(value: &Value) -> Option<String> {
    let q = value.get("research")?.as_str()?;
    let q: String = q
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(RESEARCH_QUESTION_MAX_CHARS)
        .collect();
    (q.chars().any(char::is_alphanumeric)).then_some(q)
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
            .map(str::trim)
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
                max_time_ms: it
                    .get("max_time_s")
                    .and_then(Value::as_u64)
                    .map(|s| s * 1000)
                    .or(SUBGOAL_BUDGET.max_time_ms),
                max_actions: it
                    .get("max_actions")
                    .and_then(Value::as_u64)
                    .map(|n| n as u32)
                    .or(SUBGOAL_BUDGET.max_actions),
            },
        });
    }
    let plan = PlanSpec { subgoals };
    plan.validate().map_err(|e| e.to_string())?;
    Ok(plan)
}

/// Whether a plan makes sense now: its subgoals reach different states — no two share a
/// postcondition or a description — and none is reached already. `already_true(source)` is the
/// postcondition's value on the latest reflex tick (`None`: undefined, never a reason to reject). `Err`
/// says why, in words the model reads when it is asked again.
pub fn plan_sense(spec: &PlanSpec, already_true: impl Fn(&str) -> Option<bool>) -> Result<(), String> {
    let key = |d: &str| d.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    for (i, s) in spec.subgoals.iter().enumerate() {
        for (j, o) in spec.subgoals[..i].iter().enumerate() {
            if o.postcondition.source == s.postcondition.source {
                return Err(format!(
                    "subgoals {} and {} both end at {:?}: each subgoal must reach a different state",
                    j + 1,
                    i + 1,
                    s.postcondition.source
                ));
            }
            if !s.description.trim().is_empty() && key(&o.description) == key(&s.description) {
                return Err(format!(
                    "subgoals {} and {} are both {:?}: each subgoal must be a different step",
                    j + 1,
                    i + 1,
                    s.description
                ));
            }
        }
        if already_true(&s.postcondition.source) == Some(true) {
            return Err(format!(
                "subgoal {} ends at {:?}, which is already true: plan only what is not done yet",
                i + 1,
                s.postcondition.source
            ));
        }
    }
    Ok(())
}

/// The sound part of a degenerate plan, for when the model was asked again and answered no better: the
/// subgoals in order, less any whose postcondition is already true or repeats an earlier one's
/// postcondition or description. `None` when nothing is left.
pub fn repair_plan(spec: &PlanSpec, already_true: impl Fn(&str) -> Option<bool>) -> Option<PlanSpec> {
    let key = |d: &str| d.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    let mut kept: Vec<SubgoalSpec> = Vec::new();
    for s in &spec.subgoals {
        let repeats = kept.iter().any(|k| {
            k.postcondition.source == s.postcondition.source
                || (!s.description.trim().is_empty() && key(&k.description) == key(&s.description))
        });
        if !repeats && already_true(&s.postcondition.source) != Some(true) {
            kept.push(s.clone());
        }
    }
    (!kept.is_empty()).then_some(PlanSpec { subgoals: kept })
}

/// The plan of last resort: when a pass leaves nothing sound to act on, the goal itself
/// becomes the one subgoal, ending at the first offered postcondition not yet true (the goal check leads
/// the offered list), so the tactical cadence keeps working toward the goal while the planner fails.
/// None when every offered postcondition is already true.
pub fn goal_plan(
    goal: &str,
    sources: &[String],
    id: SubgoalId,
    budget: Budget,
    already_true: impl Fn(&str) -> Option<bool>,
) -> Option<PlanSpec> {
    let (handle, source) = sources
        .iter()
        .enumerate()
        .find(|(_, s)| already_true(s) != Some(true))?;
    Some(PlanSpec {
        subgoals: vec![SubgoalSpec {
            id,
            description: goal.to_string(),
            postcondition: PostconditionRef {
                source: source.clone(),
                handle: handle as u64,
            },
            budget,
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(items: &[(&str, &str)]) -> PlanSpec {
        let post = Postconditions {
            sources: vec!["coins >= 1".into(), "in_menu".into(), "playing".into()],
        };
        let subgoals: Vec<Value> = items
            .iter()
            .map(|(d, p)| json!({"description": d, "postcondition": p}))
            .collect();
        plan_from_reply(&json!({ "subgoals": subgoals }), &post, 1).unwrap()
    }

    #[test]
    fn the_goal_itself_is_the_plan_of_last_resort() {
        // The demo clicked Play, the planner then only re-planned the done subgoal, and the
        // tactical cadence sat idle with no subgoal. The goal check leads; reached ones are passed over.
        let sources = vec!["coins >= 1".to_string(), "in_play".to_string()];
        let budget = Budget {
            max_time_ms: Some(60_000),
            max_actions: Some(10),
        };
        let plan = goal_plan("collect a coin", &sources, SubgoalId(9), budget, |s| {
            Some(s == "in_play")
        })
        .unwrap();
        assert_eq!(plan.subgoals.len(), 1);
        assert_eq!(plan.subgoals[0].id, SubgoalId(9));
        assert_eq!(plan.subgoals[0].description, "collect a coin");
        assert_eq!(plan.subgoals[0].postcondition.source, "coins >= 1");
        assert_eq!(plan.subgoals[0].postcondition.handle, 0);
        assert!(plan.validate().is_ok());
        let later = goal_plan("x", &sources, SubgoalId(1), budget, |s| Some(s == "coins >= 1")).unwrap();
        assert_eq!(later.subgoals[0].postcondition.handle, 1);
        assert!(goal_plan("x", &sources, SubgoalId(1), budget, |_| Some(true)).is_none());
    }

    #[test]
    fn a_degenerate_plan_is_refused_with_its_reason() {
        // Identical subgoals, a repeated postcondition, a postcondition already true.
        let never = |_: &str| Some(false);
        let good = spec(&[("click Play", "playing"), ("collect a coin", "coins >= 1")]);
        assert_eq!(plan_sense(&good, never), Ok(()));
        let same_post = spec(&[("click Play", "playing"), ("press Play", "playing")]);
        let e = plan_sense(&same_post, never).unwrap_err();
        assert!(e.contains("subgoals 1 and 2 both end at \"playing\""), "{e}");
        let same_text = spec(&[("Collect  a coin", "playing"), ("collect a coin", "coins >= 1")]);
        assert!(plan_sense(&same_text, never).unwrap_err().contains("are both"));
        let in_menu = |s: &str| Some(s == "in_menu");
        let done = spec(&[("go to the menu", "in_menu"), ("collect a coin", "coins >= 1")]);
        let e = plan_sense(&done, in_menu).unwrap_err();
        assert!(
            e.contains("subgoal 1 ends at \"in_menu\", which is already true"),
            "{e}"
        );
        // An undefined value (a sensor not read yet) is no reason to refuse.
        assert_eq!(plan_sense(&done, |_| None), Ok(()));
        // Repaired: repeats and reached subgoals dropped, the rest kept in order; nothing left is None.
        let fixed = repair_plan(&same_post, never).unwrap();
        assert_eq!(fixed.subgoals.len(), 1);
        assert_eq!(fixed.subgoals[0].description, "click Play");
        let fixed = repair_plan(&done, in_menu).unwrap();
        assert_eq!(fixed.subgoals[0].postcondition.source, "coins >= 1");
        let only_done = spec(&[("go to the menu", "in_menu")]);
        assert_eq!(repair_plan(&only_done, in_menu), None);
    }

    #[test]
    fn plan_reply_maps_postconditions_to_handles_and_budgets() {
        // FR-LOOP-004: every subgoal carries a checkable postcondition and a budget.
        let post = Postconditions {
            sources: vec!["coins >= 3".into(), "in_menu".into()],
        };
        let v = json!({"subgoals": [
            {"description": "leave the menu", "postcondition": "in_menu"},
            {"description": "collect", "postcondition": "coins >= 3"}
        ]});
        gamepilot_context::validate(&plan_schema(&post), &v).unwrap();
        let plan = plan_from_reply(&v, &post, 10).unwrap();
        assert_eq!(plan.subgoals[0].id, SubgoalId(10));
        assert_eq!(plan.subgoals[0].postcondition.handle, 1);
        // The model writes no budget: each subgoal gets the session's.
        assert!(plan.subgoals.iter().all(|s| s.budget == SUBGOAL_BUDGET));
        let budgeted = json!({"subgoals": [
            {"description": "collect", "postcondition": "coins >= 3", "max_actions": 20, "max_time_s": 120}
        ]});
        assert!(
            gamepilot_context::validate(&plan_schema(&post), &budgeted).is_err(),
            "the grammar spends no tokens on a budget"
        );
        // A reply recorded before keeps the budget it wrote.
        let recorded = plan_from_reply(&budgeted, &post, 1).unwrap();
        assert_eq!(recorded.subgoals[0].budget.max_time_ms, Some(120_000));
        assert_eq!(recorded.subgoals[0].budget.max_actions, Some(20));
        assert_eq!(research_question(&v), None);
        let asked = json!({"subgoals": v["subgoals"], "research": "  how do I  open the gate?\n"});
        gamepilot_context::validate(&plan_schema(&post), &asked).unwrap();
        assert_eq!(
            research_question(&asked).as_deref(),
            Some("how do I open the gate?")
        );
        assert_eq!(research_question(&json!({"research": " ? "})), None);
        let long = json!({"subgoals": v["subgoals"], "research": "x".repeat(200)});
        assert!(gamepilot_context::validate(&plan_schema(&post), &long).is_err());
        let bad = json!({"subgoals": [{"description": "x", "postcondition": "health > 0"}]});
        assert!(
            gamepilot_context::validate(&plan_schema(&post), &bad).is_err(),
            "an unoffered postcondition is unrepresentable"
        );
    }
}
