//! Register fragments (declarations, `let`, assignment, `zero`, `fill`, reductions, `store`) and
//! memory references (shared and global windows).

use std::collections::BTreeSet;

use super::layout::{self, reg_ctype, Layout};
use super::prelude::Helper;
use super::{c_ident, size_c, size_multiple, strip_parens, unsupported, Lw, LowerError};
use crate::ir::*;
use crate::ops::OpId;
use crate::layout::known_multiple;
use crate::span::Span;

/// One byte-offset term of a shared-memory reference: `stride * (c)`.
#[derive(Clone, Debug)]
pub(crate) struct Term {
    pub c: String,
    pub stride: u64,
    /// A number every value of `c` is a multiple of (0: always zero).
    pub mult: i64,
    /// Whether the term indexes the innermost dimension.
    pub innermost: bool,
}

/// A shared-memory window: region, byte-offset terms relative to the region's base, and the
/// remaining shape with its byte strides.
#[derive(Clone, Debug)]
pub(crate) struct SmemRef {
    pub region: usize,
    pub terms: Vec<Term>,
    pub shape: Vec<i64>,
    pub strides: Vec<u64>,
    pub swizzle: Swizzle,
    /// Bytes of one row of the region (its innermost dimension).
    pub pitch: u64,
    /// The alignment the address constant is known to have (a view's: its region's, or less when
    /// its offset is less aligned).
    pub base_align: u64,
}

impl SmemRef {
    /// C: byte offset relative to the region base.
    pub fn offset_c(&self) -> String {
        let parts: Vec<String> = self.terms.iter().filter(|t| t.mult != 0).map(|t| mul_c(t.stride, &t.c)).collect();
        if parts.is_empty() {
            "0".into()
        } else {
            parts.join(" + ")
        }
    }

    /// Whether the address is provably a multiple of `align` bytes: the base, and every offset
    /// term (innermost terms included unless `skip_innermost`).
    pub fn aligned(&self, align: u64, skip_innermost: bool) -> bool {
        self.base_align % align == 0
            && self.terms.iter().filter(|t| !(skip_innermost && t.innermost)).all(|t| {
            t.mult == 0 || (t.mult as u64).saturating_mul(t.stride) % align == 0 || (t.stride % align == 0)
        })
    }
}

/// `stride * (c)` with as few parentheses as reads well.
pub(crate) fn mul_c(stride: u64, c: &str) -> String {
    let simple = c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_');
    match (stride, simple) {
        (1, true) => c.to_string(),
        (1, false) => format!("({})", strip_parens(c)),
        (_, true) => format!("{stride} * {c}"),
        (_, false) => format!("{stride} * ({})", strip_parens(c)),
    }
}

/// One dimension of a global window: the start (C) and, for a window or full dimension, its
/// length; `None` for a dimension picked by an index.
#[derive(Clone, Debug)]
pub(crate) struct GDim {
    pub start: String,
    pub start_mult: i64,
    pub len: Option<i64>,
    /// The index is data-dependent (`E[id, ...]`, `id` loaded from a tensor): every access
    /// through it is guarded by `0 <= id && id < extent`.
    pub data: bool,
}

/// `let NAME = reduce_min(x, axis=1)` (`max`: `reduce_max`) of a `let` fragment `x`: the C array
/// `name` holds the row extrema of `x` for the rest of the block.
#[derive(Clone, Debug)]
pub(crate) struct RowExtremum {
    pub x: Handle<Local>,
    pub max: bool,
    pub name: String,
}

pub(crate) struct GlobalRef {
    pub tensor: Handle<TensorDecl>,
    pub dims: Vec<GDim>,
}

impl<'a> Lw<'a> {
    // -----------------------------------------------------------------------------------------
    // Memory references

    pub(crate) fn smem_ref(&mut self, e: Handle<Expr>) -> Result<SmemRef, LowerError> {
        let m = self.m;
        let span = self.expr_span(e);
        let (base, items): (Handle<Expr>, Vec<IndexItem>) = match &m.exprs[e].kind {
            ExprKind::Index { base, items } => (*base, items.clone()),
            ExprKind::Smem(_) | ExprKind::View(_) => (e, Vec::new()),
            _ => return Err(unsupported("this shared-memory expression", span)),
        };
        // A region's stages come first; a view is one typed array at a fixed byte offset of its
        // region, with its own dtype, shape and swizzle, and its own address constant.
        // (`plan_smem` puts the views' address constants after the regions'.)
        let (region, dtype, shape, stages, swizzle) = match m.exprs[base].kind {
            ExprKind::Smem(h) => {
                let s = &m.smem[h];
                (h.index(), s.dtype, &s.shape, s.stages, s.swizzle)
            }
            ExprKind::View(h) => {
                let v = &m.views[h];
                (m.smem.len() + h.index(), v.dtype, &v.shape, 1, v.swizzle)
            }
            _ => return Err(unsupported("indexing this shared-memory expression", span)),
        };
        let esize = dtype.size_bytes();
        let stage_bytes = shape.iter().product::<i64>().max(0) as u64 * esize;
        let mut full: Vec<i64> = Vec::new();
        let mut strides: Vec<u64> = Vec::new();
        if stages > 1 {
            full.push(i64::from(stages));
            strides.push(stage_bytes);
        }
        for (i, &extent) in shape.iter().enumerate() {
            full.push(extent);
            strides.push(shape[i + 1..].iter().product::<i64>().max(0) as u64 * esize);
        }
        if items.len() > full.len() || full.is_empty() {
            return Err(LowerError::new("L001", "too many indices", span));
        }
        let mut terms = Vec::new();
        let mut rest_shape = Vec::new();
        let mut rest_strides = Vec::new();
        let last = full.len() - 1;
        for (d, (&extent, &stride)) in full.iter().zip(&strides).enumerate() {
            match items.get(d) {
                Some(IndexItem::At(x)) => {
                    let c = self.scalar(*x)?;
                    let mult = known_multiple(self.m, *x);
                    terms.push(Term { c, stride, mult, innermost: d == last });
                }
                Some(IndexItem::Window { start, len }) => {
                    let c = self.scalar(*start)?;
                    let mult = known_multiple(self.m, *start);
                    terms.push(Term { c, stride, mult, innermost: d == last });
                    rest_shape.push(*len);
                    rest_strides.push(stride);
                }
                Some(IndexItem::Full) | None => {
                    rest_shape.push(extent);
                    rest_strides.push(stride);
                }
            }
        }
        let pitch = shape.last().copied().unwrap_or(1).max(1) as u64 * esize;
        let base_align = self.regions[region].align;
        Ok(SmemRef { region, terms, shape: rest_shape, strides: rest_strides, swizzle, pitch, base_align })
    }

