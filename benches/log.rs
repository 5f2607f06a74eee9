//! Partition log throughput beside the machine's own limits, in one run: the kernels of `klog bench`
//! (`src/cli/bench.rs`) at a small size, so that a regression shows in criterion's history.
//!
//! Data: 16 KiB producer batches of 15 uncompressed 1 KiB records (a Java producer's `batch.size`), 64
//! distinct ones built once with `BatchBuilder` and cycled through.
//!
//! Groups (each holds its baseline; compare only within one run, the VM is noisy):
//! - `log_append/*`: 4 MiB of `append_as_leader`, no fsync, into a fresh log (std and uring backends);
//!   baseline `pwrite`: `write_all_at` of the same batches to a fresh file. Opening, syncing and removing
//!   the log are outside the timed part.
//! - `log_durable/*`: 32 appends each followed by `flush(last offset + 1)`, from one thread (`single`) and
//!   from 8 threads sharing one log (`group8`, group commit); baselines `pwrite_fdatasync` (one per
//!   write: the bound of `single`) and `pwrite8_fdatasync` (one per 8 writes: the bound of `group8`).
//! - `log_append_100B/*`: the same with 100-byte records, 140 per batch (about 16 KiB, the shape where
//!   per-record work weighs most): every record walked by the leader's validator. Beside it, the paired
//!   line `paired/log_append_100B/klog_std_vs_pwrite` (stderr) times both sides back to back, alternating
//!   which goes first, 21 rounds (7 with `--quick`), and prints the median ratio pwrite time / klog time:
//!   klog's append rate as a fraction of pwrite's (goal >= 0.9); `.../validate_vs_pwrite`, the
//!   validator alone (`validate`: CRC-32C, header checks, every record walked) over the same batches,
//!   `.../walk_vs_pwrite`, the record walk alone, and `.../crc_vs_pwrite`, the CRC-32C alone.
//! - `log_read/*`: `read(offset, 1 MiB, None, true)` from 0 to the end of a 4 MiB log of 1 MiB segments,
//!   closed and reopened (sealed segments are memory-mapped); `+copy` copies the bytes out, as `pread`
//!   delivers them; reference `pread`: 1 MiB `pread`s over the same `.log` files (no bound for
//!   `+copy`, which copies out of a map; `klog bench read` sets it beside mmap + memcpy). The view
//!   without `+copy` touches no byte: compare it with nothing but `+copy`.
//!
//! Run: `cargo bench --bench log` (`-- --quick` for a short run); `cargo test --benches` runs each once
//! (with smaller sizes in unoptimised builds). For the figures beside the baselines at full size, with
//! ratios per round, use `klog bench` (see `BENCHMARKS.md`).

use std::fs::{File, OpenOptions};
use std::hint::black_box;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use klog::log::clock::{Clock, SystemClock};
use klog::log::config::LogConfig;
use klog::log::format::{crc32c, walk_records, BatchBuilder, Compression, RecordBatch};
use klog::log::io::{open_backend, IoBackend, Storage};
use klog::log::partition_log::{OpenOptions as LogOpenOptions, PartitionLog};
use klog::log::validator::{validate, AppendOrigin};

mod common;

use common::{alternating, quartiles, thread_cpu_time, CriterionArgs};

const RECORDS_PER_BATCH: usize = 15;
const VALUE_BYTES: usize = 1024;
const POOL_BATCHES: usize = 64;
/// Bytes appended per iteration of `log_append`, and the size of the `log_read` log.
const LOG_BYTES: u64 = if cfg!(debug_assertions) {
    1 << 20
} else {
    4 << 20
};
const READ_SEGMENT_BYTES: u64 = LOG_BYTES / 4;
const READ_BYTES: usize = 1 << 20;
const DURABLE_APPENDS: u64 = if cfg!(debug_assertions) { 8 } else { 32 };
const THREADS: usize = 8;

/// `POOL_BATCHES` producer batches of `records` records with `value_bytes` random bytes each, stamped
/// with the current time (the leader checks CreateTime against its clock).
fn build_pool(records: usize, value_bytes: usize) -> Vec<Vec<u8>> {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut value = vec![0u8; value_bytes];
    let now = SystemClock.now_ms();
    (0..POOL_BATCHES)
        .map(|i| {
            let mut b = BatchBuilder::new(Compression::None);
            for j in 0..records {
                for chunk in value.chunks_mut(8) {
                    rng ^= rng >> 12;
                    rng ^= rng << 25;
                    rng ^= rng >> 27;
                    let x = rng.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
                    chunk.copy_from_slice(&x[..chunk.len()]);
                }
                let key = format!("k{:07}", i * records + j);
                b.append(now, Some(key.as_bytes()), Some(&value), &[])
                    .expect("record");
            }
            b.build().expect("batch")
        })
        .collect()
}

