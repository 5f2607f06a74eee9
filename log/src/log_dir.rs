//! A log directory: the root holding partition directories and the per-directory files
//! (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`, `replication-offset-checkpoint`,
//! `.kafka_cleanshutdown`). Opening reads them; closing a partition cleanly writes them back.
//!
//! One writer per log directory: a writable open holds the directory's `.lock` for its life
//! ([`crate::dir_lock`]); [`LogDir::open_read_only`] takes none and changes nothing on disk.
//!
//! The clean-shutdown marker is Kafka's rule (`LogManager.shutdown`: the marker only for a directory
//! whose every log was loaded and closed): its presence at open means nothing is rescanned. It is removed
//! at open (so a crash counts as unclean) and written back at close ([`LogDir::shut_down`]) only if every
//! partition directory the root holds is one this writer opened and closed cleanly, or was there
//! untouched since a clean shutdown (the marker was there at open and this writer never opened it for
//! writing). A partition directory opened and not closed cleanly, one left unopened after an unclean
//! shutdown, or one that cannot be listed withholds the marker: a tool that opened one partition must
//! not vouch for the others. `LogDir`, the cluster node and every CLI writer close through this rule.
//! One writable `LogDir` per root per process ([`crate::dir_lock::Claim`]): a second one's close would
//! vouch for partitions the first still appends to.
//!
//! Checkpoints: a line that does not parse is an error naming the file and the line, raised before anything
//! is written ([`LogDir::open`]); dropping it would reset that partition's offsets, and rewriting the file
//! would drop every other entry. Recovery alone reads past it ([`LogDir::open_salvaging`]): the entries
//! that parse are kept, the others reported, and their partitions fall back to Kafka's defaults for a
//! missing entry (recovery point 0: rescanned from the first segment). A rewrite replaces only the entries
//! of the partitions this `LogDir` checkpointed and keeps whatever else the file holds at that moment, so
//! neither a partition it never opened nor another `LogDir`'s newer entry is lost.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::checkpoint::{
    self, read_offsets_salvaging, write_offsets, OffsetMap, CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
};
use crate::config::LogConfig;
use crate::dir_lock::{Claim, DirLock};
use crate::error::IoContext;
use crate::io::{
    choose, decide, AutoDecision, BackendChoice, IoBackend, IoWorkload, StdStorage, Storage,
};
use crate::partition_log::{
    parse_dir_name, partition_dir_name, read_only_view, OpenOptions, OpenReport, PartitionLog,
};
use crate::topic_partition::{parse_partition_dir_name, PartitionDirName, REMOTE_INDEX_CACHE_DIR};
use crate::Error;

/// A Kafka log directory: its partition directories and the checkpoint files beside them, with its
/// `.lock` held by the writer for the whole session.
///
/// ```
/// use std::sync::Arc;
/// use klog_log::{config::LogConfig, io::StdStorage, log_dir::LogDir};
///
/// # let root = std::env::temp_dir().join(format!("klog-doc-logdir-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&root);
/// let mut log_dir = LogDir::open(Arc::new(StdStorage), &root)?;
/// let (log, _report) = log_dir.open_partition("orders-0", LogConfig::default())?;
/// assert_eq!(log.log_end_offset(), 0);
/// log_dir.close_partition(log)?; // closed cleanly and checkpointed
/// log_dir.close()?; // the clean-shutdown marker: the next open rescans nothing
/// # std::fs::remove_dir_all(&root).unwrap();
/// # Ok::<(), klog_log::Error>(())
/// ```
#[derive(Debug)]
pub struct LogDir {
    storage: Arc<dyn Storage>,
    /// Kafka's `.lock`, held while this writer lives (None for a read-only open).
    lock: Option<Arc<DirLock>>,
    /// This process's one writable `LogDir` of the root, released at [`LogDir::shut_down`] or drop.
    claim: Option<Claim>,
    root: PathBuf,
    had_clean_shutdown: bool,
    /// Which partition directories this writer opened for writing and how they ended: the marker
    /// vouches only for what closed cleanly (or was never opened since a clean shutdown).
    partitions: std::sync::Mutex<Opened>,
    recovery_points: OffsetMap,
    log_start_offsets: OffsetMap,
    high_watermarks: OffsetMap,
    /// The partitions whose entries this `LogDir` wrote: only those replace the files' entries.
    written: BTreeSet<(String, i32)>,
    /// Opened by recovery: lines that do not parse were reported once and are dropped on rewrite.
    salvaging: bool,
    /// The backend the directory's storage is and why ([`LogDir::open_backend_for`]).
    choice: Option<BackendChoice>,
    /// The storage of partitions flushed after every append (`flush.messages=1`) when `auto` gives
    /// durable appends another backend than buffered ones.
    durable_storage: Option<Arc<dyn Storage>>,
}

