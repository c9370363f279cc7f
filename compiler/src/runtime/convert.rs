//! Host-side number formats: round-to-nearest-even conversion from `f64` to the storage formats
//! the runtime fills tensors with (bf16, f16, fp8 e4m3 / e5m2, f32, i32), and decoding back.
//!
//! One generic routine handles every small float format: it rounds the magnitude to the nearest
//! representable multiple of the format's quantum at that binade (ties to even), then encodes.
//! Converting straight from `f64` avoids the double rounding of `f64 → f32 → bf16`.
//!
//! Overflow: bf16 and f16 round to ±inf like IEEE formats; the fp8 formats saturate to their
//! largest finite value (the `satfinite` behaviour of `cvt.rn.satfinite.e4m3x2.f32`), because
//! fp8 inputs are meant to be finite. NaN maps to each format's canonical NaN.

use crate::ir::DType;

/// A binary floating-point storage format narrower than f64.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MiniFloat {
    pub exp_bits: u32,
    pub man_bits: u32,
    /// `e4m3` (the "FN" variant): no infinities, only S.1111.111 is NaN, so the top binade holds
    /// finite values up to 448.
    pub finite_only: bool,
    /// Overflow saturates to the largest finite value instead of becoming infinity.
    pub saturate: bool,
}

pub const BF16: MiniFloat = MiniFloat { exp_bits: 8, man_bits: 7, finite_only: false, saturate: false };
pub const F16: MiniFloat = MiniFloat { exp_bits: 5, man_bits: 10, finite_only: false, saturate: false };
pub const F8E4M3: MiniFloat = MiniFloat { exp_bits: 4, man_bits: 3, finite_only: true, saturate: true };
pub const F8E5M2: MiniFloat = MiniFloat { exp_bits: 5, man_bits: 2, finite_only: false, saturate: true };

impl MiniFloat {
    fn bias(self) -> i32 {
        (1 << (self.exp_bits - 1)) - 1
    }

    fn sign_bit(self) -> u32 {
        1 << (self.exp_bits + self.man_bits)
    }

    /// Largest biased exponent field that encodes finite numbers.
    fn max_exp_field(self) -> u32 {
        if self.finite_only {
            (1 << self.exp_bits) - 1
        } else {
            (1 << self.exp_bits) - 2
        }
    }

    /// Largest finite mantissa field in the top binade.
    fn max_man_field(self) -> u32 {
        if self.finite_only {
            (1 << self.man_bits) - 2 // all-ones is NaN
        } else {
            (1 << self.man_bits) - 1
        }
    }

    /// Bit pattern of the largest finite magnitude.
    pub fn max_finite_bits(self) -> u32 {
        (self.max_exp_field() << self.man_bits) | self.max_man_field()
    }

    pub fn max_finite(self) -> f64 {
        self.decode(self.max_finite_bits())
    }

    fn inf_bits(self) -> Option<u32> {
        (!self.finite_only).then(|| ((1u32 << self.exp_bits) - 1) << self.man_bits)
    }

    fn nan_bits(self) -> u32 {
        if self.finite_only {
            (1 << (self.exp_bits + self.man_bits)) - 1
        } else {
            (((1u32 << self.exp_bits) - 1) << self.man_bits) | (1 << (self.man_bits - 1))
        }
    }

    /// Round `x` to the nearest representable value (ties to even) and return its bit pattern.
    pub fn encode(self, x: f64) -> u32 {
        if x.is_nan() {
            return self.nan_bits();
        }
        let sign = if x.is_sign_negative() { self.sign_bit() } else { 0 };
        let a = x.abs();
        if a == 0.0 {
            return sign;
        }
        let overflow = || match (self.saturate, self.inf_bits()) {
            (false, Some(inf)) => sign | inf,
            _ => sign | self.max_finite_bits(),
        };
        if a.is_infinite() {
            return overflow();
        }
        let bias = self.bias();
        let emin = 1 - bias; // exponent of the smallest normal
        let m = self.man_bits as i32;
        // Exponent of `a` (floor(log2 a)), exact from the f64 bits (a is finite and non-zero).
        let quantum = self.quantum(a);
        let r = (a / quantum).round_ties_even() * quantum;
        // Encode r (it may have rounded up into the next binade).
        let er = exponent_of(r);
        if r < pow2(emin) {
            // Subnormal (or rounded to zero).
            let man = (r / pow2(emin - m)) as u32;
            return sign | man;
        }
        let exp_field = (er + bias) as u32;
        let man = ((r / pow2(er - m)) as u64 - (1u64 << m)) as u32;
        if exp_field > self.max_exp_field() || (exp_field == self.max_exp_field() && man > self.max_man_field()) {
            return overflow();
        }
        sign | (exp_field << self.man_bits) | man
    }

