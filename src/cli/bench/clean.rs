//! `clean`: one compaction pass (`PartitionLog::clean`, Kafka's `Cleaner.doClean`) over a compacted
//! partition of realistic shape, beside a plain sequential read of the same segment bytes (the bound)
//! and Kafka 4.4.0's own `Cleaner` on another copy of the same segments, with the same configs, dedupe
//! buffer and clean time.
//!
//! The partition: `--clean-bytes` of 16-record batches with 1 KiB values from idempotent producers,
//! each key written about four times, one record in twenty a tombstone, and one batch in five inside a
//! transaction (three data batches then a marker; one transaction in four aborted), in several sealed
//! segments and a one-batch active segment (the pass cleans every sealed segment). Each round cleans a
//! fresh copy: the sealed `.log` files are hard links to the pristine ones (neither cleaner writes an
//! old segment's `.log`; the bench checks their sizes and times after each pass) and the rest is copied,
//! so both sides read the same cached bytes and no copy's writeback runs during a timed pass.

use std::fs::File;
use std::num::NonZeroUsize;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use klog::log::cleaner::{CleanOptions, CleanReport, CleanerConfig};
use klog::log::format::{BatchBuilder, Compression, ControlRecordType};
use klog::log::io::{open_backend, IoBackend, Storage};
use klog::log::partition_log::{OpenOptions, PartitionLog};
use klog::log::validator::AppendOrigin;
use serde_json::{json, Value};

use super::disk::{mmap_copy_pass, now_ms, pread_pass, Map, Rng};
use super::{alternate, mb_per_s, BackendChoice, BenchArgs, Ctx, Kafka, Report, Row, Series};

/// The row of klog's pass (on `CleanOptions::threads`' default: the available parallelism, at most 2).
pub(super) const CLEAN_ROW: &str = "PartitionLog::clean, one pass";
/// The same pass on one thread (Kafka's one cleaner thread), first backend only.
const CLEAN_ROW_ONE_THREAD: &str = "PartitionLog::clean, one pass, 1 thread";
/// The comparison of a pass with the same I/O done the cheapest way ([`io_bound`]).
const IO_BOUND_COMPARISON: &str = "PartitionLog::clean, one pass / the same I/O done the cheapest way \
     (the sealed bytes read twice in 1 MiB preads, the survivors' bytes written to a fresh file, one fdatasync)";
/// What the pass's peak RSS may exceed the dedupe buffer by: the process and the opened log before the
/// pass (measured, `rss_before_kib`) plus this, for the pass's read and write buffers (each grown to at
/// most `max.message.bytes`), one decompressed batch, the cleaned segment's index buffers and the
/// allocator's slack.
pub(super) const FIXED_COST_BYTES: u64 = 32 << 20;

const RECORDS_PER_BATCH: usize = 16;
const VALUE_BYTES: usize = 1024;
/// Writes per key, on average, over the partition.
const WRITES_PER_KEY: u64 = 4;
/// One record in this many is a tombstone.
const TOMBSTONE_EVERY: u64 = 20;
/// Idempotent (non-transactional) producers.
const PRODUCERS: usize = 8;
/// Transactional producers, each with at most one open transaction.
const TXN_PRODUCERS: usize = 2;
/// Data batches per transaction, then its marker.
const TXN_BATCHES: u32 = 3;
/// One transaction in this many ends with ABORT.
const ABORT_EVERY: u64 = 4;
/// Kafka's untimed rounds before it is timed (the JIT's warm-up), as for `recover`.
const KAFKA_WARMUP_ROUNDS: usize = 3;

/// The pristine partition each round cleans a copy of.
pub(super) struct Compacted {
    pub dir: PathBuf,
    /// The sealed segments' `.log` files: the bytes a pass cleans.
    pub sealed: Vec<PathBuf>,
    pub dirty_bytes: u64,
    pub segment_bytes: u64,
    pub log_end_offset: i64,
    /// The base offset of the active segment: the pass's first uncleanable offset.
    pub active_base: i64,
    pub records: u64,
    pub keys: u64,
    pub tombstones: u64,
    pub committed: u64,
    pub aborted: u64,
    /// The clean time both sides are given (`Cleaner.doClean`'s `currentTime`).
    pub now_ms: i64,
}

