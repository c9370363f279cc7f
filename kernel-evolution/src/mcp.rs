//! `cake-evolve-kernel mcp`: a Model Context Protocol server over stdio (JSON-RPC 2.0, one message
//! a line), so an external agent can drive the harness: `check`, `explain`, `cost`, `lower`,
//! `build`, `run`, `bench`, `corpus_show`, and `contract_status` / `contract_submit`.
//!
//! The compiler's tools run the `cake` binary (found as the GPU stage finds it) with
//! `--message-format json`, so an agent gets the same JSON findings as the CLI; `run` and `bench`
//! without a GPU return `cake`'s exit 3 and say the run was skipped. `contract_submit` judges a
//! program against a contract's gates and cost model (as the loop's stages 2 and 3 do) without
//! recording it: the search database keeps only what its seeded search generated. Written by hand
//! (the protocol's stdio subset: `initialize`, `ping`, `tools/list`, `tools/call`), so the server
//! adds no dependency.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::contract::Contract;
use crate::db::Db;
use crate::evaluate::{find_cake, run_child};
use crate::{gates, rank, report};

pub const PROTOCOL_VERSION: &str = "2024-11-05";

fn tool(name: &str, description: &str, props: Value, required: &[&str]) -> Value {
    json!({ "name": name, "description": description, "inputSchema": { "type": "object", "properties": props, "required": required } })
}

pub fn tools() -> Vec<Value> {
    let source = json!({ "type": "string", "description": "the Cake IR program text" });
    let shape = json!({ "type": "string", "description": "a value for every dim: `M=8192,N=8192,K=8192`" });
    let workload = json!({ "type": "string", "description": "the workload TOML text (compiler/src/runtime/README.md)" });
    vec![
        tool("check", "Parse, type-check and verify a program; returns the compiler's JSON findings", json!({ "source": source }), &["source"]),
        tool("explain", "Explain a diagnostic code (E0101, V204, C001) or a catalog operation (wgmma)", json!({ "code": { "type": "string" } }), &["code"]),
        tool("cost", "Predict a program's time at a shape and name its bottleneck", json!({ "source": source, "shape": shape }), &["source", "shape"]),
        tool("lower", "The CUDA C++ (with inline PTX) a verified program lowers to", json!({ "source": source }), &["source"]),
        tool("build", "Lower and compile with NVRTC; returns the ptxas report", json!({ "source": source }), &["source"]),
        tool("run", "Run on the GPU over the workload's shapes × distributions against its oracle (skipped without a GPU)", json!({ "source": source, "workload": workload }), &["source", "workload"]),
        tool("bench", "Time at the workload's headline shape against its baseline (skipped without a GPU)", json!({ "source": source, "workload": workload }), &["source", "workload"]),
        tool("corpus_show", "A corpus case's program and expectations (`gemm-sm90-ws/<id>`)", json!({ "id": { "type": "string" } }), &["id"]),
        tool("contract_status", "A kernel-evolution database's report: leaderboard, gates, GPU stage", json!({ "db": { "type": "string", "description": "the database path" } }), &["db"]),
        tool(
            "contract_submit",
            "Judge a program against a contract: the hard gates (parse, types, verifier, contract shapes) and the cost model at the headline",
            json!({ "contract": { "type": "string", "description": "the contract path" }, "source": source }),
            &["contract", "source"],
        ),
    ]
}

pub struct Server {
    scratch: PathBuf,
    calls: u64,
}

impl Server {
    pub fn new() -> Server {
        Server { scratch: std::env::temp_dir().join(format!("kevo-mcp-{}", std::process::id())), calls: 0 }
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
        let _ = std::fs::remove_dir_all(&self.scratch);
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

    fn write(&mut self, name: &str, text: &str) -> Result<PathBuf, String> {
        self.calls += 1;
        let dir = self.scratch.join(self.calls.to_string());
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot write the scratch directory: {e}"))?;
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        Ok(p)
    }

    fn call_inner(&mut self, name: &str, args: &Value) -> Result<Value, String> {
        let arg = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string).ok_or_else(|| format!("missing string argument `{k}`"));
        match name {
            "check" => {
                let f = self.write("program.cake", &arg("source")?)?;
                cake(&["check", path(&f)])
            }
            "explain" => cake(&["explain", &arg("code")?]),
            "cost" => {
                let f = self.write("program.cake", &arg("source")?)?;
                cake(&["cost", path(&f), "--shape", &arg("shape")?])
            }
            "lower" => {
                let f = self.write("program.cake", &arg("source")?)?;
                cake(&["lower", path(&f)])
            }
            "build" => {
                let f = self.write("program.cake", &arg("source")?)?;
                let out = f.with_file_name("build");
                cake(&["build", path(&f), "--out", path(&out)])
            }
            "run" | "bench" => {
                let f = self.write("program.cake", &arg("source")?)?;
                let w = f.with_file_name("workload.toml");
                std::fs::write(&w, arg("workload")?).map_err(|e| format!("cannot write the workload: {e}"))?;
                let ev = f.with_file_name("evidence");
                cake(&[name, path(&f), "--workload", path(&w), "--evidence", path(&ev)])
            }
            "corpus_show" => cake(&["corpus", "show", &arg("id")?]),
            "contract_status" => {
                let db = Db::open_existing(Path::new(&arg("db")?)).map_err(|e| e.to_string())?;
                Ok(report::Data::load(&db).map_err(|e| e.to_string())?.report())
            }
            "contract_submit" => {
                let contract = Contract::load(Path::new(&arg("contract")?)).map_err(|e| e.to_string())?;
                let g = gates::run(&arg("source")?, &contract);
                let prediction = g.validated.as_ref().map(|v| match rank::predict(v, &contract) {
                    Ok(p) => json!({ "predicted_ms": p.predicted_ms, "bottleneck": p.bottleneck, "hints": p.hints, "cell": p.cell }),
                    Err((code, message)) => json!({ "error": { "code": code, "message": message } }),
                });
                Ok(json!({ "contract_hash": contract.hash, "gate": g.gate, "findings": g.findings_json(), "cost": prediction }))
            }
            other => Err(format!("unknown tool `{other}`; `tools/list` names them")),
        }
    }
}

impl Default for Server {
    fn default() -> Server {
        Server::new()
    }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

/// `cake ARGS --message-format json`: its exit code, its JSON lines (or its text) and what it said
/// on stderr. Exit 3 (no GPU) is reported as a skip.
fn cake(args: &[&str]) -> Result<Value, String> {
    let bin = find_cake().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(bin);
    cmd.args(args).args(["--message-format", "json", "--color", "never"]);
    // A run or bench sweep holds its own per-run limits; this bounds the whole call.
    let out = run_child(cmd, Duration::from_secs(600)).map_err(|e| format!("cannot run `cake`: {e}"))?;
    if out.code == Some(2) {
        return Err(format!("cake {}: usage error: {}", args[0], out.stderr.trim()));
    }
    let lines: Vec<Value> = out.stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let all_json = !out.stdout.trim().is_empty() && lines.len() == out.stdout.lines().filter(|l| !l.trim().is_empty()).count();
    let mut v = json!({ "exit": out.code, "stderr": out.stderr.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n") });
    if all_json {
        v["json"] = Value::Array(lines);
    } else {
        v["text"] = json!(out.stdout);
    }
    if out.code == Some(3) {
        v["skipped"] = json!("no GPU on this machine: nothing was run or timed (cake exit 3)");
    }
    Ok(v)
}
