//! Cost-model speed: one `cake::cost::estimate` of a checked program (target: under 1 ms).
//! Run with `cargo bench -p cake --bench cost`.

use std::collections::BTreeMap;

use cake::check::check_source;
use cake::cost;
use criterion::{black_box, criterion_group, criterion_main, Criterion};

/// (name, source, dims at the headline shape)
type Program = (&'static str, &'static str, &'static [(&'static str, i64)]);

const PROGRAMS: &[Program] = &[
    ("gemm_bf16_ws", include_str!("../../examples/gemm_bf16_ws.cake"), &[("M", 8192), ("N", 8192), ("K", 8192)]),
    (
        "kmeans_assign",
        include_str!("../../examples/kmeans_assign.cake"),
        &[("B", 32), ("N", 65536), ("K", 1024), ("D", 128)],
    ),
    // Row kernels walk their element loops (window keys, re-reads, the trip queue).
    ("softmax_bf16", include_str!("../../examples/softmax_bf16.cake"), &[("R", 16384)]),
    ("rmsnorm_bf16", include_str!("../../examples/rmsnorm_bf16.cake"), &[("R", 16384)]),
];

fn estimate(c: &mut Criterion) {
    // Parse, check, verify and load the calibration once, outside the measurement: the benchmark
    // times the estimate alone, as the evolution loop calls it on an already-checked candidate.
    let cal = cost::builtin_calibration("sm_90a").expect("sm_90a is calibrated");
    for (name, source, dims) in PROGRAMS {
        let checked = check_source(source);
        let v = checked.validated.expect("example verifies");
        let dims: BTreeMap<String, i64> = dims.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        c.bench_function(&format!("cost::estimate/{name}"), |b| {
            b.iter(|| cost::estimate(black_box(&v), cal, black_box(&dims)).expect("estimate"))
        });
    }
}

criterion_group!(benches, estimate);
criterion_main!(benches);
