//! Target capability table, loaded from data (stub; being written).
