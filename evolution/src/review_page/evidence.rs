//! What a proposal page shows of its evidence: the evidence records (from the store, when it is
//! there), and the failing programs with the lines that fail marked. For a rule the marks are the
//! proposal's own findings: its rule file, read from the proposal commit, verifies each failing
//! program it was learned from; for the others they are the spans the evidence names.

use std::path::Path;

use cake::verify::RuleSet;

use crate::queue::Record;
use crate::store::{self, EvidenceStore, SpanKind};

/// Programs shown per proposal: the page is for reading, and a bucket can hold hundreds.
pub const MAX_PROGRAMS: usize = 4;
/// Evidence records listed per proposal.
pub const MAX_RECORDS: usize = 20;

pub struct EvidenceRow {
    pub id: String,
    pub stage: String,
    pub tool: String,
    pub class: String,
    pub message: String,
}

/// A finding on a program: its code, 1-based line and message.
pub struct Finding {
    pub code: String,
    pub line: usize,
    pub message: String,
}

/// A failing program with the lines to mark.
pub struct Marked {
    pub title: String,
    pub source: String,
    pub findings: Vec<Finding>,
}

#[derive(Default)]
pub struct Evidence {
    pub records: Vec<EvidenceRow>,
    pub programs: Vec<Marked>,
    /// What could not be shown, and why.
    pub notes: Vec<String>,
}

/// The evidence of `r`; `store` is the evidence store, if there is one here.
pub fn gather(repo: &git2::Repository, store: Option<&EvidenceStore>, r: &Record) -> Evidence {
    let mut e = Evidence::default();
    let mut spans: Vec<(String, Finding)> = Vec::new(); // (program sha256, the evidence's span)
    for id in r.evidence.iter().take(MAX_RECORDS) {
        // A calibration's evidence names its measurements (`bench @ shape`), not store records.
        if store::Id::parse(id).is_none() {
            e.records.push(EvidenceRow { id: id.clone(), stage: "-".into(), tool: "calibration run".into(), class: "measurement".into(), message: String::new() });
            continue;
        }
        let Some(s) = store else {
            e.records.push(EvidenceRow { id: id.clone(), stage: "-".into(), tool: "-".into(), class: "-".into(), message: "no evidence store here (`--evidence DIR`)".into() });
            continue;
        };
        match s.get(id) {
            Ok(st) => {
                let row = match &st.record {
                    store::Record::Failure(f) => {
                        if let Some(sp) = f.span.as_ref().filter(|sp| sp.kind == SpanKind::Cake) {
                            spans.push((f.program.sha256.clone(), Finding { code: f.error_class.clone(), line: sp.line as usize, message: f.message.clone() }));
                        }
                        EvidenceRow { id: st.id.as_str().to_string(), stage: f.stage.as_str().into(), tool: f.tool.clone(), class: f.error_class.clone(), message: f.message.clone() }
                    }
                    store::Record::Run(run) => EvidenceRow {
                        id: st.id.as_str().to_string(),
                        stage: run.stage.clone(),
                        tool: "cake run".into(),
                        class: run.error.as_ref().map_or_else(|| run.verdict.name().to_string(), |x| x.class.clone()),
                        message: run.error.as_ref().map(|x| x.message.clone()).unwrap_or_default(),
                    },
                };
                e.records.push(row);
            }
            Err(err) => e.notes.push(format!("evidence {id}: {err}")),
        }
    }
    if r.evidence.len() > MAX_RECORDS {
        e.notes.push(format!("{} more evidence record(s) not listed", r.evidence.len() - MAX_RECORDS));
    }
    // A rule: its own findings on the programs it was learned from.
    if let Some(d) = r.rule.as_ref().filter(|d| !d.failing_sources.is_empty()) {
        let rules = rule_text(repo, &r.commit, &d.rule_path()).and_then(|text| RuleSet::from_files(&[(d.rule_path().as_str(), text.as_str())]).map_err(|x| x.to_string()));
        match rules {
            Err(why) => e.notes.push(format!("the proposal's rule `{}` could not be loaded from its commit: {why}", d.rule_path())),
            Ok(rules) => {
                for (i, src) in d.failing_sources.iter().enumerate().take(MAX_PROGRAMS) {
                    let sha = d.failing_programs.get(i).cloned().unwrap_or_default();
                    let mut findings = findings_of(src, &rules, &d.code);
                    findings.extend(spans.iter().filter(|(p, _)| *p == sha).map(|(_, f)| Finding { code: f.code.clone(), line: f.line, message: f.message.clone() }));
                    e.programs.push(Marked { title: crate::synth::short(&sha).to_string(), source: src.clone(), findings });
                }
                if d.failing_sources.len() > MAX_PROGRAMS {
                    e.notes.push(format!("{} more failing program(s) not shown", d.failing_sources.len() - MAX_PROGRAMS));
                }
            }
        }
        return e;
    }
    // Otherwise: the programs from the store, marked where the evidence points.
    if let Some(s) = store {
        for sha in r.programs.iter().take(MAX_PROGRAMS) {
            if let Ok(Some(src)) = s.program(sha) {
                let findings = spans.iter().filter(|(p, _)| p == sha).map(|(_, f)| Finding { code: f.code.clone(), line: f.line, message: f.message.clone() }).collect();
                e.programs.push(Marked { title: crate::synth::short(sha).to_string(), source: src, findings });
            }
        }
    }
    e
}

/// The text of `path` in `commit`.
fn rule_text(repo: &git2::Repository, commit: &str, path: &str) -> Result<String, String> {
    let oid = git2::Oid::from_str(commit).map_err(|x| x.message().to_string())?;
    let tree = repo.find_commit(oid).and_then(|c| c.tree()).map_err(|x| x.message().to_string())?;
    let entry = tree.get_path(Path::new(path)).map_err(|x| x.message().to_string())?;
    let blob = repo.find_blob(entry.id()).map_err(|x| x.message().to_string())?;
    String::from_utf8(blob.content().to_vec()).map_err(|x| x.to_string())
}

/// The findings of code `code` when `rules` verify `source`, at their primary lines.
fn findings_of(source: &str, rules: &RuleSet, code: &str) -> Vec<Finding> {
    let Ok(file) = cake::api::parse(source) else { return Vec::new() };
    let checked = match cake::api::check(file) {
        Ok(c) => c,
        Err(_) => return Vec::new(),
    };
    let findings = match cake::api::verify_with(checked, rules) {
        Ok(v) => v.findings,
        Err(x) => x.findings,
    };
    findings
        .into_iter()
        .filter(|f| f.code == code)
        .map(|f| Finding { line: cake::span::line_col(source, f.primary.span.start as usize).0, code: f.code, message: f.message })
        .collect()
}
