//! The offset map's build (`Cleaner.buildOffsetMap`) on several threads ([`CleanOptions::threads`]).
//!
//! Readers walk the dirty segments (segment `i` by reader `i % readers`): each batch read through a
//! [`BatchStream`] with its CRC checked, its keys decoded and digested, and sent, in the segment's order,
//! as a [`Seen`] to this thread, which does what the one-thread build does with it and nothing else: the
//! dirty-byte budget, the transaction state (`onBatchRead` / `onControlBatchRead`, from the batch's
//! header fields or the marker's bytes), the puts in log order while the map is below its desired size,
//! the latest offset. So the map, its insertion order, where it fills and the ranges whose CRCs were
//! checked are the one-thread build's; an error is raised where the one-thread build raises it (a
//! record that does not decode in an aborted batch is never read by it, and is not raised here). What
//! the readers read past the point where the map fills is dropped.
//!
//! Memory: each reader's window (4 MiB) and at most [`IN_FLIGHT`] chunks of [`CHUNK_BATCHES`] batches'
//! digests per reader.

use std::ops::{ControlFlow, Range};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

use crate::format::{AnyBatch, BatchStream, RecordBatch};
use crate::segment::LogSegment;
use crate::Error;

use super::built::{CrcChecked, DirtyBudget};
use super::filter::for_each_key_any;
use super::group::in_segment;
use super::txn_metadata::CleanedTransactionMetadata;
use super::{DigestKind, KeyDigest, OffsetMap};

/// Batches a reader sends at once.
const CHUNK_BATCHES: usize = 256;
/// Chunks a reader may have sent and this thread not yet taken.
const IN_FLIGHT: usize = 4;

/// What a batch is to the map build.
enum Kind {
    /// A v2 data batch: the header fields of `onBatchRead`.
    Data {
        producer_id: i64,
        transactional: bool,
    },
    /// A v0/v1 entry.
    Legacy,
    /// A control batch, whole (a marker is a few dozen bytes), and its position.
    Control(Vec<u8>, u64),
}

/// One batch as a reader saw it, or the error that ended its walk of a segment.
enum Seen {
    Batch {
        size: u64,
        last_offset: i64,
        kind: Kind,
        /// Its keyed records at or after the build's start, as a range of the chunk's `keys`; or the
        /// error decoding them (raised only if the batch is not aborted, as the one-thread build).
        keys: Result<Range<usize>, Error>,
    },
    Failed(Error),
    /// The segment is read: the byte range walked (every batch's CRC checked).
    End(u64, u64),
}

/// A reader's message: batches of one segment and their keys' digests and offsets.
#[derive(Default)]
struct Chunk {
    seen: Vec<Seen>,
    keys: Vec<(KeyDigest, i64)>,
}

/// The one-thread build's `build_offset_map` on `readers` reader threads: true when the map filled (or
/// the budget ran out) before `end`.
pub(super) fn build_offset_map_in_parallel(
    dirty: &[Arc<LogSegment>],
    (start, end): (i64, i64),
    (map, checked): (&mut OffsetMap, &mut Vec<CrcChecked>),
    txn: &mut CleanedTransactionMetadata,
    budget: &mut DirtyBudget,
    (digest, readers): (DigestKind, usize),
) -> Result<bool, Error> {
    let stop = AtomicBool::new(false);
    let readers = readers.min(dirty.len()).max(1);
    std::thread::scope(|scope| {
        let mut channels = Vec::with_capacity(readers);
        for r in 0..readers {
            let (tx, rx) = mpsc::sync_channel::<Chunk>(IN_FLIGHT);
            channels.push(rx);
            let stop = &stop;
            scope.spawn(move || {
                let mut stream = BatchStream::default();
                for seg in dirty.iter().skip(r).step_by(readers) {
                    if !read_segment(seg, start, digest, &mut stream, &tx, stop) {
                        return;
                    }
                }
            });
        }
        let result = insert_in_order(dirty, (start, end), &channels, (map, checked), txn, budget);
        // Readers still walking stop at their next batch; one blocked on a full channel is woken
        // when the channels drop, at the end of this closure.
        stop.store(true, Ordering::Release);
        result
    })
}

/// This thread's side: every segment's chunks taken from its reader, in log order.
fn insert_in_order(
    dirty: &[Arc<LogSegment>],
    (start, end): (i64, i64),
    channels: &[mpsc::Receiver<Chunk>],
    (map, checked): (&mut OffsetMap, &mut Vec<CrcChecked>),
    txn: &mut CleanedTransactionMetadata,
    budget: &mut DirtyBudget,
) -> Result<bool, Error> {
    for (i, seg) in dirty.iter().enumerate() {
        let rx = &channels[i % channels.len()];
        let range = loop {
            // A reader hangs up only after the End or the error of each of its segments.
            let Ok(chunk) = rx.recv() else {
                return Err(Error::Uncleanable {
                    position: 0,
                    reason: "a reader of the map build stopped before the end of its segment",
                });
            };
            match insert_chunk(seg, start, chunk, map, txn, budget)? {
                ControlFlow::Break(()) => return Ok(true),
                ControlFlow::Continue(Some(range)) => break range,
                ControlFlow::Continue(None) => {}
            }
        };
        checked.push(CrcChecked {
            segment: seg.clone(),
            from: range.0,
            to: range.1,
        });
        let next_start = dirty.get(i + 1).map_or(end, |s| s.base_offset());
        map.update_latest_offset(next_start - 1);
    }
    Ok(false)
}

