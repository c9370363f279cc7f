//! The LLM path, against a local OpenAI-compatible responder on 127.0.0.1 (no network), and
//! primitive proposals with and without drafts: an op that recurring programs call but the
//! catalog lacks becomes a catalog entry on a branch; it is queued either way, and its gates fail
//! saying what is missing (no hardware note or lowering without the LLM; with it, the drafted
//! lowering is Rust, which the data-only gates cannot build).

#[path = "propose_fixture.rs"]
mod fixture;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cake_evolve::llm::{self, LlmConfig};
use cake_evolve::queue::{self, Kind, ProposeOptions, Status};
use cake_evolve::store::{EvidenceStore, FailureReport, SpanKind, SpanRef, Stage};
use cake_merge_gates::{GateOptions, GateStatus};
use fixture::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the responder saw: (request line, headers, body) per request.
type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

/// Serve up to `max` requests on 127.0.0.1 with `answer` as the assistant's content; returns
/// the base URL and what was seen. Bounded: the server stops after `max` requests or 60 s.
fn responder(answer: &'static str, max: usize) -> (String, Seen) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let seen2 = seen.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap().port()).unwrap();
            let serve = async {
                for _ in 0..max {
                    let (mut sock, _) = listener.accept().await.unwrap();
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    // Headers, then Content-Length bytes of body.
                    let (head, body) = loop {
                        let n = sock.read(&mut chunk).await.unwrap();
                        if n == 0 {
                            break (String::from_utf8_lossy(&buf).into_owned(), String::new());
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        let text = String::from_utf8_lossy(&buf).into_owned();
                        if let Some(i) = text.find("\r\n\r\n") {
                            let head = text[..i].to_string();
                            let len: usize = head.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())).unwrap_or(0);
                            while buf.len() < i + 4 + len {
                                let n = sock.read(&mut chunk).await.unwrap();
                                if n == 0 {
                                    break;
                                }
                                buf.extend_from_slice(&chunk[..n]);
                            }
                            let body = String::from_utf8_lossy(&buf[i + 4..]).into_owned();
                            break (head, body);
                        }
                    };
                    let first = head.lines().next().unwrap_or("").to_string();
                    seen2.lock().unwrap().push((first, head.clone(), body));
                    let resp = serde_json::json!({
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "choices": [{ "index": 0, "message": { "role": "assistant", "content": answer }, "finish_reason": "stop" }],
                    })
                    .to_string();
                    let http = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{resp}", resp.len());
                    sock.write_all(http.as_bytes()).await.unwrap();
                    sock.shutdown().await.ok();
                }
            };
            let _ = tokio::time::timeout(Duration::from_secs(60), serve).await;
        });
    });
    let port = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    (format!("http://127.0.0.1:{port}/v1"), seen)
}

const ANSWER: &str = "```json\n{\"hardware\": \"Prefetches a global tile into L2 with cp.async.bulk.prefetch.tensor (PTX ISA 8.0, Data Movement: cp.async.bulk.prefetch.tensor); no shared memory is written and no mbarrier completes.\", \"lowering\": \"cp.async.bulk.prefetch.tensor.2d.L2.global.tile [tmap, {x, y}] from one elected thread\", \"rust\": \"fn prefetch_l2(&mut self, src: ExprId, span: Span) -> Result<(), LowerError> { todo!() }\"}\n```";

fn cfg(base: &str) -> LlmConfig {
    LlmConfig { base_url: base.to_string(), model: "test-model".into(), api_key: Some("secret-test-key".into()), timeout: Duration::from_secs(20), max_body: llm::MAX_BODY_BYTES }
}

/// Answer one request on 127.0.0.1 with `http` (the raw bytes of a response, written after
/// `delay`), then close: for error answers. Returns the base URL.
fn raw_responder(http: Vec<u8>, delay: Duration) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let Ok((mut sock, _)) = listener.accept() else { return };
        sock.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        // The request (headers and body) arrives at once from reqwest; read what is there.
        let mut buf = [0u8; 65536];
        let _ = sock.read(&mut buf);
        std::thread::sleep(delay);
        let _ = sock.write_all(&http);
    });
    format!("http://127.0.0.1:{port}/v1")
}

