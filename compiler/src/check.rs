//! Name resolution and type checking: syntax tree → typed IR.
//!
//! Declarations are resolved first (in a fixed order of kinds, so a pipeline may name a role
//! declared below it), then each role body. Operations are looked up in the op catalog and
//! checked against their catalog type rule (see `crate::pred`); ops and declarations the target
//! lacks are errors naming both. Codes: E02xx names and declarations, E03xx types and operations,
//! E04xx targets. Every code is documented in `compiler/diagnostics/types.toml`.

use std::collections::{HashMap, HashSet};

use crate::catalog::{Catalog, OpDef, OpForm, ParamKind, ResultRule};
use crate::diag::Diagnostic;
use crate::ir::*;
use crate::pred::{self, EvalError, Facts, Value};
use crate::span::Span;
use crate::syntax::ast::{self, AttrValue, BinOp, ExprKind as AK, UnOp};
use crate::target::{TargetInfo, TargetTable};
use crate::verify::{RuleSet, Validated};

/// What `cake check` learns about one source text.
pub struct CheckOutput {
    /// The syntax tree, when the text parsed.
    pub file: Option<ast::File>,
    /// The typed IR, when the syntax tree also type-checked without errors.
    pub module: Option<Module>,
    /// The verified program, when it also passed every verifier gate.
    pub validated: Option<Validated>,
    /// Every finding: syntax, then types, then the verifier's.
    pub diagnostics: Vec<Diagnostic>,
}

/// Parse, type-check and verify one `.cake` source text against the built-in catalog, targets
/// and verifier rules.
pub fn check_source(source: &str) -> CheckOutput {
    check_source_with(source, RuleSet::builtin())
}

/// [`check_source`] with a given verifier rule set — what `cake check` does with the rules
/// [`crate::rule_source::ActiveRules`] chose.
pub fn check_source_with(source: &str, rules: &RuleSet) -> CheckOutput {
    let file = match crate::syntax::parse(source) {
        Ok(file) => file,
        Err(diagnostics) => return CheckOutput { file: None, module: None, validated: None, diagnostics },
    };
    let targets = TargetTable::builtin();
    let (module, mut diagnostics) = check_file(&file, Catalog::builtin(), targets);
    let mut validated = None;
    if let Some(m) = &module {
        if let Some(target) = targets.get(&m.target) {
            let out = crate::verify::verify_with(m.clone(), target, rules);
            diagnostics.extend(out.findings);
            validated = out.validated;
        }
    }
    CheckOutput { file: Some(file), module, validated, diagnostics }
}

/// Type-check a parsed file. The module is returned only when there are no errors.
pub fn check_file(file: &ast::File, catalog: &Catalog, targets: &TargetTable) -> (Option<Module>, Vec<Diagnostic>) {
    let mut c = Checker {
        catalog,
        targets,
        target: None,
        m: Module::default(),
        globals: HashMap::new(),
        scopes: Vec::new(),
        diags: Vec::new(),
        errors: 0,
        role: None,
        poisoned: HashSet::new(),
        missing_ops: HashSet::new(),
        data_lets: HashMap::new(),
    };
    c.file(file);
    let failed = c.diags.iter().any(Diagnostic::is_error);
    (if failed { None } else { Some(c.m) }, c.diags)
}

#[derive(Clone, Copy)]
enum Global {
    Dim(Handle<DimDecl>),
    Const(Handle<ConstDecl>),
    Scalar(Handle<ScalarDecl>),
    Tensor(Handle<TensorDecl>),
    Grid,
    Smem(Handle<SmemDecl>),
    View(Handle<ViewDecl>),
    Role(Handle<RoleDecl>),
    Barrier(Handle<BarrierDecl>),
    Pipeline(Handle<PipelineDecl>),
}

impl Global {
    fn describe(self) -> &'static str {
        match self {
            Global::Dim(_) => "a dim",
            Global::Const(_) => "a constant",
            Global::Scalar(_) => "a scalar argument",
            Global::Tensor(_) => "a tensor argument",
            Global::Grid => "the tile space",
            Global::Smem(_) => "a shared region",
            Global::View(_) => "a shared view",
            Global::Role(_) => "a role",
            Global::Barrier(_) => "a barrier",
            Global::Pipeline(_) => "a pipeline",
        }
    }
}

struct Checker<'a> {
    catalog: &'a Catalog,
    targets: &'a TargetTable,
    target: Option<&'a TargetInfo>,
    m: Module,
    globals: HashMap<String, (Global, Span)>,
    scopes: Vec<HashMap<String, Handle<Local>>>,
    diags: Vec<Diagnostic>,
    /// Errors among `diags`, kept as they are pushed (counting them per item was quadratic).
    errors: usize,
    /// The role whose body is being checked.
    role: Option<Handle<RoleDecl>>,
    /// Declarations that failed to check: uses of them are silent errors, so one mistake is
    /// reported once.
    poisoned: HashSet<String>,
    /// Ops already reported as missing on the target (reported at their first use only).
    missing_ops: HashSet<String>,
    /// `let` names bound to one element read from a global tensor (`let id = Ids[r :+ 1]`),
    /// with their value: the candidates for a data-dependent index (E0325).
    data_lets: HashMap<Handle<Local>, Handle<Expr>>,
}

/// Checked attributes of one declaration, by key.
struct Attrs<'x> {
    map: Vec<(&'x str, &'x ast::Attr)>,
}

impl<'x> Attrs<'x> {
    fn get(&self, key: &str) -> Option<&'x ast::Attr> {
        self.map.iter().find(|(k, _)| *k == key).map(|(_, a)| *a)
    }
}

fn decl_spans(item: &ast::Item, name: &ast::Ident, attrs: &[ast::Attr]) -> DeclSpans {
    DeclSpans { item: item.span, name: name.span, attrs: attrs.iter().map(|a| (a.key.name.clone(), a.span)).collect() }
}

impl<'a> Checker<'a> {
    fn err(&mut self, d: Diagnostic) {
        self.errors += usize::from(d.is_error());
        self.diags.push(d);
    }

    // ---------------------------------------------------------------- declarations

    fn file(&mut self, file: &ast::File) {
        self.m.name = file.kernel.name.clone();
        self.m.target = file.target.name.clone();
        self.target = self.targets.get(&file.target.name);
        if self.target.is_none() {
            let known = self.targets.names();
            self.err(
                Diagnostic::error("E0401", format!("unknown target `{}`", file.target.name), file.target.span, "not a known target")
                    .with_help(format!("the targets are: {}", known.join(", "))),
            );
        }

        // Names are unique across all declarations; report every later duplicate.
        let mut seen: HashMap<&str, Span> = HashMap::new();
        let mut duplicate = vec![false; file.items.len()];
        for (i, item) in file.items.iter().enumerate() {
            let Some(name) = item_name(item) else { continue };
            if let Some(first) = seen.get(name.name.as_str()) {
                duplicate[i] = true;
                self.err(
                    Diagnostic::error("E0202", format!("`{}` is declared twice", name.name), name.span, "declared again here")
                        .with_secondary(*first, "first declared here")
                        .with_help("every declaration needs its own name"),
                );
            } else {
                seen.insert(&name.name, name.span);
            }
        }

        // Resolve declarations kind by kind so later kinds may refer to earlier ones. Constants
        // come first: a const is folded from literals and earlier consts only, and every other
        // kind (a dim's `multiple_of` included) may name one.
        let order: [fn(&ast::ItemKind) -> bool; 10] = [
            |k| matches!(k, ast::ItemKind::Const { .. }),
            |k| matches!(k, ast::ItemKind::Dim { .. }),
            |k| matches!(k, ast::ItemKind::Scalar { .. }),
            |k| matches!(k, ast::ItemKind::Tensor { .. }),
            |k| matches!(k, ast::ItemKind::Grid { .. }),
            |k| matches!(k, ast::ItemKind::Smem { .. }),
            |k| matches!(k, ast::ItemKind::View { .. }),
            |k| matches!(k, ast::ItemKind::Role { .. }),
            |k| matches!(k, ast::ItemKind::Barrier { .. } | ast::ItemKind::Pipeline { .. }),
            |k| matches!(k, ast::ItemKind::On { .. }),
        ];
        for is_kind in order {
            for (i, item) in file.items.iter().enumerate() {
                if is_kind(&item.kind) && !duplicate[i] {
                    self.item(item);
                }
            }
        }
    }

    fn define(&mut self, name: &ast::Ident, g: Global) {
        self.globals.insert(name.name.clone(), (g, name.span));
    }

