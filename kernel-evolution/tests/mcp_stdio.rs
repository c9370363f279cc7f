//! `cake-evolve-kernel mcp` driven over stdio by a scripted JSON-RPC client: initialize, list the
//! tools, check a broken program (the coded finding, as the CLI's JSON), cost the seed, run it (on
//! a machine without a GPU a clear skip), and submit a program against a contract.

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
        let mut child = Command::new(kevo()).arg("mcp").env("CAKE_BIN", cake_bin()).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
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
fn an_agent_checks_costs_runs_and_submits_over_stdio() {
    let mut c = Client::start();
    let init = c.request("initialize", json!({ "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": { "name": "test", "version": "0" } }));
    assert_eq!(init["result"]["serverInfo"]["name"], "cake-evolve-kernel");
    assert!(init["result"]["capabilities"]["tools"].is_object());
    c.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));

    let list = c.request("tools/list", json!({}));
    let names: Vec<&str> = list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    for want in ["check", "explain", "cost", "lower", "build", "run", "bench", "corpus_show", "contract_status", "contract_submit"] {
        assert!(names.contains(&want), "{names:?}");
    }

    // A broken program: the verifier's coded finding, the same JSON object the CLI prints.
    let broken = seed("kmeans_assign_naive.cake").replace("const MMA_REGS = 240", "const MMA_REGS = 300");
    let (check, is_error) = c.tool("check", json!({ "source": broken }));
    assert!(!is_error);
    assert_eq!(check["exit"], 1);
    let findings = check["json"].as_array().unwrap();
    assert!(findings.iter().any(|f| f["code"] == "V204" && f["severity"] == "error" && f["primary"]["line"].is_number()), "{check}");

    let (cost, _) = c.tool("cost", json!({ "source": seed("kmeans_assign_naive.cake"), "shape": "B=32,N=65536,K=1024,D=128" }));
    assert_eq!(cost["exit"], 0, "{cost}");
    assert_eq!(cost["json"][0]["bottleneck"], "epilogue");

    // Run on a machine without a GPU: a clear skip, never a pass.
    let workload = std::fs::read_to_string(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/softmax_bf16.workload.toml")).unwrap().replace("kernel = \"softmax_bf16\"\n", "");
    let (run, is_error) = c.tool("run", json!({ "source": seed("softmax_bf16_naive.cake"), "workload": workload }));
    assert!(!is_error, "{run}");
    if std::env::var("CAKE_TEST_GPU").as_deref() != Ok("1") {
        assert!(run["exit"] == 3 || run["exit"] == 1, "{run}");
        let skipped = run["skipped"].is_string() || run["stderr"].as_str().unwrap_or("").contains("N001");
        assert!(skipped, "without a GPU the run is skipped (or cannot build without NVRTC): {run}");
    }

    // Submit against the contract: gates and the cost model, nothing recorded.
    let contract = contract("kmeans-assign.toml");
    let (sub, _) = c.tool("contract_submit", json!({ "contract": contract, "source": broken }));
    assert_eq!(sub["gate"], "verify", "{sub}");
    let (sub, _) = c.tool("contract_submit", json!({ "contract": contract, "source": seed("kmeans_assign_naive.cake") }));
    assert_eq!(sub["gate"], "passed");
    assert!(sub["cost"]["predicted_ms"].as_f64().unwrap() > 0.0);

    // Bad input is a tool error the agent can read, and an unknown method a JSON-RPC error.
    let (msg, is_error) = c.tool("cost", json!({ "source": "kernel k target sm_90a\n" }));
    assert!(is_error && msg.as_str().unwrap().contains("shape"), "{msg}");
    let (msg, is_error) = c.tool("contract_status", json!({ "db": "/nonexistent/k.sqlite" }));
    assert!(is_error && msg.as_str().unwrap().contains("K201"), "{msg}");
    assert_eq!(c.request("resources/list", json!({}))["error"]["code"], -32601);

    drop(c.child.stdin.take());
    assert!(c.child.wait().unwrap().success());
}
