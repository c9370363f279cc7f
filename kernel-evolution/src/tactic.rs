//! Tactics as data: each `tactics/*.toml` file is one named rewrite of a Cake IR program, with
//! preconditions, a parameter set and the cost-model hint (`C0xx`) or bottleneck it addresses.
//! This module is the engine that interprets them. A rewrite edits the syntax tree and the
//! canonical printer (`cake fmt`'s) writes the candidate; no rewrite touches source text.
//!
//! Kinds (the schema is in `kernel-evolution/README.md`):
//! * `set-const`: each of `choices` assigns integers to `const` declarations. Applies when the
//!   program declares every named const with a literal value (a const derived from others, like
//!   `const TN = 64 * WG`, follows its inputs and is never set directly).
//! * `pipeline-stages`: sets `stages` of one pipeline and of the shared regions it fills (the
//!   `dst` of every `tma_load(dst, src, P)`) to each of `values`. A one-stage region has no stage
//!   axis, so crossing 1 also rewrites the regions' uses: `c_s[dc]` ⇄ `c_s[P.stage, dc]`, bare
//!   `cn_s` ⇄ `cn_s[P.stage]`. Applies when the pipeline and its regions have literal, equal
//!   stage counts and a staged region is indexed by `P.stage` first everywhere.
//! * `grid-attr`: sets attribute `key` of the grid to each of `values`: `true`/`false` for a flag
//!   (`persistent`), an integer for a valued key (`group`; 0 removes it). `min_axes` is a
//!   precondition on the tile space.
//! * `set-attr`: sets `key` to each of `values` (byte counts, `"64B"`) on every declaration of
//!   the kinds in `items` (`smem`, `tensor`) that already has the key, all at once (a swizzle
//!   must agree between a TMA operand and its buffer).
//! * `loop-attr`: sets `key` (`unroll`) on every `for` loop whose variable is in `loops` to each
//!   of `values` (1 removes it).
//! * `structural`: `rewrite = "software-pipeline"` or `"deferred-release"`, a consumer loop's
//!   shape (`structural.rs`), one move per loop that matches; `"split-n"`, consumers that split
//!   the tile's rows split its columns instead (`split_n.rs`), one move per role that matches.
//!
//! Errors: `K101` a tactic file cannot be read or is not TOML of this schema; `K102` a tactic is
//! invalid (unknown kind, a field its kind needs, an empty parameter set, an unknown hint code or
//! bottleneck); `K103` the tactic directory is missing or holds no tactic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cake::cost::Bottleneck;
use cake::span::Span;
use cake::syntax::ast::{self, AttrValue, ExprKind, File, ForIter, Ident, IndexItem, ItemKind, StmtKind};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::{KevoError, Result};
use crate::structural::{self, Rewrite};

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TacticFile {
    name: String,
    doc: String,
    kind: String,
    #[serde(default)]
    hints: Vec<String>,
    #[serde(default)]
    bottlenecks: Vec<String>,
    #[serde(default)]
    choices: Vec<BTreeMap<String, i64>>,
    #[serde(default)]
    values: Vec<toml::Value>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    items: Vec<String>,
    #[serde(default)]
    loops: Vec<String>,
    #[serde(default)]
    min_axes: Option<usize>,
    #[serde(default)]
    rewrite: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    SetConst { choices: Vec<BTreeMap<String, i64>> },
    PipelineStages { values: Vec<i64> },
    GridAttr { key: String, values: Vec<toml::Value>, min_axes: usize },
    SetAttr { key: String, items: Vec<String>, values: Vec<u64> },
    LoopAttr { key: String, loops: Vec<String>, values: Vec<i64> },
    Structural { rewrite: Rewrite },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Tactic {
    pub name: String,
    pub doc: String,
    pub file: PathBuf,
    /// Cost-model hint codes (`C001`…) this tactic answers.
    pub hints: Vec<String>,
    /// Bottlenecks it addresses (`tensor-core`, `memory`, `epilogue`, `latency/sync`).
    pub bottlenecks: Vec<String>,
    pub kind: Kind,
}

/// One applicable rewrite: the tactic, its parameters (as recorded) and the new program.
#[derive(Clone, Debug)]
pub struct Move {
    pub tactic: String,
    pub params: Value,
    pub file: File,
}

fn bad(path: &Path, msg: impl Into<String>, help: impl Into<String>) -> KevoError {
    KevoError::new("K102", path.display().to_string(), msg, help)
}

fn ints(path: &Path, values: &[toml::Value], what: &str) -> Result<Vec<i64>> {
    values
        .iter()
        .map(|v| v.as_integer().ok_or_else(|| bad(path, format!("`values` of a {what} tactic must be integers, found `{v}`"), "write `values = [1, 2, 4]`")))
        .collect()
}

fn parse_bytes(s: &str) -> Option<u64> {
    s.strip_suffix('B').and_then(|n| n.parse().ok())
}

impl Tactic {
    pub fn from_toml(path: &Path, text: &str) -> Result<Tactic> {
        let f: TacticFile = toml::from_str(text)
            .map_err(|e| KevoError::new("K101", path.display().to_string(), format!("not a tactic file: {}", e.message().trim()), "see the tactic schema in kernel-evolution/README.md"))?;
        if f.name.is_empty() || f.doc.trim().is_empty() {
            return Err(bad(path, "a tactic needs a `name` and a `doc`", "say what the rewrite does and why it can help"));
        }
        for h in &f.hints {
            if !(h.len() == 4 && h.starts_with("C0") && cake::codes::lookup(h).is_some()) {
                return Err(bad(path, format!("`{h}` is not a cost-model hint code"), "use a code `cake explain` knows, C001…C007"));
            }
        }
        for b in &f.bottlenecks {
            if !Bottleneck::ALL.iter().any(|x| x.as_str() == b) {
                return Err(bad(path, format!("unknown bottleneck `{b}`"), "use tensor-core, memory, epilogue or latency/sync"));
            }
        }
        if f.hints.is_empty() && f.bottlenecks.is_empty() {
            return Err(bad(path, "the tactic names no hint code and no bottleneck", "say which `C0xx` hint or bottleneck it addresses"));
        }
        let need_key = || f.key.clone().ok_or_else(|| bad(path, format!("a `{}` tactic needs `key`", f.kind), "name the attribute it sets"));
        let kind = match f.kind.as_str() {
            "set-const" => {
                if f.choices.is_empty() || f.choices.iter().any(BTreeMap::is_empty) {
                    return Err(bad(path, "a `set-const` tactic needs non-empty `choices`", "write `choices = [{ WG = 1 }, { WG = 2 }]`"));
                }
                Kind::SetConst { choices: f.choices.clone() }
            }
            "pipeline-stages" => {
                let values = ints(path, &f.values, "pipeline-stages")?;
                if values.is_empty() || values.iter().any(|&v| v < 1) {
                    return Err(bad(path, "`values` must be stage counts ≥ 1", "write `values = [1, 2, 3, 4]`"));
                }
                Kind::PipelineStages { values }
            }
            "grid-attr" => {
                let key = need_key()?;
                if f.values.is_empty() || !f.values.iter().all(|v| v.is_bool() || v.is_integer()) {
                    return Err(bad(path, "`values` of a grid-attr tactic are booleans (a flag) or integers", "write `values = [true, false]` or `values = [0, 8, 16]`"));
                }
                Kind::GridAttr { key, values: f.values.clone(), min_axes: f.min_axes.unwrap_or(1) }
            }
            "set-attr" => {
                let key = need_key()?;
                let values: Option<Vec<u64>> = f.values.iter().map(|v| v.as_str().and_then(parse_bytes)).collect();
                let Some(values) = values.filter(|v| !v.is_empty()) else {
                    return Err(bad(path, "`values` of a set-attr tactic are byte counts", "write `values = [\"64B\", \"128B\"]`"));
                };
                if f.items.is_empty() || f.items.iter().any(|i| i != "smem" && i != "tensor") {
                    return Err(bad(path, "`items` must list `smem` and/or `tensor`", "write `items = [\"smem\", \"tensor\"]`"));
                }
                Kind::SetAttr { key, items: f.items.clone(), values }
            }
            "loop-attr" => {
                let key = need_key()?;
                let values = ints(path, &f.values, "loop-attr")?;
                if values.is_empty() || f.loops.is_empty() || values.iter().any(|&v| v < 1) {
                    return Err(bad(path, "a loop-attr tactic needs `loops` and `values` ≥ 1", "write `loops = [\"kt\"]` and `values = [1, 2]`"));
                }
                Kind::LoopAttr { key, loops: f.loops.clone(), values }
            }
            "structural" => {
                let Some(rewrite) = f.rewrite.as_deref().and_then(Rewrite::parse) else {
                    return Err(bad(path, format!("unknown structural rewrite {:?}", f.rewrite.as_deref().unwrap_or("(none)")), "write `rewrite = \"software-pipeline\"`, `\"deferred-release\"` or `\"split-n\"`"));
                };
                Kind::Structural { rewrite }
            }
            other => {
                return Err(bad(path, format!("unknown tactic kind `{other}`"), "use set-const, pipeline-stages, grid-attr, set-attr, loop-attr or structural"));
            }
        };
        Ok(Tactic { name: f.name, doc: f.doc, file: path.to_path_buf(), hints: f.hints, bottlenecks: f.bottlenecks, kind })
    }

    /// Every applicable, non-trivial rewrite of `file`, in a fixed order.
    pub fn moves(&self, file: &File) -> Vec<Move> {
        // A rewrite that prints the same program is no move.
        let original = cake::syntax::print(file);
        let mut moves = self.all_moves(file);
        moves.retain(|m| cake::syntax::print(&m.file) != original);
        moves
    }

    fn all_moves(&self, file: &File) -> Vec<Move> {
        let mv = |params: Value, file: File| Move { tactic: self.name.clone(), params, file };
        match &self.kind {
            Kind::SetConst { choices } => choices.iter().filter_map(|c| set_consts(file, c).map(|f| mv(json!(c), f))).collect(),
            Kind::PipelineStages { values } => {
                let mut out = Vec::new();
                for p in pipelines(file) {
                    for &v in values {
                        if let Some(f) = set_pipeline_stages(file, &p, v) {
                            out.push(mv(json!({ "pipeline": p, "stages": v }), f));
                        }
                    }
                }
                out
            }
            Kind::GridAttr { key, values, min_axes } => values
                .iter()
                .filter_map(|v| set_grid_attr(file, key, v, *min_axes).map(|f| mv(json!({ key.as_str(): toml_to_json(v) }), f)))
                .collect(),
            Kind::SetAttr { key, items, values } => values
                .iter()
                .filter_map(|&v| set_item_attr(file, key, items, v).map(|f| mv(json!({ key.as_str(): format!("{v}B") }), f)))
                .collect(),
            Kind::LoopAttr { key, loops, values } => values
                .iter()
                .filter_map(|&v| set_loop_attr(file, key, loops, v).map(|f| mv(json!({ key.as_str(): v, "loops": loops }), f)))
                .collect(),
            Kind::Structural { rewrite } => structural::moves(file, *rewrite).into_iter().map(|(k, f)| mv(json!({ "loop": k }), f)).collect(),
        }
    }
}

fn toml_to_json(v: &toml::Value) -> Value {
    match v {
        toml::Value::Boolean(b) => json!(b),
        toml::Value::Integer(i) => json!(i),
        other => json!(other.to_string()),
    }
}

/// Every tactic in `dir` (`*.toml`), sorted by file name so the search's move order is fixed.
pub fn load_dir(dir: &Path) -> Result<Vec<Tactic>> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        KevoError::new("K103", dir.display().to_string(), format!("cannot read the tactic directory: {e}"), "set `search.tactics` in the contract to a directory of tactic files")
    })?;
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "toml")).collect();
    paths.sort();
    let mut tactics = Vec::new();
    for p in paths {
        let text = std::fs::read_to_string(&p).map_err(|e| KevoError::new("K101", p.display().to_string(), format!("cannot read: {e}"), "check the file's permissions"))?;
        let t = Tactic::from_toml(&p, &text)?;
        if tactics.iter().any(|x: &Tactic| x.name == t.name) {
            return Err(bad(&p, format!("a second tactic named `{}`", t.name), "give every tactic its own name"));
        }
        tactics.push(t);
    }
    if tactics.is_empty() {
        return Err(KevoError::new("K103", dir.display().to_string(), "no tactic files (`*.toml`)", "add tactics, e.g. copy kernel-evolution/tactics/"));
    }
    Ok(tactics)
}