    /// Check attribute keys against the allowed list; report unknown and repeated keys.
    fn attrs<'x>(&mut self, what: &str, attrs: &'x [ast::Attr], allowed: &[&str]) -> Attrs<'x> {
        let mut map: Vec<(&'x str, &'x ast::Attr)> = Vec::new();
        for a in attrs {
            let key = a.key.name.as_str();
            if !allowed.contains(&key) {
                let help = if allowed.is_empty() {
                    format!("{what} takes no attributes")
                } else {
                    format!("{what} takes: {}", allowed.join(", "))
                };
                self.err(
                    Diagnostic::error("E0307", format!("unknown attribute `{key}` on {what}"), a.key.span, "not an attribute here")
                        .with_help(help),
                );
            } else if let Some((_, first)) = map.iter().find(|(k, _)| *k == key) {
                self.err(
                    Diagnostic::error("E0308", format!("attribute `{key}` given twice"), a.span, "repeated here")
                        .with_secondary(first.span, "first given here")
                        .with_help("give each attribute once"),
                );
            } else {
                map.push((key, a));
            }
        }
        Attrs { map }
    }

    fn missing_attr(&mut self, what: &str, key: &str, span: Span, example: &str) {
        self.err(
            Diagnostic::error("E0306", format!("{what} needs a `{key}` attribute"), span, format!("`{key}` missing"))
                .with_help(format!("for example: {example}")),
        );
    }

    fn attr_expr<'x>(&mut self, a: &'x ast::Attr) -> Option<&'x ast::Expr> {
        match &a.value {
            AttrValue::Expr(e) => Some(e),
            _ => {
                self.err(
                    Diagnostic::error("E0308", format!("attribute `{}` takes a single value", a.key.name), a.span, "expected one value")
                        .with_help(format!("write `{} VALUE`", a.key.name)),
                );
                None
            }
        }
    }

    fn attr_const(&mut self, a: &ast::Attr) -> Option<i64> {
        let e = self.attr_expr(a)?;
        self.const_int(e)
    }

    fn attr_positive(&mut self, a: &ast::Attr) -> Option<u32> {
        let v = self.attr_const(a)?;
        match u32::try_from(v) {
            Ok(v) if v > 0 => Some(v),
            _ => {
                self.err(
                    Diagnostic::error("E0308", format!("`{}` must be a positive integer, found {v}", a.key.name), a.span, "out of range")
                        .with_help("use a value of at least 1"),
                );
                None
            }
        }
    }

    fn attr_list_const(&mut self, a: &ast::Attr) -> Option<Vec<i64>> {
        match &a.value {
            AttrValue::List(items, _) => items.iter().map(|e| self.const_int(e)).collect(),
            _ => {
                self.err(
                    Diagnostic::error("E0308", format!("attribute `{}` takes a list", a.key.name), a.span, "expected `[a, b, ...]`")
                        .with_help(format!("write `{} [128, 64]`", a.key.name)),
                );
                None
            }
        }
    }

    fn attr_swizzle(&mut self, a: &ast::Attr) -> Option<Swizzle> {
        let e = self.attr_expr(a)?;
        match &e.kind {
            AK::Bytes(b) if Swizzle::from_bytes(*b).is_some() => Swizzle::from_bytes(*b),
            _ => {
                self.err(
                    Diagnostic::error("E0308", "a swizzle is `32B`, `64B` or `128B`", e.span, "not a swizzle mode")
                        .with_help("write `swizzle 128B` (the byte span of the XOR pattern)"),
                );
                None
            }
        }
    }

    fn attr_role(&mut self, e: &ast::Expr) -> Option<Handle<RoleDecl>> {
        match &e.kind {
            AK::Name(id) => match self.globals.get(&id.name) {
                Some((Global::Role(r), _)) => Some(*r),
                Some((g, decl)) => {
                    let (g, decl) = (*g, *decl);
                    self.err(
                        Diagnostic::error("E0208", format!("`{}` is {}, not a role", id.name, g.describe()), e.span, "expected a role")
                            .with_secondary(decl, "declared here")
                            .with_help("name a role declared with `role NAME: warpgroup ...`"),
                    );
                    None
                }
                None => {
                    self.undefined(id, "role");
                    None
                }
            },
            _ => {
                self.err(
                    Diagnostic::error("E0208", "expected a role name", e.span, "expected a role")
                        .with_help("name a role declared with `role NAME: warpgroup ...`"),
                );
                None
            }
        }
    }

    fn attr_roles(&mut self, a: &ast::Attr) -> Vec<Handle<RoleDecl>> {
        match &a.value {
            AttrValue::Expr(e) => self.attr_role(e).into_iter().collect(),
            AttrValue::List(items, _) => items.iter().filter_map(|e| self.attr_role(e)).collect(),
            _ => {
                self.err(
                    Diagnostic::error("E0308", format!("attribute `{}` takes a role or a list of roles", a.key.name), a.span, "expected roles")
                        .with_help(format!("write `{} load` or `{} [load, epilogue]`", a.key.name, a.key.name)),
                );
                Vec::new()
            }
        }
    }

    fn need_feature(&mut self, feature: &str, span: Span, what: &str) {
        let Some(t) = self.target else { return };
        if !t.has(feature) {
            let having: Vec<&str> = self.targets.names().into_iter().filter(|n| self.targets.get(n).is_some_and(|t| t.has(feature))).collect();
            self.err(
                Diagnostic::error("E0403", format!("{what} needs `{feature}`, which target `{}` does not have", t.name), span, format!("needs `{feature}`"))
                    .with_note(format!("targets with `{feature}`: {}", if having.is_empty() { "none".to_string() } else { having.join(", ") }))
                    .with_help("change the kernel's target or drop this attribute; Cake never steps down silently"),
            );
        }
    }

    fn dtype(&mut self, id: &ast::Ident) -> Option<DType> {
        let d = DType::parse(&id.name);
        if d.is_none() {
            let all: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
            self.err(
                Diagnostic::error("E0203", format!("unknown dtype `{}`", id.name), id.span, "not a dtype")
                    .with_help(format!("the dtypes are: {}", all.join(", "))),
            );
        }
        d
    }

    fn const_shape(&mut self, ty: &ast::TypeExpr, what: &str) -> Option<(DType, Vec<i64>)> {
        let dtype = self.dtype(&ty.dtype);
        let Some(dims) = &ty.shape else {
            self.err(
                Diagnostic::error("E0309", format!("{what} needs a shape"), ty.span, "no shape")
                    .with_help(format!("write the shape in brackets, e.g. `{}[128, 64]`", ty.dtype.name)),
            );
            return None;
        };
        let mut shape = Vec::new();
        for d in dims {
            let v = self.const_int(d)?;
            if v <= 0 {
                self.err(
                    Diagnostic::error("E0309", format!("a {what} dimension must be positive, found {v}"), d.span, "not positive")
                        .with_help("shapes are positive compile-time integers"),
                );
                return None;
            }
            shape.push(v);
        }
        self.within_32_bits(&shape, ty.span, what)?;
        Some((dtype?, shape))
    }

    /// A constant shape (a buffer's, a fragment's, a TMA box's) counts at most `i32::MAX`
    /// elements: the kernel indexes with 32-bit `int`s, and every later stage multiplies extents
    /// (bytes, strides, boxes) in 64 bits, which then cannot overflow. E0324 past it.
    fn within_32_bits(&mut self, shape: &[i64], span: Span, what: &str) -> Option<()> {
        let limit = i64::from(i32::MAX);
        let elements = shape.iter().try_fold(1i64, |acc, &d| acc.checked_mul(d).filter(|n| *n <= limit));
        if elements.is_none() {
            let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
            self.err(
                Diagnostic::error("E0324", format!("a {what} of [{}] holds more than {limit} elements", dims.join(", ")), span, "too large")
                    .with_help("the kernel indexes with 32-bit integers: a constant shape holds at most 2^31 - 1 elements"),
            );
            return None;
        }
        Some(())
    }

    fn item(&mut self, item: &ast::Item) {
        let errors_before = self.error_count();
        self.item_inner(item);
        // A declaration that had errors is poisoned: its uses check silently as errors, so one
        // mistake is reported once, at the declaration.
        if self.error_count() > errors_before {
            if let Some(name) = item_name(item) {
                self.poisoned.insert(name.name.clone());
            }
        }
    }

    fn error_count(&self) -> usize {
        self.errors
    }

    fn item_inner(&mut self, item: &ast::Item) {
        match &item.kind {
            ast::ItemKind::Dim { name, attrs } => {
                let at = self.attrs("a dim", attrs, &["multiple_of"]);
                let multiple_of = at.get("multiple_of").and_then(|a| self.attr_positive(a)).map(i64::from);
                let h = self.m.dims.append(DimDecl { name: name.name.clone(), multiple_of }, decl_spans(item, name, attrs));
                self.define(name, Global::Dim(h));
            }
            ast::ItemKind::Const { name, value } => {
                let v = self.const_int(value).unwrap_or(0);
                let h = self.m.consts.append(ConstDecl { name: name.name.clone(), value: v }, decl_spans(item, name, &[]));
                self.define(name, Global::Const(h));
            }
            ast::ItemKind::Scalar { name, ty, attrs } => {
                self.attrs("a scalar argument", attrs, &[]);
                if ty.shape.is_some() {
                    self.err(
                        Diagnostic::error("E0309", "a scalar argument has no shape", ty.span, "shape given")
                            .with_help("declare tensors with `in NAME: DTYPE[...]`"),
                    );
                }
                let dtype = self.dtype(&ty.dtype).unwrap_or(DType::I32);
                let h = self.m.scalars.append(ScalarDecl { name: name.name.clone(), dtype }, decl_spans(item, name, attrs));
                self.define(name, Global::Scalar(h));
            }
            ast::ItemKind::Tensor { access, name, ty, attrs } => self.tensor(item, *access, name, ty, attrs),
            ast::ItemKind::Grid { name, axes, attrs } => self.grid(item, name, axes, attrs),
            ast::ItemKind::Smem { name, ty, attrs } => {
                let at = self.attrs("a shared region", attrs, &["stages", "swizzle", "align"]);
                let stages = at.get("stages").and_then(|a| self.attr_positive(a)).unwrap_or(1);
                let swizzle = at.get("swizzle").and_then(|a| self.attr_swizzle(a)).unwrap_or(Swizzle::None);
                let align = at.get("align").and_then(|a| self.attr_positive(a));
                let (dtype, shape) = self.const_shape(ty, "shared region").unwrap_or((DType::BF16, vec![1]));
                let decl = SmemDecl { name: name.name.clone(), dtype, shape, stages, swizzle, align };
                let h = self.m.smem.append(decl, decl_spans(item, name, attrs));
                self.define(name, Global::Smem(h));
            }
            ast::ItemKind::View { name, ty, attrs } => {
                let at = self.attrs("a shared view", attrs, &["of", "offset", "swizzle"]);
                let region = match at.get("of") {
                    Some(a) => self.attr_expr(a).and_then(|e| match &e.kind {
                        AK::Name(id) => match self.globals.get(&id.name) {
                            Some((Global::Smem(s), _)) => Some(*s),
                            _ => {
                                self.err(
                                    Diagnostic::error("E0208", format!("`{}` is not a shared region", id.name), e.span, "expected a `smem` name")
                                        .with_help("a view is a window onto a region declared with `smem`"),
                                );
                                None
                            }
                        },
                        _ => None,
                    }),
                    None => {
                        self.missing_attr("a shared view", "of", name.span, "view c_s: bf16[64, 256] of a_s offset 0");
                        None
                    }
                };
                let offset = at.get("offset").and_then(|a| self.attr_const(a)).unwrap_or(0);
                let swizzle = at.get("swizzle").and_then(|a| self.attr_swizzle(a)).unwrap_or(Swizzle::None);
                let shape = self.const_shape(ty, "shared view");
                if let (Some(region), Some((dtype, shape))) = (region, shape) {
                    let decl = ViewDecl { name: name.name.clone(), dtype, shape, region, offset, swizzle };
                    let h = self.m.views.append(decl, decl_spans(item, name, attrs));
                    self.define(name, Global::View(h));
                } else {
                    self.poisoned.insert(name.name.clone());
                }
            }
            ast::ItemKind::Role { name, attrs } => self.role_decl(item, name, attrs),
            ast::ItemKind::Barrier { name, attrs } => {
                let at = self.attrs("a barrier", attrs, &["stages", "count", "producer", "consumer"]);
                let stages = at.get("stages").and_then(|a| self.attr_positive(a)).unwrap_or(1);
                let count = match at.get("count") {
                    Some(a) => self.attr_positive(a).unwrap_or(1),
                    None => {
                        self.missing_attr("a barrier", "count", name.span, "barrier done: count 1 producer mma consumer load");
                        1
                    }
                };
                let producers = at.get("producer").map(|a| self.attr_roles(a)).unwrap_or_default();
                let consumers = at.get("consumer").map(|a| self.attr_roles(a)).unwrap_or_default();
                self.need_feature("mbarrier", item.span, "a barrier");
                let decl = BarrierDecl { name: name.name.clone(), stages, count, producers, consumers };
                let h = self.m.barriers.append(decl, decl_spans(item, name, attrs));
                self.define(name, Global::Barrier(h));
            }
            ast::ItemKind::Pipeline { name, attrs } => {
                let at = self.attrs("a pipeline", attrs, &["stages", "producer", "consumer"]);
                let example = "pipeline ab: stages 4 producer load consumer mma";
                let stages = match at.get("stages") {
                    Some(a) => self.attr_positive(a),
                    None => {
                        self.missing_attr("a pipeline", "stages", name.span, example);
                        None
                    }
                };
                let one_role = |c: &mut Self, key: &str| match at.get(key) {
                    Some(a) => c.attr_expr(a).and_then(|e| c.attr_role(e)),
                    None => {
                        c.missing_attr("a pipeline", key, name.span, example);
                        None
                    }
                };
                let producer = one_role(self, "producer");
                let consumer = one_role(self, "consumer");
                self.need_feature("mbarrier", item.span, "a pipeline");
                if let (Some(stages), Some(producer), Some(consumer)) = (stages, producer, consumer) {
                    let decl = PipelineDecl { name: name.name.clone(), stages, producer, consumer };
                    let h = self.m.pipelines.append(decl, decl_spans(item, name, attrs));
                    self.define(name, Global::Pipeline(h));
                } else {
                    self.poisoned.insert(name.name.clone());
                }
            }
            ast::ItemKind::On { role, body } => self.on(item, role, body),
        }
    }

    fn tensor(&mut self, item: &ast::Item, access: ast::Access, name: &ast::Ident, ty: &ast::TypeExpr, attrs: &[ast::Attr]) {
        let at = self.attrs("a tensor argument", attrs, &["tma", "swizzle"]);
        let dtype = self.dtype(&ty.dtype).unwrap_or(DType::BF16);
        let shape: Vec<Size> = match &ty.shape {
            Some(dims) => dims
                .iter()
                .map(|d| match self.size(d) {
                    Some(Size::Const(v)) if v <= 0 => {
                        self.err(
                            Diagnostic::error("E0309", format!("a tensor dimension must be positive, found {v}"), d.span, "not positive")
                                .with_help("a constant extent is a positive integer; a size known at run time is a `dim`"),
                        );
                        Size::Const(1)
                    }
                    // A constant extent is indexed with the kernel's 32-bit integers (dims are
                    // checked at their binding: `cake cost` C102, the harness's shapes).
                    Some(Size::Const(v)) if self.within_32_bits(&[v], d.span, "tensor dimension").is_none() => Size::Const(1),
                    s => s.unwrap_or(Size::Const(1)),
                })
                .collect(),
            None => {
                self.err(
                    Diagnostic::error("E0309", "a tensor argument needs a shape", ty.span, "no shape")
                        .with_help(format!("write e.g. `{}[M, K]`; use `scalar` for a single value", ty.dtype.name)),
                );
                Vec::new()
            }
        };
        let tma = at.get("tma").and_then(|a| {
            self.need_feature("tma", a.span, "a TMA operand");
            let box_dims = self.attr_list_const(a)?;
            self.within_32_bits(&box_dims, a.span, "TMA box")?;
            if box_dims.len() != shape.len() {
                self.err(
                    Diagnostic::error(
                        "E0308",
                        format!("the TMA box has {} entries but `{}` has rank {}", box_dims.len(), name.name, shape.len()),
                        a.span,
                        "one box entry per dimension",
                    )
                    .with_secondary(ty.span, "the tensor's shape")
                    .with_help("give the box extent of every dimension, outermost first (1 for a dimension the box does not span)"),
                );
                return None;
            }
            Some(Tma { box_dims, swizzle: Swizzle::None })
        });
        let mut tma = tma;
        if let Some(a) = at.get("swizzle") {
            let sw = self.attr_swizzle(a);
            match (&mut tma, sw) {
                (Some(t), Some(sw)) => t.swizzle = sw,
                (None, Some(_)) if at.get("tma").is_none() => self.err(
                    Diagnostic::error("E0308", "`swizzle` on a tensor argument needs `tma`", a.span, "no TMA box declared")
                        .with_help("swizzle applies to TMA transfers: add `tma [box]` or drop `swizzle`"),
                ),
                _ => {}
            }
        }
        let decl = TensorDecl { name: name.name.clone(), access, dtype, shape, tma };
        let h = self.m.tensors.append(decl, decl_spans(item, name, attrs));
        self.define(name, Global::Tensor(h));
    }

    fn grid(&mut self, item: &ast::Item, name: &ast::Ident, axes: &[ast::Axis], attrs: &[ast::Attr]) {
        let first = self.m.grid.handles().next().map(|h| self.m.grid.span(h).item);
        if let Some(first) = first {
            self.err(
                Diagnostic::error("E0209", "a kernel has one tile space", item.span, "second `grid`")
                    .with_secondary(first, "the tile space is declared here")
                    .with_help("merge the axes into one `grid` declaration"),
            );
            return;
        }
        let at = self.attrs("the tile space", attrs, &["persistent", "group", "cluster"]);
        let persistent = at.get("persistent").is_some();
        let group = at.get("group").and_then(|a| {
            let g = self.attr_positive(a)?;
            if axes.len() < 2 {
                self.err(
                    Diagnostic::error("E0308", "`group` orders tiles over two axes, but this tile space has one", a.span, "needs two axes")
                        .with_help("declare the tile space with two axes (`grid tiles[m = M / 128, n = N / 256] group 8`), or drop `group`"),
                );
                return None;
            }
            Some(g)
        });
        let cluster = match at.get("cluster") {
            Some(a) => {
                let mut c = self.attr_list_const(a).unwrap_or_else(|| vec![1]);
                // Shapes the hardware cannot launch are the verifier's (V209, V228); a product
                // past 32 bits would overflow its arithmetic first.
                if self.within_32_bits(&c, a.span, "cluster").is_none() {
                    c = vec![1];
                }
                if c.iter().product::<i64>() > 1 {
                    self.need_feature("clusters", a.span, "a thread-block cluster");
                }
                c
            }
            None => vec![1],
        };
        let mut out = Vec::new();
        for (i, ax) in axes.iter().enumerate() {
            if let Some(prev) = axes[..i].iter().find(|p| p.name.name == ax.name.name) {
                self.err(
                    Diagnostic::error("E0202", format!("axis `{}` is declared twice", ax.name.name), ax.name.span, "declared again here")
                        .with_secondary(prev.name.span, "first declared here")
                        .with_help("name each axis of the tile space differently"),
                );
            }
            let extent = self.size(&ax.extent).unwrap_or(Size::Const(1));
            out.push(GridAxis { name: ax.name.name.clone(), extent });
        }
        let decl = GridDecl { name: name.name.clone(), axes: out, persistent, group, cluster };
        self.m.grid.append(decl, decl_spans(item, name, attrs));
        self.define(name, Global::Grid);
    }

    fn role_decl(&mut self, item: &ast::Item, name: &ast::Ident, attrs: &[ast::Attr]) {
        let at = self.attrs("a role", attrs, &["warp", "warpgroup", "regs"]);
        let unit = match (at.get("warp"), at.get("warpgroup")) {
            (Some(a), None) => Some((RoleUnit::Warp, a)),
            (None, Some(a)) => Some((RoleUnit::Warpgroup, a)),
            (Some(_), Some(b)) => {
                self.err(
                    Diagnostic::error("E0308", "a role is either `warp` or `warpgroup`, not both", b.span, "second unit")
                        .with_help("write `role NAME: warpgroup 1..3` or `role NAME: warp 0..4`"),
                );
                None
            }
            (None, None) => {
                self.missing_attr("a role", "warpgroup", name.span, "role mma: warpgroup 1..3 regs 232");
                None
            }
        };
        let range = unit.and_then(|(u, a)| {
            let (lo, hi) = match &a.value {
                AttrValue::Expr(e) => {
                    let lo = self.const_int(e)?;
                    // Saturating: i64::MAX is then the empty range the check below reports.
                    (lo, lo.saturating_add(1))
                }
                AttrValue::Range(lo, hi) => (self.const_int(lo)?, self.const_int(hi)?),
                _ => {
                    self.err(
                        Diagnostic::error("E0308", "a role takes an index or a range", a.span, "expected `N` or `LO..HI`")
                            .with_help("write `warpgroup 1..3` (warpgroups 1 and 2) or `warp 0`"),
                    );
                    return None;
                }
            };
            if lo < 0 || hi <= lo || hi > 32 {
                self.err(
                    Diagnostic::error("E0308", format!("the range {lo}..{hi} holds no {}s", if u == RoleUnit::Warp { "warp" } else { "warpgroup" }), a.span, "empty or out of range")
                        .with_help("ranges are half-open: `1..3` is 1 and 2"),
                );
                return None;
            }
            Some((u, lo as u32, (hi - lo) as u32))
        });
        let regs = at.get("regs").and_then(|a| {
            self.need_feature("setmaxnreg", a.span, "a register budget (`regs`, lowered to setmaxnreg)");
            self.attr_positive(a)
        });
        let (unit, first, count) = range.unwrap_or((RoleUnit::Warp, 0, 1));
        let decl = RoleDecl { name: name.name.clone(), unit, first, count, regs };
        let h = self.m.roles.append(decl, decl_spans(item, name, attrs));
        self.define(name, Global::Role(h));
    }

    fn on(&mut self, item: &ast::Item, role: &ast::Ident, body: &ast::Block) {
        let r = match self.globals.get(&role.name) {
            Some((Global::Role(r), _)) => *r,
            Some((g, decl)) => {
                let (g, decl) = (*g, *decl);
                self.err(
                    Diagnostic::error("E0208", format!("`{}` is {}, not a role", role.name, g.describe()), role.span, "expected a role")
                        .with_secondary(decl, "declared here")
                        .with_help("`on NAME { ... }` gives the body of a role declared with `role NAME: ...`"),
                );
                return;
            }
            None => {
                self.err(
                    Diagnostic::error("E0205", format!("`on {}` names no declared role", role.name), role.span, "unknown role")
                        .with_help(format!("declare it first: `role {}: warpgroup 0`", role.name)),
                );
                return;
            }
        };
        let prev = self.m.bodies.iter().find(|(_, b)| b.role == r).map(|(h, _)| *self.m.bodies.span(h));
        if let Some(prev_span) = prev {
            self.err(
                Diagnostic::error("E0206", format!("role `{}` has two bodies", role.name), role.span, "second body")
                    .with_secondary(prev_span, "first body here")
                    .with_help("merge them into one `on` block"),
            );
            return;
        }
        self.role = Some(r);
        self.scopes.push(HashMap::new());
        let block = self.block(body);
        self.scopes.pop();
        self.role = None;
        self.m.bodies.append(Body { role: r, block }, item.span);
    }

    // ---------------------------------------------------------------- constants and sizes

    fn const_int(&mut self, e: &ast::Expr) -> Option<i64> {
        match self.try_const(e) {
            Ok(v) => Some(v),
            Err(span) => {
                self.err(
                    Diagnostic::error("E0309", "expected a compile-time integer", span, "not known at compile time")
                        .with_help("use integer literals, `const` names and + - * / % of them"),
                );
                None
            }
        }
    }

    /// Fold a compile-time integer, or return the span of the first part that is not one.
    fn try_const(&self, e: &ast::Expr) -> Result<i64, Span> {
        match &e.kind {
            AK::Int(i) => Ok(*i),
            AK::Paren(x) => self.try_const(x),
            AK::Name(id) => match self.globals.get(&id.name) {
                Some((Global::Const(c), _)) => Ok(self.m.consts[*c].value),
                _ => Err(e.span),
            },
            AK::Unary { op: UnOp::Neg, operand } => Ok(self.try_const(operand)?.wrapping_neg()),
            AK::Binary { op, lhs, rhs } => {
                let (a, b) = (self.try_const(lhs)?, self.try_const(rhs)?);
                op.fold_int(a, b).ok_or(e.span)
            }
            _ => Err(e.span),
        }
    }

    /// A size over dims and constants (tensor shapes, tile-space extents).
    fn size(&mut self, e: &ast::Expr) -> Option<Size> {
        let s = self.try_size(e);
        if s.is_none() {
            self.err(
                Diagnostic::error("E0309", "expected a size", e.span, "not a size")
                    .with_help("sizes are integers, `dim` and `const` names, and + - * / of them"),
            );
        }
        s
    }

    fn try_size(&self, e: &ast::Expr) -> Option<Size> {
        if let Ok(v) = self.try_const(e) {
            return Some(Size::Const(v));
        }
        match &e.kind {
            AK::Paren(x) => self.try_size(x),
            AK::Name(id) => match self.globals.get(&id.name) {
                Some((Global::Dim(d), _)) => Some(Size::Dim(*d)),
                _ => None,
            },
            AK::Binary { op, lhs, rhs } => {
                let op = match op {
                    BinOp::Add => SizeOp::Add,
                    BinOp::Sub => SizeOp::Sub,
                    BinOp::Mul => SizeOp::Mul,
                    BinOp::Div => SizeOp::Div,
                    _ => return None,
                };
                Some(Size::Bin(op, Box::new(self.try_size(lhs)?), Box::new(self.try_size(rhs)?)))
            }
            _ => None,
        }
    }

    // ---------------------------------------------------------------- statements

    fn lookup_local(&self, name: &str) -> Option<Handle<Local>> {
        self.scopes.iter().rev().find_map(|s| s.get(name).copied())
    }

    fn declare_local(&mut self, name: &ast::Ident, kind: LocalKind, ty: Type) -> Handle<Local> {
        if let Some(prev) = self.lookup_local(&name.name) {
            let span = *self.m.locals.span(prev);
            self.err(
                Diagnostic::error("E0202", format!("`{}` is already defined here", name.name), name.span, "defined again")
                    .with_secondary(span, "first defined here")
                    .with_help("pick another name; Cake does not shadow names"),
            );
        } else if let Some((g, span)) = self.globals.get(&name.name) {
            let (g, span) = (*g, *span);
            self.err(
                Diagnostic::error("E0202", format!("`{}` is already {}", name.name, g.describe()), name.span, "defined again")
                    .with_secondary(span, "declared here")
                    .with_help("pick another name; Cake does not shadow names"),
            );
        }
        let h = self.m.locals.append(Local { name: name.name.clone(), kind, ty }, name.span);
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.name.clone(), h);
        }
        h
    }

    fn block(&mut self, b: &ast::Block) -> Block {
        self.scopes.push(HashMap::new());
        let stmts = b.stmts.iter().filter_map(|s| self.stmt(s).map(|st| self.m.stmts.append(st, s.span))).collect();
        self.scopes.pop();
        Block { stmts }
    }

    fn stmt(&mut self, s: &ast::Stmt) -> Option<Stmt> {
        Some(match &s.kind {
            ast::StmtKind::Reg { name, ty, attrs } => {
                let at = self.attrs("a register fragment", attrs, &["per"]);
                let scope = match at.get("per") {
                    Some(a) => self.attr_expr(a).and_then(|e| match &e.kind {
                        AK::Name(id) if id.name == "thread" => Some(Scope::Thread),
                        AK::Name(id) if id.name == "warp" => Some(Scope::Warp),
                        AK::Name(id) if id.name == "warpgroup" => Some(Scope::Warpgroup),
                        _ => {
                            self.err(
                                Diagnostic::error("E0308", "a fragment is held `per thread`, `per warp` or `per warpgroup`", e.span, "not a scope")
                                    .with_help("write e.g. `reg acc: f32[64, 256] per warpgroup`"),
                            );
                            None
                        }
                    }),
                    None => {
                        self.missing_attr("a register fragment", "per", name.span, "reg acc: f32[64, 256] per warpgroup");
                        None
                    }
                };
                let (dtype, shape) = self.const_shape(ty, "register fragment").unwrap_or((DType::F32, vec![1]));
                let ty = Type::Frag { dtype, shape, scope: Some(scope.unwrap_or(Scope::Thread)) };
                Stmt::Reg(self.declare_local(name, LocalKind::Reg, ty))
            }
            ast::StmtKind::Let { name, value } => {
                let v = self.expr(value);
                let ty = match &self.m.exprs[v].ty {
                    Type::Literal { float: false } => Type::Scalar(DType::I32),
                    Type::Literal { float: true } => Type::Scalar(DType::F32),
                    Type::Unit => {
                        self.err(
                            Diagnostic::error("E0319", "this operation returns nothing", value.span, "no value to bind")
                                .with_help("call it as a statement instead of binding it with `let`"),
                        );
                        Type::Error
                    }
                    t => t.clone(),
                };
                let local = self.declare_local(name, LocalKind::Let, ty);
                if crate::ir::is_global_read(&self.m, v) {
                    self.data_lets.insert(local, v);
                }
                Stmt::Let { local, value: v }
            }
            ast::StmtKind::Assign { target, value } => {
                let t = self.expr(target);
                let v = self.expr(value);
                self.check_assign(target, t, value, v);
                Stmt::Assign { target: t, value: v }
            }
            ast::StmtKind::Call(e) => {
                let AK::Call { func, args } = &e.kind else {
                    self.err(
                        Diagnostic::error("E0319", "this expression does nothing as a statement", e.span, "value unused")
                            .with_help("bind it with `let NAME = ...` or assign it to a fragment"),
                    );
                    return None;
                };
                let call = self.call(e, func, args, OpForm::Stmt)?;
                Stmt::Op(call)
            }
            ast::StmtKind::For { var, iter, attrs, body } => {
                let at = self.attrs("a loop", attrs, &["unroll"]);
                let unroll = at.get("unroll").and_then(|a| self.attr_positive(a));
                match iter {
                    ast::ForIter::Range { lo, hi } => {
                        let lo = self.int_expr(lo, "a loop bound");
                        let hi = self.int_expr(hi, "a loop bound");
                        self.scopes.push(HashMap::new());
                        let var = self.declare_local(var, LocalKind::LoopVar, Type::Scalar(DType::I32));
                        let body = self.block(body);
                        self.scopes.pop();
                        Stmt::For { var, lo, hi, unroll, body }
                    }
                    ast::ForIter::Tiles(space) => {
                        match self.globals.get(&space.name) {
                            Some((Global::Grid, _)) => {}
                            other => {
                                let d = Diagnostic::error("E0318", format!("`{}` is not the tile space", space.name), space.span, "expected the grid's name")
                                    .with_help("walk the tile space declared with `grid NAME[...]`, or write a range `lo..hi`");
                                let d = match other {
                                    Some((_, decl)) => d.with_secondary(*decl, "declared here"),
                                    None => d,
                                };
                                self.err(d);
                            }
                        }
                        if let Some(u) = unroll.and(at.get("unroll")) {
                            self.err(Diagnostic::error("E0307", "a tile loop cannot be unrolled", u.span, "not here").with_help("drop `unroll`"));
                        }
                        self.scopes.push(HashMap::new());
                        let var = self.declare_local(var, LocalKind::Tile, Type::Tile);
                        let body = self.block(body);
                        self.scopes.pop();
                        Stmt::ForTiles { var, body }
                    }
                }
            }
            ast::StmtKind::If { cond, then_block, else_block } => {
                let c = self.expr(cond);
                match &self.m.exprs[c].ty {
                    Type::Scalar(DType::Bool) | Type::Error => {}
                    t => {
                        let t = t.clone();
                        self.err(
                            Diagnostic::error("E0316", format!("a condition must be a scalar `bool`, found {t}"), cond.span, "not a bool")
                                .with_help("compare with `<`, `==`, ...; per-element choices use `select(c, a, b)`"),
                        );
                    }
                }
                let then_block = self.block(then_block);
                let else_block = else_block.as_ref().map(|b| self.block(b));
                Stmt::If { cond: c, then_block, else_block }
            }
        })
    }

    fn check_assign(&mut self, target: &ast::Expr, t: Handle<Expr>, value: &ast::Expr, v: Handle<Expr>) {
        // The place must be a register fragment or a part of one.
        let mut base = t;
        while let ExprKind::Index { base: b, .. } = &self.m.exprs[base].kind {
            base = *b;
        }
        let is_reg = matches!(&self.m.exprs[base].kind, ExprKind::Local(l) if self.m.locals[*l].kind == LocalKind::Reg);
        if !is_reg {
            if matches!(self.m.exprs[t].ty, Type::Error) {
                return;
            }
            self.err(
                Diagnostic::error("E0314", "only register fragments can be assigned", target.span, "not a `reg`")
                    .with_help("declare it with `reg NAME: DTYPE[...] per SCOPE`; memory is written with `store(...)`"),
            );
            return;
        }
        let (tt, vt) = (self.m.exprs[t].ty.clone(), self.m.exprs[v].ty.clone());
        if matches!(vt, Type::Error) {
            return;
        }
        let fits = value_shape(&vt).is_some_and(|vs| {
            let ts = tt.const_shape().unwrap_or_default();
            broadcast(&ts, &vs).is_some_and(|b| b == ts)
        }) && unify_dtype(&tt, &vt).is_some();
        if !fits {
            self.err(
                Diagnostic::error("E0315", format!("cannot assign {vt} to {tt}"), value.span, format!("this is {vt}"))
                    .with_secondary(target.span, format!("this is {tt}"))
                    .with_help("the value must have the fragment's dtype and a shape that broadcasts to it; convert with `cast(x, DTYPE)`"),
            );
        }
    }

    // ---------------------------------------------------------------- expressions

    fn push(&mut self, kind: ExprKind, ty: Type, span: Span) -> Handle<Expr> {
        self.m.exprs.append(Expr { kind, ty }, span)
    }

    fn int_expr(&mut self, e: &ast::Expr, what: &str) -> Handle<Expr> {
        let h = self.expr(e);
        self.int_check(h, e, what)
    }

    /// `int_expr` on a checked expression: an integer that depends on no tensor's data (a
    /// data-dependent index is only a bare `let` name indexing a global tensor: [`Self::data_index`]).
    fn int_check(&mut self, h: Handle<Expr>, e: &ast::Expr, what: &str) -> Handle<Expr> {
        if let Some(span) = self.data_read_in(h) {
            let d = Diagnostic::error("E0325", format!("{what} depends on tensor data here"), span, "read from memory").with_help(
                "a data-dependent index is a `let` of one element of an `in` tensor (`let id = Ids[r :+ 1]`) used bare to pick one row of a global tensor: `E[id, c * 64 :+ 64]`",
            );
            self.err(if span == e.span { d } else { d.with_secondary(e.span, what.to_string()) });
            return h;
        }
        let ty = self.m.exprs[h].ty.clone();
        if !is_int(&ty) && !matches!(ty, Type::Error) {
            self.err(
                Diagnostic::error("E0317", format!("{what} must be an integer, found {ty}"), e.span, "not an integer")
                    .with_help("use integer arithmetic over dims, loop variables and fields like `t.m`"),
            );
        }
        h
    }

    /// The data-dependent index item of a global window `h` (`E[id, ...]`), if it has one.
    fn data_indexed_window(&self, h: Handle<Expr>) -> Option<Handle<Expr>> {
        let ExprKind::Index { items, .. } = &self.m.exprs[h].kind else { return None };
        items.iter().find_map(|i| match i {
            IndexItem::At(x) if matches!(self.m.exprs[*x].kind, ExprKind::Local(l) if self.data_lets.contains_key(&l)) => Some(*x),
            _ => None,
        })
    }

    /// The span of a tensor read or a data-dependent `let` name inside `h`, if any.
    fn data_read_in(&self, h: Handle<Expr>) -> Option<Span> {
        let m = &self.m;
        let mut stack = vec![h];
        while let Some(x) = stack.pop() {
            match &m.exprs[x].kind {
                ExprKind::Local(l) if self.data_lets.contains_key(l) => return Some(*m.exprs.span(x)),
                ExprKind::Index { base, items } => {
                    if matches!(m.exprs[*base].kind, ExprKind::Tensor(_)) {
                        return Some(*m.exprs.span(x));
                    }
                    stack.push(*base);
                    for it in items {
                        match it {
                            IndexItem::At(i) | IndexItem::Window { start: i, .. } => stack.push(*i),
                            IndexItem::Full => {}
                        }
                    }
                }
                ExprKind::Unary(_, a) => stack.push(*a),
                ExprKind::Binary(_, a, b) => {
                    stack.push(*a);
                    stack.push(*b);
                }
                ExprKind::Call(c) => stack.extend(c.args.iter().flatten().copied()),
                _ => {}
            }
        }
        None
    }

    /// A data-dependent index `E[id, ...]` (`id` a `let` of a global read, `h` its use): an
    /// i32/u32 scalar — one element — of an `in` tensor, the same for the whole warp, picking
    /// one position of a global tensor (E0325 otherwise).
    fn data_index(&mut self, h: Handle<Expr>, x: &ast::Expr, base_ty: &Type, base: &ast::Expr) {
        let ExprKind::Local(l) = self.m.exprs[h].kind else { return };
        let v = self.data_lets[&l];
        let name = self.m.locals[l].name.clone();
        let vt = self.m.exprs[v].ty.clone();
        let Some(t) = crate::ir::tensor_of_read(&self.m, v) else { return };
        let (tname, access) = (self.m.tensors[t].name.clone(), self.m.tensors[t].access);
        let decl = self.m.tensors.span(t).item;
        let help = "a data-dependent index is a `let` of one i32 or u32 element of an `in` tensor (`let id = Ids[r :+ 1]`), used bare to pick one row of a global tensor: `E[id, c * 64 :+ 64]`";
        let fail = |why: String, label: &str, sec: String| Diagnostic::error("E0325", why, x.span, label.to_string()).with_secondary(decl, sec).with_help(help);
        if !matches!(base_ty, Type::Global { .. } | Type::Error) {
            let d = fail(
                format!("`{name}` (read from `{tname}`) indexes {base_ty}: a data-dependent index picks a row of a global tensor only"),
                "data-dependent index",
                format!("`{name}` reads `{tname}`, declared here"),
            );
            self.err(d.with_secondary(base.span, format!("this is {base_ty}")));
            return;
        }
        if access != ast::Access::In {
            let kw = if access == ast::Access::Out { "out" } else { "inout" };
            self.err(fail(
                format!("the index `{name}` is read from `{tname}`, an `{kw}` tensor, which the kernel may write while the index is in use"),
                "index from a written tensor",
                format!("`{tname}` is declared `{kw}` here"),
            ));
            return;
        }
        let dtype = vt.dtype();
        if !matches!(dtype, Some(DType::I32 | DType::U32)) {
            self.err(fail(
                format!("the index `{name}` is {vt}, not an i32 or u32 element"),
                "not an integer",
                format!("`{tname}` is declared {} here", dtype.map_or("?".to_string(), |d| d.to_string())),
            ));
            return;
        }
        let mut lane = None;
        let mut stack = vec![v];
        while let Some(y) = stack.pop() {
            match &self.m.exprs[y].kind {
                ExprKind::Field { field: Field::Lane, .. } => lane = Some(*self.m.exprs.span(y)),
                ExprKind::Index { items, .. } => stack.extend(items.iter().filter_map(|i| match i {
                    IndexItem::At(a) | IndexItem::Window { start: a, .. } => Some(*a),
                    IndexItem::Full => None,
                })),
                ExprKind::Unary(_, a) => stack.push(*a),
                ExprKind::Binary(_, a, b) => stack.extend([*a, *b]),
                _ => {}
            }
        }
        if let Some(ls) = lane {
            self.err(
                Diagnostic::error("E0325", format!("the index `{name}` depends on the lane: a data-dependent row is one per warp"), x.span, "lane-dependent index")
                    .with_secondary(ls, "the lane")
                    .with_help(help),
            );
            return;
        }
        let n: i64 = vt.const_shape().map_or(0, |s| s.iter().product());
        if n != 1 {
            let shape = vt.const_shape().unwrap_or_default();
            self.err(fail(
                format!("the index `{name}` is a window of {n} elements ({vt}), not one element: an index picks one position"),
                "not one element",
                format!("`{name}` reads `{tname}`, declared here; its window {shape:?} must be `:+ 1`"),
            ));
        }
    }

    fn undefined(&mut self, id: &ast::Ident, what: &str) {
        let mut names: Vec<&str> = self.globals.keys().map(String::as_str).collect();
        for s in &self.scopes {
            names.extend(s.keys().map(String::as_str));
        }
        let d = Diagnostic::error("E0201", format!("cannot find {what} `{}`", id.name), id.span, "not defined");
        let d = match crate::diag::closest(&id.name, names.into_iter()) {
            Some(n) => d.with_help(format!("did you mean `{n}`?")),
            None => d.with_help("declare it before use"),
        };
        self.err(d);
    }

    fn expr(&mut self, e: &ast::Expr) -> Handle<Expr> {
        let (kind, ty) = self.expr_inner(e);
        self.push(kind, ty, e.span)
    }

    fn expr_inner(&mut self, e: &ast::Expr) -> (ExprKind, Type) {
        let error = (ExprKind::Bool(false), Type::Error);
        match &e.kind {
            AK::Int(i) => (ExprKind::Int(*i), Type::Literal { float: false }),
            AK::Float(f) => (ExprKind::Float(f.clone()), Type::Literal { float: true }),
            AK::Bytes(_) => {
                self.err(
                    Diagnostic::error("E0310", "a byte count is not a value", e.span, "only for attributes like `swizzle 128B`")
                        .with_help("write a plain integer"),
                );
                error
            }
            AK::Bool(b) => (ExprKind::Bool(*b), Type::Scalar(DType::Bool)),
            AK::Inf => (ExprKind::Inf, Type::Literal { float: true }),
            AK::Paren(x) => {
                let h = self.expr(x);
                let ex = self.m.exprs[h].clone();
                (ex.kind, ex.ty)
            }
            AK::Name(id) => self.name(id),
            AK::Field { base, field } => self.field(base, field),
            AK::Index { base, items } => self.index(e, base, items),
            AK::Call { func, args } => match self.call(e, func, args, OpForm::Expr) {
                Some(call) => {
                    let ty = self.result_type(&call);
                    (ExprKind::Call(call), ty)
                }
                None => error,
            },
            AK::Unary { op, operand } => {
                let x = self.expr(operand);
                let ty = self.m.exprs[x].ty.clone();
                let ok = match op {
                    UnOp::Neg => value_shape(&ty).is_some() && ty.dtype().is_none_or(|d| d != DType::Bool),
                    UnOp::Not => ty.dtype() == Some(DType::Bool),
                };
                if !ok && !matches!(ty, Type::Error) {
                    let want = if *op == UnOp::Neg { "a number" } else { "a bool" };
                    self.err(
                        Diagnostic::error("E0311", format!("`{}` needs {want}, found {ty}", if *op == UnOp::Neg { "-" } else { "!" }), operand.span, format!("this is {ty}"))
                            .with_help("convert with `cast(x, DTYPE)` or compare to get a bool"),
                    );
                    return error;
                }
                (ExprKind::Unary(*op, x), as_value(&ty))
            }
            AK::Binary { op, lhs, rhs } => {
                let (a, b) = (self.expr(lhs), self.expr(rhs));
                match self.binary_type(*op, a, b, e.span, lhs.span, rhs.span) {
                    Some(ty) => (ExprKind::Binary(*op, a, b), ty),
                    None => error,
                }
            }
        }
    }

    fn name(&mut self, id: &ast::Ident) -> (ExprKind, Type) {
        if let Some(l) = self.lookup_local(&id.name) {
            return (ExprKind::Local(l), self.m.locals[l].ty.clone());
        }
        if self.poisoned.contains(&id.name) {
            return (ExprKind::Bool(false), Type::Error);
        }
        match self.globals.get(&id.name).map(|g| g.0) {
            Some(Global::Dim(d)) => (ExprKind::Dim(d), Type::Scalar(DType::I32)),
            Some(Global::Const(c)) => (ExprKind::Int(self.m.consts[c].value), Type::Literal { float: false }),
            Some(Global::Scalar(s)) => (ExprKind::Scalar(s), Type::Scalar(self.m.scalars[s].dtype)),
            Some(Global::Tensor(t)) => {
                let d = &self.m.tensors[t];
                (ExprKind::Tensor(t), Type::Global { tensor: t, dtype: d.dtype, shape: d.shape.clone(), window: false })
            }
            Some(Global::Grid) => (ExprKind::Tiles, Type::Tiles),
            Some(Global::Smem(s)) => {
                let d = &self.m.smem[s];
                let mut shape = d.shape.clone();
                if d.stages > 1 {
                    shape.insert(0, i64::from(d.stages));
                }
                (ExprKind::Smem(s), Type::Shared { dtype: d.dtype, shape, swizzle: d.swizzle })
            }
            Some(Global::View(v)) => {
                let d = &self.m.views[v];
                (ExprKind::View(v), Type::Shared { dtype: d.dtype, shape: d.shape.clone(), swizzle: d.swizzle })
            }
            Some(Global::Role(r)) => (ExprKind::Role(r), Type::Role(r)),
            Some(Global::Barrier(b)) => (ExprKind::Barrier(b), Type::Barrier(b)),
            Some(Global::Pipeline(p)) => (ExprKind::Pipeline(p), Type::Pipeline(p)),
            None => match DType::parse(&id.name) {
                Some(d) => (ExprKind::DTypeName(d), Type::DTypeName(d)),
                None => {
                    self.undefined(id, "a value named");
                    (ExprKind::Bool(false), Type::Error)
                }
            },
        }
    }

    fn field(&mut self, base: &ast::Expr, field: &ast::Ident) -> (ExprKind, Type) {
        let b = self.expr(base);
        let ty = self.m.exprs[b].ty.clone();
        let int = Type::Scalar(DType::I32);
        let bad = |c: &mut Self, fields: &str| {
            c.err(
                Diagnostic::error("E0204", format!("{ty} has no field `{}`", field.name), field.span, "unknown field")
                    .with_help(if fields.is_empty() { "it has no fields".to_string() } else { format!("its fields: {fields}") }),
            );
            (ExprKind::Bool(false), Type::Error)
        };
        match &ty {
            Type::Error => (ExprKind::Bool(false), Type::Error),
            Type::Pipeline(p) if field.name == "stage" => {
                let p = *p;
                let decl = &self.m.pipelines[p];
                if let Some(r) = self.role {
                    if r != decl.producer && r != decl.consumer {
                        let role = self.m.roles[r].name.clone();
                        let span = self.m.pipelines.span(p).item;
                        self.err(
                            Diagnostic::error("E0322", format!("role `{role}` does not take part in pipeline `{}`", decl.name), base.span.to(field.span), "no stage held here")
                                .with_secondary(span, "the pipeline names its producer and consumer here")
                                .with_help("only the pipeline's producer and consumer hold a stage"),
                        );
                    }
                }
                (ExprKind::Field { base: b, field: Field::Stage }, int)
            }
            Type::Pipeline(_) => bad(self, "stage"),
            Type::Tile => {
                let axes: Vec<String> = self.m.grid().map(|g| g.axes.iter().map(|a| a.name.clone()).collect()).unwrap_or_default();
                match axes.iter().position(|a| *a == field.name) {
                    Some(i) => (ExprKind::Field { base: b, field: Field::TileAxis(i) }, int),
                    None => bad(self, &axes.join(", ")),
                }
            }
            Type::Role(r) => {
                let r = *r;
                let f = match field.name.as_str() {
                    "warpgroup" => Field::Warpgroup,
                    "warp" => Field::Warp,
                    "lane" => Field::Lane,
                    _ => return bad(self, "warpgroup, warp, lane"),
                };
                let decl = &self.m.roles[r];
                if self.role != Some(r) {
                    let name = decl.name.clone();
                    self.err(
                        Diagnostic::error("E0323", format!("`{name}.{}` is only known inside `on {name}`", field.name), base.span.to(field.span), "read outside its role")
                            .with_help("warp identity belongs to the executing role; read it in that role's body"),
                    );
                } else if f == Field::Warpgroup && decl.unit == RoleUnit::Warp {
                    let name = decl.name.clone();
                    self.err(
                        Diagnostic::error("E0323", format!("role `{name}` is made of warps, so it has no `warpgroup` index"), field.span, "not a warpgroup role")
                            .with_help(format!("use `{name}.warp`, or declare the role with `warpgroup`")),
                    );
                }
                (ExprKind::Field { base: b, field: f }, int)
            }
            _ => bad(self, ""),
        }
    }

    fn index(&mut self, e: &ast::Expr, base: &ast::Expr, items: &[ast::IndexItem]) -> (ExprKind, Type) {
        let b = self.expr(base);
        let ty = self.m.exprs[b].ty.clone();
        let error = (ExprKind::Bool(false), Type::Error);
        let mut out = Vec::new();
        let shape: Vec<Size> = match &ty {
            Type::Error => return error,
            Type::Global { shape, .. } => shape.clone(),
            Type::Shared { shape, .. } | Type::Frag { shape, .. } => shape.iter().map(|d| Size::Const(*d)).collect(),
            Type::Barrier(bar) => {
                let bar = *bar;
                if items.len() != 1 {
                    self.err(Diagnostic::error("E0312", "a barrier array takes one index", e.span, "one index").with_help("write `bar[i]`"));
                    return error;
                }
                if let ast::IndexItem::At(i) = &items[0] {
                    let i = self.int_expr(i, "a barrier index");
                    return (ExprKind::Index { base: b, items: vec![IndexItem::At(i)] }, Type::Barrier(bar));
                }
                self.err(Diagnostic::error("E0312", "a barrier array takes one index", e.span, "one index").with_help("write `bar[i]`"));
                return error;
            }
            other => {
                self.err(
                    Diagnostic::error("E0312", format!("{other} cannot be indexed"), base.span, "not a tensor")
                        .with_help("index global tensors, shared regions and register fragments"),
                );
                return error;
            }
        };
        if items.len() > shape.len() {
            self.err(
                Diagnostic::error("E0312", format!("{} indices for a tensor of rank {}", items.len(), shape.len()), e.span, "too many indices")
                    .with_secondary(base.span, format!("this is {ty}"))
                    .with_help("give at most one index or window per dimension"),
            );
            return error;
        }
        let mut result = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item {
                ast::IndexItem::At(x) => {
                    let h = self.expr(x);
                    if matches!(self.m.exprs[h].kind, ExprKind::Local(l) if self.data_lets.contains_key(&l)) {
                        self.data_index(h, x, &ty, base);
                        out.push(IndexItem::At(h));
                    } else {
                        out.push(IndexItem::At(self.int_check(h, x, "an index")));
                    }
                }
                ast::IndexItem::Window { start, len } => {
                    let s = self.int_expr(start, "a window start");
                    let Some(n) = self.const_int(len) else { return error };
                    let extent = shape[i].as_const();
                    if n <= 0 || extent.is_some_and(|x| n > x) {
                        self.err(
                            Diagnostic::error("E0313", format!("a window of length {n} does not fit a dimension of {}", extent.map_or("symbolic size".to_string(), |x| x.to_string())), len.span, "bad window length")
                                .with_help("a window `start :+ len` needs 0 < len <= the dimension"),
                        );
                        return error;
                    }
                    out.push(IndexItem::Window { start: s, len: n });
                    result.push(Size::Const(n));
                }
                ast::IndexItem::Full(_) => {
                    out.push(IndexItem::Full);
                    result.push(shape[i].clone());
                }
            }
        }
        result.extend(shape[items.len()..].iter().cloned());
        let lens: Vec<i64> = out.iter().filter_map(|i| if let IndexItem::Window { len, .. } = i { Some(*len) } else { None }).collect();
        if self.within_32_bits(&lens, e.span, "window").is_none() {
            return error;
        }
        let kind = ExprKind::Index { base: b, items: out };
        let consts = || result.iter().map(|s| s.as_const().unwrap_or(1)).collect::<Vec<_>>();
        let ty = match ty {
            Type::Global { tensor, dtype, .. } => {
                if result.is_empty() {
                    Type::Scalar(dtype)
                } else {
                    Type::Global { tensor, dtype, shape: result, window: true }
                }
            }
            Type::Shared { dtype, swizzle, .. } => {
                if result.is_empty() {
                    Type::Scalar(dtype)
                } else {
                    Type::Shared { dtype, shape: consts(), swizzle }
                }
            }
            Type::Frag { dtype, scope, .. } => Type::Frag { dtype, shape: consts(), scope },
            _ => unreachable!("only indexable types reach here"),
        };
        (kind, ty)
    }

    fn binary_type(&mut self, op: BinOp, a: Handle<Expr>, b: Handle<Expr>, span: Span, ls: Span, rs: Span) -> Option<Type> {
        let (ta, tb) = (self.m.exprs[a].ty.clone(), self.m.exprs[b].ty.clone());
        if matches!(ta, Type::Error) || matches!(tb, Type::Error) {
            return None;
        }
        let (Some(sa), Some(sb)) = (value_shape(&ta), value_shape(&tb)) else {
            let (bad, bspan) = if value_shape(&ta).is_none() { (&ta, ls) } else { (&tb, rs) };
            self.err(
                Diagnostic::error("E0311", format!("`{}` needs values, found {bad}", op.symbol()), bspan, "not a value")
                    .with_help("arithmetic works on scalars, fragments and memory windows"),
            );
            return None;
        };
        let Some(shape) = broadcast(&sa, &sb) else {
            self.err(
                Diagnostic::error("E0310", format!("shapes {sa:?} and {sb:?} do not broadcast"), span, "shape mismatch")
                    .with_secondary(ls, format!("this is {ta}"))
                    .with_secondary(rs, format!("this is {tb}"))
                    .with_help("trailing dimensions must be equal or 1 (NumPy rules)"),
            );
            return None;
        };
        let Some(dtype) = unify_dtype(&ta, &tb) else {
            self.err(
                Diagnostic::error("E0311", format!("`{}` mixes {ta} and {tb}", op.symbol()), span, "dtype mismatch")
                    .with_secondary(ls, format!("this is {ta}"))
                    .with_secondary(rs, format!("this is {tb}"))
                    .with_help("convert one side with `cast(x, DTYPE)`"),
            );
            return None;
        };
        let scope = frag_scope(&ta).or(frag_scope(&tb));
        let make = |d: Option<DType>| -> Type {
            match (d, shape.is_empty()) {
                (None, _) => Type::Literal { float: matches!(ta, Type::Literal { float: true }) || matches!(tb, Type::Literal { float: true }) },
                (Some(d), true) => Type::Scalar(d),
                (Some(d), false) => Type::Frag { dtype: d, shape: shape.clone(), scope },
            }
        };
        let logical = matches!(op, BinOp::And | BinOp::Or);
        let compare = matches!(op, BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne);
        let bits = matches!(op, BinOp::Shl | BinOp::Shr | BinOp::Rem);
        let want_bool = logical;
        let is_bool = dtype == Some(DType::Bool);
        let literal_float = matches!(ta, Type::Literal { float: true }) || matches!(tb, Type::Literal { float: true });
        let ok = if want_bool {
            is_bool
        } else if compare {
            !is_bool || matches!(op, BinOp::Eq | BinOp::Ne)
        } else if bits {
            dtype.map_or(!literal_float, DType::is_int)
        } else {
            !is_bool
        };
        if !ok {
            let d = dtype.map_or("a literal".to_string(), |d| format!("`{d}`"));
            self.err(
                Diagnostic::error("E0311", format!("`{}` does not apply to {d}", op.symbol()), span, "wrong operand dtype")
                    .with_help(if want_bool { "`&&` and `||` combine bools" } else { "use numeric operands" }),
            );
            return None;
        }
        Some(if compare || logical { make(Some(DType::Bool)) } else { make(dtype) })
    }

    // ---------------------------------------------------------------- operations

    fn call(&mut self, e: &ast::Expr, func: &ast::Ident, args: &[ast::Arg], ctx: OpForm) -> Option<OpCall> {
        let catalog = self.catalog;
        let Some(op) = catalog.get(&func.name) else {
            let d = Diagnostic::error("E0301", format!("unknown operation `{}`", func.name), func.span, "not in the op catalog");
            let d = match crate::diag::closest(&func.name, catalog.ops.iter().map(|o| o.name.as_str())) {
                Some(n) => d.with_help(format!("did you mean `{n}`? `cake explain {n}` describes it")),
                None => d.with_help("operations come from the op catalog; `cake explain --list` lists them"),
            };
            self.err(d);
            for a in args {
                self.expr(&a.value);
            }
            return None;
        };
        if op.form != ctx {
            let (code, msg, help) = match ctx {
                OpForm::Stmt => ("E0319", format!("`{}` returns a value that is not used", op.name), "bind it: `let x = ...`, or assign it to a fragment"),
                OpForm::Expr => ("E0320", format!("`{}` is a statement, not a value", op.name), "call it on its own line"),
            };
            self.err(Diagnostic::error(code, msg, e.span, "here").with_help(help));
        }
        if let Some(t) = self.target {
            let missing: Vec<&String> = op.requires.iter().filter(|f| !t.has(f)).collect();
            if !missing.is_empty() && self.missing_ops.insert(op.name.clone()) {
                let having: Vec<&str> = self.targets.names().into_iter().filter(|n| self.targets.get(n).is_some_and(|t| op.requires.iter().all(|f| t.has(f)))).collect();
                let missing: Vec<String> = missing.iter().map(|f| format!("`{f}`")).collect();
                self.err(
                    Diagnostic::error("E0402", format!("`{}` is not available on target `{}`", op.name, t.name), func.span, format!("needs {}", missing.join(", ")))
                        .with_note(format!("`{}` exists on: {}", op.name, if having.is_empty() { "no known target".to_string() } else { having.join(", ") }))
                        .with_help("change the kernel's target or use an operation this target has; Cake never steps down silently"),
                );
            }
        }
        // Bind arguments to parameters: positional ones in order, named ones by name.
        let mut bound: Vec<Option<(Handle<Expr>, Span)>> = vec![None; op.params.len()];
        let mut next_positional = 0;
        let mut ok = true;
        for a in args {
            let h = self.expr(&a.value);
            let slot = match &a.name {
                Some(n) => match op.params.iter().position(|p| p.name == n.name) {
                    Some(i) => i,
                    None => {
                        let names: Vec<&str> = op.params.iter().map(|p| p.name.as_str()).collect();
                        self.err(
                            Diagnostic::error("E0303", format!("`{}` has no parameter `{}`", op.name, n.name), n.span, "unknown parameter")
                                .with_help(format!("its parameters: {}", names.join(", "))),
                        );
                        ok = false;
                        continue;
                    }
                },
                None => {
                    while next_positional < op.params.len() && op.params[next_positional].named {
                        next_positional += 1;
                    }
                    if next_positional >= op.params.len() {
                        self.err(
                            Diagnostic::error("E0302", format!("too many arguments to `{}`", op.name), a.span, "extra argument")
                                .with_help(format!("signature: {}", signature(op))),
                        );
                        ok = false;
                        continue;
                    }
                    next_positional += 1;
                    next_positional - 1
                }
            };
            if let Some((_, first)) = bound[slot] {
                self.err(
                    Diagnostic::error("E0303", format!("parameter `{}` given twice", op.params[slot].name), a.span, "given again")
                        .with_secondary(first, "first given here")
                        .with_help(format!("signature: {}", signature(op))),
                );
                ok = false;
                continue;
            }
            bound[slot] = Some((h, a.span));
        }
        for (p, b) in op.params.iter().zip(&bound) {
            if b.is_none() && !p.optional && ok {
                let how = if p.named { format!("`{}=...`", p.name) } else { format!("`{}`", p.name) };
                self.err(
                    Diagnostic::error("E0302", format!("`{}` needs {how}", op.name), e.span, format!("missing `{}`", p.name))
                        .with_help(format!("signature: {}", signature(op))),
                );
                ok = false;
            }
        }
        // Kinds, then the catalog's type rule.
        for (p, b) in op.params.iter().zip(&bound) {
            let Some((h, span)) = b else { continue };
            let ty = self.m.exprs[*h].ty.clone();
            if matches!(ty, Type::Error) {
                ok = false;
                continue;
            }
            if !kind_matches(&p.kind, &ty, &self.m.exprs[*h].kind) {
                self.err(
                    Diagnostic::error("E0304", format!("`{}` of `{}` must be {}, found {ty}", p.name, op.name, kind_name(&p.kind)), *span, format!("this is {ty}"))
                        .with_help(format!("signature: {}", signature(op))),
                );
                ok = false;
            }
        }
        if ok {
            self.type_rule(op, &bound, e.span, func.span);
        }
        // A data-dependent row is read as a value or written by `store` / an atomic (the
        // lowering guards those accesses); the ops that move memory by other paths (TMA,
        // cp.async, ...) do not take one.
        if ctx == OpForm::Stmt && !matches!(op.name.as_str(), "store" | "atomic_add" | "atomic_min" | "atomic_max") {
            for (h, span) in bound.iter().flatten() {
                if let Some(ix) = self.data_indexed_window(*h) {
                    self.err(
                        Diagnostic::error("E0325", format!("`{}` cannot take a window at a data-dependent index", op.name), *self.m.exprs.span(ix), "data-dependent index")
                            .with_secondary(*span, "this operand")
                            .with_help("a data-dependent index picks a row read as a value or written by `store` / `atomic_*`: `store(Out[r, :], E[id, :])`"),
                    );
                }
            }
        }
        Some(OpCall { op: op.name.clone(), args: bound.into_iter().map(|b| b.map(|(h, _)| h)).collect() })
    }

    fn type_rule(&mut self, op: &OpDef, bound: &[Option<(Handle<Expr>, Span)>], span: Span, name_span: Span) {
        let facts = ArgFacts { m: &self.m, op, bound };
        let mut findings = Vec::new();
        for (rule_index, (rule, parsed)) in op.type_rule.iter().zip(&op.type_rule_parsed).enumerate() {
            match pred::holds(parsed, &facts) {
                // Undecidable here (a run-time size, an omitted optional argument): the verifier
                // decides, or reports a coverage limit.
                Ok(Some(true)) | Ok(None) => {}
                Ok(Some(false)) => findings.push(self.type_rule_finding(op, rule_index, parsed, bound, &facts, span)),
                Err(err) => findings.push(
                    Diagnostic::error("E0399", format!("catalog type rule of `{}` cannot be evaluated: {err}", op.name), span, "while checking this call")
                        .with_note(format!("rule: {rule}"))
                        .with_help(format!("fix the rule in {}", op.file)),
                ),
            }
        }
        // Features needed only for some argument types (fp8 operands, say).
        if let Some(t) = self.target {
            for cond in &op.requires_when {
                let Ok(when) = pred::parse(&cond.when) else { continue };
                if pred::holds(&when, &facts) != Ok(Some(true)) {
                    continue;
                }
                let missing: Vec<String> = cond.features.iter().filter(|f| !t.has(f)).map(|f| format!("`{f}`")).collect();
                if !missing.is_empty() {
                    findings.push(
                        Diagnostic::error("E0402", format!("`{}` with {} is not available on target `{}`", op.name, cond.when, t.name), name_span, format!("needs {}", missing.join(", ")))
                            .with_help("change the kernel's target or the operand dtypes; Cake never steps down silently"),
                    );
                }
            }
        }
        for d in findings {
            self.err(d);
        }
    }

    /// A failed type rule: the rule with the program's values of every fact it names, the
    /// declaration of the argument it talks about first as the primary span (the use beside it),
    /// and the catalog's help for that constraint with the values filled in.
    fn type_rule_finding(&self, op: &OpDef, rule_index: usize, parsed: &pred::PExpr, bound: &[Option<(Handle<Expr>, Span)>], facts: &ArgFacts, call: Span) -> Diagnostic {
        let rule = &op.type_rule[rule_index];
        let values: Vec<String> = pred::fact_values(parsed, facts).into_iter().filter(|(_, v)| *v != pred::Value::Unknown).map(|(t, v)| format!("{t} = {v}")).collect();
        let message = if values.is_empty() { format!("`{}` requires `{rule}`", op.name) } else { format!("`{}` requires `{rule}`, but {}", op.name, values.join(", ")) };
        // In a conjunction, the argument the first false conjunct names (`dim(acc, 0) == 64 &&
        // dim(a, 0) == 64` with a 32-row `a` points at `a`).
        let culprit = false_conjunct(parsed, facts).unwrap_or(parsed);
        let first = first_sym(culprit, op).or_else(|| first_sym(parsed, op)).and_then(|i| bound[i].map(|b| (i, b)));
        let mut d = match first {
            Some((i, (h, use_span))) => {
                let name = &op.params[i].name;
                match self.declaration_of(h, !only_declared_facts(culprit)) {
                    Some((decl, what)) if decl != use_span => Diagnostic::error("E0305", message, decl, format!("{what} declared here")).with_secondary(use_span, format!("passed as `{name}` here")),
                    _ => Diagnostic::error("E0305", message, use_span, format!("this `{name}`")),
                }
            }
            None => Diagnostic::error("E0305", message, call, "this call"),
        };
        for (p, b) in op.params.iter().zip(bound) {
            if let Some((h, _)) = b {
                if rule_mentions(parsed, &p.name) {
                    d = d.with_note(format!("`{}` is {}", p.name, self.m.exprs[*h].ty));
                }
            }
        }
        let help = match op.type_rule_help.get(rule_index).cloned().flatten() {
            Some(t) => pred::interpolate(&t, facts),
            None => format!("`cake explain {}` shows the operation's type rule", op.name),
        };
        d.with_help(help)
    }

    /// The declaration an argument's value comes from (a register, a let, a shared region or
    /// view, a global tensor), when it names one: its span and what it declares. A window taken
    /// at the use (`a_s[s, 0 :+ 32]`) chooses its own shape there: for a rule `about_shape` it
    /// has none.
    fn declaration_of(&self, mut h: Handle<Expr>, about_shape: bool) -> Option<(Span, String)> {
        for _ in 0..64 {
            match &self.m.exprs[h].kind {
                ExprKind::Index { items, .. } if about_shape && items.iter().any(|i| matches!(i, IndexItem::Window { .. })) => return None,
                ExprKind::Index { base, .. } => h = *base,
                ExprKind::Local(l) => return Some((*self.m.locals.span(*l), format!("`{}`", self.m.locals[*l].name))),
                ExprKind::Smem(s) => return Some((self.m.smem.span(*s).item, format!("`{}`", self.m.smem[*s].name))),
                ExprKind::View(v) => return Some((self.m.views.span(*v).item, format!("`{}`", self.m.views[*v].name))),
                ExprKind::Tensor(t) => return Some((self.m.tensors.span(*t).item, format!("`{}`", self.m.tensors[*t].name))),
                _ => return None,
            }
        }
        None
    }

    fn result_type(&mut self, call: &OpCall) -> Type {
        let Some(op) = self.catalog.get(&call.op) else { return Type::Error };
        let arg = |name: &str| -> Option<Type> {
            let i = op.param_index(name)?;
            call.args[i].map(|h| self.m.exprs[h].ty.clone())
        };
        let tys: Vec<Option<Type>> = op.result.params().iter().map(|n| arg(n)).collect();
        if tys.iter().any(|t| matches!(t, Some(Type::Error))) {
            return Type::Error;
        }
        // The operands' common shape, dtype and scope: literals adopt the dtype of typed operands.
        let combine = |tys: &[Option<Type>]| -> Option<(Vec<i64>, Option<DType>, Option<Scope>, bool)> {
            let mut shape = Vec::new();
            let mut common: Option<Type> = None;
            let mut scope = None;
            let mut float_lit = false;
            for t in tys.iter().flatten() {
                shape = broadcast(&shape, &value_shape(t)?)?;
                float_lit |= matches!(t, Type::Literal { float: true });
                scope = scope.or(frag_scope(t));
                common = Some(match common {
                    None => t.clone(),
                    Some(prev) => match unify_dtype(&prev, t)? {
                        Some(d) => Type::Scalar(d),
                        None => Type::Literal { float: float_lit },
                    },
                });
            }
            Some((shape, common.and_then(|d| d.dtype()), scope, float_lit))
        };
        let value = |shape: Vec<i64>, dtype: Option<DType>, scope: Option<Scope>, float_lit: bool| match (dtype, shape.is_empty()) {
            (None, _) => Type::Literal { float: float_lit },
            (Some(d), true) => Type::Scalar(d),
            (Some(d), false) => Type::Frag { dtype: d, shape, scope },
        };
        let first = || tys.first().cloned().flatten();
        let out = match &op.result {
            ResultRule::None => Some(Type::Unit),
            ResultRule::Same(_) => first().map(|t| as_value(&t)),
            ResultRule::Broadcast(_) => combine(&tys).map(|(s, d, sc, f)| value(s, d, sc, f)),
            ResultRule::Compare(..) => combine(&tys).map(|(s, _, sc, _)| value(s, Some(DType::Bool), sc, false)),
            ResultRule::Select(..) => combine(&tys[1..]).and_then(|(s, d, sc, f)| {
                let c = first()?;
                let s = broadcast(&s, &value_shape(&c)?)?;
                // Two literal branches over a condition with a shape (`select(Col[..] == t, 1.0,
                // 0.0)`) make a value of that shape: the literals' default dtype (f32 for float
                // literals, i32 for integers, as `let` gives them), not a literal, whose shape
                // would be lost.
                let d = match d {
                    None if !s.is_empty() => Some(if f { DType::F32 } else { DType::I32 }),
                    d => d,
                };
                Some(value(s, d, sc.or(frag_scope(&c)), f))
            }),
            ResultRule::Reduce { axis, .. } | ResultRule::ReduceIndex { axis, .. } => {
                let axis = op.param_index(axis).and_then(|i| call.args[i]).and_then(|h| self.m.const_value(h));
                match (first(), axis) {
                    (Some(x), Some(axis)) => value_shape(&x).and_then(|mut s| {
                        let axis = usize::try_from(if axis < 0 { axis + s.len() as i64 } else { axis }).ok()?;
                        if axis >= s.len() {
                            return None;
                        }
                        s.remove(axis);
                        let d = if matches!(op.result, ResultRule::ReduceIndex { .. }) { Some(DType::I32) } else { x.dtype() };
                        Some(value(s, d, frag_scope(&x), false))
                    }),
                    _ => None,
                }
            }
            ResultRule::Index { .. } => first().and_then(|x| value_shape(&x).map(|s| value(s, Some(DType::I32), frag_scope(&x), false))),
            ResultRule::Cast { .. } => match (first(), tys.get(1).cloned().flatten()) {
                (Some(x), Some(Type::DTypeName(d))) => value_shape(&x).map(|s| value(s, Some(d), frag_scope(&x), false)),
                _ => None,
            },
        };
        out.unwrap_or(Type::Error)
    }
}

