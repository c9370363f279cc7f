//! Memory windows as values: reading one element of a shared or global window, windows broadcast
//! into fragment expressions (NumPy rules: trailing dimensions align, extent 1 broadcasts), `let`
//! names for read-only windows, and stores of values without a register layout (shared → shared,
//! global → global), spread over the threads that compute the same window.

use super::layout::{self, Layout};
use super::prelude::Helper;
use super::{size_c, strip_parens, unsupported, LowerError, Lw};

/// `atomic_add` / `atomic_min` / `atomic_max` (element loops like [`Lw::store_distributed`]).
pub(crate) mod atomic;
use crate::ir::*;
use crate::ops::OpId;
use crate::span::Span;

/// Which threads cooperate on a layout-free store: those that evaluate the same window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Warp,
    Warpgroup,
    Role,
}

/// An open element loop (see [`Lw::begin_elements`]): `vector` consecutive elements per thread
/// and step (1: one at a time).
#[derive(Clone, Debug)]
pub(crate) struct ElementLoop {
    vector: u32,
}

/// The C type of `bytes` (4, 8 or 16) loaded or stored as one access.
fn vector_ctype(bytes: u64) -> &'static str {
    match bytes {
        16 => "uint4",
        8 => "uint2",
        _ => "unsigned",
    }
}

impl<'a> Lw<'a> {
    /// C: element `idx` (one C index per dimension of the window's shape) of a shared or global
    /// window, widened to its register type (16-bit floats to f32). Global reads outside the
    /// tensor give 0.
    pub(crate) fn window_elem(&mut self, e: Handle<Expr>, idx: &[String], span: Span) -> Result<String, LowerError> {
        let Some(dtype) = self.m.exprs[e].ty.dtype() else { return Err(unsupported("reading an untyped window", span)) };
        if let Some(bits) = self.vector_elem(e, dtype) {
            return Ok(match dtype {
                DType::BF16 => format!("__uint_as_float((unsigned){bits} << 16)"),
                DType::F16 => {
                    self.need(Helper::UnpackF16x2);
                    format!("cake_f16x2_get({bits}, 0)")
                }
                DType::F8E4M3 | DType::F8E5M2 => self.fp8_get(dtype, &bits),
                _ => bits,
            });
        }
        let (ptr, guards) = self.window_ptr(e, idx, span)?;
        let v = self.load_c(dtype, &ptr);
        Ok(if guards.is_empty() { v } else { format!("({} ? {v} : 0)", guards.join(" && ")) })
    }

    /// [`Self::window_raw`] for the other lowering modules.
    pub(crate) fn window_raw_pub(&mut self, e: Handle<Expr>, idx: &[String], span: Span) -> Result<String, LowerError> {
        self.window_raw(e, idx, span)
    }

    /// C: element `idx` of a window in its storage type (bits unchanged), 0 outside the tensor.
    fn window_raw(&mut self, e: Handle<Expr>, idx: &[String], span: Span) -> Result<String, LowerError> {
        let Some(dtype) = self.m.exprs[e].ty.dtype() else { return Err(unsupported("reading an untyped window", span)) };
        if let Some(bits) = self.vector_elem(e, dtype) {
            return Ok(bits);
        }
        let (ptr, guards) = self.window_ptr(e, idx, span)?;
        let v = format!("*(const {}*)({ptr})", layout::mem_ctype(dtype));
        Ok(if guards.is_empty() { v } else { format!("({} ? {v} : 0)", guards.join(" && ")) })
    }

    /// C: a pointer to element `idx` of a shared or global window, and the conditions (global
    /// windows only) under which it lies inside the tensor.
    fn window_ptr(&mut self, e: Handle<Expr>, idx: &[String], span: Span) -> Result<(String, Vec<String>), LowerError> {
        let m = self.m;
        match &m.exprs[e].ty {
            Type::Shared { .. } => Ok((self.smem_elem_ptr(e, idx, span)?, Vec::new())),
            Type::Global { .. } => self.global_window_ptr(e, idx, span),
            Type::Scalar(_) if crate::ir::tensor_of_read(m, e).is_some() => self.global_window_ptr(e, idx, span),
            other => Err(unsupported(format!("reading a {other} as a window"), span)),
        }
    }

    /// [`Self::window_ptr`] of a global window, or of one element of a global tensor (`Ids[r]`).
    fn global_window_ptr(&mut self, e: Handle<Expr>, idx: &[String], span: Span) -> Result<(String, Vec<String>), LowerError> {
        let m = self.m;
        let scalar = matches!(m.exprs[e].ty, Type::Scalar(_));
        let g = self.global_ref(e)?;
        let win: Vec<usize> = g.dims.iter().enumerate().filter(|(_, d)| d.len.is_some()).map(|(i, _)| i).collect();
        if win.len() != idx.len() {
            return Err(LowerError::new("L007", format!("a {}-D global window indexed with {} coordinates", win.len(), idx.len()), span));
        }
        let base = self.gbase_c(&g);
        let mut off = Vec::new();
        let mut guards = self.data_guards(&g);
        if scalar {
            // One element (`Ids[r]`): each index against its extent.
            for (d, gd) in g.dims.iter().enumerate() {
                if !gd.data && m.tensors[g.tensor].shape[d].as_const().zip(gd.start.parse::<i64>().ok()).is_none_or(|(x, s)| s >= x) {
                    guards.push(format!("{} < {}", paren(&gd.start), size_c(m, &m.tensors[g.tensor].shape[d])));
                }
            }
        }
        for (k, d) in win.iter().enumerate() {
            let ix = idx[k].clone();
            if ix != "0" {
                let stride = self.gstride(g.tensor, *d);
                off.push(if stride == "1" { paren(&ix) } else { format!("(long long)({}) * {stride}", strip_parens(&ix)) });
            }
            let ext = size_c(m, &m.tensors[g.tensor].shape[*d]);
            let start = &g.dims[*d].start;
            let within_const = |v: &str| v.parse::<i64>().ok();
            let known_inside = match (m.tensors[g.tensor].shape[*d].as_const(), g.dims[*d].len) {
                (Some(ext), Some(len)) => within_const(start).is_some_and(|s| s + len <= ext),
                _ => false,
            };
            if !known_inside {
                guards.push(if start == "0" { format!("{} < {ext}", paren(&ix)) } else { format!("({}) + {} < {ext}", strip_parens(start), paren(&ix)) });
            }
        }
        let ptr = if off.is_empty() { base } else { format!("{base} + {}", off.join(" + ")) };
        Ok((ptr, guards))
    }

