//! Writing KRaft metadata: a metadata record's value encoded from its schema (Kafka's
//! `MetadataRecordSerde`), and a `<end offset>-<epoch>.checkpoint` snapshot of such records laid out as
//! Kafka's `RecordsSnapshotWriter` lays one out, so that a Kafka node started on the directory loads it.
//!
//! Every message is filled from the schema tables ([`super::schemas`]) and written by the one schema
//! engine's encoder ([`crate::schema::encode`]); nothing here knows a byte layout of its own beyond the
//! batches.
//!
//! The snapshot, as Kafka 4.4's `RecordsSnapshotWriter` (kraft.version 0, no voter set, no compression)
//! and its `BatchAccumulator` write it:
//! - offset 0: a control batch holding one `SnapshotHeaderRecord {version 0, lastContainedLogTimestamp}`;
//! - offsets 1..=n: data batches of the records in order, each at most 8 MiB (`MAX_BATCH_SIZE_BYTES`),
//!   key null, no headers, timestamp delta 0;
//! - offset n+1: a control batch holding one `SnapshotFooterRecord {version 0}`.
//!
//! Every batch has partitionLeaderEpoch = the snapshot's epoch, producer id, epoch and sequence -1,
//! CreateTime with the writer's clock as base and max timestamp, attributes 0 (the control bit on the
//! header and footer). The file is written as `<name>.part` (Kafka deletes `.checkpoint.part` files it
//! finds at start), synced, renamed, and its directory synced.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use super::loader::SnapshotId;
use super::record::{encode_control_value, MetadataRecord};
use super::schemas::{CONTROL_RECORDS, METADATA_RECORDS};
use crate::format::{BatchBuilder, Compression, ControlRecordType, RECORD_BATCH_OVERHEAD};
use crate::io::{write_then_rename, StdStorage, Storage};
use crate::schema::{build_struct, EncodeError, MessageSchema, Value};

/// The largest batch Kafka's raft layer writes (`KafkaRaftClient.MAX_BATCH_SIZE_BYTES`, what
/// `KafkaRaftClient.createSnapshot` gives the snapshot writer).
pub const MAX_BATCH_SIZE_BYTES: usize = 8 * 1024 * 1024;

/// The version of `PartitionRecord` written: 2, with `directories` (metadata.version 4.0-IV1 and later).
pub const PARTITION_RECORD_VERSION: i16 = 2;

/// One metadata record an export writes (Kafka's `common/metadata/*.json` records).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataRecordOut {
    /// `FeatureLevelRecord` v0: a feature's finalized level (`metadata.version`, `kraft.version`, ...).
    FeatureLevel {
        /// The feature's name.
        name: String,
        /// Its level.
        feature_level: i16,
    },
    /// `TopicRecord` v0.
    Topic {
        /// The topic's name.
        name: String,
        /// Its id.
        topic_id: [u8; 16],
    },
    /// Written as PartitionRecord version 2 (directories present).
    Partition {
        /// The partition's index.
        partition_id: i32,
        /// Its topic's id.
        topic_id: [u8; 16],
        /// The replicas' broker ids.
        replicas: Vec<i32>,
        /// The in-sync replicas.
        isr: Vec<i32>,
        /// The leader's broker id (-1: none).
        leader: i32,
        /// The leader epoch.
        leader_epoch: i32,
        /// The partition epoch.
        partition_epoch: i32,
        /// Each replica's log directory id, in the order of `replicas`.
        directories: Vec<[u8; 16]>,
    },
    /// `ConfigRecord` v0: one config of one resource; a `None` value deletes it.
    Config {
        /// resource_type as Kafka's ConfigResource.Type id (2 = TOPIC, 4 = BROKER).
        resource_type: i8,
        /// The resource (a topic name, a broker id, "" for the cluster default).
        resource_name: String,
        /// The config's name.
        name: String,
        /// Its value.
        value: Option<String>,
    },
    /// `ProducerIdsRecord` v0: the producer ids handed out so far.
    ProducerIds {
        /// The broker the last block went to.
        broker_id: i32,
        /// That broker's epoch.
        broker_epoch: i64,
        /// The first producer id not handed out.
        next_producer_id: i64,
    },
}

/// Why a snapshot could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KraftWriteError {
    /// The snapshot id is not one Kafka loads.
    #[error("{path}: a KRaft snapshot needs an end offset >= 1 and an epoch >= 0, not {end_offset} and {epoch}")]
    InvalidSnapshotId {
        /// The snapshot's path.
        path: PathBuf,
        /// The end offset given.
        end_offset: i64,
        /// The epoch given.
        epoch: i32,
    },
    /// A record whose values do not fit its schema (a string over Kafka's 32767 bytes).
    #[error("{path}: record {index}: {reason}")]
    Record {
        /// The snapshot's path.
        path: PathBuf,
        /// The record's index in the records given.
        index: usize,
        /// What did not fit.
        reason: EncodeError,
    },
    /// A record larger than one batch may be.
    #[error("{path}: record {index} takes {bytes} bytes, more than a KRaft batch's {MAX_BATCH_SIZE_BYTES}")]
    RecordTooLarge {
        /// The snapshot's path.
        path: PathBuf,
        /// The record's index in the records given.
        index: usize,
        /// Its value's size.
        bytes: usize,
    },
    /// A batch the builder refused (a clock before 1970: a negative timestamp).
    #[error("{path}: {source}")]
    Batch {
        /// The snapshot's path.
        path: PathBuf,
        /// The builder's refusal (boxed: the crate's error is large beside the other variants).
        #[source]
        source: Box<crate::Error>,
    },
    /// An I/O failure writing the snapshot.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

