//! `LogLoader`: every partition of a log directory opened after a clean or an unclean shutdown, each with a
//! `RecoveryReport`. One partition's failure (an error, or a bug that panics) is reported for that
//! partition and never stops the others. Partitions load on up to `threads` threads at once (Kafka's
//! `num.recovery.threads.per.data.dir`, default 1): each partition is independent, so a log directory's
//! recovery is as parallel as its partitions, and the partitions with the most segments start first so
//! that a large one does not run alone at the end.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use klog_log::clock::{Clock, SystemClock};

use klog_log::config::LogConfig;
use klog_log::io::Storage;
use klog_log::log_dir::{partition_dir_names, LogDir};
use klog_log::partition_log::{partition_dir_name, OpenReport, PartitionLog};
use klog_log::Error;

use crate::swap::complete_swaps;

/// One cut recovery made to a partition's log: the end of a segment, or a whole segment deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The first offset that is gone (a deleted segment: its base offset).
    pub offset: i64,
    /// The segment that was cut and the byte position of the cut in it (0 for a deleted segment).
    pub segment: i64,
    /// The byte position of the cut in that segment (0 for a deleted segment).
    pub position: u64,
    /// Bytes that left the disk.
    pub bytes: u64,
    /// `torn write`, `zero-filled tail`, the failed check, or `segment deleted: ...` naming the cut before
    /// it (or the log start offset beyond the log end).
    pub reason: String,
}

/// What recovering one partition found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The partition directory name, `<topic>-<partition>`.
    pub partition: String,
    /// Whether the log directory had `.kafka_cleanshutdown` (nothing was rescanned).
    pub clean_shutdown: bool,
    /// The log start offset after recovery.
    pub log_start_offset: i64,
    /// The log end offset after recovery.
    pub log_end_offset: i64,
    /// The recovery point after recovery (the offset below which everything is known to be synced).
    pub recovery_point: i64,
    /// Segments rescanned: from the recovery point on, and those whose indexes were rebuilt.
    pub segments_scanned: usize,
    /// Bytes of whole batches checked by this recovery and kept.
    pub bytes_validated: u64,
    /// Every cut, in the order made (empty when nothing was cut); in every path: rescans from the
    /// recovery point, and index rebuilds of segments whose indexes were missing or corrupt.
    pub truncated: Vec<Truncation>,
    /// The sum of `truncated`'s bytes: what left the `.log` files.
    pub bytes_truncated: u64,
    /// Base offsets of the segments whose missing or corrupt indexes were rebuilt.
    pub rebuilt_indexes: Vec<i64>,
    /// Base offsets of the interrupted `.swap` replacements completed.
    pub swaps_completed: Vec<i64>,
    /// The producer snapshot the state was loaded from (its offset), if any.
    pub snapshot_loaded: Option<i64>,
    /// Offsets of the producer snapshots deleted: stray ones, those out of the log's range, those that
    /// did not load, and after a rescan every one above the first rescanned segment (the replay derives
    /// that state from the batches, as Kafka's `recoverSegment` does).
    pub snapshots_deleted: Vec<i64>,
    /// Batches replayed into the producer state after the snapshot.
    pub batches_replayed: u64,
    /// MIRROR_PID_RESET barriers among the replayed batches.
    pub mirror_pid_resets: u64,
    /// Producers known after recovery.
    pub producers: usize,
    /// Producer snapshots written at the log end (with `take_snapshots`).
    pub snapshots_written: usize,
    /// Wall time the partition took to load.
    pub duration_ms: u64,
}

/// Kafka's `LogLoader` and the loading half of `LogManager`: opens every partition of a log directory
/// after a clean or an unclean shutdown, each isolated from the others' failures, with a report.
///
/// ```
/// use std::sync::Arc;
/// use klog_log::{config::LogConfig, io::StdStorage, log_dir::LogDir};
/// use klog_recovery::LogLoader;
///
/// # let dir = std::env::temp_dir().join(format!("klog-doc-loader-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// # { let d = LogDir::open(Arc::new(StdStorage), &dir)?; d.open_partition("orders-0", LogConfig::default())?; }
/// let loader = LogLoader::new(Arc::new(StdStorage), LogConfig::default());
/// let (mut log_dir, outcomes) = loader.load_dir(&dir, true)?;
/// for (name, outcome) in outcomes {
///     let (log, report) = outcome?; // one partition's failure never stops the others
///     println!("{name}: {} bytes cut, log end {}", report.bytes_truncated, report.log_end_offset);
///     log_dir.close_partition(log)?;
/// }
/// log_dir.close()?;
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), klog_log::Error>(())
/// ```
pub struct LogLoader {
    storage: Arc<dyn Storage>,
    config: LogConfig,
    clock: Arc<dyn Clock>,
    threads: usize,
    /// Each partition's own config (by directory name), where it differs from `config`.
    partition_configs: Option<Arc<PartitionConfigs>>,
}

