//! Op identity and handler registration: every catalog op has an identity (`cake::ops::OpId`),
//! a lowering handler (`cake::lower::registry`) and a cost in the cost walk, on every target it
//! claims.
//!
//! The cost walk matches `OpId` exhaustively, so an op without a cost is a compile error; the
//! run-time half below checks that a verified program using each op lowers on each target
//! family that has the op's features and is costed without the walk's "not in the cost model"
//! fallback.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use cake::catalog::Catalog;
use cake::check::check_source;
use cake::corpus::Corpus;
use cake::ir::Stmt;
use cake::lower::registry::lowers;
use cake::ops::OpId;
use cake::target::TargetTable;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("compiler/ is inside the repository").to_path_buf()
}

#[test]
fn every_catalog_op_has_an_identity() {
    let catalog: Vec<&str> = Catalog::builtin().ops.iter().map(|o| o.name.as_str()).collect();
    let ids: Vec<&str> = OpId::ALL.iter().map(|o| o.name()).collect();
    assert_eq!(catalog, ids, "OpId (compiler/src/ops.rs) lists the catalog's ops, in catalog order");
    for op in OpId::ALL {
        assert_eq!(OpId::from_name(op.name()), Some(*op));
    }
    assert_eq!(OpId::from_name("not_an_op"), None);
}

#[test]
fn every_op_has_a_lowering_and_a_cost_for_every_target_it_claims() {
    // The handler registry covers every op.
    let unlowered: Vec<&str> = OpId::ALL.iter().filter(|o| !lowers(**o)).map(|o| o.name()).collect();
    assert!(unlowered.is_empty(), "ops without a lowering handler: {unlowered:?}");

    // Which ops each verified corpus program (and example) calls, by target.
    let corpus = Corpus::load(repo().join("corpus")).expect("the corpus loads");
    let mut covered: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for case in &corpus.cases {
        let Some(v) = check_source(&case.source).validated else { continue };
        let m = v.module();
        let mut ops: BTreeSet<String> = BTreeSet::new();
        for (_, s) in m.stmts.iter() {
            if let Stmt::Op(c) = s {
                ops.insert(c.op.clone());
            }
        }
        for (_, e) in m.exprs.iter() {
            if let cake::ir::ExprKind::Call(c) = &e.kind {
                ops.insert(c.op.clone());
            }
        }
        match cake::lower::lower(&v) {
            Ok(_) => {}
            Err(e) if e.is_not_supported_yet() => continue,
            Err(e) => {
                problems.push(format!("{}: verified but refused by the lowering: {e}", case.id));
                continue;
            }
        }
        let dims: BTreeMap<String, i64> = m.dims.iter().map(|(_, d)| (d.name.clone(), d.multiple_of.unwrap_or(1).max(1) * 64)).collect();
        if let Ok(est) = cake::cost::estimate_builtin(&v, &dims) {
            for n in est.notes.iter().filter(|n| n.contains("is not in the cost model")) {
                problems.push(format!("{}: {n}", case.id));
            }
        }
        for op in ops {
            covered.entry((op, m.target.clone())).or_default().push(case.id.clone());
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // Every op is lowered and costed in at least one verified program, on some target that has
    // its features; on the others it claims, the registry's handler is the same code.
    let table = TargetTable::builtin();
    let mut missing = Vec::new();
    for op in &Catalog::builtin().ops {
        let claimed = cake::op_reference::claimed_targets(op, table);
        assert!(!claimed.is_empty(), "`{}` requires features no target has", op.name);
        if !claimed.iter().any(|t| covered.contains_key(&(op.name.clone(), t.to_string()))) {
            missing.push(format!("`{}` (claims {})", op.name, claimed.join(", ")));
        }
    }
    assert!(missing.is_empty(), "ops no verified corpus program lowers and costs: {}", missing.join("; "));
}
