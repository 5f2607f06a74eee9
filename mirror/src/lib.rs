//! klog-mirror: KIP-1279 cluster mirroring — partition state machine, `__mirror_state`, fetcher, failover.
//!
//! Empty until the mirroring work lands; it sits above `klog-recovery` in the dependency order.
#![deny(unsafe_code)]