impl Compacted {
    /// What the memory measurement's child needs to clean the same partition.
    fn summary(&self) -> Value {
        json!({
            "dir": self.dir, "sealed": self.sealed, "dirty_bytes": self.dirty_bytes,
            "segment_bytes": self.segment_bytes, "log_end_offset": self.log_end_offset,
            "active_base": self.active_base, "now_ms": self.now_ms,
        })
    }

    fn from_summary(v: &Value) -> anyhow::Result<Compacted> {
        let u = |k: &str| v[k].as_u64().with_context(|| format!("no {k} in {v}"));
        let i = |k: &str| v[k].as_i64().with_context(|| format!("no {k} in {v}"));
        let path = |p: &Value| p.as_str().map(PathBuf::from);
        Ok(Compacted {
            dir: path(&v["dir"]).with_context(|| format!("no dir in {v}"))?,
            sealed: v["sealed"]
                .as_array()
                .and_then(|a| a.iter().map(path).collect())
                .with_context(|| format!("no sealed in {v}"))?,
            dirty_bytes: u("dirty_bytes")?,
            segment_bytes: u("segment_bytes")?,
            log_end_offset: i("log_end_offset")?,
            active_base: i("active_base")?,
            records: 0,
            keys: 0,
            tombstones: 0,
            committed: 0,
            aborted: 0,
            now_ms: i("now_ms")?,
        })
    }
}

/// `cleanup.policy=compact` and `segment.bytes` (Kafka refuses less than 1 MiB; the sizes here never are).
fn compact_config(segment_bytes: u64) -> anyhow::Result<klog::log::config::LogConfig> {
    let mut c = super::disk::config(segment_bytes)?;
    c.set("cleanup.policy", "compact")?;
    Ok(c)
}

/// What the generator's producers have written so far.
struct Producers {
    sequences: [i32; PRODUCERS + TXN_PRODUCERS],
    /// Data batches in each transactional producer's open transaction.
    open: [u32; TXN_PRODUCERS],
    transactions: u64,
    committed: u64,
    aborted: u64,
}

impl Producers {
    fn pid(slot: usize) -> i64 {
        1000 + slot as i64
    }
}

/// Writes the pristine partition into `dir`: `target` bytes of batches, then a roll and one small batch in
/// the active segment, closed cleanly.
pub(super) fn generate(dir: PathBuf, target: u64) -> anyhow::Result<Compacted> {
    let segment_bytes = (128u64 << 20).min(target / 4).max(1 << 20);
    let (log, _) = PartitionLog::open(
        open_backend(IoBackend::Std)?,
        &dir,
        compact_config(segment_bytes)?,
        OpenOptions::default(),
    )?;
    let records_total = (target / (VALUE_BYTES as u64 + 32)).max(RECORDS_PER_BATCH as u64);
    let keys = (records_total / WRITES_PER_KEY).max(16);
    let mut rng = Rng(0x6a09_e667_f3bc_c909);
    let pool: Vec<u8> = (0..(64 << 10) / 8)
        .flat_map(|_| rng.next().to_le_bytes())
        .collect();
    let now = now_ms();
    let first_timestamp = now - 2 * 3_600_000;
    let mut producers = Producers {
        sequences: [0; PRODUCERS + TXN_PRODUCERS],
        open: [0; TXN_PRODUCERS],
        transactions: 0,
        committed: 0,
        aborted: 0,
    };
    let (mut written, mut batches, mut records, mut tombstones) = (0u64, 0u64, 0u64, 0u64);
    while written < target {
        // Batches 3 and 7 of every ten belong to a transaction of producer (i / 10) % 2.
        let txn = matches!(batches % 10, 3 | 7).then_some((batches / 10) as usize % TXN_PRODUCERS);
        let slot = txn.map_or((batches % PRODUCERS as u64) as usize, |t| PRODUCERS + t);
        let timestamp = first_timestamp + batches as i64;
        let mut b = BatchBuilder::new(Compression::None)
            .producer(Producers::pid(slot), 0, producers.sequences[slot])
            .transactional(txn.is_some());
        for _ in 0..RECORDS_PER_BATCH {
            let key = format!("key-{:010}", rng.next() % keys);
            let value = if rng.next().is_multiple_of(TOMBSTONE_EVERY) {
                tombstones += 1;
                None
            } else {
                let at = (rng.next() % (pool.len() - VALUE_BYTES) as u64) as usize;
                Some(&pool[at..at + VALUE_BYTES])
            };
            b.append(timestamp, Some(key.as_bytes()), value, &[])?;
        }
        let mut batch = b.build()?;
        log.append_as_leader(&mut batch, 0)?;
        producers.sequences[slot] += RECORDS_PER_BATCH as i32;
        written += batch.len() as u64;
        records += RECORDS_PER_BATCH as u64;
        batches += 1;
        if let Some(t) = txn {
            producers.open[t] += 1;
            if producers.open[t] == TXN_BATCHES {
                written += end_transaction(&log, &mut producers, t, timestamp)?;
            }
        }
    }
    // Every transaction ends inside the sealed segments, so the last stable offset is the log end.
    for t in 0..TXN_PRODUCERS {
        if producers.open[t] > 0 {
            end_transaction(&log, &mut producers, t, first_timestamp + batches as i64)?;
        }
    }
    log.roll()?;
    let active_base = log.log_end_offset();
    let mut b = BatchBuilder::new(Compression::None);
    b.append(now, Some(b"active"), Some(b"segment"), &[])?;
    log.append_as_leader(&mut b.build()?, 0)?;
    let log_end_offset = log.log_end_offset();
    log.flush(log_end_offset)?;
    log.close()?;
    drop(log);
    let sealed = sealed_logs(&dir, active_base)?;
    let dirty_bytes = sealed
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()))
        .sum::<Result<u64, _>>()?;
    Ok(Compacted {
        dir,
        sealed,
        dirty_bytes,
        segment_bytes,
        log_end_offset,
        active_base,
        records,
        keys,
        tombstones,
        committed: producers.committed,
        aborted: producers.aborted,
        now_ms: now,
    })
}

