//! `klog dump` for the files around the batches: `.index`, `.timeindex`, `.txnindex` (as `kafka-dump-log`
//! prints them, checked against the `.log`), the leader-epoch and offset checkpoints and `partition.metadata`.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use klog::log::checkpoint::{read_checkpoint, read_partition_metadata};
use klog::log::format::{
    AnyBatch, Batches, HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MIN_RECORD_OVERHEAD,
};
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
            super::print_error(
                None,
                format_args!("{}: unsupported file type", path.display()),
            );
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

/// Index entries read at a time: the files are walked, never held.
const INDEX_CHUNK_ENTRIES: usize = 8192;

/// The entries of a fixed-size index file, a chunk at a time, stopping (as Kafka does) at the first zero
/// relative offset after the first entry. A missing file has no entries.
struct IndexEntries<const N: usize> {
    file: Option<File>,
    path: PathBuf,
    relative_at: usize,
    /// Bytes of whole entries in the file.
    end: u64,
    read_to: u64,
    buf: Vec<u8>,
    at: usize,
    returned: u64,
}

impl<const N: usize> IndexEntries<N> {
    fn open(path: &Path, relative_at: usize, missing_ok: bool) -> anyhow::Result<Self> {
        let file = match File::open(path) {
            Ok(f) => Some(f),
            Err(e) if missing_ok && e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let len = match &file {
            Some(f) => f
                .metadata()
                .with_context(|| format!("reading {}", path.display()))?
                .len(),
            None => 0,
        };
        Ok(IndexEntries {
            file,
            path: path.to_owned(),
            relative_at,
            end: len / N as u64 * N as u64,
            read_to: 0,
            buf: Vec::new(),
            at: 0,
            returned: 0,
        })
    }

    fn next_entry(&mut self) -> anyhow::Result<Option<[u8; N]>> {
        if self.at == self.buf.len() {
            let (Some(file), true) = (&self.file, self.read_to < self.end) else {
                return Ok(None);
            };
            let want = ((INDEX_CHUNK_ENTRIES * N) as u64).min(self.end - self.read_to);
            self.buf.resize(want as usize, 0);
            file.read_exact_at(&mut self.buf, self.read_to)
                .with_context(|| format!("reading {}", self.path.display()))?;
            self.read_to += want;
            self.at = 0;
        }
        let entry: [u8; N] = self.buf[self.at..self.at + N].try_into().expect("N");
        self.at += N;
        let at = self.relative_at;
        let rel = i32::from_be_bytes(entry[at..at + 4].try_into().expect("4"));
        if rel == 0 && self.returned > 0 {
            self.end = 0;
            self.buf.clear();
            self.at = 0;
            return Ok(None);
        }
        self.returned += 1;
        Ok(Some(entry))
    }
}

/// Kafka's `OffsetIndex.lookup` (the position of the last entry before the first one past the offset),
/// walking the `.index` once for the increasing offsets of a time index; a smaller offset starts over.
struct OffsetLookup {
    path: PathBuf,
    base: i64,
    entries: IndexEntries<8>,
    /// The first entry past the last offset asked for.
    pending: Option<(i64, u32)>,
    position: u32,
    last_asked: i64,
}

impl OffsetLookup {
    fn open(path: &Path, base: i64) -> anyhow::Result<Self> {
        Ok(OffsetLookup {
            path: path.to_owned(),
            base,
            entries: IndexEntries::open(path, 0, true)?,
            pending: None,
            position: 0,
            last_asked: i64::MIN,
        })
    }

