//! Stage 1, generate: rewrite an archive elite with one tactic move. Every applicable move of
//! every tactic is listed in a fixed order (tactic files by name, then each tactic's parameter
//! order) and one is drawn with the seeded generator, skipping programs already in the database;
//! so under one `--seed` and the same recorded outcomes the same candidates come in the same order.

use std::collections::HashSet;

use serde_json::Value;

use crate::contract::sha256_hex;
use crate::rng::SplitMix64;
use crate::tactic::Tactic;

#[derive(Clone, Debug)]
pub struct Proposal {
    pub text: String,
    pub hash: String,
    pub tactic: String,
    pub params: Value,
}

/// A new rewrite of `parent_text`, or `None` when every move from it gives a program already seen.
pub fn propose(parent_text: &str, tactics: &[Tactic], rng: &mut SplitMix64, seen: &HashSet<String>) -> Option<Proposal> {
    let file = cake::syntax::parse(parent_text).ok()?;
    let mut fresh: Vec<Proposal> = Vec::new();
    for t in tactics {
        for m in t.moves(&file) {
            let text = cake::syntax::print(&m.file);
            let hash = sha256_hex(text.as_bytes());
            if !seen.contains(&hash) && !fresh.iter().any(|p| p.hash == hash) {
                fresh.push(Proposal { text, hash, tactic: m.tactic, params: m.params });
            }
        }
    }
    if fresh.is_empty() {
        return None;
    }
    let i = rng.below(fresh.len());
    Some(fresh.swap_remove(i))
}
