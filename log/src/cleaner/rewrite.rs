//! The rewrite of a pass's groups (the loop of Kafka's `Cleaner.doClean` over `cleanSegments`), on one
//! thread or on several ([`CleanOptions::threads`]).
//!
//! On one thread each group is written into its `.cleaned` segment and swapped in before the next is
//! read, as Kafka's one cleaner thread does. On several, workers take the groups in log order and each
//! writes and flushes one group's `.cleaned` segment; this thread swaps them in one at a time, in log
//! order, each once it is written. The swaps, their order and the bytes are those of one thread: a
//! group's filter depends on the groups before it only through the transaction state
//! ([`CleanedTransactionMetadata`]), which moves with every batch read whatever the filter keeps, so
//! this thread replays it over the groups' batch headers ([`replay_group`], a 61-byte read a batch and
//! the records of a transaction marker) and hands each worker the state its group starts with. Where the
//! replay cannot follow the walk exactly (a segment whose batches do not tile it, a zero-filled tail), the
//! groups from there on are written and swapped here, one at a time, from the state the last worker's
//! group ended with.
//!
//! On disk the only new state is a `.cleaned` segment of a later group present while an earlier group is
//! swapped: an open deletes every `.cleaned` file, and `complete_swaps` finishes a `.swap` below any
//! `.cleaned` forward, so each group still reads wholly as before or after the pass after a crash. A
//! group that fails stops the pass as on one thread: the groups after it are not swapped in, and their
//! `.cleaned` files are deleted.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use zerocopy::FromBytes;

use crate::format::{
    Attributes, BatchHeader, RecordBatch, HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD,
    MIN_RECORD_OVERHEAD, RECORD_BATCH_OVERHEAD,
};
use crate::partition_log::PartitionLog;
use crate::segment::LogSegment;
use crate::Error;

use super::built::{BuiltMap, WrittenGroup};
use super::txn_metadata::CleanedTransactionMetadata;
use super::{CleanOptions, CleanReport, CleanerConfig};

/// A control batch the replay reads whole: larger ones (Kafka writes about 80 bytes) end the replay.
const MAX_REPLAYED_CONTROL_BYTES: u64 = 64 << 10;

/// One group for a worker: its index and the transaction state it starts with.
struct Job {
    index: usize,
    txn: CleanedTransactionMetadata,
}

/// What a worker sends back: the group's index, and its written segment with the transaction state it
/// ended with (kept for the last group a worker writes, from which this thread goes on).
type Done = (
    usize,
    Result<(WrittenGroup, CleanedTransactionMetadata), Error>,
);

/// Writes and swaps in every group of `groups` (in log order, each a run of `to_clean`) on
/// `opts.rewrite_threads()` threads, counting each into `report`.
pub(super) fn rewrite_groups(
    log: &PartitionLog,
    groups: &[&[Arc<LogSegment>]],
    built: BuiltMap<'_>,
    cleaner: &CleanerConfig,
    opts: &CleanOptions,
    report: &mut CleanReport,
) -> Result<(), Error> {
    let threads = opts.rewrite_threads();
    let mut txn = CleanedTransactionMetadata::new();
    let mut from = 0;
    if threads > 1 && groups.len() > 1 {
        let (next, ended) =
            rewrite_in_parallel(log, groups, built, cleaner, opts, report, threads)?;
        from = next;
        txn = ended;
    }
    for group in &groups[from..] {
        let written = log.write_group(group, built, &mut txn, cleaner, opts)?;
        log.finish_group(group, written, report)?;
    }
    Ok(())
}

/// The parallel part of [`rewrite_groups`]: the groups whose starting state the replay found, written
/// by `threads` workers and swapped in here. Returns the first group not yet written and the state it
/// starts with.
fn rewrite_in_parallel(
    log: &PartitionLog,
    groups: &[&[Arc<LogSegment>]],
    built: BuiltMap<'_>,
    cleaner: &CleanerConfig,
    opts: &CleanOptions,
    report: &mut CleanReport,
    threads: usize,
) -> Result<(usize, CleanedTransactionMetadata), Error> {
    let cancel = AtomicBool::new(false);
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let job_rx = Mutex::new(job_rx);
    let (done_tx, done_rx) = mpsc::channel::<Done>();
    std::thread::scope(|scope| {
        for _ in 0..threads.min(groups.len()) {
            let (job_rx, done_tx, cancel) = (&job_rx, done_tx.clone(), &cancel);
            scope.spawn(move || loop {
                // The lock is held only to take a job; a poisoned lock means another worker panicked,
                // which the scope raises.
                let job = match job_rx.lock() {
                    Ok(rx) => rx.recv(),
                    Err(_) => return,
                };
                let Ok(Job { index, mut txn }) = job else {
                    return;
                };
                if cancel.load(Ordering::Acquire) {
                    return;
                }
                let result = log
                    .write_group(groups[index], built, &mut txn, cleaner, opts)
                    .map(|written| (written, txn));
                if done_tx.send((index, result)).is_err() {
                    return;
                }
            });
        }
        drop(done_tx);
        // The jobs, each with the state its group starts with, as fast as the replay finds them.
        let mut state = CleanedTransactionMetadata::new();
        let mut parallel = 0;
        for (index, group) in groups.iter().enumerate() {
            let txn = state.clone();
            parallel += 1;
            let last = index + 1 == groups.len();
            if job_tx.send(Job { index, txn }).is_err()
                || last
                || !replay_group(log, group, &mut state)
            {
                break;
            }
        }
        drop(job_tx);
        swap_in_order(log, groups, parallel, done_rx, &cancel, report)
    })
}

