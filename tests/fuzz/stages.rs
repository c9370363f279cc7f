//! One input through every stage of the library API, as `cake check`, `cake fmt`, `cake cost` and
//! `cake lower` would drive it: parse → fmt (print, re-parse, print again) → check → verify →
//! lower and cost (a program the verifier refuses is also lowered and costed as
//! `assume_verified_unsafe`, the way `cake run --assume-verified-unsafe` does), with every
//! finding rendered for people and as JSON. A stage that refuses the input with an error is a
//! pass; what this returns as an error is a broken promise of the library (besides panics, which
//! the campaign catches): formatting that does not re-parse or is not idempotent, or an estimate
//! that is not a finite, non-negative time.

use std::collections::BTreeMap;

use cake::api;
use cake::diag::Diagnostic;
use cake::lower::LowerOptions;
use cake::render::{render_human, render_json_lines};
use cake::verify::Validated;

use super::mutate::Rng;

/// How far an input went: the furthest stage it reached, for the campaign's counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reached {
    NotUtf8,
    Parse,
    Check,
    Verify,
    Lower,
}

pub const REACHED: [(Reached, &str); 5] =
    [(Reached::NotUtf8, "not UTF-8"), (Reached::Parse, "refused by parse"), (Reached::Check, "refused by check"), (Reached::Verify, "refused by verify"), (Reached::Lower, "verified, lowered and costed")];

const NAME: &str = "fuzz.cake";

fn render(source: &str, diags: &[Diagnostic]) {
    std::hint::black_box(render_human(NAME, source, diags, false));
    std::hint::black_box(render_json_lines(NAME, source, diags));
}

/// Drives `input` through the stages; `rng` picks the dims the cost model is asked about.
pub fn drive(input: &[u8], rng: &mut Rng) -> Result<Reached, String> {
    // `cake` reads programs as UTF-8 and refuses other bytes before parsing; the lossy text is
    // what a caller holding bytes would pass, so it is driven too.
    let lossy;
    let source = match std::str::from_utf8(input) {
        Ok(s) => s,
        Err(_) => {
            lossy = String::from_utf8_lossy(input).into_owned();
            drive_text(&lossy, rng)?;
            return Ok(Reached::NotUtf8);
        }
    };
    drive_text(source, rng)
}

fn drive_text(source: &str, rng: &mut Rng) -> Result<Reached, String> {
    let file = match api::parse(source) {
        Ok(f) => f,
        Err(e) => {
            render(source, &e.diagnostics);
            return Ok(Reached::Parse);
        }
    };
    let canonical = cake::syntax::print(&file);
    match api::parse(&canonical) {
        Ok(again) => {
            if cake::syntax::print(&again) != canonical {
                return Err("fmt: formatting the canonical text changed it again (not idempotent)".into());
            }
        }
        Err(e) => {
            let first = e.diagnostics.first().map(|d| format!("{}: {}", d.code, d.message)).unwrap_or_default();
            return Err(format!("fmt: the canonical text does not parse ({first})"));
        }
    }
    let checked = match api::check(file) {
        Ok(c) => c,
        Err(e) => {
            render(source, &e.diagnostics());
            return Ok(Reached::Check);
        }
    };
    let module = checked.module.clone();
    let (validated, reached) = match api::verify(checked) {
        Ok(v) => {
            render(source, &v.findings);
            (v, Reached::Lower)
        }
        Err(e) => {
            render(source, &e.findings);
            (Validated::assume_verified_unsafe(module), Reached::Verify)
        }
    };
    lower_and_cost(source, &validated, rng)?;
    Ok(reached)
}

fn lower_and_cost(source: &str, v: &Validated, rng: &mut Rng) -> Result<(), String> {
    let mut opts = LowerOptions::with_source(NAME, source);
    opts.line_directives = rng.chance(50);
    match api::lower(v, &opts) {
        Ok(l) => {
            std::hint::black_box(l.cuda.len());
        }
        Err(e) => render(source, &[e.to_diagnostic()]),
    }
    let Ok(cal) = cake::cost::builtin_calibration(&v.module().target) else { return Ok(()) };
    for _ in 0..2 {
        let dims = dims_for(v, rng);
        match api::cost(v, cal, &dims) {
            Ok(est) => {
                if !(est.predicted_ms.is_finite() && est.predicted_ms >= 0.0) {
                    return Err(format!("cost: predicted {} ms at {dims:?}", est.predicted_ms));
                }
            }
            Err(e) => render(source, &[e.to_diagnostic()]),
        }
    }
    Ok(())
}

/// Dims to cost at: mostly valid sizes (multiples of `multiple_of`, from one tile to the 32-bit
/// limit), sometimes a value the cost model must refuse with a coded error.
fn dims_for(v: &Validated, rng: &mut Rng) -> BTreeMap<String, i64> {
    let mut dims = BTreeMap::new();
    for (_, d) in v.module().dims.iter() {
        let k = d.multiple_of.unwrap_or(1).max(1);
        let value = match rng.below(10) {
            0 => i64::from(i32::MAX) / k * k,
            1 => *rng.pick(&[0, -k, k + 1, i64::MAX, 1 << 40]),
            _ => k.saturating_mul(*rng.pick(&[1, 2, 3, 8, 64, 1024])),
        };
        dims.insert(d.name.clone(), value);
    }
    dims
}
