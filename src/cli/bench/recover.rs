//! `recover`: unclean recovery of a partition (every segment rescanned from recovery point 0, indexes
//! rebuilt, producer state replayed) beside a plain read of the same `.log` files and Kafka's
//! `LogLoader` on a copy of the same directory; the unclean recovery of a log directory of
//! `DIR_PARTITIONS` partitions on one thread and on one thread per core, beside Kafka's `LogLoader` pool
//! at its default thread count and at the same counts; and the clean open of many small segments beside
//! list + open + fstat of their `.log` files.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use klog::log::checkpoint::{
    CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
};
use klog::log::format::{crc32c, BatchBuilder, Compression};
use klog::log::io::{open_backend, IoBackend};
use klog::log::partition_log::{OpenOptions, PartitionLog};
use klog::recovery::LogLoader;
use serde_json::json;

use super::disk::{config, now_ms, Rng};
use super::{alternate, mb_per_s, per_s, Ctx, Report, Row, Series};

pub(super) const UNCLEAN_ROW: &str = "open after unclean shutdown";
/// The comparison line of `recover`: the plain read with the CRC of every byte.
const READ_CRC: &str = "read + CRC-32C of the same bytes, 1 MiB reads, one thread";
/// Partitions of the log directory `recover/dir` recovers.
const DIR_PARTITIONS: usize = 16;
/// Kafka's `num.recovery.threads.per.data.dir` default (`ServerLogConfigs`, Kafka 4.x).
const KAFKA_DEFAULT_RECOVERY_THREADS: usize = 2;
const CLEAN_ROW: &str = "open after clean shutdown";
/// Idempotent producers the recovered log's batches come from.
const PRODUCERS: usize = 8;
const RECORDS_PER_BATCH: usize = 15;
const VALUE_BYTES: usize = 1024;
/// Descriptors a cleanly opened segment holds (`.log`, `.index`, `.timeindex`), and a margin for the rest.
const FDS_PER_SEGMENT: u64 = 3;
const FD_SPARE: u64 = 200;
/// Kafka's untimed rounds before it is timed (the JIT's warm-up), as for `psm`.
const KAFKA_WARMUP_ROUNDS: usize = 3;

pub(super) fn run(ctx: &Ctx) -> anyhow::Result<Vec<Report>> {
    Ok(vec![unclean(ctx)?, unclean_dir(ctx)?, clean_open(ctx)?])
}

struct Written {
    dir: PathBuf,
    logs: Vec<PathBuf>,
    bytes: u64,
    batches: u64,
    log_end_offset: i64,
    segment_bytes: u64,
}

fn log_files(dir: &Path) -> anyhow::Result<(Vec<PathBuf>, u64)> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    logs.retain(|p| p.extension().is_some_and(|e| e == "log"));
    logs.sort();
    let bytes = logs
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()))
        .sum::<Result<u64, _>>()?;
    Ok((logs, bytes))
}

/// `--recover-bytes` of 16 KiB batches from `PRODUCERS` idempotent producers in 128 MiB segments (less
/// for small sizes), closed cleanly: the bytes an unclean open rescans.
fn write_recovery_log(ctx: &Ctx) -> anyhow::Result<Written> {
    write_partition(ctx.scratch.join("recover-0"), ctx.args.recover_bytes)
}

