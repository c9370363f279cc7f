//! Symbolic trip counts: polynomials with rational coefficients over the dims (and `T`, the
//! tiles one block walks, and `t.AXIS`, the walked tile's coordinates). A quotient by a constant is exact when every term is provably
//! divisible — `K / 64` with `dim K multiple_of 64` becomes `(1/64)·K` — so `(K / 32) / 2`,
//! `2 * (K / 128)` and `K / 64` normalize to the same polynomial. A quotient that is not provably
//! exact stays an opaque atom (it compares equal only to itself).

use std::collections::BTreeMap;
use std::fmt;

use crate::ir::{Expr, ExprKind, Field, Handle, LocalKind, Module};
use crate::syntax::ast::BinOp;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Atom {
    /// Tiles one block walks in a persistent tile loop.
    Tiles,
    Dim(usize),
    /// `t.AXIS` of the tile being walked (the grid axis index): every role walks the same tiles in
    /// the same order, so a per-tile count in it compares across roles (a causal attention's key
    /// loop runs `t.q + 1` times in the producer and the consumer alike).
    TileAxis(usize),
    Opaque(String),
    /// `min` / `max` of two polynomials (a sliding window's first key tile, `max(t.q * 2 - 16,
    /// 0)`), arguments in a canonical order: equal only to itself. Two different ones may still
    /// agree (other spellings of one clamp), so a difference is not a verdict ([`Poly::has_clamp`]).
    Clamp(String),
}

/// A reduced fraction with a positive denominator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rat {
    n: i128,
    d: i128,
}

fn gcd(mut a: i128, mut b: i128) -> i128 {
    a = a.abs();
    b = b.abs();
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a.max(1)
}

impl Rat {
    fn new(n: i128, d: i128) -> Option<Rat> {
        if d == 0 {
            return None;
        }
        let g = gcd(n, d);
        let (mut n, mut d) = (n / g, d / g);
        if d < 0 {
            n = n.checked_neg()?;
            d = d.checked_neg()?;
        }
        Some(Rat { n, d })
    }
    fn int(v: i128) -> Rat {
        Rat { n: v, d: 1 }
    }
    fn add(self, o: Rat) -> Option<Rat> {
        let n = self.n.checked_mul(o.d)?.checked_add(o.n.checked_mul(self.d)?)?;
        Rat::new(n, self.d.checked_mul(o.d)?)
    }
    fn mul(self, o: Rat) -> Option<Rat> {
        Rat::new(self.n.checked_mul(o.n)?, self.d.checked_mul(o.d)?)
    }
    fn is_zero(self) -> bool {
        self.n == 0
    }
}

type Mono = Vec<Atom>;

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Poly(BTreeMap<Mono, Rat>);

impl Poly {
    pub fn zero() -> Poly {
        Poly(BTreeMap::new())
    }
    pub fn constant(v: i64) -> Poly {
        let mut p = Poly::zero();
        if v != 0 {
            p.0.insert(Vec::new(), Rat::int(i128::from(v)));
        }
        p
    }
    pub fn atom(a: Atom) -> Poly {
        let mut p = Poly::zero();
        p.0.insert(vec![a], Rat::int(1));
        p
    }
    pub fn is_zero(&self) -> bool {
        self.0.is_empty()
    }
    /// Whether a term holds a [`Atom::Clamp`]: then equality proves equal counts, but a
    /// difference proves nothing.
    pub fn has_clamp(&self) -> bool {
        self.0.keys().flatten().any(|a| matches!(a, Atom::Clamp(_)))
    }
    /// Whether every atom has a value under a binding (dims and `T`): only such counts can be
    /// checked against the concrete traces.
    pub fn evaluable(&self) -> bool {
        self.0.keys().flatten().all(|a| matches!(a, Atom::Dim(_) | Atom::Tiles))
    }
    pub fn as_const(&self) -> Option<i64> {
        match self.0.len() {
            0 => Some(0),
            1 => {
                let (m, c) = self.0.iter().next()?;
                (m.is_empty() && c.d == 1).then(|| i64::try_from(c.n).ok()).flatten()
            }
            _ => None,
        }
    }
    fn add_term(&mut self, m: Mono, c: Rat) -> Option<()> {
        let cur = self.0.get(&m).copied().unwrap_or(Rat::int(0));
        let n = cur.add(c)?;
        if n.is_zero() {
            self.0.remove(&m);
        } else {
            self.0.insert(m, n);
        }
        Some(())
    }
    pub fn add(&self, o: &Poly) -> Option<Poly> {
        let mut r = self.clone();
        for (m, c) in &o.0 {
            r.add_term(m.clone(), *c)?;
        }
        Some(r)
    }
    pub fn sub(&self, o: &Poly) -> Option<Poly> {
        self.add(&o.scale(Rat::int(-1))?)
    }
    fn scale(&self, k: Rat) -> Option<Poly> {
        let mut r = Poly::zero();
        for (m, c) in &self.0 {
            r.add_term(m.clone(), c.mul(k)?)?;
        }
        Some(r)
    }
    pub fn mul(&self, o: &Poly) -> Option<Poly> {
        let mut r = Poly::zero();
        if self.0.len().saturating_mul(o.0.len()) > 4096 {
            return None;
        }
        for (ma, ca) in &self.0 {
            for (mb, cb) in &o.0 {
                let mut m = ma.clone();
                m.extend(mb.iter().cloned());
                m.sort();
                if m.len() > 16 {
                    return None;
                }
                r.add_term(m, ca.mul(*cb)?)?;
            }
        }
        Some(r)
    }
    /// `self / c`, exact when every term is provably divisible (`mult(atom)` is a known factor
    /// of the atom's value: a dim's `multiple_of`), otherwise an opaque atom.
    pub fn div_const(&self, c: i64, mult: &dyn Fn(&Atom) -> i64) -> Option<Poly> {
        if c == 0 {
            return None;
        }
        if let Some(k) = self.as_const() {
            // Integer division of known values truncates, like the generated code.
            return Some(Poly::constant(k.checked_div(c)?));
        }
        let exact = self.0.iter().all(|(m, coef)| {
            let mut f = Rat::int(1);
            for a in m {
                match f.mul(Rat::int(i128::from(mult(a).max(1)))) {
                    Some(x) => f = x,
                    None => return false,
                }
            }
            match coef.mul(f).and_then(|x| Rat::new(x.n, x.d.checked_mul(i128::from(c))?)) {
                Some(q) => q.d == 1,
                None => false,
            }
        });
        if exact {
            self.scale(Rat::new(1, i128::from(c))?)
        } else {
            Some(Poly::atom(Atom::Opaque(format!("floor(({self}) / {c})"))))
        }
    }

