//! Row reductions of accumulator fragments (`reduce_min` / `reduce_max` / `reduce_argmin` /
//! `reduce_argmax` over axis 1): the branch-free tree lowering, the reuse of a row extremum that a
//! `let` in scope already computed, and (with the CUDA toolchain: `needs_toolchain_`, left out
//! where it is absent) that the result compiles with every per-thread array in registers.
//!
//! The programs are the serialized kmeans fixture (`fixtures/kmeans_assign_serial.cake`) with its
//! per-tile epilogue replaced.

use cake::lower::LowerOptions;
use cake::nvrtc;
use cake::target::TargetTable;
use cake::verify::Validated;

const EPILOGUE: &str = "            let m = reduce_min(d, axis=1)
            let i = reduce_argmin(d, axis=1) + kt * 128
";

fn program(epilogue: &str) -> String {
    let path = format!("{}/tests/fixtures/kmeans_assign_serial.cake", env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    assert!(src.contains(EPILOGUE), "the fixture's epilogue moved");
    src.replace(EPILOGUE, epilogue)
}

fn validated(src: &str) -> Validated {
    let out = cake::check::check_source(src);
    out.validated.unwrap_or_else(|| panic!("does not verify: {:#?}", out.diagnostics))
}

fn lower(src: &str) -> String {
    cake::lower::lower_with(&validated(src), &LowerOptions::with_source("reductions.cake", src)).unwrap_or_else(|e| panic!("{e}")).cuda
}

/// The lowered C of the statement at the `// cake: line N: TEXT` marker whose TEXT starts with
/// `stmt`, up to the next marker.
fn stmt_c<'a>(cuda: &'a str, stmt: &str) -> &'a str {
    let start = cuda
        .match_indices("// cake: line ")
        .map(|(i, _)| i)
        .find(|&i| cuda[i..].split_once(": ").and_then(|(_, r)| r.split_once(": ")).is_some_and(|(_, t)| t.starts_with(stmt)))
        .unwrap_or_else(|| panic!("no statement `{stmt}` in\n{cuda}"));
    let rest = &cuda[start + 1..];
    let end = rest.find("// cake: line ").map_or(cuda.len(), |e| start + 1 + e);
    &cuda[start..end]
}

const REUSED: &str = "already reduced in this scope";

#[test]
fn argmin_after_min_of_the_same_let_reuses_the_minimum() {
    let cuda = lower(&program(EPILOGUE));
    let min = stmt_c(&cuda, "let m = reduce_min(d, axis=1)");
    let arg = stmt_c(&cuda, "let i = reduce_argmin(d, axis=1)");
    // The minimum: a pairwise tree over the thread's 32 elements (16, 8, 4, 2, 1), then the quad.
    assert!(min.contains("cake_t[cake_j] = fminf(cake_x[2 * cake_j], cake_x[2 * cake_j + 1]);"), "{min}");
    assert!(min.contains("cake_t[0] = fminf(cake_t[0], cake_t[1]);"), "{min}");
    assert_eq!(min.matches("__shfl_xor_sync").count(), 1, "{min}");
    // The arg-reduction starts from `m`: no second value tree or value shuffle, one index shuffle.
    assert!(arg.contains(REUSED) && arg.contains("const float cake_v = m[cake_s];"), "{arg}");
    assert!(!arg.contains("fminf"), "{arg}");
    assert_eq!(arg.matches("__shfl_xor_sync").count(), 1, "{arg}");
    assert!(arg.contains("min(cake_vi, cake_y)"), "{arg}");
    // Branch-free: selects of the register part of the column, the lane part added once.
    assert!(arg.contains("cake_k[cake_c / 4] = cake_x[cake_c] == cake_v ? 8 * (((cake_i) / 4) % 16) + (cake_i) % 2 : cake_k[cake_c / 4];"), "{arg}");
    assert!(arg.contains("cake_k[0] + 2 * (cake_lane % 4)"), "{arg}");
    assert!(arg.contains("cake_vi == 0x7fffffff ? 0 : cake_vi"), "{arg}");
    for c in [min, arg] {
        assert!(!c.contains("if ("), "a branch in\n{c}");
    }
    assert!(!cuda.contains("cake_arg_better"));
}

