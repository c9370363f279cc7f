//! `cake mcp` driven over stdio by a scripted JSON-RPC client, as an agent's MCP client would:
//! initialize, list the tools, check a broken program from the verifier's negative corpus (it
//! gets the coded finding, with its span, exactly as `cake check --message-format json` prints
//! it), cost it and a valid example, run it (without a GPU: a clear skip), and bad input of every
//! kind, after which the same session still answers.
//!
//! Every wait for an answer has a deadline, so a server that hangs fails the test instead of
//! hanging the run. The build and run tests that need the CUDA toolchain say so in their names
//! (`needs_toolchain_`); with a GPU (`CAKE_TEST_GPU=1`, as `scripts/test.sh` exports it) the run
//! test expects the runs to pass, without one the `no GPU` skip. Without the toolchain, on any
//! machine, build and run are the coded `N001` skip.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);
/// A run builds the program with NVRTC and probes the GPU in child processes: slower.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A scripted MCP client over the server's stdin and stdout.
struct Client {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    next_id: u64,
}

impl Client {
    /// Start `cake mcp` in the repository root (with `env` added to its environment) and
    /// complete the handshake; returns the client and the `initialize` result.
    fn start() -> (Client, Value) {
        Client::start_with_env(&[])
    }

    fn start_with_env(env: &[(&str, &str)]) -> (Client, Value) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cake"))
            .arg("mcp")
            .envs(env.iter().copied())
            .current_dir(root())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start `cake mcp`");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut client = Client { child, stdin, lines, next_id: 0 };
        let init = client.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": { "name": "cake-mcp-test", "version": "0" },
            }),
        );
        client.send_line(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }).to_string());
        (client, init["result"].clone())
    }

    fn send_line(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").and_then(|()| self.stdin.flush()).expect("write to `cake mcp`");
    }

    /// The next message line that is the answer to `id`, within `timeout`.
    fn answer(&mut self, id: &Value, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line}"));
                    assert_eq!(v["jsonrpc"], "2.0", "{v}");
                    if &v["id"] == id {
                        return v;
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!("no answer to request {id} within {timeout:?}"),
                Err(RecvTimeoutError::Disconnected) => panic!("`cake mcp` closed stdout before answering request {id}"),
            }
        }
    }

    /// Send a request and wait for its answer (the whole JSON-RPC response).
    fn request_within(&mut self, method: &str, params: Value, timeout: Duration) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send_line(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string());
        self.answer(&id, timeout)
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.request_within(method, params, ANSWER_TIMEOUT)
    }

    /// `tools/call`: the tool's result (`content`, `structuredContent`, `isError`); panics on a
    /// JSON-RPC error.
    fn call_within(&mut self, tool: &str, arguments: Value, timeout: Duration) -> Value {
        let r = self.request_within("tools/call", json!({ "name": tool, "arguments": arguments }), timeout);
        assert!(r.get("error").is_none(), "{tool}: JSON-RPC error {r}");
        let result = r["result"].clone();
        // The text content is the same JSON object as the structured content.
        let text = result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{tool}: no text content: {result}"));
        let from_text: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{tool}: text content is not JSON ({e}): {text}"));
        assert_eq!(from_text, result["structuredContent"], "{tool}");
        result
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.call_within(tool, arguments, ANSWER_TIMEOUT)
    }

    /// A call the server refuses as a tool error: the coded diagnostic it answers with.
    fn refused(&mut self, tool: &str, arguments: Value) -> Value {
        let r = self.call(tool, arguments.clone());
        assert_eq!(r["isError"], true, "{tool} {arguments}: {r}");
        let v = &r["structuredContent"];
        assert_eq!(v["status"], "error", "{v}");
        let error = v["error"].clone();
        assert!(error["help"].as_str().is_some_and(|h| !h.is_empty()), "a refusal says what to do: {error}");
        error
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `cake ARGS` in the repository root: exit status and stdout.
fn cake(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cake")).args(args).current_dir(root()).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A verifier-negative corpus case: its program path and the code, line and column its manifest
/// expects.
fn negative_case(stem: &str) -> (String, String, i64, i64) {
    let dir = root().join("corpus/verifier-negative");
    let manifest: toml::Value = toml::from_str(&std::fs::read_to_string(dir.join(format!("{stem}.toml"))).unwrap()).unwrap();
    let f = &manifest["expect"]["findings"][0];
    (
        format!("corpus/verifier-negative/{stem}.cake"),
        f["code"].as_str().unwrap().to_string(),
        f["line"].as_integer().unwrap(),
        f["column"].as_integer().unwrap(),
    )
}

const TOOLS: [&str; 8] = ["bench", "build", "check", "corpus_show", "cost", "explain", "lower", "run"];

#[test]
fn initialize_list_check_cost_explain_lower_and_corpus_show() {
    let (mut c, init) = Client::start();
    assert_eq!(init["serverInfo"]["name"], "cake", "{init}");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    assert!(init["protocolVersion"].as_str().is_some_and(|v| v.starts_with("20")), "{init}");

    // tools/list: exactly the tools, each with a description and an object input schema.
    let list = c.request("tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap_or_else(|| panic!("{list}"));
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, TOOLS);
    for t in tools {
        assert!(t["description"].as_str().is_some_and(|d| d.len() > 20), "{t}");
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
    }
    let check_schema = &tools.iter().find(|t| t["name"] == "check").unwrap()["inputSchema"];
    assert!(check_schema["properties"]["program"].is_object() && check_schema["properties"]["path"].is_object(), "{check_schema}");

    // check a broken program, passed inline: its coded finding at the manifest's line and column.
    let (path, code, line, column) = negative_case("V101-tx-byte-mismatch");
    assert_eq!(code, "V101");
    let source = std::fs::read_to_string(root().join(&path)).unwrap();
    let r = c.call("check", json!({ "program": source }));
    assert_eq!(r["isError"], false, "a check that found errors is an answer: {r}");
    let v = &r["structuredContent"];
    assert_eq!(v["status"], "findings");
    assert_eq!(v["file"], "<inline>");
    assert!(v["errors"].as_u64().unwrap() >= 1, "{v}");
    let finding = v["findings"].as_array().unwrap().iter().find(|f| f["code"] == "V101").unwrap_or_else(|| panic!("no V101: {v}"));
    assert_eq!(finding["severity"], "error");
    assert_eq!(finding["primary"]["line"], line, "{finding}");
    assert_eq!(finding["primary"]["column"], column, "{finding}");
    let (start, end) = (finding["primary"]["start"].as_u64().unwrap() as usize, finding["primary"]["end"].as_u64().unwrap() as usize);
    assert_eq!(&source[start..end], "32768", "the span covers the announced bytes");
    assert!(finding["help"].as_str().is_some_and(|h| h.contains("49152")), "{finding}");

    // The same program as a path: the findings are exactly the CLI's JSON lines.
    let r = c.call("check", json!({ "path": path }));
    let (status, stdout) = cake(&["check", "--message-format", "json", &path]);
    assert_eq!(status, 1);
    // The CLI's lines also say which rule set judged them (`rules`: the checkout's, here); the
    // findings themselves must be the same.
    let mut lines = json_lines(&stdout);
    for l in &mut lines {
        assert_eq!(l["rules"]["origin"], "checkout", "{l}");
        l.as_object_mut().unwrap().remove("rules");
    }
    assert_eq!(r["structuredContent"]["findings"], Value::Array(lines));
    // and the same rule set judged them: the checkout's, named in the answer as in the CLI's lines.
    assert_eq!(r["structuredContent"]["rules"], json_lines(&stdout)[0]["rules"], "{r}");

    // A valid example checks clean.
    let r = c.call("check", json!({ "path": "examples/gemm_bf16_ws.cake" }));
    assert_eq!(r["structuredContent"]["status"], "clean", "{r}");
    assert_eq!(r["structuredContent"]["errors"], 0);

    // cost of the broken program: no estimate, the coded finding instead.
    let r = c.call("cost", json!({ "program": source, "shape": "M=128,N=256,K=64" }));
    assert_eq!(r["isError"], true, "{r}");
    let v = &r["structuredContent"];
    assert_eq!(v["status"], "findings");
    assert!(v["findings"].as_array().unwrap().iter().any(|f| f["code"] == "V101"), "{v}");

    // cost of a valid example: the estimate `cake cost --message-format json` prints.
    let shape = "M=8192,N=8192,K=8192";
    let r = c.call("cost", json!({ "path": "examples/gemm_bf16_ws.cake", "shape": shape }));
    assert_eq!(r["isError"], false, "{r}");
    let est = &r["structuredContent"];
    assert!(est["predicted_ms"].as_f64().is_some_and(|t| t > 0.0), "{est}");
    assert!(est["bottleneck"].as_str().is_some_and(|b| !b.is_empty()), "{est}");
    assert_eq!(est["dims"]["K"], 8192);
    let (status, stdout) = cake(&["cost", "--message-format", "json", "examples/gemm_bf16_ws.cake", "--shape", shape]);
    assert_eq!(status, 0);
    assert_eq!(*est, json_lines(&stdout)[0], "the tool answers what the CLI prints");
    // A shape that misses a dim: the cost model's coded finding, located at the dim.
    let r = c.call("cost", json!({ "path": "examples/gemm_bf16_ws.cake", "shape": "M=8192" }));
    assert_eq!(r["isError"], true);
    assert_eq!(r["structuredContent"]["error"]["code"], "C101", "{r}");
    assert!(r["structuredContent"]["error"]["primary"]["line"].as_u64().is_some(), "{r}");

    // explain: the text `cake explain` prints, for a code and for an op.
    for query in ["V101", "wgmma"] {
        let r = c.call("explain", json!({ "query": query }));
        assert_eq!(r["isError"], false, "{r}");
        assert_eq!(r["structuredContent"]["text"].as_str().unwrap(), cake(&["explain", query]).1, "{query}");
    }
    assert_eq!(c.call("explain", json!({ "query": "V101" }))["structuredContent"]["kind"], "code");
    assert_eq!(c.call("explain", json!({ "query": "wgmma" }))["structuredContent"]["kind"], "op");

    // lower: the CUDA `cake lower` prints; a broken program gets its findings.
    let r = c.call("lower", json!({ "path": "examples/softmax_bf16.cake" }));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["cuda"].as_str().unwrap(), cake(&["lower", "examples/softmax_bf16.cake"]).1);
    let r = c.call("lower", json!({ "program": source }));
    assert_eq!(r["isError"], true);
    assert_eq!(r["structuredContent"]["findings"][0]["code"], "V101", "{r}");

    // corpus_show: the case's program and manifest.
    let r = c.call("corpus_show", json!({ "id": "verifier-negative/V101-tx-byte-mismatch" }));
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["program"].as_str().unwrap(), source);
    assert_eq!(r["structuredContent"]["manifest"]["expect"]["verdict"], "reject", "{r}");
}

