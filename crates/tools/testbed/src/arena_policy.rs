//! The policies of `corpus/sessions/scripted-host.py` ported to [`ScriptedHost`](crate::ScriptedHost):
//! answer gamepilot's planner and tactical calls for the practice arena without a language model (click
//! Play while the menu shows, then wander / walk into the wall / dither / sweep). The walk is seeded but
//! does not reproduce the Python script's random sequence.

use crate::host::{ReceivedChat, Reply};
use serde_json::{json, Value};
use std::sync::Mutex;
use std::time::Duration;

/// What the tactical calls do once the game is in play.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArenaMove {
    /// Hold movement keys in a pseudo-random walk (collects coins).
    Wander,
    /// Keep walking left, into the arena's wall (stasis while acting).
    Wall,
    /// Alternate two short taps (a repeating cycle).
    Dither,
    /// Sweep the field below the spawn point row by row (collects coins).
    Sweep,
}

/// The ported policy: build one with [`arena_policy`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArenaPolicy {
    pub moves: ArenaMove,
    pub seed: u64,
    /// How long a plan takes (the script: 2 s, so that an instant plan does not replan in a busy loop).
    pub plan_delay: Duration,
    /// How long a tactical call takes (the script: 0.3 s).
    pub tactical_delay: Duration,
}

impl ArenaPolicy {
    pub fn new(moves: ArenaMove) -> Self {
        ArenaPolicy {
            moves,
            seed: 1,
            plan_delay: Duration::from_secs(2),
            tactical_delay: Duration::from_millis(300),
        }
    }
}

#[derive(Default)]
struct Counters {
    tactical: u64,
    sweep: Option<u64>,
    rng: u64,
}

/// The policy as a closure for [`ScriptedHost::start`](crate::ScriptedHost::start).
pub fn arena_policy(p: ArenaPolicy) -> impl Fn(&ReceivedChat) -> Reply + Send + Sync + 'static {
    let state = Mutex::new(Counters {
        rng: p.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
        ..Counters::default()
    });
    move |req| {
        let empty = json!({});
        let schema = req.schema().unwrap_or(&empty);
        let user = req.user_text();
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        if req.system_text().contains("deliberative planner") {
            Reply::delay(p.plan_delay, Reply::json(&plan(&user, schema)))
        } else {
            Reply::delay(
                p.tactical_delay,
                Reply::json(&tactical(p.moves, &mut st, &user, schema)),
            )
        }
    }
}

/// The current frame's listing as the prompt tells it: its baseline with the tail's news applied.
fn observation(user: &str) -> String {
    if user.contains("Current observation") {
        gamepilot_context::tail::current_listing(user).join("\n")
    } else {
        user.to_string()
    }
}

fn plan(user: &str, schema: &Value) -> Value {
    let offered: Vec<String> = schema
        .pointer("/properties/subgoals/items/properties/postcondition/enum")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_else(|| vec!["in_play".into(), "collected".into()]);
    let mut coins: Vec<&String> = offered.iter().filter(|p| p.starts_with("coins >=")).collect();
    if coins.is_empty() {
        coins = offered.iter().filter(|p| *p != "in_play").collect();
    }
    let collect = json!({
        "description": "Walk around and collect coins",
        "postcondition": coins.last().map(|s| s.as_str()).unwrap_or("collected"),
    });
    let obs = &observation(user);
    if obs.contains("PRACTICE ARENA") || obs.contains("nothing observed yet") {
        let start = json!({
            "description": "Click Play to start the game",
            "postcondition": "in_play",
        });
        return json!({"subgoals": [start, collect]});
    }
    json!({"subgoals": [collect]})
}

