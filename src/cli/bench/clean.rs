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
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use anyhow::{bail, Context};
use klog::log::format::{BatchBuilder, Compression, ControlRecordType};
use klog::log::io::{open_backend, IoBackend};
use klog::log::partition_log::{OpenOptions, PartitionLog};
use klog::log::validator::AppendOrigin;
use serde_json::json;

use super::disk::{mmap_copy_pass, now_ms, pread_pass, Map, Rng};
use super::{mb_per_s, Ctx, Kafka, Report, Series};

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

pub(super) fn run(ctx: &Ctx) -> anyhow::Result<Vec<Report>> {
    ctx.progress.say("clean: writing the compacted partition");
    let c = generate(ctx.scratch.join("clean-0"), ctx.args.clean_bytes)?;
    let pristine = fingerprint(&c.sealed)?;
    let mut buf = vec![0u8; 1 << 20];
    read_bounds(&c, &mut buf)?; // warm the page cache: every side reads cached bytes
    let (mut pread, mut mmap) = (Series::default(), Series::default());
    for round in 0..ctx.rounds() {
        ctx.progress
            .say(&format!("clean: plain reads, round {}", round + 1));
        let (p, m) = read_bounds(&c, &mut buf)?;
        pread.push(p);
        mmap.push(m);
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
        "bound": if pread_is_bound { "pread" } else { "mmap" },
        "pread_mb_per_s": pread.median(),
        "mmap_mb_per_s": mmap.median(),
        "other_read_mb_per_s": other.median(),
    });
    report.kafka = kafka_clean(ctx, &c)?;
    if fingerprint(&c.sealed)? != pristine {
        bail!("a pass wrote a pristine .log through its hard link");
    }
    std::fs::remove_dir_all(&c.dir)?;
    Ok(vec![report])
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
