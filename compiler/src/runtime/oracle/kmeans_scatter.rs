//! `kmeans_scatter`: the KMeans centroid update by scatter-add. For points X [N, D] and their
//! cluster ids A [N] (integers in [0, K)), the kernel adds every point's row into SUMS[A[n], :]
//! and 1 into COUNTS[A[n]] with global atomics, on top of whatever SUMS [K, D] and COUNTS [K] or
//! [K, 1] held (both `inout`: the workload fills them, so a kernel that overwrites instead of
//! adding fails). The centroids are SUMS / COUNTS, a division left to the caller.
//!
//! The reference is fp64: SUMS₀[k, c] + Σ_{n: A[n] = k} X[n, c] and COUNTS₀[k] + |{n: A[n] = k}|.
//! The atomics add in an order nothing fixes, so no single f32 result is right: each of the n_k
//! additions into an element rounds by at most 2⁻²⁴ of the partial sum it produces, and every
//! partial sum is bounded by M = |SUMS₀[k, c]| + Σ |X[n, c]|, so an element may differ from the
//! exact sum by at most n_k · 2⁻²⁴ · M — its own bound ([`Comparer::add_within`]), not a
//! tolerance tuned to pass. An element of a cluster no point chose must be exactly its initial
//! value. COUNTS are integers and compared exactly (`kmeans_scatter.counts`). An id that is not
//! an integer in [0, K) is a workload error.

use super::{CheckReport, Comparer, Tolerance};

/// The unit roundoff of f32 (round to nearest): the most one addition's rounding moves its result,
/// relative to it.
const F32_UNIT_ROUNDOFF: f64 = 1.0 / (1u64 << 24) as f64;

/// The tolerance the report names: per element n_k · 2⁻²⁴ · M (see the module doc); `rtol` holds
/// the 2⁻²⁴ factor so that the report says which bound applied.
pub const SCATTER_ADD: Tolerance = Tolerance { rtol: F32_UNIT_ROUNDOFF, atol: 0.0, samples: 0 };