    /// Evaluate with dim values (and the tile count).
    pub fn eval(&self, dims: &[i64], tiles: i64) -> Option<i128> {
        let mut total = Rat::int(0);
        for (m, c) in &self.0 {
            let mut v = *c;
            for a in m {
                let x = match a {
                    Atom::Tiles => tiles,
                    Atom::Dim(d) => *dims.get(*d)?,
                    Atom::TileAxis(_) | Atom::Opaque(_) | Atom::Clamp(_) => return None,
                };
                v = v.mul(Rat::int(i128::from(x)))?;
            }
            total = total.add(v)?;
        }
        (total.d == 1).then_some(total.n)
    }

    /// Render with dim names.
    pub fn render(&self, m: &Module) -> String {
        if self.0.is_empty() {
            return "0".to_string();
        }
        let mut parts: Vec<String> = Vec::new();
        for (mono, c) in self.0.iter().rev() {
            let names: Vec<String> = mono
                .iter()
                .map(|a| match a {
                    Atom::Tiles => "T".to_string(),
                    Atom::Dim(d) => m.dims.iter().nth(*d).map_or("?".to_string(), |(_, x)| x.name.clone()),
                    Atom::TileAxis(a) => {
                        m.grid().and_then(|g| g.axes.get(*a)).map_or("t.?".to_string(), |x| format!("t.{}", x.name))
                    }
                    Atom::Opaque(s) | Atom::Clamp(s) => s.clone(),
                })
                .collect();
            let mono_s = names.join("·");
            let (neg, n) = (c.n < 0, c.n.abs());
            let body = if mono.is_empty() {
                if c.d == 1 {
                    n.to_string()
                } else {
                    format!("{n}/{}", c.d)
                }
            } else {
                match (n, c.d) {
                    (1, 1) => mono_s,
                    (n, 1) => format!("{n}·{mono_s}"),
                    (1, d) => format!("{mono_s}/{d}"),
                    (n, d) => format!("{n}·{mono_s}/{d}"),
                }
            };
            if parts.is_empty() {
                parts.push(if neg { format!("-{body}") } else { body });
            } else {
                parts.push(if neg { format!("- {body}") } else { format!("+ {body}") });
            }
        }
        parts.join(" ")
    }
}

impl fmt::Display for Poly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (m, c) in &self.0 {
            if !first {
                write!(f, " + ")?;
            }
            first = false;
            write!(f, "{}/{}", c.n, c.d)?;
            for a in m {
                match a {
                    Atom::Tiles => write!(f, "·T")?,
                    Atom::Dim(d) => write!(f, "·d{d}")?,
                    Atom::TileAxis(a) => write!(f, "·t{a}")?,
                    Atom::Opaque(s) | Atom::Clamp(s) => write!(f, "·[{s}]")?,
                }
            }
        }
        if first {
            write!(f, "0")?;
        }
        Ok(())
    }
}

/// The multiple a dim is declared to be (1 when not declared).
pub fn dim_multiple(m: &Module) -> impl Fn(&Atom) -> i64 + '_ {
    move |a: &Atom| match a {
        Atom::Dim(d) => m.dims.iter().nth(*d).and_then(|(_, x)| x.multiple_of).filter(|v| *v > 0).unwrap_or(1),
        _ => 1,
    }
}

