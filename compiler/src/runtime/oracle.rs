//! Oracles: reference answers computed on the host, independent of Cake (no lowering, no
//! generated code), and the comparison that turns a kernel's output into a verdict.
//!
//! - `matmul_abt`: C = A·Bᵀ for row-major A[M,K], B[N,K], C[M,N]. The reference is fp64 on the
//!   CPU over `samples` random rows × all columns plus `samples` random columns × all rows
//!   (first and last row/column always included): a transposed or shifted layout, a wrong tile
//!   origin or a swapped operand shows in either a row or a column. An element passes when
//!   `|got − ref| ≤ atol·rms(ref) + rtol·|ref|` (atol is relative to the RMS of the reference
//!   values checked, so one tolerance suits every distribution and K).
//!   With a leading batch dim ([`matmul_abt_batched`]) every batch entry gets its share of the
//!   sampled rows and columns (at least one of each).
//! - `grouped_matmul_abt`: C[g·MG + i] = A[g·MG + i]·B[g]ᵀ, equal groups, sampled per group like
//!   the batched GEMM ([`grouped_matmul_abt`]).
//! - `kmeans_update`: CT[b] = XT[b]·OH[b]ᵀ·diag(ICNT[b]), the centroid update as a one-hot GEMM
//!   with a per-column scale: the batched GEMM's sampled check with ICNT as uploaded scaling each
//!   reference column ([`kmeans_update`]; tolerance [`Tolerance::KMEANS_UPDATE`]).
//! - `attention`: O = softmax(scale · Q·Kᵀ)·V per (batch·head), sampled query rows against fp64
//!   over the whole softmax row ([`attention`]; tolerances [`Tolerance::ATTENTION_BF16`],
//!   [`Tolerance::ATTENTION_F16`]).
//! - `kmeans_assign`: Idx[b,n] = argmin_k ‖X[b,n,:] − C[b,k,:]‖². The reference is fp64 on
//!   `samples` random points (first and last included) plus a range check of every index. The
//!   kernel's choice j is wrong only when `d(j) − d_min > atol + rtol·(‖x‖² + ‖c_j‖²)`: an exact
//!   (or within-rounding) tie may pick either centroid.
//! - `copy`: B = A element for element (same shape, rank 1–5), and `transpose`: B[j, i] = A[i, j]
//!   for A[R, C], B[C, R]. Every element is compared, exactly ([`Tolerance::EXACT`]: equal values,
//!   and the same sign of zero): moving data must not change a bit of a value.
//! - Row kernels, every element against an fp64 reference computed from the same (rounded)
//!   inputs the GPU reads, under the `matmul_abt` rule with a tolerance chosen from the output's
//!   dtype ([`Tolerance::ROW_BF16`], [`Tolerance::ROW_F16`], [`Tolerance::ROW_F32`]):
//!   - `softmax`: Y[r, :] = exp(X[r, :] − max) / Σ exp(X[r, :] − max);
//!   - `row_reduce`: Out[r] = one reduction of X[r, :] ([`RowReduce`]: sum, mean, max, min,
//!     sqnorm, l2norm, absmax);
//!   - `rmsnorm`: Y = X · (mean(X²) + eps)^-½ · W;
//!   - `layernorm`: Y = (X − mean) · (var + eps)^-½ · W + B (population variance);
//!   - `elementwise`: Z[r, c] = f(X[r, c], Y[r, c], W[c]), `f` the workload's `expr`, parsed and
//!     evaluated by [`ElementExpr`] (its own small parser, not Cake's). The row tolerances fit:
//!     a kernel computes each element with a few f32 operations (`__expf`, `__logf`, `rsqrtf` and
//!     fast division err by a few f32 ulps, ~1e-6 of the value, far inside every `rtol`), then
//!     rounds once to the output dtype; where terms cancel to near zero (`a + b` with a ≈ −b) the
//!     f32 error is ~2^-23 of the terms, which `atol` × RMS covers.
//! - [`compare_full`]: element-wise comparison of a whole output against another implementation
//!   (cuBLAS for GEMM; the input itself for `copy` and `transpose`), same rule as `matmul_abt`, or
//!   exact equality under [`Tolerance::EXACT`].
//!
//! Every output element is also scanned for non-finite values: outputs are poisoned with NaN
//! (0xFF bytes) before the launch, so an element the kernel never wrote is a mismatch.

use serde::{Deserialize, Deserializer, Serialize};

use super::rng::{sample_indices, Rng};
use crate::ir::DType;

/// JSON has no NaN or infinity: serde_json writes them as `null`, and refuses `null` for an
/// `f64`. Reports carry non-finite numbers exactly when something is wrong (an unwritten element
/// reads NaN, its error is infinite), so read `null` back as NaN: the child's result and a run
/// record stay readable when they matter most.
fn f64_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// How close is close enough, per oracle (see the module docs for each oracle's rule).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
    /// Sampled rows and columns (`matmul_abt`) or points (`kmeans_assign`).
    pub samples: u64,
}

impl Tolerance {
    /// bf16 output of an fp32-accumulated product: one bf16 rounding is 2^-9 relative; leave
    /// room for accumulation order and the rounding of the reference comparison.
    pub const MATMUL_BF16: Tolerance = Tolerance { rtol: 2e-2, atol: 1e-2, samples: 64 };
    /// fp32 distances from bf16 operands: rounding of the fp32 sums only.
    pub const KMEANS: Tolerance = Tolerance { rtol: 1e-4, atol: 1e-3, samples: 2048 };
    /// `knn_tile_min`: the same fp32 distances (‖q‖² + ‖c‖² − 2·q·c: the f32 dot of D ≤ 256 exact
    /// bf16 products and two f32 additions err by a few 2^-24 of ‖q‖² + ‖c‖², ~1e-6 of it), judged
    /// like `kmeans_assign`'s; `samples` queries, every tile of each (a query costs K·D).
    pub const KNN: Tolerance = Tolerance { rtol: 1e-4, atol: 1e-3, samples: 256 };
    /// Data movement (`copy`, `transpose`): every element equals its reference exactly, the sign
    /// of a zero included; nothing is sampled.
    pub const EXACT: Tolerance = Tolerance { rtol: 0.0, atol: 0.0, samples: 0 };
    /// Row kernels (softmax, row reductions, RMSNorm, LayerNorm: f32 math) with a bf16 output.
    /// Rounding to bf16 (8 significant bits) moves a value by at most 2^-8 ≈ 3.9e-3 of itself; the
    /// f32 math adds about 1e-6. rtol = 4.5e-3 ≈ 1.15 × 2^-8, so an element two bf16 ulps off (at
    /// least 1.5 ulps, ≥ 5.9e-3 of the exact value) fails wherever it is a tenth of the RMS or more.
    /// atol (× the RMS of the reference) covers the f32 error of values near zero, where
    /// LayerNorm's centering and bias cancel. Every element is checked (`samples` unused).
    pub const ROW_BF16: Tolerance = Tolerance { rtol: 4.5e-3, atol: 1e-4, samples: 0 };
    /// Row kernels with an f16 output: rounding to f16 (11 significant bits) moves a value by at
    /// most 2^-11 ≈ 4.9e-4 of itself; rtol = 1e-3 leaves as much again. atol = 1e-3 × RMS covers
    /// f16's subnormal spacing (2^-24) at the smallest softmax outputs (the RMS of a softmax row of
    /// C normal values is about 1.65 / C, and 2^-25 < 1e-3 × 1.65 / 32768).
    pub const ROW_F16: Tolerance = Tolerance { rtol: 1e-3, atol: 1e-3, samples: 0 };
    /// Row kernels with an f32 output: no output rounding to speak of (2^-24); what remains is the
    /// f32 math — `__expf` (2 + 1.17·|x| ulp: about 1e-6 of the value for the exponents that
    /// matter), `rsqrtf` (2 ulp), and sums of up to 64 Ki terms accumulated per lane, then across
    /// the warp (about 1e-6 of the RMS of the results, where terms cancel). rtol = 2e-5 and
    /// atol = 1e-5 × RMS leave a margin of about ten.
    pub const ROW_F32: Tolerance = Tolerance { rtol: 2e-5, atol: 1e-5, samples: 0 };

    /// GEMM with an f16 output and f32 accumulation (`grouped_matmul_abt`'s default for f16): one
    /// f16 rounding moves a value by at most 2^-11 ≈ 4.9e-4 of itself and the f32 sums add about
    /// 1e-6; rtol = 2e-3 and atol = 1e-3 × RMS leave a margin of four, and an element off by a
    /// bf16 rounding step (2^-8 ≈ 3.9e-3 of itself) fails.
    pub const MATMUL_F16: Tolerance = Tolerance { rtol: 2e-3, atol: 1e-3, samples: 64 };
    /// Attention with a bf16 output. Besides the output rounding (≤ 2^-9 relative), the kernel
    /// rounds the probabilities P to bf16 before P·V: each term of a row's weighted sum is off by
    /// up to 2^-9 of itself, independently, so an output element errs by about 2^-9/√3 ≈ 1.1e-3 of
    /// the RMS of O (the sum l uses the unrounded P). atol = 1e-2 × RMS is about nine of those;
    /// rtol = 2e-2 covers the output rounding five times over. A wrong scale, key or head moves
    /// elements by tens of percent of the RMS. `samples` query rows per (batch·head).
    pub const ATTENTION_BF16: Tolerance = Tolerance { rtol: 2e-2, atol: 1e-2, samples: 32 };
    /// Attention with an f16 output: the same two roundings at f16's 2^-11 (P: about 1.4e-4 of
    /// the RMS; output: ≤ 4.9e-4 of the value); rtol = 2e-3 and atol = 2e-3 × RMS.
    pub const ATTENTION_F16: Tolerance = Tolerance { rtol: 2e-3, atol: 2e-3, samples: 32 };
    /// `kmeans_update`: an f32 output CT[b, d, k] = Σ_n XT[b, d, n]·OH[b, k, n] · ICNT[b, k] from
    /// bf16 (or f16) operands. Every product is exact in f32 (8 × 8 significant bits, and OH is 0
    /// or 1), so only the f32 sums and the scaling round. A cluster of c points sums c values:
    /// at most (c − 1)·u·Σ|x| off (u = 2^-24) in the worst case, about c·u·rms(x) for a
    /// recursive sum with random rounding (c roundings of ~u·√i·rms(x)); ICNT = 1/c rounded to
    /// f32 and the product add 2u of the value. Scaled by 1/c, a centroid coordinate errs by at
    /// most (c + 1)·u·mean|x| and typically ~u·rms(x), while the RMS of CT is about rms(x)/√c
    /// for zero-mean data (a mean of c values). atol = 1e-3 × RMS(ref) thus covers the typical
    /// error (u·√c ≤ 1e-3 up to c ≈ 10^8) and the worst case up to c ≈ 750 (0.8·u·c^1.5 ≤
    /// 1e-3); rtol = 1e-3 covers the 2u of the scaling many times over. A missing 1/count (a
    /// factor of c), a wrong cluster (another mean, off by about the RMS) or a dropped 64-point
    /// slice (~x/c per point lost, ≥ 1e-2 of the RMS for c ≤ 10^4) each fail. `samples` rows and
    /// as many columns, shared among the batch entries (at least one of each per entry).
    pub const KMEANS_UPDATE: Tolerance = Tolerance { rtol: 1e-3, atol: 1e-3, samples: 64 };

