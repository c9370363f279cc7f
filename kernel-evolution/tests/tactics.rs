//! Every tactic file loads and has a test here (the last test fails when a file is added without
//! one); each test applies the tactic to a seed and checks the rewritten program. Malformed tactic
//! files get coded errors.

use std::path::{Path, PathBuf};

use cake_evolve_kernel::tactic::{load_dir, Move, Tactic};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tactic(name: &str) -> Tactic {
    let tactics = load_dir(&root().join("tactics")).expect("the tactic directory loads");
    tactics.into_iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no tactic `{name}`"))
}

fn seed(name: &str) -> String {
    std::fs::read_to_string(root().join("seeds").join(name)).expect("seed")
}

fn moves(t: &Tactic, seed_name: &str) -> Vec<Move> {
    t.moves(&cake::syntax::parse(&seed(seed_name)).expect("seed parses"))
}

fn text(m: &Move) -> String {
    cake::syntax::print(&m.file)
}

fn verifies(src: &str) -> bool {
    cake::check::check_source(src).validated.is_some()
}

fn find(ms: &[Move], params: serde_json::Value) -> &Move {
    ms.iter().find(|m| m.params == params).unwrap_or_else(|| panic!("no move with {params}; have {:?}", ms.iter().map(|m| &m.params).collect::<Vec<_>>()))
}

const TESTED: &[&str] = &[
    "centroid-tile",
    "consumer-warpgroups",
    "deferred-release",
    "grouped-raster",
    "k-step",
    "persistence",
    "pipeline-stages",
    "register-budget",
    "rows-per-warp",
    "software-pipeline",
    "split-n",
    "swizzle",
    "tile-n",
    "unroll",
    "warps-per-block",
];

#[test]
fn consumer_warpgroups_sets_the_count_and_its_register_budget() {
    let ms = moves(&tactic("consumer-warpgroups"), "kmeans_assign_naive.cake");
    // WG = 1 is the seed's own value: no move.
    assert_eq!(ms.len(), 2);
    let two = text(find(&ms, serde_json::json!({ "WG": 2, "MMA_REGS": 232 })));
    assert!(two.contains("const WG = 2") && two.contains("const MMA_REGS = 232"), "{two}");
    assert!(verifies(&two), "{two}");
}

#[test]
fn register_budget_rewrites_only_the_budget() {
    let ms = moves(&tactic("register-budget"), "gemm_bf16_naive.cake");
    assert_eq!(ms.len(), 4, "five budgets less the seed's 240");
    let t = text(find(&ms, serde_json::json!({ "MMA_REGS": 168 })));
    assert!(t.contains("regs MMA_REGS") && t.contains("const MMA_REGS = 168"));
    assert!(verifies(&t));
}

#[test]
fn centroid_tile_applies_to_kmeans_only() {
    let ms = moves(&tactic("centroid-tile"), "kmeans_assign_naive.cake");
    assert_eq!(ms.len(), 2);
    assert!(verifies(&text(find(&ms, serde_json::json!({ "KT": 256 })))));
    assert!(moves(&tactic("centroid-tile"), "gemm_bf16_naive.cake").is_empty(), "the GEMM declares no KT");
}

#[test]
fn tile_n_skips_a_derived_const() {
    let ms = moves(&tactic("tile-n"), "gemm_bf16_naive.cake");
    assert_eq!(ms.len(), 2);
    assert!(verifies(&text(find(&ms, serde_json::json!({ "TN": 256 })))));
    // The Flash-KMeans seed's TN is `64 * WG`: it follows WG and is never set directly.
    assert!(moves(&tactic("tile-n"), "kmeans_assign_naive.cake").is_empty());
}

#[test]
fn k_step_deeper_than_the_swizzle_is_left_to_the_verifier() {
    let ms = moves(&tactic("k-step"), "gemm_bf16_naive.cake");
    assert_eq!(ms.len(), 2);
    // 128 bf16 = 256 bytes per row, more than the 128-byte swizzle span: rejected before the GPU.
    assert!(!verifies(&text(find(&ms, serde_json::json!({ "BK": 128 })))));
}

