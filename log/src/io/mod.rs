//! The I/O seam: everything the log layer does to a disk goes through [`Storage`] and [`StorageFile`].
//!
//! Narrow on purpose (redb does it in six methods): files are read and written at positions, synced,
//! resized; directories are listed, synced, and their entries created, renamed and removed. Three
//! backends sit behind it: `std` (pread/pwrite/fdatasync), `uring` (io_uring, see `uring.rs`) and `sim`
//! (in memory, with a live and a durable image and fault injection, for deterministic crash tests).

mod auto;
mod counting;
mod direct;
#[cfg(target_os = "linux")]
mod fixed;
mod lock;
mod read_only;
mod sim;
mod std_fs;
#[cfg(target_os = "linux")]
mod uring;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use auto::{
    backend_name, choose, decide, AutoDecision, BackendChoice, ChoiceReason, ClassChoice,
    DecisionSource, AUTO_DECISION_FILE, PROBE_BUDGET, URING_MARGIN,
};
#[cfg(target_os = "linux")]
pub use counting::{file_kind, CountingStorage, IoOp};
pub use fixed::Registration;
pub(crate) use lock::{posix_lock_holder, unlock_dir};
pub use read_only::ReadOnlyStorage;
pub use sim::{Fault, SimStorage};
pub use std_fs::StdStorage;
#[cfg(target_os = "linux")]
pub use uring::{
    direct_io_supported, uring_available, uring_iowq_max_workers, uring_registration, UringStorage,
    IOWQ_BOUNDED_WORKERS,
};

/// io_uring is Linux only.
#[cfg(not(target_os = "linux"))]
pub fn uring_available() -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "io_uring unavailable: not Linux",
    ))
}

/// An open file. All methods take `&self`: positioned I/O is safe to share between one writer and many
/// readers (each reader bounds itself by a published size).
pub trait StorageFile: Send + Sync + std::fmt::Debug {
    /// Reads up to `buf.len()` bytes at `position`; fewer only at the end of the file.
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize>;
    /// Writes all of `buf` at `position`, or fails.
    fn write_at(&self, buf: &[u8], position: u64) -> io::Result<()>;
    /// Makes the file's data durable (fdatasync).
    fn sync(&self) -> io::Result<()>;
    /// Writes then syncs. Backends may do both in one round trip (io_uring links write -> fdatasync).
    fn write_at_and_sync(&self, buf: &[u8], position: u64) -> io::Result<()> {
        self.write_at(buf, position)?;
        self.sync()
    }
    /// Truncates or extends the file.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// The file is complete at `size`: written out and trimmed to it (a preallocated or zero-filled tail
    /// dropped), as Kafka's `FileRecords.trim` on roll and close.
    fn seal(&self, size: u64) -> io::Result<()> {
        if self.len()? != size {
            self.set_len(size)?;
        }
        Ok(())
    }
    /// The file's length.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// The file on a real file system, for memory mapping; `None` for simulated storage, and for a file
    /// whose latest bytes are still only in memory (the direct write path, `direct.rs`).
    fn os_path(&self) -> Option<&Path>;
    /// The file as `Any`, for a backend that syncs its own files together ([`Storage::sync_files`]).
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// A file system (or a simulation of one).
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// Creates the file, failing if it exists.
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>>;
    /// Opens an existing file for reading and writing.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>>;
    /// Renames atomically, replacing `to` if it exists.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// The names of the entries in `dir`, sorted.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// The backend's name, for reports ("std", "uring", "sim", "read-only").
    fn name(&self) -> &'static str;
    /// Opens an existing file for reading only (`O_RDONLY` on a real file system): works on a read-only
    /// file system and cannot change the file.
    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        self.open(path)
    }
    /// Takes Kafka's `.lock` in the log directory `dir` for this process: an exclusive advisory lock of the
    /// `fcntl` family (the one Java's `FileChannel.tryLock` takes, so a Kafka broker and klog exclude each
    /// other), tried once, never waited for; `WouldBlock` when another process holds it. `None` where no other process can reach the files (simulated
    /// storage). The lock lasts as long as the returned file is open.
    fn lock_dir(&self, dir: &Path) -> io::Result<Option<std::fs::File>> {
        lock::lock_dir(dir).map(Some)
    }
    /// Opens a segment's `.log` for appending: a new file (`create`, preallocated to `preallocate` bytes
    /// when given, as Kafka's `preallocate=true`) or an existing one whose data ends at `size`. A backend
    /// with a write path of its own for segments returns it here (io_uring: `O_DIRECT` chunks from an
    /// in-memory tail, `direct.rs`); the default is a plain file.
    fn open_segment_log(
        &self,
        path: &Path,
        create: bool,
        size: u64,
        preallocate: Option<u64>,
    ) -> io::Result<Arc<dyn StorageFile>> {
        let _ = size;
        if !create {
            return self.open(path);
        }
        let file = self.create(path)?;
        if let Some(bytes) = preallocate {
            file.set_len(bytes)?;
        }
        Ok(file)
    }
    /// Syncs every file (each as [`StorageFile::sync`]). A backend that can runs them together (io_uring:
    /// one submission for all the files' writes); the default syncs them one after the other.
    fn sync_files(&self, files: &[Arc<dyn StorageFile>]) -> io::Result<()> {
        files.iter().try_for_each(|f| f.sync())
    }
    /// Whether [`Storage::sync_files`] runs the files together, so a caller gains by gathering them.
    fn syncs_together(&self) -> bool {
        false
    }
    /// Whether this storage refuses every change to the disk (a reader's view, [`ReadOnlyStorage`]).
    fn is_read_only(&self) -> bool {
        false
    }
}

