//! Widening an accepted rule: its bucket received evidence of programs the rule misses (the
//! verifier of the checkout, accepted rule included, still accepts them). The bucket is reopened
//! as a rule proposal marked `widens = "<accepted id>"`: the search runs over a base **without**
//! the accepted rule, so it must explain the old programs and the new ones together, and the
//! proposal keeps the rule's code and replaces its file.

use std::collections::BTreeSet;

use cake::verify::RuleSet;

use crate::records::{Record, Status};
use crate::synth::{with_rules, Base};

/// The bucket's programs that the accepted rule `code` misses and that its acceptance did not
/// see: programs of the bucket not among the accepted record's, which the base's verifier (the
/// accepted rule included) does not reject with `code`. Empty when nothing needs widening.
pub fn missed(accepted: &Record, code: &str, base: &Base, programs: &[crate::synth::Program]) -> Vec<String> {
    if accepted.status != Status::Accepted {
        return Vec::new();
    }
    let known: BTreeSet<&String> = accepted.programs.iter().collect();
    programs
        .iter()
        .filter(|p| !known.contains(&p.hash))
        .filter(|p| !base.frontend.check(&p.source).diagnostics.iter().any(|d| d.is_error() && d.code == code))
        .map(|p| p.hash.clone())
        .collect()
}

/// `base` without the rule `code`: its rule set, rule files and verifier. Returns the base and the
/// path of the rule's file (which the widening proposal deletes when its own file is named
/// differently).
pub fn base_without(base: &Base, code: &str) -> Result<(Base, Option<String>), String> {
    let line = format!("code = \"{code}\"");
    let (gone, kept): (Vec<&(String, String)>, Vec<&(String, String)>) = base.rule_files.iter().partition(|(_, text)| text.lines().any(|l| l.trim() == line));
    let files: Vec<(&str, &str)> = kept.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    let rules = RuleSet::from_files(&files).map_err(|e| format!("the base's rules without {code} do not load: {e}"))?;
    let frontend = with_rules(base, &rules);
    let widened = Base {
        tree: cake_merge_gates::Tree::new(base.tree.root.clone()),
        frontend,
        rules,
        rule_files: kept.into_iter().cloned().collect(),
        targets: base.targets.clone(),
        corpus_modules: base.corpus_modules.clone(),
        corpus_facts: base.corpus_facts.clone(),
        negatives: base.negatives.clone(),
        corpus_cases: base.corpus_cases,
        grounding: base.grounding.clone(),
    };
    Ok((widened, gone.first().map(|(p, _)| p.clone())))
}
