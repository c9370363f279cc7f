//! The compiler-evolution engine behind `cake-evolve-compiler`: evidence → buckets → proposals
//! (verifier rule, primitive, calibration) on `evolve/<kind>/<id>` branches → merge gates →
//! the review queue in `proposals/`.

pub mod attribute;
pub mod benchmark;
pub mod calibrate;
pub mod durable;
pub mod evidence;
pub mod gate;
pub mod git;
pub mod import;
pub mod llm;
pub mod lock;
pub mod microbench;
pub mod mine;
pub mod normalize;
pub mod queue;
pub mod records;
pub mod rederive;
pub mod review;
pub mod review_page;
pub mod sanitize;
pub mod stale;
pub mod store;
pub mod synth;
pub mod term_refit;
pub mod widen;

/// Output format of the CLI commands (`mine`, `import`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Human,
    Json,
}
