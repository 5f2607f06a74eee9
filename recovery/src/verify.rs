//! `verify`: checks a partition directory without changing anything. Every batch's CRC and framing, every
//! index entry against the `.log`, every `.txnindex` entry against its marker, every producer snapshot
//! against a replay from the one before it, the leader-epoch checkpoint against the batches' epochs, and
//! the partition's checkpoint files.
//!
//! Problems are what is wrong; notes are derived state the next open rebuilds from the `.log` whatever
//! the shutdown was, as Kafka's `LogLoader` does: a missing `.index` or `.timeindex` (a broker leaves none
//! for a segment whose index it never loaded, e.g. KRaft's `__cluster_metadata-0` after a clean stop), and
//! the zero-filled tail of a preallocated index a broker did not trim (it was killed), one note per file
//! however many slots the tail holds.
//!
//! Linear and bounded: each `.log` is walked once in a window ([`BatchStream`]); what the later checks need
//! is kept per index entry (the segment's index files, matched by binary search as batches pass) and per
//! producer (the state replayed since the last snapshot), never per batch.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::checkpoint::{
    read_checkpoint, read_offsets_salvaging, read_partition_metadata, LOG_START_OFFSET_CHECKPOINT,
};
use klog_log::format::{AnyBatch, BatchStream, ControlRecordType, Tail};
use klog_log::io::{read_file, Storage, StorageFile};
use klog_log::partition_log::parse_dir_name;
use klog_log::producer_state::{
    control_record_problem, list_snapshots, read_snapshot, snapshot_path, summarize,
};
use klog_log::segment::{parse_base_offset, LogSegment};
use klog_log::Error;
use klog_psm::{AppendOrigin, BatchSummary, ProducerStateManager, PsmConfig};

/// One thing wrong, and the file it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file the problem is in.
    pub file: PathBuf,
    /// What is wrong, with the evidence (position, expected and found values).
    pub what: String,
}

struct Checker<'a> {
    storage: &'a dyn Storage,
    dir: &'a Path,
    problems: Vec<Problem>,
    notes: Vec<Problem>,
    /// One window walks every `.log`, reused from segment to segment.
    stream: BatchStream,
    batches: u64,
}

impl Checker<'_> {
    fn problem(&mut self, file: PathBuf, what: impl Into<String>) {
        self.problems.push(Problem {
            file,
            what: what.into(),
        });
    }

    fn note(&mut self, file: PathBuf, what: impl Into<String>) {
        self.notes.push(Problem {
            file,
            what: what.into(),
        });
    }

    /// An index or snapshot file, whole: their size is per index entry or producer, not per batch.
    fn read(&mut self, path: &Path) -> Result<Option<Vec<u8>>, Error> {
        read_file(self.storage, path).map_err(|e| Error::Io {
            path: path.to_owned(),
            source: e,
        })
    }
}

/// What a verify walked: a linear walk reads every `.log` byte once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verification {
    /// Every problem found, in the order found.
    pub problems: Vec<Problem>,
    /// Derived state the next open rebuilds (not problems): missing indexes, untrimmed preallocated ones.
    pub notes: Vec<Problem>,
    /// Bytes of `.log` files read (each once).
    pub log_bytes_read: u64,
    /// Batches checked.
    pub batches: u64,
}

/// Checks the partition directory `dir`; an empty list means it is consistent.
pub fn verify_partition(storage: &dyn Storage, dir: &Path) -> Result<Vec<Problem>, Error> {
    Ok(verify(storage, dir)?.problems)
}

