//! The statistic every ratio against a peer is taken with (issue 18, item 6). A peer's own time
//! drifts from run to run (cuBLAS at 8192³ on the H200: 687–803 TFLOP/s), so one run of the kernel
//! and one of the peer, minutes apart, compare the clocks and the power state more than the code.
//! Cake and the peer are timed in interleaved rounds instead (kernel, peer, kernel, peer, … in one
//! process, on one context), each round a median over its own L2-flushed samples, and the ratio is
//! the median of the peer's round medians over the median of the kernel's: a round that caught a
//! clock dip moves its own median, not the ratio.

use serde::{Deserialize, Serialize};

/// Rounds a ratio is taken over when a peer is timed beside the kernel (`cake bench --rounds`).
pub const DEFAULT_ROUNDS: u32 = 3;

/// Per-round medians of the kernel and the peer, and the ratio they give.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rounds {
    pub kernel_medians_ms: Vec<f64>,
    pub peer_medians_ms: Vec<f64>,
    /// Median of the peer's round medians over the median of the kernel's (the kernel's speed
    /// over the peer's: above 1, the kernel is faster).
    pub speed_ratio: f64,
}

/// The median of sorted samples (the middle pair's mean for an even count); `sorted` is not empty.
pub fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// A round's median; `None` for no samples or a sample that is not finite.
fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() || v.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    Some(median_of_sorted(&s))
}

impl Rounds {
    /// From each round's samples (kernel and peer alike, round by round). `None` when a round
    /// has no samples, a sample is not finite, or the kernel's median is not positive.
    pub fn from_samples(kernel: &[Vec<f64>], peer: &[Vec<f64>]) -> Option<Rounds> {
        if kernel.is_empty() || kernel.len() != peer.len() {
            return None;
        }
        let kernel_medians_ms = kernel.iter().map(|r| median(r)).collect::<Option<Vec<f64>>>()?;
        let peer_medians_ms = peer.iter().map(|r| median(r)).collect::<Option<Vec<f64>>>()?;
        let (k, p) = (median(&kernel_medians_ms)?, median(&peer_medians_ms)?);
        if !(k > 0.0) {
            return None;
        }
        Some(Rounds { kernel_medians_ms, peer_medians_ms, speed_ratio: p / k })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_is_of_the_round_medians() {
        // The peer's second round caught a clock dip (every sample 30% slower): its median moves,
        // the median over rounds does not.
        let kernel = vec![vec![1.0, 1.1, 0.9], vec![1.0, 1.0, 1.2], vec![0.95, 1.05, 1.0]];
        let peer = vec![vec![2.0, 2.1, 1.9], vec![2.6, 2.7, 2.5], vec![2.0, 1.95, 2.05]];
        let r = Rounds::from_samples(&kernel, &peer).unwrap();
        assert_eq!(r.kernel_medians_ms, vec![1.0, 1.0, 1.0]);
        assert_eq!(r.peer_medians_ms, vec![2.0, 2.6, 2.0]);
        assert!((r.speed_ratio - 2.0).abs() < 1e-12, "{r:?}");
        // Pooling every sample instead would have said 2.05 / 1.0.
    }

    #[test]
    fn even_counts_take_the_middle_pair_and_bad_input_gives_none() {
        let r = Rounds::from_samples(&[vec![1.0, 3.0], vec![2.0, 2.0]], &[vec![4.0, 4.0], vec![6.0, 8.0]]).unwrap();
        assert_eq!((r.kernel_medians_ms.clone(), r.peer_medians_ms.clone()), (vec![2.0, 2.0], vec![4.0, 7.0]));
        assert!((r.speed_ratio - 5.5 / 2.0).abs() < 1e-12);
        assert!(Rounds::from_samples(&[], &[]).is_none());
        assert!(Rounds::from_samples(&[vec![1.0]], &[vec![1.0], vec![1.0]]).is_none(), "rounds must pair up");
        assert!(Rounds::from_samples(&[vec![]], &[vec![1.0]]).is_none());
        assert!(Rounds::from_samples(&[vec![f64::NAN]], &[vec![1.0]]).is_none());
        assert!(Rounds::from_samples(&[vec![0.0]], &[vec![1.0]]).is_none());
    }
}
