//! KRaft metadata: the records of a log directory's `__cluster_metadata-0` (its log segments and its
//! `<offset>-<epoch>.checkpoint` snapshots), decoded from Kafka's own schemas, and what they say about
//! topics (names, ids, partitions), configs and features; and snapshots written as Kafka writes them.
//!
//! - `schema.rs` / `schemas.rs`: the record schemas (generated from the pinned Kafka release by
//!   `scripts/kraft-schemas.py`).
//! - `message.rs`: any message decoded from its schema and encoded back, printed as Kafka's JSON
//!   converters print it.
//! - `record.rs`: a metadata record's framing (frame version, type, version) and the KRaft control records.
//! - `image.rs`: `MetadataImage`, the records replayed (topics, partitions, configs, features).
//! - `loader.rs`: a `__cluster_metadata-0` directory read into an image (newest snapshot, then the log).
//! - `topic_config.rs`: a topic's `LogConfig` from the image, with where each value came from.
//! - `writer.rs`: metadata records encoded from their schemas, and KRaft snapshots written as Kafka writes
//!   them (`RecordsSnapshotWriter`).

pub mod image;
pub mod loader;
pub mod message;
pub mod record;
pub mod schema;
pub mod schemas;
pub mod topic_config;
pub mod writer;

pub use image::{ConfigResource, ConfigResourceType, MetadataImage, PartitionImage, TopicImage};
pub use loader::{
    load_metadata_log, MetadataLog, SnapshotId, METADATA_PARTITION_DIR, SNAPSHOT_SUFFIX,
};
pub use message::{uuid_string, Struct, Value};
pub use record::{decode_control_value, MetadataRecord};
pub use topic_config::{ConfigEntry, ConfigSource, TopicConfig};
pub use writer::{encode_record, write_snapshot, KraftWriteError, MetadataRecordOut};
