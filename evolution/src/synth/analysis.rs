//! What the predicate language cannot express (issue 12, item 6): when the rule search finds no
//! grounded predicate of up to two atoms that separates a bucket's failing programs from the
//! accepted ones, the verifier lacks a fact, and a rule that "happens to separate" would be a
//! near miss. The engine then drafts a **proposal for a new fact** (a Rust analysis) instead:
//!
//! - what quantity is missing: the failure the evidence shows (signature, message) on the
//!   construct it is attributed to, and that no fact of that construct tells its programs apart;
//! - which evidence it must separate: the failing programs, and for each the accepted corpus
//!   program nearest it by the construct's facts, with the facts that differ (none: the two are
//!   indistinguishable to every predicate over today's facts — a proof that a fact is missing);
//! - a skeleton: `compiler/src/verify/evolved/<fact>.rs` with the fact's doc line, the function a
//!   person writes, and a test over the failing programs (committed beside it) and the nearest
//!   accepted ones; optionally an LLM's draft of the analysis (`crate::llm::chat`), committed
//!   as `<fact>-llm.rs` for review.
//!
//! Nothing here is wired in or built. The proposal's `analysis` gate
//! (`cake_merge_gates::analysis_gate`) fails until the compiler computes the fact, and its Rust
//! fails `data-only`: it cannot be accepted until a person writes the analysis.

use std::collections::BTreeSet;

use cake::pred::Value;
use cake::verify::ConstructKind;
use serde::{Deserialize, Serialize};

use super::rule::Base;
use super::search::{instances, FactMap};
use super::{parse_construct, short, BucketInfo, Program};
use crate::llm::{self, LlmConfig};

/// Nearest accepted programs named per failing program.
const NEAREST: usize = 2;
/// Differing facts named per pair.
const DIFFS: usize = 6;

/// A drafted proposal for a new fact.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnalysisDraft {
    /// The proposed fact's name (a placeholder a person may rename).
    pub fact: String,
    /// The construct it is a fact of (`tensor`, `kernel`, `call:tma_load`).
    pub construct: String,
    /// The missing quantity, in words, from what the failure says.
    pub quantity: String,
    /// Why no rule: the search's reason.
    pub why: String,
    /// Failing programs it must tell apart (content hashes).
    pub failing_programs: Vec<String>,
    /// Accepted corpus programs it must leave alone: the nearest to each failing program.
    pub passing_programs: Vec<String>,
    /// Per failing program: its nearest accepted program and the facts that differ.
    pub nearest: Vec<String>,
    /// The skeleton a person completes (path in the proposal).
    pub skeleton: String,
    /// Failing programs left out (do not type-check, already rejected), with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_programs: Vec<String>,
    /// Files to commit: (path relative to the repository root, contents).
    #[serde(skip)]
    pub files: Vec<(String, String)>,
}

/// The fact name a bucket's failure suggests: `missing_` and the words of its class and detail
/// (placeholders and numbers dropped), at most five.
pub fn fact_name(construct: &str, signature: &str) -> String {
    let after_stage = signature.split_once('/').map_or(signature, |(_, r)| r);
    let words: Vec<String> = after_stage
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty() && !w.chars().all(|c| c.is_ascii_digit()) && !matches!(*w, "n" | "x" | "id" | "sym" | "path"))
        .map(|w| w.to_ascii_lowercase())
        .take(5)
        .collect();
    let kind = construct.split(':').next().unwrap_or("kernel");
    format!("missing_{kind}_{}", if words.is_empty() { "fact".to_string() } else { words.join("_") })
}

/// Distance of two instances: the facts both know that differ, (name, a, b), by name.
fn differing(a: &FactMap, b: &FactMap) -> Vec<(String, Value, Value)> {
    a.iter()
        .filter(|(_, v)| !matches!(v, Value::Unknown))
        .filter_map(|(k, v)| b.get(k).filter(|w| !matches!(w, Value::Unknown) && *w != v).map(|w| (k.clone(), v.clone(), w.clone())))
        .collect()
}

fn show(v: &Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Sym(s) => s.clone(),
        Value::Unknown => "unknown".into(),
    }
}

