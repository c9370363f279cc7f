//! What a failure's own message reports (issue 14): the lowering's refusal of a failing program
//! names the quantities that are wrong — "a K-major wgmma operand whose rows (256 bytes) are not
//! exactly one 128-byte swizzle span" — with the program's values. A fact of the construct whose
//! value is one of those numbers, and whose name shares a word with the words around it
//! (`row_bytes` = 256 beside "rows" and "bytes"; `swizzle` = 128 beside "swizzle"), measures what
//! the failure reports. The rule search prefers predicates over such facts: they state the cause,
//! where a simpler predicate over another fact only happens to separate the training programs
//! (`dim(-1) >= 64` for the same bucket).
//!
//! The same refusal labels boundary variants on the CPU: a variant whose lowering refuses it
//! with the bucket's own code and normalized message reproduces the bucket's failure
//! ([`reproduces`]), even when the lowering calls the construct "not supported yet".

use std::collections::BTreeSet;

use cake::pred::Value;

use super::search::FactMap;

/// How many tokens on each side of a number count as its context.
const CONTEXT: usize = 3;

/// The lowering's refusal of `source` with the verifier bypassed (as a run of a program that
/// verified under the ablated rules is lowered): `(code, message)`, or `None` when it lowers (or
/// does not type-check).
pub fn lowering_refusal(frontend: &cake::corpus::tiers::Frontend, source: &str) -> Option<(String, String)> {
    let module = frontend.check(source).module?;
    let unverified = cake::verify::Validated::assume_verified_unsafe(module);
    cake::lower::lower_with(&unverified, &cake::lower::LowerOptions::with_source("variant.cake", source)).err().map(|e| (e.code.to_string(), e.message.clone()))
}

/// Whether a lowering refusal `(code, message)` is the failure of a bucket with `signature`
/// (`lower/build_L001: <normalized detail>`, as `mine` writes it: the stage, the class, then the
/// run record's message normalized, which may say more before the lowering's own words — "not
/// supported by the lowering yet: …").
pub fn reproduces(signature: &str, code: &str, message: &str) -> bool {
    let Some((class, detail)) = class_and_detail(signature) else { return false };
    let message = crate::normalize::normalize(message);
    class == format!("build_{code}") && !message.is_empty() && (detail == message || detail.ends_with(&format!(": {message}")))
}

/// Whether a bucket's signature is a lowering refusal (`lower/build_L001: …`).
pub fn is_lowering_refusal(signature: &str) -> bool {
    class_and_detail(signature).is_some_and(|(class, _)| class.starts_with("build_L"))
}

/// A signature's class without its stage (`build_L001`), and its detail.
fn class_and_detail(signature: &str) -> Option<(&str, &str)> {
    let (class, detail) = signature.split_once(": ")?;
    Some((class.rsplit('/').next().unwrap_or(class), detail))
}

/// A word as fact names and messages are compared: lower case, a plural `s` dropped, the byte
/// unit (`B`, `bytes`) spelled `byte`.
fn word(w: &str) -> String {
    let w = w.to_ascii_lowercase();
    let w = if w == "b" { "byte".to_string() } else { w };
    match w.strip_suffix('s') {
        Some(stem) if stem.len() >= 3 && !stem.ends_with('s') => stem.to_string(),
        _ => w,
    }
}

/// The numbers of a message, each with the words around it (`128-byte swizzle` gives 128 with
/// `byte`, `swizzle`).
pub fn quantities(message: &str) -> Vec<(i64, BTreeSet<String>)> {
    // Tokens: runs of digits, runs of letters; a number followed directly by a unit letter run
    // (`256B`) gives both.
    let mut tokens: Vec<Result<i64, String>> = Vec::new();
    let b = message.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let s = i;
        if b[i].is_ascii_digit() {
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            // Digits inside an identifier (`bf16`, `sm_90a`) are not quantities.
            let inside = s > 0 && (b[s - 1].is_ascii_alphabetic() || b[s - 1] == b'_');
            match message[s..i].parse::<i64>() {
                Ok(v) if !inside => tokens.push(Ok(v)),
                _ => {}
            }
        } else if b[i].is_ascii_alphabetic() || b[i] == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            for part in message[s..i].split('_').filter(|p| !p.is_empty()) {
                tokens.push(Err(word(part)));
            }
        } else {
            i += 1;
        }
    }
    let mut out = Vec::new();
    for (k, t) in tokens.iter().enumerate() {
        let Ok(v) = t else { continue };
        let lo = k.saturating_sub(CONTEXT);
        let hi = (k + CONTEXT + 1).min(tokens.len());
        let words: BTreeSet<String> = tokens[lo..hi].iter().filter_map(|t| t.as_ref().err().cloned()).collect();
        out.push((*v, words));
    }
    out
}

