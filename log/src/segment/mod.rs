//! `LogSegment`: one `.log` file and its `.index`, `.timeindex` and `.txnindex` (`LogSegment.java`).
//!
//! One writer appends; readers may read concurrently and never see past the published size, which moves
//! only after the bytes are written. Index entries follow Kafka 4.x's rule exactly, batch by batch in every
//! append and in recovery: before a batch, if more than `index.interval.bytes` were appended since the last
//! entry, map the batch's last offset to the batch's position, and offer the running max timestamp to the
//! time index. The count of bytes since the last entry is the segment object's, as Kafka's
//! `bytesSinceLastIndexEntry`: 0 when a segment is created or opened (after a restart, clean or not, the
//! next entry is placed as in a new segment) and after a truncation; recovery counts in its own pass and
//! leaves it as it was. Indexes written across a restart are then the broker's (tests/kafka_metadata.rs).
#![allow(unsafe_code)]

mod lookup;
mod open;
mod read_ahead;
mod recover;
#[cfg(test)]
mod recover_tests;

pub use recover::RecoverBuffers;

pub use lookup::whole_batches;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::IoContext;
use crate::format::{BatchStream, Batches, OnBatch, Tail, RECORD_BATCH_OVERHEAD};
use crate::io::{Storage, StorageFile};
use crate::offset_index::OffsetIndex;
use crate::time_index::TimeIndex;
use crate::txn_index::TxnIndex;
use crate::{Corruption, Error};

/// `{:020}` + suffix: Kafka's file names.
pub fn file_name(offset: i64, suffix: &str) -> String {
    format!("{offset:020}{suffix}")
}

/// The base offset in a segment file name (digits before the first `.`).
pub fn parse_base_offset(name: &str) -> Option<i64> {
    let digits = name.split('.').next()?;
    (digits.len() >= 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())?
}

/// Where a batch was found: Kafka's `LogOffsetPosition`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchPosition {
    /// The batch's last offset.
    pub last_offset: i64,
    /// Its byte position in the `.log`.
    pub position: u32,
    /// Its size in bytes.
    pub size: u32,
}

/// Bytes read from a segment: a read-only map of a sealed segment, or a buffer.
#[derive(Debug, Clone)]
pub enum SegmentBytes {
    /// A slice of a read-only map of a sealed segment.
    Mapped {
        /// The map.
        map: Arc<memmap2::Mmap>,
        /// Where the bytes start in it.
        start: usize,
        /// Where they end.
        end: usize,
    },
    /// A buffer read with `pread`.
    Owned(Vec<u8>),
}

impl SegmentBytes {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match self {
            SegmentBytes::Mapped { map, start, end } => &map[*start..*end],
            SegmentBytes::Owned(v) => v,
        }
    }

    /// Whether they are a map's.
    pub fn is_mapped(&self) -> bool {
        matches!(self, SegmentBytes::Mapped { .. })
    }

    /// The bytes as a buffer of their own: a read buffer is handed over, a map is copied.
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            SegmentBytes::Owned(v) => v,
            mapped => mapped.as_slice().to_vec(),
        }
    }
}

/// What `recover` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentRecovery {
    /// Bytes of whole valid batches.
    pub valid_bytes: u64,
    /// Bytes cut after them.
    pub truncated_bytes: u64,
    /// How the valid data ended, with the failed check when it ended in corruption.
    pub tail: Tail,
    /// The check that failed, if the data ended in corruption.
    pub corruption: Option<Corruption>,
    /// (epoch, first offset) of every batch whose partition leader epoch is >= 0 and differs from the
    /// epoch of the batch before it, in order (the first such batch always): what the leader-epoch
    /// cache is derived from, one entry per change rather than per batch.
    pub epochs: Vec<(i32, i64)>,
    /// The offset after the last valid batch.
    pub next_offset: i64,
}

#[derive(Debug)]
struct State {
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    txn_index: TxnIndex,
    /// Bytes appended since the last offset index entry by this object (never carried over a reopen).
    bytes_since_last_index_entry: u64,
    /// (max timestamp, offset of the batch holding it); None until known.
    max_timestamp_so_far: Option<(i64, i64)>,
    rolling_based_timestamp: Option<i64>,
    created_ms: i64,
    /// Set once the `.log` may be memory-mapped: it is then replaced, never shrunk in place.
    mapped: Option<Arc<memmap2::Mmap>>,
    ever_mapped: bool,
}

