//! The built-in op catalog and target table: they load, they cover the example programs, they put
//! features on the right targets, and the type rules accept the examples' calls.

use std::collections::BTreeMap;

use cake::catalog::{Catalog, OpClass, OpForm, ParamKind, ResultRule};
use cake::pred::{self, EvalError, Facts, Value};
use cake::target::TargetTable;

const EXAMPLES: &[(&str, &str)] = &[
    ("gemm_bf16_sm80.cake", include_str!("../../examples/gemm_bf16_sm80.cake")),
    ("gemm_bf16_ws.cake", include_str!("../../examples/gemm_bf16_ws.cake")),
    ("kmeans_assign.cake", include_str!("../../examples/kmeans_assign.cake")),
];

const KEYWORDS: &[&str] = &[
    "kernel", "target", "dim", "const", "scalar", "in", "out", "inout", "grid", "smem", "view", "role", "barrier",
    "pipeline", "on", "reg", "let", "for", "if", "else", "true", "false", "inf",
];

#[test]
fn builtin_targets_load() {
    let t = TargetTable::builtin();
    assert_eq!(t.names(), ["sm_80", "sm_89", "sm_90a", "sm_100a", "sm_103a", "sm_120a", "sm_121a"]);
    let runnable: Vec<&str> = t.targets.iter().filter(|x| x.runnable).map(|x| x.name.as_str()).collect();
    assert_eq!(runnable, ["sm_90a"], "only the H200 runs kernels");
    let h = t.get("sm_90a").unwrap();
    assert_eq!((h.sm, h.arch.as_str(), h.sm_count), (90, "sm_90a", Some(132)));
    assert_eq!(h.smem_per_block_max, 232448);
    assert_eq!(t.get("sm_80").unwrap().smem_per_block_max, 166912);
    assert_eq!(t.get("sm_89").unwrap().smem_per_block_max, 101376);
    for name in ["sm_100a", "sm_103a"] {
        assert_eq!(t.get(name).unwrap().smem_per_block_max, 232448);
    }
    for name in ["sm_120a", "sm_121a"] {
        assert_eq!(t.get(name).unwrap().smem_per_block_max, 101376);
    }
    for x in &t.targets {
        assert_eq!((x.regs_per_sm, x.regs_per_thread_max, x.max_threads_per_block), (65536, 255, 1024), "{}", x.name);
        assert!(!x.notes.is_empty());
    }
    assert!(t.get("sm_75").is_none());
}

/// Which targets have a feature, by name.
fn with_feature(feature: &str) -> Vec<&'static str> {
    TargetTable::builtin().targets.iter().filter(|t| t.has(feature)).map(|t| t.name.as_str()).collect()
}

#[test]
fn features_sit_on_the_right_targets() {
    let all = ["sm_80", "sm_89", "sm_90a", "sm_100a", "sm_103a", "sm_120a", "sm_121a"];
    assert_eq!(with_feature("mma_sync"), all);
    assert_eq!(with_feature("cp_async"), all);
    assert_eq!(with_feature("wgmma"), ["sm_90a"], "wgmma is sm_90a only");
    assert_eq!(with_feature("tcgen05"), ["sm_100a", "sm_103a"]);
    assert_eq!(with_feature("tmem"), ["sm_100a", "sm_103a"]);
    assert_eq!(with_feature("cta_pair_mma"), ["sm_100a", "sm_103a"]);
    assert_eq!(with_feature("fp8_mma"), &all[1..]);
    assert_eq!(with_feature("fp4_mma"), ["sm_120a", "sm_121a"]);
    assert_eq!(with_feature("tma"), &all[2..], "sm_89 has fp8 but no TMA");
    assert_eq!(with_feature("mbarrier_tx"), &all[2..]);
    assert_eq!(with_feature("clusters"), &all[2..]);
    assert_eq!(with_feature("tma_multicast"), ["sm_90a", "sm_100a", "sm_103a"]);
    assert_eq!(with_feature("setmaxnreg"), &all[2..]);
    assert_eq!(with_feature("stmatrix"), &all[2..]);
    let t = TargetTable::builtin();
    for x in &t.targets {
        assert_eq!(x.max_cluster_size > 1, x.has("clusters"), "{}", x.name);
    }
    // Every vocabulary entry is used by some target.
    for f in t.features.keys() {
        assert!(!with_feature(f).is_empty(), "feature `{f}` is on no target");
    }
}