/// An integer expression over dims, constants and the walked tile's coordinates as a polynomial;
/// `None` when it mentions anything else (loop variables, scalars, memory).
pub fn expr_poly(m: &Module, e: Handle<Expr>) -> Option<Poly> {
    expr_poly_depth(m, e, 0)
}

fn expr_poly_depth(m: &Module, e: Handle<Expr>, depth: u32) -> Option<Poly> {
    if depth > 100 {
        return None;
    }
    let rec = |x: Handle<Expr>| expr_poly_depth(m, x, depth + 1);
    match &m.exprs[e].kind {
        ExprKind::Int(v) => Some(Poly::constant(*v)),
        ExprKind::Dim(d) => Some(Poly::atom(Atom::Dim(d.index()))),
        ExprKind::Field { base, field: Field::TileAxis(a) } if matches!(m.exprs[*base].kind, ExprKind::Local(l) if m.locals[l].kind == LocalKind::Tile) => {
            Some(Poly::atom(Atom::TileAxis(*a)))
        }
        ExprKind::Unary(crate::syntax::ast::UnOp::Neg, a) => Poly::zero().sub(&rec(*a)?),
        ExprKind::Binary(op, a, b) => {
            let (x, y) = (rec(*a)?, rec(*b)?);
            match op {
                BinOp::Add => x.add(&y),
                BinOp::Sub => x.sub(&y),
                BinOp::Mul => x.mul(&y),
                BinOp::Div => match y.as_const() {
                    Some(c) if c > 0 => x.div_const(c, &dim_multiple(m)),
                    _ => Some(Poly::atom(Atom::Opaque(format!("({x}) / ({y})")))),
                },
                _ => None,
            }
        }
        // Not a polynomial, but the same `min` / `max` of the same polynomials in two roles
        // counts the same: an atom equal only to itself.
        ExprKind::Call(c) if matches!(c.op.as_str(), "min" | "max") && c.args.len() == 2 => {
            let (x, y) = (rec(c.args[0]?)?.to_string(), rec(c.args[1]?)?.to_string());
            let (x, y) = if x <= y { (x, y) } else { (y, x) };
            Some(Poly::atom(Atom::Clamp(format!("{}({x}, {y})", c.op))))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotients_normalize() {
        let mult = |a: &Atom| if *a == Atom::Dim(0) { 64 } else { 1 };
        let k = Poly::atom(Atom::Dim(0));
        let a = k.div_const(64, &mult).unwrap();
        let b = k.div_const(32, &mult).unwrap().div_const(2, &mult).unwrap();
        let c = Poly::constant(2).mul(&k.div_const(128, &mult).unwrap()).unwrap();
        assert_eq!(a, b);
        // K/128 is not provably exact with multiple_of 64: opaque, so not equal.
        assert_ne!(a, c);
        assert_eq!(a.eval(&[640], 1), Some(10));
        let d = k.div_const(64, &mult).unwrap().mul(&Poly::constant(2)).unwrap();
        assert_eq!(d, k.div_const(32, &mult).unwrap());
    }

    #[test]
    fn tile_coordinates_and_clamps_are_atoms() {
        let src = "kernel k target sm_90a\ndim S multiple_of 128\nout O: f32[S]\ngrid tiles[q = S / 128]\nrole r: warp 0..1\non r {\n    for t in tiles {\n        for j in max(t.q * 2 - 16, 0)..(t.q + 1) * 2 {\n        }\n        for j in max(0, t.q * 2 - 16)..t.q * 2 + 2 {\n        }\n        for j in min(t.q * 2 - 15, 0)..t.q * 2 + 2 {\n        }\n    }\n}\n";
        let m = crate::check::check_source(src).module.expect("type-checks");
        let bounds: Vec<(Poly, Poly)> = m
            .stmts
            .iter()
            .filter_map(|(_, s)| match s {
                crate::ir::Stmt::For { lo, hi, .. } => Some((expr_poly(&m, *lo)?, expr_poly(&m, *hi)?)),
                _ => None,
            })
            .collect();
        assert_eq!(bounds.len(), 3);
        // (t.q + 1) * 2 and t.q * 2 + 2 are one polynomial in the tile coordinate.
        assert_eq!(bounds[0].1, bounds[1].1);
        assert_eq!(bounds[0].1.render(&m), "2·t.q + 2");
        // max(a, b) and max(b, a) are one clamp; min is another; both are clamps.
        assert_eq!(bounds[0].0, bounds[1].0);
        assert_ne!(bounds[0].0, bounds[2].0);
        assert!(bounds[0].0.has_clamp() && !bounds[0].1.has_clamp());
        assert_eq!(bounds[0].1.eval(&[256], 1), None, "a tile coordinate has no value in a total");
    }
}