/// Bytes copied at a time when a truncation replaces a `.log` that was mapped (`replace_with_prefix`).
const REPLACE_CHUNK: u64 = 1 << 20;

/// Kafka's `LogSegment`: one `.log` and its `.index`, `.timeindex` and `.txnindex`.
pub struct LogSegment {
    base_offset: i64,
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    log: Mutex<Arc<dyn StorageFile>>,
    size: AtomicU64,
    active: AtomicBool,
    /// Sealed, with index files not yet synced: the next flush must sync them whatever the recovery point.
    unsynced_indexes: AtomicBool,
    index_interval_bytes: u64,
    max_index_bytes: usize,
    /// Lookups that passed over an index entry pointing at the wrong bytes (`lookup.rs`).
    index_fallbacks: AtomicU64,
    /// Whether lookups try the index entry after their offset first (`lookup.rs`): a 2-bit counter.
    next_entry_hits: AtomicU8,
    /// The state suffix of its file names: `""`, or `".cleaned"` for a segment the cleaner is writing
    /// (Kafka's `LogSegment.open(..., fileSuffix)`).
    suffix: &'static str,
    state: Mutex<State>,
}

impl std::fmt::Debug for LogSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogSegment")
            .field("base_offset", &self.base_offset)
            .field("size", &self.size())
            .finish()
    }
}

impl LogSegment {
    /// `<dir>/<base:020>.log`.
    pub fn log_path(dir: &Path, base: i64) -> PathBuf {
        dir.join(file_name(base, ".log"))
    }

    /// `<dir>/<base:020>.index`.
    pub fn index_path(dir: &Path, base: i64) -> PathBuf {
        dir.join(file_name(base, ".index"))
    }

    /// `<dir>/<base:020>.timeindex`.
    pub fn time_index_path(dir: &Path, base: i64) -> PathBuf {
        dir.join(file_name(base, ".timeindex"))
    }

    /// `<dir>/<base:020>.txnindex`.
    pub fn txn_index_path(dir: &Path, base: i64) -> PathBuf {
        dir.join(file_name(base, ".txnindex"))
    }

    /// The segment's four files with the state suffix `suffix` (`""`, `".cleaned"`, `".swap"`,
    /// `".deleted"`): `.log`, `.index`, `.timeindex`, `.txnindex`, in Kafka's order.
    pub fn file_paths(dir: &Path, base: i64, suffix: &str) -> [PathBuf; 4] {
        [".log", ".index", ".timeindex", ".txnindex"]
            .map(|kind| dir.join(file_name(base, kind) + suffix))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("segment state lock poisoned")
    }

    pub(crate) fn log_file(&self) -> Arc<dyn StorageFile> {
        self.log.lock().expect("segment log lock poisoned").clone()
    }

    /// The first offset the segment may hold (its file name).
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// The published size: every byte below it is a whole, written batch.
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The segment's `.log` path.
    pub fn log_path_of(&self) -> PathBuf {
        self.dir
            .join(file_name(self.base_offset, ".log") + self.suffix)
    }

    /// Reads `len` bytes at `position` (bounded by the published size).
    pub fn read_bytes(&self, position: u64, len: usize) -> Result<Vec<u8>, Error> {
        let end = (position + len as u64).min(self.size());
        let mut buf = vec![0u8; end.saturating_sub(position) as usize];
        let n = self
            .log_file()
            .read_at(&mut buf, position)
            .map_err(|e| Error::io(&self.log_path_of(), e))?;
        buf.truncate(n);
        Ok(buf)
    }

    /// `[start, end)` as a map of a sealed segment where possible, else a buffer.
    pub fn slice(&self, start: u64, end: u64) -> Result<SegmentBytes, Error> {
        let end = end.min(self.size());
        if start >= end {
            return Ok(SegmentBytes::Owned(Vec::new()));
        }
        if !self.active.load(Ordering::Acquire) {
            if let Some(map) = self.map()? {
                if end as usize <= map.len() {
                    return Ok(SegmentBytes::Mapped {
                        map,
                        start: start as usize,
                        end: end as usize,
                    });
                }
            }
        }
        Ok(SegmentBytes::Owned(
            self.read_bytes(start, (end - start) as usize)?,
        ))
    }