#[test]
fn builtin_catalog_loads_with_every_class() {
    let c = Catalog::builtin();
    for class in OpClass::ALL {
        assert!(c.ops_in_class(class).next().is_some(), "no {class:?} ops");
    }
    for op in &c.ops {
        assert_eq!(op.file, format!("catalog/{}.toml", op.class.as_str()), "{}", op.name);
        assert!(!op.hardware.trim().is_empty() && !op.summary.trim().is_empty() && !op.type_rule.is_empty());
        assert_eq!(op.type_rule.len(), op.type_rule_parsed.len());
        if op.form == OpForm::Expr {
            assert!(op.pure, "{}: math ops are pure", op.name);
            assert_ne!(op.result, ResultRule::None);
        } else {
            assert!(!op.effects.is_empty(), "{}", op.name);
        }
    }
    assert!(c.get("load").is_none(), "reading a window in an expression is the one spelling of a load");
    assert!(c.get("wgmma_fp8").is_none(), "one wgmma covers fp8 (P3)");
    assert!(c.get("setmaxnreg").is_none(), "setmaxnreg is derived from `regs`");
}

#[test]
fn ops_the_brief_names_exist_with_their_signatures() {
    let c = Catalog::builtin();
    let expect: &[(&str, &[(&str, ParamKind)])] = &[
        ("acquire", &[("p", ParamKind::Pipeline)]),
        ("wait", &[("p", ParamKind::Sync)]),
        ("release", &[("p", ParamKind::Pipeline)]),
        ("arrive", &[("b", ParamKind::Barrier)]),
        ("arrive_expect_tx", &[("b", ParamKind::Barrier), ("bytes", ParamKind::Int)]),
        ("wait_parity", &[("b", ParamKind::Barrier), ("parity", ParamKind::Int)]),
        ("sync", &[]),
        ("sync_role", &[("r", ParamKind::Role)]),
        ("fence_proxy_async", &[]),
        ("cluster_sync", &[]),
        ("tma_load", &[("dst", ParamKind::Smem), ("src", ParamKind::Global), ("bar", ParamKind::Sync)]),
        ("tma_store", &[("dst", ParamKind::Global), ("src", ParamKind::Smem)]),
        ("tma_store_wait", &[("n", ParamKind::ConstInt)]),
        ("cp_async", &[("dst", ParamKind::Smem), ("src", ParamKind::Global)]),
        ("cp_async_commit", &[]),
        ("cp_async_wait", &[("n", ParamKind::ConstInt)]),
        ("ldmatrix", &[("dst", ParamKind::Frag), ("src", ParamKind::Smem)]),
        ("stmatrix", &[("dst", ParamKind::Smem), ("src", ParamKind::Value)]),
        ("store", &[("dst", ParamKind::Mem), ("src", ParamKind::Value)]),
        ("wgmma", &[("acc", ParamKind::Frag), ("a", ParamKind::Smem), ("b", ParamKind::Smem)]),
        ("wgmma_commit", &[]),
        ("wgmma_wait", &[("n", ParamKind::ConstInt)]),
        ("mma_sync", &[("acc", ParamKind::Frag), ("a", ParamKind::Frag), ("b", ParamKind::Frag)]),
        ("zero", &[("x", ParamKind::Frag)]),
        ("fill", &[("x", ParamKind::Frag), ("v", ParamKind::Value)]),
        ("cast", &[("x", ParamKind::Value), ("to", ParamKind::Dtype)]),
        ("exp", &[("x", ParamKind::Value)]),
        ("exp2", &[("x", ParamKind::Value)]),
        ("log", &[("x", ParamKind::Value)]),
        ("sqrt", &[("x", ParamKind::Value)]),
        ("rsqrt", &[("x", ParamKind::Value)]),
        ("abs", &[("x", ParamKind::Value)]),
        ("min", &[("a", ParamKind::Value), ("b", ParamKind::Value)]),
        ("max", &[("a", ParamKind::Value), ("b", ParamKind::Value)]),
        ("select", &[("c", ParamKind::Value), ("a", ParamKind::Value), ("b", ParamKind::Value)]),
        ("fma", &[("a", ParamKind::Value), ("b", ParamKind::Value), ("c", ParamKind::Value)]),
        ("reduce_min", &[("x", ParamKind::Value), ("axis", ParamKind::ConstInt)]),
        ("reduce_max", &[("x", ParamKind::Value), ("axis", ParamKind::ConstInt)]),
        ("reduce_sum", &[("x", ParamKind::Value), ("axis", ParamKind::ConstInt)]),
        ("reduce_argmin", &[("x", ParamKind::Value), ("axis", ParamKind::ConstInt)]),
        ("reduce_argmax", &[("x", ParamKind::Value), ("axis", ParamKind::ConstInt)]),
    ];
    for (name, params) in expect {
        let op = c.get(name).unwrap_or_else(|| panic!("op `{name}` missing"));
        let got: Vec<(&str, ParamKind)> = op.params.iter().map(|p| (p.name.as_str(), p.kind)).collect();
        assert_eq!(&got, params, "signature of `{name}`");
    }
    assert!(c.get("reduce_min").unwrap().param("axis").unwrap().named);
    assert_eq!(c.get("reduce_argmin").unwrap().result.to_string(), "reduce_index(x, axis)");
    assert_eq!(c.get("cast").unwrap().result.to_string(), "cast(x, to)");
}

