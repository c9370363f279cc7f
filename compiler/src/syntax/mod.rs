//! Text ⇄ syntax tree: the lexer, the recursive-descent parser and the canonical printer.

pub mod ast;
pub mod lexer;
pub mod parser;
pub mod printer;
pub mod visit;

pub use parser::parse;
pub use printer::print;
