//! Reference benchmark for bench/compare.sh: tokio's `Semaphore` (tokio 1.24 from Debian's librust-tokio-dev, built
//! offline), the Rust semaphore admit::semaphore is measured against. The cases mirror bench/semaphore_bench.cpp.
//! A plain harness like the Java one (no criterion in Debian's registry here): per case, calibration and warm-up
//! rounds, then timed rounds of a fixed number of operations; the median ns/op of the timed rounds is printed.
//!
//!   cd bench/reference/rust && cargo run --release --offline -- [rounds] [round-millis] [handoff-rounds] [uncontended]
//!
//! With a fourth argument "uncontended", only the uncontended case runs (bench/compare.sh interleaves it with the
//! other implementations' to compare them at one load).
//! Output, one line per case:
//!   uncontended 1 <median ns/op>
//!       `Semaphore::new(1)`: `try_acquire()` then dropping the permit, on one thread, no runtime needed; every
//!       try_acquire must succeed.
//!   contended-multi_thread 2 <median ns/op> <parallelism>
//!       two tasks on a multi-thread runtime of 2 worker threads loop `acquire().await` then drop the permit on one
//!       `Semaphore::new(1)`; ns/op is the wall time divided by the operations of both; parallelism is the process CPU
//!       time over the wall time (from /proc/self/stat, 10 ms ticks; 2.0: both workers busy all the time).
//!   handoff-multi_thread <p50> <p90> <p99> <max> <mean>
//!   handoff-current_thread <p50> <p90> <p99> <max> <mean>
//!       hand-off latency in ns: a task blocks in `acquire().await` on a runtime with nothing else to do (so its
//!       worker thread parks); once it announced itself and 200 us passed, the main thread (a plain thread outside
//!       the runtime) reads `Instant::now()` and drops the permit it holds; the task reads `Instant::now()` as soon as
//!       the acquire completes. multi_thread: a runtime of 2 worker threads; current_thread: a runtime driven by
//!       `block_on` on one dedicated thread.
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};
use tokio::runtime::{Builder, Runtime};
use tokio::sync::Semaphore;

/// Runs calibration, warm-up and timed rounds of `round(calls)` (returning its wall time); prints the median.
fn measure(name: &str, threads: u64, rounds: usize, round_ms: u64, mut round: impl FnMut(u64) -> Duration) {
    let target = Duration::from_millis(round_ms);
    let mut calls: u64 = 1000;
    loop {
        let t = round(calls);
        if t >= target / 4 {
            calls = ((calls as f64) * target.as_secs_f64() / t.as_secs_f64()).max(1.0) as u64;
            break;
        }
        calls *= 4;
    }
    for _ in 0..3 {
        round(calls);
    }
    let cpu0 = process_cpu_ticks();
    let mut wall = Duration::ZERO;
    let mut per_op: Vec<f64> = (0..rounds)
        .map(|_| {
            let t = round(calls);
            wall += t;
            t.as_nanos() as f64 / (calls * threads) as f64
        })
        .collect();
    let cpu = (process_cpu_ticks() - cpu0) as f64 / 100.0; // USER_HZ is 100 on Linux
    per_op.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = if rounds % 2 == 1 {
        per_op[rounds / 2]
    } else {
        (per_op[rounds / 2 - 1] + per_op[rounds / 2]) / 2.0
    };
    if threads > 1 {
        println!("{} {} {:.2} {:.2}", name, threads, median, cpu / wall.as_secs_f64());
    } else {
        println!("{} {} {:.2}", name, threads, median);
    }
}

/// utime + stime of this process, in clock ticks (/proc/self/stat fields 14 and 15).
fn process_cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    get(11) + get(12) // field 14 is the 12th after the ')' (field 3 is the first)
}

fn uncontended(sem: &Semaphore, calls: u64) -> Duration {
    let mut failed = 0u64;
    let t0 = Instant::now();
    for _ in 0..calls {
        match sem.try_acquire() {
            Ok(permit) => drop(permit),
            Err(_) => failed += 1,
        }
    }
    let elapsed = t0.elapsed();
    assert_eq!(failed, 0, "try_acquire failed");
    elapsed
}

fn contended(rt: &Runtime, sem: &Arc<Semaphore>, tasks: u64, calls: u64) -> Duration {
    rt.block_on(async {
        let t0 = Instant::now();
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let sem = Arc::clone(sem);
                tokio::spawn(async move {
                    for _ in 0..calls {
                        let permit = sem.acquire().await.expect("the semaphore is never closed");
                        drop(permit);
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.expect("a task panicked");
        }
        t0.elapsed()
    })
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    sorted[(p * (sorted.len() - 1) as f64 + 0.5) as usize]
}

/// Hand-off rounds with the waiter task spawned by `spawn` (which runs it on the runtime under test).
fn handoff(
    name: &str,
    rounds: usize,
    spawn: impl FnOnce(std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>),
) {
    let sem = Arc::new(Semaphore::new(1));
    let (go_tx, mut go_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let (armed_tx, armed_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<Instant>();
    let waiter_sem = Arc::clone(&sem);
    spawn(Box::pin(async move {
        while go_rx.recv().await.is_some() {
            armed_tx.send(()).unwrap();
            let permit = waiter_sem.acquire().await.expect("the semaphore is never closed");
            let woke = Instant::now();
            drop(permit);
            done_tx.send(woke).unwrap();
        }
    }));
    let mut latency = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let held = sem.try_acquire().expect("the waiter gave the permit back");
        go_tx.send(()).unwrap();
        armed_rx.recv().unwrap();
        thread::sleep(Duration::from_micros(200));
        let released = Instant::now();
        drop(held);
        let woke = done_rx.recv().unwrap();
        latency.push(woke.duration_since(released).as_nanos() as u64);
    }
    drop(go_tx);
    // The first rounds warm caches and the runtime up: drop a tenth of them, as the Java harness does.
    let mut timed = latency.split_off(rounds / 10);
    timed.sort_unstable();
    let mean = timed.iter().sum::<u64>() as f64 / timed.len() as f64;
    println!(
        "{} {} {} {} {} {:.0}",
        name,
        percentile(&timed, 0.50),
        percentile(&timed, 0.90),
        percentile(&timed, 0.99),
        percentile(&timed, 1.0),
        mean
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, default: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let rounds = arg(1, 7) as usize;
    let round_ms = arg(2, 200);
    let handoff_rounds = arg(3, 2000) as usize;
    let handoff_rounds = handoff_rounds + handoff_rounds / 9;

    let single = Semaphore::new(1);
    measure("uncontended", 1, rounds, round_ms, |calls| uncontended(&single, calls));
    if args.get(4).map(String::as_str) == Some("uncontended") {
        return;
    }

    let rt = Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("a runtime");
    let sem = Arc::new(Semaphore::new(1));
    measure("contended-multi_thread", 2, rounds, round_ms, |calls| {
        contended(&rt, &sem, 2, calls)
    });

    handoff("handoff-multi_thread", handoff_rounds, |task| {
        rt.spawn(task);
    });
    drop(rt);

    let (task_tx, task_rx) = mpsc::channel::<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>();
    let driver = thread::spawn(move || {
        let rt = Builder::new_current_thread().build().expect("a runtime");
        let task = task_rx.recv().unwrap();
        rt.block_on(task);
    });
    handoff("handoff-current_thread", handoff_rounds, |task| {
        task_tx.send(task).unwrap();
    });
    driver.join().unwrap();
}