#[test]
fn pipeline_stages_adds_and_drops_the_stage_axis() {
    let t = tactic("pipeline-stages");
    let ms = moves(&t, "kmeans_assign_naive.cake");
    let two = find(&ms, serde_json::json!({ "pipeline": "cs", "stages": 2 }));
    let s = text(two);
    assert!(s.contains("pipeline cs: stages 2"), "{s}");
    assert!(s.contains("smem c_s: bf16[2, KT, 64] stages 2") && s.contains("smem cn_s: f32[KT] stages 2"), "{s}");
    assert!(s.contains("c_s[cs.stage, dc]") && s.contains("cn_s[cs.stage]"), "{s}");
    assert!(verifies(&s), "{s}");
    // Back to one stage gives the seed again, byte for byte.
    let back = t.moves(&two.file);
    let one = find(&back, serde_json::json!({ "pipeline": "cs", "stages": 1 }));
    assert_eq!(text(one), cake::syntax::print(&cake::syntax::parse(&seed("kmeans_assign_naive.cake")).unwrap()));
    // Between staged counts only the attributes change.
    let four = find(&back, serde_json::json!({ "pipeline": "cs", "stages": 4 }));
    assert!(text(four).contains("c_s[cs.stage, dc]") && verifies(&text(four)));
}

#[test]
fn persistence_toggles_the_flag() {
    let ms = moves(&tactic("persistence"), "gemm_bf16_naive.cake");
    assert_eq!(ms.len(), 1, "the seed is not persistent: only `on` is a move");
    let t = text(&ms[0]);
    assert!(t.contains("grid tiles[m = M / TM, n = N / TN] persistent"), "{t}");
    assert!(verifies(&t));
    let off = tactic("persistence").moves(&ms[0].file);
    assert_eq!(off.len(), 1);
    assert!(!text(&off[0]).contains("persistent"));
}

#[test]
fn grouped_raster_needs_two_axes() {
    let ms = moves(&tactic("grouped-raster"), "gemm_bf16_naive.cake");
    assert_eq!(ms.len(), 2);
    assert!(text(find(&ms, serde_json::json!({ "group": 8 }))).contains("group 8"));
    assert!(moves(&tactic("grouped-raster"), "softmax_bf16_naive.cake").is_empty(), "a one-axis tile space has no bands");
}

#[test]
fn swizzle_rewrites_buffers_and_operands_together() {
    let ms = moves(&tactic("swizzle"), "gemm_bf16_naive.cake");
    assert_eq!(ms.len(), 1);
    let t = text(&ms[0]);
    assert_eq!(t.matches("swizzle 64B").count(), 4, "{t}");
    assert!(!t.contains("swizzle 128B"));
    assert!(moves(&tactic("swizzle"), "softmax_bf16_naive.cake").is_empty(), "nothing swizzled");
}

#[test]
fn unroll_marks_the_main_loops() {
    let ms = moves(&tactic("unroll"), "gemm_bf16_naive.cake");
    assert_eq!(ms.len(), 1);
    let t = text(&ms[0]);
    assert_eq!(t.matches("unroll 2").count(), 2, "both `kb` loops: {t}");
    assert!(cake::check::check_source(&t).module.is_some(), "{t}");
}

#[test]
fn warps_and_rows_per_warp_reshape_the_row_tile() {
    let w = moves(&tactic("warps-per-block"), "softmax_bf16_naive.cake");
    assert_eq!(w.len(), 2);
    assert!(verifies(&text(find(&w, serde_json::json!({ "W": 8 })))));
    let r = moves(&tactic("rows-per-warp"), "softmax_bf16_naive.cake");
    assert_eq!(r.len(), 3);
    assert!(verifies(&text(find(&r, serde_json::json!({ "RPW": 4 })))));
}

fn predicted(src: &str, dims: &[(&str, i64)]) -> f64 {
    let v = cake::check::check_source(src).validated.expect("verifies");
    let dims = dims.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    cake::cost::estimate_builtin(&v, &dims).expect("cost").predicted_ms
}

const KMEANS: &[(&str, i64)] = &[("B", 32), ("N", 65536), ("K", 1024), ("D", 128)];
const GEMM: &[(&str, i64)] = &[("M", 8192), ("N", 8192), ("K", 8192)];

#[test]
fn deferred_release_keeps_one_wgmma_group_in_flight() {
    let ms = moves(&tactic("deferred-release"), "gemm_bf16_naive.cake");
    assert_eq!(ms.len(), 1);
    let t = text(&ms[0]);
    assert!(t.contains("for kb in 1..K / BK {"), "{t}");
    assert!(t.contains("wgmma_wait(1)\n            release(ab)"), "{t}");
    assert!(verifies(&t), "{t}");
    assert!(predicted(&t, GEMM) < predicted(&seed("gemm_bf16_naive.cake"), GEMM), "the model sees the overlap");
    // The Flash-KMeans loop does work after its wait: not this tactic's shape.
    assert!(moves(&tactic("deferred-release"), "kmeans_assign_naive.cake").is_empty());
    // One stage cannot hold a group in flight while the next is loaded.
    let one_stage = seed("gemm_bf16_naive.cake").replace("pipeline ab: stages 2", "pipeline ab: stages 1").replace("stages 2 swizzle", "stages 1 swizzle");
    let f = cake::syntax::parse(&one_stage).unwrap();
    assert!(tactic("deferred-release").moves(&f).is_empty());
}

