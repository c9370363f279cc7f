//! `rmsnorm_bwd`: the input gradient of RMSNorm, DX[r, j] = rstd · (DY[r, j]·W[j] − X[r, j] · rstd² ·
//! mean(DY[r, :]·W·X[r, :])) with rstd = (mean(X[r, :]²) + eps)^-½, for row-major X, DY, DX [R, C]
//! and W [C]. Every element against fp64 from the inputs as uploaded, under the row kernels'
//! rule and tolerance by the output dtype ([`Tolerance::for_row_output`]).

use super::{compare_ref, dot_f64, per_row, CheckReport, Tolerance};

/// The fp64 input gradient of one row.
pub fn rmsnorm_bwd_row(x: &[f32], dy: &[f32], w: &[f32], eps: f64, out: &mut [f64]) {
    let c = x.len() as f64;
    let rstd = 1.0 / (dot_f64(x, x) / c + eps).sqrt();
    let gw: Vec<f64> = dy.iter().zip(w).map(|(&g, &wj)| f64::from(g) * f64::from(wj)).collect();
    let mean_gwx = gw.iter().zip(x).map(|(g, &xj)| g * f64::from(xj)).sum::<f64>() / c;
    for ((o, g), &xj) in out.iter_mut().zip(&gw).zip(x) {
        *o = rstd * (g - f64::from(xj) * rstd * rstd * mean_gwx);
    }
}

/// `rmsnorm_bwd`: every element of `dx` compared. `eps` is the value the kernel receives.
#[allow(clippy::too_many_arguments)]
pub fn rmsnorm_bwd(x: &[f32], dy: &[f32], w: &[f32], dx: &[f32], rows: u64, cols: u64, eps: f64, tol: Tolerance) -> CheckReport {
    let (r, c) = (rows as usize, cols as usize);
    assert_eq!(x.len(), r * c, "X has R·C elements");
    assert_eq!(dy.len(), r * c, "DY has R·C elements");
    assert_eq!(w.len(), c, "W has C elements");
    assert_eq!(dx.len(), r * c, "DX has R·C elements");
    let want = per_row(r, c, |i, out| rmsnorm_bwd_row(&x[i * c..(i + 1) * c], &dy[i * c..(i + 1) * c], w, eps, out));
    compare_ref("rmsnorm_bwd", dx, &want, &[rows, cols], tol)
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::{catches_the_usual_faults, data, inputs, rounded, ROW_DTYPES};
    use crate::ir::DType;

    /// What a kernel computes, in f32 (not the oracle's fp64), rounded to `out`.
    fn kernel_dx(x: &[f32], dy: &[f32], w: &[f32], eps: f32, out: DType, drop_projection: bool) -> Vec<f32> {
        let c = w.len();
        x.chunks(c)
            .zip(dy.chunks(c))
            .flat_map(|(xr, gr)| {
                let ms = xr.iter().map(|v| v * v).sum::<f32>() / c as f32;
                let dot = gr.iter().zip(w).zip(xr).map(|((g, wj), xj)| g * wj * xj).sum::<f32>() / c as f32;
                let rstd = 1.0 / (ms + eps).sqrt();
                let proj = if drop_projection { 0.0 } else { rstd * rstd * dot };
                xr.iter().zip(gr).zip(w).map(move |((xj, g), wj)| rounded(out, rstd * (g * wj - xj * proj))).collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn a_hand_computed_row() {
        // x = [3, 4], dy = [1, 0], w = [1, 1], eps = 0: ms = 12.5, rstd = 1/√12.5,
        // mean(dy·w·x) = 1.5, dx = rstd·([1, 0] − [3, 4]·1.5/12.5) = rstd·[0.64, −0.48].
        let mut out = [0.0; 2];
        rmsnorm_bwd_row(&[3.0, 4.0], &[1.0, 0.0], &[1.0, 1.0], 0.0, &mut out);
        let rstd = 1.0 / 12.5f64.sqrt();
        assert!((out[0] - 0.64 * rstd).abs() < 1e-12 && (out[1] + 0.48 * rstd).abs() < 1e-12, "{out:?}");
        // The gradient is orthogonal to x when w = 1 and eps = 0 (RMSNorm is scale-invariant).
        assert!((out[0] * 3.0 + out[1] * 4.0).abs() < 1e-12);
    }

    #[test]
    fn accepts_f32_math_in_every_output_dtype_and_catches_faults() {
        let (rows, cols) = (16usize, 128usize);
        let eps = 1e-5f32;
        for dt in ROW_DTYPES {
            let x = inputs(dt, rows * cols, 50);
            let dy = inputs(dt, rows * cols, 51);
            let w: Vec<f32> = data(cols, 52).into_iter().map(|v| rounded(DType::BF16, 1.0 + 0.5 * v)).collect();
            let good = kernel_dx(&x, &dy, &w, eps, dt, false);
            let tol = Tolerance::for_row_output(dt);
            let check = |d: &[f32]| rmsnorm_bwd(&x, &dy, &w, d, rows as u64, cols as u64, f64::from(eps), tol);
            catches_the_usual_faults(&good, cols, check);
            // Without the projection term (dx = rstd·dy·w, the gradient of x·rstd with rstd held
            // constant) the result is wrong.
            assert!(!check(&kernel_dx(&x, &dy, &w, eps, dt, true)).passed);
            // Without the gain.
            let ones = vec![1f32; cols];
            assert!(!check(&kernel_dx(&x, &dy, &ones, eps, dt, false)).passed);
        }
    }
}
