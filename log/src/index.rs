//! The storage shared by `.index` and `.timeindex`: fixed-size big-endian entries, no header.
//!
//! Writes go through the I/O seam (`write_at` of the new entries on flush, `set_len` on truncation), so
//! the crash simulator sees them like any other file. Entries live in memory only while they are needed:
//! the active segment keeps its entries in a buffer; a sealed segment's index is loaded lazily on lookup
//! (memory-mapped read-only on a real file system, read into memory on simulated storage) and unloaded when
//! idle, so cold partitions hold neither memory nor maps (Kafka's `vm.max_map_count` pain).
//! Files are never preallocated: Kafka counts `length / entry size` entries, so a file holding only the
//! valid entries is what a trimmed Kafka index is, and Kafka resizes the active one itself when it loads.
#![allow(unsafe_code)]

use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::error::IoContext;
use crate::io::{Storage, StorageFile};
use crate::Error;

/// A fixed-size index entry.
pub trait IndexEntry: FromBytes + IntoBytes + KnownLayout + Immutable + Unaligned + Copy {
    /// Bytes per entry.
    const SIZE: usize = core::mem::size_of::<Self>();
    /// The entry's offset relative to the segment's base offset.
    fn relative_offset(&self) -> i32;
}

enum Data {
    /// Nothing loaded (a sealed index, unloaded).
    Unloaded,
    Memory(Vec<u8>),
    Mapped(memmap2::Mmap),
}

impl Data {
    fn bytes(&self) -> &[u8] {
        match self {
            Data::Unloaded => &[],
            Data::Memory(v) => v,
            Data::Mapped(m) => m,
        }
    }
}

/// An index file and its entries.
pub struct IndexFile<E> {
    storage: Arc<dyn Storage>,
    path: PathBuf,
    file: Option<Arc<dyn StorageFile>>,
    data: Data,
    /// Bytes of `data` that are in the file.
    persisted: usize,
    /// The file's length while it still holds bytes of entries no longer in `data` (an index being rebuilt
    /// over its old file): `flush` trims what its write does not cover. 0 otherwise.
    stale_len: usize,
    max_entries: usize,
    _entry: PhantomData<E>,
}

impl<E> std::fmt::Debug for IndexFile<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexFile")
            .field("path", &self.path)
            .field("loaded_bytes", &self.data.bytes().len())
            .field("persisted", &self.persisted)
            .finish()
    }
}