    /// `grouped_matmul_abt`'s tolerance for an output of `dtype`: [`Tolerance::MATMUL_F16`] for
    /// f16, [`Tolerance::MATMUL_BF16`] otherwise.
    pub fn for_gemm_output(dtype: DType) -> Tolerance {
        match dtype {
            DType::F16 => Tolerance::MATMUL_F16,
            _ => Tolerance::MATMUL_BF16,
        }
    }

    /// `attention`'s tolerance for an output of `dtype`: [`Tolerance::ATTENTION_F16`] for f16,
    /// [`Tolerance::ATTENTION_BF16`] otherwise (the workload refuses other dtypes).
    pub fn for_attention_output(dtype: DType) -> Tolerance {
        match dtype {
            DType::F16 => Tolerance::ATTENTION_F16,
            _ => Tolerance::ATTENTION_BF16,
        }
    }

    /// The row kernels' tolerance for an output of `dtype`: [`Tolerance::ROW_F32`] for f32,
    /// [`Tolerance::ROW_F16`] for f16, [`Tolerance::ROW_BF16`] otherwise (the loosest; the
    /// workload refuses other output dtypes).
    pub fn for_row_output(dtype: DType) -> Tolerance {
        match dtype {
            DType::F32 => Tolerance::ROW_F32,
            DType::F16 => Tolerance::ROW_F16,
            _ => Tolerance::ROW_BF16,
        }
    }

    /// No tolerance at all: [`Comparer`] then demands equality, sign of zero included.
    pub fn is_exact(&self) -> bool {
        self.rtol == 0.0 && self.atol == 0.0
    }
}

/// One wrong element.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BadElement {
    /// Index in the output tensor, outermost first.
    pub index: Vec<u64>,
    #[serde(deserialize_with = "f64_or_nan")]
    pub got: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub want: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What a comparison found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    /// `matmul_abt`, `grouped_matmul_abt`, `attention`, `kmeans_assign`, `kmeans_update`, `knn_tile_min` (and `knn_tile_min.idx`), `copy`, `transpose`,
    /// `softmax`, `row_reduce`, `rmsnorm`, `layernorm`, `elementwise`, `cublas` (full comparison against cuBLAS) or `written` (an output no oracle
    /// checks, scanned for unwritten elements).
    pub oracle: String,
    pub tolerance: Tolerance,
    /// Elements (or points) compared against the reference.
    pub checked: u64,
    pub mismatches: u64,
    /// Non-finite elements anywhere in the output (unwritten elements stay NaN).
    pub nonfinite: u64,
    /// The first few wrong elements, in index order.
    pub first_bad: Vec<BadElement>,
    #[serde(deserialize_with = "f64_or_nan")]
    pub max_abs_err: f64,
    /// max |got − ref| / (atol·rms + rtol·|ref|): ≤ 1 passes.
    #[serde(deserialize_with = "f64_or_nan")]
    pub max_err_over_tol: f64,
    /// ‖got − ref‖ / ‖ref‖ over the checked elements (bf16 products land near 1e-3..1e-2).
    #[serde(deserialize_with = "f64_or_nan")]
    pub rel_l2_err: f64,
    /// `kmeans_assign`: sampled points whose index differs from the fp64 argmin but lies
    /// within tolerance of the minimum distance (accepted ties).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ties_accepted: u64,
    pub passed: bool,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl CheckReport {
    /// An empty report for `oracle` (nothing checked yet, not passed).
    pub fn new(oracle: &str, tolerance: Tolerance) -> CheckReport {
        CheckReport {
            oracle: oracle.to_string(),
            tolerance,
            checked: 0,
            mismatches: 0,
            nonfinite: 0,
            first_bad: Vec::new(),
            max_abs_err: 0.0,
            max_err_over_tol: 0.0,
            rel_l2_err: 0.0,
            ties_accepted: 0,
            passed: false,
        }
    }
}

pub const MAX_REPORTED: usize = 10;

/// Run `f` over `items` on all cores; results in item order.
pub fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len().max(1));
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> =
            items.chunks(chunk).map(|c| s.spawn(move || c.iter().map(f).collect::<Vec<R>>())).collect();
        handles.into_iter().flat_map(|h| h.join().expect("oracle worker panicked")).collect()
    })
}

/// fp64 dot product of two f32 rows (8 independent accumulators so it vectorizes).
pub fn dot_f64(a: &[f32], b: &[f32]) -> f64 {
    let mut acc = [0f64; 8];
    let n = a.len().min(b.len());
    let (ac, bc) = (a[..n].chunks_exact(8), b[..n].chunks_exact(8));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for l in 0..8 {
            acc[l] += f64::from(x[l]) * f64::from(y[l]);
        }
    }
    let mut s: f64 = acc.iter().sum();
    for (x, y) in ar.iter().zip(br) {
        s += f64::from(*x) * f64::from(*y);
    }
    s
}

/// Accumulates comparisons of (index, got, ref) under the `matmul_abt` rule, or exactly when the
/// tolerance is [`Tolerance::is_exact`].
struct Comparer {
    tol: Tolerance,
    abs_tol: f64,
    report: CheckReport,
    sq_err: f64,
    sq_ref: f64,
}

impl Comparer {
    fn new(oracle: &str, tol: Tolerance, ref_rms: f64) -> Comparer {
        Comparer {
            tol,
            abs_tol: tol.atol * ref_rms,
            report: CheckReport::new(oracle, tol),
            sq_err: 0.0,
            sq_ref: 0.0,
        }
    }

    fn add(&mut self, index: impl FnOnce() -> Vec<u64>, got: f64, want: f64) {
        self.report.checked += 1;
        let err = (got - want).abs();
        let allowed = self.abs_tol + self.tol.rtol * want.abs();
        let ok = if self.tol.is_exact() {
            // Equal (false for NaN), and -0 is not +0: a copy moves values bit for bit.
            got == want && got.is_sign_negative() == want.is_sign_negative()
        } else {
            err <= allowed // false for NaN
        };
        if err.is_finite() {
            self.report.max_abs_err = self.report.max_abs_err.max(err);
            self.sq_err += err * err;
            if allowed > 0.0 {
                self.report.max_err_over_tol = self.report.max_err_over_tol.max(err / allowed);
            } else if !ok {
                self.report.max_err_over_tol = f64::INFINITY;
            }
        } else {
            self.report.max_abs_err = f64::INFINITY;
            self.report.max_err_over_tol = f64::INFINITY;
            self.sq_err = f64::INFINITY;
        }
        self.sq_ref += want * want;
        if !ok {
            let note = (got == want).then(|| "the sign of zero differs".to_string());
            self.bad(index(), got, want, note);
        }
    }

    fn bad(&mut self, index: Vec<u64>, got: f64, want: f64, note: Option<String>) {
        self.report.mismatches += 1;
        self.report.first_bad.push(BadElement { index, got, want, note });
        if self.report.first_bad.len() >= 4 * MAX_REPORTED {
            // Keep the lowest indices only: a wholly wrong output must not hold one entry per
            // element (finish() sorts and truncates the same way).
            Self::keep_first(&mut self.report.first_bad);
        }
    }

    fn keep_first(bad: &mut Vec<BadElement>) {
        bad.sort_by(|a, b| a.index.cmp(&b.index));
        bad.dedup_by(|a, b| a.index == b.index);
        bad.truncate(MAX_REPORTED);
    }

    fn finish(mut self, output: &[f32]) -> CheckReport {
        self.report.nonfinite = output.iter().filter(|v| !v.is_finite()).count() as u64;
        if self.report.nonfinite > 0 && !self.report.first_bad.iter().any(|b| !b.got.is_finite()) {
            // Point at the first unwritten / non-finite element even if no sample hit it.
            if let Some(i) = output.iter().position(|v| !v.is_finite()) {
                self.report.first_bad.push(BadElement {
                    index: vec![i as u64],
                    got: f64::from(output[i]),
                    want: f64::NAN,
                    note: Some(
                        "non-finite output (flat index; outputs are poisoned with NaN before the launch)".into(),
                    ),
                });
            }
        }
        Self::keep_first(&mut self.report.first_bad);
        self.report.rel_l2_err =
            if self.sq_ref > 0.0 { (self.sq_err / self.sq_ref).sqrt() } else { self.sq_err.sqrt() };
        self.report.passed = self.report.mismatches == 0 && self.report.nonfinite == 0 && self.report.checked > 0;
        self.report
    }
}

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

/// `kmeans_update`: the centroid update as a one-hot GEMM with the means' 1/count fused,
/// CT[b, d, k] = Σ_n XT[b, d, n]·OH[b, k, n] · ICNT[b, k] for XT [B, D, N], OH [B, K, N] (one-hot
/// over K: point n belongs to cluster k), ICNT [B, K] and CT [B, D, K]. The batched GEMM check
/// ([`matmul_abt_batched`]'s sampling: rows d and columns k of every batch entry) with each
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

