//! `cake-evolve-kernel mcp` driven over stdio by a scripted JSON-RPC client: initialize, list the
//! contract tools, submit a broken program (the verifier's coded finding, as the CLI's JSON) and
//! the seed (gates passed, the cost model's prediction) against a contract, read a database's
//! status; bad input is a readable tool error, an unknown method a JSON-RPC error.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use support::*;

struct Client {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
    next: u64,
}

impl Client {
    fn start() -> Client {
        let mut child = Command::new(kevo()).arg("mcp").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        Client { child, out, next: 1 }
    }

    fn send(&mut self, msg: Value) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        let reply: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC ({e}): {line}"));
        assert_eq!(reply["id"], id);
        reply
    }

    /// A tool's result: (its JSON payload, isError).
    fn tool(&mut self, name: &str, arguments: Value) -> (Value, bool) {
        let r = self.request("tools/call", json!({ "name": name, "arguments": arguments }));
        let res = &r["result"];
        let text = res["content"][0]["text"].as_str().unwrap().to_string();
        (serde_json::from_str(&text).unwrap_or(Value::String(text)), res["isError"] == true)
    }
}

fn seed(name: &str) -> String {
    std::fs::read_to_string(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("seeds").join(name)).unwrap()
}

#[test]
fn an_agent_submits_programs_and_reads_status_over_stdio() {
    let mut c = Client::start();
    let init = c.request("initialize", json!({ "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": { "name": "test", "version": "0" } }));
    assert_eq!(init["result"]["serverInfo"]["name"], "cake-evolve-kernel");
    assert!(init["result"]["capabilities"]["tools"].is_object());
    c.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    assert_eq!(c.request("ping", json!({}))["result"], json!({}));

    let list = c.request("tools/list", json!({}));
    let names: Vec<&str> = list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["contract_status", "contract_submit"]);

    // A broken program: rejected by the verifier, with its coded finding as the CLI prints it.
    let contract = contract("kmeans-assign.toml");
    let broken = seed("kmeans_assign_naive.cake").replace("const MMA_REGS = 240", "const MMA_REGS = 300");
    let (sub, is_error) = c.tool("contract_submit", json!({ "contract": contract, "program": broken }));
    assert!(!is_error, "{sub}");
    assert_eq!(sub["gate"], "verify", "{sub}");
    let findings = sub["findings"].as_array().unwrap();
    assert!(findings.iter().any(|f| f["code"] == "V204" && f["severity"] == "error" && f["primary"]["line"].is_number()), "{sub}");
    assert!(sub["cost"].is_null(), "an unverified program is not costed");
    // The seed: through the gates, and the cost model's prediction at the headline.
    let (sub, _) = c.tool("contract_submit", json!({ "contract": contract, "program": seed("kmeans_assign_naive.cake") }));
    assert_eq!(sub["gate"], "passed");
    // The cost model's own estimate at the contract's headline, as the library gives it (which
    // class binds is the model's call: the one-stage seed sits where epilogue and exposed
    // round trips weigh the same).
    let checked = cake::check::check_source(&seed("kmeans_assign_naive.cake"));
    let dims = [("B", 32), ("N", 65536), ("K", 1024), ("D", 128)].iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let want = cake::cost::estimate_builtin(checked.validated.as_ref().expect("the seed verifies"), &dims).expect("the seed is costed");
    assert_eq!(sub["cost"]["bottleneck"], want.bottleneck.to_string(), "{sub}");
    let got = sub["cost"]["predicted_ms"].as_f64().unwrap();
    assert!(got > 0.0 && (got / want.predicted_ms - 1.0).abs() < 1e-3, "{got} ms against the library's {} ms", want.predicted_ms);
    // A program the contract's shapes do not fit (192-point tiles; N = 256 is a contract shape):
    // the shape gate says which.
    let three = seed("kmeans_assign_naive.cake").replace("const WG = 1", "const WG = 3").replace("const MMA_REGS = 240", "const MMA_REGS = 152");
    let (sub, _) = c.tool("contract_submit", json!({ "contract": contract, "program": three }));
    assert_eq!(sub["gate"], "shape", "{sub}");
    assert!(!sub["shape_problems"].as_array().unwrap().is_empty());

    // Status of a database a search wrote (with the stand-in cake: every evaluation skipped).
    let tmp = tempfile::tempdir().unwrap();
    let (fake, _) = fake_cake(tmp.path(), "0");
    let out = run(&["run", contract.to_str().unwrap(), "--db", "k.sqlite", "--budget-evals", "2", "--evidence", "ev"], &fake, tmp.path());
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let (status, is_error) = c.tool("contract_status", json!({ "db": tmp.path().join("k.sqlite") }));
    assert!(!is_error, "{status}");
    assert_eq!(status["gpu_stage"]["skipped"], 2);
    assert_eq!(status["gpu_stage_skipped"], true);

    // Bad input is a tool error the agent can read; an unknown method a JSON-RPC error.
    let (msg, is_error) = c.tool("contract_status", json!({ "db": "/nonexistent/k.sqlite" }));
    assert!(is_error && msg.as_str().unwrap().contains("K201"), "{msg}");
    let (msg, is_error) = c.tool("contract_submit", json!({ "contract": "/nonexistent/c.toml", "program": "" }));
    assert!(is_error && msg.as_str().unwrap().contains("K001"), "{msg}");
    let (msg, is_error) = c.tool("contract_submit", json!({ "contract": contract }));
    assert!(is_error && msg.as_str().unwrap().contains("program"), "{msg}");
    let (msg, is_error) = c.tool("check", json!({ "program": "" }));
    assert!(is_error && msg.as_str().unwrap().contains("cake mcp"), "{msg}");
    assert_eq!(c.request("resources/list", json!({}))["error"]["code"], -32601);

    drop(c.child.stdin.take());
    assert!(c.child.wait().unwrap().success());
}
