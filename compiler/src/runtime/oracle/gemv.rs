//! `gemv`: the decode-time matrix-vector product Y[n] = Σ_k W[n, k] · X[k] for a row-major weight
//! W [N, K] and one activation vector X [K] (an M = 1 GEMM). The reference is fp64 over every
//! output element (N·K multiply-adds: at most 61 M for the corpus's run shapes, 545 M for its
//! largest headline), from W and X as uploaded (their values rounded to their dtypes), under the
//! row kernels' rule `|got − ref| ≤ atol·rms(ref) + rtol·|ref|` with the tolerance of the output's
//! dtype ([`Tolerance::for_row_output`]); the output is poisoned before the launch, so an element
//! the kernel never writes fails (the NaN scan of [`compare_ref`]).
//!
//! Why the row tolerances hold for a sum of K products, and [`Tolerance::MATMUL_BF16`] is not
//! needed: the kernel multiplies in f32 (a bf16 or f16 product is exact in f32; an f32 product
//! rounds once, 2^-24 of itself) and sums with f32 additions, each lane over its K/32 products, then
//! a 5-level shuffle butterfly and one addition per chunk: n ≤ K/32 + 5 + NCH ≈ 460 roundings
//! along any path for K = 14336. The rounding errors are independent, so for zero-mean data
//! (partial sums ~√i · rms(w·x)) a lane's error is about u · n/√2 · rms(w·x) and the warp's √32
//! times that: ~1e-4 for unit-normal W and X at K = 14336, 1e-6 of |Y|'s RMS (√K ≈ 120); with
//! data of one sign (partial sums growing linearly) it stays below √32 · u · n² / (2K) ≈ 3e-6 of
//! |Y| itself. [`Tolerance::ROW_F32`] (rtol 2e-5, atol 1e-5 × RMS) thus leaves a margin of about
//! ten for an f32 output; a 16-bit output adds one rounding (2^-9 / 2^-12 relative), which
//! [`Tolerance::ROW_BF16`] / [`Tolerance::ROW_F16`] are set for. `MATMUL_BF16` (rtol 2e-2) would
//! pass an element several bf16 steps off. A dropped chunk (K/NCH products missing, ~1/√NCH of
//! the RMS), a wrong row of W or a shifted X window each move an element by about its RMS.

use super::{compare_ref, dot_f64, per_row, CheckReport, Tolerance};

