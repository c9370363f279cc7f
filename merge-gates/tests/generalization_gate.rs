//! The `generalization` gate on real data: a copy of this checkout's compiler data and examples,
//! one evolved rule file added, and failing programs made from the examples with one change.

use std::path::{Path, PathBuf};

use cake_merge_gates::generalization_gate::{self, grounded_constants, ConstantSource, Input, Program, Source, Variant};
use cake_merge_gates::{GateStatus, Tree};

fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap().flatten() {
        let p = e.path();
        let to = dst.join(e.file_name());
        if p.is_dir() {
            copy_dir(&p, &to);
        } else {
            std::fs::copy(&p, &to).unwrap();
        }
    }
}

const RULE_PATH: &str = "compiler/rules/data-consistency/V699-smem-evolved.toml";

/// A tree with the checkout's compiler data and examples, and rule V699 requiring `require`.
fn tree(require: &str) -> (tempfile::TempDir, Tree) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    copy_dir(&checkout().join("compiler/catalog"), &root.join("compiler/catalog"));
    copy_dir(&checkout().join("compiler/rules"), &root.join("compiler/rules"));
    std::fs::copy(checkout().join("compiler/targets.toml"), root.join("compiler/targets.toml")).unwrap();
    std::fs::create_dir_all(root.join("examples")).unwrap();
    for e in std::fs::read_dir(checkout().join("examples")).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "cake") {
            std::fs::copy(e.path(), root.join("examples").join(e.file_name())).unwrap();
        }
    }
    std::fs::write(root.join(RULE_PATH), rule(require)).unwrap();
    (tmp, Tree::new(root))
}

fn rule(require: &str) -> String {
    format!(
        r#"code = "V699"
name = "smem-evolved"
category = "data-consistency"
severity = "error"
applies_to = "smem"
require = "{require}"
message = "`{{name}}` violates `{require}`"
label = "fails the evolved rule"
primary = "name"
help = "change the program so that `{require}` holds"

[doc]
what = "Evolved rule (test)."
why = "Test."
example = "smem a_s: bf16[128, 64] align 2048"
source = "test"
"#
    )
}

fn example(name: &str) -> String {
    std::fs::read_to_string(checkout().join("examples").join(name)).unwrap()
}

/// Two failing programs: examples whose first shared region asks for a 2048-byte alignment.
fn failing() -> Vec<Program> {
    let ws = example("gemm_bf16_ws.cake").replacen("swizzle 128B align 1024", "swizzle 128B align 2048", 1);
    let km = example("kmeans_assign.cake").replacen("swizzle 128B align 1024", "swizzle 128B align 2048", 1);
    assert!(ws.contains("align 2048") && km.contains("align 2048"));
    vec![Program { id: "program ws-2048".into(), source: ws }, Program { id: "program kmeans-2048".into(), source: km }]
}

/// The target-table source of 1024 in the checkout's data.
fn target_1024(t: &Tree) -> ConstantSource {
    grounded_constants(t, None).unwrap().into_iter().find(|c| c.value == 1024 && matches!(&c.source, Source::Target { target, .. } if target == "sm_90a")).expect("sm_90a has a 1024 in the target table")
}

fn run(t: &Tree, constants: &[ConstantSource], programs: &[Program], variants: &[Variant], relearn: &dyn Fn(usize) -> Result<Option<String>, String>) -> cake_merge_gates::GateResult {
    generalization_gate::gate(t, &Input { rule_path: RULE_PATH, constants, learned_from: programs, variants, relearn })
}

#[test]
fn a_grounded_rule_that_relearns_passes() {
    let (_tmp, t) = tree("align <= 1024");
    let c = target_1024(&t);
    let same = |_: usize| Ok(Some(rule("align <= 1024")));
    let variants = vec![
        Variant { id: "v-align-4096".into(), source: failing()[0].source.replace("align 2048", "align 4096"), fails: true, held_out: false },
        Variant { id: "v-align-512".into(), source: failing()[0].source.replace("align 2048", "align 512"), fails: false, held_out: false },
    ];
    let g = run(&t, &[c], &failing(), &variants, &same);
    assert_eq!(g.status, GateStatus::Pass, "{g:?}");
    assert!(g.summary.contains("2 program(s)") && g.summary.contains("2 variant(s)"), "{}", g.summary);
}

#[test]
fn a_blacklist_fails() {
    let (_tmp, t) = tree("align != 2048");
    let same = |_: usize| Ok(Some(rule("align != 2048")));
    let g = run(&t, &[], &failing(), &[], &same);
    assert_eq!(g.status, GateStatus::Fail);
    assert!(g.details.iter().any(|d| d.contains("`align != 2048` is a blacklist")), "{:?}", g.details);
}

