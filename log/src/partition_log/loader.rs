//! Opening a partition log (Kafka's `LogLoader`): the writer's directory claim, loading the segments,
//! the unclean open's recovery of the unflushed segments, the cuts it makes, and the summaries its pass
//! hands to the producer-state replay.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use crate::checkpoint;
use crate::cleaner::swap::complete_swaps;
use crate::clock::{Clock, SystemClock};
use crate::config::LogConfig;
use crate::dir_lock::{DirLock, PartitionClaim};
use crate::error::IoContext;
use crate::io::Storage;
use crate::leader_epoch::LeaderEpochCache;
use crate::producer_state::summarize;
use crate::segment::{parse_base_offset, LogSegment};
use crate::Error;
use klog_psm::{BatchSummary, ProducerStateManager, PsmConfig};

use super::{
    partition_dir_name, read_only_view, FlushState, OpenOptions, OpenReport, PartitionLog,
    SegmentTruncation, TruncationReason,
};

/// A writer's hold on `dir`: its log directory's `.lock` (the parent, created if missing) and this
/// process's claim on the partition (the directory is created). A reader takes neither, and the directory
/// must exist.
fn claim_dir(
    storage: &dyn Storage,
    dir: &Path,
) -> Result<Option<(PartitionClaim, Arc<DirLock>)>, Error> {
    if storage.is_read_only() {
        return match storage.list(dir) {
            Ok(_) => Ok(None),
            Err(e) => Err(Error::io(dir, e)),
        };
    }
    let root = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    storage.create_dir_all(root).at(root)?;
    let lock = DirLock::acquire(storage, root)?;
    storage.create_dir_all(dir).at(dir)?;
    Ok(Some((lock.claim_partition(dir)?, lock)))
}

impl PartitionLog {
    /// Opens (or creates) the partition directory `dir`, named `<topic>-<partition>`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use klog_log::{config::LogConfig, io::StdStorage, partition_log::{OpenOptions, PartitionLog}};
    /// # use klog_log::format::{BatchBuilder, Compression};
    /// # let root = std::env::temp_dir().join(format!("klog-doc-{}-{}", "open", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&root);
    /// let (log, report) = PartitionLog::open(
    ///     Arc::new(StdStorage),
    ///     &root.join("orders-0"),
    ///     LogConfig::default(),
    ///     OpenOptions::default(), // where the log starts: a `LogDir` fills it from its checkpoints
    /// )?;
    /// assert!(report.truncations.is_empty()); // what recovery cut, if anything
    /// assert_eq!((log.topic(), log.partition()), ("orders", 0));
    /// # log.close()?;
    /// # std::fs::remove_dir_all(&root).unwrap();
    /// # Ok::<(), klog_log::Error>(())
    /// ```
    pub fn open(
        storage: Arc<dyn Storage>,
        dir: &Path,
        config: LogConfig,
        options: OpenOptions,
    ) -> Result<(Self, OpenReport), Error> {
        Self::open_with_clock(storage, dir, config, options, Arc::new(SystemClock))
    }

    /// Opens `dir` for reading only: no lock, and nothing on disk is created, recovered, truncated or
    /// rewritten. The open runs as a writer's would (a torn tail found, indexes rebuilt, producer state
    /// replayed) but in memory ([`ReadOnlyStorage`](crate::io::ReadOnlyStorage)), so reads see the log a writer would see after
    /// recovery, and [`OpenReport`] says what recovery would do. Works on a read-only file system and
    /// beside a running writer (whose unflushed tail is read as it is). Every change is refused.
    pub fn open_read_only(
        storage: Arc<dyn Storage>,
        dir: &Path,
        config: LogConfig,
        options: OpenOptions,
    ) -> Result<(Self, OpenReport), Error> {
        let storage = read_only_view(storage);
        Self::open_with_clock(storage, dir, config, options, Arc::new(SystemClock))
    }

