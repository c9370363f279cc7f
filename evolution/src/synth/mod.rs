//! Proposal synthesis: from a bucket of failing programs to a change written as data.
//!
//! # Verifier rules (Daikon-style invariants, decision stumps)
//! For the bucket's construct kind (`call:tma_load`, `smem`, `pipeline`, ...) the engine computes
//! the verifier's facts (`cake::verify::facts`) of every instance of that construct in every
//! failing program that the current verifier *accepts* (the implicated instances), and of every
//! instance in every corpus program the corpus expects to be accepted. (A new rule may also fire
//! on negative corpus cases — they are rejected anyway — and the proposal then adds the new
//! finding to their expectations.) It then searches the predicate
//! language for the simplest predicate that **holds on every corpus instance** (an invariant of
//! the accepted data) and that **every failing program violates** (on at least one implicated
//! instance). Candidates, simplest first:
//!
//! 1. one atom, in this order of forms: a boolean fact (`has_tma`, `!used`); a bound by a kernel
//!    or target limit that names the same thing (`smem_bytes <= target_smem_max`); a threshold
//!    (`f <= c`, `f >= c`); a divisibility (`f % c == 0`, the smallest divisor that separates);
//!    a relation between two facts of the construct (`a == b`, `a <= b`, `a % b == 0`); a
//!    constant (`f == c`, `s == sym`);
//! 2. two atoms: a conjunction of two invariants (`a && b`) or a guarded invariant
//!    (`when = g`, `require = b`: the rule fires where `g` holds and `b` does not).
//!
//! Every constant is **grounded**: a target-table value of the failing programs' target, a
//! catalog constraint's value, or a boundary fitted from labelled variants
//! ([`search::SearchInput::labelled`]), recorded with its source in [`Candidate::constants`]. A
//! value in the gap between training values is never generated, nor is a blacklist (`f != c`):
//! both memorize the training data instead of stating a cause, and the `generalization` gate
//! (`cake_merge_gates::generalization_gate`) rejects them.
//!
//! Thresholds and divisibility come before relations because a small corpus is full of
//! coincidental relations between facts that happen to share values (powers of two). Ties within a form
//! are broken by the fact's place (the construct's own facts, then `kernel_*`, then `target_*`)
//! and then by name — or, under a non-zero seed, by a seeded hash of the name, so a different seed
//! explores a different but equally simple rule, deterministically. Only facts decidable on
//! every corpus instance are used (an unknown would be a coverage-limit finding on an accepted
//! program). Every chosen candidate is then checked with the real rules engine: the rule file is
//! loaded by `RuleSet::from_files`, fires on every failing program, and is silent on every corpus
//! program; the first candidate that passes is the proposal.
//!
//! A bucket on a call (`call:cp_async`) whose own facts separate nothing is searched again over
//! the declarations its arguments name — the `tensor`s of its global arguments, then the `smem`
//! regions of its shared ones: a cp.async fails because of the row stride of the tensor it copies
//! from, a fact of the tensor, not of the call.
//!
//! When no predicate separates *every* failing program of a bucket (a wrong answer whose cause no
//! fact shows — a wrong data mapping — beside programs whose cause the facts do show), the engine
//! proposes the predicate that separates the largest subset of at least two of them
//! ([`search_subset`]), across the bucket's constructs (for a `kernel`-attributed bucket, the
//! miner's fallback, every construct kind of its programs). The draft names the programs it
//! explains and those it leaves unexplained, and commits only the explained ones as negative
//! cases.
//!
//! # Primitives
//! A bucket of "unknown operation `X`" findings (E0301) across two or more programs drafts a
//! catalog entry for `X` from its call sites: form (statement or expression), parameters (kinds
//! inferred from what the arguments name), a type rule, effects, and — only when an LLM drafted
//! them (`crate::llm`) — the hardware note and the lowering. Without them the entry is still
//! written and queued; its gates fail and say what is missing.

//!
//! # Files
//! - [`search`]: the facts as the search sees them, and the predicate search over them;
//! - [`rule`]: from a bucket to a rule proposal (the base tree's data, the constructs searched,
//!   each candidate validated with the rules engine);
//! - [`rule_file`]: what a rule proposal commits (the rule TOML and its doc, the negative cases,
//!   the changelog line);
//! - [`primitive`]: catalog entries drafted for an unknown op;
//! - [`analysis`]: a proposal for a new fact, when no predicate over today's facts separates a
//!   bucket (a draft of what is missing, not a rule).

use cake::verify::ConstructKind;
use serde::{Deserialize, Serialize};

pub mod analysis;
pub mod primitive;
pub mod reported;
pub mod rule;
pub mod rule_file;
pub mod search;
pub mod variants;

// The paths callers use (`synth::draft_rule`, `synth::search`, ...), kept from when this was one file.
pub use analysis::{draft_analysis, AnalysisDraft};
pub use primitive::{draft_primitive, unknown_op, PrimitiveDraft};
pub use rule::{category_for, draft_rule, draft_rule_with, next_code, relearn, with_rules, Base, Negative, RuleDraft, EVOLVED_CODES, MAX_NEGATIVE_CASES};
pub use rule_file::{rule_name, set_findings};
pub use search::{instances, literal_words, search, search_subset, Candidate, FactMap, Labelled, SearchInput, SubsetResult, MAX_SUBSETS};

