//! The predicate language: small boolean/integer expressions over named *facts*.
//!
//! Op type rules in the catalog (`dtype(a) == dtype(b)`, `dim(b, 0) % 8 == 0`) and, later,
//! verifier rules are written in it, so both can be added as data without touching Rust. A fact is
//! a function the engine answers (`dtype`, `dim`, `bytes`, ...); the engine decides which facts
//! exist. Evaluation is three-valued: a fact that cannot be known statically yields `Unknown`,
//! which the caller reports as a coverage limit instead of counting it as a pass.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PExpr {
    Int(i64),
    /// A bare word: a parameter name, a dtype (`bf16`), a scope (`warpgroup`), `true`/`false`.
    Sym(String),
    /// `name(arg, ...)`
    Fact { name: String, args: Vec<PExpr> },
    Not(Box<PExpr>),
    Neg(Box<PExpr>),
    Bin { op: POp, lhs: Box<PExpr>, rhs: Box<PExpr> },
    /// `x in [a, b, c]`
    In { value: Box<PExpr>, set: Vec<PExpr> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum POp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl POp {
    fn precedence(self) -> u8 {
        match self {
            POp::Or => 1,
            POp::And => 2,
            POp::Eq | POp::Ne | POp::Lt | POp::Le | POp::Gt | POp::Ge => 3,
            POp::Add | POp::Sub => 4,
            POp::Mul | POp::Div | POp::Rem => 5,
        }
    }
}

/// A value during evaluation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Int(i64),
    Bool(bool),
    Sym(String),
    /// Not decidable statically (a run-time value, an unmodelled construct).
    Unknown,
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Sym(s) => write!(f, "{s}"),
            Value::Unknown => write!(f, "unknown"),
        }
    }
}

/// Answers facts for one evaluation. `args` are already evaluated (parameter names arrive as
/// `Value::Sym`). Return `Err` for a fact or argument the engine does not know — a rule
/// authoring error — and `Ok(Value::Unknown)` for a fact that exists but is undecidable here.
pub trait Facts {
    fn fact(&self, name: &str, args: &[Value]) -> Result<Value, EvalError>;

    /// What a bare word means. `None` (the default) keeps it a literal symbol — a parameter name,
    /// a dtype, a scope — as the op catalog's type rules expect. An engine whose facts are
    /// nullary (the verifier's rules: `smem_bytes <= target_smem_max`) answers them here.
    fn symbol(&self, name: &str) -> Option<Value> {
        let _ = name;
        None
    }
}

/// Why a parsed predicate cannot be evaluated: a rule-authoring error (the rule names a fact the
/// engine lacks, or applies an operator to the wrong kind of value). Fix the rule's text; the
/// verifier reports it as the rule's own error, the type checker as E0399.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// No fact of this name (for this construct kind, when `scope` names one).
    #[error("{}", match scope { Some(s) => format!("{s} has no fact `{name}`"), None => format!("unknown fact `{name}`") })]
    UnknownFact { scope: Option<String>, name: String },
    #[error("{scope} has no indexed fact `{name}(i)`")]
    UnknownIndexedFact { scope: String, name: String },
    /// The fact exists but takes other arguments.
    #[error("`{fact}` takes {expects}")]
    Arguments { fact: String, expects: &'static str },
    #[error("expected a parameter name, found `{found}`")]
    NotAParameter { found: Value },
    #[error("`{op}` has no parameter `{name}`")]
    NoParameter { op: String, name: String },
    /// An operator applied to values of the wrong kind (`found` lists them, quoted).
    #[error("`{op}` needs {needs}, found {found}")]
    Operand { op: &'static str, needs: &'static str, found: String },
    #[error("a predicate must be true or false, found `{found}`")]
    NotBoolean { found: Value },
}

fn operand(op: &'static str, needs: &'static str, values: &[&Value]) -> EvalError {
    let found = values.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(" and ");
    EvalError::Operand { op, needs, found }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PredError {
    pub message: String,
    /// Byte offset into the predicate text.
    pub offset: usize,
}

impl fmt::Display for PredError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.message, self.offset)
    }
}

impl std::error::Error for PredError {}

/// Parse one predicate or term.
pub fn parse(text: &str) -> Result<PExpr, PredError> {
    let tokens = tokenize(text)?;
    let mut p = Parser { tokens, pos: 0, text_len: text.len() };
    let e = p.expr(0)?;
    if p.pos < p.tokens.len() {
        return Err(p.error("unexpected text after the expression"));
    }
    Ok(e)
}

