//! `klog dump` for the files around the batches: `.index`, `.timeindex`, `.txnindex` (as `kafka-dump-log`
//! prints them, checked against the `.log`), the leader-epoch and offset checkpoints and `partition.metadata`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use klog::log::checkpoint::{read_checkpoint, read_partition_metadata};
use klog::log::format::{AnyBatch, Batches};
use klog::log::io::StdStorage;
use klog::log::txn_index::parse_entries;
use serde_json::json;

pub struct MetaArgs {
    pub json: bool,
    pub index_sanity_check: bool,
}

/// Dumps one non-batch file; `Ok(false)` when it had problems.
pub fn dump(args: &MetaArgs, path: &Path, out: &mut impl Write) -> anyhow::Result<bool> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match (ext, name) {
        ("index", _) => dump_offset_index(args, path, out),
        ("timeindex", _) => dump_time_index(args, path, out),
        ("txnindex", _) => dump_txn_index(args, path, out),
        ("snapshot", _) => dump_snapshot(args, path, out),
        (_, "partition.metadata") => dump_partition_metadata(args, path, out),
        (_, n) if n.ends_with("checkpoint") => dump_checkpoint(args, path, out),
        _ => {
            errln!("klog: {}: unsupported file type", path.display());
            Ok(false)
        }
    }
}

fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

fn base_offset(path: &Path) -> anyhow::Result<i64> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    klog::log::segment::parse_base_offset(name)
        .with_context(|| format!("{}: not a segment file name", path.display()))
}

fn log_of(path: &Path, base: i64) -> PathBuf {
    path.with_file_name(format!("{base:020}.log"))
}

/// Entries of a fixed-size index file, stopping (as Kafka does) at the first zero entry after the first.
fn entries<const N: usize>(bytes: &[u8], relative_at: usize) -> Vec<[u8; N]> {
    let mut v = Vec::new();
    for (i, chunk) in bytes.chunks_exact(N).enumerate() {
        let rel = i32::from_be_bytes(chunk[relative_at..relative_at + 4].try_into().expect("4"));
        if rel == 0 && i > 0 {
            break;
        }
        v.push(chunk.try_into().expect("N"));
    }
    v
}

/// The first batch at `position` in the segment's `.log`: (last offset, max record timestamp).
fn batch_at(log: &[u8], position: usize) -> Option<(i64, i64)> {
    let rest = log.get(position..)?;
    let batch = Batches::new(rest).without_crc().next()?.ok()?;
    let max_ts = match batch {
        AnyBatch::V2(b) => {
            let mut scratch = Vec::new();
            b.records(&mut scratch)
                .ok()?
                .filter_map(Result::ok)
                .map(|r| r.timestamp)
                .max()
                .unwrap_or(-1)
        }
        AnyBatch::Legacy(e) => e.timestamp.unwrap_or(-1),
    };
    Some((batch.last_offset(), max_ts))
}

fn sanity(
    kind: &str,
    path: &Path,
    bytes: &[u8],
    size: usize,
    base: i64,
    out: &mut impl Write,
) -> anyhow::Result<bool> {
    let n = bytes.len() / size;
    let problem = if !bytes.len().is_multiple_of(size) {
        Some(format!(
            "length {} is not a multiple of {size}",
            bytes.len()
        ))
    } else {
        let rel = |i: usize| {
            let at = if size == 8 { i * 8 } else { i * 12 + 8 };
            i32::from_be_bytes(bytes[at..at + 4].try_into().expect("4")) as i64
        };
        (n > 0 && base + rel(n - 1) < base)
            .then(|| format!("last offset is below the base offset {base}"))
    };
    match problem {
        None => {
            writeln!(out, "{} passed sanity check.", path.display())?;
            Ok(true)
        }
        Some(p) => {
            errln!("klog: {}: corrupt {kind}: {p}", path.display());
            Ok(false)
        }
    }
}

fn dump_offset_index(args: &MetaArgs, path: &Path, out: &mut impl Write) -> anyhow::Result<bool> {
    let bytes = read(path)?;
    let base = base_offset(path)?;
    if !args.json {
        writeln!(out, "Dumping {}", path.display())?;
    }
    if bytes.len() < 8 {
        if !args.json {
            writeln!(out, "{} is empty.", path.display())?;
        }
        return Ok(true);
    }
    if args.index_sanity_check {
        return sanity("offset index", path, &bytes, 8, base, out);
    }
    let log = std::fs::read(log_of(path, base)).unwrap_or_default();
    let mut mismatches = Vec::new();
    for e in entries::<8>(&bytes, 0) {
        let offset = base.wrapping_add(i32::from_be_bytes(e[0..4].try_into().expect("4")) as i64);
        let position = i32::from_be_bytes(e[4..8].try_into().expect("4"));
        match batch_at(&log, position as usize) {
            Some((last, _)) if last == offset => {}
            found => mismatches.push((offset, found.map_or(-1, |f| f.0))),
        }
        if args.json {
            serde_json::to_writer(&mut *out, &json!({"offset": offset, "position": position}))?;
            writeln!(out)?;
        } else {
            writeln!(out, "offset: {offset} position: {position}")?;
        }
    }
    if !mismatches.is_empty() {
        errln!("Mismatches in :{}", path.display());
        for (i, l) in &mismatches {
            errln!("  Index offset: {i}, log offset: {l}");
        }
    }
    Ok(mismatches.is_empty())
}

