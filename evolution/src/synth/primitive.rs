//! Primitives: a catalog entry drafted for an op programs call but the catalog lacks (the
//! "unknown operation" findings, E0301), from its call sites.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{toml_escape, Program};

/// The op name an "unknown operation" signature names (`unknown operation `foo``), if any.
pub fn unknown_op(signature: &str) -> Option<String> {
    let lower = signature.to_ascii_lowercase();
    let i = lower.find("unknown operation")?;
    let rest = &signature[i..];
    let start = rest.find('`')? + 1;
    let end = rest[start..].find('`')? + start;
    let name = &rest[start..end];
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')).then(|| name.to_string())
}

/// One call site of the missing op.
#[derive(Clone, Debug, PartialEq, Eq)]
struct CallSite {
    statement: bool,
    /// (named?, kind guessed from the argument)
    args: Vec<(Option<String>, String)>,
    text: String,
}

/// A drafted catalog entry for a missing op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrimitiveDraft {
    pub op: String,
    pub class: String,
    pub form: String,
    /// The catalog file it goes into (`compiler/catalog/memory.toml`).
    pub file: String,
    /// The `[[op]]` entry as TOML.
    pub entry: String,
    pub call_sites: usize,
    pub programs: usize,
    pub example: String,
    /// Present only when drafted (by an LLM): the hardware note and lowering note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lowering: Option<String>,
    /// What is still missing for the gates, in words.
    pub missing: Vec<String>,
}

fn class_for(name: &str) -> &'static str {
    let has = |w: &[&str]| w.iter().any(|x| name.contains(x));
    if has(&["mma", "gemm", "dot"]) {
        "compute"
    } else if has(&["load", "store", "copy", "tma", "gather", "scatter", "prefetch", "ldmatrix", "stmatrix"]) {
        "memory"
    } else if has(&["sync", "barrier", "arrive", "wait", "fence", "commit", "acquire", "release"]) {
        "sync"
    } else {
        "math"
    }
}

/// Kinds of the names a program declares (tensor → global, smem/view → smem, reg/let → frag,
/// pipeline, barrier, role, dim/const → int).
fn declared_kinds(file: &cake::syntax::ast::File) -> BTreeMap<String, &'static str> {
    use cake::syntax::ast::{ItemKind, StmtKind};
    let mut k = BTreeMap::new();
    fn walk(stmts: &[cake::syntax::ast::Stmt], k: &mut BTreeMap<String, &'static str>) {
        for s in stmts {
            match &s.kind {
                StmtKind::Reg { name, .. } | StmtKind::Let { name, .. } => {
                    k.insert(name.name.clone(), "frag");
                }
                StmtKind::For { body, .. } => walk(&body.stmts, k),
                StmtKind::If { then_block, else_block, .. } => {
                    walk(&then_block.stmts, k);
                    if let Some(e) = else_block {
                        walk(&e.stmts, k);
                    }
                }
                _ => {}
            }
        }
    }
    for item in &file.items {
        match &item.kind {
            ItemKind::Tensor { name, .. } => {
                k.insert(name.name.clone(), "global");
            }
            ItemKind::Smem { name, .. } | ItemKind::View { name, .. } => {
                k.insert(name.name.clone(), "smem");
            }
            ItemKind::Pipeline { name, .. } => {
                k.insert(name.name.clone(), "pipeline");
            }
            ItemKind::Barrier { name, .. } => {
                k.insert(name.name.clone(), "barrier");
            }
            ItemKind::Role { name, .. } => {
                k.insert(name.name.clone(), "role");
            }
            ItemKind::Dim { name, .. } | ItemKind::Const { name, .. } => {
                k.insert(name.name.clone(), "int");
            }
            ItemKind::Scalar { name, .. } => {
                k.insert(name.name.clone(), "value");
            }
            ItemKind::On { body, .. } => walk(&body.stmts, &mut k),
            _ => {}
        }
    }
    k
}

