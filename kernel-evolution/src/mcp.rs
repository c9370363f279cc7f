//! `cake-evolve-kernel mcp`: the contract tools of the Model Context Protocol, over stdio
//! (JSON-RPC 2.0, one message a line: `initialize`, `ping`, `tools/list`, `tools/call`).
//! The compiler's tools (check, explain, cost, lower, build, run, bench, corpus_show) are
//! `cake mcp`'s; these need this crate, which depends on `cake` and not the other way round, so an
//! agent registers both servers:
//!
//! * `contract_status {db}`: a kernel-evolution database's report (leaderboard, the share each gate
//!   filtered, the GPU stage, the best and its lineage), the JSON of `report --message-format json`;
//! * `contract_submit {contract, program}`: a program judged as the loop's stages 2 and 3 judge a
//!   candidate: the hard gates (parse, types, verifier, the contract's shapes; findings as the
//!   CLI's JSON) and the cost model at the headline. Nothing is recorded: the database holds only
//!   what its seeded search generated, so its runs stay reproducible. Time a submission on the GPU
//!   with `cake mcp`'s `run` / `bench`.
//!
//! Written by hand (the protocol's stdio subset), so the server adds no dependency.

use std::io::{BufRead, Write};
use std::path::Path;

use serde_json::{json, Value};

use crate::contract::Contract;
use crate::db::Db;
use crate::{gates, rank, report};

pub const PROTOCOL_VERSION: &str = "2024-11-05";

fn tool(name: &str, description: &str, props: Value, required: &[&str]) -> Value {
    json!({ "name": name, "description": description, "inputSchema": { "type": "object", "properties": props, "required": required } })
}

pub fn tools() -> Vec<Value> {
    vec![
        tool(
            "contract_status",
            "A kernel-evolution database's report: leaderboard, the share each gate filtered, the GPU stage, the best candidate and its lineage",
            json!({ "db": { "type": "string", "description": "the database path (`cake-evolve-kernel run --db`)" } }),
            &["db"],
        ),
        tool(
            "contract_submit",
            "Judge a Cake IR program against a workload contract: the hard gates (parse, types, verifier, the contract's shapes) and the cost model at the headline shape; nothing is recorded",
            json!({
                "contract": { "type": "string", "description": "the contract TOML path" },
                "program": { "type": "string", "description": "the Cake IR program text" },
            }),
            &["contract", "program"],
        ),
    ]
}

#[derive(Default)]
pub struct Server {}

impl Server {
    pub fn new() -> Server {
        Server {}
    }

    /// Serve until stdin closes.
    pub fn serve(&mut self, input: impl BufRead, mut output: impl Write) -> std::io::Result<()> {
        for line in input.lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            if let Some(reply) = self.handle(&line) {
                writeln!(output, "{reply}")?;
                output.flush()?;
            }
        }
        Ok(())
    }

    /// The reply to one message; `None` for a notification.
    pub fn handle(&mut self, line: &str) -> Option<Value> {
        let msg: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => return Some(json!({ "jsonrpc": "2.0", "id": null, "error": { "code": -32700, "message": format!("parse error: {e}") } })),
        };
        let id = msg.get("id").cloned()?;
        let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let result = match method {
            "initialize" => Ok(json!({
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": { "tools": { "listChanged": false } },
                "serverInfo": { "name": "cake-evolve-kernel", "version": env!("CARGO_PKG_VERSION") },
            })),
            "ping" => Ok(json!({})),
            "tools/list" => Ok(json!({ "tools": tools() })),
            "tools/call" => Ok(self.call(params.get("name").and_then(Value::as_str).unwrap_or(""), params.get("arguments").unwrap_or(&Value::Null))),
            other => Err(json!({ "code": -32601, "message": format!("method not found: `{other}`") })),
        };
        Some(match result {
            Ok(r) => json!({ "jsonrpc": "2.0", "id": id, "result": r }),
            Err(e) => json!({ "jsonrpc": "2.0", "id": id, "error": e }),
        })
    }

    fn call(&mut self, name: &str, args: &Value) -> Value {
        match self.call_inner(name, args) {
            Ok(v) => json!({ "content": [{ "type": "text", "text": v.to_string() }], "isError": false }),
            Err(msg) => json!({ "content": [{ "type": "text", "text": msg }], "isError": true }),
        }
    }

    fn call_inner(&mut self, name: &str, args: &Value) -> Result<Value, String> {
        let arg = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string).ok_or_else(|| format!("missing string argument `{k}`"));
        match name {
            "contract_status" => {
                let db = Db::open_existing(Path::new(&arg("db")?)).map_err(|e| e.to_string())?;
                Ok(report::Data::load(&db).map_err(|e| e.to_string())?.report())
            }
            "contract_submit" => {
                let contract = Contract::load(Path::new(&arg("contract")?)).map_err(|e| e.to_string())?;
                let program = arg("program")?;
                // The rules of the checkout the server runs in, as `cake check` would use.
                let rules = cake::rule_source::ActiveRules::resolve(None).map_err(|d| format!("{}: {}", d.code, d.message))?;
                let g = gates::run(&program, &contract, &rules.set);
                let findings: Vec<Value> = cake::render::render_json_lines("program.cake", &program, &g.diagnostics)
                    .lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect();
                let cost = g.validated.as_ref().map(|v| match rank::predict(v, &contract) {
                    Ok(p) => json!({ "predicted_ms": p.predicted_ms, "bottleneck": p.bottleneck, "hints": p.hints, "cell": p.cell }),
                    Err((code, message)) => json!({ "error": { "code": code, "message": message } }),
                });
                Ok(json!({
                    "contract_hash": contract.hash,
                    "gate": g.gate.as_str(),
                    "findings": findings,
                    "shape_problems": g.shape_problems,
                    "cost": cost,
                    "rules": rules.to_json(),
                }))
            }
            other => Err(format!("unknown tool `{other}`; `tools/list` names them (the compiler's tools are `cake mcp`'s)")),
        }
    }
}