    fn map(&self) -> Result<Option<Arc<memmap2::Mmap>>, Error> {
        let mut state = self.state();
        if let Some(m) = &state.mapped {
            return Ok(Some(m.clone()));
        }
        let log = self.log_file();
        let Some(path) = log.os_path() else {
            return Ok(None);
        };
        if self.size() == 0 {
            return Ok(None);
        }
        let file = std::fs::File::open(path).at(path)?;
        // SAFETY: the map covers a sealed segment, which is never written again and never shrunk in place:
        // truncating a segment that was ever mapped replaces its file (`replace_with_prefix`), so existing
        // maps keep the old inode's bytes. Outside processes do not write klog's open partition directories.
        let map = Arc::new(unsafe { memmap2::Mmap::map(&file) }.at(path)?);
        state.mapped = Some(map.clone());
        state.ever_mapped = true;
        Ok(Some(map))
    }

    /// Walks the batches from `start` to the published size through `stream`'s bounded window.
    pub fn scan<E: From<Error>>(
        &self,
        stream: &mut BatchStream,
        start: u64,
        on_batch: &mut OnBatch<'_, E>,
    ) -> Result<Option<Tail>, E> {
        self.scan_to(stream, start, self.size(), on_batch)
    }

    /// Walks the batches of `[start, end)` (`end` at most the published size) through `stream`.
    pub fn scan_to<E: From<Error>>(
        &self,
        stream: &mut BatchStream,
        start: u64,
        end: u64,
        on_batch: &mut OnBatch<'_, E>,
    ) -> Result<Option<Tail>, E> {
        let end = end.min(self.size());
        let log = self.log_file();
        let path = self.log_path_of();
        let mut read_at = |buf: &mut [u8], position: u64| {
            log.read_at(buf, position).map_err(|e| Error::io(&path, e))
        };
        stream.scan(&mut read_at, start, end, on_batch)
    }

    /// Appends `bytes` (whole, validated batches) ending at `largest_offset`. Returns the position written at.
    ///
    /// Kafka 4.x's `LogSegment.append`: the batches of the set are walked after the write and each is
    /// indexed on its own (see `LogSegment::index_batch`), so an append of a whole fetch (a follower, a
    /// mirror, the coordinator's several batches) leaves the indexes a leader appending the batches one at
    /// a time would.
    pub fn append(&self, largest_offset: i64, bytes: &[u8]) -> Result<u64, Error> {
        if bytes.is_empty() {
            return Ok(self.size());
        }
        assert!(
            (largest_offset - self.base_offset) <= i32::MAX as i64,
            "offset {largest_offset} overflows segment {} (the log rolls before)",
            self.base_offset
        );
        let position = self.size();
        let log = self.log_file();
        log.write_at(bytes, position)
            .map_err(|e| Error::io(&self.log_path_of(), e))?;
        let mut state = self.state();
        self.load_max_timestamp(&mut state)?;
        // The CRCs were checked by the validator: only the headers are read here.
        for batch in Batches::at(bytes, position).without_crc() {
            let batch = batch?;
            if batch.position() == 0 {
                state.rolling_based_timestamp = Some(batch.max_timestamp());
            }
            self.index_batch(&mut state, &batch)?;
        }
        drop(state);
        self.size
            .store(position + bytes.len() as u64, Ordering::Release);
        Ok(position)
    }

    /// Kafka's per-batch index rule, the same in `append` and `recover`: the running max timestamp (with
    /// the last offset of the earliest batch holding it); then, if more than `index.interval.bytes` were
    /// appended since the last entry, an offset-index entry of this batch's last offset at this batch's
    /// position and the running max offered to the time index.
    fn index_batch(
        &self,
        state: &mut State,
        batch: &crate::format::AnyBatch<'_>,
    ) -> Result<(), Error> {
        let (max_ts, _) = state.max_timestamp_so_far.expect("loaded");
        if batch.max_timestamp() > max_ts {
            state.max_timestamp_so_far = Some((batch.max_timestamp(), batch.last_offset()));
        }
        if state.bytes_since_last_index_entry > self.index_interval_bytes {
            state
                .offset_index
                .append(batch.last_offset(), batch.position() as u32)?;
            let (ts, off) = state.max_timestamp_so_far.expect("loaded");
            state.time_index.maybe_append(ts, off, false)?;
            state.bytes_since_last_index_entry = 0;
        }
        state.bytes_since_last_index_entry += batch.size_in_bytes() as u64;
        Ok(())
    }