fn dump_time_index(args: &MetaArgs, path: &Path, out: &mut impl Write) -> anyhow::Result<bool> {
    let bytes = read(path)?;
    let base = base_offset(path)?;
    if !args.json {
        writeln!(out, "Dumping {}", path.display())?;
    }
    if bytes.len() < 12 {
        if !args.json {
            writeln!(out, "{} is empty.", path.display())?;
        }
        return Ok(true);
    }
    if args.index_sanity_check {
        return sanity("time index", path, &bytes, 12, base, out);
    }
    let log = std::fs::read(log_of(path, base)).unwrap_or_default();
    let index = std::fs::read(path.with_extension("index")).unwrap_or_default();
    let mut problems = Vec::new();
    let mut prev = -1i64;
    for e in entries::<12>(&bytes, 8) {
        let ts = i64::from_be_bytes(e[0..8].try_into().expect("8"));
        let offset = base.wrapping_add(i32::from_be_bytes(e[8..12].try_into().expect("4")) as i64);
        let position = offset_index_lookup(&index, base, offset);
        match first_batch_ending_at_or_after(&log, position, offset) {
            Some((at, last)) if last == offset => {
                let max_ts = batch_at(&log, at).map_or(-1, |b| b.1);
                if max_ts != ts {
                    problems.push(format!(
                        "Found timestamp mismatch in :{}\n  Index timestamp: {ts}, log timestamp: {max_ts}",
                        path.display()
                    ));
                }
                if prev >= ts {
                    problems.push(format!(
                        "Found out of order timestamp in :{}\n  Index timestamp: {ts}, Previously indexed timestamp: {prev}",
                        path.display()
                    ));
                }
            }
            other => problems.push(format!(
                "The following indexed offsets are not found in the log.\nIndexed offset: {offset}, found log offset: {}",
                other.map_or(-1, |o| o.1)
            )),
        }
        if args.json {
            serde_json::to_writer(&mut *out, &json!({"timestamp": ts, "offset": offset}))?;
            writeln!(out)?;
        } else {
            writeln!(out, "timestamp: {ts} offset: {offset}")?;
        }
        prev = ts;
    }
    for p in &problems {
        errln!("{p}");
    }
    Ok(problems.is_empty())
}

/// The position the offset index gives for `offset` (largest entry at or below it).
fn offset_index_lookup(index: &[u8], base: i64, offset: i64) -> usize {
    let mut position = 0;
    for e in entries::<8>(index, 0) {
        let o = base + i32::from_be_bytes(e[0..4].try_into().expect("4")) as i64;
        if o > offset {
            break;
        }
        position = i32::from_be_bytes(e[4..8].try_into().expect("4")) as usize;
    }
    position
}

/// The first batch from `from` whose last offset is >= `offset`: (its position, its last offset).
fn first_batch_ending_at_or_after(log: &[u8], from: usize, offset: i64) -> Option<(usize, i64)> {
    let mut pos = from;
    for b in Batches::new(log.get(from..)?).without_crc() {
        let b = b.ok()?;
        if b.last_offset() >= offset {
            return Some((pos, b.last_offset()));
        }
        pos += b.size_in_bytes();
    }
    None
}

fn dump_txn_index(args: &MetaArgs, path: &Path, out: &mut impl Write) -> anyhow::Result<bool> {
    let bytes = read(path)?;
    if !args.json {
        writeln!(out, "Dumping {}", path.display())?;
    }
    let entries = match parse_entries(&bytes) {
        Ok(e) => e,
        Err(reason) => {
            errln!("klog: {}: {reason}", path.display());
            return Ok(false);
        }
    };
    for e in entries {
        let (v, pid, first, last, lso) = (
            e.version.get(),
            e.producer_id.get(),
            e.first_offset.get(),
            e.last_offset.get(),
            e.last_stable_offset.get(),
        );
        if args.json {
            let j = json!({"version": v, "producer_id": pid, "first_offset": first, "last_offset": last, "last_stable_offset": lso});
            serde_json::to_writer(&mut *out, &j)?;
            writeln!(out)?;
        } else {
            writeln!(out, "version: {v} producerId: {pid} firstOffset: {first} lastOffset: {last} lastStableOffset: {lso}")?;
        }
    }
    Ok(bytes.len() % 34 == 0)
}

