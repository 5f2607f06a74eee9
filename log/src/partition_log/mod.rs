//! `PartitionLog`: one partition directory, Kafka's UnifiedLog/LocalLog without producer state (that plugs in
//! at the marked seams). One writer at a time (appends, rolls, truncations take the writer lock); readers run
//! concurrently and are bounded by the published log end offset and segment sizes, so they never see a
//! partial batch.

use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Unbounded};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};

use crate::checkpoint::{self, TopicId};
use crate::clock::{Clock, SystemClock};
use crate::config::LogConfig;
use crate::dir_lock::{DirLock, PartitionClaim};
use crate::error::IoContext;
use crate::format::{BatchStream, Batches, RecordBatchMut, Tail, TimestampType};
use crate::io::{ReadOnlyStorage, Storage};
use crate::leader_epoch::LeaderEpochCache;
use crate::producer_state::{self as snapshots, summarize};
use crate::segment::{parse_base_offset, LogSegment, SegmentBytes, SegmentRecovery};
use crate::topic_partition::{self, PartitionDirName};
use crate::txn_index::AbortedTxn;
use crate::validator::{validate, AppendOrigin, ValidatedBatches};
use crate::{Error, KafkaError};
/// The transaction version a coordinator passes with its markers (re-exported for the log's callers).
pub use klog_psm::TransactionVersion;
use klog_psm::{BatchSummary, ControlKind, ProducerStateEntry, ProducerStateManager, PsmConfig};

/// `storage` as a reader's view: a [`ReadOnlyStorage`] over it, unless it is one already.
pub fn read_only_view(storage: Arc<dyn Storage>) -> Arc<dyn Storage> {
    if storage.is_read_only() {
        storage
    } else {
        Arc::new(ReadOnlyStorage::new(storage))
    }
}

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
    /// Which flushes are under way; callers wait on `flush_done` for the one that covers them, or for
    /// the one gathering to finish gathering.
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

/// Who is flushing and who waits for it (under `flush_lock`).
#[derive(Debug, Default)]
struct FlushState {
    /// A flush is gathering its group and reading its target: one at a time (the group is what it
    /// gathers).
    running: bool,
    /// The targets of the flushes past that point, whose syncs are under way: a caller whose offset one
    /// of them covers waits for it; any other may start the next flush at once, so the next group is
    /// written while this one's device flush runs.
    syncing: Vec<i64>,
    /// Callers asleep on `flush_done`.
    waiting: usize,
    /// Callers woken by the last flush that have not yet rechecked: those it covered return and, as a
    /// rule, append again at once; the next flush waits for them (see `gather_appends`).
    rechecking: usize,
    /// Callers the last flush covered (its leader included): they usually append again at once.
    released: u64,
    /// `appends_started` when the last flush ended.
    appends_started_at_release: u64,
    /// Flushes ended so far: a waiter woken by a flush that only finished gathering is not one the
    /// last flush released.
    ended: u64,
}

/// A flush under way: gathering (`target` None), then syncing up to `target`. When it ends (or
/// unwinds), every waiter rechecks.
struct FlushTurn<'a> {
    log: &'a PartitionLog,
    target: Option<i64>,
}

impl FlushTurn<'_> {
    /// The group is gathered and this flush covers up to `target`: the next flush may start while this
    /// one syncs, and callers `target` covers wait for this one.
    fn syncing(&mut self, target: i64) {
        let mut state = self
            .log
            .flush_lock
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        state.running = false;
        state.syncing.push(target);
        self.target = Some(target);
        drop(state);
        self.log.flush_done.notify_all();
    }
}

impl Drop for FlushTurn<'_> {
    fn drop(&mut self) {
        let mut state = self
            .log
            .flush_lock
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match self.target {
            None => state.running = false,
            Some(target) => {
                if let Some(i) = state.syncing.iter().position(|&t| t == target) {
                    state.syncing.swap_remove(i);
                }
            }
        }
        state.rechecking = state.waiting;
        state.released = 1;
        state.ended += 1;
        state.appends_started_at_release = self.log.appends_started.load(Ordering::Acquire);
        drop(state);
        self.log.flush_done.notify_all();
    }
}

/// Counts an append in progress for as long as it lives.
struct AppendInProgress<'a>(&'a AtomicUsize);

impl<'a> AppendInProgress<'a> {
    fn new(log: &'a PartitionLog) -> Self {
        log.appends_started.fetch_add(1, Ordering::AcqRel);
        log.appends_in_progress.fetch_add(1, Ordering::AcqRel);
        AppendInProgress(&log.appends_in_progress)
    }
}

