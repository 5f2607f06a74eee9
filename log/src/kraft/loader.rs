//! Reading a `__cluster_metadata-0` directory into a [`MetadataImage`], as Kafka's `MetadataLoader` does at
//! startup: the newest snapshot (`<end offset>-<epoch>.checkpoint`, a stream of record batches holding the
//! whole image at its end offset), then the log's records from that offset on.
//!
//! Metadata transactions (`BeginTransactionRecord` .. `EndTransactionRecord`) take effect at their end; an
//! `AbortTransactionRecord`, or a log that ends inside one, discards them. Control batches (leader changes,
//! snapshot header and footer, KRaft voters) change nothing here. A torn batch at the end of the log (a
//! crash) ends the read; anything else that does not decode is an error naming the file and offset.
//!
//! Offline there is no high watermark: records past it (written by a leader, not yet committed) are read
//! as well. On a single-node cluster every record the log holds was committed.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::image::MetadataImage;
use super::record::MetadataRecord;
use crate::error::IoContext;
use crate::format::{AnyBatch, BatchStream, RecordBatch, Tail};
use crate::io::{Storage, StorageFile};
use crate::segment::parse_base_offset;
use crate::Error;

/// The metadata log's partition directory name.
pub const METADATA_PARTITION_DIR: &str = "__cluster_metadata-0";
/// The suffix of a KRaft snapshot (Kafka's `Snapshots.SUFFIX`).
pub const SNAPSHOT_SUFFIX: &str = ".checkpoint";

/// A KRaft snapshot's id, from its file name `<end offset, 20 digits>-<epoch, 10 digits>.checkpoint`: the
/// snapshot holds every record below `end_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SnapshotId {
    /// The offset after the last record the snapshot holds.
    pub end_offset: i64,
    /// The epoch of that record.
    pub epoch: i32,
}

impl SnapshotId {
    /// Parses a snapshot file name (Kafka's `Snapshots.parse`); `None` for anything else, including
    /// `.checkpoint.part` and `.checkpoint.deleted` files.
    pub fn parse_file_name(name: &str) -> Option<Self> {
        let stem = name.strip_suffix(SNAPSHOT_SUFFIX)?;
        let (offset, epoch) = stem.split_once('-')?;
        if offset.len() != 20 || epoch.len() != 10 {
            return None;
        }
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if !all_digits(offset) || !all_digits(epoch) {
            return None;
        }
        Some(SnapshotId {
            end_offset: offset.parse().ok()?,
            epoch: epoch.parse().ok()?,
        })
    }

    /// The snapshot's file name.
    pub fn file_name(&self) -> String {
        format!(
            "{:020}-{:010}{SNAPSHOT_SUFFIX}",
            self.end_offset, self.epoch
        )
    }
}

/// What a metadata log directory says, and what was read to learn it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataLog {
    /// The `__cluster_metadata-0` directory read.
    pub dir: PathBuf,
    /// What its records say.
    pub image: MetadataImage,
    /// The snapshot the image starts from.
    pub snapshot: Option<SnapshotId>,
    /// The offset after the last record applied (the snapshot's end offset when the log adds nothing).
    pub end_offset: i64,
    /// Records applied from the snapshot and from the log.
    pub records: u64,
    /// A metadata transaction the log ends inside (its records were not applied): its first offset.
    pub open_transaction: Option<i64>,
}

/// Applies records in order, holding a metadata transaction's records until it ends.
struct Replay {
    image: MetadataImage,
    /// The image with the open transaction's records applied, and its first offset.
    pending: Option<(MetadataImage, i64)>,
    records: u64,
    next_offset: i64,
}

impl Replay {
    fn apply(&mut self, offset: i64, record: &MetadataRecord<'_>) {
        self.records += 1;
        self.next_offset = offset + 1;
        match record.type_name() {
            "BEGIN_TRANSACTION_RECORD" => self.pending = Some((self.image.clone(), offset)),
            "END_TRANSACTION_RECORD" => {
                if let Some((image, _)) = self.pending.take() {
                    self.image = image;
                }
            }
            "ABORT_TRANSACTION_RECORD" => self.pending = None,
            _ => match &mut self.pending {
                Some((image, _)) => image.replay(record),
                None => self.image.replay(record),
            },
        }
    }
}

