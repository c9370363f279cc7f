//! The C types the lowering gives register fragments, scalars and memory elements. The thread
//! layouts themselves are derived once for every stage in [`crate::layout::regs`].

use crate::ir::DType;

pub(crate) use crate::layout::regs::Layout;

/// The C type of one register of a fragment with this dtype (16-bit floats are held as f32 values
/// that are exactly representable in the narrow type; packed operand layouts use `unsigned`).
pub(crate) fn reg_ctype(dtype: DType, layout: Layout) -> Option<&'static str> {
    if layout.packed() {
        return matches!(dtype, DType::BF16 | DType::F16).then_some("unsigned");
    }
    Some(match dtype {
        DType::F32 | DType::BF16 | DType::F16 => "float",
        DType::I32 => "int",
        DType::U32 => "unsigned",
        DType::I64 => "long long",
        DType::Bool => "bool",
        DType::F8E4M3 | DType::F8E5M2 => return None,
    })
}

/// The C type of a scalar value of `dtype` (16-bit floats computed in f32).
pub(crate) fn scalar_ctype(dtype: DType) -> Option<&'static str> {
    reg_ctype(dtype, Layout::Scalar)
}

/// The C element type of a global tensor or shared region of `dtype` (storage).
pub(crate) fn mem_ctype(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool | DType::F8E4M3 | DType::F8E5M2 => "unsigned char",
        DType::I32 => "int",
        DType::U32 => "unsigned",
        DType::I64 => "long long",
        DType::F32 => "float",
        DType::F16 | DType::BF16 => "unsigned short",
    }
}
