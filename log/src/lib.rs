//! klog-log: Kafka's log layer, byte for byte.
//!
//! `format` owns the record batch formats (v2 zero-copy views and builders, control records, codecs,
//! read-only legacy v0/v1 message sets). Segments, indexes, checkpoints, the leader-epoch cache, the
//! partition log and the I/O seam join it in later issues.
#![deny(unsafe_code)]

pub mod error;
pub mod format;
pub mod io;

pub use error::{Corruption, Error, RecordCorruption};
