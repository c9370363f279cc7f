//! Signature normalization (golden cases), mismatch patterns and cost-model ratio bins.

use cake_evolve::mine::{mismatch_pattern, normalize, ratio_bin};

#[test]
fn normalization_golden_cases() {
    let cases: &[(&str, &str)] = &[
        // addresses, sizes, thread and block indices (compute-sanitizer)
        (
            "========= Invalid __global__ read of size 16 bytes\n=========     by thread (127,0,0) in block (3,1,0)",
            "Invalid __global__ read of size <n> bytes by thread (<n>,<n>,<n>) in block (<n>,<n>,<n>)",
        ),
        ("Address 0x7f31c6400100 is out of bounds", "Address <hex> is out of bounds"),
        // ptxas: kernel names (quoted, mangled), hex byte counts; the code C7508 stays
        (
            "ptxas error   : Entry function '_Z11tile_kernelPKfPf' uses too much shared data (0x3c000 bytes, 0xe400 max)",
            "ptxas error : Entry function '<sym>' uses too much shared data (<hex> bytes, <hex> max)",
        ),
        (
            "ptxas info    : (C7508) Potential Performance Loss: setmaxnreg ignored; unable to determine register count at entry",
            "ptxas info : (C7508) Potential Performance Loss: setmaxnreg ignored; unable to determine register count at entry",
        ),
        // temp dirs and paths, line numbers; identifiers with digits stay (sm_90a, bf16, m64n256k16)
        (
            "at 0x1b70 in /tmp/cake-run-8812/kernel.cu:231:gemm_bf16_ws for sm_90a m64n256k16",
            "at <hex> in <path>:<n>:gemm_bf16_ws for sm_90a m64n256k16",
        ),
        ("kernel.cu(118): error: identifier \"cake_wait\" is undefined", "<path>(<n>): error: identifier \"<sym>\" is undefined"),
        ("see evolution/evidence/candidates/box_gemm_a64.cake:12:5", "see <path>:<n>:<n>"),
        // CUDA error names and hashes
        (
            "cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)",
            "cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)",
        ),
        ("record 3512981c65cfae6d0173e7903fb3ae74a5bdc0bd5e7150eaeceae810f9d5d87a written", "record <hash> written"),
        // times with units, floats
        ("no result after 10.0 s (last stage: launch)", "no result after <n> s (last stage: launch)"),
        ("took 1.5ms, error 2.5e-3", "took <n>ms, error <n>"),
        // Cake's own messages: user names in backticks go, catalog ops stay; byte spans go
        (
            "L005: window of 128 on dimension 0 of `A`, whose box extent is 64 (at bytes 836..899)",
            "L005: window of <n> on dimension <n> of `<sym>`, whose box extent is <n>",
        ),
        ("`tma_load` moves exactly one TMA box of `B`", "`tma_load` moves exactly one TMA box of `<sym>`"),
        ("  many   spaces\n\tand lines  ", "many spaces and lines"),
    ];
    for (input, want) in cases {
        assert_eq!(normalize(input), *want, "normalize({input:?})");
    }
}

#[test]
fn normalization_is_idempotent() {
    for s in [
        "Invalid __shared__ write of size 4 bytes; Address 0x10 is misaligned",
        "ptxas error : Entry function '<sym>' uses too much shared data (<hex> bytes, <hex> max)",
        "at <hex> in <path>:<n>:k",
    ] {
        let once = normalize(s);
        assert_eq!(normalize(&once), once);
    }
}

#[test]
fn mismatch_patterns() {
    let shape = [256u64, 512];
    let row = |r: u64, cs: std::ops::Range<u64>| cs.map(move |c| vec![r, c]).collect::<Vec<_>>();
    // Everything wrong (an unwritten output is NaN: non-finite too).
    assert_eq!(mismatch_pattern(&shape, 1000, 1000, 0, &row(0, 0..10)), "all");
    assert_eq!(mismatch_pattern(&shape, 1000, 995, 995, &row(0, 0..10)), "all+nonfinite");
    // The first ten wrong elements are a run of one row (the runtime reports them in index order).
    assert_eq!(mismatch_pattern(&shape, 1000, 300, 0, &row(64, 0..10)), "rows");
    // Same few columns on many rows.
    let stripes: Vec<Vec<u64>> = (0..10).map(|r| vec![r * 3, 17]).collect();
    assert_eq!(mismatch_pattern(&shape, 1000, 40, 0, &stripes), "column-stripes");
    // The same offsets in several 64-wide tiles.
    let periodic: Vec<Vec<u64>> = [3u64, 5, 67, 69, 131, 133].iter().map(|c| vec![0, *c]).collect();
    assert_eq!(mismatch_pattern(&shape, 1000, 60, 0, &periodic), "tile-periodic");
    // A contiguous run over a tile boundary is not periodic.
    assert_eq!(mismatch_pattern(&shape, 1000, 60, 0, &row(0, 60..70)), "rows");
    // Nothing in particular.
    let scattered = vec![vec![1, 2], vec![7, 300], vec![100, 5], vec![200, 77]];
    assert_eq!(mismatch_pattern(&shape, 1000, 4, 0, &scattered), "scattered");
    // 3-D outputs: leading axes are rows.
    assert_eq!(mismatch_pattern(&[2, 256], 512, 512, 0, &[vec![0, 1]]), "all");
    assert_eq!(mismatch_pattern(&[2, 128, 64], 1000, 10, 0, &row(1, 0..10).into_iter().map(|i| vec![0, i[0], i[1]]).collect::<Vec<_>>()), "rows");
    assert_eq!(mismatch_pattern(&shape, 100, 0, 0, &[]), "none");
    // Order of the indices does not matter.
    let mut rev = periodic.clone();
    rev.reverse();
    assert_eq!(mismatch_pattern(&shape, 1000, 60, 0, &rev), "tile-periodic");
}

#[test]
fn cost_model_ratio_bins() {
    assert_eq!(ratio_bin(1.0, 1.0), "predicted/measured 0.8-1.25 (accurate)");
    assert_eq!(ratio_bin(0.3, 1.0), "predicted/measured <0.5 (predicted far too fast)");
    assert_eq!(ratio_bin(0.6, 1.0), "predicted/measured 0.5-0.8 (predicted too fast)");
    assert_eq!(ratio_bin(1.5, 1.0), "predicted/measured 1.25-2 (predicted too slow)");
    assert_eq!(ratio_bin(3.0, 1.0), "predicted/measured >2 (predicted far too slow)");
    assert_eq!(ratio_bin(0.0, 1.0), "ratio unknown");
}