// ─── Rewrites ────────────────────────────────────────────────────────────────────────────────────

fn int_expr(v: i64, span: Span) -> ast::Expr {
    if v < 0 {
        let operand = Box::new(ast::Expr { kind: ExprKind::Int(-v), span });
        return ast::Expr { kind: ExprKind::Unary { op: ast::UnOp::Neg, operand }, span };
    }
    ast::Expr { kind: ExprKind::Int(v), span }
}

fn ident(name: &str) -> Ident {
    Ident { name: name.to_string(), span: Span::default() }
}

fn literal(e: &ast::Expr) -> Option<i64> {
    match &e.kind {
        ExprKind::Int(v) => Some(*v),
        ExprKind::Paren(x) => literal(x),
        _ => None,
    }
}

fn set_consts(file: &File, choice: &BTreeMap<String, i64>) -> Option<File> {
    let mut out = file.clone();
    let mut changed = false;
    for (name, &v) in choice {
        let value = out.items.iter_mut().find_map(|it| match &mut it.kind {
            ItemKind::Const { name: n, value } if n.name == *name => Some(value),
            _ => None,
        })?;
        let current = literal(value)?;
        if current != v {
            *value = int_expr(v, value.span);
            changed = true;
        }
    }
    changed.then_some(out)
}

fn attr<'a>(attrs: &'a [ast::Attr], key: &str) -> Option<&'a ast::Attr> {
    attrs.iter().find(|a| a.key.name == key)
}

