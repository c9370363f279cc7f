//! A small deterministic RNG and the input distributions.
//!
//! Generator: xoshiro256++ (Blackman & Vigna), seeded through SplitMix64. Inputs are generated
//! in fixed-size chunks, each with its own stream derived from (seed, tensor index, chunk index),
//! so the values do not depend on how many threads fill a tensor.

use serde::{Deserialize, Serialize};

/// SplitMix64: seeds other generators and derives independent stream seeds.
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// xoshiro256++.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut sm = SplitMix64(seed);
        Rng { s: [sm.next_u64(), sm.next_u64(), sm.next_u64(), sm.next_u64()] }
    }

    /// From a raw state (tests against the reference implementation).
    pub fn from_state(s: [u64; 4]) -> Rng {
        Rng { s }
    }

    /// An independent stream for `(seed, a, b)`.
    pub fn stream(seed: u64, a: u64, b: u64) -> Rng {
        let mut sm = SplitMix64(seed);
        let k1 = sm.next_u64();
        let mut sm2 = SplitMix64(k1 ^ a.wrapping_mul(0xD6E8_FEB8_6659_FD93));
        let k2 = sm2.next_u64();
        Rng::new(k2 ^ b.wrapping_mul(0xA076_1D64_78BD_642F))
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1), 53 bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        // Lemire's multiply-shift; the tiny bias is irrelevant for sampling indices.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Two independent standard normals (Box–Muller).
    pub fn normal_pair(&mut self) -> (f64, f64) {
        let u1 = 1.0 - self.uniform(); // (0, 1]
        let u2 = self.uniform();
        let r = (-2.0 * u1.ln()).sqrt();
        let th = std::f64::consts::TAU * u2;
        (r * th.cos(), r * th.sin())
    }
}

/// An input distribution (workload spec `dist = "..."`, CLI `--dist`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Dist {
    /// Standard normal N(0, 1), times `scale`.
    Normal,
    /// Uniform on [-1, 1), times `scale`.
    Uniform,
    /// Standard normal, but one value in [`OUTLIER_EVERY`] (at random) is multiplied by
    /// [`OUTLIER_FACTOR`]: a few large values, as in activations with outlier channels.
    Outliers,
    /// Values drawn from the tiny set {-1, -0.5, 0, 0.5, 1} (times `scale`), all exactly
    /// representable in every float format, so exact ties occur in products and distances.
    Ties,
}

pub const OUTLIER_EVERY: u64 = 1000;
pub const OUTLIER_FACTOR: f64 = 64.0;
pub const TIE_VALUES: [f64; 5] = [-1.0, -0.5, 0.0, 0.5, 1.0];

impl Dist {
    pub const ALL: [Dist; 4] = [Dist::Normal, Dist::Uniform, Dist::Outliers, Dist::Ties];

    pub fn name(self) -> &'static str {
        match self {
            Dist::Normal => "normal",
            Dist::Uniform => "uniform",
            Dist::Outliers => "outliers",
            Dist::Ties => "ties",
        }
    }

    pub fn parse(s: &str) -> Option<Dist> {
        Dist::ALL.into_iter().find(|d| d.name() == s)
    }

    /// Fill `out` with values of this distribution from `rng`.
    pub fn fill(self, rng: &mut Rng, scale: f64, out: &mut [f64]) {
        match self {
            Dist::Normal | Dist::Outliers => {
                let mut i = 0;
                while i < out.len() {
                    let (a, b) = rng.normal_pair();
                    out[i] = a * scale;
                    if i + 1 < out.len() {
                        out[i + 1] = b * scale;
                    }
                    i += 2;
                }
                if self == Dist::Outliers {
                    for v in out.iter_mut() {
                        if rng.below(OUTLIER_EVERY) == 0 {
                            *v *= OUTLIER_FACTOR;
                        }
                    }
                }
            }
            Dist::Uniform => out.iter_mut().for_each(|v| *v = (2.0 * rng.uniform() - 1.0) * scale),
            Dist::Ties => out.iter_mut().for_each(|v| *v = TIE_VALUES[rng.below(5) as usize] * scale),
        }
    }
}

impl std::fmt::Display for Dist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `n` distinct indices in [0, len), sorted, always including 0 and len-1 when n ≥ 2
/// (edges are where layout bugs show first). All of [0, len) when n ≥ len.
pub fn sample_indices(rng: &mut Rng, len: u64, n: u64) -> Vec<u64> {
    if n >= len {
        return (0..len).collect();
    }
    let mut set = std::collections::BTreeSet::new();
    if n >= 2 {
        set.insert(0);
        set.insert(len - 1);
    }
    while (set.len() as u64) < n {
        set.insert(rng.below(len));
    }
    set.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xoshiro_matches_the_reference() {
        // Reference: state {1, 2, 3, 4} → rotl(1 + 4, 23) + 1.
        let mut r = Rng::from_state([1, 2, 3, 4]);
        assert_eq!(r.next_u64(), 41_943_041);
        // SplitMix64 with seed 0: first output of the reference implementation.
        assert_eq!(SplitMix64(0).next_u64(), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn deterministic_per_seed_and_stream() {
        let a: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::stream(42, 1, 2);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::stream(42, 1, 2);
                move |_| r.next_u64()
            })
            .collect();
        let c: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::stream(42, 1, 3);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn distributions_have_their_shape() {
        let mut r = Rng::new(1);
        let mut v = vec![0.0; 100_000];
        Dist::Normal.fill(&mut r, 1.0, &mut v);
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
        assert!(mean.abs() < 0.02 && (var - 1.0).abs() < 0.03, "mean {mean} var {var}");

        Dist::Uniform.fill(&mut r, 2.0, &mut v);
        assert!(v.iter().all(|x| (-2.0..2.0).contains(x)));

        Dist::Ties.fill(&mut r, 1.0, &mut v);
        assert!(v.iter().all(|x| TIE_VALUES.contains(x)));
        assert!(TIE_VALUES.iter().all(|t| v.contains(t)));

        Dist::Outliers.fill(&mut r, 1.0, &mut v);
        let big = v.iter().filter(|x| x.abs() > 8.0).count();
        assert!((30..300).contains(&big), "{big} outliers");
    }

    #[test]
    fn sampled_indices_cover_the_edges() {
        let mut r = Rng::new(3);
        let s = sample_indices(&mut r, 1000, 64);
        assert_eq!(s.len(), 64);
        assert_eq!(s[0], 0);
        assert_eq!(*s.last().unwrap(), 999);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(sample_indices(&mut r, 10, 64), (0..10).collect::<Vec<_>>());
    }
}
