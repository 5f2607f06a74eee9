//! Which offsets a pass may clean (`LogCleanerManager.cleanableOffsets`, `LogToClean`,
//! `maxCompactionDelay`): the first dirty offset from the checkpoint with Kafka's clamping, the first
//! uncleanable offset (the LSO, the high watermark, the active segment, the `min.compaction.lag.ms`
//! segment) rounded down to a segment's base offset, the clean and cleanable bytes and the dirty ratio.

use std::sync::Arc;

use crate::partition_log::PartitionLog;
use crate::segment::LogSegment;
use crate::Error;

use super::LogToClean;

/// The first dirty offset (`cleanableOffsets`): the checkpoint, or the log start offset when there is none;
/// a checkpoint below the log start or above the log end restarts at the log start and forces the
/// checkpoint to be rewritten.
pub(crate) fn first_dirty_offset(
    checkpoint: Option<i64>,
    log_start_offset: i64,
    log_end_offset: i64,
) -> (i64, bool) {
    let at = checkpoint.unwrap_or(log_start_offset);
    if at < log_start_offset || at > log_end_offset {
        (log_start_offset, true)
    } else {
        (at, false)
    }
}

/// The base offset of the segment holding `offset` among the non-active `segments` (`nonActiveLogSegmentsFrom(offset)`'s first), or the active segment's base.
fn round_down(segments: &[Arc<LogSegment>], offset: i64) -> i64 {
    let active = segments.last().map_or(0, |s| s.base_offset());
    if offset >= active {
        return active;
    }
    segments
        .iter()
        .rev()
        .find(|s| s.base_offset() <= offset)
        .or(segments.first())
        .map_or(active, |s| s.base_offset())
}

/// The `LogSegments.values(from, to)` segments: bases in `[floorKey(from), to)`.
pub(crate) fn segments_in(
    segments: &[Arc<LogSegment>],
    from: i64,
    to: i64,
) -> Vec<Arc<LogSegment>> {
    if from >= to {
        return Vec::new();
    }
    let floor = segments
        .iter()
        .rev()
        .find(|s| s.base_offset() <= from)
        .map_or(i64::MIN, |s| s.base_offset());
    segments
        .iter()
        .filter(|s| s.base_offset() >= floor && s.base_offset() < to)
        .cloned()
        .collect()
}

/// The first batch's `maxTimestamp` (`LogSegment.getFirstBatchTimestamp`), or `i64::MAX` when there is
/// no v2 batch at the start or its timestamp is negative.
fn first_batch_timestamp(segment: &LogSegment) -> Result<i64, Error> {
    if segment.size() < 61 {
        return Ok(i64::MAX);
    }
    let header = segment.read_bytes(0, 61)?;
    if header.len() < 43 || header[16] != 2 {
        return Ok(i64::MAX);
    }
    let mut ts = [0u8; 8];
    ts.copy_from_slice(&header[35..43]);
    let ts = i64::from_be_bytes(ts);
    Ok(if ts < 0 { i64::MAX } else { ts })
}

impl PartitionLog {
    /// What a pass would clean, as Kafka's `LogCleanerManager.cleanableOffsets` and `LogToClean` compute
    /// it, given this partition's `cleaner-offset-checkpoint` entry and the clock reading `now_ms`.
    pub fn cleanable(&self, checkpoint: Option<i64>, now_ms: i64) -> Result<LogToClean, Error> {
        let segments = self.segment_list();
        let active_base = segments.last().map_or(0, |s| s.base_offset());
        let (first_dirty, force_checkpoint) =
            first_dirty_offset(checkpoint, self.log_start_offset(), self.log_end_offset());
        let config = self.config();
        let mut uncleanable = self.last_stable_offset().min(active_base);
        let min_lag = config.min_compaction_lag_ms.max(0);
        if min_lag > 0 {
            let dirty = segments_in(&segments, first_dirty, active_base);
            for seg in dirty {
                if seg.largest_timestamp()? > now_ms.saturating_sub(min_lag) {
                    uncleanable = uncleanable.min(seg.base_offset());
                    break;
                }
            }
        }
        let first_uncleanable = round_down(&segments, first_dirty.max(uncleanable));
        let clean_bytes: u64 = segments_in(&segments, i64::MIN, first_dirty)
            .iter()
            .map(|s| s.size())
            .sum();
        let dirty = segments_in(
            &segments,
            first_dirty.min(first_uncleanable),
            first_uncleanable,
        );
        let cleanable_bytes: u64 = dirty.iter().map(|s| s.size()).sum();
        let total = clean_bytes + cleanable_bytes;
        let cleanable_ratio = if total == 0 {
            0.0
        } else {
            cleanable_bytes as f64 / total as f64
        };
        let needs_compaction_now = self.max_compaction_delay(&dirty, now_ms)? > 0;
        Ok(LogToClean {
            first_dirty_offset: first_dirty,
            first_uncleanable_offset: first_uncleanable,
            clean_bytes,
            cleanable_bytes,
            cleanable_ratio,
            needs_compaction_now,
            force_checkpoint,
        })
    }

    /// `LogCleanerManager.maxCompactionDelay` over the dirty non-active segments (KIP-354).
    fn max_compaction_delay(&self, dirty: &[Arc<LogSegment>], now_ms: i64) -> Result<i64, Error> {
        let mut earliest = i64::MAX;
        for seg in dirty {
            let ts = first_batch_timestamp(seg)?;
            if ts > 0 {
                earliest = earliest.min(ts);
            }
        }
        let clean_until = now_ms.saturating_sub(self.config().max_compaction_lag_ms.max(0));
        Ok(if earliest < clean_until {
            clean_until - earliest
        } else {
            0
        })
    }
}

#[cfg(test)]
mod tests {
    use super::first_dirty_offset;

    #[test]
    fn the_checkpoint_is_clamped_to_the_log_as_kafka_does() {
        assert_eq!(first_dirty_offset(None, 5, 10), (5, false));
        assert_eq!(first_dirty_offset(Some(7), 5, 10), (7, false));
        assert_eq!(first_dirty_offset(Some(10), 5, 10), (10, false));
        assert_eq!(first_dirty_offset(Some(3), 5, 10), (5, true));
        assert_eq!(first_dirty_offset(Some(11), 5, 10), (5, true));
    }
}