/// Ends transactional producer `t`'s open transaction with a COMMIT, or one time in `ABORT_EVERY` an
/// ABORT, appended as the coordinator does; the marker's bytes.
fn end_transaction(
    log: &PartitionLog,
    producers: &mut Producers,
    t: usize,
    timestamp: i64,
) -> anyhow::Result<u64> {
    producers.transactions += 1;
    producers.open[t] = 0;
    let kind = if producers.transactions.is_multiple_of(ABORT_EVERY) {
        producers.aborted += 1;
        ControlRecordType::Abort
    } else {
        producers.committed += 1;
        ControlRecordType::Commit
    };
    let pid = Producers::pid(PRODUCERS + t);
    let mut marker = BatchBuilder::end_txn_marker(kind, pid, 0, 0, timestamp)?.build()?;
    log.append_as_leader_with_origin(&mut marker, 0, AppendOrigin::Coordinator)?;
    Ok(marker.len() as u64)
}

/// The `.log` files of the segments below `active_base`, in offset order.
fn sealed_logs(dir: &Path, active_base: i64) -> anyhow::Result<Vec<PathBuf>> {
    let mut logs = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let base = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".log"))
            .and_then(|n| n.parse::<i64>().ok());
        if base.is_some_and(|b| b < active_base) {
            logs.push(path);
        }
    }
    logs.sort();
    if logs.is_empty() {
        bail!("{}: no sealed segment to clean", dir.display());
    }
    Ok(logs)
}

/// The size and modification time of every pristine `.log`: a pass that wrote an old segment's `.log`
/// through its hard link would change them.
fn fingerprint(logs: &[PathBuf]) -> anyhow::Result<Vec<(u64, SystemTime)>> {
    logs.iter()
        .map(|p| {
            let m = std::fs::metadata(p).with_context(|| format!("reading {}", p.display()))?;
            Ok((m.len(), m.modified()?))
        })
        .collect()
}

