//! k-means oracles. `kmeans_assign` (Idx = argmin over centroids): fp64 distances of sampled
//! points (first and last included) plus a range check of every index; a choice is wrong only
//! when its distance exceeds the minimum by more than `atol + rtol·(‖x‖² + ‖c_j‖²)`, so ties
//! within rounding pass ([`Tolerance::KMEANS`]). `kmeans_update` (the centroid update as a
//! one-hot GEMM with 1/count fused): the GEMM oracles' sampled fp64 check with a per-column scale
//! ([`Tolerance::KMEANS_UPDATE`]).

use super::matmul::abt_check;
use super::{judge_arg_choice, par_map, unflatten, ArgChoice, BadElement, CheckReport, Tolerance, MAX_REPORTED};
use crate::runtime::rng::{sample_indices, Rng};

/// `kmeans_assign`: check Idx[B,N] = argmin_k ‖X[b,n,:] − C[b,k,:]‖².
#[allow(clippy::too_many_arguments)]
pub fn kmeans_assign(
    x: &[f32],
    c: &[f32],
    idx: &[i32],
    bsz: u64,
    n: u64,
    k: u64,
    d: u64,
    tol: Tolerance,
    rng: &mut Rng,
) -> CheckReport {
    let (nu, ku, du) = (n as usize, k as usize, d as usize);
    assert_eq!(x.len(), bsz as usize * nu * du, "X has B·N·D elements");
    assert_eq!(c.len(), bsz as usize * ku * du, "C has B·K·D elements");
    assert_eq!(idx.len(), bsz as usize * nu, "Idx has B·N elements");
    let mut report = CheckReport::new("kmeans_assign", tol);
    // Every index must name a centroid (poisoned outputs read -1).
    let mut out_of_range = Vec::new();
    for (flat, &j) in idx.iter().enumerate() {
        if j < 0 || j as u64 >= k {
            report.nonfinite += 1;
            if out_of_range.len() < MAX_REPORTED {
                out_of_range.push(flat as u64);
            }
        }
    }
    for flat in out_of_range {
        report.first_bad.push(BadElement {
            index: unflatten(flat, &[bsz, n]),
            got: f64::from(idx[flat as usize]),
            want: f64::NAN,
            note: Some(format!("index outside 0..{k} (-1 = never written)")),
        });
    }
    let points = sample_indices(rng, bsz * n, tol.samples);
    struct PointCheck {
        flat: u64,
        chosen: i32,
        best: u64,
        d_min: f64,
        d_chosen: f64,
        allowed: f64,
    }
    let checks: Vec<PointCheck> = par_map(&points, |&flat| {
        let (b, _) = (flat / n, flat % n);
        let xp = &x[flat as usize * du..(flat as usize + 1) * du];
        let xn: f64 = xp.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        let cb = &c[b as usize * ku * du..(b as usize + 1) * ku * du];
        let dist = |kk: usize| -> (f64, f64) {
            let cr = &cb[kk * du..(kk + 1) * du];
            let mut s = 0.0;
            let mut cn = 0.0;
            for (&xv, &cv) in xp.iter().zip(cr) {
                let diff = f64::from(xv) - f64::from(cv);
                s += diff * diff;
                cn += f64::from(cv) * f64::from(cv);
            }
            (s, cn)
        };
        let mut best = 0usize;
        let mut d_min = f64::INFINITY;
        for kk in 0..ku {
            let (dk, _) = dist(kk);
            if dk < d_min {
                d_min = dk;
                best = kk;
            }
        }
        let chosen = idx[flat as usize];
        let (d_chosen, allowed) = if chosen >= 0 && (chosen as u64) < k {
            let (dj, cn) = dist(chosen as usize);
            (dj, tol.atol + tol.rtol * (xn + cn))
        } else {
            (f64::NAN, 0.0)
        };
        PointCheck { flat, chosen, best: best as u64, d_min, d_chosen, allowed }
    });
    for p in checks {
        report.checked += 1;
        if p.d_chosen.is_nan() {
            continue; // counted by the range check
        }
        let choice = ArgChoice { chosen: p.chosen, best: p.best, d_chosen: p.d_chosen, d_min: p.d_min, allowed: p.allowed };
        judge_arg_choice(&mut report, unflatten(p.flat, &[bsz, n]), &choice, "chosen centroid", "minimum");
    }
    report.first_bad.sort_by(|a, b| a.index.cmp(&b.index));
    report.first_bad.truncate(MAX_REPORTED);
    report.passed = report.mismatches == 0 && report.nonfinite == 0 && report.checked > 0;
    report
}

