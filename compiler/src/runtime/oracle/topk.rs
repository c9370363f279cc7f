//! `topk`: Vals[r, :] and Idx[r, :] = the K largest values of row X[r, :] (R × E, row-major) in
//! descending order, with their columns (torch.topk(X, K, dim=-1, sorted=True)). Every row is
//! checked (a row costs O(E) on the host): Vals exactly against the reference's K largest values
//! (with multiplicity; they are copies of inputs, so no rounding is allowed, [`Tolerance::EXACT`]),
//! and Idx by what each index points at: in [0, E), the element there equal to the reference
//! value of its rank, and no column twice in a row. Among equal values any order of their
//! columns passes (counted as `ties_accepted` where it differs from the smallest-column-first
//! order); a kernel that skips a repeated value, or repeats one, fails on the values.

use super::{BadElement, CheckReport, Comparer, Tolerance};

/// The K largest values of `row`, descending, and the columns of the smallest-column-first order
/// among equal values (the reference's indices; ties may be ordered otherwise).
pub fn row_topk(row: &[f32], k: usize) -> (Vec<f32>, Vec<usize>) {
    let mut order: Vec<usize> = (0..row.len()).collect();
    // NaN sorts last (inputs are finite; this keeps the order total).
    let before = |a: &usize, b: &usize| {
        let (x, y) = (row[*a], row[*b]);
        y.partial_cmp(&x).unwrap_or_else(|| x.is_nan().cmp(&y.is_nan())).then(a.cmp(b))
    };
    let k = k.min(row.len());
    if k < row.len() && k > 0 {
        order.select_nth_unstable_by(k - 1, before);
    }
    order.truncate(k);
    order.sort_by(before);
    (order.iter().map(|&c| row[c]).collect(), order)
}