/// Makes a stamped batch a producer batch again (base offset 0; outside the CRC).
fn reset_base_offset(batch: &mut [u8]) {
    batch[..8].copy_from_slice(&0i64.to_be_bytes());
}

fn config(segment_bytes: u64) -> LogConfig {
    let mut c = LogConfig::default();
    c.set("segment.bytes", &segment_bytes.to_string())
        .expect("segment.bytes");
    c
}

struct Env {
    scratch: PathBuf,
    pool: Vec<Vec<u8>>,
    /// 100-byte records, 140 per batch.
    pool_100b: Vec<Vec<u8>>,
    backends: Vec<(&'static str, Arc<dyn Storage>)>,
}

impl Env {
    fn new() -> Self {
        let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-log");
        let _ = std::fs::remove_dir_all(&scratch);
        std::fs::create_dir_all(&scratch).expect("scratch dir");
        let mut backends = vec![("std", open_backend(IoBackend::Std).expect("std"))];
        match open_backend(IoBackend::Uring) {
            Ok(s) => backends.push(("uring", s)),
            Err(e) if std::env::var("KLOG_REQUIRE_URING").is_ok_and(|v| v == "1") => {
                panic!("KLOG_REQUIRE_URING=1 but {e}")
            }
            Err(e) => eprintln!("log bench: skipping the uring backend: {e}"),
        }
        Env {
            scratch,
            pool: build_pool(RECORDS_PER_BATCH, VALUE_BYTES),
            pool_100b: build_pool(140, 100),
            backends,
        }
    }

    fn batches(&self, bytes: u64) -> usize {
        bytes.div_ceil(self.pool[0].len() as u64) as usize
    }

    /// `pwrite`s the first `n` batches of `pool` into a fresh file; returns (wall, thread CPU) time of
    /// the writes alone.
    fn time_pwrite(&self, pool: &[Vec<u8>], n: usize) -> (Duration, Duration) {
        let (file, path) = self.fresh_file();
        let mut position = 0u64;
        let (start, cpu) = (Instant::now(), thread_cpu_time());
        for i in 0..n {
            let batch = &pool[i % POOL_BATCHES];
            file.write_all_at(batch, position).expect("pwrite");
            position += batch.len() as u64;
        }
        let times = elapsed(start, cpu);
        file.sync_data().expect("fdatasync");
        std::fs::remove_file(path).expect("remove");
        times
    }

    /// `append_as_leader`s the first `n` batches of `pool` into a fresh log (after one untimed append);
    /// returns (wall, thread CPU) time of those appends alone.
    fn time_append(
        &self,
        storage: &Arc<dyn Storage>,
        pool: &mut [Vec<u8>],
        n: usize,
    ) -> (Duration, Duration) {
        let (log, dir) = self.fresh_log(storage);
        // The first append of a fresh log writes the leader-epoch checkpoint (with an fsync): a once per
        // log cost, kept out of the timing like the open.
        let mut first = pool[POOL_BATCHES - 1].clone();
        reset_base_offset(&mut first);
        log.append_as_leader(&mut first, 0).expect("append");
        let (start, cpu) = (Instant::now(), thread_cpu_time());
        for i in 0..n {
            let batch = &mut pool[i % POOL_BATCHES];
            reset_base_offset(batch);
            log.append_as_leader(batch, 0).expect("append");
        }
        let times = elapsed(start, cpu);
        finish_log(log, &dir);
        times
    }

    fn fresh_file(&self) -> (File, PathBuf) {
        let path = self.scratch.join("baseline.bin");
        let _ = std::fs::remove_file(&path);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .expect("baseline file");
        (file, path)
    }

