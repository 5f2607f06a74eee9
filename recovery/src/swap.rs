//! Completing interrupted segment replacements (`LogLoader.java`, spec §2.7): `.swap` files are the new
//! segments of a replacement that may not have finished. A `.swap` at or above the lowest `.cleaned` offset
//! belongs to an incomplete split and is deleted; every other `.log.swap` wins: the old files whose offsets
//! it covers are deleted and the `.swap` suffix is stripped from its files.

use std::path::Path;

use klog_log::format::Batches;
use klog_log::io::{read_file, Storage};
use klog_log::segment::parse_base_offset;
use klog_log::Error;

/// What swap completion did to one partition directory.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SwapReport {
    /// Base offsets of the segments whose `.swap` files were renamed into place.
    pub completed: Vec<i64>,
    /// The files deleted: swaps of an unfinished cleaning, and the files a completed swap replaced.
    pub deleted: Vec<String>,
}

fn io(path: &Path, e: std::io::Error) -> Error {
    Error::Io {
        path: path.to_owned(),
        source: e,
    }
}

/// Completes the interrupted `.swap` replacements in the partition directory `dir`, as Kafka's
/// `LogLoader` does before it loads the segments: a swap at or above an unfinished cleaning (a `.cleaned`
/// file) is deleted, any other replaces the files of the offsets it covers.
pub fn complete_swaps(storage: &dyn Storage, dir: &Path) -> Result<SwapReport, Error> {
    let mut report = SwapReport::default();
    let names = storage.list(dir).map_err(|e| io(dir, e))?;
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
            storage.remove(&dir.join(name)).map_err(|e| io(dir, e))?;
            report.deleted.push(name.clone());
        } else if name.ends_with(".log.swap") {
            swaps.push(base);
        }
    }
    for base in swaps {
        let log_swap = dir.join(format!("{base:020}.log.swap"));
        let bytes = read_file(storage, &log_swap)
            .map_err(|e| io(&log_swap, e))?
            .unwrap_or_default();
        let next = Batches::new(&bytes)
            .filter_map(Result::ok)
            .last()
            .map_or(base, |b| b.last_offset().saturating_add(1));
        for name in storage.list(dir).map_err(|e| io(dir, e))? {
            let covered = parse_base_offset(&name).is_some_and(|o| o >= base && o < next);
            if covered && !name.ends_with(".swap") && !name.ends_with(".snapshot") {
                storage.remove(&dir.join(&name)).map_err(|e| io(dir, e))?;
                report.deleted.push(name);
            }
        }
        for name in storage.list(dir).map_err(|e| io(dir, e))? {
            if parse_base_offset(&name) == Some(base) && name.ends_with(".swap") {
                let to = dir.join(name.trim_end_matches(".swap"));
                storage
                    .rename(&dir.join(&name), &to)
                    .map_err(|e| io(&to, e))?;
            }
        }
        report.completed.push(base);
    }
    // Kafka renames every remaining `.swap` (LogLoader): an index's `.swap` whose `.log.swap` was already
    // renamed when the process died belongs to that finished segment and takes its place too.
    for name in storage.list(dir).map_err(|e| io(dir, e))? {
        if name.ends_with(".swap") {
            let to = dir.join(name.trim_end_matches(".swap"));
            storage
                .rename(&dir.join(&name), &to)
                .map_err(|e| io(&to, e))?;
            if let Some(base) = parse_base_offset(&name).filter(|b| !report.completed.contains(b)) {
                report.completed.push(base);
            }
        }
    }
    if !report.completed.is_empty() || !report.deleted.is_empty() {
        storage.sync_dir(dir).map_err(|e| io(dir, e))?;
    }
    Ok(report)
}
