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