/// Check `vals` and `idx` (R × K each, as the kernel wrote them; `idx` decoded as integers, an
/// unwritten one reads −1) against every row of `x` (R × E). Returns the values' report (`topk`)
/// and the indices' (`topk.idx`).
pub fn topk(x: &[f32], vals: &[f32], idx: &[i32], rows: u64, e: u64, k: u64) -> [CheckReport; 2] {
    let (r, e, k) = (rows as usize, e as usize, k as usize);
    assert_eq!(x.len(), r * e, "X has R·E elements");
    assert_eq!(vals.len(), r * k, "Vals has R·K elements");
    assert_eq!(idx.len(), r * k, "Idx has R·K elements");
    let rows_idx: Vec<usize> = (0..r).collect();
    let want: Vec<(Vec<f32>, Vec<usize>)> = super::par_map(&rows_idx, |&i| row_topk(&x[i * e..(i + 1) * e], k));
    let mut cv = Comparer::new("topk", Tolerance::EXACT, 0.0);
    let mut ri = CheckReport::new("topk.idx", Tolerance::EXACT);
    let mut seen = vec![usize::MAX; e];
    for (i, (wv, wc)) in want.iter().enumerate() {
        for j in 0..k {
            let at = i * k + j;
            cv.add(|| vec![i as u64, j as u64], f64::from(vals[at]), f64::from(wv[j]));
            ri.checked += 1;
            let got = idx[at];
            let why = match usize::try_from(got) {
                Err(_) => Some(format!("column {got} is outside [0, {e}) (an unwritten index reads -1)")),
                Ok(c) if c >= e => Some(format!("column {got} is outside [0, {e})")),
                // `seen` holds the row (i) that last used each column: a repeat within row i.
                Ok(c) if seen[c] == i => Some(format!("column {c} appears twice in the row")),
                Ok(c) if x[i * e + c] != wv[j] => {
                    Some(format!("X[{i}, {c}] = {} is not the rank-{j} value {}", x[i * e + c], wv[j]))
                }
                Ok(c) => {
                    seen[c] = i;
                    if c != wc[j] {
                        ri.ties_accepted += 1;
                    }
                    None
                }
            };
            if let Some(note) = why {
                if let Ok(c) = usize::try_from(got) {
                    if c < e {
                        seen[c] = i;
                    }
                }
                ri.mismatches += 1;
                if ri.first_bad.len() < super::MAX_REPORTED {
                    ri.first_bad.push(BadElement { index: vec![i as u64, j as u64], got: f64::from(got), want: wc[j] as f64, note: Some(note) });
                }
            }
        }
    }
    ri.passed = ri.mismatches == 0 && ri.checked > 0;
    [cv.finish(vals), ri]
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::inputs;
    use crate::ir::DType;
    use crate::runtime::rng::Rng;

    /// What the kernel computes: K rounds, each the maximum of the elements ordered after the
    /// previous pick (a smaller value, or the same value at a larger column) and the smallest
    /// column holding it (an implementation of its own, not the oracle's sort).
    fn kernel_topk(x: &[f32], e: usize, k: usize) -> (Vec<f32>, Vec<i32>) {
        let (mut vals, mut idx) = (Vec::new(), Vec::new());
        for row in x.chunks(e) {
            let (mut pv, mut pi) = (f32::INFINITY, -1i32);
            for _ in 0..k {
                let after = |c: usize| row[c] < pv || (row[c] == pv && c as i32 > pi);
                let v = (0..e).filter(|&c| after(c)).map(|c| row[c]).fold(f32::NEG_INFINITY, f32::max);
                let ix = (0..e).find(|&c| after(c) && row[c] == v).unwrap() as i32;
                (pv, pi) = (v, ix);
                vals.push(v);
                idx.push(ix);
            }
        }
        (vals, idx)
    }

    #[test]
    fn a_hand_computed_row() {
        let row = [0.5f32, 3.0, -1.0, 3.0, 2.0, 0.5];
        assert_eq!(row_topk(&row, 4), (vec![3.0, 3.0, 2.0, 0.5], vec![1, 3, 4, 0]));
        assert_eq!(row_topk(&row, 1), (vec![3.0], vec![1]));
        assert_eq!(row_topk(&row, 6).1, vec![1, 3, 4, 0, 5, 2]);
        let (v, i) = kernel_topk(&row, 6, 4);
        assert_eq!((v, i), (vec![3.0, 3.0, 2.0, 0.5], vec![1, 3, 4, 0]));
    }

    #[test]
    fn accepts_the_rounds_and_any_order_of_ties_and_catches_faults() {
        for (dt, e, k) in [(DType::F32, 256usize, 8usize), (DType::BF16, 64, 6), (DType::F32, 8, 2), (DType::F32, 4096, 50)] {
            let rows = 16usize;
            let x = inputs(dt, rows * e, 70 + e as u64);
            let (vals, idx) = kernel_topk(&x, e, k);
            let check = |v: &[f32], i: &[i32]| topk(&x, v, i, rows as u64, e as u64, k as u64);
            let [rv, ri] = check(&vals, &idx);
            assert!(rv.passed && ri.passed, "{dt} E={e}: {rv:?} {ri:?}");
            assert_eq!((rv.checked, ri.checked), ((rows * k) as u64, (rows * k) as u64));
            // Ascending instead of descending (the K smallest): values wrong.
            let neg: Vec<f32> = x.iter().map(|v| -v).collect();
            let (small, small_i) = kernel_topk(&neg, e, k);
            let small: Vec<f32> = small.iter().map(|v| -v).collect();
            let [rv, ri] = check(&small, &small_i);
            assert!(!rv.passed && !ri.passed, "{rv:?}");
            // Ranks 0 and 1 of row 3 swapped (values and indices together): out of order.
            if k >= 2 {
                let (mut v2, mut i2) = (vals.clone(), idx.clone());
                v2.swap(3 * k, 3 * k + 1);
                i2.swap(3 * k, 3 * k + 1);
                let [rv, ri] = check(&v2, &i2);
                assert_eq!((rv.passed, rv.mismatches, ri.passed, ri.mismatches), (false, 2, false, 2), "{rv:?} {ri:?}");
            }
            // Right values, the first index moved to a column outside the row's top k: it points
            // at another value.
            let mut i3 = idx.clone();
            i3[5 * k] = (0..e as i32).find(|c| !idx[5 * k..6 * k].contains(c)).unwrap();
            let [rv, ri] = check(&vals, &i3);
            assert!(rv.passed && !ri.passed && ri.mismatches == 1 && ri.first_bad[0].index == vec![5, 0], "{ri:?}");
            // One value and one index unwritten (NaN and -1 poison).
            let (mut v4, mut i4) = (vals.clone(), idx.clone());
            v4[2 * k + k - 1] = f32::NAN;
            i4[4 * k] = -1;
            let [rv, ri] = check(&v4, &i4);
            assert_eq!((rv.passed, rv.nonfinite, rv.mismatches), (false, 1, 1), "{rv:?}");
            assert_eq!((ri.passed, ri.mismatches), (false, 1), "{ri:?}");
            // The first pick repeated (a kernel that masks with <= instead of <... or none).
            let (mut v5, mut i5) = (vals.clone(), idx.clone());
            if k >= 2 {
                v5[k + 1] = v5[k];
                i5[k + 1] = i5[k];
                let [rv, ri] = check(&v5, &i5);
                assert!(!rv.passed && !ri.passed, "{rv:?} {ri:?}");
            }
        }
    }

    #[test]
    fn ties_are_judged_by_value() {
        // Values from {−1, −0.5, 0, 0.5, 1}: many equal values in every top-k.
        let (rows, e, k) = (8usize, 64usize, 8usize);
        let mut r = Rng::new(9);
        let x: Vec<f32> = (0..rows * e).map(|_| [-1.0, -0.5, 0.0, 0.5, 1.0][r.below(5) as usize]).collect();
        let (vals, idx) = kernel_topk(&x, e, k);
        let [rv, ri] = topk(&x, &vals, &idx, rows as u64, e as u64, k as u64);
        assert!(rv.passed && ri.passed && ri.ties_accepted == 0, "{rv:?} {ri:?}");
        // The columns of equal values in another order (largest column first): still right.
        let mut rev = idx.clone();
        for (row, (vr, ir)) in vals.chunks(k).zip(rev.chunks_mut(k)).enumerate() {
            let _ = row;
            let mut j = 0;
            while j < k {
                let n = vr[j..].iter().take_while(|&&v| v == vr[j]).count();
                ir[j..j + n].reverse();
                j += n;
            }
        }
        assert_ne!(rev, idx);
        let [rv, ri] = topk(&x, &vals, &rev, rows as u64, e as u64, k as u64);
        assert!(rv.passed && ri.passed && ri.ties_accepted > 0, "{rv:?} {ri:?}");
        // A kernel that keeps only distinct values (masking `x < previous` alone) skips the
        // repeats: its values are wrong.
        let mut distinct_v = Vec::new();
        for row in x.chunks(e) {
            let mut pv = f32::INFINITY;
            for _ in 0..k {
                pv = row.iter().copied().filter(|&v| v < pv).fold(f32::NEG_INFINITY, f32::max);
                distinct_v.push(pv);
            }
        }
        let [rv, _] = topk(&x, &distinct_v, &idx, rows as u64, e as u64, k as u64);
        assert!(!rv.passed, "{rv:?}");
    }
}