impl MetadataRecordOut {
    /// The record's schema, version and field values (JSON names, as the schema spells them).
    fn message(&self) -> (&'static str, i16, Vec<(&'static str, Value<'_>)>) {
        let str = |s: &str| Value::Str(Cow::Owned(s.to_owned()));
        let ints = |v: &[i32]| Value::Array(v.iter().map(|i| Value::Int(*i as i64)).collect());
        match self {
            MetadataRecordOut::FeatureLevel {
                name,
                feature_level,
            } => (
                "FeatureLevelRecord",
                0,
                vec![
                    ("name", str(name)),
                    ("featureLevel", Value::Int(*feature_level as i64)),
                ],
            ),
            MetadataRecordOut::Topic { name, topic_id } => (
                "TopicRecord",
                0,
                vec![("name", str(name)), ("topicId", Value::Uuid(*topic_id))],
            ),
            MetadataRecordOut::Partition {
                partition_id,
                topic_id,
                replicas,
                isr,
                leader,
                leader_epoch,
                partition_epoch,
                directories,
            } => (
                "PartitionRecord",
                PARTITION_RECORD_VERSION,
                vec![
                    ("partitionId", Value::Int(*partition_id as i64)),
                    ("topicId", Value::Uuid(*topic_id)),
                    ("replicas", ints(replicas)),
                    ("isr", ints(isr)),
                    ("leader", Value::Int(*leader as i64)),
                    ("leaderEpoch", Value::Int(*leader_epoch as i64)),
                    ("partitionEpoch", Value::Int(*partition_epoch as i64)),
                    (
                        "directories",
                        Value::Array(directories.iter().map(|d| Value::Uuid(*d)).collect()),
                    ),
                ],
            ),
            MetadataRecordOut::Config {
                resource_type,
                resource_name,
                name,
                value,
            } => (
                "ConfigRecord",
                0,
                vec![
                    ("resourceType", Value::Int(*resource_type as i64)),
                    ("resourceName", str(resource_name)),
                    ("name", str(name)),
                    ("value", value.as_deref().map_or(Value::Null, str)),
                ],
            ),
            MetadataRecordOut::ProducerIds {
                broker_id,
                broker_epoch,
                next_producer_id,
            } => (
                "ProducerIdsRecord",
                0,
                vec![
                    ("brokerId", Value::Int(*broker_id as i64)),
                    ("brokerEpoch", Value::Int(*broker_epoch)),
                    ("nextProducerId", Value::Int(*next_producer_id)),
                ],
            ),
        }
    }
}

