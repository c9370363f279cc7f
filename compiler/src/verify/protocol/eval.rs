//! Concrete evaluation of integer and boolean expressions under one binding of the dims, the
//! loop variables and the role's pipeline stages. Anything else (scalar arguments, memory,
//! warp identity) is `Unknown` with the reason, so the caller can decide how to degrade.

use std::collections::HashMap;

use crate::ir::*;
use crate::syntax::ast::{BinOp, UnOp};

/// Why a value is not known at analysis time. Ordered by how badly it blocks the analysis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Why {
    /// Depends on which warp / warpgroup / lane executes it.
    Warp,
    /// Depends on run-time data (scalar arguments, memory, register values).
    Data,
    /// `P.stage` read before the role took any stage of `P`.
    NoStage,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Val {
    Int(i64),
    Bool(bool),
    Unknown(Why),
}

impl Val {
    pub fn int(self) -> Option<i64> {
        match self {
            Val::Int(v) => Some(v),
            _ => None,
        }
    }
}

#[derive(Default, Clone)]
pub struct Env {
    pub dims: Vec<i64>,
    pub ints: HashMap<Handle<Local>, i64>,
    /// Tile-loop variables: the coordinates of the current tile, one per grid axis.
    pub tiles: HashMap<Handle<Local>, Vec<i64>>,
    /// The stage this role holds now, per pipeline (`P.stage`).
    pub stages: HashMap<Handle<PipelineDecl>, u32>,
    /// `R.warpgroup`, `R.warp`, `R.lane` of the executing unit, where the caller binds them
    /// (the output-coverage analysis walks every unit; the protocol analysis does not).
    pub role_fields: Vec<(Handle<RoleDecl>, Field, i64)>,
}

fn worst(a: Val, b: Val) -> Val {
    match (a, b) {
        (Val::Unknown(x), Val::Unknown(y)) => Val::Unknown(x.max(y)),
        (Val::Unknown(x), _) | (_, Val::Unknown(x)) => Val::Unknown(x),
        _ => Val::Unknown(Why::Data),
    }
}

pub fn eval(m: &Module, env: &Env, e: Handle<Expr>) -> Val {
    eval_depth(m, env, e, 0)
}

fn eval_depth(m: &Module, env: &Env, e: Handle<Expr>, depth: u32) -> Val {
    if depth > 200 {
        return Val::Unknown(Why::Data);
    }
    let ev = |x: Handle<Expr>| eval_depth(m, env, x, depth + 1);
    match &m.exprs[e].kind {
        ExprKind::Int(v) => Val::Int(*v),
        ExprKind::Bool(b) => Val::Bool(*b),
        ExprKind::Dim(d) => env.dims.get(d.index()).map_or(Val::Unknown(Why::Data), |v| Val::Int(*v)),
        ExprKind::Local(l) => env.ints.get(l).map_or(Val::Unknown(Why::Data), |v| Val::Int(*v)),
        ExprKind::Field { base, field } => match (field, &m.exprs[*base].kind) {
            (Field::Stage, ExprKind::Pipeline(p)) => {
                env.stages.get(p).map_or(Val::Unknown(Why::NoStage), |s| Val::Int(i64::from(*s)))
            }
            (Field::TileAxis(i), ExprKind::Local(l)) => {
                env.tiles.get(l).and_then(|c| c.get(*i)).map_or(Val::Unknown(Why::Data), |v| Val::Int(*v))
            }
            (f @ (Field::Warp | Field::Warpgroup | Field::Lane), ExprKind::Role(r)) => env
                .role_fields
                .iter()
                .find(|(role, field, _)| role == r && field == f)
                .map_or(Val::Unknown(Why::Warp), |(_, _, v)| Val::Int(*v)),
            (Field::Warp | Field::Warpgroup | Field::Lane, _) => Val::Unknown(Why::Warp),
            _ => Val::Unknown(Why::Data),
        },
        ExprKind::Unary(op, a) => match (op, ev(*a)) {
            (UnOp::Neg, Val::Int(v)) => v.checked_neg().map_or(Val::Unknown(Why::Data), Val::Int),
            (UnOp::Not, Val::Bool(b)) => Val::Bool(!b),
            (_, u @ Val::Unknown(_)) => u,
            _ => Val::Unknown(Why::Data),
        },
        ExprKind::Binary(op, a, b) => {
            let (x, y) = (ev(*a), ev(*b));
            // Short-circuit logic still lets a known side decide.
            match (op, x, y) {
                (BinOp::And, Val::Bool(false), _) | (BinOp::And, _, Val::Bool(false)) => return Val::Bool(false),
                (BinOp::Or, Val::Bool(true), _) | (BinOp::Or, _, Val::Bool(true)) => return Val::Bool(true),
                _ => {}
            }
            match (x, y) {
                (Val::Int(x), Val::Int(y)) => int_op(*op, x, y),
                (Val::Bool(x), Val::Bool(y)) => match op {
                    BinOp::And => Val::Bool(x && y),
                    BinOp::Or => Val::Bool(x || y),
                    BinOp::Eq => Val::Bool(x == y),
                    BinOp::Ne => Val::Bool(x != y),
                    _ => Val::Unknown(Why::Data),
                },
                (x, y) => worst(x, y),
            }
        }
        // `min` / `max` of integers (a sliding window's first key tile: `max(t.q * 2 - 8, 0)`).
        ExprKind::Call(c) if matches!(c.op.as_str(), "min" | "max") && c.args.len() == 2 => {
            let (Some(a), Some(b)) = (c.args[0], c.args[1]) else { return Val::Unknown(Why::Data) };
            match (ev(a), ev(b)) {
                (Val::Int(x), Val::Int(y)) => Val::Int(if c.op == "min" { x.min(y) } else { x.max(y) }),
                (x, y) => worst(x, y),
            }
        }
        _ => Val::Unknown(Why::Data),
    }
}

