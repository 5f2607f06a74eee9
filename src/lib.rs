//! klog: a storage engine for Apache Kafka partition logs, byte for byte in Kafka's own format.
//!
//! This facade re-exports the member crates under their architectural names.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub use klog_log as log;
pub use klog_mirror as mirror;
pub use klog_psm as psm;
pub use klog_recovery as recovery;
