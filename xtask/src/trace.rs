//! `cargo xtask trace`: every requirement id in the spec with the tests that cite it, or, given ids
//! (`cargo xtask trace FR-ACT-003`), each one's summary, spec text, code, tests and docs in one place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Requirement ids such as FR-ACT-003, NFR-PERC-001, INV-GND-002 found in `text`, in order.
pub fn find_ids(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        let prefix = ["NFR-", "FR-", "INV-"]
            .iter()
            .find(|p| rest.starts_with(p.as_bytes()));
        let boundary = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-');
        if let (Some(p), true) = (prefix, boundary) {
            let mut j = i + p.len();
            let area_start = j;
            while j < b.len() && b[j].is_ascii_uppercase() {
                j += 1;
            }
            if j > area_start && j < b.len() && b[j] == b'-' {
                let num_start = j + 1;
                let mut k = num_start;
                while k < b.len() && b[k].is_ascii_digit() {
                    k += 1;
                }
                if k - num_start == 3 {
                    out.push(String::from_utf8_lossy(&b[i..k]).into_owned());
                    i = k;
                    continue;
                }
            }
        }
        i += 1;
    }
    out
}

struct Citation {
    file: String,
    line: usize,
    test: Option<String>,
    /// Inside test-only code (a `tests/` or `benches/` folder, a `tests.rs` or `*_tests.rs` file, or after
    /// the file's `#[cfg(test)]`), whether or not in a named test.
    in_test_code: bool,
    /// `test` is a `#[test]` function (not a helper in a `tests/` folder).
    test_fn: bool,
    /// Cited in a comment; the table counts only these, the one-id view also shows ids in code and strings.
    in_comment: bool,
}

/// The repository's own list of requirement ids (one summary line each), which the trace reads by default so
/// that a clone with nothing beside it can run it.
const REQUIREMENTS_LIST: &str = "docs/requirements.md";
/// This file, whose examples and tests name ids without citing them.
const SELF: &str = "xtask/src/trace.rs";

/// A specification directory to read instead of the in-repository list: `--spec DIR` or `GAMEPILOT_SPEC`.
fn spec_dir(args: &[String]) -> Option<PathBuf> {
    if let Some(i) = args.iter().position(|a| a == "--spec") {
        if let Some(d) = args.get(i + 1) {
            return Some(PathBuf::from(d));
        }
    }
    std::env::var("GAMEPILOT_SPEC").ok().map(PathBuf::from)
}

/// The "verified by" column (the table's last cell) of a requirements table, keyed by id.
fn methods(spec: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for line in spec.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() >= 5 {
            let ids = find_ids(cells[1]);
            if let Some(id) = ids.first() {
                if cells[1] == id {
                    m.insert(id.clone(), cells[cells.len() - 2].to_string());
                }
            }
        }
    }
    m
}