    /// C: a (generic) pointer to element `idx` of a shared window, swizzled per its region.
    fn smem_elem_ptr(&mut self, e: Handle<Expr>, idx: &[String], span: Span) -> Result<String, LowerError> {
        let r = self.smem_ref(e)?;
        if r.shape.len() != idx.len() {
            return Err(LowerError::new("L007", format!("a {}-D shared window indexed with {} coordinates", r.shape.len(), idx.len()), span));
        }
        let mut parts: Vec<String> = Vec::new();
        let rel = r.offset_c();
        if rel != "0" {
            parts.push(rel);
        }
        for (d, ix) in idx.iter().enumerate() {
            if ix != "0" {
                parts.push(super::frag::mul_c(r.strides[d], ix));
            }
        }
        let region_off = self.regions[r.region].offset;
        let off = if parts.is_empty() { "0".to_string() } else { parts.join(" + ") };
        Ok(if r.swizzle == Swizzle::None {
            match (region_off, off.as_str()) {
                (0, "0") => "cake_smem".to_string(),
                (0, _) => format!("cake_smem + {off}"),
                (_, "0") => format!("cake_smem + {region_off}"),
                _ => format!("cake_smem + {region_off} + {off}"),
            }
        } else {
            self.need(Helper::Swizzle);
            format!("cake_smem + {region_off} + cake_swizzle<{}>({off})", r.swizzle.bytes())
        })
    }

    /// C: the 32-bit shared address of element `idx` of a shared window, swizzled per its region.
    fn smem_elem_addr(&mut self, e: Handle<Expr>, idx: &[String], span: Span) -> Result<String, LowerError> {
        let r = self.smem_ref(e)?;
        if r.shape.len() != idx.len() {
            return Err(LowerError::new("L007", format!("a {}-D shared window indexed with {} coordinates", r.shape.len(), idx.len()), span));
        }
        let parts: Vec<String> = idx.iter().enumerate().filter(|(_, ix)| *ix != "0").map(|(d, ix)| super::frag::mul_c(r.strides[d], ix)).collect();
        let extra = parts.join(" + ");
        Ok(self.smem_addr_c(&r, if extra.is_empty() { None } else { Some(&extra) }))
    }

    /// C: a statement storing `v` (in the storage representation of `dtype`: 16-bit floats as
    /// `unsigned short` bits) at the 32-bit shared address `addr`.
    fn st_shared(&mut self, dtype: DType, addr: &str, v: &str, span: Span) -> Result<String, LowerError> {
        self.need(Helper::StShared);
        Ok(match dtype {
            DType::BF16 | DType::F16 => format!("cake_st_shared_u16({addr}, {v});"),
            DType::F32 => format!("cake_st_shared_u32({addr}, __float_as_uint({v}));"),
            DType::I32 | DType::U32 => format!("cake_st_shared_u32({addr}, (unsigned)({v}));"),
            _ => return Err(unsupported(format!("storing {dtype} values into shared memory"), span)),
        })
    }

    /// C: the value at `ptr` (a C pointer expression) as its register type.
    fn load_c(&mut self, dtype: DType, ptr: &str) -> String {
        match dtype {
            DType::BF16 => format!("__uint_as_float((unsigned)*(const unsigned short*)({ptr}) << 16)"),
            DType::F16 => {
                self.need(Helper::UnpackF16x2);
                format!("cake_f16x2_get(*(const unsigned short*)({ptr}), 0)")
            }
            DType::Bool => format!("(*(const unsigned char*)({ptr}) != 0)"),
            DType::F8E4M3 | DType::F8E5M2 => self.fp8_get(dtype, &format!("*(const unsigned char*)({ptr})")),
            d => format!("*(const {}*)({ptr})", layout::mem_ctype(d)),
        }
    }

    /// C: an fp8 byte `bits` (its storage type) as f32.
    fn fp8_get(&mut self, dtype: DType, bits: &str) -> String {
        self.need(Helper::UnpackF16x2);
        self.need(Helper::F8Get(dtype));
        format!("cake_{}_get({bits})", super::prelude::wgmma_type(dtype))
    }

    /// The window coordinates of layout element `i` for a window of shape `wshape` broadcast
    /// against the layout's shape (trailing dimensions align; extent 1 broadcasts).
    pub(crate) fn broadcast_idx(&self, wshape: &[i64], lay: Layout, i: &str, span: Span) -> Result<Vec<String>, LowerError> {
        let lshape = lay.shape();
        let coords: Vec<String> = match lay {
            Layout::Acc { .. } => vec![lay.row(i).expect("row"), lay.col(i).expect("col")],
            Layout::Rows { .. } => vec![lay.row(i).expect("row")],
            _ => return Err(unsupported(format!("a memory window inside an expression in the {}", lay.describe()), span)),
        };
        if wshape.len() > lshape.len() {
            return Err(LowerError::new("L007", format!("a window of shape {wshape:?} does not broadcast to the fragment's {lshape:?}"), span));
        }
        let k0 = lshape.len() - wshape.len();
        let mut out = Vec::new();
        for (d, w) in wshape.iter().enumerate() {
            if *w == lshape[k0 + d] {
                out.push(coords[k0 + d].clone());
            } else if *w == 1 {
                out.push("0".to_string());
            } else {
                return Err(LowerError::new("L007", format!("a window of shape {wshape:?} does not broadcast to the fragment's {lshape:?}"), span));
            }
        }
        Ok(out)
    }

    /// `let NAME = value` of window math that reads register fragments every thread holds whole
    /// (`reg m: f32[1] per warp`): copy each into a C array at the `let`, so that every use of the
    /// name — computed where it is used — reads the values they had at the `let`, even after a
    /// later assignment (a `let` is immutable).
    pub(crate) fn alias_snapshot(&mut self, l: Handle<Local>, value: Handle<Expr>) -> Result<(), LowerError> {
        let m = self.m;
        let mut regs = Vec::new();
        self.walk_expr(value, &mut |x| {
            if let ExprKind::Local(r) = m.exprs[x].kind {
                if m.locals[r].kind == LocalKind::Reg && !regs.contains(&r) {
                    regs.push(r);
                }
            }
        });
        let mut snaps = Vec::new();
        for r in regs {
            let lay = self.layouts[&r];
            let span = self.expr_span(value);
            let dtype = m.locals[r].ty.dtype().ok_or_else(|| unsupported("a register fragment without a dtype", span))?;
            let cty = layout::reg_ctype(dtype, lay).ok_or_else(|| unsupported(format!("{dtype} fragments"), span))?;
            let reg = self.local_name(r);
            let ln = self.local_name(l);
            let snap = self.fresh(&format!("{ln}_{reg}_"));
            self.w.line(format!("{cty} {snap}[{}];  // `{}` as at this `let`", lay.regs(), m.locals[r].name));
            self.w.line("#pragma unroll");
            self.w.line(format!("for (int cake_i = 0; cake_i < {}; ++cake_i) {snap}[cake_i] = {reg}[cake_i];", lay.regs()));
            snaps.push((r, snap));
        }
        if !snaps.is_empty() {
            self.alias_snapshots.insert(l, snaps);
        }
        Ok(())
    }

