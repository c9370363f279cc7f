//! Wrong answers attributed to their owner. A `run/mismatch` record names the output elements it
//! found wrong (`checks[].first_bad[].index`, at the run's `shape`); the verifier's output
//! ownership ([`cake::verify::coverage::owners`]: the same walk that decides V320/V321 — which
//! tile, role and warp or warpgroup stores which element) maps them back to who owns them:
//!
//! * elements **no writer stores** (never written, NaN from the poison): the role the tensor's
//!   `unwritten_owner` fact names — a role without a body declared like one of the tensor's writer
//!   roles, whose share nobody writes — as construct `role`; without such a role, the `tensor`;
//! * elements that **one store statement** writes (every wrong element owned by the same store):
//!   that call (`call` + its op, `store` / `tma_store`), whose facts include the stored value's
//!   (`src_*`) and the executing role's (`role_*`);
//! * anything else (wrong elements of several stores, indices the record does not give, a walk
//!   that cannot place a store at the run's shape): no attribution, and mining falls back to
//!   `kernel` as before.
//!
//! The attribution's `how` is `owner:unwritten`, `owner:unwritten-peer` or `owner:store`.
//! Records need no new fields: the wrong elements' indices and the shape were always recorded.

use cake::ir::{Handle, Module, TensorDecl};
use cake::runtime::record::RunRecord;
use cake::verify::{ConstructKind, ModuleFacts};
use cake::pred::Value;

/// (construct kind, op, how) of a wrong answer's owner, or `None` when the record's wrong
/// elements do not resolve to one.
pub fn mismatch_owner(r: &RunRecord, m: &Module, facts: Option<&ModuleFacts>) -> Option<(String, String, String)> {
    let check = r.checks.iter().filter(|c| !c.passed).max_by_key(|c| (c.checked, std::cmp::Reverse(c.oracle.clone())))?;
    let dims: Vec<i64> = m.dims.iter().map(|(_, d)| r.shape.get(&d.name).copied()).collect::<Option<_>>()?;
    let outputs: Vec<_> = r.tensors.iter().filter(|t| t.role == "output").collect();
    // The tensor the indices are of: an output of their rank whose shape holds them (a flat
    // index, the non-finite scan's, is unflattened with the tensor's shape).
    let (tensor, indices) = outputs.iter().find_map(|t| {
        let ix: Option<Vec<Vec<i64>>> = check
            .first_bad
            .iter()
            .map(|b| {
                let idx = if b.index.len() == 1 && t.shape.len() > 1 { cake::runtime::oracle::unflatten(b.index[0], &t.shape) } else { b.index.clone() };
                (idx.len() == t.shape.len() && idx.iter().zip(&t.shape).all(|(i, d)| i < d)).then(|| idx.iter().map(|&i| i as i64).collect())
            })
            .collect();
        Some((tensor_handle(m, &t.name)?, ix.filter(|v| !v.is_empty())?))
    })?;
    let owners = cake::verify::coverage::owners(m, &dims, tensor, &indices).ok()?;
    if owners.iter().all(Vec::is_empty) {
        let name = &m.tensors[tensor].name;
        let peer = facts.and_then(|f| f.of_kind(ConstructKind::Tensor).find(|t| &t.name == name)).and_then(|t| match t.get("unwritten_owner") {
            Some(Value::Sym(s)) => Some(s.clone()),
            _ => None,
        });
        return Some(match peer {
            Some(_) => ("role".into(), String::new(), "owner:unwritten-peer".into()),
            None => ("tensor".into(), String::new(), "owner:unwritten".into()),
        });
    }
    let mut stores = owners.iter().flatten().map(|o| o.store);
    let first = stores.next()?;
    if owners.iter().any(Vec::is_empty) || !stores.all(|s| s == first) {
        return None;
    }
    // The call at the store (the smallest call construct around the statement's span).
    let call = facts?.of_kind(ConstructKind::Call).filter(|c| c.decl.start <= first.start && first.end <= c.decl.end).min_by_key(|c| c.decl.len());
    let op = call.and_then(|c| c.op.clone())?;
    Some(("call".into(), op, "owner:store".into()))
}

fn tensor_handle(m: &Module, name: &str) -> Option<Handle<TensorDecl>> {
    m.tensors.iter().find(|(_, t)| t.name == name).map(|(h, _)| h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{EvidenceStore, Record};
    use cake::runtime::job::Verdict;

    /// (program name, construct kind, op, how) of every H200 wrong answer in a store.
    fn owners_in(store: &str) -> Vec<(String, Option<(String, String, String)>)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(store);
        let store = EvidenceStore::open_existing(&dir).expect("the bundled store opens");
        let mut out = Vec::new();
        for s in store.iter() {
            let s = s.expect("a readable record");
            let Record::Run(r) = &s.record else { continue };
            if r.verdict != Verdict::Mismatch {
                continue;
            }
            let src = store.program(&r.program.sha256).expect("readable").expect("the program is stored");
            let m = cake::check::check_source(&src).module.expect("the program type-checks");
            let t = cake::target::TargetTable::builtin().get(&m.target).expect("target");
            let facts = cake::verify::module_facts(&m, t);
            out.push((r.program.path.clone(), mismatch_owner(r, &m, Some(&facts))));
        }
        out.sort();
        out
    }

    #[test]
    fn bundled_wrong_answers_resolve_to_the_store_that_wrote_them() {
        let found = owners_in("evidence/bundle");
        eprintln!("{found:#?}");
        assert!(!found.is_empty(), "the bundle has H200 mismatch records");
        let stores = found.iter().filter(|(_, o)| o.as_ref().is_some_and(|(k, op, how)| k == "call" && op == "store" && how == "owner:store")).count();
        assert!(stores > 0, "{found:#?}");
    }
}
