//! Row kernels: `softmax`, `row_reduce` ([`RowReduce`]), `rmsnorm` and `layernorm`. Every
//! element against an fp64 reference computed from the same (rounded) inputs the GPU reads,
//! under `|got − ref| ≤ atol·rms(ref) + rtol·|ref|` with the tolerance chosen from the output's
//! dtype ([`Tolerance::ROW_BF16`], [`Tolerance::ROW_F16`], [`Tolerance::ROW_F32`]).

use serde::{Deserialize, Serialize};

use super::{compare_ref, dot_f64, per_row, CheckReport, Tolerance};

/// Which reduction `row_reduce` checks: the workload's `reduce` key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowReduce {
    /// Σ x
    Sum,
    /// Σ x / C
    Mean,
    /// max x
    Max,
    /// min x
    Min,
    /// Σ x² (the squared L2 norm)
    Sqnorm,
    /// √(Σ x²)
    L2norm,
    /// max |x|
    Absmax,
}

impl RowReduce {
    pub const ALL: [RowReduce; 7] = [
        RowReduce::Sum,
        RowReduce::Mean,
        RowReduce::Max,
        RowReduce::Min,
        RowReduce::Sqnorm,
        RowReduce::L2norm,
        RowReduce::Absmax,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RowReduce::Sum => "sum",
            RowReduce::Mean => "mean",
            RowReduce::Max => "max",
            RowReduce::Min => "min",
            RowReduce::Sqnorm => "sqnorm",
            RowReduce::L2norm => "l2norm",
            RowReduce::Absmax => "absmax",
        }
    }

    /// The reduction of one row, in fp64.
    pub fn of(self, row: &[f32]) -> f64 {
        let v = row.iter().map(|&x| f64::from(x));
        match self {
            RowReduce::Sum => v.sum(),
            RowReduce::Mean => v.sum::<f64>() / row.len() as f64,
            RowReduce::Max => v.fold(f64::NEG_INFINITY, f64::max),
            RowReduce::Min => v.fold(f64::INFINITY, f64::min),
            RowReduce::Sqnorm => dot_f64(row, row),
            RowReduce::L2norm => dot_f64(row, row).sqrt(),
            RowReduce::Absmax => v.map(f64::abs).fold(0.0, f64::max),
        }
    }
}

/// `softmax`: Y[r, :] = exp(X[r, :] − m) / Σ exp(X[r, :] − m), m = max X[r, :], for row-major
/// X and Y of `rows` × `cols`; every element is compared.
pub fn softmax(x: &[f32], y: &[f32], rows: u64, cols: u64, tol: Tolerance) -> CheckReport {
    let (r, c) = (rows as usize, cols as usize);
    assert_eq!(x.len(), r * c, "X has R·C elements");
    assert_eq!(y.len(), r * c, "Y has R·C elements");
    let want = per_row(r, c, |i, out| {
        let row = &x[i * c..(i + 1) * c];
        let m = row.iter().map(|&v| f64::from(v)).fold(f64::NEG_INFINITY, f64::max);
        let mut s = 0.0;
        for (o, &v) in out.iter_mut().zip(row) {
            *o = (f64::from(v) - m).exp();
            s += *o;
        }
        for o in out.iter_mut() {
            *o /= s;
        }
    });
    compare_ref("softmax", y, &want, &[rows, cols], tol)
}

/// `row_reduce`: Out[r] = `op` over X[r, :], for row-major X of `rows` × `cols`; every row is
/// compared.
pub fn row_reduce(op: RowReduce, x: &[f32], out: &[f32], rows: u64, cols: u64, tol: Tolerance) -> CheckReport {
    let (r, c) = (rows as usize, cols as usize);
    assert_eq!(x.len(), r * c, "X has R·C elements");
    assert_eq!(out.len(), r, "Out has R elements");
    let want = per_row(r, 1, |i, o| o[0] = op.of(&x[i * c..(i + 1) * c]));
    compare_ref("row_reduce", out, &want, &[rows], tol)
}

/// `rmsnorm`: Y[r, j] = X[r, j] · W[j] / √(Σ X[r, :]² / C + eps), every element compared. `eps` is
/// the value the kernel receives (rounded to its scalar's dtype by the caller).
pub fn rmsnorm(x: &[f32], w: &[f32], y: &[f32], rows: u64, cols: u64, eps: f64, tol: Tolerance) -> CheckReport {
    let (r, c) = (rows as usize, cols as usize);
    assert_eq!(x.len(), r * c, "X has R·C elements");
    assert_eq!(w.len(), c, "W has C elements");
    assert_eq!(y.len(), r * c, "Y has R·C elements");
    let want = per_row(r, c, |i, out| {
        let row = &x[i * c..(i + 1) * c];
        let inv = 1.0 / (dot_f64(row, row) / c as f64 + eps).sqrt();
        for ((o, &v), &g) in out.iter_mut().zip(row).zip(w) {
            *o = f64::from(v) * inv * f64::from(g);
        }
    });
    compare_ref("rmsnorm", y, &want, &[rows, cols], tol)
}

