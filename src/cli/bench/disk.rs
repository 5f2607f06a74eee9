//! The workloads that write and read a partition log: `append`, `durable`, `read`, on every backend,
//! beside plain `pwrite`/`pread`/`fdatasync` loops over the same bytes on the same file system.

use std::fs::{File, OpenOptions};
use std::hint::black_box;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use klog::log::config::LogConfig;
use klog::log::format::{BatchBuilder, Compression};
use klog::log::io::{open_backend, IoBackend, Storage};
use klog::log::partition_log::{FlushGroups, OpenOptions as LogOpenOptions, PartitionLog};
use serde_json::json;

use super::{alternate, mb_per_s, per_s, Ctx, Report, Row, Series};

pub(super) const APPEND_ROW: &str = "append_as_leader";
pub(super) const READ_COPY_ROW: &str = "read + copy out";
pub(super) const RANDOM_READ_ROW: &str = "read one batch + copy out";
pub(super) const SINGLE_ROW: &str = "append + flush, single";
pub(super) const PARTITIONS_ROW: &str = "flush of 64 partitions together";
/// The bound of io_uring's flush of the `durable/partitions` partitions in one submission.
const PARALLEL_BOUND: &str =
    "pwrite to 64 files + fdatasync of each, all in flight at once (a thread per file)";
/// Partitions of the `durable/partitions` log directory.
const PARTITIONS: usize = 64;
/// Rounds of (one batch to each partition, one flush of all) per `durable/partitions` measurement, at
/// most (fewer when `--durable-appends` is small).
const PARTITION_FLUSHES: u64 = 30;

/// Distinct batches cycled through (about 1 MiB of 16 KiB batches: stays in the CPU cache, as a broker's
/// receive buffers do).
const POOL_BYTES: usize = 1 << 20;
/// `max_bytes` of each sequential read, and the size of each baseline `pread`.
const READ_BYTES: usize = 1 << 20;
/// Each sequential read measurement reads at least this much (whole passes, at most `MAX_READ_PASSES`).
const READ_BYTES_PER_MEASUREMENT: u64 = 512 << 20;
const MAX_READ_PASSES: u64 = 64;
const DEFAULT_DURABLE_APPENDS: u64 = 2000;
/// Java's `batch.size` default.
const BATCH_BYTES: usize = 16 << 10;

/// The record shape of an append variant.
#[derive(Debug, Clone, Copy)]
pub(super) struct Shape {
    /// The report key.
    pub key: &'static str,
    pub value_bytes: usize,
    pub records_per_batch: usize,
}

/// 1 KiB records in 16 KiB batches (the main figure), 100 B records in 16 KiB batches, one ~1 MiB record
/// per batch (1 MiB less 256 B, so that the batch fits the default `max.message.bytes`, 1,048,588).
pub(super) const SHAPES: [Shape; 3] = [
    Shape {
        key: "append",
        value_bytes: 1024,
        records_per_batch: 15,
    },
    Shape {
        key: "append/100B",
        value_bytes: 100,
        records_per_batch: 140,
    },
    Shape {
        key: "append/1MiB",
        value_bytes: (1 << 20) - 256,
        records_per_batch: 1,
    },
];

/// xorshift64*: incompressible values.
pub(super) struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let x = self.next().to_le_bytes();
            chunk.copy_from_slice(&x[..chunk.len()]);
        }
    }
}

pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// One uncompressed producer batch (no producer id) of `shape`, with timestamps `timestamp`.
pub(super) fn build_batch(
    shape: Shape,
    rng: &mut Rng,
    first_key: usize,
    timestamp: i64,
) -> anyhow::Result<Vec<u8>> {
    let mut value = vec![0u8; shape.value_bytes];
    let mut b = BatchBuilder::new(Compression::None);
    for j in 0..shape.records_per_batch {
        rng.fill(&mut value);
        let key = format!("k{:07}", first_key + j);
        b.append(timestamp, Some(key.as_bytes()), Some(&value), &[])?;
    }
    Ok(b.build()?)
}

/// About 1 MiB of distinct batches of `shape` (at least two).
pub(super) fn build_pool(shape: Shape) -> anyhow::Result<Vec<Vec<u8>>> {
    let batch = shape.value_bytes * shape.records_per_batch;
    let count = (POOL_BYTES / batch).max(2);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let now = now_ms();
    (0..count)
        .map(|i| build_batch(shape, &mut rng, i * shape.records_per_batch, now))
        .collect()
}

/// Makes a stamped batch a producer batch again (base offset 0), so it can be appended once more. The
/// base offset is outside the CRC.
pub(super) fn reset_base_offset(batch: &mut [u8]) {
    batch[..8].copy_from_slice(&0i64.to_be_bytes());
}

pub(super) fn config(segment_bytes: u64) -> anyhow::Result<LogConfig> {
    let mut c = LogConfig::default();
    c.set("segment.bytes", &segment_bytes.to_string())?;
    Ok(c)
}

fn fresh_file(path: &Path) -> anyhow::Result<File> {
    let _ = std::fs::remove_file(path);
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))
}

/// A fresh partition directory `bench-0` under the scratch dir.
fn fresh_log(
    ctx: &Ctx,
    storage: &Arc<dyn Storage>,
    segment_bytes: u64,
) -> anyhow::Result<(PartitionLog, PathBuf)> {
    let dir = ctx.scratch.join("bench-0");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let (log, _) = PartitionLog::open(
        storage.clone(),
        &dir,
        config(segment_bytes)?,
        LogOpenOptions::default(),
    )?;
    Ok((log, dir))
}

