//! What survives a cleaning pass, batch by batch, as Kafka's `MemoryRecords.filterTo` decides it with the
//! cleaner's filter (`Cleaner.cleanInto`'s `checkBatchRetention` and `shouldRetainRecord`).
//!
//! Per batch, in log order: the transaction state says whether it is aborted data or a marker whose
//! transaction is over ([`CleanedTransactionMetadata`]); the retention rule keeps the producer's last batch
//! and the batch ending at the high watermark at least as an empty header (KAFKA-5490, KAFKA-17076 with
//! KAFKA-20452); each record stays if it is the latest of its key in the offset map (or past the map),
//! and a tombstone or a marker only until its delete horizon (KIP-534). What is kept goes out as:
//!
//! - nothing ([`BatchOutcome::Dropped`]);
//! - the source bytes verbatim, when no record went and no horizon must be set ([`BatchOutcome::Whole`]);
//! - a rebuilt batch ([`BatchOutcome::Rebuilt`]): the source's base offset, last offset delta, producer
//!   fields, leader epoch, flags, timestamp type and codec at its default level; the base timestamp is
//!   the delete horizon (attributes bit 6) or the first kept record's timestamp; records re-encoded with
//!   attributes 0. Uncompressed and zstd, it is Kafka 4.4.0's bytes exactly (checked against Kafka's own
//!   `MemoryRecords.filterTo`); compressed otherwise, the header and records are Kafka's and the stream is
//!   klog's codec's: snappy (the `snap` crate in xerial framing) is mostly snappy-java's bytes but not
//!   always, gzip (flate2's deflate, not zlib's) is a valid stream of other bytes, and LZ4 (lz4_flex) is
//!   a valid Kafka LZ4 frame but never the bytes lz4-java writes;
//! - Kafka's 61-byte empty header ([`BatchOutcome::Empty`]).
//!
//! v0/v1 entries ([`filter_legacy_entry`]) follow the legacy rules (`retain_legacy_deletes_and_txn_markers`
//! instead of a horizon). Kafka up-converts a kept legacy entry to a v2 batch; klog refuses that with
//! [`Error::Uncleanable`] naming the entry's position, leaving the log as it was.
//!
//! Memory: a compressed batch is inflated once into a scratch buffer reused by the thread (kept up to 4 MiB
//! between batches), capped at [`DEFAULT_MAX_DECOMPRESSED_BYTES`] (the cap every read of a batch has); the
//! records are then walked in place, so a pass holds at most one inflated batch plus its rebuilt copy.

use std::cell::RefCell;
use std::collections::HashMap;

use super::offset_map::{KeyDigest, OffsetMap};
use super::txn_metadata::CleanedTransactionMetadata;
use crate::format::{
    AnyBatch, BatchBuilder, Compression, LegacyEntry, RecordBatch, RecordSpan, TimestampType,
    DEFAULT_MAX_DECOMPRESSED_BYTES, NO_TIMESTAMP,
};
use crate::Error;

/// What the filter read and kept, summed over the batches it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FilterStats {
    /// Batches (and legacy entries) read.
    pub batches_read: u64,
    /// Records read: those of every batch whose records were looked at, plus those of batches dropped
    /// whole (aborted data, expired markers), which Kafka removes without reading them.
    pub records_read: u64,
    /// Records written out (in whole or rebuilt batches).
    pub records_retained: u64,
    /// Tombstones removed because their delete horizon had passed.
    pub tombstones_removed: u64,
    /// Transaction markers (control batches) removed or emptied.
    pub markers_removed: u64,
    /// Records of aborted transactions removed.
    pub aborted_removed: u64,
    /// Batches written as Kafka's empty header.
    pub batches_emptied: u64,
    /// Batches rebuilt.
    pub batches_rebuilt: u64,
    /// Bytes of the batches read.
    pub bytes_read: u64,
    /// Bytes written out.
    pub bytes_written: u64,
}

/// What Kafka's `lastRecordsOfActiveProducers` holds for one producer: the offset of its last data
/// batch's last record (`None` when it has none, as after a marker), and its epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastRecord {
    /// `lastDataOffset` (`None`: the producer's last entry is a marker).
    pub last_data_offset: Option<i64>,
    /// `producerEpoch`.
    pub producer_epoch: i16,
}

