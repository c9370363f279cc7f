//! `--bless`: rewrite the expectations of the selected cases from what the gate observed, in
//! place, touching only the keys that change (comments and layout stay), so the change is
//! reviewed as a git diff.
//!
//! - static: `expect.verdict` and `expect.findings` when they differ from the observation;
//!   `expect.warnings`, `expect.hints` and `expect.coverage_limits` only where the manifest lists
//!   them.
//! - compile: a bound the observation violates is set to the observed value, and a missing bound
//!   (`max_registers`, `spills`, `max_smem`) is filled in; bounds that hold are left alone.
//! - gpu: nothing is blessed (a tolerance is a decision, not an observation).
//!
//! A plain case's manifest is edited at its top level; an instance's overrides are written into
//! its own `[[instance]]` table of `family.toml`, so the family defaults stay as they are.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use toml_edit::{Array, DocumentMut, InlineTable, Item, TableLike, Value};

use super::error::CorpusError;
use super::results::{CaseResult, Status};
use super::{Case, FindingSpec, Origin, Tier};

/// One change `--bless` made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blessed {
    pub id: String,
    pub tier: Tier,
    pub file: PathBuf,
    /// What changed, e.g. `expect.findings: [] -> [V201@16:1]`.
    pub changes: Vec<String>,
}

/// One edit: (section under the case's table, key, new value, a note for people).
type Edit = (&'static str, &'static str, Value, String);

/// The edits of one file: per (case, result), its edits.
type FileEdits<'a> = BTreeMap<PathBuf, Vec<(&'a Case, &'a CaseResult, Vec<Edit>)>>;

/// The edits one (case, tier) needs.
fn edits_for(case: &Case, r: &CaseResult) -> Vec<Edit> {
    let mut out = Vec::new();
    let o = &r.observed;
    match r.tier {
        Tier::Static => {
            let e = &case.manifest.expect;
            if let Some(v) = o.verdict {
                if v != e.verdict {
                    out.push((
                        "expect",
                        "verdict",
                        Value::from(v.as_str()),
                        format!("expect.verdict: {} -> {}", e.verdict.as_str(), v.as_str()),
                    ));
                }
            }
            if let Some(f) = &o.findings {
                let mut want = e.findings.clone();
                want.sort();
                if &want != f {
                    out.push(("expect", "findings", findings_value(f), format!("expect.findings: {} -> {}", show(&want), show(f))));
                }
            }
            for (key, listed, got) in [
                ("warnings", &e.warnings, &o.warnings),
                ("hints", &e.hints, &o.hints),
                ("coverage_limits", &e.coverage_limits, &o.coverage_limits),
            ] {
                if let (Some(w), Some(got)) = (listed, got) {
                    let mut want = w.clone();
                    want.sort();
                    if &want != got {
                        out.push(("expect", key, findings_value(got), format!("expect.{key}: {} -> {}", show(&want), show(got))));
                    }
                }
            }
        }
        Tier::Compile => {
            let b = case.manifest.compile.clone().unwrap_or_default();
            if let Some(regs) = o.registers {
                if b.max_registers.is_none_or(|m| regs > m) {
                    out.push((
                        "compile",
                        "max_registers",
                        Value::from(i64::from(regs)),
                        format!("compile.max_registers: {} -> {regs}", opt(b.max_registers)),
                    ));
                }
            }
            if let Some(sp) = o.spills {
                if b.spills != Some(sp) {
                    out.push(("compile", "spills", Value::from(sp as i64), format!("compile.spills: {} -> {sp}", opt(b.spills))));
                }
            }
            if let Some(sm) = o.smem {
                if b.max_smem.is_none_or(|m| sm > m) {
                    out.push(("compile", "max_smem", Value::from(sm as i64), format!("compile.max_smem: {} -> {sm}", opt(b.max_smem))));
                }
            }
        }
        Tier::Gpu => {}
    }
    out
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or("(none)".to_string(), |v| v.to_string())
}

fn show(f: &[FindingSpec]) -> String {
    format!("[{}]", f.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))
}

