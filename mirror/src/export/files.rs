//! The export's files in OUT: the emptiness check (an OUT without `meta.properties` is an incomplete
//! export), a partition directory linked or copied byte for byte, every file and directory synced, and
//! `meta.properties` written last.
//!
//! Only sealed segments' `.log` files are hard-linked. Neither klog nor Kafka writes one in place after it
//! is sealed: retention and DeleteTopics unlink or rename, Kafka's cleaner swaps in a new file, and a klog
//! truncation replaces a `.log` whose file has another link instead of shrinking it (`LogSegment::
//! truncate_to`). Everything else (the active segment, every index, producer snapshots, the leader-epoch
//! checkpoint) is copied: an active segment is appended to, and Kafka resizes the active segment's
//! indexes and rebuilds indexes in place, so sharing their inodes would let one side change the other's.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// The file whose presence marks a finished export (Kafka refuses to start without it).
pub const META_PROPERTIES: &str = "meta.properties";

/// Bytes and files that reached OUT by hard link or by copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Transfer {
    /// Bytes of the files hard-linked.
    pub bytes_linked: u64,
    /// Bytes of the files copied (or written).
    pub bytes_copied: u64,
    /// Files hard-linked.
    pub files_linked: u64,
    /// Files copied (or written).
    pub files_copied: u64,
}

impl Transfer {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: Transfer) {
        self.bytes_linked += other.bytes_linked;
        self.bytes_copied += other.bytes_copied;
        self.files_linked += other.files_linked;
        self.files_copied += other.files_copied;
    }
}

/// `path` with symbolic links and `..` resolved as far as it exists; the missing rest appended as given.
/// A dangling symbolic link is followed to where it points (so an OUT that is a link into the root, whose
/// target does not exist yet, resolves inside the root), at most [`MAX_LINKS`] links deep.
pub(crate) fn resolved(path: &Path) -> Result<PathBuf, Error> {
    resolved_within(path, MAX_LINKS)
}

/// How many dangling links [`resolved`] follows before it refuses the path (Linux's `ELOOP` limit).
const MAX_LINKS: usize = 40;

fn resolved_within(path: &Path, links_left: usize) -> Result<PathBuf, Error> {
    let absolute = std::path::absolute(path).map_err(|e| Error::io(path, e))?;
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        match fs::canonicalize(existing) {
            Ok(real) => return Ok(rest.iter().rev().fold(real, |p, c| p.join(c))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
                    return Err(Error::io(path, e));
                };
                if fs::symlink_metadata(existing).is_ok_and(|m| m.file_type().is_symlink()) {
                    if links_left == 0 {
                        return Err(Error::Refused(format!(
                            "{}: more than {MAX_LINKS} symbolic links to follow",
                            path.display()
                        )));
                    }
                    let target = fs::read_link(existing).map_err(|e| Error::io(existing, e))?;
                    let target = resolved_within(&parent.join(target), links_left - 1)?;
                    return Ok(rest.iter().rev().fold(target, |p, c| p.join(c)));
                }
                rest.push(name.to_owned());
                existing = parent;
            }
            Err(e) => return Err(Error::io(existing, e)),
        }
    }
}

/// Refuses an OUT that is the cluster root `root` or lies inside it (a partition directory included), also
/// when reached through a symbolic link: Kafka's files would land among klog's, and the cluster would
/// find a directory it never made. Checked before OUT is created.
pub fn refuse_out_inside(root: &Path, out: &Path) -> Result<(), Error> {
    let (root_real, out_real) = (resolved(root)?, resolved(out)?);
    if out_real.starts_with(&root_real) {
        return Err(Error::Refused(format!(
            "{} is inside the cluster {} ({}): export into a directory outside it",
            out.display(),
            root.display(),
            root_real.display()
        )));
    }
    Ok(())
}

/// Refuses an OUT that exists and holds anything; an OUT with files and no `meta.properties` is named as
/// an incomplete export (a crash or kill during one). Creates OUT when missing.
pub fn prepare_out(out: &Path) -> Result<(), Error> {
    match fs::read_dir(out) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                let finished = out.join(META_PROPERTIES).exists();
                return Err(Error::Refused(if finished {
                    format!(
                        "{} is not empty: it already holds a Kafka log directory (meta.properties); \
                         export into an empty or new directory",
                        out.display()
                    )
                } else {
                    format!(
                        "{} is not empty and has no meta.properties: it is an incomplete export \
                         (interrupted before its last step) or another directory; remove it and export again",
                        out.display()
                    )
                }));
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
            if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
            Ok(())
        }
        Err(e) => Err(Error::io(out, e)),
    }
}

/// What a partition directory's file becomes in OUT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Disposition {
    /// A sealed segment's `.log`: shared by hard link.
    Link,
    /// Copied byte for byte.
    Copy,
    /// Not exported (written separately, or klog's own leftovers Kafka would not read).
    Skip,
}

fn disposition(name: &str, active_log: &str) -> Disposition {
    // `partition.metadata` is written from the cluster's metadata; temporary and half-deleted files of
    // an interrupted operation are not part of the log.
    let leftover = [".deleted", ".cleaned", ".swap", ".tmp"]
        .iter()
        .any(|s| name.ends_with(s));
    if name == klog_log::checkpoint::PARTITION_METADATA_FILE || leftover {
        Disposition::Skip
    } else if name.ends_with(".log") && name != active_log {
        Disposition::Link
    } else {
        Disposition::Copy
    }
}