#[test]
fn the_client_speaks_openai_chat_completions_on_loopback() {
    let (base, seen) = responder(ANSWER, 1);
    let d = llm::draft(&cfg(&base), "prefetch_l2", "[[op]]\nname = \"prefetch_l2\"", &["prefetch_l2(A[0 :+ 128, 0 :+ 64])".into()]).unwrap();
    assert!(d.hardware.contains("cp.async.bulk.prefetch.tensor"));
    assert!(d.lowering.starts_with("cp.async.bulk.prefetch"));
    assert!(d.rust.contains("fn prefetch_l2"));
    let seen = seen.lock().unwrap();
    let (line, head, body) = &seen[0];
    assert_eq!(line, "POST /v1/chat/completions HTTP/1.1");
    assert!(head.to_ascii_lowercase().contains("authorization: bearer secret-test-key"), "{head}");
    let req: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(req["model"], "test-model");
    assert_eq!(req["messages"][1]["role"], "user");
    assert!(req["messages"][1]["content"].as_str().unwrap().contains("prefetch_l2"));
}

#[test]
fn an_unreachable_endpoint_is_an_error_not_a_hang() {
    // A port nobody listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let e = llm::draft(&cfg(&format!("http://127.0.0.1:{port}/v1")), "x", "", &[]).unwrap_err();
    assert_eq!(e.code, "H002", "{e}");
    assert!(e.to_string().contains("request to"), "{e}");
}