impl<E: IndexEntry> IndexFile<E> {
    /// A new, empty index file (an existing one at `path` is replaced).
    pub fn create(
        storage: Arc<dyn Storage>,
        path: PathBuf,
        max_index_bytes: usize,
    ) -> Result<Self, Error> {
        match storage.remove(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&path, e)),
        }
        let file = storage.create(&path).at(&path)?;
        Ok(IndexFile {
            storage,
            path,
            file: Some(file),
            data: Data::Memory(Vec::new()),
            persisted: 0,
            stale_len: 0,
            max_entries: max_index_bytes / E::SIZE,
            _entry: PhantomData,
        })
    }

    /// An existing index file, loaded into memory for appending (the active segment).
    pub fn open_writable(
        storage: Arc<dyn Storage>,
        path: PathBuf,
        max_index_bytes: usize,
    ) -> Result<Self, Error> {
        let file = storage.open(&path).at(&path)?;
        let mut bytes = vec![0u8; file.len().at(&path)? as usize];
        let n = file.read_at(&mut bytes, 0).at(&path)?;
        bytes.truncate(n);
        let persisted = bytes.len();
        bytes.truncate(bytes.len() / E::SIZE * E::SIZE);
        Ok(IndexFile {
            storage,
            path,
            file: Some(file),
            data: Data::Memory(bytes),
            persisted,
            stale_len: 0,
            max_entries: max_index_bytes / E::SIZE,
            _entry: PhantomData,
        })
    }

    /// An existing index of a sealed segment: nothing is read until the first lookup.
    pub fn open_lazy(storage: Arc<dyn Storage>, path: PathBuf, max_index_bytes: usize) -> Self {
        IndexFile {
            storage,
            path,
            file: None,
            data: Data::Unloaded,
            persisted: 0,
            stale_len: 0,
            max_entries: max_index_bytes / E::SIZE,
            _entry: PhantomData,
        }
    }

    /// The index file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn ensure_loaded(&mut self) -> Result<(), Error> {
        if !matches!(self.data, Data::Unloaded) {
            return Ok(());
        }
        let file = self.storage.open(&self.path).at(&self.path)?;
        let len = file.len().at(&self.path)? as usize;
        self.persisted = len;
        self.data = match file.os_path() {
            Some(os_path) if len > 0 => {
                let f = std::fs::File::open(os_path).at(&self.path)?;
                // SAFETY: a sealed segment's index is never written while it is mapped: the segment is
                // made writable again (truncation) only through `make_writable`, which drops the map first;
                // outside processes do not write klog's partition directories while klog has them open.
                Data::Mapped(unsafe { memmap2::Mmap::map(&f) }.at(&self.path)?)
            }
            _ => {
                let mut bytes = vec![0u8; len];
                let n = file.read_at(&mut bytes, 0).at(&self.path)?;
                bytes.truncate(n);
                Data::Memory(bytes)
            }
        };
        self.file = Some(file);
        Ok(())
    }

    /// Drops the loaded entries of a sealed index (reloaded on the next lookup).
    pub fn unload(&mut self) -> Result<(), Error> {
        self.flush()?;
        self.data = Data::Unloaded;
        self.file = None;
        Ok(())
    }

    /// Whether the entries are in memory.
    pub fn is_loaded(&self) -> bool {
        !matches!(self.data, Data::Unloaded)
    }

    /// The entries (loading them if needed). A partial trailing entry is ignored.
    pub fn entries(&mut self) -> Result<&[E], Error> {
        self.ensure_loaded()?;
        let bytes = self.data.bytes();
        let whole = bytes.len() / E::SIZE * E::SIZE;
        Ok(<[E]>::ref_from_bytes(&bytes[..whole])
            .expect("entries are unaligned POD of a whole size"))
    }

    /// Bytes that do not make a whole entry (a corrupt file, per Kafka's sanity check).
    pub fn trailing_bytes(&mut self) -> Result<usize, Error> {
        self.ensure_loaded()?;
        Ok(self.persisted % E::SIZE)
    }

    /// The number of entries (loads them).
    pub fn len(&mut self) -> Result<usize, Error> {
        Ok(self.entries()?.len())
    }

    /// Whether there are no entries (loads them).
    pub fn is_empty(&mut self) -> Result<bool, Error> {
        Ok(self.len()? == 0)
    }

    /// The most entries the file may hold (`segment.index.bytes` / entry size).
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    fn memory(&mut self) -> Result<&mut Vec<u8>, Error> {
        self.ensure_loaded()?;
        if let Data::Mapped(m) = &self.data {
            self.data = Data::Memory(m.to_vec());
        }
        match &mut self.data {
            Data::Memory(v) => Ok(v),
            _ => unreachable!("loaded above"),
        }
    }

    /// Appends an entry in memory; it reaches the file on the next `flush`.
    pub fn push(&mut self, entry: E) -> Result<(), Error> {
        self.memory()?.extend_from_slice(entry.as_bytes());
        Ok(())
    }

    /// Keeps the first `n` entries, in memory and in the file.
    pub fn truncate_entries(&mut self, n: usize) -> Result<(), Error> {
        let len = n * E::SIZE;
        let mem = self.memory()?;
        if mem.len() > len {
            mem.truncate(len);
        }
        if self.persisted != len {
            let file = self.file.as_ref().expect("loaded");
            if self.persisted > len {
                // Durable at once, like the `.log` truncation: stale entries must not return after a crash.
                file.set_len(len as u64).at(&self.path)?;
                file.sync().at(&self.path)?;
                self.persisted = len;
            }
        }
        Ok(())
    }

    /// Writes entries not yet in the file (no sync); after a [`IndexFile::rebuild`], trims the old
    /// entries the new ones do not cover.
    pub fn flush(&mut self) -> Result<(), Error> {
        let bytes = self.data.bytes();
        if self.persisted < bytes.len() {
            let file = self
                .file
                .as_ref()
                .expect("data is loaded when not persisted");
            file.write_at(&bytes[self.persisted..], self.persisted as u64)
                .at(&self.path)?;
            self.persisted = bytes.len();
        }
        if self.stale_len > self.persisted {
            let file = self.file.as_ref().expect("loaded by rebuild");
            file.set_len(self.persisted as u64).at(&self.path)?;
        }
        self.stale_len = 0;
        Ok(())
    }

    /// Flushes and syncs.
    pub fn sync(&mut self) -> Result<(), Error> {
        self.flush()?;
        if let Some(file) = &self.file {
            file.sync().at(&self.path)?;
        }
        Ok(())
    }

    /// Starts rebuilding the entries from the `.log` (recovery): the entries in memory are dropped, the
    /// file is left as it is and overwritten from its start by the next `flush`, which trims the old
    /// entries the new ones do not reach. Nothing is synced, and the file is neither emptied nor
    /// reallocated: an index rebuilt by recovery belongs to a segment at or after the recovery point,
    /// which every unclean open rescans (rebuilding the index again whatever reached the disk), and the
    /// flush that moves the recovery point past the segment syncs its indexes first
    /// (`LogSegment::flush` of a sealed segment).
    pub fn rebuild(&mut self) -> Result<(), Error> {
        self.ensure_loaded()?;
        self.stale_len = self.stale_len.max(self.persisted);
        self.persisted = 0;
        // A map of the old file is dropped before the file is written (see `ensure_loaded`).
        self.data = Data::Memory(Vec::new());
        Ok(())
    }
}

