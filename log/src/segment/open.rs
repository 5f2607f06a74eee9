//! Creating and opening a segment's files (Kafka's `LogSegment.open`): a new empty segment, or an
//! existing one with its indexes loaded for appending (active) or lazily (sealed).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8};
use std::sync::{Arc, Mutex};

use crate::error::IoContext;
use crate::index::IndexFile;
use crate::io::{Storage, StorageFile};
use crate::offset_index::OffsetIndex;
use crate::time_index::TimeIndex;
use crate::txn_index::TxnIndex;
use crate::Error;

use super::{LogSegment, State};

/// How a new segment's files are made.
struct SegmentFiles {
    index_interval_bytes: u32,
    max_index_bytes: u32,
    preallocate_bytes: Option<u32>,
    suffix: &'static str,
}

impl LogSegment {
    /// A new empty segment; stale files with the same base are replaced.
    pub fn create(
        storage: Arc<dyn Storage>,
        dir: &Path,
        base_offset: i64,
        index_interval_bytes: u32,
        max_index_bytes: u32,
        preallocate_bytes: Option<u32>,
        now_ms: i64,
    ) -> Result<Self, Error> {
        let files = SegmentFiles {
            index_interval_bytes,
            max_index_bytes,
            preallocate_bytes,
            suffix: "",
        };
        Self::create_with(storage, dir, base_offset, files, now_ms)
    }

    /// A new empty segment whose files carry the `.cleaned` suffix (Kafka's
    /// `LocalLog.createNewCleanedSegment`): the cleaner appends to it, then renames its files into place.
    pub fn create_cleaned(
        storage: Arc<dyn Storage>,
        dir: &Path,
        base_offset: i64,
        index_interval_bytes: u32,
        max_index_bytes: u32,
        now_ms: i64,
    ) -> Result<Self, Error> {
        let files = SegmentFiles {
            index_interval_bytes,
            max_index_bytes,
            preallocate_bytes: None,
            suffix: ".cleaned",
        };
        Self::create_with(storage, dir, base_offset, files, now_ms)
    }

    fn create_with(
        storage: Arc<dyn Storage>,
        dir: &Path,
        base_offset: i64,
        files: SegmentFiles,
        now_ms: i64,
    ) -> Result<Self, Error> {
        let SegmentFiles {
            index_interval_bytes,
            max_index_bytes,
            preallocate_bytes,
            suffix,
        } = files;
        let [log_path, index_path, time_index_path, txn_index_path] =
            Self::file_paths(dir, base_offset, suffix);
        for path in [&log_path, &txn_index_path] {
            match storage.remove(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(path, e)),
            }
        }
        let log = storage
            .open_segment_log(&log_path, true, 0, preallocate_bytes.map(u64::from))
            .at(&log_path)?;
        let max = max_index_bytes as usize;
        let offset_index = OffsetIndex::create(storage.clone(), index_path, base_offset, max)?;
        let time_index = TimeIndex::create(storage.clone(), time_index_path, base_offset, max)?;
        let txn_index = TxnIndex::open(storage.clone(), txn_index_path)?;
        let segment = Self::assemble(
            storage,
            dir,
            base_offset,
            log,
            0,
            true,
            index_interval_bytes,
            max,
            State {
                offset_index,
                time_index,
                txn_index,
                bytes_since_last_index_entry: 0,
                max_timestamp_so_far: Some((-1, -1)),
                rolling_based_timestamp: None,
                created_ms: now_ms,
                mapped: None,
                ever_mapped: false,
            },
        );
        Ok(LogSegment { suffix, ..segment })
    }

    /// An existing segment. `active` loads its indexes for appending; sealed ones load lazily. A missing
    /// `.index` or `.timeindex` is an error (the caller rebuilds them with [`LogSegment::recover`]).
    #[allow(clippy::too_many_arguments)]
    pub fn open(
        storage: Arc<dyn Storage>,
        dir: &Path,
        base_offset: i64,
        size: u64,
        active: bool,
        index_interval_bytes: u32,
        max_index_bytes: u32,
        now_ms: i64,
    ) -> Result<Self, Error> {
        let log_path = Self::log_path(dir, base_offset);
        // The active segment is appended to: the backend's segment write path. Sealed ones are only read.
        let log = if active {
            storage.open_segment_log(&log_path, false, size, None)
        } else {
            storage.open(&log_path)
        }
        .at(&log_path)?;
        let max = max_index_bytes as usize;
        let (ip, tp) = (
            Self::index_path(dir, base_offset),
            Self::time_index_path(dir, base_offset),
        );
        let (oi, ti) = if active {
            (
                IndexFile::open_writable(storage.clone(), ip, max)?,
                IndexFile::open_writable(storage.clone(), tp, max)?,
            )
        } else {
            storage.open(&ip).at(&ip)?;
            storage.open(&tp).at(&tp)?;
            (
                IndexFile::open_lazy(storage.clone(), ip, max),
                IndexFile::open_lazy(storage.clone(), tp, max),
            )
        };
        let txn_index = TxnIndex::open(storage.clone(), Self::txn_index_path(dir, base_offset))?;
        Ok(Self::assemble(
            storage,
            dir,
            base_offset,
            log,
            size,
            active,
            index_interval_bytes,
            max,
            State {
                offset_index: OffsetIndex::new(base_offset, oi),
                time_index: TimeIndex::new(base_offset, ti),
                txn_index,
                bytes_since_last_index_entry: 0,
                max_timestamp_so_far: None,
                rolling_based_timestamp: None,
                created_ms: now_ms,
                mapped: None,
                ever_mapped: false,
            },
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        storage: Arc<dyn Storage>,
        dir: &Path,
        base_offset: i64,
        log: Arc<dyn StorageFile>,
        size: u64,
        active: bool,
        index_interval_bytes: u32,
        max_index_bytes: usize,
        state: State,
    ) -> Self {
        LogSegment {
            base_offset,
            storage,
            dir: dir.to_owned(),
            log: Mutex::new(log),
            size: AtomicU64::new(size),
            active: AtomicBool::new(active),
            unsynced_indexes: AtomicBool::new(false),
            index_interval_bytes: index_interval_bytes as u64,
            max_index_bytes,
            index_fallbacks: AtomicU64::new(0),
            next_entry_hits: AtomicU8::new(3),
            suffix: "",
            state: Mutex::new(state),
        }
    }
}
