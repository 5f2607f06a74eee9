//! klog-log: Kafka's log layer, byte for byte.
//!
//! `format` owns the record batch formats (v2 zero-copy views and builders, control records, codecs,
//! read-only legacy v0/v1 message sets). Segments, indexes, checkpoints, the leader-epoch cache, the
//! partition log and the I/O seam join it in later issues.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod checkpoint;
pub mod cleaner;
pub mod clock;
pub mod config;
pub mod coordinator;
pub mod dir_lock;
pub mod error;
pub mod format;
pub mod index;
pub mod io;
pub mod kraft;
pub mod leader_epoch;
pub mod log_dir;
pub mod offset_index;
pub mod partition_log;
pub mod producer_state;
pub mod schema;
pub mod segment;
pub mod time_index;
pub mod topic_partition;
pub mod txn_index;
pub mod validator;

pub use error::{Corruption, Error, KafkaError, MetadataCorruption, RecordCorruption};
