//! The fuzz campaign of the front end and the cost model (issue 15, item 7): a plain mutation
//! driver, since cargo-fuzz needs a nightly toolchain. See `tests/fuzz/README.md`.
//!
//! A campaign first replays the persisted corpus (`tests/fuzz/corpus/`: every input an earlier
//! campaign found crashing, hanging or breaking a promise, kept as a regression), then drives
//! `inputs` mutants of the seed programs (every `.cake` file under `examples/`, `corpus/` and
//! `verify-benchmark/`, plus the persisted corpus) through [`stages::drive`]. Input `i` is a
//! function of the seed and `i` alone, so a campaign is reproducible; the dims the cost model is
//! asked about are a function of the input's bytes, so a saved input replays the same way.
//!
//! Each input runs on a worker thread under `catch_unwind`, watched by the calling thread: past
//! `timeout` of CPU time (or six times that of wall-clock time, for an input that blocks) it is a hang (the worker is abandoned, a new one started), past `memory_cap` of
//! resident memory (VmHWM of `/proc/self/status`, reset before each input through
//! `/proc/self/clear_refs`) it is a memory finding. Findings are saved to `save_dir`, panics
//! minimized first (lines, then bytes, while the panic keeps its location).

pub mod mutate;
pub mod stages;
pub mod watch;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mutate::Rng;
use watch::{Verdict, Watch};

/// What a campaign runs and where it keeps what it finds.
#[derive(Clone, Debug)]
pub struct Config {
    /// The repository root (seeds are read under it).
    pub root: PathBuf,
    pub seed: u64,
    /// Mutants to drive (after the replay).
    pub inputs: u64,
    /// Stop early after this long (the replay is always complete).
    pub budget: Option<Duration>,
    /// An input using more CPU time than this is a hang (issue 15: 10 s).
    pub timeout: Duration,
    /// Resident memory past this while an input runs is a finding (issue 15: 1 GB).
    pub memory_cap_kib: u64,
    /// The persisted corpus, replayed first.
    pub corpus_dir: PathBuf,
    /// Where findings are written (the corpus itself for a campaign run by hand; a scratch
    /// folder in CI, which then fails and names the files).
    pub save_dir: PathBuf,
}

impl Config {
    pub fn new(root: &Path) -> Config {
        let corpus_dir = root.join("tests/fuzz/corpus");
        Config {
            root: root.to_path_buf(),
            seed: 0,
            inputs: 1000,
            budget: None,
            timeout: Duration::from_secs(10),
            memory_cap_kib: 1024 * 1024,
            save_dir: corpus_dir.clone(),
            corpus_dir,
        }
    }
}

/// One input that broke a promise, as saved.
#[derive(Clone, Debug)]
pub struct Finding {
    /// `panic`, `hang`, `memory` or `oracle`.
    pub kind: &'static str,
    pub detail: String,
    pub file: PathBuf,
}

#[derive(Clone, Debug, Default)]
pub struct Report {
    pub seeds: usize,
    pub replayed: usize,
    pub inputs: u64,
    /// Inputs by the furthest stage they reached (`stages::REACHED` order).
    pub reached: [u64; 5],
    pub findings: Vec<Finding>,
    pub elapsed: Duration,
    /// The slowest input's time.
    pub slowest: Duration,
    /// Peak resident memory over all inputs, KiB (VmHWM).
    pub peak_kib: u64,
    /// Set when the campaign had to stop (memory past the cap while an input ran, or hung
    /// workers piling up).
    pub stopped: Option<String>,
}

impl Report {
    pub fn count(&self, kind: &str) -> usize {
        self.findings.iter().filter(|f| f.kind == kind).count()
    }

    /// The campaign's summary, one fact a line (what `benchmarks/RESULTS.md` records).
    pub fn summary(&self) -> String {
        let mut s = format!(
            "seeds {}, replayed {}, inputs {} in {:.1} s ({:.0} inputs/s)\n",
            self.seeds,
            self.replayed,
            self.inputs,
            self.elapsed.as_secs_f64(),
            self.inputs as f64 / self.elapsed.as_secs_f64().max(1e-9)
        );
        for (i, (_, label)) in stages::REACHED.iter().enumerate() {
            s += &format!("  {label}: {}\n", self.reached[i]);
        }
        s += &format!(
            "panics {}, hangs {}, memory {}, oracle {}; slowest input {:.3} s; peak memory {:.1} MiB\n",
            self.count("panic"),
            self.count("hang"),
            self.count("memory"),
            self.count("oracle"),
            self.slowest.as_secs_f64(),
            self.peak_kib as f64 / 1024.0
        );
        for f in &self.findings {
            s += &format!("  {} {}: {}\n", f.kind, f.file.display(), f.detail);
        }
        if let Some(why) = &self.stopped {
            s += &format!("stopped: {why}\n");
        }
        s
    }
}

/// FNV-1a: the name of a saved input and the seed of its dims.
pub fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Every `.cake` file under `dirs` (relative to `root`), in path order.
pub fn cake_files(root: &Path, dirs: &[&str]) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let Ok(t) = e.file_type() else { continue };
            let p = e.path();
            if t.is_dir() {
                walk(&p, out);
            } else if t.is_file() && p.extension().is_some_and(|x| x == "cake") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    for d in dirs {
        walk(&root.join(d), &mut out);
    }
    out.sort();
    out
}

pub const SEED_DIRS: &[&str] = &["examples", "corpus", "verify-benchmark"];