    /// Evaluate the value of `let` name `l` of window math: its whole-held registers read as kept
    /// at the `let`. Returns what [`Lw::leave_alias`] restores.
    pub(crate) fn enter_alias(&mut self, l: Handle<Local>) -> Vec<(Handle<Local>, Option<String>)> {
        let Some(snaps) = self.alias_snapshots.get(&l).cloned() else { return Vec::new() };
        snaps.into_iter().map(|(r, snap)| (r, self.local_names.insert(r, snap))).collect()
    }

    pub(crate) fn leave_alias(&mut self, saved: Vec<(Handle<Local>, Option<String>)>) {
        for (r, prev) in saved.into_iter().rev() {
            match prev {
                Some(n) => self.local_names.insert(r, n),
                None => self.local_names.remove(&r),
            };
        }
    }

    /// C: element `idx` (coordinates over `shape`, the store's window) of a value without a
    /// register layout: windows (broadcast by NumPy rules), scalars and math on them.
    fn flat_elem(&mut self, e: Handle<Expr>, shape: &[i64], idx: &[String]) -> Result<String, LowerError> {
        let m = self.m;
        let span = self.expr_span(e);
        if let ExprKind::Local(l) = m.exprs[e].kind {
            if let Some(t) = self.alias_temps.get(&l) {
                return Ok(t.clone());
            }
            if let Some(v) = self.aliases.get(&l).copied() {
                let saved = self.enter_alias(l);
                let c = self.flat_elem(v, shape, idx);
                self.leave_alias(saved);
                return c;
            }
        }
        let ex = &m.exprs[e];
        match &ex.ty {
            Type::Scalar(_) | Type::Literal { .. } => return self.scalar(e),
            Type::Shared { shape: ws, .. } => {
                let ws: Vec<i64> = ws.clone();
                let wi = flat_broadcast(&ws, shape, idx, span)?;
                return self.window_elem(e, &wi, span);
            }
            Type::Global { shape: ws, .. } => {
                let ws: Vec<i64> = ws.iter().map(|s| s.as_const().unwrap_or(-1)).collect();
                let g = self.global_ref(e)?;
                let wsh: Vec<i64> = g.dims.iter().filter_map(|d| d.len).collect();
                let _ = ws;
                let wi = flat_broadcast(&wsh, shape, idx, span)?;
                return self.window_elem(e, &wi, span);
            }
            Type::Frag { .. } => {}
            other => return Err(unsupported(format!("this value ({other}) in a store"), span)),
        }
        Ok(match &ex.kind {
            ExprKind::Local(l) => {
                let name = self.local_name(*l);
                return match self.layouts.get(l).copied() {
                    // Every thread holds it whole: broadcast by NumPy rules into the window.
                    Some(Layout::Scalar) => Ok(format!("{name}[0]")),
                    Some(Layout::Uniform { .. }) => {
                        let fs: &[i64] = match &ex.ty {
                            Type::Frag { shape, .. } => shape,
                            _ => &[],
                        };
                        let fi = flat_broadcast(fs, shape, idx, span)?;
                        let mut flat = Vec::new();
                        for (d, ix) in fi.iter().enumerate() {
                            let inner: i64 = fs[d + 1..].iter().product();
                            if ix != "0" {
                                flat.push(if inner == 1 { ix.clone() } else { format!("{inner} * {}", paren(ix)) });
                            }
                        }
                        Ok(if flat.is_empty() { format!("{name}[0]") } else { format!("{name}[{}]", flat.join(" + ")) })
                    }
                    _ => Err(LowerError::new("L007", format!("`{}` has no thread layout here", m.locals[*l].name), span)),
                };
            }
            ExprKind::Call(c) if c.op.starts_with("reduce_") => match self.flat_reductions.iter().find(|(x, _)| *x == e) {
                Some((_, t)) if !matches!(ex.ty, Type::Frag { .. }) || self.layout_of(e)? == Some(Layout::Scalar) => format!("{t}[0]"),
                _ => return Err(unsupported("a reduction inside an element-by-element expression", span)),
            },
            ExprKind::Unary(op, a) => {
                let ca = self.flat_elem(*a, shape, idx)?;
                super::unary_c(*op, &ca, self.alias_prec(*a))
            }
            ExprKind::Binary(op, a, b) => {
                let (ca, cb) = (self.flat_elem(*a, shape, idx)?, self.flat_elem(*b, shape, idx)?);
                super::binary_c(*op, &ca, self.alias_prec(*a), &cb, self.alias_prec(*b))
            }
            ExprKind::Call(c) if c.op == OpId::Iota.name() => {
                // The element's index in x's window (x broadcast into the store's window, NumPy
                // rules); x's values are not read.
                let x = c.args.first().copied().flatten().ok_or_else(|| unsupported("`iota` without an operand", span))?;
                let axis = c.args.get(1).copied().flatten().and_then(|a| m.const_value(a)).unwrap_or(-1);
                let xs = self.value_shape(x, span)?;
                let xi = flat_broadcast(&xs, shape, idx, span)?;
                let coord = usize::try_from(axis).ok().and_then(|a| xi.get(a)).ok_or_else(|| unsupported(format!("`iota` along axis {axis}"), span))?;
                format!("(int)({coord})")
            }
            ExprKind::Call(c) => {
                let mut args = Vec::new();
                for a in c.args.iter().flatten() {
                    if matches!(m.exprs[*a].ty, Type::DTypeName(_)) {
                        continue;
                    }
                    args.push(self.flat_elem(*a, shape, idx)?);
                }
                let src = c.args.first().copied().flatten().and_then(|a| m.exprs[a].ty.dtype());
                self.math(&c.op, &args, ex.ty.dtype(), src, span)?
            }
            _ => return Err(unsupported("this expression in a store", span)),
        })
    }

