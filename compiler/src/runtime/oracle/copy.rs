//! Data movement: `copy` (B = A, rank 1–5) and `transpose` (B[j, i] = A[i, j]). Every element is
//! compared exactly ([`Tolerance::EXACT`]: equal values, the same sign of zero), nothing sampled:
//! moving data must not change a bit of a value.

use super::{compare_full, CheckReport, Tolerance};

/// `copy`: every element of `output` equals the element of `input` at the same index, exactly
/// (`shape`, outermost first, is the shape of both). Unwritten elements hold the NaN poison.
pub fn copy(input: &[f32], output: &[f32], shape: &[u64]) -> CheckReport {
    assert_eq!(input.len() as u64, shape.iter().product::<u64>(), "the input has the shape's elements");
    compare_full("copy", output, input, shape, Tolerance::EXACT)
}

/// `transpose`: B[j, i] == A[i, j] exactly, for row-major A[rows, cols] and B[cols, rows]. The
/// indices of wrong elements are B's.
pub fn transpose(a: &[f32], b: &[f32], rows: u64, cols: u64) -> CheckReport {
    let (r, c) = (rows as usize, cols as usize);
    assert_eq!(a.len(), r * c, "A has R·C elements");
    assert_eq!(b.len(), r * c, "B has C·R elements");
    // The reference B = Aᵀ, in 64×64 blocks so that reads and writes both stay in cache.
    const BLOCK: usize = 64;
    let mut want = vec![0f32; r * c];
    for i0 in (0..r).step_by(BLOCK) {
        for j0 in (0..c).step_by(BLOCK) {
            for i in i0..(i0 + BLOCK).min(r) {
                for j in j0..(j0 + BLOCK).min(c) {
                    want[j * r + i] = a[i * c + j];
                }
            }
        }
    }
    compare_full("transpose", b, &want, &[cols, rows], Tolerance::EXACT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::data;
    use super::super::MAX_REPORTED;

    #[test]
    fn copy_accepts_an_exact_copy_of_any_rank() {
        for shape in [vec![40u64], vec![6, 7], vec![2, 3, 5, 4, 3]] {
            let n = shape.iter().product::<u64>() as usize;
            let mut a = data(n, 11);
            a[1] = -0.0; // a negative zero copies as itself
            let r = copy(&a, &a.clone(), &shape);
            assert!(r.passed, "{shape:?}: {r:?}");
            assert_eq!((r.checked, r.mismatches, r.nonfinite), (n as u64, 0, 0));
            assert_eq!(r.oracle, "copy");
            assert_eq!(r.tolerance, Tolerance::EXACT);
        }
    }

    #[test]
    fn copy_catches_a_swapped_pair() {
        let shape = [4u64, 8];
        let a = data(32, 12);
        let mut b = a.clone();
        b.swap(13, 14); // [1, 5] and [1, 6]
        let r = copy(&a, &b, &shape);
        assert!(!r.passed);
        assert_eq!((r.mismatches, r.nonfinite), (2, 0));
        let at: Vec<_> = r.first_bad.iter().map(|e| e.index.clone()).collect();
        assert_eq!(at, vec![vec![1, 5], vec![1, 6]]);
        assert_eq!((r.first_bad[0].got, r.first_bad[0].want), (f64::from(a[14]), f64::from(a[13])));
        assert!(r.max_err_over_tol.is_infinite());
    }

    #[test]
    fn copy_catches_one_unwritten_element() {
        let shape = [3u64, 4, 5];
        let a = data(60, 13);
        let mut b = a.clone();
        b[37] = f32::NAN; // the poison of an element never written: [1, 3, 2]
        let r = copy(&a, &b, &shape);
        assert!(!r.passed);
        assert_eq!((r.mismatches, r.nonfinite), (1, 1));
        assert_eq!(r.first_bad.len(), 1);
        assert_eq!(r.first_bad[0].index, vec![1, 3, 2]);
        assert!(r.first_bad[0].got.is_nan());
    }

    #[test]
    fn copy_is_exact_to_the_last_bit() {
        // One ulp off passes a tolerance but not a copy; nor does +0 for -0.
        let a = vec![1.0f32, -0.0, 3.0, 4.0];
        let mut b = a.clone();
        b[2] = f32::from_bits(3.0f32.to_bits() + 1);
        let r = copy(&a, &b, &[4]);
        assert!(!r.passed);
        assert_eq!(r.first_bad[0].index, vec![2]);
        assert!(compare_full("cublas", &b, &a, &[4], Tolerance::MATMUL_BF16).passed);
        let mut z = a.clone();
        z[1] = 0.0;
        let r = copy(&a, &z, &[4]);
        assert!(!r.passed);
        assert_eq!(r.first_bad[0].index, vec![1]);
        assert_eq!(r.first_bad[0].note.as_deref(), Some("the sign of zero differs"));
    }

    fn transposed(a: &[f32], rows: usize, cols: usize) -> Vec<f32> {
        let mut b = vec![0f32; rows * cols];
        for i in 0..rows {
            for j in 0..cols {
                b[j * rows + i] = a[i * cols + j];
            }
        }
        b
    }

    #[test]
    fn transpose_accepts_the_transpose() {
        // Non-square, and larger than one 64×64 block of the reference in both directions.
        for (rows, cols) in [(96usize, 160usize), (1, 7), (130, 65)] {
            let a = data(rows * cols, 14);
            let r = transpose(&a, &transposed(&a, rows, cols), rows as u64, cols as u64);
            assert!(r.passed, "{rows}x{cols}: {r:?}");
            assert_eq!(r.checked as usize, rows * cols);
            assert_eq!(r.oracle, "transpose");
        }
    }

    #[test]
    fn transpose_catches_a_copy() {
        // B holds A's elements in A's order (a copy, not a transpose).
        let (rows, cols) = (48usize, 80usize);
        let a = data(rows * cols, 15);
        let r = transpose(&a, &a, rows as u64, cols as u64);
        assert!(!r.passed);
        // The first and the last element are the only ones a copy puts in place.
        assert_eq!(r.mismatches as usize, rows * cols - 2);
        assert_eq!(r.first_bad.len(), MAX_REPORTED);
        // B[0, 0] = A[0, 0] either way; B[0, 1] should be A[1, 0] but holds A[0, 1].
        assert_eq!(r.first_bad[0].index, vec![0, 1]);
        assert_eq!((r.first_bad[0].got, r.first_bad[0].want), (f64::from(a[1]), f64::from(a[cols])));
        // Square: the diagonal survives a copy, nothing else.
        let sq = data(64 * 64, 16);
        let r = transpose(&sq, &sq, 64, 64);
        assert_eq!(r.mismatches, 64 * 64 - 64);
    }

    #[test]
    fn transpose_catches_a_swapped_pair_and_an_unwritten_element() {
        let (rows, cols) = (32usize, 24usize);
        let a = data(rows * cols, 17);
        let mut b = transposed(&a, rows, cols);
        // B is [24, 32]: swap B[3, 9] and B[3, 10]; leave B[20, 31] unwritten.
        b.swap(3 * rows + 9, 3 * rows + 10);
        b[20 * rows + 31] = f32::NAN;
        let r = transpose(&a, &b, rows as u64, cols as u64);
        assert!(!r.passed);
        assert_eq!((r.mismatches, r.nonfinite), (3, 1));
        let at: Vec<_> = r.first_bad.iter().map(|e| e.index.clone()).collect();
        assert_eq!(at, vec![vec![3, 9], vec![3, 10], vec![20, 31]]);
        // B[3, 9] wants A[9, 3].
        assert_eq!(r.first_bad[0].want, f64::from(a[9 * cols + 3]));
    }
}
