//! The producer state of a partition log (Kafka's `UnifiedLog` over `ProducerStateManager`): producers,
//! open transactions and the last stable offset, expiration, snapshots, and the replay that rebuilds the
//! state on open.

use std::ops::Bound::{Excluded, Unbounded};
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

use crate::format::BatchStream;
use crate::producer_state::{self as snapshots, summarize};
use crate::txn_index::AbortedTxn;
use crate::validator::ValidatedBatches;
use crate::{Error, KafkaError};
use klog_psm::{BatchSummary, ProducerStateEntry, ProducerStateManager};

use super::loader::RecoveredBatches;
use super::{OpenReport, PartitionLog};

impl PartitionLog {
    pub(super) fn psm(&self) -> MutexGuard<'_, ProducerStateManager> {
        self.psm.lock().expect("producer state lock poisoned")
    }

    /// The producers the log knows, sorted by producer id.
    pub fn producers(&self) -> Vec<ProducerStateEntry> {
        self.psm().producers().map(|(_, e)| e.clone()).collect()
    }

    /// Whether the producer has an open transaction here.
    pub fn has_open_transaction(&self, producer_id: i64) -> bool {
        self.psm()
            .producers()
            .any(|(id, e)| id == producer_id && e.current_txn_first_offset().is_some())
    }

    /// Kafka's first unstable offset: the first offset of the earliest open (or not yet replicated) txn.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.psm()
            .first_unstable_offset()
            .map(|o| o.max(self.log_start_offset()))
    }

    /// `min(first unstable offset, high watermark)`: how far read_committed consumers may read.
    pub fn last_stable_offset(&self) -> i64 {
        let hw = self.high_watermark();
        self.first_unstable_offset().map_or(hw, |f| f.min(hw))
    }

    /// Forgets producers idle longer than `producer.id.expiration.ms` (never one with an open transaction).
    pub fn remove_expired_producers(&self) -> usize {
        self.psm().remove_expired_producers(self.clock.now_ms())
    }

    /// Kafka's `PeriodicProducerExpirationCheck`: once `producer.id.expiration.check.interval.ms` has
    /// passed on the log's clock since the last check (or the open), forgets the expired producers.
    /// Returns how many were removed (0 when no check was due).
    ///
    /// There is no timer thread: every append runs it after its write (one clock read and one compare
    /// when not due), and an embedder's periodic tick calls it for partitions that take no appends. So
    /// a test drives it with a `ManualClock`, and a check never races an append's plan.
    pub fn maybe_expire_producers(&self) -> usize {
        let now = self.clock.now_ms();
        let due = self
            .next_producer_expiration_check_ms
            .load(Ordering::Acquire);
        if now < due {
            return 0;
        }
        let next = now.saturating_add(self.config.producer_id_expiration_check_interval_ms);
        // One caller runs a due check; the others see it is no longer due.
        if self
            .next_producer_expiration_check_ms
            .compare_exchange(due, next, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return 0;
        }
        self.psm().remove_expired_producers(now)
    }

    /// Writes the snapshots taken at rolls (temp, fsync, rename); their directory entries are synced with
    /// the segments' by the caller (flush, close).
    pub(super) fn write_pending_snapshots(&self) -> Result<(), Error> {
        let pending = std::mem::take(
            &mut *self
                .pending_snapshots
                .lock()
                .expect("pending snapshots lock poisoned"),
        );
        for (offset, bytes) in pending {
            if offset <= self.log_end_offset() {
                snapshots::write_snapshot(self.storage.as_ref(), &self.dir, offset, &bytes)?;
                tracing::debug!(dir = %self.dir.display(), offset, "producer snapshot written");
                self.dir_dirty.store(true, Ordering::Release);
            }
        }
        Ok(())
    }

    /// Deletes snapshot files (and pending ones) above `offset`.
    pub(super) fn discard_snapshots_after(&self, offset: i64) -> Result<(), Error> {
        self.pending_snapshots
            .lock()
            .expect("pending snapshots lock poisoned")
            .retain(|(o, _)| *o <= offset);
        for o in snapshots::list_snapshots(self.storage.as_ref(), &self.dir)? {
            if o > offset {
                snapshots::delete_snapshot(self.storage.as_ref(), &self.dir, o)?;
            }
        }
        Ok(())
    }

    /// At open: stray snapshots removed (Kafka's `removeStraySnapshots`), then the state rebuilt; segments
    /// rescanned by recovery get their `.txnindex` back from the replay.
    pub(super) fn load_producer_state(
        &self,
        report: &mut OpenReport,
        recovered: RecoveredBatches,
    ) -> Result<(), Error> {
        let bases = self.segment_base_offsets();
        let leo = self.log_end_offset();
        let all = snapshots::list_snapshots(self.storage.as_ref(), &self.dir)?;
        let largest_base = bases.last().copied().unwrap_or(0);
        let strays: Vec<i64> = all.iter().copied().filter(|o| !bases.contains(o)).collect();
        let keep = strays
            .last()
            .copied()
            .filter(|o| *o > largest_base && *o <= leo);
        for o in all {
            if (strays.contains(&o) && Some(o) != keep) || o > leo {
                snapshots::delete_snapshot(self.storage.as_ref(), &self.dir, o)?;
                report.snapshots_deleted.push(o);
            }
        }
        let mut rescanned: Vec<i64> = report.recovered_segments.iter().map(|(b, _)| *b).collect();
        rescanned.extend(&report.rebuilt_indexes);
        rescanned.sort_unstable();
        let stats = self.rebuild_producer_state(leo, &rescanned, recovered)?;
        report.snapshot_loaded = stats.snapshot_loaded;
        report.snapshots_deleted.extend(stats.snapshots_deleted);
        report.batches_replayed = stats.batches_replayed;
        report.mirror_pid_resets = stats.mirror_pid_resets;
        Ok(())
    }

    /// Kafka's `rebuildProducerState(end)`: load the newest valid snapshot at or below `end` (and at or below
    /// the first rescanned segment, whose `.txnindex` the replay rebuilds), then replay every batch up to
    /// `end`, MIRROR_PID_RESET barriers included (they have producer id -1). A corrupt snapshot is deleted
    /// and the next older one tried; with none, the replay starts at the log start. When segments were
    /// rescanned, every snapshot above the first of them goes too, as Kafka's `recoverSegment` deletes
    /// them (`truncateAndReload` to the segment's base): the replay derives that state from the batches,
    /// and a snapshot left there, unread, may be corrupt or hold producers of batches the crash lost.
    pub(super) fn rebuild_producer_state(
        &self,
        end: i64,
        rescanned: &[i64],
        mut recovered: RecoveredBatches,
    ) -> Result<ReplayStats, Error> {
        let mut stats = ReplayStats::default();
        let limit = rescanned.first().map_or(end, |r| (*r).min(end));
        let log_start = self.log_start_offset();
        let now = self.clock.now_ms();
        let mut psm = self.psm();
        psm.truncate_fully_and_start_at(log_start);
        stats.snapshots_deleted = self.delete_snapshots_out_of_range(log_start, limit)?;
        for o in snapshots::list_snapshots(self.storage.as_ref(), &self.dir)?
            .into_iter()
            .rev()
        {
            match snapshots::read_snapshot(self.storage.as_ref(), &self.dir, o) {
                Ok(entries) => {
                    psm.load_snapshot(entries, o, now);
                    stats.snapshot_loaded = Some(o);
                    break;
                }
                Err(Error::CorruptFile { .. }) => {
                    snapshots::delete_snapshot(self.storage.as_ref(), &self.dir, o)?;
                    stats.snapshots_deleted.push(o);
                }
                Err(e) => return Err(e),
            }
        }
        let from = psm.map_end_offset();
        let mut stream = BatchStream::default().without_crc();
        for seg in self.segment_list() {
            let next_base = self
                .segments
                .read()
                .expect("segments lock poisoned")
                .range((Excluded(seg.base_offset()), Unbounded))
                .next()
                .map(|(b, _)| *b);
            if next_base.is_some_and(|n| n <= from) || seg.base_offset() >= end {
                continue;
            }
            let index_txns = rescanned.contains(&seg.base_offset());
            let replay = |psm: &mut ProducerStateManager,
                          stats: &mut ReplayStats,
                          summary: BatchSummary|
             -> Result<(), Error> {
                if summary.last_offset < from || summary.first_offset >= end {
                    return Ok(());
                }
                stats.batches_replayed += 1;
                stats.mirror_pid_resets += summary.is_mirror_pid_reset() as u64;
                let Ok(completed) = psm.replay(&summary) else {
                    return Ok(()); // Kafka aborts loading here; a batch it cannot parse leaves no state.
                };
                if let Some(txn) = completed.filter(|txn| txn.is_aborted && index_txns) {
                    seg.append_aborted_txn(AbortedTxn::new(
                        txn.producer_id,
                        txn.first_offset,
                        txn.last_offset,
                        txn.last_stable_offset,
                    ))?;
                }
                psm.update_map_end_offset(summary.last_offset.saturating_add(1));
                Ok(())
            };
            // A segment recovery just checked: its summaries, taken in that pass (no second read).
            if let Some(summaries) = recovered.by_segment.remove(&seg.base_offset()) {
                for (i, &summary) in summaries.iter().enumerate() {
                    if let Some(next) = summaries.get(i + 1) {
                        psm.prefetch(next.producer_id);
                    }
                    replay(&mut psm, &mut stats, summary)?;
                }
                continue;
            }
            // Otherwise the batches from the snapshot on (Kafka's `segment.read(mapEndOffset, ...)`),
            // found through the index and walked in a bounded window: a snapshot at the log end reads
            // nothing, and no copy of the whole segment is held.
            let start = if from > seg.base_offset() {
                seg.translate_offset(from, 0)?
                    .map_or(seg.size(), |p| p.position as u64)
            } else {
                0
            };
            seg.scan::<Error>(&mut stream, start, &mut |batch| {
                if let crate::format::AnyBatch::V2(b) = batch? {
                    replay(&mut psm, &mut stats, summarize(&b))?;
                }
                Ok(ControlFlow::Continue(()))
            })?;
        }
        psm.update_map_end_offset(end);
        psm.on_high_watermark_updated(self.high_watermark());
        Ok(stats)
    }

    /// Kafka's `truncateAndReload` first deletes every snapshot above the end or at or below the log start
    /// offset: a snapshot at the log start holds the producers of records that are all deleted, which the
    /// replay from the log start must not bring back. Returns the offsets deleted.
    fn delete_snapshots_out_of_range(&self, log_start: i64, end: i64) -> Result<Vec<i64>, Error> {
        let mut deleted = Vec::new();
        for o in snapshots::list_snapshots(self.storage.as_ref(), &self.dir)? {
            if o > end || o <= log_start {
                snapshots::delete_snapshot(self.storage.as_ref(), &self.dir, o)?;
                deleted.push(o);
            }
        }
        Ok(deleted)
    }

    /// Writes a synced producer snapshot at the log end unless one is there (Kafka's `takeSnapshot` at the
    /// end of loading); its directory entry becomes durable with the next flush. Returns whether a file
    /// was written.
    pub fn take_snapshot(&self) -> Result<bool, Error> {
        self.writable("taking a producer snapshot")?;
        let _writer = self.writer();
        let leo = self.log_end_offset();
        if snapshots::list_snapshots(self.storage.as_ref(), &self.dir)?.contains(&leo) {
            return Ok(false);
        }
        let bytes = klog_psm::encode_snapshot(&self.psm().snapshot());
        snapshots::write_snapshot(self.storage.as_ref(), &self.dir, leo, &bytes)?;
        // The file is synced; its directory entry is made durable by the next flush, before the recovery
        // point moves, as for the snapshots taken at rolls. A crash before it loses at most this derived
        // file (the next open replays the batches instead), and Kafka syncs no directory here either.
        self.dir_dirty.store(true, Ordering::Release);
        Ok(true)
    }
}

#[derive(Debug, Default)]
pub(super) struct ReplayStats {
    snapshot_loaded: Option<i64>,
    snapshots_deleted: Vec<i64>,
    batches_replayed: u64,
    mirror_pid_resets: u64,
}

/// Summaries of the v2 batches of a validated set (legacy batches carry no producer state).
pub(super) fn summaries(bytes: &[u8], v: &ValidatedBatches) -> Vec<BatchSummary> {
    v.batches
        .iter()
        .filter(|b| b.magic >= 2)
        .filter_map(|b| {
            crate::format::RecordBatch::parse_unchecked_crc(
                &bytes[b.position..b.position + b.size],
                0,
            )
            .ok()
        })
        .map(|(batch, _)| summarize(&batch))
        .collect()
}

pub(super) fn producer_error(e: klog_psm::Error) -> Error {
    Error::Rejected {
        error: KafkaError::from_producer_state(&e),
        message: e.to_string(),
    }
}