/// Evaluate to a value; errors are rule-authoring errors (unknown fact, type mismatch).
pub fn eval(e: &PExpr, facts: &dyn Facts) -> Result<Value, EvalError> {
    Ok(match e {
        PExpr::Int(i) => Value::Int(*i),
        PExpr::Sym(s) if s == "true" => Value::Bool(true),
        PExpr::Sym(s) if s == "false" => Value::Bool(false),
        PExpr::Sym(s) => facts.symbol(s).unwrap_or_else(|| Value::Sym(s.clone())),
        PExpr::Fact { name, args } => {
            let args = args.iter().map(|a| eval(a, facts)).collect::<Result<Vec<_>, _>>()?;
            facts.fact(name, &args)?
        }
        PExpr::Not(x) => match eval(x, facts)? {
            Value::Bool(b) => Value::Bool(!b),
            Value::Unknown => Value::Unknown,
            v => return Err(operand("!", "a boolean", &[&v])),
        },
        PExpr::Neg(x) => match eval(x, facts)? {
            Value::Int(i) => Value::Int(i.wrapping_neg()),
            Value::Unknown => Value::Unknown,
            v => return Err(operand("-", "an integer", &[&v])),
        },
        PExpr::In { value, set } => {
            let v = eval(value, facts)?;
            if v == Value::Unknown {
                return Ok(Value::Unknown);
            }
            let mut unknown = false;
            for s in set {
                let s = eval(s, facts)?;
                if s == v {
                    return Ok(Value::Bool(true));
                }
                unknown |= s == Value::Unknown;
            }
            if unknown {
                Value::Unknown
            } else {
                Value::Bool(false)
            }
        }
        PExpr::Bin { op: POp::And, lhs, rhs } => match (eval(lhs, facts)?, eval(rhs, facts)?) {
            (Value::Bool(false), _) | (_, Value::Bool(false)) => Value::Bool(false),
            (Value::Bool(true), Value::Bool(true)) => Value::Bool(true),
            (Value::Unknown, _) | (_, Value::Unknown) => Value::Unknown,
            (a, b) => return Err(operand("&&", "booleans", &[&a, &b])),
        },
        PExpr::Bin { op: POp::Or, lhs, rhs } => match (eval(lhs, facts)?, eval(rhs, facts)?) {
            (Value::Bool(true), _) | (_, Value::Bool(true)) => Value::Bool(true),
            (Value::Bool(false), Value::Bool(false)) => Value::Bool(false),
            (Value::Unknown, _) | (_, Value::Unknown) => Value::Unknown,
            (a, b) => return Err(operand("||", "booleans", &[&a, &b])),
        },
        PExpr::Bin { op, lhs, rhs } => {
            let (a, b) = (eval(lhs, facts)?, eval(rhs, facts)?);
            if a == Value::Unknown || b == Value::Unknown {
                return Ok(Value::Unknown);
            }
            match op {
                POp::Eq => Value::Bool(a == b),
                POp::Ne => Value::Bool(a != b),
                _ => {
                    let (Value::Int(x), Value::Int(y)) = (&a, &b) else {
                        return Err(operand(op_symbol(*op), "integers", &[&a, &b]));
                    };
                    let (x, y) = (*x, *y);
                    match op {
                        POp::Lt => Value::Bool(x < y),
                        POp::Le => Value::Bool(x <= y),
                        POp::Gt => Value::Bool(x > y),
                        POp::Ge => Value::Bool(x >= y),
                        POp::Add => Value::Int(x.wrapping_add(y)),
                        POp::Sub => Value::Int(x.wrapping_sub(y)),
                        POp::Mul => Value::Int(x.wrapping_mul(y)),
                        POp::Div | POp::Rem if y == 0 => Value::Unknown,
                        POp::Div => Value::Int(x.wrapping_div(y)),
                        POp::Rem => Value::Int(x.wrapping_rem(y)),
                        POp::And | POp::Or | POp::Eq | POp::Ne => unreachable!("handled above"),
                    }
                }
            }
        }
    })
}