/// Syncs and closes a log outside the timed part, so its writeback does not leak into the next figure.
fn finish_log(log: PartitionLog, dir: &Path) -> anyhow::Result<()> {
    log.flush(log.log_end_offset())?;
    log.close()?;
    drop(log);
    std::fs::remove_dir_all(dir)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// append

fn pwrite_run(ctx: &Ctx, pool: &[Vec<u8>], n: u64) -> anyhow::Result<Duration> {
    let path = ctx.scratch.join("baseline.bin");
    let file = fresh_file(&path)?;
    let mut position = 0u64;
    let start = Instant::now();
    for i in 0..n as usize {
        let b = &pool[i % pool.len()];
        file.write_all_at(b, position)?;
        position += b.len() as u64;
    }
    let elapsed = start.elapsed();
    file.sync_data()?;
    drop(file);
    std::fs::remove_file(&path)?;
    Ok(elapsed)
}

fn klog_append_run(
    ctx: &Ctx,
    storage: &Arc<dyn Storage>,
    pool: &mut [Vec<u8>],
    n: u64,
) -> anyhow::Result<Duration> {
    let (log, dir) = fresh_log(ctx, storage, ctx.args.segment_bytes)?;
    let len = pool.len();
    let start = Instant::now();
    for i in 0..n as usize {
        let b = &mut pool[i % len];
        reset_base_offset(b);
        log.append_as_leader(b, 0)?;
    }
    let elapsed = start.elapsed();
    finish_log(log, &dir)?;
    Ok(elapsed)
}

pub(super) fn append(ctx: &Ctx) -> anyhow::Result<Vec<Report>> {
    SHAPES.iter().map(|&s| append_shape(ctx, s)).collect()
}

fn append_shape(ctx: &Ctx, shape: Shape) -> anyhow::Result<Report> {
    let mut pool = build_pool(shape)?;
    let pool_bytes: u64 = pool.iter().map(|b| b.len() as u64).sum();
    let avg = pool_bytes / pool.len() as u64;
    let n = ctx.args.bytes.div_ceil(avg).max(pool.len() as u64);
    let bytes: u64 = (0..n as usize)
        .map(|i| pool[i % pool.len()].len() as u64)
        .sum();
    let mut baseline = Series::default();
    let mut series: Vec<Series> = vec![Series::default(); ctx.backends.len()];
    let slots: Vec<usize> = (0..=ctx.backends.len()).collect();
    for round in 0..ctx.rounds() {
        for &slot in alternate(round, &slots) {
            if slot == 0 {
                ctx.progress
                    .say(&format!("{}: pwrite, round {}", shape.key, round + 1));
                baseline.push(mb_per_s(bytes, pwrite_run(ctx, &pool, n)?));
            } else {
                let b = &ctx.backends[slot - 1];
                ctx.progress.say(&format!(
                    "{}: klog {}, round {}",
                    shape.key,
                    b.name,
                    round + 1
                ));
                let d = klog_append_run(ctx, &b.storage, &mut pool, n)?;
                series[slot - 1].push(mb_per_s(bytes, d));
            }
        }
    }
    let mut report = Report::new(
        shape.key,
        format!(
            "{n} leader appends of {avg}-byte batches ({} x {} B records, uncompressed), {:.1} MiB, \
             no fsync, segment.bytes {}",
            shape.records_per_batch,
            shape.value_bytes,
            bytes as f64 / (1 << 20) as f64,
            ctx.args.segment_bytes
        ),
        "MB/s",
    );
    report.baseline_name = "pwrite loop (write_all_at)".into();
    report.baseline = baseline;
    report.rows = ctx
        .backends
        .iter()
        .zip(series)
        .map(|(b, s)| Row::new(APPEND_ROW, b.name, s))
        .collect();
    report.extra = json!({
        "appends": n,
        "bytes": bytes,
        "batch_bytes": avg,
        "records_per_batch": shape.records_per_batch,
        "value_bytes": shape.value_bytes,
    });
    report.add_uring_vs_std(&[APPEND_ROW]);
    // Kafka's UnifiedLog appends the same batches (not the 1 MiB records: each JVM run costs seconds).
    if shape.key != "append/1MiB" {
        ctx.progress
            .say(&format!("{}: Kafka UnifiedLog.appendAsLeader", shape.key));
        let file = ctx.scratch.join("kafka-batches.bin");
        std::fs::write(&file, pool.concat())?;
        let segment = ctx.args.segment_bytes.min(i32::MAX as u64);
        report.kafka = ctx.kafka.run(
            "UnifiedLog.appendAsLeader",
            &[
                "append".into(),
                file.display().to_string(),
                n.to_string(),
                ctx.rounds().to_string(),
                "2".into(),
                ctx.scratch.join("kafka").display().to_string(),
                segment.to_string(),
            ],
        );
        let _ = std::fs::remove_file(&file);
        let _ = std::fs::remove_dir_all(ctx.scratch.join("kafka"));
    }
    Ok(report)
}

// ---------------------------------------------------------------------------------------------------
// durable

fn durable_appends(ctx: &Ctx, batch_bytes: usize) -> u64 {
    let max_threads = ctx.args.threads.iter().copied().max().unwrap_or(1) as u64;
    ctx.args.durable_appends.unwrap_or_else(|| {
        (ctx.args.bytes.div_ceil(batch_bytes as u64) / 4)
            .min(DEFAULT_DURABLE_APPENDS)
            .max(max_threads)
    })
}

/// pwrite + fdatasync of one batch, `n` times; also returns each fdatasync's latency.
fn pwrite_sync_run(
    ctx: &Ctx,
    batch: &[u8],
    n: u64,
    latencies: &mut Vec<f64>,
) -> anyhow::Result<Duration> {
    let path = ctx.scratch.join("baseline.bin");
    let file = fresh_file(&path)?;
    let mut position = 0u64;
    let start = Instant::now();
    for _ in 0..n {
        file.write_all_at(batch, position)?;
        let t = Instant::now();
        file.sync_data()?;
        latencies.push(t.elapsed().as_secs_f64() * 1e6);
        position += batch.len() as u64;
    }
    let elapsed = start.elapsed();
    drop(file);
    std::fs::remove_file(&path)?;
    Ok(elapsed)
}

/// The bound of a group commit of `threads` appenders: the same appends written by one thread, `threads`
/// batches (the appenders' batches) per `fdatasync`. An appender waits for its flush before its next
/// append, so one sync can cover at most one append per appender: this is grouping at its best.
fn pwrite_group_sync_run(
    ctx: &Ctx,
    pool: &[Vec<u8>],
    threads: usize,
    n: u64,
) -> anyhow::Result<(Duration, u64)> {
    let groups = n.div_ceil(threads as u64);
    let path = ctx.scratch.join("baseline.bin");
    let file = fresh_file(&path)?;
    let mut position = 0u64;
    let start = Instant::now();
    for _ in 0..groups {
        for t in 0..threads {
            let batch = &pool[t % pool.len()];
            file.write_all_at(batch, position)?;
            position += batch.len() as u64;
        }
        file.sync_data()?;
    }
    let elapsed = start.elapsed();
    drop(file);
    std::fs::remove_file(&path)?;
    Ok((elapsed, groups * threads as u64))
}

fn group_bound_name(threads: usize) -> String {
    if threads == 1 {
        "pwrite + fdatasync loop".into()
    } else {
        format!("pwrite of {threads} batches + one fdatasync, loop")
    }
}

fn durable_single_run(
    ctx: &Ctx,
    storage: &Arc<dyn Storage>,
    batch: &mut [u8],
    n: u64,
) -> anyhow::Result<Duration> {
    let (log, dir) = fresh_log(ctx, storage, ctx.args.segment_bytes)?;
    let start = Instant::now();
    for _ in 0..n {
        reset_base_offset(batch);
        let info = log.append_as_leader(batch, 0)?;
        log.flush(info.last_offset + 1)?;
    }
    let elapsed = start.elapsed();
    finish_log(log, &dir)?;
    Ok(elapsed)
}

/// `threads` appenders sharing one log, each appending then flushing up to its own last offset; returns
/// the time from the common start until the last finished, the appends made, and how the log's flushes
/// grouped them (flushes run, `flush` calls they covered).
fn durable_group_run(
    ctx: &Ctx,
    storage: &Arc<dyn Storage>,
    pool: &[Vec<u8>],
    threads: usize,
    n: u64,
) -> anyhow::Result<(Duration, u64, FlushGroups)> {
    let (log, dir) = fresh_log(ctx, storage, ctx.args.segment_bytes)?;
    let log = Arc::new(log);
    let per_thread = n.div_ceil(threads as u64);
    let barrier = Barrier::new(threads + 1);
    let elapsed = std::thread::scope(|s| -> anyhow::Result<Duration> {
        let mut handles = Vec::new();
        for t in 0..threads {
            let log = &log;
            let barrier = &barrier;
            let mut batch = pool[t % pool.len()].clone();
            handles.push(s.spawn(move || -> anyhow::Result<()> {
                barrier.wait();
                for _ in 0..per_thread {
                    reset_base_offset(&mut batch);
                    let info = log.append_as_leader(&mut batch, 0)?;
                    log.flush(info.last_offset + 1)?;
                }
                Ok(())
            }));
        }
        barrier.wait();
        let start = Instant::now();
        let mut result = Ok(());
        for h in handles {
            let r = h
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("an appender thread panicked")));
            if result.is_ok() {
                result = r;
            }
        }
        result.map(|()| start.elapsed())
    })?;
    let log = Arc::into_inner(log).expect("the appender threads have ended");
    let groups = log.flush_groups();
    finish_log(log, &dir)?;
    Ok((elapsed, per_thread * threads as u64, groups))
}