impl LogDir {
    /// Opens the log directory `root` (created if missing) as its writer: takes its `.lock` (refused at once
    /// with [`Error::LogDirLocked`] while another process holds it) and takes down its clean-shutdown
    /// marker. A checkpoint line that does not parse is an error naming the file and line, and nothing is
    /// changed. Through a [`crate::io::ReadOnlyStorage`] this is [`LogDir::open_read_only`].
    pub fn open(storage: Arc<dyn Storage>, root: &Path) -> Result<Self, Error> {
        let (log_dir, problems) = Self::open_with(storage, root, false)?;
        debug_assert!(
            problems.is_empty(),
            "a strict open returns the first problem"
        );
        Ok(log_dir)
    }

    /// Opens `root` as its writer on the backend `backend` names, for buffered appends
    /// ([`LogDir::open_backend_for`]).
    pub fn open_backend(backend: IoBackend, root: &Path) -> Result<Self, Error> {
        Self::open_backend_for(backend, root, IoWorkload::Buffered)
    }

    /// Opens `root` as its writer on the backend `backend` names, for a writer that does `workload`
    /// most. A forced one (`std`, `uring`) is taken as it is. `Auto` takes the directory's `.lock` first
    /// (through std), then `io_backend=auto`'s decision for the directory ([`crate::io::decide`]:
    /// recorded, or probed and recorded): its choice for `workload` is the directory's storage, its
    /// durable choice that of partitions opened with `flush.messages=1`. The choice is logged at info
    /// (`-v`) and kept ([`LogDir::backend_choice`]).
    pub fn open_backend_for(
        backend: IoBackend,
        root: &Path,
        workload: IoWorkload,
    ) -> Result<Self, Error> {
        if backend != IoBackend::Auto {
            let storage = crate::io::open_backend(backend).at(root)?;
            let mut log_dir = Self::open(storage, root)?;
            let choice = BackendChoice::forced(backend, workload);
            choice.log(root);
            log_dir.choice = Some(choice);
            return Ok(log_dir);
        }
        let mut log_dir = Self::open(Arc::new(StdStorage), root)?;
        let decision = decide(log_dir.storage.as_ref(), root);
        let (storage, choice) = choose(&decision, workload);
        log_dir.storage = storage;
        if decision.durable.backend != decision.backend(workload) {
            log_dir.durable_storage = Some(choose(&decision, IoWorkload::Durable).0);
        }
        choice.log(root);
        log_dir.choice = Some(choice);
        Ok(log_dir)
    }

    /// The storage a writer of `root` that opens it through another type (the cluster node, recovery)
    /// takes for `workload`, with the choice (logged at info, `-v`): a forced backend as it is, `Auto`
    /// through the decision, measured under the directory's `.lock` (refused while another process
    /// holds it).
    pub fn backend_for(
        backend: IoBackend,
        root: &Path,
        workload: IoWorkload,
    ) -> Result<(Arc<dyn Storage>, BackendChoice), Error> {
        if backend != IoBackend::Auto {
            let storage = crate::io::open_backend(backend).at(root)?;
            let choice = BackendChoice::forced(backend, workload);
            choice.log(root);
            return Ok((storage, choice));
        }
        StdStorage.create_dir_all(root).at(root)?;
        let lock = DirLock::acquire(&StdStorage, root)?;
        let decision = decide(&StdStorage, root);
        drop(lock);
        let (storage, choice) = choose(&decision, workload);
        choice.log(root);
        Ok((storage, choice))
    }

    /// `io_backend=auto`'s decision for this directory, when it was opened with [`LogDir::open_backend`]
    /// and `Auto`.
    pub fn io_decision(&self) -> Option<&AutoDecision> {
        self.choice.as_ref().and_then(|c| c.decision.as_ref())
    }

    /// The backend this directory's storage is and why, when it was opened with
    /// [`LogDir::open_backend`] or [`LogDir::open_backend_for`].
    pub fn backend_choice(&self) -> Option<&BackendChoice> {
        self.choice.as_ref()
    }

    /// For recovery: as [`open`](Self::open), but checkpoint lines that do not parse are returned (each a
    /// `CorruptFile` naming the file and line) instead of failing; the entries that parse are kept.
    pub fn open_salvaging(
        storage: Arc<dyn Storage>,
        root: &Path,
    ) -> Result<(Self, Vec<Error>), Error> {
        Self::open_with(storage, root, true)
    }

