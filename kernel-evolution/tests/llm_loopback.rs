//! The LLM proposer against a local OpenAI-compatible responder on 127.0.0.1 (no network): its
//! program becomes a candidate judged like any other, every call is recorded so resume and replay
//! do not ask again, and an endpoint that times out or answers without a program costs a recorded
//! error, never the run.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cake_evolve_kernel::db::Db;
use support::*;

/// Serve chat completions answering `answer` (or never answering, when `None`); returns the base
/// URL and the request bodies seen.
fn responder(answer: Option<String>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    std::thread::spawn(move || {
        for sock in listener.incoming() {
            let Ok(mut sock) = sock else { continue };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 8192];
            let body = loop {
                let n = sock.read(&mut chunk).unwrap_or(0);
                if n == 0 {
                    break String::new();
                }
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf).into_owned();
                if let Some(i) = text.find("\r\n\r\n") {
                    let len: usize = text[..i].lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())).unwrap_or(0);
                    if buf.len() >= i + 4 + len {
                        break String::from_utf8_lossy(&buf[i + 4..i + 4 + len]).into_owned();
                    }
                }
            };
            seen2.lock().unwrap().push(body);
            let Some(answer) = &answer else {
                // A hung endpoint: hold the connection past the client's limit.
                std::thread::sleep(Duration::from_secs(5));
                continue;
            };
            let resp = serde_json::json!({
                "choices": [{ "index": 0, "message": { "role": "assistant", "content": answer } }],
                "usage": { "total_tokens": 1234 },
            })
            .to_string();
            let http = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{resp}", resp.len());
            let _ = sock.write_all(http.as_bytes());
        }
    });
    (format!("http://127.0.0.1:{port}/v1"), seen)
}

/// The kmeans contract with an LLM token budget, its paths made absolute.
fn contract_with_llm(dir: &Path, tokens: u64) -> PathBuf {
    let src = contract("kmeans-assign.toml");
    let base = src.parent().unwrap();
    let text = std::fs::read_to_string(&src)
        .unwrap()
        .replace("llm_tokens = 0", &format!("llm_tokens = {tokens}"))
        .replace("\"../seeds/", &format!("\"{}/", base.join("../seeds").display()))
        .replace("\"../tactics\"", &format!("\"{}\"", base.join("../tactics").display()));
    let path = dir.join("kmeans-llm.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn kevo_with(dir: &Path, base: Option<&str>, args: &[&str]) -> std::process::Output {
    let (fake, _) = fake_cake(dir, "0");
    let mut c = Command::new(kevo());
    c.args(args).env("CAKE_BIN", fake).env("CAKE_LLM_TIMEOUT_S", "1").current_dir(dir).env_remove("CAKE_LLM_BASE_URL");
    if let Some(b) = base {
        c.env("CAKE_LLM_BASE_URL", b);
    }
    c.output().unwrap()
}

#[test]
fn the_llms_program_is_a_candidate_and_its_call_is_never_repeated() {
    let tmp = tempfile::tempdir().unwrap();
    let tuned = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/kmeans_assign.cake")).unwrap();
    let (base, seen) = responder(Some(format!("Here is a faster schedule:\n```cake\n{tuned}```\n")));
    let c = contract_with_llm(tmp.path(), 2000);
    let c = c.to_str().unwrap();
    let out = kevo_with(tmp.path(), Some(&base), &["run", c, "--db", "k.sqlite", "--seed", "1", "--budget-evals", "6", "--evidence", "ev", "--format", "json"]);
    let summary = json(&out);
    assert_eq!(out.status.code(), Some(3), "{summary}\n{}", stderr(&out));
    // 2000 tokens at 1234 a call: two calls, then the budget is spent.
    assert_eq!(summary["llm"]["calls"], 2, "{summary}");
    assert_eq!(summary["llm"]["tokens"], 2468);
    let bodies = seen.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2);
    assert!(bodies[0].contains("Contract `kmeans-assign`") && bodies[0].contains("const WG = 1"), "the prompt holds the contract and the parent");

    let d = Db::open_existing(&tmp.path().join("k.sqlite")).unwrap();
    let cands = d.candidates().unwrap();
    let llm: Vec<_> = cands.iter().filter(|r| r.tactic == "llm").collect();
    assert_eq!(llm.len(), 1, "the second answer is the same program: a duplicate, not a candidate");
    assert_eq!(llm[0].gate, "passed");
    assert_eq!(llm[0].parents, vec![0]);
    let calls = d.llm_calls().unwrap();
    assert_eq!(calls.iter().map(|c| c.outcome.as_str()).collect::<Vec<_>>(), vec!["candidate", "duplicate"]);
    // The tuned schedule is the cost model's best: it went to the GPU stage.
    assert!(d.evaluations().unwrap().iter().any(|e| e.seq == llm[0].seq));
    drop(d);

    // Replay and resume take the recorded answers: the endpoint is not asked again.
    let replay = json(&kevo_with(tmp.path(), Some(&base), &["run", c, "--db", "k.sqlite", "--replay", "--format", "json"]));
    assert_eq!(replay["order"], summary["order"]);
    let resumed = json(&kevo_with(tmp.path(), Some(&base), &["resume", c, "--db", "k.sqlite", "--format", "json"]));
    assert_eq!(resumed["order"], summary["order"]);
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[test]
fn an_endpoint_that_times_out_or_answers_no_program_is_a_recorded_error() {
    let tmp = tempfile::tempdir().unwrap();
    let c = contract_with_llm(tmp.path(), 1_000_000);
    let c = c.to_str().unwrap();
    let (hung, _) = responder(None);
    let out = kevo_with(tmp.path(), Some(&hung), &["run", c, "--db", "h.sqlite", "--seed", "1", "--budget-evals", "3", "--evidence", "ev", "--format", "json"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let d = Db::open_existing(&tmp.path().join("h.sqlite")).unwrap();
    let calls = d.llm_calls().unwrap();
    assert!(!calls.is_empty());
    // A hung endpoint is the client's coded timeout (H003).
    assert!(calls.iter().all(|c| c.outcome == "error" && c.message.contains("H003")), "{:?}", calls.iter().map(|c| &c.message).collect::<Vec<_>>());
    assert!(calls.iter().all(|c| c.tokens > 0), "a prompt sent is charged");
    assert_eq!(d.evaluations().unwrap().len(), 3, "the search went on without it");

    let (chatty, _) = responder(Some("I would rather not write code today.".into()));
    let out = kevo_with(tmp.path(), Some(&chatty), &["run", c, "--db", "n.sqlite", "--seed", "1", "--budget-evals", "3", "--evidence", "ev"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let calls = Db::open_existing(&tmp.path().join("n.sqlite")).unwrap().llm_calls().unwrap();
    assert!(calls.iter().all(|c| c.outcome == "error" && c.message.contains("no Cake IR program")));

    // Without the endpoint the proposer is off, and says why.
    let out = kevo_with(tmp.path(), None, &["run", c, "--db", "o.sqlite", "--seed", "1", "--budget-evals", "1", "--evidence", "ev", "--format", "json"]);
    assert!(json(&out)["llm"]["note"].as_str().unwrap().contains("CAKE_LLM_BASE_URL is not set"));
}
