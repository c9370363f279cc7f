//! sm_80 lowering: cp.async copies, ldmatrix, mma.sync.

use super::layout::Layout;
use super::prelude::Helper;
use super::{size_c, size_multiple, strip_parens, unsupported, Lw, LowerError};
use crate::ir::*;
use crate::span::Span;

impl<'a> Lw<'a> {
    /// `cp_async(dst, src)`: the window is cut into 16-byte chunks, chunk `c` copied by role thread
    /// `c % threads`; the shared address is swizzled per the region.
    pub(crate) fn cp_async(&mut self, dst: Handle<Expr>, src: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        let m = self.m;
        let role = self.role.as_ref().map(|r| r.h).ok_or_else(|| unsupported("cp_async outside a role", span))?;
        let rd = &m.roles[role];
        let threads = rd.threads();
        let first = rd.warps().start * 32;
        let r = self.smem_ref(dst)?;
        let g = self.global_ref(src)?;
        let td = &m.tensors[g.tensor];
        let win: Vec<usize> = g.dims.iter().enumerate().filter(|(_, d)| d.len.is_some()).map(|(i, _)| i).collect();
        if r.shape.len() != 2 || win.len() != 2 {
            return Err(unsupported("cp_async of windows other than 2-D", span));
        }
        let (dr, dc) = (win[0], win[1]);
        if dc + 1 != td.shape.len() {
            return Err(unsupported("cp_async whose rows are not along the tensor's innermost dimension", span));
        }
        let esize = td.dtype.size_bytes();
        let (rows, cols) = (r.shape[0], r.shape[1]);
        let row_bytes = cols as u64 * esize;
        if row_bytes % 16 != 0 {
            return Err(LowerError::new("L006", format!("rows of {row_bytes} bytes are not whole 16-byte copies"), span));
        }
        if r.strides[1] != esize {
            return Err(unsupported("cp_async into a shared window whose rows are not contiguous", span));
        }
        // 16-byte alignment of every global chunk: the row stride and the window's column start.
        let inner_mult = size_multiple(m, &td.shape[dc]) as u64 * esize;
        if inner_mult % 16 != 0 || (g.dims[dc].start_mult as u64 * esize) % 16 != 0 {
            return Err(LowerError::new(
                "L006",
                format!(
                    "16-byte cp.async needs the row stride of `{}` and the window's column start to be multiples of {} elements",
                    td.name,
                    16 / esize
                ),
                span,
            )
            .with_note("declare the innermost dim with `multiple_of`"));
        }
        let per_row = row_bytes / 16;
        let chunks = rows as u64 * per_row;
        let per_thread = chunks.div_ceil(u64::from(threads));
        let elems_per_chunk = 16 / esize;
        let base = self.gbase_c(&g);
        let rs = self.gstride(g.tensor, dr);
        let ext_r = size_c(m, &td.shape[dr]);
        let ext_c = size_c(m, &td.shape[dc]);
        let r0 = strip_parens(&g.dims[dr].start).to_string();
        let c0 = strip_parens(&g.dims[dc].start).to_string();
        let pitch = r.strides[0];
        let cty = super::layout::mem_ctype(td.dtype);
        self.need(Helper::CpAsync16);
        self.w.open("{");
        self.w.line(format!(
            "const {cty}* const cake_g = {base};  // {rows}×{cols} window: {chunks} chunks of 16 bytes, {per_thread} per thread"
        ));
        if first == 0 {
            self.w.line("const int cake_t = (int)threadIdx.x;  // thread index within the role");
        } else {
            self.w.line(format!("const int cake_t = (int)threadIdx.x - {first};  // thread index within the role"));
        }
        self.w.line("#pragma unroll");
        self.w.open(format!("for (int cake_j = 0; cake_j < {per_thread}; ++cake_j) {{"));
        self.w.line(format!("const int cake_c = cake_t + {threads} * cake_j;"));
        let guard_total = chunks % u64::from(threads) != 0;
        if guard_total {
            self.w.open(format!("if (cake_c < {chunks}) {{"));
        }
        self.w.line(format!("const int cake_row = cake_c / {per_row};"));
        self.w.line(format!("const int cake_col = (cake_c % {per_row}) * {elems_per_chunk};"));
        let row_ok = if r0 == "0" { format!("cake_row < {ext_r}") } else { format!("({r0}) + cake_row < {ext_r}") };
        let col_ok = if c0 == "0" { format!("cake_col < {ext_c}") } else { format!("({c0}) + cake_col < {ext_c}") };
        self.w.line(format!("const bool cake_in = {row_ok} && {col_ok};  // outside the tensor: zero-fill"));
        let addr = self.smem_addr_c(&r, Some(&format!("cake_row * {pitch} + cake_col * {esize}")));
        let grow = if rs == "1" { "cake_row".to_string() } else { format!("(long long)cake_row * {rs}") };
        self.w.line(format!("cake_cp_async_16({addr}, cake_in ? (const void*)(cake_g + {grow} + cake_col) : (const void*)cake_g, cake_in ? 16u : 0u);"));
        if guard_total {
            self.w.close("}");
        }
        self.w.close("}");
        self.w.close("}");
        Ok(())
    }