    /// The spacing of the representable values in the binade of `x` (finite; zero included): the
    /// subnormal spacing below the smallest normal. Rounding to nearest moves `x` by at most half
    /// of it.
    pub fn quantum(self, x: f64) -> f64 {
        let emin = 1 - self.bias();
        pow2(exponent_of(x.abs()).max(emin) - self.man_bits as i32)
    }

    /// The value of a bit pattern.
    pub fn decode(self, bits: u32) -> f64 {
        let bits = bits & ((self.sign_bit() << 1) - 1);
        let sign = if bits & self.sign_bit() != 0 { -1.0 } else { 1.0 };
        let exp_field = (bits >> self.man_bits) & ((1 << self.exp_bits) - 1);
        let man = bits & ((1 << self.man_bits) - 1);
        let m = self.man_bits as i32;
        if self.finite_only {
            if exp_field == (1 << self.exp_bits) - 1 && man == (1 << self.man_bits) - 1 {
                return f64::NAN;
            }
        } else if exp_field == (1 << self.exp_bits) - 1 {
            return if man == 0 { sign * f64::INFINITY } else { f64::NAN };
        }
        let bias = self.bias();
        if exp_field == 0 {
            sign * f64::from(man) * pow2(1 - bias - m)
        } else {
            sign * (f64::from(man) + pow2(m)) * pow2(exp_field as i32 - bias - m)
        }
    }
}

fn pow2(e: i32) -> f64 {
    // Exact for the exponents used here (|e| < 1000).
    f64::powi(2.0, e)
}

/// floor(log2(a)) for finite a > 0, from the f64 bit pattern (subnormal f64 handled).
fn exponent_of(a: f64) -> i32 {
    let bits = a.to_bits();
    let exp = ((bits >> 52) & 0x7FF) as i32;
    if exp == 0 {
        // f64 subnormal: 2^-1074 · mantissa.
        let man = bits & ((1u64 << 52) - 1);
        -1074 + (63 - man.leading_zeros() as i32)
    } else {
        exp - 1023
    }
}

pub fn f64_to_bf16(x: f64) -> u16 {
    BF16.encode(x) as u16
}
pub fn bf16_to_f64(b: u16) -> f64 {
    BF16.decode(u32::from(b))
}
/// The classic bit trick for f32 → bf16 (round to nearest even), used as a cross-check.
pub fn f32_to_bf16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return 0x7FC0 | ((bits >> 16) as u16 & 0x8000);
    }
    let rounding_bias = 0x7FFF + ((bits >> 16) & 1);
    (bits.wrapping_add(rounding_bias) >> 16) as u16
}
pub fn f64_to_f16(x: f64) -> u16 {
    F16.encode(x) as u16
}
pub fn f16_to_f64(b: u16) -> f64 {
    F16.decode(u32::from(b))
}

/// Element storage of one tensor on the host, in the dtype's bytes (little-endian).
pub fn element_bytes(dtype: DType) -> usize {
    dtype.size_bytes() as usize
}

/// Round `x` to the dtype and write its little-endian bytes to `out` (which is exactly
/// `element_bytes(dtype)` long). Integer dtypes round half to even and saturate.
pub fn store(dtype: DType, x: f64, out: &mut [u8]) {
    match dtype {
        DType::BF16 => out.copy_from_slice(&f64_to_bf16(x).to_le_bytes()),
        DType::F16 => out.copy_from_slice(&f64_to_f16(x).to_le_bytes()),
        DType::F8E4M3 => out[0] = F8E4M3.encode(x) as u8,
        DType::F8E5M2 => out[0] = F8E5M2.encode(x) as u8,
        DType::F32 => out.copy_from_slice(&(x as f32).to_le_bytes()),
        DType::I32 => out.copy_from_slice(&(x.round_ties_even() as i32).to_le_bytes()),
        DType::U32 => out.copy_from_slice(&(x.round_ties_even().max(0.0) as u32).to_le_bytes()),
        DType::I64 => out.copy_from_slice(&(x.round_ties_even() as i64).to_le_bytes()),
        DType::Bool => out[0] = u8::from(x != 0.0),
    }
}

