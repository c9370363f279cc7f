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
//! The answer is read in chunks up to [`MAX_BODY_BYTES`]; a larger one is refused unread.
//!
//! # Errors
//! Every failure is an [`LlmError`] with a stable code and a help line:
//! * `H001` the HTTP client or its runtime cannot start;
//! * `H002` the endpoint cannot be reached (connection refused, DNS, TLS);
//! * `H003` no complete answer within the time limit (`CAKE_LLM_TIMEOUT_S`);
//! * `H004` the endpoint answered an HTTP error status (its body's start is quoted);
//! * `H005` the answer is larger than the read limit;
//! * `H006` the answer is not JSON, or not a chat completion with a draft in it.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;

pub const ENV_BASE_URL: &str = "CAKE_LLM_BASE_URL";
pub const ENV_MODEL: &str = "CAKE_LLM_MODEL";
pub const ENV_API_KEY: &str = "CAKE_LLM_API_KEY";
pub const ENV_TIMEOUT: &str = "CAKE_LLM_TIMEOUT_S";

/// The read limit of an answer: a chat completion holds one drafted object whose longest field the
/// queue keeps (`rust`, bounded to 64 KiB when committed) and metadata, so 4 MiB is 64 times what
/// is used; past it the endpoint is misbehaving (issue 15: a 3 GB body aborted `propose`).
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// How much of an error answer's body an [`LlmError`] quotes.
const EXCERPT_CHARS: usize = 300;

/// A failed request or an unusable answer, coded (see the module's list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LlmError {
    pub code: &'static str,
    pub message: String,
    pub help: &'static str,
}

impl LlmError {
    fn new(code: &'static str, message: impl Into<String>, help: &'static str) -> LlmError {
        LlmError { code, message: message.into(), help }
    }
}

impl fmt::Display for LlmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The message may quote the endpoint's answer: control characters escaped.
        write!(f, "[{}] {} (help: {})", self.code, crate::sanitize::line(&self.message), self.help)
    }
}

impl std::error::Error for LlmError {}

impl From<LlmError> for String {
    fn from(e: LlmError) -> String {
        e.to_string()
    }
}

const HELP_DRAFT: &str = "the proposal is queued without the draft; check the model behind CAKE_LLM_BASE_URL";

/// Where and how to reach the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LlmConfig {
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub timeout: Duration,
    /// The read limit of an answer, bytes ([`MAX_BODY_BYTES`]).
    pub max_body: usize,
}

impl LlmConfig {
    /// The configuration from the environment; `None` when `CAKE_LLM_BASE_URL` is unset or empty.
    pub fn from_env() -> Option<LlmConfig> {
        let base = std::env::var(ENV_BASE_URL).ok().filter(|s| !s.trim().is_empty())?;
        let model = std::env::var(ENV_MODEL).ok().filter(|s| !s.trim().is_empty()).unwrap_or_else(|| "default".into());
        let api_key = std::env::var(ENV_API_KEY).ok().filter(|s| !s.is_empty());
        let timeout = std::env::var(ENV_TIMEOUT).ok().and_then(|s| s.parse::<u64>().ok()).unwrap_or(120);
        Some(LlmConfig { base_url: base.trim().trim_end_matches('/').to_string(), model, api_key, timeout: Duration::from_secs(timeout.max(1)), max_body: MAX_BODY_BYTES })
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
pub fn draft(cfg: &LlmConfig, op: &str, entry: &str, call_sites: &[String]) -> Result<LoweringDraft, LlmError> {
    let (system, user) = prompt(op, entry, call_sites);
    let value = chat(cfg, &system, &user)?;
    let content = value
        .pointer("/choices/0/message/content")
        .and_then(|c| c.as_str())
        .map(str::to_string)
        .ok_or_else(|| LlmError::new("H006", format!("the answer has no choices[0].message.content: {}", excerpt(&value.to_string())), HELP_DRAFT))?;
    parse_draft(&content).map_err(|m| LlmError::new("H006", m, HELP_DRAFT))
}

/// One chat completion (temperature 0, a system and a user message) on a current-thread runtime:
/// the endpoint's JSON answer, read up to `cfg.max_body` bytes. Shared by the primitive drafting
/// here and kernel evolution's proposer.
pub fn chat(cfg: &LlmConfig, system: &str, user: &str) -> Result<serde_json::Value, LlmError> {
    let body = json!({
        "model": cfg.model,
        "temperature": 0,
        "messages": [
            { "role": "system", "content": system },
            { "role": "user", "content": user },
        ],
    });
    let url = cfg.endpoint();
    let timeout = |what: &str| {
        LlmError::new("H003", format!("{url} gave no complete answer within {} s ({what})", cfg.timeout.as_secs()), "raise CAKE_LLM_TIMEOUT_S, or check that the model server is up and not overloaded")
    };
    let transport = |e: reqwest::Error, what: &str| {
        if e.is_timeout() {
            timeout(what)
        } else {
            LlmError::new("H002", format!("{what} {url} failed: {e}"), "check CAKE_LLM_BASE_URL and that the model server is reachable from this machine")
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LlmError::new("H001", format!("cannot start the async runtime: {e}"), "the machine is out of threads or file descriptors; retry"))?;
    rt.block_on(async {
        let client = reqwest::Client::builder().timeout(cfg.timeout).build().map_err(|e| LlmError::new("H001", format!("cannot build the HTTP client: {e}"), "retry; the TLS set-up failed"))?;
        let mut req = client.post(&url).json(&body);
        if let Some(k) = &cfg.api_key {
            req = req.bearer_auth(k);
        }
        let mut resp = req.send().await.map_err(|e| transport(e, "the request to"))?;
        let status = resp.status();
        // Streamed with a cap: a declared length past it is refused before reading.
        if resp.content_length().is_some_and(|n| n > cfg.max_body as u64) {
            return Err(too_large(&url, cfg.max_body));
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| transport(e, "reading the answer of"))? {
            if bytes.len() + chunk.len() > cfg.max_body {
                return Err(too_large(&url, cfg.max_body));
            }
            bytes.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&bytes);
        if !status.is_success() {
            return Err(LlmError::new("H004", format!("{url} answered HTTP {status}: {}", excerpt(&text)), "the model server refused or failed the request: its answer above says why"));
        }
        serde_json::from_slice(&bytes).map_err(|e| LlmError::new("H006", format!("the answer of {url} is not JSON ({e}): {}", excerpt(&text)), "CAKE_LLM_BASE_URL must be an OpenAI-compatible API base (the client posts to <base>/chat/completions)"))
    })
}

fn too_large(url: &str, cap: usize) -> LlmError {
    LlmError::new("H005", format!("the answer of {url} is larger than the read limit of {cap} bytes; not read"), "the model server is misbehaving (a chat completion is kilobytes): check it")
}

/// The start of a body, for an error message: at most [`EXCERPT_CHARS`] characters.
fn excerpt(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(EXCERPT_CHARS) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t.to_string(),
    }
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