/// The literal value of an integer attribute; 1 when absent (`stages`' default).
fn stages_of(attrs: &[ast::Attr]) -> Option<i64> {
    match attr(attrs, "stages") {
        None => Some(1),
        Some(a) => match &a.value {
            AttrValue::Expr(e) => literal(e),
            _ => None,
        },
    }
}

fn set_int_attr(attrs: &mut Vec<ast::Attr>, key: &str, v: Option<i64>) {
    attrs.retain(|a| a.key.name != key);
    if let Some(v) = v {
        attrs.push(ast::Attr { key: ident(key), value: AttrValue::Expr(int_expr(v, Span::default())), span: Span::default() });
    }
}

fn pipelines(file: &File) -> Vec<String> {
    file.items
        .iter()
        .filter_map(|it| match &it.kind {
            ItemKind::Pipeline { name, .. } => Some(name.name.clone()),
            _ => None,
        })
        .collect()
}

fn bodies(file: &File) -> impl Iterator<Item = &ast::Block> {
    file.items.iter().filter_map(|it| match &it.kind {
        ItemKind::On { body, .. } => Some(body),
        _ => None,
    })
}

fn each_expr_in_block<'a>(b: &'a ast::Block, f: &mut dyn FnMut(&'a ast::Expr)) {
    for s in &b.stmts {
        match &s.kind {
            StmtKind::Let { value, .. } => each_expr(value, f),
            StmtKind::Reg { .. } => {}
            StmtKind::Assign { target, value } => {
                each_expr(target, f);
                each_expr(value, f);
            }
            StmtKind::Call(e) => each_expr(e, f),
            StmtKind::For { iter, body, .. } => {
                if let ForIter::Range { lo, hi } = iter {
                    each_expr(lo, f);
                    each_expr(hi, f);
                }
                each_expr_in_block(body, f);
            }
            StmtKind::If { cond, then_block, else_block } => {
                each_expr(cond, f);
                each_expr_in_block(then_block, f);
                if let Some(e) = else_block {
                    each_expr_in_block(e, f);
                }
            }
        }
    }
}