/// A producer snapshot, as `kafka-dump-log` prints it (Kafka 4.4: no trailing space after `lastTimestamp`).
fn dump_snapshot(args: &MetaArgs, path: &Path, out: &mut impl Write) -> anyhow::Result<bool> {
    let bytes = read(path)?;
    if !args.json {
        writeln!(out, "Dumping {}", path.display())?;
    }
    let entries = match klog::psm::decode_snapshot(&bytes) {
        Ok(e) => e,
        Err(e) => {
            errln!("klog: {}: {e}", path.display());
            return Ok(false);
        }
    };
    for e in entries {
        let txn = (e.current_txn_first_offset >= 0).then_some(e.current_txn_first_offset);
        let first_seq = klog::psm::decrement_sequence(e.last_sequence, e.offset_delta);
        if args.json {
            let j = json!({
                "producer_id": e.producer_id,
                "producer_epoch": e.producer_epoch,
                "coordinator_epoch": e.coordinator_epoch,
                "current_txn_first_offset": txn,
                "last_timestamp": e.timestamp,
                "first_sequence": first_seq,
                "last_sequence": e.last_sequence,
                "last_offset": e.last_offset,
                "offset_delta": e.offset_delta,
            });
            serde_json::to_writer(&mut *out, &j)?;
            writeln!(out)?;
            continue;
        }
        let txn = txn.map_or("OptionalLong.empty".to_string(), |o| {
            format!("OptionalLong[{o}]")
        });
        write!(
            out,
            "producerId: {} producerEpoch: {} coordinatorEpoch: {} currentTxnFirstOffset: {txn} lastTimestamp: {}",
            e.producer_id, e.producer_epoch, e.coordinator_epoch, e.timestamp
        )?;
        if e.last_offset >= 0 {
            write!(
                out,
                " firstSequence: {first_seq} lastSequence: {} lastOffset: {} offsetDelta: {} timestamp: {}",
                e.last_sequence, e.last_offset, e.offset_delta, e.timestamp
            )?;
        }
        writeln!(out)?;
    }
    Ok(true)
}

fn dump_checkpoint(args: &MetaArgs, path: &Path, out: &mut impl Write) -> anyhow::Result<bool> {
    let entries = match read_checkpoint(&StdStorage, path) {
        Ok(e) => e,
        Err(e) => {
            errln!("klog: {e}");
            return Ok(false);
        }
    };
    let epochs = path
        .file_name()
        .is_some_and(|n| n == "leader-epoch-checkpoint");
    if !args.json {
        writeln!(out, "Dumping {}", path.display())?;
    }
    for e in entries {
        let line = match (epochs, e.as_slice()) {
            (true, [epoch, offset]) => (
                json!({"epoch": num(epoch)?, "start_offset": num(offset)?}),
                format!("epoch: {epoch} startOffset: {offset}"),
            ),
            (false, [t, p, o]) => (
                json!({"topic": t, "partition": num(p)?, "offset": num(o)?}),
                format!("topic: {t} partition: {p} offset: {o}"),
            ),
            _ => {
                errln!("klog: {}: unexpected entry {e:?}", path.display());
                return Ok(false);
            }
        };
        if args.json {
            serde_json::to_writer(&mut *out, &line.0)?;
            writeln!(out)?;
        } else {
            writeln!(out, "{}", line.1)?;
        }
    }
    Ok(true)
}

fn num(s: &str) -> anyhow::Result<i64> {
    s.parse().with_context(|| format!("{s:?} is not a number"))
}

fn dump_partition_metadata(
    args: &MetaArgs,
    path: &Path,
    out: &mut impl Write,
) -> anyhow::Result<bool> {
    let dir = path.parent().unwrap_or(Path::new("."));
    match read_partition_metadata(&StdStorage, dir) {
        Ok(Some(id)) => {
            if args.json {
                serde_json::to_writer(
                    &mut *out,
                    &json!({"version": 0, "topic_id": id.to_string()}),
                )?;
                writeln!(out)?;
            } else {
                writeln!(out, "Dumping {}\nversion: 0 topicId: {id}", path.display())?;
            }
            Ok(true)
        }
        Ok(None) => anyhow::bail!("{}: no such file", path.display()),
        Err(e) => {
            errln!("klog: {e}");
            Ok(false)
        }
    }
}
