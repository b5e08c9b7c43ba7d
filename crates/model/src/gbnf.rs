//! A compact llama.cpp grammar (GBNF) for a reply schema: the same choices as the JSON schema, with
//! no whitespace between tokens, so a small model spends its decode steps on the answer, not on
//! pretty-printing (issue 16 item 3: `{"action":"click_mark","mark":3}` is 15 tokens instead of 24–39).
//!
//! Only the subset of JSON Schema that gamepilot's reply schemas use is compiled: `anyOf`/`oneOf` of
//! objects with `properties` (required first, then optional ones, each in the schema's order), `const`,
//! `enum` of strings or integers, bounded `integer` and `number`, `string` with `maxLength`, `boolean`,
//! and arrays of those. Anything else yields `None`, and the caller sends the JSON schema instead. A
//! grammar only narrows decoding: every reply is still validated against the JSON schema afterwards, so
//! bounds the grammar does not express exactly (an integer range) are caught there.

use serde_json::Value;

/// The grammar, or `None` when the schema uses something this compiler does not express.
pub fn compact_grammar(schema: &Value) -> Option<String> {
    let mut g = Grammar::default();
    let root = g.value(schema)?;
    let mut out = format!("root ::= {root}\n");
    for (name, body) in &g.rules {
        out.push_str(&format!("{name} ::= {body}\n"));
    }
    Some(out)
}

#[derive(Default)]
struct Grammar {
    rules: Vec<(String, String)>,
}