fn each_expr<'a>(e: &'a ast::Expr, f: &mut dyn FnMut(&'a ast::Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Field { base, .. } => each_expr(base, f),
        ExprKind::Index { base, items } => {
            each_expr(base, f);
            for it in items {
                match it {
                    IndexItem::At(x) => each_expr(x, f),
                    IndexItem::Window { start, len } => {
                        each_expr(start, f);
                        each_expr(len, f);
                    }
                    IndexItem::Full(_) => {}
                }
            }
        }
        ExprKind::Call { args, .. } => args.iter().for_each(|a| each_expr(&a.value, f)),
        ExprKind::Unary { operand, .. } => each_expr(operand, f),
        ExprKind::Binary { lhs, rhs, .. } => {
            each_expr(lhs, f);
            each_expr(rhs, f);
        }
        ExprKind::Paren(x) => each_expr(x, f),
        _ => {}
    }
}

fn map_exprs_in_block(b: &mut ast::Block, f: &mut dyn FnMut(&mut ast::Expr) -> bool) {
    for s in &mut b.stmts {
        match &mut s.kind {
            StmtKind::Let { value, .. } => map_expr(value, f),
            StmtKind::Reg { .. } => {}
            StmtKind::Assign { target, value } => {
                map_expr(target, f);
                map_expr(value, f);
            }
            StmtKind::Call(e) => map_expr(e, f),
            StmtKind::For { iter, body, .. } => {
                if let ForIter::Range { lo, hi } = iter {
                    map_expr(lo, f);
                    map_expr(hi, f);
                }
                map_exprs_in_block(body, f);
            }
            StmtKind::If { cond, then_block, else_block } => {
                map_expr(cond, f);
                map_exprs_in_block(then_block, f);
                if let Some(e) = else_block {
                    map_exprs_in_block(e, f);
                }
            }
        }
    }
}

