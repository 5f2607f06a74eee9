//! Retention (Kafka's `UnifiedLog.deleteOldSegments` / `maybeIncrementLogStartOffset`): moving the log
//! start offset, deleting segments past `retention.ms` / `retention.bytes` or below the log start, and
//! unloading cold segments.

use std::sync::atomic::Ordering;

use crate::error::IoContext;
use crate::producer_state::{self as snapshots};
use crate::{Error, KafkaError};

use super::PartitionLog;

impl PartitionLog {
    fn increment_log_start_offset_inner(&self, offset: i64) -> Result<bool, Error> {
        let _writer = self.writer();
        if offset > self.high_watermark() {
            return Err(Error::rejected(
                KafkaError::OffsetOutOfRange,
                format!(
                    "log start offset {offset} is above the high watermark {}",
                    self.high_watermark()
                ),
            ));
        }
        if offset <= self.log_start_offset() {
            return Ok(false);
        }
        tracing::debug!(dir = %self.dir.display(), log_start_offset = offset, "log start offset incremented");
        self.log_start_offset.store(offset, Ordering::Release);
        self.recovery_point
            .fetch_max(offset.min(self.log_end_offset()), Ordering::AcqRel);
        self.epochs().truncate_from_start(offset)?;
        self.psm().on_log_start_offset_incremented(offset);
        Ok(true)
    }

    fn delete_old_segments_inner(&self) -> Result<Vec<i64>, Error> {
        let _writer = self.writer();
        let now = self.clock.now_ms();
        let segments = self.segment_list();
        let hw = self.high_watermark();
        let log_start = self.log_start_offset();
        // Kafka applies retention.bytes / retention.ms only with `delete` in cleanup.policy
        // (`UnifiedLog.deleteOldSegments`): a compact-only log keeps its data for the cleaner.
        let by_retention = self.config.cleanup_policy.delete;
        let mut size_excess = if by_retention && self.config.retention_bytes >= 0 {
            self.size_in_bytes() as i64 - self.config.retention_bytes
        } else {
            -1
        };
        let mut deletable = Vec::new();
        for (i, seg) in segments.iter().enumerate() {
            let upper = segments
                .get(i + 1)
                .map_or(self.log_end_offset(), |n| n.base_offset());
            let is_last = i + 1 == segments.len();
            if hw < upper || (is_last && seg.size() == 0) {
                break;
            }
            let by_start = !is_last && upper <= log_start;
            let by_size = size_excess >= 0 && size_excess - seg.size() as i64 >= 0;
            let by_time = by_retention
                && self.config.retention_ms >= 0
                && now - seg.largest_timestamp()? > self.config.retention_ms;
            if !(by_start || by_size || by_time) {
                break;
            }
            if by_size {
                size_excess -= seg.size() as i64;
            }
            deletable.push(seg.clone());
        }
        if deletable.len() == segments.len() {
            self.roll_at(self.log_end_offset(), &mut self.psm())?;
        }
        for seg in &deletable {
            self.segments
                .write()
                .expect("segments lock poisoned")
                .remove(&seg.base_offset());
            seg.delete()?;
        }
        if !deletable.is_empty() {
            tracing::info!(
                dir = %self.dir.display(),
                segments = ?deletable.iter().map(|s| s.base_offset()).collect::<Vec<_>>(),
                "retention deleted segments"
            );
            let first = self.segment_base_offsets()[0];
            self.log_start_offset.fetch_max(first, Ordering::AcqRel);
            self.recovery_point
                .fetch_max(first.min(self.log_end_offset()), Ordering::AcqRel);
            self.epochs().truncate_from_start(self.log_start_offset())?;
            self.psm()
                .on_log_start_offset_incremented(self.log_start_offset());
            // Kafka deletes the snapshot named after each deleted segment.
            for seg in &deletable {
                snapshots::delete_snapshot(self.storage.as_ref(), &self.dir, seg.base_offset())?;
            }
            self.storage.sync_dir(&self.dir).at(&self.dir)?;
        }
        Ok(deletable.iter().map(|s| s.base_offset()).collect())
    }

    /// Unloads the indexes and maps of sealed segments (cold partitions hold no memory or maps).
    pub fn unload_cold_segments(&self) -> Result<(), Error> {
        for seg in self.segment_list() {
            seg.unload()?;
        }
        Ok(())
    }

    /// Raises the log start offset (DeleteRecords, or a mirror following its source); never above the HW.
    pub fn increment_log_start_offset(&self, offset: i64) -> Result<bool, Error> {
        self.writable("raising the log start offset")?;
        self.guarded(|| self.increment_log_start_offset_inner(offset))
    }

    /// Retention (`deleteOldSegments`): segments wholly below the log start offset, then, when
    /// `cleanup.policy` has `delete`, by size (`retention.bytes`) and by time (`retention.ms`). Never the active segment's data past the high
    /// watermark. Returns the deleted base offsets.
    pub fn delete_old_segments(&self) -> Result<Vec<i64>, Error> {
        self.writable("retention")?;
        self.guarded(|| self.delete_old_segments_inner())
    }
}