/// `[]`, `[ { code = "V201", line = 16, column = 1 } ]`, or one inline table per line.
fn findings_value(f: &[FindingSpec]) -> Value {
    let mut a = Array::new();
    for x in f {
        let mut t = InlineTable::new();
        t.insert("code", Value::from(x.code.as_str()));
        t.insert("line", Value::from(x.line as i64));
        t.insert("column", Value::from(x.column as i64));
        a.push(Value::InlineTable(t));
    }
    match f.len() {
        0 => {}
        1 => {
            a.fmt();
            if let Some(v) = a.get_mut(0) {
                v.decor_mut().set_prefix(" ");
            }
            a.set_trailing(" ");
        }
        _ => {
            for v in a.iter_mut() {
                v.decor_mut().set_prefix("\n  ");
                v.decor_mut().set_suffix("");
            }
            a.set_trailing_comma(true);
            a.set_trailing("\n");
        }
    }
    Value::Array(a)
}

/// Set `section.key = value` under `root`, creating `section` (a `[section]` table for a plain
/// manifest, an inline table inside an `[[instance]]`) when needed; the key's decor is kept.
fn set(root: &mut dyn TableLike, section: &str, key: &str, mut value: Value, inline_section: bool, file: &Path) -> Result<(), CorpusError> {
    if root.get(section).is_none() {
        if inline_section {
            root.insert(section, Item::Value(Value::InlineTable(InlineTable::new())));
        } else {
            let mut t = toml_edit::Table::new();
            t.set_implicit(false);
            root.insert(section, Item::Table(t));
        }
    }
    let sec = root.get_mut(section).and_then(Item::as_table_like_mut).ok_or_else(|| CorpusError::Bless { path: file.to_path_buf(), message: format!("`{section}` is not a table") })?;
    if let Some(old) = sec.get(key).and_then(Item::as_value) {
        let d = old.decor().clone();
        *value.decor_mut() = d;
        // Keep a one-line value's leading space; a multi-line array sets its own layout.
        if value.decor().prefix().is_none() {
            value.decor_mut().set_prefix(" ");
        }
    }
    if let Some(item) = sec.get_mut(key) {
        *item = Item::Value(value);
    } else {
        sec.insert(key, Item::Value(value));
    }
    Ok(())
}

/// Rewrite the manifests of the given results' cases. Results of unselected tiers, skipped,
/// spurious and error results are left alone; returns what changed per case and tier.
pub fn bless(cases: &[&Case], results: &[CaseResult]) -> Result<Vec<Blessed>, CorpusError> {
    let by_id: BTreeMap<&str, &Case> = cases.iter().map(|c| (c.id.as_str(), *c)).collect();
    // Group edits per file so each file is read and written once.
    let mut per_file: FileEdits = BTreeMap::new();
    for r in results {
        if !matches!(r.status, Status::Pass | Status::Fail) {
            continue;
        }
        let Some(case) = by_id.get(r.id.as_str()) else { continue };
        let edits = edits_for(case, r);
        if edits.is_empty() {
            continue;
        }
        per_file.entry(case.origin.manifest_path().to_path_buf()).or_default().push((case, r, edits));
    }
    let mut out = Vec::new();
    for (file, items) in per_file {
        let text = fs::read_to_string(&file).map_err(|e| CorpusError::Bless { path: file.clone(), message: format!("cannot read {}: {e}", file.display()) })?;
        let mut doc: DocumentMut = text.parse().map_err(|e| CorpusError::Bless { path: file.clone(), message: format!("{}: {e}", file.display()) })?;
        for (case, r, edits) in items {
            let (root, inline): (&mut dyn TableLike, bool) = match &case.origin {
                Origin::Plain { .. } => (doc.as_table_mut(), false),
                Origin::Instance { index, .. } => {
                    let arr = doc
                        .get_mut("instance")
                        .and_then(Item::as_array_of_tables_mut)
                        .ok_or_else(|| CorpusError::Bless { path: file.clone(), message: format!("{}: no [[instance]] tables", file.display()) })?;
                    let t = arr.get_mut(*index).ok_or_else(|| CorpusError::Bless { path: file.clone(), message: format!("{}: no [[instance]] #{index}", file.display()) })?;
                    (t, true)
                }
            };
            let mut changes = Vec::new();
            for (section, key, value, note) in edits {
                set(root, section, key, value, inline, &file)?;
                changes.push(note);
            }
            out.push(Blessed { id: case.id.clone(), tier: r.tier, file: file.clone(), changes });
        }
        let new = doc.to_string();
        if new != text {
            fs::write(&file, new).map_err(|e| CorpusError::Bless { path: file.clone(), message: format!("cannot write {}: {e}", file.display()) })?;
        }
    }
    Ok(out)
}
