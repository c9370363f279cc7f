//! `fp8_quant_row`: per-row (per-token) dynamic fp8 quantization. For X [R, C], an fp8 Q [R, C]
//! (e4m3 or e5m2, largest finite value QMAX: 448 or 57344) and an f32 S [R]:
//!   S[r] = max(max_j |X[r, j]| / QMAX, min_scale),   Q[r, j] = X[r, j] / S[r] rounded to fp8.
//! Two checks, from the inputs as uploaded and `min_scale` as the kernel receives it:
//! - `fp8_quant_row.scale`: every S[r] against the fp64 scale under [`Tolerance::ROW_F32`] (the
//!   absmax is exact, the division one f32 rounding);
//! - `fp8_quant_row`: every Q[r, j] against the fp64 quotient X[r, j] / S[r] by the scale the
//!   kernel stored (so a scale one f32 ulp off does not move the grid the elements are judged
//!   on), clamped to ±QMAX (the conversion saturates). The allowed error is the element's own:
//!   half the fp8 spacing at the quotient (round to nearest) plus `rtol` · |quotient| for the f32
//!   division ([`Tolerance::FP8_QUANT`]). A neighbouring fp8 value, one whole step off, fails.
//!
//! The checks themselves ([`fp8_quant_groups`]) take a scale per group of consecutive columns of a
//! row: one group of C here, 128 in `fp8_quant_block` (`fp8_quant_block.rs`).

use super::{per_row, unflatten, CheckReport, Comparer, Tolerance};
use crate::ir::DType;
use crate::runtime::convert::{MiniFloat, F8E4M3, F8E5M2};

/// The fp8 format of a quantized output (`None` for a dtype that is not fp8).
pub fn fp8_format(dtype: DType) -> Option<MiniFloat> {
    match dtype {
        DType::F8E4M3 => Some(F8E4M3),
        DType::F8E5M2 => Some(F8E5M2),
        _ => None,
    }
}

/// `fp8_quant_row`: the scale and quantized-element checks of X [`rows`, `cols`] quantized to
/// `format` as Q (decoded) with scales S.
#[allow(clippy::too_many_arguments)]
pub fn fp8_quant_row(
    x: &[f32],
    q: &[f32],
    s: &[f32],
    rows: u64,
    cols: u64,
    format: MiniFloat,
    min_scale: f64,
    tol: Tolerance,
) -> [CheckReport; 2] {
    assert_eq!(s.len() as u64, rows, "S has R elements");
    fp8_quant_groups("fp8_quant_row", x, q, s, rows, cols, cols, format, min_scale, tol)
}

