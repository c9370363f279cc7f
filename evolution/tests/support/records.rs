//! Run records for the evolution tests (included with `#[path]`; on its own it has no tests): one
//! builder of the runtime's own type with neutral defaults, so each test sets only the fields it
//! examines (shape, workload, checks, times, prediction) on the typed struct.
#![allow(dead_code)]

use cake::runtime::record::RunRecord;

/// A run of program `name` (stored as `program_sha`) on sm_90a with `verdict` and, for a failed
/// run, its error `(class, message)`: no GPU, workload, tensors, checks or times; unverified.
pub fn run_record(name: &str, program_sha: &str, verdict: &str, error: Option<(&str, &str)>, created: u64) -> RunRecord {
    let error = error.map(|(c, m)| serde_json::json!({ "class": c, "message": m }));
    serde_json::from_value(serde_json::json!({
        "schema": "cake.run-record/1",
        "created_unix_ms": created,
        "command": "run",
        "program": { "name": name, "path": format!("{name}.cake"), "sha256": program_sha, "target": "sm_90a", "unverified": true, "findings": [] },
        "cake": { "version": "0.1.0" },
        "gpu": null,
        "workload": null,
        "shape": {},
        "dist": "normal",
        "seed": 1,
        "verdict": verdict,
        "error": error,
        "stage": "launch",
        "tensors": [],
        "checks": [],
        "times_ms": null,
        "baseline": null,
        "launch": null,
        "ptxas": null,
        "notes": []
    }))
    .expect("a valid run record")
}

/// `median_ms` as a run's times (every sample the same).
pub fn times(median_ms: f64, repeats: u32) -> cake::runtime::job::Times {
    serde_json::from_value(serde_json::json!({
        "median_ms": median_ms, "min_ms": median_ms, "p90_ms": median_ms, "mean_ms": median_ms,
        "repeats": repeats, "warmup": 1, "l2_flush_bytes": 268435456u64, "samples_ms": vec![median_ms; repeats as usize]
    }))
    .expect("valid times")
}
