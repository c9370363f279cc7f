//! Stage 3, rank: the cost model's prediction at the contract's headline shape, with its named
//! bottleneck, its hints and the resource use that places the candidate in the archive.

use cake::cost::Estimate;
use cake::target::TargetTable;
use cake::verify::Validated;

use crate::contract::Contract;

#[derive(Clone, Debug)]
pub struct Prediction {
    pub predicted_ms: f64,
    pub bottleneck: String,
    /// Codes of the cost model's hints (`C001`…).
    pub hints: Vec<String>,
    pub smem_bytes: u64,
    pub threads: u32,
    /// The archive cell: bottleneck × shared-memory quarter of the target's per-block limit ×
    /// threads per block.
    pub cell: String,
}

pub fn predict(v: &Validated, contract: &Contract) -> Result<Prediction, (String, String)> {
    let est: Estimate = cake::cost::estimate_builtin(v, &contract.file.workload.headline).map_err(|e| (e.code().to_string(), e.to_string()))?;
    let smem = est.occupancy.smem_bytes_per_block;
    let limit = TargetTable::builtin().get(&contract.file.target).map(|t| u64::from(t.smem_per_block_max)).filter(|&l| l > 0).unwrap_or(smem.max(1));
    // Quarters of the per-block limit: enough to tell a one-stage from a deep pipeline apart.
    let quarter = (smem * 4).div_ceil(limit).min(4);
    let bottleneck = est.bottleneck.as_str().to_string();
    let cell = format!("{bottleneck}|smem-q{quarter}|{}t", est.occupancy.threads_per_block);
    Ok(Prediction {
        predicted_ms: est.predicted_ms,
        bottleneck,
        hints: est.hints.iter().map(|h| h.code.clone()).collect(),
        smem_bytes: smem,
        threads: est.occupancy.threads_per_block,
        cell,
    })
}
