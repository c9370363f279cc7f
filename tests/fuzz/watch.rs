//! Runs inputs on a worker thread under `catch_unwind`, with a watchdog and a memory check.
//!
//! A thread cannot be killed, so a hung worker is abandoned (its channel dropped) and a fresh one
//! started; the campaign stops after a few. The timeout is on the worker thread's CPU time
//! (`/proc/self/task/TID/stat`), so a machine shared with other work does not turn slow inputs
//! into hangs; an input blocked without using the CPU (a FIFO, a lock) is a hang after six times
//! the timeout of wall-clock time. Memory is the process's resident set: VmHWM is reset
//! before each input (writing `5` to `/proc/self/clear_refs`) and read after it, and VmRSS is
//! polled while it runs so a runaway input is stopped before it exhausts the machine.

use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Once;
use std::time::{Duration, Instant};

use super::fnv;
use super::mutate::Rng;
use super::stages::{self, Reached};

pub enum Verdict {
    /// The stages ran; `Err` is a broken promise (see `stages`). With the input's VmHWM, KiB.
    Done(Result<Reached, String>, u64),
    /// The panic's message and location.
    Panic(String),
    Hang,
    /// Resident memory passed the cap while the input ran (KiB).
    MemoryRunaway(u64),
}

thread_local! {
    static IN_WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static LAST_PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// A worker's panics are recorded quietly (the campaign reports them); any other thread's go to
/// the previous hook.
fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if IN_WORKER.with(|w| w.get()) {
                let msg = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(non-string panic payload)".into());
                let at = info.location().map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column())).unwrap_or_default();
                LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{msg} at {at}")));
            } else {
                previous(info)
            }
        }));
    });
}

type Job = (Vec<u8>, Sender<Result<Result<Reached, String>, String>>);

/// What a worker runs on each input: [`stages::drive`] in a campaign.
pub type Drive = fn(&[u8], &mut Rng) -> Result<Reached, String>;

