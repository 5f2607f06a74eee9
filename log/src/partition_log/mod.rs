//! `PartitionLog`: one partition directory (Kafka's `UnifiedLog` over `LocalLog`). One writer at a time
//! (appends, rolls, truncations take the writer lock); readers run concurrently and are bounded by the
//! published log end offset and segment sizes, so they never see a partial batch.
//!
//! This file owns the struct, the results the log returns, its small accessors (offsets, leader epochs,
//! high watermark, topic id) and the failure gate every mutation passes (`guarded`). The rest of the
//! `impl PartitionLog` is split along Kafka's seams, one file each:
//! - `loader.rs` (`LogLoader`): open, recovery of unflushed segments;
//! - `local_log.rs` (`LocalLog`, `LogSegments`): the segment map, new segments, roll, close;
//! - `append.rs`: appends as leader, follower and mirror;
//! - `flush.rs`: flushes, group commit, the recovery point;
//! - `read.rs`: reads, committed reads, offset for a timestamp;
//! - `truncate.rs`, `retention.rs`: truncation; log start offset and segment deletion;
//! - `producer_state.rs`: producer state, expiration, snapshots and their replay on open.
//!
//! The files below name this one (`super::`), never one another in a circle, and this one names none of
//! them (tests/layering.rs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};

use crate::checkpoint::{self, TopicId};
use crate::clock::Clock;
use crate::config::LogConfig;
use crate::dir_lock::{DirLock, PartitionClaim};
use crate::format::Tail;
use crate::io::{ReadOnlyStorage, Storage};
use crate::leader_epoch::LeaderEpochCache;
use crate::segment::{LogSegment, SegmentBytes, SegmentRecovery};
use crate::topic_partition::{self, PartitionDirName};
use crate::{Error, KafkaError};
use klog_psm::ProducerStateManager;
/// The transaction version a coordinator passes with its markers (re-exported for the log's callers).
pub use klog_psm::TransactionVersion;

mod append;
mod flush;
pub use flush::FlushGroups;
use flush::FlushState;
mod loader;
mod local_log;
mod producer_state;
mod read;
mod retention;
mod truncate;

/// `storage` as a reader's view: a [`ReadOnlyStorage`] over it, unless it is one already.
pub fn read_only_view(storage: Arc<dyn Storage>) -> Arc<dyn Storage> {
    if storage.is_read_only() {
        storage
    } else {
        Arc::new(ReadOnlyStorage::new(storage))
    }
}

/// Where a log starts when it is opened (from the log directory's checkpoint files).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenOptions {
    /// The offset below which everything was flushed (from `recovery-point-offset-checkpoint`).
    pub recovery_point: i64,
    /// The log start offset (from `log-start-offset-checkpoint`).
    pub log_start_offset: i64,
    /// The log directory had `.kafka_cleanshutdown`: nothing is rescanned.
    pub clean_shutdown: bool,
}

/// The result of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogAppendInfo {
    /// The first offset written.
    pub first_offset: i64,
    /// The last offset written.
    pub last_offset: i64,
    /// The largest timestamp among the batches.
    pub max_timestamp: i64,
    /// The broker's append time for LogAppendTime topics, else -1.
    pub log_append_time: i64,
    /// Batches written.
    pub batches: usize,
    /// Bytes written.
    pub bytes: usize,
    /// A producer retry of a batch already in the log: nothing was written, the offsets are the original's.
    pub duplicate: bool,
}

/// The result of a read: whole batches only.
#[derive(Debug, Clone)]
pub struct LogReadInfo {
    /// Whole batches (a map of a sealed segment, or a buffer).
    pub records: SegmentBytes,
    /// The offset after the last batch returned (the fetch offset when nothing was returned).
    pub next_offset: i64,
    /// The high watermark when read.
    pub high_watermark: i64,
    /// The log start offset when read.
    pub log_start_offset: i64,
    /// The log end offset when read.
    pub log_end_offset: i64,
}