    fn fresh_log(&self, storage: &Arc<dyn Storage>) -> (PartitionLog, PathBuf) {
        let dir = self.scratch.join("bench-0");
        let _ = std::fs::remove_dir_all(&dir);
        let (log, _) = PartitionLog::open(
            storage.clone(),
            &dir,
            config(1 << 30),
            LogOpenOptions::default(),
        )
        .expect("open log");
        (log, dir)
    }
}

/// (wall, thread CPU) time of one side of a paired round.
type Times = (Duration, Duration);

/// (wall, thread CPU) time since `start`/`cpu`; wall time where the CPU clock is missing.
fn elapsed(start: Instant, cpu: Option<Duration>) -> Times {
    let wall = start.elapsed();
    let cpu = thread_cpu_time().zip(cpu).map(|(end, begin)| end - begin);
    (wall, cpu.unwrap_or(wall))
}

fn finish_log(log: PartitionLog, dir: &Path) {
    log.flush(log.log_end_offset()).expect("flush");
    log.close().expect("close");
    drop(log);
    std::fs::remove_dir_all(dir).expect("remove log");
}

fn bench_append(c: &mut Criterion, env: &Env) {
    let n = env.batches(LOG_BYTES);
    let bytes: usize = (0..n).map(|i| env.pool[i % POOL_BATCHES].len()).sum();
    let mut g = c.benchmark_group("log_append");
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("pwrite", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (file, path) = env.fresh_file();
                let mut position = 0u64;
                let start = Instant::now();
                for i in 0..n {
                    let batch = &env.pool[i % POOL_BATCHES];
                    file.write_all_at(batch, position).expect("pwrite");
                    position += batch.len() as u64;
                }
                total += start.elapsed();
                file.sync_data().expect("fdatasync");
                std::fs::remove_file(path).expect("remove");
            }
            total
        })
    });
    for (name, storage) in &env.backends {
        let mut pool = env.pool.clone();
        g.bench_function(format!("klog_{name}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (log, dir) = env.fresh_log(storage);
                    let start = Instant::now();
                    for i in 0..n {
                        let batch = &mut pool[i % POOL_BATCHES];
                        reset_base_offset(batch);
                        log.append_as_leader(batch, 0).expect("append");
                    }
                    total += start.elapsed();
                    finish_log(log, &dir);
                }
                total
            })
        });
    }
    g.finish();
}

/// Leader appends of 100-byte records, 140 per batch, validation on (every record walked), beside
/// pwrite of the same bytes: criterion's two functions, then the paired ratio.
fn bench_append_100b(c: &mut Criterion, env: &Env) {
    let pool = &env.pool_100b;
    let n = (LOG_BYTES as usize).div_ceil(pool[0].len());
    let bytes: usize = (0..n).map(|i| pool[i % POOL_BATCHES].len()).sum();
    let std_storage = &env.backends[0].1;
    let mut g = c.benchmark_group("log_append_100B");
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("pwrite", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| env.time_pwrite(pool, n).0).sum())
    });
    let mut klog_pool = pool.clone();
    g.bench_function("klog_std", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| env.time_append(std_storage, &mut klog_pool, n).0)
                .sum()
        })
    });
    g.finish();

    let args = CriterionArgs::from_env();
    let rounds = args.paired_rounds(21, 7);
    let id = "paired/log_append_100B/klog_std_vs_pwrite";
    if args.selected(rounds, id) {
        let samples = alternating(
            rounds,
            || env.time_pwrite(pool, n),
            || env.time_append(std_storage, &mut klog_pool, n),
        );
        report_paired(id, &samples, rounds, n, bytes);
    }
    // The validator's own share: `validate` (CRC-32C, header checks, every record walked) of the same
    // batches, without the write, beside the pwrite loop.
    let id = "paired/log_append_100B/validate_vs_pwrite";
    if args.selected(rounds, id) {
        let config = LogConfig::default();
        let time_validate = || {
            let (start, cpu) = (Instant::now(), thread_cpu_time());
            let now = SystemClock.now_ms();
            for i in 0..n {
                let batch = &pool[i % POOL_BATCHES];
                black_box(validate(batch, AppendOrigin::Client, &config, now).expect("valid"));
            }
            elapsed(start, cpu)
        };
        let samples = alternating(rounds, || env.time_pwrite(pool, n), time_validate);
        report_paired(id, &samples, rounds, n, bytes);
    }
    // The record walk alone (`walk_records` over each batch's records), the part this validator adds to
    // the CRC-32C every append already paid.
    let id = "paired/log_append_100B/walk_vs_pwrite";
    if args.selected(rounds, id) {
        let time_walk = || {
            let (start, cpu) = (Instant::now(), thread_cpu_time());
            for i in 0..n {
                let (batch, _) =
                    RecordBatch::parse_unchecked_crc(&pool[i % POOL_BATCHES], 0).expect("batch");
                let walk = walk_records(
                    batch.records_payload(),
                    batch.records_count(),
                    batch.base_timestamp(),
                );
                black_box(walk.expect("valid"));
            }
            elapsed(start, cpu)
        };
        let samples = alternating(rounds, || env.time_pwrite(pool, n), time_walk);
        report_paired(id, &samples, rounds, n, bytes);
    }
    // The CRC-32C alone (what every append pays, walked or not), beside the pwrite loop.
    let id = "paired/log_append_100B/crc_vs_pwrite";
    if args.selected(rounds, id) {
        let time_crc = || {
            let (start, cpu) = (Instant::now(), thread_cpu_time());
            for i in 0..n {
                black_box(crc32c(&pool[i % POOL_BATCHES][21..]));
            }
            elapsed(start, cpu)
        };
        let samples = alternating(rounds, || env.time_pwrite(pool, n), time_crc);
        report_paired(id, &samples, rounds, n, bytes);
    }
}

