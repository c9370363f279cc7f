//! The op reference: what `cake explain OP` and `cake explain --ops` print, and the generated
//! `compiler/OPS.md` (a test checks it is current: `cargo test -p cake --test op_reference`;
//! regenerate with `cake explain --ops --markdown > compiler/OPS.md`).

use crate::catalog::{Catalog, Effect, OpDef, Proxy};
use crate::target::TargetTable;

/// `cake explain OP`: one catalog entry for people: signature, type rule, targets, effects,
/// hardware note, lowering, example.
pub fn explain(op: &OpDef, targets: &TargetTable) -> String {
    let mut s = format!("{}: {} ({} operation, {})\n", op.name, op.summary.trim(), op.class.as_str(), op.file);
    let params: Vec<String> = op
        .params
        .iter()
        .map(|p| {
            let mut t = if p.named { format!("{}=", p.name) } else { p.name.clone() };
            t.push_str(&format!(": {}", p.kind.as_str()));
            if let Some(a) = p.access {
                t.push_str(&format!(" {}", a.as_str()));
            }
            if let Some(d) = &p.default {
                t.push_str(&format!(" = {d}"));
            } else if p.optional {
                t.push_str(" (optional)");
            }
            t
        })
        .collect();
    s.push_str(&format!("\n    {}({})\n", op.name, params.join(", ")));
    let docs: Vec<String> =
        op.params.iter().filter_map(|p| p.doc.as_ref().map(|d| format!("    {}: {}", p.name, d.trim()))).collect();
    if !docs.is_empty() {
        s.push_str(&format!("\nParameters:\n{}\n", docs.join("\n")));
    }
    if !op.type_rule.is_empty() {
        s.push_str("\nType rule (all must hold):\n");
        for rule in &op.type_rule {
            s.push_str(&format!("    {rule}\n"));
        }
    }
    s.push_str(&format!("\nResult: {}\n", op.result));
    if !op.requires.is_empty() {
        s.push_str(&format!("Requires target features: {}\n", op.requires.join(", ")));
    }
    s.push_str(&format!("Targets: {}\n", claimed_targets(op, targets).join(", ")));
    s.push_str(&format!("Issued by: {}\n", issue_name(op)));
    for r in &op.requires_when {
        s.push_str(&format!("Requires when `{}`: {}\n", r.when, r.features.join(", ")));
    }
    if op.pure {
        s.push_str("Effects: none (pure)\n");
    } else if !op.effects.is_empty() {
        s.push_str("\nEffects:\n");
        for e in &op.effects {
            s.push_str(&format!("    {}\n", effect(e)));
        }
    }
    for (title, text) in [("Hardware", op.hardware.as_str()), ("Lowering", op.lowering.as_str())] {
        if !text.trim().is_empty() {
            s.push_str(&format!("\n{title}:\n"));
            for line in text.trim().lines() {
                s.push_str(&format!("    {line}\n"));
            }
        }
    }
    if let Some(example) = op.example.as_deref().filter(|e| !e.trim().is_empty()) {
        s.push_str("\nExample:\n");
        for line in example.trim_matches('\n').lines() {
            s.push_str(&format!("    {line}\n"));
        }
    }
    s
}


/// The targets whose features cover the op's requirements.
pub fn claimed_targets<'t>(op: &OpDef, targets: &'t TargetTable) -> Vec<&'t str> {
    targets.names().into_iter().filter(|t| targets.get(t).is_some_and(|ti| ti.missing(op.requires.iter().map(String::as_str)).is_empty())).collect()
}

fn form_name(op: &OpDef) -> String {
    format!("{:?}", op.form).to_lowercase()
}

fn issue_name(op: &OpDef) -> String {
    format!("{:?}", op.issue).to_lowercase()
}

fn effect(e: &Effect) -> String {
    let mut s = format!("{} `{}`", e.access.as_str(), e.on);
    match e.proxy {
        Proxy::Async => s.push_str(", async proxy"),
        Proxy::Generic => s.push_str(", generic proxy"),
        Proxy::None => {}
    }
    if e.is_async {
        s.push_str(", completes later");
    }
    if let Some(b) = e.barrier {
        s.push_str(&format!(", {} barrier", format!("{b:?}").to_lowercase()));
    }
    s
}

/// One line per op: name, class, form, summary (`cake explain --ops`).
pub fn list(catalog: &Catalog) -> Vec<String> {
    catalog.ops.iter().map(|op| format!("{:<26} {:<8} {:<5} {}", op.name, op.class.as_str(), form_name(op), op.summary.trim())).collect()
}

/// `compiler/OPS.md`: every op of the catalog, in catalog order, as `cake explain` shows it.
pub fn markdown(catalog: &Catalog, targets: &TargetTable) -> String {
    let mut s = String::from(
        "# Cake operations\n\nGenerated from the op catalog (`compiler/catalog/*.toml`) by `cake explain --ops --markdown`;\ndo not edit: change the catalog and regenerate. `cake explain OP` prints one entry.\n\n| op | class | form | summary |\n|---|---|---|---|\n",
    );
    for op in &catalog.ops {
        s.push_str(&format!("| [`{}`](#{}) | {} | {} | {} |\n", op.name, op.name, op.class.as_str(), form_name(op), op.summary.trim().replace('|', "\\|")));
    }
    for op in &catalog.ops {
        s.push_str(&format!("\n## {}\n\n```text\n{}```\n", op.name, explain(op, targets)));
    }
    s
}
