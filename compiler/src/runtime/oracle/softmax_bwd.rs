//! `softmax_bwd`: the input gradient of a row softmax from its output, DX[r, j] = Y[r, j] ·
//! (DY[r, j] − Σ_k DY[r, k]·Y[r, k]), for row-major Y, DY and DX [R, C]. Y is an input (the forward
//! pass's output, as uploaded), so the formula is checked for whatever Y holds. Every element
//! against fp64 from the inputs as uploaded, under the row kernels' rule and tolerance by the
//! output dtype ([`Tolerance::for_row_output`]).

use super::{compare_ref, dot_f64, per_row, CheckReport, Tolerance};

/// The fp64 input gradient of one row.
pub fn softmax_bwd_row(y: &[f32], dy: &[f32], out: &mut [f64]) {
    let dot = dot_f64(dy, y);
    for ((o, &yj), &gj) in out.iter_mut().zip(y).zip(dy) {
        *o = f64::from(yj) * (f64::from(gj) - dot);
    }
}

/// `softmax_bwd`: every element of `dx` compared.
pub fn softmax_bwd(y: &[f32], dy: &[f32], dx: &[f32], rows: u64, cols: u64, tol: Tolerance) -> CheckReport {
    let (r, c) = (rows as usize, cols as usize);
    assert_eq!(y.len(), r * c, "Y has R·C elements");
    assert_eq!(dy.len(), r * c, "DY has R·C elements");
    assert_eq!(dx.len(), r * c, "DX has R·C elements");
    let want = per_row(r, c, |i, out| softmax_bwd_row(&y[i * c..(i + 1) * c], &dy[i * c..(i + 1) * c], out));
    compare_ref("softmax_bwd", dx, &want, &[rows, cols], tol)
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::{catches_the_usual_faults, inputs, rounded, ROW_DTYPES};
    use crate::ir::DType;

    /// What a kernel computes, in f32 (not the oracle's fp64), rounded to `out`; `drop_dot` leaves
    /// the row sum out (dx = y·dy, the elementwise part alone).
    fn kernel_dx(y: &[f32], dy: &[f32], cols: usize, out: DType, drop_dot: bool) -> Vec<f32> {
        y.chunks(cols)
            .zip(dy.chunks(cols))
            .flat_map(|(yr, gr)| {
                let dot = if drop_dot { 0.0 } else { yr.iter().zip(gr).map(|(a, b)| a * b).sum::<f32>() };
                yr.iter().zip(gr).map(move |(yj, gj)| rounded(out, yj * (gj - dot))).collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn a_hand_computed_row() {
        // y = [0.25, 0.75] (a softmax output), dy = [1, 3]: Σ dy·y = 0.25 + 2.25 = 2.5,
        // dx = [0.25·(1 − 2.5), 0.75·(3 − 2.5)] = [−0.375, 0.375].
        let mut out = [0.0; 2];
        softmax_bwd_row(&[0.25, 0.75], &[1.0, 3.0], &mut out);
        assert_eq!(out, [-0.375, 0.375]);
        // The gradient of a softmax sums to 0 over the row when y does sum to 1.
        assert_eq!(out[0] + out[1], 0.0);
    }

    #[test]
    fn accepts_f32_math_in_every_output_dtype_and_catches_faults() {
        let (rows, cols) = (16usize, 128usize);
        for dt in ROW_DTYPES {
            let y = inputs(dt, rows * cols, 60);
            let dy = inputs(dt, rows * cols, 61);
            let good = kernel_dx(&y, &dy, cols, dt, false);
            let tol = Tolerance::for_row_output(dt);
            let check = |d: &[f32]| softmax_bwd(&y, &dy, d, rows as u64, cols as u64, tol);
            catches_the_usual_faults(&good, cols, check);
            // Without the row sum Σ dy·y the result is wrong.
            assert!(!check(&kernel_dx(&y, &dy, cols, dt, true)).passed);
            // With Y and DY swapped (dy·(y − Σ) instead of y·(dy − Σ)).
            assert!(!check(&kernel_dx(&dy, &y, cols, dt, false)).passed);
        }
    }
}