/// Links or copies the files of the partition directory `from` into `to` (created), the `.log` of the
/// segment at `active_base` (the active segment) copied. `to` and its files are synced.
pub fn export_partition_dir(from: &Path, to: &Path, active_base: i64) -> Result<Transfer, Error> {
    fs::create_dir(to).map_err(|e| Error::io(to, e))?;
    let active_log = format!("{active_base:020}.log");
    let mut names: Vec<String> = Vec::new();
    for entry in fs::read_dir(from).map_err(|e| Error::io(from, e))? {
        let entry = entry.map_err(|e| Error::io(from, e))?;
        let kind = entry.file_type().map_err(|e| Error::io(&entry.path(), e))?;
        if kind.is_file() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    let mut t = Transfer::default();
    for name in names {
        let (src, dst) = (from.join(&name), to.join(&name));
        match disposition(&name, &active_log) {
            Disposition::Skip => {}
            Disposition::Link => match fs::hard_link(&src, &dst) {
                Ok(()) => {
                    t.bytes_linked += len_of(&dst)?;
                    t.files_linked += 1;
                }
                // Another file system (EXDEV) or one without links: copy instead.
                Err(_) => {
                    t.bytes_copied += copy_synced(&src, &dst)?;
                    t.files_copied += 1;
                }
            },
            Disposition::Copy => {
                t.bytes_copied += copy_synced(&src, &dst)?;
                t.files_copied += 1;
            }
        }
    }
    sync_dir(to)?;
    Ok(t)
}

/// The highest producer id in the batch headers of every `.log` in the partition directory `dir` (a
/// closed log: each file ends at its last batch). Reads 61 bytes per batch, never a batch's records, so
/// a terabyte of data costs one header read per batch. A header that does not fit its file ends that
/// file's walk (recovery already cut what is torn); a header with another magic is an error naming the
/// file and position.
pub fn max_producer_id(dir: &Path) -> Result<Option<i64>, Error> {
    use klog_log::format::RECORD_BATCH_OVERHEAD;
    use std::os::unix::fs::FileExt;
    let mut max = None;
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("log") {
            continue;
        }
        let file = fs::File::open(&path).map_err(|e| Error::io(&path, e))?;
        let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
        let mut header = [0u8; RECORD_BATCH_OVERHEAD];
        let mut position = 0u64;
        while position + RECORD_BATCH_OVERHEAD as u64 <= len {
            file.read_exact_at(&mut header, position)
                .map_err(|e| Error::io(&path, e))?;
            // Kafka's v2 header: batchLength at 8, magic at 16, producerId at 43.
            let batch_length = i32::from_be_bytes([header[8], header[9], header[10], header[11]]);
            if batch_length <= 0 {
                break; // a zero-filled tail
            }
            if header[16] != 2 {
                return Err(Error::Refused(format!(
                    "{} at position {position}: a batch of magic {} (only v2 logs can be exported)",
                    path.display(),
                    header[16] as i8
                )));
            }
            let mut pid = [0u8; 8];
            pid.copy_from_slice(&header[43..51]);
            let pid = i64::from_be_bytes(pid);
            if pid >= 0 {
                max = max.max(Some(pid));
            }
            position += 12 + batch_length as u64;
        }
    }
    Ok(max)
}

fn len_of(path: &Path) -> Result<u64, Error> {
    Ok(fs::metadata(path).map_err(|e| Error::io(path, e))?.len())
}

/// Copies `src` to a new `dst` and syncs it; the bytes copied.
pub fn copy_synced(src: &Path, dst: &Path) -> Result<u64, Error> {
    let n = fs::copy(src, dst).map_err(|e| Error::io(src, e))?;
    fs::File::open(dst)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(dst, e))?;
    Ok(n)
}

/// Syncs the directory `dir` (its entries: new names, renames).
pub fn sync_dir(dir: &Path) -> Result<(), Error> {
    fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(dir, e))
}

/// Syncs every file and directory under `dir`, and `dir` itself.
pub fn sync_tree(dir: &Path) -> Result<(), Error> {
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| Error::io(&path, e))?;
        if kind.is_dir() {
            sync_tree(&path)?;
        } else if kind.is_file() {
            fs::File::open(&path)
                .and_then(|f| f.sync_all())
                .map_err(|e| Error::io(&path, e))?;
        }
    }
    sync_dir(dir)
}

/// `meta.properties` as Kafka's `MetaProperties` (version 1) reads it, written through a temp name,
/// synced, renamed, the directory synced.
pub fn write_meta_properties(
    out: &Path,
    node_id: i32,
    cluster_id: &str,
    directory_id: &str,
) -> Result<PathBuf, Error> {
    let path = out.join(META_PROPERTIES);
    let tmp = out.join(format!("{META_PROPERTIES}.tmp"));
    let text = format!(
        "#Written by klog cluster export\nversion=1\nnode.id={node_id}\ncluster.id={cluster_id}\ndirectory.id={directory_id}\n"
    );
    fs::write(&tmp, text.as_bytes()).map_err(|e| Error::io(&tmp, e))?;
    fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(&tmp, e))?;
    fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
    sync_dir(out)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sealed_logs_are_linked() {
        let active = format!("{:020}.log", 40);
        assert_eq!(
            disposition(&format!("{:020}.log", 0), &active),
            Disposition::Link
        );
        assert_eq!(disposition(&active, &active), Disposition::Copy);
        assert_eq!(
            disposition(&format!("{:020}.index", 0), &active),
            Disposition::Copy
        );
        assert_eq!(
            disposition("leader-epoch-checkpoint", &active),
            Disposition::Copy
        );
        assert_eq!(
            disposition("partition.metadata", &active),
            Disposition::Skip
        );
        assert_eq!(
            disposition(&format!("{:020}.log.deleted", 0), &active),
            Disposition::Skip
        );
    }
}
