//! Runs inputs on a worker thread under `catch_unwind`, with a watchdog and a memory check.
//!
//! A thread cannot be killed, so a hung worker is abandoned (its channel dropped) and a fresh one
//! started; the campaign stops after a few. Memory is the process's resident set: VmHWM is reset
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

fn spawn(drive: Drive) -> Sender<Job> {
    let (tx, rx): (Sender<Job>, Receiver<Job>) = mpsc::channel();
    std::thread::Builder::new()
        .name("fuzz-worker".into())
        // Deeply nested mutants recurse in the parser and checker; a main-thread-sized stack
        // keeps a stack overflow (an abort, not a panic) for inputs the CLI would also die on.
        .stack_size(8 << 20)
        .spawn(move || {
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
    tx
}

pub struct Watch {
    drive: Drive,
    timeout: Duration,
    cap_kib: u64,
    worker: Sender<Job>,
    abandoned: usize,
    peak_kib: u64,
}

impl Watch {
    pub fn new(timeout: Duration, cap_kib: u64) -> Watch {
        Watch::with_drive(stages::drive, timeout, cap_kib)
    }

    pub fn with_drive(drive: Drive, timeout: Duration, cap_kib: u64) -> Watch {
        install_hook();
        Watch { drive, timeout, cap_kib, worker: spawn(drive), abandoned: 0, peak_kib: 0 }
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
            self.worker = spawn(self.drive);
            return Verdict::Panic("the worker thread died".into());
        }
        let start = Instant::now();
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
                    self.worker = spawn(self.drive);
                    return Verdict::Panic("the worker thread died".into());
                }
                Err(RecvTimeoutError::Timeout) => {
                    let rss = status_kib("VmRSS:").unwrap_or(0);
                    self.peak_kib = self.peak_kib.max(rss);
                    if rss > self.cap_kib {
                        self.abandon();
                        return Verdict::MemoryRunaway(rss);
                    }
                    if start.elapsed() >= self.timeout {
                        self.abandon();
                        return Verdict::Hang;
                    }
                }
            }
        }
    }

    fn abandon(&mut self) {
        self.abandoned += 1;
        self.worker = spawn(self.drive);
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
                std::thread::sleep(Duration::from_secs(3));
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