/// The value of one stored element.
pub fn load(dtype: DType, bytes: &[u8]) -> f64 {
    match dtype {
        DType::BF16 => bf16_to_f64(u16::from_le_bytes([bytes[0], bytes[1]])),
        DType::F16 => f16_to_f64(u16::from_le_bytes([bytes[0], bytes[1]])),
        DType::F8E4M3 => F8E4M3.decode(u32::from(bytes[0])),
        DType::F8E5M2 => F8E5M2.decode(u32::from(bytes[0])),
        DType::F32 => f64::from(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])),
        DType::I32 => f64::from(i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])),
        DType::U32 => f64::from(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])),
        DType::I64 => i64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as f64,
        DType::Bool => f64::from(u8::from(bytes[0] != 0)),
    }
}

/// Decode a whole buffer of `dtype` elements to f32 (exact for every format but i64/u32 extremes
/// and f32 itself, which is exact too).
pub fn decode_all_f32(dtype: DType, bytes: &[u8]) -> Vec<f32> {
    let w = element_bytes(dtype);
    match dtype {
        // Fast path: bf16 → f32 is a shift.
        DType::BF16 => {
            bytes.chunks_exact(2).map(|c| f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16)).collect()
        }
        DType::F32 => bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
        _ => bytes.chunks_exact(w).map(|c| load(dtype, c) as f32).collect(),
    }
}