/// The name of Kafka's log-directory lock file.
pub const LOCK_FILE: &str = ".lock";

/// Whether `direct_io_supported` can say: `O_DIRECT` is a Linux matter here.
#[cfg(not(target_os = "linux"))]
pub fn direct_io_supported(_dir: &Path) -> io::Result<bool> {
    Ok(false)
}

/// Which backend to use (`io_backend` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoBackend {
    /// The backend measured faster on the log directory's file system for the writer's workload: a
    /// short probe at a writer's first open, recorded in the directory ([`decide`], [`choose`]). On ext4
    /// a buffered write through io_uring is handed to a kernel worker thread
    /// (`shared/spec/field-notes.md` §2.5, §6), so buffered appends mostly measure std.
    #[default]
    Auto,
    /// pread/pwrite/fdatasync.
    Std,
    /// io_uring (Linux).
    Uring,
}

impl IoBackend {
    /// `auto`, `std` or `uring`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "auto" => Some(IoBackend::Auto),
            "std" => Some(IoBackend::Std),
            "uring" => Some(IoBackend::Uring),
            _ => None,
        }
    }
}

/// What a log mostly does, for [`IoBackend::Auto`] to choose by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoWorkload {
    /// Appends flushed now and then (`flush.messages`/`flush.ms` large: Kafka's default).
    Buffered,
    /// Appends of one partition each followed by a flush, alone or in group commit (`flush.messages=1`).
    Durable,
    /// Many partitions of a log directory flushed together (`LogDir::flush_partitions`: a broker's
    /// periodic flush, a group commit across partitions).
    ManyPartitions,
}

impl IoWorkload {
    /// The workload's key, as [`AUTO_DECISION_FILE`] and the `-v` line name it.
    pub fn key(self) -> &'static str {
        match self {
            IoWorkload::Buffered => "buffered",
            IoWorkload::Durable => "durable",
            IoWorkload::ManyPartitions => "many_partitions",
        }
    }

    /// The workload as reports name it.
    pub fn name(self) -> &'static str {
        match self {
            IoWorkload::Buffered => "buffered appends",
            IoWorkload::Durable => "durable appends",
            IoWorkload::ManyPartitions => "partitions flushed together",
        }
    }
}

/// Opens the storage for a backend choice. `Uring` fails, saying why, when this process may not use
/// io_uring (see [`uring_available`]); `Auto` with no log directory to measure is std (the backend that
/// always works): a writer resolves `Auto` through its directory's measured decision instead
/// ([`decide`], [`choose`], `LogDir::open_backend`, `LogDir::backend_for`).
pub fn open_backend(backend: IoBackend) -> io::Result<Arc<dyn Storage>> {
    match backend {
        IoBackend::Auto | IoBackend::Std => Ok(Arc::new(StdStorage)),
        #[cfg(target_os = "linux")]
        IoBackend::Uring => Ok(Arc::new(UringStorage::new()?)),
        #[cfg(not(target_os = "linux"))]
        IoBackend::Uring => Err(uring_available().unwrap_err()),
    }
}

/// Writes `bytes` to `path` durably and atomically: a temp file, fsync, rename over the target, fsync of
/// the directory. Every small file klog writes (checkpoints, metadata) goes through here.
pub fn write_atomic(storage: &dyn Storage, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = unique_tmp_path(path);
    let written = write_then_rename(storage, &tmp, path, bytes);
    if written.is_err() {
        // Best effort: a temp file left by a failure is removed by the next writable open.
        let _ = storage.remove(&tmp);
    }
    written?;
    storage.sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Writes `bytes` to the new file `tmp`, syncs it and renames it over `path`.
pub(crate) fn write_then_rename(
    storage: &dyn Storage,
    tmp: &Path,
    path: &Path,
    bytes: &[u8],
) -> io::Result<()> {
    let file = storage.create(tmp)?;
    file.write_at(bytes, 0)?;
    file.sync()?;
    drop(file);
    storage.rename(tmp, path)
}

/// Reads a whole file; `Ok(None)` when it does not exist.
pub fn read_file(storage: &dyn Storage, path: &Path) -> io::Result<Option<Vec<u8>>> {
    let file = match storage.open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = file.len()?;
    let mut buf = vec![0u8; len as usize];
    let mut done = 0;
    while done < buf.len() {
        let n = file.read_at(&mut buf[done..], done as u64)?;
        if n == 0 {
            buf.truncate(done);
            break;
        }
        done += n;
    }
    Ok(Some(buf))
}

/// `<path>.tmp`, Kafka's temp name for checkpoint files.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}

/// `<path>.<pid>-<n>.tmp`: a temp name no other write of this file uses, in this process or another (a
/// fixed `<path>.tmp` let two writes of one file remove, overwrite and rename each other's temp file).
/// It ends in `.tmp`, the suffix a writable open removes from its directory after a crash.
pub fn unique_tmp_path(path: &Path) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{}-{n}.tmp", std::process::id()));
    PathBuf::from(s)
}

#[cfg(test)]
mod tests;