/// Facts about the arguments of one call, answering the catalog's type rules.
struct ArgFacts<'c> {
    m: &'c Module,
    op: &'c OpDef,
    bound: &'c [Option<(Handle<Expr>, Span)>],
}

impl ArgFacts<'_> {
    fn ty(&self, v: &Value) -> Result<Option<(Handle<Expr>, &Type)>, EvalError> {
        let Value::Sym(name) = v else { return Err(EvalError::NotAParameter { found: v.clone() }) };
        let i = self
            .op
            .params
            .iter()
            .position(|p| p.name == *name)
            .ok_or_else(|| EvalError::NoParameter { op: self.op.name.clone(), name: name.clone() })?;
        Ok(self.bound[i].map(|(h, _)| (h, &self.m.exprs[h].ty)))
    }
}

impl Facts for ArgFacts<'_> {
    fn fact(&self, name: &str, args: &[Value]) -> Result<Value, EvalError> {
        let Some(first) = args.first() else { return Err(EvalError::Arguments { fact: name.to_string(), expects: "a parameter" }) };
        // An omitted optional parameter makes every fact about it undecidable (so the rule passes).
        let Some((h, ty)) = self.ty(first)? else { return Ok(Value::Unknown) };
        let shape = ty.const_shape();
        let index = |i: &Value, rank: usize| -> Option<usize> {
            let Value::Int(i) = i else { return None };
            let i = if *i < 0 { *i + rank as i64 } else { *i };
            usize::try_from(i).ok().filter(|i| *i < rank)
        };
        Ok(match name {
            "dtype" => match ty {
                Type::DTypeName(d) => Value::Sym(d.name().into()),
                t => t.dtype().map_or(Value::Unknown, |d| Value::Sym(d.name().into())),
            },
            "rank" => match ty {
                Type::Global { shape, .. } => Value::Int(shape.len() as i64),
                t => value_shape(t).map_or(Value::Unknown, |s| Value::Int(s.len() as i64)),
            },
            "dim" => {
                let Some(i) = args.get(1) else { return Err(EvalError::Arguments { fact: name.to_string(), expects: "a parameter and an axis" }) };
                match ty {
                    Type::Global { shape, .. } => index(i, shape.len()).and_then(|i| shape[i].as_const()).map_or(Value::Unknown, Value::Int),
                    _ => shape.and_then(|s| index(i, s.len()).map(|i| s[i])).map_or(Value::Unknown, Value::Int),
                }
            }
            "numel" => shape.map_or(Value::Unknown, |s| Value::Int(s.iter().product())),
            "bytes" => match (shape, ty.dtype()) {
                (Some(s), Some(d)) => Value::Int(s.iter().product::<i64>() * d.size_bytes() as i64),
                _ => Value::Unknown,
            },
            "scope" => match ty {
                Type::Frag { scope: Some(s), .. } => Value::Sym(s.name().into()),
                _ => Value::Unknown,
            },
            "space" => Value::Sym(
                match ty {
                    Type::Global { .. } => "global",
                    Type::Shared { .. } => "smem",
                    Type::Frag { .. } => "frag",
                    Type::Scalar(_) | Type::Literal { .. } => "value",
                    _ => "other",
                }
                .into(),
            ),
            "swizzle" => match ty {
                Type::Shared { swizzle, .. } => Value::Int(i64::from(swizzle.bytes())),
                Type::Global { tensor, .. } => Value::Int(self.m.tensors[*tensor].tma.as_ref().map_or(0, |t| i64::from(t.swizzle.bytes()))),
                _ => Value::Unknown,
            },
            "box" => {
                let Type::Global { tensor, .. } = ty else { return Ok(Value::Unknown) };
                let Some(tma) = &self.m.tensors[*tensor].tma else { return Ok(Value::Unknown) };
                let Some(i) = args.get(1) else { return Err(EvalError::Arguments { fact: name.to_string(), expects: "a parameter and an axis" }) };
                index(i, tma.box_dims.len()).map_or(Value::Unknown, |i| Value::Int(tma.box_dims[i]))
            }
            "has_tma" => match ty {
                Type::Global { tensor, .. } => Value::Bool(self.m.tensors[*tensor].tma.is_some()),
                _ => Value::Bool(false),
            },
            "value" => self.m.const_value(h).map_or(Value::Unknown, Value::Int),
            "is_literal" => Value::Bool(matches!(ty, Type::Literal { .. })),
            "same_shape" => {
                let Some(other) = args.get(1) else { return Err(EvalError::Arguments { fact: name.to_string(), expects: "two parameters" }) };
                let Some((_, t2)) = self.ty(other)? else { return Ok(Value::Unknown) };
                match (value_shape(ty), value_shape(t2)) {
                    (Some(a), Some(b)) => Value::Bool(a == b),
                    _ => Value::Unknown,
                }
            }
            _ => return Err(EvalError::UnknownFact { scope: None, name: name.to_string() }),
        })
    }
}