/// Every id the markdown files hold, sorted and unique, with the verification methods of the file named
/// `requirements.md` among them.
fn read_ids(files: &[PathBuf]) -> anyhow::Result<(Vec<String>, BTreeMap<String, String>)> {
    let mut ids: Vec<String> = Vec::new();
    let mut verified_by = BTreeMap::new();
    for f in files {
        let text =
            std::fs::read_to_string(f).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", f.display()))?;
        if f.file_name().is_some_and(|n| n == "requirements.md") {
            verified_by = methods(&text);
        }
        for id in find_ids(&text) {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    ids.sort();
    Ok((ids, verified_by))
}

fn markdown_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let rd =
        std::fs::read_dir(dir).map_err(|e| anyhow::anyhow!("cannot read spec dir {}: {e}", dir.display()))?;
    let mut files: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    Ok(files)
}

/// Every requirement id the Rust sources mention, with where and in which test. A comment just above a
/// function (only comments and attributes between) belongs to that function.
fn citations(root: &Path) -> anyhow::Result<BTreeMap<String, Vec<Citation>>> {
    let mut cites: BTreeMap<String, Vec<Citation>> = BTreeMap::new();
    for top in ["crates", "xtask", "fuzz"] {
        for f in crate::rust_files(&root.join(top)) {
            let rel = f.strip_prefix(root).unwrap_or(&f).to_string_lossy().into_owned();
            if rel == SELF {
                continue;
            }
            let text = std::fs::read_to_string(&f)?;
            let in_tests_dir = rel.contains("/tests/") || rel.contains("/benches/");
            let test_file = in_tests_dir || rel.ends_with("/tests.rs") || rel.ends_with("_tests.rs");
            let mut found: Vec<(String, Citation)> = Vec::new();
            let mut pending: Vec<usize> = Vec::new();
            let mut after_cfg_test = false;
            let mut current_fn: Option<String> = None;
            let mut in_test_attr = false;
            let mut test_fn: Option<String> = None;
            for (n, line) in text.lines().enumerate() {
                let t = line.trim_start();
                if line.trim() == "#[cfg(test)]" {
                    after_cfg_test = true;
                }
                if t.starts_with("#[test]") || t.starts_with("#[tokio::test]") {
                    in_test_attr = true;
                }
                if let Some(rest) = t.strip_prefix("fn ").or_else(|| t.strip_prefix("pub fn ")) {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    for &i in &pending {
                        let c = &mut found[i].1;
                        if in_test_attr || in_tests_dir {
                            c.test = Some(name.clone());
                            c.test_fn = in_test_attr;
                            c.in_test_code = true;
                        }
                    }
                    current_fn = Some(name.clone());
                    test_fn = if in_test_attr { Some(name) } else { None };
                    in_test_attr = false;
                }
                let whole_comment = t.starts_with("//");
                if !(whole_comment || t.starts_with("#[") || t.is_empty()) {
                    pending.clear();
                }
                let in_comment = whole_comment || line.contains("// ") || line.contains("///");
                for id in find_ids(line) {
                    let test = test_fn
                        .clone()
                        .or_else(|| if in_tests_dir { current_fn.clone() } else { None });
                    if whole_comment {
                        pending.push(found.len());
                    }
                    found.push((
                        id,
                        Citation {
                            file: rel.clone(),
                            line: n + 1,
                            in_test_code: test.is_some() || test_file || after_cfg_test,
                            test_fn: test_fn.is_some(),
                            test,
                            in_comment,
                        },
                    ));
                }
            }
            for (id, c) in found {
                cites.entry(id).or_default().push(c);
            }
        }
    }
    Ok(cites)
}

pub fn run(root: &Path, args: &[String]) -> anyhow::Result<i32> {
    let wanted = wanted_ids(args)?;
    let listed = read_ids(&[root.join(REQUIREMENTS_LIST)])?;
    let (spec_ids, verified_by, unlisted) = match spec_dir(args) {
        None => (listed.0, listed.1, Vec::new()),
        Some(dir) => {
            let (ids, methods) = read_ids(&markdown_files(&dir)?)?;
            let unlisted: Vec<String> = ids.iter().filter(|id| !listed.0.contains(id)).cloned().collect();
            (ids, methods, unlisted)
        }
    };
    let cites = citations(root)?;
    if !wanted.is_empty() {
        return show(root, args, &wanted, &cites);
    }
    let missing_only = args.iter().any(|a| a == "--missing");
    let mut proven = 0;
    println!(
        "{:<14} {:<22} {:>5}  cited by (tests first)",
        "id", "verified by", "tests"
    );
    for id in &spec_ids {
        let c: Vec<&Citation> = cites
            .get(id)
            .into_iter()
            .flatten()
            .filter(|c| c.in_comment)
            .collect();
        let tests: Vec<&Citation> = c.iter().copied().filter(|c| c.test.is_some()).collect();
        if !tests.is_empty() {
            proven += 1;
        }
        if missing_only && !tests.is_empty() {
            continue;
        }
        let method = verified_by.get(id).cloned().unwrap_or_default();
        let places: Vec<String> = tests
            .iter()
            .map(|c| {
                format!(
                    "{}::{} ({}:{})",
                    c.file,
                    c.test.as_deref().unwrap_or("?"),
                    c.file,
                    c.line
                )
            })
            .chain(
                c.iter()
                    .filter(|c| c.test.is_none())
                    .map(|c| format!("{}:{} (code)", c.file, c.line)),
            )
            .take(6)
            .collect();
        println!(
            "{:<14} {:<22} {:>5}  {}",
            id,
            method,
            tests.len(),
            if places.is_empty() {
                "— not yet proven".to_string()
            } else {
                places.join("; ")
            }
        );
    }
    if !unlisted.is_empty() {
        println!(
            "\n{} ids of the specification are missing from {REQUIREMENTS_LIST}: {}",
            unlisted.len(),
            unlisted.join(", ")
        );
    }
    println!(
        "\n{proven} of {} requirement ids are cited by at least one test",
        spec_ids.len()
    );
    Ok(if unlisted.is_empty() { 0 } else { 1 })
}

/// The ids named on the command line (`cargo xtask trace FR-ACT-003 inv-gnd-002`); any other word is an error.
fn wanted_ids(args: &[String]) -> anyhow::Result<Vec<String>> {
    let mut ids = Vec::new();
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "--missing" => {}
            "--spec" => {
                rest.next();
            }
            _ => {
                let id = a.to_ascii_uppercase();
                anyhow::ensure!(
                    find_ids(&id) == [id.as_str()],
                    "{a:?} is neither a requirement id (FR-ACT-003) nor an option; usage: cargo xtask trace [--missing] [--spec DIR] [ID…]"
                );
                ids.push(id);
            }
        }
    }
    Ok(ids)
}

