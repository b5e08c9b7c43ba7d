//! The structural lints: single input call site, crates in their layers' folders, dependency firewall, recordings write-only, file docs,
//! the runtime's layering under the session, comments that say why rather than which issue, one
//! definition per concept, the crate map in step with the files, and records written as types.

use anyhow::Context as _;
use std::path::Path;
use std::process::Command;

/// The layers, each a folder under `crates/`: pure logic, IO edges, the binary, and the tools. A crate's
/// folder says its layer; the logic folder's crates are the ones the dependency firewall holds pure.
const LAYERS: &[&str] = &["logic", "io", "apps", "tools"];

/// The pure layer's folder: no X11, no network, no async runtime in any crate under it.
const LOGIC_DIR: &str = "crates/logic";

const FORBIDDEN_IN_LOGIC: &[&str] = &[
    "x11rb",
    "ureq",
    "reqwest",
    "tokio",
    "hyper",
    "tesseract",
    "ort",
    "zbus",
];

/// The one file allowed to synthesise input (FR-ACT-008).
const INPUT_CALL_SITE: &str = "crates/io/x11/src/input.rs";

/// Input-synthesis APIs; assembled at run time so this file does not match itself.
fn synthesis_patterns() -> Vec<String> {
    vec![
        ["xtest_", "fake_input"].concat(),
        ["XTest", "Fake"].concat(),
        ["/dev/", "uinput"].concat(),
        ["xdo", "tool key"].concat(),
        ["xdo", "tool mousemove"].concat(),
        ["xdo", "tool click"].concat(),
    ]
}