fn group_name(threads: usize) -> String {
    format!("group commit, {threads} threads")
}

fn quantile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

pub(super) fn durable(ctx: &Ctx) -> anyhow::Result<Vec<Report>> {
    let pool = build_pool(SHAPES[0])?;
    let batch_bytes = pool[0].len();
    let n = durable_appends(ctx, batch_bytes);
    let threads = &ctx.args.threads;
    let mut batch = pool[0].clone();
    let mut baseline = Series::default();
    let mut latencies = Vec::new();
    let nb = ctx.backends.len();
    let per_backend = 1 + threads.len();
    // Per backend: the single appender, then each group.
    let mut series: Vec<Series> = vec![Series::default(); nb * per_backend];
    // After klog's slots, the bound of each group size.
    let klog_slots = nb * per_backend;
    let mut bounds: Vec<Series> = vec![Series::default(); threads.len()];
    let slots: Vec<usize> = (0..=klog_slots + threads.len()).collect();
    let mut group_appends = vec![0u64; threads.len()];
    // Per klog slot: flushes run and the callers they covered, summed over the rounds.
    let mut grouped = vec![FlushGroups::default(); klog_slots];
    for round in 0..ctx.rounds() {
        for &slot in alternate(round, &slots) {
            if slot > klog_slots {
                let j = slot - klog_slots - 1;
                let t = threads[j];
                ctx.progress
                    .say(&format!("{}, round {}", group_bound_name(t), round + 1));
                let (d, appends) = pwrite_group_sync_run(ctx, &pool, t, n)?;
                bounds[j].push(per_s(appends, d));
                continue;
            }
            if slot == 0 {
                ctx.progress
                    .say(&format!("pwrite + fdatasync, round {}", round + 1));
                let d = pwrite_sync_run(ctx, &pool[0], n, &mut latencies)?;
                baseline.push(per_s(n, d));
                continue;
            }
            let (i, j) = ((slot - 1) / per_backend, (slot - 1) % per_backend);
            let b = &ctx.backends[i];
            if j == 0 {
                ctx.progress
                    .say(&format!("klog {} single, round {}", b.name, round + 1));
                let d = durable_single_run(ctx, &b.storage, &mut batch, n)?;
                series[slot - 1].push(per_s(n, d));
            } else {
                let t = threads[j - 1];
                ctx.progress.say(&format!(
                    "klog {} {}, round {}",
                    b.name,
                    group_name(t),
                    round + 1
                ));
                let (d, appends, groups) = durable_group_run(ctx, &b.storage, &pool, t, n)?;
                group_appends[j - 1] = appends;
                grouped[slot - 1].flushes += groups.flushes;
                grouped[slot - 1].callers += groups.callers;
                series[slot - 1].push(per_s(appends, d));
            }
        }
    }
    let mut report = Report::new(
        "durable",
        format!(
            "{n} appends of one {batch_bytes}-byte batch, each followed by flush(last offset + 1); \
             group commit: {threads:?} threads share one log, each group beside its bound (the same \
             appends from one thread, one fdatasync per as many batches as appenders)"
        ),
        "appends/s",
    );
    report.baseline_name = "pwrite + fdatasync loop".into();
    report.baseline = baseline;
    for (i, b) in ctx.backends.iter().enumerate() {
        let single = &series[i * per_backend];
        report
            .rows
            .push(Row::new(SINGLE_ROW, b.name, single.clone()));
        for (j, &t) in threads.iter().enumerate() {
            let group = &series[i * per_backend + 1 + j];
            report.comparisons.push((
                format!("group commit of {t} / single, {}", b.name),
                super::ratios(group, single),
            ));
            report.rows.push(
                Row::new(group_name(t), b.name, group.clone())
                    .bounded(group_bound_name(t), bounds[j].clone()),
            );
        }
    }
    let mut names = vec![SINGLE_ROW.to_owned()];
    names.extend(threads.iter().map(|&t| group_name(t)));
    report.add_uring_vs_std(&names.iter().map(String::as_str).collect::<Vec<_>>());
    latencies.sort_by(f64::total_cmp);
    // How many appends one flush (one fdatasync of the segment) covered, per backend and group size:
    // at best the group size, since an appender waits for its flush before its next append.
    let mut per_flush = serde_json::Map::new();
    for (i, b) in ctx.backends.iter().enumerate() {
        let mut by_threads = serde_json::Map::new();
        for (j, &t) in threads.iter().enumerate() {
            let g = grouped[i * per_backend + 1 + j];
            by_threads.insert(
                t.to_string(),
                json!(g.callers as f64 / g.flushes.max(1) as f64),
            );
        }
        per_flush.insert(b.name.to_owned(), by_threads.into());
    }
    report.extra = json!({
        "appends": n,
        "group_appends": group_appends,
        "appends_per_flush": per_flush,
        "threads": threads,
        "fdatasync_us": {
            "p50": quantile(&latencies, 0.5),
            "p99": quantile(&latencies, 0.99),
            "mean": latencies.iter().sum::<f64>() / latencies.len().max(1) as f64,
            "samples": latencies.len(),
        },
        "o_direct": direct_io(ctx),
    });
    report.title += &format!("; uring's segments: {}", direct_io_note(ctx));
    super::kafka::durable(ctx, &mut report, &pool[0], n, group_name)?;
    let partitions = partitions(ctx, &pool[0])?;
    Ok(vec![report, partitions])
}