/// `kmeans_update`: the centroid update as a one-hot GEMM with the means' 1/count fused,
/// CT[b, d, k] = Σ_n XT[b, d, n]·OH[b, k, n] · ICNT[b, k] for XT [B, D, N], OH [B, K, N] (one-hot
/// over K: point n belongs to cluster k), ICNT [B, K] and CT [B, D, K]. The batched GEMM check
/// ([`matmul_abt_batched`](super::matmul_abt_batched)'s sampling: rows d and columns k of every batch entry) with each
/// reference column k scaled by ICNT[b, k] as uploaded; wrong elements are reported by CT's index
/// [b, d, k]. The workload derives OH as `one_hot()` and ICNT as `inv_row_sum(OH)`, so the scale
/// the oracle reads is 1/count of the assignment the kernel reads (0 for an empty cluster).
#[allow(clippy::too_many_arguments)]
pub fn kmeans_update(
    xt: &[f32],
    oh: &[f32],
    icnt: &[f32],
    ct: &[f32],
    batch: u64,
    d: u64,
    k: u64,
    n: u64,
    tol: Tolerance,
    rng: &mut Rng,
) -> CheckReport {
    abt_check("kmeans_update", xt, oh, ct, Some(icnt), batch, d, k, n, tol, rng, |b, i, j| vec![b, i, j])
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::data;
    use super::super::{inv_row_sum, one_hot};

    fn kmeans_ref(x: &[f32], c: &[f32], b: usize, n: usize, k: usize, d: usize) -> Vec<i32> {
        let mut out = vec![0; b * n];
        for bb in 0..b {
            for p in 0..n {
                let xp = &x[(bb * n + p) * d..(bb * n + p + 1) * d];
                let mut best = (f64::INFINITY, 0);
                for kk in 0..k {
                    let cr = &c[(bb * k + kk) * d..(bb * k + kk + 1) * d];
                    let s: f64 = xp.iter().zip(cr).map(|(&u, &v)| (f64::from(u) - f64::from(v)).powi(2)).sum();
                    if s < best.0 {
                        best = (s, kk as i32);
                    }
                }
                out[bb * n + p] = best.1;
            }
        }
        out
    }

    #[test]
    fn kmeans_accepts_the_argmin_and_ties() {
        let (b, n, k, d) = (2, 64, 16, 8);
        let (x, mut c) = (data(b * n * d, 1), data(b * k * d, 2));
        // Centroid 3 of batch 0 duplicates centroid 5: exact ties.
        for i in 0..d {
            c[3 * d + i] = c[5 * d + i];
        }
        let mut idx = kmeans_ref(&x, &c, b, n, k, d);
        // Flip every choice of 5 to its twin 3 (equally near).
        let mut flipped = 0;
        for v in idx.iter_mut().take(n) {
            if *v == 5 || *v == 3 {
                *v = if *v == 5 { 3 } else { 5 };
                flipped += 1;
            }
        }
        let tol = Tolerance { samples: 1000, ..Tolerance::KMEANS };
        let r = kmeans_assign(&x, &c, &idx, b as u64, n as u64, k as u64, d as u64, tol, &mut Rng::new(0));
        assert!(r.passed, "{r:?}");
        assert_eq!(r.ties_accepted, flipped);
    }

    #[test]
    fn kmeans_rejects_a_wrong_choice_and_unwritten_points() {
        let (b, n, k, d) = (1, 32, 8, 4);
        let (x, c) = (data(b * n * d, 3), data(b * k * d, 4));
        let mut idx = kmeans_ref(&x, &c, b, n, k, d);
        idx[7] = (idx[7] + 1) % k as i32;
        idx[9] = -1;
        let tol = Tolerance { samples: 1000, ..Tolerance::KMEANS };
        let r = kmeans_assign(&x, &c, &idx, b as u64, n as u64, k as u64, d as u64, tol, &mut Rng::new(0));
        assert!(!r.passed);
        assert_eq!(r.nonfinite, 1);
        assert_eq!(r.mismatches, 1, "{r:?}");
        assert_eq!(r.first_bad.iter().map(|e| e.index.clone()).collect::<Vec<_>>(), vec![vec![0, 7], vec![0, 9]]);
    }

    #[test]
    fn an_index_stored_as_f16_is_decoded_and_fails_past_2048() {
        use crate::ir::DType;
        use crate::runtime::convert::{decode_all_index, element_bytes, store};
        // Each point sits on one centroid (plus a little noise), so its arg-min is certain:
        // indices 5 and 2048 are exact in f16, 2049 and 4095 round to 2048 and 4096.
        let (b, k, d) = (1usize, 4097usize, 8usize);
        let c = data(b * k * d, 5);
        let targets = [5usize, 2048, 2049, 4095];
        let noise = data(targets.len() * d, 6);
        let x: Vec<f32> = targets.iter().enumerate().flat_map(|(p, &j)| (0..d).map(move |i| (p, j, i))).map(|(p, j, i)| c[j * d + i] + 1e-3 * noise[p * d + i]).collect();
        let n = targets.len();
        assert_eq!(kmeans_ref(&x, &c, b, n, k, d), targets.iter().map(|&j| j as i32).collect::<Vec<_>>());
        // What the kernel stores: the right indices, converted to the output's dtype.
        let stored = |dt: DType| {
            let w = element_bytes(dt);
            let mut bytes = vec![0u8; n * w];
            for (out, &j) in bytes.chunks_exact_mut(w).zip(&targets) {
                store(dt, j as f64, out);
            }
            bytes
        };
        let tol = Tolerance { samples: 1000, ..Tolerance::KMEANS };
        let check = |dt: DType| kmeans_assign(&x, &c, &decode_all_index(dt, &stored(dt)), b as u64, n as u64, k as u64, d as u64, tol, &mut Rng::new(0));
        assert!(check(DType::I32).passed && check(DType::F32).passed);
        let r = check(DType::F16);
        assert!(!r.passed);
        assert_eq!((r.mismatches, r.nonfinite), (2, 0), "{r:?}");
        let bad: Vec<(Vec<u64>, f64, f64)> = r.first_bad.iter().map(|e| (e.index.clone(), e.got, e.want)).collect();
        assert_eq!(bad, vec![(vec![0, 2], 2048.0, 2049.0), (vec![0, 3], 4096.0, 4095.0)]);
        // An f16 output nothing wrote (0xFF: NaN) is a never-written point, not a refusal.
        let r = kmeans_assign(&x, &c, &decode_all_index(DType::F16, &vec![0xFF; 2 * n]), b as u64, n as u64, k as u64, d as u64, tol, &mut Rng::new(0));
        assert_eq!(r.nonfinite, n as u64);
    }

    /// Normal data rounded to bf16, as the GPU reads it.
    fn bf16_normal(len: usize, seed: u64) -> Vec<f32> {
        let mut r = Rng::new(seed);
        (0..len).map(|_| crate::runtime::convert::bf16_to_f64(crate::runtime::convert::f64_to_bf16(r.normal_pair().0)) as f32).collect()
    }

    // CT[b] = XT[b]·OH[b]ᵀ·diag(ICNT[b])

    /// XT [B, D, N] bf16, OH [B, K, N] one-hot, ICNT [B, K] = 1/count rounded to f32, as the
    /// runtime derives them.
    fn kmeans_update_inputs(b: usize, d: usize, k: usize, n: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let xt = bf16_normal(b * d * n, 51);
        let oh: Vec<f32> = one_hot(&[b as u64, k as u64, n as u64], 7, 2).unwrap().into_iter().map(|v| v as f32).collect();
        let oh64: Vec<f64> = oh.iter().map(|&v| f64::from(v)).collect();
        let icnt: Vec<f32> = inv_row_sum(&oh64, n).into_iter().map(|v| v as f32).collect();
        (xt, oh, icnt)
    }

    /// What the kernel computes: f32 sums over the points in order (64-point slices, as the
    /// pipeline feeds them), then one f32 multiply by ICNT — or, `scaled = false`, no scaling.
    fn kmeans_update_kernel(xt: &[f32], oh: &[f32], icnt: &[f32], b: usize, d: usize, k: usize, n: usize, scaled: bool) -> Vec<f32> {
        let mut ct = vec![0f32; b * d * k];
        for e in 0..b {
            for i in 0..d {
                for j in 0..k {
                    let mut acc = 0f32;
                    for nb in (0..n).step_by(64) {
                        let mut part = 0f32;
                        for p in nb..(nb + 64).min(n) {
                            part += xt[(e * d + i) * n + p] * oh[(e * k + j) * n + p];
                        }
                        acc += part;
                    }
                    ct[(e * d + i) * k + j] = if scaled { acc * icnt[e * k + j] } else { acc };
                }
            }
        }
        ct
    }

    #[test]
    fn kmeans_update_accepts_the_means_and_catches_faults_by_index() {
        let (b, d, k, n) = (2usize, 64usize, 16usize, 512usize);
        let (xt, oh, icnt) = kmeans_update_inputs(b, d, k, n);
        let good = kmeans_update_kernel(&xt, &oh, &icnt, b, d, k, n, true);
        let check = |ct: &[f32]| kmeans_update(&xt, &oh, &icnt, ct, b as u64, d as u64, k as u64, n as u64, Tolerance::KMEANS_UPDATE, &mut Rng::new(9));
        let r = check(&good);
        assert!(r.passed && r.oracle == "kmeans_update", "{r:?}");
        // 32 rows and all 16 columns of each entry: every element.
        assert_eq!(r.checked as usize, b * d * k);
        assert!(r.rel_l2_err < 1e-5, "the f32 sums err by rounding only: {r:?}");

        // A missing 1/count: the sums, not the means.
        let r = check(&kmeans_update_kernel(&xt, &oh, &icnt, b, d, k, n, false));
        assert!(!r.passed && r.mismatches as usize > b * d * k / 2, "{r:?}");
        assert_eq!(r.first_bad[0].index, vec![0, 0, 0]);

        // One wrong column: cluster 5 of entry 1 gets cluster 6's mean.
        let mut wrong = good.clone();
        for i in 0..d {
            wrong[(d + i) * k + 5] = good[(d + i) * k + 6];
        }
        let r = check(&wrong);
        assert!(!r.passed, "{r:?}");
        assert!(r.first_bad.iter().all(|e| e.index[0] == 1 && e.index[2] == 5), "{:?}", r.first_bad);
        assert_eq!(r.first_bad[0].index, vec![1, 0, 5]);

        // One unwritten element (the NaN poison), reported by its index.
        let mut unwritten = good.clone();
        unwritten[(d + 30) * k + 7] = f32::NAN;
        let r = check(&unwritten);
        assert!(!r.passed && r.nonfinite == 1 && r.mismatches == 1, "{r:?}");
        assert_eq!(r.first_bad[0].index, vec![1, 30, 7]);

        // One 64-point slice dropped from every sum: off by about 1/count of a coordinate.
        let mut xt_short = xt.clone();
        for row in xt_short.chunks_mut(n) {
            row[128..192].iter_mut().for_each(|v| *v = 0.0);
        }
        let r = check(&kmeans_update_kernel(&xt_short, &oh, &icnt, b, d, k, n, true));
        assert!(!r.passed, "{r:?}");
    }

    #[test]
    fn kmeans_update_samples_each_entry_and_handles_empty_clusters() {
        // More clusters than the points fill: empty clusters have ICNT 0 and a zero mean.
        let (b, d, k, n) = (3usize, 128usize, 256usize, 128usize);
        let (xt, oh, icnt) = kmeans_update_inputs(b, d, k, n);
        assert!(icnt.contains(&0.0), "some cluster is empty");
        let good = kmeans_update_kernel(&xt, &oh, &icnt, b, d, k, n, true);
        let tol = Tolerance { samples: 6, ..Tolerance::KMEANS_UPDATE };
        let check = |ct: &[f32]| kmeans_update(&xt, &oh, &icnt, ct, b as u64, d as u64, k as u64, n as u64, tol, &mut Rng::new(10));
        let r = check(&good);
        assert!(r.passed, "{r:?}");
        // Two rows and two columns per entry.
        assert_eq!(r.checked as usize, b * (2 * k + 2 * d - 4));
        // A kernel dividing by a zero count writes NaN or infinity there.
        let empty = icnt[2 * k..].iter().position(|&v| v == 0.0).unwrap();
        let mut div0 = good.clone();
        for i in 0..d {
            div0[(2 * d + i) * k + empty] = f32::NAN;
        }
        let r = check(&div0);
        assert!(!r.passed && r.nonfinite == d as u64, "{r:?}");
        assert!(r.first_bad.iter().all(|e| e.index[0] == 2 && e.index[2] == empty as u64), "{:?}", r.first_bad);
        // Entries 0 and 1 swapped: the samples of each entry see it.
        let mut swapped = good.clone();
        let (lo, hi) = swapped.split_at_mut(d * k);
        lo.swap_with_slice(&mut hi[..d * k]);
        let r = check(&swapped);
        assert!(!r.passed && r.first_bad[0].index[0] == 0, "{r:?}");
    }
}
