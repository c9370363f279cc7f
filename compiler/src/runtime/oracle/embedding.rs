//! `embedding`: Out[r, :] = E[Ids[r], :] for integer ids Ids [R] and a row-major table E [V, H]
//! (F.embedding / a row gather). Every id is checked on the host first: an id that is not an
//! integer in [0, V) is a workload error (the row it names does not exist, whatever the kernel
//! wrote). Then every element of Out is compared exactly with the row it copies
//! ([`Tolerance::EXACT`]: equal values, the same sign of zero — moving data must not change a bit
//! of a value, as for `copy`), and every element is scanned for unwritten (non-finite) values:
//! outputs are poisoned with NaN before the launch.

use super::{CheckReport, Comparer, Tolerance};

/// Check `out` (R × H, as the kernel wrote it) against the rows of `e` (V × H) that `ids` (R
/// values, as uploaded) name. An error when an id is not a row of E.
pub fn embedding(ids: &[f32], e: &[f32], out: &[f32], rows: u64, vocab: u64, hidden: u64) -> Result<CheckReport, String> {
    let (r, v, h) = (rows as usize, vocab as usize, hidden as usize);
    assert_eq!(ids.len(), r, "Ids has R elements");
    assert_eq!(e.len(), v * h, "E has V·H elements");
    assert_eq!(out.len(), r * h, "Out has R·H elements");
    if let Some((i, bad)) = ids.iter().enumerate().find(|(_, &c)| !(c >= 0.0 && (c as f64) < vocab as f64 && c.fract() == 0.0)) {
        return Err(format!("id Ids[{i}] = {bad} is not a row of the {vocab}-row table (draw Ids from [0, V))"));
    }
    let mut cmp = Comparer::new("embedding", Tolerance::EXACT, 0.0);
    for (i, &id) in ids.iter().enumerate() {
        let want = &e[id as usize * h..(id as usize + 1) * h];
        let got = &out[i * h..(i + 1) * h];
        for (c, (&g, &w)) in got.iter().zip(want).enumerate() {
            cmp.add(|| vec![i as u64, c as u64], f64::from(g), f64::from(w));
        }
    }
    Ok(cmp.finish(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::inputs;
    use crate::ir::DType;
    use crate::runtime::rng::Rng;

    /// What the kernel computes: each row's id read once, then its row of E copied chunk by chunk
    /// (an implementation of its own: chunked copies into a preallocated output).
    fn kernel_gather(ids: &[f32], e: &[f32], h: usize, chunk: usize) -> Vec<f32> {
        let mut out = vec![f32::NAN; ids.len() * h];
        for (r, &id) in ids.iter().enumerate() {
            let id = id as i32 as usize;
            for c0 in (0..h).step_by(chunk) {
                let n = chunk.min(h - c0);
                out[r * h + c0..r * h + c0 + n].copy_from_slice(&e[id * h + c0..id * h + c0 + n]);
            }
        }
        out
    }

    fn ids(rows: usize, v: usize, seed: u64) -> Vec<f32> {
        let mut r = Rng::new(seed);
        (0..rows).map(|_| r.below(v as u64) as f32).collect()
    }

    #[test]
    fn a_hand_computed_gather() {
        // E = [[1, 2], [3, 4], [5, -0]]; Ids = [2, 0, 2]: Out = [[5, -0], [1, 2], [5, -0]].
        let e = [1.0f32, 2.0, 3.0, 4.0, 5.0, -0.0];
        let ids = [2.0f32, 0.0, 2.0];
        let out = [5.0f32, -0.0, 1.0, 2.0, 5.0, -0.0];
        let r = embedding(&ids, &e, &out, 3, 3, 2).unwrap();
        assert!(r.passed, "{r:?}");
        assert_eq!((r.checked, r.mismatches, r.nonfinite), (6, 0, 0));
        assert_eq!((r.oracle.as_str(), r.tolerance), ("embedding", Tolerance::EXACT));
        assert_eq!(kernel_gather(&ids, &e, 2, 1), out.to_vec());
        // +0 where the row holds -0: a copy keeps the sign of zero.
        let mut plus = out;
        plus[5] = 0.0;
        let r = embedding(&ids, &e, &plus, 3, 3, 2).unwrap();
        assert!(!r.passed && r.mismatches == 1, "{r:?}");
        assert_eq!(r.first_bad[0].index, vec![2, 1]);
        assert_eq!(r.first_bad[0].note.as_deref(), Some("the sign of zero differs"));
    }

    #[test]
    fn accepts_the_gather_and_catches_faults() {
        for (dt, v, h, chunk) in [(DType::BF16, 64usize, 32usize, 8usize), (DType::F16, 1000, 48, 16), (DType::F32, 7, 16, 16)] {
            let rows = 24usize;
            let e = inputs(dt, v * h, 90 + v as u64);
            let id = ids(rows, v, 91 + h as u64);
            let good = kernel_gather(&id, &e, h, chunk);
            let check = |out: &[f32]| embedding(&id, &e, out, rows as u64, v as u64, h as u64).unwrap();
            let r = check(&good);
            assert!(r.passed, "{dt} V={v} H={h}: {r:?}");
            assert_eq!((r.checked as usize, r.mismatches, r.nonfinite), (rows * h, 0, 0));
            // Row shifted by one: every row copies the table row after its id (an off-by-one id).
            let shifted: Vec<f32> = id.iter().map(|&i| ((i as usize + 1) % v) as f32).collect();
            let r = check(&kernel_gather(&shifted, &e, h, chunk));
            assert!(!r.passed && r.mismatches > 0 && r.nonfinite == 0, "{r:?}");
            // Row 3 holding row 4's output (a wrong output row).
            let mut moved = good.clone();
            moved.copy_within(4 * h..5 * h, 3 * h);
            if id[3] != id[4] {
                let r = check(&moved);
                assert!(!r.passed && r.first_bad[0].index[0] == 3, "{r:?}");
            }
            // One element changed (scaled by 1.0625, a value every dtype here holds).
            let mut one = good.clone();
            let at = 5 * h + h / 2;
            one[at] = if one[at] == 0.0 { 1.0 } else { one[at] * 1.0625 };
            let r = check(&one);
            assert_eq!((r.passed, r.mismatches, r.nonfinite), (false, 1, 0), "{r:?}");
            assert_eq!(r.first_bad[0].index, vec![5, (h / 2) as u64]);
            // One element unwritten (the NaN poison): both a mismatch and a non-finite value.
            let mut hole = good.clone();
            hole[(rows - 1) * h + h - 1] = f32::NAN;
            let r = check(&hole);
            assert_eq!((r.passed, r.mismatches, r.nonfinite), (false, 1, 1), "{r:?}");
            assert_eq!(r.first_bad[0].index, vec![(rows - 1) as u64, (h - 1) as u64]);
            // A whole row left unwritten (a skipped row: e.g. the guard taken for an in-range id).
            let mut skipped = good.clone();
            skipped[7 * h..8 * h].iter_mut().for_each(|x| *x = f32::NAN);
            let r = check(&skipped);
            assert_eq!((r.passed, r.mismatches, r.nonfinite), (false, h as u64, h as u64), "{r:?}");
            // A guarded read of row 0 instead of the row (a zero row): wrong unless E's row is 0.
            let mut zero = good.clone();
            zero[2 * h..3 * h].iter_mut().for_each(|x| *x = 0.0);
            assert!(!check(&zero).passed);
        }
    }

    #[test]
    fn rejects_an_id_outside_the_table() {
        let (v, h) = (5usize, 4usize);
        let e = inputs(DType::F32, v * h, 3);
        let out = vec![0f32; 2 * h];
        for bad in [5.0f32, -1.0, 2.5, f32::NAN, 1e9] {
            let m = embedding(&[0.0, bad], &e, &out, 2, v as u64, h as u64).unwrap_err();
            assert!(m.contains("Ids[1]") && m.contains("is not a row of the 5-row table"), "{m}");
        }
        // V − 1 is the last row, and is accepted.
        let ids = [4.0f32, 0.0];
        let good = kernel_gather(&ids, &e, h, 2);
        assert!(embedding(&ids, &e, &good, 2, v as u64, h as u64).unwrap().passed);
    }
}