#[test]
fn argmin_alone_reduces_its_own_minimum() {
    let cuda = lower(&program(
        "            let i = reduce_argmin(d, axis=1) + kt * 128
            let m = reduce_min(d, axis=1)
",
    ));
    let arg = stmt_c(&cuda, "let i = reduce_argmin(d, axis=1)");
    assert!(!arg.contains(REUSED), "{arg}");
    assert!(arg.contains("fminf(cake_x[2 * cake_j], cake_x[2 * cake_j + 1])"), "{arg}");
    // Value and index: one butterfly each.
    assert_eq!(arg.matches("__shfl_xor_sync").count(), 2, "{arg}");
}

#[test]
fn argmax_after_max_reuses_the_maximum_and_not_a_minimum() {
    let cuda = lower(&program(
        "            let m = reduce_min(d, axis=1)
            let mx = reduce_max(d, axis=1)
            let j = reduce_argmax(d, axis=1)
            let i = reduce_argmin(d, axis=1) + kt * 128 + 0 * j + cast(0.0 * mx, i32)
",
    ));
    let argmax = stmt_c(&cuda, "let j = reduce_argmax(d, axis=1)");
    assert!(argmax.contains("const float cake_v = mx[cake_s];"), "{argmax}");
    let argmin = stmt_c(&cuda, "let i = reduce_argmin(d, axis=1)");
    assert!(argmin.contains("const float cake_v = m[cake_s];"), "{argmin}");
}

#[test]
fn a_row_extremum_is_not_reused_outside_its_block_or_for_a_reg() {
    // `m` lives in the `if` block; the argmin after it must reduce again.
    let cuda = lower(&program(
        "            if kt > 0 {
                let m = reduce_min(d, axis=1)
                best_d = select(m < best_d, m, best_d)
            }
            let i = reduce_argmin(d, axis=1) + kt * 128
            let m = reduce_min(d, axis=1)
",
    ));
    assert!(!stmt_c(&cuda, "let i = reduce_argmin(d, axis=1)").contains(REUSED));
    // A `reg` fragment can be reassigned between the two reductions: never reused.
    let cuda = lower(&program(
        "            let m = reduce_min(acc, axis=1)
            let i = reduce_argmin(acc, axis=1) + kt * 128
",
    ));
    assert!(!stmt_c(&cuda, "let i = reduce_argmin(acc, axis=1)").contains(REUSED));
}

/// A 24-column window: 6 elements of a row per thread, 2 chunks of (at most) 4 columns.
const ODD_COLUMNS: &str = "            let w = d[:, 8 :+ 24]
            let m = reduce_min(w, axis=1)
            let i = reduce_argmin(w, axis=1) + kt * 128
";

#[test]
fn odd_column_counts_fold_the_last_element_through() {
    let src = program(ODD_COLUMNS);
    let cuda = lower(&src);
    let min = stmt_c(&cuda, "let m = reduce_min(w, axis=1)");
    // 6 → 3 (pairs), 3 → 2 (one pair, the third carried), 2 → 1.
    assert!(min.contains("cake_j < 3; ++cake_j) cake_t[cake_j] = fminf(cake_x[2 * cake_j], cake_x[2 * cake_j + 1]);"), "{min}");
    assert!(min.contains("cake_t[0] = fminf(cake_t[0], cake_t[1]);\n"), "{min}");
    assert!(min.contains("cake_t[1] = cake_t[2];"), "{min}");
    let arg = stmt_c(&cuda, "let i = reduce_argmin(w, axis=1)");
    assert!(arg.contains("int cake_k[2];") && arg.contains("for (int cake_c = 5; cake_c >= 0; --cake_c)"), "{arg}");
    assert!(arg.contains("8 * (((cake_i) / 4) % 3) + (cake_i) % 2"), "{arg}");
}

