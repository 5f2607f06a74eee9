//! Grouping the segments a pass recopies (`Cleaner.groupSegmentsBySize`) and writing one group into one
//! `.cleaned` segment (`Cleaner.cleanSegments` / `cleanInto`): every batch of the group's segments, in
//! log order, through the per-batch filter, appended as Kafka's `LogSegment.append` appends (the same
//! per-batch index rule), the aborted transactions whose markers stay in its `.txnindex`, then the
//! closing time-index entry, the trim and the flush (`onBecomeInactiveSegment`, `flush`).

use std::ops::ControlFlow;

use crate::format::{AnyBatch, BatchStream};
use crate::segment::LogSegment;
use crate::Error;

use super::filter::{filter_batch, filter_legacy_entry, FilterContext, FilterStats};

/// What `groupSegmentsBySize` reads of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentSizes {
    /// Its base offset.
    pub base_offset: i64,
    /// Its `.log` size.
    pub log_bytes: u64,
    /// Its offset index's `sizeInBytes` (entries x 8).
    pub offset_index_bytes: u64,
    /// Its time index's `sizeInBytes` (entries x 12).
    pub time_index_bytes: u64,
}

impl SegmentSizes {
    pub(crate) fn of(segment: &LogSegment) -> Result<Self, Error> {
        let (offset_index_bytes, time_index_bytes) = segment.index_sizes_in_bytes()?;
        Ok(SegmentSizes {
            base_offset: segment.base_offset(),
            log_bytes: segment.size(),
            offset_index_bytes,
            time_index_bytes,
        })
    }
}

/// Kafka's `groupSegmentsBySize`: consecutive segments whose summed `.log` sizes stay within
/// `segment.bytes`, whose summed index sizes stay within `segment.index.bytes`, and whose offsets stay
/// within an int32 of the group's first base offset (estimated by the next segment's base, or the first
/// uncleanable offset for the last one; an empty segment is not checked). Returns index ranges.
pub(crate) fn group_segments_by_size(
    segments: &[SegmentSizes],
    max_size: u64,
    max_index_size: u64,
    first_uncleanable_offset: i64,
) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let mut start = 0;
    while start < segments.len() {
        let first = segments[start];
        let (mut log, mut index, mut time) = (
            first.log_bytes,
            first.offset_index_bytes,
            first.time_index_bytes,
        );
        let mut end = start + 1;
        while let Some(next) = segments.get(end) {
            let last_offset = segments
                .get(end + 1)
                .map_or(first_uncleanable_offset, |s| s.base_offset)
                .saturating_sub(1);
            let fits = log + next.log_bytes <= max_size
                && index + next.offset_index_bytes <= max_index_size
                && time + next.time_index_bytes <= max_index_size
                && (next.log_bytes == 0
                    || last_offset.saturating_sub(first.base_offset) <= i32::MAX as i64);
            if !fits {
                break;
            }
            log += next.log_bytes;
            index += next.offset_index_bytes;
            time += next.time_index_bytes;
            end += 1;
        }
        groups.push(start..end);
        start = end;
    }
    groups
}

/// Where a group's retained batches go: a `.cleaned` segment, or nowhere (a dry run counts them).
pub(crate) struct CleanedSink {
    segment: Option<LogSegment>,
    base_offset: i64,
    /// The last offset of the last `AbortedTxn` put in the cleaned `.txnindex`.
    last_txn_offset: i64,
    pending: Vec<u8>,
    pending_last_offset: i64,
    flush_bytes: usize,
    /// Bytes the group's cleaned `.log` holds.
    pub bytes: u64,
    /// The read window of `clean_into`, kept across the group's segments.
    stream: BatchStream,
}

impl CleanedSink {
    /// `segment`: the `.cleaned` segment to write (None for a dry run). Retained batches are appended in
    /// chunks of about `flush_bytes` (the write buffer); the index entries do not depend on the chunks.
    pub(crate) fn new(segment: Option<LogSegment>, base_offset: i64, flush_bytes: usize) -> Self {
        CleanedSink {
            segment,
            base_offset,
            last_txn_offset: i64::MIN,
            pending: Vec::new(),
            pending_last_offset: -1,
            flush_bytes: flush_bytes.max(1),
            bytes: 0,
            stream: BatchStream::new(flush_bytes.max(1)),
        }
    }

    fn flush_pending(&mut self) -> Result<(), Error> {
        if self.pending.is_empty() {
            return Ok(());
        }
        if let Some(seg) = &self.segment {
            seg.append(self.pending_last_offset, &self.pending)?;
        }
        self.bytes += self.pending.len() as u64;
        self.pending.clear();
        Ok(())
    }

    /// The segment, closed as Kafka's `onBecomeInactiveSegment` then `flush` leave it (None for a dry run).
    pub(crate) fn finish(mut self) -> Result<(Option<LogSegment>, u64), Error> {
        self.flush_pending()?;
        if let Some(seg) = &self.segment {
            seg.on_become_inactive()?;
            seg.flush()?;
        }
        Ok((self.segment, self.bytes))
    }
}