fn item_name(item: &ast::Item) -> Option<&ast::Ident> {
    use ast::ItemKind as K;
    match &item.kind {
        K::Dim { name, .. }
        | K::Const { name, .. }
        | K::Scalar { name, .. }
        | K::Tensor { name, .. }
        | K::Grid { name, .. }
        | K::Smem { name, .. }
        | K::View { name, .. }
        | K::Role { name, .. }
        | K::Barrier { name, .. }
        | K::Pipeline { name, .. } => Some(name),
        K::On { .. } => None,
    }
}

fn is_int(t: &Type) -> bool {
    matches!(t, Type::Literal { float: false }) || matches!(t, Type::Scalar(d) if d.is_int())
}

/// The shape of a value-like type (scalars `[]`), or `None` for non-values.
fn value_shape(t: &Type) -> Option<Vec<i64>> {
    match t {
        Type::Scalar(_) | Type::Literal { .. } | Type::Frag { .. } | Type::Shared { .. } | Type::Global { .. } => t.const_shape(),
        _ => None,
    }
}

fn frag_scope(t: &Type) -> Option<Scope> {
    match t {
        Type::Frag { scope, .. } => *scope,
        _ => None,
    }
}

/// The value a memory window reads as (windows of memory read into registers).
fn as_value(t: &Type) -> Type {
    match t {
        Type::Shared { dtype, shape, .. } => Type::Frag { dtype: *dtype, shape: shape.clone(), scope: None },
        Type::Global { dtype, .. } => match t.const_shape() {
            Some(shape) if !shape.is_empty() => Type::Frag { dtype: *dtype, shape, scope: None },
            _ => Type::Scalar(*dtype),
        },
        other => other.clone(),
    }
}

