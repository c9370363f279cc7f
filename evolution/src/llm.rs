//! Optional LLM drafting of what the engine cannot derive from evidence: a new primitive's
//! hardware note, lowering note and lowering code. Off unless configured by the environment:
//!
//! | variable | meaning |
//! |---|---|
//! | `CAKE_LLM_BASE_URL` | an OpenAI-compatible API base, e.g. `http://127.0.0.1:8080/v1`; the client posts to `<base>/chat/completions` |
//! | `CAKE_LLM_MODEL` | the model name sent in the request (default `default`) |
//! | `CAKE_LLM_API_KEY` | sent as `Authorization: Bearer <key>` when set |
//! | `CAKE_LLM_TIMEOUT_S` | request time limit in seconds (default 120) |
//!
//! The request goes through reqwest (rustls, JSON) on a current-thread tokio runtime. The model
//! is asked for one JSON object `{"hardware": ..., "lowering": ..., "rust": ...}`; anything else
//! is an error, and the proposal is then queued without drafts (its gates say what is missing).
//! Nothing here runs, builds or trusts the drafted code: it is committed for a person to review.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;

pub const ENV_BASE_URL: &str = "CAKE_LLM_BASE_URL";
pub const ENV_MODEL: &str = "CAKE_LLM_MODEL";
pub const ENV_API_KEY: &str = "CAKE_LLM_API_KEY";
pub const ENV_TIMEOUT: &str = "CAKE_LLM_TIMEOUT_S";

/// Where and how to reach the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LlmConfig {
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub timeout: Duration,
}

impl LlmConfig {
    /// The configuration from the environment; `None` when `CAKE_LLM_BASE_URL` is unset or empty.
    pub fn from_env() -> Option<LlmConfig> {
        let base = std::env::var(ENV_BASE_URL).ok().filter(|s| !s.trim().is_empty())?;
        let model = std::env::var(ENV_MODEL).ok().filter(|s| !s.trim().is_empty()).unwrap_or_else(|| "default".into());
        let api_key = std::env::var(ENV_API_KEY).ok().filter(|s| !s.is_empty());
        let timeout = std::env::var(ENV_TIMEOUT).ok().and_then(|s| s.parse::<u64>().ok()).unwrap_or(120);
        Some(LlmConfig { base_url: base.trim().trim_end_matches('/').to_string(), model, api_key, timeout: Duration::from_secs(timeout.max(1)) })
    }

    pub fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }
}

/// What the model drafted for a primitive.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoweringDraft {
    /// What the op does on the hardware (the catalog's `hardware` note, P8).
    pub hardware: String,
    /// What the compiler emits for it (the catalog's `lowering` note, P2).
    pub lowering: String,
    /// Rust for `compiler/src/lower/` (a draft for a person; never built by the gates).
    #[serde(default)]
    pub rust: String,
}

/// The prompt for one op.
pub fn prompt(op: &str, entry: &str, call_sites: &[String]) -> (String, String) {
    let system = "You are a GPU compiler engineer working on Cake, a typed IR for Hopper/Blackwell kernel schedules that lowers to CUDA C++ with inline PTX. Answer with one JSON object only, with the string fields \"hardware\" (what the operation does on the hardware: instruction, limits, latencies, with a PTX ISA or CUDA guide reference), \"lowering\" (what CUDA/PTX the compiler should emit for one call) and \"rust\" (a Rust function sketch for the lowering, or an empty string).".to_string();
    let mut user = format!("Programs called the operation `{op}`, which the op catalog does not have. The drafted catalog entry:\n\n{entry}\n\nCall sites:\n");
    for c in call_sites.iter().take(8) {
        user.push_str(&format!("- `{c}`\n"));
    }
    user.push_str("\nDraft the hardware note, the lowering note and the lowering code.");
    (system, user)
}

/// Ask the model. Errors say what went wrong (connection, HTTP status, not JSON, fields missing).
pub fn draft(cfg: &LlmConfig, op: &str, entry: &str, call_sites: &[String]) -> Result<LoweringDraft, String> {
    let (system, user) = prompt(op, entry, call_sites);
    let value = chat(cfg, &system, &user)?;
    let content = value
        .pointer("/choices/0/message/content")
        .and_then(|c| c.as_str())
        .map(str::to_string)
        .ok_or_else(|| format!("the answer has no choices[0].message.content: {value}"))?;
    parse_draft(&content)
}

/// One chat completion (temperature 0, a system and a user message) on a current-thread runtime:
/// the endpoint's JSON answer. Errors say what went wrong (runtime, connection, HTTP status, not
/// JSON). Shared by the primitive drafting here and kernel evolution's proposer.
pub fn chat(cfg: &LlmConfig, system: &str, user: &str) -> Result<serde_json::Value, String> {
    let body = json!({
        "model": cfg.model,
        "temperature": 0,
        "messages": [
            { "role": "system", "content": system },
            { "role": "user", "content": user },
        ],
    });
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| format!("cannot start the async runtime: {e}"))?;
    rt.block_on(async {
        let client = reqwest::Client::builder().timeout(cfg.timeout).build().map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let mut req = client.post(cfg.endpoint()).json(&body);
        if let Some(k) = &cfg.api_key {
            req = req.bearer_auth(k);
        }
        let resp = req.send().await.map_err(|e| format!("request to {} failed: {e}", cfg.endpoint()))?;
        let status = resp.status();
        let value: serde_json::Value = resp.json().await.map_err(|e| format!("the answer of {} is not JSON: {e}", cfg.endpoint()))?;
        if !status.is_success() {
            return Err(format!("{} answered {status}: {value}", cfg.endpoint()));
        }
        Ok(value)
    })
}

/// The JSON object in a model's answer (fenced in ```json or bare).
pub fn parse_draft(content: &str) -> Result<LoweringDraft, String> {
    let t = content.trim();
    let t = t.strip_prefix("```json").or_else(|| t.strip_prefix("```")).map(|s| s.trim_end().trim_end_matches("```")).unwrap_or(t).trim();
    let start = t.find('{').ok_or("the model's answer holds no JSON object")?;
    let end = t.rfind('}').ok_or("the model's answer holds no JSON object")?;
    let d: LoweringDraft = serde_json::from_str(&t[start..=end]).map_err(|e| format!("the model's JSON is not {{hardware, lowering, rust}}: {e}"))?;
    if d.hardware.trim().is_empty() || d.lowering.trim().is_empty() {
        return Err("the model left `hardware` or `lowering` empty".into());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fenced_and_bare_answers() {
        let a = parse_draft("```json\n{\"hardware\": \"h\", \"lowering\": \"l\", \"rust\": \"\"}\n```").unwrap();
        assert_eq!(a.hardware, "h");
        let b = parse_draft("Sure: {\"hardware\": \"h\", \"lowering\": \"l\"}").unwrap();
        assert_eq!(b.rust, "");
        assert!(parse_draft("no json").is_err());
        assert!(parse_draft("{\"hardware\": \"\", \"lowering\": \"l\"}").is_err());
    }
}