/// Draft the proposal for `bucket`, whose rule search failed with `why`, from its failing
/// `programs` against `base`'s accepted corpus. `Err` when no failing program is usable (nothing
/// to separate: the caller reports the bucket skipped instead).
pub fn draft_analysis(base: &Base, bucket: &BucketInfo, programs: &[Program], why: &str, id: &str) -> Result<AnalysisDraft, String> {
    let (kind, op) = bucket.construct.as_deref().and_then(parse_construct).unwrap_or((ConstructKind::Kernel, None));
    let construct = super::construct_text(kind, op.as_deref());
    // A bucket on the kernel (the miner's fallback: nothing located the failure) was searched
    // over every construct, so programs are compared over every construct's instances.
    let kinds: Vec<(ConstructKind, Option<&str>)> = if kind == ConstructKind::Kernel { ConstructKind::ALL.iter().map(|k| (*k, None)).collect() } else { vec![(kind, op.as_deref())] };
    let rows = |f: &cake::verify::ModuleFacts| -> Vec<(ConstructKind, FactMap)> { kinds.iter().flat_map(|(k, o)| instances(f, *k, *o).into_iter().map(move |(m, _)| (*k, m))).collect() };
    let accepted: Vec<(&str, Vec<(ConstructKind, FactMap)>)> = base
        .corpus_modules
        .iter()
        .zip(&base.corpus_facts)
        .filter_map(|((id, _), f)| f.as_ref().map(|f| (id.as_str(), rows(f))))
        .filter(|(_, r)| !r.is_empty())
        .collect();
    let what = if kind == ConstructKind::Kernel { "construct".to_string() } else { format!("`{construct}`") };
    let mut failing = Vec::new();
    let mut skipped = Vec::new();
    let mut nearest = Vec::new();
    let mut passing: BTreeSet<String> = BTreeSet::new();
    for p in programs {
        let out = base.frontend.check(&p.source);
        let (Some(m), Some(_)) = (out.module, out.validated) else {
            skipped.push(format!("{}: does not type-check or is already rejected by the verifier", short(&p.hash)));
            continue;
        };
        let Some(facts) = base.targets.get(&m.target).map(|t| cake::verify::module_facts(&m, t)) else {
            skipped.push(format!("{}: target `{}` is not in the target table", short(&p.hash), m.target));
            continue;
        };
        let inst = rows(&facts);
        if inst.is_empty() {
            skipped.push(format!("{}: has no `{construct}`", short(&p.hash)));
            continue;
        }
        // Per accepted program: the failing instances without an identical accepted instance of
        // their kind, and for the first of them the facts that differ from the nearest one.
        let mut ranked: Vec<(usize, &str, Vec<(String, Value, Value)>)> = accepted
            .iter()
            .map(|(cid, acc)| {
                let mut unmatched = 0;
                let mut diff: Option<Vec<(String, Value, Value)>> = None;
                for (k, a) in &inst {
                    let best = acc.iter().filter(|(j, _)| j == k).map(|(_, b)| differing(a, b)).min_by_key(|d| d.len());
                    match best {
                        Some(d) if d.is_empty() => {}
                        other => {
                            unmatched += 1;
                            if diff.is_none() {
                                diff = Some(other.unwrap_or_default());
                            }
                        }
                    }
                }
                (unmatched, *cid, diff.unwrap_or_default())
            })
            .collect();
        ranked.sort_by(|a, b| a.0.cmp(&b.0).then(a.2.len().cmp(&b.2.len())).then(a.1.cmp(b.1)));
        for (n, cid, diff) in ranked.into_iter().take(NEAREST) {
            passing.insert(cid.to_string());
            let said = if n == 0 {
                format!("every {what} instance equals one of accepted corpus case {cid}'s in every fact: no predicate over today's facts can tell them apart")
            } else {
                let shown: Vec<String> = diff.iter().take(DIFFS).map(|(k, a, b)| format!("{k} {} vs {}", show(a), show(b))).collect();
                format!("nearest accepted corpus case {cid}: {n} of its {} instance(s) have no equal there (first: {}{})", inst.len(), shown.join(", "), if diff.len() > DIFFS { ", …" } else { "" })
            };
            nearest.push(format!("program {} (kernel `{}`): {said}", short(&p.hash), m.name));
        }
        failing.push(p);
    }
    if failing.is_empty() {
        return Err(format!("no failing program is usable: {}", skipped.join("; ")));
    }
    let fact = fact_name(&construct, &bucket.signature);
    let skeleton = format!("compiler/src/verify/evolved/{fact}.rs");
    let quantity = format!(
        "a fact of `{construct}` that tells the programs failing with `{}` from the accepted ones: what the failure reports depends on a quantity no fact of `{construct}` exposes today",
        bucket.signature
    );
    let mut d = AnalysisDraft {
        fact,
        construct,
        quantity,
        why: why.to_string(),
        failing_programs: failing.iter().map(|p| p.hash.clone()).collect(),
        passing_programs: passing.into_iter().collect(),
        nearest,
        skeleton,
        skipped_programs: skipped,
        files: Vec::new(),
    };
    d.files = skeleton_files(&d, bucket, &failing, id);
    Ok(d)
}