/// What opening the log did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Segments after the open.
    pub segments: usize,
    /// Segments rescanned after an unclean shutdown, with what each scan found.
    pub recovered_segments: Vec<(i64, SegmentRecovery)>,
    /// Base offsets of the segments deleted (after a cut, or below the log start).
    pub deleted_segments: Vec<i64>,
    /// Base offsets of the segments whose indexes were rebuilt.
    pub rebuilt_indexes: Vec<i64>,
    /// The producer snapshot the state was loaded from (its offset), if any.
    pub snapshot_loaded: Option<i64>,
    /// Offsets of the stray producer snapshots deleted.
    pub snapshots_deleted: Vec<i64>,
    /// Batches replayed into the producer state after the snapshot, and MIRROR_PID_RESET barriers among them.
    pub batches_replayed: u64,
    /// MIRROR_PID_RESET barriers among the replayed batches.
    pub mirror_pid_resets: u64,
    /// Every cut this open made, in the order made: the end of a segment cut at its first invalid batch
    /// (while rescanning or while rebuilding its indexes) and every segment deleted after a cut.
    pub truncations: Vec<SegmentTruncation>,
    /// Bytes of whole batches checked by the scans of this open and still in the log (a scanned segment
    /// deleted afterwards no longer counts).
    pub bytes_validated: u64,
}

impl OpenReport {
    /// A segment was scanned (rescanned, or its indexes rebuilt): its valid bytes, and its cut if any.
    fn record_scan(&mut self, segment: i64, recovery: &SegmentRecovery) {
        self.bytes_validated += recovery.valid_bytes;
        if recovery.truncated_bytes == 0 {
            return;
        }
        let reason = match (&recovery.corruption, recovery.tail) {
            (Some(c), _) => TruncationReason::Corrupt(c.clone()),
            (None, Tail::ZeroFilled { .. }) => TruncationReason::ZeroFilledTail,
            (None, _) => TruncationReason::TornWrite,
        };
        self.truncations.push(SegmentTruncation {
            segment,
            offset: recovery.next_offset,
            position: recovery.valid_bytes,
            bytes: recovery.truncated_bytes,
            reason,
        });
    }
}

/// One cut recovery made: bytes removed from the end of a segment's `.log`, or a whole segment deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentTruncation {
    /// The segment's base offset.
    pub segment: i64,
    /// The first offset that is gone (a deleted segment: its base offset).
    pub offset: i64,
    /// Where the cut starts in the segment's `.log` (0 for a deleted segment).
    pub position: u64,
    /// Bytes that left the disk.
    pub bytes: u64,
    /// Why the bytes went.
    pub reason: TruncationReason,
}

/// Why recovery removed bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TruncationReason {
    /// The segment ended in an incomplete batch.
    TornWrite,
    /// The segment ended in zeros: a preallocated tail never written.
    ZeroFilledTail,
    /// A batch failed this check: it and everything after it in the segment went.
    Corrupt(crate::Corruption),
    /// The whole segment went: an earlier segment was cut, and the log stays a prefix of what was written.
    AfterCut {
        /// The segment that was cut.
        cut_segment: i64,
    },
    /// The whole segment went: the checkpointed log start offset is beyond the log end (Kafka's
    /// `deleteSegmentsIfLogStartGreaterThanLogEnd`), so nothing in the log is readable.
    BelowLogStart {
        /// The checkpointed log start.
        log_start_offset: i64,
    },
}

impl std::fmt::Display for TruncationReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TruncationReason::TornWrite => f.write_str("torn write"),
            TruncationReason::ZeroFilledTail => f.write_str("zero-filled tail"),
            TruncationReason::Corrupt(c) => write!(f, "{c}"),
            TruncationReason::AfterCut { cut_segment } => {
                write!(f, "segment deleted: after the cut in segment {cut_segment}")
            }
            TruncationReason::BelowLogStart { log_start_offset } => write!(
                f,
                "segment deleted: the log start offset {log_start_offset} is beyond the log end"
            ),
        }
    }
}