/// The row of a requirements table whose first cell is `id`: its line number and second cell (the summary
/// in docs/requirements.md, the statement in the specification).
fn table_row(text: &str, id: &str) -> Option<(usize, String)> {
    text.lines().enumerate().find_map(|(n, line)| {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        (cells.len() >= 4 && cells[1] == id).then(|| (n + 1, cells[2].to_string()))
    })
}

/// The specification's markdown files, each with the name to print: `--spec DIR` or `GAMEPILOT_SPEC` when
/// given, else `../shared/spec` beside the clone when there is one, else none (the clone alone suffices).
fn spec_texts(root: &Path, args: &[String]) -> Vec<(String, String)> {
    let (dir, shown) = match spec_dir(args) {
        Some(d) => (d.clone(), d.display().to_string()),
        None => match root.parent().map(|p| p.join("shared/spec")) {
            Some(d) if d.is_dir() => (d, "../shared/spec".to_string()),
            _ => return Vec::new(),
        },
    };
    let files = markdown_files(&dir).unwrap_or_default();
    files
        .iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).ok()?;
            let name = f.file_name()?.to_string_lossy().into_owned();
            Some((format!("{}/{name}", shown.trim_end_matches('/')), text))
        })
        .collect()
}

/// The prose that may mention an id: ARCHITECTURE.md, README.md and docs/*.md (less the id list itself).
fn doc_texts(root: &Path) -> Vec<(String, String)> {
    let mut names = vec!["ARCHITECTURE.md".to_string(), "README.md".to_string()];
    if let Ok(files) = markdown_files(&root.join("docs")) {
        names.extend(
            files
                .iter()
                .filter_map(|f| f.file_name().map(|n| format!("docs/{}", n.to_string_lossy())))
                .filter(|n| n != REQUIREMENTS_LIST),
        );
    }
    names
        .into_iter()
        .filter_map(|n| Some((n.clone(), std::fs::read_to_string(root.join(&n)).ok()?)))
        .collect()
}