    /// Opens `dir` as its writer (or, through a [`ReadOnlyStorage`](crate::io::ReadOnlyStorage), as a reader: see
    /// [`PartitionLog::open_read_only`]). A writer holds the log directory's `.lock` (shared with the
    /// `LogDir` and the other partitions this process opened there) and refuses a second writable open
    /// of the same partition in this process.
    pub fn open_with_clock(
        storage: Arc<dyn Storage>,
        dir: &Path,
        config: LogConfig,
        options: OpenOptions,
        clock: Arc<dyn Clock>,
    ) -> Result<(Self, OpenReport), Error> {
        let (topic, partition) = partition_dir_name(dir)?;
        let _span = tracing::info_span!("partition_log_open", dir = %dir.display()).entered();
        let read_only = storage.is_read_only();
        let claim = claim_dir(storage.as_ref(), dir)?;
        let epochs = LeaderEpochCache::open(
            storage.clone(),
            dir.join(checkpoint::LEADER_EPOCH_CHECKPOINT),
        )?;
        let producer_id_expiration_ms = config.producer_id_expiration_ms;
        let log = PartitionLog {
            dir: dir.to_owned(),
            topic,
            partition,
            storage,
            config,
            clock,
            segments: RwLock::new(BTreeMap::new()),
            writer: Mutex::new(()),
            last_flush_ms: AtomicI64::new(0),
            next_producer_expiration_check_ms: AtomicI64::new(i64::MAX),
            log_end_offset: AtomicI64::new(0),
            high_watermark: AtomicI64::new(0),
            log_start_offset: AtomicI64::new(options.log_start_offset),
            recovery_point: AtomicI64::new(options.recovery_point),
            epochs: Mutex::new(epochs),
            psm: Mutex::new(ProducerStateManager::new(PsmConfig {
                producer_id_expiration_ms,
                ..PsmConfig::default()
            })),
            pending_snapshots: Mutex::new(Vec::new()),
            flush_lock: Mutex::new(FlushState::default()),
            flush_done: Condvar::new(),
            flush_files: Mutex::new(()),
            appends_in_progress: AtomicUsize::new(0),
            appends_started: std::sync::atomic::AtomicU64::new(0),
            // Entries created before this open (by an earlier process) may not be durable yet.
            dir_dirty: std::sync::atomic::AtomicBool::new(true),
            failed: std::sync::atomic::AtomicBool::new(false),
            write_mode: std::sync::atomic::AtomicU8::new(0),
            read_only,
            claim: Mutex::new(claim),
            closed: std::sync::atomic::AtomicBool::new(false),
            cleaning: std::sync::atomic::AtomicBool::new(false),
        };
        let report = log.load(options)?;
        let now = log.clock.now_ms();
        log.last_flush_ms.store(now, Ordering::Release);
        // Kafka schedules the first check one interval after the log is created.
        let first_check = now.saturating_add(log.config.producer_id_expiration_check_interval_ms);
        log.next_producer_expiration_check_ms
            .store(first_check, Ordering::Release);
        tracing::debug!(
            read_only,
            clean_shutdown = options.clean_shutdown,
            segments = report.segments,
            log_start_offset = log.log_start_offset(),
            log_end_offset = log.log_end_offset(),
            rebuilt_indexes = report.rebuilt_indexes.len(),
            recovered_segments = report.recovered_segments.len(),
            truncations = report.truncations.len(),
            "partition log opened"
        );
        Ok((log, report))
    }

