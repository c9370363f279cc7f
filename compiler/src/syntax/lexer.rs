//! Lexer (stub; being written).