/// Through NVRTC: every per-thread array of the row reductions stays in registers.
#[test]
fn needs_toolchain_row_reductions_compile_in_registers() {
    nvrtc::ensure_nvrtc().unwrap_or_else(|e| panic!("no CUDA toolchain: {e}"));
    for s in [program(ODD_COLUMNS), program(EPILOGUE)] {
        let target = TargetTable::builtin().get("sm_90a").expect("sm_90a");
        let b = nvrtc::build_with(&validated(&s), target, &LowerOptions::with_source("reductions.cake", &s)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(b.report.stack_frame_bytes, 0, "{}", b.log);
        assert_eq!(b.report.spills(), 0, "{}", b.log);
    }
}

/// A row-window sum of a `select`: the fold keeps the select's parentheses, or C would read
/// `cake_v + c ? a : b` as `(cake_v + c) ? a : b` (a masked sum that returns one element).
#[test]
fn a_window_sum_of_a_select_keeps_its_parentheses() {
    let src = "kernel masked_row_sum target sm_90a

dim R multiple_of 4
const C = 256

in X: f32[R, C]
in T: i32[R]
in Col: i32[C]
out Out: f32[R]

grid tiles[r = R / 4]

role rows: warp 0..4

on rows {
    reg acc: f32[1] per warp
    for t in tiles {
        let tgt = T[t.r * 4 + rows.warp :+ 1]
        acc = reduce_sum(select(Col[:] == tgt, X[t.r * 4 + rows.warp, :], 0.0), axis=0)
        store(Out[t.r * 4 + rows.warp :+ 1], acc)
    }
}
";
    let cuda = lower(src);
    let sum = stmt_c(&cuda, "acc = reduce_sum(");
    let fold = sum.lines().find(|l| l.contains("cake_v = cake_v + ") && !l.contains("__shfl")).unwrap_or_else(|| panic!("{sum}"));
    let folded = fold.trim().strip_prefix("cake_v = cake_v + ").unwrap_or_else(|| panic!("{fold}"));
    assert!(folded.starts_with("(*(const int*)(Col + cake_i0) == tgt_e ? ") && folded.ends_with(" : 0.0f);"), "the select is one parenthesized operand: {fold}");
}

/// A window indexed through a scalar `let` of the warp (`let r = … + rows.warp`) is one warp's:
/// its elements are split over that warp's lanes, not over the role's threads (each warp would
/// then write a quarter of its own row and leave the rest unwritten, as the rotary family did on
/// the H200, 2026-12-02). A reduction over such a window lowers for the same reason.
#[test]
fn a_window_indexed_by_a_let_of_the_warp_is_split_over_that_warps_lanes() {
    let src = "kernel let_row_copy target sm_90a

dim R multiple_of 8
const C = 256

in X: f32[R, C]
out Y: f32[R, C]
out S: f32[R]

grid tiles[r = R / 8]

role rows: warp 0..4

on rows {
    reg acc: f32[1] per warp
    for t in tiles {
        for i in 0..2 {
            let r = t.r * 8 + rows.warp * 2 + i
            store(Y[r, :], X[r, :] * 2.0)
            acc = reduce_sum(X[r, :], axis=0)
            store(S[r :+ 1], acc)
        }
    }
}
";
    let cuda = lower(src);
    let store = stmt_c(&cuda, "store(Y[r, :]");
    assert!(store.contains("over the lanes of each warp (32)") && store.contains("const int cake_t = cake_lane;"), "{store}");
    assert!(!store.contains("role's threads"), "{store}");
}

/// A row kernel over a window `Col: i32[C]` of column indices (as the cross-entropy families):
/// `BODY` replaced.
const ROW_KERNEL: &str = "kernel row_kernel target sm_90a

dim R multiple_of 4
const C = 256

in X: f32[R, C]
in T: i32[R]
in Col: i32[C]
out Out: f32[R, C]
out Idx: i32[R]

grid tiles[r = R / 4]

role rows: warp 0..4

on rows {
    reg m: f32[1] per warp
    reg k: i32[1] per warp
    for t in tiles {
        let tgt = T[t.r * 4 + rows.warp :+ 1]
        let x = X[t.r * 4 + rows.warp, :]
BODY
        store(Idx[t.r * 4 + rows.warp :+ 1], k)
    }
}
";

fn row_kernel(body: &str) -> String {
    ROW_KERNEL.replace("BODY", body)
}

fn compiles(src: &str) {
    nvrtc::ensure_nvrtc().unwrap_or_else(|e| panic!("no CUDA toolchain: {e}"));
    let target = TargetTable::builtin().get("sm_90a").expect("sm_90a");
    let b = nvrtc::build_with(&validated(src), target, &LowerOptions::with_source("row_kernel.cake", src)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(b.report.spills(), 0, "{}", b.log);
}

/// `select(cond, 1.0, 0.0)` over a window condition is a value of the condition's shape (f32,
/// the float literals' default), computed per element — not a literal with the condition as a
/// scalar (which was L001 for an inline window, and C of undeclared names for a `let` window).
const ONE_HOT_INLINE: &str = "        fill(k, 0)
        store(Out[t.r * 4 + rows.warp, :], x - select(Col[:] == tgt, 1.0, 0.0))";
const ONE_HOT_LET: &str = "        fill(k, 0)
        let col = Col[:]
        store(Out[t.r * 4 + rows.warp, :], x - select(col == tgt, 1.0, 0.0))";

#[test]
fn a_select_of_two_literals_over_a_window_condition_is_computed_per_element() {
    let out = cake::check::check_source(&row_kernel("        let oh = select(Col[:] == tgt, 1.0, 0.0)\n        let ohi = select(Col[:] == tgt, 1, 0)\n        fill(k, 0)"));
    let module = out.module.unwrap_or_else(|| panic!("{:#?}", out.diagnostics));
    let ty = |name: &str| module.locals.iter().find(|(_, l)| l.name == name).map(|(_, l)| l.ty.to_string()).unwrap_or_default();
    assert_eq!(ty("oh"), "register f32[256]");
    assert_eq!(ty("ohi"), "register i32[256]");
    let inline = lower(&row_kernel(ONE_HOT_INLINE));
    let st = stmt_c(&inline, "store(Out");
    assert!(st.contains("*(const int*)(Col + cake_i0) == tgt_e ? 1.0f : 0.0f"), "{st}");
    let named = lower(&row_kernel(ONE_HOT_LET));
    let st = stmt_c(&named, "store(Out");
    assert!(st.contains("const int col_e = ") && st.contains("(col_e == tgt_e ? 1.0f : 0.0f)"), "{st}");
}

#[test]
fn needs_toolchain_a_select_of_two_literals_over_a_window_condition_compiles() {
    compiles(&row_kernel(ONE_HOT_INLINE));
    compiles(&row_kernel(ONE_HOT_LET));
}

/// `reduce_argmax` / `reduce_argmin` over a row window: each lane folds (value, index) pairs, a
/// strictly better value or an equal one at a smaller index wins, and the pairs combine the same
/// way across the warp: the smallest index holding the extremum.
const ARG_ROW: &str = "        k = reduce_argmax(x, axis=0)
        let j = reduce_argmin(cast(X[t.r * 4 + rows.warp, :], bf16), axis=0)
        store(Out[t.r * 4 + rows.warp, :], x + cast(j, f32))";

#[test]
fn an_arg_reduction_over_a_row_window_keeps_the_smallest_index_of_the_extremum() {
    let cuda = lower(&row_kernel(ARG_ROW));
    let arg = stmt_c(&cuda, "k = reduce_argmax(");
    assert!(arg.contains("float cake_v = __int_as_float(0xff800000);") && arg.contains("int cake_k = 2147483647;"), "{arg}");
    assert!(arg.contains("if (cake_a > cake_v || (cake_a == cake_v && cake_i0 < cake_k)) { cake_v = cake_a; cake_k = cake_i0; }"), "{arg}");
    assert!(arg.contains("if (cake_b > cake_v || (cake_b == cake_v && cake_l < cake_k)) { cake_v = cake_b; cake_k = cake_l; }"), "{arg}");
    assert!(arg.contains("= cake_k == 2147483647 ? 0 : cake_k;"), "{arg}");
    let arg = stmt_c(&cuda, "let j = reduce_argmin(");
    assert!(arg.contains("float cake_v = __int_as_float(0x7f800000);") && arg.contains("if (cake_a < cake_v ||"), "{arg}");
}

#[test]
fn needs_toolchain_an_arg_reduction_over_a_row_window_compiles() {
    compiles(&row_kernel(ARG_ROW));
}

/// A `let` of window math reading whole-held registers (`m`): computed where it is used, with
/// `m` as it was at the `let` (a `let` is immutable), even after `m` is assigned (it was L007).
const LET_READS_REG: &str = "        fill(k, 0)
        m = reduce_max(x, axis=0)
        let g = (exp(x - m) - select(Col[:] == tgt, 1.0, 0.0)) * 2.0
        m = m * 0.0
        store(Out[t.r * 4 + rows.warp, :], g)";

#[test]
fn a_let_of_window_math_reads_a_whole_held_reg_as_at_the_let() {
    let cuda = lower(&row_kernel(LET_READS_REG));
    let at_let = stmt_c(&cuda, "let g = ");
    assert!(at_let.contains("float cake_g_m_") && at_let.contains("] = m[cake_i];"), "{at_let}");
    let st = stmt_c(&cuda, "store(Out");
    let g = st.lines().find(|l| l.contains("const float g_e = ")).unwrap_or_else(|| panic!("{st}"));
    assert!(g.contains("__expf(x_e - cake_g_m_") && !g.contains(" m[0]"), "{g}");
}

#[test]
fn needs_toolchain_a_let_of_window_math_reading_a_reg_compiles() {
    compiles(&row_kernel(LET_READS_REG));
}