/// How many of `entries` have a key at or below `target`: `entries.partition_point(|e| key(e) <= target)`
/// for keys that increase, found from a guess instead of the middle.
///
/// An index of a segment of batches of about one size holds keys (offsets, timestamps) that grow about
/// evenly, so the entry a lookup wants sits near where `target` falls between the first and last keys.
/// The search probes there, gallops outward (1, 2, 4, ... entries) until the answer is bracketed, and
/// ends with a binary search of the bracket: on an even index two or three probes, all in one or two
/// cache lines, where a binary search of a 4,096-entry index (a 64 MiB segment of 16 KiB batches)
/// takes 12, most of them cache misses once the reads' copies have pushed the index out of the cache.
/// An uneven index costs at most about twice a binary search. Keys that do not increase (a damaged
/// index) give some count in `0..=len`, as `partition_point` does; every lookup checks the entry it uses.
pub fn count_at_or_below<E>(entries: &[E], target: i64, key: impl Fn(&E) -> i64) -> usize {
    let n = entries.len();
    let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
        return 0;
    };
    let (lo_key, hi_key) = (key(first), key(last));
    if target < lo_key {
        return 0;
    }
    if target >= hi_key {
        return n;
    }
    // lo_key <= target < hi_key: both differences are positive and fit a u64. The guess is a float
    // (an i128 division is a library call of about 100 cycles); any guess in range gives the same count.
    let from_lo = target.wrapping_sub(lo_key) as u64 as f64;
    let span = hi_key.wrapping_sub(lo_key) as u64 as f64;
    let guess = ((from_lo / span) * (n - 1) as f64) as usize;
    let guess = guess.min(n - 1);
    // Bracket [lo, hi): entries[..lo] are at or below `target`, entries[hi..] above it.
    let (mut lo, mut hi);
    if key(&entries[guess]) <= target {
        lo = guess + 1;
        let mut step = 1;
        hi = loop {
            let probe = lo.saturating_add(step - 1);
            if probe >= n {
                break n;
            }
            if key(&entries[probe]) > target {
                break probe;
            }
            lo = probe + 1;
            step *= 2;
        };
    } else {
        hi = guess;
        let mut step = 1;
        lo = loop {
            let Some(probe) = hi.checked_sub(step) else {
                break 0;
            };
            if key(&entries[probe]) <= target {
                break probe + 1;
            }
            hi = probe;
            step *= 2;
        };
    }
    lo + entries[lo..hi].partition_point(|e| key(e) <= target)
}

#[cfg(test)]
mod tests {
    use super::count_at_or_below;

    fn check(keys: &[i64]) {
        let lo = keys.first().copied().unwrap_or(0) - 3;
        let hi = keys.last().copied().unwrap_or(0) + 3;
        for target in lo..=hi {
            let want = keys.partition_point(|k| *k <= target);
            assert_eq!(
                count_at_or_below(keys, target, |k| *k),
                want,
                "target {target} in {keys:?}"
            );
        }
    }

    #[test]
    fn the_guided_search_counts_what_partition_point_counts() {
        check(&[]);
        check(&[5]);
        check(&[5, 6]);
        // Even, as a segment of equal batches indexes them.
        check(&(0..300).map(|i| 14 + 15 * i).collect::<Vec<_>>());
        // Uneven: a run of small batches, then large ones, then a jump.
        let mut skewed: Vec<i64> = (0..200).collect();
        skewed.extend((0..50).map(|i| 1_000 + 97 * i));
        skewed.extend([1_000_000, 1_000_001, 2_000_000]);
        check(&skewed);
        // Growing gaps (galloping far from the guess).
        check(&(0..40).map(|i: i64| i * i * i).collect::<Vec<_>>());
    }

    #[test]
    fn keys_that_do_not_increase_give_a_count_in_range() {
        let keys = [9i64, 3, 7, 7, 1, 12, 4, 0, 30, 2];
        for target in -2..35 {
            assert!(count_at_or_below(&keys, target, |k| *k) <= keys.len());
        }
        // Extremes of i64: no overflow in the guess.
        let extremes = [i64::MIN, -1, 0, i64::MAX];
        for target in [i64::MIN, -5, 0, 5, i64::MAX] {
            let want = extremes.partition_point(|k| *k <= target);
            assert_eq!(count_at_or_below(&extremes, target, |k| *k), want);
        }
    }
}
