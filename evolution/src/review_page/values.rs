//! The values a rule's page sets beside its predicate: for each fact the rule reads, its values on
//! the instances of the failing programs (those the rule flags) and the range over the accepted
//! corpus programs of the checkout (what the rule must keep accepting), with the rule's constants.
//! The facts are the verifier's own (`cake::verify::module_facts`), as the synthesis read them.

use cake::pred::Value;

use crate::synth::rule::{Base, RuleDraft};
use crate::synth::{parse_construct, search};

/// The facts a rule reads, as a table: one row per flagged instance of a failing program, and
/// the accepted corpus's range of each.
pub struct FactValues {
    pub facts: Vec<String>,
    /// (program and line, the value of each fact) per flagged instance.
    pub failing: Vec<(String, Vec<String>)>,
    /// (min, max) of each fact over the accepted programs' instances, when it is an integer there.
    pub accepted: Vec<Option<(i64, i64)>>,
    /// Accepted instances of the construct.
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
pub fn fact_values(base: &Base, d: &RuleDraft, lines: &[Vec<usize>]) -> Result<FactValues, String> {
    let (kind, op) = parse_construct(&d.applies_to).ok_or_else(|| format!("the rule applies to `{}`, not a construct kind", d.applies_to))?;
    let accepted: Vec<search::FactMap> = base.corpus_facts.iter().flatten().flat_map(|f| search::instances(f, kind, op.as_deref())).map(|(m, _)| m).collect();
    let mut failing: Vec<(String, search::FactMap)> = Vec::new();
    for (i, src) in d.failing_sources.iter().enumerate().take(lines.len()) {
        let Some(m) = base.frontend.check(src).module else { continue };
        let Some(t) = base.targets.get(&m.target) else { continue };
        let facts = cake::verify::module_facts(&m, t);
        let who = crate::synth::short(d.failing_programs.get(i).map_or("", String::as_str)).to_string();
        for (fm, span) in search::instances(&facts, kind, op.as_deref()) {
            let line = cake::span::line_col(src, span.start as usize).0;
            if lines[i].contains(&line) {
                failing.push((format!("{who} line {line}"), fm));
            }
        }
    }
    let keys: std::collections::BTreeSet<&String> = accepted.iter().chain(failing.iter().map(|(_, m)| m)).flat_map(|m| m.keys()).collect();
    let text = format!("{} {}", d.require, d.when.as_deref().unwrap_or(""));
    let facts = named_facts(&text, keys.into_iter());
    let accepted_range = facts
        .iter()
        .map(|f| {
            let ints: Vec<i64> = accepted.iter().filter_map(|m| if let Some(Value::Int(x)) = m.get(f) { Some(*x) } else { None }).collect();
            ints.iter().min().zip(ints.iter().max()).map(|(a, b)| (*a, *b))
        })
        .collect();
    let failing = failing.into_iter().map(|(who, m)| (who, facts.iter().map(|f| m.get(f).map_or("—".to_string(), |v| v.to_string())).collect())).collect();
    Ok(FactValues { facts, failing, accepted: accepted_range, accepted_instances: accepted.len() })
}