    /// The `let` names of windows an expression reads, each after the names its own value reads.
    fn aliases_read(&self, e: Handle<Expr>, out: &mut Vec<Handle<Local>>) {
        let m = self.m;
        let mut found = Vec::new();
        self.walk_expr(e, &mut |x| {
            if let ExprKind::Local(l) = m.exprs[x].kind {
                if self.aliases.contains_key(&l) && !found.contains(&l) {
                    found.push(l);
                }
            }
        });
        for l in found {
            if !out.contains(&l) {
                self.aliases_read(self.aliases[&l], out);
                if !out.contains(&l) {
                    out.push(l);
                }
            }
        }
    }

    /// C precedence of the code an expression lowers to, looking through `let` names of windows.
    pub(crate) fn alias_prec(&self, e: Handle<Expr>) -> u8 {
        match &self.m.exprs[e].kind {
            ExprKind::Local(l) => match self.aliases.get(l) {
                Some(v) => self.alias_prec(*v),
                None => 10,
            },
            _ => self.prec(e),
        }
    }

    /// The role fields (`R.warp`, `R.warpgroup`, `R.lane`) an expression reads, through `let` names.
    fn role_fields(&self, e: Handle<Expr>, out: &mut Vec<Field>) {
        let m = self.m;
        self.walk_expr(e, &mut |x| match &m.exprs[x].kind {
            ExprKind::Field { base, field } if matches!(m.exprs[*base].kind, ExprKind::Role(_)) => out.push(field.clone()),
            ExprKind::Local(l) => {
                if let Some(v) = self.aliases.get(l).or_else(|| self.scalar_lets.get(l)) {
                    self.role_fields(*v, out);
                }
            }
            _ => {}
        });
    }

    /// The shape of a value without a register layout (through `let` names of windows).
    fn value_shape(&mut self, e: Handle<Expr>, span: Span) -> Result<Vec<i64>, LowerError> {
        let m = self.m;
        if let ExprKind::Local(l) = m.exprs[e].kind {
            if let Some(v) = self.aliases.get(&l).copied() {
                return self.value_shape(v, span);
            }
        }
        Ok(match &m.exprs[e].ty {
            Type::Frag { shape, .. } | Type::Shared { shape, .. } => shape.clone(),
            Type::Global { .. } => self.global_ref(e)?.dims.iter().filter_map(|d| d.len).collect(),
            other => return Err(unsupported(format!("a reduction over a {other}"), span)),
        })
    }

    /// The threads that evaluate the same layout-free values `exprs` (a warp when they depend on
    /// `R.warp`, a warpgroup on `R.warpgroup`, else the role): their count, the C index of the
    /// calling thread among them, and how to say so.
    fn element_split(&self, exprs: &[Handle<Expr>], span: Span) -> Result<(Unit, u32, String, &'static str), LowerError> {
        let m = self.m;
        let rh = self.role.as_ref().map(|r| r.h).ok_or_else(|| unsupported("element-by-element work outside a role", span))?;
        let role = &m.roles[rh];
        let mut fields = Vec::new();
        for e in exprs {
            self.role_fields(*e, &mut fields);
        }
        if fields.contains(&Field::Lane) {
            return Err(LowerError::new("L007", "a value whose window depends on the lane has no thread layout", span)
                .with_note("use a register fragment, or index the window by warp or warpgroup"));
        }
        let unit = if fields.contains(&Field::Warp) {
            Unit::Warp
        } else if fields.contains(&Field::Warpgroup) {
            Unit::Warpgroup
        } else {
            Unit::Role
        };
        let first = role.warps().start * 32;
        let (n, tid, what) = match unit {
            Unit::Warp => (32, "cake_lane".to_string(), "the lanes of each warp"),
            Unit::Warpgroup => (128, "(int)(threadIdx.x % 128)".to_string(), "the threads of each warpgroup"),
            Unit::Role => (
                role.threads(),
                if first == 0 { "(int)threadIdx.x".to_string() } else { format!("(int)threadIdx.x - {first}") },
                "the role's threads",
            ),
        };
        if unit == Unit::Warpgroup && role.unit == RoleUnit::Warp && (role.warps().start % 4 != 0 || role.warps().end % 4 != 0) {
            return Err(unsupported("`.warpgroup` of a warp role that does not cover whole warpgroups", span));
        }
        // A role of one warp is a warp.
        let unit = if n == 32 { Unit::Warp } else { unit };
        Ok((unit, n, tid, what))
    }

    /// Element `cake_j` of a window loaded as a vector in the open element loop, in its storage
    /// type (bits unchanged).
    fn vector_elem(&self, e: Handle<Expr>, dtype: DType) -> Option<String> {
        let (_, name) = self.vector_reads.iter().find(|(x, _)| *x == e)?;
        Some(format!("((const {}*)&{name})[cake_j]", layout::mem_ctype(dtype)))
    }

    /// The memory windows an element loop over `values` reads, as `flat_elem` reaches them
    /// (through `let` names; not into reductions, which are computed ahead).
    fn windows_read(&self, e: Handle<Expr>, out: &mut Vec<Handle<Expr>>) {
        let m = self.m;
        match &m.exprs[e].kind {
            ExprKind::Local(l) => {
                if let Some(v) = self.aliases.get(l) {
                    self.windows_read(*v, out);
                }
                return;
            }
            ExprKind::Call(c) if c.op.starts_with("reduce_") => return,
            _ => {}
        }
        if matches!(m.exprs[e].ty, Type::Global { .. } | Type::Shared { .. }) {
            if !out.contains(&e) {
                out.push(e);
            }
            return;
        }
        match &m.exprs[e].kind {
            ExprKind::Unary(_, a) => self.windows_read(*a, out),
            ExprKind::Binary(_, a, b) => {
                self.windows_read(*a, out);
                self.windows_read(*b, out);
            }
            ExprKind::Call(c) => {
                for a in c.args.iter().flatten() {
                    self.windows_read(*a, out);
                }
            }
            _ => {}
        }
    }

    /// Elements per thread and step for an element loop over a 1-D `shape` split over `threads`
    /// that reads `reads` into `dst`: [`crate::layout::element_vector`], which the cost model
    /// reads too (a shared window among them keeps one element per step).
    fn vector_width(&self, shape: &[i64], threads: u32, reads: &[Handle<Expr>], dst: Option<Handle<Expr>>) -> u32 {
        if shape.len() != 1 {
            return 1;
        }
        let windows: Vec<Handle<Expr>> = reads.iter().chain(dst.iter()).copied().collect();
        crate::layout::element_vector(self.m, shape[0], threads, &windows)
    }

