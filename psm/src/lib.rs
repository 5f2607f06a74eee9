//! klog-psm: Kafka's ProducerStateManager — idempotence and transaction rules, `.snapshot` files and the
//! MIRROR_PID_RESET barrier. Pure: no I/O and no dependency on the other klog crates.
//!
//! Empty until the producer-state work lands; the crate exists now so the dependency direction
//! (psm <- log <- recovery <- mirror <- klog) is fixed and tested from the start.
#![deny(unsafe_code)]