/// Check the SUMS and COUNTS a kernel left against the fp64 scatter-add of X by A into the
/// initial SUMS₀ and COUNTS₀ (as uploaded). Returns the reports for SUMS and for COUNTS.
#[allow(clippy::too_many_arguments)]
pub fn kmeans_scatter(
    x: &[f32],
    assign: &[f32],
    sums0: &[f32],
    counts0: &[f32],
    sums: &[f32],
    counts: &[i32],
    points: u64,
    dim: u64,
    clusters: u64,
) -> Result<[CheckReport; 2], String> {
    let (n, d, k) = (points as usize, dim as usize, clusters as usize);
    assert_eq!(x.len(), n * d, "X has N·D elements");
    assert_eq!(assign.len(), n, "A has N elements");
    assert_eq!((sums0.len(), sums.len()), (k * d, k * d), "SUMS has K·D elements");
    assert_eq!((counts0.len(), counts.len()), (k, k), "COUNTS has K elements");
    if let Some((i, bad)) = assign.iter().enumerate().find(|(_, &a)| !(a >= 0.0 && (a as f64) < clusters as f64 && a.fract() == 0.0)) {
        return Err(format!("id A[{i}] = {bad} is not one of the {clusters} clusters (draw A from [0, K))"));
    }
    let mut exact = vec![0f64; k * d];
    let mut magnitude = vec![0f64; k * d];
    let mut members = vec![0u64; k];
    for (p, &a) in assign.iter().enumerate() {
        let c0 = a as usize;
        members[c0] += 1;
        for c in 0..d {
            let v = f64::from(x[p * d + c]);
            exact[c0 * d + c] += v;
            magnitude[c0 * d + c] += v.abs();
        }
    }
    let mut cs = Comparer::new("kmeans_scatter", SCATTER_ADD, 0.0);
    for kk in 0..k {
        for c in 0..d {
            let i = kk * d + c;
            let s0 = f64::from(sums0[i]);
            let want = s0 + exact[i];
            let allowed = members[kk] as f64 * F32_UNIT_ROUNDOFF * (s0.abs() + magnitude[i]);
            cs.add_within(|| vec![kk as u64, c as u64], f64::from(sums[i]), want, allowed);
        }
    }
    let mut cc = Comparer::new("kmeans_scatter.counts", Tolerance::EXACT, 0.0);
    for kk in 0..k {
        cc.add(|| vec![kk as u64], f64::from(counts[kk]), f64::from(counts0[kk]) + members[kk] as f64);
    }
    let counts_f: Vec<f32> = counts.iter().map(|&c| c as f32).collect();
    Ok([cs.finish(sums), cc.finish(&counts_f)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::inputs;
    use crate::ir::DType;
    use crate::runtime::rng::Rng;

    /// What the kernel computes: f32 additions into the initial values, in the order `order`
    /// visits the points (atomics: any order).
    fn kernel_scatter(x: &[f32], a: &[f32], s0: &[f32], c0: &[f32], d: usize, order: &[usize]) -> (Vec<f32>, Vec<i32>) {
        let (mut s, mut c) = (s0.to_vec(), c0.iter().map(|&v| v as i32).collect::<Vec<_>>());
        for &p in order {
            let k = a[p] as usize;
            for j in 0..d {
                s[k * d + j] += x[p * d + j];
            }
            c[k] += 1;
        }
        (s, c)
    }

    fn ids(n: usize, k: usize, seed: u64) -> Vec<f32> {
        let mut r = Rng::new(seed);
        (0..n).map(|_| r.below(k as u64) as f32).collect()
    }

    #[test]
    fn a_hand_computed_update() {
        // X = [[1, 2], [3, 4], [5, 6]], A = [1, 0, 1], SUMS₀ = [[0.5, 0], [0, -1]], COUNTS₀ = [2, 0]:
        // SUMS = [[3.5, 4], [6, 7]], COUNTS = [3, 2].
        let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let a = [1.0f32, 0.0, 1.0];
        let (s0, c0) = ([0.5f32, 0.0, 0.0, -1.0], [2.0f32, 0.0]);
        let [s, c] = kmeans_scatter(&x, &a, &s0, &c0, &[3.5, 4.0, 6.0, 7.0], &[3, 2], 3, 2, 2).unwrap();
        assert!(s.passed && c.passed, "{s:?} {c:?}");
        assert_eq!((s.checked, c.checked), (4, 2));
        assert_eq!((s.oracle.as_str(), c.oracle.as_str()), ("kmeans_scatter", "kmeans_scatter.counts"));
        // The sums written over the initial values (a store instead of an atomic add).
        let [s, _] = kmeans_scatter(&x, &a, &s0, &c0, &[3.0, 4.0, 6.0, 8.0], &[3, 2], 3, 2, 2).unwrap();
        assert!(!s.passed && s.mismatches == 2, "{s:?}");
        // One point counted twice.
        let [_, c] = kmeans_scatter(&x, &a, &s0, &c0, &[3.5, 4.0, 6.0, 7.0], &[3, 3], 3, 2, 2).unwrap();
        assert!(!c.passed && c.first_bad[0].index == vec![1], "{c:?}");
    }

    #[test]
    fn accepts_every_order_and_catches_faults() {
        for (dt, n, d, k) in [(DType::BF16, 1216usize, 128usize, 64usize), (DType::F16, 300, 64, 1000), (DType::F32, 512, 32, 7)] {
            let x = inputs(dt, n * d, 7 + d as u64);
            let a = ids(n, k, 8 + k as u64);
            let s0 = inputs(DType::F32, k * d, 9);
            let c0: Vec<f32> = ids(k, 50, 10);
            let check = |s: &[f32], c: &[i32]| kmeans_scatter(&x, &a, &s0, &c0, s, c, n as u64, d as u64, k as u64).unwrap();
            // Forward, backward and a shuffled order: atomics fix none of them.
            let forward: Vec<usize> = (0..n).collect();
            let backward: Vec<usize> = (0..n).rev().collect();
            let mut shuffled = forward.clone();
            let mut r = Rng::new(11);
            for i in (1..n).rev() {
                shuffled.swap(i, r.below(i as u64 + 1) as usize);
            }
            for order in [&forward, &backward, &shuffled] {
                let (s, c) = kernel_scatter(&x, &a, &s0, &c0, d, order);
                let [rs, rc] = check(&s, &c);
                assert!(rs.passed && rc.passed, "{dt} N={n} D={d} K={k}: {rs:?} {rc:?}");
                assert_eq!((rs.checked as usize, rc.checked as usize), (k * d, k));
            }
            let (good_s, good_c) = kernel_scatter(&x, &a, &s0, &c0, d, &forward);
            // One point dropped (a skipped warp): its cluster's row and count are off.
            let (s, c) = kernel_scatter(&x, &a, &s0, &c0, d, &forward[1..]);
            let [rs, rc] = check(&s, &c);
            assert!(!rs.passed && !rc.passed && rc.mismatches == 1, "{rs:?} {rc:?}");
            // One point added into the next cluster (an off-by-one id).
            let mut wrong = a.clone();
            wrong[5] = ((a[5] as usize + 1) % k) as f32;
            let (s, _) = kernel_scatter(&x, &wrong, &s0, &c0, d, &forward);
            assert!(!check(&s, &good_c)[0].passed);
            // The initial sums lost (the outputs zeroed before the adds).
            let zero = vec![0f32; k * d];
            let (s, _) = kernel_scatter(&x, &a, &zero, &c0, d, &forward);
            assert!(!check(&s, &good_c)[0].passed);
            // One element unwritten (NaN): a mismatch and a non-finite value.
            let mut hole = good_s.clone();
            hole[k * d - 1] = f32::NAN;
            let [rs, _] = check(&hole, &good_c);
            assert_eq!((rs.passed, rs.mismatches, rs.nonfinite), (false, 1, 1), "{rs:?}");
            // A half-precision accumulator (the sum rounded to bf16): far outside n·2⁻²⁴·M.
            let coarse: Vec<f32> = good_s.iter().map(|&v| f32::from_bits(v.to_bits() & 0xffff_0000)).collect();
            assert!(!check(&coarse, &good_c)[0].passed);
        }
    }

    #[test]
    fn rejects_an_id_outside_the_clusters() {
        let (n, d, k) = (2usize, 2usize, 3usize);
        let x = vec![1f32; n * d];
        let (s0, c0) = (vec![0f32; k * d], vec![0f32; k]);
        for bad in [3.0f32, -1.0, 0.5, f32::NAN] {
            let m = kmeans_scatter(&x, &[0.0, bad], &s0, &c0, &s0, &[0, 0, 0], n as u64, d as u64, k as u64).unwrap_err();
            assert!(m.contains("A[1]") && m.contains("is not one of the 3 clusters"), "{m}");
        }
    }
}