/// `gemv`: every Y[n] against the fp64 dot product of W[n, :] (row-major, `rows` × `cols`) with X
/// (`cols` values).
pub fn gemv(w: &[f32], x: &[f32], y: &[f32], rows: u64, cols: u64, tol: Tolerance) -> CheckReport {
    let (r, c) = (rows as usize, cols as usize);
    assert_eq!(w.len(), r * c, "W has N·K elements");
    assert_eq!(x.len(), c, "X has K elements");
    assert_eq!(y.len(), r, "Y has N elements");
    let want = per_row(r, 1, |i, o| o[0] = dot_f64(&w[i * c..(i + 1) * c], x));
    compare_ref("gemv", y, &want, &[rows], tol)
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::{catches_the_usual_faults, inputs, rounded, ROW_DTYPES};
    use crate::ir::DType;

    /// What a kernel computes: f32 products, each lane (32 of them) summing its lane-strided share
    /// of a `cw`-wide chunk in order, the lanes combined by a butterfly, the chunks folded into a
    /// running f32 value, the result rounded to `out` (an implementation of its own, in f32).
    fn kernel_gemv(w: &[f32], x: &[f32], cols: usize, cw: usize, out: DType) -> Vec<f32> {
        w.chunks(cols)
            .map(|row| {
                let mut acc = 0f32;
                for (wc, xc) in row.chunks(cw).zip(x.chunks(cw)) {
                    let mut lanes = [0f32; 32];
                    for (k, (a, b)) in wc.iter().zip(xc).enumerate() {
                        lanes[(k / 8) % 32] += a * b;
                    }
                    let mut width = 16;
                    while width > 0 {
                        let prev = lanes;
                        for (l, v) in lanes.iter_mut().enumerate() {
                            *v += prev[l ^ width];
                        }
                        width /= 2;
                    }
                    acc += lanes[0];
                }
                rounded(out, acc)
            })
            .collect()
    }

    #[test]
    fn a_hand_computed_product() {
        // W = [[1, 2, 3], [−1, 0.5, 4]], X = [2, −1, 0.25]: Y = [0.75, −1.5].
        let (w, x) = ([1.0, 2.0, 3.0, -1.0, 0.5, 4.0], [2.0, -1.0, 0.25]);
        let r = gemv(&w, &x, &[0.75, -1.5], 2, 3, Tolerance::ROW_F32);
        assert!(r.passed && r.checked == 2, "{r:?}");
        // A sign flip fails, and so does an element 1e-3 off (50 times rtol).
        assert!(!gemv(&w, &x, &[0.75, 1.5], 2, 3, Tolerance::ROW_F32).passed);
        let r = gemv(&w, &x, &[0.75 * (1.0 + 1e-3), -1.5], 2, 3, Tolerance::ROW_F32);
        assert_eq!((r.passed, r.mismatches, r.first_bad[0].index.clone()), (false, 1, vec![0]));
    }

    #[test]
    fn accepts_an_f32_kernel_and_catches_the_usual_faults() {
        let (rows, cols, cw) = (16usize, 4096usize, 1024usize);
        for wdt in ROW_DTYPES {
            for (xdt, out) in [(wdt, DType::F32), (DType::F32, DType::F32), (wdt, wdt)] {
                let (w, x) = (inputs(wdt, rows * cols, 61), inputs(xdt, cols, 62));
                let tol = Tolerance::for_row_output(out);
                let good = kernel_gemv(&w, &x, cols, cw, out);
                catches_the_usual_faults(&good, 1, |y| gemv(&w, &x, y, rows as u64, cols as u64, tol));
                // A kernel that drops its last chunk, or reads X one chunk late, fails on most rows.
                let short = kernel_gemv(&w.chunks(cols).flat_map(|r| {
                    let mut r = r.to_vec();
                    r[cols - cw..].fill(0.0);
                    r
                }).collect::<Vec<f32>>(), &x, cols, cw, out);
                let r = gemv(&w, &x, &short, rows as u64, cols as u64, tol);
                assert!(!r.passed && r.mismatches as usize > rows / 2, "{wdt:?}/{xdt:?}: {r:?}");
                let mut late = x.clone();
                late.rotate_right(cw);
                let r = gemv(&w, &x, &kernel_gemv(&w, &late, cols, cw, out), rows as u64, cols as u64, tol);
                assert!(!r.passed && r.mismatches as usize > rows / 2, "{wdt:?}/{xdt:?}: {r:?}");
            }
        }
    }

    #[test]
    fn the_f32_tolerance_holds_for_a_long_row_of_one_sign() {
        // K = 14336 (the longest corpus row), all-positive data: the partial sums grow linearly,
        // the worst case for f32 accumulation the tolerance's doc comment bounds.
        let (rows, cols) = (8usize, 14336usize);
        let w: Vec<f32> = inputs(DType::BF16, rows * cols, 63).iter().map(|v| rounded(DType::BF16, v.abs() + 0.5)).collect();
        let x: Vec<f32> = inputs(DType::F32, cols, 64).iter().map(|v| v.abs() + 0.5).collect();
        for cw in [512, 2048, 14336] {
            let good = kernel_gemv(&w, &x, cols, cw, DType::F32);
            let r = gemv(&w, &x, &good, rows as u64, cols as u64, Tolerance::ROW_F32);
            assert!(r.passed && r.max_err_over_tol < 0.5, "chunk {cw}: {r:?}");
        }
    }
}
