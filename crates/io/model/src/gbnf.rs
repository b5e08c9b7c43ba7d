//! A compact llama.cpp grammar (GBNF) for a reply schema: the same choices as the JSON schema, with
//! no whitespace between tokens, so a small model spends its decode steps on the answer, not on
//! pretty-printing (`{"action":"click_mark","mark":3}` is 15 tokens instead of 24–39).
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

/// A sequence of digit ranges (`[1-3][0-9]`): the numbers whose digits fall in each range in turn.
type DigitSeq = Vec<(u8, u8)>;

/// The canonical decimal numbers from `lo` to `hi` (same digit count `n`) as digit sequences.
fn same_length(lo: &[u8], hi: &[u8]) -> Vec<DigitSeq> {
    let n = lo.len();
    if n == 0 {
        return vec![Vec::new()];
    }
    if n == 1 {
        return vec![vec![(lo[0], hi[0])]];
    }
    let (l0, h0) = (lo[0], hi[0]);
    let prefixed = |d: (u8, u8), rest: Vec<DigitSeq>| -> Vec<DigitSeq> {
        rest.into_iter()
            .map(|mut r| {
                r.insert(0, d);
                r
            })
            .collect()
    };
    if l0 == h0 {
        return prefixed((l0, l0), same_length(&lo[1..], &hi[1..]));
    }
    let zeros = vec![0u8; n - 1];
    let nines = vec![9u8; n - 1];
    let mut out = Vec::new();
    let (mut from, mut to) = (l0, h0);
    if lo[1..] != zeros[..] {
        out.extend(prefixed((l0, l0), same_length(&lo[1..], &nines)));
        from = l0 + 1;
    }
    let tail_hi = hi[1..] != nines[..];
    if tail_hi {
        to = h0 - 1;
    }
    if from <= to {
        let mut full = vec![(from, to)];
        full.extend(std::iter::repeat_n((0, 9), n - 1));
        out.push(full);
    }
    if tail_hi {
        out.extend(prefixed((h0, h0), same_length(&zeros, &hi[1..])));
    }
    out
}

fn digits_of(v: u64) -> Vec<u8> {
    v.to_string().bytes().map(|b| b - b'0').collect()
}

/// The canonical decimal numbers from `lo` to `hi` (no leading zeros) as digit sequences.
fn range_seqs(lo: u64, hi: u64) -> Vec<DigitSeq> {
    if lo > hi {
        return Vec::new();
    }
    let (dl, dh) = (digits_of(lo), digits_of(hi));
    if dl.len() == dh.len() {
        return same_length(&dl, &dh);
    }
    let mut out = Vec::new();
    let mut start = lo;
    for len in dl.len()..=dh.len() {
        let top = if len == dh.len() {
            hi
        } else {
            10u64.pow(len as u32) - 1
        };
        out.extend(same_length(&digits_of(start), &digits_of(top)));
        start = top + 1;
    }
    out
}

fn render_seqs(seqs: &[DigitSeq]) -> String {
    let class = |&(a, b): &(u8, u8)| {
        if a == b {
            format!("\"{a}\"")
        } else {
            format!("[{a}-{b}]")
        }
    };
    seqs.iter()
        .map(|s| s.iter().map(class).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(" | ")
}

/// An integer between `lo` and `hi` inclusive, exactly (what llama.cpp's own schema conversion
/// enforces: a plan's `max_time_s` below its minimum must not be expressible).
fn integer_range(lo: i64, hi: i64) -> Option<String> {
    if lo > hi {
        return None;
    }
    let mut alts = Vec::new();
    if lo < 0 {
        let neg_hi = lo.unsigned_abs();
        let neg_lo = if hi < 0 { hi.unsigned_abs() } else { 1 };
        alts.push(format!("\"-\" ({})", render_seqs(&range_seqs(neg_lo, neg_hi))));
    }
    if hi >= 0 {
        alts.push(render_seqs(&range_seqs(lo.max(0) as u64, hi as u64)));
    }
    Some(alts.join(" | "))
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
            "integer" if bound("minimum").is_some() && bound("maximum").is_some() => {
                let lo = bound("minimum").unwrap_or(0.0).ceil() as i64;
                let hi = bound("maximum").unwrap_or(0.0).floor() as i64;
                Some(self.rule(integer_range(lo, hi)?))
            }
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
        // FR-MODEL-003: the same choices, no room for pretty-printing
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
        assert!(g.contains("[1-9] [0-9] [0-9]"), "x up to 1279: {g}");
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

    /// Whether `text` matches one of the digit sequences (the grammar's alternatives).
    fn accepts(seqs: &[DigitSeq], text: &str) -> bool {
        let d: Vec<u8> = text.bytes().map(|b| b - b'0').collect();
        seqs.iter()
            .any(|s| s.len() == d.len() && s.iter().zip(&d).all(|(&(a, b), &x)| a <= x && x <= b))
    }

    #[test]
    fn integer_ranges_are_exact() {
        // a plan's max_time_s of 10 under a minimum of 30 is not expressible (the schema's bound)
        for (lo, hi) in [
            (0u64, 9),
            (1, 10_000),
            (30, 600),
            (3, 50),
            (0, 1279),
            (17, 23),
            (100, 100),
            (5, 1005),
        ] {
            let seqs = range_seqs(lo, hi);
            for v in 0..12_000u64 {
                assert_eq!(
                    accepts(&seqs, &v.to_string()),
                    (lo..=hi).contains(&v),
                    "{v} in {lo}..={hi}"
                );
            }
            assert!(!accepts(&seqs, &format!("0{lo}")), "no leading zero");
        }
        assert_eq!(integer_range(-2, 3).unwrap(), "\"-\" ([1-2]) | [0-3]");
        assert_eq!(integer_range(-9, -3).unwrap(), "\"-\" ([3-9])");
        assert_eq!(integer_range(5, 4), None);
    }

    #[test]
    fn literals_escape_quotes_and_backslashes() {
        assert_eq!(literal(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(json_literal(&json!("x")).unwrap(), r#""\"x\"""#);
    }
}
