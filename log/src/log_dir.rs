//! A log directory: the root holding partition directories and the per-directory files
//! (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`, `replication-offset-checkpoint`,
//! `.kafka_cleanshutdown`). Opening reads them; closing a partition cleanly writes them back.
//!
//! The clean-shutdown marker is Kafka's rule: its presence at open means nothing is rescanned. It is removed
//! while partitions are open (so a crash counts as unclean) and written back only if it was there at open:
//! a tool that opened one partition must not vouch for the others.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::checkpoint::{
    self, read_offsets, write_offsets, OffsetMap, CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
};
use crate::config::LogConfig;
use crate::dir_lock::DirLock;
use crate::error::IoContext;
use crate::io::Storage;
use crate::partition_log::{parse_dir_name, read_only_view, OpenOptions, OpenReport, PartitionLog};
use crate::Error;

#[derive(Debug)]
pub struct LogDir {
    storage: Arc<dyn Storage>,
    /// Kafka's `.lock`, held while this writer lives (None for a read-only open).
    lock: Option<Arc<DirLock>>,
    root: PathBuf,
    had_clean_shutdown: bool,
    /// Partition directories this writer closed cleanly (and has not reopened since): if they are all the
    /// directory holds, it may vouch for the whole directory at close.
    closed_cleanly: std::sync::Mutex<std::collections::BTreeSet<String>>,
    recovery_points: OffsetMap,
    log_start_offsets: OffsetMap,
    high_watermarks: OffsetMap,
}

impl LogDir {
    /// Opens the log directory `root` (created if missing) as its writer: takes its `.lock` (refused at once
    /// with [`Error::LogDirLocked`] while another process holds it) and takes down its clean-shutdown
    /// marker. Through a [`crate::io::ReadOnlyStorage`] this is [`LogDir::open_read_only`].
    pub fn open(storage: Arc<dyn Storage>, root: &Path) -> Result<Self, Error> {
        let lock = if storage.is_read_only() {
            if storage.list(root).is_err() {
                return Err(Error::io(root, std::io::ErrorKind::NotFound.into()));
            }
            None
        } else {
            storage.create_dir_all(root).at(root)?;
            Some(DirLock::acquire(storage.as_ref(), root)?)
        };
        let marker = root.join(CLEAN_SHUTDOWN_FILE);
        let had_clean_shutdown = match storage.remove(&marker) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(Error::io(&marker, e)),
        };
        if had_clean_shutdown {
            storage.sync_dir(root).at(root)?;
        }
        // Kafka: a checkpoint that cannot be read is treated as empty (everything gets rescanned).
        let read =
            |name: &str| read_offsets(storage.as_ref(), &root.join(name)).unwrap_or_default();
        Ok(LogDir {
            recovery_points: read(RECOVERY_POINT_CHECKPOINT),
            log_start_offsets: read(LOG_START_OFFSET_CHECKPOINT),
            high_watermarks: read(REPLICATION_OFFSET_CHECKPOINT),
            storage,
            lock,
            closed_cleanly: Default::default(),
            root: root.to_owned(),
            had_clean_shutdown,
        })
    }

    /// Opens the existing log directory `root` for reading: no lock, nothing on disk changed (the marker,
    /// checkpoints and every partition's files stay as they are); partitions opened from it are read-only
    /// (see [`PartitionLog::open_read_only`]). Checkpoints and `close` do nothing.
    pub fn open_read_only(storage: Arc<dyn Storage>, root: &Path) -> Result<Self, Error> {
        Self::open(read_only_view(storage), root)
    }

    pub fn is_read_only(&self) -> bool {
        self.lock.is_none() && self.storage.is_read_only()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn had_clean_shutdown(&self) -> bool {
        self.had_clean_shutdown
    }

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
        self.closed_cleanly
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        let dir = self.root.join(name);
        let (topic, partition) = parse_dir_name(&dir).ok_or_else(|| Error::Config {
            key: "(directory)",
            value: name.to_owned(),
            reason: "a partition directory is named <topic>-<partition>",
        })?;
        let key = (topic, partition);
        let options = OpenOptions {
            recovery_point: self.recovery_points.get(&key).copied().unwrap_or(0),
            log_start_offset: self.log_start_offsets.get(&key).copied().unwrap_or(0),
            clean_shutdown: self.had_clean_shutdown,
        };
        let (log, report) =
            PartitionLog::open_with_clock(self.storage.clone(), &dir, config, options, clock)?;
        if let Some(&hw) = self.high_watermarks.get(&key) {
            log.update_high_watermark(hw);
        }
        Ok((log, report))
    }

    /// Records a partition's offsets in the directory's checkpoint files (after a flush or a close).
    pub fn checkpoint(&mut self, log: &PartitionLog) -> Result<(), Error> {
        if self.storage.is_read_only() {
            return Ok(());
        }
        let key = (log.topic().to_owned(), log.partition());
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
        let s = self.storage.as_ref();
        write_offsets(
            s,
            &self.root.join(RECOVERY_POINT_CHECKPOINT),
            &self.recovery_points,
        )?;
        write_offsets(
            s,
            &self.root.join(LOG_START_OFFSET_CHECKPOINT),
            &self.log_start_offsets,
        )?;
        write_offsets(
            s,
            &self.root.join(REPLICATION_OFFSET_CHECKPOINT),
            &self.high_watermarks,
        )
    }

    /// Closes a partition cleanly and checkpoints it.
    pub fn close_partition(&mut self, log: PartitionLog) -> Result<(), Error> {
        log.close()?;
        self.checkpoint(&log)?;
        if let Some(name) = log.dir().file_name() {
            self.closed_cleanly
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name.to_string_lossy().into_owned());
        }
        Ok(())
    }

    /// Ends the session. The clean-shutdown marker goes down if it was there at open, or if this writer
    /// closed cleanly every partition directory the log directory holds (Kafka's rule: a directory whose
    /// logs all finished loading and were closed), so the next open rescans nothing.
    pub fn close(self) -> Result<(), Error> {
        if self.storage.is_read_only() {
            return Ok(());
        }
        if self.had_clean_shutdown || self.closed_everything()? {
            checkpoint::write_clean_shutdown(self.storage.as_ref(), &self.root, -1)?;
        }
        Ok(())
    }

    fn closed_everything(&self) -> Result<bool, Error> {
        let closed = self
            .closed_cleanly
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if closed.is_empty() {
            return Ok(false);
        }
        let names = self.storage.list(&self.root).at(&self.root)?;
        Ok(names
            .iter()
            .filter(|n| parse_dir_name(&self.root.join(n)).is_some())
            .filter(|n| self.storage.list(&self.root.join(n)).is_ok())
            .all(|n| closed.contains(n)))
    }
}
