//! The queue lock: one advisory `flock(2)` on `<git common dir>/cake-evolve/lock`, held by
//! `propose`, `accept`, `reject` and the calibration proposals for their whole run, so two runs
//! never share the propose state, never hand out the same rule code and never merge the same
//! proposal twice. The holder writes its pid, command and start time into the file; a run that
//! waits past its timeout names them (`Q005`). The kernel drops the lock when the holder exits,
//! even on kill -9, so a stale file never blocks anyone.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use git2::Repository;

use crate::records::QueueError;

/// How long a run waits for the lock unless told otherwise (`--lock-timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// A held lock; released when dropped.
#[derive(Debug)]
pub struct QueueLock {
    file: File,
    pub path: PathBuf,
}

/// The lock file of a repository: in the common git dir, so every worktree shares it.
pub fn lock_path(repo: &Repository) -> PathBuf {
    repo.commondir().join("cake-evolve").join("lock")
}

impl QueueLock {
    /// Take the lock for `command`, waiting up to `timeout`; past it, `Q005` naming the holder.
    pub fn acquire(repo: &Repository, command: &str, timeout: Duration) -> Result<QueueLock, QueueError> {
        let path = lock_path(repo);
        let io = |e: std::io::Error| QueueError::new("Q004", &path, format!("cannot open the queue lock: {e}"), "check the permissions of the repository's .git folder");
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(io)?;
        }
        // Never truncated on open: the holder's line must survive for the waiter to read.
        let mut file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
        let start = Instant::now();
        loop {
            if try_lock(&file).map_err(io)? {
                break;
            }
            if start.elapsed() >= timeout {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = crate::sanitize::line(holder.trim());
                return Err(QueueError::new(
                    "Q005",
                    &path,
                    format!("the queue is locked by another run ({}); waited {} s", if holder.is_empty() { "holder unknown".into() } else { holder }, timeout.as_secs()),
                    "wait for that run to finish, or pass a longer --lock-timeout; the lock is released when its holder exits, even when killed",
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let who = format!("pid {}, `cake-evolve-compiler {command}`, started at unix time {started}\n", std::process::id());
        // Best effort: the lock holds even if the note cannot be written.
        let _ = file.set_len(0).and_then(|_| file.seek(SeekFrom::Start(0))).and_then(|_| file.write_all(who.as_bytes()));
        Ok(QueueLock { file, path })
    }
}

impl Drop for QueueLock {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
        unlock(&self.file);
    }
}

#[cfg(unix)]
fn try_lock(f: &File) -> std::io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock on a file descriptor this `File` owns for the call's duration.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EWOULDBLOCK) | Some(libc::EINTR) => Ok(false),
        _ => Err(err),
    }
}

#[cfg(unix)]
fn unlock(f: &File) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: as above; closing the file would release it too.
    unsafe {
        libc::flock(f.as_raw_fd(), libc::LOCK_UN);
    }
}

#[cfg(not(unix))]
fn try_lock(_: &File) -> std::io::Result<bool> {
    Ok(true)
}

#[cfg(not(unix))]
fn unlock(_: &File) {}
