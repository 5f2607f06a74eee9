//! Opening a partition log after an unclean and after a clean shutdown, beside the I/O floor of each, in
//! one run.
//!
//! Groups (each holds its baseline; compare only within one run, the VM is noisy):
//! - `recovery_unclean/*`: a partition of `KLOG_BENCH_RECOVER_MB` MiB (default 256) of 16 KiB producer
//!   batches (15 records of 1 KiB, uncompressed; 8 idempotent producers with consecutive sequences) in
//!   64 MiB segments (`KLOG_BENCH_RECOVER_SEGMENT_MB`), written once with `PartitionLog` (std backend)
//!   and closed cleanly.
//!   - `klog_recover`: `PartitionLog::open` with `clean_shutdown: false, recovery_point: 0`, so every
//!     segment is rescanned: every batch's CRC-32C checked, the offset and time indexes rebuilt, the
//!     leader epochs reassigned, and every batch replayed into the producer state (no snapshot is at or
//!     below offset 0). The log is closed after the clock stops, which leaves the directory as it was, so
//!     each iteration redoes the same work.
//!   - `read_1mib` (baseline): `File::open` and sequential `read` of the same `.log` files into one 1 MiB
//!     buffer.
//!   - `two_pass_fresh_crc` (informational): each `.log` read whole into a fresh zeroed buffer with every
//!     CRC checked, then read whole again into a fresh buffer and walked without CRC: the two passes
//!     `PartitionLog` makes (`LogSegment::recover`, then the producer-state replay), without the rest.
//!   - `one_pass_reused_crc` (informational): one pass into one reused, pre-faulted buffer with every
//!     CRC checked: where a single-pass recovery would start.
//!   - `stream_1mib_crc` (informational): one pass in 1 MiB reads into one reused (cache-resident)
//!     buffer, each batch's CRC checked once complete: a streaming recovery's floor.
//!
//!   All run with the files in the page cache (this VM cannot drop it for a benchmark): they compare CPU
//!   work over cached bytes, not disk reads.
//! - `open_clean/*/<segments>`: a log of 4 KiB segments (`segment.bytes=4096`, three ~1.1 KiB batches
//!   each, no producer ids), grown to each count of `KLOG_BENCH_SEGMENTS` (default `2500,5000,10000`) and
//!   closed cleanly. An open `PartitionLog` holds three file descriptors per segment (`.log`, `.index`,
//!   `.timeindex`), so counts over a third of the open-files limit are replaced by the largest multiple
//!   of 500 that fits (a note is printed).
//!   - `klog_open`: `PartitionLog::open` with `clean_shutdown: true` (goal for 10,000: < 1 s).
//!   - `list_open_stat` (baseline): list the directory, then open and `fstat` every `.log`: the
//!     system calls any clean open needs.
//!
//! Paired ratios (stderr, `paired/...` lines): each pair timed back to back, alternating which goes first,
//! for 7 rounds (3 with `--quick`); medians of the per-round ratios by wall time and by thread CPU time.
//! Quote those. `KLOG_BENCH_PAIRED=0` skips them.
//!
//! The logs live in `target/tmp/bench-recovery/` and are removed at the end. Building them takes most of
//! the run (the clean close of 10,000 segments syncs each one). `cargo test --benches` runs each once at
//! small sizes.

mod common;

use std::fs::File;
use std::hint::black_box;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{alternating, quartiles, thread_cpu_time, CriterionArgs};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use klog::log::config::LogConfig;
use klog::log::format::{BatchBuilder, Batches, Compression};
use klog::log::io::{open_backend, IoBackend, Storage};
use klog::log::partition_log::{OpenOptions, OpenReport, PartitionLog};

const RELEASE: bool = !cfg!(debug_assertions);
const RECORDS_PER_BATCH: usize = 15;
const VALUE_BYTES: usize = 1024;
const PRODUCERS: i64 = 8;
const READ_BUFFER: usize = 1 << 20;

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v}: not a number")),
        Err(_) => default,
    }
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