    fn position(&mut self, offset: i64) -> anyhow::Result<u32> {
        if offset < self.last_asked {
            *self = Self::open(&self.path, self.base)?;
        }
        self.last_asked = offset;
        loop {
            let next = match self.pending.take() {
                Some(e) => Some(e),
                None => self
                    .entries
                    .next_entry()?
                    .map(|e| offset_entry(self.base, &e)),
            };
            match next {
                None => return Ok(self.position),
                Some((o, p)) if o > offset => {
                    self.pending = Some((o, p));
                    return Ok(self.position);
                }
                Some((_, p)) => self.position = p,
            }
        }
    }
}

/// An `.index` entry as (absolute offset, position).
fn offset_entry(base: i64, e: &[u8; 8]) -> (i64, u32) {
    let offset = base.wrapping_add(i32::from_be_bytes(e[0..4].try_into().expect("4")) as i64);
    (offset, u32::from_be_bytes(e[4..8].try_into().expect("4")))
}

/// The segment's `.log`, read one batch at a time (bounded by its declared length and the file's end).
struct LogFile {
    file: Option<File>,
    len: u64,
    buf: Vec<u8>,
}

impl LogFile {
    /// A missing `.log` reads as empty: every entry is then reported as not found.
    fn open(path: &Path) -> Self {
        let file = File::open(path).ok();
        let len = file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map_or(0, |m| m.len());
        LogFile {
            file,
            len,
            buf: Vec::new(),
        }
    }

    /// The whole batch at `position`, if one is there (as the first batch of the file's rest would be).
    fn batch_at(&mut self, position: u64) -> Option<AnyBatch<'_>> {
        let file = self.file.as_ref()?;
        let rest = self.len.checked_sub(position)?;
        if rest < HEADER_SIZE_UP_TO_MAGIC as u64 {
            return None;
        }
        let mut length = [0u8; LOG_OVERHEAD];
        file.read_exact_at(&mut length, position).ok()?;
        let size = i32::from_be_bytes(length[8..12].try_into().expect("4"));
        let whole = LOG_OVERHEAD as u64 + u64::try_from(size.max(MIN_RECORD_OVERHEAD)).ok()?;
        if size < MIN_RECORD_OVERHEAD || whole > rest {
            return None;
        }
        self.buf.resize(whole as usize, 0);
        file.read_exact_at(&mut self.buf, position).ok()?;
        Batches::at(&self.buf, position).without_crc().next()?.ok()
    }

    /// The first batch from `from` whose last offset is >= `offset`: its position and last offset, and its
    /// max record timestamp when it ends exactly at `offset`.
    fn batch_ending_at_or_after(&mut self, from: u64, offset: i64) -> Option<(u64, i64, i64)> {
        let mut position = from;
        loop {
            let batch = self.batch_at(position)?;
            let last = batch.last_offset();
            if last >= offset {
                let max_ts = if last == offset {
                    max_record_timestamp(&batch)
                } else {
                    -1
                };
                return Some((position, last, max_ts));
            }
            position += batch.size_in_bytes() as u64;
        }
    }
}

/// The largest record timestamp of a batch (Kafka's time-index dump walks the records), or -1.
fn max_record_timestamp(batch: &AnyBatch<'_>) -> i64 {
    match batch {
        AnyBatch::V2(b) => {
            let mut scratch = Vec::new();
            b.records(&mut scratch)
                .map(|records| {
                    records
                        .filter_map(Result::ok)
                        .map(|r| r.timestamp)
                        .max()
                        .unwrap_or(-1)
                })
                .unwrap_or(-1)
        }
        AnyBatch::Legacy(e) => e.timestamp.unwrap_or(-1),
    }
}

/// `--index-sanity-check`: the length and the last entry's offset, read without the rest of the file.
fn sanity(
    kind: &str,
    path: &Path,
    len: u64,
    size: u64,
    base: i64,
    out: &mut impl Write,
) -> anyhow::Result<bool> {
    let problem = if !len.is_multiple_of(size) {
        Some(format!("length {len} is not a multiple of {size}"))
    } else {
        let last = len / size;
        let relative_at = if size == 8 { 0 } else { 8 };
        let mut rel = [0u8; 4];
        File::open(path)
            .and_then(|f| f.read_exact_at(&mut rel, (last - 1) * size + relative_at))
            .with_context(|| format!("reading {}", path.display()))?;
        (base.wrapping_add(i32::from_be_bytes(rel) as i64) < base)
            .then(|| format!("last offset is below the base offset {base}"))
    };
    match problem {
        None => {
            writeln!(out, "{} passed sanity check.", path.display())?;
            Ok(true)
        }
        Some(p) => {
            super::print_error(
                None,
                format_args!("{}: corrupt {kind}: {p}", path.display()),
            );
            Ok(false)
        }
    }
}

