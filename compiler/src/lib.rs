//! Cake: a typed, hardware-explicit GPU schedule language and its compiler.
//!
//! Stages, each a module whose dependencies point one way:
//! `syntax` (text → AST, AST → canonical text) → `check` (AST → typed `ir`, using the op
//! `catalog` and the `target` table) → later stages (verifier, cost model, lowering).
//! `diag` and `span` are shared by all of them. `api` is the staged library API over them
//! (`parse → check → verify → {cost, lower} → build → run`, one typed error per stage).

pub mod api;
pub mod catalog;
pub mod check;
pub mod codes;
pub mod corpus;
pub mod cost;
pub mod diag;
pub mod explain;
pub mod ir;
pub mod layout;
pub mod lower;
pub mod mcp;
pub mod nvrtc;
pub mod op_reference;
pub mod ops;
pub mod pred;
pub mod render;
pub mod rule_source;
pub mod runtime;
pub mod shape;
pub mod span;
pub mod store;
pub mod syntax;
pub mod target;
pub mod verify;