/// This thread's side of [`rewrite_in_parallel`]: each written group swapped in once every group before
/// it is; after a failure the groups written later are given up. Returns the first of `groups` not
/// written (`parallel`) and the state it starts with.
fn swap_in_order(
    log: &PartitionLog,
    groups: &[&[Arc<LogSegment>]],
    parallel: usize,
    done_rx: mpsc::Receiver<Done>,
    cancel: &AtomicBool,
    report: &mut CleanReport,
) -> Result<(usize, CleanedTransactionMetadata), Error> {
    let mut ready = BTreeMap::new();
    let mut next = 0;
    let mut failed: Option<Error> = None;
    let mut ended = CleanedTransactionMetadata::new();
    for (index, result) in done_rx {
        ready.insert(index, result);
        while let Some(result) = ready.remove(&next) {
            let group = groups[next];
            next += 1;
            match result {
                Ok((written, _)) if failed.is_some() => log.discard_group(written),
                Ok((written, txn)) => {
                    ended = txn;
                    if let Err(e) = log.finish_group(group, written, report) {
                        failed = Some(e);
                        cancel.store(true, Ordering::Release);
                    }
                }
                Err(e) => {
                    if failed.is_none() {
                        failed = Some(e);
                    }
                    cancel.store(true, Ordering::Release);
                }
            }
        }
    }
    // Groups written after a failure whose turn never came (one before them was not taken).
    for (_, result) in ready {
        if let Ok((written, _)) = result {
            log.discard_group(written);
        }
    }
    match failed {
        Some(e) => Err(e),
        None => {
            debug_assert_eq!(next, parallel, "every job sent was answered");
            Ok((next, ended))
        }
    }
}

/// Moves `txn` over `group` as the group's filter would (`clean_group_into`: each segment's aborted
/// transactions, then every batch's `onBatchRead` / `onControlBatchRead`). False when a segment's
/// bytes are not whole batches end to end, or a read fails: the state is then unknown (the filter's
/// own walk reports any error).
fn replay_group(
    log: &PartitionLog,
    group: &[Arc<LogSegment>],
    txn: &mut CleanedTransactionMetadata,
) -> bool {
    for (i, seg) in group.iter().enumerate() {
        let upper = match group.get(i + 1) {
            Some(next) => next.base_offset(),
            None => match seg.read_next_offset() {
                Ok((next, _)) => next,
                Err(_) => return false,
            },
        };
        txn.add_aborted_transactions(&log.collect_aborted_transactions(seg.base_offset(), upper));
        if !replay_segment(seg, txn) {
            return false;
        }
    }
    true
}

/// [`replay_group`] over one segment's batches, read header by header.
fn replay_segment(segment: &LogSegment, txn: &mut CleanedTransactionMetadata) -> bool {
    let (size, file) = (segment.size(), segment.log_file());
    let mut head = [0u8; RECORD_BATCH_OVERHEAD];
    let mut position = 0u64;
    while position < size {
        let left = size - position;
        if left < HEADER_SIZE_UP_TO_MAGIC as u64 {
            return false;
        }
        let want = left.min(RECORD_BATCH_OVERHEAD as u64) as usize;
        if !matches!(file.read_at(&mut head[..want], position), Ok(n) if n == want) {
            return false;
        }
        let length = i32::from_be_bytes([head[8], head[9], head[10], head[11]]);
        if length < MIN_RECORD_OVERHEAD || LOG_OVERHEAD as u64 + length as u64 > left {
            return false;
        }
        let total = LOG_OVERHEAD as u64 + length as u64;
        let replayed = match head[16] {
            0 | 1 => {
                let mut offset = [0u8; 8];
                offset.copy_from_slice(&head[..8]);
                txn.on_legacy_batch_read(i64::from_be_bytes(offset));
                true
            }
            2 if want == RECORD_BATCH_OVERHEAD => replay_v2(segment, &head, position, total, txn),
            _ => false,
        };
        if !replayed {
            return false;
        }
        // The cleaned `.txnindex` entries the filter would take here are the worker's to write.
        txn.take_retained_aborted_transactions();
        position += total;
    }
    true
}

/// One v2 batch of [`replay_segment`]: a data batch from its header, a control batch read whole.
fn replay_v2(
    segment: &LogSegment,
    head: &[u8; RECORD_BATCH_OVERHEAD],
    position: u64,
    total: u64,
    txn: &mut CleanedTransactionMetadata,
) -> bool {
    let Ok(header) = BatchHeader::ref_from_bytes(&head[..]) else {
        return false;
    };
    let attributes = Attributes::from_field(header.attributes.get());
    if !attributes.is_control() {
        let last_offset = header
            .base_offset
            .get()
            .wrapping_add(header.last_offset_delta.get() as i64);
        txn.on_data_batch_header(
            last_offset,
            header.producer_id.get(),
            attributes.is_transactional(),
        );
        return true;
    }
    if total > MAX_REPLAYED_CONTROL_BYTES {
        return false;
    }
    let Ok(bytes) = segment.read_bytes(position, total as usize) else {
        return false;
    };
    match RecordBatch::parse_unchecked_crc(&bytes, position) {
        Ok((batch, _)) if batch.size_in_bytes() as u64 == total => {
            txn.on_control_batch_read(&batch).is_ok()
        }
        _ => false,
    }
}