    /// C: the 32-bit shared address of a reference plus `extra` (a byte-offset C expression), the
    /// region's swizzle applied to the whole offset.
    pub(crate) fn smem_addr_c(&mut self, r: &SmemRef, extra: Option<&str>) -> String {
        let base = self.regions[r.region].addr.clone();
        let mut off = r.offset_c();
        if let Some(x) = extra {
            off = if off == "0" { x.to_string() } else { format!("{off} + {x}") };
        }
        if r.swizzle == Swizzle::None {
            if off == "0" {
                base
            } else {
                format!("{base} + {off}")
            }
        } else {
            self.need(Helper::Swizzle);
            format!("{base} + cake_swizzle<{}>({off})", r.swizzle.bytes())
        }
    }

    pub(crate) fn global_ref(&mut self, e: Handle<Expr>) -> Result<GlobalRef, LowerError> {
        let m = self.m;
        let span = self.expr_span(e);
        let (base, items): (Handle<Expr>, Vec<IndexItem>) = match &m.exprs[e].kind {
            ExprKind::Index { base, items } => (*base, items.clone()),
            ExprKind::Tensor(_) => (e, Vec::new()),
            _ => return Err(unsupported("this global-memory expression", span)),
        };
        let ExprKind::Tensor(t) = m.exprs[base].kind else {
            return Err(unsupported("indexing this global-memory expression", span));
        };
        let td = &m.tensors[t];
        let mut dims = Vec::new();
        for (d, extent) in td.shape.iter().enumerate() {
            dims.push(match items.get(d) {
                Some(IndexItem::At(x)) => GDim {
                    start: self.scalar(*x)?,
                    start_mult: known_multiple(self.m, *x),
                    len: None,
                    data: crate::ir::data_index(self.m, *x).is_some(),
                },
                Some(IndexItem::Window { start, len }) => {
                    GDim { start: self.scalar(*start)?, start_mult: known_multiple(self.m, *start), len: Some(*len), data: false }
                }
                Some(IndexItem::Full) | None => match extent.as_const() {
                    Some(c) => GDim { start: "0".into(), start_mult: 0, len: Some(c), data: false },
                    None => {
                        return Err(unsupported(
                            format!("a whole dimension of run-time extent ({}) as a window", size_c(m, extent)),
                            span,
                        ))
                    }
                },
            });
        }
        Ok(GlobalRef { tensor: t, dims })
    }

    /// C: the bounds checks of a reference's data-dependent indices (`0 <= id && id < V`): the
    /// verifier cannot place such an index, so the kernel checks it; a read outside gives 0 and
    /// a write outside is skipped.
    pub(crate) fn data_guards(&self, g: &GlobalRef) -> Vec<String> {
        let m = self.m;
        g.dims
            .iter()
            .enumerate()
            .filter(|(_, d)| d.data)
            .map(|(k, d)| format!("0 <= {0} && {0} < {1}", d.start, size_c(m, &m.tensors[g.tensor].shape[k])))
            .collect()
    }

    /// C: the element-stride of dimension `d` of tensor `t` (`1` for the innermost).
    pub(crate) fn gstride(&mut self, t: Handle<TensorDecl>, d: usize) -> String {
        let td = &self.m.tensors[t];
        if d + 1 == td.shape.len() {
            return "1".into();
        }
        self.strides_needed.insert(t.index());
        self.stride_name(t.index(), d)
    }

    /// C: pointer to the window's first element (`T + start0 * stride0 + ...`).
    pub(crate) fn gbase_c(&mut self, g: &GlobalRef) -> String {
        let name = c_ident(&self.m.tensors[g.tensor].name);
        let mut parts = vec![name];
        for (d, gd) in g.dims.iter().enumerate() {
            if gd.start_mult == 0 {
                continue;
            }
            let stride = self.gstride(g.tensor, d);
            parts.push(if stride == "1" {
                format!("({})", strip_parens(&gd.start))
            } else {
                format!("(long long)({}) * {stride}", strip_parens(&gd.start))
            });
        }
        parts.join(" + ")
    }

    // -----------------------------------------------------------------------------------------
    // Layouts

    /// Take the derived layout of every `reg` fragment of a role body, and note the f16
    /// accumulators kept packed.
    pub(crate) fn layouts_for_body(&mut self, block: &Block) -> Result<(), LowerError> {
        let m = self.m;
        let mut mma_accs = BTreeSet::new();
        let mut regs = Vec::new();
        self.scan_block(block, &mut |_, s| {
            if let Stmt::Op(c) = s {
                if c.op == "wgmma" || c.op == "mma_sync" {
                    if let Some(Some(x)) = c.args.first() {
                        if let ExprKind::Local(l) = m.exprs[*x].kind {
                            mma_accs.insert(l);
                        }
                    }
                }
            }
            if let Stmt::Reg(l) = s {
                regs.push(*l);
            }
        });
        for l in regs {
            // The layout every stage reads: derived once, with the verifier's V230 on its faults.
            let lay = match self.layout.registers.reg(l) {
                Some(Ok(lay)) => *lay,
                Some(Err(f)) => return Err(LowerError::from_fault(f)),
                None => return Err(LowerError::new("L007", format!("`{}` has no derived layout", m.locals[l].name), *m.locals.span(l))),
            };
            let Type::Frag { dtype, .. } = &m.locals[l].ty else { unreachable!("a reg with a layout is a fragment") };
            if *dtype == DType::F16 && matches!(lay, Layout::Acc { .. }) && mma_accs.contains(&l) {
                self.packed.insert(l);
            }
            self.layouts.insert(l, lay);
        }
        Ok(())
    }

    /// The layout of a fragment-valued expression (`None` for scalars, shared broadcasts and
    /// window math): the derived layout's.
    pub(crate) fn layout_of(&self, e: Handle<Expr>) -> Result<Option<Layout>, LowerError> {
        self.layout.registers.value(e).map_err(|f| LowerError::from_fault(&f))
    }

    // -----------------------------------------------------------------------------------------
    // Statements on fragments

