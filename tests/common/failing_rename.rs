//! A `Storage` over real files that fails one chosen rename, and records every rename of an existing
//! file it was asked for: what klog's cleaner leaves on disk when its swap stops at that step (the
//! rename fails and changes nothing; everything before it is done), for a broker to finish.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use klog::log::io::{StdStorage, Storage, StorageFile};

/// [`StdStorage`], except that the first rename of an existing file named `from` to a file named `to`
/// (file names, whatever the directory) fails with an I/O error, renaming nothing. Renames of missing
/// sources (a segment without a `.txnindex`) are not recorded.
#[derive(Debug)]
pub struct FailingRename {
    inner: StdStorage,
    fail: Option<(String, String)>,
    failed: AtomicBool,
    /// Every recorded rename (source, target), the failed one included.
    pub renames: Mutex<Vec<(PathBuf, PathBuf)>>,
}

impl FailingRename {
    /// Fails the rename of a file named `fail.0` to one named `fail.1`; `None` fails none (records a
    /// whole pass's renames).
    pub fn new(fail: Option<(String, String)>) -> Arc<FailingRename> {
        Arc::new(FailingRename {
            inner: StdStorage,
            fail,
            failed: AtomicBool::new(false),
            renames: Mutex::new(Vec::new()),
        })
    }

    /// Whether the chosen rename was reached (and failed).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }

    /// The renames counted so far, as (source name, target name).
    pub fn rename_names(&self) -> Vec<(String, String)> {
        let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
        self.renames
            .lock()
            .expect("the rename log")
            .iter()
            .map(|(from, to)| (name(from).unwrap_or_default(), name(to).unwrap_or_default()))
            .collect()
    }
}

impl Storage for FailingRename {
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        self.inner.create(path)
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        self.inner.open(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        if std::fs::symlink_metadata(from).is_ok() {
            self.renames
                .lock()
                .expect("the rename log")
                .push((from.to_owned(), to.to_owned()));
            let names = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
            let chosen = self.fail.as_ref().is_some_and(|(f, t)| {
                names(from).as_ref() == Some(f) && names(to).as_ref() == Some(t)
            });
            if chosen && !self.failed.swap(true, Ordering::SeqCst) {
                return Err(io::Error::other(format!(
                    "injected failure of the rename {} -> {}",
                    from.display(),
                    to.display()
                )));
            }
        }
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn name(&self) -> &'static str {
        "failing-rename"
    }
    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        self.inner.open_read(path)
    }
    fn lock_dir(&self, dir: &Path) -> io::Result<Option<std::fs::File>> {
        self.inner.lock_dir(dir)
    }
}