    fn load_max_timestamp(&self, state: &mut State) -> Result<(), Error> {
        if state.max_timestamp_so_far.is_none() {
            state.max_timestamp_so_far = Some(state.time_index.last_entry()?);
        }
        Ok(())
    }

    /// The largest timestamp in the segment, or -1.
    pub fn max_timestamp(&self) -> Result<i64, Error> {
        let mut state = self.state();
        self.load_max_timestamp(&mut state)?;
        Ok(state.max_timestamp_so_far.expect("loaded").0)
    }

    /// Kafka's `largestTimestamp` for retention: the max timestamp, or the creation time when unknown.
    pub fn largest_timestamp(&self) -> Result<i64, Error> {
        let ts = self.max_timestamp()?;
        Ok(if ts >= 0 { ts } else { self.state().created_ms })
    }

    /// Kafka's `shouldRoll` for an append of `messages_size` bytes with the given max timestamp and offset.
    pub fn should_roll(
        &self,
        messages_size: u64,
        max_timestamp_in_messages: i64,
        max_offset_in_messages: i64,
        segment_bytes: u64,
        max_segment_ms: i64,
        now_ms: i64,
    ) -> Result<bool, Error> {
        let size = self.size();
        if size > segment_bytes.saturating_sub(messages_size) {
            return Ok(true);
        }
        let mut state = self.state();
        if size > 0 {
            if state.rolling_based_timestamp.is_none() {
                // The first batch's max timestamp (Kafka's `loadFirstBatchTimestamp`): where it sits
                // depends on the magic; a v0 message has none.
                let first = self.read_bytes(0, RECORD_BATCH_OVERHEAD)?;
                let at = match first.get(16) {
                    Some(2) => Some(35..43),
                    Some(1) => Some(18..26),
                    _ => None,
                };
                state.rolling_based_timestamp = match at {
                    Some(r) if first.len() >= r.end => {
                        Some(i64::from_be_bytes(first[r].try_into().expect("8")))
                    }
                    Some(_) => None,
                    None => Some(-1),
                };
            }
            let waited = match state.rolling_based_timestamp {
                Some(ts) if ts >= 0 => max_timestamp_in_messages - ts,
                _ => now_ms - state.created_ms,
            };
            if waited > max_segment_ms {
                return Ok(true);
            }
        }
        if state.offset_index.is_full()? || state.time_index.is_full()? {
            return Ok(true);
        }
        Ok(!state.offset_index.can_append_offset(max_offset_in_messages))
    }

    /// The segment stops being active: the closing time-index entry, indexes written, a preallocated
    /// `.log` trimmed (Kafka's `onBecomeInactiveSegment`).
    pub fn on_become_inactive(&self) -> Result<(), Error> {
        let mut state = self.state();
        self.load_max_timestamp(&mut state)?;
        let (ts, off) = state.max_timestamp_so_far.expect("loaded");
        state.time_index.maybe_append(ts, off, true)?;
        state.offset_index.file().flush()?;
        state.time_index.file().flush()?;
        state.txn_index.flush()?;
        drop(state);
        let log = self.log_file();
        let path = self.log_path_of();
        log.seal(self.size()).at(&path)?;
        self.unsynced_indexes.store(true, Ordering::Release);
        self.active.store(false, Ordering::Release);
        Ok(())
    }

    /// fsync the `.log` and the indexes.
    ///
    /// An active segment's indexes are not synced: they are derived, and after an unclean shutdown
    /// recovery rescans every segment from the one holding the recovery point (which a flush leaves in
    /// the active segment) and rebuilds its `.index`, `.timeindex` and `.txnindex`. The first flush after
    /// the segment is sealed (or its close) syncs them, before the recovery point can pass it.
    pub fn flush(&self) -> Result<(), Error> {
        self.log_file()
            .sync()
            .map_err(|e| Error::io(&self.log_path_of(), e))?;
        if self.active.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut state = self.state();
        state.offset_index.file().sync()?;
        state.time_index.file().sync()?;
        state.txn_index.sync()?;
        self.unsynced_indexes.store(false, Ordering::Release);
        Ok(())
    }