    /// Open the loop over a window's elements (`shape`, row-major) split round-robin over `n`
    /// threads, and bind the element of every `let` name `values` read; returns the C coordinates
    /// of the element. Where every global window involved allows it (see [`Lw::vector_width`]),
    /// each thread takes `V` consecutive elements per step: one vector load per window, then an
    /// inner loop over the `V` elements. Close with [`Lw::end_elements`].
    fn begin_elements(&mut self, shape: &[i64], n: u32, tid: &str, what: &str, values: &[Handle<Expr>], dst: Option<Handle<Expr>>) -> Result<Vec<String>, LowerError> {
        let m = self.m;
        let total: i64 = shape.iter().product();
        let mut reads = Vec::new();
        for v in values {
            self.windows_read(*v, &mut reads);
        }
        let vector = self.vector_width(shape, n, &reads, dst);
        self.element_loop = Some(ElementLoop { vector });
        let idx = if vector > 1 {
            self.w.line(format!("// {total} elements, {vector} consecutive ones per thread and step, split round-robin over {what} ({n})"));
            self.w.line(format!("const int cake_t = {tid};"));
            let steps = (total as u64).div_ceil(u64::from(n * vector)) as i64;
            let unroll = super::element_loop_unroll(steps, self.unrolled_copies);
            self.w.line(format!("#pragma unroll {unroll}"));
            self.w.open(format!("for (int cake_e0 = cake_t * {vector}; cake_e0 < {total}; cake_e0 += {}) {{", n * vector));
            for (k, e) in reads.iter().enumerate() {
                let dtype = m.exprs[*e].ty.dtype().expect("checked by vector_width");
                let bytes = u64::from(vector) * dtype.size_bytes();
                let vty = vector_ctype(bytes);
                let span = self.expr_span(*e);
                let (ptr, guards) = self.window_ptr(*e, &["cake_e0".to_string()], span)?;
                let name = format!("cake_v{k}");
                if guards.is_empty() {
                    self.w.line(format!("const {vty} {name} = *(const {vty}*)({ptr});  // {vector} elements in one {bytes}-byte load"));
                } else {
                    self.w.line(format!("{vty} {name} = {{}};  // {vector} elements in one {bytes}-byte load (zero outside the tensor)"));
                    self.w.line(format!("if ({}) {name} = *(const {vty}*)({ptr});", guards.join(" && ")));
                }
                self.vector_reads.push((*e, name));
            }
            if let Some(d) = dst.filter(|d| matches!(m.exprs[*d].ty, Type::Global { .. })) {
                let dtype = m.exprs[d].ty.dtype().expect("checked by vector_width");
                self.w.line(format!("{} cake_out[{vector}];  // the elements of one vector store", layout::mem_ctype(dtype)));
            }
            self.w.line("#pragma unroll");
            self.w.open(format!("for (int cake_j = 0; cake_j < {vector}; ++cake_j) {{"));
            self.w.line("const int cake_i0 = cake_e0 + cake_j;");
            vec!["cake_i0".to_string()]
        } else {
            let per = (total as u64).div_ceil(u64::from(n));
            self.w.line(format!("// {total} elements, split round-robin over {what} ({n})"));
            self.w.line(format!("const int cake_t = {tid};"));
            if per as i64 <= super::SCALAR_FULL_UNROLL_MAX {
                self.w.line("#pragma unroll");
            }
            self.w.open(format!("for (int cake_e = cake_t; cake_e < {total}; cake_e += {n}) {{"));
            // Coordinates of element cake_e, last dimension fastest.
            let mut idx = Vec::new();
            for d in 0..shape.len() {
                let inner: i64 = shape[d + 1..].iter().product();
                let mut c = if inner == 1 { "cake_e".to_string() } else { format!("cake_e / {inner}") };
                if d > 0 {
                    c = format!("{} % {}", paren(&c), shape[d]);
                }
                if shape[d] == 1 {
                    c = "0".to_string();
                }
                let name = format!("cake_i{d}");
                if c != "0" {
                    self.w.line(format!("const int {name} = {c};"));
                    idx.push(name);
                } else {
                    idx.push("0".to_string());
                }
            }
            idx
        };
        // Each `let` name the values read, once per element, in dependency order.
        let mut names = Vec::new();
        for v in values {
            self.aliases_read(*v, &mut names);
        }
        for l in names {
            let v = self.aliases[&l];
            let saved = self.enter_alias(l);
            let c = self.flat_elem(v, shape, &idx);
            self.leave_alias(saved);
            let c = c?;
            let cty = m.exprs[v].ty.dtype().and_then(layout::scalar_ctype).unwrap_or("float");
            let ln = self.local_name(l);
            let name = self.derived(&format!("{ln}_e"));
            self.w.line(format!("const {cty} {name} = {};", strip_parens(&c)));
            self.alias_temps.insert(l, name);
        }
        Ok(idx)
    }

    /// Whether the open element loop stores through a vector (`cake_out`, then one store).
    fn vector_store(&self) -> bool {
        self.element_loop.as_ref().is_some_and(|l| l.vector > 1)
    }

    /// Close the element loop `begin_elements` opened; `store` (a vectorized global store's
    /// destination and dtype) writes `cake_out` after the inner loop.
    fn end_elements(&mut self, store: Option<(Handle<Expr>, DType)>, span: Span) -> Result<(), LowerError> {
        self.alias_temps.clear();
        self.vector_reads.clear();
        let lp = self.element_loop.take().expect("an open element loop");
        self.w.close("}");
        if lp.vector > 1 {
            if let Some((dst, dtype)) = store {
                let (ptr, guards) = self.window_ptr(dst, &["cake_e0".to_string()], span)?;
                let vty = vector_ctype(u64::from(lp.vector) * dtype.size_bytes());
                let st = format!("*({vty}*)({ptr}) = *(const {vty}*)cake_out;");
                self.w.line(if guards.is_empty() { st } else { format!("if ({}) {st}", guards.join(" && ")) });
            }
            self.w.close("}");
        }
        Ok(())
    }