    /// `ldmatrix(dst, src)`: x4 loads of the mma.sync A or B operand layout.
    pub(crate) fn ldmatrix(&mut self, dst: Handle<Expr>, src: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        let m = self.m;
        let ExprKind::Local(l) = m.exprs[dst].kind else { return Err(unsupported("ldmatrix into a non-fragment", span)) };
        let lay = self.layouts.get(&l).copied();
        let r = self.smem_ref(src)?;
        if r.shape.len() != 2 || r.strides[1] != 2 {
            return Err(unsupported("ldmatrix from other than a 2-D window of 16-bit rows", span));
        }
        // Row starts: 16-byte aligned (the window's offsets and rows).
        if !r.aligned(16, false) || r.pitch % 16 != 0 {
            return Err(LowerError::new("L006", "ldmatrix rows must start on 16-byte boundaries", span));
        }
        let name = self.local_name(l);
        let pitch = r.strides[0];
        self.need(Helper::LdmatrixX4);
        match lay {
            Some(Layout::MmaA { m_tiles, k_tiles }) => {
                if r.shape != vec![16 * i64::from(m_tiles), 16 * i64::from(k_tiles)] {
                    return Err(LowerError::new("L007", format!("ldmatrix window {:?} does not match the A fragment", r.shape), span));
                }
                self.w.line("// A tiles of 16×16: lanes 0-7 rows 0-7 / k 0-7, 8-15 rows 8-15 / k 0-7, 16-23 rows 0-7 / k 8-15, 24-31 rows 8-15 / k 8-15");
                self.w.line("#pragma unroll");
                self.w.open(format!("for (int cake_m = 0; cake_m < {m_tiles}; ++cake_m) {{"));
                self.w.line("#pragma unroll");
                self.w.open(format!("for (int cake_k = 0; cake_k < {k_tiles}; ++cake_k) {{"));
                self.w.line("const int cake_row = 16 * cake_m + cake_lane % 8 + 8 * ((cake_lane / 8) % 2);");
                self.w.line("const int cake_col = 16 * cake_k + 8 * (cake_lane / 16);");
                let addr = self.smem_addr_c(&r, Some(&format!("cake_row * {pitch} + cake_col * 2")));
                self.w.line(format!("const int cake_r = (cake_m * {k_tiles} + cake_k) * 4;"));
                self.w.line(format!(
                    "cake_ldmatrix_x4({name}[cake_r], {name}[cake_r + 1], {name}[cake_r + 2], {name}[cake_r + 3], {addr});"
                ));
                self.w.close("}");
                self.w.close("}");
            }
            Some(Layout::MmaB { n_tiles, k_tiles }) => {
                if r.shape != vec![8 * i64::from(n_tiles), 16 * i64::from(k_tiles)] {
                    return Err(LowerError::new("L007", format!("ldmatrix window {:?} does not match the B fragment", r.shape), span));
                }
                if n_tiles % 2 != 0 {
                    return Err(unsupported("a B fragment with an odd number of 8-row tiles (ldmatrix x2)", span));
                }
                self.w.line("// B tile pairs of 16(n)×16(k): lanes 0-7 n 0-7 / k 0-7, 8-15 n 0-7 / k 8-15, 16-23 n 8-15 / k 0-7, 24-31 n 8-15 / k 8-15");
                self.w.line("#pragma unroll");
                self.w.open(format!("for (int cake_n = 0; cake_n < {}; ++cake_n) {{", n_tiles / 2));
                self.w.line("#pragma unroll");
                self.w.open(format!("for (int cake_k = 0; cake_k < {k_tiles}; ++cake_k) {{"));
                self.w.line("const int cake_row = 16 * cake_n + cake_lane % 8 + 8 * (cake_lane / 16);");
                self.w.line("const int cake_col = 16 * cake_k + 8 * ((cake_lane / 8) % 2);");
                let addr = self.smem_addr_c(&r, Some(&format!("cake_row * {pitch} + cake_col * 2")));
                self.w.line(format!("const int cake_r0 = ((2 * cake_n) * {k_tiles} + cake_k) * 2;"));
                self.w.line(format!("const int cake_r1 = ((2 * cake_n + 1) * {k_tiles} + cake_k) * 2;"));
                self.w.line(format!(
                    "cake_ldmatrix_x4({name}[cake_r0], {name}[cake_r0 + 1], {name}[cake_r1], {name}[cake_r1 + 1], {addr});"
                ));
                self.w.close("}");
                self.w.close("}");
            }
            _ => return Err(LowerError::new("L007", "ldmatrix needs a fragment used as an mma_sync A or B operand", span)),
        }
        Ok(())
    }