/// Reads the metadata log in `dir` (a `__cluster_metadata-0` directory).
pub fn load_metadata_log(storage: &dyn Storage, dir: &Path) -> Result<MetadataLog, Error> {
    let names = storage.list(dir).at(dir)?;
    let snapshot = names
        .iter()
        .filter_map(|n| SnapshotId::parse_file_name(n))
        .max();
    let mut replay = Replay {
        image: MetadataImage::default(),
        pending: None,
        records: 0,
        next_offset: 0,
    };
    if let Some(id) = snapshot {
        let path = dir.join(id.file_name());
        // A snapshot's records have offsets of their own (from 0); the image it holds ends at its id.
        read_batches(storage, &path, &mut |offset, record| {
            replay.apply(offset, record)
        })?;
        replay.pending = None;
        replay.next_offset = id.end_offset;
    }
    let from = replay.next_offset;
    let mut segments: Vec<i64> = names
        .iter()
        .filter(|n| n.ends_with(".log") && n.len() == 24)
        .filter_map(|n| parse_base_offset(n))
        .collect();
    segments.sort_unstable();
    for base in segments {
        let path = dir.join(format!("{base:020}.log"));
        read_batches(storage, &path, &mut |offset, record| {
            if offset >= from {
                replay.apply(offset, record);
            }
        })?;
    }
    Ok(MetadataLog {
        dir: dir.to_owned(),
        open_transaction: replay.pending.as_ref().map(|(_, first)| *first),
        image: replay.image,
        snapshot,
        end_offset: replay.next_offset,
        records: replay.records,
    })
}

/// Hands every metadata record of the file at `path` (log segment or snapshot) to `on_record` in order.
fn read_batches(
    storage: &dyn Storage,
    path: &Path,
    on_record: &mut dyn FnMut(i64, &MetadataRecord<'_>),
) -> Result<(), Error> {
    let file: Arc<dyn StorageFile> = storage.open_read(path).at(path)?;
    let len = file.len().at(path)?;
    let mut read_at = |buf: &mut [u8], position: u64| file.read_at(buf, position).at(path);
    let mut scratch = Vec::new();
    let tail = BatchStream::default().scan::<Error>(&mut read_at, 0, len, &mut |batch| {
        match batch? {
            AnyBatch::V2(b) if !b.is_control() => {
                batch_records(path, &b, &mut scratch, on_record)?;
            }
            AnyBatch::V2(_) => {}
            AnyBatch::Legacy(e) => {
                return Err(Error::CorruptFile {
                    path: path.to_owned(),
                    line: 0,
                    reason: format!(
                        "a message set of magic {} at position {}: the metadata log holds only record batches (magic 2)",
                        e.magic,
                        e.position()
                    ),
                })
            }
        }
        Ok(ControlFlow::Continue(()))
    })?;
    match tail {
        Some(Tail::Corrupt { position, bytes }) => Err(Error::CorruptFile {
            path: path.to_owned(),
            line: 0,
            reason: format!("{bytes} bytes at position {position} are not a record batch"),
        }),
        // A torn or zero-filled tail: what a crash leaves; Kafka's recovery cuts it.
        _ => Ok(()),
    }
}

fn batch_records(
    path: &Path,
    b: &RecordBatch<'_>,
    scratch: &mut Vec<u8>,
    on_record: &mut dyn FnMut(i64, &MetadataRecord<'_>),
) -> Result<(), Error> {
    for record in b.records(scratch)? {
        let record = record?;
        let decoded = MetadataRecord::decode(record.value).map_err(|reason| {
            Error::CorruptMetadataRecord {
                path: path.to_owned(),
                offset: record.offset,
                reason,
            }
        })?;
        on_record(record.offset, &decoded);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_names_parse_as_kafka_parses_them() {
        assert_eq!(
            SnapshotId::parse_file_name("00000000000000000099-0000000001.checkpoint"),
            Some(SnapshotId {
                end_offset: 99,
                epoch: 1
            })
        );
        for bad in [
            "00000000000000000099-0000000001.checkpoint.part",
            "00000000000000000099-0000000001.checkpoint.deleted",
            "0099-0000000001.checkpoint",
            "00000000000000000099-000000000x.checkpoint",
            "recovery-point-offset-checkpoint",
        ] {
            assert_eq!(SnapshotId::parse_file_name(bad), None, "{bad}");
        }
        let id = SnapshotId {
            end_offset: 7,
            epoch: 3,
        };
        assert_eq!(SnapshotId::parse_file_name(&id.file_name()), Some(id));
    }
}