/// The sampled check shared by the GEMM oracles: `batch` products C_b[M,N] = A_b[M,K]·B_b[N,K]ᵀ,
/// each operand's entries one after the other. Per entry, ⌈samples / batch⌉ (at least one) random
/// rows × all columns plus as many random columns × all rows (first and last included when two
/// or more), fp64; `index(b, i, j)` names an element in the report. With `col_scale` (BATCH·N
/// values), reference column j of entry b is multiplied by `col_scale[b·N + j]`:
/// C_b = A_b·B_bᵀ·diag(scale_b).
#[allow(clippy::too_many_arguments)]
fn abt_check(
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

/// `attention`: O[h] = softmax(scale · Q[h]·K[h]ᵀ)·V[h] (non-causal) for Q [BH, SQ, HD],
/// K [BH, SK, HD], VT = Vᵀ [BH, HD, SK] and O [BH, SQ, HD], row-major. `tol.samples` query rows
/// per (batch·head) `h` (first and last included when two or more), each against an fp64
/// reference over its whole softmax row (all SK keys); `scale` is the value the kernel receives
/// (rounded to its scalar's dtype by the caller). Wrong elements are reported by O's index
/// [h, i, d]; every element of O is scanned for non-finite (unwritten) values.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    q: &[f32],
    k: &[f32],
    vt: &[f32],
    o: &[f32],
    bh: u64,
    sq: u64,
    sk: u64,
    hd: u64,
    scale: f64,
    tol: Tolerance,
    rng: &mut Rng,
) -> CheckReport {
    let (hu, squ, sku, du) = (bh as usize, sq as usize, sk as usize, hd as usize);
    assert_eq!(q.len(), hu * squ * du, "Q has BH·SQ·HD elements");
    assert_eq!(k.len(), hu * sku * du, "K has BH·SK·HD elements");
    assert_eq!(vt.len(), hu * du * sku, "VT has BH·HD·SK elements");
    assert_eq!(o.len(), hu * squ * du, "O has BH·SQ·HD elements");
    let items: Vec<(u64, u64)> =
        (0..bh).flat_map(|h| sample_indices(rng, sq, tol.samples.max(1)).into_iter().map(move |i| (h, i))).collect();
    let refs: Vec<Vec<f64>> = par_map(&items, |&(h, i)| {
        let (h, i) = (h as usize, i as usize);
        let qr = &q[(h * squ + i) * du..(h * squ + i + 1) * du];
        let kh = &k[h * sku * du..(h + 1) * sku * du];
        let scores: Vec<f64> = kh.chunks_exact(du).map(|kr| scale * dot_f64(qr, kr)).collect();
        let mx = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let p: Vec<f64> = scores.iter().map(|s| (s - mx).exp()).collect();
        let l: f64 = p.iter().sum();
        let vh = &vt[h * du * sku..(h + 1) * du * sku];
        vh.chunks_exact(sku).map(|vr| vr.iter().zip(&p).map(|(&v, &w)| f64::from(v) * w).sum::<f64>() / l).collect()
    });
    let count = (refs.len() * du) as f64;
    let sumsq: f64 = refs.iter().flatten().map(|v| v * v).sum();
    let rms = if count > 0.0 { (sumsq / count).sqrt() } else { 0.0 };
    let mut cmp = Comparer::new("attention", tol, rms);
    for (&(h, i), r) in items.iter().zip(&refs) {
        let row = &o[((h * sq + i) * hd) as usize..((h * sq + i + 1) * hd) as usize];
        for (d, (&got, &want)) in row.iter().zip(r).enumerate() {
            cmp.add(|| vec![h, i, d as u64], f64::from(got), want);
        }
    }
    cmp.finish(o)
}

/// Compare a whole output against another implementation's (`shape` outermost first).
pub fn compare_full(name: &str, got: &[f32], want: &[f32], shape: &[u64], tol: Tolerance) -> CheckReport {
    assert_eq!(got.len(), want.len());
    let (mut sumsq, mut finite) = (0.0f64, 0u64);
    for v in want.iter().filter(|v| v.is_finite()).map(|&v| f64::from(v)) {
        sumsq += v * v;
        finite += 1;
    }
    let rms = if finite == 0 { 0.0 } else { (sumsq / finite as f64).sqrt() };
    let mut cmp = Comparer::new(name, tol, rms);
    for (flat, (&g, &w)) in got.iter().zip(want).enumerate() {
        cmp.add(|| unflatten(flat as u64, shape), f64::from(g), f64::from(w));
    }
    cmp.finish(got)
}

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

/// Which reduction `row_reduce` checks: the workload's `reduce` key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowReduce {
    /// Σ x
    Sum,
    /// Σ x / C
    Mean,
    /// max x
    Max,
    /// min x
    Min,
    /// Σ x² (the squared L2 norm)
    Sqnorm,
    /// √(Σ x²)
    L2norm,
    /// max |x|
    Absmax,
}

impl RowReduce {
    pub const ALL: [RowReduce; 7] = [
        RowReduce::Sum,
        RowReduce::Mean,
        RowReduce::Max,
        RowReduce::Min,
        RowReduce::Sqnorm,
        RowReduce::L2norm,
        RowReduce::Absmax,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RowReduce::Sum => "sum",
            RowReduce::Mean => "mean",
            RowReduce::Max => "max",
            RowReduce::Min => "min",
            RowReduce::Sqnorm => "sqnorm",
            RowReduce::L2norm => "l2norm",
            RowReduce::Absmax => "absmax",
        }
    }

    /// The reduction of one row, in fp64.
    pub fn of(self, row: &[f32]) -> f64 {
        let v = row.iter().map(|&x| f64::from(x));
        match self {
            RowReduce::Sum => v.sum(),
            RowReduce::Mean => v.sum::<f64>() / row.len() as f64,
            RowReduce::Max => v.fold(f64::NEG_INFINITY, f64::max),
            RowReduce::Min => v.fold(f64::INFINITY, f64::min),
            RowReduce::Sqnorm => dot_f64(row, row),
            RowReduce::L2norm => dot_f64(row, row).sqrt(),
            RowReduce::Absmax => v.map(f64::abs).fold(0.0, f64::max),
        }
    }
}

/// An fp64 reference of `rows` rows of `width` values each, row `r` written by `f(r, row)`, the
/// rows spread over all cores.
fn per_row(rows: usize, width: usize, f: impl Fn(usize, &mut [f64]) + Sync) -> Vec<f64> {
    let mut out = vec![0f64; rows * width];
    if rows == 0 || width == 0 {
        return out;
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, rows);
    let per = rows.div_ceil(threads);
    let f = &f;
    std::thread::scope(|s| {
        for (ci, chunk) in out.chunks_mut(per * width).enumerate() {
            s.spawn(move || {
                for (i, row) in chunk.chunks_mut(width).enumerate() {
                    f(ci * per + i, row);
                }
            });
        }
    });
    out
}

/// Compare every element of `got` with an fp64 reference (`shape` outermost first), under the
/// `matmul_abt` rule with `atol` relative to the RMS of the whole reference.
fn compare_ref(name: &str, got: &[f32], want: &[f64], shape: &[u64], tol: Tolerance) -> CheckReport {
    assert_eq!(got.len(), want.len(), "{name}: the output and its reference differ in length");
    let rms = if want.is_empty() { 0.0 } else { (want.iter().map(|v| v * v).sum::<f64>() / want.len() as f64).sqrt() };
    let mut cmp = Comparer::new(name, tol, rms);
    for (flat, (&g, &w)) in got.iter().zip(want).enumerate() {
        cmp.add(|| unflatten(flat as u64, shape), f64::from(g), w);
    }
    cmp.finish(got)
}

/// `softmax`: Y[r, :] = exp(X[r, :] − m) / Σ exp(X[r, :] − m), m = max X[r, :], for row-major
/// X and Y of `rows` × `cols`; every element is compared.
pub fn softmax(x: &[f32], y: &[f32], rows: u64, cols: u64, tol: Tolerance) -> CheckReport {
    let (r, c) = (rows as usize, cols as usize);
    assert_eq!(x.len(), r * c, "X has R·C elements");
    assert_eq!(y.len(), r * c, "Y has R·C elements");
    let want = per_row(r, c, |i, out| {
        let row = &x[i * c..(i + 1) * c];
        let m = row.iter().map(|&v| f64::from(v)).fold(f64::NEG_INFINITY, f64::max);
        let mut s = 0.0;
        for (o, &v) in out.iter_mut().zip(row) {
            *o = (f64::from(v) - m).exp();
            s += *o;
        }
        for o in out.iter_mut() {
            *o /= s;
        }
    });
    compare_ref("softmax", y, &want, &[rows, cols], tol)
}

/// `row_reduce`: Out[r] = `op` over X[r, :], for row-major X of `rows` × `cols`; every row is
/// compared.
pub fn row_reduce(op: RowReduce, x: &[f32], out: &[f32], rows: u64, cols: u64, tol: Tolerance) -> CheckReport {
    let (r, c) = (rows as usize, cols as usize);
    assert_eq!(x.len(), r * c, "X has R·C elements");
    assert_eq!(out.len(), r, "Out has R elements");
    let want = per_row(r, 1, |i, o| o[0] = op.of(&x[i * c..(i + 1) * c]));
    compare_ref("row_reduce", out, &want, &[rows], tol)
}

/// `rmsnorm`: Y[r, j] = X[r, j] · W[j] / √(Σ X[r, :]² / C + eps), every element compared. `eps` is
/// the value the kernel receives (rounded to its scalar's dtype by the caller).
pub fn rmsnorm(x: &[f32], w: &[f32], y: &[f32], rows: u64, cols: u64, eps: f64, tol: Tolerance) -> CheckReport {
    let (r, c) = (rows as usize, cols as usize);
    assert_eq!(x.len(), r * c, "X has R·C elements");
    assert_eq!(w.len(), c, "W has C elements");
    assert_eq!(y.len(), r * c, "Y has R·C elements");
    let want = per_row(r, c, |i, out| {
        let row = &x[i * c..(i + 1) * c];
        let inv = 1.0 / (dot_f64(row, row) / c as f64 + eps).sqrt();
        for ((o, &v), &g) in out.iter_mut().zip(row).zip(w) {
            *o = f64::from(v) * inv * f64::from(g);
        }
    });
    compare_ref("rmsnorm", y, &want, &[rows, cols], tol)
}

/// `layernorm`: Y[r, j] = (X[r, j] − μ) · W[j] / √(σ² + eps) + B[j], with μ and the population
/// variance σ² of X[r, :] (two passes, fp64); every element compared.
#[allow(clippy::too_many_arguments)]
pub fn layernorm(
    x: &[f32],
    w: &[f32],
    b: &[f32],
    y: &[f32],
    rows: u64,
    cols: u64,
    eps: f64,
    tol: Tolerance,
) -> CheckReport {
    let (r, c) = (rows as usize, cols as usize);
    assert_eq!(x.len(), r * c, "X has R·C elements");
    assert_eq!(w.len(), c, "W has C elements");
    assert_eq!(b.len(), c, "B has C elements");
    assert_eq!(y.len(), r * c, "Y has R·C elements");
    let want = per_row(r, c, |i, out| {
        let row = &x[i * c..(i + 1) * c];
        let mu = row.iter().map(|&v| f64::from(v)).sum::<f64>() / c as f64;
        let var = row.iter().map(|&v| (f64::from(v) - mu).powi(2)).sum::<f64>() / c as f64;
        let inv = 1.0 / (var + eps).sqrt();
        for (((o, &v), &g), &bb) in out.iter_mut().zip(row).zip(w).zip(b) {
            *o = (f64::from(v) - mu) * inv * f64::from(g) + f64::from(bb);
        }
    });
    compare_ref("layernorm", y, &want, &[rows, cols], tol)
}

// ---- elementwise: Z[r, c] = f(X[r, c], Y[r, c], W[c])

/// A variable of the `elementwise` oracle's expression: `x` = X[r, c], `y` = Y[r, c], `w` = W[c].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExprVar {
    X,
    Y,
    W,
}

/// A function of the `elementwise` oracle's expression (see [`ElementExpr`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExprFunc {
    Exp,
    Log,
    Rsqrt,
    Sqrt,
    Abs,
    Max,
    Min,
    Fma,
    Select,
}

