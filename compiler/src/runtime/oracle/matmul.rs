//! GEMM oracles: `matmul_abt` (C = A·Bᵀ), its batched form and `grouped_matmul_abt`. The
//! reference is fp64 on the CPU over sampled rows × all columns plus sampled columns × all rows of
//! every batch entry or group (first and last included), each element judged by
//! `|got − ref| ≤ atol·rms(ref) + rtol·|ref|` ([`Tolerance::MATMUL_BF16`],
//! [`Tolerance::MATMUL_F16`]). [`abt_check`] is that sampled check; `kmeans_update` reuses it.

use super::{dot_f64, par_map, CheckReport, Comparer, Tolerance};
use crate::runtime::rng::{sample_indices, Rng};

/// `matmul_abt`: check C[M,N] = A[M,K]·B[N,K]ᵀ on sampled rows and columns (indices [i, j]).
#[allow(clippy::too_many_arguments)]
pub fn matmul_abt(
    a: &[f32],
    b: &[f32],
    c: &[f32],
    m: u64,
    n: u64,
    k: u64,
    tol: Tolerance,
    rng: &mut Rng,
) -> CheckReport {
    abt_check("matmul_abt", a, b, c, None, 1, m, n, k, tol, rng, |_, i, j| vec![i, j])
}

/// `matmul_abt` with a leading batch dimension: C[b] = A[b]·B[b]ᵀ for A [BATCH, M, K],
/// B [BATCH, N, K], C [BATCH, M, N] (each batch entry after the other). Every batch entry gets
/// its share of the sampled rows and columns (at least one of each); wrong elements are reported
/// by C's index [b, i, j].
#[allow(clippy::too_many_arguments)]
pub fn matmul_abt_batched(
    a: &[f32],
    b: &[f32],
    c: &[f32],
    batch: u64,
    m: u64,
    n: u64,
    k: u64,
    tol: Tolerance,
    rng: &mut Rng,
) -> CheckReport {
    abt_check("matmul_abt", a, b, c, None, batch, m, n, k, tol, rng, |bi, i, j| vec![bi, i, j])
}

/// `grouped_matmul_abt`: group g multiplies rows [g·MG, (g+1)·MG) of A [G·MG, K] with B[g] (B is
/// [G, N, K]) into the same rows of C [G·MG, N]. Sampled like [`matmul_abt_batched`] (every
/// group gets rows and columns); wrong elements are reported by C's index [g·MG + i, j].
#[allow(clippy::too_many_arguments)]
pub fn grouped_matmul_abt(
    a: &[f32],
    b: &[f32],
    c: &[f32],
    groups: u64,
    mg: u64,
    n: u64,
    k: u64,
    tol: Tolerance,
    rng: &mut Rng,
) -> CheckReport {
    // Equal groups lie in memory exactly like a strided batch: A [G·MG, K] is [G, MG, K].
    abt_check("grouped_matmul_abt", a, b, c, None, groups, mg, n, k, tol, rng, |g, i, j| vec![g * mg + i, j])
}

