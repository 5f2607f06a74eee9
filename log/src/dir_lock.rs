//! One writer per log directory: Kafka's `.lock` (`LogManager.lockLogDirs`), an exclusive lock held for the
//! writer's whole life and tried once, never waited for (see `io/lock.rs` for why it is an `fcntl` lock).
//!
//! Inside one process the lock is shared: a `LogDir`, the partitions it opens and a cluster on top of them
//! are one writer, and they hold one `Arc<DirLock>` (a second lock of the same file from this process
//! would refuse the process itself). A second writable open of the same *partition*, or a second writable
//! [`crate::log_dir::LogDir`] of the same root, in this process is refused by a [`Claim`]. Readers take
//! neither: they open through [`crate::io::ReadOnlyStorage`].

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use crate::error::IoContext;
use crate::io::{Storage, LOCK_FILE};
use crate::Error;

/// The held lock of a log directory; released when the last holder in this process drops it.
#[derive(Debug)]
pub struct DirLock {
    dir: PathBuf,
    /// The open `.lock` file holding the lock (None on simulated storage).
    _file: Option<std::fs::File>,
}

/// The locks this process holds, by canonical directory.
static HELD: Mutex<Option<HashMap<PathBuf, Weak<DirLock>>>> = Mutex::new(None);

impl DirLock {
    /// Takes the lock of the log directory `dir` (which must exist), or shares the one this process holds.
    pub fn acquire(storage: &dyn Storage, dir: &Path) -> Result<Arc<DirLock>, Error> {
        if storage.is_read_only() {
            return Err(Error::ReadOnly {
                dir: dir.to_owned(),
                operation: "locking the log directory",
            });
        }
        let key = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        let held = held.get_or_insert_with(HashMap::new);
        if let Some(lock) = held.get(&key).and_then(Weak::upgrade) {
            return Ok(lock);
        }
        let file = match storage.lock_dir(dir) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // A Kafka broker's POSIX lock names its pid; a klog writer wrote its pid into the file.
                let holder = crate::io::posix_lock_holder(dir).or_else(|| {
                    std::fs::read_to_string(dir.join(LOCK_FILE))
                        .ok()
                        .and_then(|s| s.trim().parse().ok())
                });
                return Err(Error::LogDirLocked {
                    dir: dir.to_owned(),
                    holder,
                });
            }
            Err(e) => return Err(Error::io(&dir.join(LOCK_FILE), e)),
        };
        let lock = Arc::new(DirLock {
            dir: dir.to_owned(),
            _file: file,
        });
        if lock._file.is_some() {
            held.retain(|_, w| w.strong_count() > 0);
            held.insert(key, Arc::downgrade(&lock));
        }
        Ok(lock)
    }

    /// The locked directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for DirLock {
    /// Releases the lock itself before the file closes: a copy of the descriptor elsewhere (a forked
    /// child not yet exec'd) would otherwise keep it (`io::unlock_dir`).
    fn drop(&mut self) {
        if let Some(file) = &self._file {
            crate::io::unlock_dir(file);
        }
    }
}

/// The partition directories and log directories open for writing in this process, by canonical path.
static CLAIMED: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// This process's claim on a directory for one writable open at a time: a partition directory
/// ([`DirLock::claim_partition`]) or a log directory ([`DirLock::claim_log_dir`]). Released on drop.
#[derive(Debug)]
pub struct Claim {
    key: Option<PathBuf>,
}

/// This process's claim on a partition directory (see [`Claim`]).
pub type PartitionClaim = Claim;

impl DirLock {
    /// Claims the partition directory `dir` (inside this log directory; it must exist) for one writable
    /// open in this process. Simulated storage has no claims: its tests open and "crash" logs freely, and
    /// nothing outside the simulation can reach its files.
    pub fn claim_partition(&self, dir: &Path) -> Result<Claim, Error> {
        self.claim(dir, || Error::PartitionInUse {
            dir: dir.to_owned(),
        })
    }

    /// Claims the locked log directory itself for one writable `LogDir` in this process: the lock is
    /// shared inside the process, and two writers of one root would each write its checkpoints and
    /// one's close would put the clean-shutdown marker down while the other still appends.
    pub fn claim_log_dir(&self) -> Result<Claim, Error> {
        self.claim(&self.dir, || Error::LogDirInUse {
            dir: self.dir.clone(),
        })
    }

    fn claim(&self, dir: &Path, in_use: impl FnOnce() -> Error) -> Result<Claim, Error> {
        if self._file.is_none() {
            return Ok(Claim { key: None });
        }
        let key = std::fs::canonicalize(dir).at(dir)?;
        let mut claimed = CLAIMED.lock().unwrap_or_else(|e| e.into_inner());
        if !claimed.get_or_insert_with(HashSet::new).insert(key.clone()) {
            return Err(in_use());
        }
        Ok(Claim { key: Some(key) })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let mut claimed = CLAIMED.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(set) = claimed.as_mut() {
                set.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::StdStorage;

    /// A descriptor of the `.lock` file that outlives the `DirLock` (a child forked by another thread
    /// holds a copy of every descriptor until it execs) must not keep the log directory locked: the
    /// OFD lock belongs to the open file description, which the copy shares. Seen failing as a flaky
    /// `LogDirLocked` naming this very process in `tests/import.rs` while another test spawned a child.
    #[test]
    fn a_copied_descriptor_does_not_keep_the_lock_after_the_holder_drops_it() {
        let dir = std::env::temp_dir().join(format!("klog-dir-lock-dup-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let lock = DirLock::acquire(&StdStorage, &dir).unwrap();
        let copy = lock._file.as_ref().unwrap().try_clone().unwrap();
        drop(lock);
        let again =
            DirLock::acquire(&StdStorage, &dir).expect("the lock was released with its holder");
        drop(again);
        drop(copy);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
