//! `elementwise`: Z[r, c] = f(X[r, c], Y[r, c], W[c]), `f` the workload's `expr` evaluated in
//! fp64 by [`ElementExpr`] (its own small language, `runtime/expr.rs`). Every element is compared
//! under the row kernels' rule and dtype tolerances; an element whose reference is not finite
//! (the expression undefined at those inputs) is a named mismatch.

use super::{per_row, unflatten, CheckReport, Comparer, Tolerance};
use crate::runtime::expr::ElementExpr;

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

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::{catches_the_usual_faults, data, inputs, rounded, ROW_DTYPES};
    use crate::ir::DType;

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
}