#[test]
fn software_pipeline_issues_the_next_mmas_before_the_epilogue() {
    let ms = moves(&tactic("software-pipeline"), "kmeans_assign_naive.cake");
    assert_eq!(ms.len(), 1);
    let t = text(&ms[0]);
    assert!(t.contains("for kt in 1..K / KT {"), "{t}");
    assert!(t.contains("+ (kt - 1) * KT"), "the epilogue is the previous tile's: {t}");
    assert!(t.contains("+ (K / KT - 1) * KT"), "the last tile after the loop: {t}");
    assert!(verifies(&t), "{t}");
    assert!(predicted(&t, KMEANS) < predicted(&seed("kmeans_assign_naive.cake"), KMEANS), "the model sees the overlap");
    // Applied once, the loop no longer has the shape.
    assert!(tactic("software-pipeline").moves(&ms[0].file).is_empty());
    // The GEMM loop has no epilogue after its release.
    assert!(moves(&tactic("software-pipeline"), "gemm_bf16_naive.cake").is_empty());
}

#[test]
fn split_n_makes_two_consumers_share_the_a_stage() {
    // The naive GEMM seed with one consumer has nothing to split; with two it does.
    assert!(moves(&tactic("split-n"), "gemm_bf16_naive.cake").is_empty());
    let two = moves(&tactic("consumer-warpgroups"), "gemm_bf16_naive.cake");
    let two = find(&two, serde_json::json!({ "WG": 2, "MMA_REGS": 232 }));
    let ms = tactic("split-n").moves(&two.file);
    assert_eq!(ms.len(), 1);
    let t = text(&ms[0]);
    assert!(t.contains("const TM = 64\n") && t.contains("const WN = TN / WG\n"), "{t}");
    assert!(t.contains("wgmma(acc, a_s[ab.stage], b_s[ab.stage, mma.warpgroup * WN :+ WN])"), "{t}");
    assert!(verifies(&t), "{t}");
    // The Flash-KMeans seed's consumers share no B-side split of this shape.
    assert!(moves(&tactic("split-n"), "kmeans_assign_naive.cake").is_empty());
}

#[test]
fn every_tactic_file_is_tested_here() {
    let mut names: Vec<String> = load_dir(&root().join("tactics")).unwrap().into_iter().map(|t| t.name).collect();
    names.sort();
    assert_eq!(names, TESTED.iter().map(|s| s.to_string()).collect::<Vec<_>>(), "add a test for the new tactic and list it in TESTED");
}

fn load_one(text: &str) -> Result<Tactic, cake_evolve_kernel::error::KevoError> {
    Tactic::from_toml(Path::new("t.toml"), text)
}

#[test]
fn malformed_tactics_get_coded_errors() {
    assert_eq!(load_one("name = ").unwrap_err().code, "K101");
    assert_eq!(load_one("name = \"x\"\ndoc = \"d\"\nkind = \"set-const\"\nbottlenecks = [\"memory\"]\nchoises = []").unwrap_err().code, "K101");
    let e = load_one("name = \"x\"\ndoc = \"d\"\nkind = \"rewrite-everything\"\nbottlenecks = [\"memory\"]").unwrap_err();
    assert_eq!(e.code, "K102");
    assert!(e.message.contains("rewrite-everything"));
    assert_eq!(load_one("name = \"x\"\ndoc = \"d\"\nkind = \"set-const\"\nbottlenecks = [\"memory\"]\nchoices = []").unwrap_err().code, "K102");
    assert_eq!(load_one("name = \"x\"\ndoc = \"d\"\nkind = \"set-const\"\nhints = [\"C999\"]\nchoices = [{ A = 1 }]").unwrap_err().code, "K102");
    assert_eq!(load_one("name = \"x\"\ndoc = \"d\"\nkind = \"set-const\"\nbottlenecks = [\"disk\"]\nchoices = [{ A = 1 }]").unwrap_err().code, "K102");
    assert_eq!(load_one("name = \"x\"\ndoc = \"d\"\nkind = \"set-const\"\nchoices = [{ A = 1 }]").unwrap_err().code, "K102");
    assert_eq!(load_one("name = \"x\"\ndoc = \"d\"\nkind = \"pipeline-stages\"\nbottlenecks = [\"memory\"]\nvalues = [0]").unwrap_err().code, "K102");
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(load_dir(dir.path()).unwrap_err().code, "K103");
    assert_eq!(load_dir(&dir.path().join("missing")).unwrap_err().code, "K103");
}
