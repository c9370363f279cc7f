//! The population: a MAP-Elites archive. Candidates are placed in cells keyed by their predicted
//! bottleneck and resource use (`rank::Prediction::cell`); each cell keeps its best candidate,
//! judged by the measured headline time when it was timed on the GPU, else by the prediction.
//! Parents are drawn uniformly over cells, so a schedule that is slower overall but bound by
//! something else keeps being explored.

use std::collections::BTreeMap;

use crate::rng::SplitMix64;

#[derive(Clone, Debug, PartialEq)]
pub struct Elite {
    pub seq: i64,
    pub score_ms: f64,
    pub measured: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Archive {
    cells: BTreeMap<String, Elite>,
}

impl Archive {
    /// Offer a candidate to its cell; it becomes the elite when it is faster (ties: the earlier).
    pub fn offer(&mut self, cell: &str, seq: i64, score_ms: f64, measured: bool) {
        if !score_ms.is_finite() {
            return;
        }
        let better = match self.cells.get(cell) {
            None => true,
            Some(e) => score_ms < e.score_ms || (score_ms == e.score_ms && seq < e.seq),
        };
        if better {
            self.cells.insert(cell.to_string(), Elite { seq, score_ms, measured });
        }
    }

    /// A parent: the elite of a cell drawn uniformly (cells in name order).
    pub fn pick_parent(&self, rng: &mut SplitMix64) -> Option<i64> {
        if self.cells.is_empty() {
            return None;
        }
        let i = rng.below(self.cells.len());
        self.cells.values().nth(i).map(|e| e.seq)
    }

    pub fn cells(&self) -> &BTreeMap<String, Elite> {
        &self.cells
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_keeps_its_fastest_and_parents_come_from_every_cell() {
        let mut a = Archive::default();
        a.offer("memory|q1", 0, 3.0, false);
        a.offer("memory|q1", 1, 2.0, true);
        a.offer("memory|q1", 2, 2.5, true);
        a.offer("epilogue|q2", 3, 9.0, false);
        assert_eq!(a.cells()["memory|q1"].seq, 1);
        let mut rng = SplitMix64::new(3);
        let picks: std::collections::BTreeSet<i64> = (0..64).filter_map(|_| a.pick_parent(&mut rng)).collect();
        assert_eq!(picks.into_iter().collect::<Vec<_>>(), vec![1, 3]);
    }
}