/// `cargo xtask trace ID…`: for each id, its summary, the specification's statement when a specification
/// is at hand, the code that cites it (outside tests), the tests that cite it and the docs that mention it,
/// each as `file:line`. Exit 1 when an id is not in docs/requirements.md.
fn show(
    root: &Path,
    args: &[String],
    wanted: &[String],
    cites: &BTreeMap<String, Vec<Citation>>,
) -> anyhow::Result<i32> {
    let listed = std::fs::read_to_string(root.join(REQUIREMENTS_LIST)).unwrap_or_default();
    let (_, verified_by) = read_ids(&[root.join(REQUIREMENTS_LIST)])?;
    let spec = spec_texts(root, args);
    let docs = doc_texts(root);
    let mut code = 0;
    for (k, id) in wanted.iter().enumerate() {
        if k > 0 {
            println!();
        }
        match verified_by.get(id).filter(|m| !m.is_empty()) {
            Some(m) => println!("{id} (verified by: {m})"),
            None => println!("{id}"),
        }
        match table_row(&listed, id) {
            Some((n, summary)) => println!("  summary  {REQUIREMENTS_LIST}:{n}  {summary}"),
            None => {
                println!("  summary  — not in {REQUIREMENTS_LIST}");
                code = 1;
            }
        }
        for (name, text) in &spec {
            if let Some((n, statement)) = table_row(text, id) {
                println!("  spec     {name}:{n}  {statement}");
            }
        }
        let c = cites.get(id).map(Vec::as_slice).unwrap_or(&[]);
        let mut places: Vec<String> = c
            .iter()
            .filter(|c| !c.in_test_code)
            .map(|c| format!("{}:{}", c.file, c.line))
            .collect();
        places.dedup();
        let mut named: Vec<(&str, &str)> = Vec::new();
        let tests: Vec<String> = c
            .iter()
            .filter(|c| c.in_test_code)
            .filter(|c| match &c.test {
                Some(t) if named.contains(&(c.file.as_str(), t.as_str())) => false,
                Some(t) => {
                    named.push((c.file.as_str(), t.as_str()));
                    true
                }
                None => true,
            })
            .map(|c| match &c.test {
                Some(t) if c.test_fn => format!("{}:{}  {t}", c.file, c.line),
                Some(t) => format!("{}:{}  {t} (test support)", c.file, c.line),
                None => format!("{}:{}  (test support)", c.file, c.line),
            })
            .collect();
        let prose: Vec<String> = docs
            .iter()
            .flat_map(|(name, text)| {
                text.lines()
                    .enumerate()
                    .filter(|(_, l)| find_ids(l).contains(id))
                    .map(move |(n, _)| format!("{name}:{}", n + 1))
            })
            .collect();
        for (label, lines) in [("code", places), ("tests", tests), ("docs", prose)] {
            if lines.is_empty() {
                println!("  {label:<8} — none");
            }
            for (i, l) in lines.iter().enumerate() {
                println!("  {:<8} {l}", if i == 0 { label } else { "" });
            }
        }
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_lists_ids_with_their_methods() {
        let root = crate::repo_root();
        let (ids, methods) = read_ids(&[root.join(REQUIREMENTS_LIST)]).unwrap();
        assert!(ids.len() >= 70, "only {} ids listed", ids.len());
        assert!(
            ids.iter().all(|id| methods.contains_key(id)),
            "an id without a method"
        );
    }

    #[test]
    fn ids_on_the_command_line_are_wanted_and_other_words_refused() {
        let args: Vec<String> = ["--spec", "dir", "fr-act-003", "--missing", "INV-GND-002"]
            .iter()
            .map(|a| a.to_string())
            .collect();
        assert_eq!(wanted_ids(&args).unwrap(), ["FR-ACT-003", "INV-GND-002"]);
        assert!(wanted_ids(&["FR-ACT".to_string()]).is_err());
        assert!(wanted_ids(&[]).unwrap().is_empty());
    }

    #[test]
    fn the_one_id_view_reads_a_specification_only_when_one_is_at_hand() {
        let dir = std::env::temp_dir().join(format!("gp-trace-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let root = dir.join("clone");
        std::fs::create_dir_all(root.join("docs")).unwrap();
        assert!(
            spec_texts(&root, &[]).is_empty(),
            "no ../shared/spec: no spec text"
        );
        let spec = dir.join("shared/spec");
        std::fs::create_dir_all(&spec).unwrap();
        let row = "| FR-ACT-003 | The executor MUST support concurrent sustained actions. | why | Unit |";
        std::fs::write(spec.join("requirements.md"), format!("# R\n\n{row}\n")).unwrap();
        let found = spec_texts(&root, &[]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "../shared/spec/requirements.md");
        assert_eq!(
            table_row(&found[0].1, "FR-ACT-003"),
            Some((
                3,
                "The executor MUST support concurrent sustained actions.".to_string()
            ))
        );
        assert_eq!(table_row(&found[0].1, "FR-ACT-004"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn finds_ids_with_boundaries() {
        let ids = find_ids("see ↔ FR-ACT-003, NFR-PERC-001 and INV-GND-002; not XFR-ACT-003 or FR-ACT-03");
        assert_eq!(ids, vec!["FR-ACT-003", "NFR-PERC-001", "INV-GND-002"]);
    }
}