/// The file's length, and whether to go on past the header line (an empty index or a sanity check
/// ends there).
fn index_header(
    args: &MetaArgs,
    path: &Path,
    entry: u64,
    out: &mut impl Write,
) -> anyhow::Result<u64> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    if !args.json {
        writeln!(out, "Dumping {}", path.display())?;
        if len < entry {
            writeln!(out, "{} is empty.", path.display())?;
        }
    }
    Ok(len)
}

fn dump_offset_index(args: &MetaArgs, path: &Path, out: &mut impl Write) -> anyhow::Result<bool> {
    let base = base_offset(path)?;
    let len = index_header(args, path, 8, out)?;
    if len < 8 {
        return Ok(true);
    }
    if args.index_sanity_check {
        return sanity("offset index", path, len, 8, base, out);
    }
    let mut log = LogFile::open(&log_of(path, base));
    let mut entries = IndexEntries::<8>::open(path, 0, false)?;
    let mut mismatches = Vec::new();
    while let Some(e) = entries.next_entry()? {
        let (offset, position) = offset_entry(base, &e);
        let position = position as i32;
        let found = u64::try_from(position)
            .ok()
            .and_then(|p| log.batch_at(p))
            .map(|b| b.last_offset());
        match found {
            Some(last) if last == offset => {}
            found => mismatches.push((offset, found.unwrap_or(-1))),
        }
        if args.json {
            serde_json::to_writer(&mut *out, &json!({"offset": offset, "position": position}))?;
            writeln!(out)?;
        } else {
            writeln!(out, "offset: {offset} position: {position}")?;
        }
    }
    if !mismatches.is_empty() {
        // Kafka prints them on stderr: the entries above reach stdout first.
        out.flush()?;
        errln!("Mismatches in :{}", path.display());
        for (i, l) in &mismatches {
            errln!("  Index offset: {i}, log offset: {l}");
        }
    }
    Ok(mismatches.is_empty())
}

fn dump_time_index(args: &MetaArgs, path: &Path, out: &mut impl Write) -> anyhow::Result<bool> {
    let base = base_offset(path)?;
    let len = index_header(args, path, 12, out)?;
    if len < 12 {
        return Ok(true);
    }
    if args.index_sanity_check {
        return sanity("time index", path, len, 12, base, out);
    }
    let mut log = LogFile::open(&log_of(path, base));
    let mut lookup = OffsetLookup::open(&path.with_extension("index"), base)?;
    let mut entries = IndexEntries::<12>::open(path, 8, false)?;
    let mut problems = Vec::new();
    let mut prev = -1i64;
    while let Some(e) = entries.next_entry()? {
        let ts = i64::from_be_bytes(e[0..8].try_into().expect("8"));
        let offset = base.wrapping_add(i32::from_be_bytes(e[8..12].try_into().expect("4")) as i64);
        let position = lookup.position(offset)? as i32;
        let found = u64::try_from(position)
            .ok()
            .and_then(|p| log.batch_ending_at_or_after(p, offset));
        match found {
            Some((_, last, max_ts)) if last == offset => {
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

fn dump_txn_index(args: &MetaArgs, path: &Path, out: &mut impl Write) -> anyhow::Result<bool> {
    let bytes = read(path)?;
    if !args.json {
        writeln!(out, "Dumping {}", path.display())?;
    }
    let entries = match parse_entries(&bytes) {
        Ok(e) => e,
        Err(reason) => {
            super::print_error(None, format_args!("{}: {reason}", path.display()));
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
            super::print_error(None, format_args!("{}: {e}", path.display()));
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
            super::print_error(None, &e);
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
                let entry = e.join(" ");
                super::print_error(
                    None,
                    format_args!("{}: unexpected entry '{entry}'", path.display()),
                );
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
    s.parse().with_context(|| format!("'{s}' is not a number"))
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
            super::print_error(None, &e);
            Ok(false)
        }
    }
}
