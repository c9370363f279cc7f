//! Rendering diagnostics for people (rustc style) and machines (JSON lines). (stub; being written)