/// [`verify_partition`], with what the walk read. One pass over each `.log` in a bounded window checks the
/// batches, the segment's indexes (held per index entry, looked up by binary search) and the producer
/// snapshots (replayed as the walk passes them), so time and memory do not grow with the square of anything.
pub fn verify(storage: &dyn Storage, dir: &Path) -> Result<Verification, Error> {
    let mut c = Checker {
        storage,
        dir,
        problems: Vec::new(),
        notes: Vec::new(),
        stream: BatchStream::default(),
        batches: 0,
    };
    let names = storage.list(dir).map_err(|e| Error::Io {
        path: dir.to_owned(),
        source: e,
    })?;
    let bases: Vec<i64> = names
        .iter()
        .filter(|n| n.ends_with(".log") && n.len() == 24)
        .filter_map(|n| parse_base_offset(n))
        .collect();
    let mut snapshots = SnapshotCheck::new(list_snapshots(storage, dir)?);
    let mut next_expected: Option<i64> = None;
    let mut epochs = EpochRuns::default();
    for (i, &base) in bases.iter().enumerate() {
        let segment = (base, bases.get(i + 1).copied());
        check_segment(
            &mut c,
            segment,
            &mut snapshots,
            &mut next_expected,
            &mut epochs,
        )?;
    }
    let log_end = next_expected.unwrap_or(bases.first().copied().unwrap_or(0));
    snapshots.finish(&mut c)?;
    c.problems.append(&mut snapshots.problems);
    let log_start = log_start_offset(storage, dir)?.max(bases.first().copied().unwrap_or(0));
    check_epochs(&mut c, log_end, log_start, &epochs)?;
    if let Err(e) = read_partition_metadata(storage, dir) {
        c.problem(dir.join("partition.metadata"), e.to_string());
    }
    Ok(Verification {
        problems: c.problems,
        notes: c.notes,
        log_bytes_read: c.stream.bytes_read(),
        batches: c.batches,
    })
}

/// One segment: `(base, the next segment's base)`.
fn check_segment(
    c: &mut Checker<'_>,
    (base, next_base): (i64, Option<i64>),
    snapshots: &mut SnapshotCheck,
    next: &mut Option<i64>,
    epochs: &mut EpochRuns,
) -> Result<(), Error> {
    let log_path = LogSegment::log_path(c.dir, base);
    let mut indexes = SegmentIndexes::load(c, base)?;
    let (file, size) = open_log(c.storage, &log_path)?;
    let mut read_at = |buf: &mut [u8], position: u64| match &file {
        Some(f) => f.read_at(buf, position).map_err(|e| Error::Io {
            path: log_path.clone(),
            source: e,
        }),
        None => Ok(0),
    };
    let mut problems = Vec::new();
    let mut batches = 0u64;
    // The first batch at or past the next segment's base, and the last offset of those batches.
    let mut overlap: Option<(u64, i64)> = None;
    let tail = c.stream.scan::<Error>(&mut read_at, 0, size, &mut |b| {
        let b = match b {
            Ok(b) => b,
            Err(e) => {
                problems.push(e.to_string());
                return Ok(ControlFlow::Break(()));
            }
        };
        batches += 1;
        let in_order = check_batch(&b, base, next, &mut problems);
        if let AnyBatch::V2(v) = &b {
            problems.extend(control_record_problem(v));
            if in_order {
                epochs.see(v.partition_leader_epoch(), b.base_offset(), b.last_offset());
            }
        }
        if next_base.is_some_and(|n| b.last_offset() >= n) {
            let first = overlap.map_or(b.position(), |(p, _)| p);
            overlap = Some((first, b.last_offset()));
        }
        indexes.see(&b);
        // Only a batch whose offsets fit its place may carry the walk past a snapshot: one corrupt base
        // offset (outside the CRC) must not end the windows of every snapshot after it.
        let leads = in_order && next_base.is_none_or(|n| b.last_offset() < n);
        snapshots.see(c.storage, c.dir, &b, leads)?;
        Ok(ControlFlow::Continue(()))
    })?;
    c.batches += batches;
    if let (Some((position, last)), Some(n)) = (overlap, next_base) {
        // Kafka's invariant: a segment's base offset is above every offset of the segments before it.
        // A later segment starting inside this one (a stray `.log`) is the floor segment of the offsets
        // from its base on: a read of them lands there, and this segment's batches are skipped.
        problems.push(format!(
            "the batches from position {position} hold offsets up to {last}, at or past the segment at offset {n}: a read of offsets {n}..={last} lands on that segment, not here"
        ));
    }
    for p in problems {
        c.problem(LogSegment::log_path(c.dir, base), p);
    }
    let log_path = LogSegment::log_path(c.dir, base);
    match tail {
        Some(Tail::Partial { position, bytes }) => c.problem(
            log_path,
            format!("an incomplete batch of {bytes} bytes at position {position}"),
        ),
        Some(Tail::ZeroFilled { position, bytes }) => c.problem(
            log_path,
            format!("{bytes} zero bytes at position {position} (an untrimmed preallocated tail)"),
        ),
        _ => {}
    }
    indexes.report(c);
    Ok(())
}

