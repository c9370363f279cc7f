//! Shapes written as text: `M=8192,N=8192,K=8192` (`,` or spaces between dims, `_` digit
//! separators allowed). One parser for `cake cost --shape`, `cake run --shape`, the MCP tools and
//! the evolution engine's `import --shape`.

use std::collections::BTreeMap;

/// A value for each dim, by name.
pub type Shape = BTreeMap<String, i64>;

/// Why a shape's text does not parse. Each variant names the offending part.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("`{part}` is not DIM=VALUE; write the dims as `M=8192,N=8192,K=8192`")]
    NotAssignment { part: String },
    #[error("`{name}` is not a dim name (letters, digits, `_`); write the dims as `M=8192,N=8192,K=8192`")]
    BadName { name: String },
    #[error("`{value}` is not an integer (in `{part}`); give each dim a whole number, e.g. `{name}=8192`")]
    NotInteger { name: String, value: String, part: String },
    #[error("dim `{name}` is given twice; give each dim once")]
    Repeated { name: String },
    #[error("the shape is empty; give a value for every dim, e.g. `M=8192,N=8192,K=8192`")]
    Empty,
}

/// Parse the dims of several texts into one shape (`--shape M=1,N=2 --shape K=3`). An empty
/// list, or texts with no dims, give an empty shape: the caller decides whether that is allowed.
pub fn parse_all<S: AsRef<str>>(items: &[S]) -> Result<Shape, ShapeError> {
    let mut out = Shape::new();
    for item in items {
        for part in item.as_ref().split([',', ' ']).map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| ShapeError::NotAssignment { part: part.to_string() })?;
            let name = k.trim();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(ShapeError::BadName { name: name.to_string() });
            }
            let value: i64 = v.trim().replace('_', "").parse().map_err(|_| ShapeError::NotInteger {
                name: name.to_string(),
                value: v.trim().to_string(),
                part: part.to_string(),
            })?;
            if out.insert(name.to_string(), value).is_some() {
                return Err(ShapeError::Repeated { name: name.to_string() });
            }
        }
    }
    Ok(out)
}

/// Parse one shape that must bind at least one dim.
pub fn parse(text: &str) -> Result<Shape, ShapeError> {
    let s = parse_all(&[text])?;
    if s.is_empty() {
        return Err(ShapeError::Empty);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_every_malformed_part_is_named() {
        let s = parse("M=8192,N=8_192, K=64").unwrap();
        assert_eq!((s["M"], s["N"], s["K"]), (8192, 8192, 64));
        let d = parse_all(&["M=8192,N=8_192", "K=64"]).unwrap();
        assert_eq!(d, s);
        assert_eq!(parse("M=1 N=2").unwrap().len(), 2);
        assert_eq!(parse("M"), Err(ShapeError::NotAssignment { part: "M".into() }));
        assert_eq!(parse("M=x"), Err(ShapeError::NotInteger { name: "M".into(), value: "x".into(), part: "M=x".into() }));
        assert_eq!(parse("M=1,M=2"), Err(ShapeError::Repeated { name: "M".into() }));
        assert_eq!(parse("M-1=2"), Err(ShapeError::BadName { name: "M-1".into() }));
        assert_eq!(parse(" , "), Err(ShapeError::Empty));
        assert_eq!(parse_all::<&str>(&[]), Ok(Shape::new()));
    }
}