#[test]
fn bad_input_gets_coded_errors_and_the_session_goes_on() {
    let (mut c, _) = Client::start();

    // Arguments that do not fit the schema: a JSON-RPC invalid-params error with the code.
    for (tool, args) in [
        ("explain", json!({})),
        ("explain", json!({ "qury": "V101" })),
        ("check", json!({ "program": 42 })),
        ("cost", json!({ "path": "examples/gemm_bf16_ws.cake" })),
    ] {
        let r = c.request("tools/call", json!({ "name": tool, "arguments": args }));
        assert_eq!(r["error"]["code"], -32602, "{tool} {args}: {r}");
        assert_eq!(r["error"]["data"]["code"], "M004", "{r}");
        assert!(r["error"]["message"].as_str().unwrap().contains(tool), "{r}");
    }
    let r = c.request("tools/call", json!({ "name": "no_such_tool", "arguments": {} }));
    assert!(r["error"]["code"].is_i64(), "an unknown tool is a JSON-RPC error: {r}");

    // Input the tools refuse: a coded tool error with a help line.
    assert_eq!(c.refused("check", json!({}))["code"], "M004");
    assert_eq!(c.refused("check", json!({ "program": "x", "path": "y" }))["code"], "M004");
    let e = c.refused("check", json!({ "program": "kernel k target sm_90a\n\u{1b}[31m\n" }));
    assert_eq!(e["code"], "M002");
    assert!(e["notes"][0].as_str().unwrap().contains("line 2, column 1"), "{e}");
    assert_eq!(c.refused("check", json!({ "program": "#".repeat(300 * 1024) }))["code"], "M001");
    assert_eq!(c.refused("check", json!({ "path": "../../../etc/passwd" }))["code"], "M003");
    assert_eq!(c.refused("check", json!({ "path": "/etc/passwd" }))["code"], "M003");
    let e = c.refused("check", json!({ "path": "examples/no_such.cake" }));
    assert_eq!(e["code"], "E0001", "a missing file gets the CLI's code: {e}");
    assert_eq!(c.refused("check", json!({ "path": "examples" }))["code"], "E0001");
    assert_eq!(c.refused("cost", json!({ "path": "examples/gemm_bf16_ws.cake", "shape": "M=x" }))["code"], "C101");
    let e = c.refused("explain", json!({ "query": "V1O1" }));
    assert_eq!(e["code"], "M007");
    assert!(e["notes"][0].as_str().unwrap().contains("V101"), "did you mean: {e}");
    assert_eq!(c.refused("corpus_show", json!({ "id": "verifier-negative/no-such-case" }))["code"], "M007");
    let program = std::fs::read_to_string(root().join("examples/gemm_bf16_ws.cake")).unwrap();
    let e = c.refused("run", json!({ "program": program }));
    assert_eq!(e["code"], "M004", "an inline program needs its workload: {e}");
    assert_eq!(c.refused("run", json!({ "path": "examples/gemm_bf16_ws.cake", "dists": ["gaussian"] }))["code"], "M004");
    assert_eq!(c.refused("run", json!({ "path": "examples/gemm_bf16_ws.cake", "time_limit_s": 0 }))["code"], "M004");
    assert_eq!(c.refused("run", json!({ "path": "examples/gemm_bf16_ws.cake", "evidence": "/tmp/elsewhere" }))["code"], "M003");
    assert_eq!(c.refused("bench", json!({ "path": "examples/gemm_bf16_ws.cake", "baseline": "torch" }))["code"], "M004");
    // A shape `cake run` itself refuses (exit 2): M004, with its message as the note.
    let e = c.refused("run", json!({ "path": "examples/gemm_bf16_ws.cake", "shapes": ["M=abc"], "evidence": "target/mcp-test-unused" }));
    assert_eq!(e["code"], "M004");
    assert!(e["notes"][0].as_str().unwrap().contains("--shape M=abc"), "{e}");
    // A call past its time limit: the child's process group is killed, M005. (No `cake run`
    // gets through check, GPU probe and build within a millisecond.)
    let e = c.refused("run", json!({ "path": "examples/gemm_bf16_ws.cake", "time_limit_s": 0.001, "evidence": "target/mcp-test-unused" }));
    assert_eq!(e["code"], "M005", "{e}");
    // A program with errors does not run: its findings instead.
    let r = c.call("run", json!({ "path": "corpus/verifier-negative/V101-tx-byte-mismatch.cake", "workload_path": "examples/gemm_bf16_ws.workload.toml" }));
    assert_eq!(r["isError"], true);
    assert_eq!(r["structuredContent"]["status"], "findings", "{r}");
    assert_eq!(r["structuredContent"]["findings"][0]["code"], "V101", "{r}");

    // Lines that are not JSON-RPC: an error each, and the session reads on.
    c.send_line("this is not json");
    let r = c.answer(&Value::Null, ANSWER_TIMEOUT);
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert_eq!(r["error"]["data"]["code"], "M008", "{r}");
    c.send_line(r#"{"jsonrpc":"2.0","id":"odd","method":"no/such/method"}"#);
    let r = c.answer(&json!("odd"), ANSWER_TIMEOUT);
    assert_eq!(r["error"]["code"], -32600, "{r}");

    // Still alive: a check answers as before.
    let (path, code, _, _) = negative_case("V102-arrival-count-mismatch");
    let r = c.call("check", json!({ "path": path }));
    assert!(r["structuredContent"]["findings"].as_array().unwrap().iter().any(|f| f["code"] == code.as_str()), "{r}");
}

/// Whether `scripts/test.sh` found a GPU on this machine (it exports `CAKE_TEST_GPU`).
fn gpu_expected() -> bool {
    std::env::var("CAKE_TEST_GPU").is_ok_and(|v| v == "1")
}

/// `run` builds the program, then runs it in a child process: on a GPU the runs pass, without
/// one the answer is a clear skip (status `skipped`, `no GPU`), with the `no_gpu` records.
#[test]
fn needs_toolchain_run_skips_without_a_gpu_and_passes_on_one() {
    let (mut c, _) = Client::start();
    // The evidence directory must be inside the server's working directory (the repository).
    let repo = root().canonicalize().unwrap();
    std::fs::create_dir_all(repo.join("target")).unwrap();
    let evidence = tempfile::tempdir_in(repo.join("target")).unwrap();
    let ev = evidence.path().strip_prefix(&repo).unwrap().to_path_buf();
    let program = std::fs::read_to_string(root().join("examples/gemm_bf16_ws.cake")).unwrap();
    let workload = std::fs::read_to_string(root().join("examples/gemm_bf16_ws.workload.toml")).unwrap();
    let r = c.call_within(
        "run",
        json!({
            "program": program,
            "workload": workload,
            "shapes": ["M=128,N=256,K=64"],
            "dists": ["normal"],
            "evidence": ev.to_str().unwrap(),
            "time_limit_s": 240,
        }),
        RUN_TIMEOUT,
    );
    let v = &r["structuredContent"];
    assert_eq!(r["isError"], false, "{v}");
    assert_ne!(v["skipped"], "no CUDA toolchain", "this test needs the CUDA toolchain: {}", v["log"]);
    assert_eq!(v["runs"], 1, "{v}");
    let rec = &v["records"][0];
    assert_eq!(rec["schema"], "cake.run-record/1");
    assert_eq!(rec["program"]["name"], "gemm_bf16_ws");
    assert_eq!(rec["shape"]["M"], 128);
    // The record is the file the child wrote into the evidence directory.
    let files: Vec<_> = std::fs::read_dir(evidence.path().join("runs")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1);
    let on_disk: Value = serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_eq!(&on_disk, rec);
    assert!(rec["ptxas"].is_object(), "the program was built: {rec}");
    if gpu_expected() {
        assert_eq!(v["status"], "passed", "{v}");
        assert_eq!(v["verdicts"], json!(["pass"]));
    } else {
        assert_eq!(v["status"], "skipped", "{v}");
        assert_eq!(v["skipped"], "no GPU", "{v}");
        assert_eq!(v["exit"], 3);
        assert_eq!(rec["verdict"], "skipped");
        assert_eq!(rec["error"]["class"], "no_gpu", "{rec}");
    }
}

/// `build` compiles with NVRTC: the launch spec and ptxas report of the cubin.
#[test]
fn needs_toolchain_build_answers_the_ptxas_report() {
    let (mut c, _) = Client::start();
    let r = c.call("build", json!({ "path": "examples/softmax_bf16.cake" }));
    let v = &r["structuredContent"];
    assert_ne!(v["status"], "skipped", "this test needs the CUDA toolchain: {v}");
    assert_eq!(r["isError"], false, "{v}");
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["arch"], "sm_90a");
    assert!(v["cubin_bytes"].as_u64().is_some_and(|n| n > 0), "{v}");
    assert!(v["ptxas"]["registers"].as_u64().is_some_and(|n| n > 0), "{v}");
    assert!(v["launch"]["block_threads"].as_u64().is_some_and(|n| n > 0), "{v}");
}