#[test]
fn an_http_error_status_is_coded_with_the_start_of_its_body() {
    let body = format!("model overloaded: retry later{}", " padding".repeat(200));
    let http = format!("HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
    let e = llm::chat(&cfg(&raw_responder(http.into_bytes(), Duration::ZERO)), "s", "u").unwrap_err();
    assert_eq!(e.code, "H004", "{e}");
    assert!(e.message.contains("503") && e.message.contains("model overloaded: retry later"), "{e}");
    assert!(e.message.len() < 1000, "the body is quoted, not pasted whole: {e}");
}

#[test]
fn no_answer_within_the_time_limit_is_a_timeout() {
    let mut c = cfg(&raw_responder(Vec::new(), Duration::from_secs(5)));
    c.timeout = Duration::from_secs(1);
    let t0 = std::time::Instant::now();
    let e = llm::chat(&c, "s", "u").unwrap_err();
    assert_eq!(e.code, "H003", "{e}");
    assert!(e.message.contains("within 1 s"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(4), "it gave up at the limit: {:?}", t0.elapsed());
}

#[test]
fn an_answer_past_the_read_limit_is_refused() {
    // No content-length: the body is read in chunks until the connection closes.
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(64 * 1024));
    let http = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{big}");
    let mut c = cfg(&raw_responder(http.into_bytes(), Duration::ZERO));
    c.max_body = 4096;
    let e = llm::chat(&c, "s", "u").unwrap_err();
    assert_eq!(e.code, "H005", "{e}");
    // A declared length past the limit is refused before the body is read.
    let http = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 3000000000\r\nconnection: close\r\n\r\n{}".to_string();
    let mut c = cfg(&raw_responder(http.into_bytes(), Duration::ZERO));
    c.max_body = 4096;
    assert_eq!(llm::chat(&c, "s", "u").unwrap_err().code, "H005");
}

#[test]
fn an_answer_that_is_not_json_is_coded() {
    let http = "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 13\r\nconnection: close\r\n\r\n<html></html>".to_string();
    let e = llm::chat(&cfg(&raw_responder(http.into_bytes(), Duration::ZERO)), "s", "u").unwrap_err();
    assert_eq!(e.code, "H006", "{e}");
    assert!(e.message.contains("<html></html>"), "{e}");
}

/// Evidence: corpus programs that call `prefetch_l2`, which the catalog lacks; the type checker
/// rejects each with E0301, recorded as a verify-stage failure.
fn unknown_op_evidence(repo_dir: &std::path::Path, store_dir: &std::path::Path) -> usize {
    let corpus = cake::corpus::Corpus::load(repo_dir.join("corpus")).unwrap();
    let store = EvidenceStore::open(store_dir).unwrap();
    let mut n = 0;
    for case in corpus.cases.iter().filter(|c| c.family == "gemm-sm90-ws" && c.manifest.expect.verdict == cake::corpus::Verdict::Accept).take(3) {
        let Some(line) = case.source.lines().find(|l| l.trim() == "acquire(ab)") else { continue };
        let indent = &line[..line.len() - line.trim_start().len()];
        let src = case.source.replacen(line, &format!("{line}\n{indent}prefetch_l2(A[t.m * 128 :+ 128, kb * 64 :+ 64])"), 1);
        let out = cake::check::check_source(&src);
        let d = out.diagnostics.iter().find(|d| d.code == "E0301").expect("E0301 for the unknown op");
        let stored = store.put_program(&src).unwrap();
        let canon = store.program(&stored.sha256).unwrap().unwrap();
        let l = canon.lines().position(|x| x.contains("prefetch_l2(")).unwrap() as u32 + 1;
        let mut r = FailureReport::new(&stored.sha256, case.manifest.target.clone(), Stage::Verify, "cake", d.code.clone(), d.message.clone());
        r.span = Some(SpanRef { kind: SpanKind::Cake, line: l, col: None, file: None });
        store.append(r).unwrap();
        n += 1;
    }
    n
}

fn propose_primitive(llm: Option<LlmConfig>) -> (tempfile::TempDir, queue::Record) {
    let tmp = tempfile::tempdir().unwrap();
    let repo_dir = tmp.path().join("repo");
    let evidence = tmp.path().join("evidence");
    make_repo(&repo_dir);
    assert!(unknown_op_evidence(&repo_dir, &evidence) >= 2);
    let mut o = ProposeOptions::new(&repo_dir, &evidence);
    o.gate = GateOptions::static_only();
    o.progress = false;
    o.quiet = true;
    o.llm = llm;
    let s = queue::propose(&o).unwrap();
    let recs = queue::load_all(&repo_dir.join("proposals")).unwrap();
    let p = recs.into_iter().find(|r| r.kind == Kind::Primitive).unwrap_or_else(|| panic!("a primitive proposal: {:?}", s.outcomes));
    (tmp, p)
}

#[test]
fn a_primitive_without_llm_is_queued_and_its_gates_say_what_is_missing() {
    let (_tmp, p) = propose_primitive(None);
    assert_eq!(p.status, Status::Queued);
    assert!(p.branch.starts_with("evolve/primitive/") && p.branch.ends_with("prefetch-l2"), "{}", p.branch);
    let d = p.primitive.as_ref().unwrap();
    assert_eq!(d.op, "prefetch_l2");
    assert_eq!(d.form, "stmt");
    assert_eq!(d.class, "memory");
    assert!(d.entry.contains("kind = \"global\""), "{}", d.entry);
    assert_eq!(p.gates_passed, Some(false));
    let gate = |g: &str| p.gates.iter().find(|x| x.gate == g).unwrap().clone();
    assert_eq!(gate("P8").status, GateStatus::Fail);
    assert!(gate("P8").details.join(" ").contains("prefetch_l2"), "{:?}", gate("P8"));
    assert_eq!(gate("lowering").status, GateStatus::Fail);
    assert!(gate("lowering").details.join(" ").contains("no lowering could be produced"), "{:?}", gate("lowering"));
    assert_eq!(gate("schema").status, GateStatus::Fail, "the catalog loader refuses an entry without hardware note");
    assert!(p.notes.iter().any(|n| n.contains("no LLM configured")), "{:?}", p.notes);
}

#[test]
fn a_primitive_with_an_llm_draft_commits_it_and_fails_the_build_gates() {
    let (base, seen) = responder(ANSWER, 4);
    let (tmp, p) = propose_primitive(Some(cfg(&base)));
    assert!(!seen.lock().unwrap().is_empty(), "the LLM was asked");
    let d = p.primitive.as_ref().unwrap();
    assert!(d.hardware.as_deref().unwrap_or("").contains("cp.async.bulk.prefetch.tensor"));
    assert!(d.missing.is_empty(), "{:?}", d.missing);
    assert_eq!(p.status, Status::Queued);
    assert_eq!(p.gates_passed, Some(false));
    let gate = |g: &str| p.gates.iter().find(|x| x.gate == g).unwrap().clone();
    // The catalog entry is complete now (loads; P4, P5, P8 hold) ...
    assert_eq!(gate("schema").status, GateStatus::Pass, "{:?}", gate("schema"));
    assert_eq!(gate("P8").status, GateStatus::Pass);
    assert_eq!(gate("P1").status, GateStatus::Flag);
    // ... but the drafted lowering is Rust, which the data-only gates cannot build.
    assert_eq!(gate("data-only").status, GateStatus::Fail);
    assert!(gate("data-only").details.join(" ").contains("compiler/src/lower/evolved/prefetch_l2.rs"), "{:?}", gate("data-only"));
    assert_eq!(gate("lowering").status, GateStatus::Fail);
    assert!(gate("lowering").details.join(" ").contains("not supported yet"), "{:?}", gate("lowering"));
    assert!(gate("corpus").summary.contains("not run"), "{:?}", gate("corpus"));
    let repo = git2::Repository::open(tmp.path().join("repo")).unwrap();
    let head = cake_evolve::git::branch_target(&repo, &p.branch).unwrap();
    let rust = cake_evolve::git::read_text(&repo, head, "compiler/src/lower/evolved/prefetch_l2.rs").unwrap().unwrap();
    assert!(rust.contains("drafted by an LLM") && rust.contains("fn prefetch_l2"));
}

const ANALYSIS_ANSWER: &str = "{\"doc\": \"the input the activation of a gated elementwise graph is applied to\", \"rust\": \"pub fn gated_input(m: &cake::ir::Module) -> cake::pred::Value { cake::pred::Value::Unknown }\"}";

#[test]
fn a_fact_proposal_with_an_llm_draft_commits_it_for_review() {
    // A bucket no predicate separates (propose_analysis.rs has it without an LLM): with one
    // configured, the analysis is drafted and committed beside the skeleton, and still fails.
    let (base, seen) = responder(ANALYSIS_ANSWER, 2);
    let tmp = tempfile::tempdir().unwrap();
    let repo_dir = tmp.path().join("repo");
    let evidence = tmp.path().join("evidence");
    make_repo(&repo_dir);
    unexpressible_evidence(&repo_dir, &evidence);
    let mut o = ProposeOptions::new(&repo_dir, &evidence);
    o.gate = GateOptions::static_only();
    o.progress = false;
    o.quiet = true;
    o.llm = Some(cfg(&base));
    let s = queue::propose(&o).unwrap();
    let a = queue::load_all(&repo_dir.join("proposals")).unwrap().into_iter().find(|r| r.kind == Kind::Analysis).unwrap_or_else(|| panic!("a proposal for a fact: {:?}", s.outcomes));
    let asked = seen.lock().unwrap();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].2.contains("no predicate over today") || asked[0].2.contains("No fact of"), "{}", asked[0].2);
    let d = a.analysis.as_ref().unwrap();
    assert!(a.notes.iter().any(|n| n.contains("analysis drafted by the LLM")), "{:?}", a.notes);
    let repo = git2::Repository::open(&repo_dir).unwrap();
    let head = cake_evolve::git::branch_target(&repo, &a.branch).unwrap();
    let drafted = cake_evolve::git::read_text(&repo, head, &format!("compiler/src/verify/evolved/{}-llm.rs", d.fact)).unwrap().unwrap();
    assert!(drafted.contains("drafted by an LLM") && drafted.contains("fn gated_input"), "{drafted}");
    assert_eq!(a.gates.iter().find(|g| g.gate == "analysis").unwrap().status, GateStatus::Fail);
    assert_eq!(a.status, Status::Queued);
}