fn config(segment_bytes: u64) -> LogConfig {
    let mut c = LogConfig::default();
    c.set("segment.bytes", &segment_bytes.to_string())
        .expect("segment.bytes");
    c
}

fn std_storage() -> Arc<dyn Storage> {
    open_backend(IoBackend::Std).expect("std backend")
}

/// The `.log` files of `dir`, sorted, and their total size.
fn log_files(dir: &Path) -> (Vec<PathBuf>, u64) {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    let bytes = logs
        .iter()
        .map(|p| std::fs::metadata(p).expect("stat").len())
        .sum();
    (logs, bytes)
}

/// A log written with `PartitionLog` and closed cleanly.
struct TestLog {
    dir: PathBuf,
    config: LogConfig,
    logs: Vec<PathBuf>,
    bytes: u64,
    batches: u64,
    log_end_offset: i64,
}

impl TestLog {
    fn open(&self, options: OpenOptions) -> (PartitionLog, OpenReport) {
        PartitionLog::open(std_storage(), &self.dir, self.config.clone(), options).expect("open")
    }

    fn unclean(&self) -> OpenOptions {
        OpenOptions {
            recovery_point: 0,
            log_start_offset: 0,
            clean_shutdown: false,
        }
    }

    fn clean(&self) -> OpenOptions {
        OpenOptions {
            recovery_point: self.log_end_offset,
            log_start_offset: 0,
            clean_shutdown: true,
        }
    }
}

/// `mb` MiB of 16 KiB batches from `PRODUCERS` idempotent producers, in `segment_mb` MiB segments.
fn write_recovery_log(root: &Path, mb: u64, segment_mb: u64) -> TestLog {
    let dir = root.join("recover-0");
    let config = config(segment_mb << 20);
    let (log, _) = PartitionLog::open(std_storage(), &dir, config.clone(), OpenOptions::default())
        .expect("create");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let pool: Vec<u8> = (0..(64 << 10) / 8)
        .flat_map(|_| rng.next().to_le_bytes())
        .collect();
    let timestamp = now_ms();
    let mut sequences = [0i32; PRODUCERS as usize];
    let mut written = 0u64;
    let mut batches = 0u64;
    while written < mb << 20 {
        let p = (batches % PRODUCERS as u64) as usize;
        let mut b = BatchBuilder::new(Compression::None).producer(1000 + p as i64, 0, sequences[p]);
        for r in 0..RECORDS_PER_BATCH {
            let at = (rng.next() % (pool.len() - VALUE_BYTES) as u64) as usize;
            let key = format!("key-{:08}", batches as usize * RECORDS_PER_BATCH + r);
            b.append(
                timestamp + batches as i64,
                Some(key.as_bytes()),
                Some(&pool[at..at + VALUE_BYTES]),
                &[],
            )
            .expect("record");
        }
        let mut batch = b.build().expect("batch");
        let info = log.append_as_leader(&mut batch, 0).expect("append");
        assert!(!info.duplicate);
        sequences[p] += RECORDS_PER_BATCH as i32;
        written += batch.len() as u64;
        batches += 1;
    }
    let log_end_offset = log.log_end_offset();
    log.flush(log_end_offset).expect("flush");
    log.close().expect("close");
    drop(log);
    let (logs, bytes) = log_files(&dir);
    TestLog {
        dir,
        config,
        logs,
        bytes,
        batches,
        log_end_offset,
    }
}