/// `layernorm`: Y[r, j] = (X[r, j] − μ) · W[j] / √(σ² + eps) + B[j], with μ and the population
/// variance σ² of X[r, :] (two passes, fp64); every element compared.
#[allow(clippy::too_many_arguments)]
pub fn layernorm(
    x: &[f32],
    w: &[f32],
    b: &[f32],
    y: &[f32],
    rows: u64,
    cols: u64,
    eps: f64,
    tol: Tolerance,
) -> CheckReport {
    let (r, c) = (rows as usize, cols as usize);
    assert_eq!(x.len(), r * c, "X has R·C elements");
    assert_eq!(w.len(), c, "W has C elements");
    assert_eq!(b.len(), c, "B has C elements");
    assert_eq!(y.len(), r * c, "Y has R·C elements");
    let want = per_row(r, c, |i, out| {
        let row = &x[i * c..(i + 1) * c];
        let mu = row.iter().map(|&v| f64::from(v)).sum::<f64>() / c as f64;
        let var = row.iter().map(|&v| (f64::from(v) - mu).powi(2)).sum::<f64>() / c as f64;
        let inv = 1.0 / (var + eps).sqrt();
        for (((o, &v), &g), &bb) in out.iter_mut().zip(row).zip(w).zip(b) {
            *o = (f64::from(v) - mu) * inv * f64::from(g) + f64::from(bb);
        }
    });
    compare_ref("layernorm", y, &want, &[rows, cols], tol)
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::{catches_the_usual_faults, data, inputs, rounded, ROW_DTYPES};
    use crate::ir::DType;

    /// What a kernel computes: f32 math, row by row, each result stored as `out` (an
    /// implementation of its own, in f32, not the oracle's fp64).
    fn kernel_rows(x: &[f32], cols: usize, out: DType, f: impl Fn(&[f32]) -> Vec<f32>) -> Vec<f32> {
        x.chunks(cols).flat_map(f).map(|v| rounded(out, v)).collect()
    }

    fn softmax_f32(row: &[f32]) -> Vec<f32> {
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f32> = row.iter().map(|&v| (v - m).exp()).collect();
        let s: f32 = e.iter().sum();
        e.iter().map(|v| v / s).collect()
    }

    fn reduce_f32(op: RowReduce, row: &[f32]) -> f32 {
        match op {
            RowReduce::Sum => row.iter().sum(),
            RowReduce::Mean => row.iter().sum::<f32>() / row.len() as f32,
            RowReduce::Max => row.iter().copied().fold(f32::NEG_INFINITY, f32::max),
            RowReduce::Min => row.iter().copied().fold(f32::INFINITY, f32::min),
            RowReduce::Sqnorm => row.iter().map(|v| v * v).sum(),
            RowReduce::L2norm => row.iter().map(|v| v * v).sum::<f32>().sqrt(),
            RowReduce::Absmax => row.iter().map(|v| v.abs()).fold(0.0, f32::max),
        }
    }

    fn rmsnorm_f32(row: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
        let ms = row.iter().map(|v| v * v).sum::<f32>() / row.len() as f32;
        let inv = 1.0 / (ms + eps).sqrt();
        row.iter().zip(w).map(|(v, g)| v * inv * g).collect()
    }

    /// LayerNorm in f32, dividing the squared deviations by `div` (C: population variance).
    fn layernorm_f32(row: &[f32], w: &[f32], b: &[f32], eps: f32, div: f32) -> Vec<f32> {
        let mu = row.iter().sum::<f32>() / row.len() as f32;
        let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f32>() / div;
        let inv = 1.0 / (var + eps).sqrt();
        row.iter().zip(w).zip(b).map(|((v, g), bb)| (v - mu) * inv * g + bb).collect()
    }

    #[test]
    fn softmax_accepts_f32_math_in_every_output_dtype_and_catches_faults() {
        let (rows, cols) = (16usize, 96usize);
        for dt in ROW_DTYPES {
            let x = inputs(dt, rows * cols, 21);
            let y = kernel_rows(&x, cols, dt, softmax_f32);
            let tol = Tolerance::for_row_output(dt);
            catches_the_usual_faults(&y, cols, |y| softmax(&x, y, rows as u64, cols as u64, tol));
            assert_eq!(softmax(&x, &y, rows as u64, cols as u64, tol).oracle, "softmax");
        }
    }

    #[test]
    fn softmax_rejects_what_is_not_a_softmax() {
        let (rows, cols) = (8usize, 64usize);
        let x = inputs(DType::F32, rows * cols, 22);
        let check = |y: &[f32]| softmax(&x, y, rows as u64, cols as u64, Tolerance::ROW_F32);
        // exp without the division by the sum; a sum over the wrong axis (the column).
        let unnormalized = kernel_rows(&x, cols, DType::F32, |r| {
            let m = r.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            r.iter().map(|&v| (v - m).exp()).collect()
        });
        assert!(!check(&unnormalized).passed);
        let mut by_column = vec![0f32; rows * cols];
        for j in 0..cols {
            let col: Vec<f32> = (0..rows).map(|i| x[i * cols + j]).collect();
            for (i, v) in softmax_f32(&col).into_iter().enumerate() {
                by_column[i * cols + j] = v;
            }
        }
        assert!(!check(&by_column).passed);
    }

    #[test]
    fn output_rounding_within_the_format_passes_and_two_ulps_fail() {
        let (rows, cols) = (8usize, 64usize);
        let x = inputs(DType::BF16, rows * cols, 23);
        let mut y = kernel_rows(&x, cols, DType::BF16, softmax_f32);
        let check = |y: &[f32], tol| softmax(&x, y, rows as u64, cols as u64, tol);
        let r = check(&y, Tolerance::ROW_BF16);
        assert!(r.passed && r.rel_l2_err > 1e-4, "bf16 rounding shows, within tolerance: {r:?}");
        // The same bf16 output is far outside the f32 tolerance.
        assert!(!check(&y, Tolerance::ROW_F32).passed);
        // Two bf16 ulps off, at the largest element of row 4 (above the RMS).
        let j = (0..cols).max_by(|&a, &b| y[4 * cols + a].total_cmp(&y[4 * cols + b])).unwrap();
        let i = 4 * cols + j;
        y[i] = f32::from_bits(y[i].to_bits() + (2 << 16));
        let r = check(&y, Tolerance::ROW_BF16);
        assert_eq!((r.passed, r.mismatches), (false, 1));
        assert_eq!(r.first_bad[0].index, vec![4, j as u64]);
        // f32: 1e-4 relative off one element fails.
        let x = inputs(DType::F32, rows * cols, 24);
        let mut y = kernel_rows(&x, cols, DType::F32, softmax_f32);
        assert!(check_f32(&x, &y, rows, cols).passed);
        y[cols + 3] *= 1.0 + 1e-4;
        let r = check_f32(&x, &y, rows, cols);
        assert_eq!((r.passed, r.mismatches), (false, 1));
        assert_eq!(r.first_bad[0].index, vec![1, 3]);
    }

    fn check_f32(x: &[f32], y: &[f32], rows: usize, cols: usize) -> CheckReport {
        softmax(x, y, rows as u64, cols as u64, Tolerance::ROW_F32)
    }

    #[test]
    fn row_reduce_accepts_each_reduction_and_catches_faults() {
        let (rows, cols) = (12usize, 200usize);
        for dt in ROW_DTYPES {
            let x = inputs(dt, rows * cols, 25);
            for op in RowReduce::ALL {
                let out = kernel_rows(&x, cols, DType::F32, |r| vec![reduce_f32(op, r)]);
                catches_the_usual_faults(&out, 1, |o| row_reduce(op, &x, o, rows as u64, cols as u64, Tolerance::ROW_F32));
            }
        }
    }

    #[test]
    fn row_reduce_tells_the_reductions_apart() {
        let (rows, cols) = (16usize, 64usize);
        let x = inputs(DType::BF16, rows * cols, 26);
        for got in RowReduce::ALL {
            let out = kernel_rows(&x, cols, DType::F32, |r| vec![reduce_f32(got, r)]);
            for want in RowReduce::ALL {
                let r = row_reduce(want, &x, &out, rows as u64, cols as u64, Tolerance::ROW_F32);
                assert_eq!(r.passed, got == want, "{} checked as {}: {r:?}", got.name(), want.name());
            }
        }
        // f64 reference values: the mean divides by C; absmax is the magnitude.
        assert_eq!(RowReduce::Mean.of(&[1.0, 2.0, 6.0]), 3.0);
        assert_eq!(RowReduce::Absmax.of(&[1.0, -7.0, 6.0]), 7.0);
        assert_eq!(RowReduce::L2norm.of(&[3.0, -4.0]), 5.0);
        assert_eq!(RowReduce::Min.of(&[3.0, -4.0]), -4.0);
    }

    #[test]
    fn rmsnorm_accepts_f32_math_in_every_output_dtype_and_catches_faults() {
        let (rows, cols) = (16usize, 128usize);
        let eps = 1e-5f32;
        for dt in ROW_DTYPES {
            let x = inputs(dt, rows * cols, 27);
            // A bf16 gain, as one corpus instance has it (any rounded values are fine).
            let w: Vec<f32> = data(cols, 28).into_iter().map(|v| rounded(DType::BF16, 1.0 + 0.5 * v)).collect();
            let y = kernel_rows(&x, cols, dt, |r| rmsnorm_f32(r, &w, eps));
            let tol = Tolerance::for_row_output(dt);
            catches_the_usual_faults(&y, cols, |y| rmsnorm(&x, &w, y, rows as u64, cols as u64, f64::from(eps), tol));
        }
    }

    #[test]
    fn rmsnorm_needs_the_gain_and_eps() {
        let (rows, cols) = (8usize, 64usize);
        let x = inputs(DType::F32, rows * cols, 29);
        let w: Vec<f32> = data(cols, 30).into_iter().map(|v| 1.0 + 0.5 * v).collect();
        let check = |x: &[f32], y: &[f32], eps: f32| rmsnorm(x, &w, y, rows as u64, cols as u64, f64::from(eps), Tolerance::ROW_F32);
        let ones = vec![1f32; cols];
        let no_gain = kernel_rows(&x, cols, DType::F32, |r| rmsnorm_f32(r, &ones, 1e-5));
        assert!(!check(&x, &no_gain, 1e-5).passed);
        // Rows of small values (mean square 1e-6): eps = 1e-6 halves the normalizer, and a kernel
        // that drops it is caught.
        let small: Vec<f32> = x.iter().map(|v| v * 1e-3).collect();
        let with_eps = kernel_rows(&small, cols, DType::F32, |r| rmsnorm_f32(r, &w, 1e-6));
        let without = kernel_rows(&small, cols, DType::F32, |r| rmsnorm_f32(r, &w, 0.0));
        assert!(check(&small, &with_eps, 1e-6).passed);
        assert!(!check(&small, &without, 1e-6).passed);
    }

    #[test]
    fn layernorm_accepts_f32_math_in_every_output_dtype_and_catches_faults() {
        let (rows, cols) = (16usize, 160usize);
        let eps = 1e-5f32;
        for dt in ROW_DTYPES {
            // Rows with an offset, so the centering matters.
            let x: Vec<f32> = inputs(dt, rows * cols, 31).into_iter().map(|v| rounded(dt, v + 3.0)).collect();
            let w: Vec<f32> = data(cols, 32).into_iter().map(|v| 1.0 + 0.5 * v).collect();
            let b: Vec<f32> = data(cols, 33).into_iter().map(|v| 0.1 * v).collect();
            let y = kernel_rows(&x, cols, dt, |r| layernorm_f32(r, &w, &b, eps, cols as f32));
            let tol = Tolerance::for_row_output(dt);
            catches_the_usual_faults(&y, cols, |y| layernorm(&x, &w, &b, y, rows as u64, cols as u64, f64::from(eps), tol));
        }
    }

    #[test]
    fn layernorm_uses_the_population_variance_and_the_bias() {
        let (rows, cols) = (8usize, 64usize);
        let x = inputs(DType::BF16, rows * cols, 34);
        let w: Vec<f32> = data(cols, 35).into_iter().map(|v| 1.0 + 0.5 * v).collect();
        let b: Vec<f32> = data(cols, 36).into_iter().map(|v| 0.5 * v).collect();
        let zeros = vec![0f32; cols];
        let check = |y: &[f32]| layernorm(&x, &w, &b, y, rows as u64, cols as u64, 1e-5, Tolerance::ROW_BF16);
        let good = kernel_rows(&x, cols, DType::BF16, |r| layernorm_f32(r, &w, &b, 1e-5, cols as f32));
        assert!(check(&good).passed);
        // The sample variance (÷ (C − 1)) scales every output by √(63/64): 0.8 %, over bf16's 0.5 %.
        let sample = kernel_rows(&x, cols, DType::BF16, |r| layernorm_f32(r, &w, &b, 1e-5, cols as f32 - 1.0));
        assert!(!check(&sample).passed);
        let no_bias = kernel_rows(&x, cols, DType::BF16, |r| layernorm_f32(r, &w, &zeros, 1e-5, cols as f32));
        assert!(!check(&no_bias).passed);
    }
}
