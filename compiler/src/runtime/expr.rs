//! The `elementwise` workload's expression language: Z = f(x, y, w) over the elementwise
//! oracle's inputs, tokenized, parsed, type-checked and evaluated here in fp64 — a small
//! language of its own, independent of Cake's parser and lowering, so the oracle never shares a
//! bug with the compiler it judges. The workload parses `expr` with [`ElementExpr::parse`]; the
//! `elementwise` oracle ([`crate::runtime::oracle::elementwise`]) evaluates it per element.

/// A variable of the `elementwise` oracle's expression: `x` = X[r, c], `y` = Y[r, c], `w` = W[c].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExprVar {
    X,
    Y,
    W,
}

/// A function of the `elementwise` oracle's expression (see [`ElementExpr`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExprFunc {
    Exp,
    Log,
    Rsqrt,
    Sqrt,
    Abs,
    Max,
    Min,
    Fma,
    Select,
}

impl ExprFunc {
    pub const ALL: [ExprFunc; 9] = [
        ExprFunc::Exp,
        ExprFunc::Log,
        ExprFunc::Rsqrt,
        ExprFunc::Sqrt,
        ExprFunc::Abs,
        ExprFunc::Max,
        ExprFunc::Min,
        ExprFunc::Fma,
        ExprFunc::Select,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ExprFunc::Exp => "exp",
            ExprFunc::Log => "log",
            ExprFunc::Rsqrt => "rsqrt",
            ExprFunc::Sqrt => "sqrt",
            ExprFunc::Abs => "abs",
            ExprFunc::Max => "max",
            ExprFunc::Min => "min",
            ExprFunc::Fma => "fma",
            ExprFunc::Select => "select",
        }
    }

    fn arity(self) -> usize {
        match self {
            ExprFunc::Exp | ExprFunc::Log | ExprFunc::Rsqrt | ExprFunc::Sqrt | ExprFunc::Abs => 1,
            ExprFunc::Max | ExprFunc::Min => 2,
            ExprFunc::Fma | ExprFunc::Select => 3,
        }
    }

    fn signature(self) -> &'static str {
        match self {
            ExprFunc::Max | ExprFunc::Min => "(a, b)",
            ExprFunc::Fma => "(a, b, c) = a·b + c",
            ExprFunc::Select => "(condition, if_true, if_false)",
            _ => "(a)",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CmpOp {
    Gt,
    Lt,
    Ge,
    Le,
}

/// A node of a parsed expression. Parsing checks the types: comparisons (`Cmp`) are booleans and
/// appear only as `select`'s condition; every other node is a number.
#[derive(Clone, Debug, PartialEq)]
enum ExprNode {
    Num(f64),
    Var(ExprVar),
    Neg(Box<ExprNode>),
    Bin(BinOp, Box<ExprNode>, Box<ExprNode>),
    Cmp(CmpOp, Box<ExprNode>, Box<ExprNode>),
    Call(ExprFunc, Vec<ExprNode>),
}

impl ExprNode {
    fn is_bool(&self) -> bool {
        matches!(self, ExprNode::Cmp(..))
    }

    /// The value in fp64 (a number node).
    fn num(&self, v: &[f64; 3]) -> f64 {
        match self {
            ExprNode::Num(n) => *n,
            ExprNode::Var(var) => v[*var as usize],
            ExprNode::Neg(a) => -a.num(v),
            ExprNode::Bin(op, a, b) => {
                let (a, b) = (a.num(v), b.num(v));
                match op {
                    BinOp::Add => a + b,
                    BinOp::Sub => a - b,
                    BinOp::Mul => a * b,
                    BinOp::Div => a / b,
                }
            }
            // Parsing puts comparisons only where a boolean goes; 1 or 0 keeps this total.
            ExprNode::Cmp(..) => f64::from(u8::from(self.truth(v))),
            ExprNode::Call(f, args) => {
                let a = |i: usize| args[i].num(v);
                match f {
                    ExprFunc::Exp => a(0).exp(),
                    ExprFunc::Log => a(0).ln(),
                    ExprFunc::Rsqrt => 1.0 / a(0).sqrt(),
                    ExprFunc::Sqrt => a(0).sqrt(),
                    ExprFunc::Abs => a(0).abs(),
                    ExprFunc::Max => a(0).max(a(1)),
                    ExprFunc::Min => a(0).min(a(1)),
                    ExprFunc::Fma => a(0).mul_add(a(1), a(2)),
                    ExprFunc::Select => {
                        if args[0].truth(v) {
                            a(1)
                        } else {
                            a(2)
                        }
                    }
                }
            }
        }
    }

    /// The truth of a comparison (a boolean node).
    fn truth(&self, v: &[f64; 3]) -> bool {
        match self {
            ExprNode::Cmp(op, a, b) => {
                let (a, b) = (a.num(v), b.num(v));
                match op {
                    CmpOp::Gt => a > b,
                    CmpOp::Lt => a < b,
                    CmpOp::Ge => a >= b,
                    CmpOp::Le => a <= b,
                }
            }
            other => other.num(v) != 0.0,
        }
    }
}

/// Why an `elementwise` expression was refused: `code` names the kind of error (`syntax`,
/// `unknown_name`, `arity`, `type`, `too_deep`), `column` (1-based, in characters) where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExprError {
    pub code: &'static str,
    pub column: usize,
    pub message: String,
}

