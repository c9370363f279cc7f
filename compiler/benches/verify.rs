//! Verifier speed: facts + every rule + the protocol analysis on the type-checked example kernels
//! (target: the GEMM under 20 ms). Also measures the two halves separately: computing the facts
//! and evaluating the rules on them. Run with `cargo bench -p cake --bench verify`.

use cake::catalog::Catalog;
use cake::check::check_file;
use cake::ir::Module;
use cake::syntax::parse;
use cake::target::TargetTable;
use cake::verify::{self, RuleSet};
use criterion::{black_box, criterion_group, criterion_main, Criterion};

const EXAMPLES: &[(&str, &str)] = &[
    ("gemm_bf16_ws", include_str!("../../examples/gemm_bf16_ws.cake")),
    ("kmeans_assign", include_str!("../../examples/kmeans_assign.cake")),
    ("gemm_bf16_sm80", include_str!("../../examples/gemm_bf16_sm80.cake")),
];

fn module(source: &str) -> Module {
    let file = parse(source).expect("example parses");
    let (module, diags) = check_file(&file, Catalog::builtin(), TargetTable::builtin());
    module.unwrap_or_else(|| panic!("example type-checks: {diags:?}"))
}

fn verifier(c: &mut Criterion) {
    // Load the embedded rules, catalog and targets once, outside the measurement, as `cake` does
    // once per process.
    let rules = RuleSet::builtin();
    assert!(RuleSet::builtin_problems().is_empty());
    for (name, source) in EXAMPLES {
        let m = module(source);
        let target = TargetTable::builtin().get(&m.target).expect("known target");
        c.bench_function(&format!("verify/{name}"), |b| {
            b.iter(|| {
                let out = verify::verify_with(black_box(m.clone()), target, rules);
                assert!(out.validated.is_some(), "{:?}", out.findings);
                out
            })
        });
        c.bench_function(&format!("facts/{name}"), |b| b.iter(|| verify::module_facts(black_box(&m), target)));
        let facts = verify::module_facts(&m, target);
        c.bench_function(&format!("rules/{name}"), |b| b.iter(|| rules.evaluate(black_box(&facts))));
    }
}

criterion_group!(benches, verifier);
criterion_main!(benches);
