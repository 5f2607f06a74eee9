//! The partition log's side of producer state: a `BatchSummary` from a checked batch view, and the
//! `.snapshot` files (Kafka's format, written through the I/O seam).
//!
//! Snapshot files are written off the append path: a roll only encodes the state in memory; the bytes
//! reach the disk (temp file, fsync, rename) in the next `flush`, before the recovery point moves past
//! them. So a roll never waits for an fsync (Kafka's KAFKA-15046 latency spike).

use std::path::{Path, PathBuf};

use klog_psm::{BatchSummary, ControlKind, SnapshotEntry};

use crate::error::IoContext;
use crate::format::{ControlRecordType, EndTxnMarker, RecordBatch};
use crate::io::{read_file, Storage};
use crate::segment::parse_base_offset;
use crate::Error;

/// The suffix of producer snapshot files (`<offset>.snapshot`).
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";

/// What the producer-state rules need from a v2 batch.
pub fn summarize(batch: &RecordBatch<'_>) -> BatchSummary {
    BatchSummary {
        producer_id: batch.producer_id(),
        producer_epoch: batch.producer_epoch(),
        first_sequence: batch.base_sequence(),
        last_sequence: batch.last_sequence(),
        first_offset: batch.base_offset(),
        last_offset: batch.last_offset(),
        max_timestamp: batch.max_timestamp(),
        is_transactional: batch.is_transactional(),
        control: batch.is_control().then(|| control_kind(batch)),
    }
}

/// Kafka decides a control batch by its first record's type (`ControlRecordType.parse` of the key); only
/// a marker's value is read, for its coordinator epoch. A MIRROR_PID_RESET is a barrier by its type
/// alone: whether its value parses is for `dump` and `verify` to report ([`control_record_problem`]),
/// never a reason to keep producer state a barrier forgets.
fn control_kind(batch: &RecordBatch<'_>) -> ControlKind {
    if batch.records_count() == 0 {
        return ControlKind::Empty;
    }
    let kind = with_first_control_record(batch, |record_type, value| {
        let end_txn = || value.and_then(|v| EndTxnMarker::parse(v).ok());
        match record_type {
            ControlRecordType::MirrorPidReset => Some(ControlKind::MirrorPidReset),
            ControlRecordType::Commit => end_txn().map(|m| ControlKind::Commit {
                coordinator_epoch: m.coordinator_epoch,
            }),
            ControlRecordType::Abort => end_txn().map(|m| ControlKind::Abort {
                coordinator_epoch: m.coordinator_epoch,
            }),
            _ => None,
        }
    });
    kind.flatten().unwrap_or(ControlKind::Other)
}

/// The control type of a control batch, read from its first record's key alone; `None` for a data
/// batch, an empty control batch, or a first record or key that does not parse.
pub fn control_record_type(batch: &RecordBatch<'_>) -> Option<ControlRecordType> {
    with_first_control_record(batch, |record_type, _| record_type)
}

/// Why a control batch's first record does not decode, naming the batch by its offset and, when the key
/// parses, its control type (for `klog dump` and `klog verify`). `None` for data batches, empty control
/// batches (the cleaner's) and control records that decode.
pub fn control_record_problem(batch: &RecordBatch<'_>) -> Option<String> {
    if batch.records_count() == 0 {
        return None;
    }
    let e = batch.control_record().err()?;
    let offset = batch.base_offset();
    Some(match control_record_type(batch) {
        Some(ControlRecordType::MirrorPidReset) => format!(
            "the MIRROR_PID_RESET control batch at offset {offset} has a value that does not \
             parse ({e}); it still resets producer state, as its control type decides"
        ),
        Some(t) => format!(
            "the {t} control batch at offset {offset} has a value that does not parse ({e})"
        ),
        None => format!("the control batch at offset {offset} does not parse ({e})"),
    })
}

/// Calls `f` with the type (from the key) and the value of a control batch's first record.
fn with_first_control_record<T>(
    batch: &RecordBatch<'_>,
    f: impl FnOnce(ControlRecordType, Option<&[u8]>) -> T,
) -> Option<T> {
    if !batch.is_control() {
        return None;
    }
    let mut scratch = Vec::new();
    let first = batch.records(&mut scratch).ok()?.next()?.ok()?;
    let (_, record_type) = ControlRecordType::parse_key(first.key).ok()?;
    Some(f(record_type, first.value))
}

/// The path of the snapshot at `offset` in `dir`.
pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}{SNAPSHOT_SUFFIX}"))
}

/// The offsets of the `.snapshot` files in `dir`, ascending.
pub fn list_snapshots(storage: &dyn Storage, dir: &Path) -> Result<Vec<i64>, Error> {
    let mut offsets: Vec<i64> = storage
        .list(dir)
        .at(dir)?
        .iter()
        .filter(|n| n.ends_with(SNAPSHOT_SUFFIX) && n.len() == 20 + SNAPSHOT_SUFFIX.len())
        .filter_map(|n| parse_base_offset(n))
        .collect();
    offsets.sort_unstable();
    Ok(offsets)
}

/// Reads and decodes a snapshot file.
pub fn read_snapshot(
    storage: &dyn Storage,
    dir: &Path,
    offset: i64,
) -> Result<Vec<SnapshotEntry>, Error> {
    let path = snapshot_path(dir, offset);
    let bytes = read_file(storage, &path).at(&path)?.unwrap_or_default();
    klog_psm::decode_snapshot(&bytes).map_err(|e| Error::CorruptFile {
        path,
        line: 0,
        reason: e.to_string(),
    })
}

/// Writes a snapshot file durably (temp, fsync, rename; the caller syncs the directory).
pub fn write_snapshot(
    storage: &dyn Storage,
    dir: &Path,
    offset: i64,
    bytes: &[u8],
) -> Result<(), Error> {
    let path = snapshot_path(dir, offset);
    // Its own temp name: two writes of one snapshot never share (and remove) one temp file.
    let tmp = crate::io::unique_tmp_path(&path);
    let written = crate::io::write_then_rename(storage, &tmp, &path, bytes);
    if written.is_err() {
        // Best effort: a temp file a failure left behind is removed by the partition's next open.
        let _ = storage.remove(&tmp);
    }
    written.at(&path)
}

/// Deletes the snapshot at `offset` (no error when it is absent).
pub fn delete_snapshot(storage: &dyn Storage, dir: &Path, offset: i64) -> Result<(), Error> {
    let path = snapshot_path(dir, offset);
    match storage.remove(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(&path, e)),
    }
}