    /// The reductions inside a layout-free value, computed ahead of its element loop (their C
    /// arrays go to `flat_reductions`, which the caller restores afterwards).
    fn reductions_ahead(&mut self, value: Handle<Expr>) -> Result<Vec<(Handle<Expr>, String)>, LowerError> {
        let mut temps = Vec::new();
        self.materialize_reductions(value, &mut temps)?;
        Ok(std::mem::replace(&mut self.flat_reductions, temps))
    }

    /// A reduction (sum, min, max) over the only axis of a value without a register layout (a
    /// row window and math on it): the threads that read the same window (see
    /// [`Lw::element_split`]; a warp) each fold the elements they take round-robin, then combine
    /// across the warp by `shfl.sync.bfly`; every lane ends with the result in `name[0]`.
    pub(crate) fn distributed_reduction(&mut self, e: Handle<Expr>, x: Handle<Expr>, name: &str, _temps: &mut Vec<(Handle<Expr>, String)>) -> Result<(), LowerError> {
        let m = self.m;
        let span = self.expr_span(e);
        let ExprKind::Call(c) = &m.exprs[e].kind else { unreachable!("a reduction call") };
        let op = c.op.as_str();
        if !matches!(op, "reduce_sum" | "reduce_min" | "reduce_max" | "reduce_argmin" | "reduce_argmax") {
            return Err(unsupported(format!("`{op}` over a value without a register layout"), span)
                .with_note("sum, min, max, argmin and argmax reduce row windows"));
        }
        let shape = self.value_shape(x, span)?;
        if shape.len() != 1 {
            return Err(unsupported(format!("a reduction over a {}-D value without a register layout", shape.len()), span)
                .with_note("reduce a 1-D window (one row), e.g. X[r, :]"));
        }
        let (unit, n, tid, what) = self.element_split(&[x], span)?;
        if unit != Unit::Warp {
            return Err(unsupported("a reduction over a window several warps read together", span)
                .with_note("index the window by the role's warp (`R.warp`) so each warp reduces its own row"));
        }
        let xd = m.exprs[x].ty.dtype().ok_or_else(|| unsupported("reduction operand dtype", span))?;
        let out_d = m.exprs[e].ty.dtype().unwrap_or(xd);
        let cty = layout::scalar_ctype(out_d).ok_or_else(|| unsupported(format!("reducing {out_d} values"), span))?;
        let float = xd.is_float();
        let max = matches!(op, "reduce_max" | "reduce_argmax");
        // The fold's starting value: the identity of max / min for the operand's dtype.
        let extreme_identity = match (max, xd) {
            (true, _) if float => "__int_as_float(0xff800000)",
            (false, _) if float => "__int_as_float(0x7f800000)",
            (true, DType::U32) => "0u",
            (false, DType::U32) => "0xffffffffu",
            (true, _) => "(-2147483647 - 1)",
            (false, _) => "2147483647",
        };
        if matches!(op, "reduce_argmin" | "reduce_argmax") {
            return self.distributed_arg_reduction(e, x, name, &shape, (n, &tid, what), extreme_identity);
        }
        type Combine = fn(&str, &str) -> String;
        let (identity, combine): (&str, Combine) = match (op, float) {
            ("reduce_sum", _) => ("0", |a, b| format!("{a} + {b}")),
            ("reduce_max", true) => (extreme_identity, |a, b| format!("fmaxf({a}, {b})")),
            ("reduce_min", true) => (extreme_identity, |a, b| format!("fminf({a}, {b})")),
            ("reduce_max", false) => (extreme_identity, |a, b| format!("max({a}, {b})")),
            (_, false) => (extreme_identity, |a, b| format!("min({a}, {b})")),
            _ => unreachable!("checked above"),
        };
        let saved = self.reductions_ahead(x)?;
        self.w.line(format!("{cty} {name}[1];  // {op} over axis 0 of {} elements: every lane of the warp holds the result", shape[0]));
        self.w.open("{");
        self.w.line(format!("{cty} cake_v = {identity};"));
        let idx = self.begin_elements(&shape, n, &tid, what, &[x], None)?;
        let v = self.flat_elem(x, &shape, &idx)?;
        // A sum keeps its operand's own parentheses: stripped, `cake_v + (c ? a : b)` would
        // parse as `(cake_v + c) ? a : b`.
        let folded = if op == "reduce_sum" {
            super::binary_c(crate::syntax::ast::BinOp::Add, "cake_v", 10, &v, self.alias_prec(x))
        } else {
            combine("cake_v", strip_parens(&v))
        };
        self.w.line(format!("cake_v = {folded};"));
        self.end_elements(None, span)?;
        self.w.line("// the other elements live in the other lanes of the warp");
        self.w.line("#pragma unroll");
        self.w.line(format!("for (int cake_o = 16; cake_o > 0; cake_o /= 2) cake_v = {};", combine("cake_v", "__shfl_xor_sync(0xffffffffu, cake_v, cake_o)")));
        self.w.line(format!("{name}[0] = cake_v;"));
        self.w.close("}");
        self.flat_reductions = saved;
        Ok(())
    }