/// Whether the uring backend's direct write path gets `O_DIRECT` on the scratch file system (tmpfs
/// refuses it; the path then writes the same chunks buffered, and the figures say so).
fn direct_io(ctx: &Ctx) -> Option<bool> {
    if !ctx.backends.iter().any(|b| b.name == "uring") {
        return None;
    }
    klog::log::io::direct_io_supported(&ctx.scratch).ok()
}

fn direct_io_note(ctx: &Ctx) -> &'static str {
    match direct_io(ctx) {
        Some(true) => "O_DIRECT",
        Some(false) => {
            "O_DIRECT REFUSED by this file system: buffered chunks, not the O_DIRECT path"
        }
        None => "uring not measured",
    }
}

/// The baseline of a flush of many partitions: one batch written to each of `PARTITIONS` files, then
/// an fdatasync of each, one after the other (what a broker's flush of its partitions costs with
/// pwrite + fdatasync).
fn pwrite_partitions_run(ctx: &Ctx, batch: &[u8], rounds: u64) -> anyhow::Result<Duration> {
    let dir = ctx.scratch.join("baseline-partitions");
    std::fs::create_dir_all(&dir)?;
    let files: Vec<File> = (0..PARTITIONS)
        .map(|p| fresh_file(&dir.join(format!("{p}.bin"))))
        .collect::<anyhow::Result<_>>()?;
    let start = Instant::now();
    for r in 0..rounds {
        for f in &files {
            f.write_all_at(batch, r * batch.len() as u64)?;
        }
        for f in &files {
            f.sync_data()?;
        }
    }
    let elapsed = start.elapsed();
    drop(files);
    std::fs::remove_dir_all(&dir)?;
    Ok(elapsed)
}

/// The bound of the flush of many partitions in one submission: one batch written to each of
/// `PARTITIONS` files and every file's fdatasync in flight at once (a thread per file, a barrier per
/// round), the cheapest way std can have the device flush them together. The sequential baseline bounds
/// only a flush that syncs one file after another (std's); io_uring's one submission can beat it.
fn pwrite_partitions_parallel_run(
    ctx: &Ctx,
    batch: &[u8],
    rounds: u64,
) -> anyhow::Result<Duration> {
    let dir = ctx.scratch.join("baseline-partitions-parallel");
    std::fs::create_dir_all(&dir)?;
    let files: Vec<File> = (0..PARTITIONS)
        .map(|p| fresh_file(&dir.join(format!("{p}.bin"))))
        .collect::<anyhow::Result<_>>()?;
    let start_line = std::sync::Barrier::new(PARTITIONS + 1);
    let round_line = std::sync::Barrier::new(PARTITIONS);
    let elapsed = std::thread::scope(|scope| -> anyhow::Result<Duration> {
        let handles: Vec<_> = files
            .iter()
            .map(|f| {
                let (start_line, round_line) = (&start_line, &round_line);
                scope.spawn(move || -> std::io::Result<()> {
                    start_line.wait();
                    for r in 0..rounds {
                        let written = f
                            .write_all_at(batch, r * batch.len() as u64)
                            .and_then(|()| f.sync_data());
                        // Every thread reaches each round's line, failed or not, so none waits forever.
                        round_line.wait();
                        written?;
                    }
                    Ok(())
                })
            })
            .collect();
        start_line.wait();
        let start = Instant::now();
        for h in handles {
            h.join()
                .map_err(|_| anyhow::anyhow!("a flushing thread panicked"))??;
        }
        Ok(start.elapsed())
    })?;
    drop(files);
    std::fs::remove_dir_all(&dir)?;
    Ok(elapsed)
}

