//! Truncation (Kafka's `UnifiedLog.truncateTo` / `truncateFullyAndStartAt`): cutting the log back to an
//! offset, or emptying it and starting at a new one.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::error::IoContext;
use crate::Error;

use super::loader::RecoveredBatches;
use super::PartitionLog;

impl PartitionLog {
    fn truncate_to_inner(&self, offset: i64) -> Result<(), Error> {
        let _writer = self.writer();
        let leo = self.log_end_offset();
        if offset >= leo {
            return self.epochs().truncate_from_end(leo);
        }
        let first_base = self.segment_base_offsets()[0];
        if offset < first_base {
            return self.truncate_fully_locked(offset);
        }
        tracing::info!(dir = %self.dir.display(), offset, log_end_offset = leo, "truncating the log");
        let segments = self.segment_list();
        let mut deleted = false;
        for seg in segments.iter().filter(|s| s.base_offset() > offset) {
            self.segments
                .write()
                .expect("segments lock poisoned")
                .remove(&seg.base_offset());
            seg.delete()?;
            deleted = true;
        }
        self.discard_snapshots_after(offset)?;
        if deleted {
            self.storage.sync_dir(&self.dir).at(&self.dir)?;
        }
        self.active_segment().truncate_to(offset)?;
        // Truncation is batch-granular: inside a batch, the whole batch goes and the log ends before it.
        let offset = self.compute_log_end_offset()?.min(offset);
        self.log_end_offset.store(offset, Ordering::Release);
        self.recovery_point.fetch_min(offset, Ordering::AcqRel);
        self.epochs().truncate_from_end(offset)?;
        self.log_start_offset.fetch_min(offset, Ordering::AcqRel);
        self.high_watermark.fetch_min(offset, Ordering::AcqRel);
        self.rebuild_producer_state(offset, &[], RecoveredBatches::default())?;
        Ok(())
    }

    fn truncate_fully_and_start_at_inner(&self, offset: i64) -> Result<(), Error> {
        let _writer = self.writer();
        self.truncate_fully_locked(offset)
    }

    fn truncate_fully_locked(&self, offset: i64) -> Result<(), Error> {
        tracing::info!(dir = %self.dir.display(), offset, "truncating the whole log and starting it at an offset");
        let old = self.segment_list();
        let fresh = Arc::new(self.new_segment(offset)?);
        let mut map = BTreeMap::new();
        map.insert(offset, fresh);
        *self.segments.write().expect("segments lock poisoned") = map;
        for seg in old.iter().filter(|s| s.base_offset() != offset) {
            seg.delete()?;
        }
        self.discard_snapshots_after(i64::MIN)?;
        self.storage.sync_dir(&self.dir).at(&self.dir)?;
        self.epochs().clear()?;
        self.psm().truncate_fully_and_start_at(offset);
        self.log_end_offset.store(offset, Ordering::Release);
        self.log_start_offset.store(offset, Ordering::Release);
        self.high_watermark.store(offset, Ordering::Release);
        self.recovery_point.store(offset, Ordering::Release);
        Ok(())
    }

    /// Removes every batch at or after `offset` (a follower truncating to its leader).
    pub fn truncate_to(&self, offset: i64) -> Result<(), Error> {
        self.writable("truncate")?;
        self.guarded(|| self.truncate_to_inner(offset))
    }

    /// Deletes every segment and starts an empty log at `offset`.
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<(), Error> {
        self.writable("truncate")?;
        self.guarded(|| self.truncate_fully_and_start_at_inner(offset))
    }
}