/// A fresh copy of `from` in `to`: every `.log` hard-linked, every other file copied.
fn copy_partition(from: &Path, to: &Path) -> anyhow::Result<()> {
    if to.exists() {
        std::fs::remove_dir_all(to)?;
    }
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if !entry.file_type()?.is_file() {
            continue;
        }
        let target = to.join(entry.file_name());
        if entry.path().extension().is_some_and(|e| e == "log") {
            std::fs::hard_link(entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    File::open(to)?.sync_all()?;
    Ok(())
}

/// The cleaner's settings on both sides: Kafka's defaults for one thread, the run's dedupe buffer.
fn cleaner_config(args: &BenchArgs) -> CleanerConfig {
    CleanerConfig {
        dedupe_buffer_size: usize::try_from(args.dedupe_buffer_size.min(i32::MAX as u64))
            .unwrap_or(i32::MAX as usize),
        digest: args.digest,
        ..CleanerConfig::default()
    }
}

/// The copy in `work` opened as a broker would after a clean shutdown, its high watermark at the log end
/// (every batch replicated, so the whole sealed range is cleanable).
fn open_copy(
    storage: &Arc<dyn Storage>,
    c: &Compacted,
    work: &Path,
) -> anyhow::Result<PartitionLog> {
    copy_partition(&c.dir, work)?;
    let (log, _) = PartitionLog::open(
        storage.clone(),
        work,
        compact_config(c.segment_bytes)?,
        OpenOptions {
            recovery_point: c.log_end_offset,
            log_start_offset: 0,
            clean_shutdown: true,
        },
    )?;
    log.update_high_watermark(log.log_end_offset());
    Ok(log)
}

/// Checks that a pass cleaned exactly the sealed segments, as Kafka's side does.
fn check_pass(c: &Compacted, report: &CleanReport) -> anyhow::Result<()> {
    if !report.cleaned
        || report.end_offset != c.active_base
        || report.range.total_bytes() != c.dirty_bytes
    {
        bail!(
            "klog's pass cleaned {} bytes to offset {} (cleaned: {}, skipped: {:?}); the bench expected \
             the {} bytes of the sealed segments, to offset {}",
            report.range.total_bytes(),
            report.end_offset,
            report.cleaned,
            report.skipped,
            c.dirty_bytes,
            c.active_base
        );
    }
    Ok(())
}

/// This thread's time on a CPU and waiting for one so far (`/proc/thread-self/schedstat`, ns): what
/// of a pass's time is neither was spent blocked (I/O, fsync).
fn schedstat() -> Option<(Duration, Duration)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    let (on_cpu, waiting) = (fields.next()??, fields.next()??);
    Some((Duration::from_nanos(on_cpu), Duration::from_nanos(waiting)))
}

/// This process's CPU time so far (user + system, every thread): `getrusage(RUSAGE_SELF)`, as Kafka's
/// side reads its JVM's (`getProcessCpuTime`).
fn process_cpu() -> Option<Duration> {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    #[allow(unsafe_code)]
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage; RUSAGE_SELF needs nothing else.
    #[allow(unsafe_code)]
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return None;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).ok()?)
            .checked_add(Duration::from_micros(u64::try_from(t.tv_usec).ok()?))
    };
    tv(usage.ru_utime)?.checked_add(tv(usage.ru_stime)?)
}

/// A pass's clock readings before it: the thread's schedstat and the process's CPU time.
type Before = (Option<(Duration, Duration)>, Option<Duration>);

fn before_pass() -> Before {
    (schedstat(), process_cpu())
}

/// Where a pass's time went: on a CPU, waiting for one, blocked (shares of its wall time), and its
/// bytes per second of the process's CPU time (MB/s), which the machine's load moves far less than
/// its wall time.
#[derive(Clone, Default)]
struct TimeShares {
    on_cpu: Series,
    runqueue: Series,
    blocked: Series,
    cpu_mb_per_s: Series,
    /// The process's CPU time over the wall time: above 1 when the pass's workers ran at once.
    cpu_per_wall: Series,
}

impl TimeShares {
    fn push(&mut self, bytes: u64, elapsed: Duration, before: Before) {
        if let (Some(c0), Some(c1)) = (before.1, process_cpu()) {
            let cpu = c1.saturating_sub(c0);
            self.cpu_mb_per_s.push(mb_per_s(bytes, cpu));
            self.cpu_per_wall
                .push(cpu.as_secs_f64() / elapsed.as_secs_f64());
        }
        let (Some((c0, w0)), Some((c1, w1))) = (before.0, schedstat()) else {
            return;
        };
        let wall = elapsed.as_secs_f64();
        let (cpu, wait) = (
            (c1 - c0).as_secs_f64() / wall,
            (w1 - w0).as_secs_f64() / wall,
        );
        self.on_cpu.push(cpu);
        self.runqueue.push(wait);
        self.blocked.push((1.0 - cpu - wait).max(0.0));
    }