impl ExprFunc {
    pub const ALL: [ExprFunc; 9] = [
        ExprFunc::Exp,
        ExprFunc::Log,
        ExprFunc::Rsqrt,
        ExprFunc::Sqrt,
        ExprFunc::Abs,
        ExprFunc::Max,
        ExprFunc::Min,
        ExprFunc::Fma,
        ExprFunc::Select,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ExprFunc::Exp => "exp",
            ExprFunc::Log => "log",
            ExprFunc::Rsqrt => "rsqrt",
            ExprFunc::Sqrt => "sqrt",
            ExprFunc::Abs => "abs",
            ExprFunc::Max => "max",
            ExprFunc::Min => "min",
            ExprFunc::Fma => "fma",
            ExprFunc::Select => "select",
        }
    }

    fn arity(self) -> usize {
        match self {
            ExprFunc::Exp | ExprFunc::Log | ExprFunc::Rsqrt | ExprFunc::Sqrt | ExprFunc::Abs => 1,
            ExprFunc::Max | ExprFunc::Min => 2,
            ExprFunc::Fma | ExprFunc::Select => 3,
        }
    }

    fn signature(self) -> &'static str {
        match self {
            ExprFunc::Max | ExprFunc::Min => "(a, b)",
            ExprFunc::Fma => "(a, b, c) = a·b + c",
            ExprFunc::Select => "(condition, if_true, if_false)",
            _ => "(a)",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CmpOp {
    Gt,
    Lt,
    Ge,
    Le,
}

/// A node of a parsed expression. Parsing checks the types: comparisons (`Cmp`) are booleans and
/// appear only as `select`'s condition; every other node is a number.
#[derive(Clone, Debug, PartialEq)]
enum ExprNode {
    Num(f64),
    Var(ExprVar),
    Neg(Box<ExprNode>),
    Bin(BinOp, Box<ExprNode>, Box<ExprNode>),
    Cmp(CmpOp, Box<ExprNode>, Box<ExprNode>),
    Call(ExprFunc, Vec<ExprNode>),
}

impl ExprNode {
    fn is_bool(&self) -> bool {
        matches!(self, ExprNode::Cmp(..))
    }

    /// The value in fp64 (a number node).
    fn num(&self, v: &[f64; 3]) -> f64 {
        match self {
            ExprNode::Num(n) => *n,
            ExprNode::Var(var) => v[*var as usize],
            ExprNode::Neg(a) => -a.num(v),
            ExprNode::Bin(op, a, b) => {
                let (a, b) = (a.num(v), b.num(v));
                match op {
                    BinOp::Add => a + b,
                    BinOp::Sub => a - b,
                    BinOp::Mul => a * b,
                    BinOp::Div => a / b,
                }
            }
            // Parsing puts comparisons only where a boolean goes; 1 or 0 keeps this total.
            ExprNode::Cmp(..) => f64::from(u8::from(self.truth(v))),
            ExprNode::Call(f, args) => {
                let a = |i: usize| args[i].num(v);
                match f {
                    ExprFunc::Exp => a(0).exp(),
                    ExprFunc::Log => a(0).ln(),
                    ExprFunc::Rsqrt => 1.0 / a(0).sqrt(),
                    ExprFunc::Sqrt => a(0).sqrt(),
                    ExprFunc::Abs => a(0).abs(),
                    ExprFunc::Max => a(0).max(a(1)),
                    ExprFunc::Min => a(0).min(a(1)),
                    ExprFunc::Fma => a(0).mul_add(a(1), a(2)),
                    ExprFunc::Select => {
                        if args[0].truth(v) {
                            a(1)
                        } else {
                            a(2)
                        }
                    }
                }
            }
        }
    }

    /// The truth of a comparison (a boolean node).
    fn truth(&self, v: &[f64; 3]) -> bool {
        match self {
            ExprNode::Cmp(op, a, b) => {
                let (a, b) = (a.num(v), b.num(v));
                match op {
                    CmpOp::Gt => a > b,
                    CmpOp::Lt => a < b,
                    CmpOp::Ge => a >= b,
                    CmpOp::Le => a <= b,
                }
            }
            other => other.num(v) != 0.0,
        }
    }
}

/// Why an `elementwise` expression was refused: `code` names the kind of error (`syntax`,
/// `unknown_name`, `arity`, `type`, `too_deep`), `column` (1-based, in characters) where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExprError {
    pub code: &'static str,
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for ExprError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "column {}: {} [{}]", self.column, self.message, self.code)
    }
}

impl std::error::Error for ExprError {}

/// The `elementwise` oracle's expression Z = f(x, y, w), parsed and evaluated here, in fp64,
/// independently of Cake's own parser and lowering. Grammar (usual precedence, left to right):
///
/// ```text
/// expr  := sum [(">" | "<" | ">=" | "<=") sum]      (a comparison: select's condition only)
/// sum   := prod (("+" | "-") prod)*
/// prod  := unary (("*" | "/") unary)*
/// unary := "-" unary | atom
/// atom  := NUMBER | "x" | "y" | "w" | FUNC "(" expr ("," expr)* ")" | "(" expr ")"
/// FUNC  := exp log rsqrt sqrt abs (one argument) | max min (two) | fma select (three)
/// ```
///
/// `fma(a, b, c)` = a·b + c; `select(c, a, b)` = a where the comparison c holds, else b;
/// `rsqrt(a)` = 1/√a; `log` is the natural logarithm.
#[derive(Clone, Debug, PartialEq)]
pub struct ElementExpr {
    text: String,
    root: ExprNode,
}

/// Deeper nesting than this is refused (the parser and the evaluator recurse).
const EXPR_MAX_DEPTH: usize = 64;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(f64),
    Name(String),
    /// `+ - * / ( ) ,` and the comparisons `> < >= <=`.
    Op(&'static str),
    End,
}

