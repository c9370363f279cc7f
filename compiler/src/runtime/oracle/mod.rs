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
//!   - `rotary`: rotary position embedding, rotate-half: Y[r, h·D + j] = x1·cos − x2·sin and
//!     Y[r, h·D + D/2 + j] = x2·cos + x1·sin for the pair x1 = X[r, h·D + j], x2 = X[r, h·D + D/2 + j]
//!     and the token's table entries COS[r, j], SIN[r, j] ([`rotary`]).
//! - `fp8_quant_row`: per-row dynamic fp8 quantization, S[r] = max(max |X[r, :]| / QMAX, min_scale)
//!   and Q = X / S rounded to e4m3 or e5m2: every scale under [`Tolerance::ROW_F32`], every element
//!   within half an fp8 step of X / S (the scale as stored) ([`fp8_quant_row`];
//!   [`Tolerance::FP8_QUANT`]).
//! - `fp8_quant_block`: the same per group of G consecutive columns of a row (DeepSeek-V3's 1 × 128
//!   blocks), S [R, C / G], G read off the shapes; the same two checks, shared with
//!   `fp8_quant_row` ([`fp8_quant_block`], `fp8_quant_block.rs`).
//!   - `rmsnorm_bwd`: DX = rstd · (DY·W − X·rstd²·mean(DY·W·X)), rstd = (mean(X²) + eps)^-½
//!     ([`rmsnorm_bwd`], `norm_bwd.rs`).
//!   - `layernorm_bwd`: DX = rstd · (DY·W − mean(DY·W) − XHAT·mean(DY·W·XHAT)), XHAT = (X − mean)·rstd,
//!     rstd = (var + eps)^-½ ([`layernorm_bwd`], `layernorm_bwd.rs`).
//!   - `softmax_bwd`: DX = Y · (DY − Σ DY·Y) per row, Y the softmax output as an input
//!     ([`softmax_bwd`], `softmax_bwd.rs`).
//! - `cross_entropy`: Loss[r] = logsumexp(X[r, :]) − X[r, T[r]], fp64 over whole rows on sampled
//!   rows, every loss scanned for unwritten values ([`cross_entropy`], `cross_entropy.rs`;
//!   tolerance [`Tolerance::CROSS_ENTROPY`]).
//! - `cross_entropy_bwd`: DX[r, c] = (softmax(X[r, :])[c] − [c == T[r]]) · scale, fp64 over whole
//!   rows on sampled rows, every element of those rows compared, every element of DX scanned for
//!   unwritten values ([`cross_entropy_bwd`], `cross_entropy_bwd.rs`; tolerance
//!   [`cross_entropy_bwd_tolerance`], the row tolerance of DX's dtype).
//! - `topk`: Vals[r, :], Idx[r, :] = the K largest values of X[r, :] in descending order and their
//!   columns, every row: values exactly ([`Tolerance::EXACT`]: copies of inputs), each index in
//!   range, distinct within its row and pointing at an element equal to its rank's value (equal
//!   values in any column order) ([`topk`], `topk.rs`).
//! - `embedding`: Out[r, :] = E[Ids[r], :], every element exactly ([`Tolerance::EXACT`]: copies
//!   of the table's rows, the same sign of zero), every id checked in [0, V) on the host (one
//!   outside is a workload error) ([`embedding`], `embedding.rs`).
//! - `kmeans_scatter`: SUMS[A[n], :] += X[n, :], COUNTS[A[n]] += 1 onto their initial values
//!   (the centroid update by atomics), fp64 reference; each SUMS element within its own bound
//!   n_k·2⁻²⁴·(|SUMS₀| + Σ|X|) (any order of f32 additions lands there), COUNTS exactly
//!   ([`kmeans_scatter`], `kmeans_scatter.rs`).
//! - `gemv`: Y[n] = Σ_k W[n, k]·X[k] (a decode-time M = 1 GEMM), fp64 over every output element
//!   under the row tolerance of the output's dtype ([`gemv`], `gemv.rs`, which says why those
//!   hold for a sum of K products).
//! - [`compare_full`]: element-wise comparison of a whole output against another implementation
//!   (cuBLAS for GEMM; the input itself for `copy` and `transpose`), same rule as `matmul_abt`, or
//!   exact equality under [`Tolerance::EXACT`].
//!
//! Every output element is also scanned for non-finite values: outputs are poisoned with NaN
//! (0xFF bytes) before the launch, so an element the kernel never wrote is a mismatch.
//!
//! One file per oracle family, each re-exported here: `matmul.rs` (the GEMMs), `kmeans.rs`,
//! `knn.rs`, `attention.rs`, `copy.rs` (copy, transpose), `rows.rs` (softmax, row_reduce,
//! rmsnorm, layernorm), `norm_bwd.rs` (rmsnorm_bwd), `layernorm_bwd.rs`, `softmax_bwd.rs`, `cross_entropy.rs`, `cross_entropy_bwd.rs`, `topk.rs`, `embedding.rs`, `kmeans_scatter.rs`, `elementwise.rs`, `rotary.rs`,
//! `fp8_quant.rs`, `fp8_quant_block.rs`, `gemv.rs`, and `derive.rs` (inputs derived on the host). This file
//! holds what they share: the report types, the tolerances, the comparison rule (`Comparer`),
//! the parallel fp64 helpers and the arg-min judge. The elementwise expression language is
//! [`crate::runtime::expr`].