    /// `reduce_argmax` / `reduce_argmin` over the only axis of a value without a register layout
    /// (a row window and math on it), split over the lanes of a warp as
    /// [`Lw::distributed_reduction`]: each lane folds the elements it takes into a (value, index)
    /// pair — a strictly better value, or an equal one at a smaller index, replaces it — then the
    /// pairs combine by the same rule across the warp by `shfl.sync.bfly`, so the smallest index
    /// holding the extremum wins, independently of the split. NaN compares false and is never
    /// taken; a row with no element taken (all NaN) gives index 0, as over an accumulator. Every
    /// lane ends with the index (i32, relative to the axis) in `name[0]`.
    fn distributed_arg_reduction(&mut self, e: Handle<Expr>, x: Handle<Expr>, name: &str, shape: &[i64], split: (u32, &str, &str), identity: &str) -> Result<(), LowerError> {
        let m = self.m;
        let span = self.expr_span(e);
        let ExprKind::Call(c) = &m.exprs[e].kind else { unreachable!("a reduction call") };
        let op = c.op.as_str();
        let (n, tid, what) = split;
        let xd = m.exprs[x].ty.dtype().ok_or_else(|| unsupported("reduction operand dtype", span))?;
        let vty = layout::scalar_ctype(xd).ok_or_else(|| unsupported(format!("`{op}` of {xd} values"), span))?;
        let better = if op == "reduce_argmax" { ">" } else { "<" };
        let saved = self.reductions_ahead(x)?;
        self.w.line(format!(
            "int {name}[1];  // {op} over axis 0 of {} elements (ties: the smallest index): every lane of the warp holds the result",
            shape[0]
        ));
        self.w.open("{");
        self.w.line(format!("{vty} cake_v = {identity};"));
        self.w.line("int cake_k = 2147483647;  // the index of cake_v; none taken yet");
        let idx = self.begin_elements(shape, n, tid, what, &[x], None)?;
        let v = self.flat_elem(x, shape, &idx)?;
        let i = &idx[0];
        self.w.line(format!("const {vty} cake_a = {};", strip_parens(&v)));
        self.w.line(format!("if (cake_a {better} cake_v || (cake_a == cake_v && {i} < cake_k)) {{ cake_v = cake_a; cake_k = {i}; }}"));
        self.end_elements(None, span)?;
        self.w.line("// the other elements live in the other lanes of the warp: combine (value, index) pairs");
        self.w.line("#pragma unroll");
        self.w.open("for (int cake_o = 16; cake_o > 0; cake_o /= 2) {");
        self.w.line(format!("const {vty} cake_b = __shfl_xor_sync(0xffffffffu, cake_v, cake_o);"));
        self.w.line("const int cake_l = __shfl_xor_sync(0xffffffffu, cake_k, cake_o);");
        self.w.line(format!("if (cake_b {better} cake_v || (cake_b == cake_v && cake_l < cake_k)) {{ cake_v = cake_b; cake_k = cake_l; }}"));
        self.w.close("}");
        self.w.line(format!("{name}[0] = cake_k == 2147483647 ? 0 : cake_k;  // all NaN: index 0"));
        self.w.close("}");
        self.flat_reductions = saved;
        Ok(())
    }

    /// `store(dst, src)` of a value without a register layout: the threads that compute the same
    /// window (a warp when it depends on `R.warp`, a warpgroup on `R.warpgroup`, else the role)
    /// split its elements round-robin.
    /// The C value of element `idx` of `src` written into a window of `shape` and `dtype` (a store
    /// or an atomic). A window of the written dtype is read bit for bit (`true`: the write needs
    /// no conversion; a cast to that dtype is skipped); anything else is computed element by
    /// element, broadcast by NumPy rules (a scalar to every element).
    pub(crate) fn element_source(&mut self, src: Handle<Expr>, shape: &[i64], dtype: DType, idx: &[String], span: Span) -> Result<(String, bool), LowerError> {
        let m = self.m;
        let mut raw = src;
        while let ExprKind::Local(l) = m.exprs[raw].kind {
            match self.aliases.get(&l) {
                Some(v) => raw = *v,
                None => break,
            }
        }
        let raw_copy = matches!(m.exprs[raw].ty, Type::Shared { .. } | Type::Global { .. }) && m.exprs[raw].ty.dtype() == Some(dtype);
        let v = if raw_copy {
            let ws: Vec<i64> = match &m.exprs[raw].ty {
                Type::Shared { shape, .. } => shape.clone(),
                _ => self.global_ref(raw)?.dims.iter().filter_map(|d| d.len).collect(),
            };
            flat_broadcast(&ws, shape, idx, span).and_then(|wi| self.window_raw(raw, &wi, span))?
        } else {
            let value = self.cast_operand(src, dtype).unwrap_or(src);
            self.flat_elem(value, shape, idx)?
        };
        Ok((strip_parens(&v).to_string(), raw_copy))
    }

    pub(crate) fn store_distributed(&mut self, dst: Handle<Expr>, src: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        let m = self.m;
        let (_, n, tid, what) = self.element_split(&[dst, src], span)?;
        // The destination window.
        let (shape, dtype): (Vec<i64>, DType) = match &m.exprs[dst].ty {
            Type::Shared { shape, dtype, .. } => (shape.clone(), *dtype),
            Type::Global { dtype, .. } => {
                let g = self.global_ref(dst)?;
                (g.dims.iter().filter_map(|d| d.len).collect(), *dtype)
            }
            other => return Err(unsupported(format!("a store into a {other}"), span)),
        };
        let total: i64 = shape.iter().product();
        if total <= 0 {
            return Ok(());
        }
        let saved = self.reductions_ahead(src)?;
        self.w.open("{");
        let idx = self.begin_elements(&shape, n, &tid, what, &[src], Some(dst))?;
        let (v, raw_copy) = self.element_source(src, &shape, dtype, &idx, span)?;
        let stored = match dtype {
            _ if raw_copy => v,
            DType::BF16 => {
                self.need(Helper::PackBf16x2);
                format!("(unsigned short)(cake_pack_bf16x2({v}, 0.0f) & 0xFFFFu)")
            }
            DType::F16 => {
                self.need(Helper::PackF16x2);
                format!("(unsigned short)(cake_pack_f16x2({v}, 0.0f) & 0xFFFFu)")
            }
            DType::Bool => format!("(unsigned char)({v})"),
            DType::F8E4M3 | DType::F8E5M2 => {
                self.need(Helper::CvtF8(dtype));
                format!("cake_cvt_{}({v})", super::prelude::wgmma_type(dtype))
            }
            _ => v,
        };
        let vector_store = self.vector_store() && matches!(m.exprs[dst].ty, Type::Global { .. });
        match &m.exprs[dst].ty {
            Type::Shared { .. } => {
                let addr = self.smem_elem_addr(dst, &idx, span)?;
                let st = self.st_shared(dtype, &addr, &stored, span)?;
                self.w.line(st);
            }
            _ if vector_store => self.w.line(format!("cake_out[cake_j] = {stored};")),
            _ => {
                let g = self.global_ref(dst)?;
                let base = self.gbase_c(&g);
                let win: Vec<usize> = g.dims.iter().enumerate().filter(|(_, d)| d.len.is_some()).map(|(i, _)| i).collect();
                let mut off = Vec::new();
                let mut guards = Vec::new();
                for (k, d) in win.iter().enumerate() {
                    if idx[k] != "0" {
                        let stride = self.gstride(g.tensor, *d);
                        off.push(if stride == "1" { idx[k].clone() } else { format!("(long long){} * {stride}", idx[k]) });
                    }
                    let ext = size_c(m, &m.tensors[g.tensor].shape[*d]);
                    let start = &g.dims[*d].start;
                    let ix = &idx[k];
                    guards.push(if start == "0" { format!("{ix} < {ext}") } else { format!("({}) + {ix} < {ext}", strip_parens(start)) });
                }
                let ptr = if off.is_empty() { base } else { format!("{base} + {}", off.join(" + ")) };
                self.w.line(format!("if ({}) *({ptr}) = {stored};", guards.join(" && ")));
            }
        }
        self.end_elements(vector_store.then_some((dst, dtype)), span)?;
        self.w.close("}");
        self.flat_reductions = saved;
        Ok(())
    }
}