    fn open_with(
        storage: Arc<dyn Storage>,
        root: &Path,
        salvaging: bool,
    ) -> Result<(Self, Vec<Error>), Error> {
        let (lock, claim) = if storage.is_read_only() {
            if storage.list(root).is_err() {
                return Err(Error::io(root, std::io::ErrorKind::NotFound.into()));
            }
            (None, None)
        } else {
            storage.create_dir_all(root).at(root)?;
            let lock = DirLock::acquire(storage.as_ref(), root)?;
            let claim = lock.claim_log_dir()?;
            remove_temp_files(storage.as_ref(), root)?;
            (Some(lock), Some(claim))
        };
        let mut problems = Vec::new();
        let mut read = |name: &str| -> Result<OffsetMap, Error> {
            let (map, found) = read_offsets_salvaging(storage.as_ref(), &root.join(name))?;
            let mut found = found.into_iter();
            match found.next() {
                Some(first) if !salvaging => Err(first),
                Some(first) => {
                    problems.push(first);
                    problems.extend(found);
                    Ok(map)
                }
                None => Ok(map),
            }
        };
        let recovery_points = read(RECOVERY_POINT_CHECKPOINT)?;
        let log_start_offsets = read(LOG_START_OFFSET_CHECKPOINT)?;
        let high_watermarks = read(REPLICATION_OFFSET_CHECKPOINT)?;
        let marker = root.join(CLEAN_SHUTDOWN_FILE);
        let had_clean_shutdown = match storage.remove(&marker) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(Error::io(&marker, e)),
        };
        if had_clean_shutdown {
            storage.sync_dir(root).at(root)?;
        }
        let log_dir = LogDir {
            recovery_points,
            log_start_offsets,
            high_watermarks,
            storage,
            lock,
            claim,
            partitions: Default::default(),
            root: root.to_owned(),
            had_clean_shutdown,
            written: BTreeSet::new(),
            salvaging,
            choice: None,
            durable_storage: None,
        };
        Ok((log_dir, problems))
    }

    /// Opens the existing log directory `root` for reading: no lock, nothing on disk changed (the marker,
    /// checkpoints and every partition's files stay as they are); partitions opened from it are read-only
    /// (see [`PartitionLog::open_read_only`]). Checkpoints and `close` do nothing.
    pub fn open_read_only(storage: Arc<dyn Storage>, root: &Path) -> Result<Self, Error> {
        Self::open(read_only_view(storage), root)
    }

    /// Whether it was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.lock.is_none() && self.storage.is_read_only()
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether `.kafka_cleanshutdown` was there at open.
    pub fn had_clean_shutdown(&self) -> bool {
        self.had_clean_shutdown
    }

    /// The storage it reads and writes through.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// Opens the partition directory `name` (`<topic>-<partition>`) with its checkpointed offsets.
    pub fn open_partition(
        &self,
        name: &str,
        config: LogConfig,
    ) -> Result<(PartitionLog, OpenReport), Error> {
        self.open_partition_with_clock(name, config, Arc::new(crate::clock::SystemClock))
    }

    /// `open_partition` with the log's clock (producer expiry, rolls and retention read it).
    pub fn open_partition_with_clock(
        &self,
        name: &str,
        config: LogConfig,
        clock: Arc<dyn crate::clock::Clock>,
    ) -> Result<(PartitionLog, OpenReport), Error> {
        if !self.storage.is_read_only() && self.claim.is_none() {
            return Err(Error::LogDirShutDown {
                dir: self.root.clone(),
            });
        }
        self.opening(name);
        let dir = self.root.join(name);
        let (topic, partition) = partition_dir_name(&dir)?;
        if name != format!("{topic}-{partition}") {
            // `a/b-0` or `../b-0`: a path, not a name of this log directory.
            return Err(Error::InvalidPartitionDir {
                path: dir,
                reason: "a partition directory is a direct child of its log directory".into(),
            });
        }
        let key = (topic, partition);
        let options = OpenOptions {
            recovery_point: self.recovery_points.get(&key).copied().unwrap_or(0),
            log_start_offset: self.log_start_offsets.get(&key).copied().unwrap_or(0),
            clean_shutdown: self.had_clean_shutdown,
        };
        let storage = match &self.durable_storage {
            Some(durable) if config.flush_messages == 1 => durable.clone(),
            _ => self.storage.clone(),
        };
        let (log, report) = PartitionLog::open_with_clock(storage, &dir, config, options, clock)?;
        if let Some(&hw) = self.high_watermarks.get(&key) {
            log.update_high_watermark(hw);
        }
        Ok((log, report))
    }

    /// Records that partition directory `name` is being opened for writing (or changed by recovery before
    /// its open): until it is closed cleanly through this `LogDir`, the close writes no marker.
    pub fn opening(&self, name: &str) {
        if !self.storage.is_read_only() {
            let mut partitions = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
            partitions.closed_cleanly.remove(name);
            partitions.opened.insert(name.to_owned());
        }
    }

    /// Flushes these partitions of the directory to their log ends together: on io_uring their writes
    /// and syncs go in one submission, not one `fdatasync` per partition ([`PartitionLog::flush_many`]).
    pub fn flush_partitions(&self, logs: &[&PartitionLog]) -> Result<(), Error> {
        PartitionLog::flush_many(logs)
    }

    /// Records a partition's offsets in the directory's checkpoint files (after a flush or a close). The
    /// files are re-read and only the entries of partitions this `LogDir` checkpointed are replaced.
    pub fn checkpoint(&mut self, log: &PartitionLog) -> Result<(), Error> {
        self.checkpoint_many(&[log])
    }

    /// Records the offsets of many partitions with one rewrite of each checkpoint file (a broker's
    /// periodic checkpoint, a clean shutdown): one per partition would rewrite and sync files whose size
    /// grows with the partition count once per partition.
    pub fn checkpoint_many(&mut self, logs: &[&PartitionLog]) -> Result<(), Error> {
        if self.storage.is_read_only() || logs.is_empty() {
            return Ok(());
        }
        for log in logs {
            self.record_offsets(log);
        }
        self.write_merged(RECOVERY_POINT_CHECKPOINT, &self.recovery_points)?;
        self.write_merged(LOG_START_OFFSET_CHECKPOINT, &self.log_start_offsets)?;
        self.write_merged(REPLICATION_OFFSET_CHECKPOINT, &self.high_watermarks)
    }

    /// Takes a partition's offsets into this `LogDir`'s entries (written by the next checkpoint).
    fn record_offsets(&mut self, log: &PartitionLog) {
        let key = (log.topic().to_owned(), log.partition());
        self.written.insert(key.clone());
        self.recovery_points
            .insert(key.clone(), log.recovery_point());
        self.high_watermarks
            .insert(key.clone(), log.high_watermark());
        let first_base = log.segment_base_offsets().first().copied().unwrap_or(0);
        if log.log_start_offset() > first_base {
            self.log_start_offsets.insert(key, log.log_start_offset());
        } else {
            self.log_start_offsets.remove(&key);
        }
    }

    /// Rewrites checkpoint `name`: this `LogDir`'s entries for the partitions it wrote, the file's own
    /// entries for every other partition.
    fn write_merged(&self, name: &str, ours: &OffsetMap) -> Result<(), Error> {
        let path = self.root.join(name);
        let (mut merged, problems) = read_offsets_salvaging(self.storage.as_ref(), &path)?;
        if let Some(first) = problems.into_iter().next().filter(|_| !self.salvaging) {
            return Err(first);
        }
        merged.retain(|key, _| !self.written.contains(key));
        for key in &self.written {
            if let Some(&offset) = ours.get(key) {
                merged.insert(key.clone(), offset);
            }
        }
        write_offsets(self.storage.as_ref(), &path, &merged)
    }

    /// Closes a partition cleanly and checkpoints it.
    pub fn close_partition(&mut self, log: PartitionLog) -> Result<(), Error> {
        let mut closed = self.close_partitions(vec![log])?;
        closed.pop().unwrap_or(Ok(()))
    }

    /// Closes many partitions cleanly (on threads, [`PartitionLog::close_each`]) and checkpoints those
    /// that closed with one write of each checkpoint file. Returns each partition's own result, in order;
    /// the outer error is the checkpoint write's.
    pub fn close_partitions(
        &mut self,
        logs: Vec<PartitionLog>,
    ) -> Result<Vec<Result<(), Error>>, Error> {
        let refs: Vec<&PartitionLog> = logs.iter().collect();
        self.close_logs(&refs)
    }

    /// [`close_partitions`](Self::close_partitions) for logs shared with others (a cluster node's): each
    /// is closed in place, and only those that closed and were checkpointed count as closed cleanly.
    pub fn close_logs(&mut self, logs: &[&PartitionLog]) -> Result<Vec<Result<(), Error>>, Error> {
        let results = PartitionLog::close_each(logs);
        let closed: Vec<&PartitionLog> = logs
            .iter()
            .zip(&results)
            .filter(|(_, r)| r.is_ok())
            .map(|(l, _)| *l)
            .collect();
        self.checkpoint_many(&closed)?;
        let mut partitions = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        for log in closed {
            if let Some(name) = log.dir().file_name() {
                let name = name.to_string_lossy().into_owned();
                partitions.opened.remove(&name);
                partitions.closed_cleanly.insert(name);
            }
        }
        Ok(results)
    }

    /// Ends the session ([`shut_down`](Self::shut_down)) and releases the directory.
    pub fn close(mut self) -> Result<(), Error> {
        self.shut_down().map(|_| ())
    }

    /// Kafka's clean shutdown of the directory: `.kafka_cleanshutdown` goes down if every partition
    /// directory the root holds is vouched for (see the module docs), so the next open rescans nothing;
    /// otherwise it stays away, and each partition directory that withheld it is logged. Releases this
    /// process's claim on the root. Returns whether the marker was written.
    pub fn shut_down(&mut self) -> Result<bool, Error> {
        if self.storage.is_read_only() {
            return Ok(false);
        }
        let unvouched = self.unvouched();
        self.claim = None;
        let unvouched = unvouched?;
        for (dir, why) in &unvouched {
            tracing::info!(dir = %dir.display(), why, "no clean-shutdown marker");
        }
        if !unvouched.is_empty() {
            return Ok(false);
        }
        checkpoint::write_clean_shutdown(self.storage.as_ref(), &self.root, -1)?;
        Ok(true)
    }

    /// The partition directories of the root the clean-shutdown marker cannot vouch for, each with why.
    pub fn unvouched(&self) -> Result<Vec<(PathBuf, &'static str)>, Error> {
        let partitions = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        let mut unvouched = Vec::new();
        for name in self.storage.list(&self.root).at(&self.root)? {
            let dir = self.root.join(&name);
            if parse_dir_name(&dir).is_none() {
                continue; // not a live partition (a file, `-delete`, a name Kafka refuses): no log
            }
            let why = match self.storage.list(&dir) {
                Err(e) if is_not_a_directory(&e) => continue,
                Err(_) => "the partition directory cannot be listed",
                Ok(_) if partitions.closed_cleanly.contains(&name) => continue,
                Ok(_) if partitions.opened.contains(&name) => "opened and not closed cleanly",
                Ok(_) if self.had_clean_shutdown => continue,
                Ok(_) => "not opened since an unclean shutdown",
            };
            unvouched.push((dir, why));
        }
        Ok(unvouched)
    }
}

