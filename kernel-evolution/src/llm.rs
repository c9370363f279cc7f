//! The optional LLM proposer of the generate stage: an OpenAI-compatible chat endpoint (reqwest on
//! a current-thread tokio runtime), configured by the environment exactly as
//! `cake-evolve-compiler`'s drafting is (`CAKE_LLM_BASE_URL`, `CAKE_LLM_MODEL`, `CAKE_LLM_API_KEY`,
//! `CAKE_LLM_TIMEOUT_S`; see `cake_evolve::llm`). It is on when the endpoint is set and the
//! contract's `budget.llm_tokens` is above zero.
//!
//! The model is given the contract's spec and target, the parent program, its findings and cost
//! report, and its GPU result, and returns one complete program. Its answer is a candidate like
//! any other: the gates, the cost rank and the GPU judge it. Every call is recorded (the program,
//! or why there was none, and the tokens spent), so `resume` and `--replay` take the recorded
//! answer instead of asking again.

pub use cake_evolve::llm::LlmConfig;
use serde_json::Value;

use crate::contract::Contract;

/// The parent as the model sees it.
pub struct Context<'a> {
    pub program: &'a str,
    pub findings: &'a Value,
    pub predicted_ms: Option<f64>,
    pub bottleneck: Option<&'a str>,
    /// The GPU stage's result (status, headline time, peers), when it had one.
    pub evaluation: Option<Value>,
}

/// What one call gave: the program text (or why none) and the tokens it cost.
pub struct Answer {
    pub program: Result<String, String>,
    pub tokens: u64,
}

pub fn prompt(contract: &Contract, ctx: &Context<'_>) -> (String, String) {
    let system = "You optimize GPU kernel schedules written in Cake IR, a typed, hardware-explicit schedule language (roles, pipelines, TMA, wgmma). Answer with one complete Cake IR program in a ```cake fenced block and nothing else. Keep the kernel's name, target, dims and tensor arguments; change the schedule.".to_string();
    let w = &contract.file.workload;
    let user = format!(
        "Contract `{}` (target {}):\n{}\nHeadline shape: {}. Correctness shapes: {}.\n\nParent program:\n```cake\n{}```\n\nCost model at the headline: {} ms, bottleneck {}.\nFindings and hints: {}\nGPU result: {}\n\nWrite a faster correct variant.",
        contract.file.name,
        contract.file.target,
        contract.file.spec.trim(),
        crate::contract::shape_text(&w.headline),
        w.shapes.iter().map(crate::contract::shape_text).collect::<Vec<_>>().join("; "),
        ctx.program,
        ctx.predicted_ms.map(|p| format!("{p:.4}")).unwrap_or_else(|| "-".into()),
        ctx.bottleneck.unwrap_or("-"),
        ctx.findings,
        ctx.evaluation.clone().unwrap_or(Value::Null),
    );
    (system, user)
}

/// The program in a model's answer: the first fenced block, else the whole text; it must hold a
/// `kernel` header.
pub fn parse_program(content: &str) -> Result<String, String> {
    let t = content.trim();
    let body = match t.find("```") {
        Some(i) => {
            let rest = &t[i + 3..];
            let rest = rest.find('\n').map(|n| &rest[n + 1..]).unwrap_or(rest);
            rest.find("```").map(|j| &rest[..j]).unwrap_or(rest)
        }
        None => t,
    };
    if !body.lines().any(|l| l.trim_start().starts_with("kernel ")) {
        return Err("the model's answer holds no Cake IR program (no `kernel` header)".into());
    }
    Ok(format!("{}\n", body.trim_end()))
}

/// Ask the model for one program. Tokens are the answer's `usage.total_tokens`, else an estimate
/// of four characters a token over the prompt and the answer (the budget must be charged either way).
pub fn ask(cfg: &LlmConfig, contract: &Contract, ctx: &Context<'_>) -> Answer {
    let (system, user) = prompt(contract, ctx);
    let estimate = |answer: &str| ((system.len() + user.len() + answer.len()) / 4) as u64;
    let reply = cake_evolve::llm::chat(cfg, &system, &user);
    match reply {
        // A request that failed still sent the prompt.
        Err(e) => Answer { program: Err(e.to_string()), tokens: estimate("") },
        Ok(v) => {
            let content = v.pointer("/choices/0/message/content").and_then(Value::as_str).unwrap_or("");
            let tokens = v.pointer("/usage/total_tokens").and_then(Value::as_u64).unwrap_or_else(|| estimate(content));
            let program = if content.is_empty() { Err(format!("the answer has no choices[0].message.content: {v}")) } else { parse_program(content) };
            Answer { program, tokens }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_is_the_fenced_block() {
        assert_eq!(parse_program("Here:\n```cake\nkernel k target sm_90a\ndim N\n```\nDone.").unwrap(), "kernel k target sm_90a\ndim N\n");
        assert_eq!(parse_program("kernel k target sm_90a\n").unwrap(), "kernel k target sm_90a\n");
        assert!(parse_program("I cannot help with that.").is_err());
    }
}