impl<'a> Lw<'a> {
    /// `store(s_window, fragment)`: every thread writes the elements it holds into the shared
    /// window (addresses swizzled per the region): adjacent column pairs as one 4- or 8-byte store
    /// for accumulator layouts, one value per row (by the first lane of each quad) for row vectors.
    pub(crate) fn store_frag_shared(&mut self, dst: Handle<Expr>, src: Handle<Expr>, lay: Layout, span: Span) -> Result<(), LowerError> {
        let m = self.m;
        let r = self.smem_ref(dst)?;
        let Some(dtype) = m.exprs[dst].ty.dtype() else { return Err(unsupported("a store into an untyped window", span)) };
        if r.shape != lay.shape() {
            return Err(LowerError::new("L007", format!("window shape {:?} does not match the fragment's {:?}", r.shape, lay.shape()), span));
        }
        if matches!(dtype, DType::F8E4M3 | DType::F8E5M2) {
            return Err(unsupported(format!("storing {dtype} fragments"), span));
        }
        let mut temps = Vec::new();
        self.materialize_reductions(src, &mut temps)?;
        let cast_src = self.cast_operand(src, dtype);
        let esize = dtype.size_bytes();
        self.w.open("{");
        match lay {
            Layout::Acc { .. } => {
                // Pairs: contiguous columns, the pair wholly inside one 16-byte swizzle chunk.
                let pair_ok = r.strides.get(1) == Some(&esize)
                    && esize <= 4
                    && r.aligned(2 * esize, false)
                    && r.strides[0] % (2 * esize) == 0;
                let row = lay.row("cake_i").expect("row");
                let col = lay.col("cake_i").expect("col").replace(" + (cake_i) % 2", "");
                self.w.line("#pragma unroll");
                self.w.open(format!("for (int cake_i = 0; cake_i < {}; cake_i += 2) {{  // column pairs", lay.regs()));
                self.w.line(format!("const int cake_row = {row};"));
                self.w.line(format!("const int cake_col = {col};"));
                if pair_ok {
                    let addr = self.smem_elem_addr(dst, &["cake_row".into(), "cake_col".into()], span)?;
                    self.need(Helper::StShared);
                    let direct = match &m.exprs[src].kind {
                        ExprKind::Local(pl) if dtype == DType::F16 && self.packed.contains(pl) => Some(self.local_name(*pl)),
                        _ => None,
                    };
                    let stmt = if let Some(name) = direct {
                        format!("cake_st_shared_u32({addr}, {name}[cake_i / 2]);  // already two f16 in memory order")
                    } else {
                        let inner = cast_src.unwrap_or(src);
                        let v0 = self.elem(inner, lay, "cake_i", &temps)?;
                        let v1 = self.elem(inner, lay, "cake_i + 1", &temps)?;
                        let (v0, v1) = (strip_parens(&v0).to_string(), strip_parens(&v1).to_string());
                        match dtype {
                            DType::BF16 => {
                                self.need(Helper::PackBf16x2);
                                format!("cake_st_shared_u32({addr}, cake_pack_bf16x2({v0}, {v1}));")
                            }
                            DType::F16 => {
                                self.need(Helper::PackF16x2);
                                format!("cake_st_shared_u32({addr}, cake_pack_f16x2({v0}, {v1}));")
                            }
                            DType::F32 => format!("cake_st_shared_v2_u32({addr}, __float_as_uint({v0}), __float_as_uint({v1}));"),
                            DType::I32 | DType::U32 => format!("cake_st_shared_v2_u32({addr}, (unsigned)({v0}), (unsigned)({v1}));"),
                            _ => return Err(unsupported(format!("storing {dtype} fragments"), span)),
                        }
                    };
                    self.w.line(stmt);
                } else {
                    for (k, ix) in ["cake_i", "cake_i + 1"].iter().enumerate() {
                        let c = if k == 0 { "cake_col".to_string() } else { "cake_col + 1".to_string() };
                        let addr = self.smem_elem_addr(dst, &["cake_row".into(), c], span)?;
                        let v = self.store_value(src, cast_src, dtype, lay, ix, &temps, span)?;
                        let st = self.st_shared(dtype, &addr, &v, span)?;
                        self.w.line(st);
                    }
                }
                self.w.close("}");
            }
            Layout::Rows { .. } => {
                let row = lay.row("cake_i").expect("row");
                self.w.open("if (cake_lane % 4 == 0) {  // the quad's four lanes hold the same rows: the first one stores");
                self.w.line("#pragma unroll");
                self.w.open(format!("for (int cake_i = 0; cake_i < {}; ++cake_i) {{", lay.regs()));
                self.w.line(format!("const int cake_row = {row};"));
                let addr = self.smem_elem_addr(dst, &["cake_row".into()], span)?;
                let v = self.store_value(src, cast_src, dtype, lay, "cake_i", &temps, span)?;
                let st = self.st_shared(dtype, &addr, &v, span)?;
                self.w.line(st);
                self.w.close("}");
                self.w.close("}");
            }
            _ => return Err(unsupported(format!("storing a fragment in the {} into shared memory", lay.describe()), span)),
        }
        self.w.close("}");
        Ok(())
    }
}

/// Window coordinates for element `idx` of `shape` of a window of shape `ws` broadcast against it.
fn flat_broadcast(ws: &[i64], shape: &[i64], idx: &[String], span: Span) -> Result<Vec<String>, LowerError> {
    if ws.len() > shape.len() {
        return Err(LowerError::new("L007", format!("a window of shape {ws:?} does not broadcast to {shape:?}"), span));
    }
    let k0 = shape.len() - ws.len();
    let mut out = Vec::new();
    for (d, w) in ws.iter().enumerate() {
        if *w == shape[k0 + d] {
            out.push(idx[k0 + d].clone());
        } else if *w == 1 {
            out.push("0".to_string());
        } else {
            return Err(LowerError::new("L007", format!("a window of shape {ws:?} does not broadcast to {shape:?}"), span));
        }
    }
    Ok(out)
}

fn paren(s: &str) -> String {
    if s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        s.to_string()
    } else {
        format!("({})", strip_parens(s))
    }
}
