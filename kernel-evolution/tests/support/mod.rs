//! Shared helpers of the loop tests: the binaries, a scratch directory, JSON output.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn kevo() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cake-evolve-kernel"))
}

pub fn contract(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("contracts").join(name)
}

/// The real `cake` binary beside ours, built when it is not there (this package's tests build
/// only this package's binaries).
pub fn cake_bin() -> PathBuf {
    let dir = kevo().parent().expect("a target directory").to_path_buf();
    let cake = dir.join("cake");
    if !cake.is_file() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-p", "cake", "--bin", "cake"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the cake binary failed");
    }
    assert!(cake.is_file(), "no cake binary at {}", cake.display());
    cake
}

/// A stand-in `cake` that logs each call (`SUBCOMMAND PROGRAM`), waits `delay` seconds and exits
/// 3, as `cake run` does with no GPU: every evaluation is skipped, deterministically.
pub fn fake_cake(dir: &Path, delay: &str) -> (PathBuf, PathBuf) {
    let log = dir.join("fake-cake.log");
    let script = dir.join("fake-cake.sh");
    std::fs::write(&script, format!("#!/bin/sh\necho \"$1 $2\" >> '{}'\nsleep {delay}\nexit 3\n", log.display())).unwrap();
    let mut perm = std::fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&script, perm).unwrap();
    (script, log)
}

pub fn run(args: &[&str], cake: &Path, cwd: &Path) -> Output {
    Command::new(kevo()).args(args).env("CAKE_BIN", cake).current_dir(cwd).output().expect("cake-evolve-kernel runs")
}

pub fn json(out: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text}\nstderr: {}", String::from_utf8_lossy(&out.stderr)))
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