    fn to_json(&self) -> Value {
        json!({"on_cpu": self.on_cpu.median(), "runqueue": self.runqueue.median(),
               "blocked": self.blocked.median(), "cpu_mb_per_s": self.cpu_mb_per_s.median(),
               "cpu_per_wall": self.cpu_per_wall.median()})
    }
}

/// One pass of klog's cleaner on `threads` (`None`: the default) over a fresh copy in `work`: its time,
/// the clocks read before it (read again right after it returns), and its report. The schedstat
/// shares are the calling thread's (on several threads, the one that swaps the groups in).
fn klog_pass(
    storage: &Arc<dyn Storage>,
    c: &Compacted,
    work: &Path,
    cleaner: &CleanerConfig,
    threads: Option<NonZeroUsize>,
) -> anyhow::Result<(Duration, Before, CleanReport)> {
    let log = open_copy(storage, c, work)?;
    let opts = CleanOptions {
        now_ms: c.now_ms,
        dry_run: false,
        force: true,
        max_dirty_bytes: None,
        threads,
    };
    let (start, before) = (Instant::now(), before_pass());
    let report = log.clean(cleaner, &opts, None)?;
    let elapsed = start.elapsed();
    log.close()?;
    drop(log);
    check_pass(c, &report)?;
    std::fs::remove_dir_all(work)?;
    Ok((elapsed, before, report))
}

