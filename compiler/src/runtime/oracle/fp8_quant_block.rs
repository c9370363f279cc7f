//! `fp8_quant_block`: per-block dynamic fp8 quantization, DeepSeek-V3's (and DeepGEMM's) 1 × G
//! activation groups (G = 128 there). For X [R, C], an fp8 Q [R, C] (e4m3 or e5m2, largest finite
//! value QMAX: 448 or 57344) and an f32 S [R, C / G], row r and group g:
//!   S[r, g] = max(max_{j in group g} |X[r, j]| / QMAX, min_scale),
//!   Q[r, j] = X[r, j] / S[r, j / G] rounded to fp8.
//! G is read off the shapes (C / S's columns). The two checks are `fp8_quant_row`'s, per group
//! (`fp8_quant.rs`'s [`fp8_quant_groups`], which both oracles share): `fp8_quant_block.scale`,
//! every S[r, g] against the fp64 scale under [`Tolerance::ROW_F32`] (the absmax is exact, the
//! division one f32 rounding); `fp8_quant_block`, every Q[r, j] against the fp64 quotient by the
//! scale the kernel stored for its group, clamped to ±QMAX, within half the fp8 spacing at the
//! quotient plus `rtol` of it ([`Tolerance::FP8_QUANT`]). A per-token kernel's output (each row's
//! scale stored for all its groups) fails the scale check; elements quantized by another scale
//! than the one stored for their group (a neighbouring group's) fail the element check.

use super::fp8_quant::fp8_quant_groups;
use super::{CheckReport, Tolerance};
use crate::runtime::convert::MiniFloat;

/// `fp8_quant_block`: the scale and quantized-element checks of X [`rows`, `cols`] quantized to
/// `format` as Q (decoded) in groups of `group` columns, with scales S [`rows`, `cols` / `group`].
#[allow(clippy::too_many_arguments)]
pub fn fp8_quant_block(
    x: &[f32],
    q: &[f32],
    s: &[f32],
    rows: u64,
    cols: u64,
    group: u64,
    format: MiniFloat,
    min_scale: f64,
    tol: Tolerance,
) -> [CheckReport; 2] {
    fp8_quant_groups("fp8_quant_block", x, q, s, rows, cols, group, format, min_scale, tol)
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::{inputs, kernel_fp8_quant, ROW_DTYPES};
    use crate::runtime::convert::{F8E4M3, F8E5M2};

    #[test]
    fn a_hand_computed_row_of_two_groups() {
        // Groups of 2: [896, 3] → scale 2 → [448, 1.5]; [−17, 0.3] → absmax 17, scale 17/448
        // (f32) → −17 / s = −448, 0.3 / s ≈ 7.906 → 8 (e4m3 spacing 0.5 in [4, 8), 1 above).
        let x = [896.0, 3.0, -17.0, 0.3];
        let s1 = 17.0f32 / 448.0;
        let s = [2.0, s1];
        let q = [448.0, 1.5, -448.0, 8.0];
        let check = |q: &[f32], s: &[f32]| fp8_quant_block(&x, q, s, 1, 4, 2, F8E4M3, 0.0, Tolerance::FP8_QUANT);
        let [e, sc] = check(&q, &s);
        assert!(e.passed && sc.passed, "{e:?} {sc:?}");
        assert_eq!((e.checked, sc.checked), (4, 2));
        // The per-token scale (the row's absmax 896 / 448 = 2) for both groups fails: the second
        // group's scale, and its elements (−8.5 and 0.15 would be right for scale 2, not −448, 8).
        let [e, sc] = check(&q, &[2.0, 2.0]);
        assert_eq!((sc.passed, sc.mismatches, sc.first_bad[0].index.clone()), (false, 1, vec![0, 1]));
        assert_eq!((e.passed, e.mismatches), (false, 2), "{e:?}");
        // One whole e4m3 step off in the second group (8 → 9) fails at [0, 3].
        let [e, _] = check(&[448.0, 1.5, -448.0, 9.0], &s);
        assert_eq!((e.passed, e.mismatches, e.first_bad[0].index.clone()), (false, 1, vec![0, 3]));
        // An all-zero group takes min_scale and quantizes to zeros.
        let [e, s] = fp8_quant_block(&[0.0; 4], &[0.0; 4], &[1e-3, 1e-3], 1, 4, 2, F8E4M3, 1e-3, Tolerance::FP8_QUANT);
        assert!(e.passed && s.passed);
    }

    #[test]
    fn accepts_a_kernel_in_both_formats_and_catches_faults() {
        let (rows, cols, group) = (8usize, 1024usize, 128usize);
        let ng = cols / group;
        for (dt, format) in ROW_DTYPES.iter().flat_map(|&d| [(d, F8E4M3), (d, F8E5M2)]) {
            let x = inputs(dt, rows * cols, 43);
            let (q, s) = kernel_fp8_quant(&x, group, format, 1e-6);
            assert_eq!(s.len(), rows * ng);
            let check = |q: &[f32], s: &[f32]| {
                fp8_quant_block(&x, q, s, rows as u64, cols as u64, group as u64, format, 1e-6, Tolerance::FP8_QUANT)
            };
            let [e, sc] = check(&q, &s);
            assert!(e.passed && sc.passed, "{dt:?}: {e:?} {sc:?}");
            assert_eq!((e.checked as usize, sc.checked as usize), (rows * cols, rows * ng));
            // A per-token kernel's output (one scale per row, repeated over its groups) fails the
            // scale check; its elements agree with the scales it stored, which the element check
            // judges them by.
            let (qt, st) = kernel_fp8_quant(&x, cols, format, 1e-6);
            let st: Vec<f32> = st.iter().flat_map(|&v| std::iter::repeat_n(v, ng)).collect();
            let [e, sc] = check(&qt, &st);
            assert!(e.passed && !sc.passed && sc.mismatches as usize > rows * ng / 2, "{dt:?}: {sc:?}");
            // Group 3 of row 2 quantized with group 4's scale: that scale fails at [2, 3] and
            // the group's elements fail, nothing else.
            let at = 2 * ng + 3;
            let (mut q2, mut s2) = (q.clone(), s.clone());
            s2[at] = s[at + 1];
            let [_, sc] = check(&q, &s2);
            assert_eq!((sc.mismatches, sc.first_bad[0].index.clone()), (1, vec![2, 3]));
            let cols_of = |g: usize| 2 * cols + g * group..2 * cols + (g + 1) * group;
            q2[cols_of(3)].copy_from_slice(&q[cols_of(4)]);
            let [e, _] = check(&q2, &s);
            assert!(!e.passed && e.first_bad.iter().all(|b| b.index[0] == 2 && (b.index[1] as usize) / group == 3), "{e:?}");
            // S stored transposed ([C/G, R] instead of [R, C/G]) fails.
            let st: Vec<f32> = (0..rows * ng).map(|i| s[(i % rows) * ng + i / rows]).collect();
            assert!(!check(&q, &st)[1].passed);
            // An unwritten element (NaN poison) and an unwritten scale fail.
            let mut q3 = q.clone();
            q3[5 * cols + 700] = f32::NAN;
            let [e, _] = check(&q3, &s);
            assert_eq!((e.mismatches, e.nonfinite, e.first_bad[0].index.clone()), (1, 1, vec![5, 700]));
            let mut s3 = s.clone();
            s3[7 * ng + 1] = f32::NAN;
            let [_, sc] = check(&q, &s3);
            assert_eq!((sc.passed, sc.first_bad[0].index.clone()), (false, vec![7, 1]));
        }
    }
}