impl std::fmt::Display for ExprError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "column {}: {} [{}]", self.column, self.message, self.code)
    }
}

impl std::error::Error for ExprError {}

/// The `elementwise` oracle's expression Z = f(x, y, w), parsed and evaluated here, in fp64,
/// independently of Cake's own parser and lowering. Grammar (usual precedence, left to right):
///
/// ```text
/// expr  := sum [(">" | "<" | ">=" | "<=") sum]      (a comparison: select's condition only)
/// sum   := prod (("+" | "-") prod)*
/// prod  := unary (("*" | "/") unary)*
/// unary := "-" unary | atom
/// atom  := NUMBER | "x" | "y" | "w" | FUNC "(" expr ("," expr)* ")" | "(" expr ")"
/// FUNC  := exp log rsqrt sqrt abs (one argument) | max min (two) | fma select (three)
/// ```
///
/// `fma(a, b, c)` = a·b + c; `select(c, a, b)` = a where the comparison c holds, else b;
/// `rsqrt(a)` = 1/√a; `log` is the natural logarithm.
#[derive(Clone, Debug, PartialEq)]
pub struct ElementExpr {
    text: String,
    root: ExprNode,
}

/// Deeper nesting than this is refused (the parser and the evaluator recurse).
const EXPR_MAX_DEPTH: usize = 64;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Num(f64),
    Name(String),
    /// `+ - * / ( ) ,` and the comparisons `> < >= <=`.
    Op(&'static str),
    End,
}