/// The partition directories a `LogDir` opened for writing, and those of them it closed cleanly.
#[derive(Debug, Default)]
struct Opened {
    /// Opened (or changed by recovery) and not closed cleanly since.
    opened: BTreeSet<String>,
    /// Closed cleanly through this `LogDir`, and not reopened since.
    closed_cleanly: BTreeSet<String>,
}

/// Whether a listing failed because the entry is a file (or is gone), not a directory it cannot read.
fn is_not_a_directory(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// Removes the temp files (`*.tmp`) a crash left in the root: each write names its own
/// ([`crate::io::unique_tmp_path`]), so nothing else would ever replace them. Only the root's writer,
/// holding its lock and this process's claim, may: no write of its files is in flight.
fn remove_temp_files(storage: &dyn Storage, root: &Path) -> Result<(), Error> {
    for name in storage.list(root).at(root)? {
        if name.ends_with(".tmp") {
            let path = root.join(&name);
            if storage.list(&path).is_err() {
                storage.remove(&path).at(&path)?;
            }
        }
    }
    Ok(())
}

/// The directories of log directory `root` that Kafka would load as partitions, sorted: every directory
/// except those of partitions being deleted, moved or dropped (`-delete`, `-future`, `-stray`) and the
/// remote index cache. Names Kafka refuses are listed too: opening one fails with the reason, as Kafka's
/// `LogManager` refuses a log directory holding one, instead of leaving it unchecked without a word.
pub fn partition_dir_names(storage: &dyn Storage, root: &Path) -> Result<Vec<String>, Error> {
    let mut names: Vec<String> = storage
        .list(root)
        .at(root)?
        .into_iter()
        .filter(|name| {
            let marked = matches!(
                parse_partition_dir_name(name),
                Ok(PartitionDirName::Marked { .. })
            );
            // A directory that cannot be listed is listed: loading it fails naming it, as Kafka takes a
            // log directory offline, instead of it being skipped without a word.
            let is_dir = match storage.list(&root.join(name)) {
                Ok(_) => true,
                Err(e) => !is_not_a_directory(&e),
            };
            !marked && name != REMOTE_INDEX_CACHE_DIR && is_dir
        })
        .collect();
    names.sort();
    Ok(names)
}
