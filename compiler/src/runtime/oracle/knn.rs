//! `knn_tile_min`, the first stage of a brute-force KNN top-k (per query and database tile, the
//! minimum distance and its global index). Sampled queries, every tile of each, against fp64
//! distances; a distance passes within `atol + rtol·(QN + CN[j*])`, an index when it lies in its
//! tile and within the same tolerance of the minimum (ties pass), [`Tolerance::KNN`]. Every index
//! is range checked and every distance scanned for non-finite values.

use super::{
    dot_f64, judge_arg_choice, par_map, unflatten, ArgChoice, BadElement, CheckReport, Comparer, Tolerance, MAX_REPORTED,
};
use crate::runtime::rng::{sample_indices, Rng};

/// `knn_tile_min`: the first stage of a brute-force KNN top-k. For Q [B, NQ, D], C [B, K, D],
/// QN = ‖q‖² [B, NQ] and CN = ‖c‖² [B, K] (both as uploaded), and database tiles of
/// KT = K / T vectors, Dist[b, i, t] = min over j in tile t of d(j) = QN[b,i] + CN[b,j] − 2·q·c_j
/// and Idx[b, i, t] = that j, a **global** database index in [t·KT, (t+1)·KT). Returns two
/// reports: `knn_tile_min` (Dist) and `knn_tile_min.idx` (Idx).
///
/// `tol.samples` random queries (first and last included), every tile of each, against fp64.
/// A distance passes when `|got − d_min| ≤ atol + rtol·(QN + CN[j*])` (j* the fp64 argmin); an
/// index j passes when it lies in its tile and `d(j) − d_min ≤ atol + rtol·(QN + CN[j])`, so a
/// tie within rounding may name either vector (`ties_accepted`). Every element of Idx is range
/// checked (poisoned outputs read -1) and every element of Dist scanned for non-finite values.
#[allow(clippy::too_many_arguments)]
pub fn knn_tile_min(
    q: &[f32],
    qn: &[f32],
    c: &[f32],
    cn: &[f32],
    dist: &[f32],
    idx: &[i32],
    bsz: u64,
    nq: u64,
    k: u64,
    d: u64,
    tiles: u64,
    tol: Tolerance,
    rng: &mut Rng,
) -> [CheckReport; 2] {
    let (nqu, ku, du, tu) = (nq as usize, k as usize, d as usize, tiles as usize);
    assert!(tiles > 0 && k.is_multiple_of(tiles), "K = {k} splits into {tiles} equal tiles");
    assert_eq!(q.len(), bsz as usize * nqu * du, "Q has B·NQ·D elements");
    assert_eq!(qn.len(), bsz as usize * nqu, "QN has B·NQ elements");
    assert_eq!(c.len(), bsz as usize * ku * du, "C has B·K·D elements");
    assert_eq!(cn.len(), bsz as usize * ku, "CN has B·K elements");
    assert_eq!(dist.len(), bsz as usize * nqu * tu, "Dist has B·NQ·T elements");
    assert_eq!(idx.len(), dist.len(), "Idx has B·NQ·T elements");
    let kt = k / tiles;
    let shape = [bsz, nq, tiles];
    let mut rd = CheckReport::new("knn_tile_min", tol);
    let mut ri = CheckReport::new("knn_tile_min.idx", tol);
    // Every index must lie in its own tile (poisoned outputs read -1; an in-tile index reads
    // below the tile's range from tile 1 on).
    for (flat, &j) in idx.iter().enumerate() {
        let t = flat as u64 % tiles;
        let (lo, hi) = (t * kt, (t + 1) * kt);
        if j < 0 || (j as u64) < lo || (j as u64) >= hi {
            ri.nonfinite += 1;
            if ri.first_bad.len() < 4 * MAX_REPORTED {
                ri.first_bad.push(BadElement {
                    index: unflatten(flat as u64, &shape),
                    got: f64::from(j),
                    want: f64::NAN,
                    note: Some(format!(
                        "index outside tile {t}'s range {lo}..{hi} (a global database index; -1 = never written)"
                    )),
                });
            }
        }
    }
    rd.nonfinite = dist.iter().filter(|v| !v.is_finite()).count() as u64;
    if let Some(i) = dist.iter().position(|v| !v.is_finite()) {
        rd.first_bad.push(BadElement {
            index: unflatten(i as u64, &shape),
            got: f64::from(dist[i]),
            want: f64::NAN,
            note: Some("non-finite distance (outputs are poisoned with NaN before the launch)".into()),
        });
    }
    /// One (query, tile): the fp64 minimum, its argmin, and the kernel's choice judged.
    struct TileCheck {
        flat: u64,
        best: u64,
        d_min: f64,
        allowed_min: f64,
        chosen: i32,
        d_chosen: f64,
        allowed_chosen: f64,
    }
    let points = sample_indices(rng, bsz * nq, tol.samples.max(1));
    let checks: Vec<Vec<TileCheck>> = par_map(&points, |&p| {
        let b = (p / nq) as usize;
        let qp = &q[p as usize * du..(p as usize + 1) * du];
        let qv = f64::from(qn[p as usize]);
        let cb = &c[b * ku * du..(b + 1) * ku * du];
        let dj = |j: usize| qv + f64::from(cn[b * ku + j]) - 2.0 * dot_f64(qp, &cb[j * du..(j + 1) * du]);
        (0..tu)
            .map(|t| {
                let (lo, hi) = (t * kt as usize, (t + 1) * kt as usize);
                let (mut best, mut d_min) = (lo, f64::INFINITY);
                for j in lo..hi {
                    let v = dj(j);
                    if v < d_min {
                        d_min = v;
                        best = j;
                    }
                }
                let flat = p * tiles + t as u64;
                let chosen = idx[flat as usize];
                let in_tile = chosen >= 0 && (lo..hi).contains(&(chosen as usize));
                let (d_chosen, allowed_chosen) = if in_tile {
                    let j = chosen as usize;
                    (dj(j), tol.atol + tol.rtol * (qv + f64::from(cn[b * ku + j])))
                } else {
                    (f64::NAN, 0.0)
                };
                let allowed_min = tol.atol + tol.rtol * (qv + f64::from(cn[b * ku + best]));
                TileCheck { flat, best: best as u64, d_min, allowed_min, chosen, d_chosen, allowed_chosen }
            })
            .collect()
    });
    let (mut sq_err, mut sq_ref) = (0.0f64, 0.0f64);
    for tc in checks.iter().flatten() {
        // The distance.
        rd.checked += 1;
        let got = f64::from(dist[tc.flat as usize]);
        let err = (got - tc.d_min).abs();
        sq_ref += tc.d_min * tc.d_min;
        if err.is_finite() {
            rd.max_abs_err = rd.max_abs_err.max(err);
            rd.max_err_over_tol = rd.max_err_over_tol.max(err / tc.allowed_min);
            sq_err += err * err;
        } else {
            (rd.max_abs_err, rd.max_err_over_tol, sq_err) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
        }
        if err.is_nan() || err > tc.allowed_min {
            rd.mismatches += 1;
            rd.first_bad.push(BadElement {
                index: unflatten(tc.flat, &shape),
                got,
                want: tc.d_min,
                note: Some(format!("the tile's minimum distance is at database index {}", tc.best)),
            });
        }
        // The index.
        ri.checked += 1;
        if tc.d_chosen.is_nan() {
            continue; // counted by the range check
        }
        let choice = ArgChoice { chosen: tc.chosen, best: tc.best, d_chosen: tc.d_chosen, d_min: tc.d_min, allowed: tc.allowed_chosen };
        judge_arg_choice(&mut ri, unflatten(tc.flat, &shape), &choice, "chosen vector", "tile's minimum");
    }
    rd.rel_l2_err = if sq_ref > 0.0 { (sq_err / sq_ref).sqrt() } else { sq_err.sqrt() };
    for r in [&mut rd, &mut ri] {
        Comparer::keep_first(&mut r.first_bad);
        r.passed = r.mismatches == 0 && r.nonfinite == 0 && r.checked > 0;
    }
    [rd, ri]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small KNN problem: B = 2, NQ = 12, K = 64 in T = 4 tiles of 16, D = 32; Q and C drawn from
    /// `draw` and rounded to bf16, QN and CN their f32 squared row norms.
    struct Knn {
        q: Vec<f32>,
        qn: Vec<f32>,
        c: Vec<f32>,
        cn: Vec<f32>,
    }

    const B: usize = 2;
    const NQ: usize = 12;
    const K: usize = 64;
    const D: usize = 32;
    const T: usize = 4;
    const KT: usize = K / T;

    fn problem(draw: impl Fn(&mut Rng) -> f64) -> Knn {
        let mut r = Rng::new(7);
        let mut v = |n: usize| -> Vec<f32> {
            (0..n).map(|_| crate::runtime::convert::bf16_to_f64(crate::runtime::convert::f64_to_bf16(draw(&mut r))) as f32).collect()
        };
        let (q, c) = (v(B * NQ * D), v(B * K * D));
        let norms = |x: &[f32]| x.chunks_exact(D).map(|r| r.iter().map(|&v| v * v).sum::<f32>()).collect::<Vec<f32>>();
        Knn { qn: norms(&q), cn: norms(&c), q, c }
    }

    /// What a kernel computes: f32 dot products, d = cn − 2·acc, min/argmin (first minimum) of each
    /// tile, + qn, global indices.
    fn kernel(p: &Knn) -> (Vec<f32>, Vec<i32>) {
        let (mut dist, mut idx) = (vec![0f32; B * NQ * T], vec![0i32; B * NQ * T]);
        for b in 0..B {
            for i in 0..NQ {
                let qp = &p.q[(b * NQ + i) * D..(b * NQ + i + 1) * D];
                for t in 0..T {
                    let mut best = (f32::INFINITY, 0);
                    for j in t * KT..(t + 1) * KT {
                        let cr = &p.c[(b * K + j) * D..(b * K + j + 1) * D];
                        let acc: f32 = qp.iter().zip(cr).map(|(&x, &y)| x * y).sum();
                        let d = p.cn[b * K + j] - 2.0 * acc;
                        if d < best.0 {
                            best = (d, j as i32);
                        }
                    }
                    dist[(b * NQ + i) * T + t] = best.0 + p.qn[b * NQ + i];
                    idx[(b * NQ + i) * T + t] = best.1;
                }
            }
        }
        (dist, idx)
    }

    fn check(p: &Knn, dist: &[f32], idx: &[i32]) -> [CheckReport; 2] {
        let tol = Tolerance { samples: (B * NQ) as u64, ..Tolerance::KNN };
        knn_tile_min(&p.q, &p.qn, &p.c, &p.cn, dist, idx, B as u64, NQ as u64, K as u64, D as u64, T as u64, tol, &mut Rng::new(3))
    }

    #[test]
    fn knn_accepts_a_kernels_tile_minima() {
        let p = problem(|r| r.normal_pair().0);
        let (dist, idx) = kernel(&p);
        let [rd, ri] = check(&p, &dist, &idx);
        assert!(rd.passed && ri.passed, "{rd:?}\n{ri:?}");
        assert_eq!((rd.checked, ri.checked), ((B * NQ * T) as u64, (B * NQ * T) as u64));
        assert_eq!((rd.oracle.as_str(), ri.oracle.as_str()), ("knn_tile_min", "knn_tile_min.idx"));
        assert!(rd.max_err_over_tol < 0.1, "{rd:?}");
        // Exact ties (values from {-1, -0.5, 0, 0.5, 1}): another vector at the minimum passes, as a
        // tie; the last minimum instead of the first.
        let p = problem(|r| [-1.0, -0.5, 0.0, 0.5, 1.0][r.below(5) as usize]);
        let (dist, mut idx) = kernel(&p);
        let mut moved = 0;
        for (flat, j) in idx.iter_mut().enumerate() {
            let (b, i, t) = (flat / (NQ * T), (flat / T) % NQ, flat % T);
            let qp = &p.q[(b * NQ + i) * D..(b * NQ + i + 1) * D];
            let dj = |j: usize| p.cn[b * K + j] - 2.0 * dot_f64(qp, &p.c[(b * K + j) * D..(b * K + j + 1) * D]) as f32;
            if let Some(last) = (t * KT..(t + 1) * KT).rev().find(|&l| dj(l) == dj(*j as usize)) {
                moved += usize::from(last != *j as usize);
                *j = last as i32;
            }
        }
        assert!(moved > 0, "the ties problem has ties");
        let [rd, ri] = check(&p, &dist, &idx);
        assert!(rd.passed && ri.passed, "{rd:?}\n{ri:?}");
        assert_eq!(ri.ties_accepted, moved as u64);
    }

    #[test]
    fn knn_rejects_a_wrong_distance_index_or_unwritten_element() {
        let p = problem(|r| r.normal_pair().0);
        let (dist, idx) = kernel(&p);
        // A wrong distance (one off) at [1, 5, 2].
        let at = (NQ + 5) * T + 2;
        let mut d2 = dist.clone();
        d2[at] += 1.0;
        let [rd, ri] = check(&p, &d2, &idx);
        assert!(!rd.passed && ri.passed, "{rd:?}");
        assert_eq!((rd.mismatches, rd.first_bad[0].index.clone()), (1, vec![1, 5, 2]));
        // A wrong index inside the tile (another vector, not a tie).
        let mut i2 = idx.clone();
        i2[at] = if idx[at] as usize == 2 * KT { 2 * KT as i32 + 1 } else { 2 * KT as i32 };
        let [rd, ri] = check(&p, &dist, &i2);
        assert!(rd.passed && !ri.passed, "{ri:?}");
        assert_eq!((ri.mismatches, ri.first_bad[0].index.clone()), (1, vec![1, 5, 2]));
        assert_eq!(ri.first_bad[0].want, f64::from(idx[at]));
        // An in-tile index (idx − t·KT) lies outside tile 2's range.
        let mut i3 = idx.clone();
        i3[at] -= 2 * KT as i32;
        let [_, ri] = check(&p, &dist, &i3);
        assert!(!ri.passed && ri.nonfinite == 1, "{ri:?}");
        assert_eq!(ri.first_bad[0].index, vec![1, 5, 2]);
        assert!(ri.first_bad[0].note.as_deref().unwrap().contains("outside tile 2's range 32..48"), "{ri:?}");
        // Unwritten elements: NaN distance, -1 index; reported even where no sample lands.
        let (mut d4, mut i4) = (dist.clone(), idx.clone());
        d4[7] = f32::NAN;
        i4[9] = -1;
        let tol = Tolerance { samples: 1, ..Tolerance::KNN };
        let [rd, ri] = knn_tile_min(&p.q, &p.qn, &p.c, &p.cn, &d4, &i4, B as u64, NQ as u64, K as u64, D as u64, T as u64, tol, &mut Rng::new(3));
        assert!(!rd.passed && !ri.passed);
        assert_eq!((rd.nonfinite, rd.first_bad[0].index.clone()), (1, vec![0, 1, 3]));
        assert_eq!((ri.nonfinite, ri.first_bad[0].index.clone()), (1, vec![0, 2, 1]));
        // The wrong tile's minimum everywhere (tiles shifted by one) fails many elements.
        let shifted: Vec<f32> = (0..dist.len()).map(|f| dist[f - f % T + (f % T + 1) % T]).collect();
        let [rd, _] = check(&p, &shifted, &idx);
        assert!(rd.mismatches > (B * NQ * T / 2) as u64, "{rd:?}");
    }
}