/// Every fact application of a rule with its value, in reading order, each once
/// (`dim(acc, 1) = 128`): what a finding shows of the program's own values.
pub fn fact_values(e: &PExpr, facts: &dyn Facts) -> Vec<(String, Value)> {
    fn walk(e: &PExpr, facts: &dyn Facts, out: &mut Vec<(String, Value)>) {
        match e {
            PExpr::Fact { .. } => {
                let text = e.to_string();
                if !out.iter().any(|(t, _)| *t == text) {
                    out.push((text, eval(e, facts).unwrap_or(Value::Unknown)));
                }
            }
            PExpr::Int(_) | PExpr::Sym(_) => {}
            PExpr::Not(x) | PExpr::Neg(x) => walk(x, facts, out),
            PExpr::Bin { lhs, rhs, .. } => {
                walk(lhs, facts, out);
                walk(rhs, facts, out);
            }
            PExpr::In { value, set } => {
                walk(value, facts, out);
                for s in set {
                    walk(s, facts, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(e, facts, &mut out);
    out
}

/// A help template with `{term}` holes filled by the term's value (`make the accumulator
/// {dim(b, 0)} columns wide`). A hole that does not parse or evaluate is kept as written.
pub fn interpolate(template: &str, facts: &dyn Facts) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            rest = &rest[open..];
            break;
        };
        let hole = &rest[open + 1..open + close];
        match parse(hole).ok().and_then(|e| eval(&e, facts).ok()) {
            Some(v) if v != Value::Unknown => out.push_str(&v.to_string()),
            _ => out.push_str(&rest[open..=open + close]),
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

/// Evaluate as a predicate: `Some(true/false)`, or `None` when undecidable.
pub fn holds(e: &PExpr, facts: &dyn Facts) -> Result<Option<bool>, EvalError> {
    match eval(e, facts)? {
        Value::Bool(b) => Ok(Some(b)),
        Value::Unknown => Ok(None),
        found => Err(EvalError::NotBoolean { found }),
    }
}

/// How an operator is written in the rule language (`<=`, `&&`).
pub fn op_symbol(op: POp) -> &'static str {
    match op {
        POp::Or => "||",
        POp::And => "&&",
        POp::Eq => "==",
        POp::Ne => "!=",
        POp::Lt => "<",
        POp::Le => "<=",
        POp::Gt => ">",
        POp::Ge => ">=",
        POp::Add => "+",
        POp::Sub => "-",
        POp::Mul => "*",
        POp::Div => "/",
        POp::Rem => "%",
    }
}

impl fmt::Display for PExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PExpr::Int(i) => write!(f, "{i}"),
            PExpr::Sym(s) => write!(f, "{s}"),
            PExpr::Fact { name, args } => {
                write!(f, "{name}(")?;
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{a}")?;
                }
                write!(f, ")")
            }
            PExpr::Not(x) => write!(f, "!{x}"),
            PExpr::Neg(x) => write!(f, "-{x}"),
            PExpr::Bin { op, lhs, rhs } => {
                let wrap = |e: &PExpr, f: &mut fmt::Formatter<'_>| match e {
                    PExpr::Bin { op: inner, .. } if inner.precedence() < op.precedence() => write!(f, "({e})"),
                    _ => write!(f, "{e}"),
                };
                wrap(lhs, f)?;
                write!(f, " {} ", op_symbol(*op))?;
                match &**rhs {
                    PExpr::Bin { op: inner, .. } if inner.precedence() <= op.precedence() => write!(f, "({rhs})"),
                    _ => write!(f, "{rhs}"),
                }
            }
            PExpr::In { value, set } => {
                write!(f, "{value} in [")?;
                for (i, s) in set.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{s}")?;
                }
                write!(f, "]")
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Int(i64),
    Word(String),
    Op(&'static str),
}

fn tokenize(text: &str) -> Result<Vec<(Tok, usize)>, PredError> {
    const OPS: &[&str] = &["&&", "||", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "!", "(", ")", "[", "]", ","];
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'_') {
                i += 1;
            }
            let digits: String = text[start..i].chars().filter(|c| *c != '_').collect();
            let n = digits.parse::<i64>().map_err(|_| PredError { message: "integer too large".into(), offset: start })?;
            out.push((Tok::Int(n), start));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push((Tok::Word(text[start..i].to_string()), start));
        } else if let Some(op) = OPS.iter().find(|op| text[i..].starts_with(**op)) {
            out.push((Tok::Op(op), i));
            i += op.len();
        } else {
            let ch = text[i..].chars().next().unwrap_or('?');
            return Err(PredError { message: format!("unexpected character `{ch}`"), offset: i });
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<(Tok, usize)>,
    pos: usize,
    text_len: usize,
}

impl Parser {
    fn error(&self, message: &str) -> PredError {
        let offset = self.tokens.get(self.pos).map_or(self.text_len, |t| t.1);
        PredError { message: message.to_string(), offset }
    }

    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos).map(|t| &t.0)
    }

    fn eat_op(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Op(o)) if *o == op) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect_op(&mut self, op: &str) -> Result<(), PredError> {
        if self.eat_op(op) {
            Ok(())
        } else {
            Err(self.error(&format!("expected `{op}`")))
        }
    }

    fn binop(&self) -> Option<POp> {
        Some(match self.peek()? {
            Tok::Op("||") => POp::Or,
            Tok::Op("&&") => POp::And,
            Tok::Op("==") => POp::Eq,
            Tok::Op("!=") => POp::Ne,
            Tok::Op("<") => POp::Lt,
            Tok::Op("<=") => POp::Le,
            Tok::Op(">") => POp::Gt,
            Tok::Op(">=") => POp::Ge,
            Tok::Op("+") => POp::Add,
            Tok::Op("-") => POp::Sub,
            Tok::Op("*") => POp::Mul,
            Tok::Op("/") => POp::Div,
            Tok::Op("%") => POp::Rem,
            _ => return None,
        })
    }

    fn expr(&mut self, min_prec: u8) -> Result<PExpr, PredError> {
        let mut lhs = self.unary()?;
        loop {
            if min_prec <= 3 && matches!(self.peek(), Some(Tok::Word(w)) if w == "in") {
                self.pos += 1;
                self.expect_op("[")?;
                let mut set = Vec::new();
                if !self.eat_op("]") {
                    loop {
                        set.push(self.expr(0)?);
                        if self.eat_op("]") {
                            break;
                        }
                        self.expect_op(",")?;
                    }
                }
                lhs = PExpr::In { value: Box::new(lhs), set };
                continue;
            }
            let Some(op) = self.binop() else { break };
            if op.precedence() < min_prec.max(1) {
                break;
            }
            self.pos += 1;
            let rhs = self.expr(op.precedence() + 1)?;
            lhs = PExpr::Bin { op, lhs: Box::new(lhs), rhs: Box::new(rhs) };
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<PExpr, PredError> {
        if self.eat_op("!") {
            return Ok(PExpr::Not(Box::new(self.unary()?)));
        }
        if self.eat_op("-") {
            return Ok(PExpr::Neg(Box::new(self.unary()?)));
        }
        if self.eat_op("(") {
            let e = self.expr(0)?;
            self.expect_op(")")?;
            return Ok(e);
        }
        match self.peek().cloned() {
            Some(Tok::Int(i)) => {
                self.pos += 1;
                Ok(PExpr::Int(i))
            }
            Some(Tok::Word(w)) => {
                self.pos += 1;
                if self.eat_op("(") {
                    let mut args = Vec::new();
                    if !self.eat_op(")") {
                        loop {
                            args.push(self.expr(0)?);
                            if self.eat_op(")") {
                                break;
                            }
                            self.expect_op(",")?;
                        }
                    }
                    Ok(PExpr::Fact { name: w, args })
                } else {
                    Ok(PExpr::Sym(w))
                }
            }
            _ => Err(self.error("expected a value, a fact like `dtype(a)`, `(` or `!`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Toy;
    impl Facts for Toy {
        fn fact(&self, name: &str, args: &[Value]) -> Result<Value, EvalError> {
            match (name, args) {
                ("dtype", [Value::Sym(p)]) if p == "a" => Ok(Value::Sym("bf16".into())),
                ("dim", [Value::Sym(p), Value::Int(i)]) if p == "a" => Ok(Value::Int([64, 256][*i as usize])),
                ("runtime", _) => Ok(Value::Unknown),
                _ => Err(EvalError::UnknownFact { scope: None, name: name.to_string() }),
            }
        }
    }

    fn check(text: &str) -> Option<bool> {
        holds(&parse(text).unwrap(), &Toy).unwrap()
    }

    #[test]
    fn evaluates_facts_and_arithmetic() {
        assert_eq!(check("dtype(a) == bf16"), Some(true));
        assert_eq!(check("dtype(a) in [f16, f32]"), Some(false));
        assert_eq!(check("dim(a, 1) % 8 == 0 && dim(a, 1) <= 256"), Some(true));
        assert_eq!(check("dim(a, 0) * 2 + 1 == 129 || false"), Some(true));
        assert_eq!(check("!(dim(a, 0) > 64)"), Some(true));
    }

    #[test]
    fn unknown_propagates_but_short_circuits() {
        assert_eq!(check("runtime(a) == 3"), None);
        assert_eq!(check("runtime(a) == 3 && false"), Some(false));
        assert_eq!(check("runtime(a) == 3 || true"), Some(true));
    }

    #[test]
    fn reports_authoring_errors() {
        assert!(parse("dtype(a) ==").is_err());
        assert!(parse("dim(a, 0) $ 2").is_err());
        assert!(holds(&parse("nosuch(a)").unwrap(), &Toy).is_err());
        assert!(holds(&parse("dtype(a) + 1 == 2").unwrap(), &Toy).is_err());
    }

    #[test]
    fn display_round_trips() {
        for text in ["dim(a, 1) % 8 == 0 && dim(a, 1) <= 256", "(x || y) && !z", "dtype(a) in [bf16, f16]", "a - (b - c) == 0"] {
            let e = parse(text).unwrap();
            assert_eq!(parse(&e.to_string()).unwrap(), e, "{text}");
        }
    }
}
