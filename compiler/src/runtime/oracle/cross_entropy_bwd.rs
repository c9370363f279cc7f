//! `cross_entropy_bwd`: the logits gradient of a weighted cross-entropy, DX[r, c] =
//! (softmax(X[r, :])[c] − [c == T[r]]) · scale, for row-major logits X [R, V], integer targets
//! T [R] and the weight `scale` (1/R for the mean loss). The reference is fp64 over whole rows on
//! `samples` sampled rows (first and last always included), every element of those rows compared
//! under the `matmul_abt` rule with atol relative to the RMS of the sampled reference
//! ([`cross_entropy_bwd_tolerance`]); every element of DX is scanned for unwritten (non-finite)
//! values.

use super::{CheckReport, Comparer, Tolerance};
use crate::ir::DType;
use crate::runtime::rng::{sample_indices, Rng};

/// Rows compared against fp64 (each a whole row of V exps): 256 rows of a 128 Ki vocabulary are
/// 33 M reference elements, a second or two on the host.
pub const CROSS_ENTROPY_BWD_SAMPLES: u64 = 256;

/// `cross_entropy_bwd`'s tolerance for a DX of `dtype`: the row kernels' ([`Tolerance::for_row_output`])
/// with [`CROSS_ENTROPY_BWD_SAMPLES`] sampled rows. Each element is a few f32 operations on the row's
/// max m and sum s, rounded once to the output dtype: exp(x − m) (`__expf`, ~1e-6 of the value
/// for |x − m| ≲ 10), one division by s, the subtraction of 1 at the target column, the product
/// with `scale` (a power of two in the corpus: exact). s carries the error of a sum of up to
/// V terms, accumulated per lane (V/32 terms each, ~5 K at V = 151936) and across the warp with
/// the online rescaling: with random rounding about √(V/32)·2^-24 ≈ 4e-6 of s, the same relative
/// error for every element of the row. So an f32 DX is off by ~5e-6 of itself, inside
/// [`Tolerance::ROW_F32`]'s rtol = 2e-5 with a margin of four; a 16-bit DX is dominated by its
/// output rounding (2^-9 bf16, 2^-12 f16 relative), which [`Tolerance::ROW_BF16`] and
/// [`Tolerance::ROW_F16`] are set for. The target element p − 1 cancels when p ≈ 1 (a confident
/// row): its f32 error is then ~2^-24 absolute, far inside `atol` × RMS (the RMS of a row is about
/// scale/√V, dominated by the target's |p − 1| ≈ 1 when the logits are spread). f16 subnormals
/// (spacing 2^-24) at the smallest probabilities are covered by ROW_F16's atol = 1e-3 × RMS when
/// the scale is about 1: the corpus runs f16 with scale = 1 (the summed loss, or a loss-scaled
/// mean, as f16 training does), where 1e-3 × RMS ≈ 1e-3/√V ≥ 2.6e-6 ≫ 2^-25. (With the mean's
/// 2^-14 most f16 elements, scale·p ~ 1e-9, flush to zero: that fails, as it should — the
/// gradient is lost.) A row whose target is off by one column
/// moves two elements by |scale| each (≈ √V × RMS), a dropped chunk leaves s short by ~1/NCH of
/// itself (every element of the row ~1/NCH too large), a missing scale multiplies the row by 1/scale:
/// each fails by orders of magnitude.
pub fn cross_entropy_bwd_tolerance(dtype: DType) -> Tolerance {
    Tolerance { samples: CROSS_ENTROPY_BWD_SAMPLES, ..Tolerance::for_row_output(dtype) }
}

/// The fp64 gradient of one row of logits with target column `target`, weighted by `scale`.
pub fn row_grad(row: &[f32], target: usize, scale: f64, out: &mut [f64]) {
    let m = row.iter().map(|&v| f64::from(v)).fold(f64::NEG_INFINITY, f64::max);
    let s: f64 = row.iter().map(|&v| (f64::from(v) - m).exp()).sum();
    for (c, (o, &v)) in out.iter_mut().zip(row).enumerate() {
        let p = (f64::from(v) - m).exp() / s;
        *o = (p - if c == target { 1.0 } else { 0.0 }) * scale;
    }
}