/// `target` bytes of the batches `write_recovery_log` describes, into the partition directory `dir`.
fn write_partition(dir: PathBuf, target: u64) -> anyhow::Result<Written> {
    // Kafka 4.x refuses a `segment.bytes` below 1 MiB (its side opens the same directory).
    let segment_bytes = (128u64 << 20).min(target / 4).max(1 << 20);
    let (log, _) = PartitionLog::open(
        open_backend(IoBackend::Std)?,
        &dir,
        config(segment_bytes)?,
        OpenOptions::default(),
    )?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let pool: Vec<u8> = (0..(64 << 10) / 8)
        .flat_map(|_| rng.next().to_le_bytes())
        .collect();
    let timestamp = now_ms();
    let mut sequences = [0i32; PRODUCERS];
    let (mut written, mut batches) = (0u64, 0u64);
    while written < target {
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
            )?;
        }
        let mut batch = b.build()?;
        log.append_as_leader(&mut batch, 0)?;
        sequences[p] += RECORDS_PER_BATCH as i32;
        written += batch.len() as u64;
        batches += 1;
    }
    let log_end_offset = log.log_end_offset();
    log.flush(log_end_offset)?;
    log.close()?;
    drop(log);
    let (logs, bytes) = log_files(&dir)?;
    Ok(Written {
        dir,
        logs,
        bytes,
        batches,
        log_end_offset,
        segment_bytes,
    })
}

/// The baseline: each `.log` read start to end in 1 MiB `read`s into one buffer.
fn read_all(logs: &[PathBuf], buf: &mut [u8]) -> anyhow::Result<u64> {
    use std::io::Read;
    let mut total = 0;
    for path in logs {
        let mut f = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        loop {
            let n = f.read(buf)?;
            if n == 0 {
                break;
            }
            std::hint::black_box(&buf[..n]);
            total += n as u64;
        }
    }
    Ok(total)
}

/// [`read_all`] with the CRC-32C of every buffer read: the per-byte work every recovery must do (read each
/// byte, check its CRC) without the batch walk, the indexes and the producer state, on one thread. The
/// comparison line that says whether the CRC or the rest keeps a recovery below the plain read.
fn read_crc_all(logs: &[PathBuf], buf: &mut [u8]) -> anyhow::Result<u64> {
    use std::io::Read;
    let (mut total, mut crc) = (0, 0u32);
    for path in logs {
        let mut f = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        loop {
            let n = f.read(buf)?;
            if n == 0 {
                break;
            }
            crc ^= crc32c(&buf[..n]);
            total += n as u64;
        }
    }
    std::hint::black_box(crc);
    Ok(total)
}

/// [`read_all`] of `logs` on `threads` threads (file i on thread i mod threads, each with its own 1 MiB
/// buffer): the plain read of the same files with the same parallelism, the bound of a recovery on as
/// many threads (one thread's read is none: a warm page cache copies out on every core).
fn read_all_on(logs: &[PathBuf], threads: usize) -> anyhow::Result<u64> {
    if threads <= 1 {
        return read_all(logs, &mut vec![0u8; 1 << 20]);
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let mine: Vec<PathBuf> = logs.iter().skip(t).step_by(threads).cloned().collect();
                scope.spawn(move || read_all(&mine, &mut vec![0u8; 1 << 20]))
            })
            .collect();
        let mut total = 0;
        for h in handles {
            total += h
                .join()
                .map_err(|_| anyhow::anyhow!("a reading thread panicked"))??;
        }
        Ok(total)
    })
}

/// Removes the producer snapshots of `dir`, so that an unclean open replays every batch and writes its
/// snapshot anew (Kafka's side does the same before each of its rounds).
fn delete_snapshots(dir: &Path) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "snapshot") {
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(())
}

/// The unclean open as the recovery loader does it: `PartitionLog::open`, then the synced producer
/// snapshot at the log end (`take_snapshot`, Kafka's snapshot at the end of loading, which Kafka's
/// `UnifiedLog.create` also writes inside its timed call). Returns the time both took.
fn unclean_open(
    storage: &std::sync::Arc<dyn klog::log::io::Storage>,
    w: &Written,
    cfg: &klog::log::config::LogConfig,
    options: OpenOptions,
) -> anyhow::Result<std::time::Duration> {
    delete_snapshots(&w.dir)?;
    let start = Instant::now();
    let (log, report) = PartitionLog::open(storage.clone(), &w.dir, cfg.clone(), options)?;
    let wrote = log.take_snapshot()?;
    let elapsed = start.elapsed();
    if log.log_end_offset() != w.log_end_offset || report.batches_replayed != w.batches || !wrote {
        bail!(
            "unclean open: log end {} (expected {}), {} batches replayed (expected {}), snapshot \
             written: {wrote}",
            log.log_end_offset(),
            w.log_end_offset,
            report.batches_replayed,
            w.batches
        );
    }
    log.close()?;
    Ok(elapsed)
}