fn int_op(op: BinOp, x: i64, y: i64) -> Val {
    let u = Val::Unknown(Why::Data);
    match op {
        BinOp::Add => x.checked_add(y).map_or(u, Val::Int),
        BinOp::Sub => x.checked_sub(y).map_or(u, Val::Int),
        BinOp::Mul => x.checked_mul(y).map_or(u, Val::Int),
        BinOp::Div => x.checked_div(y).map_or(u, Val::Int),
        BinOp::Rem => x.checked_rem(y).map_or(u, Val::Int),
        BinOp::Shl => u32::try_from(y).ok().filter(|s| *s < 63).and_then(|s| x.checked_shl(s)).map_or(u, Val::Int),
        BinOp::Shr => u32::try_from(y).ok().filter(|s| *s < 64).and_then(|s| x.checked_shr(s)).map_or(u, Val::Int),
        BinOp::Lt => Val::Bool(x < y),
        BinOp::Le => Val::Bool(x <= y),
        BinOp::Gt => Val::Bool(x > y),
        BinOp::Ge => Val::Bool(x >= y),
        BinOp::Eq => Val::Bool(x == y),
        BinOp::Ne => Val::Bool(x != y),
        BinOp::And | BinOp::Or => u,
    }
}

/// A short source-like rendering of an expression, for messages.
pub fn show(m: &Module, e: Handle<Expr>) -> String {
    show_depth(m, e, 0)
}

fn show_depth(m: &Module, e: Handle<Expr>, depth: u32) -> String {
    if depth > 50 {
        return "…".to_string();
    }
    let sh = |x: Handle<Expr>| show_depth(m, x, depth + 1);
    match &m.exprs[e].kind {
        ExprKind::Int(v) => v.to_string(),
        ExprKind::Float(s) => s.clone(),
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::Inf => "inf".to_string(),
        ExprKind::Local(l) => m.locals[*l].name.clone(),
        ExprKind::Dim(d) => m.dims[*d].name.clone(),
        ExprKind::Scalar(s) => m.scalars[*s].name.clone(),
        ExprKind::Tensor(t) => m.tensors[*t].name.clone(),
        ExprKind::Smem(s) => m.smem[*s].name.clone(),
        ExprKind::View(v) => m.views[*v].name.clone(),
        ExprKind::Pipeline(p) => m.pipelines[*p].name.clone(),
        ExprKind::Barrier(b) => m.barriers[*b].name.clone(),
        ExprKind::Role(r) => m.roles[*r].name.clone(),
        ExprKind::Tiles => m.grid().map_or("tiles".to_string(), |g| g.name.clone()),
        ExprKind::DTypeName(d) => d.name().to_string(),
        ExprKind::Field { base, field } => {
            let f = match field {
                Field::Stage => "stage".to_string(),
                Field::TileAxis(i) => m.grid().and_then(|g| g.axes.get(*i)).map_or("?".to_string(), |a| a.name.clone()),
                Field::Warpgroup => "warpgroup".to_string(),
                Field::Warp => "warp".to_string(),
                Field::Lane => "lane".to_string(),
            };
            format!("{}.{f}", sh(*base))
        }
        ExprKind::Index { base, items } => {
            let it: Vec<String> = items
                .iter()
                .map(|i| match i {
                    IndexItem::At(x) => sh(*x),
                    IndexItem::Window { start, len } => format!("{} :+ {len}", sh(*start)),
                    IndexItem::Full => ":".to_string(),
                })
                .collect();
            format!("{}[{}]", sh(*base), it.join(", "))
        }
        ExprKind::Call(c) => {
            let a: Vec<String> = c.args.iter().flatten().map(|x| sh(*x)).collect();
            format!("{}({})", c.op, a.join(", "))
        }
        ExprKind::Unary(op, a) => match op {
            UnOp::Neg => format!("-{}", sh(*a)),
            UnOp::Not => format!("!{}", sh(*a)),
        },
        ExprKind::Binary(op, a, b) => {
            let wrap = |x: Handle<Expr>| {
                let s = sh(x);
                if matches!(m.exprs[x].kind, ExprKind::Binary(..)) {
                    format!("({s})")
                } else {
                    s
                }
            };
            format!("{} {} {}", wrap(*a), op.symbol(), wrap(*b))
        }
    }
}
