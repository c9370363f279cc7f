//! The op catalog, loaded from data files (stub; being written).
