//! Completing interrupted segment replacements (`LogLoader.java`, spec §2.7): `.swap` files are the new
//! segments of a replacement that may not have finished. The rule lives with the cleaner that writes
//! them (`klog_log::cleaner::swap`), and every open of a partition runs it; it is re-exported here for
//! the recovery report and the mirror's healing, which name it.

pub use klog_log::cleaner::swap::{complete_swaps, SwapReport};
