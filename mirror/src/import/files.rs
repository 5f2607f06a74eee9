//! One partition directory of a broker's log directory placed into the new cluster: which files are
//! hard-linked and which copied, and why that keeps the broker's files as they were.
//!
//! klog writes into an existing file in place only in four cases: appends to the active segment (its
//! `.log`, `.index`, `.timeindex`, `.txnindex`), indexes it rebuilds over the old file, `.log`s that a
//! recovery cuts or a truncation shrinks, and nothing else (checkpoints, `partition.metadata`, producer
//! snapshots and the leader-epoch cache are written to a temp name and renamed, which gives the new name
//! its own inode). So only a sealed segment's `.log` is linked, and only below the segment an unclean
//! recovery rescans from; every other file is copied. A truncation or cut of a linked `.log` replaces
//! klog's name with a copy instead of shrinking the shared inode (`LogSegment`
//! never shrinks a `.log` that has another link in place), so no later write of klog reaches a byte
//! of the broker's files.
//!
//! The files are placed through the operating system directly: a hard link has no place in the storage
//! seam, and a broker's log directory is a real file system by definition.

use std::path::Path;

use serde::Serialize;

use crate::error::Error;

/// What placing files linked and copied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PlacedFiles {
    /// Files hard-linked (sharing the broker's inode).
    pub linked_files: u64,
    /// Their bytes.
    pub linked_bytes: u64,
    /// Files copied.
    pub copied_files: u64,
    /// Their bytes.
    pub copied_bytes: u64,
}

impl PlacedFiles {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &PlacedFiles) {
        self.linked_files += other.linked_files;
        self.linked_bytes += other.linked_bytes;
        self.copied_files += other.copied_files;
        self.copied_bytes += other.copied_bytes;
    }
}

/// Links where it may, copies otherwise; remembers why a link failed (another file system).
#[derive(Debug)]
pub(crate) struct Placer {
    /// `--copy`: never link.
    copy_only: bool,
    /// The first link that failed and fell back to a copy, with the operating system's reason.
    pub(crate) link_failure: Option<String>,
}

impl Placer {
    pub(crate) fn new(copy_only: bool) -> Self {
        Placer {
            copy_only,
            link_failure: None,
        }
    }

    /// Places partition directory `src` as `dst` (created). `rescan_from`: the recovery point of an
    /// unclean broker directory (its segments from the one holding it on are rescanned and may be cut, so
    /// they are copied); `None` after a clean shutdown.
    pub(crate) fn place_partition(
        &mut self,
        src: &Path,
        dst: &Path,
        rescan_from: Option<i64>,
    ) -> Result<PlacedFiles, Error> {
        std::fs::create_dir(dst).map_err(|e| Error::io(dst, e))?;
        let mut names = Vec::new();
        for entry in std::fs::read_dir(src).map_err(|e| Error::io(src, e))? {
            let entry = entry.map_err(|e| Error::io(src, e))?;
            let path = entry.path();
            let kind = entry.file_type().map_err(|e| Error::io(&path, e))?;
            if !kind.is_file() {
                return Err(Error::ImportRefused {
                    path,
                    reason: "a partition directory holds only files".into(),
                });
            }
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        let bases: Vec<i64> = names.iter().filter_map(|n| segment_base(n)).collect();
        let active = bases.iter().copied().max();
        // The first segment an unclean open rescans: the one holding the recovery point.
        let first_rescanned = rescan_from.map(|rp| {
            bases
                .iter()
                .copied()
                .filter(|b| *b <= rp)
                .max()
                .unwrap_or(i64::MIN)
        });
        let mut placed = PlacedFiles::default();
        for name in &names {
            let linkable = segment_base(name).is_some_and(|base| {
                Some(base) != active && first_rescanned.is_none_or(|first| base < first)
            });
            self.place_file(&src.join(name), &dst.join(name), linkable, &mut placed)?;
        }
        sync_dir(dst)?;
        Ok(placed)
    }

    fn place_file(
        &mut self,
        src: &Path,
        dst: &Path,
        linkable: bool,
        placed: &mut PlacedFiles,
    ) -> Result<(), Error> {
        let len = std::fs::metadata(src).map_err(|e| Error::io(src, e))?.len();
        if linkable && !self.copy_only {
            match std::fs::hard_link(src, dst) {
                Ok(()) => {
                    placed.linked_files += 1;
                    placed.linked_bytes += len;
                    return Ok(());
                }
                // Another file system (EXDEV), or one without hard links: a copy does.
                Err(e) if link_unavailable(&e) => {
                    self.link_failure
                        .get_or_insert_with(|| format!("{}: {e}", dst.display()));
                }
                Err(e) => return Err(Error::io(dst, e)),
            }
        }
        copy_synced(src, dst)?;
        placed.copied_files += 1;
        placed.copied_bytes += len;
        Ok(())
    }
}

/// The base offset of a segment's `.log` (`<20 digits>.log`).
fn segment_base(name: &str) -> Option<i64> {
    let digits = name.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

fn link_unavailable(e: &std::io::Error) -> bool {
    const EXDEV: i32 = 18;
    const EPERM: i32 = 1;
    const EMLINK: i32 = 31;
    matches!(e.raw_os_error(), Some(EXDEV | EPERM | EMLINK))
        || e.kind() == std::io::ErrorKind::Unsupported
}

/// Copies `src` to the new file `dst` and syncs it.
pub(crate) fn copy_synced(src: &Path, dst: &Path) -> Result<(), Error> {
    std::fs::copy(src, dst).map_err(|e| Error::io(dst, e))?;
    std::fs::File::open(dst)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(dst, e))
}

/// Syncs directory `dir` (its new entries durable).
pub(crate) fn sync_dir(dir: &Path) -> Result<(), Error> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_twenty_digit_log_names_are_segments() {
        assert_eq!(segment_base("00000000000000000042.log"), Some(42));
        assert_eq!(segment_base("00000000000000000042.index"), None);
        assert_eq!(segment_base("00000000000000000042.log.deleted"), None);
        assert_eq!(segment_base("0042.log"), None);
        assert_eq!(segment_base("0000000000000000004x.log"), None);
    }
}