/// The bound, both ways a cleaner may read a segment: each sealed `.log` read start to end in 1 MiB
/// `pread`s into one buffer, and each mapped for the pass, copied out in 1 MiB chunks and unmapped.
fn read_bounds(c: &Compacted, buf: &mut Vec<u8>) -> anyhow::Result<(f64, f64)> {
    let start = Instant::now();
    let n = pread_pass(&c.sealed, buf)?;
    let pread = mb_per_s(n, start.elapsed());
    let start = Instant::now();
    let maps = c
        .sealed
        .iter()
        .map(|p| Map::open(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let n = mmap_copy_pass(&maps, buf);
    drop(maps);
    let mmap = mb_per_s(n, start.elapsed());
    Ok((pread, mmap))
}

/// A pass's I/O done the cheapest way: every sealed `.log` read twice in 1 MiB `pread`s (a pass reads
/// the dirty bytes twice: the map build, the rewrite), then `survivors` bytes (what the pass wrote)
/// written in 1 MiB `pwrite`s to a fresh file in `dir` and made durable with one `fdatasync` (a pass
/// makes each group's segment durable before its swap). Returns the sealed bytes per second.
fn io_bound(c: &Compacted, survivors: u64, dir: &Path, buf: &mut [u8]) -> anyhow::Result<f64> {
    let path = dir.join("survivors");
    let start = Instant::now();
    pread_pass(&c.sealed, buf)?;
    pread_pass(&c.sealed, buf)?;
    let file = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    let mut position = 0u64;
    while position < survivors {
        let n = (survivors - position).min(buf.len() as u64) as usize;
        file.write_all_at(&buf[..n], position)?;
        position += n as u64;
    }
    file.sync_data()?;
    let elapsed = start.elapsed();
    drop(file);
    std::fs::remove_file(&path)?;
    Ok(mb_per_s(c.dirty_bytes, elapsed))
}

pub(super) fn run(ctx: &Ctx) -> anyhow::Result<Vec<Report>> {
    ctx.progress.say("clean: writing the compacted partition");
    let c = generate(ctx.scratch.join("clean-0"), ctx.args.clean_bytes)?;
    let pristine = fingerprint(&c.sealed)?;
    let mut buf = vec![0u8; 1 << 20];
    read_bounds(&c, &mut buf)?; // warm the page cache: every side reads cached bytes
    let cleaner = cleaner_config(ctx.args);
    let work = ctx.scratch.join("klog").join("clean-0");
    let mut survivors = 0;
    for b in &ctx.backends {
        ctx.progress.say(&format!("clean: klog {} warm-up", b.name));
        survivors = klog_pass(&b.storage, &c, &work, &cleaner, None)?
            .2
            .stats
            .bytes_written;
    }
    // Slot 0: the plain reads and the I/O bound; 1..=nb: each backend on the default threads; nb + 1:
    // the first backend on one thread.
    let nb = ctx.backends.len();
    let (mut pread, mut mmap, mut io) = (Series::default(), Series::default(), Series::default());
    let mut series: Vec<Series> = vec![Series::default(); nb + 1];
    let mut last: Vec<Option<CleanReport>> = vec![None; nb + 1];
    let mut shares: Vec<TimeShares> = vec![TimeShares::default(); nb + 1];
    let slots: Vec<usize> = (0..=nb + 1).collect();
    for round in 0..ctx.rounds() {
        for &slot in alternate(round, &slots) {
            if slot == 0 {
                ctx.progress
                    .say(&format!("clean: plain reads, round {}", round + 1));
                let (p, m) = read_bounds(&c, &mut buf)?;
                pread.push(p);
                mmap.push(m);
                io.push(io_bound(&c, survivors, &ctx.scratch, &mut buf)?);
                continue;
            }
            let (b, threads) = match ctx.backends.get(slot - 1) {
                Some(b) => (b, None),
                None => (&ctx.backends[0], NonZeroUsize::new(1)),
            };
            let what = if threads.is_some() { ", 1 thread" } else { "" };
            ctx.progress.say(&format!(
                "clean: klog {}{what}, round {}",
                b.name,
                round + 1
            ));
            let (elapsed, before, report) = klog_pass(&b.storage, &c, &work, &cleaner, threads)?;
            series[slot - 1].push(mb_per_s(c.dirty_bytes, elapsed));
            shares[slot - 1].push(c.dirty_bytes, elapsed, before);
            last[slot - 1] = Some(report);
        }
        if fingerprint(&c.sealed)? != pristine {
            bail!("klog's pass wrote a pristine .log through its hard link");
        }
    }
    let pread_is_bound = pread.median() >= mmap.median();
    let mut report = Report::new(
        "clean",
        format!(
            "one compaction pass over {:.1} MiB in {} sealed segments of a cleanup.policy=compact \
             partition: {} records of 1 KiB values in batches of {RECORDS_PER_BATCH}, {} keys \
             (each written about {WRITES_PER_KEY} times), {} tombstones, {} committed and {} aborted \
             transactions; dedupe buffer {} MiB, the same clean time on every side, page cache warm",
            c.dirty_bytes as f64 / (1 << 20) as f64,
            c.sealed.len(),
            c.records,
            c.keys,
            c.tombstones,
            c.committed,
            c.aborted,
            ctx.args.dedupe_buffer_size >> 20
        ),
        "MB/s",
    );
    let (bound, other) = if pread_is_bound {
        (pread.clone(), &mmap)
    } else {
        (mmap.clone(), &pread)
    };
    report.baseline_name = if pread_is_bound {
        "read of the sealed .log files, 1 MiB preads (faster than mmap + memcpy here)".into()
    } else {
        "mmap + memcpy of the sealed .log files, 1 MiB chunks (faster than preads here)".into()
    };
    report.baseline = bound;
    for (i, b) in ctx.backends.iter().enumerate() {
        report
            .rows
            .push(Row::new(CLEAN_ROW, b.name, series[i].clone()));
    }
    let first = ctx.backends[0].name;
    report
        .rows
        .push(Row::new(CLEAN_ROW_ONE_THREAD, first, series[nb].clone()));
    report.add_uring_vs_std(&[CLEAN_ROW]);
    report.comparisons.push((
        IO_BOUND_COMPARISON.to_owned(),
        super::ratios(&series[0], &io),
    ));
    report.comparisons.push((
        format!("{CLEAN_ROW} / {CLEAN_ROW_ONE_THREAD}, {first}"),
        super::ratios(&series[0], &series[nb]),
    ));
    let threads = CleanOptions::default().rewrite_threads();
    report.extra = json!({
        "dirty_bytes": c.dirty_bytes,
        "segments": c.sealed.len(),
        "segment_bytes": c.segment_bytes,
        "records": c.records,
        "keys": c.keys,
        "tombstones": c.tombstones,
        "committed_transactions": c.committed,
        "aborted_transactions": c.aborted,
        "log_end_offset": c.log_end_offset,
        "first_uncleanable_offset": c.active_base,
        "now_ms": c.now_ms,
        "dedupe_buffer_size": ctx.args.dedupe_buffer_size,
        "digest": ctx.args.digest.name(),
        "bound": if pread_is_bound { "pread" } else { "mmap" },
        "pread_mb_per_s": pread.median(),
        "io_bound_mb_per_s": io.median(),
        "survivor_bytes": survivors,
        "threads": threads,
        "mmap_mb_per_s": mmap.median(),
        "other_read_mb_per_s": other.median(),
        "klog": ctx.backends.iter().map(|b| (b.name, threads)).chain([(first, 1)]).zip(&last)
            .zip(&shares).map(|(((b, n), r), t)| pass_json(b, n, r.as_ref(), t))
            .collect::<Vec<_>>(),
        "rss": rss(ctx, &c)?,
        "fixed_cost_bytes": FIXED_COST_BYTES,
    });
    report.kafka = kafka_clean(ctx, &c)?;
    cpu_comparison(&mut report, &shares);
    if fingerprint(&c.sealed)? != pristine {
        bail!("a pass wrote a pristine .log through its hard link");
    }
    std::fs::remove_dir_all(&c.dir)?;
    Ok(vec![report])
}

/// `klog / Kafka per CPU second`: the first backend's bytes per second of process CPU time (every
/// thread's), on the default threads and on one, over Kafka's
/// (its JVM's, every thread's: GC and JIT included), a ratio of medians that the machine's load moves
/// far less than the wall-time one.
fn cpu_comparison(report: &mut Report, shares: &[TimeShares]) {
    let Kafka::Measured { details, .. } = &report.kafka else {
        return;
    };
    let kafka: Vec<f64> = details["cpu_mb_per_s"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    if kafka.is_empty() {
        return;
    }
    // The first backend on the default threads, then on one (the last of `shares`).
    let rows = [
        (CLEAN_ROW, shares.first()),
        (CLEAN_ROW_ONE_THREAD, shares.last()),
    ];
    for (row, klog) in rows {
        let Some(klog) = klog else {
            continue;
        };
        let ratio = klog.cpu_mb_per_s.median() / super::median(&kafka);
        if ratio.is_finite() {
            report
                .comparisons
                .push((format!("{row} / Kafka, per CPU second"), vec![ratio]));
        }
    }
}

/// What klog's last pass on one backend did, and where its passes' time went (medians).
fn pass_json(backend: &str, threads: usize, r: Option<&CleanReport>, shares: &TimeShares) -> Value {
    let Some(r) = r else {
        return json!({"backend": backend, "threads": threads});
    };
    json!({
        "backend": backend,
        "threads": threads,
        "time_shares": shares.to_json(),
        "bytes": r.range.total_bytes(),
        "end_offset": r.end_offset,
        "map_entries": r.map_entries,
        "groups": r.groups.len(),
        "segments_before": r.segments_before,
        "segments_after": r.segments_after,
        "log_bytes_after": r.bytes_after,
        "records_read": r.stats.records_read,
        "records_retained": r.stats.records_retained,
        "batches_rebuilt": r.stats.batches_rebuilt,
        "batches_emptied": r.stats.batches_emptied,
        "aborted_removed": r.stats.aborted_removed,
        "bytes_written": r.stats.bytes_written,
    })
}

/// The pass's peak RSS in a child process (this binary re-run with a hidden flag, first backend), and
/// its growth over the RSS before the pass beside the dedupe buffer plus `FIXED_COST_BYTES`.
fn rss(ctx: &Ctx, c: &Compacted) -> anyhow::Result<Value> {
    ctx.progress.say("clean: peak RSS of a pass, in a child");
    let exe = std::env::current_exe().context("finding this binary to re-run it")?;
    let work = ctx.scratch.join("rss");
    let summary = ctx.scratch.join("clean-0.json");
    std::fs::write(&summary, c.summary().to_string())?;
    let out = std::process::Command::new(&exe)
        .arg("bench")
        .arg("clean")
        .args(["--backend", ctx.backends[0].name])
        .args([
            "--dedupe-buffer-size",
            &ctx.args.dedupe_buffer_size.to_string(),
        ])
        .args(["--digest", ctx.args.digest.name()])
        .arg("--clean-rss-child")
        .arg(&summary)
        .arg("--dir")
        .arg(&work)
        .output()
        .with_context(|| format!("running {}", exe.display()))?;
    let _ = std::fs::remove_dir_all(&work);
    let _ = std::fs::remove_file(&summary);
    anyhow::ensure!(
        out.status.success(),
        "the clean memory measurement's child failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let mut v: Value = serde_json::from_str(line).with_context(|| {
        format!("the clean memory measurement's child printed `{line}`, not JSON")
    })?;
    let kib = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let growth = (kib("peak_rss_kib") - kib("rss_before_kib")) * 1024.0;
    let budget = (ctx.args.dedupe_buffer_size + FIXED_COST_BYTES) as f64;
    v["backend"] = json!(ctx.backends[0].name);
    v["growth_bytes"] = json!(growth.is_finite().then_some(growth));
    v["growth_over_budget"] = json!((growth / budget).is_finite().then_some(growth / budget));
    Ok(v)
}

/// `kB` figures of `/proc/self/status`.
fn status_kib(field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no {field} line in /proc/self/status"))
}

/// The memory measurement's child: copies the partition its summary (`--clean-rss-child FILE`) names
/// into `--dir`, opens it, resets the peak
/// RSS (`/proc/self/clear_refs`, 5), runs one pass, and prints the RSS before it, its peak, and the
/// anonymous and file-backed parts at its end.
pub(super) fn rss_child(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    let dir = args.dir.as_ref().context("--clean-rss-child needs --dir")?;
    let source = args
        .clean_rss_child
        .as_ref()
        .context("the clean memory measurement's child needs its partition's summary")?;
    let backend = match args.backend {
        BackendChoice::Uring => IoBackend::Uring,
        _ => IoBackend::Std,
    };
    let storage = open_backend(backend)?;
    let text =
        std::fs::read_to_string(source).with_context(|| format!("reading {}", source.display()))?;
    let c = Compacted::from_summary(&serde_json::from_str(&text)?)?;
    let work = dir.join("clean-0");
    let log = open_copy(&storage, &c, &work)?;
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let before = status_kib("VmRSS:")?;
    let opts = CleanOptions {
        now_ms: c.now_ms,
        dry_run: false,
        force: true,
        max_dirty_bytes: None,
        threads: None,
    };
    let report = log.clean(&cleaner_config(args), &opts, None)?;
    let peak = status_kib("VmHWM:")?;
    let (anon, file) = (status_kib("RssAnon:")?, status_kib("RssFile:")?);
    log.close()?;
    check_pass(&c, &report)?;
    outln!(
        "{}",
        json!({"rss_before_kib": before, "peak_rss_kib": peak, "rss_anon_kib_after": anon,
               "rss_file_kib_after": file, "peak_reset": reset, "bytes": c.dirty_bytes})
    );
    Ok(ExitCode::SUCCESS)
}

/// Kafka's `Cleaner.doClean` on fresh copies of the partition (its rounds in one JVM, after warm-up).
fn kafka_clean(ctx: &Ctx, c: &Compacted) -> anyhow::Result<Kafka> {
    if let Some(why) = ctx.kafka.absent_reason() {
        return Ok(Kafka::Absent(why.to_owned()));
    }
    ctx.progress.say("clean: Kafka Cleaner.doClean");
    let work = ctx.scratch.join("kafka");
    std::fs::create_dir_all(&work)?;
    File::open(&work)?.sync_all()?;
    let kafka = ctx.kafka.run(
        "Cleaner.doClean (SkimpyOffsetMap, unthrottled)",
        &[
            "clean".into(),
            c.dir.display().to_string(),
            work.display().to_string(),
            ctx.rounds().to_string(),
            KAFKA_WARMUP_ROUNDS.to_string(),
            c.segment_bytes.min(i32::MAX as u64).to_string(),
            ctx.args.dedupe_buffer_size.min(i32::MAX as u64).to_string(),
            c.now_ms.to_string(),
        ],
    );
    std::fs::remove_dir_all(&work)?;
    Ok(kafka)
}