/// Without NVRTC (here: `CAKE_NVRTC_LIB` names no file, on any machine) `build` and `run` are a
/// coded skip, not an error dressed as success, and not a failure of the program.
#[test]
fn without_the_toolchain_build_and_run_are_a_coded_skip() {
    let (mut c, _) = Client::start_with_env(&[("CAKE_NVRTC_LIB", "/nonexistent/libnvrtc.so.13")]);
    let r = c.call("build", json!({ "path": "examples/softmax_bf16.cake" }));
    let v = &r["structuredContent"];
    assert_eq!(v["status"], "skipped", "{v}");
    assert_eq!(v["skipped"], "no CUDA toolchain");
    assert_eq!(v["code"], "N001");
    assert!(v["finding"]["help"].as_str().is_some_and(|h| h.contains("CAKE_NVRTC_LIB")), "{v}");
    assert!(v.get("cubin_bytes").is_none(), "nothing was built: {v}");

    let repo = root().canonicalize().unwrap();
    std::fs::create_dir_all(repo.join("target")).unwrap();
    let evidence = tempfile::tempdir_in(repo.join("target")).unwrap();
    let ev = evidence.path().strip_prefix(&repo).unwrap().to_str().unwrap().to_string();
    let r = c.call_within(
        "run",
        json!({ "path": "examples/softmax_bf16.cake", "shapes": ["R=136"], "evidence": ev }),
        RUN_TIMEOUT,
    );
    let v = &r["structuredContent"];
    assert_eq!(r["isError"], false, "{v}");
    assert_eq!(v["status"], "skipped", "{v}");
    assert_eq!(v["skipped"], "no CUDA toolchain", "{v}");
    assert_eq!(v["code"], "N001");
    assert_eq!(v["records"][0]["error"]["class"], "build_N001", "{v}");
}