/// The sampled check shared by the GEMM oracles: `batch` products C_b[M,N] = A_b[M,K]·B_b[N,K]ᵀ,
/// each operand's entries one after the other. Per entry, ⌈samples / batch⌉ (at least one) random
/// rows × all columns plus as many random columns × all rows (first and last included when two
/// or more), fp64; `index(b, i, j)` names an element in the report. With `col_scale` (BATCH·N
/// values), reference column j of entry b is multiplied by `col_scale[b·N + j]`:
/// C_b = A_b·B_bᵀ·diag(scale_b).
#[allow(clippy::too_many_arguments)]
pub(super) fn abt_check(
    name: &str,
    a: &[f32],
    b: &[f32],
    c: &[f32],
    col_scale: Option<&[f32]>,
    batch: u64,
    m: u64,
    n: u64,
    k: u64,
    tol: Tolerance,
    rng: &mut Rng,
    index: impl Fn(u64, u64, u64) -> Vec<u64>,
) -> CheckReport {
    let (bu, mu, nu, ku) = (batch as usize, m as usize, n as usize, k as usize);
    assert_eq!(a.len(), bu * mu * ku, "{name}: A has BATCH·M·K elements");
    assert_eq!(b.len(), bu * nu * ku, "{name}: B has BATCH·N·K elements");
    assert_eq!(c.len(), bu * mu * nu, "{name}: C has BATCH·M·N elements");
    if let Some(s) = col_scale {
        assert_eq!(s.len(), bu * nu, "{name}: the column scale has BATCH·N elements");
    }
    let scale = |e: u64, j: usize| col_scale.map_or(1.0, |s| f64::from(s[e as usize * nu + j]));
    let per = tol.samples.div_ceil(batch.max(1)).max(1);
    // (batch entry, sampled rows, sampled columns); one entry's rows then columns, as the
    // unbatched check always drew them.
    let picks: Vec<(u64, Vec<u64>, Vec<u64>)> = (0..batch)
        .map(|e| {
            let rows = sample_indices(rng, m, per);
            let cols = sample_indices(rng, n, per);
            (e, rows, cols)
        })
        .collect();
    let a_row = |e: u64, i: usize| &a[(e as usize * mu + i) * ku..(e as usize * mu + i + 1) * ku];
    let b_row = |e: u64, j: usize| &b[(e as usize * nu + j) * ku..(e as usize * nu + j + 1) * ku];
    let row_items: Vec<(u64, u64)> = picks.iter().flat_map(|(e, r, _)| r.iter().map(move |&i| (*e, i))).collect();
    let col_items: Vec<(u64, u64)> = picks.iter().flat_map(|(e, _, cs)| cs.iter().map(move |&j| (*e, j))).collect();
    // Reference rows (all columns) and columns (all rows), in parallel.
    let row_refs: Vec<Vec<f64>> =
        par_map(&row_items, |&(e, i)| (0..nu).map(|j| dot_f64(a_row(e, i as usize), b_row(e, j)) * scale(e, j)).collect());
    let col_refs: Vec<Vec<f64>> = par_map(&col_items, |&(e, j)| {
        let s = scale(e, j as usize);
        (0..mu).map(|i| dot_f64(a_row(e, i), b_row(e, j as usize)) * s).collect()
    });
    let count = (row_refs.len() * nu + col_refs.len() * mu) as f64;
    let sumsq: f64 = row_refs.iter().chain(&col_refs).flatten().map(|v| v * v).sum();
    let rms = if count > 0.0 { (sumsq / count).sqrt() } else { 0.0 };
    let mut cmp = Comparer::new(name, tol, rms);
    let at = |e: u64, i: usize, j: usize| c[(e as usize * mu + i) * nu + j];
    for (&(e, i), r) in row_items.iter().zip(&row_refs) {
        for (j, &want) in r.iter().enumerate() {
            cmp.add(|| index(e, i, j as u64), f64::from(at(e, i as usize, j)), want);
        }
    }
    for (&(e, j), r) in col_items.iter().zip(&col_refs) {
        let rows = &picks[e as usize].1;
        for (i, &want) in r.iter().enumerate() {
            if rows.binary_search(&(i as u64)).is_ok() {
                continue; // already checked with its row
            }
            cmp.add(|| index(e, i as u64, j), f64::from(at(e, i, j as usize)), want);
        }
    }
    cmp.finish(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::{data, inputs, rounded};
    use super::super::MAX_REPORTED;
    use crate::ir::DType;

    fn matmul_ref(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
        let mut c = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = dot_f64(&a[i * k..(i + 1) * k], &b[j * k..(j + 1) * k]) as f32;
            }
        }
        c
    }

    #[test]
    fn matmul_accepts_a_correct_product() {
        let (m, n, k) = (96, 80, 48);
        let (a, b) = (data(m * k, 1), data(n * k, 2));
        let c = matmul_ref(&a, &b, m, n, k);
        let r = matmul_abt(&a, &b, &c, m as u64, n as u64, k as u64, Tolerance::MATMUL_BF16, &mut Rng::new(0));
        assert!(r.passed, "{r:?}");
        assert_eq!(r.checked as usize, 64 * n + 64 * m - 64 * 64);
        assert!(r.rel_l2_err < 1e-6);
    }

    #[test]
    fn matmul_catches_a_transposed_operand() {
        // C = A·B instead of A·Bᵀ (square, so shapes match).
        let (m, n, k) = (64, 64, 64);
        let (a, b) = (data(m * k, 1), data(n * k, 2));
        let mut bt = vec![0f32; n * k];
        for j in 0..n {
            for kk in 0..k {
                bt[kk * n + j] = b[j * k + kk];
            }
        }
        let c = matmul_ref(&a, &bt, m, n, k);
        let r = matmul_abt(&a, &b, &c, m as u64, n as u64, k as u64, Tolerance::MATMUL_BF16, &mut Rng::new(0));
        assert!(!r.passed);
        assert!(r.mismatches > 1000);
        assert_eq!(r.first_bad.len(), MAX_REPORTED);
        assert_eq!(r.first_bad[0].index, vec![0, 0]);
    }

    #[test]
    fn matmul_catches_one_wrong_tile_through_the_column_samples() {
        // Only 4 rows sampled, but every column sample sees all rows: a bad 16×16 tile whose
        // rows the row samples miss is still found.
        let (m, n, k) = (256, 32, 16);
        let (a, b) = (data(m * k, 3), data(n * k, 4));
        let mut c = matmul_ref(&a, &b, m, n, k);
        let tol = Tolerance { samples: 4, ..Tolerance::MATMUL_BF16 };
        let rows = sample_indices(&mut Rng::new(9), m as u64, 4);
        let bad_row = (0..m as u64).find(|r| !rows.contains(r) && *r >= 100).unwrap() as usize;
        for i in bad_row..bad_row + 1 {
            for j in 0..n {
                c[i * n + j] += 1.0;
            }
        }
        let r = matmul_abt(&a, &b, &c, m as u64, n as u64, k as u64, tol, &mut Rng::new(9));
        assert!(!r.passed);
        assert!(r.first_bad.iter().all(|e| e.index[0] == bad_row as u64));
    }

    #[test]
    fn unwritten_elements_fail_even_unsampled() {
        let (m, n, k) = (128, 128, 8);
        let (a, b) = (data(m * k, 5), data(n * k, 6));
        let mut c = matmul_ref(&a, &b, m, n, k);
        // A NaN where no sample looks (rows 1..127 minus samples, column not sampled).
        let tol = Tolerance { samples: 2, ..Tolerance::MATMUL_BF16 };
        c[50 * n + 60] = f32::NAN;
        let r = matmul_abt(&a, &b, &c, m as u64, n as u64, k as u64, tol, &mut Rng::new(1));
        assert!(!r.passed);
        assert_eq!(r.nonfinite, 1);
        assert!(r.first_bad.iter().any(|e| e.got.is_nan()));
    }

    #[test]
    fn bf16_rounding_of_the_output_passes() {
        let (m, n, k) = (64, 64, 512);
        let (a, b) = (data(m * k, 7), data(n * k, 8));
        let c: Vec<f32> = matmul_ref(&a, &b, m, n, k)
            .into_iter()
            .map(|v| crate::runtime::convert::bf16_to_f64(crate::runtime::convert::f64_to_bf16(f64::from(v))) as f32)
            .collect();
        let r = matmul_abt(&a, &b, &c, m as u64, n as u64, k as u64, Tolerance::MATMUL_BF16, &mut Rng::new(2));
        assert!(r.passed, "{r:?}");
        assert!(r.rel_l2_err > 1e-4 && r.rel_l2_err < 1e-2, "{}", r.rel_l2_err);
    }

    /// C[b] = A[b]·B[b]ᵀ for `batch` entries, each product computed by `matmul_ref` (f32 of the
    /// fp64 sum) and rounded to `out`.
    fn batched_ref(a: &[f32], b: &[f32], batch: usize, m: usize, n: usize, k: usize, out: DType) -> Vec<f32> {
        (0..batch)
            .flat_map(|e| matmul_ref(&a[e * m * k..(e + 1) * m * k], &b[e * n * k..(e + 1) * n * k], m, n, k))
            .map(|v| rounded(out, v))
            .collect()
    }

    #[test]
    fn batched_matmul_accepts_every_entry_and_samples_each() {
        let (batch, m, n, k) = (5usize, 48usize, 40usize, 32usize);
        let (a, b) = (inputs(DType::BF16, batch * m * k, 31), inputs(DType::BF16, batch * n * k, 32));
        let c = batched_ref(&a, &b, batch, m, n, k, DType::BF16);
        let check = |c: &[f32], tol| matmul_abt_batched(&a, &b, c, batch as u64, m as u64, n as u64, k as u64, tol, &mut Rng::new(3));
        let r = check(&c, Tolerance::MATMUL_BF16);
        assert!(r.passed && r.rel_l2_err > 1e-4, "bf16 rounding shows, within tolerance: {r:?}");
        // 64 samples over 5 entries: 13 rows and 13 columns of each, the 13 × 13 overlap once.
        assert_eq!(r.checked as usize, batch * (13 * n + 13 * m - 13 * 13));
        // Two samples in all: still one row and one column of every entry.
        let r = check(&c, Tolerance { samples: 2, ..Tolerance::MATMUL_BF16 });
        assert!(r.passed);
        assert_eq!(r.checked as usize, batch * (n + m - 1));
        // f16 operands and output under the f16 GEMM tolerance.
        let (ah, bh) = (inputs(DType::F16, batch * m * k, 33), inputs(DType::F16, batch * n * k, 34));
        let ch = batched_ref(&ah, &bh, batch, m, n, k, DType::F16);
        let r = matmul_abt_batched(&ah, &bh, &ch, batch as u64, m as u64, n as u64, k as u64, Tolerance::MATMUL_F16, &mut Rng::new(3));
        assert!(r.passed, "{r:?}");
    }

    #[test]
    fn batched_matmul_catches_swapped_entries_with_their_index() {
        let (batch, m, n, k) = (5usize, 32usize, 24usize, 16usize);
        let (a, b) = (data(batch * m * k, 35), data(batch * n * k, 36));
        let mut c = batched_ref(&a, &b, batch, m, n, k, DType::F32);
        // Entries 3 and 4 trade places: one sample per entry still sees it.
        let (lo, hi) = c.split_at_mut(4 * m * n);
        lo[3 * m * n..].swap_with_slice(&mut hi[..m * n]);
        let tol = Tolerance { samples: 2, ..Tolerance::MATMUL_BF16 };
        let r = matmul_abt_batched(&a, &b, &c, batch as u64, m as u64, n as u64, k as u64, tol, &mut Rng::new(4));
        assert!(!r.passed);
        assert!(r.first_bad.iter().all(|e| e.index.len() == 3 && (e.index[0] == 3 || e.index[0] == 4)), "{:?}", r.first_bad);
        assert_eq!(r.first_bad[0].index[0], 3);
        // The unbatched check of the first entry alone does not see entries 3 and 4.
        let r = matmul_abt(&a[..m * k], &b[..n * k], &c[..m * n], m as u64, n as u64, k as u64, tol, &mut Rng::new(4));
        assert!(r.passed);
    }

    #[test]
    fn batched_matmul_catches_one_wrong_tile_of_one_entry() {
        // A 16 × 16 tile of entry 2 computed from entry 1's operands; the row samples of entry 2
        // miss it, its column samples see every row.
        let (batch, m, n, k) = (3usize, 128usize, 32usize, 16usize);
        let (a, b) = (data(batch * m * k, 37), data(batch * n * k, 38));
        let mut c = batched_ref(&a, &b, batch, m, n, k, DType::F32);
        let other = batched_ref(&a, &b, batch, m, n, k, DType::F32);
        let (i0, j0) = (64usize, 16usize);
        for i in i0..i0 + 16 {
            for j in j0..j0 + 16 {
                c[(2 * m + i) * n + j] = other[(m + i) * n + j];
            }
        }
        let tol = Tolerance { samples: 6, ..Tolerance::MATMUL_BF16 };
        let r = matmul_abt_batched(&a, &b, &c, batch as u64, m as u64, n as u64, k as u64, tol, &mut Rng::new(5));
        assert!(!r.passed);
        for e in &r.first_bad {
            let [bi, i, j] = e.index[..] else { panic!("{e:?}") };
            assert!(bi == 2 && (i0..i0 + 16).contains(&(i as usize)) && (j0..j0 + 16).contains(&(j as usize)), "{e:?}");
        }
    }

    #[test]
    fn grouped_matmul_uses_each_groups_weight_and_reports_rows_of_c() {
        let (g, mg, n, k) = (4usize, 32usize, 24usize, 16usize);
        let (a, b) = (inputs(DType::BF16, g * mg * k, 41), inputs(DType::BF16, g * n * k, 42));
        // The reference of a grouped GEMM is the batched one over A seen as [G, MG, K].
        let c = batched_ref(&a, &b, g, mg, n, k, DType::BF16);
        let check = |c: &[f32]| grouped_matmul_abt(&a, &b, c, g as u64, mg as u64, n as u64, k as u64, Tolerance::MATMUL_BF16, &mut Rng::new(6));
        let r = check(&c);
        assert!(r.passed, "{r:?}");
        assert_eq!(r.oracle, "grouped_matmul_abt");
        // Group 2 multiplied with group 1's weight.
        let mut wrong = c.clone();
        let w1 = matmul_ref(&a[2 * mg * k..3 * mg * k], &b[n * k..2 * n * k], mg, n, k);
        wrong[2 * mg * n..3 * mg * n].copy_from_slice(&w1);
        let r = check(&wrong);
        assert!(!r.passed);
        assert!(r.first_bad.iter().all(|e| e.index.len() == 2 && (2 * mg..3 * mg).contains(&(e.index[0] as usize))), "{:?}", r.first_bad);
        // Every group with one weight (B[0]) for all: groups 1..3 fail.
        let mut one_weight = c.clone();
        for gi in 0..g {
            let r0 = matmul_ref(&a[gi * mg * k..(gi + 1) * mg * k], &b[..n * k], mg, n, k);
            one_weight[gi * mg * n..(gi + 1) * mg * n].copy_from_slice(&r0);
        }
        let r = check(&one_weight);
        assert!(!r.passed && r.first_bad[0].index[0] as usize == mg, "{:?}", r.first_bad);
        // An unwritten element of the last group.
        let mut hole = c.clone();
        hole[(3 * mg + 5) * n + 7] = f32::NAN;
        let r = check(&hole);
        assert!(!r.passed && r.nonfinite == 1);
    }
}