    /// Loads the segments: stray temp files removed, indexes without a `.log` removed, missing or corrupt
    /// indexes rebuilt, and after an unclean shutdown every segment from the recovery point rescanned.
    /// The leader-epoch cache is then derived from the batches those scans read.
    pub(super) fn load(&self, options: OpenOptions) -> Result<OpenReport, Error> {
        let mut report = OpenReport::default();
        // A cleaner's swap a crash interrupted is finished first: its `.deleted` files may be the only
        // copy of segments a `.swap` has not yet replaced (`cleaner/swap.rs`).
        let swaps = complete_swaps(self.storage.as_ref(), &self.dir)?;
        if !swaps.completed.is_empty() || !swaps.deleted.is_empty() {
            tracing::info!(dir = %self.dir.display(), completed = ?swaps.completed, deleted = ?swaps.deleted, "finished a segment swap a crash interrupted");
        }
        let names = self.storage.list(&self.dir).at(&self.dir)?;
        let mut bases = Vec::new();
        for name in &names {
            let path = self.dir.join(name);
            if name.ends_with(".tmp") || name.ends_with(".deleted") || name.ends_with(".cleaned") {
                self.storage.remove(&path).at(&path)?;
            } else if let Some(base) = parse_base_offset(name) {
                if name.ends_with(".log") && name.len() == 24 {
                    bases.push(base);
                }
            }
        }
        for name in &names {
            let orphan = [".index", ".timeindex", ".txnindex"]
                .iter()
                .any(|s| name.ends_with(s))
                && parse_base_offset(name).is_some_and(|b| !bases.contains(&b));
            if orphan {
                let path = self.dir.join(name);
                self.storage.remove(&path).at(&path)?;
            }
        }
        bases.sort_unstable();
        let now = self.clock.now_ms();
        let last = bases.last().copied();
        let rescan_from = (!options.clean_shutdown)
            .then(|| first_unflushed_segment(&bases, options.recovery_point))
            .flatten();
        let mut segments = BTreeMap::new();
        let mut recovered = RecoveredBatches::default();
        for &base in &bases {
            let rescanned = rescan_from.is_some_and(|from| base >= from);
            let seg = self.open_segment(
                base,
                Some(base) == last,
                rescanned,
                now,
                &mut report,
                &mut recovered,
            )?;
            segments.insert(base, Arc::new(seg));
        }
        *self.segments.write().expect("segments lock poisoned") = segments;
        let rescanned_epochs = match rescan_from {
            Some(from) => self.recover_unflushed(from, &mut report, &mut recovered)?,
            None => Vec::new(),
        };
        // Segments whose indexes alone were rebuilt lie below the rescan (or there is none).
        let rebuilt_epochs: Vec<(i32, i64)> = recovered
            .rebuilt
            .values()
            .flat_map(|r| r.epochs.iter().copied())
            .collect();
        self.epochs().derive(
            rescan_from.unwrap_or(i64::MAX),
            rebuilt_epochs.into_iter().chain(rescanned_epochs),
        )?;
        self.delete_segments_if_log_start_beyond_end(
            options.log_start_offset,
            &mut report,
            &mut recovered,
        )?;
        if self
            .segments
            .read()
            .expect("segments lock poisoned")
            .is_empty()
        {
            let base = options.log_start_offset.max(0);
            let seg = self.new_segment(base)?;
            self.segments
                .write()
                .expect("segments lock poisoned")
                .insert(base, Arc::new(seg));
        }
        let leo = self.compute_log_end_offset()?;
        self.log_end_offset.store(leo, Ordering::Release);
        let first_base = *self
            .segments
            .read()
            .expect("segments lock poisoned")
            .keys()
            .next()
            .expect("non-empty");
        let log_start = options.log_start_offset.max(first_base);
        self.log_start_offset.store(log_start, Ordering::Release);
        self.high_watermark.store(log_start, Ordering::Release);
        let rp = if options.clean_shutdown {
            leo
        } else {
            options.recovery_point.min(leo)
        };
        self.recovery_point.store(rp, Ordering::Release);
        let mut epochs = self.epochs();
        epochs.truncate_from_end(leo)?;
        epochs.truncate_from_start(log_start)?;
        report.segments = self.segments.read().expect("segments lock poisoned").len();
        drop(epochs);
        self.load_producer_state(&mut report, recovered)?;
        Ok(report)
    }