fn unclean(ctx: &Ctx) -> anyhow::Result<Report> {
    ctx.progress.say("unclean: writing the log");
    let w = write_recovery_log(ctx)?;
    let cfg = config(w.segment_bytes)?;
    let unclean = OpenOptions {
        recovery_point: 0,
        log_start_offset: 0,
        clean_shutdown: false,
    };
    let mut buf = vec![0u8; 1 << 20];
    read_all(&w.logs, &mut buf)?; // warm the page cache: both sides read cached bytes
                                  // One untimed open per backend, as Kafka's side has untimed warm-up rounds.
    for b in &ctx.backends {
        ctx.progress
            .say(&format!("unclean: klog {} warm-up", b.name));
        unclean_open(&b.storage, &w, &cfg, unclean)?;
    }
    let nb = ctx.backends.len();
    let mut baseline = Series::default();
    let mut read_crc = Series::default();
    let mut series: Vec<Series> = vec![Series::default(); nb];
    let slots: Vec<usize> = (0..=nb + 1).collect();
    for round in 0..ctx.rounds() {
        for &slot in alternate(round, &slots) {
            if slot == 0 {
                ctx.progress
                    .say(&format!("unclean: plain read, round {}", round + 1));
                let start = Instant::now();
                let n = read_all(&w.logs, &mut buf)?;
                baseline.push(mb_per_s(n, start.elapsed()));
                continue;
            }
            if slot == nb + 1 {
                ctx.progress
                    .say(&format!("unclean: read + CRC-32C, round {}", round + 1));
                let start = Instant::now();
                let n = read_crc_all(&w.logs, &mut buf)?;
                read_crc.push(mb_per_s(n, start.elapsed()));
                continue;
            }
            let b = &ctx.backends[slot - 1];
            ctx.progress
                .say(&format!("unclean: klog {}, round {}", b.name, round + 1));
            let elapsed = unclean_open(&b.storage, &w, &cfg, unclean)?;
            series[slot - 1].push(mb_per_s(w.bytes, elapsed));
        }
    }
    let mut report = Report::new(
        "recover",
        format!(
            "PartitionLog::open after an unclean shutdown, recovery point 0: {:.1} MiB in {} segments, \
             {} batches from {PRODUCERS} idempotent producers; every CRC checked, indexes rebuilt, \
             producer state replayed, then the synced producer snapshot at the log end (take_snapshot); \
             no snapshot left from an earlier round, page cache warm on both sides",
            w.bytes as f64 / (1 << 20) as f64,
            w.logs.len(),
            w.batches
        ),
        "MB/s",
    );
    report.baseline_name = "read of the .log files, 1 MiB reads".into();
    report.baseline = baseline;
    for (i, b) in ctx.backends.iter().enumerate() {
        report
            .rows
            .push(Row::new(UNCLEAN_ROW, b.name, series[i].clone()));
    }
    report.add_uring_vs_std(&[UNCLEAN_ROW]);
    report.comparisons.push((
        format!("{READ_CRC} / plain read"),
        super::ratios(&read_crc, &report.baseline),
    ));
    for (i, b) in ctx.backends.iter().enumerate() {
        report.comparisons.push((
            format!("{UNCLEAN_ROW}, {} / {READ_CRC}", b.name),
            super::ratios(&series[i], &read_crc),
        ));
    }
    report.extra = json!({
        "log_bytes": w.bytes,
        "segments": w.logs.len(),
        "segment_bytes": w.segment_bytes,
        "batches": w.batches,
        "log_end_offset": w.log_end_offset,
    });
    report.kafka = kafka_recover(ctx, &w)?;
    if let Some(kafka) = report.kafka.median() {
        // The goal ">= 5x Kafka" read as a fraction of the plain read: above 1, it asks for more than
        // reading the bytes on one thread.
        let read = report.baseline.median();
        report
            .comparisons
            .push(("Kafka LogLoader / plain read".into(), vec![kafka / read]));
        report.comparisons.push((
            "5 x Kafka LogLoader / plain read (what the 5x goal asks of a plain read)".into(),
            vec![5.0 * kafka / read],
        ));
    }
    std::fs::remove_dir_all(&w.dir)?;
    Ok(report)
}