/// The checks of X [`rows`, `cols`] quantized to `format` as Q (decoded) in groups of `group`
/// consecutive columns of a row, one scale per group: S [`rows`, `cols` / `group`] row-major
/// (S [`rows`] for one group per row, whose scale is then reported at index `[r]`, else at
/// `[r, g]`). The reports are `name` (the elements) and `name.scale`. `group` must divide `cols`.
#[allow(clippy::too_many_arguments)]
pub(super) fn fp8_quant_groups(
    name: &str,
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
    assert!(group > 0 && cols % group == 0, "{name}: a group of {group} does not divide a row of {cols}");
    let (r, c, gs) = (rows as usize, cols as usize, group as usize);
    let ng = c / gs;
    assert_eq!(x.len(), r * c, "X has R·C elements");
    assert_eq!(q.len(), r * c, "Q has R·C elements");
    assert_eq!(s.len(), r * ng, "S has R·(C / group) elements");
    let qmax = format.max_finite();
    let want_scale = per_row(r, ng, |i, o| {
        for (g, o) in o.iter_mut().enumerate() {
            let at = i * c + g * gs;
            let absmax = x[at..at + gs].iter().map(|&v| f64::from(v).abs()).fold(0.0, f64::max);
            *o = (absmax / qmax).max(min_scale);
        }
    });
    let rms = |v: &[f64]| if v.is_empty() { 0.0 } else { (v.iter().map(|w| w * w).sum::<f64>() / v.len() as f64).sqrt() };
    let scale_shape: Vec<u64> = if ng == 1 { vec![rows] } else { vec![rows, ng as u64] };
    let mut scales = Comparer::new(&format!("{name}.scale"), Tolerance::ROW_F32, rms(&want_scale));
    for (i, (&got, &want)) in s.iter().zip(&want_scale).enumerate() {
        scales.add(|| unflatten(i as u64, &scale_shape), f64::from(got), want);
    }
    let want_q = per_row(r, c, |i, out| {
        for (j, (o, &v)) in out.iter_mut().zip(&x[i * c..(i + 1) * c]).enumerate() {
            // The scale the kernel stored for this element's group.
            let scale = f64::from(s[i * ng + j / gs]);
            *o = (f64::from(v) / scale).clamp(-qmax, qmax);
        }
    });
    let mut elements = Comparer::new(name, tol, rms(&want_q));
    for (flat, (&got, &want)) in q.iter().zip(&want_q).enumerate() {
        let allowed = format.quantum(want) / 2.0 + tol.rtol * want.abs();
        elements.add_within(|| vec![(flat / c) as u64, (flat % c) as u64], f64::from(got), want, allowed);
    }
    [elements.finish(q), scales.finish(s)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::{inputs, kernel_fp8_quant, ROW_DTYPES};

    #[test]
    fn a_hand_computed_row() {
        // absmax 896 → scale 2 (e4m3): 896 / 2 = 448, 3 / 2 = 1.5, −17 / 2 = −8.5 → −8 (e4m3 has
        // spacing 1 in [8, 16): 8.5 is a tie, to even), 0.3 / 2 = 0.15 → 0.15625 (spacing 2^-6
        // in [0.125, 0.25)).
        let x = [896.0, 3.0, -17.0, 0.3];
        let q = [448.0, 1.5, -8.0, 0.15625];
        let [elements, scale] = fp8_quant_row(&x, &q, &[2.0], 1, 4, F8E4M3, 0.0, Tolerance::FP8_QUANT);
        assert!(elements.passed && scale.passed, "{elements:?} {scale:?}");
        assert_eq!((elements.checked, scale.checked), (4, 1));
        // −9 is the other neighbour of −8.5, allowed: a tie is half a step from both.
        let tie_other_way = [448.0, 1.5, -9.0, 0.15625];
        assert!(fp8_quant_row(&x, &tie_other_way, &[2.0], 1, 4, F8E4M3, 0.0, Tolerance::FP8_QUANT)[0].passed);
        // One whole step off (0.15625 + 2^-6) fails; so does a scale of absmax / 448 not stored.
        let step_off = [448.0, 1.5, -8.0, 0.171875];
        let [e, _] = fp8_quant_row(&x, &step_off, &[2.0], 1, 4, F8E4M3, 0.0, Tolerance::FP8_QUANT);
        assert_eq!((e.passed, e.mismatches, e.first_bad[0].index.clone()), (false, 1, vec![0, 3]));
        assert!(!fp8_quant_row(&x, &q, &[4.0], 1, 4, F8E4M3, 0.0, Tolerance::FP8_QUANT)[1].passed);
        // An all-zero row takes min_scale and quantizes to zeros.
        let [e, s] = fp8_quant_row(&[0.0; 4], &[0.0; 4], &[1e-3], 1, 4, F8E4M3, 1e-3, Tolerance::FP8_QUANT);
        assert!(e.passed && s.passed);
    }

    #[test]
    fn accepts_a_kernel_in_both_formats_and_catches_faults() {
        let (rows, cols) = (16usize, 256usize);
        for (dt, format) in ROW_DTYPES.iter().flat_map(|&d| [(d, F8E4M3), (d, F8E5M2)]) {
            let x = inputs(dt, rows * cols, 41);
            let (q, s) = kernel_fp8_quant(&x, cols, format, 1e-6);
            let check = |q: &[f32], s: &[f32]| fp8_quant_row(&x, q, s, rows as u64, cols as u64, format, 1e-6, Tolerance::FP8_QUANT);
            let [e, sc] = check(&q, &s);
            assert!(e.passed && sc.passed, "{dt:?}: {e:?} {sc:?}");
            assert_eq!((e.checked as usize, sc.checked as usize), (rows * cols, rows));
            // Row 2 quantized with row 5's scale: its scale and most of its elements fail.
            let (mut q2, mut s2) = (q.clone(), s.clone());
            s2[2] = s[5];
            let [_, sc] = check(&q2, &s2);
            assert_eq!((sc.mismatches, sc.first_bad[0].index.clone()), (1, vec![2]));
            q2[2 * cols..3 * cols].copy_from_slice(&q[5 * cols..6 * cols]);
            let [e, _] = check(&q2, &s);
            assert!(!e.passed && e.first_bad.iter().all(|b| b.index[0] == 2), "{e:?}");
            // An unwritten element (NaN poison) and an unwritten scale fail.
            let mut q3 = q.clone();
            q3[6 * cols + 7] = f32::NAN;
            let [e, _] = check(&q3, &s);
            assert_eq!((e.mismatches, e.nonfinite, e.first_bad[0].index.clone()), (1, 1, vec![6, 7]));
            let mut s3 = s.clone();
            s3[9] = f32::NAN;
            assert!(!check(&q, &s3)[1].passed);
        }
    }
}