/// The skeleton analysis, its test and the failing programs it reads.
fn skeleton_files(d: &AnalysisDraft, bucket: &BucketInfo, failing: &[&Program], id: &str) -> Vec<(String, String)> {
    let dir = format!("compiler/src/verify/evolved/{}", d.fact);
    let mut files = Vec::new();
    let mut consts = String::new();
    for (i, p) in failing.iter().enumerate() {
        let file = format!("failing-{}.cake", i + 1);
        files.push((format!("{dir}/{file}"), p.source.clone()));
        consts.push_str(&format!("    (\"{}\", include_str!(\"{}/{file}\")),\n", short(&p.hash), d.fact));
    }
    let passing: String = d.passing_programs.iter().map(|c| format!("    \"{c}\",\n")).collect();
    let nearest: String = d.nearest.iter().map(|n| format!("//! - {n}\n")).collect();
    let text = format!(
        r#"//! DRAFT of a new verifier fact, proposal {id} (cake-evolve-compiler): NOT wired in, NOT built.
//!
//! Evidence bucket {bucket} — `{signature}` on `{construct}`.
//! Missing quantity: {quantity}.
//! Why no rule: {why}.
//! What it must separate (each failing program, and the accepted corpus program nearest it):
{nearest}//!
//! To finish: compute the fact in `compiler/src/verify/facts.rs` (or an analysis module beside it),
//! add its doc line below to the construct's fact table and to `compiler/rules/README.md`, move the
//! test beside the analysis and make it pass, delete this draft, then propose the bucket again:
//! the rule search sees every fact the verifier computes.

// Doc line for the `{construct}` fact table (compiler/src/verify/facts.rs):
//     f("{fact}", "<what it counts or measures, in the lowering's terms>"),

/// The value of `{fact}` on one `{construct}` of a module: the analysis a person writes.
pub fn {fact}(_module: &cake::ir::Module) -> cake::pred::Value {{
    unimplemented!("{fact}: the analysis is not written; see the module docs")
}}

#[cfg(test)]
mod tests {{
    /// The failing programs of the bucket: each must show a value of `{fact}` that no accepted
    /// program shows.
    const FAILING: &[(&str, &str)] = &[
{consts}    ];
    /// Accepted corpus cases nearest the failing programs (`cake corpus show ID`): the rule over
    /// `{fact}` must accept them.
    const PASSING: &[&str] = &[
{passing}    ];

    #[test]
    fn the_fact_separates_the_failing_programs_from_the_accepted_ones() {{
        assert!(!FAILING.is_empty() && !PASSING.is_empty());
        unimplemented!("compute `{fact}` on every program above and check the separation");
    }}
}}
"#,
        bucket = bucket.id,
        signature = bucket.signature,
        construct = d.construct,
        quantity = d.quantity,
        why = d.why,
        fact = d.fact,
    );
    files.push((d.skeleton.clone(), text));
    files
}

/// The LLM's draft of the analysis (Rust for a person to review), or why there is none.
pub fn llm_draft(cfg: &LlmConfig, d: &AnalysisDraft, failing: &[&str]) -> Result<String, String> {
    let system = "You are a GPU compiler engineer working on Cake, a typed IR for Hopper kernel schedules with a verifier that computes facts of each construct (kernel, tensor, smem, view, role, pipeline, barrier, call) and rules over them. Answer with one JSON object only: {\"doc\": the fact's one-line doc, \"rust\": a Rust function computing the fact from a cake::ir::Module}.";
    let mut user = format!("No fact of `{}` separates these failing programs from accepted ones. Missing quantity: {}.\nWhy no rule: {}.\n", d.construct, d.quantity, d.why);
    for n in &d.nearest {
        user.push_str(&format!("- {n}\n"));
    }
    for (i, src) in failing.iter().take(2).enumerate() {
        user.push_str(&format!("\nFailing program {}:\n```\n{}\n```\n", i + 1, crate::sanitize::text_bounded(src, 6000)));
    }
    user.push_str(&format!("\nDraft the fact `{}`: its doc and the analysis.", d.fact));
    let value = llm::chat(cfg, system, &user)?;
    let content = value.pointer("/choices/0/message/content").and_then(|c| c.as_str()).ok_or_else(|| format!("the answer has no choices[0].message.content: {value}"))?;
    let t = content.trim();
    let (start, end) = (t.find('{').ok_or("the model's answer holds no JSON object")?, t.rfind('}').ok_or("the model's answer holds no JSON object")?);
    let v: serde_json::Value = serde_json::from_str(&t[start..=end]).map_err(|e| format!("the model's JSON is not {{doc, rust}}: {e}"))?;
    let rust = v.get("rust").and_then(|r| r.as_str()).filter(|r| !r.trim().is_empty()).ok_or("the model left `rust` empty")?;
    let doc = v.get("doc").and_then(|r| r.as_str()).unwrap_or("");
    Ok(format!("// doc: {}\n{rust}\n", doc.replace('\n', " ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fact_names_come_from_the_failure_not_from_program_names() {
        assert_eq!(fact_name("tensor", "run/mismatch: never written: rows+nonfinite"), "missing_tensor_mismatch_never_written_rows_nonfinite");
        assert_eq!(fact_name("call:tma_load", "lower/build_L005: box of <n> bytes"), "missing_call_build_l005_box_of_bytes");
        assert_eq!(fact_name("kernel", "run/"), "missing_kernel_fact");
    }
}