/// The worker's channel and its thread id (None where /proc does not say).
fn spawn(drive: Drive) -> (Sender<Job>, Option<u32>) {
    let (tx, rx): (Sender<Job>, Receiver<Job>) = mpsc::channel();
    let (tid_tx, tid_rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("fuzz-worker".into())
        // Deeply nested mutants recurse in the parser and checker; a main-thread-sized stack
        // keeps a stack overflow (an abort, not a panic) for inputs the CLI would also die on.
        .stack_size(8 << 20)
        .spawn(move || {
            // `/proc/thread-self` links to `PID/task/TID`.
            let tid = std::fs::read_link("/proc/thread-self").ok().and_then(|p| p.file_name()?.to_str()?.parse::<u32>().ok());
            let _ = tid_tx.send(tid);
            IN_WORKER.with(|w| w.set(true));
            for (input, reply) in rx {
                let mut rng = Rng::new(fnv(&input));
                let r = panic::catch_unwind(AssertUnwindSafe(|| drive(&input, &mut rng)));
                let r = r.map_err(|_| LAST_PANIC.with(|p| p.borrow_mut().take()).unwrap_or_else(|| "panic".into()));
                if reply.send(r).is_err() {
                    return;
                }
            }
        })
        .expect("spawning a thread");
    (tx, tid_rx.recv().ok().flatten())
}

/// CPU time (user + system) of thread `tid` of this process, in clock ticks (1/100 s on Linux).
fn thread_ticks(tid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // Fields after the command name (which is in parentheses and may hold spaces): state is
    // field 3, utime 14 and stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

const TICKS_PER_SECOND: f64 = 100.0;

pub struct Watch {
    drive: Drive,
    timeout: Duration,
    cap_kib: u64,
    worker: Sender<Job>,
    tid: Option<u32>,
    abandoned: usize,
    peak_kib: u64,
}

impl Watch {
    pub fn new(timeout: Duration, cap_kib: u64) -> Watch {
        Watch::with_drive(stages::drive, timeout, cap_kib)
    }

    pub fn with_drive(drive: Drive, timeout: Duration, cap_kib: u64) -> Watch {
        install_hook();
        let (worker, tid) = spawn(drive);
        Watch { drive, timeout, cap_kib, worker, tid, abandoned: 0, peak_kib: 0 }
    }

    pub fn abandoned(&self) -> usize {
        self.abandoned
    }

    /// The highest VmHWM seen after any input, KiB.
    pub fn peak_kib(&self) -> u64 {
        self.peak_kib
    }

    pub fn run(&mut self, input: &[u8]) -> Verdict {
        let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
        let (tx, rx) = mpsc::channel();
        if self.worker.send((input.to_vec(), tx)).is_err() {
            self.respawn();
            return Verdict::Panic("the worker thread died".into());
        }
        let start = Instant::now();
        let ticks0 = self.tid.and_then(thread_ticks);
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(r) => {
                    let hwm = status_kib("VmHWM:").unwrap_or(0);
                    // Without a reset VmHWM is the campaign's peak so far, not this input's.
                    let own = if reset { hwm } else { 0 };
                    self.peak_kib = self.peak_kib.max(hwm);
                    return match r {
                        Ok(done) => Verdict::Done(done, own),
                        Err(message) => Verdict::Panic(message),
                    };
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.respawn();
                    return Verdict::Panic("the worker thread died".into());
                }
                Err(RecvTimeoutError::Timeout) => {
                    let rss = status_kib("VmRSS:").unwrap_or(0);
                    self.peak_kib = self.peak_kib.max(rss);
                    if rss > self.cap_kib {
                        self.abandon();
                        return Verdict::MemoryRunaway(rss);
                    }
                    let cpu = match (ticks0, self.tid.and_then(thread_ticks)) {
                        (Some(a), Some(b)) => Duration::from_secs_f64(b.saturating_sub(a) as f64 / TICKS_PER_SECOND),
                        // Without /proc the wall clock is all there is.
                        _ => start.elapsed(),
                    };
                    if cpu >= self.timeout || start.elapsed() >= self.timeout * 6 {
                        self.abandon();
                        return Verdict::Hang;
                    }
                }
            }
        }
    }

    fn abandon(&mut self) {
        self.abandoned += 1;
        self.respawn();
    }

    fn respawn(&mut self) {
        (self.worker, self.tid) = spawn(self.drive);
    }
}

/// A `kB` field of `/proc/self/status`.
pub fn status_kib(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line[field.len()..].trim().trim_end_matches("kB").trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drive(input: &[u8], _: &mut Rng) -> Result<Reached, String> {
        match input {
            b"panic" => panic!("boom"),
            b"hang" => {
                // Busy for 3 s of CPU time.
                let t = Instant::now();
                let mut x = 0u64;
                while t.elapsed() < Duration::from_secs(3) {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
                Ok(Reached::Parse)
            }
            b"grow" => {
                // 300 MiB touched, so it is resident.
                let v = vec![1u8; 300 << 20];
                std::hint::black_box(&v);
                Ok(Reached::Parse)
            }
            _ => Ok(Reached::Lower),
        }
    }

    /// The watchdog tells a panic (with its location), a hang and memory past the cap from a
    /// clean run, and keeps working after each.
    #[test]
    fn panics_hangs_and_memory_are_told_apart() {
        let mut w = Watch::with_drive(drive, Duration::from_secs(1), 200 << 10);
        assert!(matches!(w.run(b"ok"), Verdict::Done(Ok(Reached::Lower), _)));
        match w.run(b"panic") {
            Verdict::Panic(m) => assert!(m.contains("boom") && m.contains("watch.rs"), "{m}"),
            _ => panic!("a panic is a panic"),
        }
        assert!(matches!(w.run(b"hang"), Verdict::Hang));
        assert_eq!(w.abandoned(), 1);
        match w.run(b"grow") {
            Verdict::Done(Ok(_), hwm) => assert!(hwm > 200 << 10, "VmHWM {hwm} KiB"),
            Verdict::MemoryRunaway(_) => {}
            _ => panic!("memory past the cap is seen"),
        }
        assert!(matches!(w.run(b"ok"), Verdict::Done(Ok(Reached::Lower), _)));
    }
}