/// Grows the log in `dir` (closed cleanly after `written` batches, or new when 0) to `segments` segments of
/// 4 KiB, three ~1.1 KiB batches each (one record, no producer id), and closes it cleanly.
fn grow_many_segments(dir: &Path, written: u64, segments: u64) -> TestLog {
    let config = config(4096);
    // One record per batch: the log end offset is the number of batches.
    let options = if written == 0 {
        OpenOptions::default()
    } else {
        OpenOptions {
            recovery_point: written as i64,
            log_start_offset: 0,
            clean_shutdown: true,
        }
    };
    let (log, _) = PartitionLog::open(std_storage(), dir, config.clone(), options).expect("open");
    let value = vec![0x5au8; 1000];
    let timestamp = now_ms();
    let batches = segments * 3;
    for _ in written..batches {
        let mut b = BatchBuilder::new(Compression::None);
        b.append(timestamp, Some(b"key"), Some(&value), &[])
            .expect("record");
        let mut batch = b.build().expect("batch");
        log.append_as_leader(&mut batch, 0).expect("append");
    }
    let log_end_offset = log.log_end_offset();
    assert_eq!(log_end_offset, batches as i64);
    log.close().expect("close");
    drop(log);
    let (logs, bytes) = log_files(dir);
    assert_eq!(logs.len() as u64, segments);
    TestLog {
        dir: dir.to_owned(),
        config,
        logs,
        bytes,
        batches,
        log_end_offset,
    }
}

/// The soft limit on open files (`/proc/self/limits`), if known.
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// A `PartitionLog` holds three descriptors per segment (`.log`, `.index`, `.timeindex`: a clean open
/// sanity-checks, hence loads, every segment's indexes): the segment counts of `KLOG_BENCH_SEGMENTS` that
/// fit the limit, plus the largest multiple of 500 that does if some do not.
fn segment_counts(requested: &[u64]) -> Vec<u64> {
    const PER_SEGMENT: u64 = 3;
    const SPARE: u64 = 200;
    let fit = open_files_limit().map_or(u64::MAX, |l| l.saturating_sub(SPARE) / PER_SEGMENT);
    let mut counts: Vec<u64> = requested.iter().copied().filter(|&n| n <= fit).collect();
    if counts.len() < requested.len() {
        eprintln!(
            "open_clean: {:?} segments need {PER_SEGMENT} file descriptors each, over the limit of {:?} \
             open files: measuring up to {} segments instead",
            requested.iter().filter(|&&n| n > fit).collect::<Vec<_>>(),
            open_files_limit(),
            fit / 500 * 500,
        );
        counts.push(fit / 500 * 500);
    }
    counts.sort_unstable();
    counts.dedup();
    counts
}

/// Wall and thread CPU time of one call.
#[derive(Clone, Copy)]
struct Times {
    wall: Duration,
    cpu: Duration,
}

fn timed<R>(f: impl FnOnce() -> R) -> (Times, R) {
    let (w, c) = (Instant::now(), thread_cpu_time());
    let r = f();
    let wall = w.elapsed();
    let cpu = thread_cpu_time()
        .zip(c)
        .map_or(wall, |(end, start)| end - start);
    (Times { wall, cpu }, r)
}

/// Opens `log` after an unclean shutdown and checks that everything was rescanned and replayed; the time
/// of the open only (the check and the close that follows, which restores the directory, are not timed).
fn recover(log: &TestLog) -> (Times, OpenReport) {
    let (times, (opened, report)) = timed(|| log.open(log.unclean()));
    check_recovery(log, &report);
    opened.close().expect("close");
    (times, report)
}

fn check_recovery(log: &TestLog, report: &OpenReport) {
    assert_eq!(
        report.recovered_segments.len(),
        log.logs.len(),
        "{report:?}"
    );
    let validated: u64 = report
        .recovered_segments
        .iter()
        .map(|(_, r)| r.valid_bytes)
        .sum();
    assert_eq!(validated, log.bytes);
    assert!(report
        .recovered_segments
        .iter()
        .all(|(_, r)| r.truncated_bytes == 0 && r.corruption.is_none()));
    assert!(report.deleted_segments.is_empty());
    assert_eq!(report.snapshot_loaded, None);
    assert_eq!(report.batches_replayed, log.batches);
}

fn read_all(logs: &[PathBuf], buf: &mut [u8]) -> u64 {
    let mut total = 0u64;
    for path in logs {
        let mut file = File::open(path).expect("open");
        loop {
            let n = file.read(buf).expect("read");
            if n == 0 {
                break;
            }
            black_box(&buf[..n]);
            total += n as u64;
        }
    }
    total
}

