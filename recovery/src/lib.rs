//! klog-recovery: opening log directories after a clean or an unclean shutdown (`LogLoader`), and checking
//! them without changing anything (`verify`).
//!
//! The partition log itself cuts torn tails, rebuilds indexes and replays producer state when it opens
//! (`klog_log::partition_log`); the loader adds what happens around it, as Kafka's `LogLoader` and
//! `LogManager` do: swap-file completion, one partition's failure never stopping the others, and a report
//! of what recovery found and did.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod loader;
pub mod swap;
pub mod verify;

pub use loader::{LogLoader, RecoveryReport, Truncation};
pub use verify::{verify_partition, Problem};