use serde::{Deserialize, Deserializer, Serialize};

use crate::ir::DType;

mod attention;
mod copy;
mod cross_entropy;
mod cross_entropy_bwd;
mod derive;
mod elementwise;
mod embedding;
mod kmeans_scatter;
mod fp8_quant;
mod fp8_quant_block;
mod gemv;
mod kmeans;
mod knn;
mod layernorm_bwd;
mod matmul;
mod rotary;
mod norm_bwd;
mod rows;
mod softmax_bwd;
mod topk;
#[cfg(test)]
mod test_support;

pub use attention::{attention, KeyMask};
pub use copy::{copy, transpose};
pub use cross_entropy::cross_entropy;
pub use cross_entropy_bwd::{cross_entropy_bwd, cross_entropy_bwd_tolerance};
pub use derive::{column_index, inv_row_sum, one_hot, row_sqnorm};
pub use elementwise::elementwise;
pub use embedding::embedding;
pub use kmeans_scatter::{kmeans_scatter, SCATTER_ADD};
pub use fp8_quant::{fp8_format, fp8_quant_row};
pub use fp8_quant_block::fp8_quant_block;
pub use gemv::gemv;
pub use kmeans::{kmeans_assign, kmeans_update};
pub use knn::knn_tile_min;
pub use layernorm_bwd::layernorm_bwd;
pub use matmul::{grouped_matmul_abt, matmul_abt, matmul_abt_batched};
pub use rotary::rotary;
pub use norm_bwd::rmsnorm_bwd;
pub use rows::{layernorm, rmsnorm, row_reduce, softmax, RowReduce};
pub use softmax_bwd::softmax_bwd;
pub use topk::topk;
// The expression language lives in `runtime::expr` now; these paths stay for its callers.
pub use crate::runtime::expr::{ElementExpr, ExprError, ExprFunc, ExprVar};

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
    /// `fp8_quant_row`'s quantized elements: each may be off by half the fp8 spacing at its
    /// reference (round to nearest; the bound is the element's own, not this table's) plus
    /// `rtol` of it for the kernel's f32 division (a few 2^-24, ~3e-7 at most: 1e-6 leaves a
    /// margin of three, far below the 2^-4 / 2^-3 relative step of e4m3 / e5m2). `atol` is unused;
    /// every element is checked.
    pub const FP8_QUANT: Tolerance = Tolerance { rtol: 1e-6, atol: 0.0, samples: 0 };

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
    /// `cross_entropy`: an f32 loss from f32 math over a row of V logits. The kernel's `__expf`
    /// terms err by about 1e-6 of themselves, so their sum s (1 ≤ s ≤ V) does too; `__logf` adds at
    /// most 3 ulp of ln s, and m + ln s − x[t] rounds three times at ~6e-8 of |m| + ln s + |x[t]|
    /// (about 2e-6 for unit-normal logits and V = 128 Ki). The loss is ln V ≈ 10 or more for such
    /// logits, so rtol = 2e-5 and atol = 1e-5 × RMS leave a margin of about ten; a wrong target
    /// column (its logit off by O(1)) or a dropped chunk (s short by ~1/NCH of itself) fails by
    /// orders of magnitude. `samples` rows, each over its whole row (a row costs V exps in fp64).
    pub const CROSS_ENTROPY: Tolerance = Tolerance { rtol: 2e-5, atol: 1e-5, samples: 256 };

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
    /// `softmax`, `row_reduce`, `rmsnorm`, `layernorm`, `elementwise`, `rotary`, `fp8_quant_row` (and `fp8_quant_row.scale`), `cublas` (full comparison against cuBLAS) or `written` (an output no oracle
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
        let allowed = self.abs_tol + self.tol.rtol * want.abs();
        self.add_within(index, got, want, allowed)
    }

    /// As [`Comparer::add`], with the element's own allowed error (an oracle whose bound depends
    /// on where the reference lies, such as half a step of an fp8 grid).
    fn add_within(&mut self, index: impl FnOnce() -> Vec<u64>, got: f64, want: f64, allowed: f64) {
        self.report.checked += 1;
        let err = (got - want).abs();
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

#[cfg(test)]
mod tests {
    use super::*;
    use super::test_support::data;

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

    #[test]
    fn unflatten_is_row_major() {
        assert_eq!(unflatten(7, &[2, 3, 4]), vec![0, 1, 3]);
        assert_eq!(unflatten(23, &[2, 3, 4]), vec![1, 2, 3]);
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
}