/// Kafka's LogLoader (through `UnifiedLog.create`, lastShutdownClean=false) on a copy of the directory.
fn kafka_recover(ctx: &Ctx, w: &Written) -> anyhow::Result<super::Kafka> {
    if let Some(why) = ctx.kafka.absent_reason() {
        return Ok(super::Kafka::Absent(why.to_owned()));
    }
    ctx.progress.say("unclean: copying the directory for Kafka");
    let copy = ctx.scratch.join("kafka").join("recover-0");
    copy_synced(&w.dir, &copy)?;
    ctx.progress.say("unclean: Kafka LogLoader");
    let kafka = ctx.kafka.run(
        "LogLoader (UnifiedLog.create, unclean)",
        &[
            "recover".into(),
            copy.display().to_string(),
            ctx.rounds().to_string(),
            KAFKA_WARMUP_ROUNDS.to_string(),
            w.segment_bytes.min(i32::MAX as u64).to_string(),
        ],
    );
    std::fs::remove_dir_all(ctx.scratch.join("kafka"))?;
    Ok(kafka)
}

// ---------------------------------------------------------------------------------------------------
// a log directory of many partitions

/// The row of `threads` recovery threads.
/// The bound of the `threads`-thread row of `recover/dir`.
fn parallel_read_name(threads: usize) -> String {
    format!("read of every .log file, 1 MiB reads, on {threads} threads")
}

pub(super) fn dir_row(threads: usize) -> String {
    format!(
        "log directory, {threads} thread{}",
        if threads == 1 { "" } else { "s" }
    )
}

/// What an unclean load of the whole directory redoes each round: no clean-shutdown marker, no
/// recovery points (so every partition is rescanned from 0), no producer snapshots.
fn make_unclean(root: &Path, partitions: &[Written]) -> anyhow::Result<()> {
    for name in [
        CLEAN_SHUTDOWN_FILE,
        RECOVERY_POINT_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
    ] {
        match std::fs::remove_file(root.join(name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {name} in {}", root.display()))
            }
            _ => {}
        }
    }
    for w in partitions {
        delete_snapshots(&w.dir)?;
    }
    Ok(())
}

/// `LogLoader::load_dir` with `threads` threads after an unclean shutdown, every partition's snapshot
/// written at its log end (the loader's end of loading, as Kafka's `UnifiedLog.create`); the time it took.
fn unclean_load_dir(
    storage: &std::sync::Arc<dyn klog::log::io::Storage>,
    root: &Path,
    partitions: &[Written],
    cfg: &klog::log::config::LogConfig,
    threads: usize,
) -> anyhow::Result<std::time::Duration> {
    make_unclean(root, partitions)?;
    let loader = LogLoader::new(storage.clone(), cfg.clone()).with_threads(threads);
    let start = Instant::now();
    let (log_dir, outcomes) = loader.load_dir(root, true)?;
    let elapsed = start.elapsed();
    if outcomes.len() != partitions.len() {
        bail!(
            "load_dir: {} of {} partitions",
            outcomes.len(),
            partitions.len()
        );
    }
    for ((name, outcome), w) in outcomes.into_iter().zip(partitions) {
        let (log, report) = outcome.with_context(|| format!("recovering {name}"))?;
        if log.log_end_offset() != w.log_end_offset || report.batches_replayed != w.batches {
            bail!(
                "{name}: log end {} (expected {}), {} batches replayed (expected {})",
                log.log_end_offset(),
                w.log_end_offset,
                report.batches_replayed,
                w.batches
            );
        }
        log.close()?;
    }
    drop(log_dir);
    Ok(elapsed)
}