/// `PARTITIONS` partitions of one log directory: each round appends one batch to every partition and
/// flushes them all with `LogDir::flush_partitions` (io_uring: one submission; std: one flush after
/// another).
fn partitions_run(
    ctx: &Ctx,
    storage: &Arc<dyn Storage>,
    batch: &[u8],
    rounds: u64,
) -> anyhow::Result<Duration> {
    let root = ctx.scratch.join("partitions");
    if root.exists() {
        std::fs::remove_dir_all(&root)?;
    }
    let mut log_dir = klog::log::log_dir::LogDir::open(storage.clone(), &root)?;
    let logs: Vec<PartitionLog> = (0..PARTITIONS)
        .map(|p| {
            log_dir
                .open_partition(&format!("bench-{p}"), config(ctx.args.segment_bytes)?)
                .map(|(l, _)| l)
                .map_err(anyhow::Error::from)
        })
        .collect::<anyhow::Result<_>>()?;
    let refs: Vec<&PartitionLog> = logs.iter().collect();
    let mut batch = batch.to_vec();
    let start = Instant::now();
    for _ in 0..rounds {
        for log in &logs {
            reset_base_offset(&mut batch);
            log.append_as_leader(&mut batch, 0)?;
        }
        log_dir.flush_partitions(&refs)?;
    }
    let elapsed = start.elapsed();
    drop(refs);
    for log in logs {
        log_dir.close_partition(log)?;
    }
    log_dir.close()?;
    std::fs::remove_dir_all(&root)?;
    Ok(elapsed)
}

/// `durable/partitions`: many partitions flushed together, beside pwrite + fdatasync of as many files.
fn partitions(ctx: &Ctx, batch: &[u8]) -> anyhow::Result<Report> {
    // As many appends as the durable workload makes, spread over the partitions (at least one round).
    let rounds =
        (durable_appends(ctx, batch.len()) / PARTITIONS as u64).clamp(1, PARTITION_FLUSHES);
    let flushes = rounds * PARTITIONS as u64;
    let mut baseline = Series::default();
    let mut parallel = Series::default();
    let mut series = vec![Series::default(); ctx.backends.len()];
    let nb = ctx.backends.len();
    let slots: Vec<usize> = (0..=nb + 1).collect();
    for round in 0..ctx.rounds() {
        for &slot in alternate(round, &slots) {
            if slot == 0 {
                ctx.progress.say(&format!(
                    "pwrite + fdatasync of {PARTITIONS} files, round {}",
                    round + 1
                ));
                baseline.push(per_s(flushes, pwrite_partitions_run(ctx, batch, rounds)?));
                continue;
            }
            if slot == nb + 1 {
                if ctx.backends.iter().any(|b| b.name == "uring") {
                    ctx.progress.say(&format!(
                        "pwrite + fdatasync of {PARTITIONS} files all in flight, round {}",
                        round + 1
                    ));
                    let d = pwrite_partitions_parallel_run(ctx, batch, rounds)?;
                    parallel.push(per_s(flushes, d));
                }
                continue;
            }
            let b = &ctx.backends[slot - 1];
            ctx.progress.say(&format!(
                "klog {} flush of {PARTITIONS} partitions, round {}",
                b.name,
                round + 1
            ));
            let d = partitions_run(ctx, &b.storage, batch, rounds)?;
            series[slot - 1].push(per_s(flushes, d));
        }
    }
    let mut report = Report::new(
        "durable/partitions",
        format!(
            "{rounds} rounds of one {}-byte batch appended to each of {PARTITIONS} partitions of a log \
             directory, then one LogDir::flush_partitions of all of them (io_uring: every write in one \
             submission; std: one flush after another); uring's segments: {}",
            batch.len(),
            direct_io_note(ctx)
        ),
        "partition flushes/s",
    );
    report.baseline_name = format!("pwrite to {PARTITIONS} files + fdatasync of each");
    report.baseline = baseline;
    for (b, s) in ctx.backends.iter().zip(series) {
        let row = Row::new(PARTITIONS_ROW, b.name, s);
        // std flushes one partition after another, which the sequential loop bounds; io_uring submits
        // them together, which only every fdatasync in flight at once bounds.
        report.rows.push(match b.name {
            "uring" => row.bounded(PARALLEL_BOUND, parallel.clone()),
            _ => row,
        });
    }
    report.add_uring_vs_std(&[PARTITIONS_ROW]);
    report.extra =
        json!({ "partitions": PARTITIONS, "rounds": rounds, "o_direct": direct_io(ctx) });
    Ok(report)
}

// ---------------------------------------------------------------------------------------------------
// read

fn read_segment_bytes(ctx: &Ctx, batch_bytes: usize) -> u64 {
    ctx.args.read_segment_bytes.unwrap_or_else(|| {
        (64u64 << 20)
            .min(ctx.args.bytes / 4)
            .max(4 * batch_bytes as u64)
    })
}