// ─── Inputs ──────────────────────────────────────────────────────────────────────────────────────

/// What the engine needs to know about a mined bucket (the miner's `Bucket`, decoupled).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BucketInfo {
    pub id: String,
    /// The normalized failure signature.
    pub signature: String,
    /// The construct the failure maps to: `call:tma_load`, `smem`, `pipeline`, ... (`None`:
    /// unknown — the search then tries every construct kind).
    pub construct: Option<String>,
    pub op: Option<String>,
    pub evidence_ids: Vec<String>,
    pub program_hashes: Vec<String>,
    pub count: usize,
    pub score: f64,
}

/// One failing program of a bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// Content hash (the evidence store's key).
    pub hash: String,
    pub source: String,
}


/// Parse `call:tma_load` / `smem` into the kind and the op.
pub fn parse_construct(s: &str) -> Option<(ConstructKind, Option<String>)> {
    match s.split_once(':') {
        Some((k, op)) => {
            let kind = ConstructKind::parse(k)?;
            Some((kind, (op != "*").then(|| op.to_string())))
        }
        None => ConstructKind::parse(s).map(|k| (k, None)),
    }
}

fn construct_text(kind: ConstructKind, op: Option<&str>) -> String {
    match (kind, op) {
        (ConstructKind::Call | ConstructKind::Arg, Some(op)) => format!("{}:{op}", kind.as_str()),
        (ConstructKind::Call | ConstructKind::Arg, None) => format!("{}:*", kind.as_str()),
        (k, _) => k.as_str().to_string(),
    }
}

/// Where a rule on this kind of construct points.
pub fn primary_span_key(kind: ConstructKind) -> &'static str {
    match kind {
        ConstructKind::Call => "call",
        ConstructKind::Arg => "arg",
        ConstructKind::Kernel => "decl",
        _ => "name",
    }
}

/// Why no rule could be synthesized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SynthError {
    NoFailingInstances(Vec<String>),
    NoAcceptedInstances(String),
    NoSeparatingPredicate(String),
    /// Neither all failing programs nor any two or more of them are separated, over any of
    /// these constructs.
    NoPartialPredicate(Vec<String>),
    Invalid(String),
}

impl std::fmt::Display for SynthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SynthError::NoFailingInstances(why) => write!(f, "no failing program is usable: {}", why.join("; ")),
            SynthError::NoAcceptedInstances(k) => write!(f, "the corpus has no instance of `{k}` to learn what is accepted"),
            SynthError::NoSeparatingPredicate(k) => write!(f, "no predicate of up to two atoms over the facts of `{k}` separates the failing programs from the corpus"),
            SynthError::NoPartialPredicate(k) => write!(
                f,
                "no predicate of up to two atoms separates the failing programs, or any two or more of them, from the corpus over the facts of {}",
                if k.len() > 3 { format!("any of {} constructs (`{}`, ...)", k.len(), k[..3].join("`, `")) } else { format!("`{}`", k.join("`, `")) }
            ),
            SynthError::Invalid(m) => write!(f, "{m}"),
        }
    }
}

fn toml_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', " ")
}

pub fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

// ─── CHANGELOG ───────────────────────────────────────────────────────────────────────────────────

/// Insert `line` into a Keep-a-Changelog file: under `## [Unreleased]` → `### Added` (both
/// created when missing), after the section's last entry. Inserting a line already present is a
/// no-op.
pub fn changelog_insert(text: &str, line: &str) -> String {
    if text.lines().any(|l| l.trim_end() == line.trim_end()) {
        return text.to_string();
    }
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let unreleased = lines.iter().position(|l| l.trim_start().starts_with("## [Unreleased]"));
    let Some(u) = unreleased else {
        // No Unreleased section: put one after the title block.
        let at = lines.iter().position(|l| l.starts_with("## ")).unwrap_or(lines.len());
        let block = vec!["## [Unreleased]".to_string(), String::new(), "### Added".to_string(), line.to_string(), String::new()];
        lines.splice(at..at, block);
        return lines.join("\n") + "\n";
    };
    let end = lines.iter().enumerate().skip(u + 1).find(|(_, l)| l.starts_with("## ")).map(|(i, _)| i).unwrap_or(lines.len());
    let added = (u + 1..end).find(|i| lines[*i].trim() == "### Added");
    match added {
        Some(a) => {
            let section_end = (a + 1..end).find(|i| lines[*i].starts_with("### ")).unwrap_or(end);
            // After the last non-blank line of the section.
            let mut at = section_end;
            while at > a + 1 && lines[at - 1].trim().is_empty() {
                at -= 1;
            }
            lines.insert(at, line.to_string());
        }
        None => {
            lines.splice(u + 1..u + 1, vec![String::new(), "### Added".to_string(), line.to_string()]);
        }
    }
    lines.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changelog_goes_under_unreleased_added() {
        let t = "# Changelog\n\n## [Unreleased]\n\n### Added\n- one\n- two\n\n### Fixed\n- x\n\n## [0.1.0]\n- old\n";
        let out = changelog_insert(t, "- three");
        assert!(out.contains("- two\n- three\n\n### Fixed"), "{out}");
        assert_eq!(changelog_insert(&out, "- three"), out);
        let none = changelog_insert("# Changelog\n", "- a");
        assert!(none.contains("## [Unreleased]\n\n### Added\n- a"), "{none}");
    }
}