pub fn run(root: &Path) -> anyhow::Result<i32> {
    let mut failures = Vec::new();
    single_input_call_site(root, &mut failures)?;
    file_docs(root, &mut failures)?;
    crates_in_layers(root, &mut failures)?;
    dependency_firewall(root, &mut failures)?;
    recordings_write_only(root, &mut failures)?;
    runtime_through_session(root, &mut failures)?;
    no_issue_numbers(root, &mut failures)?;
    one_definition_per_concept(root, &mut failures)?;
    crate_map_in_step(root, &mut failures)?;
    records_are_typed(root, &mut failures)?;
    no_look_alike_structs(root, &mut failures)?;
    decision_records_resolve(root, &mut failures)?;
    session_stays_small(root, &mut failures)?;
    if failures.is_empty() {
        println!(
            "xtask lint: ok (single input call site, crates in layer folders, dependency firewall, recordings write-only, //! docs, runtime through the session, no issue numbers in comments, one definition per concept, the crate map in step, records typed, no look-alike structs, every ADR cited is in docs/, the session small)"
        );
        Ok(0)
    } else {
        for f in &failures {
            println!("LINT FAIL: {f}");
        }
        println!("xtask lint: {} failure(s)", failures.len());
        Ok(1)
    }
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

/// FR-ACT-008: a second call site anywhere fails CI.
fn single_input_call_site(root: &Path, failures: &mut Vec<String>) -> anyhow::Result<()> {
    let patterns = synthesis_patterns();
    for dir in ["crates", "xtask", "fuzz"] {
        for f in crate::rust_files(&root.join(dir)) {
            let r = rel(root, &f);
            if r == INPUT_CALL_SITE || r.starts_with("xtask/") {
                continue;
            }
            let text = std::fs::read_to_string(&f).with_context(|| format!("reading {r}"))?;
            for (i, line) in text.lines().enumerate() {
                for p in &patterns {
                    if line.contains(p.as_str()) {
                        failures.push(format!(
                            "{r}:{}: input synthesis ({p}) outside {INPUT_CALL_SITE} (FR-ACT-008: exactly one input call site)",
                            i + 1
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// The pure crates the runtime (the agent's threads and loop) must not depend on: it reaches them through
/// the session's API, so a loop decision cannot be made outside `Session::step` — the runtime cannot even
/// name the planner's, grounding's or context's internals.
const THROUGH_SESSION: &[&str] = &["gamepilot-planner", "gamepilot-grounding", "gamepilot-context"];

/// Layering by Cargo: the runtime's direct dependencies include none of [`THROUGH_SESSION`].
fn runtime_through_session(root: &Path, failures: &mut Vec<String>) -> anyhow::Result<()> {
    let tree = cargo_tree(root, &["-p", "gamepilot-runtime", "-e", "normal", "--depth", "1"])?;
    for line in tree.lines().skip(1) {
        let name = line.split_whitespace().next().unwrap_or("");
        if THROUGH_SESSION.contains(&name) {
            failures.push(format!(
                "gamepilot-runtime depends on {name}: the runtime reaches the pure logic through gamepilot-session only (its re-exports), so no loop decision is made outside Session::step"
            ));
        }
    }
    Ok(())
}

/// The binary's sources: its command-line argument types are its own.
const BINARY_SRC: &str = "crates/apps/gamepilot/src";

/// The practice game is a separate program with its own model of its world; its types are not the agent's.
const OWN_VOCABULARY: &[&str] = &["crates/tools/practice-arena/"];

/// Names that once stood for a concept the shared vocabulary now names (`gamepilot_core::vocabulary`,
/// `gamepilot_executor::ActionEnd`): a type of one of these names anywhere is a second definition coming
/// back, with the lossy mapper it needs.
const RETIRED_NAMES: &[&str] = &["InterlockKind", "FrameState", "FrameClass", "ReportKind"];

/// The public type names a type definition on `line` introduces (`pub struct X`, `pub enum X`,
/// `pub type X`, `pub trait X`), if any.
fn defined_type(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("pub ")?;
    let rest = ["struct ", "enum ", "type ", "trait "]
        .iter()
        .find_map(|k| rest.strip_prefix(k))?;
    let name_end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let name = &rest[..name_end];
    name.starts_with(|c: char| c.is_ascii_uppercase()).then_some(name)
}

/// One type per concept: a public type name is defined in one place across the agent's crates, so two
/// look-alike types joined by a hand-written mapper cannot be merged; and the retired names of concepts
/// the shared vocabulary owns are defined nowhere (the binary included).
fn one_definition_per_concept(root: &Path, failures: &mut Vec<String>) -> anyhow::Result<()> {
    let mut seen: std::collections::BTreeMap<String, Vec<String>> = std::collections::BTreeMap::new();
    for f in crate::rust_files(&root.join("crates")) {
        let r = rel(root, &f);
        let in_src = source_crate(&r).is_some();
        if !in_src || OWN_VOCABULARY.iter().any(|o| r.starts_with(o)) {
            continue;
        }
        let text = std::fs::read_to_string(&f).with_context(|| format!("reading {r}"))?;
        let binary = r.starts_with(BINARY_SRC);
        for (i, line) in non_test_lines(&text) {
            let Some(name) = defined_type(line) else { continue };
            let at = format!("{r}:{}", i + 1);
            if RETIRED_NAMES.contains(&name) {
                failures.push(format!(
                    "{at}: defines {name}, a retired name of a concept the shared vocabulary owns (gamepilot_core::vocabulary, gamepilot_executor): use that type"
                ));
            }
            // The binary's command-line argument structs are its own; the crates' types are shared.
            if !binary {
                seen.entry(name.to_string()).or_default().push(at);
            }
        }
    }
    for (name, places) in seen.iter().filter(|(_, p)| p.len() > 1) {
        failures.push(format!(
            "{name} is defined {} times ({}): one type per concept; use the one definition, or name different concepts differently",
            places.len(),
            places.join(", ")
        ));
    }
    Ok(())
}

/// The lines of a file before its first `#[cfg(test)]`, numbered.
fn non_test_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .take_while(|(_, l)| l.trim() != "#[cfg(test)]")
}

/// Comments say what and why, not which issue asked for it: an issue number in a comment is history that
/// the code's reader cannot use and the tracker may not keep. Requirement ids stay: they are the spec's,
/// and `cargo xtask trace` reads them.
fn no_issue_numbers(root: &Path, failures: &mut Vec<String>) -> anyhow::Result<()> {
    for dir in ["crates", "xtask", "fuzz"] {
        for f in crate::rust_files(&root.join(dir)) {
            let r = rel(root, &f);
            let text = std::fs::read_to_string(&f).with_context(|| format!("reading {r}"))?;
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                let Some(comment) = comment_of(line) else { continue };
                let next = lines.get(i + 1).and_then(|l| comment_of(l)).unwrap_or("");
                if let Some(cited) = issue_citation(comment, next) {
                    failures.push(format!(
                        "{r}:{}: comment cites an issue ({cited}): say what the code does and why instead (requirement ids are fine)",
                        i + 1
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The text after a line's `//` comment marker (`///` and `//!` included), ignoring `//` inside a string
/// literal on the same line.
fn comment_of(line: &str) -> Option<&str> {
    let b = line.as_bytes();
    let mut in_str = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if in_str => i += 1,
            b'"' => in_str = !in_str,
            b'\'' if !in_str && b[i..].starts_with(b"'\"'") => i += 2,
            b'\'' if !in_str && b[i..].starts_with(b"'\\\"'") => i += 3,
            b'/' if !in_str && b.get(i + 1) == Some(&b'/') => {
                let rest = line.get(i + 2..)?;
                return Some(rest.strip_prefix(|c: char| c == '/' || c == '!').unwrap_or(rest));
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// An issue number cited in `comment` (the word `issue` or `issues`, then a number, `#` optional), where
/// the number may open the `next` comment line when the citation is wrapped.
fn issue_citation(comment: &str, next: &str) -> Option<String> {
    let lower = comment.to_ascii_lowercase();
    let b = lower.as_bytes();
    let mut from = 0;
    while let Some(at) = lower[from..].find("issue").map(|k| k + from) {
        from = at + 5;
        if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
            continue;
        }
        let mut j = at + 5;
        if b.get(j) == Some(&b's') {
            j += 1;
        }
        let after = &lower[j..];
        let trimmed = after.trim_start();
        let wrapped = trimmed.is_empty();
        let number = if wrapped { next.trim_start() } else { trimmed };
        // The word, then a space or `#` (or the line's end): "issues" alone or "issue12" is not a citation.
        let separated = wrapped || after.len() != trimmed.len() || trimmed.starts_with('#');
        let digits = number.strip_prefix('#').unwrap_or(number).trim_start();
        if separated && digits.starts_with(|c: char| c.is_ascii_digit()) {
            let n: String = digits.chars().take_while(char::is_ascii_digit).collect();
            return Some(format!("{} {n}", &comment[at..j]));
        }
    }
    None
}

/// Every Rust file starts with a `//!` line saying what it is for.
fn file_docs(root: &Path, failures: &mut Vec<String>) -> anyhow::Result<()> {
    for dir in ["crates", "xtask"] {
        for f in crate::rust_files(&root.join(dir)) {
            let text = std::fs::read_to_string(&f)?;
            let first = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
            if !first.starts_with("//!") {
                failures.push(format!(
                    "{}: first line must be a `//!` doc saying what the file is for",
                    rel(root, &f)
                ));
            }
        }
    }
    Ok(())
}

fn cargo_tree(root: &Path, args: &[&str]) -> anyhow::Result<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(root)
        .arg("tree")
        .args(args)
        .args(["--prefix", "none", "--format", "{p}", "--offline"])
        .output()
        .context("running cargo tree")?;
    if !out.status.success() {
        // Retry online (a fresh machine may not have the index cached for --offline).
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(cargo)
            .current_dir(root)
            .arg("tree")
            .args(args)
            .args(["--prefix", "none", "--format", "{p}"])
            .output()
            .context("running cargo tree")?;
        anyhow::ensure!(
            out.status.success(),
            "cargo tree {:?} failed: {}",
            args,
            String::from_utf8_lossy(&out.stderr)
        );
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Every crate's folder, relative to the root: `crates/<layer>/<crate>` (any folder under `crates/`
/// holding a `Cargo.toml`, at one level or two).
fn crate_dirs(root: &Path) -> Vec<String> {
    let mut dirs = Vec::new();
    let mut walk = vec![(root.join("crates"), 0)];
    while let Some((dir, depth)) = walk.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten().filter(|e| e.path().is_dir()) {
            if e.path().join("Cargo.toml").is_file() {
                dirs.push(rel(root, &e.path()));
            } else if depth == 0 {
                walk.push((e.path(), depth + 1));
            }
        }
    }
    dirs.sort();
    dirs
}

/// The session core a newcomer can hold in their head: its dispatcher file at most this many lines
/// outside its tests, and no type of the session or of the loop logic it wraps with more fields than
/// [`MAX_SESSION_FIELDS`] (a type that grows past it is several concepts: name them).
const SESSION_FILE: &str = "crates/logic/session/src/session.rs";
const SESSION_MAX_LINES: usize = 800;
const MAX_SESSION_FIELDS: usize = 15;
const SESSION_CRATES: &[&str] = &["crates/logic/session/src", "crates/logic/planner/src"];

fn session_stays_small(root: &Path, failures: &mut Vec<String>) -> anyhow::Result<()> {
    if let Ok(text) = std::fs::read_to_string(root.join(SESSION_FILE)) {
        let lines = non_test_lines(&text).count();
        if lines > SESSION_MAX_LINES {
            failures.push(format!(
                "{SESSION_FILE}: {lines} lines outside its tests (at most {SESSION_MAX_LINES}): the session dispatches, its parts decide"
            ));
        }
    }
    for dir in SESSION_CRATES {
        for f in crate::rust_files(&root.join(dir)) {
            let r = rel(root, &f);
            let text = std::fs::read_to_string(&f).with_context(|| format!("reading {r}"))?;
            for (at, name, fields) in struct_fields(&text) {
                if fields.len() > MAX_SESSION_FIELDS {
                    failures.push(format!(
                        "{r}:{at}: struct {name} has {} fields (at most {MAX_SESSION_FIELDS}): group them by concept",
                        fields.len()
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The crate folder of a file under a crate's `src/` (`crates/<layer>/<crate>/src/…`, or
/// `crates/<crate>/src/…`); `None` for tests, benches and anything else.
fn source_crate(rel_path: &str) -> Option<String> {
    let parts: Vec<&str> = rel_path.split('/').collect();
    if parts.first() != Some(&"crates") {
        return None;
    }
    let at = (2..=3).find(|&i| parts.get(i) == Some(&"src") && parts.len() > i + 1)?;
    Some(parts[..at].join("/"))
}

/// The package name a crate folder's manifest declares.
fn package_name(root: &Path, dir: &str) -> Option<String> {
    let text = std::fs::read_to_string(root.join(dir).join("Cargo.toml")).ok()?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("name = "))
        .map(|n| n.trim_matches('"').to_string())
}

/// The folders show the layers: every crate sits in `crates/<layer>/`, one of [`LAYERS`].
fn crates_in_layers(root: &Path, failures: &mut Vec<String>) -> anyhow::Result<()> {
    for dir in crate_dirs(root) {
        let layer = dir.split('/').nth(1).unwrap_or("");
        if dir.split('/').count() != 3 || !LAYERS.contains(&layer) {
            failures.push(format!(
                "{dir}: a crate lives in its layer's folder, crates/{{{}}}/<crate>",
                LAYERS.join(",")
            ));
        }
    }
    Ok(())
}

/// Logic crates (those under [`LOGIC_DIR`]) must not depend (normal or build edges) on x11rb, network
/// clients or async runtimes.
fn dependency_firewall(root: &Path, failures: &mut Vec<String>) -> anyhow::Result<()> {
    let logic: Vec<String> = crate_dirs(root)
        .into_iter()
        .filter(|d| d.starts_with(&format!("{LOGIC_DIR}/")))
        .filter_map(|d| package_name(root, &d))
        .collect();
    anyhow::ensure!(!logic.is_empty(), "no crates under {LOGIC_DIR}");
    for krate in &logic {
        let tree = cargo_tree(root, &["-p", krate, "-e", "normal,build"])?;
        for line in tree.lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            if FORBIDDEN_IN_LOGIC.contains(&name) {
                failures.push(format!(
                    "{krate} depends on {name}: logic crates must not touch X11, network or async IO"
                ));
            }
        }
    }
    Ok(())
}

/// INV-CTX-002: only the binary's replay/report/calibrate-stuck commands and `bench model --scenes` (recorded
/// screens as a benchmark's input, outside any session) may use the recording reader.
fn recordings_write_only(root: &Path, failures: &mut Vec<String>) -> anyhow::Result<()> {
    for dir in crate_dirs(root) {
        if dir.ends_with("/replay") || dir.ends_with("/gamepilot") {
            continue;
        }
        let manifest = root.join(&dir).join("Cargo.toml");
        if let Ok(text) = std::fs::read_to_string(&manifest) {
            if text.contains("gamepilot-replay") {
                failures.push(format!(
                    "{dir} depends on gamepilot-replay: recordings are write-only for the agent (INV-CTX-002)"
                ));
            }
        }
    }
    for f in crate::rust_files(&root.join("crates/apps/gamepilot/src")) {
        let r = rel(root, &f);
        if r.ends_with("cmd/replay.rs")
            || r.ends_with("cmd/report.rs")
            || r.ends_with("cmd/calibrate_stuck.rs")
            || r.ends_with("cmd/bench_model.rs")
            || r.ends_with("cmd/mod.rs")
        {
            continue;
        }
        let text = std::fs::read_to_string(&f)?;
        if text.contains("gamepilot_replay") {
            failures.push(format!(
                "{r}: only `replay`, `report`, `calibrate-stuck` and `bench model` may read recordings (INV-CTX-002)"
            ));
        }
    }
    Ok(())
}

/// The map (ARCHITECTURE.md's crate map) names each crate's files: a row's first cell holds the crate's
/// folder in backticks (`crates/logic/core`, `xtask`, `fuzz/`), its last cell the files. A named file must
/// exist (some `.rs` file of the crate ends with that name, `executor/tests.rs` with its folder), and
/// every source file of a crate (`src/`, `fuzz_targets/`) must be named, so the map cannot drift.
fn crate_map_in_step(root: &Path, failures: &mut Vec<String>) -> anyhow::Result<()> {
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).context("reading ARCHITECTURE.md")?;
    for (dir, named) in map_rows(&map) {
        let base = root.join(dir.trim_end_matches('/'));
        let sources: Vec<String> = crate::rust_files(&base)
            .iter()
            .map(|f| rel(&base, f))
            .filter(|r| r.starts_with("src/") || r.starts_with("fuzz_targets/"))
            .collect();
        for name in &named {
            if !sources.iter().any(|f| ends_with_name(f, name)) {
                failures.push(format!(
                    "ARCHITECTURE.md: the crate map names `{name}` in {dir}, which has no such file"
                ));
            }
        }
        for f in &sources {
            if !named.iter().any(|n| ends_with_name(f, n)) {
                failures.push(format!(
                    "{dir}/{f}: not on ARCHITECTURE.md's crate map (name it in its crate's row)"
                ));
            }
        }
    }
    Ok(())
}

/// Whether the path `file` (relative to its crate) is the file `name` names: the whole path, or its
/// end after a `/`.
fn ends_with_name(file: &str, name: &str) -> bool {
    file == name || file.ends_with(&format!("/{name}"))
}

/// The crate map's rows: each crate's folder and the `.rs` names its files cell holds.
fn map_rows(map: &str) -> Vec<(String, Vec<String>)> {
    let ticked =
        |cell: &str| -> Vec<String> { cell.split('`').skip(1).step_by(2).map(str::to_string).collect() };
    map.lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").collect();
            let dir = ticked(cells.first()?).into_iter().next()?;
            let is_crate = dir.starts_with("crates/") || dir == "xtask" || dir == "fuzz/";
            let files = ticked(cells.last()?)
                .into_iter()
                .filter(|t| t.ends_with(".rs") && !t.contains(' '))
                .collect();
            is_crate.then_some((dir, files))
        })
        .collect()
}

/// A record says what happened in types serde writes, not in Rust's debug text: a `format!` whose whole
/// string is one `{…:?}` placeholder inside a record's construction (`SessionRecord::…` or `Record::…`
/// up to its closing brace) fails.
fn records_are_typed(root: &Path, failures: &mut Vec<String>) -> anyhow::Result<()> {
    for f in crate::rust_files(&root.join("crates")) {
        let r = rel(root, &f);
        if source_crate(&r).is_none() {
            continue;
        }
        let text = std::fs::read_to_string(&f).with_context(|| format!("reading {r}"))?;
        let mut depth: i32 = 0;
        for (i, line) in non_test_lines(&text) {
            let opens = depth == 0
                && (line.contains("SessionRecord::") || line.contains(" Record::"))
                && line.contains('{');
            if !opens && depth == 0 {
                continue;
            }
            if debug_only_format(line) {
                failures.push(format!(
                    "{r}:{}: a record field is Rust's debug text (`format!(\"{{:?}}\")`); write a type serde names",
                    i + 1
                ));
            }
            depth = (depth + brace_delta(line)).max(0);
        }
    }
    Ok(())
}

/// Structs with fewer named fields than this are too small to call alike.
const LOOK_ALIKE_MIN_FIELDS: usize = 5;

/// One concept, one type: two structs in different crates whose field names are 80 % the same (of the
/// larger) are one concept written twice, joined by a hand-written mapper (`SessionNumbers` mapped field
/// by field into the runtime's `Summary` was one).
fn no_look_alike_structs(root: &Path, failures: &mut Vec<String>) -> anyhow::Result<()> {
    let mut structs: Vec<(String, String, String, std::collections::BTreeSet<String>)> = Vec::new();
    for f in crate::rust_files(&root.join("crates")) {
        let r = rel(root, &f);
        let Some(krate) = source_crate(&r) else {
            continue;
        };
        let text = std::fs::read_to_string(&f).with_context(|| format!("reading {r}"))?;
        for (at, name, fields) in struct_fields(&text) {
            if fields.len() >= LOOK_ALIKE_MIN_FIELDS {
                structs.push((krate.clone(), format!("{r}:{at}"), name, fields));
            }
        }
    }
    for (i, (ka, wa, na, fa)) in structs.iter().enumerate() {
        for (kb, wb, nb, fb) in &structs[i + 1..] {
            if ka == kb {
                continue;
            }
            let shared = fa.intersection(fb).count();
            if shared * 5 >= fa.len().max(fb.len()) * 4 {
                failures.push(format!(
                    "{wa}: struct {na} shares {shared} of its field names with {nb} ({wb}): one concept, one type"
                ));
            }
        }
    }
    Ok(())
}

/// Each braced struct of `text` outside its tests: the line it starts on (1-based), its name and its
/// field names.
fn struct_fields(text: &str) -> Vec<(usize, String, std::collections::BTreeSet<String>)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String, std::collections::BTreeSet<String>, i32)> = None;
    for (i, line) in non_test_lines(text) {
        if let Some((_, _, fields, depth)) = open.as_mut() {
            if *depth == 1 {
                let t = line.trim_start();
                let t = t
                    .strip_prefix("pub(crate) ")
                    .or_else(|| t.strip_prefix("pub(super) "))
                    .or_else(|| t.strip_prefix("pub "))
                    .unwrap_or(t);
                if let Some((name, _)) = t.split_once(':') {
                    if !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                    {
                        fields.insert(name.to_string());
                    }
                }
            }
            *depth += brace_delta(line);
            if *depth <= 0 {
                if let Some((at, name, fields, _)) = open.take() {
                    out.push((at, name, fields));
                }
            }
            continue;
        }
        let t = line.trim_start();
        let t = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        if let Some(rest) = t.strip_prefix("struct ") {
            if line.trim_end().ends_with('{') {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                open = Some((i + 1, name, std::collections::BTreeSet::new(), brace_delta(line)));
            }
        }
    }
    out
}

/// Every decision record the code or the docs cite (`ADR-0035`) is in the repository as
/// `docs/adr-NNNN*.md`: a user's clone has no specification beside it.
fn decision_records_resolve(root: &Path, failures: &mut Vec<String>) -> anyhow::Result<()> {
    let docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().to_lowercase())
                .collect()
        })
        .unwrap_or_default();
    let mut files = crate::rust_files(&root.join("crates"));
    files.extend(crate::rust_files(&root.join("xtask")));
    for md in ["ARCHITECTURE.md", "README.md"] {
        files.push(root.join(md));
    }
    files.extend(
        docs.iter()
            .filter(|d| d.ends_with(".md"))
            .map(|d| root.join("docs").join(d)),
    );
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            for (at, _) in line.match_indices("ADR-") {
                let digits: String = line[at + 4..].chars().take_while(char::is_ascii_digit).collect();
                if digits.len() != 4 {
                    continue;
                }
                if !docs
                    .iter()
                    .any(|d| d.starts_with(&format!("adr-{digits}")) && d.ends_with(".md"))
                {
                    failures.push(format!(
                        "{}:{}: cites ADR-{digits}, which the repository does not hold (docs/adr-{digits}-….md)",
                        rel(root, &f),
                        i + 1
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Braces a line opens, less those it closes.
fn brace_delta(line: &str) -> i32 {
    line.chars()
        .map(|c| match c {
            '{' => 1,
            '}' => -1,
            _ => 0,
        })
        .sum()
}

/// `format!("{x:?}")` or `format!("{:?}", x)`: the whole string is one debug placeholder.
fn debug_only_format(line: &str) -> bool {
    let Some(at) = line.find("format!(\"") else {
        return false;
    };
    let rest = &line[at + "format!(\"".len()..];
    let Some(end) = rest.find('"') else {
        return false;
    };
    let fmt = &rest[..end];
    fmt.starts_with('{') && fmt.ends_with(":?}") && fmt.matches('{').count() == 1
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_type_definition_is_recognised_by_its_name() {
        assert_eq!(defined_type("pub enum Verdict {"), Some("Verdict"));
        assert_eq!(
            defined_type("    pub struct ActionId(pub u64);"),
            Some("ActionId")
        );
        assert_eq!(
            defined_type("pub type Result<T> = std::result::Result<T, E>;"),
            Some("Result")
        );
        assert_eq!(defined_type("pub trait TemplateAtlas {"), Some("TemplateAtlas"));
        assert_eq!(defined_type("pub fn verdict() {}"), None);
        assert_eq!(defined_type("pub(crate) struct Hidden;"), None);
        assert_eq!(defined_type("// pub enum Commented"), None);
    }

    use super::*;

    /// An empty scratch directory of this name for one test.
    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("gp-lint-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn a_second_input_call_site_fails_the_lint() {
        // FR-ACT-008: the incorrect form cannot be merged.
        let dir = scratch("call");
        let call = ["conn.xtest_", "fake_input(2, 38, 0, root, 0, 0, 0)"].concat();
        write(
            &dir,
            INPUT_CALL_SITE,
            &format!("//! the one call site\nfn f() {{ {call}; }}\n"),
        );
        let mut failures = Vec::new();
        single_input_call_site(&dir, &mut failures).unwrap();
        assert!(
            failures.is_empty(),
            "the input component itself is allowed: {failures:?}"
        );
        write(
            &dir,
            "crates/logic/planner/src/sneaky.rs",
            &format!("//! sneaky\nfn g() {{ {call}; }}\n"),
        );
        single_input_call_site(&dir, &mut failures).unwrap();
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].contains("crates/logic/planner/src/sneaky.rs:2"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_without_a_doc_line_fails_the_lint() {
        let dir = scratch("doc");
        write(&dir, "crates/a/src/lib.rs", "//! documented\n");
        write(&dir, "crates/b/src/lib.rs", "fn undocumented() {}\n");
        let mut failures = Vec::new();
        file_docs(&dir, &mut failures).unwrap();
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].contains("crates/b/src/lib.rs"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_comment_citing_an_issue_number_fails_the_lint() {
        let dir = scratch("issue");
        let clean = concat!(
            "//! Says why; the issued command 5 times; issues are history.\n",
            "fn f() { let s = \"see ISSUE 12\"; let u = \"http://x/ISSUE 3\"; let q = '\"'; } // fine\n",
        );
        write(&dir, "crates/a/src/lib.rs", clean);
        let mut failures = Vec::new();
        no_issue_numbers(&dir, &mut failures).unwrap();
        assert!(failures.is_empty(), "{failures:?}");
        let cited = concat!(
            "//! ISSUE #4: the doc line\n",
            "/// Held keys (ISSUES 7 and 9).\n",
            "fn g() {} // since IsSuE 12\n",
            "// the skill, issue\n",
            "// 16): wrapped\n",
        );
        write(&dir, "xtask/src/cited.rs", cited);
        no_issue_numbers(&dir, &mut failures).unwrap();
        let lines: Vec<&str> = failures
            .iter()
            .map(|f| f.split(": comment").next().unwrap_or(""))
            .collect();
        assert_eq!(
            lines,
            [
                "xtask/src/cited.rs:1",
                "xtask/src/cited.rs:2",
                "xtask/src/cited.rs:3",
                "xtask/src/cited.rs:4"
            ],
            "{failures:?}"
        );
        assert!(failures[1].contains("(ISSUES 7)"), "{failures:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_map_entry_for_a_missing_file_and_a_file_off_the_map_fail_the_lint() {
        let dir = scratch("map");
        let map = concat!(
            "| crate | owns | files |\n|---|---|---|\n",
            "| `crates/a` (`gamepilot-a`) | things | `lib.rs`, `x/tests.rs` (its tests), `gone.rs` |\n",
        );
        write(&dir, "ARCHITECTURE.md", map);
        write(&dir, "crates/a/src/lib.rs", "//! a\n");
        write(&dir, "crates/a/src/x/tests.rs", "//! t\n");
        write(&dir, "crates/a/src/extra.rs", "//! e\n");
        write(
            &dir,
            "crates/a/tests/it.rs",
            "//! integration tests are not on the map\n",
        );
        let mut failures = Vec::new();
        crate_map_in_step(&dir, &mut failures).unwrap();
        assert_eq!(failures.len(), 2, "{failures:?}");
        assert!(failures[0].contains("`gone.rs`"), "{failures:?}");
        assert!(failures[1].contains("crates/a/src/extra.rs"), "{failures:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn debug_text_written_into_a_record_fails_the_lint() {
        let dir = scratch("rec");
        let text = concat!(
            "//! records\n",
            "fn f() {\n",
            "    let note = format!(\"{x:?}\");\n",
            "    out.push(Effect::Record(SessionRecord::Interlock {\n",
            "        interlock: Safeguard::Escalate,\n",
            "        detail: format!(\"{rung:?}\"),\n",
            "    }));\n",
            "    out.push(Effect::Record(SessionRecord::Note {\n",
            "        text: format!(\"moved {d:?} to {e}\"),\n",
            "    }));\n",
            "}\n",
        );
        write(&dir, "crates/s/src/lib.rs", text);
        let mut failures = Vec::new();
        records_are_typed(&dir, &mut failures).unwrap();
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].starts_with("crates/s/src/lib.rs:6"), "{failures:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn two_structs_in_different_crates_with_the_same_fields_fail_the_lint() {
        let dir = scratch("alike");
        let numbers = "//! n\npub struct Numbers {\n    pub confirmed: u64,\n    pub refuted: u64,\n    pub calls: u64,\n    pub tokens: u64,\n    pub(crate) passes: u64,\n}\n";
        write(&dir, "crates/logic/session/src/lib.rs", numbers);
        let summary = "//! s\npub struct Summary {\n    pub confirmed: u64,\n    pub refuted: u64,\n    pub calls: u64,\n    pub tokens: u64,\n    pub passes: u64,\n    pub seconds: f64,\n}\n";
        write(&dir, "crates/io/runtime/src/agent.rs", summary);
        let unlike = "//! u\npub struct Other {\n    pub confirmed: u64,\n    pub a: u64,\n    pub b: u64,\n    pub c: u64,\n    pub d: u64,\n}\n";
        write(&dir, "crates/io/model/src/lib.rs", unlike);
        let mut failures = Vec::new();
        no_look_alike_structs(&dir, &mut failures).unwrap();
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(
            failures[0].contains("Numbers") && failures[0].contains("Summary"),
            "{failures:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_decision_record_cited_but_not_in_docs_fails_the_lint() {
        let dir = scratch("adr");
        write(&dir, "docs/adr-0035-executor.md", "# ADR-0035\n");
        // The missing record's name is put together here, so this file does not cite it.
        let missing = ["ADR", "-0036"].concat();
        write(
            &dir,
            "crates/a/src/lib.rs",
            &format!("//! the tick (ADR-0035)\n// why: {missing}\n"),
        );
        let mut failures = Vec::new();
        decision_records_resolve(&dir, &mut failures).unwrap();
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(failures[0].starts_with("crates/a/src/lib.rs:2"), "{failures:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_crate_outside_the_layer_folders_fails_the_lint() {
        let dir = scratch("layers");
        write(
            &dir,
            "crates/logic/a/Cargo.toml",
            "[package]\nname = \"gamepilot-a\"\n",
        );
        write(
            &dir,
            "crates/tools/b/Cargo.toml",
            "[package]\nname = \"gamepilot-b\"\n",
        );
        write(&dir, "crates/stray/Cargo.toml", "[package]\nname = \"stray\"\n");
        write(
            &dir,
            "crates/misc/c/Cargo.toml",
            "[package]\nname = \"gamepilot-c\"\n",
        );
        assert_eq!(
            crate_dirs(&dir),
            vec![
                "crates/logic/a",
                "crates/misc/c",
                "crates/stray",
                "crates/tools/b"
            ]
        );
        assert_eq!(
            package_name(&dir, "crates/logic/a").as_deref(),
            Some("gamepilot-a")
        );
        let mut failures = Vec::new();
        crates_in_layers(&dir, &mut failures).unwrap();
        assert_eq!(failures.len(), 2, "{failures:?}");
        assert!(failures[0].starts_with("crates/misc/c:"), "{failures:?}");
        assert!(failures[1].starts_with("crates/stray:"), "{failures:?}");
    }

    #[test]
    fn a_session_type_past_15_fields_or_a_long_dispatcher_fails_the_lint() {
        let dir = scratch("small");
        let fields: String = (0..16).map(|i| format!("    pub(super) f{i}: u64,\n")).collect();
        write(
            &dir,
            "crates/logic/session/src/session/parts.rs",
            &format!("//! p\npub(super) struct Wide {{\n{fields}}}\n"),
        );
        let fifteen: String = (0..15).map(|i| format!("    f{i}: u64,\n")).collect();
        write(
            &dir,
            "crates/logic/planner/src/state.rs",
            &format!("//! s\npub struct Fits {{\n{fifteen}}}\n"),
        );
        let long = "//! s\n".to_string() + &"fn f() {}\n".repeat(800) + "#[cfg(test)]\nmod tests {}\n";
        write(&dir, "crates/logic/session/src/session.rs", &long);
        let mut failures = Vec::new();
        session_stays_small(&dir, &mut failures).unwrap();
        assert_eq!(failures.len(), 2, "{failures:?}");
        assert!(
            failures.iter().any(|f| f.contains("session.rs: 801 lines")),
            "{failures:?}"
        );
        assert!(
            failures.iter().any(|f| f.contains("struct Wide has 16 fields")),
            "{failures:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