/// Prints a paired line: the median over rounds of (first side's time / second side's time), by wall
/// and by thread CPU time, with the IQR, and the wall medians of both in MB/s.
fn report_paired(id: &str, samples: &[(Times, Times)], rounds: usize, n: usize, bytes: usize) {
    if rounds == 1 {
        eprintln!("{id}: ran once (test mode, not a measurement)");
        return;
    }
    let ratio = |f: fn(&Times) -> Duration| {
        quartiles(
            samples
                .iter()
                .map(|(p, k)| f(p).as_secs_f64() / f(k).as_secs_f64())
                .collect(),
        )
    };
    let wall = ratio(|t| t.0);
    let cpu = ratio(|t| t.1);
    let mb_s = |side: fn(&(Times, Times)) -> Duration| {
        let (_, m, _) = quartiles(samples.iter().map(|s| side(s).as_secs_f64()).collect());
        bytes as f64 / m / 1e6
    };
    eprintln!(
        "{id}: wall ratio {:.3} (IQR {:.3}-{:.3}); cpu-time ratio {:.3} (IQR {:.3}-{:.3}); {rounds} rounds of \
         {n} batches ({bytes} bytes); wall medians {:.0} MB/s vs {:.0} MB/s",
        wall.1,
        wall.0,
        wall.2,
        cpu.1,
        cpu.0,
        cpu.2,
        mb_s(|s| s.0 .0),
        mb_s(|s| s.1 .0),
    );
}

fn bench_durable(c: &mut Criterion, env: &Env) {
    let n = DURABLE_APPENDS;
    let mut g = c.benchmark_group("log_durable");
    g.throughput(Throughput::Elements(n));
    g.sample_size(10);
    g.bench_function("pwrite_fdatasync", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (file, path) = env.fresh_file();
                let batch = &env.pool[0];
                let start = Instant::now();
                for i in 0..n {
                    file.write_all_at(batch, i * batch.len() as u64)
                        .expect("pwrite");
                    file.sync_data().expect("fdatasync");
                }
                total += start.elapsed();
                std::fs::remove_file(path).expect("remove");
            }
            total
        })
    });
    // The bound of `group{THREADS}`: an appender waits for its flush, so one fdatasync covers at most
    // one append per appender; one per write (above) is the bound of `single` only.
    g.bench_function(format!("pwrite{THREADS}_fdatasync"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (file, path) = env.fresh_file();
                let batch = &env.pool[0];
                let start = Instant::now();
                for i in 0..n {
                    file.write_all_at(batch, i * batch.len() as u64)
                        .expect("pwrite");
                    if (i + 1) % THREADS as u64 == 0 || i + 1 == n {
                        file.sync_data().expect("fdatasync");
                    }
                }
                total += start.elapsed();
                std::fs::remove_file(path).expect("remove");
            }
            total
        })
    });
    for (name, storage) in &env.backends {
        let mut batch = env.pool[0].clone();
        g.bench_function(format!("klog_{name}_single"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (log, dir) = env.fresh_log(storage);
                    let start = Instant::now();
                    for _ in 0..n {
                        reset_base_offset(&mut batch);
                        let info = log.append_as_leader(&mut batch, 0).expect("append");
                        log.flush(info.last_offset + 1).expect("flush");
                    }
                    total += start.elapsed();
                    finish_log(log, &dir);
                }
                total
            })
        });
        g.bench_function(format!("klog_{name}_group{THREADS}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (log, dir) = env.fresh_log(storage);
                    total += group_commit(env, &log, n);
                    finish_log(log, &dir);
                }
                total
            })
        });
    }
    g.finish();
}