/// NumPy broadcasting of two shapes.
pub fn broadcast(a: &[i64], b: &[i64]) -> Option<Vec<i64>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let x = if i < n - a.len() { 1 } else { a[i - (n - a.len())] };
        let y = if i < n - b.len() { 1 } else { b[i - (n - b.len())] };
        out[i] = if x == y || y == 1 {
            x
        } else if x == 1 {
            y
        } else {
            return None;
        };
    }
    Some(out)
}

/// The common dtype of two operands: literals adopt the other side's dtype (an integer literal
/// fits any number, a float literal only floats). `Some(None)` when both are literals; `None`
/// when the dtypes clash.
fn unify_dtype(a: &Type, b: &Type) -> Option<Option<DType>> {
    match (a, b) {
        (Type::Literal { .. }, Type::Literal { .. }) => Some(None),
        (Type::Literal { float }, t) | (t, Type::Literal { float }) => {
            let d = t.dtype()?;
            if *float && !d.is_float() {
                None
            } else {
                Some(Some(d))
            }
        }
        (a, b) => {
            let (x, y) = (a.dtype()?, b.dtype()?);
            (x == y).then_some(Some(x))
        }
    }
}

fn kind_matches(kind: &ParamKind, ty: &Type, expr: &ExprKind) -> bool {
    match kind {
        ParamKind::Frag => matches!(ty, Type::Frag { .. }) && frag_root_is_reg(expr),
        ParamKind::Smem => matches!(ty, Type::Shared { .. }),
        ParamKind::Global => matches!(ty, Type::Global { .. }),
        ParamKind::Mem => matches!(ty, Type::Global { .. } | Type::Shared { .. }),
        ParamKind::Value => value_shape(ty).is_some(),
        ParamKind::Int => is_int(ty),
        ParamKind::ConstInt => matches!(ty, Type::Literal { float: false }),
        ParamKind::Float => matches!(ty, Type::Literal { .. }) || ty.dtype().is_some_and(DType::is_float) && matches!(ty, Type::Scalar(_)),
        ParamKind::Dtype => matches!(ty, Type::DTypeName(_)),
        ParamKind::Pipeline => matches!(ty, Type::Pipeline(_)),
        ParamKind::Barrier => matches!(ty, Type::Barrier(_)),
        ParamKind::Sync => matches!(ty, Type::Pipeline(_) | Type::Barrier(_)),
        ParamKind::Role => matches!(ty, Type::Role(_)),
    }
}

