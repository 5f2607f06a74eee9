//! The log directory's `cleaner-offset-checkpoint` (`LogCleanerManager.OFFSET_CHECKPOINT_FILE`): each
//! compacted partition's first dirty offset, in Kafka's `OffsetCheckpointFile` format (version 0, the
//! count, `<topic> <partition> <offset>` lines), written through a temp file, fsync, rename and a
//! directory fsync (the Storage seam's `write_atomic`).

use std::collections::BTreeMap;
use std::path::Path;

use crate::io::Storage;
use crate::Error;

/// The file's name in a log directory.
pub const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";

/// The entries of `<root>/cleaner-offset-checkpoint` (none when it does not exist). A malformed file is
/// refused naming the file and the line.
pub fn read_cleaner_checkpoint(
    storage: &dyn Storage,
    root: &Path,
) -> Result<BTreeMap<(String, i32), i64>, Error> {
    crate::checkpoint::read_offsets(storage, &root.join(CLEANER_OFFSET_CHECKPOINT))
}

/// Rewrites `<root>/cleaner-offset-checkpoint` with exactly `entries` (callers keep the entries of the
/// other partitions: read, update, write).
pub fn write_cleaner_checkpoint(
    storage: &dyn Storage,
    root: &Path,
    entries: &BTreeMap<(String, i32), i64>,
) -> Result<(), Error> {
    crate::checkpoint::write_offsets(storage, &root.join(CLEANER_OFFSET_CHECKPOINT), entries)
}
