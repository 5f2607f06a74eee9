//! A [`Storage`] that counts what goes through it: [`CountingStorage`] wraps any backend, forwards every
//! call unchanged and counts each operation by the kind of file it touched. What a storage engine does to
//! the disk is part of its contract (a recovery that syncs nothing it need not, a close that writes each
//! checkpoint once, a read that issues no `pread` for mapped bytes); tests state those numbers through
//! it, and an embedder can watch its own workload the same way.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::{Storage, StorageFile};

/// An operation [`CountingStorage`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IoOp {
    /// [`StorageFile::read_at`] calls.
    Read,
    /// Bytes returned by [`StorageFile::read_at`].
    ReadBytes,
    /// [`StorageFile::write_at`] and [`StorageFile::write_at_and_sync`] calls.
    Write,
    /// [`StorageFile::sync`] calls, and the sync of [`StorageFile::write_at_and_sync`] (a file of
    /// [`Storage::sync_files`] counts once each).
    Sync,
    /// [`Storage::sync_dir`] calls (counted under the kind `dir`).
    SyncDir,
    /// [`Storage::sync_files`] calls (counted under the kind `files`).
    SyncFiles,
    /// [`Storage::rename`] calls, by the kind of the new name.
    Rename,
    /// [`Storage::remove`] calls.
    Remove,
    /// The largest buffer one [`StorageFile::read_at`] asked for (a maximum, not a sum): what a reader
    /// holds at once.
    LargestRead,
    /// The largest buffer one [`StorageFile::write_at`] or [`StorageFile::write_at_and_sync`] wrote (a
    /// maximum, not a sum).
    LargestWrite,
}

/// The kind of file a path names: what follows the first dot of its file name (`00000000000000000000.log`
/// is `log`, `00000000000000000000.snapshot.tmp` is `snapshot`), or the whole name when it has none
/// (`recovery-point-offset-checkpoint`, `leader-epoch-checkpoint`).
pub fn file_kind(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A write's own temp name (`<name>.<pid>-<n>.tmp`, `super::unique_tmp_path`) counts as `<name>.tmp`.
    let name = match name.strip_suffix(".tmp").and_then(|n| n.rsplit_once('.')) {
        Some((stem, unique)) if unique.split('-').all(|d| d.parse::<u64>().is_ok()) => {
            format!("{stem}.tmp")
        }
        _ => name,
    };
    match name.split('.').nth(1) {
        Some(ext) => ext.to_owned(),
        None => name,
    }
}

type Counts = Arc<Mutex<BTreeMap<(IoOp, String), u64>>>;

fn add(counts: &Counts, op: IoOp, kind: &str, n: u64) {
    let mut counts = counts.lock().unwrap_or_else(|e| e.into_inner());
    *counts.entry((op, kind.to_owned())).or_default() += n;
}

fn raise(counts: &Counts, op: IoOp, kind: &str, n: u64) {
    let mut counts = counts.lock().unwrap_or_else(|e| e.into_inner());
    let largest = counts.entry((op, kind.to_owned())).or_default();
    *largest = (*largest).max(n);
}

/// Counts every operation on `inner` by [`IoOp`] and [`file_kind`], and otherwise is `inner`.
#[derive(Debug, Clone)]
pub struct CountingStorage {
    inner: Arc<dyn Storage>,
    counts: Counts,
}

impl CountingStorage {
    /// Counts what goes through `inner`.
    pub fn new(inner: Arc<dyn Storage>) -> Self {
        CountingStorage {
            inner,
            counts: Arc::default(),
        }
    }

    /// How many times `op` ran on files of `kind` since the last [`CountingStorage::take`].
    pub fn count(&self, op: IoOp, kind: &str) -> u64 {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts.get(&(op, kind.to_owned())).copied().unwrap_or(0)
    }

