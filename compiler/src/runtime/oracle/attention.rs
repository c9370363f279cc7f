//! `attention`: O = softmax(scale · Q·Kᵀ)·V per (batch·head), non-causal, causal (the workload's
//! `mask = "causal"`: query i sees keys 0..=i, torch SDPA's `is_causal`) or a causal sliding
//! window (`mask = { sliding_window = W }`: keys i − W < j ≤ i). Sampled query rows of
//! every head (first and last included), each against an fp64 reference over its whole softmax
//! row, every element under `|got − ref| ≤ atol·rms(ref) + rtol·|ref|`
//! ([`Tolerance::ATTENTION_BF16`], [`Tolerance::ATTENTION_F16`]); the whole output is scanned for
//! non-finite (unwritten) values.

use serde::{Deserialize, Serialize};

use super::{dot_f64, par_map, CheckReport, Comparer, Tolerance};
use crate::runtime::rng::{sample_indices, Rng};

/// Which keys each query sees: the workload's `mask` key (`attention` only; none = every key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyMask {
    /// Query i sees keys 0..=i (top-left aligned, as torch SDPA's `is_causal`; SQ ≤ SK):
    /// `mask = "causal"`.
    Causal,
    /// Query i sees the last W keys up to itself, i − W < j ≤ i (Mistral's sliding window):
    /// `mask = { sliding_window = W }`.
    SlidingWindow(u64),
}

impl KeyMask {
    pub fn name(self) -> String {
        match self {
            KeyMask::Causal => "causal".to_string(),
            KeyMask::SlidingWindow(w) => format!("sliding_window = {w}"),
        }
    }

    /// The keys query `i` sees, of `sk`: a range.
    pub fn keys(mask: Option<KeyMask>, i: usize, sk: usize) -> std::ops::Range<usize> {
        match mask {
            None => 0..sk,
            Some(KeyMask::Causal) => 0..(i + 1).min(sk),
            Some(KeyMask::SlidingWindow(w)) => {
                let end = (i + 1).min(sk);
                end.saturating_sub(usize::try_from(w).unwrap_or(usize::MAX))..end
            }
        }
    }
}

