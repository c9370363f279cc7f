//! Kernel evolution: search Cake IR schedules against a workload contract.
//!
//! The loop reads as its stages, one module each, in order:
//! [`generate`] (tactic rewrites of archive elites) → [`gates`] (parse, type check, verify; every
//! rejection is a finding) → [`rank`] (the cost model at the headline shape) → [`evaluate`] (the
//! best predictions on the GPU: `cake run` over every contract shape × distribution against the
//! oracle, `cake bench` at the headline, each in a child process with a timeout) → [`route`]
//! (failing candidates' findings and run records into the evidence store that
//! `cake-evolve-compiler propose` mines). [`search`] holds the MAP-Elites archive, [`db`] the
//! program database, [`pipeline`] the orchestration (run, resume, replay) and [`report`] the
//! reports.

pub mod contract;
pub mod db;
pub mod error;
pub mod evaluate;
pub mod gates;
pub mod generate;
pub mod llm;
pub mod mcp;
pub mod pipeline;
pub mod rank;
pub mod report;
pub mod rng;
pub mod route;
pub mod search;
pub mod structural;
pub mod tactic;
