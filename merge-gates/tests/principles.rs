//! The principle gates on real data: a base tree (a copy of this checkout's op catalog, rules
//! and target table) and a proposal tree that differs by one catalog entry or rule.

use std::path::{Path, PathBuf};

use cake_merge_gates::principles::{self, Context};
use cake_merge_gates::{is_data_path, Change, ChangedPath, GateStatus, Tree};

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

/// (tempdir, base tree, proposal tree), both copies of the checkout's compiler data.
fn trees() -> (tempfile::TempDir, Tree, Tree) {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["base", "proposal"] {
        let root = tmp.path().join(name);
        copy_dir(&checkout().join("compiler/catalog"), &root.join("compiler/catalog"));
        copy_dir(&checkout().join("compiler/rules"), &root.join("compiler/rules"));
        std::fs::copy(checkout().join("compiler/targets.toml"), root.join("compiler/targets.toml")).unwrap();
        std::fs::create_dir_all(root.join("corpus")).unwrap();
    }
    let (b, p) = (Tree::new(tmp.path().join("base")), Tree::new(tmp.path().join("proposal")));
    (tmp, b, p)
}

/// Append an `[[op]]` entry to the proposal's `memory.toml`.
fn add_op(p: &Tree, entry: &str) -> Vec<ChangedPath> {
    let path = p.catalog().join("memory.toml");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(entry);
    std::fs::write(&path, text).unwrap();
    vec![ChangedPath { path: "compiler/catalog/memory.toml".into(), change: Change::Modified }]
}

/// A well-formed new op (with a note for every principle).
const GOOD: &str = r#"
[[op]]
name = "bulk_prefetch"
class = "memory"
form = "stmt"
summary = "prefetch a global window into L2"
requires = ["tma"]
issue = "elected"
params = [{ name = "src", kind = "global", access = "read" }]
type_rule = [{ rule = "rank(src) >= 1", help = "prefetch a window of a tensor, not a scalar (`src` has rank {rank(src)})" }]
effects = [{ on = "src", access = "read", proxy = "async", async = true }]
lowering = "cp.async.bulk.prefetch.tensor.Nd.L2.global.tile [tmap, {coords}]"
hardware = "Bulk tensor prefetch into L2 (PTX ISA: cp.async.bulk.prefetch.tensor); no shared memory is written, no mbarrier completes."
example = "bulk_prefetch(A[t.m * 128 :+ 128, kb * 64 :+ 64])"
"#;

fn status(ctx: &Context, gate: &str) -> (GateStatus, String) {
    let r = match gate {
        "P1" => principles::p1(ctx),
        "P2" => principles::p2(ctx),
        "P3" => principles::p3(ctx),
        "P4" => principles::p4(ctx),
        "P5" => principles::p5(ctx),
        "P7" => principles::p7(ctx),
        "P8" => principles::p8(ctx),
        "lowering" => principles::lowering(ctx),
        _ => unreachable!(),
    };
    (r.status, format!("{} {}", r.summary, r.details.join(" | ")))
}

#[test]
fn a_well_formed_op_passes_the_mechanical_gates_and_is_flagged_for_p1_p2() {
    let (_t, b, p) = trees();
    let changed = add_op(&p, GOOD);
    let ctx = Context::new(&p, &b, &changed);
    assert_eq!(ctx.new_ops.len(), 1);
    for g in ["P3", "P4", "P5", "P7", "P8"] {
        assert_eq!(status(&ctx, g).0, GateStatus::Pass, "{g}: {}", status(&ctx, g).1);
    }
    // Not mechanically decidable: the reviewer reads the example and the lowering.
    assert_eq!(status(&ctx, "P1").0, GateStatus::Flag);
    assert_eq!(status(&ctx, "P2").0, GateStatus::Flag);
    // The compiler has no lowering for it: a data-only proposal cannot bring one.
    let (s, why) = status(&ctx, "lowering");
    assert_eq!(s, GateStatus::Fail);
    assert!(why.contains("bulk_prefetch") && why.contains("compiler/src/lower"), "{why}");
    assert!(principles::schema(&p).status == GateStatus::Pass);
}

#[test]
fn p3_rejects_a_second_spelling_of_an_existing_op() {
    // The same words in another order as `tma_load`.
    let (_t, b, p) = trees();
    let changed = add_op(&p, &GOOD.replace("bulk_prefetch", "load_tma"));
    let (s, why) = status(&Context::new(&p, &b, &changed), "P3");
    assert_eq!(s, GateStatus::Fail);
    assert!(why.contains("`load_tma` is a second spelling of the existing op `tma_load`"), "{why}");
    // Same name up to case and digits.
    let (_t, b, p) = trees();
    let changed = add_op(&p, &GOOD.replace("bulk_prefetch", "tma_load2"));
    let (s, why) = status(&Context::new(&p, &b, &changed), "P3");
    assert_eq!(s, GateStatus::Fail, "{why}");
    // The same signature and effects as an existing op under a new name.
    let (_t, b, p) = trees();
    let text = std::fs::read_to_string(b.catalog().join("memory.toml")).unwrap();
    let block = text.split("[[op]]").find(|blk| blk.contains("name = \"store\"")).expect("the catalog has `store`");
    let entry = format!("\n[[op]]{}", block.replace("name = \"store\"", "name = \"write_out\""));
    let changed = add_op(&p, &entry);
    let (s, why) = status(&Context::new(&p, &b, &changed), "P3");
    assert_eq!(s, GateStatus::Fail);
    assert!(why.contains("same signature") && why.contains("`store`"), "{why}");
}