/// Who may append as leader (KIP-1279's read-only rule for mirror partitions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteMode {
    /// An ordinary partition (or a mirror partition in STOPPED).
    #[default]
    Writable,
    /// A mirror partition while mirroring: leader appends fail with READ_ONLY_TOPIC. Mirror (follower)
    /// appends are not affected.
    ReadOnly,
    /// A mirror partition in STOPPING: only a coordinator append that carries a MIRROR_PID_RESET batch.
    BarrierOnly,
    /// A mirror partition in STOPPING whose stop aborts open transactions (KIP-1279's reference
    /// forks): what [`WriteMode::BarrierOnly`] admits, and coordinator appends of ABORT markers for
    /// producers whose transaction is open.
    AbortsAndBarrier,
}

/// One partition's log (Kafka's `UnifiedLog`): segments, indexes, the leader-epoch cache and producer
/// state, with appends as leader, follower or mirror, reads, rolls, flushes, truncation and retention.
///
/// ```
/// use std::sync::Arc;
/// use klog_log::config::LogConfig;
/// use klog_log::format::{BatchBuilder, Compression};
/// use klog_log::io::StdStorage;
/// use klog_log::partition_log::{OpenOptions, PartitionLog};
///
/// # let root = std::env::temp_dir().join(format!("klog-doc-log-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&root);
/// let (log, _report) = PartitionLog::open(
///     Arc::new(StdStorage),
///     &root.join("orders-0"),
///     LogConfig::default(),
///     OpenOptions::default(), // a new log; a `LogDir` passes its checkpoints here
/// )?;
/// let mut batch = BatchBuilder::new(Compression::None);
/// batch.append(1_700_000_000_000, Some(b"key"), Some(b"value"), &[])?;
/// let info = log.append_as_leader(&mut batch.build()?, 0)?;
/// assert_eq!((info.first_offset, info.last_offset), (0, 0));
/// log.flush(log.log_end_offset())?;
/// let read = log.read(0, 1 << 20, None, true)?;
/// assert_eq!(read.next_offset, 1);
/// log.close()?;
/// # std::fs::remove_dir_all(&root).unwrap();
/// # Ok::<(), klog_log::Error>(())
/// ```
pub struct PartitionLog {
    dir: PathBuf,
    topic: String,
    partition: i32,
    storage: Arc<dyn Storage>,
    config: LogConfig,
    clock: Arc<dyn Clock>,
    segments: RwLock<BTreeMap<i64, Arc<LogSegment>>>,
    /// Serializes mutations: one writer at a time.
    writer: Mutex<()>,
    log_end_offset: AtomicI64,
    high_watermark: AtomicI64,
    log_start_offset: AtomicI64,
    recovery_point: AtomicI64,
    epochs: Mutex<LeaderEpochCache>,
    psm: Mutex<ProducerStateManager>,
    /// Producer snapshots taken at rolls, written by the next flush (off the append path).
    pending_snapshots: Mutex<Vec<(i64, Vec<u8>)>>,
    /// The flush under way (one at a time) and who waits for it; callers wait on `flush_done` for it
    /// to end (`flush.rs`).
    flush_lock: Mutex<FlushState>,
    flush_done: Condvar,
    /// Held by a flush while it writes the pending snapshots and syncs the directory.
    flush_files: Mutex<()>,
    /// Appends between their entry and their publication (group commit waits for them, bounded).
    appends_in_progress: AtomicUsize,
    appends_started: std::sync::atomic::AtomicU64,
    last_flush_ms: AtomicI64,
    /// When the next `producer.id.expiration.check.interval.ms` check is due (clock milliseconds).
    next_producer_expiration_check_ms: AtomicI64,
    /// A segment file was created since the directory was last synced.
    dir_dirty: std::sync::atomic::AtomicBool,
    failed: std::sync::atomic::AtomicBool,
    /// [`WriteMode`] as a byte.
    write_mode: std::sync::atomic::AtomicU8,
    /// Opened through a [`ReadOnlyStorage`]: every change is refused, nothing is locked.
    read_only: bool,
    /// This process's claim on the directory, then the log directory's `.lock` (writers only); both are
    /// released by a clean close, after which the log refuses changes.
    claim: Mutex<Option<(PartitionClaim, Arc<DirLock>)>>,
    closed: std::sync::atomic::AtomicBool,
    /// A cleaner pass that writes is under way (Kafka's `LogCleaningInProgress`): one at a time.
    cleaning: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for PartitionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionLog")
            .field("dir", &self.dir)
            .field("log_start_offset", &self.log_start_offset())
            .field("log_end_offset", &self.log_end_offset())
            .finish()
    }
}