/// The floor of recovery as `PartitionLog` does it (informational): each `.log` read whole into a fresh
/// zeroed buffer and every batch's CRC-32C checked (`LogSegment::recover`), then read whole again into a
/// fresh buffer and walked without CRC (the producer-state replay). Returns the batches walked.
fn two_pass_fresh(logs: &[PathBuf]) -> u64 {
    let mut batches = 0;
    for crc in [true, false] {
        for path in logs {
            let file = File::open(path).expect("open");
            let mut buf = vec![0u8; file.metadata().expect("fstat").len() as usize];
            file.read_exact_at(&mut buf, 0).expect("read");
            let walk = if crc {
                Batches::new(&buf)
            } else {
                Batches::new(&buf).without_crc()
            };
            for batch in walk {
                black_box(batch.expect("valid batch").last_offset());
                batches += 1;
            }
        }
    }
    batches
}

/// One pass per `.log` into one reused, pre-faulted buffer, every batch's CRC-32C checked
/// (informational): what a single-pass recovery that reuses its buffer would start from.
fn one_pass_reused(logs: &[PathBuf], buf: &mut [u8]) -> u64 {
    let mut batches = 0;
    for path in logs {
        let file = File::open(path).expect("open");
        let len = file.metadata().expect("fstat").len() as usize;
        file.read_exact_at(&mut buf[..len], 0).expect("read");
        for batch in Batches::new(&buf[..len]) {
            black_box(batch.expect("valid batch").last_offset());
            batches += 1;
        }
    }
    batches
}

/// One pass per `.log` in 1 MiB `read`s into one reused buffer (cache-resident), every batch's CRC-32C
/// checked as soon as it is complete; a batch cut by a read boundary is moved to the front and finished
/// by the next read (informational): a streaming recovery's floor. `buf` must hold a batch plus 1 MiB.
fn stream_1mib(logs: &[PathBuf], buf: &mut [u8]) -> u64 {
    let mut batches = 0;
    for path in logs {
        let mut file = File::open(path).expect("open");
        let mut filled = 0;
        loop {
            let end = (filled + READ_BUFFER).min(buf.len());
            let n = file.read(&mut buf[filled..end]).expect("read");
            filled += n;
            let mut consumed = 0;
            for batch in Batches::new(&buf[..filled]) {
                let batch = batch.expect("valid batch");
                black_box(batch.last_offset());
                consumed += batch.size_in_bytes();
                batches += 1;
            }
            buf.copy_within(consumed..filled, 0);
            filled -= consumed;
            if n == 0 {
                assert_eq!(filled, 0, "a partial batch at the end of {path:?}");
                break;
            }
        }
    }
    batches
}

fn list_open_stat(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).expect("list") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "log") {
            let file = File::open(&path).expect("open");
            total += file.metadata().expect("fstat").len();
        }
    }
    total
}

// ---------------------------------------------------------------------------------------------------
// Paired ratios

struct Paired {
    /// 0: skip; 1: run once (test mode).
    rounds: usize,
    args: CriterionArgs,
}

impl Paired {
    fn from_args() -> Self {
        let args = CriterionArgs::from_env();
        Paired {
            rounds: args.paired_rounds(7, 3),
            args,
        }
    }

    fn selected(&self, id: &str) -> bool {
        self.args.selected(self.rounds, id)
    }