/// The schema named `name`: the names are this file's own, each in the generated tables (tested).
fn schema_named(table: &'static [MessageSchema], name: &str) -> &'static MessageSchema {
    match table.iter().find(|s| s.name == name) {
        Some(schema) => schema,
        None => panic!("no schema {name} in the generated tables"),
    }
}

/// A record's value bytes as Kafka frames them: uvarint frame version 1, uvarint api key, uvarint
/// version, message. `Err` only for a value no Kafka record can hold (a string over 32767 bytes).
pub fn try_encode_record(record: &MetadataRecordOut) -> Result<Vec<u8>, EncodeError> {
    let (name, version, values) = record.message();
    let schema = schema_named(METADATA_RECORDS, name);
    MetadataRecord {
        schema,
        version,
        data: build_struct(schema.name, schema.fields, version, values)?,
    }
    .encode()
}

/// A record's value bytes as Kafka frames them: uvarint frame version 1, uvarint api key, uvarint version,
/// message. A string over Kafka's 32767 bytes cannot be framed: such a record gives an empty vector
/// (never a valid record); [`try_encode_record`] says why, and [`write_snapshot`] refuses it.
pub fn encode_record(record: &MetadataRecordOut) -> Vec<u8> {
    try_encode_record(record).unwrap_or_default()
}

/// A KRaft control record's value (`SnapshotHeaderRecord`, `SnapshotFooterRecord`) at version 0.
fn control_value(name: &str, values: Vec<(&'static str, Value<'static>)>) -> Vec<u8> {
    let schema = schema_named(CONTROL_RECORDS, name);
    let encoded = build_struct(schema.name, schema.fields, 0, values)
        .and_then(|message| encode_control_value(schema, &message));
    // Integers into int16/int64 fields that exist at version 0: nothing here can fail.
    match encoded {
        Ok(bytes) => bytes,
        Err(e) => panic!("{name}: {e}"),
    }
}

/// The bytes of a snapshot of `records`: header batch, data batches, footer batch (see the module
/// comment). `now_ms` stands for the writer's clock (Kafka's `time.milliseconds()`).
pub fn snapshot_bytes(
    path: &Path,
    epoch: i32,
    last_contained_timestamp: i64,
    records: &[MetadataRecordOut],
    now_ms: i64,
) -> Result<Vec<u8>, KraftWriteError> {
    let built = |r: Result<Vec<u8>, crate::Error>| {
        r.map_err(|source| KraftWriteError::Batch {
            path: path.to_owned(),
            source: Box::new(source),
        })
    };
    let mut out = Vec::new();
    let header = control_value(
        "SnapshotHeaderRecord",
        vec![
            ("version", Value::Int(0)),
            (
                "lastContainedLogTimestamp",
                Value::Int(last_contained_timestamp),
            ),
        ],
    );
    let control = |kind, value: &[u8], offset: i64| {
        built(
            BatchBuilder::kraft_control(kind, value, now_ms)
                .and_then(|b| b.base_offset(offset).partition_leader_epoch(epoch).build()),
        )
    };
    out.extend(control(ControlRecordType::SnapshotHeader, &header, 0)?);
    let mut next_offset = 1i64;
    let mut batch: Option<(BatchBuilder, usize)> = None;
    for (index, record) in records.iter().enumerate() {
        let value = try_encode_record(record).map_err(|reason| KraftWriteError::Record {
            path: path.to_owned(),
            index,
            reason,
        })?;
        let size = record_size(batch.as_ref().map_or(0, |(b, _)| b.record_count()), &value);
        if RECORD_BATCH_OVERHEAD + record_size(0, &value) > MAX_BATCH_SIZE_BYTES {
            return Err(KraftWriteError::RecordTooLarge {
                path: path.to_owned(),
                index,
                bytes: value.len(),
            });
        }
        if batch
            .as_ref()
            .is_some_and(|(_, bytes)| bytes + size > MAX_BATCH_SIZE_BYTES)
        {
            if let Some((full, _)) = batch.take() {
                out.extend(built(full.build())?);
            }
        }
        let (b, bytes) = batch.get_or_insert_with(|| {
            (
                BatchBuilder::new(Compression::None)
                    .base_offset(next_offset)
                    .partition_leader_epoch(epoch),
                RECORD_BATCH_OVERHEAD,
            )
        });
        let size = record_size(b.record_count(), &value);
        built(
            b.append(now_ms, None, Some(&value), &[])
                .map(|()| Vec::new()),
        )?;
        *bytes += size;
        next_offset += 1;
    }
    if let Some((full, _)) = batch {
        out.extend(built(full.build())?);
    }
    let footer = control_value("SnapshotFooterRecord", vec![("version", Value::Int(0))]);
    out.extend(control(
        ControlRecordType::SnapshotFooter,
        &footer,
        next_offset,
    )?);
    Ok(out)
}

/// The bytes a record of `value` takes in a batch at offset delta `delta` (timestamp delta 0, key null,
/// no headers), its length varint included: Kafka's `DefaultRecord.sizeInBytes`.
fn record_size(delta: i32, value: &[u8]) -> usize {
    use crate::format::varint::size_of_varint;
    let body =
        1 + 1 + size_of_varint(delta) + 1 + size_of_varint(value.len() as i32) + value.len() + 1;
    size_of_varint(body as i32) + body
}

/// Writes a KRaft snapshot `<end_offset:020>-<epoch:010>.checkpoint` into `dir` (a `__cluster_metadata-0`
/// directory) as Kafka's RecordsSnapshotWriter does (header control batch, data batches, footer), through a
/// temp name, fsync, rename, directory fsync. `end_offset` >= 1.
pub fn write_snapshot(
    dir: &Path,
    end_offset: i64,
    epoch: i32,
    last_contained_timestamp: i64,
    records: &[MetadataRecordOut],
) -> Result<PathBuf, KraftWriteError> {
    let id = SnapshotId { end_offset, epoch };
    let path = dir.join(id.file_name());
    if end_offset < 1 || epoch < 0 {
        return Err(KraftWriteError::InvalidSnapshotId {
            path,
            end_offset,
            epoch,
        });
    }
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let bytes = snapshot_bytes(&path, epoch, last_contained_timestamp, records, now_ms)?;
    let storage = StdStorage;
    let mut tmp = path.clone().into_os_string();
    tmp.push(".part");
    let tmp = PathBuf::from(tmp);
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| KraftWriteError::Io { path, source }
    };
    if let Err(e) = write_then_rename(&storage, &tmp, &path, &bytes) {
        let _ = storage.remove(&tmp);
        return Err(io(&path)(e));
    }
    storage.sync_dir(dir).map_err(io(dir))?;
    Ok(path)
}