impl Drop for AppendInProgress<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The longest a flush leader waits for appends under way before it syncs (a fraction of an fdatasync).
const GATHER_MAX: std::time::Duration = std::time::Duration::from_micros(100);

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
    /// replayed) but in memory ([`ReadOnlyStorage`]), so reads see the log a writer would see after
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

    /// Opens `dir` as its writer (or, through a [`ReadOnlyStorage`], as a reader: see
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

    fn writer(&self) -> MutexGuard<'_, ()> {
        self.writer.lock().expect("writer lock poisoned")
    }

    fn epochs(&self) -> MutexGuard<'_, LeaderEpochCache> {
        self.epochs.lock().expect("epoch cache lock poisoned")
    }

    /// The segment holding `offset` (or the first one, when `offset` is below every base) and every
    /// segment after it.
    fn segments_from(&self, offset: i64) -> Vec<Arc<LogSegment>> {
        let map = self.segments.read().expect("segments lock poisoned");
        let floor = map
            .range(..=offset)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        map.range(floor..).map(|(_, s)| s.clone()).collect()
    }

    /// The segment holding `offset` (the first one when `offset` is below every base).
    fn segment_floor(&self, offset: i64) -> Option<Arc<LogSegment>> {
        let map = self.segments.read().expect("segments lock poisoned");
        map.range(..=offset)
            .next_back()
            .or_else(|| map.iter().next())
            .map(|(_, s)| s.clone())
    }

    /// The segment after the one based at `base`.
    fn segment_after(&self, base: i64) -> Option<Arc<LogSegment>> {
        self.segments
            .read()
            .expect("segments lock poisoned")
            .range((Excluded(base), Unbounded))
            .next()
            .map(|(_, s)| s.clone())
    }

    /// The base offset of the segment after the one based at `base`.
    fn next_base_offset(&self, base: i64) -> Option<i64> {
        self.segments
            .read()
            .expect("segments lock poisoned")
            .range((Excluded(base), Unbounded))
            .next()
            .map(|(b, _)| *b)
    }

    fn segment_list(&self) -> Vec<Arc<LogSegment>> {
        self.segments
            .read()
            .expect("segments lock poisoned")
            .values()
            .cloned()
            .collect()
    }

    fn active_segment(&self) -> Arc<LogSegment> {
        self.segments
            .read()
            .expect("segments lock poisoned")
            .values()
            .next_back()
            .cloned()
            .expect("a log always has an active segment")
    }

    /// Loads the segments: stray temp files removed, indexes without a `.log` removed, missing or corrupt
    /// indexes rebuilt, and after an unclean shutdown every segment from the recovery point rescanned.
    /// The leader-epoch cache is then derived from the batches those scans read.
    fn load(&self, options: OpenOptions) -> Result<OpenReport, Error> {
        let mut report = OpenReport::default();
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
    fn compute_log_end_offset(&self) -> Result<i64, Error> {
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

    fn new_segment(&self, base: i64) -> Result<LogSegment, Error> {
        self.dir_dirty.store(true, Ordering::Release);
        let c = &self.config;
        LogSegment::create(
            self.storage.clone(),
            &self.dir,
            base,
            c.index_interval_bytes,
            c.segment_index_bytes,
            c.preallocate.then_some(c.segment_bytes),
            self.clock.now_ms(),
        )
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

    /// Appends producer batches as the leader: validated first (nothing is written if any batch fails),
    /// offsets assigned from the log end, the leader epoch stamped; LogAppendTime topics get the append time.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use klog_log::{config::LogConfig, io::StdStorage, partition_log::{OpenOptions, PartitionLog}};
    /// # use klog_log::format::{BatchBuilder, Compression};
    /// # let root = std::env::temp_dir().join(format!("klog-doc-{}-{}", "append", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&root);
    /// # let (log, _) = PartitionLog::open(Arc::new(StdStorage), &root.join("orders-0"), LogConfig::default(), OpenOptions::default())?;
    /// let mut batch = BatchBuilder::new(Compression::Zstd); // base offset 0: the leader assigns offsets
    /// batch.append(1_700_000_000_000, Some(b"k"), Some(b"v1"), &[])?;
    /// batch.append(1_700_000_000_000, Some(b"k"), Some(b"v2"), &[])?;
    /// let info = log.append_as_leader(&mut batch.build()?, 3)?;
    /// assert_eq!((info.first_offset, info.last_offset), (0, 1));
    /// assert_eq!(log.latest_epoch(), Some(3));
    /// # log.close()?;
    /// # std::fs::remove_dir_all(&root).unwrap();
    /// # Ok::<(), klog_log::Error>(())
    /// ```
    pub fn append_as_leader(
        &self,
        batches: &mut [u8],
        leader_epoch: i32,
    ) -> Result<LogAppendInfo, Error> {
        self.append_as_leader_with_origin(batches, leader_epoch, AppendOrigin::Client)
    }

    fn append_as_leader_with_origin_inner(
        &self,
        batches: &mut [u8],
        leader_epoch: i32,
        origin: AppendOrigin,
        transaction_version: TransactionVersion,
    ) -> Result<LogAppendInfo, Error> {
        assert!(
            origin != AppendOrigin::Replication,
            "replication appends go through append_as_follower"
        );
        let _appending = AppendInProgress::new(self);
        let _writer = self.writer();
        if self.write_mode() == WriteMode::ReadOnly {
            // Before the epoch check: a mirror partition refuses every leader append the same way.
            self.check_write_mode(batches, &ValidatedBatches::default(), origin)?;
        }
        if let Some(latest) = self.latest_epoch().filter(|e| leader_epoch < *e) {
            return Err(Error::rejected(
                KafkaError::FencedLeaderEpoch,
                format!(
                    "leader epoch {leader_epoch} is older than the log's latest epoch {latest}"
                ),
            ));
        }
        let now = self.clock.now_ms();
        let mut validated = validate(batches, origin, &self.config, now)?;
        self.check_write_mode(batches, &validated, origin)?;
        let mut next = self.log_end_offset();
        let first_offset = next;
        let log_append_time =
            (self.config.message_timestamp_type == TimestampType::LogAppendTime).then_some(now);
        // Stamp in place (the CRC was checked once, above) and keep the summaries in step.
        for b in &mut validated.batches {
            // The validator bounds the delta to an i32; the log end may be anywhere up to i64::MAX.
            let delta = b.last_offset - b.base_offset;
            let last = next.checked_add(delta).unwrap_or(i64::MAX);
            let after = offset_after(last)?;
            let mut m =
                RecordBatchMut::parse_unchecked_crc(&mut batches[b.position..b.position + b.size])
                    .expect("validated");
            m.set_base_offset(next);
            m.set_partition_leader_epoch(leader_epoch);
            if let Some(t) = log_append_time {
                m.set_log_append_time(t);
                b.max_timestamp = t;
            } else {
                // The validator's records maximum (Kafka stamps it on CreateTime batches).
                m.set_create_time_max_timestamp(b.max_timestamp);
            }
            (b.base_offset, b.last_offset, b.partition_leader_epoch) = (next, last, leader_epoch);
            next = after;
        }
        let psm_origin = match origin {
            AppendOrigin::Client => klog_psm::AppendOrigin::Client,
            _ => klog_psm::AppendOrigin::Coordinator,
        };
        let mut psm = self.psm();
        let plan = psm
            .plan_append_with_transaction_version(
                &summaries(batches, &validated),
                psm_origin,
                transaction_version,
            )
            .map_err(producer_error)?;
        if let Some(d) = plan.duplicate {
            return Ok(LogAppendInfo {
                first_offset: d.first_offset,
                last_offset: d.last_offset,
                max_timestamp: d.timestamp,
                log_append_time: d.timestamp,
                batches: validated.batches.len(),
                bytes: 0,
                duplicate: true,
            });
        }
        // Before the write, as Kafka's `UnifiedLog.append` does: a checkpoint that cannot be written
        // fails the append while its batch is still nowhere (not in the log, not in a segment's tail
        // that a drop or a later flush could write out).
        if leader_epoch >= 0 {
            let mut epochs = self.epochs();
            if epochs.latest().is_none_or(|l| l.epoch != leader_epoch) {
                epochs.assign(leader_epoch, first_offset)?;
            }
        }
        let info = self.write_batches(batches, &validated, now, &mut psm)?;
        self.apply_producer_state(&mut psm, plan, info.last_offset)?;
        drop(psm);
        Ok(LogAppendInfo {
            log_append_time: log_append_time.unwrap_or(-1),
            ..info
        })
    }

    fn append_as_follower_inner(&self, batches: &[u8]) -> Result<LogAppendInfo, Error> {
        let _appending = AppendInProgress::new(self);
        let _writer = self.writer();
        let now = self.clock.now_ms();
        let validated = validate(batches, AppendOrigin::Replication, &self.config, now)?;
        for b in &validated.batches {
            offset_after(b.last_offset)?;
        }
        let first = validated.batches[0].base_offset;
        let leo = self.log_end_offset();
        if first < leo {
            return Err(Error::rejected(
                KafkaError::UnexpectedAppendOffset,
                format!("first offset {first} is below the log end offset {leo}"),
            ));
        }
        let mut psm = self.psm();
        let plan = psm
            .plan_append(
                &summaries(batches, &validated),
                klog_psm::AppendOrigin::Replication,
            )
            .map_err(producer_error)?;
        {
            let mut epochs = self.epochs();
            for b in &validated.batches {
                if b.magic >= 2 && b.partition_leader_epoch >= 0 {
                    epochs.assign(b.partition_leader_epoch, b.base_offset)?;
                }
            }
        }
        let info = self.write_batches(batches, &validated, now, &mut psm)?;
        self.apply_producer_state(&mut psm, plan, info.last_offset)?;
        Ok(info)
    }

    /// After a write: the plan applied, aborted transactions indexed in the segment holding their marker.
    fn apply_producer_state(
        &self,
        psm: &mut ProducerStateManager,
        plan: klog_psm::AppendPlan,
        last_offset: i64,
    ) -> Result<(), Error> {
        let active = self.active_segment();
        for txn in psm.apply(plan) {
            if txn.is_aborted {
                active.append_aborted_txn(AbortedTxn::new(
                    txn.producer_id,
                    txn.first_offset,
                    txn.last_offset,
                    txn.last_stable_offset,
                ))?;
            }
        }
        psm.update_map_end_offset(last_offset + 1);
        psm.on_high_watermark_updated(self.high_watermark());
        Ok(())
    }

    /// Rolls if needed, appends to the active segment, publishes the new log end offset.
    fn write_batches(
        &self,
        bytes: &[u8],
        v: &ValidatedBatches,
        now: i64,
        psm: &mut ProducerStateManager,
    ) -> Result<LogAppendInfo, Error> {
        let first_offset = v.batches[0].base_offset;
        let last_offset = v.batches.last().expect("non-empty").last_offset;
        let max_ts = v.batches.iter().map(|b| b.max_timestamp).fold(-1, i64::max);
        let segment = self.maybe_roll(
            bytes.len() as u64,
            max_ts,
            first_offset,
            last_offset,
            now,
            psm,
        )?;
        segment.append(last_offset, bytes)?;
        self.log_end_offset
            .store(last_offset + 1, Ordering::Release);
        Ok(LogAppendInfo {
            first_offset,
            last_offset,
            max_timestamp: max_ts,
            log_append_time: -1,
            batches: v.batches.len(),
            bytes: bytes.len(),
            duplicate: false,
        })
    }

    /// `segment.ms` less this segment's jitter: Kafka draws it at random in `[0, min(jitter, segment.ms))`;
    /// here it is a hash of the segment's base offset, so it is spread the same way but reproducible.
    fn max_segment_ms(&self, segment_base: i64) -> i64 {
        let bound = self.config.segment_jitter_ms.min(self.config.segment_ms);
        if bound <= 0 {
            return self.config.segment_ms;
        }
        let mut x = segment_base as u64 ^ 0x9E37_79B9_7F4A_7C15;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        self.config.segment_ms - (x % bound as u64) as i64
    }

    fn maybe_roll(
        &self,
        size: u64,
        max_ts: i64,
        first_offset: i64,
        last_offset: i64,
        now: i64,
        psm: &mut ProducerStateManager,
    ) -> Result<Arc<LogSegment>, Error> {
        let active = self.active_segment();
        let roll = active.should_roll(
            size,
            max_ts,
            last_offset,
            self.config.segment_bytes as u64,
            self.max_segment_ms(active.base_offset()),
            now,
        )? || first_offset.saturating_sub(active.base_offset()) > i32::MAX as i64;
        if !roll {
            return Ok(active);
        }
        self.roll_at(first_offset.max(self.log_end_offset()), psm)
    }

    fn roll_inner(&self) -> Result<(), Error> {
        let _writer = self.writer();
        self.roll_at(self.log_end_offset(), &mut self.psm())
            .map(|_| ())
    }

    /// Rolls at `base`; the caller holds the producer state (the snapshot is taken from it).
    fn roll_at(&self, base: i64, psm: &mut ProducerStateManager) -> Result<Arc<LogSegment>, Error> {
        let active = self.active_segment();
        if active.base_offset() == base && active.size() == 0 {
            return Ok(active);
        }
        assert!(
            base > active.base_offset(),
            "roll to {base} below the active segment {}",
            active.base_offset()
        );
        tracing::debug!(dir = %self.dir.display(), base_offset = base, sealed = active.base_offset(), "rolled a new segment");
        active.on_become_inactive()?;
        let seg = Arc::new(self.new_segment(base)?);
        self.segments
            .write()
            .expect("segments lock poisoned")
            .insert(base, seg.clone());
        // The producer snapshot at the new base: encoded now, written by the next flush (no fsync here).
        psm.update_map_end_offset(base);
        let bytes = klog_psm::encode_snapshot(&psm.snapshot());
        self.pending_snapshots
            .lock()
            .expect("pending snapshots lock poisoned")
            .push((base, bytes));
        Ok(seg)
    }

    fn flush_inner(&self, offset: i64) -> Result<(), Error> {
        if self.recovery_point() >= offset {
            return Ok(());
        }
        // One flush gathers at a time; the others sleep until it has gathered or ended and are all woken
        // at once: those it covers wait for its sync and return together, instead of taking the lock one
        // after the other; one it does not cover starts the next flush while this one syncs.
        let mut flushing = self.flush_lock.lock().expect("flush lock poisoned");
        loop {
            if self.recovery_point() >= offset {
                return Ok(());
            }
            let covered = flushing.syncing.iter().any(|&t| t >= offset);
            if !flushing.running && !covered {
                break;
            }
            flushing.waiting += 1;
            let ended = flushing.ended;
            flushing = self.flush_done.wait(flushing).expect("flush lock poisoned");
            flushing.waiting -= 1;
            if flushing.ended != ended {
                flushing.rechecking = flushing.rechecking.saturating_sub(1);
            }
            if self.recovery_point() >= offset {
                flushing.released += 1;
                return Ok(());
            }
        }
        flushing.running = true;
        drop(flushing);
        let mut turn = FlushTurn {
            log: self,
            target: None,
        };
        self.gather_appends();
        let target = self.log_end_offset();
        turn.syncing(target);
        self.flush_covering(target)
    }

    /// Group commit: before syncing, let the appenders the last flush released come back and the appends
    /// under way publish, so this sync covers them rather than the next one. Without it a new flush starts
    /// the moment the last one ends and covers only what was appended during it: each appender then waits
    /// for two syncs. Bounded by `GATHER_MAX`; a lone appender never waits (nothing is under way).
    /// Durability is unchanged: the flush covers the log end offset read after this wait.
    fn gather_appends(&self) {
        let mut deadline = None;
        loop {
            let (rechecking, awaited) = {
                let state = self.flush_lock.lock().expect("flush lock poisoned");
                let started = self.appends_started.load(Ordering::Acquire);
                let back = started.saturating_sub(state.appends_started_at_release);
                (state.rechecking, state.released.saturating_sub(back))
            };
            if rechecking == 0
                && awaited == 0
                && self.appends_in_progress.load(Ordering::Acquire) == 0
            {
                return;
            }
            let deadline = *deadline.get_or_insert_with(|| std::time::Instant::now() + GATHER_MAX);
            if std::time::Instant::now() >= deadline {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// The flush itself: everything up to `target` (the log end offset of when it started), and what
    /// was appended since. Two may run at once (one writing while the other's sync runs): each moves the
    /// recovery point only to its own target, and only once its own syncs covered it.
    fn flush_covering(&self, target: i64) -> Result<(), Error> {
        let from = self.recovery_point();
        for seg in self.segment_list() {
            let next_base = self
                .segments
                .read()
                .expect("segments lock poisoned")
                .range((Excluded(seg.base_offset()), Unbounded))
                .next()
                .map(|(b, _)| *b);
            // Below the recovery point only a freshly sealed segment still needs its indexes synced (its
            // time index holds the max timestamp retention relies on).
            if next_base.is_some_and(|n| n <= from) && !seg.has_unsynced_indexes() {
                continue;
            }
            seg.flush()?;
        }
        // Held until the snapshots and the directory are synced: a flush running beside this one must not
        // find them taken or the directory clean and move its recovery point before they are durable.
        let _files = self.flush_files.lock().expect("flush files lock poisoned");
        self.write_pending_snapshots()?;
        // A new segment's (and snapshot's) directory entry must be durable before the recovery point passes it.
        if self.dir_dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = self.storage.sync_dir(&self.dir) {
                self.dir_dirty.store(true, Ordering::Release);
                return Err(Error::io(&self.dir, e));
            }
        }
        self.recovery_point.fetch_max(target, Ordering::AcqRel);
        self.last_flush_ms
            .store(self.clock.now_ms(), Ordering::Release);
        Ok(())
    }

    /// Whether the topic's flush settings ask for a flush now: `flush.messages` unflushed messages, or
    /// `flush.ms` since the last flush, with something unflushed. (Kafka's defaults never ask.)
    pub fn flush_due(&self) -> bool {
        // The recovery point comes from a checkpoint and may be far below the log (even i64::MIN).
        let unflushed = self.log_end_offset().saturating_sub(self.recovery_point());
        let since = self
            .clock
            .now_ms()
            .saturating_sub(self.last_flush_ms.load(Ordering::Acquire));
        unflushed > 0 && (unflushed >= self.config.flush_messages || since >= self.config.flush_ms)
    }

    /// Flushes if `flush.ms` has passed since the last flush.
    pub fn maybe_flush(&self) -> Result<(), Error> {
        let last = self.last_flush_ms.load(Ordering::Acquire);
        if self.clock.now_ms().saturating_sub(last) >= self.config.flush_ms {
            self.flush(self.log_end_offset())?;
        }
        Ok(())
    }

    /// Reads whole batches from `start_offset`, at most `max_bytes` (but one whole batch when
    /// `min_one_batch`), never past `upper_bound` (e.g. the high watermark; the log end when `None`).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use klog_log::{config::LogConfig, io::StdStorage, partition_log::{OpenOptions, PartitionLog}};
    /// # use klog_log::format::{BatchBuilder, Compression};
    /// # let root = std::env::temp_dir().join(format!("klog-doc-{}-{}", "read", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&root);
    /// # let (log, _) = PartitionLog::open(Arc::new(StdStorage), &root.join("orders-0"), LogConfig::default(), OpenOptions::default())?;
    /// # for _ in 0..3 {
    /// #     let mut b = BatchBuilder::new(Compression::None);
    /// #     b.append(1_700_000_000_000, None, Some(b"v"), &[])?;
    /// #     log.append_as_leader(&mut b.build()?, 0)?;
    /// # }
    /// log.update_high_watermark(2); // replicas have offsets 0 and 1
    /// let read = log.read(0, 1 << 20, Some(log.high_watermark()), true)?;
    /// assert_eq!(read.next_offset, 2); // whole batches, never past the bound
    /// let rest = log.read(read.next_offset, 1 << 20, None, true)?; // `None`: up to the log end
    /// assert_eq!(rest.next_offset, 3);
    /// # log.close()?;
    /// # std::fs::remove_dir_all(&root).unwrap();
    /// # Ok::<(), klog_log::Error>(())
    /// ```
    pub fn read(
        &self,
        start_offset: i64,
        max_bytes: usize,
        upper_bound: Option<i64>,
        min_one_batch: bool,
    ) -> Result<LogReadInfo, Error> {
        let leo = self.log_end_offset();
        let log_start = self.log_start_offset();
        let info = |records, next_offset| LogReadInfo {
            records,
            next_offset,
            high_watermark: self.high_watermark(),
            log_start_offset: log_start,
            log_end_offset: leo,
        };
        if start_offset < log_start || start_offset > leo {
            return Err(Error::rejected(
                KafkaError::OffsetOutOfRange,
                format!("offset {start_offset} is outside [{log_start}, {leo}]"),
            ));
        }
        let bound = upper_bound.unwrap_or(leo).min(leo);
        if start_offset >= bound {
            return Ok(info(SegmentBytes::Owned(Vec::new()), start_offset));
        }
        let mut next = self.segment_floor(start_offset);
        while let Some(seg) = next.take() {
            let Some(found) = seg.translate_offset(start_offset, 0)? else {
                next = self.segment_after(seg.base_offset());
                continue;
            };
            let start = found.position as u64;
            // The bound needs a lookup only when it falls inside this segment: at the log end or at a
            // later segment's base, every batch here is below it.
            let bound_beyond = bound >= leo
                || self
                    .next_base_offset(seg.base_offset())
                    .is_some_and(|n| n <= bound);
            let max_position = match bound_beyond {
                true => seg.size(),
                false => match seg.translate_offset(bound, 0)? {
                    Some(p) if p.last_offset >= bound => p.position as u64,
                    _ => seg.size(),
                },
            };
            if start >= max_position {
                return Ok(info(SegmentBytes::Owned(Vec::new()), start_offset));
            }
            // `max_bytes` is the caller's (a fetch's, an argument): any usize.
            let mut limit = start.saturating_add(max_bytes as u64).min(max_position);
            if min_one_batch && limit < start + found.size as u64 {
                limit = (start + found.size as u64).min(max_position);
            }
            let bytes = seg.slice(start, limit)?;
            let (whole, next) = whole_batches(bytes.as_slice(), start_offset);
            let records = match bytes {
                SegmentBytes::Mapped { map, start, .. } => SegmentBytes::Mapped {
                    map,
                    start,
                    end: start + whole,
                },
                SegmentBytes::Owned(mut v) => {
                    v.truncate(whole);
                    SegmentBytes::Owned(v)
                }
            };
            return Ok(info(records, next));
        }
        Ok(info(SegmentBytes::Owned(Vec::new()), start_offset))
    }

    /// Lookups of the open segments that found an index entry pointing at the wrong bytes and walked the
    /// `.log` from an earlier position instead (each also traced; see `segment/lookup.rs`).
    pub fn index_fallbacks(&self) -> u64 {
        self.segment_list()
            .iter()
            .map(|s| s.index_fallbacks())
            .sum()
    }

    /// The first offset whose record timestamp is >= `timestamp`, with that timestamp.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>, Error> {
        let start = self.log_start_offset();
        for seg in self.segment_list() {
            if seg.base_offset() < start && seg.max_timestamp()? < timestamp {
                continue;
            }
            if seg.max_timestamp()? >= timestamp {
                if let Some(found) = seg.find_offset_by_timestamp(timestamp, start)? {
                    return Ok(Some(found));
                }
            }
        }
        Ok(None)
    }

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
        let mut size_excess = if self.config.retention_bytes >= 0 {
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
            let by_time = self.config.retention_ms >= 0
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

    fn close_inner(&self) -> Result<(), Error> {
        let _writer = self.writer();
        let leo = self.log_end_offset();
        self.write_pending_snapshots()?;
        for seg in self.segment_list() {
            seg.close()?;
        }
        // A clean close leaves a snapshot at the log end, so the next open replays nothing.
        if !snapshots::list_snapshots(self.storage.as_ref(), &self.dir)?.contains(&leo) {
            let bytes = klog_psm::encode_snapshot(&self.psm().snapshot());
            snapshots::write_snapshot(self.storage.as_ref(), &self.dir, leo, &bytes)?;
            tracing::debug!(dir = %self.dir.display(), offset = leo, "producer snapshot written at close");
        }
        self.storage.sync_dir(&self.dir).at(&self.dir)?;
        self.recovery_point.fetch_max(leo, Ordering::AcqRel);
        tracing::debug!(dir = %self.dir.display(), log_end_offset = leo, "partition log closed");
        Ok(())
    }

    // Every mutation passes through `guarded`: after an I/O failure the log refuses writes until it is
    // reopened (and recovered), as Kafka takes a failed log directory offline: a failed fsync may have
    // dropped dirty pages, so nothing written since the last good sync can be trusted.
    /// [`PartitionLog::append_as_leader`] for a given origin: `Coordinator` for transaction markers and
    /// barriers, `Client` for a producer's batches.
    ///
    /// A coordinator's markers are checked under the transaction version 0/1 rule; one that ended the
    /// transaction under version 2 appends with
    /// [`append_as_leader_with_transaction_version`](Self::append_as_leader_with_transaction_version).
    pub fn append_as_leader_with_origin(
        &self,
        batches: &mut [u8],
        leader_epoch: i32,
        origin: AppendOrigin,
    ) -> Result<LogAppendInfo, Error> {
        self.append_as_leader_with_transaction_version(
            batches,
            leader_epoch,
            origin,
            TransactionVersion::UNKNOWN,
        )
    }

    /// Kafka's `appendAsLeader(records, leaderEpoch, origin, ..., transactionVersion)`: the version the
    /// coordinator wrote its markers under, which the bytes do not carry. From version 2 on, a marker
    /// whose producer epoch is not above the producer's is refused (`INVALID_PRODUCER_EPOCH`), unless no
    /// transaction is open and the epoch is the same (a retry of a marker already written).
    pub fn append_as_leader_with_transaction_version(
        &self,
        batches: &mut [u8],
        leader_epoch: i32,
        origin: AppendOrigin,
        transaction_version: TransactionVersion,
    ) -> Result<LogAppendInfo, Error> {
        self.writable("append")?;
        let info = self.guarded(|| {
            self.append_as_leader_with_origin_inner(
                batches,
                leader_epoch,
                origin,
                transaction_version,
            )
        })?;
        self.flush_if_messages_due()?;
        self.maybe_expire_producers();
        Ok(info)
    }

    /// `flush.messages`: checked after the append released the writer lock, so the sync does not hold
    /// up other appenders (they join the next flush as a group instead).
    fn flush_if_messages_due(&self) -> Result<(), Error> {
        // The recovery point comes from a checkpoint and may be far below the log (even i64::MIN).
        let unflushed = self.log_end_offset().saturating_sub(self.recovery_point());
        if unflushed >= self.config.flush_messages {
            self.flush(self.log_end_offset())?;
        }
        Ok(())
    }

    /// Which leader appends the log admits now (a mirror partition is read-only).
    pub fn write_mode(&self) -> WriteMode {
        match self.write_mode.load(Ordering::Acquire) {
            1 => WriteMode::ReadOnly,
            2 => WriteMode::BarrierOnly,
            3 => WriteMode::AbortsAndBarrier,
            _ => WriteMode::Writable,
        }
    }

    /// Sets who may append as leader. Follower and mirror appends are never refused by it.
    pub fn set_write_mode(&self, mode: WriteMode) {
        let byte = match mode {
            WriteMode::Writable => 0,
            WriteMode::ReadOnly => 1,
            WriteMode::BarrierOnly => 2,
            WriteMode::AbortsAndBarrier => 3,
        };
        self.write_mode.store(byte, Ordering::Release);
    }

    /// KIP-1279: a mirror partition takes leader appends only once STOPPED; in STOPPING only the
    /// coordinator's MIRROR_PID_RESET barrier (and, for a stop that aborts, its ABORT markers of open
    /// transactions).
    fn check_write_mode(
        &self,
        batches: &[u8],
        validated: &ValidatedBatches,
        origin: AppendOrigin,
    ) -> Result<(), Error> {
        let refuse = match self.write_mode() {
            WriteMode::Writable => return Ok(()),
            WriteMode::ReadOnly => "it is a mirror partition that is not stopped",
            WriteMode::BarrierOnly => {
                let each = summaries(batches, validated);
                let barrier = !each.is_empty() && each.iter().all(|b| b.is_mirror_pid_reset());
                if origin == AppendOrigin::Coordinator && barrier {
                    return Ok(());
                }
                "the mirror partition is stopping: only its MIRROR_PID_RESET barrier is accepted"
            }
            WriteMode::AbortsAndBarrier => {
                let each = summaries(batches, validated);
                // Every batch of the set is the barrier or an ABORT of an open transaction: one other
                // batch beside them is a write the stop did not make.
                let admitted = !each.is_empty()
                    && each.iter().all(|b| {
                        b.is_mirror_pid_reset()
                            || (matches!(b.control, Some(ControlKind::Abort { .. }))
                                && self.has_open_transaction(b.producer_id))
                    });
                if origin == AppendOrigin::Coordinator && admitted {
                    return Ok(());
                }
                "the mirror partition is stopping: only ABORT markers of its open transactions and \
                 its MIRROR_PID_RESET barrier are accepted"
            }
        };
        Err(Error::rejected(
            KafkaError::ReadOnlyTopic,
            format!("{}: {refuse}", self.dir.display()),
        ))
    }

    /// A mirror fetcher's append (KIP-1279 §3.3): the source's batches unchanged, like a follower's
    /// (producer state, epoch cache and `.txnindex` rebuilt from them). An empty log whose first fetched
    /// batch starts below its start (the source's log start fell inside a batch) restarts at that batch,
    /// as Kafka's follower does. The high watermark follows the log end: a mirror has no replicas to wait on.
    pub fn append_as_mirror(&self, batches: &[u8]) -> Result<LogAppendInfo, Error> {
        let info = self.append_as_mirror_unflushed(batches)?;
        self.flush_if_messages_due()?;
        Ok(info)
    }

    /// [`append_as_mirror`](Self::append_as_mirror) without its `flush.messages` check: a mirror's fetch
    /// round appends many partitions and then flushes those whose [`flush_due`](Self::flush_due) holds
    /// together ([`flush_many`](Self::flush_many)), not one sync after each append.
    pub fn append_as_mirror_unflushed(&self, batches: &[u8]) -> Result<LogAppendInfo, Error> {
        self.writable("append")?;
        let leo = self.log_end_offset();
        if leo == self.log_start_offset() {
            if let Ok((first, _)) = crate::format::RecordBatch::parse_unchecked_crc(batches, 0) {
                let (base, last) = (first.base_offset(), first.last_offset());
                if base < leo && last >= leo {
                    self.truncate_fully_and_start_at(base)?;
                }
            }
        }
        let info = self.guarded(|| self.append_as_follower_inner(batches))?;
        self.maybe_expire_producers();
        self.update_high_watermark(self.log_end_offset());
        Ok(info)
    }

    /// Appends a follower's (or mirror's) batches unchanged: offsets, epochs and bytes as they are. The
    /// first batch must not start below the log end offset.
    pub fn append_as_follower(&self, batches: &[u8]) -> Result<LogAppendInfo, Error> {
        self.writable("append")?;
        let info = self.guarded(|| self.append_as_follower_inner(batches))?;
        self.flush_if_messages_due()?;
        self.maybe_expire_producers();
        Ok(info)
    }

    /// Rolls a new active segment at the log end offset.
    pub fn roll(&self) -> Result<(), Error> {
        self.writable("roll")?;
        self.guarded(|| self.roll_inner())
    }

    /// Syncs everything up to at least `offset` and moves the recovery point. Concurrent callers share one
    /// sync (group commit): whoever syncs covers every append published before it started.
    pub fn flush(&self, offset: i64) -> Result<(), Error> {
        if self.read_only || self.is_closed() {
            return Ok(()); // nothing of a reader's is ever written
        }
        self.guarded(|| self.flush_inner(offset))
    }

    /// Flushes every log to its log end offset (a log directory's periodic flush, a group commit across
    /// partitions). Where the storage syncs files together (io_uring: every partition's writes in one
    /// submission, `RWF_DSYNC`, instead of one `fdatasync` after another) their `.log`s are synced in one
    /// call first; then each log's own flush finds them synced and moves its recovery point. A failure of
    /// that shared call is left to each log's flush to meet again and report (the direct path keeps a
    /// failed file failed), so the log it belongs to is the one taken offline.
    pub fn flush_many(logs: &[&PartitionLog]) -> Result<(), Error> {
        Self::sync_logs_together(logs);
        for log in logs {
            log.flush(log.log_end_offset())?;
        }
        Ok(())
    }

    /// Flushes every log to its log end offset and returns each log's own result (a failover of many
    /// partitions, where one partition's failed sync must fail only that partition). Where the storage
    /// syncs files together their `.log`s go in one call first, as in [`PartitionLog::flush_many`]; then
    /// the logs' own flushes (what is left: indexes, new segments' directories, or on other storages
    /// everything) run on up to [`FLUSH_THREADS`] threads: an `fdatasync` waits on the disk, not the
    /// CPU, and a disk (and its journal) takes many at once in about the time of one.
    pub fn flush_each(logs: &[&PartitionLog]) -> Vec<Result<(), Error>> {
        Self::sync_logs_together(logs);
        on_threads(logs, |_, l| l.flush(l.log_end_offset()))
    }

    /// Closes every log ([`PartitionLog::close`]) and returns each log's own result (a clean shutdown
    /// of many partitions): flushed together first ([`PartitionLog::flush_each`]), then closed on up to
    /// [`FLUSH_THREADS`] threads, since each close syncs its indexes and writes a producer snapshot.
    pub fn close_each(logs: &[&PartitionLog]) -> Vec<Result<(), Error>> {
        let flushed = Self::flush_each(logs);
        let closed = on_threads(logs, |_, l| l.close());
        // A log whose flush failed is failed: its close lets go of it and reports what went wrong first.
        flushed
            .into_iter()
            .zip(closed)
            .map(|(f, c)| f.and(c))
            .collect()
    }

    /// Where the storage syncs files together, the `.log`s of every log with unflushed data in one
    /// [`Storage::sync_files`] call. Its failure is left to each log's own flush to meet again and report
    /// (the direct path keeps a failed file failed), so the log it belongs to is the one taken offline.
    fn sync_logs_together(logs: &[&PartitionLog]) {
        let Some(first) = logs.first() else { return };
        if !first.storage.syncs_together() {
            return;
        }
        let files: Vec<_> = logs
            .iter()
            .filter(|l| !l.read_only && !l.is_closed())
            .filter(|l| l.recovery_point() < l.log_end_offset())
            .flat_map(|l| l.segments_to_sync())
            .map(|seg| seg.log_file())
            .collect();
        let _ = first.storage.sync_files(&files);
    }

    /// The segments a flush to the log end syncs: from the one holding the recovery point, and any
    /// freshly sealed one whose indexes are not yet synced.
    fn segments_to_sync(&self) -> Vec<Arc<LogSegment>> {
        let from = self.recovery_point();
        let segments = self.segment_list();
        let mut out = Vec::new();
        for (i, seg) in segments.iter().enumerate() {
            let next_base = segments.get(i + 1).map(|s| s.base_offset());
            if next_base.is_some_and(|n| n <= from) && !seg.has_unsynced_indexes() {
                continue;
            }
            out.push(seg.clone());
        }
        out
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

    /// Raises the log start offset (DeleteRecords, or a mirror following its source); never above the HW.
    pub fn increment_log_start_offset(&self, offset: i64) -> Result<bool, Error> {
        self.writable("raising the log start offset")?;
        self.guarded(|| self.increment_log_start_offset_inner(offset))
    }

    /// Retention (`deleteOldSegments`): segments wholly below the log start offset, then by size
    /// (`retention.bytes`), then by time (`retention.ms`). Never the active segment's data past the high
    /// watermark. Returns the deleted base offsets.
    pub fn delete_old_segments(&self) -> Result<Vec<i64>, Error> {
        self.writable("retention")?;
        self.guarded(|| self.delete_old_segments_inner())
    }

    /// Clean close: everything flushed, the active segment's closing time-index entry written.
    /// A closed log refuses changes, and its directory may be opened again (the claim and the log
    /// directory's lock are released).
    pub fn close(&self) -> Result<(), Error> {
        if self.read_only || self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        let closed = self.guarded(|| self.close_inner());
        // A log that failed a write cannot close cleanly (nothing since its last good sync is trusted),
        // but it still lets go of the partition, so the writer can reopen it and recover.
        if closed.is_ok() || self.is_failed() {
            self.closed.store(true, Ordering::Release);
            self.claim.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
        closed
    }

    /// Whether this log was opened read-only ([`PartitionLog::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Whether [`PartitionLog::close`] has run.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn writable(&self, operation: &'static str) -> Result<(), Error> {
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

    fn guarded<T>(&self, op: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
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

    /// Whether an I/O failure has taken the log offline (until it is reopened).
    pub fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    fn psm(&self) -> MutexGuard<'_, ProducerStateManager> {
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

    /// A read_committed fetch: bounded by the last stable offset, with the aborted transactions that
    /// overlap the returned range (as a Fetch response carries them).
    pub fn read_committed(
        &self,
        start_offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<(LogReadInfo, Vec<AbortedTxn>), Error> {
        let lso = self.last_stable_offset();
        let info = self.read(start_offset, max_bytes, Some(lso), min_one_batch)?;
        let upper = info.next_offset;
        let mut aborted = Vec::new();
        if upper > start_offset {
            for seg in self.segments_from(start_offset) {
                let (found, complete) = seg.collect_aborted(start_offset, upper);
                aborted.extend(found);
                if complete {
                    break;
                }
            }
        }
        Ok((info, aborted))
    }

    /// Writes the snapshots taken at rolls (temp, fsync, rename); their directory entries are synced with
    /// the segments' by the caller (flush, close).
    fn write_pending_snapshots(&self) -> Result<(), Error> {
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
    fn discard_snapshots_after(&self, offset: i64) -> Result<(), Error> {
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
    fn load_producer_state(
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
    fn rebuild_producer_state(
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

    /// For tests and tools: the segment at `base`.
    pub fn segment(&self, base: i64) -> Option<Arc<LogSegment>> {
        self.segments
            .read()
            .expect("segments lock poisoned")
            .get(&base)
            .cloned()
    }
}

/// The offset after `last_offset`, which an appended batch may end at: Kafka's offsets stop at i64::MAX, so
/// a batch ending there would leave the log end offset nowhere to go.
fn offset_after(last_offset: i64) -> Result<i64, Error> {
    last_offset.checked_add(1).ok_or_else(|| {
        Error::rejected(
            KafkaError::OffsetOutOfRange,
            format!(
                "offsets end at {}: a batch ending at {last_offset} leaves no log end offset",
                i64::MAX
            ),
        )
    })
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

/// The byte length of the whole batches at the start of `bytes`, and the offset after the last of them.
fn whole_batches(bytes: &[u8], start_offset: i64) -> (usize, i64) {
    let mut it = Batches::new(bytes).without_crc();
    let mut len = 0;
    let mut next = start_offset;
    for b in it.by_ref() {
        let Ok(b) = b else { break };
        len += b.size_in_bytes();
        next = b.last_offset().saturating_add(1);
    }
    debug_assert!(
        !matches!(it.tail(), Some(Tail::Corrupt { .. })),
        "published bytes are whole batches"
    );
    (len, next)
}

/// The producer-state summaries of the v2 batches each segment's recovery pass checked, so the replay
/// after it does not read those segments again. Bounded: past `RECOVERED_SUMMARIES_MAX` summaries in all
/// (~64 B each), further segments are not kept and the replay reads them as before.
#[derive(Debug, Default)]
struct RecoveredBatches {
    by_segment: BTreeMap<i64, Vec<BatchSummary>>,
    kept: usize,
    /// What recovering a segment whose indexes were rebuilt at load found (below the unclean rescan, or
    /// after a clean shutdown): the epochs of its batches.
    rebuilt: BTreeMap<i64, crate::segment::SegmentRecovery>,
    /// Segments with missing or corrupt indexes that the unclean rescan rebuilds.
    deferred: std::collections::BTreeSet<i64>,
    /// The read buffer every segment's recovery reuses.
    buf: Vec<u8>,
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
            &mut self.buf,
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

#[derive(Debug, Default)]
struct ReplayStats {
    snapshot_loaded: Option<i64>,
    snapshots_deleted: Vec<i64>,
    batches_replayed: u64,
    mirror_pid_resets: u64,
}

/// Summaries of the v2 batches of a validated set (legacy batches carry no producer state).
fn summaries(bytes: &[u8], v: &ValidatedBatches) -> Vec<BatchSummary> {
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

fn producer_error(e: klog_psm::Error) -> Error {
    Error::Rejected {
        error: KafkaError::from_producer_state(&e),
        message: e.to_string(),
    }
}