/// The inputs of the filter that stay fixed over a pass (or a group of it).
pub struct FilterContext<'a> {
    /// The latest offset per key over the dirty range.
    pub map: &'a OffsetMap,
    /// The pass's transaction state, read and changed by every batch in log order.
    pub txn: &'a mut CleanedTransactionMetadata,
    /// The pass's `currentTime`: the horizon set is `now_ms + delete_retention_ms`.
    pub now_ms: i64,
    /// `delete.retention.ms`.
    pub delete_retention_ms: i64,
    /// For v0/v1 entries only: `segment.lastModified > legacyDeleteHorizonMs` (tombstones stay).
    pub retain_legacy_deletes_and_txn_markers: bool,
    /// The batch whose next offset is the high watermark stays, at least as an empty header (KAFKA-20452).
    pub high_watermark: i64,
    /// Kafka's `lastRecordsOfActiveProducers` (taken once per group): each producer's last batch stays,
    /// at least as an empty header, so its sequence and epoch survive.
    pub active_producers: &'a HashMap<i64, LastRecord>,
}

/// What [`filter_batch`] wrote for one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOutcome {
    /// Nothing.
    Dropped,
    /// The source bytes, verbatim.
    Whole,
    /// A rebuilt batch holding the kept records.
    Rebuilt,
    /// Kafka's 61-byte empty header.
    Empty,
}

/// Kafka's `BatchRetention`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BatchRetention {
    Delete,
    RetainEmpty,
    DeleteEmpty,
}

/// What one batch's filtering borrows, reused from batch to batch: the inflated records, each record's
/// verdict (so the rebuild does not look each key up again), the digests of the keys to look up and the
/// latest offset of each record's key.
#[derive(Default)]
struct Scratch {
    inflated: Vec<u8>,
    keep: Vec<bool>,
    digests: Vec<(usize, KeyDigest)>,
    latest: Vec<i64>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Scratch capacity kept between batches: one rare large batch must not hold its memory for the rest of
/// the thread's life (a pass's memory is the dedupe buffer plus a fixed cost).
const SCRATCH_KEPT_BYTES: usize = 4 << 20;

/// Runs `f` with the thread's scratch buffers (fresh ones if they are in use further up the stack).
fn with_scratch<T>(f: impl FnOnce(&mut Scratch) -> T) -> T {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => {
            let result = f(&mut scratch);
            if scratch.inflated.capacity() > SCRATCH_KEPT_BYTES {
                scratch.inflated = Vec::new();
            }
            if scratch.keep.capacity() > SCRATCH_KEPT_BYTES {
                scratch.keep = Vec::new();
            }
            if scratch.latest.capacity() > SCRATCH_KEPT_BYTES / 8 {
                scratch.latest = Vec::new();
                scratch.digests = Vec::new();
            }
            result
        }
        Err(_) => f(&mut Scratch::default()),
    })
}

