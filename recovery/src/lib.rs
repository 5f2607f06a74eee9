//! klog-recovery: crash recovery of partition directories (LogLoader) and the replay/verify tooling.
//!
//! Empty until the recovery work lands; it sits above `klog-log` in the dependency order.
#![deny(unsafe_code)]
