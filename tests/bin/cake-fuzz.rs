//! `cake-fuzz`: a fuzz campaign of the front end and the cost model (see `tests/fuzz/README.md`).
//!
//! ```text
//! cargo run --profile fuzz -p cake-tests --bin cake-fuzz -- [--seed N] [--inputs N] [--seconds S]
//!     [--timeout S] [--memory-mib M] [--save DIR] [--corpus DIR]
//! ```
//! Exits 0 when the replay and the campaign found nothing, 1 when they found something (saved
//! under `--save`, default `tests/fuzz/corpus/`), 2 on bad arguments. `--corpus` replays another
//! folder first instead of `tests/fuzz/corpus/` (to re-run what a campaign saved).

use std::path::{Path, PathBuf};
use std::time::Duration;

use cake_tests::fuzz::{self, Config};

const USAGE: &str = "usage: cake-fuzz [--seed N] [--inputs N] [--seconds S] [--timeout S] [--memory-mib M] [--save DIR] [--corpus DIR]";

fn parse_args(cfg: &mut Config) -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let value = args.next().ok_or_else(|| format!("`{flag}` needs a value"))?;
        let num = |v: &str| v.parse::<u64>().map_err(|_| format!("`{flag}` takes a whole number, not `{v}`"));
        match flag.as_str() {
            "--seed" => cfg.seed = num(&value)?,
            "--inputs" => cfg.inputs = num(&value)?,
            "--seconds" => cfg.budget = Some(Duration::from_secs(num(&value)?)),
            "--timeout" => cfg.timeout = Duration::from_secs(num(&value)?),
            "--memory-mib" => cfg.memory_cap_kib = num(&value)? * 1024,
            "--save" => cfg.save_dir = PathBuf::from(value),
            "--corpus" => cfg.corpus_dir = PathBuf::from(value),
            _ => return Err(format!("unknown flag `{flag}`")),
        }
    }
    Ok(())
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf();
    let mut cfg = Config::new(&root);
    if let Err(e) = parse_args(&mut cfg) {
        eprintln!("error: {e}\n{USAGE}");
        std::process::exit(2);
    }
    let report = fuzz::run(&cfg, &mut |r| eprintln!("{} inputs, {:.0} s, {} findings", r.inputs, r.elapsed.as_secs_f64(), r.findings.len()));
    print!("{}", report.summary());
    std::process::exit(if report.findings.is_empty() && report.stopped.is_none() { 0 } else { 1 });
}