    pub(crate) fn declare_reg(&mut self, l: Handle<Local>, span: Span) -> Result<(), LowerError> {
        let m = self.m;
        let local = &m.locals[l];
        let lay = *self.layouts.get(&l).ok_or_else(|| LowerError::new("L007", "fragment without layout", span))?;
        let Type::Frag { dtype, shape, scope } = &local.ty else { unreachable!("checked in layouts_for_body") };
        let cty = reg_ctype(*dtype, lay).expect("checked");
        let name = self.local_name(l);
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        if self.packed.contains(&l) {
            self.w.line(format!(
                "unsigned {name}[{}];  // {dtype}[{}] per {}: {}, packed two f16 per register",
                lay.regs() / 2,
                dims.join(", "),
                scope.map_or("thread", |s| s.name()),
                lay.describe().replace(&format!(", {} registers per thread", lay.regs()), "")
            ));
        } else {
            self.w.line(format!(
                "{cty} {name}[{}];  // {dtype}[{}] per {}: {}",
                lay.regs(),
                dims.join(", "),
                scope.map_or("thread", |s| s.name()),
                lay.describe()
            ));
        }
        if self.role.as_ref().is_some_and(|r| r.wgmma_accs.contains(&l)) {
            let flag = self.derived(&format!("{name}_scale_d"));
            self.w.line(format!("int {flag} = 1;  // 0: the next wgmma writes {name} instead of accumulating (a zero() folded into it)"));
            self.scale_flags.insert(l, flag);
        }
        Ok(())
    }

