//! The review pages as HTML: the queue (index) and one page per proposal. Every value from a
//! record, the evidence or a diff goes through [`esc`]; the only markup not built here is the SVG
//! of `cake-plot`, which escapes its own text.

use std::fmt::Write as _;

use cake_merge_gates::generalization_gate::Source;
use cake_merge_gates::GateStatus;
use similar::{DiffTag, TextDiff};

use crate::queue::{Record, Status};
use crate::synth;

use super::evidence::{Evidence, Marked};
use super::values::FactValues;

/// HTML-escaped text, with control characters other than newline and tab dropped (a crafted
/// record cannot hide markup or terminal sequences in it).
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;max-width:1240px}table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}\
th{background:#f3f3f3}.pass{color:#1a7f37}.FAIL{color:#cf222e;font-weight:bold}.flag{color:#9a6700}code,pre,.src td{font-family:monospace;font-size:12px}\
pre{background:#f6f8fa;padding:6px;overflow-x:auto}.diff td{border:none;white-space:pre-wrap;word-break:break-all}.diff .n{color:#888;text-align:right;width:3em}\
.del{background:#ffebe9}.ins{background:#dafbe1}.src td{border:none;white-space:pre}.src .n{color:#888;text-align:right}tr.hit{background:#fff2a8}tr.hit td.n{color:#cf222e;font-weight:bold}\
.cmd{background:#eef;padding:6px;font-family:monospace}";

fn page(title: &str, body: &str) -> String {
    format!("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head>\n<body>\n{body}</body></html>\n", esc(title))
}

fn gates_word(r: &Record) -> &'static str {
    match r.gates_passed {
        Some(true) => "pass",
        Some(false) => "FAIL",
        None => "-",
    }
}

/// The queue: one row per proposal, linking its page.
pub fn index(records: &[Record], warnings: &[String]) -> String {
    let mut b = String::new();
    let _ = writeln!(b, "<h1>Proposal queue</h1>");
    if records.is_empty() {
        let _ = writeln!(b, "<p>The queue is empty: run <code>cake-evolve-compiler propose</code>.</p>");
    } else {
        let _ = writeln!(b, "<table id=\"queue\"><tr><th>id</th><th>kind</th><th>status</th><th>gates</th><th>title</th><th>branch</th></tr>");
        for r in records {
            let g = gates_word(r);
            let _ = writeln!(
                b,
                "<tr><td><a href=\"proposal/{id}.html\">{id}</a></td><td>{}</td><td>{}</td><td class=\"{g}\">{g}</td><td>{}</td><td><code>{}</code></td></tr>",
                r.kind.as_str(),
                r.status.as_str(),
                esc(&r.title),
                esc(&r.branch),
                id = esc(&r.id)
            );
        }
        let _ = writeln!(b, "</table>");
    }
    for w in warnings {
        let _ = writeln!(b, "<p class=\"flag\">warning: {}</p>", esc(w));
    }
    let _ = writeln!(b, "<p>Accept and reject are commands: <code>cake-evolve-compiler accept ID</code>, <code>cake-evolve-compiler reject ID --why TEXT</code>.</p>");
    page("Cake proposal queue", &b)
}

/// What a proposal page shows besides the record: its diff and evidence, gathered by the caller.
pub struct Extras<'a> {
    pub diff: &'a [crate::git::FileDiff],
    pub evidence: &'a Evidence,
    /// SVG figures (already drawn) with a caption each.
    pub plots: &'a [(String, String)],
    /// For a rule: the values of the facts it reads.
    pub facts: Option<&'a FactValues>,
}

/// One proposal: what it is, the command to decide it, the gate table, what was synthesized, the
/// evidence with the failing lines marked, and the side-by-side diff.
pub fn proposal(r: &Record, x: &Extras<'_>) -> String {
    let mut b = String::new();
    let _ = writeln!(b, "<p><a href=\"../index.html\">← queue</a></p>");
    let _ = writeln!(b, "<h1 id=\"proposal-id\">{}</h1>\n<h2>{}</h2>", esc(&r.id), esc(&r.title));
    let _ = writeln!(
        b,
        "<table><tr><th>kind</th><td>{}</td></tr><tr><th>status</th><td>{}</td></tr><tr><th>branch</th><td><code>{}</code></td></tr><tr><th>commit</th><td><code>{}</code> (base <code>{}</code>)</td></tr></table>",
        r.kind.as_str(),
        r.status.as_str(),
        esc(&r.branch),
        esc(&r.commit),
        esc(synth::short(&r.base))
    );
    decide(&mut b, r);
    gates(&mut b, r);
    if let Some(d) = &r.rule {
        let _ = writeln!(b, "<h2>Rule {} <code>{}</code></h2>", esc(&d.code), esc(&d.name));
        let _ = writeln!(b, "<table><tr><th>category</th><td>{}</td></tr><tr><th>applies to</th><td><code>{}</code></td></tr>", esc(&d.category), esc(&d.applies_to));
        if let Some(w) = &d.when {
            let _ = writeln!(b, "<tr><th>when</th><td><code>{}</code></td></tr>", esc(w));
        }
        let _ = writeln!(b, "<tr><th>require</th><td><code>{}</code> ({} form, level {})</td></tr>", esc(&d.require), esc(&d.form), d.level);
        let _ = writeln!(
            b,
            "<tr><th>separates</th><td>{} failing program(s) violate it; all {} instance(s) in {} accepted corpus program(s) satisfy it</td></tr></table>",
            d.failing_programs.len(),
            d.accepted_instances,
            d.accepted_programs
        );
        facts(&mut b, x.facts);
        constants(&mut b, d);
    }
    if let Some(p) = &r.primitive {
        let _ = writeln!(b, "<h2>Primitive <code>{}</code></h2><p>{} op, {}, from {} call site(s) in {} program(s)</p><ul>", esc(&p.op), esc(&p.class), esc(&p.form), p.call_sites, p.programs);
        for m in &p.missing {
            let _ = writeln!(b, "<li>missing: {}</li>", esc(m));
        }
        let _ = writeln!(b, "</ul>");
    }
    if let Some(c) = &r.calibration {
        let _ = writeln!(b, "<h2>Calibration of {}</h2><p>{}</p>", esc(&c.target), esc(&c.class));
        let _ = writeln!(b, "<table><tr><th></th><th>Spearman</th><th>MAPE</th><th>top-{} recall</th><th>n</th></tr>", c.after.k);
        for (what, a) in [("before", &c.before), ("after", &c.after)] {
            let _ = writeln!(b, "<tr><th>{what}</th><td>{:.3}</td><td>{:.1}%</td><td>{:.2}</td><td>{}</td></tr>", a.spearman, a.mape, a.top_k_recall, a.n);
        }
        let _ = writeln!(b, "</table><ul>");
        for p in &c.params {
            let _ = writeln!(b, "<li><code>{}</code></li>", esc(p));
        }
        let _ = writeln!(b, "</ul>");
        if !c.fits.is_empty() {
            let _ = writeln!(b, "<table><tr><th>parameter</th><th>bench</th><th>runs</th><th>before</th><th>after</th><th>mean |log error| before → after</th></tr>");
            for f in &c.fits {
                let _ = writeln!(
                    b,
                    "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3} → {:.3}{}</td></tr>",
                    esc(&f.param),
                    esc(&f.bench),
                    f.runs,
                    f.before,
                    f.after,
                    f.log_error_before,
                    f.log_error_after,
                    if f.at_bound { " (at the search bound)" } else { "" }
                );
            }
            let _ = writeln!(b, "</table>");
        }
    }
    for (caption, svg) in x.plots {
        let _ = writeln!(b, "<figure>{svg}<figcaption>{}</figcaption></figure>", esc(caption));
    }
    evidence(&mut b, r, x.evidence);
    if !r.notes.is_empty() {
        let _ = writeln!(b, "<h2>Notes</h2><ul>");
        for n in &r.notes {
            let _ = writeln!(b, "<li>{}</li>", esc(n));
        }
        let _ = writeln!(b, "</ul>");
    }
    diff(&mut b, x.diff);
    page(&format!("{} — {}", r.id, r.title), &b)
}

fn decide(b: &mut String, r: &Record) {
    match (&r.status, &r.review) {
        (Status::Queued, _) => {
            let _ = writeln!(b, "<h2>Decide</h2><p>Accepting re-runs the gates on current main and merges only if they pass.</p>");
            let _ = writeln!(b, "<p class=\"cmd\" id=\"accept-cmd\">cake-evolve-compiler accept {} --note &quot;…&quot;</p>", esc(&r.id));
            let _ = writeln!(b, "<p class=\"cmd\" id=\"reject-cmd\">cake-evolve-compiler reject {} --why &quot;…&quot;</p>", esc(&r.id));
        }
        (_, Some(v)) => {
            let _ = writeln!(b, "<h2>Review</h2><p>{}: {}{}</p>", v.action.as_str(), esc(&v.note), v.merged.as_ref().map(|m| format!(" — merged as <code>{}</code> ({})", esc(m), esc(v.how.as_deref().unwrap_or("")))).unwrap_or_default());
        }
        _ => {}
    }
}

fn gates(b: &mut String, r: &Record) {
    let _ = writeln!(b, "<h2>Gates</h2>");
    if r.gates.is_empty() {
        let _ = writeln!(b, "<p>(not run)</p>");
        return;
    }
    let _ = writeln!(b, "<table id=\"gates\"><tr><th>gate</th><th>checks</th><th>status</th><th>summary</th></tr>");
    for g in &r.gates {
        let s = g.status.as_str();
        let details = if g.details.is_empty() || g.status == GateStatus::Pass {
            String::new()
        } else {
            format!("<ul>{}</ul>", g.details.iter().map(|d| format!("<li>{}</li>", esc(d))).collect::<String>())
        };
        let _ = writeln!(b, "<tr><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}{details}</td></tr>", esc(&g.gate), esc(&g.title), esc(s), esc(s), esc(&g.summary));
    }
    let _ = writeln!(b, "</table>");
}

/// The facts the rule reads: their values on each instance where it fires in the failing
/// programs shown, and their range over the accepted corpus.
fn facts(b: &mut String, v: Option<&FactValues>) {
    let Some(v) = v.filter(|v| !v.facts.is_empty()) else { return };
    let _ = writeln!(b, "<h3>Values</h3><table id=\"facts\"><tr><th></th>{}</tr>", v.facts.iter().map(|f| format!("<th><code>{}</code></th>", esc(f))).collect::<String>());
    for (who, vals) in &v.failing {
        let _ = writeln!(b, "<tr><th>fails: {}</th>{}</tr>", esc(who), vals.iter().map(|x| format!("<td class=\"FAIL\">{}</td>", esc(x))).collect::<String>());
    }
    let range = |r: &Option<(i64, i64)>| r.map_or("—".to_string(), |(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo} … {hi}") });
    let _ = writeln!(b, "<tr><th>accepted: {} corpus instance(s)</th>{}</tr></table>", v.accepted_instances, v.accepted.iter().map(|r| format!("<td class=\"pass\">{}</td>", esc(&range(r)))).collect::<String>());
}

/// Each constant of the rule beside the values that bound it: for a fitted one, the largest
/// passing and the smallest failing value the labelled variants showed.
fn constants(b: &mut String, d: &synth::rule::RuleDraft) {
    if d.constants.is_empty() {
        return;
    }
    let _ = writeln!(b, "<h3>Constants</h3><table id=\"constants\"><tr><th>constant</th><th>source</th><th>largest passing value</th><th>smallest failing value</th><th>variants</th></tr>");
    for c in &d.constants {
        let (pass, fail, vars) = match &c.source {
            Source::Fitted { pass, fail, variants } => (pass.to_string(), fail.to_string(), variants.join(", ")),
            _ => ("—".to_string(), "—".to_string(), String::new()),
        };
        let _ = writeln!(b, "<tr><td><b>{}</b></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", c.value, esc(&c.describe()), esc(&pass), esc(&fail), esc(&vars));
    }
    let _ = writeln!(b, "</table>");
    if !d.variants.is_empty() {
        let _ = writeln!(b, "<table id=\"variants\"><tr><th>labelled variant</th><th>label</th><th>held out</th></tr>");
        for v in &d.variants {
            let _ = writeln!(b, "<tr><td><code>{}</code></td><td class=\"{}\">{}</td><td>{}</td></tr>", esc(&v.id), if v.fails { "FAIL" } else { "pass" }, if v.fails { "fails" } else { "passes" }, if v.held_out { "yes" } else { "no" });
        }
        let _ = writeln!(b, "</table>");
    }
}

fn evidence(b: &mut String, r: &Record, e: &Evidence) {
    let _ = writeln!(b, "<h2>Evidence</h2><table><tr><th>bucket</th><td><code>{}</code></td></tr><tr><th>signature</th><td><code>{}</code></td></tr><tr><th>construct</th><td><code>{}</code></td></tr></table>", esc(&r.bucket), esc(&r.signature), esc(&r.construct));
    if !e.records.is_empty() {
        let _ = writeln!(b, "<table id=\"evidence\"><tr><th>record</th><th>stage</th><th>tool</th><th>class</th><th>message</th></tr>");
        for x in &e.records {
            let _ = writeln!(b, "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", esc(&x.id), esc(&x.stage), esc(&x.tool), esc(&x.class), esc(&x.message));
        }
        let _ = writeln!(b, "</table>");
    }
    for n in &e.notes {
        let _ = writeln!(b, "<p class=\"flag\">{}</p>", esc(n));
    }
    for m in &e.programs {
        marked(b, m);
    }
}

/// A failing program with the lines its findings point at highlighted (`tr.hit`).
fn marked(b: &mut String, m: &Marked) {
    let _ = writeln!(b, "<h3>Program <code>{}</code></h3>", esc(&m.title));
    for f in &m.findings {
        let _ = writeln!(b, "<p><b>{}</b> line {}: {}</p>", esc(&f.code), f.line, esc(&f.message));
    }
    let _ = writeln!(b, "<table class=\"src\">");
    for (i, line) in m.source.lines().enumerate() {
        let n = i + 1;
        let hit = m.findings.iter().any(|f| f.line == n);
        let _ = writeln!(b, "<tr{}><td class=\"n\">{n}</td><td>{}</td></tr>", if hit { " class=\"hit\"" } else { "" }, esc(line));
    }
    let _ = writeln!(b, "</table>");
}

/// Each changed file side by side: old on the left, new on the right, 3 lines of context.
fn diff(b: &mut String, files: &[crate::git::FileDiff]) {
    let _ = writeln!(b, "<h2>Diff</h2>");
    for f in files {
        let old = f.old.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
        let new = f.new.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
        let d = TextDiff::from_lines(&*old, &*new);
        let (ol, nl) = (d.old_slices(), d.new_slices());
        let _ = writeln!(b, "<h3><code>{}</code></h3><table class=\"diff\">", esc(&f.path));
        for (gi, group) in d.grouped_ops(3).iter().enumerate() {
            if gi > 0 {
                let _ = writeln!(b, "<tr><td class=\"n\">⋯</td><td></td><td class=\"n\">⋯</td><td></td></tr>");
            }
            for op in group {
                let (tag, o, n) = op.as_tag_tuple();
                let rows = o.len().max(n.len());
                for k in 0..rows {
                    let left = (k < o.len()).then(|| (o.start + k, ol[o.start + k]));
                    let right = (k < n.len()).then(|| (n.start + k, nl[n.start + k]));
                    let (lc, rc) = match tag {
                        DiffTag::Equal => ("", ""),
                        _ => ("del", "ins"),
                    };
                    let cell = |side: Option<(usize, &str)>, class: &str| match side {
                        Some((i, t)) => format!("<td class=\"n\">{}</td><td class=\"{class}\">{}</td>", i + 1, esc(t.trim_end_matches('\n'))),
                        None => "<td class=\"n\"></td><td></td>".to_string(),
                    };
                    let _ = writeln!(b, "<tr>{}{}</tr>", cell(left, lc), cell(right, rc));
                }
            }
        }
        let _ = writeln!(b, "</table>");
    }
}