/// Fragments passed to ops are named register fragments (or parts of one), not temporaries.
fn frag_root_is_reg(expr: &ExprKind) -> bool {
    matches!(expr, ExprKind::Local(_) | ExprKind::Index { .. })
}

fn kind_name(kind: &ParamKind) -> &'static str {
    match kind {
        ParamKind::Frag => "a register fragment",
        ParamKind::Smem => "shared memory",
        ParamKind::Global => "a global tensor window",
        ParamKind::Mem => "a global or shared window",
        ParamKind::Value => "a value",
        ParamKind::Int => "an integer",
        ParamKind::ConstInt => "a compile-time integer",
        ParamKind::Float => "a float",
        ParamKind::Dtype => "a dtype",
        ParamKind::Pipeline => "a pipeline",
        ParamKind::Barrier => "a barrier",
        ParamKind::Sync => "a pipeline or barrier",
        ParamKind::Role => "a role",
    }
}

/// `name(a, b, axis=...)` as a one-line signature for help messages.
pub fn signature(op: &OpDef) -> String {
    let params: Vec<String> = op
        .params
        .iter()
        .map(|p| {
            let mut s = if p.named { format!("{}=", p.name) } else { format!("{}: ", p.name) };
            s.push_str(kind_name(&p.kind));
            if p.optional {
                s.push('?');
            }
            s
        })
        .collect();
    format!("{}({})", op.name, params.join(", "))
}