/// The log `read` reads (std backend): `--bytes` of 16 KiB batches whose timestamps grow by 1 ms per
/// batch from `first_timestamp`, closed cleanly.
struct ReadLog {
    dir: PathBuf,
    logs: Vec<PathBuf>,
    /// (file index, position, size) of every batch, for the random pread baseline.
    batches: Vec<(usize, u64, usize)>,
    log_end_offset: i64,
    log_bytes: u64,
    first_timestamp: i64,
    segment_bytes: u64,
}

fn write_read_log(ctx: &Ctx, dir: &Path) -> anyhow::Result<ReadLog> {
    let shape = SHAPES[0];
    let mut rng = Rng(0x5851_f42d_4c95_7f2d);
    let probe = build_batch(shape, &mut rng, 0, 0)?;
    let n = ctx.args.bytes.div_ceil(probe.len() as u64).max(4);
    let segment_bytes = read_segment_bytes(ctx, probe.len());
    let (log, _) = PartitionLog::open(
        open_backend(IoBackend::Std)?,
        dir,
        config(segment_bytes)?,
        LogOpenOptions::default(),
    )?;
    let first_timestamp = now_ms() - n as i64;
    for i in 0..n as usize {
        let mut b = build_batch(
            shape,
            &mut rng,
            i * shape.records_per_batch,
            first_timestamp + i as i64,
        )?;
        log.append_as_leader(&mut b, 0)?;
    }
    let leo = log.log_end_offset();
    log.flush(leo)?;
    log.close()?;
    drop(log);
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    logs.retain(|p| p.extension().is_some_and(|e| e == "log"));
    logs.sort();
    let mut batches = Vec::new();
    let mut log_bytes = 0;
    for (i, path) in logs.iter().enumerate() {
        let data = std::fs::read(path)?;
        log_bytes += data.len() as u64;
        for b in klog::log::format::Batches::new(&data).without_crc() {
            let b = b?;
            batches.push((i, b.position(), b.size_in_bytes()));
        }
    }
    Ok(ReadLog {
        dir: dir.to_owned(),
        logs,
        batches,
        log_end_offset: leo,
        log_bytes,
        first_timestamp,
        segment_bytes,
    })
}

pub(super) fn pread_pass(logs: &[PathBuf], buf: &mut [u8]) -> anyhow::Result<u64> {
    let mut total = 0u64;
    for path in logs {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let mut position = 0u64;
        loop {
            let n = file.read_at(buf, position)?;
            if n == 0 {
                break;
            }
            black_box(&buf[..n]);
            position += n as u64;
        }
        total += position;
    }
    Ok(total)
}

/// A read-only shared map of a whole file: the mechanism klog reads sealed segments with.
pub(super) struct Map {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Map {
    pub(super) fn open(path: &Path) -> anyhow::Result<Map> {
        use std::os::fd::AsRawFd;
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let len = usize::try_from(file.metadata()?.len())?;
        if len == 0 {
            bail!("{} is empty", path.display());
        }
        // SAFETY: a fresh read-only shared mapping of an open file of `len` bytes; the file is not
        // truncated while mapped (the bench owns it), and the fd may close once mapped.
        #[allow(unsafe_code)]
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("mapping {}", path.display()));
        }
        Ok(Map { ptr, len })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes until `drop` unmaps them.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts(self.ptr as *const u8, self.len)
        }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `open`, once.
        #[allow(unsafe_code)]
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}

/// The bound of `read + copy out`: every byte of the mapped `.log` files copied out in `READ_BYTES`
/// chunks (the files mapped once, as klog keeps its maps of sealed segments).
pub(super) fn mmap_copy_pass(maps: &[Map], buf: &mut Vec<u8>) -> u64 {
    let mut total = 0u64;
    for map in maps {
        for chunk in map.bytes().chunks(READ_BYTES) {
            copy_out(chunk, buf);
            total += chunk.len() as u64;
        }
    }
    total
}

/// Reads the whole log from offset 0; with `copy`, copies every returned byte into `buf`.
fn klog_read_pass(log: &PartitionLog, copy: bool, buf: &mut Vec<u8>) -> anyhow::Result<u64> {
    let leo = log.log_end_offset();
    let mut offset = 0i64;
    let mut total = 0u64;
    while offset < leo {
        let info = log.read(offset, READ_BYTES, None, true)?;
        let bytes = info.records.as_slice();
        if bytes.is_empty() || info.next_offset <= offset {
            bail!("read at offset {offset} returned nothing before the log end {leo}");
        }
        if copy {
            copy_out(bytes, buf);
        } else {
            black_box(bytes);
        }
        total += bytes.len() as u64;
        offset = info.next_offset;
    }
    Ok(total)
}

fn copy_out(bytes: &[u8], buf: &mut Vec<u8>) {
    if buf.len() < bytes.len() {
        buf.resize(bytes.len(), 0);
    }
    buf[..bytes.len()].copy_from_slice(bytes);
    black_box(&buf[..bytes.len()]);
}

fn timed<F: FnMut() -> anyhow::Result<u64>>(passes: u64, mut f: F) -> anyhow::Result<f64> {
    let start = Instant::now();
    let mut bytes = 0;
    for _ in 0..passes {
        bytes += f()?;
    }
    Ok(mb_per_s(bytes, start.elapsed()))
}