/// The words of a fact's name (`row_bytes` → `row`, `byte`; `dim(-1)` → `dim`).
fn name_words(fact: &str) -> BTreeSet<String> {
    fact.split(|c: char| !c.is_ascii_alphabetic()).filter(|p| !p.is_empty()).map(word).collect()
}

/// Words too common in messages to tie a number to a fact.
const GENERIC: &[&str] = &["of", "the", "a", "an", "is", "are", "not", "one", "in", "to", "by", "kernel", "target"];

/// The facts of an instance that `message` reports: an integer fact whose value is a number of
/// the message and whose name shares a word (not a generic one) with the words around it.
pub fn reported_in(message: &str, instance: &FactMap) -> BTreeSet<String> {
    let qs = quantities(message);
    let mut out = BTreeSet::new();
    for (fact, v) in instance {
        let Value::Int(x) = v else { continue };
        if fact.starts_with("kernel_") || fact.starts_with("target") {
            continue;
        }
        let words = name_words(fact);
        if qs.iter().any(|(n, ctx)| n == x && ctx.iter().any(|w| words.contains(w) && !GENERIC.contains(&w.as_str()))) {
            out.insert(fact.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(pairs: &[(&str, i64)]) -> FactMap {
        pairs.iter().map(|(k, v)| (k.to_string(), Value::Int(*v))).collect()
    }

    #[test]
    fn a_wgmma_row_refusal_reports_the_row_bytes_and_the_swizzle_not_the_dim() {
        let msg = "a K-major wgmma operand whose rows (256 bytes) are not exactly one 128-byte swizzle span";
        let i = inst(&[("row_bytes", 256), ("swizzle", 128), ("dim(-1)", 128), ("bytes", 32768), ("kernel_smem_bytes", 256)]);
        assert_eq!(reported_in(msg, &i), BTreeSet::from(["row_bytes".to_string(), "swizzle".to_string()]));
    }

    #[test]
    fn digits_inside_names_and_far_words_are_not_context() {
        let q = quantities("bf16 tile of 64 elements; far away words here then rows");
        assert_eq!(q.len(), 1);
        assert_eq!(q[0].0, 64);
        assert!(q[0].1.contains("element") && q[0].1.contains("tile") && !q[0].1.contains("row"), "{q:?}");
        assert!(quantities("256B").iter().any(|(n, w)| *n == 256 && w.contains("byte")));
    }

    #[test]
    fn a_refusal_reproduces_a_bucket_only_with_its_code_and_normalized_message() {
        let sig = format!("build_L001: {}", crate::normalize::normalize("rows (256 bytes) are not one 128-byte span"));
        assert!(reproduces(&sig, "L001", "rows (64 bytes) are not one 128-byte span"));
        assert!(!reproduces(&sig, "L006", "rows (64 bytes) are not one 128-byte span"));
        assert!(!reproduces(&sig, "L001", "something else"));
        assert!(!reproduces("mismatch: unknown", "L001", "x"));
        // As `mine` writes a lowering refusal of a run record: the stage, and the record's words first.
        let sig = format!("lower/build_L001: not supported by the lowering yet: {}", crate::normalize::normalize("rows (256 bytes) are not one 128-byte span"));
        assert!(reproduces(&sig, "L001", "rows (64 bytes) are not one 128-byte span"));
        assert!(!reproduces(&sig, "L001", "span"));
    }
}