    /// Times `a` and `b` (each returns the times to count: its own, or of its timed part) back to back,
    /// alternating which goes first; prints the median over rounds of time(a) / time(b) by wall and by
    /// thread CPU time, and each side's median throughput in MB/s of `bytes`.
    fn compare(
        &self,
        id: &str,
        bytes: u64,
        (a_name, mut a): (&str, impl FnMut() -> Times),
        (b_name, mut b): (&str, impl FnMut() -> Times),
    ) {
        let id = format!("paired/{id}/{a_name}_vs_{b_name}");
        if !self.selected(&id) {
            return;
        }
        let time = |f: &mut dyn FnMut() -> Times| {
            let t = f();
            (t.wall.as_secs_f64(), t.cpu.as_secs_f64())
        };
        time(&mut a);
        time(&mut b);
        let samples: Vec<_> = alternating(self.rounds, || time(&mut a), || time(&mut b))
            .into_iter()
            .map(|(x, y)| (x.0, y.0, x.1, y.1))
            .collect();
        if self.rounds == 1 {
            eprintln!("{id}: ran once (test mode, not a measurement)");
            return;
        }
        let wall = quartiles(samples.iter().map(|s| s.0 / s.1).collect());
        let cpu = quartiles(samples.iter().map(|s| s.2 / s.3).collect());
        let mb = bytes as f64 / 1e6;
        let median = |v: Vec<f64>| quartiles(v).1;
        let (wa, wb) = (
            median(samples.iter().map(|s| s.0).collect()),
            median(samples.iter().map(|s| s.1).collect()),
        );
        eprintln!(
            "{id}: time ratio a/b by wall {:.3} (IQR {:.3}-{:.3}), by cpu {:.3} (IQR {:.3}-{:.3}); \
             throughput a/b by wall {:.3}; {} rounds; wall medians {a_name} {:.1} ms ({:.0} MB/s), \
             {b_name} {:.1} ms ({:.0} MB/s)",
            wall.1,
            wall.0,
            wall.2,
            cpu.1,
            cpu.0,
            cpu.2,
            1.0 / wall.1,
            self.rounds,
            wa * 1e3,
            mb / wa,
            wb * 1e3,
            mb / wb,
        );
    }
}

// ---------------------------------------------------------------------------------------------------
// Benchmarks

fn bench_unclean(c: &mut Criterion, paired: &Paired, log: &TestLog) {
    let (_, report) = recover(log);
    eprintln!(
        "recovery_unclean: {} bytes in {} segments, {} batches, log end offset {}; the open rescanned {} \
         segments and replayed {} batches",
        log.bytes,
        log.logs.len(),
        log.batches,
        log.log_end_offset,
        report.recovered_segments.len(),
        report.batches_replayed,
    );
    let mut buf = vec![0u8; READ_BUFFER];
    let mut g = c.benchmark_group("recovery_unclean");
    g.throughput(Throughput::Bytes(log.bytes));
    g.sample_size(10);
    g.bench_function("klog_recover", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| recover(log).0.wall).sum())
    });
    g.bench_function("read_1mib", |b| {
        b.iter(|| assert_eq!(read_all(&log.logs, &mut buf), log.bytes))
    });
    let largest = log
        .logs
        .iter()
        .map(|p| std::fs::metadata(p).expect("stat").len())
        .max()
        .unwrap_or(0);
    let mut reused = vec![1u8; largest as usize];
    g.bench_function("two_pass_fresh_crc", |b| {
        b.iter(|| assert_eq!(two_pass_fresh(&log.logs), 2 * log.batches))
    });
    g.bench_function("one_pass_reused_crc", |b| {
        b.iter(|| assert_eq!(one_pass_reused(&log.logs, &mut reused), log.batches))
    });
    let mut stream = vec![1u8; 2 * READ_BUFFER];
    g.bench_function("stream_1mib_crc", |b| {
        b.iter(|| assert_eq!(stream_1mib(&log.logs, &mut stream), log.batches))
    });
    g.finish();
    paired.compare(
        "recovery_unclean",
        log.bytes,
        ("klog_recover", || recover(log).0),
        ("read_1mib", || {
            let (times, total) = timed(|| read_all(&log.logs, &mut buf));
            assert_eq!(total, log.bytes);
            times
        }),
    );
    paired.compare(
        "recovery_unclean",
        log.bytes,
        ("two_pass_fresh_crc", || {
            let (times, batches) = timed(|| two_pass_fresh(&log.logs));
            assert_eq!(batches, 2 * log.batches);
            times
        }),
        ("read_1mib", || {
            let (times, total) = timed(|| read_all(&log.logs, &mut buf));
            assert_eq!(total, log.bytes);
            times
        }),
    );
    paired.compare(
        "recovery_unclean",
        log.bytes,
        ("one_pass_reused_crc", || {
            let (times, batches) = timed(|| one_pass_reused(&log.logs, &mut reused));
            assert_eq!(batches, log.batches);
            times
        }),
        ("read_1mib", || {
            let (times, total) = timed(|| read_all(&log.logs, &mut buf));
            assert_eq!(total, log.bytes);
            times
        }),
    );
    paired.compare(
        "recovery_unclean",
        log.bytes,
        ("stream_1mib_crc", || {
            let (times, batches) = timed(|| stream_1mib(&log.logs, &mut stream));
            assert_eq!(batches, log.batches);
            times
        }),
        ("read_1mib", || {
            let (times, total) = timed(|| read_all(&log.logs, &mut buf));
            assert_eq!(total, log.bytes);
            times
        }),
    );
}