    /// Whether the segment was sealed since its indexes were last synced (see [`LogSegment::flush`]).
    pub fn has_unsynced_indexes(&self) -> bool {
        self.unsynced_indexes.load(Ordering::Acquire)
    }

    /// Syncs only the `.log` (the durable part; indexes are rebuilt after a crash).
    pub fn sync_log(&self) -> Result<(), Error> {
        self.log_file().sync().at(&self.log_path_of())
    }

    /// Writes the `.log` bytes and syncs them in one call (one io_uring round trip where available).
    pub fn append_durable(&self, largest_offset: i64, bytes: &[u8]) -> Result<u64, Error> {
        let position = self.append(largest_offset, bytes)?;
        self.sync_log()?;
        Ok(position)
    }

    /// Makes a sealed segment the active one again (the segments after it were removed).
    pub fn make_active(&self) {
        self.state().mapped = None;
        self.active.store(true, Ordering::Release);
    }

    /// Drops an idle sealed segment's loaded indexes and map.
    pub fn unload(&self) -> Result<(), Error> {
        if self.active.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut state = self.state();
        state.offset_index.file().unload()?;
        state.time_index.file().unload()?;
        state.mapped = None;
        Ok(())
    }

    /// Kafka's `truncateTo`: drops every batch with offset >= `offset`; the segment becomes active.
    /// Returns the bytes removed.
    pub fn truncate_to(&self, offset: i64) -> Result<u64, Error> {
        let found = self.translate_offset(offset, 0)?;
        let new_size = match found {
            Some(p) if p.last_offset >= offset && (p.position as u64) < self.size() => {
                p.position as u64
            }
            _ => self.size(),
        };
        let old = self.size();
        let mut state = self.state();
        state.offset_index.truncate_to(offset)?;
        state.time_index.truncate_to(offset)?;
        state.txn_index.truncate_to(offset)?;
        // A `.log` with another hard link (`klog cluster export` shares sealed segments with a Kafka
        // log directory) is replaced too, even when nothing is cut: the segment is active again, and
        // neither a shrink nor the appends that follow may reach the other link.
        let shared = self.log_is_shared();
        if new_size < old || shared {
            if state.ever_mapped || shared {
                state.mapped = None;
                drop(state);
                self.replace_with_prefix(new_size)?;
                state = self.state();
            } else {
                // Durable at once: truncated batches must not come back after a crash.
                let log = self.log_file();
                log.set_len(new_size).at(&self.log_path_of())?;
                log.sync().at(&self.log_path_of())?;
            }
        }
        self.size.store(new_size, Ordering::Release);
        if new_size == 0 {
            state.rolling_based_timestamp = None;
        }
        state.bytes_since_last_index_entry = 0;
        state.max_timestamp_so_far = None;
        self.load_max_timestamp(&mut state)?;
        drop(state);
        self.rescan_max_timestamp_after_index()?;
        self.active.store(true, Ordering::Release);
        Ok(old - new_size)
    }

    /// Whether the `.log` has another hard link (a Kafka log directory an export wrote). Only a real
    /// file can; storage without files on disk (the simulation) has none.
    fn log_is_shared(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(self.log_path_of()).is_ok_and(|m| m.nlink() > 1)
    }

