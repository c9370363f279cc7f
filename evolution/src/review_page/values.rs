//! The values a rule's page sets beside its predicate: for each fact the rule reads, its values on
//! the instances of the failing programs (those the rule flags) and the range over the accepted
//! corpus programs of the checkout (what the rule must keep accepting), with the rule's constants.
//! The facts are the verifier's own (`cake::verify::module_facts`), as the synthesis read them.

use std::collections::BTreeMap;

use cake::pred::Value;

use crate::synth::rule::{Base, RuleDraft};
use crate::synth::{parse_construct, search};

/// One fact of the rule: its failing values (one per flagged instance) and the accepted range.
pub struct FactValues {
    pub fact: String,
    pub failing: Vec<String>,
    /// (min, max) over the accepted programs' instances, when the fact is an integer there.
    pub accepted: Option<(i64, i64)>,
    /// Accepted instances that have the fact.
    pub accepted_instances: usize,
}

/// The facts `text` (the predicate's `require` and `when`) names: each of `keys` that appears as
/// a whole name (not inside a longer one, nor as the stem of an indexed `dim(0)`).
fn named_facts<'a>(text: &str, keys: impl Iterator<Item = &'a String>) -> Vec<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    keys.filter(|k| {
        text.match_indices(k.as_str()).any(|(i, _)| {
            let before = text[..i].chars().next_back();
            let after = text[i + k.len()..].chars().next();
            !before.is_some_and(ident) && !after.is_some_and(|c| ident(c) || c == '(')
        })
    })
    .cloned()
    .collect()
}

/// The values around `d`'s facts; `lines` are the 1-based lines its findings marked in each
/// failing source (same order as `d.failing_sources`), which pick the flagged instances.
pub fn fact_values(base: &Base, d: &RuleDraft, lines: &[Vec<usize>]) -> Result<Vec<FactValues>, String> {
    let (kind, op) = parse_construct(&d.applies_to).ok_or_else(|| format!("the rule applies to `{}`, not a construct kind", d.applies_to))?;
    let accepted: Vec<search::FactMap> = base.corpus_facts.iter().flatten().flat_map(|f| search::instances(f, kind, op.as_deref())).map(|(m, _)| m).collect();
    let mut failing: Vec<search::FactMap> = Vec::new();
    for (i, src) in d.failing_sources.iter().enumerate() {
        let Some(m) = base.frontend.check(src).module else { continue };
        let Some(t) = base.targets.get(&m.target) else { continue };
        let facts = cake::verify::module_facts(&m, t);
        let marked = lines.get(i).cloned().unwrap_or_default();
        for (fm, span) in search::instances(&facts, kind, op.as_deref()) {
            if marked.contains(&cake::span::line_col(src, span.start as usize).0) {
                failing.push(fm);
            }
        }
    }
    let keys: std::collections::BTreeSet<&String> = accepted.iter().chain(&failing).flat_map(|m| m.keys()).collect();
    let text = format!("{} {}", d.require, d.when.as_deref().unwrap_or(""));
    let mut out = Vec::new();
    for fact in named_facts(&text, keys.into_iter()) {
        let ints: Vec<i64> = accepted.iter().filter_map(|m| match m.get(&fact) {
            Some(Value::Int(x)) => Some(*x),
            _ => None,
        }).collect();
        let range = ints.iter().min().zip(ints.iter().max()).map(|(a, b)| (*a, *b));
        let mut seen = BTreeMap::new();
        for m in &failing {
            if let Some(v) = m.get(&fact) {
                *seen.entry(v.to_string()).or_insert(0usize) += 1;
            }
        }
        out.push(FactValues {
            fact: fact.clone(),
            failing: seen.into_iter().map(|(v, n)| if n > 1 { format!("{v} (×{n})") } else { v }).collect(),
            accepted: range,
            accepted_instances: accepted.iter().filter(|m| m.contains_key(&fact)).count(),
        });
    }
    Ok(out)
}
