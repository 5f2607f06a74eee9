//! `LogLoader`: every partition of a log directory opened after a clean or an unclean shutdown, each with a
//! `RecoveryReport`. One partition's failure (an error, or a bug that panics) is reported for that
//! partition and never stops the others. Partitions load on up to `threads` threads at once (Kafka's
//! `num.recovery.threads.per.data.dir`, default 1): each partition is independent, so a log directory's
//! recovery is as parallel as its partitions.

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
    pub position: u64,
    /// Bytes that left the disk.
    pub bytes: u64,
    /// `torn write`, `zero-filled tail`, the failed check, or `segment deleted: ...` with the cut or the
    /// gap before it.
    pub reason: String,
}

/// What recovering one partition found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    pub partition: String,
    pub clean_shutdown: bool,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub recovery_point: i64,
    pub segments_scanned: usize,
    /// Bytes of whole batches checked by this recovery and kept.
    pub bytes_validated: u64,
    /// Every cut, in the order made (empty when nothing was cut); in every path: rescans from the
    /// recovery point, and index rebuilds of segments whose indexes were missing or corrupt.
    pub truncated: Vec<Truncation>,
    /// The sum of `truncated`'s bytes: what left the `.log` files.
    pub bytes_truncated: u64,
    pub rebuilt_indexes: Vec<i64>,
    pub swaps_completed: Vec<i64>,
    pub snapshot_loaded: Option<i64>,
    pub batches_replayed: u64,
    pub mirror_pid_resets: u64,
    pub producers: usize,
    pub snapshots_written: usize,
    pub duration_ms: u64,
}

pub struct LogLoader {
    storage: Arc<dyn Storage>,
    config: LogConfig,
    clock: Arc<dyn Clock>,
    threads: usize,
}

/// One partition's outcome.
pub type PartitionOutcome = (String, Result<(PartitionLog, RecoveryReport), Error>);

impl LogLoader {
    pub fn new(storage: Arc<dyn Storage>, config: LogConfig) -> Self {
        LogLoader {
            storage,
            config,
            clock: Arc::new(SystemClock),
            threads: 1,
        }
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
        let log_dir = LogDir::open(self.storage.clone(), root)?;
        let names = self.partition_names(root)?;
        let outcomes = self.load_partitions(&log_dir, &names, take_snapshots, &|| false, &|_| {});
        Ok((log_dir, outcomes))
    }

    /// Loads `names` of `log_dir` on up to `threads` threads; the outcomes come back in the order of
    /// `names`. `stop` is asked before each partition starts (one in progress always finishes): the
    /// partitions never started are absent from the result. `done` is told each partition that finished
    /// (from the thread that loaded it), for progress.
    pub fn load_partitions(
        &self,
        log_dir: &LogDir,
        names: &[String],
        take_snapshots: bool,
        stop: &(dyn Fn() -> bool + Sync),
        done: &(dyn Fn(&str) + Sync),
    ) -> Vec<PartitionOutcome> {
        let next = AtomicUsize::new(0);
        let slots: Mutex<Vec<Option<PartitionOutcome>>> =
            Mutex::new(names.iter().map(|_| None).collect());
        let work = || loop {
            if stop() {
                return;
            }
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(name) = names.get(i) else {
                return;
            };
            let result = self.load_partition_isolated(log_dir, name, take_snapshots);
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
        // Before anything in the directory is touched (completing swaps renames and deletes files).
        partition_dir_name(&log_dir.root().join(name))?;
        let swaps = complete_swaps(self.storage.as_ref(), &log_dir.root().join(name))?;
        let (log, open) = log_dir.open_partition_with_clock(
            name,
            self.config.clone(),
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
            batches_replayed: open.batches_replayed,
            mirror_pid_resets: open.mirror_pid_resets,
            producers: log.producers().len(),
            snapshots_written,
            duration_ms: started.elapsed().as_millis() as u64,
        };
        Ok((log, report))
    }
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