/// Appends what `batch` keeps (nothing, its bytes verbatim, a rebuilt batch, or Kafka's empty header) to `out`.
pub fn filter_batch(
    batch: &RecordBatch<'_>,
    ctx: &mut FilterContext<'_>,
    out: &mut Vec<u8>,
    stats: &mut FilterStats,
) -> Result<BatchOutcome, Error> {
    stats.batches_read += 1;
    stats.bytes_read += batch.size_in_bytes() as u64;
    let (retention, discard_records, marker_for_empty_txn) = check_batch_retention(batch, ctx)?;
    if retention == BatchRetention::Delete {
        count_discarded(batch, stats);
        return Ok(BatchOutcome::Dropped);
    }
    with_scratch(|scratch| {
        let Scratch {
            inflated,
            keep: verdicts,
            digests,
            latest,
        } = scratch;
        verdicts.clear();
        let mut records = batch.records_with_limit(inflated, DEFAULT_MAX_DECOMPRESSED_BYTES)?;
        let declared = batch.records_count().clamp(0, 4096) as usize;
        let mut spans = Vec::with_capacity(declared);
        while let Some(span) = records.next_span() {
            spans.push(span?);
        }
        stats.records_read += spans.len() as u64;
        let looked_up = !discard_records && !batch.is_control();
        if looked_up {
            latest_offsets(ctx.map, &spans, digests, latest);
        } else {
            latest.clear();
            latest.resize(spans.len(), i64::MIN);
        }
        let mut kept = KeptRecords::default();
        for (i, span) in spans.iter().enumerate() {
            let keep = !discard_records
                && (batch.is_control() || should_retain_record(ctx, batch, span, latest[i], stats));
            kept.note(span, keep);
            verdicts.push(keep);
        }
        let outcome = if kept.count > 0 {
            let need_horizon =
                (kept.tombstones || marker_for_empty_txn) && batch.delete_horizon_ms().is_none();
            if !kept.dropped_any && !need_horizon {
                out.extend_from_slice(batch.as_bytes());
                BatchOutcome::Whole
            } else {
                let horizon = if need_horizon {
                    ctx.now_ms.wrapping_add(ctx.delete_retention_ms)
                } else {
                    batch.delete_horizon_ms().unwrap_or(NO_TIMESTAMP)
                };
                let written = rebuild(batch, &spans, verdicts, horizon, out)?;
                stats.bytes_written += written as u64;
                stats.batches_rebuilt += 1;
                BatchOutcome::Rebuilt
            }
        } else if retention == BatchRetention::RetainEmpty {
            BatchBuilder::write_empty_header(batch, out);
            stats.batches_emptied += 1;
            BatchOutcome::Empty
        } else {
            BatchOutcome::Dropped
        };
        count_outcome(batch, outcome, &kept, discard_records, stats);
        Ok(outcome)
    })
}

/// What `filter_batch` wrote for a batch whose records it read, into the statistics (a rebuilt batch's
/// bytes are counted where it is built).
fn count_outcome(
    batch: &RecordBatch<'_>,
    outcome: BatchOutcome,
    kept: &KeptRecords,
    discard_records: bool,
    stats: &mut FilterStats,
) {
    match outcome {
        BatchOutcome::Whole => stats.bytes_written += batch.size_in_bytes() as u64,
        BatchOutcome::Empty => stats.bytes_written += crate::format::RECORD_BATCH_OVERHEAD as u64,
        BatchOutcome::Dropped | BatchOutcome::Rebuilt => {}
    }
    // A marker goes, or loses its record (an already emptied one kept empty again is not counted twice).
    let marker_gone = outcome == BatchOutcome::Dropped
        || (outcome == BatchOutcome::Empty && batch.records_count() > 0);
    if batch.is_control() && marker_gone {
        stats.markers_removed += 1;
    }
    if !batch.is_control() && discard_records {
        stats.aborted_removed += kept.read as u64;
    }
    stats.records_retained += kept.count as u64;
}

/// What the walk over a batch's records found.
#[derive(Debug, Default)]
struct KeptRecords {
    read: u32,
    count: u32,
    dropped_any: bool,
    tombstones: bool,
}

impl KeptRecords {
    fn note(&mut self, record: &RecordSpan<'_>, keep: bool) {
        self.read += 1;
        if keep {
            self.count += 1;
            self.tombstones |= record.value.is_none();
        } else {
            self.dropped_any = true;
        }
    }
}

/// Kafka counts nothing of a batch it drops unread; klog's report says what went.
fn count_discarded(batch: &RecordBatch<'_>, stats: &mut FilterStats) {
    let count = batch.records_count().max(0) as u64;
    stats.records_read += count;
    if batch.is_control() {
        stats.markers_removed += 1;
    } else {
        stats.aborted_removed += count;
    }
}

/// `checkBatchRetention`: (retention, `discardBatchRecords`, `containsMarkerForEmptyTxn`). Called once per
/// batch, in log order: it moves the transaction state.
fn check_batch_retention(
    batch: &RecordBatch<'_>,
    ctx: &mut FilterContext<'_>,
) -> Result<(BatchRetention, bool, bool), Error> {
    let control = batch.is_control();
    let can_discard = if control {
        ctx.txn.on_control_batch_read(batch)?
    } else {
        ctx.txn.on_batch_read(batch)
    };
    let discard_records = if control {
        can_discard && batch.delete_horizon_ms().is_some_and(|h| h <= ctx.now_ms)
    } else {
        can_discard
    };
    let last_of_producer = ctx
        .active_producers
        .get(&batch.producer_id())
        .is_some_and(|last| match last.last_data_offset {
            Some(offset) => batch.last_offset() == offset,
            None => control && batch.producer_epoch() == last.producer_epoch,
        });
    // The producer's last batch first, then the batch ending at the high watermark (Kafka's order).
    let retention = if (batch.has_producer_id() && last_of_producer)
        || batch.next_offset() == ctx.high_watermark
    {
        BatchRetention::RetainEmpty
    } else if discard_records {
        BatchRetention::Delete
    } else {
        BatchRetention::DeleteEmpty
    };
    Ok((retention, discard_records, can_discard && control))
}