/// Pre-order rewrite: `f` returns true when it replaced the node (its children are then left alone).
fn map_expr(e: &mut ast::Expr, f: &mut dyn FnMut(&mut ast::Expr) -> bool) {
    if f(e) {
        return;
    }
    match &mut e.kind {
        ExprKind::Field { base, .. } => map_expr(base, f),
        ExprKind::Index { base, items } => {
            map_expr(base, f);
            for it in items {
                match it {
                    IndexItem::At(x) => map_expr(x, f),
                    IndexItem::Window { start, len } => {
                        map_expr(start, f);
                        map_expr(len, f);
                    }
                    IndexItem::Full(_) => {}
                }
            }
        }
        ExprKind::Call { args, .. } => args.iter_mut().for_each(|a| map_expr(&mut a.value, f)),
        ExprKind::Unary { operand, .. } => map_expr(operand, f),
        ExprKind::Binary { lhs, rhs, .. } => {
            map_expr(lhs, f);
            map_expr(rhs, f);
        }
        ExprKind::Paren(x) => map_expr(x, f),
        _ => {}
    }
}

fn name_of(e: &ast::Expr) -> Option<&str> {
    match &e.kind {
        ExprKind::Name(id) => Some(&id.name),
        ExprKind::Index { base, .. } => name_of(base),
        ExprKind::Paren(x) => name_of(x),
        _ => None,
    }
}

fn is_stage_of(e: &ast::Expr, pipeline: &str) -> bool {
    matches!(&e.kind, ExprKind::Field { base, field } if field.name == "stage" && matches!(&base.kind, ExprKind::Name(id) if id.name == pipeline))
}

fn stage_expr(pipeline: &str) -> ast::Expr {
    let base = Box::new(ast::Expr { kind: ExprKind::Name(ident(pipeline)), span: Span::default() });
    ast::Expr { kind: ExprKind::Field { base, field: ident("stage") }, span: Span::default() }
}

/// The shared regions pipeline `p` fills: the `dst` of every `tma_load(dst, src, p)`.
fn regions_filled_by(file: &File, p: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for b in bodies(file) {
        each_expr_in_block(b, &mut |e| {
            if let ExprKind::Call { func, args } = &e.kind {
                if func.name == "tma_load" && args.len() == 3 && name_of(&args[2].value) == Some(p) {
                    if let Some(r) = name_of(&args[0].value) {
                        if !out.iter().any(|x| x == r) {
                            out.push(r.to_string());
                        }
                    }
                }
            }
        });
    }
    out
}

fn set_pipeline_stages(file: &File, p: &str, v: i64) -> Option<File> {
    let regions = regions_filled_by(file, p);
    if regions.is_empty() {
        return None;
    }
    let current = file.items.iter().find_map(|it| match &it.kind {
        ItemKind::Pipeline { name, attrs } if name.name == p => stages_of(attrs),
        _ => None,
    })?;
    if current == v {
        return None;
    }
    for r in &regions {
        let s = file.items.iter().find_map(|it| match &it.kind {
            ItemKind::Smem { name, attrs, .. } if name.name == *r => stages_of(attrs),
            _ => None,
        })?;
        if s != current {
            return None;
        }
    }
    // A staged region must be indexed by `p.stage` first at every use, or the stage axis cannot
    // be dropped (and a region shared with another pipeline is not this tactic's to restage).
    if current > 1 {
        let mut ok = true;
        for b in bodies(file) {
            each_expr_in_block(b, &mut |e| {
                if let ExprKind::Index { base, items } = &e.kind {
                    let staged_use = matches!(&base.kind, ExprKind::Name(id) if regions.contains(&id.name));
                    if staged_use && !matches!(items.first(), Some(IndexItem::At(x)) if is_stage_of(x, p)) {
                        ok = false;
                    }
                }
            });
        }
        if !ok {
            return None;
        }
    }
    let mut out = file.clone();
    for it in &mut out.items {
        match &mut it.kind {
            ItemKind::Pipeline { name, attrs } if name.name == p => set_int_attr(attrs, "stages", Some(v)),
            ItemKind::Smem { name, attrs, .. } if regions.contains(&name.name) => set_int_attr(attrs, "stages", Some(v)),
            _ => {}
        }
    }
    if (current == 1) != (v == 1) {
        let add = current == 1;
        for it in &mut out.items {
            if let ItemKind::On { body, .. } = &mut it.kind {
                map_exprs_in_block(body, &mut |e| restage(e, &regions, p, add));
            }
        }
    }
    Some(out)
}

