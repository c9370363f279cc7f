//! Inputs a workload derives on the host from other inputs (`derive = { ... }`): squared row
//! norms, reciprocal row sums, one-hot assignments and column numbers, computed in fp64 so the
//! kernel and its oracle read the same values.

use crate::runtime::rng::Rng;

/// `CN[b,k] = ‖C[b,k,:]‖²` (workload `derive = { CN = "row_sqnorm(C)" }`): sum of squares over
/// the innermost dimension, in fp64.
pub fn row_sqnorm(values: &[f64], inner: usize) -> Vec<f64> {
    values.chunks_exact(inner.max(1)).map(|r| r.iter().map(|v| v * v).sum()).collect()
}

/// `ICNT[b,k] = 1 / Σ_n OH[b,k,n]` (workload `derive = { ICNT = "inv_row_sum(OH)" }`): the
/// reciprocal of each innermost row's sum, in fp64, and 0 for a row that sums to 0 (an empty
/// cluster: its centroid update is 0, not a division by zero).
pub fn inv_row_sum(values: &[f64], inner: usize) -> Vec<f64> {
    values
        .chunks_exact(inner.max(1))
        .map(|r| {
            let s: f64 = r.iter().sum();
            if s == 0.0 {
                0.0
            } else {
                1.0 / s
            }
        })
        .collect()
}

/// A one-hot tensor of `shape` (rank ≥ 2, row-major; workload `derive = { OH = "one_hot()" }`):
/// for every leading index and every column (innermost index) exactly one entry over the
/// second-to-last axis is 1, the others 0 — OH[b, k, n] = 1 when point n belongs to cluster k.
/// The rows are drawn uniformly from stream (`seed`, `stream`, leading index), so the tensor
/// depends on the seed and the tensor's index only. `None` for a rank below 2.
pub fn one_hot(shape: &[u64], seed: u64, stream: u64) -> Option<Vec<f64>> {
    let [lead @ .., rows, cols] = shape else { return None };
    let (rows, cols) = (*rows as usize, *cols as usize);
    let outer: u64 = lead.iter().product();
    let mut out = vec![0.0; outer as usize * rows * cols];
    if rows == 0 {
        return Some(out);
    }
    for (l, slice) in out.chunks_exact_mut((rows * cols).max(1)).enumerate().take(outer as usize) {
        let mut rng = Rng::stream(seed, stream, l as u64);
        for c in 0..cols {
            let r = rng.below(rows as u64) as usize;
            slice[r * cols + c] = 1.0;
        }
    }
    Some(out)
}

/// `column_index()` for a tensor of `shape` (row-major, rank ≥ 1): every element is its index
/// along the innermost axis, 0, 1, …, n − 1, repeated over the leading axes.
pub fn column_index(shape: &[u64]) -> Vec<f64> {
    let inner = *shape.last().unwrap_or(&1) as usize;
    let total: u64 = shape.iter().product();
    (0..total as usize).map(|i| (i % inner.max(1)) as f64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_index_numbers_the_innermost_axis() {
        assert_eq!(column_index(&[4]), vec![0.0, 1.0, 2.0, 3.0]);
        assert_eq!(column_index(&[2, 3]), vec![0.0, 1.0, 2.0, 0.0, 1.0, 2.0]);
    }

    #[test]
    fn row_sqnorm_sums_squares_of_the_last_axis() {
        assert_eq!(row_sqnorm(&[1.0, 2.0, 3.0, 4.0], 2), vec![5.0, 25.0]);
    }

    #[test]
    fn one_hot_has_one_one_per_column_and_inv_row_sum_counts() {
        let shape = [3u64, 5, 40];
        let oh = one_hot(&shape, 4, 1).unwrap();
        assert_eq!(oh.len(), 3 * 5 * 40);
        for l in 0..3 {
            for c in 0..40 {
                let col: Vec<f64> = (0..5).map(|r| oh[(l * 5 + r) * 40 + c]).collect();
                assert_eq!(col.iter().filter(|&&v| v == 1.0).count(), 1, "{col:?}");
                assert!(col.iter().all(|&v| v == 0.0 || v == 1.0));
            }
        }
        // Drawn from the seed and the stream: reproducible, and another seed differs.
        assert_eq!(one_hot(&shape, 4, 1).unwrap(), oh);
        assert_ne!(one_hot(&shape, 5, 1).unwrap(), oh);
        assert_ne!(one_hot(&shape, 4, 2).unwrap(), oh);
        assert!(one_hot(&[7], 4, 1).is_none());
        // Every row of 5 gets some of the 40 points.
        let inv = inv_row_sum(&oh, 40);
        assert_eq!(inv.len(), 15);
        for (r, &v) in inv.iter().enumerate() {
            let count: f64 = oh[r * 40..(r + 1) * 40].iter().sum();
            assert!(count > 0.0 && v == 1.0 / count, "row {r}: {v} for {count}");
        }
        assert_eq!(inv_row_sum(&[0.0, 0.0, 0.0, 1.0, 1.0, 0.0], 3), vec![0.0, 0.5]);
    }
}
