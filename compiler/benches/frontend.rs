//! Front-end speed: parse + type-check of the example kernels (target: the GEMM under 5 ms).
//! Run with `cargo bench -p cake --bench frontend`.

use cake::catalog::Catalog;
use cake::check::check_file;
use cake::syntax::parse;
use cake::target::TargetTable;
use criterion::{black_box, criterion_group, criterion_main, Criterion};

const EXAMPLES: &[(&str, &str)] = &[
    ("gemm_bf16_ws", include_str!("../../examples/gemm_bf16_ws.cake")),
    ("kmeans_assign", include_str!("../../examples/kmeans_assign.cake")),
    ("gemm_bf16_sm80", include_str!("../../examples/gemm_bf16_sm80.cake")),
];

fn frontend(c: &mut Criterion) {
    // Load the embedded catalog and target table once, outside the measurement, as `cake` does
    // once per process.
    let (catalog, targets) = (Catalog::builtin(), TargetTable::builtin());
    for (name, source) in EXAMPLES {
        c.bench_function(&format!("parse+check/{name}"), |b| {
            b.iter(|| {
                let file = parse(black_box(source)).expect("example parses");
                let (module, diags) = check_file(&file, catalog, targets);
                assert!(module.is_some(), "{diags:?}");
                module
            })
        });
    }
}

criterion_group!(benches, frontend);
criterion_main!(benches);
