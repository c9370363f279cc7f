//! The content-addressed store's one owner: how a file is named (the SHA-256 of its bytes), where
//! each kind lives, and how it is written (atomically, never replacing a file) and read back
//! (checked against its name). The runtime writes run records through it and the evolution
//! engine's `EvidenceStore` (records, failure reports, programs, imported files) is built on it.
//!
//! ```text
//! <root>/runs/<sha256>.json       run records (`cake run` / `cake bench`)
//! <root>/failures/<sha256>.json   failure reports (evolution)
//! <root>/programs/<sha256>.cake   program sources, canonical form
//! <root>/files/<sha256>.<ext>     imported files verbatim
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

/// Default store root (the evidence directory of `cake run`, `cake-evolve-compiler`).
pub const DEFAULT_ROOT: &str = ".cake/evidence";
pub const RUNS_DIR: &str = "runs";
pub const FAILURES_DIR: &str = "failures";
pub const PROGRAMS_DIR: &str = "programs";
pub const FILES_DIR: &str = "files";

/// Read limits, bytes, by what a file holds: past them a file is refused unread (`S011`), so a
/// huge or endless file cannot exhaust memory. Each is far above what the store holds today:
/// run records and failure reports are kilobytes (the bundled ones at most 7.3 KB), programs
/// too (the largest in the repository is 3.9 KB; the fuzz campaign's mutants reach 256 KiB),
/// imported files are tool logs (compute-sanitizer's can reach megabytes).
pub const MAX_RECORD_BYTES: u64 = 16 << 20;
pub const MAX_PROGRAM_BYTES: u64 = 4 << 20;
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// The read limit of a file in the store's `kind` folder (`runs`, `failures`, `programs`, `files`).
pub fn read_limit(kind: &str) -> u64 {
    match kind {
        PROGRAMS_DIR => MAX_PROGRAM_BYTES,
        FILES_DIR => MAX_FILE_BYTES,
        _ => MAX_RECORD_BYTES,
    }
}

/// 64 lowercase hex digits: the SHA-256 of `bytes`, the name of the file that holds them.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `s` is a content address (64 lowercase hex digits).
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Why the store could not write or read a file. Codes are the evidence store's (`S0xx`,
/// documented in `evolution/src/store.rs`).
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// S001: the directory cannot be created.
    #[error("S001: cannot create {}: {source}; check that the store's parent directory is writable", dir.display())]
    CreateDir { dir: PathBuf, source: std::io::Error },
    /// S002: a file cannot be read.
    #[error("S002: cannot read {}: {source}; check the file's permissions", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// S004: a file's bytes do not hash to its name (edited or truncated after it was written).
    #[error("S004: {} does not match its name (its SHA-256 is {actual}): the file was changed after it was written; it is skipped and left as it is", path.display())]
    Mismatch { path: PathBuf, actual: String },
    /// S004: a different file already sits at the address being written.
    #[error("S004: a different file already sits at {} (it was changed after it was written); it is left as it is and nothing was written", path.display())]
    Conflict { path: PathBuf },
    /// S010: not a regular file (a symlink, a FIFO, a device): never opened, so nothing outside
    /// the store is read through it and nothing blocks on it.
    #[error("S010: {} is {what}, not a regular file: it is not opened and is skipped; the store holds only regular files (remove it)", path.display())]
    NotRegular { path: PathBuf, what: &'static str },
    /// S011: a file past the read limit of its kind.
    #[error("S011: {} is {size} bytes, past the read limit of {limit} bytes for this kind of file: it is not read and is skipped", path.display())]
    TooLarge { path: PathBuf, size: u64, limit: u64 },
    /// S006: the write failed.
    #[error("S006: cannot write {}: {source}; check that the disk is not full and the directory is writable", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

impl BlobError {
    pub fn code(&self) -> &'static str {
        match self {
            BlobError::CreateDir { .. } => "S001",
            BlobError::Read { .. } => "S002",
            BlobError::Mismatch { .. } | BlobError::Conflict { .. } => "S004",
            BlobError::Write { .. } => "S006",
            BlobError::NotRegular { .. } => "S010",
            BlobError::TooLarge { .. } => "S011",
        }
    }

    /// The file (or directory) the error is about.
    pub fn path(&self) -> &Path {
        match self {
            BlobError::CreateDir { dir: p, .. }
            | BlobError::Read { path: p, .. }
            | BlobError::Mismatch { path: p, .. }
            | BlobError::Conflict { path: p }
            | BlobError::Write { path: p, .. }
            | BlobError::NotRegular { path: p, .. }
            | BlobError::TooLarge { path: p, .. } => p,
        }
    }
}

/// Store `bytes` as `<dir>/<sha256(bytes)>.<ext>`. Returns the path and whether the file is new.
/// The same bytes already there write nothing; different bytes there are [`BlobError::Conflict`]
/// (an existing file is never replaced, moved or deleted).
pub fn put(dir: &Path, bytes: &[u8], ext: &str) -> Result<(PathBuf, bool), BlobError> {
    std::fs::create_dir_all(dir).map_err(|source| BlobError::CreateDir { dir: dir.to_path_buf(), source })?;
    let hash = sha256_hex(bytes);
    let path = dir.join(format!("{hash}.{ext}"));
    let existing = |path: &Path| -> Result<(PathBuf, bool), BlobError> {
        // Anything longer than `bytes` differs from them: read no more than that.
        let old = match read_regular(path, bytes.len() as u64) {
            Err(BlobError::TooLarge { .. }) => return Err(BlobError::Conflict { path: path.to_path_buf() }),
            r => r?,
        };
        if old == bytes {
            Ok((path.to_path_buf(), false))
        } else {
            Err(BlobError::Conflict { path: path.to_path_buf() })
        }
    };
    if path.symlink_metadata().is_ok() {
        return existing(&path);
    }
    let tmp = dir.join(format!(".{hash}.{}.{}.tmp", std::process::id(), unique()));
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(source) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(BlobError::Write { path, source });
    }
    // A hard link fails when the name exists: a file is never replaced, even by a racing writer.
    let linked = std::fs::hard_link(&tmp, &path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok((path, true)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => existing(&path),
        Err(source) => Err(BlobError::Write { path, source }),
    }
}

