//! KRaft metadata: the records of a log directory's `__cluster_metadata-0` (its log segments and its
//! `<offset>-<epoch>.checkpoint` snapshots), decoded from Kafka's own schemas, and what they say about
//! topics (names, ids, partitions), configs and features; and snapshots written as Kafka writes them.
//!
//! - `schemas.rs`: the record schemas (generated from the pinned Kafka release by
//!   `scripts/kraft-schemas.py`), in the form of the one schema engine ([`crate::schema`]), which
//!   decodes, encodes and prints them.
//! - `record.rs`: a metadata record's framing (frame version, type, version) and the KRaft control records.
//! - `image.rs`: `MetadataImage`, the records replayed (topics, partitions, configs, features).
//! - `loader.rs`: a `__cluster_metadata-0` directory read into an image (newest snapshot, then the log).
//! - `topic_config.rs`: a topic's `LogConfig` from the image, with where each value came from.
//! - `writer.rs`: metadata records encoded from their schemas, and KRaft snapshots written as Kafka writes
//!   them (`RecordsSnapshotWriter`).

pub mod image;
pub mod loader;
pub mod record;
pub mod schemas;
pub mod topic_config;
pub mod writer;

pub use crate::schema::{kafka_uuid as uuid_string, Struct, Value};
pub use image::{ConfigResource, ConfigResourceType, MetadataImage, PartitionImage, TopicImage};
pub use loader::{
    load_metadata_log, MetadataLog, SnapshotId, METADATA_PARTITION_DIR, SNAPSHOT_SUFFIX,
};
pub use record::{control_schema, decode_control_value, encode_control_value, MetadataRecord};
pub use topic_config::{ConfigEntry, ConfigSource, TopicConfig};
pub use writer::{encode_record, write_snapshot, KraftWriteError, MetadataRecordOut};
