//! The log cleaner (Kafka's `LogCleaner`, `Cleaner`, `LogCleanerManager`, `LogToClean`): compaction of
//! `cleanup.policy=compact` logs, byte for byte as Kafka 4.4.0 writes them.
//!
//! This module owns the broker-level cleaner settings ([`CleanerConfig`]), the options of one pass
//! ([`CleanOptions`]), what a pass would clean ([`LogToClean`], computed by `range.rs` as
//! `LogCleanerManager.cleanableOffsets` does), what a pass did ([`CleanReport`]), the pass itself
//! (`pass.rs`, `Cleaner.doClean`: the map build, then each group of `group.rs` written into one `.cleaned`
//! segment, on one thread or several (`rewrite.rs`), and swapped in by `swap.rs` in log order) and the
//! log directory's `cleaner-offset-checkpoint` (`checkpoint.rs`).
//! The per-batch rules (the offset map, transaction metadata, `filterTo`) are `offset_map.rs`,
//! `txn_metadata.rs` and `filter.rs`.

mod built;
pub mod checkpoint;
mod filter;
mod group;
mod map_build;
mod offset_map;
mod pass;
mod range;
mod rewrite;
pub mod swap;
mod txn_metadata;

use std::num::NonZeroUsize;

pub use checkpoint::{
    read_cleaner_checkpoint, write_cleaner_checkpoint, CLEANER_OFFSET_CHECKPOINT,
};
pub use filter::{
    filter_batch, filter_legacy_entry, for_each_key, for_each_key_any, key_digests, BatchOutcome,
    FilterContext, FilterStats, LastRecord, OnKey,
};
pub use offset_map::{DigestKind, KeyDigest, OffsetMap};
pub use txn_metadata::CleanedTransactionMetadata;

/// Broker-level cleaner settings, with Kafka's names and defaults (`CleanerConfig.java`, one thread).
#[derive(Debug, Clone, PartialEq)]
pub struct CleanerConfig {
    /// `log.cleaner.dedupe.buffer.size` (134217728): the offset map's memory.
    pub dedupe_buffer_size: usize,
    /// `log.cleaner.io.buffer.load.factor` (0.9): the map is full at `slots * load_factor` entries.
    pub load_factor: f64,
    /// Each of the read and write buffers: `log.cleaner.io.buffer.size / 2` = 262144.
    pub io_buffer_size: usize,
    /// `message.max.bytes` (1048588): the cap the buffers grow to for one batch.
    pub max_message_bytes: u32,
    /// The offset map's digest.
    pub digest: DigestKind,
    /// `log.cleaner.io.max.bytes.per.second`: the throttle (`None`: unthrottled, Kafka's `Double.MAX_VALUE`).
    pub io_max_bytes_per_second: Option<f64>,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            dedupe_buffer_size: 134_217_728,
            load_factor: 0.9,
            io_buffer_size: 262_144,
            max_message_bytes: 1_048_588,
            digest: DigestKind::default(),
            io_max_bytes_per_second: None,
        }
    }
}

/// The options of one pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CleanOptions {
    /// The pass's clock reading (`Cleaner.clean`'s `currentTime`): delete horizons and lags use it.
    pub now_ms: i64,
    /// Compute the report, write nothing.
    pub dry_run: bool,
    /// Clean even when the dirty ratio is not above `min.cleanable.dirty.ratio`.
    pub force: bool,
    /// A pass cleans at most this many dirty bytes (whole batches, at least one): the map build stops
    /// there as when the map fills, and the pass cleans the prefix up to it (`None`: no bound).
    pub max_dirty_bytes: Option<u64>,
    /// Threads rewriting the pass's groups (`None`: the available parallelism, at most 2). With 1 the
    /// pass is Kafka's one cleaner thread; with more, each group is written by one worker and the
    /// groups are still swapped in one at a time in log order (`rewrite.rs`): the files are the same
    /// byte for byte.
    pub threads: Option<NonZeroUsize>,
}

impl CleanOptions {
    /// The threads of the pass: [`CleanOptions::threads`], or the available parallelism capped at 2.
    pub fn rewrite_threads(&self) -> usize {
        self.threads.map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get().min(2)),
            NonZeroUsize::get,
        )
    }
}

/// What a pass would clean (`LogToClean` over `LogCleanerManager.cleanableOffsets`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LogToClean {
    /// The first offset not yet cleaned (from the checkpoint, clamped to the log).
    pub first_dirty_offset: i64,
    /// The first offset the pass may not clean, rounded down to a segment's base offset.
    pub first_uncleanable_offset: i64,
    /// Bytes of the segments below the first dirty offset.
    pub clean_bytes: u64,
    /// Bytes of the segments in `[first dirty, first uncleanable)`.
    pub cleanable_bytes: u64,
    /// `cleanable_bytes / (clean_bytes + cleanable_bytes)` (0 for an empty log).
    pub cleanable_ratio: f64,
    /// `max.compaction.lag.ms` has passed for a dirty segment's first batch (KIP-354).
    pub needs_compaction_now: bool,
    /// The checkpoint was out of the log's range: it must be rewritten even if nothing is cleaned.
    pub force_checkpoint: bool,
}

impl LogToClean {
    /// `clean_bytes + cleanable_bytes`.
    pub fn total_bytes(&self) -> u64 {
        self.clean_bytes + self.cleanable_bytes
    }

    /// Whether `grabFilthiestCompactedLog` would pick this log: `(needCompactionNow && cleanableBytes > 0)
    /// || cleanableRatio > min.cleanable.dirty.ratio` (strictly greater), and never an empty log.
    pub fn is_cleanable(&self, min_cleanable_dirty_ratio: f64) -> bool {
        self.total_bytes() > 0
            && ((self.needs_compaction_now && self.cleanable_bytes > 0)
                || self.cleanable_ratio > min_cleanable_dirty_ratio)
    }
}

/// What one pass did (or, for a dry run, would do).
#[derive(Debug, Clone, Default)]
pub struct CleanReport {
    /// The range the pass was given.
    pub range: LogToClean,
    /// Whether segments were rewritten.
    pub cleaned: bool,
    /// Why nothing was cleaned, if so.
    pub skipped: Option<String>,
    /// The new cleaner checkpoint (`offsetMap.latestOffset + 1`).
    pub end_offset: i64,
    /// Distinct keys in the offset map.
    pub map_entries: usize,
    /// The map filled before the first uncleanable offset: the pass ended early.
    pub map_full: bool,
    /// The base offsets of the segments of each group, in log order.
    pub groups: Vec<Vec<i64>>,
    /// What the filter read and kept.
    pub stats: FilterStats,
    /// Segments before the pass.
    pub segments_before: usize,
    /// Segments after the pass.
    pub segments_after: usize,
    /// Bytes of the log before the pass.
    pub bytes_before: u64,
    /// Bytes of the log after the pass.
    pub bytes_after: u64,
}
