//! Explicit barriers: `barrier B: stages N count C producer .. consumer ..` is N mbarriers
//! initialised with C arrivals per phase; `arrive`, `arrive_expect_tx`, `wait`, `wait_parity` and
//! `tma_load(dst, src, B)` act on one of them (`B[i]` selects stage i).
//!
//! `wait(B)` derives its parity like the verifier does: per role and barrier stage, the k-th wait
//! waits for parity `k % 2`. The role keeps those bits in one register (`B_phase`, bit s for
//! stage s), so a run-time stage index costs a shift, not an array.

use super::prelude::Helper;
use crate::layout::TX_COUNT_MAX as TX_MAX;
use super::{strip_parens, unsupported, LowerError, Lw};
use crate::ir::*;
use crate::span::Span;

/// One mbarrier of an explicit barrier, as C.
pub(crate) struct BarRef {
    pub h: Handle<BarrierDecl>,
    /// The 32-bit shared address of the mbarrier.
    pub addr: String,
    /// The stage index (C), when the barrier is an array.
    pub stage: Option<String>,
}

impl<'a> Lw<'a> {
    /// Whether `e` names an explicit barrier (`B` or `B[i]`).
    pub(crate) fn is_barrier_expr(&self, e: Handle<Expr>) -> bool {
        matches!(self.m.exprs[e].ty, Type::Barrier(_))
    }

    /// The mbarrier an expression selects.
    pub(crate) fn bar_ref(&mut self, e: Handle<Expr>, span: Span) -> Result<BarRef, LowerError> {
        let m = self.m;
        let (h, index) = match &m.exprs[e].kind {
            ExprKind::Barrier(h) => (*h, None),
            ExprKind::Index { base, items } => match (&m.exprs[*base].kind, items.as_slice()) {
                (ExprKind::Barrier(h), [IndexItem::At(i)]) => (*h, Some(*i)),
                _ => return Err(unsupported("this barrier expression", span)),
            },
            _ => return Err(unsupported("this synchronisation argument", span)),
        };
        let d = &m.barriers[h];
        let base = self.bars[h.index()].addr.clone();
        match index {
            None if d.stages > 1 => Err(LowerError::new(
                "L001",
                format!("barrier `{}` has {} stages: name one of them (`{}[i]`)", d.name, d.stages, d.name),
                span,
            )),
            None => Ok(BarRef { h, addr: base, stage: None }),
            Some(i) => {
                if let Some(v) = self.m.const_value(i) {
                    if v < 0 || v >= i64::from(d.stages) {
                        return Err(LowerError::new(
                            "L001",
                            format!("index {v} is outside the {} stages of barrier `{}`", d.stages, d.name),
                            span,
                        ));
                    }
                    let addr = if v == 0 { base } else { format!("{base} + {}", 8 * v) };
                    return Ok(BarRef { h, addr, stage: Some(v.to_string()) });
                }
                let c = self.scalar(i)?;
                let c = strip_parens(&c).to_string();
                let simple = c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_');
                let addr = if simple { format!("{base} + 8 * {c}") } else { format!("{base} + 8 * ({c})") };
                Ok(BarRef { h, addr, stage: Some(if simple { c } else { format!("({c})") }) })
            }
        }
    }

    /// The phase-bit registers of the explicit barriers a role body `wait`s on (declared here,
    /// all bits 0: every stage's first wait is for parity 0).
    pub(crate) fn barrier_state(&mut self, block: &Block) -> Result<std::collections::HashMap<Handle<BarrierDecl>, String>, LowerError> {
        let m = self.m;
        let mut waited: Vec<Handle<BarrierDecl>> = Vec::new();
        self.scan_block(block, &mut |lw, s| {
            if let Stmt::Op(c) = s {
                if c.op == "wait" {
                    if let Some(e) = c.args.first().copied().flatten() {
                        let mut base = e;
                        if let ExprKind::Index { base: b, .. } = &lw.m.exprs[e].kind {
                            base = *b;
                        }
                        if let ExprKind::Barrier(h) = lw.m.exprs[base].kind {
                            if !waited.contains(&h) {
                                waited.push(h);
                            }
                        }
                    }
                }
            }
        });
        waited.sort();
        let mut out = std::collections::HashMap::new();
        for h in waited {
            let d = &m.barriers[h];
            let name = self.derived(&format!("{}_phase", super::c_ident(&d.name)));
            let what = if d.stages > 1 {
                format!("bit s: parity of this role's next wait on `{}[s]`", d.name)
            } else {
                format!("parity of this role's next wait on `{}`", d.name)
            };
            self.w.line(format!("unsigned {name} = 0u;  // {what} (the k-th wait waits for parity k % 2)"));
            out.insert(h, name);
        }
        Ok(out)
    }