/// `THREADS` appenders share `log`, `n` appends in all, each followed by a flush to its own offset.
fn group_commit(env: &Env, log: &PartitionLog, n: u64) -> Duration {
    let per_thread = n.div_ceil(THREADS as u64);
    let barrier = Barrier::new(THREADS + 1);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let barrier = &barrier;
            let mut batch = env.pool[t % POOL_BATCHES].clone();
            s.spawn(move || {
                barrier.wait();
                for _ in 0..per_thread {
                    reset_base_offset(&mut batch);
                    let info = log.append_as_leader(&mut batch, 0).expect("append");
                    log.flush(info.last_offset + 1).expect("flush");
                }
            });
        }
        barrier.wait();
        let start = Instant::now();
        // The scope joins every appender before it returns.
        start
    })
    .elapsed()
}

fn bench_read(c: &mut Criterion, env: &Env) {
    let dir = env.scratch.join("read-0");
    let _ = std::fs::remove_dir_all(&dir);
    let std_storage = open_backend(IoBackend::Std).expect("std");
    let (log, _) = PartitionLog::open(
        std_storage,
        &dir,
        config(READ_SEGMENT_BYTES),
        LogOpenOptions::default(),
    )
    .expect("open");
    let mut pool = env.pool.clone();
    for i in 0..env.batches(LOG_BYTES) {
        let batch = &mut pool[i % POOL_BATCHES];
        reset_base_offset(batch);
        log.append_as_leader(batch, 0).expect("append");
    }
    let leo = log.log_end_offset();
    log.flush(leo).expect("flush");
    log.close().expect("close");
    drop(log);
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    let bytes: u64 = logs
        .iter()
        .map(|p| std::fs::metadata(p).expect("stat").len())
        .sum();
    let reopen = LogOpenOptions {
        recovery_point: leo,
        log_start_offset: 0,
        clean_shutdown: true,
    };

    let mut g = c.benchmark_group("log_read");
    g.throughput(Throughput::Bytes(bytes));
    let mut buf = vec![0u8; READ_BYTES];
    g.bench_function("pread", |b| {
        b.iter(|| {
            let mut total = 0u64;
            for path in &logs {
                let file = File::open(path).expect("open");
                let mut position = 0u64;
                loop {
                    let n = file.read_at(&mut buf, position).expect("pread");
                    if n == 0 {
                        break;
                    }
                    black_box(&buf[..n]);
                    position += n as u64;
                }
                total += position;
            }
            assert_eq!(total, bytes);
        })
    });
    for (name, storage) in &env.backends {
        let (log, _) =
            PartitionLog::open(storage.clone(), &dir, config(READ_SEGMENT_BYTES), reopen)
                .expect("reopen");
        for copy in [false, true] {
            let id = format!("klog_{name}{}", if copy { "+copy" } else { "" });
            g.bench_function(id, |b| {
                b.iter(|| {
                    let mut offset = 0i64;
                    let mut total = 0u64;
                    while offset < leo {
                        let info = log.read(offset, READ_BYTES, None, true).expect("read");
                        let bytes = info.records.as_slice();
                        if copy {
                            buf[..bytes.len()].copy_from_slice(bytes);
                            black_box(&buf[..bytes.len()]);
                        } else {
                            black_box(bytes);
                        }
                        total += bytes.len() as u64;
                        offset = info.next_offset;
                    }
                    assert_eq!(total, bytes);
                })
            });
        }
        log.close().expect("close");
    }
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

fn bench_log(c: &mut Criterion) {
    let env = Env::new();
    bench_append(c, &env);
    bench_append_100b(c, &env);
    bench_durable(c, &env);
    bench_read(c, &env);
    let _ = std::fs::remove_dir_all(&env.scratch);
}

fn config_criterion() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config_criterion();
    targets = bench_log
}
criterion_main!(benches);
