//! The reader's door: a [`Storage`] that never changes the disk under it.
//!
//! A read-only open of a partition runs the same open as a writer (indexes checked and rebuilt, a torn tail
//! found, producer state loaded from a snapshot and replayed), so it sees exactly the log a writer would
//! see after recovery, but every change lands in memory only:
//!
//! - files on disk are opened read-only (`O_RDONLY`): the process could not write them if it tried, so
//!   inspection works on a read-only file system and beside a live writer;
//! - a new file (a rebuilt index, a producer snapshot, a checkpoint) lives in memory;
//! - a removal or a rename hides or moves the name in memory; the disk entry stays;
//! - a disk file is seen as long as it was when the view first opened it (a consistent snapshot beside a
//!   live writer); shrinking it (recovery cutting a torn tail) lowers that length; the bytes stay;
//! - writing into a disk file copies it into memory first, but only small files (indexes, snapshots,
//!   checkpoints): a segment is never copied, the write fails instead;
//! - nothing is memory-mapped: a live writer may shrink its files in place, which would fault a map.
//!
//! Memory is what the view changed: rebuilt indexes and snapshots, never a segment's bytes.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Storage, StorageFile};

/// The largest disk file a write may copy into memory (indexes are at most `segment.index.bytes`).
const COPY_ON_WRITE_MAX_BYTES: u64 = 64 << 20;

/// A read-only view of `inner` with an in-memory overlay for the changes an open makes.
#[derive(Debug)]
pub struct ReadOnlyStorage {
    inner: Arc<dyn Storage>,
    overlay: Mutex<Overlay>,
}

#[derive(Debug, Default)]
struct Overlay {
    /// A path seen by this view: `None` when hidden (removed or renamed away).
    files: HashMap<PathBuf, Option<Arc<OverlayFile>>>,
    /// Directories made in this view only.
    dirs: BTreeSet<PathBuf>,
}

#[derive(Debug)]
struct OverlayFile {
    /// The disk path the bytes came from (for errors).
    path: PathBuf,
    content: Mutex<Content>,
}

#[derive(Debug)]
enum Content {
    /// The disk file as long as it was when this view first opened it (a snapshot: a live writer's later
    /// appends are not seen, and no read needs an `fstat`), shorter once shrunk.
    Disk {
        file: Arc<dyn StorageFile>,
        len: u64,
    },
    Memory(Vec<u8>),
}

fn refused(path: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "read-only open: {what} {} is not allowed (open for writing to change it)",
            path.display()
        ),
    )
}

impl ReadOnlyStorage {
    /// A read-only view of `inner`.
    pub fn new(inner: Arc<dyn Storage>) -> Self {
        ReadOnlyStorage {
            inner,
            overlay: Mutex::new(Overlay::default()),
        }
    }

    fn overlay(&self) -> MutexGuard<'_, Overlay> {
        self.overlay.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The file at `path` as this view shows it (opening the disk file read-only on first use).
    fn lookup(&self, overlay: &mut Overlay, path: &Path) -> io::Result<Arc<OverlayFile>> {
        match overlay.files.get(path) {
            Some(Some(f)) => return Ok(f.clone()),
            Some(None) => return Err(io::Error::from(io::ErrorKind::NotFound)),
            None => {}
        }
        let file = self.inner.open_read(path)?;
        let len = file.len()?;
        let f = Arc::new(OverlayFile {
            path: path.to_owned(),
            content: Mutex::new(Content::Disk { file, len }),
        });
        overlay.files.insert(path.to_owned(), Some(f.clone()));
        Ok(f)
    }

    fn dir_exists(&self, overlay: &Overlay, dir: &Path) -> bool {
        overlay.dirs.contains(dir) || self.inner.list(dir).is_ok()
    }
}