fn unclean_dir(ctx: &Ctx) -> anyhow::Result<Report> {
    let root = ctx.scratch.join("recover-dir");
    let per_partition = (ctx.args.recover_bytes / DIR_PARTITIONS as u64).max(64 << 10);
    let mut partitions = Vec::with_capacity(DIR_PARTITIONS);
    for p in 0..DIR_PARTITIONS {
        ctx.progress
            .say(&format!("log directory: writing partition {p}"));
        partitions.push(write_partition(
            root.join(format!("bench-{p}")),
            per_partition,
        )?);
    }
    let logs: Vec<PathBuf> = partitions.iter().flat_map(|w| w.logs.clone()).collect();
    let bytes: u64 = partitions.iter().map(|w| w.bytes).sum();
    let cfg = config(partitions[0].segment_bytes)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut counts = vec![1];
    if cores > 1 {
        counts.push(cores);
    }
    let mut buf = vec![0u8; 1 << 20];
    read_all(&logs, &mut buf)?;
    let storage = &ctx.backends[0].storage;
    let backend = ctx.backends[0].name;
    unclean_load_dir(storage, &root, &partitions, &cfg, cores)?;
    let mut baseline = Series::default();
    let mut series: Vec<Series> = vec![Series::default(); counts.len()];
    // Per thread count above 1, its bound: the plain read on as many threads.
    let mut bounds: Vec<Series> = vec![Series::default(); counts.len()];
    let slots: Vec<usize> = (0..=2 * counts.len()).collect();
    for round in 0..ctx.rounds() {
        for &slot in alternate(round, &slots) {
            if slot == 0 {
                ctx.progress
                    .say(&format!("log directory: plain read, round {}", round + 1));
                let start = Instant::now();
                let n = read_all(&logs, &mut buf)?;
                baseline.push(mb_per_s(n, start.elapsed()));
                continue;
            }
            if slot > counts.len() {
                let i = slot - counts.len() - 1;
                if counts[i] > 1 {
                    ctx.progress.say(&format!(
                        "log directory: plain read on {} threads, round {}",
                        counts[i],
                        round + 1
                    ));
                    let start = Instant::now();
                    let n = read_all_on(&logs, counts[i])?;
                    bounds[i].push(mb_per_s(n, start.elapsed()));
                }
                continue;
            }
            let threads = counts[slot - 1];
            ctx.progress.say(&format!(
                "log directory: klog {backend}, {threads} threads, round {}",
                round + 1
            ));
            let elapsed = unclean_load_dir(storage, &root, &partitions, &cfg, threads)?;
            series[slot - 1].push(mb_per_s(bytes, elapsed));
        }
    }
    let mut report = Report::new(
        "recover/dir",
        format!(
            "LogLoader::load_dir after an unclean shutdown of a log directory of {DIR_PARTITIONS} \
             partitions ({:.1} MiB each, {} batches from {PRODUCERS} idempotent producers each), no \
             recovery points, no snapshots: every partition rescanned from 0, its snapshot written at \
             its log end; on 1 thread and on one thread per core ({cores}); page cache warm",
            per_partition as f64 / (1 << 20) as f64,
            partitions[0].batches
        ),
        "MB/s",
    );
    report.baseline_name = "read of every .log file, 1 MiB reads, one thread".into();
    report.baseline = baseline;
    report.rows = counts
        .iter()
        .zip(series)
        .zip(bounds)
        .map(|((&t, s), bound)| match t {
            1 => Row::new(dir_row(t), backend, s),
            _ => Row::new(dir_row(t), backend, s).bounded(parallel_read_name(t), bound),
        })
        .collect();
    report.extra = json!({
        "partitions": DIR_PARTITIONS,
        "log_bytes": bytes,
        "segments": logs.len(),
        "threads": counts,
        "kafka_default_threads": KAFKA_DEFAULT_RECOVERY_THREADS,
        "log_end_offsets_sum": partitions.iter().map(|w| w.log_end_offset).sum::<i64>(),
    });
    kafka_recover_dir(ctx, &root, &partitions[0], &counts, &mut report)?;
    std::fs::remove_dir_all(&root)?;
    Ok(report)
}