    /// Opens the segment at `base`, rebuilding missing or corrupt indexes from its `.log`. A segment the
    /// unclean rescan covers (`rescanned`) gets empty indexes here and is rebuilt by that rescan, in
    /// offset order with the others, so its cut deletes the later segments as any rescanned segment's
    /// does.
    fn open_segment(
        &self,
        base: i64,
        active: bool,
        rescanned: bool,
        now: i64,
        report: &mut OpenReport,
        recovered: &mut RecoveredBatches,
    ) -> Result<LogSegment, Error> {
        let path = LogSegment::log_path(&self.dir, base);
        let size = self.storage.open(&path).at(&path)?.len().at(&path)?;
        let c = &self.config;
        let opened = LogSegment::open(
            self.storage.clone(),
            &self.dir,
            base,
            size,
            active,
            c.index_interval_bytes,
            c.segment_index_bytes,
            now,
        );
        let seg = match opened {
            Ok(seg) if seg.sanity_check().is_ok() => return Ok(seg),
            Ok(_) | Err(Error::Io { .. }) | Err(Error::CorruptIndex { .. }) => {
                // Missing or corrupt indexes: recreate them and rebuild from the `.log`.
                for p in [
                    LogSegment::index_path(&self.dir, base),
                    LogSegment::time_index_path(&self.dir, base),
                ] {
                    match self.storage.remove(&p) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(Error::io(&p, e)),
                    }
                    self.storage.create(&p).at(&p)?;
                }
                LogSegment::open(
                    self.storage.clone(),
                    &self.dir,
                    base,
                    size,
                    true,
                    c.index_interval_bytes,
                    c.segment_index_bytes,
                    now,
                )?
            }
            Err(e) => return Err(e),
        };
        report.rebuilt_indexes.push(base);
        if rescanned {
            recovered.deferred.insert(base);
            return Ok(seg);
        }
        let recovery = recovered.recover(&seg, &mut || Ok(()))?;
        report.record_scan(base, &recovery);
        recovered.rebuilt.insert(base, recovery);
        if !active {
            seg.on_become_inactive()?;
        }
        Ok(seg)
    }

    /// Rescans every segment from `from` (the one holding the last flushed offset); cuts at the first
    /// invalid batch and deletes every later segment. An offset gap between intact segments cuts nothing
    /// (Kafka's `recoverLog` deletes the later segments only after a segment that lost bytes): a
    /// compacted or mirrored log has such gaps, and they cannot be told apart from unflushed batches
    /// lost whole at a segment's end, which were never promised durable (docs/durability.md says why
    /// keeping what follows them is right). Returns the epochs of every batch scanned, in order.
    fn recover_unflushed(
        &self,
        from: i64,
        report: &mut OpenReport,
        recovered: &mut RecoveredBatches,
    ) -> Result<Vec<(i32, i64)>, Error> {
        let segments = self.segment_list();
        let start = segments.partition_point(|s| s.base_offset() < from);
        let last_index = segments.len().saturating_sub(1);
        let mut epochs = Vec::new();
        for (i, seg) in segments.iter().enumerate().skip(start) {
            let base = seg.base_offset();
            let later = &segments[i + 1..];
            // The later segments go before the cut is made: until their removal is durable, this
            // segment's invalid bytes are still there for the next open to cut, and delete them, again.
            let mut deleted = Vec::new();
            let recovery =
                recovered.recover(seg, &mut || self.delete_after_cut(later, &mut deleted))?;
            epochs.extend_from_slice(&recovery.epochs);
            report.record_scan(base, &recovery);
            let cut = recovery.truncated_bytes > 0;
            // A segment whose indexes this scan rebuilt is counted among the rebuilt ones.
            if !recovered.deferred.remove(&base) {
                report.recovered_segments.push((base, recovery));
            }
            if !cut {
                if i < last_index {
                    seg.on_become_inactive()?;
                }
                continue;
            }
            seg.make_active();
            let reason = TruncationReason::AfterCut { cut_segment: base };
            tracing::warn!(segment = base, %reason, "recovery cut the log: later segments go");
            let mut map = self.segments.write().expect("segments lock poisoned");
            for (later, bytes) in deleted {
                map.remove(&later);
                report.deleted_segments.push(later);
                report.truncations.push(SegmentTruncation {
                    segment: later,
                    offset: later,
                    position: 0,
                    bytes,
                    reason: reason.clone(),
                });
            }
            break;
        }
        Ok(epochs)
    }

    /// Deletes `later`, the segments after a cut, and syncs the directory once, before the cut is made:
    /// appends take the deleted segments' offsets, and a crash that brought those segments back behind
    /// the cut would leave a log that is not what this open recovered (or two segments holding the same
    /// offsets). Collects each one's base offset and the bytes its `.log` held.
    fn delete_after_cut(
        &self,
        later: &[Arc<LogSegment>],
        deleted: &mut Vec<(i64, u64)>,
    ) -> Result<(), Error> {
        for seg in later {
            let (base, path) = (seg.base_offset(), seg.log_path_of());
            let bytes = self.storage.open(&path).at(&path)?.len().at(&path)?;
            seg.delete()?;
            tracing::warn!(
                segment = base,
                bytes,
                "recovery deleted a segment after the cut"
            );
            deleted.push((base, bytes));
        }
        if !later.is_empty() {
            self.storage.sync_dir(&self.dir).at(&self.dir)?;
        }
        Ok(())
    }

    /// Kafka's `deleteSegmentsIfLogStartGreaterThanLogEnd`: a checkpointed log start beyond the log end
    /// (segment files deleted by hand, a checkpoint copied from elsewhere) leaves nothing readable, so
    /// every segment, the epoch cache and the producer snapshots go; `load` then starts the log there.
    fn delete_segments_if_log_start_beyond_end(
        &self,
        log_start_offset: i64,
        report: &mut OpenReport,
        recovered: &mut RecoveredBatches,
    ) -> Result<(), Error> {
        let active_base = self.segment_base_offsets().last().copied();
        // The log end is at least the active segment's base: scan its tail only when that is not enough.
        if active_base.is_none_or(|b| b >= log_start_offset)
            || self.compute_log_end_offset()? >= log_start_offset
        {
            return Ok(());
        }
        tracing::warn!(
            log_start_offset,
            "the checkpointed log start is beyond the log end: every segment is deleted"
        );
        let old = std::mem::take(&mut *self.segments.write().expect("segments lock poisoned"));
        for seg in old.values() {
            let path = seg.log_path_of();
            let bytes = self.storage.open(&path).at(&path)?.len().at(&path)?;
            seg.delete()?;
            report.deleted_segments.push(seg.base_offset());
            report.truncations.push(SegmentTruncation {
                segment: seg.base_offset(),
                offset: seg.base_offset(),
                position: 0,
                bytes,
                reason: TruncationReason::BelowLogStart { log_start_offset },
            });
        }
        // Nothing that was checked is kept.
        report.bytes_validated = 0;
        *recovered = RecoveredBatches::default();
        self.discard_snapshots_after(i64::MIN)?;
        self.storage.sync_dir(&self.dir).at(&self.dir)?;
        self.epochs().clear()
    }

    /// The last segment's next offset: a walk from its last index entry (Kafka's `readNextOffset`), in a
    /// bounded window, never the whole segment.
    pub(super) fn compute_log_end_offset(&self) -> Result<i64, Error> {
        let seg = self.active_segment();
        let (next, walked) = seg.read_next_offset()?;
        if walked == 0 && seg.size() > 0 {
            return Err(Error::CorruptIndex {
                path: seg.log_path_of(),
                reason: "no batch could be read to find the log end offset".into(),
            });
        }
        Ok(next)
    }
}