    /// Replaces the `.log` with its first `len` bytes in a new file, so maps of the old file stay valid.
    /// The prefix is copied through one buffer of at most `REPLACE_CHUNK` bytes (a truncation into a
    /// 1 GiB sealed segment must not hold 1 GiB), written to a temp name of its own (`<name>.log.<pid>-<n>.tmp`), synced, renamed over the
    /// `.log` and the directory synced: a crash leaves the old file or the new one (a stray `.tmp` is
    /// removed by the next open).
    fn replace_with_prefix(&self, len: u64) -> Result<(), Error> {
        let path = self.log_path_of();
        let tmp = crate::io::unique_tmp_path(&path);
        let file = self.storage.create(&tmp).at(&tmp)?;
        let old = self.log_file();
        let mut buf = vec![0u8; (len.min(REPLACE_CHUNK)) as usize];
        let mut copied = 0u64;
        while copied < len {
            let want = (len - copied).min(buf.len() as u64) as usize;
            let n = old.read_at(&mut buf[..want], copied).at(&path)?;
            if n == 0 {
                let why = format!("the .log ends at {copied} bytes, before the {len} kept");
                let eof = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, why);
                return Err(Error::io(&path, eof));
            }
            file.write_at(&buf[..n], copied).at(&tmp)?;
            copied += n as u64;
        }
        file.sync().at(&tmp)?;
        drop(file);
        self.storage.rename(&tmp, &path).at(&path)?;
        self.storage.sync_dir(&self.dir).at(&self.dir)?;
        *self.log.lock().expect("segment log lock poisoned") =
            self.storage.open(&path).at(&path)?;
        Ok(())
    }

    /// For tests on storage that cannot be mapped (the simulation): the segment acts as if a reader had
    /// mapped its `.log`, so a truncation replaces the file instead of shrinking it.
    #[doc(hidden)]
    pub fn assume_mapped(&self) {
        self.state().ever_mapped = true;
    }

    fn cut(&self, valid: u64, size: u64) -> Result<(), Error> {
        if valid < size {
            if self.state().ever_mapped || self.log_is_shared() {
                self.replace_with_prefix(valid)?;
            } else {
                let log = self.log_file();
                log.set_len(valid).at(&self.log_path_of())?;
                log.sync().at(&self.log_path_of())?;
            }
        }
        self.size.store(valid, Ordering::Release);
        Ok(())
    }

    /// Appends an aborted transaction to this segment's `.txnindex`.
    pub fn append_aborted_txn(&self, txn: crate::txn_index::AbortedTxn) -> Result<(), Error> {
        self.state().txn_index.append(txn)
    }

    /// Aborted transactions overlapping `[fetch_offset, upper_bound)` and whether the search may stop.
    pub fn collect_aborted(
        &self,
        fetch_offset: i64,
        upper_bound: i64,
    ) -> (Vec<crate::txn_index::AbortedTxn>, bool) {
        self.state()
            .txn_index
            .collect_aborted(fetch_offset, upper_bound)
    }

    /// Writes the in-memory index entries (for a clean close) and trims a preallocated `.log`.
    pub fn close(&self) -> Result<(), Error> {
        if self.active.load(Ordering::Acquire) {
            self.on_become_inactive()?;
        }
        self.flush()
    }

    /// Deletes the segment's files (`.log` first: an index without its `.log` is removed at load).
    pub fn delete(&self) -> Result<(), Error> {
        self.state().mapped = None;
        for path in Self::file_paths(&self.dir, self.base_offset, self.suffix) {
            match self.storage.remove(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&path, e)),
            }
        }
        Ok(())
    }

    /// Kafka's `AbstractIndex.sizeInBytes` of the offset and time indexes: entries x entry size (the
    /// cleaner's grouping caps them by `segment.index.bytes`).
    pub fn index_sizes_in_bytes(&self) -> Result<(u64, u64), Error> {
        let mut state = self.state();
        let offsets = state.offset_index.file().len()? * 8;
        let times = state.time_index.file().len()? * 12;
        Ok((offsets as u64, times as u64))
    }

    /// Before its files are renamed and removed (the cleaner replaced it): the indexes are loaded and
    /// a real `.log` is mapped, so a reader still holding the segment keeps reading it from the open
    /// files, never by a path that is gone.
    pub fn retire(&self) -> Result<(), Error> {
        {
            let mut state = self.state();
            state.offset_index.file().entries()?;
            state.time_index.file().entries()?;
        }
        if !self.active.load(Ordering::Acquire) {
            self.map()?;
        }
        Ok(())
    }

    /// The offset index entries as (absolute offset, position), for tools and tests.
    pub fn offset_index_entries(&self) -> Result<Vec<(i64, u32)>, Error> {
        let mut state = self.state();
        let base = self.base_offset;
        Ok(state
            .offset_index
            .file()
            .entries()?
            .iter()
            .map(|e| {
                (
                    base + e.relative_offset.get() as i64,
                    e.position.get() as u32,
                )
            })
            .collect())
    }

    /// The size limit of its indexes (`segment.index.bytes`).
    pub fn max_index_bytes(&self) -> usize {
        self.max_index_bytes
    }
}