    /// Every count since the last call, and starts again from zero.
    pub fn take(&self) -> BTreeMap<(IoOp, String), u64> {
        std::mem::take(&mut *self.counts.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn wrap(&self, path: &Path, inner: Arc<dyn StorageFile>) -> Arc<dyn StorageFile> {
        Arc::new(CountingFile {
            inner,
            kind: file_kind(path),
            counts: self.counts.clone(),
        })
    }
}

impl Storage for CountingStorage {
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        Ok(self.wrap(path, self.inner.create(path)?))
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        Ok(self.wrap(path, self.inner.open(path)?))
    }
    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        Ok(self.wrap(path, self.inner.open_read(path)?))
    }
    fn open_segment_log(
        &self,
        path: &Path,
        create: bool,
        size: u64,
        preallocate: Option<u64>,
    ) -> io::Result<Arc<dyn StorageFile>> {
        let file = self
            .inner
            .open_segment_log(path, create, size, preallocate)?;
        Ok(self.wrap(path, file))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        add(&self.counts, IoOp::Rename, &file_kind(to), 1);
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        add(&self.counts, IoOp::Remove, &file_kind(path), 1);
        self.inner.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        add(&self.counts, IoOp::SyncDir, "dir", 1);
        self.inner.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn lock_dir(&self, dir: &Path) -> io::Result<Option<std::fs::File>> {
        self.inner.lock_dir(dir)
    }
    /// The inner storage syncs the files it was given (unwrapped, so a backend that gathers its own
    /// files still recognises them); each counts as a [`IoOp::Sync`] of its kind.
    fn sync_files(&self, files: &[Arc<dyn StorageFile>]) -> io::Result<()> {
        add(&self.counts, IoOp::SyncFiles, "files", 1);
        let inner: Vec<Arc<dyn StorageFile>> = files
            .iter()
            .map(
                |f| match f.as_any().and_then(|a| a.downcast_ref::<CountingFile>()) {
                    Some(counted) => {
                        add(&self.counts, IoOp::Sync, &counted.kind, 1);
                        counted.inner.clone()
                    }
                    None => f.clone(),
                },
            )
            .collect();
        self.inner.sync_files(&inner)
    }
    fn syncs_together(&self) -> bool {
        self.inner.syncs_together()
    }
    fn is_read_only(&self) -> bool {
        self.inner.is_read_only()
    }
}

/// A file of a [`CountingStorage`].
#[derive(Debug)]
struct CountingFile {
    inner: Arc<dyn StorageFile>,
    kind: String,
    counts: Counts,
}

impl StorageFile for CountingFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        raise(
            &self.counts,
            IoOp::LargestRead,
            &self.kind,
            buf.len() as u64,
        );
        let n = self.inner.read_at(buf, position)?;
        add(&self.counts, IoOp::Read, &self.kind, 1);
        add(&self.counts, IoOp::ReadBytes, &self.kind, n as u64);
        Ok(n)
    }
    fn write_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
        add(&self.counts, IoOp::Write, &self.kind, 1);
        raise(
            &self.counts,
            IoOp::LargestWrite,
            &self.kind,
            buf.len() as u64,
        );
        self.inner.write_at(buf, position)
    }
    fn sync(&self) -> io::Result<()> {
        add(&self.counts, IoOp::Sync, &self.kind, 1);
        self.inner.sync()
    }
    fn write_at_and_sync(&self, buf: &[u8], position: u64) -> io::Result<()> {
        add(&self.counts, IoOp::Write, &self.kind, 1);
        raise(
            &self.counts,
            IoOp::LargestWrite,
            &self.kind,
            buf.len() as u64,
        );
        add(&self.counts, IoOp::Sync, &self.kind, 1);
        self.inner.write_at_and_sync(buf, position)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn seal(&self, size: u64) -> io::Result<()> {
        self.inner.seal(size)
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
    fn os_path(&self) -> Option<&Path> {
        self.inner.os_path()
    }
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::SimStorage;

    #[test]
    fn a_file_kind_is_what_follows_the_first_dot_or_the_whole_name() {
        let kind = |p: &str| file_kind(Path::new(p));
        assert_eq!(kind("/d/t-0/00000000000000000000.log"), "log");
        assert_eq!(kind("/d/t-0/00000000000000000042.snapshot.tmp"), "snapshot");
        assert_eq!(
            kind("/d/t-0/00000000000000000042.snapshot.77-3.tmp"),
            "snapshot"
        );
        assert_eq!(kind("/d/recovery-point-offset-checkpoint.77-3.tmp"), "tmp");
        assert_eq!(
            kind("/d/recovery-point-offset-checkpoint"),
            "recovery-point-offset-checkpoint"
        );
    }

    #[test]
    fn every_operation_is_counted_by_kind_and_forwarded() {
        let sim = Arc::new(SimStorage::new(1));
        let counting = CountingStorage::new(sim.clone());
        let dir = Path::new("/sim/counting/t-0");
        counting.create_dir_all(dir).unwrap();
        let log = counting.create(&dir.join("0.log")).unwrap();
        log.write_at(b"hello", 0).unwrap();
        log.sync().unwrap();
        let mut buf = [0u8; 5];
        assert_eq!(log.read_at(&mut buf, 0).unwrap(), 5);
        let index = counting.create(&dir.join("0.index")).unwrap();
        counting.sync_files(&[log.clone(), index]).unwrap();
        counting.sync_dir(dir).unwrap();
        counting
            .rename(&dir.join("0.index"), &dir.join("1.index"))
            .unwrap();
        assert_eq!(counting.count(IoOp::Write, "log"), 1);
        assert_eq!(
            counting.count(IoOp::Sync, "log"),
            2,
            "its own sync and sync_files"
        );
        assert_eq!(counting.count(IoOp::Sync, "index"), 1);
        assert_eq!(counting.count(IoOp::SyncFiles, "files"), 1);
        assert_eq!(counting.count(IoOp::SyncDir, "dir"), 1);
        assert_eq!(counting.count(IoOp::Read, "log"), 1);
        assert_eq!(counting.count(IoOp::ReadBytes, "log"), 5);
        assert_eq!(counting.count(IoOp::Rename, "index"), 1);
        // Forwarded: the simulated disk holds what went through.
        assert_eq!(sim.live_bytes(&dir.join("0.log")).unwrap(), b"hello");
        assert!(sim.list(dir).unwrap().contains(&"1.index".to_owned()));
        assert_eq!(counting.count(IoOp::LargestRead, "log"), 5);
        log.write_at(b"hi", 5).unwrap();
        assert_eq!(
            counting.count(IoOp::LargestWrite, "log"),
            5,
            "a maximum, not a sum"
        );
        assert_eq!(counting.take().len(), 10);
        assert_eq!(counting.count(IoOp::Write, "log"), 0, "take starts again");
    }
}