/// The base offset of the first segment an unclean open rescans: the one holding the last flushed offset
/// (recovery point - 1), not the one starting at the recovery point, since a segment sealed exactly at a
/// flush boundary may not have its indexes synced yet; the first segment when the recovery point is at
/// or below it. None for a log without segments.
fn first_unflushed_segment(bases: &[i64], recovery_point: i64) -> Option<i64> {
    let last_flushed = recovery_point.saturating_sub(1).max(0);
    let i = bases.iter().rposition(|&b| b <= last_flushed).unwrap_or(0);
    bases.get(i).copied()
}

/// The producer-state summaries of the v2 batches each segment's recovery pass checked, so the replay
/// after it does not read those segments again. Bounded: past `RECOVERED_SUMMARIES_MAX` summaries in all
/// (~64 B each), further segments are not kept and the replay reads them as before.
#[derive(Debug, Default)]
pub(super) struct RecoveredBatches {
    pub(super) by_segment: BTreeMap<i64, Vec<BatchSummary>>,
    kept: usize,
    /// What recovering a segment whose indexes were rebuilt at load found (below the unclean rescan, or
    /// after a clean shutdown): the epochs of its batches.
    rebuilt: BTreeMap<i64, crate::segment::SegmentRecovery>,
    /// Segments with missing or corrupt indexes that the unclean rescan rebuilds.
    deferred: std::collections::BTreeSet<i64>,
    /// The read buffers every segment's recovery reuses.
    buffers: crate::segment::RecoverBuffers,
}

/// About 64 MiB of summaries: a 1 GiB unclean log of 16 KiB batches needs ~65,000.
const RECOVERED_SUMMARIES_MAX: usize = 1 << 20;

impl RecoveredBatches {
    /// Recovers `seg`, keeping the summaries of its valid v2 batches while the budget allows; `before_cut`
    /// runs before a cut ([`LogSegment::recover_through`]).
    fn recover(
        &mut self,
        seg: &LogSegment,
        before_cut: &mut dyn FnMut() -> Result<(), Error>,
    ) -> Result<crate::segment::SegmentRecovery, Error> {
        let mut summaries = Vec::new();
        let mut over_budget = self.kept >= RECOVERED_SUMMARIES_MAX;
        let recovery = seg.recover_through(
            &mut self.buffers,
            &mut |batch| {
                if over_budget {
                    return;
                }
                if let crate::format::AnyBatch::V2(b) = batch {
                    summaries.push(summarize(b));
                    over_budget = self.kept + summaries.len() >= RECOVERED_SUMMARIES_MAX;
                }
            },
            before_cut,
        )?;
        if over_budget {
            self.by_segment.remove(&seg.base_offset());
        } else {
            self.kept += summaries.len();
            self.by_segment.insert(seg.base_offset(), summaries);
        }
        Ok(recovery)
    }
}
