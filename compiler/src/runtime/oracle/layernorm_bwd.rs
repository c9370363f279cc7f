//! `layernorm_bwd`: the input gradient of LayerNorm, DX[r, j] = rstd · (G[j] − mean(G) − XHAT[j] ·
//! mean(G·XHAT)) with G = DY[r, :]·W and XHAT = (X[r, :] − mean)·rstd, mean and rstd = (var +
//! eps)^-½ (population variance) recomputed from X, for row-major X, DY, DX [R, C] and W [C]
//! (dgamma and dbeta are not part of it). Every element against fp64 from the inputs as uploaded,
//! under the row kernels' rule and tolerance by the output dtype ([`Tolerance::for_row_output`]).

use super::{compare_ref, per_row, CheckReport, Tolerance};

/// The fp64 input gradient of one row.
pub fn layernorm_bwd_row(x: &[f32], dy: &[f32], w: &[f32], eps: f64, out: &mut [f64]) {
    let c = x.len() as f64;
    let mean = x.iter().map(|&v| f64::from(v)).sum::<f64>() / c;
    let var = x.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / c;
    let rstd = 1.0 / (var + eps).sqrt();
    let xhat: Vec<f64> = x.iter().map(|&v| (f64::from(v) - mean) * rstd).collect();
    let g: Vec<f64> = dy.iter().zip(w).map(|(&d, &wj)| f64::from(d) * f64::from(wj)).collect();
    let mean_g = g.iter().sum::<f64>() / c;
    let mean_gx = g.iter().zip(&xhat).map(|(a, b)| a * b).sum::<f64>() / c;
    for ((o, gj), xj) in out.iter_mut().zip(&g).zip(&xhat) {
        *o = rstd * (gj - mean_g - xj * mean_gx);
    }
}

/// `layernorm_bwd`: every element of `dx` compared. `eps` is the value the kernel receives.
#[allow(clippy::too_many_arguments)]
pub fn layernorm_bwd(x: &[f32], dy: &[f32], w: &[f32], dx: &[f32], rows: u64, cols: u64, eps: f64, tol: Tolerance) -> CheckReport {
    let (r, c) = (rows as usize, cols as usize);
    assert_eq!(x.len(), r * c, "X has R·C elements");
    assert_eq!(dy.len(), r * c, "DY has R·C elements");
    assert_eq!(w.len(), c, "W has C elements");
    assert_eq!(dx.len(), r * c, "DX has R·C elements");
    let want = per_row(r, c, |i, out| layernorm_bwd_row(&x[i * c..(i + 1) * c], &dy[i * c..(i + 1) * c], w, eps, out));
    compare_ref("layernorm_bwd", dx, &want, &[rows, cols], tol)
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::{catches_the_usual_faults, data, inputs, rounded, ROW_DTYPES};
    use crate::ir::DType;

    /// Which term a faulty kernel leaves out.
    #[derive(Clone, Copy, PartialEq)]
    enum Drop {
        Nothing,
        MeanG,
        MeanGXhat,
    }

    /// What a kernel computes, in f32 (not the oracle's fp64), rounded to `out`.
    fn kernel_dx(x: &[f32], dy: &[f32], w: &[f32], eps: f32, out: DType, drop: Drop) -> Vec<f32> {
        let c = w.len();
        x.chunks(c)
            .zip(dy.chunks(c))
            .flat_map(|(xr, gr)| {
                let mu = xr.iter().sum::<f32>() / c as f32;
                let var = xr.iter().map(|v| (v - mu) * (v - mu)).sum::<f32>() / c as f32;
                let rstd = 1.0 / (var + eps).sqrt();
                let mean_g = gr.iter().zip(w).map(|(g, wj)| g * wj).sum::<f32>() / c as f32;
                let mean_gx = gr.iter().zip(w).zip(xr).map(|((g, wj), xj)| g * wj * (xj - mu) * rstd).sum::<f32>() / c as f32;
                let a = if drop == Drop::MeanG { 0.0 } else { mean_g };
                let b = if drop == Drop::MeanGXhat { 0.0 } else { mean_gx };
                xr.iter()
                    .zip(gr)
                    .zip(w)
                    .map(move |((xj, g), wj)| rounded(out, rstd * (g * wj - a - (xj - mu) * rstd * b)))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn a_hand_computed_row() {
        // x = [1, 3], dy = [1, 0], w = [1, 1], eps = 0: mean 2, var 1, rstd 1, xhat = [−1, 1],
        // g = [1, 0], mean(g) = 0.5, mean(g·xhat) = −0.5,
        // dx = [1 − 0.5 − (−1)(−0.5), 0 − 0.5 − (1)(−0.5)] = [0, 0].
        // (With C = 2, xhat is ±1 whatever x is: the normalized output cannot move.)
        let mut out = [1.0; 2];
        layernorm_bwd_row(&[1.0, 3.0], &[1.0, 0.0], &[1.0, 1.0], 0.0, &mut out);
        assert_eq!(out, [0.0, 0.0]);
        // x = [0, 0, 3], dy = [1, 0, 0], w = [2, 1, 1], eps = 0: mean 1, var 2, rstd = 1/√2,
        // xhat = [−1, −1, 2]/√2, g = [2, 0, 0], mean(g) = 2/3, mean(g·xhat) = −2/(3√2),
        // dx = rstd·(g − 2/3 + xhat·2/(3√2)) = rstd·(g − 2/3 + [−1, −1, 2]/3) = rstd·[1, −1, 0].
        let mut out = [0.0; 3];
        layernorm_bwd_row(&[0.0, 0.0, 3.0], &[1.0, 0.0, 0.0], &[2.0, 1.0, 1.0], 0.0, &mut out);
        let rstd = 1.0 / 2f64.sqrt();
        let want = [rstd, -rstd, 0.0];
        assert!(out.iter().zip(&want).all(|(o, w)| (o - w).abs() < 1e-12), "{out:?}");
    }

    #[test]
    fn accepts_f32_math_in_every_output_dtype_and_catches_faults() {
        let (rows, cols) = (16usize, 128usize);
        let eps = 1e-5f32;
        for dt in ROW_DTYPES {
            // X off-centre (mean 0.5), so a kernel that skips the centering is wrong too.
            let x: Vec<f32> = inputs(dt, rows * cols, 70).into_iter().map(|v| rounded(dt, v + 0.5)).collect();
            let dy = inputs(dt, rows * cols, 71);
            let w: Vec<f32> = data(cols, 72).into_iter().map(|v| rounded(DType::BF16, 1.0 + 0.5 * v)).collect();
            let good = kernel_dx(&x, &dy, &w, eps, dt, Drop::Nothing);
            let tol = Tolerance::for_row_output(dt);
            let check = |d: &[f32]| layernorm_bwd(&x, &dy, &w, d, rows as u64, cols as u64, f64::from(eps), tol);
            catches_the_usual_faults(&good, cols, check);
            // Each of the two projections left out is wrong.
            assert!(!check(&kernel_dx(&x, &dy, &w, eps, dt, Drop::MeanG)).passed);
            assert!(!check(&kernel_dx(&x, &dy, &w, eps, dt, Drop::MeanGXhat)).passed);
            // Without the gain.
            let ones = vec![1f32; cols];
            assert!(!check(&kernel_dx(&x, &dy, &ones, eps, dt, Drop::Nothing)).passed);
            // The RMSNorm gradient (no centering, no mean(g) term) is not LayerNorm's.
            let rms = super::super::rmsnorm_bwd(&x, &dy, &w, &good, rows as u64, cols as u64, f64::from(eps), tol);
            assert!(!rms.passed);
        }
    }
}