#[test]
fn a_gap_constant_fails() {
    // 1536 lies between the accepted 1024 and the failing 2048; nothing in the data grounds it.
    let (_tmp, t) = tree("align <= 1536");
    let same = |_: usize| Ok(Some(rule("align <= 1536")));
    let g = run(&t, &[], &failing(), &[], &same);
    assert_eq!(g.status, GateStatus::Fail);
    assert!(g.details.iter().any(|d| d.starts_with("constant 1536 has no recorded source")), "{:?}", g.details);
    // A recorded source that the data does not hold is no better.
    let lie = ConstantSource { value: 1536, source: Source::Target { target: "sm_90a".into(), key: "max_threads_per_block".into() } };
    let g = run(&t, &[lie], &failing(), &[], &same);
    assert!(g.details.iter().any(|d| d.contains("constant 1536: recorded as target table `max_threads_per_block` (sm_90a), which is not 1536")), "{:?}", g.details);
    // Fitted, but from variants the proposal does not record.
    let fit = ConstantSource { value: 1536, source: Source::Fitted { pass: 1536, fail: 2048, variants: vec!["v-gone".into()] } };
    let g = run(&t, &[fit], &failing(), &[], &same);
    assert!(g.details.iter().any(|d| d.contains("variant(s) v-gone that the proposal does not record")), "{:?}", g.details);
}

#[test]
fn leave_one_out_must_still_catch_the_left_out_program() {
    let (_tmp, t) = tree("align <= 1024");
    let c = target_1024(&t);
    // Without the first program the search would learn a looser bound that misses it.
    let loose = |i: usize| Ok(Some(rule(if i == 0 { "align <= 4096" } else { "align <= 1024" })));
    let g = run(&t, std::slice::from_ref(&c), &failing(), &[], &loose);
    assert_eq!(g.status, GateStatus::Fail);
    assert_eq!(g.details, vec!["leave-one-out: the rule learned without program ws-2048 (`align <= 4096`) does not reject it".to_string()]);
    let nothing = |_: usize| Ok(None);
    let g = run(&t, std::slice::from_ref(&c), &failing(), &[], &nothing);
    assert!(g.details.iter().any(|d| d == "leave-one-out: without program kmeans-2048 no rule is learned from the others"), "{:?}", g.details);
    // One program: leave-one-out cannot run.
    let g = run(&t, &[c], &failing()[..1], &[], &loose);
    assert_eq!(g.status, GateStatus::Fail);
    assert!(g.details.iter().any(|d| d.starts_with("learned from one program (program ws-2048)")), "{:?}", g.details);
}

#[test]
fn held_out_variants_and_examples() {
    let (_tmp, t) = tree("align <= 1024");
    let c = target_1024(&t);
    let same = |_: usize| Ok(Some(rule("align <= 1024")));
    // A passing variant the rule flags, and a failing variant it misses.
    let variants = vec![
        Variant { id: "v-2048-passes".into(), source: failing()[0].source.clone(), fails: false, held_out: false },
        Variant { id: "v-1024-fails".into(), source: example("gemm_bf16_ws.cake"), fails: true, held_out: false },
    ];
    let g = run(&t, std::slice::from_ref(&c), &failing(), &variants, &same);
    assert!(g.details.contains(&"variant v-2048-passes is labelled passing and the rule rejects it".to_string()), "{:?}", g.details);
    assert!(g.details.contains(&"variant v-1024-fails is labelled failing and the rule does not catch it".to_string()), "{:?}", g.details);
    // A rule the examples violate: every example with a 1024-aligned region is named.
    let (_tmp2, t2) = tree("align <= 16");
    let sixteen = grounded_constants(&t2, None).unwrap().into_iter().find(|c| c.value == 16).expect("the data grounds 16");
    let strict = |_: usize| Ok(Some(rule("align <= 16")));
    let g = run(&t2, &[sixteen], &failing(), &[], &strict);
    assert_eq!(g.status, GateStatus::Fail);
    assert!(g.details.iter().any(|d| d == "the rule rejects example examples/gemm_bf16_ws.cake, a program that builds and runs"), "{:?}", g.details);
}

#[test]
fn a_targets_compute_capability_grounds_no_constant() {
    // `sm = 90` names sm_90a; a rule `a_inner_bytes >= 90` labelled "target table `sm`" was a gap
    // constant (a kernel-evolution run learned one from wgmma lowering refusals).
    let (_tmp, t) = tree("align <= 1024");
    let constants = grounded_constants(&t, None).unwrap();
    assert!(!constants.iter().any(|c| matches!(&c.source, Source::Target { key, .. } if key == "sm")), "sm grounded a constant");
    assert!(constants.iter().any(|c| matches!(&c.source, Source::Target { key, .. } if key == "smem_per_block_max")), "the limits still ground constants");
}

#[test]
fn a_catalog_constant_grounds_only_the_operand_fact_it_bounds() {
    use generalization_gate::catalog_compares;
    let rule = "dim(acc, 0) == 64 && dim(a, 0) == 64";
    // An argument's fact and a call's, for the quantity the constraint compares with 64.
    assert!(catalog_compares(rule, 64, "dim(0)"));
    assert!(catalog_compares(rule, 64, "a_dim(0)"));
    // Another dimension of the same operand is not bounded by it (a kernel-evolution run had
    // learned `dim(-1) >= 64` for wgmma operands from this constraint).
    assert!(!catalog_compares(rule, 64, "dim(-1)"));
    assert!(!catalog_compares(rule, 64, "a_dim(-1)"));
    assert!(!catalog_compares(rule, 128, "dim(0)"));
    // A modulus over an expression of the fact.
    assert!(catalog_compares("box(src, -1) * bytes(src) / numel(src) % 16 == 0", 16, "src_box(-1)"));
}