/// One chunk of `segment` into the map, as `build_offset_map_for_segment` takes each batch: `Break` when
/// the map is full (or the budget spent), `Continue(Some(range))` at the segment's end.
fn insert_chunk(
    segment: &LogSegment,
    start: i64,
    chunk: Chunk,
    map: &mut OffsetMap,
    txn: &mut CleanedTransactionMetadata,
    budget: &mut DirtyBudget,
) -> Result<ControlFlow<(), Option<(u64, u64)>>, Error> {
    // The one-thread build raises its errors out of the segment's walk, named by the segment.
    let named = |e| in_segment(segment, e);
    let Chunk {
        seen,
        keys: digests,
    } = chunk;
    for seen in seen {
        let (size, last_offset, kind, keys) = match seen {
            Seen::Batch {
                size,
                last_offset,
                kind,
                keys,
            } => (size, last_offset, kind, keys),
            Seen::Failed(e) => return Err(e),
            Seen::End(from, to) => return Ok(ControlFlow::Continue(Some((from, to)))),
        };
        if !budget.take(size) {
            return Ok(ControlFlow::Break(()));
        }
        let aborted = match kind {
            Kind::Control(bytes, position) => {
                let (batch, _) =
                    RecordBatch::parse_unchecked_crc(&bytes, position).map_err(named)?;
                txn.on_control_batch_read(&batch).map_err(named)?;
                // A marker has no keys to put.
                true
            }
            Kind::Data {
                producer_id,
                transactional,
            } => txn.on_data_batch_header(last_offset, producer_id, transactional),
            Kind::Legacy => txn.on_legacy_batch_read(last_offset),
        };
        if !aborted {
            let keys = &digests[keys.map_err(named)?];
            // The batch's slots touched first, so their misses overlap (the map is 128 MiB).
            let touched = keys.iter().fold(0u8, |t, (d, _)| t ^ map.prefetch(d));
            std::hint::black_box(touched);
            for (digest, offset) in keys {
                if map.size() >= map.max_desired_size() {
                    return Ok(ControlFlow::Break(()));
                }
                map.put_digest(digest, *offset);
            }
        }
        if last_offset >= start {
            map.update_latest_offset(last_offset);
        }
    }
    Ok(ControlFlow::Continue(None))
}

/// A reader's walk of one segment from the index entry at or below `start` (as the one-thread build
/// reads it), sent in chunks; false when this thread stopped listening (the map filled, an error).
fn read_segment(
    segment: &LogSegment,
    start: i64,
    digest: DigestKind,
    stream: &mut BatchStream,
    tx: &mpsc::SyncSender<Chunk>,
    stop: &AtomicBool,
) -> bool {
    let position = match segment.index_lookup_position(start) {
        Ok(p) => p,
        Err(e) => {
            let _ = tx.send(one(Seen::Failed(e)));
            return false;
        }
    };
    let size = segment.size();
    let mut chunk = Chunk::default();
    let mut listening = true;
    let walked = segment.scan_to::<Error>(stream, position, size, &mut |batch| {
        if stop.load(Ordering::Acquire) {
            listening = false;
            return Ok(ControlFlow::Break(()));
        }
        let batch = match batch {
            Ok(b) => b,
            Err(e) => {
                chunk.seen.push(Seen::Failed(in_segment(segment, e)));
                return Ok(ControlFlow::Break(()));
            }
        };
        chunk
            .seen
            .push(seen(&batch, start, digest, &mut chunk.keys));
        if chunk.seen.len() >= CHUNK_BATCHES && tx.send(std::mem::take(&mut chunk)).is_err() {
            listening = false;
            return Ok(ControlFlow::Break(()));
        }
        Ok(ControlFlow::Continue(()))
    });
    if !listening {
        return false;
    }
    let failed = matches!(chunk.seen.last(), Some(Seen::Failed(_)));
    match walked {
        Err(e) => chunk.seen.push(Seen::Failed(in_segment(segment, e))),
        Ok(_) if !failed => chunk.seen.push(Seen::End(position, size)),
        Ok(_) => {}
    }
    let ended = !matches!(chunk.seen.last(), Some(Seen::Failed(_)));
    tx.send(chunk).is_ok() && ended
}

fn one(seen: Seen) -> Chunk {
    Chunk {
        seen: vec![seen],
        keys: Vec::new(),
    }
}

/// What the map build needs of `batch`, its keys at or after `start` digested into `keys`.
fn seen(
    batch: &AnyBatch<'_>,
    start: i64,
    digest: DigestKind,
    keys: &mut Vec<(KeyDigest, i64)>,
) -> Seen {
    let (size, last_offset) = (batch.size_in_bytes() as u64, batch.last_offset());
    let kind = match batch {
        AnyBatch::V2(b) if b.is_control() => Kind::Control(b.as_bytes().to_vec(), b.position()),
        AnyBatch::V2(b) => Kind::Data {
            producer_id: b.producer_id(),
            transactional: b.is_transactional(),
        },
        AnyBatch::Legacy(_) => Kind::Legacy,
    };
    let from = keys.len();
    let decoded = if matches!(kind, Kind::Control(..)) {
        Ok(())
    } else {
        for_each_key_any(batch, &mut |offset, key| {
            if offset >= start {
                keys.push((digest.key_digest(key), offset));
            }
            Ok(())
        })
    };
    let keys = decoded.map(|()| from..keys.len());
    Seen::Batch {
        size,
        last_offset,
        kind,
        keys,
    }
}