/// A GBNF string literal of `text` (quoted, with `"` and `\` escaped).
fn literal(text: &str) -> String {
    let mut s = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// The literal of a JSON value as it is written in a reply.
fn json_literal(v: &Value) -> Option<String> {
    match v {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => {
            Some(literal(&serde_json::to_string(v).ok()?))
        }
        _ => None,
    }
}

/// Digits of a non-negative bound: `[0-9]{1,N}` with N the bound's digit count.
fn digits(max_abs: f64) -> String {
    let n = if max_abs.is_finite() && max_abs >= 1.0 {
        (max_abs.log10().floor() as usize + 1).min(12)
    } else if max_abs.is_finite() {
        1
    } else {
        12
    };
    if n == 1 {
        "[0-9]".into()
    } else {
        format!("[0-9]{{1,{n}}}")
    }
}

impl Grammar {
    fn rule(&mut self, body: String) -> String {
        if let Some((name, _)) = self.rules.iter().find(|(_, b)| *b == body) {
            return name.clone();
        }
        let name = format!("r{}", self.rules.len());
        self.rules.push((name.clone(), body));
        name
    }

    fn alternatives(&mut self, items: &[Value]) -> Option<String> {
        let alts: Option<Vec<String>> = items.iter().map(|v| self.value(v)).collect();
        let alts = alts?;
        if alts.is_empty() {
            return None;
        }
        Some(self.rule(alts.join(" | ")))
    }

    fn value(&mut self, s: &Value) -> Option<String> {
        let obj = s.as_object()?;
        if let Some(c) = obj.get("const") {
            return json_literal(c);
        }
        if let Some(e) = obj.get("enum").and_then(Value::as_array) {
            let alts: Option<Vec<String>> = e.iter().map(json_literal).collect();
            let alts = alts?;
            if alts.is_empty() {
                return None;
            }
            return Some(self.rule(alts.join(" | ")));
        }
        if let Some(items) = obj
            .get("anyOf")
            .or_else(|| obj.get("oneOf"))
            .and_then(Value::as_array)
        {
            return self.alternatives(items);
        }
        let bound = |k: &str| obj.get(k).and_then(Value::as_f64);
        match obj.get("type").and_then(Value::as_str)? {
            "object" => self.object(obj),
            "integer" | "number" => {
                let lo = bound("minimum").unwrap_or(f64::NEG_INFINITY);
                let hi = bound("maximum").unwrap_or(f64::INFINITY);
                let mag = lo.abs().max(hi.abs());
                let sign = if lo < 0.0 { "\"-\"? " } else { "" };
                let frac = if obj.get("type").and_then(Value::as_str) == Some("number") {
                    " (\".\" [0-9]{1,3})?"
                } else {
                    ""
                };
                Some(self.rule(format!("{sign}{}{frac}", digits(mag))))
            }
            "string" => {
                if obj.contains_key("pattern") || obj.contains_key("format") {
                    return None;
                }
                let max = obj
                    .get("maxLength")
                    .and_then(Value::as_u64)
                    .unwrap_or(256)
                    .min(2000);
                let min = obj.get("minLength").and_then(Value::as_u64).unwrap_or(0).min(max);
                Some(self.rule(format!("\"\\\"\" [^\"\\\\\\x00-\\x1f]{{{min},{max}}} \"\\\"\"")))
            }
            "boolean" => Some(self.rule("\"true\" | \"false\"".into())),
            "array" => {
                let item = self.value(obj.get("items")?)?;
                let max = obj.get("maxItems").and_then(Value::as_u64).unwrap_or(16).min(64);
                let min = obj.get("minItems").and_then(Value::as_u64).unwrap_or(0).min(max);
                let body = if max == 0 {
                    "\"[]\"".to_string()
                } else if min == 0 {
                    format!("\"[\" ({item} (\",\" {item}){{0,{}}})? \"]\"", max - 1)
                } else {
                    format!("\"[\" {item} (\",\" {item}){{{},{}}} \"]\"", min - 1, max - 1)
                };
                Some(self.rule(body))
            }
            _ => None,
        }
    }

    fn object(&mut self, obj: &serde_json::Map<String, Value>) -> Option<String> {
        let props = obj.get("properties").and_then(Value::as_object)?;
        let required: Vec<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut parts: Vec<String> = Vec::new();
        for (name, sub) in props.iter().filter(|(k, _)| required.contains(&k.as_str())) {
            let v = self.value(sub)?;
            let key = literal(&format!("{}:", serde_json::to_string(name).ok()?));
            parts.push(format!("{key} {v}"));
        }
        if parts.is_empty() {
            return None;
        }
        let mut body = format!("\"{{\" {}", parts.join(" \",\" "));
        for (name, sub) in props.iter().filter(|(k, _)| !required.contains(&k.as_str())) {
            let v = self.value(sub)?;
            let key = literal(&format!(",{}:", serde_json::to_string(name).ok()?));
            body.push_str(&format!(" ({key} {v})?"));
        }
        body.push_str(" \"}\"");
        Some(self.rule(body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_schema_becomes_a_grammar_without_whitespace() {
        // FR-MODEL-003, issue 16 item 3: the same choices, no room for pretty-printing
        let s = json!({"anyOf": [
            {"type":"object","properties":{"action":{"type":"string","const":"click_mark"},"mark":{"type":"integer","enum":[3,7]}},"required":["action","mark"],"additionalProperties":false},
            {"type":"object","properties":{"action":{"type":"string","const":"click"},"x":{"type":"integer","minimum":0,"maximum":1279},"y":{"type":"integer","minimum":0,"maximum":719},"button":{"type":"string","enum":["left","right"]}},"required":["action","x","y"]},
            {"type":"object","properties":{"action":{"const":"key"},"key":{"type":"string","minLength":1,"maxLength":16}},"required":["action","key"]},
            {"type":"object","properties":{"action":{"const":"camera_degrees"},"yaw":{"type":"number","minimum":-180,"maximum":180}},"required":["action","yaw"]}
        ]});
        let g = compact_grammar(&s).unwrap();
        assert!(g.starts_with("root ::= r"), "{g}");
        assert!(
            g.contains(r#""{" "\"action\":" "\"click_mark\"" "," "\"mark\":" r"#),
            "{g}"
        );
        assert!(g.contains(r#""3" | "7""#), "{g}");
        assert!(
            g.contains(r#"("," "\"button\":" "#) || g.contains(r#"(",\"button\":" "#),
            "{g}"
        );
        assert!(g.contains("[0-9]{1,4}"), "{g}");
        assert!(g.contains("\"-\"? [0-9]{1,3} (\".\" [0-9]{1,3})?"), "{g}");
        assert!(
            !g.contains("[ \\t") && !g.contains("space"),
            "no whitespace rule: {g}"
        );
    }

    #[test]
    fn what_the_compiler_does_not_express_falls_back_to_the_json_schema() {
        // the caller then sends response_format: nothing is silently loosened
        assert_eq!(compact_grammar(&json!({"type":"string","pattern":"^a+$"})), None);
        assert_eq!(compact_grammar(&json!({"type":"object","properties":{}})), None);
        assert_eq!(compact_grammar(&json!({"enum":[]})), None);
        assert_eq!(compact_grammar(&json!({"$ref":"#/x"})), None);
    }

    #[test]
    fn literals_escape_quotes_and_backslashes() {
        assert_eq!(literal(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(json_literal(&json!("x")).unwrap(), r#""\"x\"""#);
    }
}