/// Threads [`PartitionLog::flush_each`] syncs on where the storage syncs one file at a time. They wait
/// on the disk, not the CPU, and ext4's journal commits the syncs in flight together: flushing 1,000
/// logs took ~330 ms on 8 threads and ~50-80 ms on 32 on the 2-core test machine.
pub const FLUSH_THREADS: usize = 32;

/// `f` over every item (with its index) on up to [`FLUSH_THREADS`] threads, the results in order: for
/// work on many partitions that waits on the disk, not the CPU (their flushes, closes, a failover's
/// barriers, whose first append at a new epoch syncs the leader-epoch checkpoint).
pub fn on_threads<T: Sync, R: Send>(items: &[T], f: impl Fn(usize, &T) -> R + Sync) -> Vec<R> {
    if items.len() <= 1 {
        return items.iter().enumerate().map(|(i, t)| f(i, t)).collect();
    }
    let chunk = items.len().div_ceil(FLUSH_THREADS);
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .enumerate()
            .map(|(c, part)| {
                scope.spawn(move || {
                    part.iter()
                        .enumerate()
                        .map(|(i, t)| f(c * chunk + i, t))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| match h.join() {
                Ok(results) => results,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    })
}

/// `<topic>-<partition>` -> (topic, partition), under Kafka's naming rules; `None` for any other directory.
pub fn parse_dir_name(dir: &Path) -> Option<(String, i32)> {
    partition_dir_name(dir).ok()
}

/// [`parse_dir_name`], with the reason a directory is not a live partition directory.
pub fn partition_dir_name(dir: &Path) -> Result<(String, i32), Error> {
    let invalid = |reason: String| Error::InvalidPartitionDir {
        path: dir.to_owned(),
        reason,
    };
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| invalid("the directory has no UTF-8 name".into()))?;
    match topic_partition::parse_partition_dir_name(name).map_err(invalid)? {
        PartitionDirName::Partition { topic, partition } => Ok((topic, partition)),
        PartitionDirName::Marked { suffix } => Err(invalid(format!(
            "a {suffix} directory holds a partition Kafka is deleting, moving or dropping"
        ))),
    }
}

impl PartitionLog {
    pub(crate) fn writer(&self) -> MutexGuard<'_, ()> {
        self.writer.lock().expect("writer lock poisoned")
    }

    fn epochs(&self) -> MutexGuard<'_, LeaderEpochCache> {
        self.epochs.lock().expect("epoch cache lock poisoned")
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The partition number.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The topic configuration.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// The storage it reads and writes through.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The offset the next append gets.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset.load(Ordering::Acquire)
    }

    /// The first offset a read may ask for.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset.load(Ordering::Acquire)
    }

    /// The high watermark: reads stop here (see [`PartitionLog::update_high_watermark`]).
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }

    /// Everything below this offset is durable.
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point.load(Ordering::Acquire)
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments
            .read()
            .expect("segments lock poisoned")
            .keys()
            .copied()
            .collect()
    }

    /// Bytes of every segment's `.log`.
    pub fn size_in_bytes(&self) -> u64 {
        self.segment_list().iter().map(|s| s.size()).sum()
    }

    /// The leader-epoch cache's entries.
    pub fn leader_epochs(&self) -> Vec<crate::leader_epoch::EpochEntry> {
        self.epochs().entries().to_vec()
    }

    /// The newest leader epoch in the log.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs().latest().map(|e| e.epoch)
    }

    /// Kafka's `endOffsetForEpoch`.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        let (e, o) = self.epochs().end_offset_for(epoch, self.log_end_offset());
        (o >= 0).then_some((e, o))
    }

    /// Sets the high watermark, clamped to `[log start, log end]` (Kafka's `updateHighWatermark`).
    pub fn update_high_watermark(&self, hw: i64) -> i64 {
        let hw = hw.clamp(self.log_start_offset(), self.log_end_offset());
        self.high_watermark.store(hw, Ordering::Release);
        self.psm().on_high_watermark_updated(hw);
        hw
    }

    /// The topic id from `partition.metadata`, if written.
    pub fn topic_id(&self) -> Result<Option<TopicId>, Error> {
        checkpoint::read_partition_metadata(self.storage.as_ref(), &self.dir)
    }

    /// Writes `partition.metadata` (before the first append, as Kafka does). A directory that already
    /// holds another topic id is refused ([`Error::InconsistentTopicId`], Kafka's `assignTopicId`) and
    /// its file kept: its records are another topic's, never adopted as this one's.
    pub fn set_topic_id(&self, topic_id: TopicId) -> Result<(), Error> {
        self.writable("writing partition.metadata")?;
        match self.topic_id()? {
            Some(found) if found == topic_id => return Ok(()),
            Some(found) => {
                return Err(Error::InconsistentTopicId {
                    path: self.dir.join(checkpoint::PARTITION_METADATA_FILE),
                    found: found.to_string(),
                    assigned: topic_id.to_string(),
                })
            }
            None => {}
        }
        checkpoint::write_partition_metadata(self.storage.as_ref(), &self.dir, topic_id)
    }

    // Every mutation passes through `guarded`: after an I/O failure the log refuses writes until it is
    // reopened (and recovered), as Kafka takes a failed log directory offline: a failed fsync may have
    // dropped dirty pages, so nothing written since the last good sync can be trusted.

    /// Whether this log was opened read-only ([`PartitionLog::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Whether [`PartitionLog::close`] has run.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub(crate) fn writable(&self, operation: &'static str) -> Result<(), Error> {
        if self.read_only {
            return Err(Error::ReadOnly {
                dir: self.dir.clone(),
                operation,
            });
        }
        if self.is_closed() {
            return Err(Error::rejected(
                KafkaError::KafkaStorageError,
                format!(
                    "{}: {operation} refused: the log is closed",
                    self.dir.display()
                ),
            ));
        }
        Ok(())
    }

    pub(crate) fn guarded<T>(&self, op: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        if self.failed.load(Ordering::Acquire) {
            return Err(Error::rejected(
                KafkaError::KafkaStorageError,
                format!(
                    "{} failed an earlier write; reopen it to recover",
                    self.dir.display()
                ),
            ));
        }
        let result = op();
        if let Err(e @ Error::Io { .. }) = &result {
            tracing::error!(dir = %self.dir.display(), error = %e, "I/O error: the log refuses writes until it is reopened");
            self.failed.store(true, Ordering::Release);
        }
        result
    }

    /// Marks a cleaner pass under way; false when one already is (the caller skips its pass). The
    /// returned guard clears the mark.
    pub(crate) fn start_cleaning(&self) -> Option<CleaningGuard<'_>> {
        let busy = self.cleaning.swap(true, Ordering::AcqRel);
        (!busy).then_some(CleaningGuard { log: self })
    }

    /// Whether an I/O failure has taken the log offline (until it is reopened).
    pub fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }
}

/// A cleaner pass under way on a log ([`PartitionLog::start_cleaning`]); dropping it ends the pass.
pub(crate) struct CleaningGuard<'a> {
    log: &'a PartitionLog,
}

impl Drop for CleaningGuard<'_> {
    fn drop(&mut self) {
        self.log.cleaning.store(false, Ordering::Release);
    }
}
