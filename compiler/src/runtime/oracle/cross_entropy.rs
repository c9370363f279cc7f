//! `cross_entropy`: Loss[r] = logsumexp(X[r, :]) − X[r, T[r]] for row-major logits X [R, V] and
//! integer targets T [R]. The reference is fp64 over whole rows, on `samples` sampled rows (first
//! and last always included); the loss of every row is scanned for unwritten (non-finite) values.
//! Each sampled loss is judged by the `matmul_abt` rule, atol relative to the RMS of the sampled
//! reference losses ([`Tolerance::CROSS_ENTROPY`]).

use super::{CheckReport, Comparer, Tolerance};
use crate::runtime::rng::{sample_indices, Rng};

/// The fp64 loss of one row of logits with target column `target`.
pub fn row_loss(row: &[f32], target: usize) -> f64 {
    let m = row.iter().map(|&v| f64::from(v)).fold(f64::NEG_INFINITY, f64::max);
    let s: f64 = row.iter().map(|&v| (f64::from(v) - m).exp()).sum();
    m + s.ln() - f64::from(row[target])
}

/// Check `loss` (R values, as the kernel wrote them) against fp64 on sampled rows of `x` (R × V)
/// with targets `t` (R values, as uploaded). An error when a target is not a column of X (the
/// loss is then undefined, whatever the kernel wrote).
pub fn cross_entropy(
    x: &[f32],
    t: &[f32],
    loss: &[f32],
    rows: u64,
    vocab: u64,
    tol: Tolerance,
    rng: &mut Rng,
) -> Result<CheckReport, String> {
    let (r, v) = (rows as usize, vocab as usize);
    assert_eq!(x.len(), r * v, "X has R·V elements");
    assert_eq!(t.len(), r, "T has R elements");
    assert_eq!(loss.len(), r, "Loss has R elements");
    if let Some((i, bad)) = t.iter().enumerate().find(|(_, &c)| !(c >= 0.0 && c < vocab as f32 && c.fract() == 0.0)) {
        return Err(format!("target T[{i}] = {bad} is not a column of the {vocab}-wide logits (draw T from [0, V))"));
    }
    let sampled = sample_indices(rng, rows, tol.samples.max(1));
    let want: Vec<f64> =
        super::par_map(&sampled, |&i| row_loss(&x[i as usize * v..(i as usize + 1) * v], t[i as usize] as usize));
    let rms = if want.is_empty() { 0.0 } else { (want.iter().map(|w| w * w).sum::<f64>() / want.len() as f64).sqrt() };
    let mut cmp = Comparer::new("cross_entropy", tol, rms);
    for (&i, &w) in sampled.iter().zip(&want) {
        cmp.add(|| vec![i], f64::from(loss[i as usize]), w);
    }
    Ok(cmp.finish(loss))
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::inputs;
    use crate::ir::DType;

    /// What a kernel computes: an online max and rescaled sum in f32 over chunks, the target's
    /// logit by a masked sum (an implementation of its own, in f32, not the oracle's fp64).
    fn kernel_loss(x: &[f32], t: &[f32], v: usize, chunk: usize) -> Vec<f32> {
        x.chunks(v)
            .zip(t)
            .map(|(row, &tg)| {
                let (mut m, mut s, mut xt) = (f32::NEG_INFINITY, 0f32, 0f32);
                for (c, part) in row.chunks(chunk).enumerate() {
                    let m_new = part.iter().copied().fold(m, f32::max);
                    s = s * (m - m_new).exp() + part.iter().map(|&e| (e - m_new).exp()).sum::<f32>();
                    m = m_new;
                    xt += part.iter().enumerate().map(|(j, &e)| if c * chunk + j == tg as usize { e } else { 0.0 }).sum::<f32>();
                }
                m + s.ln() - xt
            })
            .collect()
    }

    fn targets(rows: usize, v: usize, seed: u64) -> Vec<f32> {
        let mut r = Rng::new(seed);
        (0..rows).map(|_| r.below(v as u64) as f32).collect()
    }

    #[test]
    fn a_hand_computed_row() {
        // Logits [0, ln 3] with target 0: logsumexp = ln(1 + 3) = ln 4, loss = ln 4 − 0.
        let row = [0.0f32, 3f32.ln()];
        assert!((row_loss(&row, 0) - 4f64.ln()).abs() < 1e-7);
        // Target 1: ln 4 − ln 3.
        assert!((row_loss(&row, 1) - (4f64.ln() - 3f64.ln())).abs() < 1e-7);
        // A uniform row of V equal logits: ln V whatever the target.
        assert!((row_loss(&[2.5; 8], 5) - 8f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn accepts_f32_math_and_catches_faults() {
        let (rows, v) = (24usize, 300usize);
        let tol = Tolerance { samples: 1000, ..Tolerance::CROSS_ENTROPY };
        for dt in [DType::BF16, DType::F16, DType::F32] {
            let x = inputs(dt, rows * v, 40);
            let t = targets(rows, v, 41);
            let good = kernel_loss(&x, &t, v, 64);
            let check = |l: &[f32]| cross_entropy(&x, &t, l, rows as u64, v as u64, tol, &mut Rng::new(3)).unwrap();
            let r = check(&good);
            assert!(r.passed && r.checked == rows as u64, "{r:?}");
            // The logit of the neighbouring column instead of the target's.
            let t_off: Vec<f32> = t.iter().map(|&c| (c as usize + 1) as f32 % v as f32).collect();
            let r = check(&kernel_loss(&x, &t_off, v, 64));
            assert!(!r.passed && r.mismatches as usize > rows / 2, "{r:?}");
            // A chunk of the row left out of the sum (the last 64 columns).
            let short: Vec<f32> = x.chunks(v).zip(&t).map(|(row, &tg)| {
                let mut z = row.to_vec();
                z[v - 64..].fill(-1e30);
                let tg = if tg as usize >= v - 64 { 0.0 } else { tg };
                kernel_loss(&z, &[tg], v, 64)[0]
            }).collect();
            assert!(!check(&short).passed);
            // One row unwritten (the NaN poison), and two rows swapped.
            let mut hole = good.clone();
            hole[7] = f32::NAN;
            let r = check(&hole);
            assert_eq!((r.passed, r.nonfinite, r.first_bad[0].index.clone()), (false, 1, vec![7]));
            let mut swapped = good.clone();
            swapped.swap(3, 4);
            let r = check(&swapped);
            assert_eq!((r.passed, r.mismatches), (false, 2), "{r:?}");
        }
    }

    #[test]
    fn samples_rows_and_rejects_targets_outside_the_vocabulary() {
        let (rows, v) = (64usize, 32usize);
        let x = inputs(DType::F32, rows * v, 42);
        let t = targets(rows, v, 43);
        let good = kernel_loss(&x, &t, v, 32);
        let tol = Tolerance { samples: 8, ..Tolerance::CROSS_ENTROPY };
        let r = cross_entropy(&x, &t, &good, rows as u64, v as u64, tol, &mut Rng::new(5)).unwrap();
        assert!(r.passed && r.checked == 8, "{r:?}");
        // An unsampled row that is unwritten still fails: every loss is scanned.
        let mut hole = good.clone();
        let unsampled = (0..rows).find(|&i| {
            let s = sample_indices(&mut Rng::new(5), rows as u64, 8);
            !s.contains(&(i as u64))
        }).unwrap();
        hole[unsampled] = f32::NAN;
        assert!(!cross_entropy(&x, &t, &hole, rows as u64, v as u64, tol, &mut Rng::new(5)).unwrap().passed);
        for bad in [v as f32, -1.0] {
            let mut tb = t.clone();
            tb[9] = bad;
            let e = cross_entropy(&x, &tb, &good, rows as u64, v as u64, tol, &mut Rng::new(5)).unwrap_err();
            assert!(e.contains("T[9]") && e.contains("[0, V)"), "{e}");
        }
    }
}
