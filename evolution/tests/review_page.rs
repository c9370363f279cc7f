//! `review`: the queue's pages, from a real proposal made from the bundled evidence. Written as
//! static HTML and served on 127.0.0.1 (GET only, every path checked), then loaded in headless
//! Chromium (`needs_chromium_*`: `scripts/test.sh` installs Debian's `chromium` when it can,
//! and leaves the test out, saying why, when it cannot): the content renders, and a screenshot is
//! written to `target/review-screenshot.png`.

#[path = "propose_fixture.rs"]
mod fixture;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cake_evolve::queue::{self, ProposeOptions};
use cake_evolve::review_page::{server, Site};
use cake_merge_gates::GateOptions;
use fixture::*;

/// A checkout with one rule proposal from the committed bundle, and its evidence store.
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf, queue::Record) {
    let tmp = tempfile::tempdir().unwrap();
    let repo_dir = tmp.path().join("repo");
    let evidence = tmp.path().join("evidence");
    make_repo(&repo_dir);
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("evidence/bundle"), &evidence, &[]);
    let mut o = ProposeOptions::new(&repo_dir, &evidence);
    o.gate = GateOptions::static_only();
    o.progress = false;
    o.quiet = true;
    o.llm = None;
    o.limit = Some(1);
    let s = queue::propose(&o).unwrap();
    let id = s.proposed().into_iter().next().unwrap_or_else(|| panic!("{:?}", s.outcomes));
    let (_, r) = queue::find(&repo_dir.join("proposals"), &id).unwrap();
    assert!(r.rule.is_some(), "the bundle's first proposal is a rule: {}", r.title);
    (tmp, repo_dir, evidence, r)
}

/// What every rendering of a rule proposal's page must hold.
fn assert_proposal_page(page: &str, r: &queue::Record) {
    let d = r.rule.as_ref().unwrap();
    assert!(page.contains(&format!("<h1 id=\"proposal-id\">{}</h1>", r.id)), "the id heads the page");
    assert!(page.contains("id=\"gates\"") && page.contains("<td>corpus</td>"), "the gate table");
    assert!(page.contains(&format!("cake-evolve-compiler accept {}", r.id)) && page.contains(&format!("cake-evolve-compiler reject {}", r.id)), "the commands to decide it");
    // The proposal's rule, run on the programs it was learned from, marks the failing lines.
    assert!(page.contains("<tr class=\"hit\">"), "a highlighted failing line");
    assert!(page.contains(&format!("<b>{}</b> line ", d.code)), "the finding of the proposal's rule, with its line");
    if !d.constants.is_empty() {
        assert!(page.contains("id=\"constants\""), "the constants with their sources");
    }
    // The facts the predicate reads, with their failing values and accepted ranges.
    assert!(page.contains("id=\"facts\""), "the values table");
    let failing: Vec<&str> = page.split("<td class=\"FAIL\">").skip(1).filter_map(|c| c.split('<').next()).collect();
    assert!(failing.iter().any(|c| c.starts_with(|ch: char| ch.is_ascii_digit())), "a failing program's fact value: {failing:?}");
    // The side-by-side diff of the rule file the proposal adds.
    assert!(page.contains(&d.rule_path()) && page.contains("class=\"ins\""), "the diff");
}

