//! Stage 5, route the evidence: what the loop learned about failing candidates goes into the
//! evidence store `cake-evolve-compiler propose` mines (default `.cake/evidence`):
//! * a gate rejection (parse, type check, verify) → a failure report (`cake.failure-report/1`,
//!   stage `verify`, tool `cake`, class = the finding's code) about the stored program;
//! * a GPU run that failed (mismatch, fault, timeout, build refusal) → its run record, byte for
//!   byte, and the program;
//! * a timed headline run that passed → its run record, which carries the cost model's
//!   prediction, so mining sees mispredictions (`cost_model.misprediction`).
//!
//! Shape-gate rejections are the contract's business, not the compiler's, and are not routed;
//! nor are skipped runs (no GPU), which hold no evidence. The store is content-addressed, so
//! routing the same thing twice (a resumed run) writes nothing.

use std::path::{Path, PathBuf};

use cake::runtime::job::Verdict;
use cake::runtime::record::RunRecord;
use cake_evolve::mine::HARNESS_CLASSES;
use cake_evolve::store::{EvidenceStore, FailureReport, Stage};
use serde_json::json;

use crate::error::{KevoError, Result};
use crate::gates::GateResult;

pub struct Router {
    store: EvidenceStore,
    contract_hash: String,
}

fn store_err(root: &Path, e: impl std::fmt::Display) -> KevoError {
    KevoError::new("K204", root.display().to_string(), format!("cannot write the evidence store: {e}"), "give a writable `--evidence` directory")
}

impl Router {
    pub fn open(root: &Path, contract_hash: &str) -> Result<Router> {
        let store = EvidenceStore::open(root).map_err(|e| store_err(root, e))?;
        Ok(Router { store, contract_hash: contract_hash.to_string() })
    }

    pub fn root(&self) -> PathBuf {
        self.store.root().to_path_buf()
    }

    /// A gate rejection as a failure report; `None` when the gate is not the compiler's.
    pub fn gate_rejection(&self, text: &str, target: &str, gates: &GateResult) -> Result<Option<String>> {
        if !gates.gate.is_compiler() {
            return Ok(None);
        }
        let Some((class, message)) = gates.first_problem() else { return Ok(None) };
        let root = self.root();
        let program = self.store.put_program(text).map_err(|e| store_err(&root, e))?;
        let mut report = FailureReport::new(program.sha256, target, Stage::Verify, "cake", class, message);
        report.extra.insert("kernel_evolution".into(), json!({ "contract_hash": self.contract_hash, "gate": gates.gate.as_str() }));
        let id = self.store.append(report).map_err(|e| store_err(&root, e))?;
        Ok(Some(id.as_str().to_string()))
    }

    /// Route a candidate's run records: failures, and timed passes for the cost model. Returns
    /// how many records were routed.
    pub fn gpu_records(&self, text: &str, files: &[PathBuf]) -> Result<usize> {
        let root = self.root();
        let mut routed = 0;
        for f in files {
            let Ok(bytes) = std::fs::read(f) else { continue };
            let Ok(r) = serde_json::from_slice::<RunRecord>(&bytes) else { continue };
            let harness = r.error.as_ref().is_some_and(|e| HARNESS_CLASSES.contains(&e.class.as_str()));
            let failure = !matches!(r.verdict, Verdict::Pass | Verdict::Skipped) && !harness;
            let timed_pass = r.verdict == Verdict::Pass && r.command == "bench" && r.prediction.is_some();
            if failure || timed_pass {
                self.store.put_program(text).map_err(|e| store_err(&root, e))?;
                self.store.append_run_bytes(&bytes).map_err(|e| store_err(&root, e))?;
                routed += 1;
            }
        }
        Ok(routed)
    }
}
