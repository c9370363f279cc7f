//! Test inputs and fault checks the oracle families' unit tests share (normal data, rounding to
//! a dtype as a kernel's store does, the usual faults of a row-shaped output).

use super::CheckReport;
use crate::ir::DType;
use crate::runtime::convert::MiniFloat;
use crate::runtime::rng::Rng;

pub(super) fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut r = Rng::new(seed);
    (0..len).map(|_| r.normal_pair().0 as f32).collect()
}

/// `v` rounded to `dtype` (what a kernel's store, or the input generator, makes of it).
pub(super) fn rounded(dtype: DType, v: f32) -> f32 {
    let mut b = [0u8; 4];
    let n = dtype.size_bytes() as usize;
    crate::runtime::convert::store(dtype, f64::from(v), &mut b[..n]);
    crate::runtime::convert::load(dtype, &b[..n]) as f32
}

/// Normal data rounded to `dtype`, as the GPU reads it.
pub(super) fn inputs(dtype: DType, len: usize, seed: u64) -> Vec<f32> {
    data(len, seed).into_iter().map(|v| rounded(dtype, v)).collect()
}

/// A correct output passes, every element checked; each of three faults fails with its index:
/// row 2 holding row 5's result, two neighbours of row 3 swapped, and one element of row 6 left
/// unwritten (the NaN poison). `width` is the output's row length (1: one value per row).
pub(super) fn catches_the_usual_faults(good: &[f32], width: usize, check: impl Fn(&[f32]) -> CheckReport) {
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

/// What an fp8 quantization kernel computes, per group of `group` consecutive values of `x` (a
/// row, or a 128-wide block of one): the f32 absmax and scale max(absmax / QMAX, min_scale), then
/// each value divided by the scale in f32 and converted to fp8 with round to nearest, saturating
/// (`encode`). Returns Q (decoded) and one scale per group, in order.
pub(super) fn kernel_fp8_quant(x: &[f32], group: usize, format: MiniFloat, min_scale: f32) -> (Vec<f32>, Vec<f32>) {
    let qmax = format.max_finite() as f32;
    let (mut q, mut s) = (Vec::new(), Vec::new());
    for g in x.chunks(group) {
        let scale = (g.iter().map(|v| v.abs()).fold(0.0, f32::max) / qmax).max(min_scale);
        s.push(scale);
        q.extend(g.iter().map(|&v| format.decode(format.encode(f64::from(v / scale))) as f32));
    }
    (q, s)
}

pub(super) const ROW_DTYPES: [DType; 3] = [DType::BF16, DType::F16, DType::F32];