impl Storage for ReadOnlyStorage {
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let mut overlay = self.overlay();
        if self.lookup(&mut overlay, path).is_ok() {
            return Err(io::Error::from(io::ErrorKind::AlreadyExists));
        }
        let parent = path.parent().unwrap_or(Path::new("."));
        if !self.dir_exists(&overlay, parent) {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        let f = Arc::new(OverlayFile {
            path: path.to_owned(),
            content: Mutex::new(Content::Memory(Vec::new())),
        });
        overlay.files.insert(path.to_owned(), Some(f.clone()));
        Ok(f)
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let mut overlay = self.overlay();
        Ok(self.lookup(&mut overlay, path)?)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut overlay = self.overlay();
        let f = self.lookup(&mut overlay, from)?;
        overlay.files.insert(from.to_owned(), None);
        overlay.files.insert(to.to_owned(), Some(f));
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut overlay = self.overlay();
        self.lookup(&mut overlay, path)?;
        overlay.files.insert(path.to_owned(), None);
        Ok(())
    }

    fn sync_dir(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let overlay = self.overlay();
        let mut names: BTreeSet<String> = match self.inner.list(dir) {
            Ok(names) => names.into_iter().collect(),
            Err(e) if e.kind() == io::ErrorKind::NotFound && overlay.dirs.contains(dir) => {
                BTreeSet::new()
            }
            Err(e) => return Err(e),
        };
        for (path, f) in &overlay.files {
            if path.parent() != Some(dir) {
                continue;
            }
            let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
                continue;
            };
            match f {
                Some(_) => names.insert(name),
                None => names.remove(&name),
            };
        }
        Ok(names.into_iter().collect())
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut overlay = self.overlay();
        if !self.dir_exists(&overlay, dir) {
            overlay.dirs.insert(dir.to_owned());
        }
        Ok(())
    }

    fn name(&self) -> &'static str {
        "read-only"
    }

    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        self.open(path)
    }

    fn lock_dir(&self, dir: &Path) -> io::Result<Option<std::fs::File>> {
        Err(refused(dir, "locking"))
    }

    fn is_read_only(&self) -> bool {
        true
    }
}

impl OverlayFile {
    fn content(&self) -> MutexGuard<'_, Content> {
        self.content.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Content {
    fn len(&self) -> u64 {
        match self {
            Content::Disk { len, .. } => *len,
            Content::Memory(v) => v.len() as u64,
        }
    }

    /// Turns a (small) disk file into memory so it can be written.
    fn make_memory(&mut self, path: &Path) -> io::Result<&mut Vec<u8>> {
        if let Content::Disk { file, len } = self {
            let len = *len;
            if len > COPY_ON_WRITE_MAX_BYTES {
                return Err(refused(path, "writing to"));
            }
            let mut bytes = vec![0u8; len as usize];
            let n = file.read_at(&mut bytes, 0)?;
            bytes.truncate(n);
            *self = Content::Memory(bytes);
        }
        match self {
            Content::Memory(v) => Ok(v),
            Content::Disk { .. } => unreachable!("converted above"),
        }
    }
}

impl StorageFile for OverlayFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        let content = self.content();
        let len = content.len();
        if position >= len {
            return Ok(0);
        }
        let n = ((len - position) as usize).min(buf.len());
        match &*content {
            Content::Disk { file, .. } => file.read_at(&mut buf[..n], position),
            Content::Memory(v) => {
                buf[..n].copy_from_slice(&v[position as usize..position as usize + n]);
                Ok(n)
            }
        }
    }

    fn write_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
        let mut content = self.content();
        let v = content.make_memory(&self.path)?;
        let end = position as usize + buf.len();
        if v.len() < end {
            v.resize(end, 0);
        }
        v[position as usize..end].copy_from_slice(buf);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut content = self.content();
        let current = content.len();
        match &mut *content {
            Content::Disk { len: shown, .. } if len <= current => {
                *shown = len;
                Ok(())
            }
            _ => {
                let v = content.make_memory(&self.path)?;
                v.resize(len as usize, 0);
                Ok(())
            }
        }
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.content().len())
    }

    fn os_path(&self) -> Option<&Path> {
        // Never mapped: a live writer may shrink a file in place, and a map of it would fault.
        None
    }
}
