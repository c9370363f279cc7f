//! Kernel evolution: search Cake IR schedules against a workload contract.
//!
//! The loop reads as its stages, one module each, in order:
//! [`generate`] (tactic rewrites of archive elites) → [`gates`] (parse, type check, verify; every
//! rejection is a finding) → [`rank`] (the cost model at the headline shape) → [`evaluate`] (the
//! best predictions on the GPU: `cake run` over every contract shape × distribution against the
//! oracle, `cake bench` at the headline, each in a child process with a timeout) → [`route`]
//! (failing candidates' findings and run records into the evidence store that
//! `cake-evolve-compiler propose` mines). [`tactic`] and [`structural`] are the rewrites the
//! generator draws from, [`llm`] the optional LLM proposer, [`search`] the MAP-Elites archive,
//! [`db`] the program database, [`pipeline`] the orchestration (run, resume, replay), [`report`]
//! the reports and [`mcp`] the Model Context Protocol server.

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
pub mod split_n;
pub mod structural;
pub mod tactic;
