//! The program database: one SQLite file (through rusqlite, SQLite bundled), WAL journal, one
//! transaction per state change, so a process killed at any point leaves every finished step
//! recorded and nothing half-written. Kept apart from the orchestration (`pipeline.rs`), which
//! only calls the operations below.
//!
//! Tables: `meta` (schema, contract hash, name and text), `candidates` (one row per generated
//! program, keyed by its generation order `seq`), `evaluations` (the GPU stage's result of a
//! candidate) and `runs` (one row per `run` / `resume` / `--replay` invocation).
//!
//! Errors: `K201` the file cannot be opened or created; `K202` the file is not a kernel-evolution
//! database (not SQLite, corrupt, or another program's SQLite file; it is left untouched);
//! `K203` the database was made under another contract; `K204` a read or write failed; `K205`
//! another `run`/`resume` holds the database (an advisory `flock` on `<db>.lock`, which the kernel
//! releases when that process dies, so a killed run never blocks its `resume`).

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use crate::error::{KevoError, Result};

pub const DB_SCHEMA: &str = "cake.kernel-db/1";

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CandidateRow {
    /// Generation order, from 0: under one `--seed` the same programs get the same `seq`.
    pub seq: i64,
    pub generation: i64,
    pub program_hash: String,
    pub program_text: String,
    /// `seq`s of the parents (empty for a seed).
    pub parents: Vec<i64>,
    /// The tactic that made it (`seed` for a contract seed) and its parameters.
    pub tactic: String,
    pub params: serde_json::Value,
    /// `passed`, or the gate that rejected it: `parse`, `typecheck`, `verify`, `shape`, `cost`.
    pub gate: String,
    /// Every finding of the gates (the compiler's JSON diagnostics), and the cost hints.
    pub findings: serde_json::Value,
    pub predicted_ms: Option<f64>,
    pub bottleneck: Option<String>,
    /// The archive cell (bottleneck × resource use) it was placed in.
    pub cell: Option<String>,
    pub contract_hash: String,
    pub compiler_commit: String,
    pub created_unix_ms: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvaluationRow {
    pub seq: i64,
    /// `passed` (every shape × distribution matched the oracle and the headline was timed),
    /// `failed` (a run failed: mismatch, fault, timeout, build), `skipped` (no GPU), `error`
    /// (the harness itself failed: `cake` exited 2).
    pub status: String,
    /// One entry per run: shape, distribution, verdict, error class.
    pub verdicts: serde_json::Value,
    /// Median ms per shape (`B=32,N=…` → ms) where runs were timed.
    pub measured: serde_json::Value,
    pub headline_ms: Option<f64>,
    /// Peer name → `{ "median_ms": …, "speedup": peer/candidate }`, or why it was skipped.
    pub peers: serde_json::Value,
    /// Wall seconds of the child processes (the GPU time this candidate cost).
    pub gpu_seconds: f64,
    /// Ids of the run records `cake` wrote.
    pub records: Vec<String>,
    pub contract_hash: String,
    pub compiler_commit: String,
    pub finished_unix_ms: i64,
}

/// One `run` / `resume` / `--replay` invocation: `state` is `running` (or a process that died:
/// `interrupted` once the next one starts), `finished`, `error` or `refused`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunRow {
    pub id: i64,
    pub mode: String,
    pub seed: i64,
    pub budget_evals: i64,
    pub state: String,
    pub note: String,
}

pub struct Db {
    conn: Connection,
    path: PathBuf,
}

/// The writer's lock of one database, held while it lives.
pub struct DbLock {
    _file: std::fs::File,
}

/// Take the database's writer lock (`<db>.lock`), or `K205` when another process holds it.
pub fn lock(path: &Path) -> Result<DbLock> {
    use std::os::unix::io::AsRawFd;
    let lock_path = PathBuf::from(format!("{}.lock", path.display()));
    if let Some(dir) = lock_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(dir);
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| KevoError::new("K201", lock_path.display().to_string(), format!("cannot open the database lock: {e}"), "give a `--db` path in a writable directory"))?;
    // SAFETY: flock on a descriptor this `File` owns; the lock goes with the descriptor.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(KevoError::new(
            "K205",
            path.display().to_string(),
            "another cake-evolve-kernel run or resume holds this database",
            "wait for it to finish (or stop it), or give another `--db`",
        ));
    }
    Ok(DbLock { _file: file })
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn io(path: &Path, e: rusqlite::Error) -> KevoError {
    KevoError::new("K204", path.display().to_string(), format!("database operation failed: {e}"), "check the disk and the file's permissions; the database keeps every finished step")
}

