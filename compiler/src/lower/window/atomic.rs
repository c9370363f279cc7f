//! `atomic_add` / `atomic_min` / `atomic_max`: element-wise global reductions (`red`).
//!
//! The value is split over the threads that share the destination window exactly as
//! [`Lw::store_distributed`] splits a stored row (the lanes of a warp when the window depends on
//! `R.warp`), and each thread issues one reduction per element it takes. A scalar value is
//! broadcast to every element. The result of the atomic is never used, so `atomicAdd` & co.
//! compile to `red.global.*`; 16-bit adds are inline PTX on a generic address (which `red`
//! accepts and resolves to global memory), and f32 min/max — which PTX has no reduction for —
//! are one integer reduction chosen by the value's sign.

use super::super::layout;
use super::super::prelude::Helper;
use super::super::{unsupported, LowerError, Lw};
use crate::ir::*;
use crate::span::Span;

/// Which reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtomicKind {
    Add,
    Min,
    Max,
}

impl AtomicKind {
    fn name(self) -> &'static str {
        match self {
            AtomicKind::Add => "add",
            AtomicKind::Min => "min",
            AtomicKind::Max => "max",
        }
    }
}

impl Lw<'_> {
    pub(crate) fn atomic(&mut self, kind: AtomicKind, dst: Handle<Expr>, src: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        let m = self.m;
        if !matches!(m.exprs[dst].ty, Type::Global { .. }) {
            return Err(unsupported("an atomic into anything but a global tensor window", span));
        }
        if let Some(lay) = self.layout_of(src)? {
            if !lay.whole_in_each_thread() {
                return Err(unsupported(format!("an atomic of a fragment in the {} (atomics take a row value or a fragment every thread holds whole)", lay.describe()), span));
            }
        }
        let (_, n, tid, what) = self.element_split(&[dst, src], span)?;
        let g = self.global_ref(dst)?;
        let dtype = m.tensors[g.tensor].dtype;
        let shape: Vec<i64> = g.dims.iter().filter_map(|d| d.len).collect();
        let total: i64 = shape.iter().product();
        if total <= 0 {
            return Ok(());
        }
        let saved = self.reductions_ahead(src)?;
        self.w.open("{");
        self.w.line(format!("// atomic_{}: one global reduction per element", kind.name()));
        // Element coordinates only (no vector store: every element is its own reduction).
        let idx = self.begin_elements(&shape, n, &tid, what, &[src], None)?;
        let (v, raw_copy) = self.element_source(src, &shape, dtype, &idx, span)?;
        let (ptr, guards) = self.window_ptr(dst, &idx, span)?;
        let stmt = match (kind, dtype) {
            (AtomicKind::Add, DType::F32) => format!("atomicAdd((float*)({ptr}), {v});"),
            (AtomicKind::Add, DType::I32) => format!("atomicAdd((int*)({ptr}), {v});"),
            (AtomicKind::Add, DType::U32) => format!("atomicAdd((unsigned*)({ptr}), {v});"),
            (AtomicKind::Min, DType::I32) => format!("atomicMin((int*)({ptr}), {v});"),
            (AtomicKind::Min, DType::U32) => format!("atomicMin((unsigned*)({ptr}), {v});"),
            (AtomicKind::Max, DType::I32) => format!("atomicMax((int*)({ptr}), {v});"),
            (AtomicKind::Max, DType::U32) => format!("atomicMax((unsigned*)({ptr}), {v});"),
            (AtomicKind::Min | AtomicKind::Max, DType::F32) => {
                // No float min/max reduction in PTX (`red`/`atom` .min/.max take integers and
                // 16-bit floats only): IEEE floats order like sign-magnitude integers, so a value
                // with the sign bit clear is reduced as a signed int (max: every negative float is
                // a negative int, below it), one with the sign bit set as an unsigned (the larger
                // the magnitude, the larger the unsigned and the smaller the float).
                let (pos, neg) = if kind == AtomicKind::Max { ("atomicMax", "atomicMin") } else { ("atomicMin", "atomicMax") };
                format!(
                    "{{ const float cake_a = {v}; if (!signbit(cake_a)) {pos}((int*)({ptr}), __float_as_int(cake_a)); else {neg}((unsigned*)({ptr}), __float_as_uint(cake_a)); }}"
                )
            }
            (AtomicKind::Add, DType::BF16 | DType::F16) => {
                let bits = if raw_copy {
                    v
                } else {
                    let (h, f) = if dtype == DType::BF16 { (Helper::PackBf16x2, "cake_pack_bf16x2") } else { (Helper::PackF16x2, "cake_pack_f16x2") };
                    self.need(h);
                    format!("(unsigned short)({f}({v}, 0.0f) & 0xFFFFu)")
                };
                let ty = if dtype == DType::BF16 { "bf16" } else { "f16" };
                format!("asm volatile(\"red.add.noftz.{ty} [%0], %1;\" :: \"l\"({ptr}), \"h\"({bits}) : \"memory\");")
            }
            _ => return Err(unsupported(format!("atomic_{} on {dtype} (as {})", kind.name(), layout::mem_ctype(dtype)), span)),
        };
        self.w.line(if guards.is_empty() { stmt } else { format!("if ({}) {stmt}", guards.join(" && ")) });
        self.end_elements(None, span)?;
        self.w.close("}");
        self.flat_reductions = saved;
        Ok(())
    }
}