/// Kafka's LogLoader pool on a synced copy of the directory: at its default thread count (the report's
/// Kafka figure, which the goal reads), and at each of klog's counts (that row's Kafka figure).
fn kafka_recover_dir(
    ctx: &Ctx,
    root: &Path,
    first: &Written,
    counts: &[usize],
    report: &mut Report,
) -> anyhow::Result<()> {
    if let Some(why) = ctx.kafka.absent_reason() {
        report.kafka = super::Kafka::Absent(why.to_owned());
        return Ok(());
    }
    ctx.progress
        .say("log directory: copying the directory for Kafka");
    let copy = ctx.scratch.join("kafka").join("recover-dir");
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            copy_synced(&entry.path(), &copy.join(entry.file_name()))?;
        }
    }
    File::open(&copy)?.sync_all()?;
    let run = |threads: usize| {
        ctx.progress.say(&format!(
            "log directory: Kafka LogLoader, {threads} threads"
        ));
        ctx.kafka.run(
            &format!(
                "LogLoader pool, {threads} thread{}",
                if threads == 1 { "" } else { "s" }
            ),
            &[
                "recoverdir".into(),
                copy.display().to_string(),
                threads.to_string(),
                ctx.rounds().to_string(),
                KAFKA_WARMUP_ROUNDS.to_string(),
                first.segment_bytes.min(i32::MAX as u64).to_string(),
            ],
        )
    };
    report.kafka = run(KAFKA_DEFAULT_RECOVERY_THREADS);
    for (row, &threads) in report.rows.iter_mut().zip(counts) {
        if threads != KAFKA_DEFAULT_RECOVERY_THREADS {
            row.kafka = Some(run(threads));
        }
    }
    std::fs::remove_dir_all(ctx.scratch.join("kafka"))?;
    Ok(())
}

/// Copies the files of `from` into the new directory `to`, each synced (the copy's writeback must not
/// run during Kafka's timed rounds; klog's files were synced when the log was written).
fn copy_synced(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            let target = to.join(entry.file_name());
            std::fs::copy(entry.path(), &target)?;
            File::open(&target)?
                .sync_all()
                .with_context(|| format!("syncing {}", target.display()))?;
        }
    }
    File::open(to)?.sync_all()?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// clean open of many segments

/// Raises the soft open-files limit to the hard one; returns the soft limit then in force.
fn raise_open_files_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit for getrlimit to fill.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    if rc != 0 {
        return None;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit; raising the soft limit up to the hard one is always allowed.
        #[allow(unsafe_code)]
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    Some(limit.rlim_cur)
}

/// Grows a log of 4 KiB segments (three ~1.1 KiB batches each) to `segments` segments, closed cleanly.
fn grow_segments(ctx: &Ctx, dir: &Path, segments: u64) -> anyhow::Result<i64> {
    let (log, _) = PartitionLog::open(
        open_backend(IoBackend::Std)?,
        dir,
        config(4096)?,
        OpenOptions::default(),
    )?;
    let value = vec![0x5au8; 1000];
    let timestamp = now_ms();
    for i in 0..segments * 3 {
        if i % 3000 == 0 {
            ctx.progress.say(&format!(
                "clean open: writing segment {} of {segments}",
                i / 3
            ));
        }
        let mut b = BatchBuilder::new(Compression::None);
        b.append(timestamp, Some(b"key"), Some(&value), &[])?;
        let mut batch = b.build()?;
        log.append_as_leader(&mut batch, 0)?;
    }
    let leo = log.log_end_offset();
    log.close()?;
    Ok(leo)
}

