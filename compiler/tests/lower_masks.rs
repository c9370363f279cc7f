//! Masks by position (`iota`, issue 18's causal mask, reused by the corpus): the type rule, the
//! lowered CUDA of a masked wgmma accumulator and of a masked row of window math (insta
//! snapshots), the coordinates each thread computes, checked against the accumulator layout by
//! evaluating them for every lane, and NVRTC builds (`. .toolchain/cuda/env.sh` first).

#[path = "support/lowering.rs"]
mod lowering;
use lowering::{build, lowered};

/// A warpgroup's 64×64 accumulator masked to its lower triangle (key column ≤ query row), as a
/// causal attention masks its diagonal score tile, then stored.
const TRIANGLE: &str = r#"kernel lower_triangle target sm_90a

dim M multiple_of 64

out Y: f32[M, 64]

grid tiles[m = M / 64]

role mma: warpgroup 0..1

on mma {
    reg s: f32[64, 64] per warpgroup
    for t in tiles {
        fill(s, 1.0)
        s = select(iota(s, axis=1) <= iota(s, axis=0), s, -inf)
        store(Y[t.m * 64 :+ 64, :], s)
    }
}
"#;

/// A row of window math masked by its column: the first `K` columns kept, the others zeroed.
const ROW_PREFIX: &str = r#"kernel row_prefix target sm_80

dim R multiple_of 4
const C = 1024
const K = 300

in X: f32[R, C]
out Y: f32[R, C]

grid tiles[r = R / 4]

role rows: warp 0..4

on rows {
    for t in tiles {
        store(Y[t.r * 4 + rows.warp, :], select(iota(X[t.r * 4 + rows.warp, :], axis=0) < K, X[t.r * 4 + rows.warp, :], 0.0))
    }
}
"#;

#[test]
fn a_masked_accumulator_lowers_to_its_layouts_coordinates() {
    let cuda = lowered(TRIANGLE, "triangle.cake").cuda;
    insta::assert_snapshot!("iota_triangle_cuda", cuda);
}

#[test]
fn a_masked_row_of_window_math_lowers_to_the_window_index() {
    let cuda = lowered(ROW_PREFIX, "row_prefix.cake").cuda;
    insta::assert_snapshot!("iota_row_prefix_cuda", cuda);
}

/// Evaluate a layout's C coordinate expression (integer `+ - * / %`, parentheses, `cake_lane`,
/// `cake_warp`, `cake_i`) for one thread and register.
fn eval_c(expr: &str, lane: i64, warp: i64, i: i64) -> i64 {
    fn parse(t: &[String], p: &mut usize, env: &dyn Fn(&str) -> i64) -> i64 {
        let mut v = term(t, p, env);
        while *p < t.len() && (t[*p] == "+" || t[*p] == "-") {
            let op = t[*p].clone();
            *p += 1;
            let r = term(t, p, env);
            v = if op == "+" { v + r } else { v - r };
        }
        v
    }
    fn term(t: &[String], p: &mut usize, env: &dyn Fn(&str) -> i64) -> i64 {
        let mut v = atom(t, p, env);
        while *p < t.len() && (t[*p] == "*" || t[*p] == "/" || t[*p] == "%") {
            let op = t[*p].clone();
            *p += 1;
            let r = atom(t, p, env);
            v = match op.as_str() {
                "*" => v * r,
                "/" => v / r,
                _ => v % r,
            };
        }
        v
    }
    fn atom(t: &[String], p: &mut usize, env: &dyn Fn(&str) -> i64) -> i64 {
        let tok = t[*p].clone();
        *p += 1;
        if tok == "(" {
            let v = parse(t, p, env);
            assert_eq!(t[*p], ")");
            *p += 1;
            return v;
        }
        tok.parse().unwrap_or_else(|_| env(&tok))
    }
    let mut toks = Vec::new();
    let mut cur = String::new();
    for ch in expr.chars() {
        if ch.is_alphanumeric() || ch == '_' {
            cur.push(ch);
        } else {
            if !cur.is_empty() {
                toks.push(std::mem::take(&mut cur));
            }
            if !ch.is_whitespace() {
                toks.push(ch.to_string());
            }
        }
    }
    if !cur.is_empty() {
        toks.push(cur);
    }
    let env = |name: &str| match name {
        "cake_lane" => lane,
        "cake_warp" => warp,
        "cake_i" => i,
        other => panic!("unknown name `{other}` in `{expr}`"),
    };
    let mut p = 0;
    let v = parse(&toks, &mut p, &env);
    assert_eq!(p, toks.len(), "{expr}");
    v
}

#[test]
fn iota_coordinates_cover_a_wgmma_accumulator_once_and_match_the_ptx_layout() {
    // The m64nN f32 accumulator of a warpgroup (PTX ISA, wgmma D fragment): thread (warp w, lane
    // l) holds in register i the element row 16w + l/4 + 8·((i % 4) / 2), column 8·(i / 4) +
    // 2·(l % 4) + i % 2. Every element once, and `iota`'s coordinates agree with that map.
    use cake::layout::regs::Layout;
    for n in [8u32, 64, 256] {
        let lay = Layout::Acc { m_tiles: 1, n_tiles: n / 8, wg: true };
        let (row, col) = (lay.coord(0, "cake_i").expect("rows"), lay.coord(1, "cake_i").expect("cols"));
        let mut seen = vec![0u8; 64 * n as usize];
        for warp in 0..4i64 {
            for lane in 0..32i64 {
                for i in 0..i64::from(lay.regs()) {
                    let (r, c) = (eval_c(&row, lane, warp, i), eval_c(&col, lane, warp, i));
                    assert_eq!(r, 16 * warp + lane / 4 + 8 * ((i % 4) / 2), "n {n} row of warp {warp} lane {lane} reg {i}");
                    assert_eq!(c, 8 * (i / 4) + 2 * (lane % 4) + i % 2, "n {n} column of warp {warp} lane {lane} reg {i}");
                    seen[(r * i64::from(n) + c) as usize] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&k| k == 1), "n {n}: every element exactly once");
    }
    // The row vector of a reduction over axis 1 numbers the same rows.
    let rows = Layout::Rows { m_tiles: 1, wg: true };
    let r = rows.coord(0, "cake_i").expect("rows");
    assert_eq!(eval_c(&r, 5, 2, 1), 16 * 2 + 5 / 4 + 8);
    assert!(rows.coord(1, "cake_i").is_none(), "a row vector has one axis");
}

#[test]
fn iota_along_a_missing_axis_is_e0305() {
    let src = TRIANGLE.replace("iota(s, axis=1)", "iota(s, axis=2)");
    let out = cake::check::check_source(&src);
    let e: Vec<_> = out.diagnostics.iter().filter(|d| d.is_error()).collect();
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].code, "E0305");
    assert!(e[0].help.as_deref().unwrap_or("").contains("from 0 to 1"), "{:#?}", e[0]);
}

#[test]
fn needs_toolchain_masks_compile() {
    for (src, file) in [(TRIANGLE, "triangle.cake"), (ROW_PREFIX, "row_prefix.cake")] {
        build(src, file);
    }
}