    /// `wait(B)` (derived parity) or `wait_parity(B, parity)`: every thread of the role loops on
    /// `try_wait.parity` until that phase has completed.
    pub(crate) fn bar_wait(&mut self, be: Handle<Expr>, parity: Option<Handle<Expr>>, span: Span) -> Result<(), LowerError> {
        let b = self.bar_ref(be, span)?;
        if self.sm90() {
            self.need(Helper::MbarWait);
        } else {
            self.need(Helper::MbarTestWait);
        }
        let name = self.m.barriers[b.h].name.clone();
        match parity {
            Some(p) => {
                let pc = match self.m.const_value(p) {
                    Some(v) => format!("{}u", v & 1),
                    None => {
                        let c = self.scalar(p)?;
                        format!("(unsigned)({}) & 1u", strip_parens(&c))
                    }
                };
                self.w.line(format!("cake_mbar_wait({}, {pc});  // until the phase of `{name}` with this parity has completed", b.addr));
            }
            None => {
                let ph = self
                    .role
                    .as_ref()
                    .and_then(|r| r.bar_phase.get(&b.h).cloned())
                    .ok_or_else(|| unsupported(format!("waiting on barrier `{name}` here"), span))?;
                match &b.stage {
                    None => {
                        self.w.line(format!("cake_mbar_wait({}, {ph});  // this role's next phase of `{name}`", b.addr));
                        self.w.line(format!("{ph} ^= 1u;"));
                    }
                    Some(s) => {
                        let bit = if s == "0" { ph.clone() } else { format!("({ph} >> {s})") };
                        self.w.line(format!("cake_mbar_wait({}, {bit} & 1u);  // this role's next phase of `{name}[{}]`", b.addr, strip_parens(s)));
                        self.w.line(format!("{ph} ^= 1u << {s};"));
                    }
                }
            }
        }
        Ok(())
    }

    /// `arrive(B)`: the role's threads meet (so that all their earlier accesses are part of the
    /// release), then one elected thread arrives once.
    pub(crate) fn bar_arrive(&mut self, be: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        let b = self.bar_ref(be, span)?;
        let name = self.m.barriers[b.h].name.clone();
        let rh = self.role.as_ref().map(|r| r.h).ok_or_else(|| unsupported("arrive outside a role", span))?;
        let r = &self.m.roles[rh];
        self.need(Helper::MbarArrive);
        let arrive = format!("cake_mbar_arrive({});  // one arrival on `{name}`", b.addr);
        match self.is_leader_guarded() {
            None => self.w.line(arrive),
            Some(l) => {
                if r.threads() == 32 {
                    self.w.line("__syncwarp();  // the warp's earlier accesses are ordered before the arrival");
                } else {
                    self.need(Helper::NamedBarrier);
                    self.w.line(format!(
                        "cake_named_barrier({}, {});  // role `{}`'s earlier accesses are ordered before the arrival",
                        1 + rh.index(),
                        r.threads(),
                        r.name
                    ));
                }
                self.w.line(format!("if ({l}) {arrive}"));
            }
        }
        Ok(())
    }

    /// `arrive_expect_tx(B, bytes)`: one elected thread announces the bytes and arrives once.
    pub(crate) fn bar_arrive_expect_tx(&mut self, be: Handle<Expr>, bytes: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        if !self.sm90() {
            return Err(unsupported("arrive_expect_tx on a target without transaction-count mbarriers", span));
        }
        let b = self.bar_ref(be, span)?;
        let name = self.m.barriers[b.h].name.clone();
        let n = match self.m.const_value(bytes) {
            Some(v) if (0..=TX_MAX as i64).contains(&v) => format!("{v}u"),
            Some(v) => {
                return Err(LowerError::new("L004", format!("{v} transaction bytes are outside the mbarrier's range (0..={TX_MAX})"), span));
            }
            None => {
                let c = self.scalar(bytes)?;
                format!("(unsigned)({})", strip_parens(&c))
            }
        };
        self.need(Helper::MbarArriveExpectTx);
        let call = format!("cake_mbar_arrive_expect_tx({}, {n});  // bytes as written: the copies completing on `{name}` must deliver exactly these", b.addr);
        match self.is_leader_guarded() {
            Some(l) => self.w.line(format!("if ({l}) {call}")),
            None => self.w.line(call),
        }
        Ok(())
    }
}
