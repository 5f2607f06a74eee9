//! klog-mirror: KIP-1279 cluster mirroring on klog's partition log.
//!
//! - [`state`]: the partition state machine and its persisted encoding;
//! - [`records`] and [`store`]: the `__mirror_state` records and the compacted internal log holding them;
//! - [`metadata`]: a local cluster's controller metadata (topics, mirrors, desired states);
//! - [`cluster`]: a local single-node cluster (one root directory) with the mirror administration and
//!   the source-side serving of fetches and LME lookups;
//! - [`source`]: the [`MirrorSource`] seam and the in-process source;
//! - [`kafka_source`] (over `kafka_wire`, one broker connection): the source over the Kafka protocol, for `kafka://` mirrors;
//! - [`manager`]: the step function that runs PREPARING, MIRRORING (the fetcher), PAUSING, STOPPING
//!   and FAILED retries.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod cluster;
pub mod error;
pub mod kafka_source;
mod kafka_wire;
pub mod manager;
pub mod metadata;
pub mod records;
pub mod source;
pub mod state;
pub mod store;

pub use cluster::{Cluster, ClusterOptions, MirrorSettings, PartitionDescription};
pub use error::{Error, MirrorError};
pub use kafka_source::KafkaSource;
pub use manager::TickReport;
pub use metadata::DesiredState;
pub use source::{LocalSource, MirrorSource};
pub use state::MirrorState;