/// Add or drop the stage index of a use of one of `regions`; true when `e` was such a use.
fn restage(e: &mut ast::Expr, regions: &[String], p: &str, add: bool) -> bool {
    let is_region = |x: &ast::Expr| matches!(&x.kind, ExprKind::Name(id) if regions.contains(&id.name));
    let bare = is_region(e);
    match &mut e.kind {
        ExprKind::Index { base, items } if is_region(base) => {
            if add {
                items.insert(0, IndexItem::At(stage_expr(p)));
            } else {
                items.remove(0);
                if items.is_empty() {
                    let b = (**base).clone();
                    *e = b;
                }
            }
            true
        }
        ExprKind::Name(_) if bare => {
            if add {
                let base = Box::new(e.clone());
                *e = ast::Expr { kind: ExprKind::Index { base, items: vec![IndexItem::At(stage_expr(p))] }, span: Span::default() };
            }
            true
        }
        _ => false,
    }
}

fn set_grid_attr(file: &File, key: &str, v: &toml::Value, min_axes: usize) -> Option<File> {
    let mut out = file.clone();
    let (axes, attrs) = out.items.iter_mut().find_map(|it| match &mut it.kind {
        ItemKind::Grid { axes, attrs, .. } => Some((axes.len(), attrs)),
        _ => None,
    })?;
    if axes < min_axes {
        return None;
    }
    match v {
        toml::Value::Boolean(on) => {
            attrs.retain(|a| a.key.name != key);
            if *on {
                attrs.push(ast::Attr { key: ident(key), value: AttrValue::Flag, span: Span::default() });
            }
        }
        toml::Value::Integer(n) => set_int_attr(attrs, key, (*n != 0).then_some(*n)),
        _ => return None,
    }
    Some(out)
}

fn set_item_attr(file: &File, key: &str, items: &[String], v: u64) -> Option<File> {
    let mut out = file.clone();
    let mut touched = 0;
    let mut changed = false;
    for it in &mut out.items {
        let attrs = match &mut it.kind {
            ItemKind::Smem { attrs, .. } if items.iter().any(|i| i == "smem") => attrs,
            ItemKind::Tensor { attrs, .. } if items.iter().any(|i| i == "tensor") => attrs,
            _ => continue,
        };
        let Some(a) = attrs.iter_mut().find(|a| a.key.name == key) else { continue };
        touched += 1;
        let new = AttrValue::Expr(ast::Expr { kind: ExprKind::Bytes(v), span: Span::default() });
        if !matches!(&a.value, AttrValue::Expr(ast::Expr { kind: ExprKind::Bytes(b), .. }) if *b == v) {
            a.value = new;
            changed = true;
        }
    }
    (touched > 0 && changed).then_some(out)
}

fn set_loop_attr(file: &File, key: &str, loops: &[String], v: i64) -> Option<File> {
    fn walk(b: &mut ast::Block, key: &str, loops: &[String], v: i64, found: &mut bool, changed: &mut bool) {
        for s in &mut b.stmts {
            match &mut s.kind {
                StmtKind::For { var, attrs, body, iter } => {
                    if loops.contains(&var.name) && matches!(iter, ForIter::Range { .. }) {
                        *found = true;
                        let current = attr(attrs, key).and_then(|a| match &a.value {
                            AttrValue::Expr(e) => literal(e),
                            _ => None,
                        });
                        let want = (v != 1).then_some(v);
                        if current != want {
                            set_int_attr(attrs, key, want);
                            *changed = true;
                        }
                    }
                    walk(body, key, loops, v, found, changed);
                }
                StmtKind::If { then_block, else_block, .. } => {
                    walk(then_block, key, loops, v, found, changed);
                    if let Some(e) = else_block {
                        walk(e, key, loops, v, found, changed);
                    }
                }
                _ => {}
            }
        }
    }
    let mut out = file.clone();
    let (mut found, mut changed) = (false, false);
    for it in &mut out.items {
        if let ItemKind::On { body, .. } = &mut it.kind {
            walk(body, key, loops, v, &mut found, &mut changed);
        }
    }
    (found && changed).then_some(out)
}