/// The latest offset in `map` of each record's key, into `latest` (one per span; `i64::MIN` for a record
/// that needs no lookup: keyless, or past the map). The digests of the batch's keys are computed first and
/// their slots touched together, so their cache misses overlap rather than come one per record.
fn latest_offsets(
    map: &OffsetMap,
    spans: &[RecordSpan<'_>],
    digests: &mut Vec<(usize, KeyDigest)>,
    latest: &mut Vec<i64>,
) {
    digests.clear();
    latest.clear();
    latest.resize(spans.len(), i64::MIN);
    let end = map.latest_offset();
    digests.extend(spans.iter().enumerate().filter_map(|(i, span)| {
        let key = span.key.filter(|_| span.offset <= end)?;
        Some((i, map.digest(key)))
    }));
    let touched = digests
        .iter()
        .fold(0u8, |acc, (_, d)| acc ^ map.prefetch(d));
    std::hint::black_box(touched);
    for (i, digest) in digests.iter() {
        latest[*i] = map.get_digest(digest);
    }
}

/// `Cleaner.shouldRetainRecord` for a record of a v2 data batch that is not aborted; `latest_of_key`: the
/// map's offset for its key ([`latest_offsets`]).
fn should_retain_record(
    ctx: &FilterContext<'_>,
    batch: &RecordBatch<'_>,
    record: &RecordSpan<'_>,
    latest_of_key: i64,
    stats: &mut FilterStats,
) -> bool {
    if record.offset > ctx.map.latest_offset() {
        return true;
    }
    if record.key.is_none() {
        return false;
    }
    let latest = record.offset >= latest_of_key;
    let retain_deletes = batch.delete_horizon_ms().is_none_or(|h| ctx.now_ms < h);
    let keep = latest && (record.value.is_some() || retain_deletes);
    if latest && !keep {
        stats.tombstones_removed += 1;
    }
    keep
}

/// `buildRetainedRecordsInto`: the kept records of `batch` as one v2 batch appended to `out`; returns its
/// size. Uncompressed, the batch is built in `out` itself (its records never copied twice); each kept
/// record's key, value and headers are copied as they were written when that is what Kafka writes.
fn rebuild(
    batch: &RecordBatch<'_>,
    spans: &[RecordSpan<'_>],
    verdicts: &[bool],
    horizon_ms: i64,
    out: &mut Vec<u8>,
) -> Result<usize, Error> {
    let codec = batch.compression()?;
    let uncleanable = |e| match e {
        Error::InvalidInput(reason) => Error::Uncleanable {
            position: batch.position(),
            reason,
        },
        other => other,
    };
    let start = out.len();
    let builder = if codec == Compression::None {
        BatchBuilder::in_place(std::mem::take(out))
    } else {
        let mut builder = BatchBuilder::new(codec);
        // The kept records of a compressed batch at least start at its size.
        builder.reserve_records(batch.size_in_bytes());
        builder
    };
    let mut builder = like_source(builder, batch, horizon_ms);
    // The walk's verdicts, record by record.
    for (span, keep) in spans.iter().zip(verdicts) {
        if !keep {
            continue;
        }
        if let Err(e) = builder.append_span(span) {
            if codec == Compression::None {
                *out = builder.into_buffer();
            }
            return Err(uncleanable(e));
        }
    }
    builder.override_last_offset_delta(batch.last_offset_delta());
    if codec == Compression::None {
        let (buf, built) = builder.finish_in_place();
        *out = buf;
        built.map_err(uncleanable)?;
    } else {
        builder.build_into(out).map_err(uncleanable)?;
    }
    Ok(out.len() - start)
}

/// `builder` set up as Kafka's rebuild of `batch`: its base offset, leader epoch, producer fields, flags
/// and timestamp type, and the delete horizon when there is one.
fn like_source(builder: BatchBuilder, batch: &RecordBatch<'_>, horizon_ms: i64) -> BatchBuilder {
    let mut builder = builder
        .base_offset(batch.base_offset())
        .partition_leader_epoch(batch.partition_leader_epoch())
        .producer(
            batch.producer_id(),
            batch.producer_epoch(),
            batch.base_sequence(),
        )
        .transactional(batch.is_transactional())
        .control(batch.is_control());
    if batch.timestamp_type() == TimestampType::LogAppendTime {
        builder = builder.log_append_time(batch.max_timestamp());
    }
    if horizon_ms >= 0 {
        builder = builder.delete_horizon_ms(horizon_ms);
    }
    builder
}

/// Kafka's rules for a v0/v1 entry (a message or a compressed wrapper): never transactional, so only the
/// high-watermark rule can keep it empty, which Kafka refuses below magic 2; each record stays if it is
/// past the map or the latest of its key, a tombstone only while `retain_legacy_deletes_and_txn_markers`.
/// An entry that keeps any record would be up-converted to v2 by Kafka: refused here
/// ([`Error::Uncleanable`]); one that keeps none is dropped.
pub fn filter_legacy_entry(
    entry: &LegacyEntry<'_>,
    ctx: &mut FilterContext<'_>,
    stats: &mut FilterStats,
) -> Result<BatchOutcome, Error> {
    stats.batches_read += 1;
    stats.bytes_read += entry.size_in_bytes() as u64;
    ctx.txn.on_legacy_batch_read(entry.offset);
    let retain_empty = entry.offset.wrapping_add(1) == ctx.high_watermark;
    let mut scratch = Vec::new();
    let records = entry.records(&mut scratch)?;
    let mut kept = 0u64;
    for record in &records {
        stats.records_read += 1;
        let keep = if record.offset > ctx.map.latest_offset() {
            true
        } else if let Some(key) = record.key {
            let latest = record.offset >= ctx.map.get(key);
            let keep =
                latest && (record.value.is_some() || ctx.retain_legacy_deletes_and_txn_markers);
            if latest && !keep {
                stats.tombstones_removed += 1;
            }
            keep
        } else {
            false
        };
        kept += keep as u64;
    }
    let uncleanable = |reason| Error::Uncleanable {
        position: entry.position(),
        reason,
    };
    if kept > 0 {
        return Err(uncleanable(
            "a kept v0/v1 entry would be rewritten as a v2 batch, which klog does not do",
        ));
    }
    if retain_empty {
        return Err(uncleanable(
            "an emptied v0/v1 entry cannot be kept as an empty batch (Kafka: only for magic v2)",
        ));
    }
    Ok(BatchOutcome::Dropped)
}

/// What [`for_each_key`] calls with each (offset, key).
pub type OnKey<'f> = dyn FnMut(i64, &[u8]) -> Result<(), Error> + 'f;

/// Every (offset, key) of a data batch, keyless records skipped (decompresses within bounded memory). A
/// control batch has no data keys: `f` is not called.
pub fn for_each_key(batch: &RecordBatch<'_>, f: &mut OnKey<'_>) -> Result<(), Error> {
    if batch.is_control() {
        return Ok(());
    }
    with_scratch(|scratch| {
        let mut records =
            batch.records_with_limit(&mut scratch.inflated, DEFAULT_MAX_DECOMPRESSED_BYTES)?;
        // Only the key is needed: the span walk skips the value and headers by their lengths.
        while let Some(span) = records.next_span() {
            let span = span?;
            if let Some(key) = span.key {
                f(span.offset, key)?;
            }
        }
        Ok(())
    })
}

/// [`for_each_key`] over a batch of any magic: a v0/v1 entry's records, inflated when it is a wrapper.
pub fn for_each_key_any(batch: &AnyBatch<'_>, f: &mut OnKey<'_>) -> Result<(), Error> {
    match batch {
        AnyBatch::V2(b) => for_each_key(b, f),
        AnyBatch::Legacy(entry) => {
            let mut scratch = Vec::new();
            for record in entry.records(&mut scratch)? {
                if let Some(key) = record.key {
                    f(record.offset, key)?;
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests;
