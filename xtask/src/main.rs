//! Structural checks run by CI: `cargo xtask lint` (single input call site FR-ACT-008, logic crates'
//! dependency firewall, recordings never read by agent crates INV-CTX-002, `//!` docs on every file,
//! binary = wiring, no issue numbers in comments) and `cargo xtask trace` (every requirement id with the
//! tests that cite it; `cargo xtask trace ID` for one id's summary, spec text, code, tests and docs).

mod lint;
mod trace;

use std::path::PathBuf;

pub fn repo_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(|p| p.to_path_buf()).unwrap_or(here)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = repo_root();
    let result = match args.first().map(String::as_str) {
        Some("lint") => lint::run(&root),
        Some("trace") => trace::run(&root, &args[1..]),
        _ => {
            eprintln!("usage: cargo xtask lint | cargo xtask trace [--missing] [--spec DIR] [ID…]");
            std::process::exit(2);
        }
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("xtask: {e:#}");
            std::process::exit(1);
        }
    }
}

/// Every `.rs` file under `dir`, skipping build output and fuzz corpora.
pub fn rust_files(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if name == "target"
                    || name.starts_with("target-")
                    || name.starts_with('.')
                    || name == "corpus"
                    || name == "artifacts"
                {
                    continue;
                }
                stack.push(p);
            } else if name.ends_with(".rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
