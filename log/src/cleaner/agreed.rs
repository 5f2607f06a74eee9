//! Until the per-batch filter (`filter.rs`) lands: the one of its agreed items this module's own types name
//! (`filter::FilterStats`), with the agreed shape.

/// What the filter read and kept (`filter::FilterStats` once merged).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[allow(missing_docs)]
pub struct FilterStats {
    pub batches_read: u64,
    pub records_read: u64,
    pub records_retained: u64,
    pub tombstones_removed: u64,
    pub markers_removed: u64,
    pub aborted_removed: u64,
    pub batches_emptied: u64,
    pub batches_rebuilt: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}
