//! `rotary`: rotary position embedding in the rotate-half layout (GPT-NeoX, Llama). For X and Y
//! [T, H·D] and tables COS, SIN [T, D/2] holding each token's angles, every head h of token r
//! rotates the pairs (X[r, h·D + j], X[r, h·D + D/2 + j]) by the angle of (r, j):
//!   Y[r, h·D + j]       = X[r, h·D + j] · COS[r, j] − X[r, h·D + D/2 + j] · SIN[r, j]
//!   Y[r, h·D + D/2 + j] = X[r, h·D + D/2 + j] · COS[r, j] + X[r, h·D + j] · SIN[r, j]
//! Every element against an fp64 reference from the inputs as uploaded, under the row kernels'
//! rule and tolerances by the output dtype ([`Tolerance::for_row_output`]): each element is two
//! f32 products and a sum, rounded once to the output dtype.

use super::{compare_ref, per_row, CheckReport, Tolerance};

/// `rotary`: Y from X ([`rows`, `cols`]) and the tables COS, SIN ([`rows`, `half`]), with
/// head_dim = 2·`half` dividing `cols`; every element compared.
#[allow(clippy::too_many_arguments)]
pub fn rotary(
    x: &[f32],
    cos: &[f32],
    sin: &[f32],
    y: &[f32],
    rows: u64,
    cols: u64,
    half: u64,
    tol: Tolerance,
) -> CheckReport {
    let (r, c, h) = (rows as usize, cols as usize, half as usize);
    assert!(h > 0 && c % (2 * h) == 0, "head_dim 2·{h} divides the row length {c}");
    assert_eq!(x.len(), r * c, "X has T·H·D elements");
    assert_eq!(cos.len(), r * h, "COS has T·D/2 elements");
    assert_eq!(sin.len(), r * h, "SIN has T·D/2 elements");
    assert_eq!(y.len(), r * c, "Y has T·H·D elements");
    let want = per_row(r, c, |i, out| {
        let row = &x[i * c..(i + 1) * c];
        let (cs, sn) = (&cos[i * h..(i + 1) * h], &sin[i * h..(i + 1) * h]);
        for head in (0..c).step_by(2 * h) {
            for j in 0..h {
                let (x1, x2) = (f64::from(row[head + j]), f64::from(row[head + h + j]));
                let (co, si) = (f64::from(cs[j]), f64::from(sn[j]));
                out[head + j] = x1 * co - x2 * si;
                out[head + h + j] = x2 * co + x1 * si;
            }
        }
    });
    compare_ref("rotary", y, &want, &[rows, cols], tol)
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::{catches_the_usual_faults, inputs, rounded, ROW_DTYPES};
    use crate::ir::DType;

    /// What a kernel computes: f32 math per pair, each result stored as `out`.
    fn kernel_rope(x: &[f32], cos: &[f32], sin: &[f32], cols: usize, half: usize, out: DType) -> Vec<f32> {
        let mut y = vec![0f32; x.len()];
        for (i, (row, yr)) in x.chunks(cols).zip(y.chunks_mut(cols)).enumerate() {
            for head in (0..cols).step_by(2 * half) {
                for j in 0..half {
                    let (x1, x2, c, s) = (row[head + j], row[head + half + j], cos[i * half + j], sin[i * half + j]);
                    yr[head + j] = rounded(out, x1 * c - x2 * s);
                    yr[head + half + j] = rounded(out, x2 * c + x1 * s);
                }
            }
        }
        y
    }

    #[test]
    fn a_hand_computed_token() {
        // One token, two heads of head_dim 4: pairs (x0, x2) and (x1, x3) in each head.
        let x = [1.0, 2.0, 3.0, 4.0, -1.0, 0.5, 2.0, -2.0];
        let (cos, sin) = ([0.5, 0.0], [0.5, 1.0]);
        // Head 0: 1·0.5 − 3·0.5, 2·0 − 4·1, 3·0.5 + 1·0.5, 4·0 + 2·1.
        // Head 1: −1·0.5 − 2·0.5, 0.5·0 + 2·1, 2·0.5 − 1·0.5, −2·0 + 0.5·1.
        let y = [-1.0, -4.0, 2.0, 2.0, -1.5, 2.0, 0.5, 0.5];
        let r = rotary(&x, &cos, &sin, &y, 1, 8, 2, Tolerance::ROW_F32);
        assert!(r.passed, "{r:?}");
        assert_eq!((r.checked, r.mismatches), (8, 0));
        // The interleaved layout (pairs (x0, x1), (x2, x3)) is another rotation: it fails.
        let interleaved = [1.0 * 0.5 - 2.0 * 0.5, 2.0 * 0.5 + 1.0 * 0.5, 3.0 * 0.0 - 4.0, 4.0 * 0.0 + 3.0];
        let mut y2 = y;
        y2[..4].copy_from_slice(&interleaved);
        assert!(!rotary(&x, &cos, &sin, &y2, 1, 8, 2, Tolerance::ROW_F32).passed);
    }

    #[test]
    fn accepts_f32_math_in_every_output_dtype_and_catches_faults() {
        let (rows, heads, half) = (16usize, 3usize, 8usize);
        let cols = heads * 2 * half;
        for dt in ROW_DTYPES {
            let x = inputs(dt, rows * cols, 31);
            let (cos, sin) = (inputs(DType::F32, rows * half, 32), inputs(DType::F32, rows * half, 33));
            let y = kernel_rope(&x, &cos, &sin, cols, half, dt);
            let tol = Tolerance::for_row_output(dt);
            catches_the_usual_faults(&y, cols, |y| rotary(&x, &cos, &sin, y, rows as u64, cols as u64, half as u64, tol));
            // A token rotated by its neighbour's angles fails.
            let shifted_sin: Vec<f32> = sin[half..].iter().chain(&sin[..half]).copied().collect();
            let wrong = kernel_rope(&x, &cos, &shifted_sin, cols, half, dt);
            assert!(!rotary(&x, &cos, &sin, &wrong, rows as u64, cols as u64, half as u64, tol).passed);
        }
    }
}