/// Decode a buffer of i32 elements.
pub fn decode_all_i32(bytes: &[u8]) -> Vec<i32> {
    bytes.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Decode a buffer of indices (an arg-min output) stored as `dtype`: integers as they are, floats
/// by their value — an index past the float's exact-integer range was rounded when the kernel
/// stored it, and decodes as the index it became. A value that is no index (NaN, the 0xFF poison of
/// an unwritten float element; an infinity; a fraction; a value outside i32, such as the u32
/// poison) decodes as -1, outside every index range.
pub fn decode_all_index(dtype: DType, bytes: &[u8]) -> Vec<i32> {
    if dtype == DType::I32 {
        return decode_all_i32(bytes);
    }
    let index = |v: f64| if v.fract() == 0.0 && (f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&v) { v as i32 } else { -1 };
    bytes.chunks_exact(element_bytes(dtype)).map(|c| index(load(dtype, c))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_decode_by_their_dtype() {
        let enc = |d: DType, vs: &[f64]| -> Vec<u8> {
            let w = element_bytes(d);
            let mut out = vec![0u8; w * vs.len()];
            for (c, v) in out.chunks_exact_mut(w).zip(vs) {
                store(d, *v, c);
            }
            out
        };
        assert_eq!(decode_all_index(DType::I32, &enc(DType::I32, &[0.0, 5.0, 4095.0])), vec![0, 5, 4095]);
        // f16 holds every integer up to 2048; 2049 rounds (ties to even) to 2048, 4095 to 4096.
        assert_eq!(decode_all_index(DType::F16, &enc(DType::F16, &[7.0, 2048.0, 2049.0, 4095.0])), vec![7, 2048, 2048, 4096]);
        assert_eq!(decode_all_index(DType::BF16, &enc(DType::BF16, &[255.0, 256.0, 257.0])), vec![255, 256, 256]);
        assert_eq!(decode_all_index(DType::F32, &enc(DType::F32, &[16_777_216.0, 16_777_217.0])), vec![16_777_216, 16_777_216]);
        // Poison (0xFF bytes): NaN for floats, -1 for i32 / i64, u32::MAX for u32 — all -1.
        for d in [DType::F16, DType::BF16, DType::F32, DType::I32, DType::U32, DType::I64] {
            assert_eq!(decode_all_index(d, &vec![0xFF; element_bytes(d) * 2]), vec![-1, -1], "{d}");
        }
        assert_eq!(decode_all_index(DType::F32, &enc(DType::F32, &[0.5, f64::INFINITY])), vec![-1, -1]);
    }

    #[test]
    fn bf16_known_values() {
        assert_eq!(f64_to_bf16(1.0), 0x3F80);
        assert_eq!(f64_to_bf16(-2.0), 0xC000);
        assert_eq!(f64_to_bf16(0.0), 0x0000);
        assert_eq!(f64_to_bf16(-0.0), 0x8000);
        assert_eq!(f64_to_bf16(f64::INFINITY), 0x7F80);
        assert_eq!(f64_to_bf16(f64::NAN) & 0x7FC0, 0x7FC0);
        // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even (1.0).
        assert_eq!(f64_to_bf16(1.0 + 2f64.powi(-8)), 0x3F80);
        // 1 + 3·2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up.
        assert_eq!(f64_to_bf16(1.0 + 3.0 * 2f64.powi(-8)), 0x3F82);
        // A hair above a tie rounds up (f64 input keeps the hair that f32 would lose).
        assert_eq!(f64_to_bf16(1.0 + 2f64.powi(-8) + 2f64.powi(-40)), 0x3F81);
        // Largest finite and overflow.
        assert_eq!(bf16_to_f64(0x7F7F), 3.3895313892515355e38);
        assert_eq!(f64_to_bf16(3.3961e38), 0x7F7F); // just below the halfway point 3.39617e38
        assert_eq!(f64_to_bf16(3.3962e38), 0x7F80);
        // Smallest subnormal.
        assert_eq!(f64_to_bf16(2f64.powi(-133)), 0x0001);
        assert_eq!(f64_to_bf16(2f64.powi(-134)), 0x0000); // tie to even → 0
    }

    #[test]
    fn bf16_matches_the_f32_bit_trick() {
        let mut rng = crate::runtime::rng::Rng::new(7);
        for _ in 0..200_000 {
            let bits = rng.next_u64() as u32;
            let x = f32::from_bits(bits);
            if x.is_nan() {
                continue;
            }
            assert_eq!(f64_to_bf16(f64::from(x)), f32_to_bf16_bits(x), "x = {x:e} ({bits:#010x})");
        }
    }

    #[test]
    fn bf16_roundtrip_is_exact() {
        for b in 0u16..=0xFFFF {
            let v = bf16_to_f64(b);
            if v.is_nan() {
                continue;
            }
            assert_eq!(f64_to_bf16(v), b, "bits {b:#06x}");
        }
    }

    #[test]
    fn f16_known_values() {
        assert_eq!(f64_to_f16(1.0), 0x3C00);
        assert_eq!(f64_to_f16(65504.0), 0x7BFF);
        assert_eq!(f64_to_f16(65519.99), 0x7BFF);
        assert_eq!(f64_to_f16(65520.0), 0x7C00); // tie rounds to even: infinity
        assert_eq!(f64_to_f16(2f64.powi(-24)), 0x0001);
        assert_eq!(f64_to_f16(2f64.powi(-25)), 0x0000);
        assert_eq!(f64_to_f16(3.0 * 2f64.powi(-26)), 0x0001);
        assert_eq!(f64_to_f16(2f64.powi(-14)), 0x0400); // smallest normal
        assert_eq!(f64_to_f16(-0.333251953125), 0xB555);
        for b in 0u16..=0xFFFF {
            let v = f16_to_f64(b);
            if !v.is_nan() {
                assert_eq!(f64_to_f16(v), b);
            }
        }
    }

    #[test]
    fn fp8_known_values() {
        assert_eq!(F8E4M3.encode(1.0), 0x38);
        assert_eq!(F8E4M3.encode(448.0), 0x7E);
        assert_eq!(F8E4M3.max_finite(), 448.0);
        assert_eq!(F8E4M3.encode(1000.0), 0x7E); // saturates
        assert_eq!(F8E4M3.encode(-1000.0), 0xFE);
        assert_eq!(F8E4M3.encode(2f64.powi(-9)), 0x01);
        assert!(F8E4M3.decode(0x7F).is_nan());
        assert_eq!(F8E5M2.encode(1.0), 0x3C);
        assert_eq!(F8E5M2.max_finite(), 57344.0);
        assert_eq!(F8E5M2.encode(1e9), 0x7B);
        assert_eq!(F8E5M2.encode(2f64.powi(-16)), 0x01);
        for fmt in [F8E4M3, F8E5M2] {
            for b in 0u32..256 {
                let v = fmt.decode(b);
                if !v.is_nan() && !v.is_infinite() {
                    assert_eq!(fmt.encode(v), b, "{fmt:?} {b:#04x}");
                }
            }
        }
    }

    #[test]
    fn store_and_load() {
        let mut buf = [0u8; 4];
        store(DType::I32, -2.5, &mut buf);
        assert_eq!(load(DType::I32, &buf), -2.0);
        store(DType::F32, 0.1, &mut buf);
        assert_eq!(load(DType::F32, &buf), f64::from(0.1f32));
        let mut b2 = [0u8; 2];
        store(DType::BF16, 3.0, &mut b2);
        assert_eq!(decode_all_f32(DType::BF16, &b2), vec![3.0]);
    }
}

/// serde for [`DType`] by name (`"bf16"`); the IR's enum serializes but does not deserialize.
pub mod dtype_serde {
    use crate::ir::DType;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &DType, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(d.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DType, D::Error> {
        let s = String::deserialize(d)?;
        DType::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("unknown dtype `{s}`")))
    }
}
