//! Swapping a cleaned segment in, crash-safely, and finishing a swap a crash interrupted (Kafka's
//! `LocalLog.replaceSegments` and `LogLoader.removeTempFilesAndCollectSwapFiles`).
//!
//! The files move in Kafka's order: the new segment's files `.cleaned -> .swap`; the old segments' files,
//! in ascending base offset, `"" -> .deleted`; the new segment's files `.swap -> ""`; one directory fsync.
//! klog adds one directory fsync after the `.swap` names are in place, so that from then on a crash
//! always finishes the swap forward (below), and removes the `.deleted` files at once instead of after
//! `file.delete.delay.ms` (a reader still holding an old segment reads it from its open files, see
//! `LogSegment::retire`). Every state a crash can leave is one [`complete_swaps`] (run by every open of
//! the partition) finishes: `.cleaned` files are deleted (the old segments are intact), a `.log.swap`
//! deletes the old files of the offsets it covers and takes their names, `.deleted` files are deleted.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::IoContext;
use crate::format::Batches;
use crate::io::{read_file, Storage};
use crate::segment::{parse_base_offset, LogSegment};
use crate::Error;

/// What swap completion did to one partition directory.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SwapReport {
    /// Base offsets of the segments whose `.swap` files were renamed into place.
    pub completed: Vec<i64>,
    /// The files deleted: swaps of an unfinished cleaning, and the files a completed swap replaced.
    pub deleted: Vec<String>,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Renames `from` to `to`; a file that does not exist (a segment without a `.txnindex`) is skipped.
fn rename_if_exists(storage: &dyn Storage, from: &Path, to: &Path) -> Result<(), Error> {
    match storage.rename(from, to) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(from, e)),
    }
}

fn remove_if_exists(storage: &dyn Storage, path: &Path) -> Result<(), Error> {
    match storage.remove(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Deletes the `.cleaned` files of `base` (Kafka's `LogSegment.deleteIfExists(dir, base, ".cleaned")`):
/// stale ones before a segment is cleaned there, or a cleaned segment the pass gave up.
pub(crate) fn delete_cleaned(storage: &dyn Storage, dir: &Path, base: i64) -> Result<(), Error> {
    for path in LogSegment::file_paths(dir, base, ".cleaned") {
        remove_if_exists(storage, &path)?;
    }
    Ok(())
}

/// The files of a flushed `.cleaned` segment at `base` take the place of the segments `old` (in log
/// order; the first is based at `base`). The segments' objects are retired first, so readers holding
/// them keep working after their files are gone.
pub(crate) fn swap_files(
    storage: &dyn Storage,
    dir: &Path,
    base: i64,
    old: &[Arc<LogSegment>],
) -> Result<(), Error> {
    let cleaned = LogSegment::file_paths(dir, base, ".cleaned");
    let swap = LogSegment::file_paths(dir, base, ".swap");
    for (from, to) in cleaned.iter().zip(&swap) {
        rename_if_exists(storage, from, to)?;
    }
    storage.sync_dir(dir).at(dir)?;
    for seg in old {
        seg.retire()?;
        for path in LogSegment::file_paths(dir, seg.base_offset(), "") {
            rename_if_exists(storage, &path, &with_suffix(&path, ".deleted"))?;
        }
    }
    for (from, to) in swap.iter().zip(LogSegment::file_paths(dir, base, "")) {
        rename_if_exists(storage, from, &to)?;
    }
    storage.sync_dir(dir).at(dir)
}

/// Removes the `.deleted` files of the replaced segments `old` (Kafka waits `file.delete.delay.ms`; a
/// crash before this leaves them to the next open, which deletes every `.deleted` file).
pub(crate) fn remove_deleted(
    storage: &dyn Storage,
    dir: &Path,
    old: &[Arc<LogSegment>],
) -> Result<(), Error> {
    for seg in old {
        for path in LogSegment::file_paths(dir, seg.base_offset(), ".deleted") {
            remove_if_exists(storage, &path)?;
        }
    }
    Ok(())
}

/// Completes the interrupted `.swap` replacements in the partition directory `dir`, as Kafka's
/// `LogLoader` does before it loads the segments: a swap at or above an unfinished cleaning (a `.cleaned`
/// file) is deleted, any other replaces the files of the offsets it covers. The `.cleaned` and `.deleted`
/// files themselves are left to the segment load, which deletes them.
pub fn complete_swaps(storage: &dyn Storage, dir: &Path) -> Result<SwapReport, Error> {
    let mut report = SwapReport::default();
    let names = storage.list(dir).at(dir)?;
    let min_cleaned = names
        .iter()
        .filter(|n| n.ends_with(".cleaned"))
        .filter_map(|n| parse_base_offset(n))
        .min();
    let mut swaps = Vec::new();
    for name in names.iter().filter(|n| n.ends_with(".swap")) {
        let Some(base) = parse_base_offset(name) else {
            continue;
        };
        if min_cleaned.is_some_and(|m| base >= m) {
            storage.remove(&dir.join(name)).at(dir)?;
            report.deleted.push(name.clone());
        } else if name.ends_with(".log.swap") {
            swaps.push(base);
        }
    }
    for base in swaps {
        complete_swap(storage, dir, base, &mut report)?;
    }
    // Kafka renames every remaining `.swap` (LogLoader): an index's `.swap` whose `.log.swap` was already
    // renamed when the process died belongs to that finished segment and takes its place too.
    for name in storage.list(dir).at(dir)? {
        if name.ends_with(".swap") {
            let to = dir.join(name.trim_end_matches(".swap"));
            storage.rename(&dir.join(&name), &to).at(&to)?;
            if let Some(base) = parse_base_offset(&name).filter(|b| !report.completed.contains(b)) {
                report.completed.push(base);
            }
        }
    }
    if !report.completed.is_empty() || !report.deleted.is_empty() {
        storage.sync_dir(dir).at(dir)?;
    }
    Ok(report)
}

/// One `.log.swap` at `base`: the old files of the offsets it covers deleted, its files renamed.
fn complete_swap(
    storage: &dyn Storage,
    dir: &Path,
    base: i64,
    report: &mut SwapReport,
) -> Result<(), Error> {
    let log_swap = dir.join(format!("{base:020}.log.swap"));
    let bytes = read_file(storage, &log_swap)
        .at(&log_swap)?
        .unwrap_or_default();
    let next = Batches::new(&bytes)
        .filter_map(Result::ok)
        .last()
        .map_or(base, |b| b.last_offset().saturating_add(1));
    for name in storage.list(dir).at(dir)? {
        let covered = parse_base_offset(&name).is_some_and(|o| o >= base && o < next);
        if covered && !name.ends_with(".swap") && !name.ends_with(".snapshot") {
            storage.remove(&dir.join(&name)).at(dir)?;
            report.deleted.push(name);
        }
    }
    for name in storage.list(dir).at(dir)? {
        if parse_base_offset(&name) == Some(base) && name.ends_with(".swap") {
            let to = dir.join(name.trim_end_matches(".swap"));
            storage.rename(&dir.join(&name), &to).at(&to)?;
        }
    }
    report.completed.push(base);
    Ok(())
}