    /// `mma_sync(acc, a, b)`: one m16n8k16 per (m tile, n tile, k slice).
    pub(crate) fn mma_sync(&mut self, acc: Handle<Expr>, a: Handle<Expr>, b: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        let m = self.m;
        let local = |e: Handle<Expr>| match m.exprs[e].kind {
            ExprKind::Local(l) => Ok(l),
            _ => Err(unsupported("mma_sync operands that are not fragments", span)),
        };
        let (lc, la, lb) = (local(acc)?, local(a)?, local(b)?);
        let (Some(Layout::Acc { m_tiles, n_tiles, wg: false }), Some(Layout::MmaA { m_tiles: am, k_tiles: ak }), Some(Layout::MmaB { n_tiles: bn, k_tiles: bk })) =
            (self.layouts.get(&lc).copied(), self.layouts.get(&la).copied(), self.layouts.get(&lb).copied())
        else {
            return Err(LowerError::new("L007", "mma_sync needs a warp accumulator and A / B operand fragments", span));
        };
        if am != m_tiles || bn != n_tiles || ak != bk {
            return Err(LowerError::new("L007", "mma_sync operand shapes do not match", span));
        }
        let f16_acc = match m.exprs[acc].ty.dtype() {
            Some(DType::F32) => false,
            Some(DType::F16) if self.packed.contains(&lc) => true,
            other => return Err(unsupported(format!("mma_sync with {} accumulators", other.map_or("untyped", |d| d.name())), span)),
        };
        let (h, f) = match (m.exprs[a].ty.dtype(), f16_acc) {
            (Some(DType::BF16), false) => (Helper::MmaBf16, "cake_mma_m16n8k16_f32_bf16"),
            (Some(DType::F16), false) => (Helper::MmaF16, "cake_mma_m16n8k16_f32_f16"),
            (Some(DType::F16), true) => (Helper::MmaF16Acc, "cake_mma_m16n8k16_f16_f16"),
            (Some(DType::BF16), true) => return Err(unsupported("mma_sync with bf16 operands and f16 accumulators (the hardware has no such shape)", span)),
            _ => return Err(unsupported("mma_sync with 8-bit operands", span)),
        };
        self.need(h);
        let (cn, an, bn_) = (self.local_name(lc), self.local_name(la), self.local_name(lb));
        self.w.line("#pragma unroll");
        self.w.open(format!("for (int cake_k = 0; cake_k < {ak}; ++cake_k) {{"));
        self.w.line("#pragma unroll");
        self.w.open(format!("for (int cake_m = 0; cake_m < {m_tiles}; ++cake_m) {{"));
        self.w.line("#pragma unroll");
        self.w.open(format!("for (int cake_n = 0; cake_n < {n_tiles}; ++cake_n) {{"));
        self.w.line(format!("const int cake_d = (cake_m * {n_tiles} + cake_n) * 4;"));
        self.w.line(format!("const int cake_a = (cake_m * {ak} + cake_k) * 4;"));
        self.w.line(format!("const int cake_b = (cake_n * {ak} + cake_k) * 2;"));
        let d = if f16_acc {
            format!("{cn}[cake_d / 2], {cn}[cake_d / 2 + 1]")
        } else {
            format!("{cn}[cake_d], {cn}[cake_d + 1], {cn}[cake_d + 2], {cn}[cake_d + 3]")
        };
        self.w.line(format!(
            "{f}({d}, {an}[cake_a], {an}[cake_a + 1], {an}[cake_a + 2], {an}[cake_a + 3], {bn_}[cake_b], {bn_}[cake_b + 1]);"
        ));
        self.w.close("}");
        self.w.close("}");
        self.w.close("}");
        Ok(())
    }
}