/// Runs a campaign; `progress` is called every 1000 inputs with the report so far.
pub fn run(cfg: &Config, progress: &mut dyn FnMut(&Report)) -> Report {
    let start = Instant::now();
    let mut report = Report::default();
    let corpus = cake_files(&cfg.corpus_dir, &["."]);
    let mut seeds: Vec<Vec<u8>> = cake_files(&cfg.root, SEED_DIRS).iter().filter_map(|p| std::fs::read(p).ok()).collect();
    report.seeds = seeds.len();
    let mut watch = Watch::new(cfg.timeout, cfg.memory_cap_kib);

    for path in &corpus {
        let Ok(input) = std::fs::read(path) else { continue };
        report.replayed += 1;
        if !judge(cfg, &mut watch, &input, &mut report) {
            report.elapsed = start.elapsed();
            return report;
        }
        seeds.push(input);
    }
    let vocab = mutate::vocabulary(&seeds);
    for i in 0..cfg.inputs {
        if cfg.budget.is_some_and(|b| start.elapsed() >= b) {
            break;
        }
        let mut rng = Rng::new(cfg.seed ^ i.wrapping_mul(0xd1b5_4a32_d192_ed03));
        let base = rng.pick(&seeds).clone();
        let input = mutate::mutate(&base, &seeds, &vocab, &mut rng);
        report.inputs += 1;
        if !judge(cfg, &mut watch, &input, &mut report) {
            break;
        }
        if report.inputs % 1000 == 0 {
            report.elapsed = start.elapsed();
            progress(&report);
        }
    }
    report.elapsed = start.elapsed();
    report
}

/// Runs one input and records its verdict; false when the campaign must stop.
fn judge(cfg: &Config, watch: &mut Watch, input: &[u8], report: &mut Report) -> bool {
    let t = Instant::now();
    let verdict = watch.run(input);
    report.slowest = report.slowest.max(t.elapsed());
    report.peak_kib = report.peak_kib.max(watch.peak_kib());
    let (kind, detail) = match verdict {
        Verdict::Done(Ok(reached), hwm) if hwm <= cfg.memory_cap_kib => {
            report.reached[stages::REACHED.iter().position(|(r, _)| *r == reached).unwrap_or(0)] += 1;
            return true;
        }
        Verdict::Done(Ok(_), hwm) => ("memory", format!("peak resident memory {hwm} KiB")),
        Verdict::Done(Err(broken), _) => ("oracle", broken),
        Verdict::Panic(message) => ("panic", message),
        Verdict::Hang => ("hang", format!("still running after {:.0} s", cfg.timeout.as_secs_f64())),
        Verdict::MemoryRunaway(kib) => {
            report.stopped = Some(format!("resident memory reached {kib} KiB while an input ran"));
            ("memory", format!("resident memory {kib} KiB and rising"))
        }
    };
    let kept = if kind == "panic" { minimize(watch, input, &detail) } else { input.to_vec() };
    let file = cfg.save_dir.join(format!("{kind}-{:016x}.cake", fnv(&kept)));
    let _ = std::fs::create_dir_all(&cfg.save_dir);
    if let Err(e) = std::fs::write(&file, &kept) {
        report.stopped = Some(format!("cannot save a finding to {}: {e}", file.display()));
    }
    report.findings.push(Finding { kind, detail, file });
    if watch.abandoned() > 3 {
        report.stopped = Some(format!("{} workers hung; stopping", watch.abandoned()));
    }
    report.stopped.is_none()
}

/// The panic's location (`file:line:col`), the part of its message a smaller input must keep.
fn location(message: &str) -> &str {
    message.rsplit(" at ").next().unwrap_or(message)
}

/// Shrinks a panicking input while it panics at the same place: drop chunks of lines (halves,
/// quarters, …, single lines), then chunks of bytes, at most 300 tries (cheap next to a
/// campaign; a hang is saved as found, since each try of it would cost the timeout).
fn minimize(watch: &mut Watch, input: &[u8], message: &str) -> Vec<u8> {
    let want = location(message).to_string();
    let mut best = input.to_vec();
    let mut tries = 0;
    for by_lines in [true, false] {
        let mut chunk = (if by_lines { best.iter().filter(|&&b| b == b'\n').count() } else { best.len() } / 2).max(1);
        while chunk >= 1 && tries < 300 {
            let units: Vec<std::ops::Range<usize>> = if by_lines {
                let mut v = Vec::new();
                let mut s = 0;
                for (i, &b) in best.iter().enumerate() {
                    if b == b'\n' {
                        v.push(s..i + 1);
                        s = i + 1;
                    }
                }
                if s < best.len() {
                    v.push(s..best.len());
                }
                v
            } else {
                (0..best.len()).map(|i| i..i + 1).collect()
            };
            let mut i = 0;
            let mut shrunk = false;
            while i < units.len() && tries < 300 {
                let cut = units[i].start..units[(i + chunk).min(units.len()) - 1].end;
                let mut candidate = best[..cut.start].to_vec();
                candidate.extend_from_slice(&best[cut.end..]);
                tries += 1;
                if let Verdict::Panic(m) = watch.run(&candidate) {
                    if location(&m) == want {
                        best = candidate;
                        shrunk = true;
                        break;
                    }
                }
                i += chunk;
            }
            if !shrunk {
                if chunk == 1 {
                    break;
                }
                chunk /= 2;
            }
        }
    }
    best
}