/// A `.log` and its length; a missing one reads as empty.
fn open_log(
    storage: &dyn Storage,
    path: &Path,
) -> Result<(Option<Arc<dyn StorageFile>>, u64), Error> {
    let io = |e| Error::Io {
        path: path.to_owned(),
        source: e,
    };
    match storage.open(path) {
        Ok(f) => {
            let size = f.len().map_err(io)?;
            Ok((Some(f), size))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((None, 0)),
        Err(e) => Err(io(e)),
    }
}

/// The checks of one batch on its own: offsets inside the segment, never going back. Whether it passed.
fn check_batch(
    b: &AnyBatch<'_>,
    base: i64,
    next: &mut Option<i64>,
    problems: &mut Vec<String>,
) -> bool {
    let outside = b.base_offset() < base || b.last_offset().wrapping_sub(base) > i32::MAX as i64;
    let goes_back = next.is_some_and(|n| b.base_offset() < n);
    if outside {
        problems.push(format!(
            "batch at position {} has offsets outside the segment",
            b.position()
        ));
    }
    if goes_back {
        problems.push(format!(
            "batch at position {} goes back to offset {}",
            b.position(),
            b.base_offset()
        ));
    }
    *next = Some(b.last_offset().wrapping_add(1));
    !outside && !goes_back
}

fn control_type(b: &AnyBatch<'_>) -> Option<ControlRecordType> {
    match b {
        AnyBatch::V2(v) => v.control_record().ok().flatten().map(|r| r.record_type),
        AnyBatch::Legacy(_) => None,
    }
}

/// A segment's `.index`, `.timeindex` and `.txnindex` entries, each waiting for the batch that proves it:
/// found by binary search as the walk passes each batch, reported afterwards in file order.
struct SegmentIndexes {
    base: i64,
    /// `None` when the file is missing; else its length.
    offset_len: Option<usize>,
    /// (offset, position) per entry, in file order, and the last offset of the batch found there.
    offsets: Vec<(i64, u64)>,
    offset_found: Vec<Option<i64>>,
    /// (position, entry number), sorted.
    by_position: Vec<(u64, u32)>,
    time_len: Option<usize>,
    /// (timestamp, offset) per entry, in file order.
    times: Vec<(i64, i64)>,
    /// Distinct time-index offsets, sorted, and whether a batch ends at each.
    time_offsets: Vec<i64>,
    time_found: Vec<bool>,
    /// The `.txnindex`: its parse error, or the last offset of each entry in file order.
    txn: Option<Result<Vec<i64>, &'static str>>,
    /// Distinct aborted-transaction last offsets, sorted, and whether an ABORT marker ends at each.
    txn_offsets: Vec<i64>,
    txn_found: Vec<bool>,
}

impl SegmentIndexes {
    fn load(c: &mut Checker<'_>, base: i64) -> Result<Self, Error> {
        let index = c.read(&LogSegment::index_path(c.dir, base))?;
        let offsets: Vec<(i64, u64)> = index
            .as_deref()
            .unwrap_or_default()
            .chunks_exact(8)
            .map(|e| {
                let offset =
                    base.wrapping_add(i32::from_be_bytes(e[0..4].try_into().expect("4")) as i64);
                let position = i32::from_be_bytes(e[4..8].try_into().expect("4")) as u64;
                (offset, position)
            })
            .collect();
        let mut by_position: Vec<(u64, u32)> = offsets
            .iter()
            .enumerate()
            .map(|(i, e)| (e.1, i as u32))
            .collect();
        by_position.sort_unstable();
        let time = c.read(&LogSegment::time_index_path(c.dir, base))?;
        let times: Vec<(i64, i64)> = time
            .as_deref()
            .unwrap_or_default()
            .chunks_exact(12)
            .map(|e| {
                let ts = i64::from_be_bytes(e[0..8].try_into().expect("8"));
                (
                    ts,
                    base.wrapping_add(i32::from_be_bytes(e[8..12].try_into().expect("4")) as i64),
                )
            })
            .collect();
        let time_offsets = sorted_distinct(times.iter().map(|t| t.1));
        let txn = c
            .read(&LogSegment::txn_index_path(c.dir, base))?
            .map(|bytes| {
                klog_log::txn_index::parse_entries(&bytes).map(|entries| {
                    entries
                        .iter()
                        .map(|e| e.last_offset.get())
                        .collect::<Vec<i64>>()
                })
            });
        let txn_offsets = match &txn {
            Some(Ok(lasts)) => sorted_distinct(lasts.iter().copied()),
            _ => Vec::new(),
        };
        Ok(SegmentIndexes {
            base,
            offset_len: index.as_ref().map(Vec::len),
            offset_found: vec![None; offsets.len()],
            offsets,
            by_position,
            time_len: time.as_ref().map(Vec::len),
            time_found: vec![false; time_offsets.len()],
            times,
            time_offsets,
            txn,
            txn_found: vec![false; txn_offsets.len()],
            txn_offsets,
        })
    }

    /// A batch of the segment: the index entries it proves.
    fn see(&mut self, b: &AnyBatch<'_>) {
        let position = b.position();
        let from = self.by_position.partition_point(|e| e.0 < position);
        for &(p, i) in &self.by_position[from..] {
            if p != position {
                break;
            }
            self.offset_found[i as usize] = Some(b.last_offset());
        }
        if let Ok(i) = self.time_offsets.binary_search(&b.last_offset()) {
            self.time_found[i] = true;
        }
        if !self.txn_offsets.is_empty() && control_type(b) == Some(ControlRecordType::Abort) {
            if let Ok(i) = self.txn_offsets.binary_search(&b.last_offset()) {
                self.txn_found[i] = true;
            }
        }
    }

    fn report(self, c: &mut Checker<'_>) {
        self.report_offset_index(c);
        self.report_time_index(c);
        let txn_path = LogSegment::txn_index_path(c.dir, self.base);
        match &self.txn {
            None => {}
            Some(Err(e)) => c.problem(txn_path, *e),
            Some(Ok(lasts)) => {
                for last in lasts {
                    let i = self.txn_offsets.binary_search(last).expect("indexed");
                    if !self.txn_found[i] {
                        c.problem(txn_path.clone(), format!("aborted transaction ending at {last}, where there is no ABORT marker"));
                    }
                }
            }
        }
    }

    fn report_offset_index(&self, c: &mut Checker<'_>) {
        let index_path = LogSegment::index_path(c.dir, self.base);
        let Some(len) = self.offset_len else {
            c.note(index_path, MISSING);
            return;
        };
        if len % 8 != 0 {
            c.problem(
                index_path.clone(),
                format!("length {len} is not a multiple of 8"),
            );
        }
        let entries = zero_tail_start(&self.offsets, |&(o, p)| o == self.base && p == 0);
        note_zero_tail(c, &index_path, self.offsets.len() - entries, entries * 8);
        let mut last = None;
        for (&(offset, position), found) in self.offsets[..entries].iter().zip(&self.offset_found) {
            if last.is_some_and(|l| offset <= l) {
                c.problem(
                    index_path.clone(),
                    format!("entry for offset {offset} does not increase"),
                );
            }
            last = Some(offset);
            match found {
                Some(batch_last) if *batch_last == offset => {}
                Some(batch_last) => c.problem(
                    index_path.clone(),
                    format!("offset {offset} at position {position}, but that batch ends at {batch_last}"),
                ),
                None => c.problem(
                    index_path.clone(),
                    format!("offset {offset} points at position {position}, where no batch starts"),
                ),
            }
        }
    }

    fn report_time_index(&self, c: &mut Checker<'_>) {
        let time_path = LogSegment::time_index_path(c.dir, self.base);
        let Some(len) = self.time_len else {
            c.note(time_path, MISSING);
            return;
        };
        if len % 12 != 0 {
            c.problem(
                time_path.clone(),
                format!("length {len} is not a multiple of 12"),
            );
        }
        let entries = zero_tail_start(&self.times, |&(ts, o)| ts == 0 && o == self.base);
        note_zero_tail(c, &time_path, self.times.len() - entries, entries * 12);
        let mut last_ts = i64::MIN;
        for &(ts, offset) in &self.times[..entries] {
            if ts <= last_ts {
                c.problem(
                    time_path.clone(),
                    format!("timestamp {ts} does not increase"),
                );
            }
            last_ts = ts;
            let i = self.time_offsets.binary_search(&offset).expect("indexed");
            if !self.time_found[i] {
                c.problem(
                    time_path.clone(),
                    format!("offset {offset} is not the last offset of any batch"),
                );
            }
        }
    }
}

/// What a missing `.index` or `.timeindex` is: derived state, not corruption.
const MISSING: &str =
    "missing: derived from the .log, rebuilt by the next open (as Kafka's LogLoader does)";

/// Where the run of all-zero entries that ends the index starts (its length when there is none): the
/// preallocated slots of an index its broker never trimmed. An entry of zeros is never a real one (an
/// offset entry at position 0 is never written: the first batch of a segment gets none).
fn zero_tail_start<E>(entries: &[E], is_zero: impl Fn(&E) -> bool) -> usize {
    entries.len() - entries.iter().rev().take_while(|e| is_zero(e)).count()
}

fn note_zero_tail(c: &mut Checker<'_>, path: &Path, slots: usize, position: usize) {
    if slots > 0 {
        c.note(
            path.to_owned(),
            format!("{slots} zero-filled slots from byte {position}: a preallocated index not trimmed (its broker did not stop cleanly); rebuilt from the .log by the next open"),
        );
    }
}

fn sorted_distinct(values: impl Iterator<Item = i64>) -> Vec<i64> {
    let mut v: Vec<i64> = values.collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Each snapshot must equal a replay from the previous one (the oldest can only be decoded), checked as
/// the walk passes it: the state replayed since the previous snapshot is compared when the first batch at
/// or past the next one arrives, so each batch is replayed as it is read and never read again.
struct SnapshotCheck {
    /// Snapshot offsets the walk has not reached, in order.
    ahead: std::collections::VecDeque<i64>,
    /// The last snapshot passed and the state replayed from it (`None` before the first, or when it did
    /// not decode: then the next one is only decoded, as it has nothing to be compared with).
    current: Option<(i64, ProducerStateManager)>,
    /// Batches already replayed that end at or past the next snapshot: they belong to the window after it.
    straddling: Vec<(BatchSummary, i64)>,
    problems: Vec<Problem>,
}

impl SnapshotCheck {
    fn new(offsets: Vec<i64>) -> Self {
        SnapshotCheck {
            ahead: offsets.into(),
            current: None,
            straddling: Vec::new(),
            problems: Vec::new(),
        }
    }

    /// A batch of the walk; `leads` when its offsets are in order, so that it may end snapshot windows.
    fn see(
        &mut self,
        storage: &dyn Storage,
        dir: &Path,
        b: &AnyBatch<'_>,
        leads: bool,
    ) -> Result<(), Error> {
        while leads
            && self
                .ahead
                .front()
                .is_some_and(|&next| b.base_offset() >= next)
        {
            self.pass_snapshot(storage, dir)?;
        }
        let AnyBatch::V2(v) = b else {
            return Ok(());
        };
        let summary = summarize(v);
        self.replay(summary, b.base_offset(), b.last_offset());
        if self
            .ahead
            .front()
            .is_some_and(|&next| b.last_offset() >= next)
        {
            self.straddling.push((summary, b.base_offset()));
        }
        Ok(())
    }

    /// The batch in the current window (`last >= from`, `base < to`), as the replay between two snapshots.
    fn replay(&mut self, summary: BatchSummary, base: i64, last: i64) {
        let to = self.ahead.front().copied().unwrap_or(i64::MAX);
        let Some((from, psm)) = &mut self.current else {
            return;
        };
        if last < *from || base >= to {
            return;
        }
        if let Ok(plan) = psm.plan_append(&[summary], AppendOrigin::Replication) {
            psm.apply(plan);
        }
        psm.update_map_end_offset(last.saturating_add(1));
    }

    /// The walk reached the next snapshot: compare it with the replay, then replay on from it.
    fn pass_snapshot(&mut self, storage: &dyn Storage, dir: &Path) -> Result<(), Error> {
        let o = self.ahead.pop_front().expect("a snapshot ahead");
        let entries = match read_snapshot(storage, dir, o) {
            Ok(e) => e,
            Err(e) => {
                self.problems.push(Problem {
                    file: snapshot_path(dir, o),
                    what: e.to_string(),
                });
                self.current = None;
                self.straddling.clear();
                return Ok(());
            }
        };
        if let Some((from, psm)) = self.current.take() {
            let mut want = entries.clone();
            want.sort_by_key(|e| e.producer_id);
            if psm.snapshot() != want {
                self.problems.push(Problem {
                    file: snapshot_path(dir, o),
                    what: format!("differs from a replay of the log from the snapshot at {from}"),
                });
            }
        }
        let mut psm = ProducerStateManager::new(PsmConfig {
            producer_id_expiration_ms: i64::MAX,
            ..PsmConfig::default()
        });
        psm.load_snapshot(entries, o, 0);
        self.current = Some((o, psm));
        for (summary, base) in std::mem::take(&mut self.straddling) {
            self.replay(summary, base, summary.last_offset);
            if self
                .ahead
                .front()
                .is_some_and(|&next| summary.last_offset >= next)
            {
                self.straddling.push((summary, base));
            }
        }
        Ok(())
    }

    /// The snapshots past the last batch: each against the one before it, with nothing to replay.
    fn finish(&mut self, c: &mut Checker<'_>) -> Result<(), Error> {
        while !self.ahead.is_empty() {
            self.pass_snapshot(c.storage, c.dir)?;
        }
        Ok(())
    }
}

/// The leader epochs of the batches, as runs of consecutive batches in one epoch: what the checkpoint is
/// compared with. One entry per epoch change, not per batch.
#[derive(Debug, Default)]
struct EpochRuns {
    /// (epoch, first offset, last offset) of each run, in offset order.
    runs: Vec<(i32, i64, i64)>,
}

impl EpochRuns {
    /// A batch in order; batches without an epoch (-1) carry none.
    fn see(&mut self, epoch: i32, base: i64, last: i64) {
        if epoch < 0 {
            return;
        }
        match self.runs.last_mut() {
            Some(run) if run.0 == epoch => run.2 = last,
            _ => self.runs.push((epoch, base, last)),
        }
    }
}

/// The partition's log start offset from its log directory's `log-start-offset-checkpoint` (missing, or
/// an entry that does not parse: none, as for Kafka's loader; the directory's checkpoints are reported
/// on their own).
fn log_start_offset(storage: &dyn Storage, dir: &Path) -> Result<i64, Error> {
    let (Some(root), Some((topic, partition))) = (dir.parent(), parse_dir_name(dir)) else {
        return Ok(i64::MIN);
    };
    let (offsets, _) = read_offsets_salvaging(storage, &root.join(LOG_START_OFFSET_CHECKPOINT))?;
    Ok(offsets
        .get(&(topic, partition))
        .copied()
        .unwrap_or(i64::MIN))
}

/// How many disagreements between the checkpoint and the batches are named; the rest are counted.
const EPOCH_PROBLEMS_NAMED: usize = 3;

fn check_epochs(
    c: &mut Checker<'_>,
    log_end: i64,
    log_start: i64,
    batches: &EpochRuns,
) -> Result<(), Error> {
    let path = c.dir.join("leader-epoch-checkpoint");
    let entries = match read_checkpoint(c.storage, &path) {
        Err(e) => {
            c.problem(path, e.to_string());
            return Ok(());
        }
        Ok(entries) => entries,
    };
    let mut parsed = Vec::new();
    let mut last: Option<(i32, i64)> = None;
    for e in entries {
        let entry: Option<(i32, i64)> = match e.as_slice() {
            [a, b] => a.parse().ok().zip(b.parse().ok()),
            _ => None,
        };
        let Some((epoch, start)) = entry else {
            c.problem(path.clone(), format!("entry {e:?} is not 'epoch offset'"));
            continue;
        };
        if last.is_some_and(|(le, ls)| epoch <= le || start < ls) {
            c.problem(
                path.clone(),
                format!("epoch {epoch} at {start} does not follow the entry before"),
            );
        }
        if start > log_end {
            c.problem(
                path.clone(),
                format!("epoch {epoch} starts at {start}, past the log end {log_end}"),
            );
        }
        last = Some((epoch, start));
        parsed.push((epoch, start));
    }
    let disagreements = epochs_against_batches(&parsed, log_start, batches);
    let more = disagreements.len().saturating_sub(EPOCH_PROBLEMS_NAMED);
    for d in disagreements.into_iter().take(EPOCH_PROBLEMS_NAMED) {
        c.problem(path.clone(), d);
    }
    if more > 0 {
        c.problem(
            path,
            format!("{more} more runs of batches disagree with the checkpoint"),
        );
    }
    Ok(())
}

/// Where the checkpoint's `entries` (epoch, start offset) disagree with the batches' own epochs from
/// `log_start` on: every batch's epoch must be the one the checkpoint gives its offset (the last entry
/// starting at or before it), and no entry may start inside a run of batches of another epoch. A gap
/// between runs (compaction) may hold an epoch's start anywhere in it.
fn epochs_against_batches(
    entries: &[(i32, i64)],
    log_start: i64,
    batches: &EpochRuns,
) -> Vec<String> {
    let epoch_at = |offset: i64| entries.iter().rev().find(|e| e.1 <= offset).map(|e| e.0);
    let mut out = Vec::new();
    for &(epoch, first, last) in &batches.runs {
        if last < log_start {
            continue;
        }
        let from = first.max(log_start);
        match epoch_at(from) {
            Some(e) if e == epoch => {}
            found => out.push(format!(
                "the batches at offsets {from}..={last} are in epoch {epoch}, the checkpoint gives \
                 offset {from} {}",
                found.map_or("no epoch".to_owned(), |e| format!("epoch {e}"))
            )),
        }
        let inside = entries
            .iter()
            .find(|e| e.0 != epoch && e.1 > from && e.1 <= last);
        if let Some(&(e, start)) = inside {
            out.push(format!(
                "epoch {e} starts at {start}, inside offsets {from}..={last} whose batches are in \
                 epoch {epoch}"
            ));
        }
    }
    out
}
