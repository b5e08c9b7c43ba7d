//! A small JSON Schema validator for the subset the schema builder emits (type, const, enum, bounds,
//! lengths, properties/required/additionalProperties, items, anyOf/oneOf). Hosts enforce the schema
//! through a grammar; this re-checks the reply, so a host that ignores `response_format` is caught and
//! the violation can be fed back to the model with a precise message.

use crate::ContextError;
use serde_json::Value;

/// Checks `value` against `schema`; the error names the JSON path and the broken rule.
pub fn validate(schema: &Value, value: &Value) -> Result<(), ContextError> {
    check(schema, value, "$").map_err(|(path, reason)| ContextError::SchemaViolation { path, reason })
}

type Fail = (String, String);

fn fail(path: &str, reason: impl Into<String>) -> Result<(), Fail> {
    Err((path.to_string(), reason.into()))
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => false,
    }
}

fn check(schema: &Value, v: &Value, path: &str) -> Result<(), Fail> {
    let Some(s) = schema.as_object() else {
        // `true` admits everything, `false` nothing.
        return match schema.as_bool() {
            Some(false) => fail(path, "no value is allowed here"),
            _ => Ok(()),
        };
    };

    if let Some(alts) = s
        .get("anyOf")
        .or_else(|| s.get("oneOf"))
        .and_then(Value::as_array)
    {
        let one_of = s.contains_key("oneOf") && !s.contains_key("anyOf");
        let mut errors = Vec::new();
        let mut matched = 0;
        for a in alts {
            match check(a, v, path) {
                Ok(()) => matched += 1,
                Err(e) => errors.push((a, e)),
            }
        }
        if matched == 0 {
            // Name the branch the reply evidently meant (same `action` const), else list the options.
            let action = v.get("action").and_then(Value::as_str);
            let meant = errors.iter().find(|(a, _)| {
                action.is_some() && a.pointer("/properties/action/const").and_then(Value::as_str) == action
            });
            return match meant {
                Some((_, e)) => Err(e.clone()),
                None => {
                    let names: Vec<&str> = alts
                        .iter()
                        .filter_map(|a| a.pointer("/properties/action/const").and_then(Value::as_str))
                        .collect();
                    if names.is_empty() {
                        fail(path, format!("matches none of the {} alternatives", alts.len()))
                    } else {
                        fail(path, format!("\"action\" must be one of {}", names.join(", ")))
                    }
                }
            };
        }
        if one_of && matched > 1 {
            return fail(path, format!("matches {matched} alternatives of a oneOf"));
        }
    }

    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(t) => type_ok(t, v),
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(|t| type_ok(t, v)),
            _ => true,
        };
        if !ok {
            return fail(path, format!("expected type {t}, got {v}"));
        }
    }
    if let Some(c) = s.get("const") {
        if !json_eq(c, v) {
            return fail(path, format!("must be {c}, got {v}"));
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        if !e.iter().any(|x| json_eq(x, v)) {
            let allowed: Vec<String> = e.iter().map(Value::to_string).collect();
            return fail(path, format!("{v} is not one of [{}]", allowed.join(", ")));
        }
    }
    if let Some(n) = v.as_f64() {
        if let Some(min) = s.get("minimum").and_then(Value::as_f64) {
            if n < min {
                return fail(path, format!("{v} is below the minimum {min}"));
            }
        }
        if let Some(max) = s.get("maximum").and_then(Value::as_f64) {
            if n > max {
                return fail(path, format!("{v} is above the maximum {max}"));
            }
        }
    }
    if let Some(text) = v.as_str() {
        let len = text.chars().count() as u64;
        if let Some(min) = s.get("minLength").and_then(Value::as_u64) {
            if len < min {
                return fail(path, format!("string is {len} characters, at least {min} needed"));
            }
        }
        if let Some(max) = s.get("maxLength").and_then(Value::as_u64) {
            if len > max {
                return fail(path, format!("string is {len} characters, at most {max} allowed"));
            }
        }
    }
    if let Some(obj) = v.as_object() {
        let props = s.get("properties").and_then(Value::as_object);
        if let Some(req) = s.get("required").and_then(Value::as_array) {
            for r in req.iter().filter_map(Value::as_str) {
                if !obj.contains_key(r) {
                    return fail(path, format!("missing required property \"{r}\""));
                }
            }
        }
        for (k, val) in obj {
            let sub = format!("{path}.{k}");
            match props.and_then(|p| p.get(k)) {
                Some(ps) => check(ps, val, &sub)?,
                None => match s.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        return fail(path, format!("property \"{k}\" is not allowed"))
                    }
                    Some(extra @ Value::Object(_)) => check(extra, val, &sub)?,
                    _ => {}
                },
            }
        }
    }
    if let (Some(items), Some(arr)) = (s.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            check(items, x, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

/// Equality with integers and floats of the same value treated as equal (3 == 3.0).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if a.is_number() && b.is_number() => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_path_and_rule() {
        let s = json!({"type":"object","properties":{"a":{"type":"integer","maximum":3}},"required":["a"]});
        assert!(validate(&s, &json!({"a": 3})).is_ok());
        assert_eq!(
            validate(&s, &json!({"a": 4})),
            Err(ContextError::SchemaViolation {
                path: "$.a".into(),
                reason: "4 is above the maximum 3".into()
            })
        );
        assert!(validate(&s, &json!({}))
            .unwrap_err()
            .to_string()
            .contains("missing required property \"a\""));
        assert!(validate(&s, &json!("x")).is_err());
    }

    #[test]
    fn any_of_reports_the_intended_branch() {
        let s = json!({"anyOf":[
            {"type":"object","properties":{"action":{"const":"a"},"n":{"enum":[1,2]}},"required":["action","n"]},
            {"type":"object","properties":{"action":{"const":"b"}},"required":["action"]}
        ]});
        let e = validate(&s, &json!({"action":"a","n":5}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("5 is not one of [1, 2]"), "{e}");
        let e = validate(&s, &json!({"action":"zz"})).unwrap_err().to_string();
        assert!(e.contains("one of a, b"), "{e}");
    }
}