/// A partition's log config by its directory name (a topic's configs, as the broker resolves them).
pub type PartitionConfigs = dyn Fn(&str) -> LogConfig + Send + Sync;

/// One partition's outcome.
pub type PartitionOutcome = (String, Result<(PartitionLog, RecoveryReport), Error>);

impl LogLoader {
    /// A loader reading through `storage`, opening every partition with `config`.
    pub fn new(storage: Arc<dyn Storage>, config: LogConfig) -> Self {
        LogLoader {
            storage,
            config,
            clock: Arc::new(SystemClock),
            threads: 1,
            partition_configs: None,
        }
    }

    /// Opens each partition with the config `configs` gives for its directory name (its topic's), not the
    /// loader's one config.
    pub fn with_partition_configs(mut self, configs: Arc<PartitionConfigs>) -> Self {
        self.partition_configs = Some(configs);
        self
    }

    /// Kafka's `num.recovery.threads.per.data.dir`: how many partitions load at once (at least 1).
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// The clock the loaded logs use (producer expiry on load reads it).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Opens every partition directory under `root`. With `take_snapshots`, a producer snapshot is written at
    /// each log end (Kafka's end of loading), so the next open replays nothing.
    pub fn load_dir(
        &self,
        root: &Path,
        take_snapshots: bool,
    ) -> Result<(LogDir, Vec<PartitionOutcome>), Error> {
        let _span = tracing::info_span!("load_dir", root = %root.display()).entered();
        let log_dir = LogDir::open(self.storage.clone(), root)?;
        let names = self.partition_names(root)?;
        let outcomes = self.load_partitions(&log_dir, &names, take_snapshots, &|| false, &|_| {});
        let failed = outcomes.iter().filter(|(_, r)| r.is_err()).count();
        tracing::info!(
            clean_shutdown = log_dir.had_clean_shutdown(),
            partitions = outcomes.len(),
            failed,
            "log directory loaded"
        );
        Ok((log_dir, outcomes))
    }