fn alternatives(schema: &Value) -> impl Iterator<Item = &Value> {
    schema
        .get("anyOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn tool_names(schema: &Value) -> Vec<&str> {
    alternatives(schema)
        .filter_map(|a| a.pointer("/properties/action/const").and_then(Value::as_str))
        .collect()
}

fn allowed_marks(schema: &Value) -> Vec<u64> {
    alternatives(schema)
        .find(|a| a.pointer("/properties/action/const").and_then(Value::as_str) == Some("click_mark"))
        .and_then(|a| a.pointer("/properties/mark/enum").and_then(Value::as_array))
        .map(|e| e.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

/// `[MARK] rect ["LABEL"] at X,Y` entries of an observation: mark, box centre, label.
fn rects(obs: &str) -> Vec<(u64, u64, u64, Option<String>)> {
    let mut out = Vec::new();
    for line in obs.lines() {
        let Some(rest) = line.strip_prefix('[') else {
            continue;
        };
        let Some((mark, rest)) = rest.split_once("] rect") else {
            continue;
        };
        let Some((middle, at)) = rest.rsplit_once(" at ") else {
            continue;
        };
        let label = middle.split('"').nth(1).map(str::to_string);
        let parsed: Vec<u64> = at.split(',').filter_map(|n| n.trim().parse().ok()).collect();
        if let (Ok(mark), [x, y]) = (mark.parse::<u64>(), parsed.as_slice()) {
            out.push((mark, *x, *y, label));
        }
    }
    out
}

fn next_random(st: &mut Counters) -> u64 {
    // xorshift64*
    st.rng ^= st.rng >> 12;
    st.rng ^= st.rng << 25;
    st.rng ^= st.rng >> 27;
    st.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32
}

fn tactical(moves: ArenaMove, st: &mut Counters, user: &str, schema: &Value) -> Value {
    st.tactical += 1;
    let obs = &observation(user);
    if obs.contains("PRACTICE ARENA") {
        // the menu: the Play button is the rect labelled Play, else the topmost rect (its label is not
        // always read while hovered)
        let all = rects(obs);
        let play = all
            .iter()
            .find(|r| r.3.as_deref().is_some_and(|l| l.contains("Play")))
            .or_else(|| all.iter().min_by_key(|r| r.2));
        if let Some((mark, x, y, _)) = play {
            if allowed_marks(schema).contains(mark) {
                return json!({"action": "click_mark", "mark": mark});
            }
            if tool_names(schema).contains(&"click") {
                return json!({"action": "click", "x": x, "y": y, "button": "left"});
            }
        }
    }
    match moves {
        ArenaMove::Wall => json!({"action": "hold_key", "key": "a", "duration_ms": 2500}),
        ArenaMove::Sweep => {
            // rows 1600 px wide, 70 px apart, below the spawn point: about one coin every 20 s
            let k = st.sweep.map_or(0, |k| k + 1);
            st.sweep = Some(k);
            if k == 0 {
                json!({"action": "hold_key", "key": "a", "duration_ms": 4000})
            } else if k % 2 == 1 {
                json!({"action": "hold_key", "key": "s", "duration_ms": 350})
            } else {
                let key = if (k / 2) % 2 == 1 { "d" } else { "a" };
                json!({"action": "hold_key", "key": key, "duration_ms": 8000})
            }
        }
        ArenaMove::Dither => {
            json!({"action": "key", "key": if st.tactical % 2 == 1 { "q" } else { "e" }})
        }
        ArenaMove::Wander => {
            const KEYS: [&str; 6] = ["w", "a", "s", "d", "w", "d"];
            const HOLDS: [u64; 4] = [600, 900, 1200, 1800];
            let key = KEYS[(next_random(st) % KEYS.len() as u64) as usize];
            let hold = HOLDS[(next_random(st) % HOLDS.len() as u64) as usize];
            json!({"action": "hold_key", "key": key, "duration_ms": hold})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn req(system: &str, user: &str, schema: Value) -> ReceivedChat {
        ReceivedChat {
            body: json!({
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                "response_format": {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}},
            }),
            index: 0,
            prompt_tokens: 0,
            cached_tokens: 0,
            at: Instant::now(),
        }
    }

    fn content(r: Reply) -> Value {
        match r {
            Reply::Delay(_, inner) => content(*inner),
            Reply::Content(c) => serde_json::from_str(&c).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    fn fast(moves: ArenaMove) -> ArenaPolicy {
        ArenaPolicy {
            plan_delay: Duration::ZERO,
            tactical_delay: Duration::ZERO,
            ..ArenaPolicy::new(moves)
        }
    }

    #[test]
    fn plans_start_the_game_then_collect_toward_the_offered_check() {
        let policy = arena_policy(fast(ArenaMove::Wander));
        let schema = json!({"properties": {"subgoals": {"items": {"properties": {"postcondition": {
            "enum": ["in_play", "coins >= 1", "coins >= 3"]
        }}}}}});
        let system = "You are the deliberative planner of gamepilot";
        let menu = content(policy(&req(
            system,
            "Current observation:\nPRACTICE ARENA",
            schema.clone(),
        )));
        assert_eq!(menu["subgoals"][0]["postcondition"], "in_play");
        assert_eq!(menu["subgoals"][1]["postcondition"], "coins >= 3");
        let field = content(policy(&req(system, "Current observation:\nscore 0", schema)));
        assert_eq!(field["subgoals"].as_array().unwrap().len(), 1);
        assert!(matches!(
            policy(&req(system, "x", json!({}))),
            Reply::Delay(d, _) if d == Duration::ZERO
        ));
    }

    #[test]
    fn tactical_calls_click_play_then_move() {
        let schema = json!({"anyOf": [
            {"properties": {"action": {"const": "click_mark"}, "mark": {"enum": [2, 5]}}},
            {"properties": {"action": {"const": "click"}}},
            {"properties": {"action": {"const": "hold_key"}}},
        ]});
        let menu = "Current observation:\nPRACTICE ARENA\n[5] rect at 60,320\n[2] rect at 60,220";
        let policy = arena_policy(fast(ArenaMove::Wall));
        assert_eq!(
            content(policy(&req("tactical", menu, schema.clone()))),
            json!({"action": "click_mark", "mark": 2})
        );
        let no_marks = json!({"anyOf": [{"properties": {"action": {"const": "click"}}}]});
        assert_eq!(
            content(policy(&req("tactical", menu, no_marks))),
            json!({"action": "click", "x": 60, "y": 220, "button": "left"})
        );
        assert_eq!(
            content(policy(&req(
                "tactical",
                "Current observation:\nfield",
                schema.clone()
            )))["key"],
            "a"
        );

        let dither = arena_policy(fast(ArenaMove::Dither));
        let keys: Vec<Value> = (0..4)
            .map(|_| content(dither(&req("t", "field", schema.clone())))["key"].clone())
            .collect();
        assert_eq!(keys, [json!("q"), json!("e"), json!("q"), json!("e")]);

        let sweep = arena_policy(fast(ArenaMove::Sweep));
        let steps: Vec<(Value, Value)> = (0..5)
            .map(|_| {
                let v = content(sweep(&req("t", "field", schema.clone())));
                (v["key"].clone(), v["duration_ms"].clone())
            })
            .collect();
        assert_eq!(
            steps,
            [
                (json!("a"), json!(4000)),
                (json!("s"), json!(350)),
                (json!("d"), json!(8000)),
                (json!("s"), json!(350)),
                (json!("a"), json!(8000)),
            ]
        );

        let wander = arena_policy(fast(ArenaMove::Wander));
        let walk: Vec<Value> = (0..20)
            .map(|_| content(wander(&req("t", "field", schema.clone()))))
            .collect();
        assert!(walk.iter().all(|v| v["action"] == "hold_key"));
        let distinct: std::collections::BTreeSet<String> = walk
            .iter()
            .map(|v| v["key"].as_str().unwrap().to_string())
            .collect();
        assert!(distinct.len() >= 3, "{distinct:?}");
    }
}
