//! The log cleaner (Kafka's `Cleaner`, issue #27): compaction of `cleanup.policy=compact` logs.
//!
//! This module owns the per-batch core: the offset map of latest offsets per key ([`OffsetMap`]).

mod offset_map;

pub use offset_map::{DigestKind, OffsetMap};