pub(super) fn read(ctx: &Ctx) -> anyhow::Result<Vec<Report>> {
    let dir = ctx.scratch.join("read-0");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    ctx.progress.say("writing the log");
    let rl = write_read_log(ctx, &dir)?;
    let reopen = LogOpenOptions {
        recovery_point: rl.log_end_offset,
        log_start_offset: 0,
        clean_shutdown: true,
    };
    let cfg = config(rl.segment_bytes)?;
    let mut opened = Vec::new();
    let mut linked = Vec::new();
    for (i, b) in ctx.backends.iter().enumerate() {
        // One writable open per partition directory: each further backend opens the same files (the same
        // inodes and page cache) through a directory of hard links.
        let dir = if i == 0 {
            dir.clone()
        } else {
            let copy = ctx.scratch.join(format!("read-links-{i}")).join("read-0");
            link_dir(&dir, &copy)?;
            linked.push(copy.parent().expect("has a parent").to_owned());
            copy
        };
        let (log, _) = PartitionLog::open(b.storage.clone(), &dir, cfg.clone(), reopen)?;
        if log.log_end_offset() != rl.log_end_offset {
            bail!(
                "the reopened log ends at {} instead of {}",
                log.log_end_offset(),
                rl.log_end_offset
            );
        }
        opened.push(log);
    }
    let reports = vec![
        sequential(ctx, &rl, &opened)?,
        random(ctx, &rl, &opened, false)?,
        random(ctx, &rl, &opened, true)?,
    ];
    for log in opened {
        log.close()?;
    }
    std::fs::remove_dir_all(&rl.dir)?;
    for d in linked {
        std::fs::remove_dir_all(d)?;
    }
    Ok(reports)
}

