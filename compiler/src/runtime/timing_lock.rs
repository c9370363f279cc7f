//! One process at a time times kernels on a GPU. `cake corpus gate` runs its gpu tier with
//! several jobs per GPU (one per core by default): compiling, uploading and checking overlap
//! freely, but a kernel timed while another job's kernel runs on the same GPU would report the
//! contention, not the kernel. So the timing stage of a run holds an exclusive advisory lock
//! (`flock`) on a file named after the GPU's PCI location, in the temporary directory, for as
//! long as it times; the lock goes with the process if it dies or is killed at its timeout.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The lock file of the GPU at PCI `(domain, bus, device)`.
pub fn lock_path(pci: (i64, i64, i64)) -> PathBuf {
    std::env::temp_dir().join(format!("cake-gpu-timing-{:04x}-{:02x}-{:02x}.lock", pci.0, pci.1, pci.2))
}

/// Held while a process times kernels on one GPU; released when dropped.
#[derive(Debug)]
pub struct TimingLock {
    _file: File,
    /// How long acquiring it waited for another process's timing.
    pub waited: Duration,
}

impl TimingLock {
    /// Wait for the lock at `path` (created if missing). An error says why no lock could be
    /// taken (an unwritable temporary directory, a file system without locks); the caller then
    /// times unlocked and says so.
    pub fn acquire(path: &Path) -> Result<TimingLock, String> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| format!("cannot open the GPU timing lock {}: {e}", path.display()))?;
        let start = Instant::now();
        file.lock().map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
        Ok(TimingLock { _file: file, waited: start.elapsed() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_for_the_first() {
        let dir = std::env::temp_dir().join(format!("cake-timing-lock-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gpu.lock");
        let first = TimingLock::acquire(&path).unwrap();
        // Another open file description of the same file cannot take the lock meanwhile.
        let other = OpenOptions::new().write(true).open(&path).unwrap();
        assert!(matches!(other.try_lock(), Err(std::fs::TryLockError::WouldBlock)), "the lock is exclusive");
        // A waiter in another thread gets it once the first holder drops it.
        let p2 = path.clone();
        let waiter = std::thread::spawn(move || TimingLock::acquire(&p2).map(|l| l.waited));
        std::thread::sleep(Duration::from_millis(200));
        drop(first);
        let waited = waiter.join().unwrap().unwrap();
        assert!(waited >= Duration::from_millis(150), "the waiter waited {waited:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unopenable_path_is_an_error_not_a_panic() {
        let m = TimingLock::acquire(Path::new("/nonexistent-dir-for-cake/x.lock")).unwrap_err();
        assert!(m.contains("cannot open the GPU timing lock"), "{m}");
    }

    #[test]
    fn one_file_per_physical_gpu() {
        assert_ne!(lock_path((0, 0x19, 0)), lock_path((0, 0x3b, 0)));
        assert!(lock_path((0, 0x19, 0)).to_string_lossy().ends_with("cake-gpu-timing-0000-19-00.lock"));
    }
}
