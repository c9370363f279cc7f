//! `attention`: O = softmax(scale · Q·Kᵀ)·V per (batch·head), non-causal. Sampled query rows of
//! every head (first and last included), each against an fp64 reference over its whole softmax
//! row, every element under `|got − ref| ≤ atol·rms(ref) + rtol·|ref|`
//! ([`Tolerance::ATTENTION_BF16`], [`Tolerance::ATTENTION_F16`]); the whole output is scanned for
//! non-finite (unwritten) values.

use super::{dot_f64, par_map, CheckReport, Comparer, Tolerance};
use crate::runtime::rng::{sample_indices, Rng};

/// `attention`: O[h] = softmax(scale · Q[h]·K[h]ᵀ)·V[h] (non-causal) for Q [BH, SQ, HD],
/// K [BH, SK, HD], VT = Vᵀ [BH, HD, SK] and O [BH, SQ, HD], row-major. `tol.samples` query rows
/// per (batch·head) `h` (first and last included when two or more), each against an fp64
/// reference over its whole softmax row (all SK keys); `scale` is the value the kernel receives
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
        let kh = &k[h * sku * du..(h + 1) * sku * du];
        let scores: Vec<f64> = kh.chunks_exact(du).map(|kr| scale * dot_f64(qr, kr)).collect();
        let mx = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let p: Vec<f64> = scores.iter().map(|s| (s - mx).exp()).collect();
        let l: f64 = p.iter().sum();
        let vh = &vt[h * du * sku..(h + 1) * du * sku];
        vh.chunks_exact(sku).map(|vr| vr.iter().zip(&p).map(|(&v, &w)| f64::from(v) * w).sum::<f64>() / l).collect()
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
        let mut o = vec![0f32; bh * sq * hd];
        for h in 0..bh {
            for i in 0..sq {
                let qr = &q[(h * sq + i) * hd..(h * sq + i + 1) * hd];
                let s: Vec<f32> = (0..sk)
                    .map(|j| qr.iter().zip(&k[(h * sk + j) * hd..(h * sk + j + 1) * hd]).map(|(x, y)| x * y).sum::<f32>() * scale)
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
                attention(&q, &k, &vt, o, bh as u64, sq as u64, sk as u64, hd as u64, scale, tol, &mut Rng::new(7))
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
            attention(&q, &k, &vt, o, 1, 64, 64, 64, 0.125, Tolerance { samples: 64, ..tol }, &mut Rng::new(8))
        };
        assert!(check(&o, Tolerance::ATTENTION_BF16).passed);
        assert!(!check(&o, Tolerance::ATTENTION_F16).passed, "bf16 rounding is outside the f16 tolerance");
        let big = (0..o.len()).max_by(|&x, &y| o[x].abs().total_cmp(&o[y].abs())).unwrap();
        o[big] *= 1.05;
        let r = check(&o, Tolerance::ATTENTION_BF16);
        assert_eq!((r.passed, r.mismatches), (false, 1), "{r:?}");
        assert_eq!(r.first_bad[0].index, vec![0, (big / hd) as u64, (big % hd) as u64]);
    }
}
