//! The `analysis` gate of a proposal for a new verifier fact (issue 12, item 6): the evolution
//! engine found no predicate over today's facts that separates a bucket's failing programs from
//! the accepted ones, so it proposes the fact that is missing instead of a near-miss rule. Such
//! a proposal is a draft for a person — what quantity is missing, which programs it must tell
//! apart, a skeleton of the analysis and its test — not a rule, and it cannot be accepted until
//! the analysis exists.
//!
//! The gate passes only when the compiler running it computes the proposed fact on the
//! construct (it is in `cake::verify::facts::vocabulary`): a person wrote the analysis, and the
//! bucket can then be proposed again as a rule over it. Until then it fails, saying so. (The
//! draft's Rust also fails the `data-only` gate: the gates never build a proposal.)

use cake::catalog::Catalog;
use cake::verify::ConstructKind;

use crate::GateResult;

pub const TITLE: &str = "the fact a new analysis must compute exists (a proposal for a fact is not a rule)";

/// What the proposal asks for.
pub struct Input<'a> {
    /// The fact's proposed name.
    pub fact: &'a str,
    /// The construct kind it is a fact of (`tensor`, `kernel`, `call:tma_load`, ...).
    pub construct: &'a str,
    /// Why no rule could be learned (the search's reason).
    pub why: &'a str,
    /// The skeleton a person completes (path in the proposal).
    pub skeleton: &'a str,
}

/// Whether the running compiler computes `fact` on `construct`.
pub fn fact_exists(fact: &str, construct: &str) -> bool {
    let (kind, op) = construct.split_once(':').map_or((construct, None), |(k, o)| (k, Some(o)));
    let Some(kind) = ConstructKind::parse(kind) else { return false };
    let catalog = Catalog::builtin();
    let op = op.and_then(|o| catalog.get(o));
    cake::verify::facts::vocabulary(kind, op, catalog).iter().any(|(name, _)| name == fact)
}

pub fn gate(input: &Input) -> GateResult {
    if fact_exists(input.fact, input.construct) {
        return GateResult::pass(
            "analysis",
            TITLE,
            format!("this compiler computes `{}` on `{}`: propose the bucket again, the rule search now sees it", input.fact, input.construct),
        );
    }
    GateResult::fail(
        "analysis",
        TITLE,
        format!("not a rule: a proposal for a new fact `{}` of `{}`, which no analysis computes yet", input.fact, input.construct),
        vec![
            format!("why no rule: {}", input.why),
            format!(
                "it cannot be accepted until a person writes the analysis: compute `{}` in compiler/src/verify/facts.rs (its doc in the construct's fact table), make the test of {} pass, then propose the bucket again as a rule",
                input.fact, input.skeleton
            ),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fails_until_the_compiler_computes_the_fact() {
        let missing = Input { fact: "missing_mismatch_rows", construct: "tensor", why: "no predicate separates", skeleton: "compiler/src/verify/evolved/x.rs" };
        let g = gate(&missing);
        assert_eq!(g.status, crate::GateStatus::Fail);
        assert!(g.summary.contains("not a rule") && g.details.iter().any(|d| d.contains("cannot be accepted until a person writes the analysis")), "{g:?}");
        // A fact the verifier has: the analysis exists, the gate passes.
        let present = Input { fact: "unwritten_elements", ..missing };
        assert_eq!(gate(&present).status, crate::GateStatus::Pass);
        assert!(fact_exists("box_inner_bytes", "call:tma_load") || fact_exists("max_box", "tensor"));
        assert!(!fact_exists("unwritten_elements", "no-such-kind"));
    }
}