fn tokenize(text: &str) -> Result<Vec<(Tok, usize)>, ExprError> {
    let cs: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        let (c, col) = (cs[i], i + 1);
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || (c == '.' && cs.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let start = i;
            while i < cs.len() && (cs[i].is_ascii_digit() || cs[i] == '.') {
                i += 1;
            }
            // An exponent: e or E, an optional sign, digits.
            if i < cs.len() && (cs[i] == 'e' || cs[i] == 'E') {
                let sign = usize::from(cs.get(i + 1).is_some_and(|s| *s == '+' || *s == '-'));
                if cs.get(i + 1 + sign).is_some_and(char::is_ascii_digit) {
                    i += 1 + sign;
                    while i < cs.len() && cs[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let s: String = cs[start..i].iter().collect();
            let n: f64 = s.parse().map_err(|_| ExprError {
                code: "syntax",
                column: col,
                message: format!("`{s}` is not a number"),
            })?;
            out.push((Tok::Num(n), col));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '_') {
                i += 1;
            }
            out.push((Tok::Name(cs[start..i].iter().collect()), col));
        } else {
            let two = cs.get(i + 1) == Some(&'=');
            let op = match (c, two) {
                ('>', true) => ">=",
                ('<', true) => "<=",
                ('>', false) => ">",
                ('<', false) => "<",
                ('+', _) => "+",
                ('-', _) => "-",
                ('*', _) => "*",
                ('/', _) => "/",
                ('(', _) => "(",
                (')', _) => ")",
                (',', _) => ",",
                _ => {
                    return Err(ExprError {
                        code: "syntax",
                        column: col,
                        message: format!("unexpected character `{c}`"),
                    })
                }
            };
            i += op.len();
            out.push((Tok::Op(op), col));
        }
    }
    out.push((Tok::End, cs.len() + 1));
    Ok(out)
}

struct ExprParser {
    toks: Vec<(Tok, usize)>,
    i: usize,
    depth: usize,
}

impl ExprParser {
    fn peek(&self) -> &Tok {
        &self.toks[self.i].0
    }

    fn column(&self) -> usize {
        self.toks[self.i].1
    }

    fn fail<T>(&self, code: &'static str, column: usize, message: String) -> Result<T, ExprError> {
        Err(ExprError { code, column, message })
    }

    fn describe(t: &Tok) -> String {
        match t {
            Tok::Num(n) => format!("number `{n}`"),
            Tok::Name(n) => format!("`{n}`"),
            Tok::Op(o) => format!("`{o}`"),
            Tok::End => "the end of the expression".into(),
        }
    }

    fn expect(&mut self, op: &'static str, what: &str) -> Result<(), ExprError> {
        if *self.peek() == Tok::Op(op) {
            self.i += 1;
            return Ok(());
        }
        self.fail("syntax", self.column(), format!("expected `{op}` {what}, found {}", Self::describe(self.peek())))
    }

    /// A number operand: a comparison is refused here.
    fn number(&self, node: ExprNode, column: usize, what: &str) -> Result<ExprNode, ExprError> {
        if node.is_bool() {
            return self.fail(
                "type",
                column,
                format!("a comparison is a condition, not a number; it can only be `select`'s first argument ({what})"),
            );
        }
        Ok(node)
    }

    fn expr(&mut self) -> Result<ExprNode, ExprError> {
        self.depth += 1;
        if self.depth > EXPR_MAX_DEPTH {
            return self.fail("too_deep", self.column(), format!("nested more than {EXPR_MAX_DEPTH} deep"));
        }
        let col = self.column();
        let a = self.sum()?;
        let op = match self.peek() {
            Tok::Op(">") => CmpOp::Gt,
            Tok::Op("<") => CmpOp::Lt,
            Tok::Op(">=") => CmpOp::Ge,
            Tok::Op("<=") => CmpOp::Le,
            _ => {
                self.depth -= 1;
                return Ok(a);
            }
        };
        let a = self.number(a, col, "compared")?;
        self.i += 1;
        let col = self.column();
        let b = self.sum()?;
        let b = self.number(b, col, "compared")?;
        if let Tok::Op(o @ (">" | "<" | ">=" | "<=")) = self.peek() {
            return self.fail("type", self.column(), format!("comparisons do not chain (`{o}` after a comparison)"));
        }
        self.depth -= 1;
        Ok(ExprNode::Cmp(op, Box::new(a), Box::new(b)))
    }

    fn sum(&mut self) -> Result<ExprNode, ExprError> {
        self.left_assoc([("+", BinOp::Add), ("-", BinOp::Sub)], "an operand of + or -", Self::prod)
    }

    fn prod(&mut self) -> Result<ExprNode, ExprError> {
        self.left_assoc([("*", BinOp::Mul), ("/", BinOp::Div)], "an operand of * or /", Self::unary)
    }

    /// One precedence level of left-associative numeric operators over operands parsed by `next`.
    fn left_assoc(
        &mut self,
        ops: [(&str, BinOp); 2],
        what: &str,
        next: fn(&mut Self) -> Result<ExprNode, ExprError>,
    ) -> Result<ExprNode, ExprError> {
        let col = self.column();
        let mut a = next(self)?;
        loop {
            let Tok::Op(o) = self.peek() else { break };
            let Some(&(_, op)) = ops.iter().find(|(s, _)| s == o) else { break };
            a = self.number(a, col, what)?;
            self.i += 1;
            let col = self.column();
            let b = next(self)?;
            let b = self.number(b, col, what)?;
            a = ExprNode::Bin(op, Box::new(a), Box::new(b));
        }
        Ok(a)
    }

    fn unary(&mut self) -> Result<ExprNode, ExprError> {
        if *self.peek() == Tok::Op("-") {
            self.i += 1;
            self.depth += 1;
            if self.depth > EXPR_MAX_DEPTH {
                return self.fail("too_deep", self.column(), format!("nested more than {EXPR_MAX_DEPTH} deep"));
            }
            let col = self.column();
            let a = self.unary()?;
            let a = self.number(a, col, "negated")?;
            self.depth -= 1;
            return Ok(ExprNode::Neg(Box::new(a)));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<ExprNode, ExprError> {
        let (tok, col) = self.toks[self.i].clone();
        match tok {
            Tok::Num(n) => {
                self.i += 1;
                Ok(ExprNode::Num(n))
            }
            Tok::Op("(") => {
                self.i += 1;
                let e = self.expr()?;
                self.expect(")", "to close the `(`")?;
                Ok(e)
            }
            Tok::Name(name) => {
                self.i += 1;
                let var = match name.as_str() {
                    "x" => Some(ExprVar::X),
                    "y" => Some(ExprVar::Y),
                    "w" => Some(ExprVar::W),
                    _ => None,
                };
                let func = ExprFunc::ALL.into_iter().find(|f| f.name() == name);
                let call = *self.peek() == Tok::Op("(");
                match (var, func, call) {
                    (Some(v), _, false) => Ok(ExprNode::Var(v)),
                    (Some(_), _, true) => self.fail("syntax", col, format!("`{name}` is a variable, not a function")),
                    (None, Some(f), true) => self.call(f, col),
                    (None, Some(f), false) => self.fail(
                        "syntax",
                        col,
                        format!("`{name}` is a function: call it as `{name}{}`", f.signature()),
                    ),
                    (None, None, _) => {
                        let funcs: Vec<&str> = ExprFunc::ALL.iter().map(|f| f.name()).collect();
                        self.fail(
                            "unknown_name",
                            col,
                            format!("unknown name `{name}` (variables: x, y, w; functions: {})", funcs.join(", ")),
                        )
                    }
                }
            }
            other => self.fail("syntax", col, format!("expected a number, a name or `(`, found {}", Self::describe(&other))),
        }
    }

    fn call(&mut self, f: ExprFunc, col: usize) -> Result<ExprNode, ExprError> {
        self.i += 1; // (
        let mut args = Vec::new();
        if *self.peek() != Tok::Op(")") {
            loop {
                let acol = self.column();
                let a = self.expr()?;
                let condition = f == ExprFunc::Select && args.is_empty();
                if condition && !a.is_bool() {
                    return self.fail("type", acol, "`select`'s first argument must be a comparison (`a > b`, `a <= b`, ...)".into());
                }
                if !condition {
                    args.push(self.number(a, acol, &format!("an argument of `{}`", f.name()))?);
                } else {
                    args.push(a);
                }
                if *self.peek() == Tok::Op(",") {
                    self.i += 1;
                } else {
                    break;
                }
            }
        }
        self.expect(")", &format!("to close the call of `{}`", f.name()))?;
        if args.len() != f.arity() {
            return self.fail(
                "arity",
                col,
                format!("`{}` takes {} argument(s), `{}{}`; given {}", f.name(), f.arity(), f.name(), f.signature(), args.len()),
            );
        }
        Ok(ExprNode::Call(f, args))
    }
}

impl ElementExpr {
    /// Parse (and type-check) an expression; every error is an [`ExprError`], never a panic.
    pub fn parse(text: &str) -> Result<ElementExpr, ExprError> {
        let mut p = ExprParser { toks: tokenize(text)?, i: 0, depth: 0 };
        if p.toks.len() == 1 {
            return p.fail("syntax", 1, "the expression is empty".into());
        }
        let col = p.column();
        let root = p.expr()?;
        if *p.peek() != Tok::End {
            return p.fail("syntax", p.column(), format!("unexpected {} after a complete expression", ExprParser::describe(p.peek())));
        }
        let root = p.number(root, col, "the result Z must be a number; use `select(condition, a, b)`")?;
        Ok(ElementExpr { text: text.to_string(), root })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// f(x, y, w) in fp64.
    pub fn eval(&self, x: f64, y: f64, w: f64) -> f64 {
        self.root.num(&[x, y, w])
    }
}

/// `elementwise`: Z[r, c] = f(X[r, c], Y[r, c], W[c]) for row-major X, Y, Z of `rows` × `cols` and
/// W of `cols`, `f` evaluated in fp64 from the inputs as uploaded; every element is compared. An
/// element where the reference itself is not finite (the expression undefined at those inputs, e.g.
/// `rsqrt` of a negative) is a mismatch with a note saying so: the workload's inputs must keep
/// the expression defined.
#[allow(clippy::too_many_arguments)]
pub fn elementwise(
    expr: &ElementExpr,
    x: &[f32],
    y: &[f32],
    w: &[f32],
    z: &[f32],
    rows: u64,
    cols: u64,
    tol: Tolerance,
) -> CheckReport {
    let (r, c) = (rows as usize, cols as usize);
    assert_eq!(x.len(), r * c, "X has R·C elements");
    assert_eq!(y.len(), r * c, "Y has R·C elements");
    assert_eq!(w.len(), c, "W has C elements");
    assert_eq!(z.len(), r * c, "Z has R·C elements");
    let want = per_row(r, c, |i, out| {
        let (xr, yr) = (&x[i * c..(i + 1) * c], &y[i * c..(i + 1) * c]);
        for (j, o) in out.iter_mut().enumerate() {
            *o = expr.eval(f64::from(xr[j]), f64::from(yr[j]), f64::from(w[j]));
        }
    });
    let (mut sumsq, mut finite) = (0.0f64, 0usize);
    for v in want.iter().filter(|v| v.is_finite()) {
        sumsq += v * v;
        finite += 1;
    }
    let rms = if finite == 0 { 0.0 } else { (sumsq / finite as f64).sqrt() };
    let mut cmp = Comparer::new("elementwise", tol, rms);
    let shape = [rows, cols];
    for (flat, (&g, &v)) in z.iter().zip(&want).enumerate() {
        let index = || unflatten(flat as u64, &shape);
        if v.is_finite() {
            cmp.add(index, f64::from(g), v);
        } else {
            cmp.report.checked += 1;
            let note = format!("the reference `{}` is not finite at these inputs; the workload's inputs must keep it defined", expr.text());
            cmp.bad(index(), f64::from(g), v, Some(note));
        }
    }
    cmp.finish(z)
}

/// Flat row-major index → multi-index (outermost first).
pub fn unflatten(mut flat: u64, shape: &[u64]) -> Vec<u64> {
    let mut idx = vec![0; shape.len()];
    for (slot, &d) in idx.iter_mut().zip(shape).rev() {
        if d > 0 {
            *slot = flat % d;
            flat /= d;
        }
    }
    idx
}

/// An arg-min a kernel chose, and what the fp64 reference found.
struct ArgChoice {
    chosen: i32,
    best: u64,
    d_chosen: f64,
    d_min: f64,
    /// How far above the minimum the chosen distance may be (a tie within rounding).
    allowed: f64,
}

/// Judge one arg-min choice into `report` (at `index`): a chosen distance more than `allowed`
/// above the minimum is a mismatch, a different index within it an accepted tie. `chosen_what` /
/// `min_what` name the two distances in the mismatch's note.
fn judge_arg_choice(report: &mut CheckReport, index: Vec<u64>, c: &ArgChoice, chosen_what: &str, min_what: &str) {
    let gap = c.d_chosen - c.d_min;
    report.max_abs_err = report.max_abs_err.max(gap);
    if c.allowed > 0.0 {
        report.max_err_over_tol = report.max_err_over_tol.max(gap / c.allowed);
    }
    if gap > c.allowed {
        report.mismatches += 1;
        report.first_bad.push(BadElement {
            index,
            got: f64::from(c.chosen),
            want: c.best as f64,
            note: Some(format!(
                "distance to the {chosen_what} {:.6} exceeds the {min_what} {:.6} by {:.3e} (allowed {:.3e})",
                c.d_chosen, c.d_min, gap, c.allowed
            )),
        });
    } else if c.chosen as u64 != c.best {
        report.ties_accepted += 1;
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn matmul_ref(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
        let mut c = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = dot_f64(&a[i * k..(i + 1) * k], &b[j * k..(j + 1) * k]) as f32;
            }
        }
        c
    }

    fn data(len: usize, seed: u64) -> Vec<f32> {
        let mut r = Rng::new(seed);
        (0..len).map(|_| r.normal_pair().0 as f32).collect()
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

    #[test]
    fn full_comparison_reports_indices() {
        let want = vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let mut got = want.clone();
        got[4] = 9.0;
        let r = compare_full("cublas", &got, &want, &[2, 3], Tolerance::MATMUL_BF16);
        assert!(!r.passed);
        assert_eq!(r.mismatches, 1);
        assert_eq!(r.first_bad[0].index, vec![1, 1]);
        assert!(compare_full("cublas", &want, &want, &[2, 3], Tolerance::MATMUL_BF16).passed);
    }

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
    fn row_sqnorm_sums_squares_of_the_last_axis() {
        assert_eq!(row_sqnorm(&[1.0, 2.0, 3.0, 4.0], 2), vec![5.0, 25.0]);
    }

    #[test]
    fn unflatten_is_row_major() {
        assert_eq!(unflatten(7, &[2, 3, 4]), vec![0, 1, 3]);
        assert_eq!(unflatten(23, &[2, 3, 4]), vec![1, 2, 3]);
    }

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

    #[test]
    fn a_wholly_wrong_output_keeps_only_the_first_bad_elements() {
        let want = data(10_000, 18);
        let got: Vec<f32> = want.iter().map(|v| v + 1.0).collect();
        let r = copy(&want, &got, &[100, 100]);
        assert_eq!(r.mismatches, 10_000);
        let at: Vec<_> = r.first_bad.iter().map(|e| e.index.clone()).collect();
        assert_eq!(at, (0..MAX_REPORTED as u64).map(|j| vec![0, j]).collect::<Vec<_>>());
    }

    // ---- row kernels: softmax, row_reduce, rmsnorm, layernorm

    /// `v` rounded to `dtype` (what a kernel's store, or the input generator, makes of it).
    fn rounded(dtype: DType, v: f32) -> f32 {
        let mut b = [0u8; 4];
        let n = dtype.size_bytes() as usize;
        crate::runtime::convert::store(dtype, f64::from(v), &mut b[..n]);
        crate::runtime::convert::load(dtype, &b[..n]) as f32
    }

    /// Normal data rounded to `dtype`, as the GPU reads it.
    fn inputs(dtype: DType, len: usize, seed: u64) -> Vec<f32> {
        data(len, seed).into_iter().map(|v| rounded(dtype, v)).collect()
    }

    /// What a kernel computes: f32 math, row by row, each result stored as `out` (an
    /// implementation of its own, in f32, not the oracle's fp64).
    fn kernel_rows(x: &[f32], cols: usize, out: DType, f: impl Fn(&[f32]) -> Vec<f32>) -> Vec<f32> {
        x.chunks(cols).flat_map(f).map(|v| rounded(out, v)).collect()
    }

    fn softmax_f32(row: &[f32]) -> Vec<f32> {
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f32> = row.iter().map(|&v| (v - m).exp()).collect();
        let s: f32 = e.iter().sum();
        e.iter().map(|v| v / s).collect()
    }

    fn reduce_f32(op: RowReduce, row: &[f32]) -> f32 {
        match op {
            RowReduce::Sum => row.iter().sum(),
            RowReduce::Mean => row.iter().sum::<f32>() / row.len() as f32,
            RowReduce::Max => row.iter().copied().fold(f32::NEG_INFINITY, f32::max),
            RowReduce::Min => row.iter().copied().fold(f32::INFINITY, f32::min),
            RowReduce::Sqnorm => row.iter().map(|v| v * v).sum(),
            RowReduce::L2norm => row.iter().map(|v| v * v).sum::<f32>().sqrt(),
            RowReduce::Absmax => row.iter().map(|v| v.abs()).fold(0.0, f32::max),
        }
    }

    fn rmsnorm_f32(row: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
        let ms = row.iter().map(|v| v * v).sum::<f32>() / row.len() as f32;
        let inv = 1.0 / (ms + eps).sqrt();
        row.iter().zip(w).map(|(v, g)| v * inv * g).collect()
    }

    /// LayerNorm in f32, dividing the squared deviations by `div` (C: population variance).
    fn layernorm_f32(row: &[f32], w: &[f32], b: &[f32], eps: f32, div: f32) -> Vec<f32> {
        let mu = row.iter().sum::<f32>() / row.len() as f32;
        let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f32>() / div;
        let inv = 1.0 / (var + eps).sqrt();
        row.iter().zip(w).zip(b).map(|((v, g), bb)| (v - mu) * inv * g + bb).collect()
    }

    /// A correct output passes, every element checked; each of three faults fails with its index:
    /// row 2 holding row 5's result, two neighbours of row 3 swapped, and one element of row 6 left
    /// unwritten (the NaN poison). `width` is the output's row length (1: one value per row).
    fn catches_the_usual_faults(good: &[f32], width: usize, check: impl Fn(&[f32]) -> CheckReport) {
        let index = |flat: usize| {
            if width == 1 {
                vec![flat as u64]
            } else {
                vec![(flat / width) as u64, (flat % width) as u64]
            }
        };
        let r = check(good);
        assert!(r.passed, "{r:?}");
        assert_eq!((r.checked as usize, r.mismatches, r.nonfinite), (good.len(), 0, 0));
        assert!(r.max_err_over_tol <= 1.0);

        let mut wrong_row = good.to_vec();
        wrong_row.copy_within(5 * width..6 * width, 2 * width);
        let r = check(&wrong_row);
        assert!(!r.passed, "row 2 holds row 5's result: {r:?}");
        assert!(r.first_bad.iter().all(|e| e.index[0] == 2), "{:?}", r.first_bad);
        assert!(r.mismatches as usize * 2 > width, "most of the row is wrong: {r:?}");

        let (a, b) = if width == 1 { (3, 4) } else { (3 * width + 1, 3 * width + 2) };
        let mut swapped = good.to_vec();
        swapped.swap(a, b);
        let r = check(&swapped);
        assert!(!r.passed);
        assert_eq!((r.mismatches, r.nonfinite), (2, 0), "{r:?}");
        let at: Vec<_> = r.first_bad.iter().map(|e| e.index.clone()).collect();
        assert_eq!(at, vec![index(a), index(b)]);
        assert_eq!(r.first_bad[0].got, f64::from(good[b]));

        let mut unwritten = good.to_vec();
        let hole = 6 * width + width / 2;
        unwritten[hole] = f32::NAN;
        let r = check(&unwritten);
        assert!(!r.passed);
        assert_eq!((r.mismatches, r.nonfinite), (1, 1), "{r:?}");
        assert_eq!(r.first_bad.len(), 1);
        assert_eq!(r.first_bad[0].index, index(hole));
        assert!(r.first_bad[0].got.is_nan() && r.first_bad[0].want.is_finite());
    }

    const ROW_DTYPES: [DType; 3] = [DType::BF16, DType::F16, DType::F32];

    #[test]
    fn row_tolerances_follow_the_output_dtype() {
        assert_eq!(Tolerance::for_row_output(DType::BF16), Tolerance::ROW_BF16);
        assert_eq!(Tolerance::for_row_output(DType::F16), Tolerance::ROW_F16);
        assert_eq!(Tolerance::for_row_output(DType::F32), Tolerance::ROW_F32);
        // Tighter as the output gets more precise; half an ulp of each format fits its rtol.
        let rtols = [Tolerance::ROW_F32, Tolerance::ROW_F16, Tolerance::ROW_BF16].map(|t| t.rtol);
        assert!(rtols.windows(2).all(|w| w[0] < w[1]), "{rtols:?}");
        assert!(2f64.powi(-8) < Tolerance::ROW_BF16.rtol && Tolerance::ROW_BF16.rtol < 1.5 * 2f64.powi(-8));
        assert!(2f64.powi(-11) < Tolerance::ROW_F16.rtol && Tolerance::ROW_F16.rtol < 2f64.powi(-8));
        assert!(!Tolerance::ROW_F32.is_exact());
    }

    #[test]
    fn softmax_accepts_f32_math_in_every_output_dtype_and_catches_faults() {
        let (rows, cols) = (16usize, 96usize);
        for dt in ROW_DTYPES {
            let x = inputs(dt, rows * cols, 21);
            let y = kernel_rows(&x, cols, dt, softmax_f32);
            let tol = Tolerance::for_row_output(dt);
            catches_the_usual_faults(&y, cols, |y| softmax(&x, y, rows as u64, cols as u64, tol));
            assert_eq!(softmax(&x, &y, rows as u64, cols as u64, tol).oracle, "softmax");
        }
    }

    #[test]
    fn softmax_rejects_what_is_not_a_softmax() {
        let (rows, cols) = (8usize, 64usize);
        let x = inputs(DType::F32, rows * cols, 22);
        let check = |y: &[f32]| softmax(&x, y, rows as u64, cols as u64, Tolerance::ROW_F32);
        // exp without the division by the sum; a sum over the wrong axis (the column).
        let unnormalized = kernel_rows(&x, cols, DType::F32, |r| {
            let m = r.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            r.iter().map(|&v| (v - m).exp()).collect()
        });
        assert!(!check(&unnormalized).passed);
        let mut by_column = vec![0f32; rows * cols];
        for j in 0..cols {
            let col: Vec<f32> = (0..rows).map(|i| x[i * cols + j]).collect();
            for (i, v) in softmax_f32(&col).into_iter().enumerate() {
                by_column[i * cols + j] = v;
            }
        }
        assert!(!check(&by_column).passed);
    }

    #[test]
    fn output_rounding_within_the_format_passes_and_two_ulps_fail() {
        let (rows, cols) = (8usize, 64usize);
        let x = inputs(DType::BF16, rows * cols, 23);
        let mut y = kernel_rows(&x, cols, DType::BF16, softmax_f32);
        let check = |y: &[f32], tol| softmax(&x, y, rows as u64, cols as u64, tol);
        let r = check(&y, Tolerance::ROW_BF16);
        assert!(r.passed && r.rel_l2_err > 1e-4, "bf16 rounding shows, within tolerance: {r:?}");
        // The same bf16 output is far outside the f32 tolerance.
        assert!(!check(&y, Tolerance::ROW_F32).passed);
        // Two bf16 ulps off, at the largest element of row 4 (above the RMS).
        let j = (0..cols).max_by(|&a, &b| y[4 * cols + a].total_cmp(&y[4 * cols + b])).unwrap();
        let i = 4 * cols + j;
        y[i] = f32::from_bits(y[i].to_bits() + (2 << 16));
        let r = check(&y, Tolerance::ROW_BF16);
        assert_eq!((r.passed, r.mismatches), (false, 1));
        assert_eq!(r.first_bad[0].index, vec![4, j as u64]);
        // f32: 1e-4 relative off one element fails.
        let x = inputs(DType::F32, rows * cols, 24);
        let mut y = kernel_rows(&x, cols, DType::F32, softmax_f32);
        assert!(check_f32(&x, &y, rows, cols).passed);
        y[cols + 3] *= 1.0 + 1e-4;
        let r = check_f32(&x, &y, rows, cols);
        assert_eq!((r.passed, r.mismatches), (false, 1));
        assert_eq!(r.first_bad[0].index, vec![1, 3]);
    }

    fn check_f32(x: &[f32], y: &[f32], rows: usize, cols: usize) -> CheckReport {
        softmax(x, y, rows as u64, cols as u64, Tolerance::ROW_F32)
    }

    #[test]
    fn row_reduce_accepts_each_reduction_and_catches_faults() {
        let (rows, cols) = (12usize, 200usize);
        for dt in ROW_DTYPES {
            let x = inputs(dt, rows * cols, 25);
            for op in RowReduce::ALL {
                let out = kernel_rows(&x, cols, DType::F32, |r| vec![reduce_f32(op, r)]);
                catches_the_usual_faults(&out, 1, |o| row_reduce(op, &x, o, rows as u64, cols as u64, Tolerance::ROW_F32));
            }
        }
    }

    #[test]
    fn row_reduce_tells_the_reductions_apart() {
        let (rows, cols) = (16usize, 64usize);
        let x = inputs(DType::BF16, rows * cols, 26);
        for got in RowReduce::ALL {
            let out = kernel_rows(&x, cols, DType::F32, |r| vec![reduce_f32(got, r)]);
            for want in RowReduce::ALL {
                let r = row_reduce(want, &x, &out, rows as u64, cols as u64, Tolerance::ROW_F32);
                assert_eq!(r.passed, got == want, "{} checked as {}: {r:?}", got.name(), want.name());
            }
        }
        // f64 reference values: the mean divides by C; absmax is the magnitude.
        assert_eq!(RowReduce::Mean.of(&[1.0, 2.0, 6.0]), 3.0);
        assert_eq!(RowReduce::Absmax.of(&[1.0, -7.0, 6.0]), 7.0);
        assert_eq!(RowReduce::L2norm.of(&[3.0, -4.0]), 5.0);
        assert_eq!(RowReduce::Min.of(&[3.0, -4.0]), -4.0);
    }

    #[test]
    fn rmsnorm_accepts_f32_math_in_every_output_dtype_and_catches_faults() {
        let (rows, cols) = (16usize, 128usize);
        let eps = 1e-5f32;
        for dt in ROW_DTYPES {
            let x = inputs(dt, rows * cols, 27);
            // A bf16 gain, as one corpus instance has it (any rounded values are fine).
            let w: Vec<f32> = data(cols, 28).into_iter().map(|v| rounded(DType::BF16, 1.0 + 0.5 * v)).collect();
            let y = kernel_rows(&x, cols, dt, |r| rmsnorm_f32(r, &w, eps));
            let tol = Tolerance::for_row_output(dt);
            catches_the_usual_faults(&y, cols, |y| rmsnorm(&x, &w, y, rows as u64, cols as u64, f64::from(eps), tol));
        }
    }

    #[test]
    fn rmsnorm_needs_the_gain_and_eps() {
        let (rows, cols) = (8usize, 64usize);
        let x = inputs(DType::F32, rows * cols, 29);
        let w: Vec<f32> = data(cols, 30).into_iter().map(|v| 1.0 + 0.5 * v).collect();
        let check = |x: &[f32], y: &[f32], eps: f32| rmsnorm(x, &w, y, rows as u64, cols as u64, f64::from(eps), Tolerance::ROW_F32);
        let ones = vec![1f32; cols];
        let no_gain = kernel_rows(&x, cols, DType::F32, |r| rmsnorm_f32(r, &ones, 1e-5));
        assert!(!check(&x, &no_gain, 1e-5).passed);
        // Rows of small values (mean square 1e-6): eps = 1e-6 halves the normalizer, and a kernel
        // that drops it is caught.
        let small: Vec<f32> = x.iter().map(|v| v * 1e-3).collect();
        let with_eps = kernel_rows(&small, cols, DType::F32, |r| rmsnorm_f32(r, &w, 1e-6));
        let without = kernel_rows(&small, cols, DType::F32, |r| rmsnorm_f32(r, &w, 0.0));
        assert!(check(&small, &with_eps, 1e-6).passed);
        assert!(!check(&small, &without, 1e-6).passed);
    }

    #[test]
    fn layernorm_accepts_f32_math_in_every_output_dtype_and_catches_faults() {
        let (rows, cols) = (16usize, 160usize);
        let eps = 1e-5f32;
        for dt in ROW_DTYPES {
            // Rows with an offset, so the centering matters.
            let x: Vec<f32> = inputs(dt, rows * cols, 31).into_iter().map(|v| rounded(dt, v + 3.0)).collect();
            let w: Vec<f32> = data(cols, 32).into_iter().map(|v| 1.0 + 0.5 * v).collect();
            let b: Vec<f32> = data(cols, 33).into_iter().map(|v| 0.1 * v).collect();
            let y = kernel_rows(&x, cols, dt, |r| layernorm_f32(r, &w, &b, eps, cols as f32));
            let tol = Tolerance::for_row_output(dt);
            catches_the_usual_faults(&y, cols, |y| layernorm(&x, &w, &b, y, rows as u64, cols as u64, f64::from(eps), tol));
        }
    }

    #[test]
    fn layernorm_uses_the_population_variance_and_the_bias() {
        let (rows, cols) = (8usize, 64usize);
        let x = inputs(DType::BF16, rows * cols, 34);
        let w: Vec<f32> = data(cols, 35).into_iter().map(|v| 1.0 + 0.5 * v).collect();
        let b: Vec<f32> = data(cols, 36).into_iter().map(|v| 0.5 * v).collect();
        let zeros = vec![0f32; cols];
        let check = |y: &[f32]| layernorm(&x, &w, &b, y, rows as u64, cols as u64, 1e-5, Tolerance::ROW_BF16);
        let good = kernel_rows(&x, cols, DType::BF16, |r| layernorm_f32(r, &w, &b, 1e-5, cols as f32));
        assert!(check(&good).passed);
        // The sample variance (÷ (C − 1)) scales every output by √(63/64): 0.8 %, over bf16's 0.5 %.
        let sample = kernel_rows(&x, cols, DType::BF16, |r| layernorm_f32(r, &w, &b, 1e-5, cols as f32 - 1.0));
        assert!(!check(&sample).passed);
        let no_bias = kernel_rows(&x, cols, DType::BF16, |r| layernorm_f32(r, &w, &zeros, 1e-5, cols as f32));
        assert!(!check(&no_bias).passed);
    }

    // ---- elementwise

    fn ev(text: &str, x: f64, y: f64, w: f64) -> f64 {
        ElementExpr::parse(text).unwrap_or_else(|e| panic!("{text}: {e}")).eval(x, y, w)
    }

    #[test]
    fn element_expressions_evaluate_with_the_usual_precedence() {
        assert_eq!(ev("1 + 2 * 3", 0.0, 0.0, 0.0), 7.0);
        assert_eq!(ev("(1 + 2) * 3", 0.0, 0.0, 0.0), 9.0);
        assert_eq!(ev("8 / 4 / 2", 0.0, 0.0, 0.0), 1.0, "left to right");
        assert_eq!(ev("8 - 4 - 2", 0.0, 0.0, 0.0), 2.0, "left to right");
        assert_eq!(ev("x - y * w", 10.0, 2.0, 3.0), 4.0);
        // Unary minus binds tighter than * and applies to calls and parentheses.
        assert_eq!(ev("-1.702 * x", 2.0, 0.0, 0.0), -3.404);
        assert_eq!(ev("-x * -y", 2.0, 3.0, 0.0), 6.0);
        assert_eq!(ev("2 - -x", 3.0, 0.0, 0.0), 5.0);
        assert_eq!(ev("-(x + y)", 1.0, 2.0, 0.0), -3.0);
        assert_eq!(ev("- - x", 4.0, 0.0, 0.0), 4.0);
        assert_eq!(ev("1.5e1 + .5 + 2E-1", 0.0, 0.0, 0.0), 15.7);
        // fma(a, b, c) = a·b + c, whatever the order of the variables.
        assert_eq!(ev("fma(w, x, y)", 2.0, 1.0, 3.0), 7.0);
        assert_eq!(ev("fma(x, y, w)", 2.0, 3.0, 1.0), 7.0);
        // select takes its second argument where the comparison holds.
        let leaky = "select(x + y > 0.0, x + y, 0.01 * (x + y)) * w";
        assert_eq!(ev(leaky, 1.0, 2.0, 2.0), 6.0);
        assert_eq!(ev(leaky, -1.0, -2.0, 2.0), -0.06);
        assert_eq!(ev("select(x >= 1, 1, 0) + select(x <= 1, 10, 0) + select(x < 1, 100, 0)", 1.0, 0.0, 0.0), 11.0);
        assert_eq!(ev("select((x > y), x, y)", 1.0, 5.0, 0.0), 5.0);
        assert_eq!(ev("min(max(x, 0.0 - w), w) + 0.5 * y", 3.0, 1.0, 2.0), 2.5);
        assert_eq!(ev("min(max(x, 0.0 - w), w)", -3.0, 0.0, 2.0), -2.0);
        assert_eq!(ev("abs(x) + sqrt(y) + rsqrt(w)", -1.0, 9.0, 4.0), 4.5);
        assert!((ev("log(1.0 + exp(x)) * y", 0.0, 2.0, 0.0) - 2.0 * 2f64.ln()).abs() < 1e-15);
        assert!((ev("x / (1.0 + exp(0.0 - x)) * y", 1.0, 1.0, 0.0) - 1.0 / (1.0 + (-1f64).exp())).abs() < 1e-15);
    }

    #[test]
    fn bad_element_expressions_are_coded_errors() {
        let e = |t: &str| ElementExpr::parse(t).unwrap_err();
        let m = e("x + q");
        assert_eq!((m.code, m.column), ("unknown_name", 5));
        assert!(m.message.contains("unknown name `q` (variables: x, y, w; functions: exp, log"), "{m}");
        assert_eq!(e("tanh(x)").code, "unknown_name");
        assert_eq!(e("").code, "syntax");
        assert_eq!(e("x +").code, "syntax");
        assert_eq!(e("(x + y").code, "syntax");
        assert_eq!(e("x y").code, "syntax");
        assert_eq!(e("x ^ 2").code, "syntax");
        assert_eq!(e("1.2.3").code, "syntax");
        assert_eq!(e("x(1)").code, "syntax");
        assert!(e("exp").message.contains("call it as `exp(a)`"));
        let m = e("fma(x, y)");
        assert_eq!((m.code, m.column), ("arity", 1));
        assert_eq!(e("max(x)").code, "arity");
        assert_eq!(e("exp()").code, "arity");
        // Types: a comparison is only select's condition, and select's condition is one.
        assert_eq!(e("x > y").code, "type");
        assert_eq!(e("(x > y) * 2").code, "type");
        assert_eq!(e("select(x, y, w)").code, "type");
        assert_eq!(e("select(x > 0, y > 0, w)").code, "type");
        assert_eq!(e("select(x > y > w, 1, 2)").code, "type");
        // Deep nesting is refused, not a stack overflow.
        let deep = format!("{}x{}", "(".repeat(10_000), ")".repeat(10_000));
        assert_eq!(e(&deep).code, "too_deep");
        assert_eq!(e(&format!("{}x", "-".repeat(10_000))).code, "too_deep");
        assert!(e("x + q").to_string().contains("column 5"));
    }

    /// An elementwise kernel's arithmetic, written in f32 (as the GPU computes it), stored as `out`.
    fn kernel_elementwise(x: &[f32], y: &[f32], w: &[f32], out: DType, f: impl Fn(f32, f32, f32) -> f32) -> Vec<f32> {
        let c = w.len();
        x.iter().zip(y).enumerate().map(|(i, (&a, &b))| rounded(out, f(a, b, w[i % c]))).collect()
    }

    #[test]
    fn elementwise_accepts_f32_math_in_every_output_dtype_and_catches_faults() {
        let (rows, cols) = (16usize, 96usize);
        type F = fn(f32, f32, f32) -> f32;
        let graphs: [(&str, F); 5] = [
            ("x / (1.0 + exp(0.0 - x)) * y", |x, y, _| x / (1.0 + (-x).exp()) * y),
            ("fma(w, x, y)", |x, y, w| w.mul_add(x, y)),
            ("select(x + y > 0.0, x + y, 0.01 * (x + y)) * w", |x, y, w| {
                let s = x + y;
                (if s > 0.0 { s } else { 0.01 * s }) * w
            }),
            ("min(max(x, 0.0 - w), w) + 0.5 * y", |x, y, w| x.max(-w).min(w) + 0.5 * y),
            ("x * rsqrt(y * y + w)", |x, y, w| x / (y * y + w).sqrt()),
        ];
        for dt in ROW_DTYPES {
            let x = inputs(dt, rows * cols, 41);
            let y = inputs(dt, rows * cols, 42);
            // W in [0.5, 1.5): rsqrt(y² + w) stays defined.
            let w: Vec<f32> = data(cols, 43).into_iter().map(|v| 1.0 + 0.25 * v.clamp(-2.0, 2.0)).collect();
            let tol = Tolerance::for_row_output(dt);
            for (text, f) in graphs {
                let expr = ElementExpr::parse(text).unwrap();
                let z = kernel_elementwise(&x, &y, &w, dt, f);
                catches_the_usual_faults(&z, cols, |z| elementwise(&expr, &x, &y, &w, z, rows as u64, cols as u64, tol));
                // One wrong element (a tenth off) fails, with its index.
                let mut wrong = z.clone();
                let at = 7 * cols + 5;
                wrong[at] = rounded(dt, wrong[at] * 1.1 + 0.1);
                let r = elementwise(&expr, &x, &y, &w, &wrong, rows as u64, cols as u64, tol);
                assert_eq!((r.passed, r.mismatches), (false, 1), "{text}: {r:?}");
                assert_eq!(r.first_bad[0].index, vec![7, 5]);
                assert_eq!(r.oracle, "elementwise");
            }
        }
    }

    #[test]
    fn elementwise_tells_the_graphs_apart() {
        let (rows, cols) = (8usize, 64usize);
        let x = inputs(DType::BF16, rows * cols, 44);
        let y = inputs(DType::BF16, rows * cols, 45);
        let w: Vec<f32> = data(cols, 46);
        let check = |text: &str, z: &[f32]| {
            elementwise(&ElementExpr::parse(text).unwrap(), &x, &y, &w, z, rows as u64, cols as u64, Tolerance::ROW_BF16)
        };
        let fma = kernel_elementwise(&x, &y, &w, DType::BF16, |x, y, w| w * x + y);
        assert!(check("fma(w, x, y)", &fma).passed);
        assert!(!check("fma(x, y, w)", &fma).passed, "x·y + w is another graph");
        assert!(!check("fma(w, y, x)", &fma).passed, "the operands swapped");
        // Leaky ReLU: a kernel with the slope on the wrong side of the select.
        let flipped = kernel_elementwise(&x, &y, &w, DType::BF16, |x, y, w| {
            let s = x + y;
            (if s > 0.0 { 0.01 * s } else { s }) * w
        });
        assert!(!check("select(x + y > 0.0, x + y, 0.01 * (x + y)) * w", &flipped).passed);
        // W broadcast over rows, not read along the row index.
        let by_row: Vec<f32> = x.iter().zip(&y).enumerate().map(|(i, (a, b))| rounded(DType::BF16, w[i / cols] * a + b)).collect();
        assert!(!check("fma(w, x, y)", &by_row).passed);
    }

    #[test]
    fn an_undefined_reference_is_a_named_mismatch() {
        // rsqrt of a negative: the reference is NaN there; the element fails with a note, the rest
        // are still compared against the RMS of the finite reference values.
        let (rows, cols) = (2usize, 4usize);
        let x = vec![1.0f32; rows * cols];
        let y = vec![0.0f32; rows * cols];
        let w = vec![4.0f32, 4.0, -1.0, 4.0];
        let expr = ElementExpr::parse("x * rsqrt(y * y + w)").unwrap();
        let z: Vec<f32> = w.iter().cycle().take(rows * cols).map(|&v| if v > 0.0 { 0.5 } else { 7.0 }).collect();
        let r = elementwise(&expr, &x, &y, &w, &z, rows as u64, cols as u64, Tolerance::ROW_F32);
        assert!(!r.passed);
        assert_eq!((r.checked, r.mismatches, r.nonfinite), (8, 2, 0), "{r:?}");
        assert_eq!(r.first_bad.iter().map(|b| b.index.clone()).collect::<Vec<_>>(), vec![vec![0, 2], vec![1, 2]]);
        assert!(r.first_bad[0].note.as_deref().unwrap().contains("not finite at these inputs"));
        assert!(r.max_abs_err.is_finite() && r.rel_l2_err.is_finite(), "{r:?}");
    }

    #[test]
    fn a_report_with_non_finite_numbers_survives_json() {
        // An unwritten element: got NaN, an infinite error; JSON writes both as `null`.
        let want = vec![1.0f32, 2.0, 3.0, 4.0];
        let mut got = want.clone();
        got[2] = f32::NAN;
        let r = compare_full("cublas", &got, &want, &[2, 2], Tolerance::MATMUL_BF16);
        assert!(r.max_abs_err.is_infinite() && r.first_bad[0].got.is_nan());
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("null"), "{text}");
        let back: CheckReport = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        assert!(!back.passed);
        assert_eq!((back.mismatches, back.nonfinite), (1, 1));
        assert_eq!(back.first_bad[0].index, vec![1, 0]);
        assert!(back.first_bad[0].got.is_nan());
        assert_eq!(back.first_bad[0].want, 3.0);
        assert!(back.max_abs_err.is_nan(), "non-finite values read back as NaN");
    }

    // ---- batched and grouped GEMM, attention

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

    /// What an attention kernel computes, per (batch·head) and query row, in f32: scores, the row
    /// max, P = exp(scale·s − max) summed into l, P rounded to `dt` for P·V, O / l rounded to `dt`.
    #[allow(clippy::too_many_arguments)]
    fn attention_f32(q: &[f32], k: &[f32], vt: &[f32], bh: usize, sq: usize, sk: usize, hd: usize, scale: f32, dt: DType) -> Vec<f32> {
        let mut o = vec![0f32; bh * sq * hd];
        for h in 0..bh {
            for i in 0..sq {
                let qr = &q[(h * sq + i) * hd..(h * sq + i + 1) * hd];
                let s: Vec<f32> = (0..sk)
                    .map(|j| qr.iter().zip(&k[(h * sk + j) * hd..(h * sk + j + 1) * hd]).map(|(x, y)| x * y).sum::<f32>() * scale)
                    .collect();
                let m = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let p: Vec<f32> = s.iter().map(|v| (v - m).exp()).collect();
                let l: f32 = p.iter().sum();
                for d in 0..hd {
                    let vr = &vt[(h * hd + d) * sk..(h * hd + d + 1) * sk];
                    let acc: f32 = p.iter().zip(vr).map(|(&w, &v)| rounded(dt, w) * v).sum();
                    o[(h * sq + i) * hd + d] = rounded(dt, acc / l);
                }
            }
        }
        o
    }

    #[test]
    fn attention_accepts_a_kernels_rounding_and_catches_faults() {
        let (bh, sq, sk, hd) = (3usize, 128usize, 96usize, 64usize);
        let scale = 0.125f32;
        for dt in [DType::BF16, DType::F16] {
            let q = inputs(dt, bh * sq * hd, 51);
            let k = inputs(dt, bh * sk * hd, 52);
            let vt = inputs(dt, bh * hd * sk, 53);
            let tol = Tolerance::for_attention_output(dt);
            let check = |o: &[f32], scale: f64| {
                attention(&q, &k, &vt, o, bh as u64, sq as u64, sk as u64, hd as u64, scale, tol, &mut Rng::new(7))
            };
            let o = attention_f32(&q, &k, &vt, bh, sq, sk, hd, scale, dt);
            let r = check(&o, f64::from(scale));
            assert!(r.passed && r.rel_l2_err > 1e-5, "{dt}: {r:?}");
            assert_eq!(r.checked as usize, bh * 32 * hd, "32 query rows of every head, every HD column");
            assert_eq!(r.oracle, "attention");
            // The kernel ran with another scale (1/√HD computed as 1/HD, and 1): the oracle's
            // scale is not the kernel's.
            for wrong in [1.0 / 64.0, 1.0] {
                let r = check(&attention_f32(&q, &k, &vt, bh, sq, sk, hd, wrong, dt), f64::from(scale));
                assert!(!r.passed && r.mismatches as usize > bh * 32 * hd / 4, "{dt} scale {wrong}: {r:?}");
            }
            // Heads 1 and 2 swapped.
            let mut swapped = o.clone();
            let (lo, hi) = swapped.split_at_mut(2 * sq * hd);
            lo[sq * hd..].swap_with_slice(&mut hi[..sq * hd]);
            let r = check(&swapped, f64::from(scale));
            assert!(!r.passed);
            assert!(r.first_bad.iter().all(|e| e.index[0] == 1), "{:?}", r.first_bad);
            // One 64-query tile of head 0 holding the other tile's rows.
            let mut tile = o.clone();
            tile.copy_within(0..64 * hd, 64 * hd);
            let r = check(&tile, f64::from(scale));
            assert!(!r.passed);
            assert!(r.first_bad.iter().all(|e| e.index[0] == 0 && (64..128).contains(&e.index[1])), "{:?}", r.first_bad);
            // V not transposed (VT read as if it were V [SK, HD]): wrong everywhere.
            let v_as_vt: Vec<f32> = (0..bh * hd * sk).map(|f| {
                let (h, rest) = (f / (hd * sk), f % (hd * sk));
                let (d, j) = (rest / sk, rest % sk);
                vt[h * hd * sk + (j * hd + d) % (hd * sk)]
            }).collect();
            let r = check(&attention_f32(&q, &k, &v_as_vt, bh, sq, sk, hd, scale, dt), f64::from(scale));
            assert!(!r.passed, "{dt}: {r:?}");
            // An unwritten element, unsampled or not: the NaN scan finds it.
            let mut hole = o.clone();
            hole[(2 * sq + 77) * hd + 5] = f32::NAN;
            let r = check(&hole, f64::from(scale));
            assert!(!r.passed && r.nonfinite == 1, "{r:?}");
        }
    }

    #[test]
    fn attention_tolerances_are_tight_enough() {
        // A bf16 output 5 % off at its largest element fails; the f16 tolerance refuses a
        // bf16-rounded result.
        let (bh, sq, sk, hd) = (1usize, 64usize, 64usize, 64usize);
        let q = inputs(DType::BF16, bh * sq * hd, 54);
        let k = inputs(DType::BF16, bh * sk * hd, 55);
        let vt = inputs(DType::BF16, bh * hd * sk, 56);
        let mut o = attention_f32(&q, &k, &vt, bh, sq, sk, hd, 0.125, DType::BF16);
        // Every query row sampled.
        let check = |o: &[f32], tol: Tolerance| {
            attention(&q, &k, &vt, o, 1, 64, 64, 64, 0.125, Tolerance { samples: 64, ..tol }, &mut Rng::new(8))
        };
        assert!(check(&o, Tolerance::ATTENTION_BF16).passed);
        assert!(!check(&o, Tolerance::ATTENTION_F16).passed, "bf16 rounding is outside the f16 tolerance");
        let big = (0..o.len()).max_by(|&x, &y| o[x].abs().total_cmp(&o[y].abs())).unwrap();
        o[big] *= 1.05;
        let r = check(&o, Tolerance::ATTENTION_BF16);
        assert_eq!((r.passed, r.mismatches), (false, 1), "{r:?}");
        assert_eq!(r.first_bad[0].index, vec![0, (big / hd) as u64, (big % hd) as u64]);
    }
}

#[cfg(test)]
mod knn_tests {
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
            (0..n).map(|_| super::super::convert::bf16_to_f64(super::super::convert::f64_to_bf16(draw(&mut r))) as f32).collect()
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

#[cfg(test)]
mod kmeans_update_tests {
    use super::*;

    /// Normal data rounded to bf16, as the GPU reads it.
    fn bf16_normal(len: usize, seed: u64) -> Vec<f32> {
        let mut r = Rng::new(seed);
        (0..len).map(|_| super::super::convert::bf16_to_f64(super::super::convert::f64_to_bf16(r.normal_pair().0)) as f32).collect()
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