fn arg_kind(e: &cake::syntax::ast::Expr, kinds: &BTreeMap<String, &'static str>) -> &'static str {
    use cake::syntax::ast::ExprKind;
    match &e.kind {
        ExprKind::Int(_) | ExprKind::Bytes(_) => "const_int",
        ExprKind::Float(_) | ExprKind::Inf => "float",
        ExprKind::Bool(_) => "value",
        ExprKind::Name(id) => {
            if cake::ir::DType::ALL.iter().any(|d| d.name() == id.name) {
                "dtype"
            } else {
                kinds.get(&id.name).copied().unwrap_or("value")
            }
        }
        ExprKind::Index { base, .. } | ExprKind::Paren(base) => arg_kind(base, kinds),
        ExprKind::Field { .. } => "int",
        _ => "value",
    }
}

fn call_sites(source: &str, op: &str) -> Vec<CallSite> {
    use cake::syntax::ast::{Expr, ExprKind, ItemKind, Stmt, StmtKind};
    let Ok(file) = cake::syntax::parse(source) else { return Vec::new() };
    let kinds = declared_kinds(&file);
    let mut out = Vec::new();
    fn expr(e: &Expr, statement: bool, op: &str, source: &str, kinds: &BTreeMap<String, &'static str>, out: &mut Vec<CallSite>) {
        match &e.kind {
            ExprKind::Call { func, args } => {
                if func.name == op {
                    let text = source.get(e.span.range()).unwrap_or("").to_string();
                    out.push(CallSite { statement, args: args.iter().map(|a| (a.name.as_ref().map(|n| n.name.clone()), arg_kind(&a.value, kinds).to_string())).collect(), text });
                }
                for a in args {
                    expr(&a.value, false, op, source, kinds, out);
                }
            }
            ExprKind::Field { base, .. } | ExprKind::Paren(base) => expr(base, false, op, source, kinds, out),
            ExprKind::Index { base, .. } => expr(base, false, op, source, kinds, out),
            ExprKind::Unary { operand, .. } => expr(operand, false, op, source, kinds, out),
            ExprKind::Binary { lhs, rhs, .. } => {
                expr(lhs, false, op, source, kinds, out);
                expr(rhs, false, op, source, kinds, out);
            }
            _ => {}
        }
    }
    fn stmts(ss: &[Stmt], op: &str, source: &str, kinds: &BTreeMap<String, &'static str>, out: &mut Vec<CallSite>) {
        for s in ss {
            match &s.kind {
                StmtKind::Call(e) => expr(e, true, op, source, kinds, out),
                StmtKind::Let { value, .. } => expr(value, false, op, source, kinds, out),
                StmtKind::Assign { target, value } => {
                    expr(target, false, op, source, kinds, out);
                    expr(value, false, op, source, kinds, out);
                }
                StmtKind::For { body, .. } => stmts(&body.stmts, op, source, kinds, out),
                StmtKind::If { cond, then_block, else_block } => {
                    expr(cond, false, op, source, kinds, out);
                    stmts(&then_block.stmts, op, source, kinds, out);
                    if let Some(e) = else_block {
                        stmts(&e.stmts, op, source, kinds, out);
                    }
                }
                StmtKind::Reg { .. } => {}
            }
        }
    }
    for item in &file.items {
        if let ItemKind::On { body, .. } = &item.kind {
            stmts(&body.stmts, op, source, &kinds, &mut out);
        }
    }
    out
}

/// Draft the catalog entry for `op` from the programs that call it. `hardware` and `lowering`
/// are the drafted notes (from an LLM), when there are any.
pub fn draft_primitive(op: &str, programs: &[Program], hardware: Option<String>, lowering: Option<String>) -> Result<PrimitiveDraft, String> {
    let mut sites = Vec::new();
    let mut progs = 0;
    for p in programs {
        let s = call_sites(&p.source, op);
        if !s.is_empty() {
            progs += 1;
        }
        sites.extend(s);
    }
    if sites.is_empty() {
        return Err(format!("no program of the bucket calls `{op}`"));
    }
    let statement = sites.iter().filter(|s| s.statement).count() * 2 >= sites.len();
    let form = if statement { "stmt" } else { "expr" };
    let class = class_for(op);
    // Params: the positional arity most call sites use; kinds by majority; named args as named params.
    let mut positional: Vec<BTreeMap<String, usize>> = Vec::new();
    let mut named: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for s in &sites {
        let mut i = 0;
        for (name, kind) in &s.args {
            match name {
                Some(n) => *named.entry(n.clone()).or_default().entry(kind.clone()).or_default() += 1,
                None => {
                    if positional.len() <= i {
                        positional.push(BTreeMap::new());
                    }
                    *positional[i].entry(kind.clone()).or_default() += 1;
                    i += 1;
                }
            }
        }
    }
    let majority = |m: &BTreeMap<String, usize>| m.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(|(k, _)| k.clone()).unwrap_or_else(|| "value".into());
    let names = ["dst", "src", "a", "b", "c", "d"];
    let mut params: Vec<(String, String, bool)> = Vec::new();
    for (i, m) in positional.iter().enumerate() {
        let kind = majority(m);
        let name = if form == "stmt" { names.get(i).map(|s| s.to_string()).unwrap_or(format!("arg{i}")) } else { ["x", "y", "z", "w"].get(i).map(|s| s.to_string()).unwrap_or(format!("arg{i}")) };
        params.push((name, kind, false));
    }
    for (n, m) in &named {
        params.push((n.clone(), majority(m), true));
    }
    let is_data = |k: &str| matches!(k, "frag" | "smem" | "global" | "mem");
    let has_facts = |k: &str| !matches!(k, "pipeline" | "barrier" | "sync" | "role" | "int");
    // Type rule: the data params agree on dtype; else rank facts; else `true`.
    let data: Vec<&(String, String, bool)> = params.iter().filter(|p| is_data(&p.1) || p.1 == "value").collect();
    // Each constraint with the help a failing program prints (P8), `{term}` holes filled there.
    let mut type_rule: Vec<(String, String)> = Vec::new();
    if data.len() >= 2 {
        let (a, b) = (&data[0].0, &data[1].0);
        type_rule.push((format!("dtype({a}) == dtype({b})"), format!("give `{a}` and `{b}` one dtype (they are {{dtype({a})}} and {{dtype({b})}})")));
    }
    if let Some(p) = data.first() {
        type_rule.push((format!("rank({}) >= 1", p.0), format!("pass a tensor value (a fragment, a window) as `{}`, not a scalar", p.0)));
    }
    if type_rule.is_empty() {
        if let Some(p) = params.iter().find(|p| has_facts(&p.1)) {
            type_rule.push(match p.1.as_str() {
                "const_int" => (format!("value({}) >= 0", p.0), format!("pass a non-negative compile-time integer as `{}` (it is {{value({})}})", p.0, p.0)),
                "dtype" => (format!("{} in [f32, f16, bf16, f8e4m3, f8e5m2, i32, u32, i64, bool]", p.0), format!("name one of the language's dtypes as `{}`", p.0)),
                _ => (format!("rank({}) >= 0", p.0), format!("pass a value as `{}`", p.0)),
            });
        } else {
            type_rule.push(("true".into(), String::new()));
        }
    }
    // Effects: statement ops write their first data param and read the others; expressions are pure.
    let mut effects = Vec::new();
    let mut access: BTreeMap<String, &str> = BTreeMap::new();
    if form == "stmt" {
        let mut first = true;
        for (n, k, _) in &params {
            if is_data(k) {
                let a = if first { "write" } else { "read" };
                first = false;
                effects.push(format!("{{ on = \"{n}\", access = \"{a}\", proxy = \"generic\" }}"));
                access.insert(n.clone(), a);
            } else if matches!(k.as_str(), "pipeline" | "barrier" | "sync") {
                effects.push(format!("{{ on = \"{n}\", access = \"wait\" }}"));
            }
        }
        if effects.is_empty() {
            effects.push("{ on = \"@block\", access = \"wait\" }".to_string());
        }
    }
    let result = if form == "expr" { data.first().map(|p| format!("same({})", p.0)).unwrap_or_else(|| "same(x)".into()) } else { "none".into() };
    let example = sites.iter().map(|s| s.text.split_whitespace().collect::<Vec<_>>().join(" ")).find(|t| !t.is_empty()).unwrap_or_default();
    let mut t = String::new();
    t.push_str(&format!(
        "\n# Drafted by cake-evolve-compiler from {} call site(s) in {progs} program(s) that used `{op}` before the catalog had it.\n",
        sites.len()
    ));
    t.push_str("[[op]]\n");
    t.push_str(&format!("name = \"{op}\"\nclass = \"{class}\"\nform = \"{form}\"\n"));
    t.push_str(&format!("summary = \"{}\"\n", toml_escape(&format!("(drafted) the operation programs wrote as `{example}`"))));
    t.push_str("requires = []\nissue = \"thread\"\n");
    t.push_str("params = [\n");
    for (n, k, named) in &params {
        let acc = access.get(n).map(|a| format!(", access = \"{a}\"")).unwrap_or_default();
        let nm = if *named { ", named = true" } else { "" };
        t.push_str(&format!("  {{ name = \"{n}\", kind = \"{k}\"{acc}{nm} }},\n"));
    }
    t.push_str("]\n");
    let entries: Vec<String> = type_rule
        .iter()
        .map(|(r, h)| if h.is_empty() { format!("\"{r}\"") } else { format!("{{ rule = \"{r}\", help = \"{}\" }}", toml_escape(h)) })
        .collect();
    t.push_str(&format!("type_rule = [{}]\n", entries.join(", ")));
    t.push_str(&format!("result = \"{result}\"\n"));
    if form == "expr" {
        t.push_str("pure = true\neffects = []\n");
    } else {
        t.push_str(&format!("effects = [\n{}]\n", effects.iter().map(|e| format!("  {e},\n")).collect::<String>()));
    }
    let mut missing = Vec::new();
    match &lowering {
        Some(l) => t.push_str(&format!("lowering = \"\"\"{}\"\"\"\n", l.replace('\\', "\\\\").replace("\"\"\"", "'''"))),
        None => {
            t.push_str("lowering = \"\"\n");
            missing.push("lowering: the engine cannot write one (no LLM configured, or it gave none)".to_string());
        }
    }
    match &hardware {
        Some(h) => t.push_str(&format!("hardware = \"\"\"{}\"\"\"\n", h.replace('\\', "\\\\").replace("\"\"\"", "'''"))),
        None => {
            t.push_str("hardware = \"\"\n");
            missing.push("hardware: what the op does on the hardware is not known to the engine (P8)".to_string());
        }
    }
    if example.contains(&format!("{op}(")) {
        t.push_str(&format!("example = \"{}\"\n", toml_escape(&example)));
    }
    Ok(PrimitiveDraft {
        op: op.to_string(),
        class: class.to_string(),
        form: form.to_string(),
        file: format!("compiler/catalog/{class}.toml"),
        entry: t,
        call_sites: sites.len(),
        programs: progs,
        example,
        hardware,
        lowering,
        missing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_op_from_signature() {
        assert_eq!(unknown_op("E0301 unknown operation `tma_store_async`").as_deref(), Some("tma_store_async"));
        assert_eq!(unknown_op("E0201 something else"), None);
    }

}