#[test]
fn p4_requires_a_type_rule() {
    let (_t, b, p) = trees();
    let changed = add_op(&p, &GOOD.replace("type_rule = [{ rule = \"rank(src) >= 1\", help = \"prefetch a window of a tensor, not a scalar (`src` has rank {rank(src)})\" }]\n", ""));
    let ctx = Context::new(&p, &b, &changed);
    let (s, why) = status(&ctx, "P4");
    assert_eq!(s, GateStatus::Fail);
    assert!(why.contains("`bulk_prefetch`") && why.contains("no `type_rule`"), "{why}");
    // The loader refuses it too, naming the principle.
    let schema = principles::schema(&p);
    assert_eq!(schema.status, GateStatus::Fail);
    assert!(schema.details.join(" ").contains("P4"), "{:?}", schema.details);
    // A constraint that does not parse.
    let (_t, b, p) = trees();
    let changed = add_op(&p, &GOOD.replace("rank(src) >= 1", "rank(src >= "));
    let (s, why) = status(&Context::new(&p, &b, &changed), "P4");
    assert_eq!(s, GateStatus::Fail);
    assert!(why.contains("does not parse"), "{why}");
}

#[test]
fn p5_requires_effects_and_p7_requires_effects_the_analyses_know() {
    let (_t, b, p) = trees();
    let changed = add_op(&p, &GOOD.replace("effects = [{ on = \"src\", access = \"read\", proxy = \"async\", async = true }]\n", ""));
    let (s, why) = status(&Context::new(&p, &b, &changed), "P5");
    assert_eq!(s, GateStatus::Fail);
    assert!(why.contains("`bulk_prefetch`") && why.contains("declares no `effects`"), "{why}");
    // An effect on something that is not a param.
    let (_t, b, p) = trees();
    let changed = add_op(&p, &GOOD.replace("on = \"src\", access = \"read\"", "on = \"dst\", access = \"read\""));
    let (s, why) = status(&Context::new(&p, &b, &changed), "P5");
    assert_eq!(s, GateStatus::Fail);
    assert!(why.contains("not a param"), "{why}");
    // P7: an effect shape no analysis models (an arrival on all of shared memory).
    let (_t, b, p) = trees();
    let changed = add_op(&p, &GOOD.replace("effects = [{ on = \"src\", access = \"read\", proxy = \"async\", async = true }]", "effects = [{ on = \"src\", access = \"read\", proxy = \"async\", async = true }, { on = \"@smem\", access = \"arrive\" }]"));
    let (s, why) = status(&Context::new(&p, &b, &changed), "P7");
    assert_eq!(s, GateStatus::Fail);
    assert!(why.contains("`arrive` on `@smem`") && why.contains("no analysis models"), "{why}");
}

#[test]
fn p8_requires_a_hardware_note() {
    let (_t, b, p) = trees();
    let entry = GOOD.lines().filter(|l| !l.starts_with("hardware")).collect::<Vec<_>>().join("\n") + "\n";
    let changed = add_op(&p, &entry);
    let (s, why) = status(&Context::new(&p, &b, &changed), "P8");
    assert_eq!(s, GateStatus::Fail);
    assert!(why.contains("`bulk_prefetch`") && why.contains("no `hardware` note"), "{why}");
}

#[test]
fn rules_are_checked_for_duplicates_and_documentation() {
    let (_t, b, p) = trees();
    // A copy of V215 under a new code: the same check twice.
    let src = std::fs::read_to_string(p.rules().join("hardware-conformance/V215-swizzled-smem-underaligned.toml")).unwrap();
    let copy = src.replace("V215", "V650").replace("swizzled-smem-underaligned", "swizzled-smem-underaligned-again");
    let path = "compiler/rules/hardware-conformance/V650-swizzled-smem-underaligned-again.toml";
    std::fs::write(p.root.join(path), &copy).unwrap();
    let changed = vec![ChangedPath { path: path.into(), change: Change::Added }];
    let ctx = Context::new(&p, &b, &changed);
    let (s, why) = status(&ctx, "P3");
    assert_eq!(s, GateStatus::Fail);
    assert!(why.contains("V650 checks exactly what V215 checks"), "{why}");
    assert_eq!(status(&ctx, "P1").0, GateStatus::Na, "a rule adds no syntax");
    assert_eq!(status(&ctx, "P8").0, GateStatus::Pass);
    // P6: a new error rule without a negative corpus case.
    let p6 = principles::p6(&ctx, true, "");
    assert_eq!(p6.status, GateStatus::Fail);
    assert!(p6.details.join(" ").contains("V650 has no negative corpus case"), "{:?}", p6.details);
}

#[test]
fn code_changes_are_not_data() {
    assert!(is_data_path("compiler/rules/data-consistency/V600-x.toml"));
    assert!(is_data_path("corpus/verifier-negative/V600-x.cake"));
    assert!(is_data_path("CHANGELOG.md"));
    assert!(!is_data_path("compiler/src/lower/evolved/foo.rs"));
    assert!(!is_data_path("compiler/Cargo.toml"));
    let g = principles::data_only(&[ChangedPath { path: "compiler/src/lower/evolved/foo.rs".into(), change: Change::Added }]);
    assert_eq!(g.status, GateStatus::Fail);
    assert!(g.summary.contains("not supported yet"), "{}", g.summary);
}
