//! klog-mirror: KIP-1279 cluster mirroring on klog's partition log.
//!
//! The modules, each depending only on those above it:
//! - [`error`], [`state`] (the partition state machine and its persisted encoding), [`records`] and
//!   [`store`] (the `__mirror_state` records and the compacted internal log holding them), [`acl`] (ACL
//!   bindings with Kafka's names and `acls.include` rules), [`sync_config`] (a mirror's metadata-sync
//!   filters), [`metadata`]
//!   (a local cluster's controller metadata: topics, mirrors, desired states);
//! - [`source`]: the [`MirrorSource`] seam, with [`kafka_source`] (over
//!   `kafka_wire`, one broker connection) for `kafka://` mirrors;
//! - [`node`]: a local single-node broker's state (metadata, partition logs, `__mirror_state`, lock);
//! - `heal`: finishing on a running node what a crash or a failed write interrupted (DeleteMirror's
//!   tombstones, partition logs reopened with recovery);
//! - [`topics`] and [`admin`]: topic and mirror administration on a node; [`config_sync`]: the
//!   topic configs and ACL bindings a mirror takes from its source (and the local ACL list);
//! - [`groups`]: consumer-group offsets on a node, in Kafka's `__consumer_offsets` records;
//! - [`log_cleaner`]: the node's log cleaner, a step of the manager's tick (the dirtiest compacted log,
//!   one pass bounded by an I/O budget, every `log.cleaner.backoff.ms`);
//! - [`serving`]: a node answering another cluster's mirror fetches ([`LocalSource`]), open in this
//!   process or read from disk through `disk_view` (a refreshed read-only view, no lock);
//! - [`manager`]: the step function that runs PREPARING, MIRRORING (the fetcher), PAUSING, STOPPING
//!   and FAILED retries, knowing sources only through the seam;
//! - [`describe`] and [`cluster`]: the public face, [`Cluster`], putting the rest together;
//! - [`export`]: a cluster written as a Kafka broker's log directory (`klog cluster export --kafka`);
//! - [`import`]: a stopped Kafka broker's log directory taken over as a new cluster.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod acl;
pub mod admin;
pub mod cluster;
pub mod config_sync;
pub mod describe;
mod disk_view;
pub mod error;
pub mod export;
pub mod groups;
mod heal;
pub mod import;
pub mod kafka_source;
mod kafka_wire;
pub mod log_cleaner;
pub mod manager;
pub mod metadata;
pub mod node;
pub mod records;
pub mod serving;
pub mod source;
pub mod state;
pub mod store;
pub mod sync_config;
pub mod topics;

pub use cluster::{
    Cluster, ClusterOptions, MirrorDescription, MirrorSettings, PartitionDescription,
};
pub use error::{Error, MirrorError};
pub use kafka_source::KafkaSource;
pub use log_cleaner::{CleanedSummary, CleanerSettings};
pub use manager::{OffsetClamp, TickReport};
pub use metadata::{DesiredState, StopMode};
pub use serving::LocalSource;
pub use source::MirrorSource;
pub use state::MirrorState;
