//! Load-time principle checks: each broken catalog (or target table) file is rejected with an
//! error that names the file and the op.

use std::path::PathBuf;

use cake::catalog::{Catalog, CatalogError};
use cake::target::TargetTable;

/// A valid statement op; tests break one line of it.
const GOOD: &str = r#"
[[op]]
name = "my_copy"
class = "memory"
form = "stmt"
summary = "copy a shared tile into a fragment"
requires = ["ldmatrix"]
issue = "warp"
params = [
  { name = "dst", kind = "frag", access = "write" },
  { name = "src", kind = "smem", access = "read" },
]
type_rule = ["dtype(dst) == dtype(src)"]
effects = [
  { on = "dst", access = "write", proxy = "generic" },
  { on = "src", access = "read", proxy = "generic" },
]
lowering = "ldmatrix"
hardware = "what the hardware does"
example = "my_copy(f, s)"
"#;

/// A valid pure expression op.
const GOOD_EXPR: &str = r#"
[[op]]
name = "my_neg"
class = "math"
form = "expr"
summary = "negate"
issue = "thread"
params = [{ name = "x", kind = "value" }]
type_rule = ["dtype(x) == f32"]
result = "same(x)"
pure = true
effects = []
lowering = "neg.f32"
hardware = "one ALU op"
"#;

fn load(text: &str) -> Result<Catalog, CatalogError> {
    Catalog::from_toml_files(&[("extra/memory.toml", text)])
}

fn load_expr(text: &str) -> Result<Catalog, CatalogError> {
    Catalog::from_toml_files(&[("extra/math.toml", text)])
}

/// Replace `from` by `to` in `base` (which must contain it) and expect a load error mentioning `needle`.
fn rejects(base: &str, from: &str, to: &str, needle: &str) -> CatalogError {
    assert!(base.contains(from), "test bug: `{from}` not in the template");
    let text = base.replacen(from, to, 1);
    let result = if base == GOOD_EXPR { load_expr(&text) } else { load(&text) };
    let e = result.expect_err("the broken file loaded");
    let shown = e.to_string();
    assert!(shown.contains(needle), "error `{shown}` does not mention `{needle}`");
    assert!(shown.starts_with("extra/"), "error `{shown}` does not name the file");
    e
}

#[test]
fn the_templates_are_valid() {
    let c = load(GOOD).unwrap();
    assert_eq!(c.names(), ["my_copy"]);
    assert_eq!(c.get("my_copy").unwrap().file, "extra/memory.toml");
    load_expr(GOOD_EXPR).unwrap();
}

#[test]
fn duplicate_op_names_are_rejected() {
    let e = Catalog::from_toml_files(&[("a/memory.toml", GOOD), ("b/memory.toml", GOOD)]).unwrap_err();
    assert_eq!(e.file, "b/memory.toml");
    assert_eq!(e.op.as_deref(), Some("my_copy"));
    assert!(e.message.contains("defined twice (first in a/memory.toml)"), "{e}");
    // ... also against the built-in catalog
    let clash = GOOD.replace("my_copy", "ldmatrix");
    let e = Catalog::overlay(&[("extra/more.toml", &clash)]).unwrap_err();
    assert!(e.to_string().contains("op `ldmatrix`: defined twice"), "{e}");
}