fn get(addr: std::net::SocketAddr, request: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn review_pages_static_and_served_show_the_proposal_and_refuse_what_is_not_a_page() {
    let (tmp, repo, evidence, r) = setup();
    // A committed calibration record too (its commits are not in this repository).
    let calibration = "c-6da83d6e";
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../proposals/{calibration}.toml"));
    std::fs::copy(&committed, repo.join(format!("proposals/{calibration}.toml"))).unwrap();
    let site = Site::new(&repo, Some(&evidence)).unwrap();
    let out = tmp.path().join("html");
    let files = site.write_static(&out).unwrap();
    assert_eq!(files.len(), 3, "{files:?}");
    let c = std::fs::read_to_string(out.join(format!("proposal/{calibration}.html"))).unwrap();
    // Its figures: accuracy before/after as bars, each fitted bench's error before against after.
    assert!(c.contains("<figure><svg") && c.contains("cost-model accuracy on") && c.contains("mean |log error| per fitted bench"), "the figures");
    let record = queue::load(&committed).unwrap();
    let fits = record.calibration.as_ref().unwrap().fits.len();
    assert_eq!(c.matches("<circle").count(), fits + 1, "a point per fitted bench and the legend's");
    assert!(c.contains("the diff is not shown") && c.contains("calibration run"), "what is missing is said; the measurements are listed");
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(index.contains(&format!("<a href=\"proposal/{id}.html\">{id}</a>", id = r.id)), "{index}");
    let page = std::fs::read_to_string(out.join("proposal").join(format!("{}.html", r.id))).unwrap();
    assert_proposal_page(&page, &r);
    // Evidence records come from the store, with their tool and class.
    assert!(page.contains("id=\"evidence\""), "the evidence records");

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let requests = 7;
    let served = std::thread::spawn(move || server::serve(&site, &listener, Some(requests)));
    let ok = get(addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(ok.starts_with("HTTP/1.1 200 OK") && ok.contains(&r.id), "{ok}");
    let p = get(addr, &format!("GET /proposal/{}.html HTTP/1.1\r\n\r\n", r.id));
    assert!(p.starts_with("HTTP/1.1 200 OK") && p.contains("Content-Security-Policy: default-src 'none'"), "{}", &p[..200.min(p.len())]);
    assert_proposal_page(&p, &r);
    for bad in ["/proposal/../../etc/passwd.html", "/proposal/r-0000000g.html", "/evidence/x"] {
        let resp = get(addr, &format!("GET {bad} HTTP/1.1\r\n\r\n"));
        assert!(resp.starts_with("HTTP/1.1 404"), "{bad}: {resp}");
    }
    // A request head past 8 KiB, even one endless line, is refused without reading it all.
    let long = get(addr, &format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(20_000)));
    assert!(long.starts_with("HTTP/1.1 431"), "{}", &long[..long.len().min(100)]);
    let post = get(addr, &format!("POST /proposal/{}.html HTTP/1.1\r\nContent-Length: 0\r\n\r\n", r.id));
    assert!(post.starts_with("HTTP/1.1 405") && post.contains("GET only"), "{post}");
    served.join().unwrap().unwrap();

    // The commands: `accept` prints the gate table it passed; `review --html` writes the pages,
    // the accepted proposal's now saying where it merged.
    let bin = env!("CARGO_BIN_EXE_cake-evolve-compiler");
    let accept = Command::new(bin).args(["accept", &r.id, "--tier", "static", "--repo"]).arg(&repo).output().unwrap();
    let said = String::from_utf8_lossy(&accept.stdout);
    assert!(accept.status.success(), "{said}{}", String::from_utf8_lossy(&accept.stderr));
    assert!(said.contains(&format!("accepted {}", r.id)) && said.lines().any(|l| l.contains("corpus") && l.contains("pass")), "the gate table: {said}");
    let html = tmp.path().join("html-cli");
    let review = Command::new(bin).args(["review", "--html"]).arg(&html).arg("--repo").arg(&repo).arg("--evidence").arg(&evidence).output().unwrap();
    assert!(review.status.success() && String::from_utf8_lossy(&review.stdout).contains("wrote 3 page(s)"), "{}", String::from_utf8_lossy(&review.stderr));
    let page = std::fs::read_to_string(html.join(format!("proposal/{}.html", r.id))).unwrap();
    assert!(page.contains("<h2>Review</h2>") && page.contains("merged as") && !page.contains("id=\"accept-cmd\""), "decided: no command to copy");
}

/// The headless browser: `$CAKE_CHROMIUM`, else `chromium` on the PATH.
fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("CAKE_CHROMIUM") {
        return PathBuf::from(p);
    }
    let found = std::env::var_os("PATH").and_then(|path| std::env::split_paths(&path).map(|d| d.join("chromium")).find(|p| p.is_file()));
    found.unwrap_or_else(|| panic!("needs_chromium_: no `chromium` on the PATH (scripts/test.sh installs it with apt-get, or leaves this test out when it cannot); set CAKE_CHROMIUM to another binary"))
}

