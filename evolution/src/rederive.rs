//! Expectations of negative corpus cases re-derived for a merge (`accept` after main moved).
//!
//! A rule proposal commits negative cases that expect exactly the findings of its base plus its
//! own rule. When another rule was accepted into main in between, that rule may fire on the
//! proposal's cases too (and the proposal's rule on the cases main gained), so their expected
//! findings are out of date on the merged tree, and the corpus gate would refuse the merge
//! forever. Here each plain negative case of the merged tree is checked with the merged tree's
//! rules; a case whose findings differ from its expectations **only** by findings of the codes
//! the merge brings together (rules added since the proposal's base, on either side) gets its
//! `findings` rewritten. Any other difference is left for the corpus gate to report.

use std::collections::BTreeSet;
use std::path::Path;

use cake::corpus::{Corpus, FindingSpec, Origin, Verdict};
use cake::diag::Severity;
use cake::verify::RuleSet;
use cake_merge_gates::Tree;

use crate::synth::set_findings;

/// One manifest rewritten: its path relative to the tree's root, its new text, and the case id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rederived {
    pub path: String,
    pub text: String,
    pub case: String,
}

/// Codes of the rules in `merged` that `base` lacks: what the merge brings together.
pub fn new_codes(base: &Path, merged: &Path) -> Result<BTreeSet<String>, String> {
    let load = |p: &Path| RuleSet::load_dir(Tree::new(p).rules()).map_err(|e| format!("verifier rules of {}: {e}", p.display()));
    let old: BTreeSet<String> = load(base)?.rules().iter().map(|r| r.code.clone()).collect();
    Ok(load(merged)?.rules().iter().map(|r| r.code.clone()).filter(|c| !old.contains(c)).collect())
}

/// The negative cases of the tree at `root` whose expected error findings differ from what its
/// own rules report only by findings with a code in `codes`, with their manifests rewritten.
pub fn rederive(root: &Path, codes: &BTreeSet<String>) -> Result<Vec<Rederived>, String> {
    if codes.is_empty() {
        return Ok(Vec::new());
    }
    let tree = Tree::new(root);
    let fe = cake_merge_gates::corpus_gate::frontend_for(&tree)?;
    let corpus = Corpus::load(tree.corpus()).map_err(|e| format!("cannot read the corpus of {}: {e}", root.display()))?;
    let mut out = Vec::new();
    for case in &corpus.cases {
        let Origin::Plain { manifest, .. } = &case.origin else { continue };
        if case.manifest.expect.verdict != Verdict::Reject {
            continue;
        }
        let observed = cake::corpus::tiers::findings_at(&case.source, &fe.check(&case.source).diagnostics, Severity::Error);
        let expected = &case.manifest.expect.findings;
        if same(&observed, expected) || !differs_only_by(&observed, expected, codes) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(manifest) else { continue };
        let Some(new_text) = set_findings(&text, &observed) else { continue };
        let Ok(rel) = manifest.strip_prefix(root) else { continue };
        out.push(Rederived { path: rel.to_string_lossy().replace('\\', "/"), text: new_text, case: case.id.clone() });
    }
    Ok(out)
}

fn key(f: &FindingSpec) -> (String, usize, usize) {
    (f.code.clone(), f.line, f.column)
}

fn same(a: &[FindingSpec], b: &[FindingSpec]) -> bool {
    a.iter().map(key).collect::<BTreeSet<_>>() == b.iter().map(key).collect::<BTreeSet<_>>()
}

/// Whether every finding in one list and not the other has a code in `codes`.
fn differs_only_by(a: &[FindingSpec], b: &[FindingSpec], codes: &BTreeSet<String>) -> bool {
    let (a, b): (BTreeSet<_>, BTreeSet<_>) = (a.iter().map(key).collect(), b.iter().map(key).collect());
    a.symmetric_difference(&b).all(|(code, _, _)| codes.contains(code))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(code: &str, line: usize) -> FindingSpec {
        FindingSpec { code: code.into(), line, column: 1 }
    }

    #[test]
    fn only_differences_in_the_merged_codes_are_rederived() {
        let codes: BTreeSet<String> = ["V600".to_string()].into();
        assert!(differs_only_by(&[f("V201", 3), f("V600", 4)], &[f("V201", 3)], &codes));
        assert!(!differs_only_by(&[f("V202", 3), f("V600", 4)], &[f("V201", 3)], &codes), "a V201 that moved is not the merge's doing");
        assert!(same(&[f("V201", 3)], &[f("V201", 3)]));
    }
}