fn bench_clean(c: &mut Criterion, paired: &Paired, log: &TestLog) {
    let segments = log.logs.len();
    let open = || {
        let (times, (opened, report)) = timed(|| log.open(log.clean()));
        assert_eq!(report.segments, segments);
        assert!(report.recovered_segments.is_empty() && report.rebuilt_indexes.is_empty());
        assert_eq!(opened.log_end_offset(), log.log_end_offset);
        opened.close().expect("close");
        times
    };
    eprintln!(
        "open_clean: {segments} segments, {} bytes, {} batches",
        log.bytes, log.batches
    );
    let mut g = c.benchmark_group("open_clean");
    g.throughput(Throughput::Elements(segments as u64));
    g.sample_size(10);
    g.bench_function(BenchmarkId::new("klog_open", segments), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| open().wall).sum())
    });
    g.bench_function(BenchmarkId::new("list_open_stat", segments), |b| {
        b.iter(|| assert_eq!(list_open_stat(&log.dir), log.bytes))
    });
    g.finish();
    paired.compare(
        &format!("open_clean/{segments}"),
        log.bytes,
        ("klog_open", open),
        ("list_open_stat", || {
            let (times, total) = timed(|| list_open_stat(&log.dir));
            assert_eq!(total, log.bytes);
            times
        }),
    );
}

fn bench_recovery(c: &mut Criterion) {
    let paired = Paired::from_args();
    let listing = std::env::args().any(|a| a == "--list");
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-recovery");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("scratch dir");
    let (mb, segment_mb, segments) = if RELEASE {
        (
            env_u64("KLOG_BENCH_RECOVER_MB", 256),
            env_u64("KLOG_BENCH_RECOVER_SEGMENT_MB", 64),
            std::env::var("KLOG_BENCH_SEGMENTS").unwrap_or_else(|_| "2500,5000,10000".into()),
        )
    } else {
        (4, 1, "200".into())
    };
    let segments: Vec<u64> = segments
        .split(',')
        .map(|n| {
            n.trim()
                .parse()
                .expect("KLOG_BENCH_SEGMENTS: comma-separated counts")
        })
        .collect();
    let wants = |group: &str| {
        !listing
            && (paired.args.filters.is_empty()
                || paired
                    .args
                    .filters
                    .iter()
                    .any(|f| group.contains(f.as_str()) || f.contains(group)))
    };
    if wants("recovery_unclean") {
        let start = Instant::now();
        let log = write_recovery_log(&root, mb, segment_mb);
        eprintln!("recovery_unclean: wrote the log in {:.1?}", start.elapsed());
        bench_unclean(c, &paired, &log);
        std::fs::remove_dir_all(&log.dir).expect("remove");
    }
    if wants("open_clean") {
        let dir = root.join("many-0");
        let mut written = 0;
        for n in segment_counts(&segments) {
            let start = Instant::now();
            let log = grow_many_segments(&dir, written, n);
            eprintln!(
                "open_clean: grew the log to {n} segments in {:.1?}",
                start.elapsed()
            );
            bench_clean(c, &paired, &log);
            written = log.batches;
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::remove_dir_all(&root);
}

fn config_criterion() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .sample_size(10)
}

criterion_group! {
    name = benches;
    config = config_criterion();
    targets = bench_recovery
}
criterion_main!(benches);