fn json_text(v: &impl Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

const SCHEMA_SQL: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE candidates (
    seq INTEGER PRIMARY KEY,
    generation INTEGER NOT NULL,
    program_hash TEXT NOT NULL UNIQUE,
    program_text TEXT NOT NULL,
    parents TEXT NOT NULL,
    tactic TEXT NOT NULL,
    params TEXT NOT NULL,
    gate TEXT NOT NULL,
    findings TEXT NOT NULL,
    predicted_ms REAL,
    bottleneck TEXT,
    cell TEXT,
    contract_hash TEXT NOT NULL,
    compiler_commit TEXT NOT NULL,
    created_unix_ms INTEGER NOT NULL
);
CREATE TABLE evaluations (
    seq INTEGER PRIMARY KEY REFERENCES candidates(seq),
    status TEXT NOT NULL,
    verdicts TEXT NOT NULL,
    measured TEXT NOT NULL,
    headline_ms REAL,
    peers TEXT NOT NULL,
    gpu_seconds REAL NOT NULL,
    records TEXT NOT NULL,
    contract_hash TEXT NOT NULL,
    compiler_commit TEXT NOT NULL,
    finished_unix_ms INTEGER NOT NULL
);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    mode TEXT NOT NULL,
    seed INTEGER NOT NULL,
    budget_evals INTEGER NOT NULL,
    started_unix_ms INTEGER NOT NULL,
    finished_unix_ms INTEGER,
    state TEXT NOT NULL,
    note TEXT NOT NULL
);
";

/// One call of the LLM proposer per generation at most (added to schema 1 without a version step:
/// a database without it simply has no calls).
const LLM_CALLS_SQL: &str = "
CREATE TABLE IF NOT EXISTS llm_calls (
    generation INTEGER PRIMARY KEY,
    parent INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    message TEXT NOT NULL,
    program_text TEXT,
    tokens INTEGER NOT NULL,
    created_unix_ms INTEGER NOT NULL
);
";

/// A recorded LLM call: `outcome` is `candidate` (its program became one), `duplicate` (a program
/// already in the database) or `error` (no program: the endpoint failed or timed out, or the answer
/// held none; `message` says which).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LlmCallRow {
    pub generation: i64,
    pub parent: i64,
    pub outcome: String,
    pub message: String,
    pub program_text: Option<String>,
    pub tokens: i64,
}

impl Db {
    pub fn put_llm_call(&self, c: &LlmCallRow) -> Result<()> {
        let tx = self.conn.unchecked_transaction().map_err(|e| io(&self.path, e))?;
        tx.execute(
            "INSERT INTO llm_calls (generation, parent, outcome, message, program_text, tokens, created_unix_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![c.generation, c.parent, c.outcome, c.message, c.program_text, c.tokens, now_ms()],
        )
        .map_err(|e| io(&self.path, e))?;
        tx.commit().map_err(|e| io(&self.path, e))
    }

    pub fn llm_calls(&self) -> Result<Vec<LlmCallRow>> {
        let exists: i64 = self.conn.query_row("SELECT count(*) FROM sqlite_master WHERE name = 'llm_calls'", [], |r| r.get(0)).map_err(|e| io(&self.path, e))?;
        if exists == 0 {
            return Ok(Vec::new());
        }
        let mut st = self.conn.prepare("SELECT generation, parent, outcome, message, program_text, tokens FROM llm_calls ORDER BY generation").map_err(|e| io(&self.path, e))?;
        let rows = st
            .query_map([], |r| Ok(LlmCallRow { generation: r.get(0)?, parent: r.get(1)?, outcome: r.get(2)?, message: r.get(3)?, program_text: r.get(4)?, tokens: r.get(5)? }))
            .map_err(|e| io(&self.path, e))?;
        rows.collect::<std::result::Result<Vec<_>, _>>().map_err(|e| io(&self.path, e))
    }
}

