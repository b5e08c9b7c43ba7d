//! `cargo xtask trace`: every requirement id in the spec with the tests that cite it.

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
}

/// The repository's own list of requirement ids (one summary line each), which the trace reads by default so
/// that a clone with nothing beside it can run it.
const REQUIREMENTS_LIST: &str = "docs/requirements.md";

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

pub fn run(root: &Path, args: &[String]) -> anyhow::Result<i32> {
    let listed = read_ids(&[root.join(REQUIREMENTS_LIST)])?;
    let (spec_ids, verified_by, unlisted) = match spec_dir(args) {
        None => (listed.0, listed.1, Vec::new()),
        Some(dir) => {
            let (ids, methods) = read_ids(&markdown_files(&dir)?)?;
            let unlisted: Vec<String> = ids.iter().filter(|id| !listed.0.contains(id)).cloned().collect();
            (ids, methods, unlisted)
        }
    };
    let mut cites: BTreeMap<String, Vec<Citation>> = BTreeMap::new();
    for top in ["crates", "xtask", "fuzz"] {
        for f in crate::rust_files(&root.join(top)) {
            let text = std::fs::read_to_string(&f)?;
            let rel = f.strip_prefix(root).unwrap_or(&f).to_string_lossy().into_owned();
            let mut current_fn: Option<String> = None;
            let mut in_test_attr = false;
            let mut test_fn: Option<String> = None;
            for (n, line) in text.lines().enumerate() {
                let t = line.trim_start();
                if t.starts_with("#[test]") || t.starts_with("#[tokio::test]") {
                    in_test_attr = true;
                }
                if let Some(rest) = t.strip_prefix("fn ").or_else(|| t.strip_prefix("pub fn ")) {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    current_fn = Some(name.clone());
                    test_fn = if in_test_attr { Some(name) } else { None };
                    in_test_attr = false;
                }
                if !(t.starts_with("//") || line.contains("// ") || line.contains("///")) {
                    continue;
                }
                for id in find_ids(line) {
                    let in_tests_dir = rel.contains("/tests/") || rel.contains("/benches/");
                    let test = test_fn
                        .clone()
                        .or_else(|| if in_tests_dir { current_fn.clone() } else { None });
                    cites.entry(id).or_default().push(Citation {
                        file: rel.clone(),
                        line: n + 1,
                        test,
                    });
                }
            }
        }
    }
    let missing_only = args.iter().any(|a| a == "--missing");
    let mut proven = 0;
    println!(
        "{:<14} {:<22} {:>5}  cited by (tests first)",
        "id", "verified by", "tests"
    );
    for id in &spec_ids {
        let c = cites.get(id).map(Vec::as_slice).unwrap_or(&[]);
        let tests: Vec<&Citation> = c.iter().filter(|c| c.test.is_some()).collect();
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
    fn finds_ids_with_boundaries() {
        let ids = find_ids("see ↔ FR-ACT-003, NFR-PERC-001 and INV-GND-002; not XFR-ACT-003 or FR-ACT-03");
        assert_eq!(ids, vec!["FR-ACT-003", "NFR-PERC-001", "INV-GND-002"]);
    }
}