fn rule_mentions(e: &pred::PExpr, name: &str) -> bool {
    match e {
        pred::PExpr::Sym(s) => s == name,
        pred::PExpr::Int(_) => false,
        pred::PExpr::Fact { args, .. } => args.iter().any(|a| rule_mentions(a, name)),
        pred::PExpr::Not(x) | pred::PExpr::Neg(x) => rule_mentions(x, name),
        pred::PExpr::Bin { lhs, rhs, .. } => rule_mentions(lhs, name) || rule_mentions(rhs, name),
        pred::PExpr::In { value, set } => rule_mentions(value, name) || set.iter().any(|s| rule_mentions(s, name)),
    }
}

/// Whether a rule talks only about what a declaration fixes whatever window is taken of it
/// (dtype, swizzle, scope, TMA box), not about a shape a window chooses.
fn only_declared_facts(e: &pred::PExpr) -> bool {
    match e {
        pred::PExpr::Fact { name, .. } => matches!(name.as_str(), "dtype" | "swizzle" | "scope" | "has_tma" | "box" | "box_rank"),
        pred::PExpr::Int(_) | pred::PExpr::Sym(_) => true,
        pred::PExpr::Not(x) | pred::PExpr::Neg(x) => only_declared_facts(x),
        pred::PExpr::Bin { lhs, rhs, .. } => only_declared_facts(lhs) && only_declared_facts(rhs),
        pred::PExpr::In { value, set } => only_declared_facts(value) && set.iter().all(only_declared_facts),
    }
}