/// `name(args)` calls in a program's text (comments removed): (name, positional count, named args).
fn calls(src: &str) -> Vec<(String, usize, Vec<String>)> {
    let text: String = src.lines().map(|l| l.split('#').next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let word = &text[start..i];
            let preceded_by_dot = start > 0 && bytes[start - 1] == b'.';
            if i < bytes.len() && bytes[i] == b'(' && !preceded_by_dot && !KEYWORDS.contains(&word) {
                // Split the argument list at top-level commas.
                let (mut depth, mut j, mut arg_start) = (0i32, i + 1, i + 1);
                let mut args = Vec::new();
                while j < bytes.len() {
                    match bytes[j] {
                        b'(' | b'[' => depth += 1,
                        b']' => depth -= 1,
                        b')' if depth == 0 => break,
                        b')' => depth -= 1,
                        b',' if depth == 0 => {
                            args.push(text[arg_start..j].trim().to_string());
                            arg_start = j + 1;
                        }
                        _ => {}
                    }
                    j += 1;
                }
                let last = text[arg_start..j].trim();
                if !last.is_empty() {
                    args.push(last.to_string());
                }
                let named: Vec<String> = args
                    .iter()
                    .filter_map(|a| {
                        let (k, v) = a.split_once('=')?;
                        (!v.starts_with('=') && !k.ends_with(['<', '>', '!', '='])).then(|| k.trim().to_string())
                    })
                    .collect();
                out.push((word.to_string(), args.len() - named.len(), named));
            }
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn every_op_the_examples_call_exists_with_a_matching_arity_on_their_target() {
    let c = Catalog::builtin();
    let targets = TargetTable::builtin();
    let mut seen = BTreeMap::new();
    for (file, src) in EXAMPLES {
        let target_name = src
            .lines()
            .find_map(|l| l.strip_prefix("kernel ").and_then(|l| l.split(" target ").nth(1)))
            .unwrap_or_else(|| panic!("{file}: no kernel line"))
            .trim();
        let target = targets.get(target_name).unwrap_or_else(|| panic!("{file}: unknown target {target_name}"));
        let found = calls(src);
        assert!(found.len() > 5, "{file}: the call scanner found too little: {found:?}");
        for (name, positional, named) in found {
            let op = c.get(&name).unwrap_or_else(|| panic!("{file}: calls `{name}`, which the catalog lacks"));
            let pos: Vec<_> = op.positional_params().collect();
            let required = pos.iter().filter(|p| !p.optional).count();
            assert!(
                (required..=pos.len()).contains(&positional),
                "{file}: `{name}` called with {positional} positional args, catalog has {required}..={}",
                pos.len()
            );
            for n in &named {
                assert!(op.named_params().any(|p| &p.name == n), "{file}: `{name}` has no named param `{n}`");
            }
            for p in op.named_params().filter(|p| !p.optional) {
                assert!(named.contains(&p.name), "{file}: `{name}` needs `{}=`", p.name);
            }
            assert!(op.available_on(target), "{file}: `{name}` is not available on {target_name}: missing {:?}", op.missing_on(target));
            *seen.entry(name).or_insert(0) += 1;
        }
    }
    for name in ["acquire", "wait", "release", "tma_load", "wgmma", "wgmma_commit", "wgmma_wait", "store", "cast", "zero", "fill",
        "reduce_min", "reduce_argmin", "select", "cp_async", "cp_async_commit", "cp_async_wait", "sync", "ldmatrix", "mma_sync"]
    {
        assert!(seen.contains_key(name), "the examples were expected to call `{name}`");
    }
}

#[test]
fn wgmma_is_not_available_on_sm_100a_or_sm_80() {
    let c = Catalog::builtin();
    let t = TargetTable::builtin();
    let wgmma = c.get("wgmma").unwrap();
    assert!(wgmma.available_on(t.get("sm_90a").unwrap()));
    for name in ["sm_80", "sm_89", "sm_100a", "sm_103a", "sm_120a", "sm_121a"] {
        let target = t.get(name).unwrap();
        assert!(!wgmma.available_on(target), "wgmma on {name}");
        assert_eq!(wgmma.missing_on(target), ["wgmma"]);
        assert!(c.ops_missing_on(target).iter().any(|op| op.name == "wgmma"));
    }
}

#[test]
fn ops_missing_on_each_target() {
    let c = Catalog::builtin();
    let t = TargetTable::builtin();
    let missing = |target: &str| -> Vec<&str> { c.ops_missing_on(t.get(target).unwrap()).iter().map(|op| op.name.as_str()).collect() };
    assert!(missing("sm_90a").is_empty(), "the H200 has every op: {:?}", missing("sm_90a"));
    let sm80 = missing("sm_80");
    for op in ["wgmma", "tma_load", "tma_store", "acquire", "arrive_expect_tx", "fence_proxy_async", "cluster_sync", "stmatrix"] {
        assert!(sm80.contains(&op), "{op} should be missing on sm_80");
    }
    for op in ["mma_sync", "ldmatrix", "cp_async", "sync", "wait", "release", "store", "cast", "reduce_argmin"] {
        assert!(!sm80.contains(&op), "{op} should exist on sm_80");
    }
    assert_eq!(missing("sm_100a"), ["wgmma", "wgmma_commit", "wgmma_wait"]);
    assert_eq!(missing("sm_120a"), ["wgmma", "wgmma_commit", "wgmma_wait"]);
    // No tcgen05 op is in the catalog yet; any that is added must stay off Hopper and sm_120a.
    for op in c.ops.iter().filter(|op| op.requires.iter().any(|f| f == "tcgen05" || f == "tmem")) {
        assert!(!op.available_on(t.get("sm_90a").unwrap()) && !op.available_on(t.get("sm_120a").unwrap()), "{}", op.name);
    }
}

#[test]
fn fp8_mma_sync_is_conditional_on_fp8_mma() {
    let op = Catalog::builtin().get("mma_sync").unwrap();
    assert_eq!(op.requires, ["mma_sync"]);
    assert_eq!(op.requires_when.len(), 1);
    assert_eq!(op.requires_when[0].features, ["fp8_mma"]);
    let sm80 = TargetTable::builtin().get("sm_80").unwrap();
    assert!(op.available_on(sm80) && !sm80.has("fp8_mma"));
}

// ─── Type rules against the examples' argument types ────────────────────────────────────────────

#[derive(Clone)]
struct Arg {
    dtype: &'static str,
    shape: Vec<i64>,
    scope: &'static str,
    swizzle: i64,
    box_: Vec<i64>,
    value: Option<i64>,
}

fn t(dtype: &'static str, shape: &[i64]) -> Arg {
    Arg { dtype, shape: shape.to_vec(), scope: "thread", swizzle: 0, box_: vec![], value: None }
}

impl Arg {
    fn scope(mut self, s: &'static str) -> Arg {
        self.scope = s;
        self
    }
    fn swz(mut self, s: i64) -> Arg {
        self.swizzle = s;
        self
    }
    fn tma(mut self, b: &[i64]) -> Arg {
        self.box_ = b.to_vec();
        self
    }
}

fn int(v: i64) -> Arg {
    Arg { value: Some(v), ..t("i32", &[]) }
}

fn size(dtype: &str) -> i64 {
    match dtype {
        "bool" | "f8e4m3" | "f8e5m2" => 1,
        "f16" | "bf16" => 2,
        "i64" => 8,
        _ => 4,
    }
}

struct ArgFacts(BTreeMap<&'static str, Arg>);

impl Facts for ArgFacts {
    fn fact(&self, name: &str, args: &[Value]) -> Result<Value, EvalError> {
        let takes = |expects| EvalError::Arguments { fact: name.to_string(), expects };
        let no_arg = |p: &str| EvalError::NoParameter { op: "the test call".into(), name: p.to_string() };
        let Some(Value::Sym(p)) = args.first() else { return Err(takes("a parameter")) };
        let a = self.0.get(p.as_str()).ok_or_else(|| no_arg(p))?;
        let index = |v: &[i64]| -> Result<Value, EvalError> {
            let Some(Value::Int(i)) = args.get(1) else { return Err(takes("a parameter and an axis")) };
            let i = if *i < 0 { v.len() as i64 + i } else { *i };
            v.get(i as usize).map(|d| Value::Int(*d)).ok_or_else(|| takes("an axis in range"))
        };
        let numel: i64 = a.shape.iter().product();
        Ok(match name {
            "dtype" => Value::Sym(a.dtype.into()),
            "rank" => Value::Int(a.shape.len() as i64),
            "dim" => index(&a.shape)?,
            "numel" => Value::Int(numel),
            "bytes" => Value::Int(numel * size(a.dtype)),
            "scope" => Value::Sym(a.scope.into()),
            "swizzle" => Value::Int(a.swizzle),
            "box" if a.box_.is_empty() => Value::Int(0),
            "box" => index(&a.box_)?,
            "value" => a.value.map(Value::Int).ok_or_else(|| takes("a constant parameter"))?,
            "has_tma" => Value::Bool(!a.box_.is_empty()),
            "same_shape" => {
                let Some(Value::Sym(q)) = args.get(1) else { return Err(takes("two parameters")) };
                Value::Bool(self.0.get(q.as_str()).ok_or_else(|| no_arg(q))?.shape == a.shape)
            }
            _ => return Err(EvalError::UnknownFact { scope: None, name: name.to_string() }),
        })
    }
}

/// Check a call's arguments against an op's type rule: `Ok` or the first failing constraint.
fn check(op: &str, args: &[(&'static str, Arg)]) -> Result<(), String> {
    let def = Catalog::builtin().get(op).unwrap();
    let facts = ArgFacts(args.iter().cloned().collect());
    for (text, e) in def.type_rule.iter().zip(&def.type_rule_parsed) {
        match pred::holds(e, &facts) {
            Ok(Some(true)) => {}
            Ok(other) => return Err(format!("{op}: `{text}` is {other:?}")),
            Err(m) => return Err(format!("{op}: `{text}`: {m}")),
        }
    }
    Ok(())
}

#[test]
fn type_rules_accept_the_examples_calls() {
    let acc = t("f32", &[64, 256]).scope("warpgroup");
    let a = t("bf16", &[64, 64]).swz(128);
    let b = t("bf16", &[256, 64]).swz(128);
    check("wgmma", &[("acc", acc.clone()), ("a", a.clone()), ("b", b.clone())]).unwrap();
    // kmeans: acc f32[64, 128], x_s window [64, 64], c_s stage [128, 64]
    check("wgmma", &[("acc", t("f32", &[64, 128]).scope("warpgroup")), ("a", a.clone()), ("b", t("bf16", &[128, 64]).swz(128))])
        .unwrap();
    check(
        "tma_load",
        &[("dst", t("bf16", &[128, 64]).swz(128)), ("src", t("bf16", &[128, 64]).swz(128).tma(&[128, 64])), ("bar", t("i32", &[]))],
    )
    .unwrap();
    check(
        "tma_load",
        &[("dst", t("bf16", &[128, 64]).swz(128)), ("src", t("bf16", &[128, 64]).swz(128).tma(&[1, 128, 64])), ("bar", t("i32", &[]))],
    )
    .unwrap();
    check("tma_load", &[("dst", t("f32", &[128])), ("src", t("f32", &[128]).tma(&[1, 128])), ("bar", t("i32", &[]))]).unwrap();
    check("store", &[("dst", t("bf16", &[64, 256])), ("src", t("bf16", &[64, 256]).scope("warpgroup"))]).unwrap();
    check("store", &[("dst", t("i32", &[64])), ("src", t("i32", &[64]).scope("warpgroup"))]).unwrap();
    check("cast", &[("x", acc.clone()), ("to", t("bf16", &[]))]).unwrap();
    check("zero", &[("x", acc.clone())]).unwrap();
    check("fill", &[("x", t("f32", &[64]).scope("warpgroup")), ("v", t("f32", &[]))]).unwrap();
    let d = t("f32", &[64, 128]).scope("warpgroup");
    for op in ["reduce_min", "reduce_argmin", "reduce_max", "reduce_sum", "reduce_argmax"] {
        check(op, &[("x", d.clone()), ("axis", int(1))]).unwrap();
    }
    check("select", &[("c", t("bool", &[64])), ("a", t("i32", &[64])), ("b", t("i32", &[64]))]).unwrap();
    check("wgmma_wait", &[("n", int(0))]).unwrap();
    // sm_80 GEMM
    let frag = |d: &'static str, s: &[i64]| t(d, s).scope("warp");
    check("cp_async", &[("dst", t("bf16", &[128, 32]).swz(64)), ("src", t("bf16", &[128, 32]))]).unwrap();
    check("cp_async_wait", &[("n", int(1))]).unwrap();
    check("ldmatrix", &[("dst", frag("bf16", &[64, 16])), ("src", t("bf16", &[64, 16]).swz(64))]).unwrap();
    check("mma_sync", &[("acc", frag("f32", &[64, 64])), ("a", frag("bf16", &[64, 16])), ("b", frag("bf16", &[64, 16]))]).unwrap();
    check("store", &[("dst", t("bf16", &[64, 64])), ("src", frag("bf16", &[64, 64]))]).unwrap();
}

/// The call must fail on a constraint that evaluates to false (not on an evaluation error).
fn rejects(op: &str, args: &[(&'static str, Arg)]) -> bool {
    match check(op, args) {
        Ok(()) => false,
        Err(m) => {
            assert!(m.contains("is Some(false)"), "{m}");
            true
        }
    }
}

#[test]
fn type_rules_reject_illegal_shapes() {
    let acc = |n| t("f32", &[64, n]).scope("warpgroup");
    let op = |n, k, d| t(d, &[n, k]).swz(128);
    // N out of range or not a multiple of 8
    assert!(rejects("wgmma", &[("acc", acc(260)), ("a", op(64, 64, "bf16")), ("b", op(260, 64, "bf16"))]));
    assert!(rejects("wgmma", &[("acc", acc(100)), ("a", op(64, 64, "bf16")), ("b", op(100, 64, "bf16"))]));
    // M must be 64
    assert!(rejects("wgmma", &[("acc", t("f32", &[128, 64]).scope("warpgroup")), ("a", op(128, 64, "bf16")), ("b", op(64, 64, "bf16"))]));
    // fp8 needs K % 32; bf16 K % 16 is enough
    check("wgmma", &[("acc", acc(64)), ("a", op(64, 32, "f8e4m3")), ("b", op(64, 32, "f8e5m2"))]).unwrap();
    assert!(rejects("wgmma", &[("acc", acc(64)), ("a", op(64, 16, "f8e4m3")), ("b", op(64, 16, "f8e4m3"))]));
    check("wgmma", &[("acc", acc(64)), ("a", op(64, 16, "bf16")), ("b", op(64, 16, "bf16"))]).unwrap();
    // bf16 × f16 mix, bf16 with f16 accumulators, per-warp accumulator, unswizzled operand
    assert!(rejects("wgmma", &[("acc", acc(64)), ("a", op(64, 64, "bf16")), ("b", op(64, 64, "f16"))]));
    assert!(rejects("wgmma", &[("acc", t("f16", &[64, 64]).scope("warpgroup")), ("a", op(64, 64, "bf16")), ("b", op(64, 64, "bf16"))]));
    assert!(rejects("wgmma", &[("acc", t("f32", &[64, 64]).scope("warp")), ("a", op(64, 64, "bf16")), ("b", op(64, 64, "bf16"))]));
    assert!(rejects("wgmma", &[("acc", acc(64)), ("a", t("bf16", &[64, 64])), ("b", op(64, 64, "bf16"))]));
    // TMA: not a tma tensor, box inner bytes over the swizzle span, mismatched swizzle, 8-byte rows
    let dst = t("bf16", &[128, 64]).swz(128);
    assert!(rejects("tma_load", &[("dst", dst.clone()), ("src", t("bf16", &[128, 64])), ("bar", int(0))]));
    assert!(rejects("tma_load", &[("dst", t("bf16", &[64, 128]).swz(128)), ("src", t("bf16", &[64, 128]).swz(128).tma(&[64, 128])), ("bar", int(0))]));
    assert!(rejects("tma_load", &[("dst", dst.clone()), ("src", t("bf16", &[128, 64]).swz(64).tma(&[128, 64])), ("bar", int(0))]));
    assert!(rejects("tma_load", &[("dst", t("bf16", &[128, 4])), ("src", t("bf16", &[128, 4]).tma(&[128, 4])), ("bar", int(0))]));
    // the window must be exactly the box's inner extent
    assert!(rejects("tma_load", &[("dst", t("bf16", &[128, 32]).swz(128)), ("src", t("bf16", &[128, 32]).swz(128).tma(&[128, 64])), ("bar", int(0))]));
    // store shape and dtype
    assert!(rejects("store", &[("dst", t("bf16", &[64, 256])), ("src", t("f32", &[64, 256]))]));
    assert!(rejects("store", &[("dst", t("bf16", &[128, 128])), ("src", t("bf16", &[64, 256]))]));
    // mma_sync: fp8 with K = 16, bf16 with f16 accumulators
    let w = |d: &'static str, s: &[i64]| t(d, s).scope("warp");
    assert!(rejects("mma_sync", &[("acc", w("f32", &[16, 8])), ("a", w("f8e4m3", &[16, 16])), ("b", w("f8e4m3", &[8, 16]))]));
    check("mma_sync", &[("acc", w("f32", &[16, 8])), ("a", w("f8e4m3", &[16, 32])), ("b", w("f8e5m2", &[8, 32]))]).unwrap();
    assert!(rejects("mma_sync", &[("acc", w("f16", &[16, 8])), ("a", w("bf16", &[16, 16])), ("b", w("bf16", &[8, 16]))]));
    // reductions: axis out of range; cast to the same dtype
    assert!(rejects("reduce_min", &[("x", t("f32", &[64, 128])), ("axis", int(2))]));
    assert!(rejects("cast", &[("x", t("f32", &[64])), ("to", t("f32", &[]))]));
}

/// The `{term}` holes of a help template, in order (P8: a type-rule finding states the fix with
/// the program's values).
fn help_holes(help: &str) -> Result<Vec<&str>, String> {
    let mut holes = Vec::new();
    let mut rest = help;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else { return Err(format!("unclosed `{{` in `{help}`")) };
        holes.push(&rest[open + 1..open + close]);
        rest = &rest[open + close + 1..];
    }
    if rest.contains('}') {
        return Err(format!("stray `}}` in `{help}`"));
    }
    Ok(holes)
}

/// Every fact a hole names takes one of the op's params first; nothing else is a bare word.
fn hole_mentions_only_params(e: &pred::PExpr, params: &[&str]) -> Result<(), String> {
    const FACTS: &[&str] = &["dtype", "rank", "dim", "numel", "bytes", "scope", "space", "swizzle", "box", "value", "has_tma", "is_literal", "same_shape"];
    use pred::PExpr as P;
    match e {
        P::Int(_) => Ok(()),
        P::Sym(s) => Err(format!("bare word `{s}` (a hole is a term over the op's params)")),
        P::Fact { name, args } => {
            if !FACTS.contains(&name.as_str()) {
                return Err(format!("unknown fact `{name}`"));
            }
            match args.first() {
                Some(P::Sym(p)) if params.contains(&p.as_str()) => {}
                other => return Err(format!("`{name}` takes one of the op's params {params:?} first, found {other:?}")),
            }
            for a in &args[1..] {
                match a {
                    P::Sym(p) if name == "same_shape" && params.contains(&p.as_str()) => {}
                    a => hole_mentions_only_params(a, params)?,
                }
            }
            Ok(())
        }
        P::Not(x) | P::Neg(x) => hole_mentions_only_params(x, params),
        P::Bin { lhs, rhs, .. } => {
            hole_mentions_only_params(lhs, params)?;
            hole_mentions_only_params(rhs, params)
        }
        P::In { value, set } => {
            hole_mentions_only_params(value, params)?;
            set.iter().try_for_each(|s| hole_mentions_only_params(s, params))
        }
    }
}

#[test]
fn every_type_rule_constraint_has_a_help_whose_holes_are_terms_over_the_params() {
    let c = Catalog::builtin();
    let mut problems = Vec::new();
    let mut with_help = 0;
    for op in &c.ops {
        assert_eq!(op.type_rule_help.len(), op.type_rule.len(), "{}", op.name);
        let params: Vec<&str> = op.params.iter().map(|p| p.name.as_str()).collect();
        for (rule, help) in op.type_rule.iter().zip(&op.type_rule_help) {
            let at = format!("{} `{rule}`", op.name);
            if rule.trim() == "true" {
                // The param kinds are the whole rule: a finding can never come from it.
                if help.is_some() {
                    problems.push(format!("{at}: `true` never fails, so it takes no help"));
                }
                continue;
            }
            let Some(help) = help.as_deref().filter(|h| !h.trim().is_empty()) else {
                problems.push(format!("{at}: no help; write `{{ rule = \"…\", help = \"…\" }}` stating the fix (P8)"));
                continue;
            };
            with_help += 1;
            if help.contains('\n') {
                problems.push(format!("{at}: the help is one line"));
            }
            match help_holes(help) {
                Err(e) => problems.push(format!("{at}: {e}")),
                Ok(holes) => {
                    for hole in holes {
                        match pred::parse(hole) {
                            Err(e) => problems.push(format!("{at}: hole `{{{hole}}}` is not a predicate term: {e:?}")),
                            Ok(e) => {
                                if let Err(e) = hole_mentions_only_params(&e, &params) {
                                    problems.push(format!("{at}: hole `{{{hole}}}`: {e}"));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(with_help >= 94, "{with_help} constraints with a help");
}