/// Run headless Chromium with `args` after the common flags; its stdout.
fn run_chromium(profile: &Path, args: &[String]) -> String {
    let mut cmd = Command::new(chromium());
    // Root in a container has no user namespace for the sandbox; the page is our own, offline.
    cmd.args(["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--hide-scrollbars"]);
    cmd.arg(format!("--user-data-dir={}", profile.display()));
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", chromium().display()));
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            assert!(status.success(), "chromium {args:?} failed ({status}): {}", String::from_utf8_lossy(&out.stderr));
            return String::from_utf8_lossy(&out.stdout).into_owned();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium {args:?} did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The workspace's target folder (`CARGO_TARGET_DIR` when set).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

#[test]
fn needs_chromium_review_page_renders_in_headless_chromium_and_is_screenshotted() {
    let (tmp, repo, evidence, r) = setup();
    let site = Site::new(&repo, Some(&evidence)).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Served until the test ends (the thread is not joined).
    std::thread::spawn(move || server::serve(&site, &listener, None));
    let profile = tmp.path().join("chromium-profile");
    let url = format!("http://{addr}/proposal/{}.html", r.id);

    // What the browser built from the page: its DOM after parsing, as HTML.
    let dom = run_chromium(&profile, &["--dump-dom".into(), url.clone()]);
    assert_proposal_page(&dom, &r);
    let index = run_chromium(&profile, &["--dump-dom".into(), format!("http://{addr}/")]);
    assert!(index.contains(&format!(">{}</a>", r.id)), "the queue lists the proposal: {index}");

    let shot = target_dir().join("review-screenshot.png");
    let _ = std::fs::remove_file(&shot);
    std::fs::create_dir_all(shot.parent().unwrap()).unwrap();
    run_chromium(&profile, &[format!("--screenshot={}", shot.display()), "--window-size=1280,2000".into(), url]);
    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot at {}: {e}", shot.display()));
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let (w, h) = (u32::from_be_bytes(png[16..20].try_into().unwrap()), u32::from_be_bytes(png[20..24].try_into().unwrap()));
    assert_eq!((w, h), (1280, 2000), "the window size");
    // A blank 1280×2000 page compresses to a few KB; text, tables and a highlighted source do not.
    assert!(png.len() > 40_000, "the screenshot is {} bytes: nearly blank?", png.len());
    println!("review page screenshot: {} ({} bytes)", shot.display(), png.len());
}

/// The predicted-vs-measured figure of a calibration page: the cost model on both parameter files
/// of the diff over the runs it commits. The runs are the real H200 accuracy runs committed in
/// `calibration/runs/`; the "before" file is today's with the DRAM bandwidth halved (synthetic, so
/// that the two series differ).
#[test]
fn review_figures_draw_predicted_against_measured_time_before_and_after() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let record = queue::load(&root.join("proposals/c-6da83d6e.toml")).unwrap();
    let now = std::fs::read_to_string(root.join("calibration/sm_90a.toml")).unwrap();
    // Halve whatever value the file holds now (recalibrations move it).
    let key = "[param.dram_bytes_per_s]\nvalue = ";
    let at = now.find(key).expect("sm_90a.toml has dram_bytes_per_s") + key.len();
    let end = at + now[at..].find('\n').unwrap();
    let dram: f64 = now[at..end].trim().parse().expect("a number");
    let before = format!("{}{}{}", &now[..at], dram / 2.0, &now[end..]);
    assert_ne!(before, now, "the DRAM bandwidth parameter is where the test expects it");
    let run = std::fs::read(root.join("calibration/runs/sm_90a-226d53dcef6a.json")).unwrap();
    let diff = vec![
        cake_evolve::git::FileDiff { path: "calibration/sm_90a.toml".into(), change: cake_merge_gates::Change::Modified, old: Some(before.into_bytes()), new: Some(now.into_bytes()) },
        cake_evolve::git::FileDiff { path: "calibration/runs/sm_90a-226d53dcef6a.json".into(), change: cake_merge_gates::Change::Added, old: None, new: Some(run) },
    ];
    let figures = cake_evolve::review_page::figures::figures(&record, &diff);
    let (caption, svg) = &figures[0];
    assert!(caption.contains("predicted against measured"), "{caption}");
    assert!(svg.contains("predicted vs measured, 109 accuracy run(s)") && svg.contains("y = x"), "all 109 committed runs validate");
    // A point per run and calibration (before, after), and the two legend markers.
    assert_eq!(svg.matches("<circle").count(), 2 * 109 + 2);
    // Without runs in the diff there is nothing to draw, and the summary figures remain.
    let figures = cake_evolve::review_page::figures::figures(&record, &diff[..1]);
    assert_eq!(figures.len(), 1);
    assert!(figures[0].0.contains("accuracy before and after"), "{}", figures[0].0);
}