/// The first conjunct of a top-level `&&` chain that is false (`None` when the rule is not a
/// conjunction or none is decidably false).
fn false_conjunct<'e>(e: &'e pred::PExpr, facts: &dyn pred::Facts) -> Option<&'e pred::PExpr> {
    match e {
        pred::PExpr::Bin { op: pred::POp::And, lhs, rhs } => false_conjunct(lhs, facts)
            .or_else(|| (pred::holds(lhs, facts) == Ok(Some(false))).then_some(&**lhs))
            .or_else(|| false_conjunct(rhs, facts))
            .or_else(|| (pred::holds(rhs, facts) == Ok(Some(false))).then_some(&**rhs)),
        _ => None,
    }
}

/// The index of the first parameter a rule mentions, in the rule's reading order.
fn first_sym(e: &pred::PExpr, op: &OpDef) -> Option<usize> {
    match e {
        pred::PExpr::Sym(s) => op.params.iter().position(|p| p.name == *s),
        pred::PExpr::Int(_) => None,
        pred::PExpr::Fact { args, .. } => args.iter().find_map(|a| first_sym(a, op)),
        pred::PExpr::Not(x) | pred::PExpr::Neg(x) => first_sym(x, op),
        pred::PExpr::Bin { lhs, rhs, .. } => first_sym(lhs, op).or_else(|| first_sym(rhs, op)),
        pred::PExpr::In { value, .. } => first_sym(value, op),
    }
}