fn list_open_stat(dir: &Path) -> anyhow::Result<u64> {
    let mut n = 0;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "log") {
            let f = File::open(&path)?;
            std::hint::black_box(f.metadata()?.len());
            n += 1;
        }
    }
    Ok(n)
}

fn clean_open(ctx: &Ctx) -> anyhow::Result<Report> {
    let requested = ctx.args.segments.max(1);
    let limit = raise_open_files_limit();
    let fit = limit.map_or(u64::MAX, |l| l.saturating_sub(FD_SPARE) / FDS_PER_SEGMENT);
    let segments = requested.min(fit).max(1);
    let note = (segments < requested).then(|| {
        format!(
            "{requested} segments need {FDS_PER_SEGMENT} descriptors each (.log, .index, .timeindex \
             stay open), over the open-files limit of {} (soft raised to hard): measured {segments} \
             segments instead",
            limit.unwrap_or(0)
        )
    });
    if let Some(note) = &note {
        errln!("klog bench: recover: {note}");
    }
    let dir = ctx.scratch.join("segments-0");
    let leo = grow_segments(ctx, &dir, segments)?;
    let cfg = config(4096)?;
    let clean = OpenOptions {
        recovery_point: leo,
        log_start_offset: 0,
        clean_shutdown: true,
    };
    let nb = ctx.backends.len();
    let mut baseline = Series::default();
    let mut series: Vec<Series> = vec![Series::default(); nb];
    let mut seconds: Vec<Series> = vec![Series::default(); nb];
    let slots: Vec<usize> = (0..=nb).collect();
    list_open_stat(&dir)?;
    for round in 0..ctx.rounds() {
        for &slot in alternate(round, &slots) {
            if slot == 0 {
                ctx.progress.say(&format!(
                    "clean open: list + open + fstat, round {}",
                    round + 1
                ));
                let start = Instant::now();
                let n = list_open_stat(&dir)?;
                baseline.push(per_s(n, start.elapsed()));
                continue;
            }
            let b = &ctx.backends[slot - 1];
            ctx.progress
                .say(&format!("clean open: klog {}, round {}", b.name, round + 1));
            let start = Instant::now();
            let (log, report) = PartitionLog::open(b.storage.clone(), &dir, cfg.clone(), clean)?;
            let elapsed = start.elapsed();
            if report.segments as u64 != segments || log.log_end_offset() != leo {
                bail!(
                    "clean open: {} segments ending at {} (expected {segments} ending at {leo})",
                    report.segments,
                    log.log_end_offset()
                );
            }
            log.close()?;
            drop(log);
            series[slot - 1].push(per_s(segments, elapsed));
            seconds[slot - 1].push(elapsed.as_secs_f64());
        }
    }
    let mut report = Report::new(
        "recover/clean-open",
        format!("PartitionLog::open after a clean shutdown of {segments} segments of 4 KiB"),
        "segments/s",
    );
    report.baseline_name = "list the directory, open + fstat every .log".into();
    report.baseline = baseline;
    for (i, b) in ctx.backends.iter().enumerate() {
        report
            .rows
            .push(Row::new(CLEAN_ROW, b.name, series[i].clone()));
    }
    report.extra = json!({
        "segments_requested": requested,
        "segments": segments,
        "open_files_limit": limit,
        "note": note,
        "seconds": ctx.backends.iter().zip(&seconds)
            .map(|(b, s)| (b.name, s.median())).collect::<std::collections::BTreeMap<_, _>>(),
    });
    std::fs::remove_dir_all(&dir)?;
    Ok(report)
}
