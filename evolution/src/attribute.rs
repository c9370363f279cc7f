//! Wrong answers attributed to their owner. A `run/mismatch` record names the output elements it
//! found wrong (`checks[].first_bad[].index`, at the run's `shape`); the verifier's output
//! ownership ([`cake::verify::coverage::owners`]: the same walk that decides V320/V321 — which
//! tile, role and warp or warpgroup stores which element) maps them back to who owns them
//! ([`wrong_element_owners`]).
//!
//! Elements **no writer stores** (never written: NaN from the poison, or a stale value) are owned
//! by whoever should have written them, and [`mismatch_owner`] attributes the bucket there: the
//! role the tensor's `unwritten_owner` fact names — a role without a body declared like one of the
//! tensor's writer roles, whose share nobody writes — as construct `role` (`owner:unwritten-peer`);
//! without such a role, the `tensor` (`owner:unwritten`).
//!
//! Elements a store **does** write, wrongly, are owned by that store and its role's unit, but the
//! store is not the cause: the value it writes was computed from data read wrongly upstream (a
//! half-filled stage, an operand at other rows). Naming the store would narrow the rule search to
//! the call's facts, which cannot see the cause, so those buckets keep `kernel` (searched over every
//! construct). Records carry the ten lowest wrong indices only (`MAX_REPORTED`), too few to tell
//! that the wrong elements are confined to one warpgroup of several; a per-unit count in the
//! record would be needed for that.

use cake::ir::{Handle, Module, TensorDecl};
use cake::runtime::record::RunRecord;
use cake::verify::coverage::Owner;
use cake::verify::{ConstructKind, ModuleFacts};
use cake::pred::Value;

/// The output tensor a mismatch's wrong elements are of, and the owners of each of them (see
/// [`cake::verify::coverage::owners`]), or `None` when the record does not resolve (no failed
/// check with element indices, a dim the run's shape does not bind, a walk that cannot place a
/// store at that shape).
pub fn wrong_element_owners(r: &RunRecord, m: &Module) -> Option<(Handle<TensorDecl>, Vec<Vec<Owner>>)> {
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
    Some((tensor, owners))
}

/// (construct kind, op, how) of a wrong answer whose wrong elements no writer stores, or `None`.
pub fn mismatch_owner(r: &RunRecord, m: &Module, facts: Option<&ModuleFacts>) -> Option<(String, String, String)> {
    let (tensor, owners) = wrong_element_owners(r, m)?;
    if !owners.iter().all(Vec::is_empty) {
        return None;
    }
    let name = &m.tensors[tensor].name;
    let peer = facts.and_then(|f| f.of_kind(ConstructKind::Tensor).find(|t| &t.name == name)).and_then(|t| match t.get("unwritten_owner") {
        Some(Value::Sym(s)) => Some(s.clone()),
        _ => None,
    });
    Some(match peer {
        Some(_) => ("role".into(), String::new(), "owner:unwritten-peer".into()),
        None => ("tensor".into(), String::new(), "owner:unwritten".into()),
    })
}

fn tensor_handle(m: &Module, name: &str) -> Option<Handle<TensorDecl>> {
    m.tensors.iter().find(|(_, t)| t.name == name).map(|(h, _)| h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use crate::store::{EvidenceStore, Record};
    use cake::runtime::job::Verdict;

    fn module(src: &str) -> (Module, ModuleFacts) {
        let m = cake::check::check_source(src).module.expect("the program type-checks");
        let t = cake::target::TargetTable::builtin().get(&m.target).expect("target");
        let facts = cake::verify::module_facts(&m, t);
        (m, facts)
    }

    /// (program path, owners of the wrong elements, attribution) of every wrong answer in a store.
    #[allow(clippy::type_complexity)]
    fn owners_in(store: &str) -> Vec<(String, Option<Vec<Vec<Owner>>>, Option<(String, String, String)>)> {
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
            let (m, facts) = module(&src);
            out.push((r.program.path.clone(), wrong_element_owners(r, &m).map(|(_, o)| o), mismatch_owner(r, &m, Some(&facts))));
        }
        out
    }

    #[test]
    fn bundled_wrong_answers_are_written_by_the_consumers_store_and_keep_kernel() {
        let found = owners_in("evidence/bundle");
        assert!(found.len() >= 5, "the bundle has H200 mismatch records: {found:#?}");
        for (path, owners, attributed) in &found {
            // Every wrong element of the H200 runs is stored by the consumer role's warpgroups,
            // through one store statement: written, wrongly.
            let owners = owners.as_ref().unwrap_or_else(|| panic!("{path}: the wrong elements resolve"));
            assert!(owners.iter().all(|o| !o.is_empty()), "{path}: {owners:?}");
            let units: BTreeSet<(&str, &str)> = owners.iter().flatten().map(|o| (o.role.as_str(), o.unit_kind)).collect();
            assert_eq!(units, BTreeSet::from([("mma", "warpgroup")]), "{path}");
            assert_eq!(owners.iter().flatten().map(|o| o.store).collect::<BTreeSet<_>>().len(), 1, "{path}");
            assert_eq!(attributed, &None, "{path}");
        }
    }

    #[test]
    fn rows_nobody_writes_are_attributed_to_the_role_that_should_have() {
        // A real H200 record of the GEMM (M = 256, N = 512, K = 192; wrong from row 64 on), read
        // against the GEMM whose second consumer warpgroup is a role of its own with its `on`
        // block forgotten: rows 64..128 of every tile are nobody's.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("evidence/bundle");
        let store = EvidenceStore::open_existing(&dir).unwrap();
        let r = store
            .iter()
            .filter_map(|s| match s.unwrap().record {
                Record::Run(r) if r.verdict == Verdict::Mismatch && r.program.path.ends_with("map_gemm_operand_rows.cake") => Some(r),
                _ => None,
            })
            .next()
            .expect("the bundle has the record");
        let gemm = include_str!("../../examples/gemm_bf16_ws.cake");
        let split = gemm.replace("role mma: warpgroup 1..3 regs 232", "role mma: warpgroup 1 regs 232\nrole mma_hi: warpgroup 2 regs 232");
        let (m, facts) = module(&split);
        let (_, owners) = wrong_element_owners(&r, &m).unwrap();
        assert!(owners.iter().all(Vec::is_empty), "{owners:?}");
        assert_eq!(mismatch_owner(&r, &m, Some(&facts)), Some(("role".into(), String::new(), "owner:unwritten-peer".into())));
        // No role declared like the writer: the tensor itself.
        let (m, facts) = module(&split.replace("role mma_hi: warpgroup 2 regs 232", "role mma_hi: warp 8 regs 232"));
        assert_eq!(mismatch_owner(&r, &m, Some(&facts)), Some(("tensor".into(), String::new(), "owner:unwritten".into())));
        // The GEMM as it is: the same rows are written (by warpgroup 1 of `mma`), so no owner is named.
        let (m, facts) = module(gemm);
        assert_eq!(mismatch_owner(&r, &m, Some(&facts)), None);
    }
}
