//! What a pass's halves hand each other (below `pass.rs`, `map_build.rs` and `rewrite.rs`, which all
//! use them): the map build's dirty-byte budget, the built map with the byte ranges whose CRCs it
//! checked, and a group written into its `.cleaned` segment but not yet swapped in.

use std::sync::Arc;

use crate::segment::LogSegment;

use super::filter::FilterStats;
use super::OffsetMap;

/// Bytes `[from, to)` of `segment` whose batches this pass's map build read with their CRCs checked.
///
/// The rewrite reads them again without rechecking the CRC (the structure is still checked) when it
/// reads the same segment object at the same size. Invariant: the bytes of an open segment's `.log`
/// change only through this log's own writes (appends of validated batches, truncation), never in place
/// behind it (outside processes do not write klog's open partition directories, as `segment/mod.rs`'s
/// mapping relies on too); a segment whose size moved is checked again whole, and bytes below `from`
/// (before the map build's index entry, or the clean part of the log) are always checked.
pub(super) struct CrcChecked {
    pub(super) segment: Arc<LogSegment>,
    pub(super) from: u64,
    pub(super) to: u64,
}

/// The offset map of a pass and the ranges its build checked.
#[derive(Clone, Copy)]
pub(super) struct BuiltMap<'a> {
    pub(super) map: &'a OffsetMap,
    pub(super) checked: &'a [CrcChecked],
}

impl BuiltMap<'_> {
    /// The range of `segment` already checked, if it is the same object at the same size.
    pub(super) fn checked_range(&self, segment: &Arc<LogSegment>) -> Option<(u64, u64)> {
        self.checked
            .iter()
            .find(|c| Arc::ptr_eq(&c.segment, segment))
            .filter(|c| segment.size() == c.to)
            .map(|c| (c.from, c.to))
    }
}

/// A group's `.cleaned` segment written and flushed (`None` for a dry run), not yet swapped in.
pub(super) struct WrittenGroup {
    pub(super) cleaned: Option<LogSegment>,
    /// Bytes of its `.log`.
    pub(super) bytes: u64,
    /// The sizes of the group's segments when the pass read them.
    pub(super) sizes: Vec<u64>,
    /// What its filter read and kept.
    pub(super) stats: FilterStats,
}

/// `from` added into `into`, field by field (a field added to [`FilterStats`] must be added here).
pub(super) fn add_stats(into: &mut FilterStats, from: &FilterStats) {
    let FilterStats {
        batches_read,
        records_read,
        records_retained,
        tombstones_removed,
        markers_removed,
        aborted_removed,
        batches_emptied,
        batches_rebuilt,
        bytes_read,
        bytes_written,
    } = *from;
    into.batches_read += batches_read;
    into.records_read += records_read;
    into.records_retained += records_retained;
    into.tombstones_removed += tombstones_removed;
    into.markers_removed += markers_removed;
    into.aborted_removed += aborted_removed;
    into.batches_emptied += batches_emptied;
    into.batches_rebuilt += batches_rebuilt;
    into.bytes_read += bytes_read;
    into.bytes_written += bytes_written;
}

/// The dirty bytes a map build may still read (`CleanOptions::max_dirty_bytes`).
pub(super) struct DirtyBudget {
    pub(super) max: Option<u64>,
    pub(super) used: u64,
}

impl DirtyBudget {
    /// Takes a batch of `bytes`; false when the budget is spent (the first batch is always taken).
    pub(super) fn take(&mut self, bytes: u64) -> bool {
        if self
            .max
            .is_some_and(|max| self.used > 0 && self.used + bytes > max)
        {
            return false;
        }
        self.used += bytes;
        true
    }
}