/// `cleanInto`: every batch of `segment` through the filter into `sink`. `checked`: the byte range whose
/// CRCs this pass already checked in this segment (see `pass.rs`'s `CrcChecked` for why that holds); its
/// batches are read without rechecking, every other byte with.
pub(crate) fn clean_into(
    segment: &LogSegment,
    checked: Option<(u64, u64)>,
    ctx: &mut FilterContext<'_>,
    sink: &mut CleanedSink,
    stats: &mut FilterStats,
) -> Result<(), Error> {
    // The sink's stream, reused by each segment of the group (its buffer zero-filled once).
    let mut stream = std::mem::take(&mut sink.stream);
    let mut on_batch = |batch: Result<AnyBatch<'_>, Error>| -> Result<ControlFlow<()>, Error> {
        clean_batch(&batch?, ctx, sink, stats)?;
        Ok(ControlFlow::Continue(()))
    };
    let scanned = match checked {
        Some((from, to)) => segment
            .scan_to(&mut stream, 0, from, &mut on_batch)
            .and_then(|_| {
                stream.set_verify_crc(false);
                let rest = segment.scan_to(&mut stream, from, to, &mut on_batch);
                stream.set_verify_crc(true);
                rest
            }),
        None => segment.scan(&mut stream, 0, &mut on_batch),
    }
    .map_err(|e| in_segment(segment, e));
    sink.stream = stream;
    scanned?;
    sink.flush_pending()
}

/// A corrupt batch's error naming the segment file it is in (the scan knows only the position).
pub(crate) fn in_segment(segment: &LogSegment, e: Error) -> Error {
    match e {
        Error::CorruptBatch { position, reason } => Error::CorruptSegmentBatch {
            path: segment.log_path_of(),
            position,
            reason,
        },
        e => e,
    }
}

fn clean_batch(
    batch: &AnyBatch<'_>,
    ctx: &mut FilterContext<'_>,
    sink: &mut CleanedSink,
    stats: &mut FilterStats,
) -> Result<(), Error> {
    let before = sink.pending.len();
    match batch {
        AnyBatch::V2(b) => filter_batch(b, ctx, &mut sink.pending, stats)?,
        AnyBatch::Legacy(e) => filter_legacy_entry(e, ctx, stats)?,
    };
    if sink.pending.len() > before {
        // Grouping keeps a group's offsets within an int32 of its base; bytes that break it are refused
        // (Kafka splits the segment and aborts the pass: `LogSegmentOffsetOverflowException`).
        if batch.last_offset().saturating_sub(sink.base_offset) > i32::MAX as i64 {
            return Err(Error::Uncleanable {
                position: batch.position(),
                reason:
                    "its offsets overflow the cleaned segment's base offset by more than an int32",
            });
        }
        sink.pending_last_offset = batch.last_offset();
    }
    // The ABORT markers kept because data of their transaction remains: their entries go to the cleaned
    // `.txnindex` (Kafka's `cleanedIndex`), in marker order.
    for txn in ctx.txn.take_retained_aborted_transactions() {
        if txn.last_offset.get() <= sink.last_txn_offset {
            return Err(Error::Uncleanable {
                position: batch.position(),
                reason:
                    "the aborted transactions of its segments' .txnindex are not in marker order",
            });
        }
        sink.last_txn_offset = txn.last_offset.get();
        if let Some(seg) = &sink.segment {
            seg.append_aborted_txn(txn)?;
        }
    }
    if sink.pending.len() >= sink.flush_bytes {
        sink.flush_pending()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{group_segments_by_size, SegmentSizes};

    fn seg(base_offset: i64, log_bytes: u64) -> SegmentSizes {
        SegmentSizes {
            base_offset,
            log_bytes,
            offset_index_bytes: 8,
            time_index_bytes: 12,
        }
    }

    #[test]
    fn groups_stop_at_segment_bytes() {
        let segs = [seg(0, 400), seg(10, 400), seg(20, 400), seg(30, 100)];
        let groups = group_segments_by_size(&segs, 1000, 1 << 20, 40);
        assert_eq!(groups, vec![0..2, 2..4]);
    }

    #[test]
    fn groups_stop_at_the_index_bytes() {
        let segs = [seg(0, 1), seg(10, 1), seg(20, 1)];
        // Two time indexes of 12 bytes fit in 24, three do not.
        let groups = group_segments_by_size(&segs, 1 << 20, 24, 30);
        assert_eq!(groups, vec![0..2, 2..3]);
    }

    #[test]
    fn groups_keep_offsets_within_an_int32_of_the_first_base() {
        let big = i32::MAX as i64;
        let segs = [seg(0, 1), seg(big - 10, 1), seg(big + 5, 1)];
        // Segment 1 ends before segment 2's base (big + 4 > big): it starts a new group.
        let groups = group_segments_by_size(&segs, 1 << 20, 1 << 20, big + 100);
        assert_eq!(groups, vec![0..1, 1..3]);
        // An empty segment is not checked.
        let segs = [seg(0, 1), seg(big - 10, 0), seg(big + 5, 1)];
        let groups = group_segments_by_size(&segs, 1 << 20, 1 << 20, big + 6);
        assert_eq!(groups, vec![0..2, 2..3]);
    }
}