#[test]
fn an_effect_must_name_a_param_or_an_implicit_resource() {
    let e = rejects(GOOD, r#"{ on = "src", access = "read""#, r#"{ on = "srcc", access = "read""#, "not a param");
    assert_eq!(e.op.as_deref(), Some("my_copy"));
    rejects(GOOD, r#"{ on = "src", access = "read""#, r#"{ on = "@everything", access = "read""#, "unknown resource");
}

#[test]
fn required_features_must_exist_in_the_target_table() {
    rejects(GOOD, r#"requires = ["ldmatrix"]"#, r#"requires = ["ldmatrx"]"#, "unknown feature `ldmatrx`");
    rejects(
        GOOD,
        r#"requires = ["ldmatrix"]"#,
        r#"requires = ["ldmatrix"]
requires_when = [{ when = "dtype(src) == f8e4m3", features = ["fp9"] }]"#,
        "unknown feature `fp9`",
    );
}

#[test]
fn hardware_doc_is_required() {
    rejects(GOOD, r#"hardware = "what the hardware does""#, r#"hardware = "  ""#, "P8");
    rejects(GOOD, r#"hardware = "what the hardware does""#, "", "`hardware` is missing");
}

#[test]
fn summary_and_lowering_are_required() {
    rejects(GOOD, r#"summary = "copy a shared tile into a fragment""#, "", "`summary` is missing");
    rejects(GOOD, r#"lowering = "ldmatrix""#, r#"lowering = """#, "`lowering` is missing");
}

#[test]
fn a_type_rule_is_required() {
    rejects(GOOD, r#"type_rule = ["dtype(dst) == dtype(src)"]"#, "", "P4");
    rejects(GOOD, r#"type_rule = ["dtype(dst) == dtype(src)"]"#, "type_rule = []", "P4");
}

#[test]
fn true_type_rule_only_where_kinds_say_it_all() {
    rejects(GOOD, r#"type_rule = ["dtype(dst) == dtype(src)"]"#, r#"type_rule = ["true"]"#, "param `dst`");
    rejects(GOOD, r#"type_rule = ["dtype(dst) == dtype(src)"]"#, r#"type_rule = ["true", "dtype(dst) == f32"]"#, "only constraint");
    // A nullary op or one with only pipeline/barrier/role/int params may say ["true"].
    let nullary = r#"
[[op]]
name = "my_fence"
class = "sync"
form = "stmt"
summary = "fence"
issue = "thread"
params = [{ name = "p", kind = "pipeline" }]
type_rule = ["true"]
effects = [{ on = "@smem", access = "fence", proxy = "async" }]
lowering = "fence"
hardware = "orders"
"#;
    Catalog::from_toml_files(&[("extra/sync.toml", nullary)]).unwrap();
}

#[test]
fn type_rule_constraints_must_parse_and_name_params() {
    rejects(GOOD, r#"["dtype(dst) == dtype(src)"]"#, r#"["dtype(dst) == "]"#, "type_rule `dtype(dst) == `");
    rejects(GOOD, r#"["dtype(dst) == dtype(src)"]"#, r#"["dtype(dst) == dtype(source)"]"#, "does not name a param");
}

#[test]
fn effects_must_be_declared() {
    let no_effects = GOOD.split("effects = [").next().unwrap().to_string() + "lowering = \"x\"\nhardware = \"y\"\n";
    let e = load(&no_effects).unwrap_err();
    assert!(e.to_string().contains("`effects` is missing"), "{e}");
    assert_eq!(e.op.as_deref(), Some("my_copy"));
    // An empty effect list needs `pure = true` on an expr op.
    let empty = GOOD_EXPR.replace("pure = true\n", "");
    let e = load_expr(&empty).unwrap_err();
    assert!(e.to_string().contains("only allowed with `pure = true`"), "{e}");
    rejects(GOOD_EXPR, "effects = []", r#"effects = [{ on = "x", access = "read", proxy = "generic" }]"#, "a `pure` op has `effects = []`");
}

#[test]
fn pure_is_for_expressions_only() {
    rejects(GOOD, "effects = [", "pure = true\neffects = [", "only for `expr` ops");
}

#[test]
fn data_effects_name_their_proxy() {
    rejects(GOOD, r#"{ on = "src", access = "read", proxy = "generic" }"#, r#"{ on = "src", access = "read" }"#, "must name its proxy");
}

#[test]
fn param_access_must_match_an_effect() {
    rejects(GOOD, r#"{ name = "dst", kind = "frag", access = "write" }"#, r#"{ name = "dst", kind = "frag", access = "readwrite" }"#, "no effect");
    rejects(GOOD, r#"{ name = "dst", kind = "frag", access = "write" }"#, r#"{ name = "dst", kind = "frag" }"#, "needs `access`");
}

#[test]
fn result_must_be_a_vocabulary_form() {
    rejects(GOOD_EXPR, r#"result = "same(x)""#, r#"result = "whatever(x)""#, "unknown result rule");
    rejects(GOOD_EXPR, r#"result = "same(x)""#, r#"result = "same(y)""#, "not a param");
    rejects(GOOD_EXPR, r#"result = "same(x)""#, r#"result = "broadcast(x)""#, "two or more");
    rejects(GOOD_EXPR, r#"result = "same(x)""#, r#"result = "reduce(x, x)""#, "const_int");
    rejects(GOOD_EXPR, r#"result = "same(x)""#, r#"result = "none""#, "needs a result rule");
    rejects(GOOD, "effects = [", "result = \"same(dst)\"\neffects = [", "`stmt` op has `result = \"none\"`");
}

#[test]
fn class_must_match_the_file() {
    let e = Catalog::from_toml_files(&[("extra/compute.toml", GOOD)]).unwrap_err();
    assert!(e.to_string().contains("class `memory` in extra/compute.toml"), "{e}");
    // A file not named after a class may hold any class.
    Catalog::from_toml_files(&[("extra/experiments.toml", GOOD)]).unwrap();
}

#[test]
fn names_are_identifiers_and_not_keywords() {
    rejects(GOOD, r#"name = "my_copy""#, r#"name = "for""#, "keyword");
    rejects(GOOD, r#"name = "my_copy""#, r#"name = "My-Copy""#, "identifiers");
}

#[test]
fn unknown_fields_are_rejected() {
    rejects(GOOD, "hardware =", "hardwre = \"typo\"\nhardware =", "hardwre");
}

#[test]
fn params_are_unique_and_defaults_go_with_optional() {
    rejects(GOOD, r#"{ name = "src", kind = "smem", access = "read" }"#, r#"{ name = "dst", kind = "smem", access = "read" }"#, "declared twice");
    rejects(
        GOOD,
        r#"{ name = "src", kind = "smem", access = "read" },"#,
        r#"{ name = "src", kind = "smem", access = "read" },
  { name = "n", kind = "const_int", default = "0" },"#,
        "go together",
    );
}

#[test]
fn a_broken_toml_file_names_the_file() {
    let e = load("[[op]]\nname = ").unwrap_err();
    assert_eq!(e.file, "extra/memory.toml");
    assert!(e.op.is_none());
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cake-catalog-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn load_dir_reads_every_toml_file_and_names_the_failing_one() {
    let dir = temp_dir("load");
    std::fs::write(dir.join("memory.toml"), GOOD).unwrap();
    std::fs::write(dir.join("math.toml"), GOOD_EXPR).unwrap();
    std::fs::write(dir.join("notes.md"), "ignored").unwrap();
    let c = Catalog::load_dir(&dir).unwrap();
    assert_eq!(c.names(), ["my_neg", "my_copy"], "files in name order");

    std::fs::write(dir.join("sync.toml"), GOOD.replace("class = \"memory\"", "class = \"sync\"").replace("my_copy", "bad_op").replace("on = \"src\"", "on = \"nope\"")).unwrap();
    let e = Catalog::load_dir(&dir).unwrap_err();
    assert!(e.file.ends_with("sync.toml"), "{e}");
    assert_eq!(e.op.as_deref(), Some("bad_op"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_builtin_directory_loads_from_disk_like_the_embedded_copy() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("catalog");
    let from_disk = Catalog::load_dir(&dir).unwrap();
    assert_eq!(from_disk.names(), Catalog::builtin().names());
}

#[test]
fn overlay_replaces_a_builtin_file_by_name_and_adds_others() {
    // Replacing compute.toml with a file that lacks wgmma removes it; the other classes stay.
    let c = Catalog::overlay(&[("proposal/compute.toml", &GOOD.replace("class = \"memory\"", "class = \"compute\""))]).unwrap();
    assert!(c.get("wgmma").is_none() && c.get("my_copy").is_some() && c.get("tma_load").is_some());
    let c = Catalog::overlay(&[("proposal/extra.toml", GOOD)]).unwrap();
    assert!(c.get("wgmma").is_some() && c.get("my_copy").is_some());
}

#[test]
fn a_catalog_can_be_checked_against_another_target_table() {
    let mut text = cake::target::BUILTIN_TOML.to_string();
    text = text.replace("ldmatrix = \"", "ldmatrix_v2 = \"").replace("\"ldmatrix\"", "\"ldmatrix_v2\"");
    let table = TargetTable::from_toml_str("alt/targets.toml", &text).unwrap();
    let e = Catalog::from_toml_files_with(&[("extra/memory.toml", GOOD)], &table).unwrap_err();
    assert!(e.to_string().contains("unknown feature `ldmatrix`"), "{e}");
}

// ─── Target table ───────────────────────────────────────────────────────────────────────────────

fn bad_targets(from: &str, to: &str, needle: &str) {
    let base = cake::target::BUILTIN_TOML;
    assert!(base.contains(from), "test bug: `{from}` not in targets.toml");
    let e = TargetTable::from_toml_str("t.toml", &base.replacen(from, to, 1)).unwrap_err();
    assert!(e.to_string().contains(needle), "error `{e}` does not mention `{needle}`");
    assert!(e.to_string().starts_with("t.toml: "), "{e}");
}

#[test]
fn target_table_checks() {
    bad_targets(r#"features = ["mma_sync", "ldmatrix", "cp_async", "mbarrier"]"#, r#"features = ["mma_sync", "warp_magic"]"#, "target `sm_80`: feature `warp_magic`");
    bad_targets("name = \"sm_89\"", "name = \"sm_80\"", "defined twice");
    bad_targets("smem_per_block_max = 166912", "smem_per_block_max = 999999", "smem_per_block_max");
    bad_targets("sm = 89", "sm = 90", "does not match");
    bad_targets("max_cluster_size = 1", "max_cluster_size = 8", "clusters");
    bad_targets("runnable = false", "runable = false", "runable");
}