impl Db {
    /// Open the database for a contract, creating it when the file does not exist.
    pub fn open_for(path: &Path, contract_hash: &str, contract_name: &str, contract_text: &str) -> Result<Db> {
        let db = Db::connect(path)?;
        // A database with no table holds nothing (a new file, or one whose creation was killed
        // before its first commit): it gets the schema. Anything else must already be ours.
        let tables: i64 = db.conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0)).map_err(|e| io(path, e))?;
        if tables == 0 {
            let tx = db.conn.unchecked_transaction().map_err(|e| io(path, e))?;
            tx.execute_batch(SCHEMA_SQL).map_err(|e| io(path, e))?;
            for (k, v) in [("schema", DB_SCHEMA), ("contract_hash", contract_hash), ("contract_name", contract_name), ("contract_text", contract_text)] {
                tx.execute("INSERT INTO meta (key, value) VALUES (?1, ?2)", params![k, v]).map_err(|e| io(path, e))?;
            }
            tx.commit().map_err(|e| io(path, e))?;
        }
        db.check_schema()?;
        db.conn.execute_batch(LLM_CALLS_SQL).map_err(|e| io(path, e))?;
        let have = db.meta("contract_hash")?.unwrap_or_default();
        if have != contract_hash {
            return Err(KevoError::new(
                "K203",
                path.display().to_string(),
                format!("the database was made under contract {} (hash {}), not this one (hash {})", db.meta("contract_name")?.unwrap_or_default(), short(&have), short(contract_hash)),
                "give a new `--db` path for this contract, or run the contract the database was made with",
            ));
        }
        Ok(db)
    }

    /// Open an existing database (for `status`, `report`, `best`).
    pub fn open_existing(path: &Path) -> Result<Db> {
        if !path.is_file() {
            return Err(KevoError::new("K201", path.display().to_string(), "no database at this path", "give the `--db` a `run` wrote (default `.cake/kernel-evolution/<contract name>.sqlite`)"));
        }
        let db = Db::connect(path)?;
        db.check_schema()?;
        Ok(db)
    }

    fn connect(path: &Path) -> Result<Db> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| KevoError::new("K201", dir.display().to_string(), format!("cannot create the database directory: {e}"), "give a `--db` path in a writable directory"))?;
        }
        let conn = Connection::open(path).map_err(|e| KevoError::new("K201", path.display().to_string(), format!("cannot open the database: {e}"), "give a `--db` path in a writable directory"))?;
        let not_db = |e: rusqlite::Error| {
            KevoError::new("K202", path.display().to_string(), format!("not a kernel-evolution database: {e}"), "the file was left untouched; give another `--db` path, or move this file away if it is yours")
        };
        // The first read tells a non-SQLite file apart (SQLITE_NOTADB) before anything is written.
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0)).map_err(not_db)?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(not_db)?;
        // FULL: a committed step survives power loss too, not only a killed process.
        conn.pragma_update(None, "synchronous", "FULL").map_err(not_db)?;
        conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(not_db)?;
        Ok(Db { conn, path: path.to_path_buf() })
    }

    fn check_schema(&self) -> Result<()> {
        let schema: Option<String> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| r.get(0))
            .optional()
            .map_err(|e| KevoError::new("K202", self.path.display().to_string(), format!("not a kernel-evolution database (no `meta` table: {e})"), "the file was left untouched; give another `--db` path"))?;
        match schema.as_deref() {
            Some(DB_SCHEMA) => Ok(()),
            other => Err(KevoError::new(
                "K202",
                self.path.display().to_string(),
                format!("database schema is {:?}, expected `{DB_SCHEMA}`", other.unwrap_or("missing")),
                "the file was left untouched; give another `--db` path",
            )),
        }
    }

    /// Bind the database to the rule set its candidates are gated with (by fingerprint): the
    /// first search records it, a later one under another set is `K206`. A candidate's recorded
    /// gate verdict stays true only under the rules that gave it, and `resume`/`--replay` re-run
    /// the search from those verdicts.
    pub fn bind_rules(&self, fingerprint: &str, describe: &str) -> Result<()> {
        match self.meta("rules_fingerprint")? {
            Some(have) if have == fingerprint => Ok(()),
            Some(have) => Err(KevoError::new(
                "K206",
                self.path.display().to_string(),
                format!(
                    "the database was searched under another rule set (fingerprint {}, {}), not this one ({}, {describe})",
                    short(&have),
                    self.meta("rules_describe")?.unwrap_or_default(),
                    short(fingerprint)
                ),
                "give a new `--db` for a search under these rules, or pass the `--rules` the database was made with",
            )),
            None => {
                let tx = self.conn.unchecked_transaction().map_err(|e| io(&self.path, e))?;
                for (k, v) in [("rules_fingerprint", fingerprint), ("rules_describe", describe)] {
                    tx.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)", params![k, v]).map_err(|e| io(&self.path, e))?;
                }
                tx.commit().map_err(|e| io(&self.path, e))
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>> {
        self.conn.query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| r.get(0)).optional().map_err(|e| io(&self.path, e))
    }

    pub fn insert_candidate(&self, c: &CandidateRow) -> Result<()> {
        let tx = self.conn.unchecked_transaction().map_err(|e| io(&self.path, e))?;
        tx.execute(
            "INSERT INTO candidates (seq, generation, program_hash, program_text, parents, tactic, params, gate, findings, predicted_ms, bottleneck, cell, contract_hash, compiler_commit, created_unix_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            params![
                c.seq,
                c.generation,
                c.program_hash,
                c.program_text,
                json_text(&c.parents),
                c.tactic,
                json_text(&c.params),
                c.gate,
                json_text(&c.findings),
                c.predicted_ms,
                c.bottleneck,
                c.cell,
                c.contract_hash,
                c.compiler_commit,
                c.created_unix_ms
            ],
        )
        .map_err(|e| io(&self.path, e))?;
        tx.commit().map_err(|e| io(&self.path, e))
    }

    /// Record (or, for a candidate only skipped before, replace) a GPU-stage result.
    pub fn put_evaluation(&self, e: &EvaluationRow) -> Result<()> {
        let tx = self.conn.unchecked_transaction().map_err(|e| io(&self.path, e))?;
        tx.execute(
            "INSERT OR REPLACE INTO evaluations (seq, status, verdicts, measured, headline_ms, peers, gpu_seconds, records, contract_hash, compiler_commit, finished_unix_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                e.seq,
                e.status,
                json_text(&e.verdicts),
                json_text(&e.measured),
                e.headline_ms,
                json_text(&e.peers),
                e.gpu_seconds,
                json_text(&e.records),
                e.contract_hash,
                e.compiler_commit,
                e.finished_unix_ms
            ],
        )
        .map_err(|e| io(&self.path, e))?;
        tx.commit().map_err(|e| io(&self.path, e))
    }

    pub fn candidates(&self) -> Result<Vec<CandidateRow>> {
        let mut st = self
            .conn
            .prepare("SELECT seq, generation, program_hash, program_text, parents, tactic, params, gate, findings, predicted_ms, bottleneck, cell, contract_hash, compiler_commit, created_unix_ms FROM candidates ORDER BY seq")
            .map_err(|e| io(&self.path, e))?;
        let rows = st
            .query_map([], |r| {
                Ok(CandidateRow {
                    seq: r.get(0)?,
                    generation: r.get(1)?,
                    program_hash: r.get(2)?,
                    program_text: r.get(3)?,
                    parents: serde_json::from_str(&r.get::<_, String>(4)?).unwrap_or_default(),
                    tactic: r.get(5)?,
                    params: serde_json::from_str(&r.get::<_, String>(6)?).unwrap_or_default(),
                    gate: r.get(7)?,
                    findings: serde_json::from_str(&r.get::<_, String>(8)?).unwrap_or_default(),
                    predicted_ms: r.get(9)?,
                    bottleneck: r.get(10)?,
                    cell: r.get(11)?,
                    contract_hash: r.get(12)?,
                    compiler_commit: r.get(13)?,
                    created_unix_ms: r.get(14)?,
                })
            })
            .map_err(|e| io(&self.path, e))?;
        rows.collect::<std::result::Result<Vec<_>, _>>().map_err(|e| io(&self.path, e))
    }

    pub fn evaluations(&self) -> Result<Vec<EvaluationRow>> {
        let mut st = self
            .conn
            .prepare("SELECT seq, status, verdicts, measured, headline_ms, peers, gpu_seconds, records, contract_hash, compiler_commit, finished_unix_ms FROM evaluations ORDER BY seq")
            .map_err(|e| io(&self.path, e))?;
        let rows = st
            .query_map([], |r| {
                Ok(EvaluationRow {
                    seq: r.get(0)?,
                    status: r.get(1)?,
                    verdicts: serde_json::from_str(&r.get::<_, String>(2)?).unwrap_or_default(),
                    measured: serde_json::from_str(&r.get::<_, String>(3)?).unwrap_or_default(),
                    headline_ms: r.get(4)?,
                    peers: serde_json::from_str(&r.get::<_, String>(5)?).unwrap_or_default(),
                    gpu_seconds: r.get(6)?,
                    records: serde_json::from_str(&r.get::<_, String>(7)?).unwrap_or_default(),
                    contract_hash: r.get(8)?,
                    compiler_commit: r.get(9)?,
                    finished_unix_ms: r.get(10)?,
                })
            })
            .map_err(|e| io(&self.path, e))?;
        rows.collect::<std::result::Result<Vec<_>, _>>().map_err(|e| io(&self.path, e))
    }

    pub fn begin_run(&self, mode: &str, seed: u64, budget_evals: u32) -> Result<i64> {
        let tx = self.conn.unchecked_transaction().map_err(|e| io(&self.path, e))?;
        // A run row still `running` belongs to a process that died: it was interrupted.
        tx.execute("UPDATE runs SET state = 'interrupted' WHERE state = 'running'", []).map_err(|e| io(&self.path, e))?;
        tx.execute(
            "INSERT INTO runs (mode, seed, budget_evals, started_unix_ms, state, note) VALUES (?1, ?2, ?3, ?4, 'running', '')",
            params![mode, seed as i64, budget_evals, now_ms()],
        )
            .map_err(|e| io(&self.path, e))?;
        let id = tx.last_insert_rowid();
        tx.commit().map_err(|e| io(&self.path, e))?;
        Ok(id)
    }

    pub fn end_run(&self, id: i64, state: &str, note: &str) -> Result<()> {
        let tx = self.conn.unchecked_transaction().map_err(|e| io(&self.path, e))?;
        tx.execute("UPDATE runs SET state = ?1, note = ?2, finished_unix_ms = ?3 WHERE id = ?4", params![state, note, now_ms(), id]).map_err(|e| io(&self.path, e))?;
        tx.commit().map_err(|e| io(&self.path, e))
    }

    /// Every invocation, oldest first.
    pub fn runs(&self) -> Result<Vec<RunRow>> {
        let mut st = self.conn.prepare("SELECT id, mode, seed, budget_evals, state, note FROM runs ORDER BY id").map_err(|e| io(&self.path, e))?;
        let rows = st
            .query_map([], |r| Ok(RunRow { id: r.get(0)?, mode: r.get(1)?, seed: r.get(2)?, budget_evals: r.get(3)?, state: r.get(4)?, note: r.get(5)? }))
            .map_err(|e| io(&self.path, e))?;
        rows.collect::<std::result::Result<Vec<_>, _>>().map_err(|e| io(&self.path, e))
    }

    /// The GPU-evaluation budget of the latest `run` or `resume`, which a `resume` without
    /// `--budget-evals` keeps.
    pub fn last_budget(&self) -> Result<Option<u32>> {
        self.conn
            .query_row("SELECT budget_evals FROM runs WHERE mode != 'replay' ORDER BY id DESC LIMIT 1", [], |r| r.get::<_, u32>(0))
            .optional()
            .map_err(|e| io(&self.path, e))
    }

    /// The seed of the first `run`, which `resume` continues.
    pub fn first_seed(&self) -> Result<Option<u64>> {
        self.conn
            .query_row("SELECT seed FROM runs WHERE mode = 'run' ORDER BY id LIMIT 1", [], |r| r.get::<_, i64>(0))
            .optional()
            .map(|s| s.map(|s| s as u64))
            .map_err(|e| io(&self.path, e))
    }
}

pub fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}