/// `to` (created anew) with a hard link to every file of `from`.
fn link_dir(from: &std::path::Path, to: &std::path::Path) -> anyhow::Result<()> {
    if to.exists() {
        std::fs::remove_dir_all(to)?;
    }
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::hard_link(entry.path(), to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

fn sequential(ctx: &Ctx, rl: &ReadLog, opened: &[PartitionLog]) -> anyhow::Result<Report> {
    let passes = READ_BYTES_PER_MEASUREMENT
        .div_ceil(rl.log_bytes.max(1))
        .clamp(1, MAX_READ_PASSES);
    let mut buf = vec![0u8; READ_BYTES];
    let mut copy_buf = vec![0u8; READ_BYTES];
    let maps: Vec<Map> = rl
        .logs
        .iter()
        .map(|p| Map::open(p))
        .collect::<Result<_, _>>()?;
    // Warm-up: the page cache, the maps (klog's of sealed segments, the bound's), the lazy indexes.
    pread_pass(&rl.logs, &mut buf)?;
    mmap_copy_pass(&maps, &mut copy_buf);
    for log in opened {
        klog_read_pass(log, false, &mut copy_buf)?;
    }
    let nb = ctx.backends.len();
    let mut baseline = Series::default();
    let mut pread = Series::default();
    let mut view: Vec<Series> = vec![Series::default(); nb];
    let mut copied: Vec<Series> = vec![Series::default(); nb];
    // 0: the bound (mmap + memcpy), 1: the pread loop, then per backend the view and the copy.
    let slots: Vec<usize> = (0..2 + 2 * nb).collect();
    for round in 0..ctx.rounds() {
        for &slot in alternate(round, &slots) {
            if slot == 0 {
                ctx.progress
                    .say(&format!("sequential: mmap + memcpy, round {}", round + 1));
                baseline.push(timed(passes, || Ok(mmap_copy_pass(&maps, &mut copy_buf)))?);
                continue;
            }
            if slot == 1 {
                ctx.progress
                    .say(&format!("sequential: pread, round {}", round + 1));
                pread.push(timed(passes, || pread_pass(&rl.logs, &mut buf))?);
                continue;
            }
            let i = (slot - 2) / 2;
            let copy = (slot - 2) % 2 == 1;
            ctx.progress.say(&format!(
                "sequential: klog {}{}, round {}",
                ctx.backends[i].name,
                if copy { " + copy" } else { "" },
                round + 1
            ));
            let v = timed(passes, || klog_read_pass(&opened[i], copy, &mut copy_buf))?;
            if copy {
                copied[i].push(v);
            } else {
                view[i].push(v);
            }
        }
    }
    let segments = rl.logs.len();
    let mut report = Report::new(
        "read",
        format!(
            "read(offset, {READ_BYTES}, None, true) from 0 to the end, every returned byte copied out, \
             {:.1} MiB in {segments} segments ({} sealed, memory-mapped), reopened after a clean close; \
             {passes} passes each",
            rl.log_bytes as f64 / (1 << 20) as f64,
            segments.saturating_sub(1)
        ),
        "MB/s",
    );
    report.baseline_name = "mmap + memcpy of the .log files, 1 MiB chunks".into();
    report.baseline = baseline;
    for (i, b) in ctx.backends.iter().enumerate() {
        report
            .rows
            .push(Row::new(READ_COPY_ROW, b.name, copied[i].clone()));
        report.comparisons.push((
            format!(
                "{READ_COPY_ROW} / pread loop (1 MiB, into one buffer), {}",
                b.name
            ),
            super::ratios(&copied[i], &pread),
        ));
        report.comparisons.push((
            format!(
                "read as a view (no byte touched: not a read of the bytes) / {READ_COPY_ROW}, {}",
                b.name
            ),
            super::ratios(&view[i], &copied[i]),
        ));
    }
    report.add_uring_vs_std(&[READ_COPY_ROW]);
    report.extra = json!({
        "log_bytes": rl.log_bytes,
        "segments": segments,
        "passes": passes,
        "log_end_offset": rl.log_end_offset,
        "pread_mb_per_s": {"value": pread.median(), "runs": pread.runs},
        "view_mb_per_s": ctx.backends.iter().zip(&view)
            .map(|(b, s)| (b.name.to_owned(), json!({"value": s.median(), "runs": s.runs})))
            .collect::<serde_json::Map<_, _>>(),
    });
    Ok(report)
}

/// Random single-batch reads: by offset (`read(offset, one batch)`), or by timestamp
/// (`offset_for_timestamp`, then that read), beside the bound: the same batches, in the same order,
/// copied out of the `.log` files mapped once (mmap + memcpy, klog's mechanism for sealed segments, as
/// the sequential row's bound). One `pread` per batch is kept as a comparison line.
fn random(
    ctx: &Ctx,
    rl: &ReadLog,
    opened: &[PartitionLog],
    by_timestamp: bool,
) -> anyhow::Result<Report> {
    let count = ctx.args.random_reads.max(1);
    // Each measurement reads the picks over as many passes as make `READ_BYTES_PER_MEASUREMENT`, as the
    // sequential row does: 20,000 reads of 16 KiB take about 0.1 s, where one preemption on a shared
    // machine moved a ratio by 0.2 (std and uring, the same mapped reads, measured 0.81-1.21 of each
    // other).
    let passes = READ_BYTES_PER_MEASUREMENT
        .div_ceil(count * BATCH_BYTES as u64)
        .clamp(1, MAX_READ_PASSES);
    let records = SHAPES[0].records_per_batch as u64;
    let batches = rl.batches.len() as u64;
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    // Batch i holds offsets [i * records, (i + 1) * records) and the timestamp first + i.
    let picks: Vec<u64> = (0..count).map(|_| rng.next() % batches).collect();
    let files: Vec<File> = rl.logs.iter().map(File::open).collect::<Result<_, _>>()?;
    let mut buf = vec![0u8; BATCH_BYTES];
    let mut copy_buf = vec![0u8; BATCH_BYTES];
    let maps: Vec<Map> = rl
        .logs
        .iter()
        .map(|p| Map::open(p))
        .collect::<Result<_, _>>()?;
    let mmap_random = |buf: &mut Vec<u8>| -> anyhow::Result<u64> {
        let mut total = 0u64;
        for &p in &picks {
            let (file, position, size) = rl.batches[p as usize];
            let start = usize::try_from(position)?;
            let Some(bytes) = maps[file].bytes().get(start..start + size) else {
                bail!(
                    "batch at position {position} ({size} bytes) is past the end of {}",
                    rl.logs[file].display()
                );
            };
            copy_out(bytes, buf);
            total += size as u64;
        }
        Ok(total)
    };
    let pread_random = |buf: &mut Vec<u8>| -> anyhow::Result<u64> {
        let mut total = 0u64;
        for &p in &picks {
            let (file, position, size) = rl.batches[p as usize];
            buf.resize(size, 0);
            files[file].read_exact_at(&mut buf[..size], position)?;
            black_box(&buf[..size]);
            total += size as u64;
        }
        Ok(total)
    };
    let klog_random = |log: &PartitionLog, buf: &mut Vec<u8>| -> anyhow::Result<u64> {
        let mut total = 0u64;
        for &p in &picks {
            let offset = if by_timestamp {
                let ts = rl.first_timestamp + p as i64;
                match log.offset_for_timestamp(ts)? {
                    Some((_, offset)) => offset,
                    None => bail!("no offset for timestamp {ts}"),
                }
            } else {
                (p * records + rng_offset_in_batch(p, records)) as i64
            };
            let info = log.read(offset, BATCH_BYTES, None, true)?;
            let bytes = info.records.as_slice();
            if bytes.is_empty() {
                bail!("read at offset {offset} returned nothing");
            }
            copy_out(bytes, buf);
            total += bytes.len() as u64;
        }
        Ok(total)
    };
    // Warm-up: the page cache, the maps (klog's of sealed segments, the bound's), the lazy indexes.
    pread_random(&mut buf)?;
    mmap_random(&mut copy_buf)?;
    for log in opened {
        klog_random(log, &mut copy_buf)?;
    }
    let nb = ctx.backends.len();
    let mut baseline = Series::default();
    let mut pread = Series::default();
    let mut series: Vec<Series> = vec![Series::default(); nb];
    // 0: the bound (mmap + memcpy), 1: one pread per batch, then one slot per backend.
    let slots: Vec<usize> = (0..2 + nb).collect();
    let what = if by_timestamp { "timestamp" } else { "offset" };
    for round in 0..ctx.rounds() {
        for &slot in alternate(round, &slots) {
            if slot == 0 {
                ctx.progress.say(&format!(
                    "random by {what}: mmap + memcpy, round {}",
                    round + 1
                ));
                baseline.push(timed(passes, || mmap_random(&mut copy_buf))?);
            } else if slot == 1 {
                ctx.progress
                    .say(&format!("random by {what}: pread, round {}", round + 1));
                pread.push(timed(passes, || pread_random(&mut buf))?);
            } else {
                let i = slot - 2;
                ctx.progress.say(&format!(
                    "random by {what}: klog {}, round {}",
                    ctx.backends[i].name,
                    round + 1
                ));
                series[i].push(timed(passes, || klog_random(&opened[i], &mut copy_buf))?);
            }
        }
    }
    let key = if by_timestamp {
        "read/random-timestamp"
    } else {
        "read/random-offset"
    };
    let title = if by_timestamp {
        format!(
            "{count} random offset_for_timestamp(t) + read(that offset, {BATCH_BYTES}) of one batch, \
             copied out; {passes} passes each"
        )
    } else {
        format!(
            "{count} random read(offset inside a batch, {BATCH_BYTES}, None, true) of one batch, \
             copied out; {passes} passes each"
        )
    };
    let mut report = Report::new(key, title, "MB/s");
    report.baseline_name = "mmap + memcpy of the same batches, in the same order".into();
    report.baseline = baseline;
    for (i, b) in ctx.backends.iter().enumerate() {
        report
            .rows
            .push(Row::new(RANDOM_READ_ROW, b.name, series[i].clone()));
        report.comparisons.push((
            format!(
                "{RANDOM_READ_ROW} / one pread per batch (the same batches), {}",
                b.name
            ),
            super::ratios(&series[i], &pread),
        ));
    }
    report.add_uring_vs_std(&[RANDOM_READ_ROW]);
    report.extra = json!({
        "reads": count,
        "passes": passes,
        "batches": batches,
        "by_timestamp": by_timestamp,
        "pread_mb_per_s": {"value": pread.median(), "runs": pread.runs},
    });
    Ok(report)
}

/// A fixed offset inside batch `p` (not always its base offset: a fetch may start anywhere).
fn rng_offset_in_batch(p: u64, records: u64) -> u64 {
    p.wrapping_mul(0x9e37_79b9) % records
}
