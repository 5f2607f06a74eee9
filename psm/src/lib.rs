//! klog-psm: Kafka's ProducerStateManager — idempotence and transaction rules, `.snapshot` files and the
//! MIRROR_PID_RESET barrier. Pure: no I/O and no dependency on the other klog crates.
//!
//! The rules are Kafka's (`storage/.../log/ProducerStateManager.java`, `ProducerAppendInfo.java`,
//! `ProducerStateEntry.java`, and `UnifiedLog.analyzeAndValidateProducerState`), with both marker rules:
//! transaction versions 0/1 (a marker's epoch may equal the producer's) and 2 (a coordinator's marker
//! must carry a bumped epoch, [`TransactionVersion`]), and without KIP-890 verification state, which
//! lives above the storage layer.
//!
//! How the partition log drives it, per append:
//! 1. [`ProducerStateManager::plan_append`] with a [`BatchSummary`] per batch, in log order: a refusal
//!    or a duplicate comes back before anything is written;
//! 2. write the batches;
//! 3. [`ProducerStateManager::apply`]: append a `.txnindex` entry for each aborted [`CompletedTxn`] to
//!    the segment holding its marker ([`CompletedTxn::aborted_txn_entry`]);
//! 4. [`ProducerStateManager::update_map_end_offset`] with the append's last offset + 1, also for
//!    appends without producer ids.
//!
//! Rebuilding from the log (recovery) replays batches with [`AppendOrigin::Replication`]; one batch per
//! plan reproduces `LogSegment.recover`, a whole fetched chunk per plan reproduces a follower append (the
//! last stable offsets of ended transactions can differ between the two, exactly as in Kafka).
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod append_plan;
mod batch;
mod batch_metadata;
mod batch_metadata_queue;
mod completed_txn;
mod error;
mod expiration;
mod expiration_index;
mod manager;
mod one_or_many;
mod producer_append_info;
mod producer_state_entry;
mod producer_table;
mod sequence;
mod snapshot;
mod transactions;

pub use append_plan::{AppendPlan, DuplicateBatch};
pub use batch::{
    AppendOrigin, BatchSummary, ControlKind, TransactionVersion, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
};
pub use batch_metadata::BatchMetadata;
pub use batch_metadata_queue::NUM_BATCHES_TO_RETAIN;
pub use completed_txn::CompletedTxn;
pub use error::{Error, SnapshotCorruption};
pub use manager::{ProducerStateManager, PsmConfig};
pub use producer_state_entry::ProducerStateEntry;
pub use sequence::{decrement_sequence, increment_sequence, NO_SEQUENCE};
pub use snapshot::{
    decode_snapshot, encode_snapshot, SnapshotEntry, PRODUCER_SNAPSHOT_VERSION, SNAPSHOT_ENTRY_SIZE,
};