/// Read a stored file of at most `limit` bytes ([`read_limit`]) and check that its bytes hash to
/// `expected` (its name).
pub fn read_checked(path: &Path, expected: &str, limit: u64) -> Result<Vec<u8>, BlobError> {
    let bytes = read_regular(path, limit)?;
    let actual = sha256_hex(&bytes);
    if actual != expected {
        return Err(BlobError::Mismatch { path: path.to_path_buf(), actual });
    }
    Ok(bytes)
}

/// Read a regular file of at most `limit` bytes. A symlink is refused without being followed
/// (`O_NOFOLLOW`), and a FIFO or device is opened without blocking (`O_NONBLOCK`) and refused
/// (`S010`); a longer file is `S011`, checked on its size and again while reading (it may grow).
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, BlobError> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let read_err = |source| BlobError::Read { path: path.to_path_buf(), source };
    let f = match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(BlobError::NotRegular { path: path.to_path_buf(), what: "a symbolic link" }),
        Err(e) => return Err(read_err(e)),
    };
    let meta = f.metadata().map_err(read_err)?;
    let t = meta.file_type();
    if !t.is_file() {
        let what = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_socket() {
            "a socket"
        } else {
            "a device"
        };
        return Err(BlobError::NotRegular { path: path.to_path_buf(), what });
    }
    if meta.len() > limit {
        return Err(BlobError::TooLarge { path: path.to_path_buf(), size: meta.len(), limit });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(limit + 1).read_to_end(&mut bytes).map_err(read_err)?;
    if bytes.len() as u64 > limit {
        return Err(BlobError::TooLarge { path: path.to_path_buf(), size: bytes.len() as u64, limit });
    }
    Ok(bytes)
}

/// A per-process counter for temporary names (two threads may write the same content).
fn unique() -> u64 {
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_known_vectors() {
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert!(is_sha256(&sha256_hex(b"abc")) && !is_sha256("ABC") && !is_sha256(&"g".repeat(64)));
    }

    #[test]
    fn content_addressed_writes_never_replace() {
        let dir = crate::runtime::isolate::work_dir().unwrap();
        let (p1, new1) = put(&dir, b"{\"a\": 1}\n", "json").unwrap();
        assert!(new1);
        assert_eq!(p1.file_name().unwrap().to_str().unwrap(), format!("{}.json", sha256_hex(b"{\"a\": 1}\n")));
        let (p2, new2) = put(&dir, b"{\"a\": 1}\n", "json").unwrap();
        assert_eq!(p1, p2);
        assert!(!new2);
        assert_eq!(read_checked(&p1, &sha256_hex(b"{\"a\": 1}\n"), MAX_RECORD_BYTES).unwrap(), b"{\"a\": 1}\n");
        // A changed file under that name is left alone and reported (append-only evidence).
        std::fs::write(&p1, b"tampered").unwrap();
        let e = put(&dir, b"{\"a\": 1}\n", "json").unwrap_err();
        assert!(matches!(e, BlobError::Conflict { .. }) && e.code() == "S004" && e.path() == p1, "{e}");
        assert_eq!(std::fs::read(&p1).unwrap(), b"tampered");
        assert!(matches!(read_checked(&p1, &sha256_hex(b"{\"a\": 1}\n"), MAX_RECORD_BYTES), Err(BlobError::Mismatch { .. })));
        // No temporary files left behind.
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 15: store files were read whole and symlinks out of the store followed; a FIFO
    /// named like a record hung every reader.
    #[test]
    fn only_regular_files_within_the_read_limit_are_opened() {
        let dir = crate::runtime::isolate::work_dir().unwrap();
        let outside = dir.join("outside.txt");
        std::fs::write(&outside, b"secret").unwrap();
        let link = dir.join("link.json");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let e = read_checked(&link, &sha256_hex(b"secret"), MAX_RECORD_BYTES).unwrap_err();
        assert!(matches!(e, BlobError::NotRegular { what: "a symbolic link", .. }) && e.code() == "S010", "{e}");

        let fifo = dir.join("fifo.json");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let t0 = std::time::Instant::now();
        let e = read_regular(&fifo, MAX_RECORD_BYTES).unwrap_err();
        assert!(matches!(e, BlobError::NotRegular { what: "a FIFO", .. }), "{e}");
        assert!(t0.elapsed() < std::time::Duration::from_secs(2), "a FIFO does not block the reader");

        let big = dir.join("big.json");
        std::fs::write(&big, vec![b'x'; 4096]).unwrap();
        let e = read_regular(&big, 1024).unwrap_err();
        assert!(matches!(e, BlobError::TooLarge { size: 4096, limit: 1024, .. }) && e.code() == "S011", "{e}");
        assert_eq!(read_regular(&big, 4096).unwrap().len(), 4096);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