/// Check `dx` (R × V values, as the kernel wrote them) against fp64 on sampled rows of `x`
/// (R × V) with targets `t` (R values, as uploaded) and the weight `scale` the kernel received.
/// An error when a target is not a column of X (the gradient is then undefined).
#[allow(clippy::too_many_arguments)]
pub fn cross_entropy_bwd(
    x: &[f32],
    t: &[f32],
    dx: &[f32],
    rows: u64,
    vocab: u64,
    scale: f64,
    tol: Tolerance,
    rng: &mut Rng,
) -> Result<CheckReport, String> {
    let (r, v) = (rows as usize, vocab as usize);
    assert_eq!(x.len(), r * v, "X has R·V elements");
    assert_eq!(t.len(), r, "T has R elements");
    assert_eq!(dx.len(), r * v, "DX has R·V elements");
    if let Some((i, bad)) = t.iter().enumerate().find(|(_, &c)| !(c >= 0.0 && c < vocab as f32 && c.fract() == 0.0)) {
        return Err(format!("target T[{i}] = {bad} is not a column of the {vocab}-wide logits (draw T from [0, V))"));
    }
    let sampled = sample_indices(rng, rows, tol.samples.max(1));
    let want: Vec<Vec<f64>> = super::par_map(&sampled, |&i| {
        let i = i as usize;
        let mut out = vec![0f64; v];
        row_grad(&x[i * v..(i + 1) * v], t[i] as usize, scale, &mut out);
        out
    });
    let n: usize = want.iter().map(Vec::len).sum();
    let rms = if n == 0 { 0.0 } else { (want.iter().flatten().map(|w| w * w).sum::<f64>() / n as f64).sqrt() };
    let mut cmp = Comparer::new("cross_entropy_bwd", tol, rms);
    for (&i, row) in sampled.iter().zip(&want) {
        let base = i as usize * v;
        for (c, &w) in row.iter().enumerate() {
            cmp.add(|| vec![i, c as u64], f64::from(dx[base + c]), w);
        }
    }
    Ok(cmp.finish(dx))
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::{inputs, rounded};

    /// What a kernel computes: an online max and rescaled sum in f32 over chunks, then
    /// (exp(x − m)/s − onehot)·scale in f32, rounded to `out` (an implementation of its own, not
    /// the oracle's fp64).
    fn kernel_dx(x: &[f32], t: &[f32], v: usize, chunk: usize, scale: f32, out: DType) -> Vec<f32> {
        x.chunks(v)
            .zip(t)
            .flat_map(|(row, &tg)| {
                let (mut m, mut s) = (f32::NEG_INFINITY, 0f32);
                for part in row.chunks(chunk) {
                    let m_new = part.iter().copied().fold(m, f32::max);
                    s = s * (m - m_new).exp() + part.iter().map(|&e| (e - m_new).exp()).sum::<f32>();
                    m = m_new;
                }
                row.iter()
                    .enumerate()
                    .map(|(c, &e)| {
                        let p = (e - m).exp() / s;
                        rounded(out, (if c == tg as usize { p - 1.0 } else { p }) * scale)
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    fn targets(rows: usize, v: usize, seed: u64) -> Vec<f32> {
        let mut r = Rng::new(seed);
        (0..rows).map(|_| r.below(v as u64) as f32).collect()
    }

    #[test]
    fn a_hand_computed_row() {
        // Logits [0, ln 3]: softmax [1/4, 3/4]. Target 1, scale 1/2: [1/8, (3/4 − 1)/2].
        let mut out = [0.0; 2];
        row_grad(&[0.0, 3f32.ln()], 1, 0.5, &mut out);
        assert!((out[0] - 0.125).abs() < 1e-7 && (out[1] + 0.125).abs() < 1e-7, "{out:?}");
        // A gradient row sums to 0 (softmax sums to 1, the one-hot too), whatever the target.
        let mut out = [0.0; 8];
        row_grad(&[0.3, -1.0, 2.0, 0.0, 0.5, 0.5, -3.0, 1.25], 6, 1.0, &mut out);
        assert!(out.iter().sum::<f64>().abs() < 1e-12, "{out:?}");
        assert!(out[6] < 0.0 && out.iter().enumerate().all(|(c, &g)| c == 6 || g > 0.0));
    }

    #[test]
    fn accepts_f32_math_in_every_output_dtype_and_catches_faults() {
        let (rows, v) = (24usize, 320usize);
        for dt in [DType::BF16, DType::F16, DType::F32] {
            // The corpus's scales: 2^-14 (a mean over 16 Ki rows) for bf16 and f32, 1 for f16.
            let scale = if dt == DType::F16 { 1.0f32 } else { 2f32.powi(-14) };
            let x = inputs(dt, rows * v, 60);
            let t = targets(rows, v, 61);
            let tol = Tolerance { samples: 1000, ..cross_entropy_bwd_tolerance(dt) };
            let check = |d: &[f32]| {
                cross_entropy_bwd(&x, &t, d, rows as u64, v as u64, f64::from(scale), tol, &mut Rng::new(3)).unwrap()
            };
            let good = kernel_dx(&x, &t, v, 64, scale, dt);
            let r = check(&good);
            assert!(r.passed && r.checked == (rows * v) as u64, "{dt}: {r:?}");
            assert!(r.max_err_over_tol <= 1.0);
            // The one-hot at the neighbouring column: two elements per row wrong.
            let t_off: Vec<f32> = t.iter().map(|&c| (c as usize + 1) as f32 % v as f32).collect();
            let r = check(&kernel_dx(&x, &t_off, v, 64, scale, dt));
            assert!(!r.passed && r.mismatches as usize == 2 * rows, "{dt}: {r:?}");
            // No one-hot at all (the softmax alone): one element per row wrong.
            let softmax_only: Vec<f32> = good
                .chunks(v)
                .zip(&t)
                .flat_map(|(row, &tg)| {
                    let mut row = row.to_vec();
                    row[tg as usize] = rounded(dt, row[tg as usize] + scale);
                    row
                })
                .collect();
            let r = check(&softmax_only);
            assert!(!r.passed && r.mismatches as usize == rows, "{dt}: {r:?}");
            // Without the scale.
            if scale != 1.0 {
                assert!(!check(&kernel_dx(&x, &t, v, 64, 1.0, dt)).passed);
            }
            // The last chunk left out of the max and sum (s short by ~1/5 of itself).
            let short: Vec<f32> = x
                .chunks(v)
                .zip(&t)
                .flat_map(|(row, &tg)| {
                    let mut z = row.to_vec();
                    z[v - 64..].fill(-1e30);
                    let mut g = kernel_dx(&z, &[tg], v, 64, scale, dt);
                    g[v - 64..].copy_from_slice(&kernel_dx(row, &[tg], v, 64, scale, dt)[v - 64..]);
                    g
                })
                .collect();
            assert!(!check(&short).passed, "{dt}");
            // One element unwritten (the NaN poison), and two neighbours swapped.
            let mut hole = good.clone();
            hole[7 * v + 11] = f32::NAN;
            let r = check(&hole);
            assert_eq!((r.passed, r.nonfinite, r.first_bad[0].index.clone()), (false, 1, vec![7, 11]));
            let mut swapped = good.clone();
            let tg = t[3] as usize;
            let (a, b) = if tg < v - 1 { (tg, tg + 1) } else { (tg - 1, tg) };
            swapped.swap(3 * v + a, 3 * v + b);
            let r = check(&swapped);
            assert_eq!((r.passed, r.mismatches), (false, 2), "{dt}: {r:?}");
        }
    }

    #[test]
    fn samples_rows_scans_every_element_and_rejects_targets_outside_the_vocabulary() {
        let (rows, v) = (64usize, 32usize);
        let x = inputs(DType::F32, rows * v, 62);
        let t = targets(rows, v, 63);
        let good = kernel_dx(&x, &t, v, 32, 0.25, DType::F32);
        let tol = Tolerance { samples: 8, ..cross_entropy_bwd_tolerance(DType::F32) };
        let run = |d: &[f32], t: &[f32]| cross_entropy_bwd(&x, t, d, rows as u64, v as u64, 0.25, tol, &mut Rng::new(5));
        let r = run(&good, &t).unwrap();
        assert!(r.passed && r.checked == 8 * v as u64, "{r:?}");
        // An element of an unsampled row that is unwritten still fails: every element is scanned.
        let s = sample_indices(&mut Rng::new(5), rows as u64, 8);
        let unsampled = (0..rows).find(|&i| !s.contains(&(i as u64))).unwrap();
        let mut hole = good.clone();
        hole[unsampled * v + 5] = f32::NAN;
        let r = run(&hole, &t).unwrap();
        assert!(!r.passed && r.nonfinite == 1 && r.mismatches == 0, "{r:?}");
        for bad in [v as f32, -1.0, 2.5] {
            let mut tb = t.clone();
            tb[9] = bad;
            let e = run(&good, &tb).unwrap_err();
            assert!(e.contains("T[9]") && e.contains("[0, V)"), "{e}");
        }
    }
}