fn tokenize(text: &str) -> Result<Vec<(Tok, usize)>, ExprError> {
    let cs: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        let (c, col) = (cs[i], i + 1);
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || (c == '.' && cs.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let start = i;
            while i < cs.len() && (cs[i].is_ascii_digit() || cs[i] == '.') {
                i += 1;
            }
            // An exponent: e or E, an optional sign, digits.
            if i < cs.len() && (cs[i] == 'e' || cs[i] == 'E') {
                let sign = usize::from(cs.get(i + 1).is_some_and(|s| *s == '+' || *s == '-'));
                if cs.get(i + 1 + sign).is_some_and(char::is_ascii_digit) {
                    i += 1 + sign;
                    while i < cs.len() && cs[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let s: String = cs[start..i].iter().collect();
            let n: f64 = s.parse().map_err(|_| ExprError {
                code: "syntax",
                column: col,
                message: format!("`{s}` is not a number"),
            })?;
            out.push((Tok::Num(n), col));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '_') {
                i += 1;
            }
            out.push((Tok::Name(cs[start..i].iter().collect()), col));
        } else {
            let two = cs.get(i + 1) == Some(&'=');
            let op = match (c, two) {
                ('>', true) => ">=",
                ('<', true) => "<=",
                ('>', false) => ">",
                ('<', false) => "<",
                ('+', _) => "+",
                ('-', _) => "-",
                ('*', _) => "*",
                ('/', _) => "/",
                ('(', _) => "(",
                (')', _) => ")",
                (',', _) => ",",
                _ => {
                    return Err(ExprError {
                        code: "syntax",
                        column: col,
                        message: format!("unexpected character `{c}`"),
                    })
                }
            };
            i += op.len();
            out.push((Tok::Op(op), col));
        }
    }
    out.push((Tok::End, cs.len() + 1));
    Ok(out)
}

struct ExprParser {
    toks: Vec<(Tok, usize)>,
    i: usize,
    depth: usize,
}

impl ExprParser {
    fn peek(&self) -> &Tok {
        &self.toks[self.i].0
    }

    fn column(&self) -> usize {
        self.toks[self.i].1
    }

    fn fail<T>(&self, code: &'static str, column: usize, message: String) -> Result<T, ExprError> {
        Err(ExprError { code, column, message })
    }

    fn describe(t: &Tok) -> String {
        match t {
            Tok::Num(n) => format!("number `{n}`"),
            Tok::Name(n) => format!("`{n}`"),
            Tok::Op(o) => format!("`{o}`"),
            Tok::End => "the end of the expression".into(),
        }
    }

    fn expect(&mut self, op: &'static str, what: &str) -> Result<(), ExprError> {
        if *self.peek() == Tok::Op(op) {
            self.i += 1;
            return Ok(());
        }
        self.fail("syntax", self.column(), format!("expected `{op}` {what}, found {}", Self::describe(self.peek())))
    }

    /// A number operand: a comparison is refused here.
    fn number(&self, node: ExprNode, column: usize, what: &str) -> Result<ExprNode, ExprError> {
        if node.is_bool() {
            return self.fail(
                "type",
                column,
                format!("a comparison is a condition, not a number; it can only be `select`'s first argument ({what})"),
            );
        }
        Ok(node)
    }

    fn expr(&mut self) -> Result<ExprNode, ExprError> {
        self.depth += 1;
        if self.depth > EXPR_MAX_DEPTH {
            return self.fail("too_deep", self.column(), format!("nested more than {EXPR_MAX_DEPTH} deep"));
        }
        let col = self.column();
        let a = self.sum()?;
        let op = match self.peek() {
            Tok::Op(">") => CmpOp::Gt,
            Tok::Op("<") => CmpOp::Lt,
            Tok::Op(">=") => CmpOp::Ge,
            Tok::Op("<=") => CmpOp::Le,
            _ => {
                self.depth -= 1;
                return Ok(a);
            }
        };
        let a = self.number(a, col, "compared")?;
        self.i += 1;
        let col = self.column();
        let b = self.sum()?;
        let b = self.number(b, col, "compared")?;
        if let Tok::Op(o @ (">" | "<" | ">=" | "<=")) = self.peek() {
            return self.fail("type", self.column(), format!("comparisons do not chain (`{o}` after a comparison)"));
        }
        self.depth -= 1;
        Ok(ExprNode::Cmp(op, Box::new(a), Box::new(b)))
    }

    fn sum(&mut self) -> Result<ExprNode, ExprError> {
        self.left_assoc([("+", BinOp::Add), ("-", BinOp::Sub)], "an operand of + or -", Self::prod)
    }

    fn prod(&mut self) -> Result<ExprNode, ExprError> {
        self.left_assoc([("*", BinOp::Mul), ("/", BinOp::Div)], "an operand of * or /", Self::unary)
    }

    /// One precedence level of left-associative numeric operators over operands parsed by `next`.
    fn left_assoc(
        &mut self,
        ops: [(&str, BinOp); 2],
        what: &str,
        next: fn(&mut Self) -> Result<ExprNode, ExprError>,
    ) -> Result<ExprNode, ExprError> {
        let col = self.column();
        let mut a = next(self)?;
        loop {
            let Tok::Op(o) = self.peek() else { break };
            let Some(&(_, op)) = ops.iter().find(|(s, _)| s == o) else { break };
            a = self.number(a, col, what)?;
            self.i += 1;
            let col = self.column();
            let b = next(self)?;
            let b = self.number(b, col, what)?;
            a = ExprNode::Bin(op, Box::new(a), Box::new(b));
        }
        Ok(a)
    }

    fn unary(&mut self) -> Result<ExprNode, ExprError> {
        if *self.peek() == Tok::Op("-") {
            self.i += 1;
            self.depth += 1;
            if self.depth > EXPR_MAX_DEPTH {
                return self.fail("too_deep", self.column(), format!("nested more than {EXPR_MAX_DEPTH} deep"));
            }
            let col = self.column();
            let a = self.unary()?;
            let a = self.number(a, col, "negated")?;
            self.depth -= 1;
            return Ok(ExprNode::Neg(Box::new(a)));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<ExprNode, ExprError> {
        let (tok, col) = self.toks[self.i].clone();
        match tok {
            Tok::Num(n) => {
                self.i += 1;
                Ok(ExprNode::Num(n))
            }
            Tok::Op("(") => {
                self.i += 1;
                let e = self.expr()?;
                self.expect(")", "to close the `(`")?;
                Ok(e)
            }
            Tok::Name(name) => {
                self.i += 1;
                let var = match name.as_str() {
                    "x" => Some(ExprVar::X),
                    "y" => Some(ExprVar::Y),
                    "w" => Some(ExprVar::W),
                    _ => None,
                };
                let func = ExprFunc::ALL.into_iter().find(|f| f.name() == name);
                let call = *self.peek() == Tok::Op("(");
                match (var, func, call) {
                    (Some(v), _, false) => Ok(ExprNode::Var(v)),
                    (Some(_), _, true) => self.fail("syntax", col, format!("`{name}` is a variable, not a function")),
                    (None, Some(f), true) => self.call(f, col),
                    (None, Some(f), false) => self.fail(
                        "syntax",
                        col,
                        format!("`{name}` is a function: call it as `{name}{}`", f.signature()),
                    ),
                    (None, None, _) => {
                        let funcs: Vec<&str> = ExprFunc::ALL.iter().map(|f| f.name()).collect();
                        self.fail(
                            "unknown_name",
                            col,
                            format!("unknown name `{name}` (variables: x, y, w; functions: {})", funcs.join(", ")),
                        )
                    }
                }
            }
            other => self.fail("syntax", col, format!("expected a number, a name or `(`, found {}", Self::describe(&other))),
        }
    }

    fn call(&mut self, f: ExprFunc, col: usize) -> Result<ExprNode, ExprError> {
        self.i += 1; // (
        let mut args = Vec::new();
        if *self.peek() != Tok::Op(")") {
            loop {
                let acol = self.column();
                let a = self.expr()?;
                let condition = f == ExprFunc::Select && args.is_empty();
                if condition && !a.is_bool() {
                    return self.fail("type", acol, "`select`'s first argument must be a comparison (`a > b`, `a <= b`, ...)".into());
                }
                if !condition {
                    args.push(self.number(a, acol, &format!("an argument of `{}`", f.name()))?);
                } else {
                    args.push(a);
                }
                if *self.peek() == Tok::Op(",") {
                    self.i += 1;
                } else {
                    break;
                }
            }
        }
        self.expect(")", &format!("to close the call of `{}`", f.name()))?;
        if args.len() != f.arity() {
            return self.fail(
                "arity",
                col,
                format!("`{}` takes {} argument(s), `{}{}`; given {}", f.name(), f.arity(), f.name(), f.signature(), args.len()),
            );
        }
        Ok(ExprNode::Call(f, args))
    }
}

impl ElementExpr {
    /// Parse (and type-check) an expression; every error is an [`ExprError`], never a panic.
    pub fn parse(text: &str) -> Result<ElementExpr, ExprError> {
        let mut p = ExprParser { toks: tokenize(text)?, i: 0, depth: 0 };
        if p.toks.len() == 1 {
            return p.fail("syntax", 1, "the expression is empty".into());
        }
        let col = p.column();
        let root = p.expr()?;
        if *p.peek() != Tok::End {
            return p.fail("syntax", p.column(), format!("unexpected {} after a complete expression", ExprParser::describe(p.peek())));
        }
        let root = p.number(root, col, "the result Z must be a number; use `select(condition, a, b)`")?;
        Ok(ElementExpr { text: text.to_string(), root })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// f(x, y, w) in fp64.
    pub fn eval(&self, x: f64, y: f64, w: f64) -> f64 {
        self.root.num(&[x, y, w])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(text: &str, x: f64, y: f64, w: f64) -> f64 {
        ElementExpr::parse(text).unwrap_or_else(|e| panic!("{text}: {e}")).eval(x, y, w)
    }

    #[test]
    fn element_expressions_evaluate_with_the_usual_precedence() {
        assert_eq!(ev("1 + 2 * 3", 0.0, 0.0, 0.0), 7.0);
        assert_eq!(ev("(1 + 2) * 3", 0.0, 0.0, 0.0), 9.0);
        assert_eq!(ev("8 / 4 / 2", 0.0, 0.0, 0.0), 1.0, "left to right");
        assert_eq!(ev("8 - 4 - 2", 0.0, 0.0, 0.0), 2.0, "left to right");
        assert_eq!(ev("x - y * w", 10.0, 2.0, 3.0), 4.0);
        // Unary minus binds tighter than * and applies to calls and parentheses.
        assert_eq!(ev("-1.702 * x", 2.0, 0.0, 0.0), -3.404);
        assert_eq!(ev("-x * -y", 2.0, 3.0, 0.0), 6.0);
        assert_eq!(ev("2 - -x", 3.0, 0.0, 0.0), 5.0);
        assert_eq!(ev("-(x + y)", 1.0, 2.0, 0.0), -3.0);
        assert_eq!(ev("- - x", 4.0, 0.0, 0.0), 4.0);
        assert_eq!(ev("1.5e1 + .5 + 2E-1", 0.0, 0.0, 0.0), 15.7);
        // fma(a, b, c) = a·b + c, whatever the order of the variables.
        assert_eq!(ev("fma(w, x, y)", 2.0, 1.0, 3.0), 7.0);
        assert_eq!(ev("fma(x, y, w)", 2.0, 3.0, 1.0), 7.0);
        // select takes its second argument where the comparison holds.
        let leaky = "select(x + y > 0.0, x + y, 0.01 * (x + y)) * w";
        assert_eq!(ev(leaky, 1.0, 2.0, 2.0), 6.0);
        assert_eq!(ev(leaky, -1.0, -2.0, 2.0), -0.06);
        assert_eq!(ev("select(x >= 1, 1, 0) + select(x <= 1, 10, 0) + select(x < 1, 100, 0)", 1.0, 0.0, 0.0), 11.0);
        assert_eq!(ev("select((x > y), x, y)", 1.0, 5.0, 0.0), 5.0);
        assert_eq!(ev("min(max(x, 0.0 - w), w) + 0.5 * y", 3.0, 1.0, 2.0), 2.5);
        assert_eq!(ev("min(max(x, 0.0 - w), w)", -3.0, 0.0, 2.0), -2.0);
        assert_eq!(ev("abs(x) + sqrt(y) + rsqrt(w)", -1.0, 9.0, 4.0), 4.5);
        assert!((ev("log(1.0 + exp(x)) * y", 0.0, 2.0, 0.0) - 2.0 * 2f64.ln()).abs() < 1e-15);
        assert!((ev("x / (1.0 + exp(0.0 - x)) * y", 1.0, 1.0, 0.0) - 1.0 / (1.0 + (-1f64).exp())).abs() < 1e-15);
    }

    #[test]
    fn bad_element_expressions_are_coded_errors() {
        let e = |t: &str| ElementExpr::parse(t).unwrap_err();
        let m = e("x + q");
        assert_eq!((m.code, m.column), ("unknown_name", 5));
        assert!(m.message.contains("unknown name `q` (variables: x, y, w; functions: exp, log"), "{m}");
        assert_eq!(e("tanh(x)").code, "unknown_name");
        assert_eq!(e("").code, "syntax");
        assert_eq!(e("x +").code, "syntax");
        assert_eq!(e("(x + y").code, "syntax");
        assert_eq!(e("x y").code, "syntax");
        assert_eq!(e("x ^ 2").code, "syntax");
        assert_eq!(e("1.2.3").code, "syntax");
        assert_eq!(e("x(1)").code, "syntax");
        assert!(e("exp").message.contains("call it as `exp(a)`"));
        let m = e("fma(x, y)");
        assert_eq!((m.code, m.column), ("arity", 1));
        assert_eq!(e("max(x)").code, "arity");
        assert_eq!(e("exp()").code, "arity");
        // Types: a comparison is only select's condition, and select's condition is one.
        assert_eq!(e("x > y").code, "type");
        assert_eq!(e("(x > y) * 2").code, "type");
        assert_eq!(e("select(x, y, w)").code, "type");
        assert_eq!(e("select(x > 0, y > 0, w)").code, "type");
        assert_eq!(e("select(x > y > w, 1, 2)").code, "type");
        // Deep nesting is refused, not a stack overflow.
        let deep = format!("{}x{}", "(".repeat(10_000), ")".repeat(10_000));
        assert_eq!(e(&deep).code, "too_deep");
        assert_eq!(e(&format!("{}x", "-".repeat(10_000))).code, "too_deep");
        assert!(e("x + q").to_string().contains("column 5"));
    }
}