    /// The layout of a window `x[rows, cols]` of an accumulator fragment: whole 16-row tiles (warp
    /// fragments; a warpgroup fragment keeps its 64 rows) and whole 8-column tiles.
    /// Materialize every reduction inside `e` (post-order) into temporaries; returns nothing, the
    /// temporaries are remembered by expression.
    pub(crate) fn materialize_reductions(&mut self, e: Handle<Expr>, temps: &mut Vec<(Handle<Expr>, String)>) -> Result<(), LowerError> {
        let m = self.m;
        match &m.exprs[e].kind {
            ExprKind::Call(c) if c.op.starts_with("reduce_") => {
                let name = self.fresh("red");
                self.reduction(e, &name, temps)?;
                temps.push((e, name));
            }
            ExprKind::Call(c) => {
                for a in c.args.iter().flatten() {
                    self.materialize_reductions(*a, temps)?;
                }
            }
            ExprKind::Unary(_, a) => self.materialize_reductions(*a, temps)?,
            ExprKind::Binary(_, a, b) => {
                self.materialize_reductions(*a, temps)?;
                self.materialize_reductions(*b, temps)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Emit a reduction call `e` into a new array `name`.
    ///
    /// Per row slot, each thread reduces the elements it holds, then the lanes of its quad combine
    /// their partial results with `shfl.sync.bfly` (xor 1, xor 2). `reduce_sum` folds the elements
    /// one after another (in index order, so its rounding does not depend on this lowering);
    /// `reduce_min` / `reduce_max` fold them as a pairwise tree, `⌈log2 n⌉` dependent steps
    /// instead of `n − 1`. `reduce_argmin` / `reduce_argmax` first take the row's extremum that
    /// way (or reuse one already computed, see [`RowExtremum`]), then the smallest column holding
    /// it: an integer `min` over columns, branch-free, with one shuffle per butterfly step. NaN
    /// equals nothing and `fminf` / `fmaxf` skip it, so a NaN never wins and an all-NaN row finds
    /// no column (index 0).
    pub(crate) fn reduction(&mut self, e: Handle<Expr>, name: &str, temps: &mut Vec<(Handle<Expr>, String)>) -> Result<(), LowerError> {
        let m = self.m;
        let span = self.expr_span(e);
        let ExprKind::Call(c) = &m.exprs[e].kind else { unreachable!() };
        let x = c.args.first().copied().flatten().ok_or_else(|| LowerError::new("L001", "reduce without operand", span))?;
        self.materialize_reductions(x, temps)?;
        let Some(lx) = self.layout_of(x)? else {
            return self.distributed_reduction(e, x, name, temps);
        };
        // An operand with a layout whose reduction has none (a reduction of a per-warp scalar,
        // `reduce_sum(exp(8 - m))`): not a shape the lowering has a layout for.
        let Some(out) = self.layout_of(e)? else {
            return Err(LowerError::new("L007", format!("`{}`: its operand has a register layout the lowering does not reduce ({})", c.op, lx.describe()), span));
        };
        let Layout::Acc { n_tiles, .. } = lx else {
            return Err(unsupported(format!("a reduction over the {}", lx.describe()), span));
        };
        let xd = m.exprs[x].ty.dtype().ok_or_else(|| unsupported("reduction operand dtype", span))?;
        let xty = reg_ctype(xd, lx).ok_or_else(|| unsupported("reduction operand dtype", span))?;
        let op = c.op.as_str();
        if !matches!(op, "reduce_min" | "reduce_max" | "reduce_sum" | "reduce_argmin" | "reduce_argmax") {
            return Err(unsupported(format!("`{op}`"), span));
        }
        let is_arg = op == "reduce_argmin" || op == "reduce_argmax";
        let max = op == "reduce_max" || op == "reduce_argmax";
        let out_ty = m.exprs[e].ty.dtype().and_then(|d| reg_ctype(d, out)).ok_or_else(|| unsupported("this reduction's result type", span))?;
        let float = xd.is_float();
        let combine = |a: &str, b: &str| -> String {
            match (op, float) {
                ("reduce_sum", _) => format!("{a} + {b}"),
                (_, true) if max => format!("fmaxf({a}, {b})"),
                (_, true) => format!("fminf({a}, {b})"),
                (_, false) if max => format!("({b} > {a} ? {b} : {a})"),
                (_, false) => format!("({b} < {a} ? {b} : {a})"),
            }
        };
        let cols = 2 * n_tiles;
        let reuse = if is_arg { self.row_extremum(x, max) } else { None };
        self.w.line(format!("{out_ty} {name}[{}];  // {op} over axis 1: {}", out.regs(), out.describe()));
        self.w.line("#pragma unroll");
        self.w.open(format!("for (int cake_s = 0; cake_s < {}; ++cake_s) {{  // row slot: 16-row tile cake_s / 2, half cake_s % 2", out.regs()));
        let reg_index = format!("((cake_s / 2) * {n_tiles} + cake_c / 2) * 4 + (cake_s % 2) * 2 + cake_c % 2");
        if op == "reduce_sum" {
            self.w.line(format!("{xty} cake_v = 0;"));
            self.w.line("#pragma unroll");
            self.w.open(format!("for (int cake_c = 0; cake_c < {cols}; ++cake_c) {{  // this thread's columns of the row, in index order"));
            self.w.line(format!("const int cake_i = {reg_index};"));
            let v = self.elem(x, lx, "cake_i", temps)?;
            self.w.line(format!("const {xty} cake_x = {};", strip_parens(&v)));
            self.w.line(format!("cake_v = cake_c == 0 ? cake_x : {};", combine("cake_v", "cake_x")));
            self.w.close("}");
            self.quad_butterfly("cake_v", &combine("cake_v", "cake_y"));
            self.w.line(format!("{name}[cake_s] = cake_v;"));
            self.w.close("}");
            return Ok(());
        }
        self.w.line(format!("{xty} cake_x[{cols}];  // this thread's elements of the row, in index order"));
        self.w.line("#pragma unroll");
        self.w.open(format!("for (int cake_c = 0; cake_c < {cols}; ++cake_c) {{"));
        self.w.line(format!("const int cake_i = {reg_index};"));
        let v = self.elem(x, lx, "cake_i", temps)?;
        self.w.line(format!("cake_x[cake_c] = {};", strip_parens(&v)));
        self.w.close("}");
        let kind = if max { "maximum" } else { "minimum" };
        match &reuse {
            Some(r) => {
                self.w.line(format!("// the row's {kind} is `{r}`, already reduced in this scope"));
                self.w.line(format!("const {xty} cake_v = {r}[cake_s];"));
            }
            None => {
                self.w.line(format!("// the row's {kind}: a pairwise tree over this thread's elements, then across the quad"));
                self.tree(xty, "cake_x", "cake_t", cols, &|a: &str, b: &str| combine(a, b));
                self.w.line(format!("{xty} cake_v = cake_t[0];"));
                self.quad_butterfly("cake_v", &combine("cake_v", "cake_y"));
            }
        }
        if !is_arg {
            self.w.line(format!("{name}[cake_s] = cake_v;"));
            self.w.close("}");
            return Ok(());
        }
        // The smallest column holding the extremum. Columns in chunks of 4: inside a chunk a chain
        // of selects from its last column to its first, then a min tree over the chunks.
        // Every column of a thread is `register part + lane part`; the selects pick register parts
        // (constants after unrolling), and the lane part is added once before the quad exchange.
        let (col, lane) = lx.col_parts("cake_i").expect("acc col");
        let chunks = cols.div_ceil(4);
        self.w.line("// the smallest of this thread's columns holding it (none: 0x7fffffff): the register part of the column (chunks of 4, then a min tree), plus the lane part, then the quad");
        self.w.line(format!("int cake_k[{chunks}];"));
        self.w.line("#pragma unroll");
        self.w.line(format!("for (int cake_j = 0; cake_j < {chunks}; ++cake_j) cake_k[cake_j] = 0x7fffffff;"));
        self.w.line("#pragma unroll");
        self.w.open(format!("for (int cake_c = {}; cake_c >= 0; --cake_c) {{", cols - 1));
        self.w.line(format!("const int cake_i = {reg_index};"));
        self.w.line(format!("cake_k[cake_c / 4] = cake_x[cake_c] == cake_v ? {col} : cake_k[cake_c / 4];"));
        self.w.close("}");
        self.tree("int", "cake_k", "cake_k", chunks, &|a: &str, b: &str| format!("min({a}, {b})"));
        self.w.line(format!("int cake_vi = cake_k[0] == 0x7fffffff ? 0x7fffffff : cake_k[0] + {lane};"));
        self.quad_butterfly("cake_vi", "min(cake_vi, cake_y)");
        self.w.line(format!("{name}[cake_s] = cake_vi == 0x7fffffff ? 0 : cake_vi;  // no column: an all-NaN row"));
        self.w.close("}");
        Ok(())
    }

    /// Emit a pairwise tree reduction of `src[0..n]` (C arrays) in index order: the first level
    /// writes `dst[j] = f(src[2j], src[2j + 1])` (a new array `dst` of `ty`, unless it is `src`),
    /// each further level folds `dst` in place; the result is `dst[0]`.
    fn tree(&mut self, ty: &str, src: &str, dst: &str, n: u32, f: &dyn Fn(&str, &str) -> String) {
        if dst != src {
            self.w.line(format!("{ty} {dst}[{}];", n.div_ceil(2).max(1)));
            if n == 1 {
                self.w.line(format!("{dst}[0] = {src}[0];"));
                return;
            }
        }
        let mut n = n;
        let mut from = src;
        while n > 1 {
            let half = n / 2;
            if half == 1 {
                self.w.line(format!("{dst}[0] = {};", f(&format!("{from}[0]"), &format!("{from}[1]"))));
            } else {
                self.w.line("#pragma unroll");
                self.w.line(format!(
                    "for (int cake_j = 0; cake_j < {half}; ++cake_j) {dst}[cake_j] = {};",
                    f(&format!("{from}[2 * cake_j]"), &format!("{from}[2 * cake_j + 1]"))
                ));
            }
            if n % 2 == 1 {
                self.w.line(format!("{dst}[{half}] = {from}[{}];", n - 1));
            }
            n = n.div_ceil(2);
            from = dst;
        }
    }

    /// Emit the butterfly over the four lanes of a quad (which hold the rest of an accumulator
    /// row): `v = combine(v, cake_y)` with `cake_y` the partner lane's `v`, xor 1 then xor 2.
    fn quad_butterfly(&mut self, v: &str, combine: &str) {
        self.w.line("// the other columns of the row live in the other three lanes of the quad");
        self.w.line("#pragma unroll");
        self.w.open("for (int cake_o = 1; cake_o < 4; cake_o *= 2) {");
        self.w.line(format!("const auto cake_y = __shfl_xor_sync(0xffffffffu, {v}, cake_o);"));
        self.w.line(format!("{v} = {combine};"));
        self.w.close("}");
    }

    /// The C array holding the row minimum (`max`: maximum) of `x` over axis 1, when a `let` in
    /// scope already reduced it and `x` is a `let` fragment (so it cannot have changed since).
    fn row_extremum(&self, x: Handle<Expr>, max: bool) -> Option<String> {
        let ExprKind::Local(l) = self.m.exprs[x].kind else { return None };
        self.row_extrema.iter().rev().find(|r| r.x == l && r.max == max).map(|r| r.name.clone())
    }

    /// Remember `let name = reduce_min(x, axis=1)` / `reduce_max` of a `let` fragment `x` for the
    /// arg-reductions of `x` that follow in the same block.
    fn note_row_extremum(&mut self, l: Handle<Local>, value: Handle<Expr>, name: &str) {
        let m = self.m;
        let ExprKind::Call(c) = &m.exprs[value].kind else { return };
        let max = match c.op.as_str() {
            "reduce_min" => false,
            "reduce_max" => true,
            _ => return,
        };
        let Some(Some(x)) = c.args.first().copied() else { return };
        let ExprKind::Local(xl) = m.exprs[x].kind else { return };
        if m.locals[xl].kind != LocalKind::Let || self.aliases.contains_key(&xl) || m.locals[l].kind != LocalKind::Let {
            return;
        }
        self.row_extrema.push(RowExtremum { x: xl, max, name: name.to_string() });
    }

    /// C: element `i` (a C expression) of a value in layout `lay`.
    pub(crate) fn elem(&mut self, e: Handle<Expr>, lay: Layout, i: &str, temps: &[(Handle<Expr>, String)]) -> Result<String, LowerError> {
        let m = self.m;
        let span = self.expr_span(e);
        if let Some((_, t)) = temps.iter().find(|(x, _)| *x == e) {
            // A reduction each thread holds whole (one value) broadcasts into any layout.
            let one_value = !matches!(m.exprs[e].ty, Type::Frag { .. }) || self.layout_of(e)? == Some(Layout::Scalar);
            return Ok(if one_value { format!("{t}[0]") } else { format!("{t}[{i}]") });
        }
        if let ExprKind::Local(l) = m.exprs[e].kind {
            if let Some(v) = self.aliases.get(&l).copied() {
                let saved = self.enter_alias(l);
                let c = self.elem(v, lay, i, temps);
                self.leave_alias(saved);
                return c;
            }
        }
        let ex = &m.exprs[e];
        match &ex.ty {
            Type::Scalar(_) | Type::Literal { .. } => return self.scalar(e),
            Type::Shared { shape, dtype, .. } => {
                // A shared vector broadcast along the last axis of the fragment.
                let r = self.smem_ref(e)?;
                let contiguous_vector = shape.len() == 1
                    && r.swizzle == Swizzle::None
                    && !matches!(dtype, DType::BF16 | DType::F16)
                    && r.strides.first() == Some(&dtype.size_bytes());
                if !contiguous_vector {
                    // Any other window: broadcast by NumPy rules, element by element.
                    let wi = self.broadcast_idx(shape, lay, i, span)?;
                    return self.window_elem(e, &wi, span);
                }
                let lay_shape = lay.shape();
                if lay_shape.last() != Some(&shape[0]) {
                    return Err(LowerError::new("L007", format!("shared vector of {} elements does not match the fragment's last axis {lay_shape:?}", shape[0]), span));
                }
                let coord = if lay_shape.len() == 2 { lay.col(i) } else { lay.row(i) }
                    .ok_or_else(|| unsupported(format!("a shared broadcast into the {}", lay.describe()), span))?;
                let off = self.regions[r.region].offset;
                let rel = r.offset_c();
                let ptr = if rel == "0" { format!("cake_smem + {off}") } else { format!("cake_smem + {off} + {rel}") };
                let cty = layout::mem_ctype(*dtype);
                if matches!(dtype, DType::BF16 | DType::F16) {
                    return Err(unsupported("reading 16-bit shared values inside an expression", span));
                }
                return Ok(format!("((const {cty}*)({ptr}))[{coord}]"));
            }
            Type::Global { .. } => {
                let g = self.global_ref(e)?;
                let wshape: Vec<i64> = g.dims.iter().filter_map(|d| d.len).collect();
                let wi = self.broadcast_idx(&wshape, lay, i, span)?;
                return self.window_elem(e, &wi, span);
            }
            Type::Frag { .. } => {}
            _ => return Err(unsupported(format!("this value in a fragment expression ({})", ex.ty), span)),
        }
        Ok(match &ex.kind {
            ExprKind::Local(l) => {
                let ll = self.layouts.get(l).copied();
                let name = self.local_name(*l);
                match ll {
                    Some(Layout::Scalar | Layout::Uniform { n: 1 }) => format!("{name}[0]"),
                    Some(x) if x == lay && self.packed.contains(l) => {
                        self.need(Helper::UnpackF16x2);
                        format!("cake_f16x2_get({name}[({i}) / 2], ({i}) % 2)")
                    }
                    Some(x) if x == lay => format!("{name}[{i}]"),
                    Some(x) => {
                        return Err(LowerError::new(
                            "L007",
                            format!("`{}` has the {}, but this expression needs the {}", m.locals[*l].name, x.describe(), lay.describe()),
                            span,
                        ))
                    }
                    None => return Err(LowerError::new("L007", format!("`{}` has no layout", m.locals[*l].name), span)),
                }
            }
            ExprKind::Index { base, items } => {
                // A sub-tile of a fragment: element i of the window is element `full(i)` of the base.
                let full = self.layout_of(*base)?.ok_or_else(|| unsupported("indexing this value", span))?;
                let (Layout::Acc { n_tiles: fn_, .. }, Layout::Acc { m_tiles: sm, n_tiles: sn, .. }) = (full, lay) else {
                    return Err(unsupported(format!("a window of the {}", full.describe()), span));
                };
                let _ = sm;
                let mut off = ["0".to_string(), "0".to_string()];
                for (d, it) in items.iter().enumerate().take(2) {
                    if let IndexItem::Window { start, .. } = it {
                        let c = self.scalar(*start)?;
                        let unit = if d == 0 { 16 } else { 8 };
                        off[d] = format!("({}) / {unit}", strip_parens(&c));
                    }
                }
                let row_tile = if off[0] == "0" { format!("({i}) / 4 / {sn}") } else { format!("(({i}) / 4 / {sn} + {})", off[0]) };
                let col_tile = if off[1] == "0" { format!("(({i}) / 4) % {sn}") } else { format!("(({i}) / 4) % {sn} + {}", off[1]) };
                let fi = format!("({row_tile} * {fn_} + {col_tile}) * 4 + ({i}) % 4");
                return self.elem(*base, full, &fi, temps);
            }
            ExprKind::Unary(op, a) => {
                let ca = self.elem(*a, lay, i, temps)?;
                super::unary_c(*op, &ca, self.elem_prec(*a, temps))
            }
            ExprKind::Binary(op, a, b) => {
                let (ca, cb) = (self.elem(*a, lay, i, temps)?, self.elem(*b, lay, i, temps)?);
                super::binary_c(*op, &ca, self.elem_prec(*a, temps), &cb, self.elem_prec(*b, temps))
            }
            ExprKind::Call(c) if c.op == OpId::Iota.name() => {
                // The element's coordinate in the layout; x's values are not read.
                let axis = c.args.get(1).copied().flatten().and_then(|a| m.const_value(a)).unwrap_or(-1);
                let rank = m.exprs[e].ty.const_shape().map_or(0, |s| s.len());
                let coord = match (lay, rank) {
                    // A whole-held fragment of rank > 1 is row-major in its registers.
                    (Layout::Uniform { .. }, r) if r > 1 => None,
                    _ => lay.coord(axis, i),
                };
                let coord = coord.ok_or_else(|| unsupported(format!("`iota` along axis {axis} of the {}", lay.describe()), span))?;
                format!("(int)({coord})")
            }
            ExprKind::Call(c) => {
                let mut args = Vec::new();
                for a in c.args.iter().flatten() {
                    if matches!(m.exprs[*a].ty, Type::DTypeName(_)) {
                        continue;
                    }
                    args.push(self.elem(*a, lay, i, temps)?);
                }
                let src = c.args.first().copied().flatten().and_then(|a| m.exprs[a].ty.dtype());
                self.math(&c.op, &args, ex.ty.dtype(), src, span)?
            }
            _ => return Err(unsupported("this fragment expression", span)),
        })
    }

    fn elem_prec(&self, e: Handle<Expr>, temps: &[(Handle<Expr>, String)]) -> u8 {
        if temps.iter().any(|(x, _)| *x == e) {
            10
        } else {
            self.prec(e)
        }
    }

    pub(crate) fn let_stmt(&mut self, l: Handle<Local>, value: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        let m = self.m;
        // A `let` the derived layout cannot name (the verifier's V230 / V231).
        if let Some(f) = self.layout.registers.let_fault(l) {
            return Err(LowerError::from_fault(f));
        }
        let name = self.local_name(l);
        match &m.exprs[value].ty {
            Type::Scalar(d) => {
                let cty = layout::scalar_ctype(*d).ok_or_else(|| unsupported(format!("{d} scalars"), span))?;
                let v = self.scalar(value)?;
                self.scalar_lets.insert(l, value);
                self.w.line(format!("const {cty} {name} = {};", strip_parens(&v)));
                Ok(())
            }
            Type::Literal { float } => {
                let v = self.scalar(value)?;
                self.scalar_lets.insert(l, value);
                self.w.line(format!("const {} {name} = {};", if *float { "float" } else { "int" }, strip_parens(&v)));
                Ok(())
            }
            Type::Frag { dtype, .. } => {
                let Some(lay) = self.layout_of(value)? else {
                    // Nothing to compute here: every use reads the window itself.
                    self.alias_snapshot(l, value)?;
                    self.aliases.insert(l, value);
                    self.w.line(format!("// `{}` names a read-only window: each use reads it in the layout it needs", m.locals[l].name));
                    return Ok(());
                };
                self.layouts.insert(l, lay);
                let cty = reg_ctype(*dtype, lay).ok_or_else(|| unsupported(format!("{dtype} fragments"), span))?;
                let mut temps = Vec::new();
                if let ExprKind::Call(c) = &m.exprs[value].kind {
                    if c.op.starts_with("reduce_") {
                        self.reduction(value, &name, &mut temps)?;
                        self.note_row_extremum(l, value, &name);
                        return Ok(());
                    }
                }
                self.materialize_reductions(value, &mut temps)?;
                self.w.line(format!("{cty} {name}[{}];  // {}", lay.regs(), lay.describe()));
                self.elementwise(&name, value, lay, &temps)
            }
            Type::Global { dtype, .. } => {
                if crate::ir::is_data_index_local(m, l) {
                    // A data-dependent index (`E[id, ...]`): loaded once here (0 outside its
                    // tensor), a scalar every use of `id` as an index reads.
                    let cty = layout::scalar_ctype(*dtype).ok_or_else(|| unsupported(format!("{dtype} indices"), span))?;
                    let zeros = vec!["0".to_string(); m.exprs[value].ty.const_shape().map_or(0, |s| s.len())];
                    let v = self.window_raw_pub(value, &zeros, span)?;
                    self.w.line(format!("const {cty} {name} = {};  // a data-dependent index, loaded once", strip_parens(&v)));
                }
                self.aliases.insert(l, value);
                self.w.line(format!("// `{}` names a read-only window: each use reads it in the layout it needs", m.locals[l].name));
                Ok(())
            }
            other => Err(unsupported(format!("`let` of a {other}"), span)),
        }
    }

    fn elementwise(&mut self, dst: &str, value: Handle<Expr>, lay: Layout, temps: &[(Handle<Expr>, String)]) -> Result<(), LowerError> {
        if lay.packed() {
            return Err(unsupported("elementwise arithmetic on packed mma operand fragments", self.expr_span(value)));
        }
        self.w.line("#pragma unroll");
        self.w.open(format!("for (int cake_i = 0; cake_i < {}; ++cake_i) {{", lay.regs()));
        let v = self.elem(value, lay, "cake_i", temps)?;
        self.w.line(format!("{dst}[cake_i] = {};", strip_parens(&v)));
        self.w.close("}");
        Ok(())
    }

    pub(crate) fn assign_stmt(&mut self, target: Handle<Expr>, value: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        let m = self.m;
        let ExprKind::Local(l) = m.exprs[target].kind else {
            return Err(unsupported("assigning to an element of a fragment", span));
        };
        let lay = *self.layouts.get(&l).ok_or_else(|| LowerError::new("L007", "assignment to a fragment without layout", span))?;
        let name = self.local_name(l);
        if lay == Layout::Scalar {
            let v = self.scalar(value)?;
            self.w.line(format!("{name}[0] = {};", strip_parens(&v)));
            return Ok(());
        }
        if let Some(vl) = self.layout_of(value)? {
            if vl != lay {
                return Err(LowerError::new(
                    "L007",
                    format!("the value has the {}, `{}` the {}", vl.describe(), m.locals[l].name, lay.describe()),
                    span,
                ));
            }
        }
        let mut temps = Vec::new();
        self.materialize_reductions(value, &mut temps)?;
        if self.packed.contains(&l) {
            // Two elements per register: compute both, round and pack them together.
            self.need(Helper::PackF16x2);
            self.w.line("#pragma unroll");
            self.w.open(format!("for (int cake_i = 0; cake_i < {}; cake_i += 2) {{", lay.regs()));
            let v0 = self.elem(value, lay, "cake_i", &temps)?;
            let v1 = self.elem(value, lay, "cake_i + 1", &temps)?;
            self.w.line(format!("{name}[cake_i / 2] = cake_pack_f16x2({}, {});", strip_parens(&v0), strip_parens(&v1)));
            self.w.close("}");
            return Ok(());
        }
        self.elementwise(&name, value, lay, &temps)
    }

    /// `zero(x)`: register moves, or — for a wgmma accumulator whose next use certainly is a
    /// wgmma — `scale_d = 0` on that wgmma.
    pub(crate) fn zero(&mut self, x: Handle<Expr>, span: Span, siblings: &[Handle<Stmt>], pos: usize) -> Result<(), LowerError> {
        let m = self.m;
        let ExprKind::Local(l) = m.exprs[x].kind else { return Err(unsupported("zero of a non-local", span)) };
        let lay = *self.layouts.get(&l).ok_or_else(|| LowerError::new("L007", "fragment without layout", span))?;
        let name = self.local_name(l);
        if let Some(flag) = self.scale_flags.get(&l).cloned() {
            if self.next_use_is_wgmma(l, &siblings[pos + 1..]) == Some(true) {
                self.w.line(format!("{flag} = 0;  // folded: the next wgmma on {name} ignores its old value"));
                return Ok(());
            }
        }
        let packed = self.packed.contains(&l);
        let zero = if lay.packed() || packed { "0u" } else { "0" };
        let n = if packed { lay.regs() / 2 } else { lay.regs() };
        self.w.line("#pragma unroll");
        self.w.line(format!("for (int cake_i = 0; cake_i < {n}; ++cake_i) {name}[cake_i] = {zero};"));
        Ok(())
    }

    /// Whether the first statement among `rest` that mentions `l` is a wgmma accumulating into it
    /// that certainly executes (straight-line or inside loops with a constant, positive trip count).
    fn next_use_is_wgmma(&self, l: Handle<Local>, rest: &[Handle<Stmt>]) -> Option<bool> {
        let m = self.m;
        for s in rest {
            let st = &m.stmts[*s];
            match st {
                Stmt::For { lo, hi, body, .. } => {
                    let mentions_bounds = self.mentions(l, *lo) || self.mentions(l, *hi);
                    if mentions_bounds {
                        return Some(false);
                    }
                    match self.next_use_is_wgmma(l, &body.stmts) {
                        None => continue,
                        Some(r) => {
                            let trips = match (self.m.const_value(*lo), self.m.const_value(*hi)) {
                                (Some(a), Some(b)) => b - a,
                                _ => 0,
                            };
                            return Some(r && trips >= 1);
                        }
                    }
                }
                Stmt::ForTiles { body, .. } => {
                    if self.next_use_is_wgmma(l, &body.stmts).is_some() {
                        return Some(false);
                    }
                }
                Stmt::If { cond, then_block, else_block } => {
                    if self.mentions(l, *cond)
                        || self.next_use_is_wgmma(l, &then_block.stmts).is_some()
                        || else_block.as_ref().is_some_and(|b| self.next_use_is_wgmma(l, &b.stmts).is_some())
                    {
                        return Some(false);
                    }
                }
                other => {
                    let mut found = false;
                    self.stmt_exprs(other, &mut |e| {
                        if matches!(m.exprs[e].kind, ExprKind::Local(x) if x == l) {
                            found = true;
                        }
                    });
                    if found {
                        let is_wgmma_acc = matches!(other, Stmt::Op(c) if c.op == "wgmma"
                            && c.args.first().copied().flatten().is_some_and(|a| matches!(m.exprs[a].kind, ExprKind::Local(x) if x == l)));
                        return Some(is_wgmma_acc);
                    }
                }
            }
        }
        None
    }

    fn mentions(&self, l: Handle<Local>, e: Handle<Expr>) -> bool {
        let mut found = false;
        self.walk_expr(e, &mut |x| {
            if matches!(self.m.exprs[x].kind, ExprKind::Local(y) if y == l) {
                found = true;
            }
        });
        found
    }

    pub(crate) fn fill(&mut self, x: Handle<Expr>, v: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        let m = self.m;
        let ExprKind::Local(l) = m.exprs[x].kind else { return Err(unsupported("fill of a non-local", span)) };
        let lay = *self.layouts.get(&l).ok_or_else(|| LowerError::new("L007", "fragment without layout", span))?;
        if lay.packed() {
            return Err(unsupported("fill of a packed operand fragment", span));
        }
        let dtype = m.exprs[x].ty.dtype();
        if matches!(m.exprs[v].kind, ExprKind::Inf) && !dtype.is_some_and(|d| d.is_float()) {
            return Err(LowerError::new("L001", "`inf` has no value in an integer fragment", span));
        }
        let name = self.local_name(l);
        let val = self.scalar(v)?;
        if self.packed.contains(&l) {
            self.need(Helper::PackF16x2);
            let v = strip_parens(&val).to_string();
            self.w.line("#pragma unroll");
            self.w.line(format!("for (int cake_i = 0; cake_i < {}; ++cake_i) {name}[cake_i] = cake_pack_f16x2({v}, {v});", lay.regs() / 2));
            return Ok(());
        }
        let val = match dtype {
            Some(DType::BF16) if !matches!(m.exprs[v].kind, ExprKind::Inf) => {
                self.need(Helper::RoundBf16);
                self.need(Helper::PackBf16x2);
                format!("cake_round_bf16({})", strip_parens(&val))
            }
            _ => val,
        };
        self.w.line("#pragma unroll");
        self.w.line(format!("for (int cake_i = 0; cake_i < {}; ++cake_i) {name}[cake_i] = {};", lay.regs(), strip_parens(&val)));
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // store

    pub(crate) fn store(&mut self, dst: Handle<Expr>, src: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        let m = self.m;
        let Some(lay) = self.layout_of(src)?.filter(|l| !l.whole_in_each_thread()) else {
            // Values without a register layout, and those every thread holds whole: the threads
            // that store the same window split its elements.
            return self.store_distributed(dst, src, span);
        };
        if matches!(m.exprs[dst].ty, Type::Shared { .. }) {
            return self.store_frag_shared(dst, src, lay, span);
        }
        let g = self.global_ref(dst)?;
        let td = &m.tensors[g.tensor];
        let dtype = td.dtype;
        let win: Vec<usize> = g.dims.iter().enumerate().filter(|(_, d)| d.len.is_some()).map(|(i, _)| i).collect();
        let lshape = lay.shape();
        let wshape: Vec<i64> = win.iter().map(|d| g.dims[*d].len.expect("window")).collect();
        if wshape != lshape {
            return Err(LowerError::new("L007", format!("window shape {wshape:?} does not match the fragment's {lshape:?}"), span));
        }
        let mut temps = Vec::new();
        self.materialize_reductions(src, &mut temps)?;
        let base = self.gbase_c(&g);
        let cty = layout::mem_ctype(dtype);
        self.w.open("{");
        self.w.line(format!("{cty}* const cake_p = {base};  // the window's first element"));
        // Guards: each window dimension against the tensor's extent.
        let guard = |lw: &mut Lw, d: usize, local: &str| -> String {
            let ext = size_c(lw.m, &lw.m.tensors[g.tensor].shape[d]);
            let start = &g.dims[d].start;
            if start == "0" {
                format!("{local} < {ext}")
            } else {
                format!("({}) + {local} < {ext}", strip_parens(start))
            }
        };
        match lay {
            Layout::Acc { .. } => {
                let (dr, dc) = (win[0], win[1]);
                if dc + 1 != td.shape.len() {
                    return Err(unsupported("storing an accumulator whose columns are not the tensor's innermost dimension", span));
                }
                let rs = self.gstride(g.tensor, dr);
                // Two adjacent elements in one store: every pair starts at an even element offset
                // (even innermost extent, even window start) and is wholly inside or outside.
                let pair_ok = size_multiple(m, &td.shape[dc]) % 2 == 0 && g.dims[dc].start_mult % 2 == 0;
                let row = lay.row("cake_i").expect("row");
                let col = lay.col("cake_i").expect("col");
                let g_row = guard(self, dr, "cake_row");
                let g_col = guard(self, dc, "cake_col");
                let cast_src = self.cast_operand(src, dtype);
                self.w.line("#pragma unroll");
                self.w.open(format!("for (int cake_i = 0; cake_i < {}; cake_i += 2) {{  // column pairs", lay.regs()));
                self.w.line(format!("const int cake_row = {row};"));
                let col_line = format!("const int cake_col = {col};");
                self.w.line(col_line.replace(" + (cake_i) % 2", "").replace(" + cake_i % 2", ""));
                let off = format!("(long long)cake_row * {rs} + cake_col");
                if pair_ok {
                    // 16-bit values are held as f32 of equal value; a cast(f32) source is rounded
                    // once, by the packing conversion.
                    let inner = cast_src.unwrap_or(src);
                    if let (DType::F16, ExprKind::Local(pl)) = (dtype, &m.exprs[src].kind) {
                        if self.packed.contains(pl) {
                            // Already two f16 in one register, in memory order.
                            let name = self.local_name(*pl);
                            self.w.line(format!("if ({g_row} && {g_col}) *(unsigned*)(cake_p + {off}) = {name}[cake_i / 2];"));
                            self.w.close("}");
                            self.w.close("}");
                            return Ok(());
                        }
                    }
                    let v0 = self.elem(inner, lay, "cake_i", &temps)?;
                    let v1 = self.elem(inner, lay, "cake_i + 1", &temps)?;
                    let (v0, v1) = (strip_parens(&v0).to_string(), strip_parens(&v1).to_string());
                    let stmt = match dtype {
                        DType::BF16 => {
                            self.need(Helper::PackBf16x2);
                            format!("*(unsigned*)(cake_p + {off}) = cake_pack_bf16x2({v0}, {v1});")
                        }
                        DType::F16 => {
                            self.need(Helper::PackF16x2);
                            format!("*(unsigned*)(cake_p + {off}) = cake_pack_f16x2({v0}, {v1});")
                        }
                        DType::F32 => format!("*(float2*)(cake_p + {off}) = make_float2({v0}, {v1});"),
                        DType::I32 => format!("*(int2*)(cake_p + {off}) = make_int2({v0}, {v1});"),
                        DType::U32 => format!("*(uint2*)(cake_p + {off}) = make_uint2({v0}, {v1});"),
                        _ => return Err(unsupported(format!("storing {dtype} fragments"), span)),
                    };
                    self.w.line(format!("if ({g_row} && {g_col}) {stmt}"));
                } else {
                    for (k, idx) in ["cake_i", "cake_i + 1"].iter().enumerate() {
                        let v = self.store_value(src, cast_src, dtype, lay, idx, &temps, span)?;
                        let gc = if k == 0 { g_col.clone() } else { g_col.replace("cake_col", "cake_col + 1") };
                        self.w.line(format!("if ({g_row} && {gc}) cake_p[{off} + {k}] = {v};"));
                    }
                }
                self.w.close("}");
            }
            Layout::Rows { .. } => {
                let dr = win[0];
                let rs = self.gstride(g.tensor, dr);
                let cast_src = self.cast_operand(src, dtype);
                let row = lay.row("cake_i").expect("row");
                let g_row = guard(self, dr, "cake_row");
                self.w.open("if (cake_lane % 4 == 0) {  // the quad's four lanes hold the same rows: the first one stores");
                self.w.line("#pragma unroll");
                self.w.open(format!("for (int cake_i = 0; cake_i < {}; ++cake_i) {{", lay.regs()));
                self.w.line(format!("const int cake_row = {row};"));
                let v = self.store_value(src, cast_src, dtype, lay, "cake_i", &temps, span)?;
                let off = if rs == "1" { "cake_row".to_string() } else { format!("(long long)cake_row * {rs}") };
                self.w.line(format!("if ({g_row}) cake_p[{off}] = {v};"));
                self.w.close("}");
                self.w.close("}");
            }
            _ => return Err(unsupported(format!("storing a fragment in the {}", lay.describe()), span)),
        }
        self.w.close("}");
        Ok(())
    }

    /// For `cast(x, T)` stored into a T tensor: `x` (the conversion happens in the store).
    pub(crate) fn cast_operand(&self, src: Handle<Expr>, dtype: DType) -> Option<Handle<Expr>> {
        match &self.m.exprs[src].kind {
            ExprKind::Call(c) if c.op == "cast" && self.m.exprs[src].ty.dtype() == Some(dtype) => {
                let x = c.args.first().copied().flatten()?;
                (self.m.exprs[x].ty.dtype() == Some(DType::F32)).then_some(x)
            }
            _ => None,
        }
    }

    /// C: the storage value of one element.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn store_value(
        &mut self,
        src: Handle<Expr>,
        cast_src: Option<Handle<Expr>>,
        dtype: DType,
        lay: Layout,
        idx: &str,
        temps: &[(Handle<Expr>, String)],
        span: Span,
    ) -> Result<String, LowerError> {
        Ok(match dtype {
            DType::BF16 | DType::F16 => {
                let v = self.elem(cast_src.unwrap_or(src), lay, idx, temps)?;
                let (h, f) = if dtype == DType::BF16 { (Helper::PackBf16x2, "cake_pack_bf16x2") } else { (Helper::PackF16x2, "cake_pack_f16x2") };
                self.need(h);
                format!("(unsigned short)({f}({}, 0.0f) & 0xFFFFu)", strip_parens(&v))
            }
            DType::F32 | DType::I32 | DType::U32 | DType::I64 => {
                let v = self.elem(src, lay, idx, temps)?;
                strip_parens(&v).to_string()
            }
            DType::Bool => {
                let v = self.elem(src, lay, idx, temps)?;
                format!("(unsigned char)({})", strip_parens(&v))
            }
            _ => return Err(unsupported(format!("storing {dtype}"), span)),
        })
    }
}