    /// Loads `names` of `log_dir` on up to `threads` threads, those with the most segments first; the
    /// outcomes come back in the order of `names`. `stop` is asked before each partition starts (one in
    /// progress always finishes): the partitions never started are absent from the result. `done` is told
    /// each partition that finished (from the thread that loaded it), for progress.
    pub fn load_partitions(
        &self,
        log_dir: &LogDir,
        names: &[String],
        take_snapshots: bool,
        stop: &(dyn Fn() -> bool + Sync),
        done: &(dyn Fn(&str) + Sync),
    ) -> Vec<PartitionOutcome> {
        let order = self.largest_first(log_dir.root(), names);
        let next = AtomicUsize::new(0);
        let slots: Mutex<Vec<Option<PartitionOutcome>>> =
            Mutex::new(names.iter().map(|_| None).collect());
        let work = || loop {
            if stop() {
                return;
            }
            let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) else {
                return;
            };
            let name = &names[i];
            let result = self.load_partition_isolated(log_dir, name, take_snapshots);
            if let Err(e) = &result {
                tracing::error!(partition = %name, error = %e, "partition failed to load; the others go on");
            }
            done(name);
            slots.lock().unwrap_or_else(|e| e.into_inner())[i] = Some((name.clone(), result));
        };
        let threads = self.threads.min(names.len()).max(1);
        if threads == 1 {
            work();
        } else {
            std::thread::scope(|scope| {
                for _ in 0..threads {
                    scope.spawn(work);
                }
            });
        }
        slots
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .into_iter()
            .flatten()
            .collect()
    }

    /// The order the partitions of `names` start in (indexes into it): most segments first, ties in the
    /// names' order. The segment count stands for the work (files to open, bytes to rescan); a large
    /// partition started last would run alone on one thread after the others finished. One listing per
    /// partition, and only when the threads have partitions to choose from.
    fn largest_first(&self, root: &Path, names: &[String]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..names.len()).collect();
        if self.threads > 1 && names.len() > self.threads {
            let segments: Vec<usize> = names
                .iter()
                .map(|name| {
                    self.storage.list(&root.join(name)).map_or(0, |files| {
                        files.iter().filter(|f| f.ends_with(".log")).count()
                    })
                })
                .collect();
            // Stable: equal counts keep the names' order.
            order.sort_by_key(|&i| std::cmp::Reverse(segments[i]));
        }
        order
    }

    /// The partition directories under `root`, sorted ([`partition_dir_names`]: a directory whose name
    /// Kafka refuses is listed, and loading it fails with the reason).
    pub fn partition_names(&self, root: &Path) -> Result<Vec<String>, Error> {
        partition_dir_names(self.storage.as_ref(), root)
    }

    /// `load_partition`, with a panic (a klog bug) turned into this partition's error.
    pub fn load_partition_isolated(
        &self,
        log_dir: &LogDir,
        name: &str,
        take_snapshot: bool,
    ) -> Result<(PartitionLog, RecoveryReport), Error> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.load_partition(log_dir, name, take_snapshot)
        }))
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(Error::CorruptFile {
                path: log_dir.root().join(name),
                line: 0,
                reason: format!("recovery failed unexpectedly (a klog bug): {what}"),
            })
        })
    }

    /// Opens one partition directory of `log_dir`.
    pub fn load_partition(
        &self,
        log_dir: &LogDir,
        name: &str,
        take_snapshot: bool,
    ) -> Result<(PartitionLog, RecoveryReport), Error> {
        let started = Instant::now();
        let _span = tracing::info_span!("load_partition", partition = name).entered();
        // Before anything in the directory is touched (completing swaps renames and deletes files).
        partition_dir_name(&log_dir.root().join(name))?;
        // From here the directory may change: unless it is closed cleanly, the marker cannot vouch for it.
        log_dir.opening(name);
        let swaps = complete_swaps(self.storage.as_ref(), &log_dir.root().join(name))?;
        let (log, open) = log_dir.open_partition_with_clock(
            name,
            self.partition_configs
                .as_ref()
                .map_or_else(|| self.config.clone(), |f| f(name)),
            Arc::clone(&self.clock),
        )?;
        let snapshots_written = if take_snapshot {
            log.take_snapshot()? as usize
        } else {
            0
        };
        let report = RecoveryReport {
            partition: name.to_owned(),
            clean_shutdown: log_dir.had_clean_shutdown(),
            log_start_offset: log.log_start_offset(),
            log_end_offset: log.log_end_offset(),
            recovery_point: log.recovery_point(),
            segments_scanned: open.recovered_segments.len() + open.rebuilt_indexes.len(),
            bytes_validated: open.bytes_validated,
            truncated: truncations(&open),
            bytes_truncated: open.truncations.iter().map(|t| t.bytes).sum(),
            rebuilt_indexes: open.rebuilt_indexes.clone(),
            swaps_completed: swaps.completed,
            snapshot_loaded: open.snapshot_loaded,
            snapshots_deleted: open.snapshots_deleted.clone(),
            batches_replayed: open.batches_replayed,
            mirror_pid_resets: open.mirror_pid_resets,
            producers: log.producers().len(),
            snapshots_written,
            duration_ms: started.elapsed().as_millis() as u64,
        };
        trace_report(&report);
        Ok((log, report))
    }
}

/// One event per recovered partition, a warning per cut: what an operator reads after a crash.
fn trace_report(report: &RecoveryReport) {
    for t in &report.truncated {
        tracing::warn!(
            segment = t.segment,
            offset = t.offset,
            position = t.position,
            bytes = t.bytes,
            reason = %t.reason,
            "recovery cut the log"
        );
    }
    if !report.swaps_completed.is_empty() {
        tracing::info!(swaps = ?report.swaps_completed, "interrupted .swap replacements completed");
    }
    tracing::info!(
        clean_shutdown = report.clean_shutdown,
        log_start_offset = report.log_start_offset,
        log_end_offset = report.log_end_offset,
        segments_scanned = report.segments_scanned,
        bytes_validated = report.bytes_validated,
        bytes_truncated = report.bytes_truncated,
        rebuilt_indexes = report.rebuilt_indexes.len(),
        batches_replayed = report.batches_replayed,
        duration_ms = report.duration_ms,
        "partition recovered"
    );
}

fn truncations(open: &OpenReport) -> Vec<Truncation> {
    open.truncations
        .iter()
        .map(|t| Truncation {
            offset: t.offset,
            segment: t.segment,
            position: t.position,
            bytes: t.bytes,
            reason: t.reason.to_string(),
        })
        .collect()
}