/// `attention`: O[h] = softmax(scale · Q[h]·K[h]ᵀ)·V[h] for Q [BH, SQ, HD],
/// K [BH, SK, HD], VT = Vᵀ [BH, HD, SK] and O [BH, SQ, HD], row-major. `tol.samples` query rows
/// per (batch·head) `h` (first and last included when two or more), each against an fp64
/// reference over its whole softmax row (all SK keys, or the keys [`KeyMask::keys`] lets query i
/// see); `scale` is the value the kernel receives
/// (rounded to its scalar's dtype by the caller). Wrong elements are reported by O's index
/// [h, i, d]; every element of O is scanned for non-finite (unwritten) values.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    q: &[f32],
    k: &[f32],
    vt: &[f32],
    o: &[f32],
    bh: u64,
    sq: u64,
    sk: u64,
    hd: u64,
    scale: f64,
    mask: Option<KeyMask>,
    tol: Tolerance,
    rng: &mut Rng,
) -> CheckReport {
    let (hu, squ, sku, du) = (bh as usize, sq as usize, sk as usize, hd as usize);
    assert_eq!(q.len(), hu * squ * du, "Q has BH·SQ·HD elements");
    assert_eq!(k.len(), hu * sku * du, "K has BH·SK·HD elements");
    assert_eq!(vt.len(), hu * du * sku, "VT has BH·HD·SK elements");
    assert_eq!(o.len(), hu * squ * du, "O has BH·SQ·HD elements");
    let items: Vec<(u64, u64)> =
        (0..bh).flat_map(|h| sample_indices(rng, sq, tol.samples.max(1)).into_iter().map(move |i| (h, i))).collect();
    let refs: Vec<Vec<f64>> = par_map(&items, |&(h, i)| {
        let (h, i) = (h as usize, i as usize);
        let qr = &q[(h * squ + i) * du..(h * squ + i + 1) * du];
        let seen = KeyMask::keys(mask, i, sku);
        let kh = &k[(h * sku + seen.start) * du..(h * sku + seen.end) * du];
        let scores: Vec<f64> = kh.chunks_exact(du).map(|kr| scale * dot_f64(qr, kr)).collect();
        let mx = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let p: Vec<f64> = scores.iter().map(|s| (s - mx).exp()).collect();
        let l: f64 = p.iter().sum();
        let vh = &vt[h * du * sku..(h + 1) * du * sku];
        // `p` holds the seen keys' weights: V's row from the first of them.
        vh.chunks_exact(sku).map(|vr| vr[seen.clone()].iter().zip(&p).map(|(&v, &w)| f64::from(v) * w).sum::<f64>() / l).collect()
    });
    let count = (refs.len() * du) as f64;
    let sumsq: f64 = refs.iter().flatten().map(|v| v * v).sum();
    let rms = if count > 0.0 { (sumsq / count).sqrt() } else { 0.0 };
    let mut cmp = Comparer::new("attention", tol, rms);
    for (&(h, i), r) in items.iter().zip(&refs) {
        let row = &o[((h * sq + i) * hd) as usize..((h * sq + i + 1) * hd) as usize];
        for (d, (&got, &want)) in row.iter().zip(r).enumerate() {
            cmp.add(|| vec![h, i, d as u64], f64::from(got), want);
        }
    }
    cmp.finish(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_support::{inputs, rounded};
    use crate::ir::DType;

    /// What an attention kernel computes, per (batch·head) and query row, in f32: scores, the row
    /// max, P = exp(scale·s − max) summed into l, P rounded to `dt` for P·V, O / l rounded to `dt`.
    #[allow(clippy::too_many_arguments)]
    fn attention_f32(q: &[f32], k: &[f32], vt: &[f32], bh: usize, sq: usize, sk: usize, hd: usize, scale: f32, dt: DType) -> Vec<f32> {
        attention_f32_masked(q, k, vt, (bh, sq, sk, hd), scale, dt, None)
    }

    /// The same, each query seeing the keys `mask` lets it (masked scores are −∞: p = 0).
    fn attention_f32_masked(q: &[f32], k: &[f32], vt: &[f32], dims: (usize, usize, usize, usize), scale: f32, dt: DType, mask: Option<KeyMask>) -> Vec<f32> {
        let (bh, sq, sk, hd) = dims;
        let mut o = vec![0f32; bh * sq * hd];
        for h in 0..bh {
            for i in 0..sq {
                let qr = &q[(h * sq + i) * hd..(h * sq + i + 1) * hd];
                let s: Vec<f32> = (0..sk)
                    .map(|j| {
                        if !KeyMask::keys(mask, i, sk).contains(&j) {
                            return f32::NEG_INFINITY;
                        }
                        qr.iter().zip(&k[(h * sk + j) * hd..(h * sk + j + 1) * hd]).map(|(x, y)| x * y).sum::<f32>() * scale
                    })
                    .collect();
                let m = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let p: Vec<f32> = s.iter().map(|v| (v - m).exp()).collect();
                let l: f32 = p.iter().sum();
                for d in 0..hd {
                    let vr = &vt[(h * hd + d) * sk..(h * hd + d + 1) * sk];
                    let acc: f32 = p.iter().zip(vr).map(|(&w, &v)| rounded(dt, w) * v).sum();
                    o[(h * sq + i) * hd + d] = rounded(dt, acc / l);
                }
            }
        }
        o
    }

    #[test]
    fn attention_accepts_a_kernels_rounding_and_catches_faults() {
        let (bh, sq, sk, hd) = (3usize, 128usize, 96usize, 64usize);
        let scale = 0.125f32;
        for dt in [DType::BF16, DType::F16] {
            let q = inputs(dt, bh * sq * hd, 51);
            let k = inputs(dt, bh * sk * hd, 52);
            let vt = inputs(dt, bh * hd * sk, 53);
            let tol = Tolerance::for_attention_output(dt);
            let check = |o: &[f32], scale: f64| {
                attention(&q, &k, &vt, o, bh as u64, sq as u64, sk as u64, hd as u64, scale, None, tol, &mut Rng::new(7))
            };
            let o = attention_f32(&q, &k, &vt, bh, sq, sk, hd, scale, dt);
            let r = check(&o, f64::from(scale));
            assert!(r.passed && r.rel_l2_err > 1e-5, "{dt}: {r:?}");
            assert_eq!(r.checked as usize, bh * 32 * hd, "32 query rows of every head, every HD column");
            assert_eq!(r.oracle, "attention");
            // The kernel ran with another scale (1/√HD computed as 1/HD, and 1): the oracle's
            // scale is not the kernel's.
            for wrong in [1.0 / 64.0, 1.0] {
                let r = check(&attention_f32(&q, &k, &vt, bh, sq, sk, hd, wrong, dt), f64::from(scale));
                assert!(!r.passed && r.mismatches as usize > bh * 32 * hd / 4, "{dt} scale {wrong}: {r:?}");
            }
            // Heads 1 and 2 swapped.
            let mut swapped = o.clone();
            let (lo, hi) = swapped.split_at_mut(2 * sq * hd);
            lo[sq * hd..].swap_with_slice(&mut hi[..sq * hd]);
            let r = check(&swapped, f64::from(scale));
            assert!(!r.passed);
            assert!(r.first_bad.iter().all(|e| e.index[0] == 1), "{:?}", r.first_bad);
            // One 64-query tile of head 0 holding the other tile's rows.
            let mut tile = o.clone();
            tile.copy_within(0..64 * hd, 64 * hd);
            let r = check(&tile, f64::from(scale));
            assert!(!r.passed);
            assert!(r.first_bad.iter().all(|e| e.index[0] == 0 && (64..128).contains(&e.index[1])), "{:?}", r.first_bad);
            // V not transposed (VT read as if it were V [SK, HD]): wrong everywhere.
            let v_as_vt: Vec<f32> = (0..bh * hd * sk).map(|f| {
                let (h, rest) = (f / (hd * sk), f % (hd * sk));
                let (d, j) = (rest / sk, rest % sk);
                vt[h * hd * sk + (j * hd + d) % (hd * sk)]
            }).collect();
            let r = check(&attention_f32(&q, &k, &v_as_vt, bh, sq, sk, hd, scale, dt), f64::from(scale));
            assert!(!r.passed, "{dt}: {r:?}");
            // An unwritten element, unsampled or not: the NaN scan finds it.
            let mut hole = o.clone();
            hole[(2 * sq + 77) * hd + 5] = f32::NAN;
            let r = check(&hole, f64::from(scale));
            assert!(!r.passed && r.nonfinite == 1, "{r:?}");
        }
    }

    #[test]
    fn attention_tolerances_are_tight_enough() {
        // A bf16 output 5 % off at its largest element fails; the f16 tolerance refuses a
        // bf16-rounded result.
        let (bh, sq, sk, hd) = (1usize, 64usize, 64usize, 64usize);
        let q = inputs(DType::BF16, bh * sq * hd, 54);
        let k = inputs(DType::BF16, bh * sk * hd, 55);
        let vt = inputs(DType::BF16, bh * hd * sk, 56);
        let mut o = attention_f32(&q, &k, &vt, bh, sq, sk, hd, 0.125, DType::BF16);
        // Every query row sampled.
        let check = |o: &[f32], tol: Tolerance| {
            attention(&q, &k, &vt, o, 1, 64, 64, 64, 0.125, None, Tolerance { samples: 64, ..tol }, &mut Rng::new(8))
        };
        assert!(check(&o, Tolerance::ATTENTION_BF16).passed);
        assert!(!check(&o, Tolerance::ATTENTION_F16).passed, "bf16 rounding is outside the f16 tolerance");
        let big = (0..o.len()).max_by(|&x, &y| o[x].abs().total_cmp(&o[y].abs())).unwrap();
        o[big] *= 1.05;
        let r = check(&o, Tolerance::ATTENTION_BF16);
        assert_eq!((r.passed, r.mismatches), (false, 1), "{r:?}");
        assert_eq!(r.first_bad[0].index, vec![0, (big / hd) as u64, (big % hd) as u64]);
    }

    #[test]
    fn causal_attention_sees_keys_up_to_its_own_row_and_catches_a_missing_mask() {
        let (bh, s, hd) = (2usize, 128usize, 64usize);
        let scale = 0.125f32;
        let dt = DType::BF16;
        let q = inputs(dt, bh * s * hd, 61);
        let k = inputs(dt, bh * s * hd, 62);
        let vt = inputs(dt, bh * hd * s, 63);
        let tol = Tolerance::for_attention_output(dt);
        let check = |o: &[f32], mask: Option<KeyMask>| {
            attention(&q, &k, &vt, o, bh as u64, s as u64, s as u64, hd as u64, 0.125, mask, tol, &mut Rng::new(9))
        };
        let causal = attention_f32_masked(&q, &k, &vt, (bh, s, s, hd), scale, dt, Some(KeyMask::Causal));
        let full = attention_f32_masked(&q, &k, &vt, (bh, s, s, hd), scale, dt, None);
        assert!(check(&causal, Some(KeyMask::Causal)).passed);
        // No mask, or the mask checked as none: most rows differ (the last row alone agrees).
        let r = check(&full, Some(KeyMask::Causal));
        assert!(!r.passed && r.mismatches as usize > bh * 16 * hd, "{r:?}");
        assert!(!check(&causal, None).passed);
        // Off by one on the diagonal (query i sees keys 0..i, not itself): caught.
        let shifted: Vec<f32> = {
            let mut o = causal.clone();
            for h in 0..bh {
                for i in 1..s {
                    let qr = &q[(h * s + i) * hd..(h * s + i + 1) * hd];
                    let sc: Vec<f32> = (0..i).map(|j| qr.iter().zip(&k[(h * s + j) * hd..(h * s + j + 1) * hd]).map(|(x, y)| x * y).sum::<f32>() * scale).collect();
                    let m = sc.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    let p: Vec<f32> = sc.iter().map(|v| (v - m).exp()).collect();
                    let l: f32 = p.iter().sum();
                    for d in 0..hd {
                        let vr = &vt[(h * hd + d) * s..(h * hd + d + 1) * s];
                        o[(h * s + i) * hd + d] = rounded(dt, p.iter().zip(vr).map(|(&w, &v)| rounded(dt, w) * v).sum::<f32>() / l);
                    }
                }
            }
            o
        };
        assert!(!check(&shifted, Some(KeyMask::Causal)).passed);
        assert_eq!(KeyMask::Causal.name(), "causal");
        // A sliding window of 48 keys: its own output passes; the causal output (every earlier
        // key) and a window one key wider fail on the rows past the window.
        let win = Some(KeyMask::SlidingWindow(48));
        let windowed = attention_f32_masked(&q, &k, &vt, (bh, s, s, hd), scale, dt, win);
        assert!(check(&windowed, win).passed);
        assert!(!check(&causal, win).passed);
        let wider = attention_f32_masked(&q, &k, &vt, (bh, s, s, hd), scale, dt, Some(KeyMask::SlidingWindow(49)));
        assert!(!check(&wider, win).passed);
        assert_eq!(KeyMask::keys(win, 10, s), 0..11);
        assert_eq!(KeyMask::keys(win, 100, s), 53..101);
    }
}
