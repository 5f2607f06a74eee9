//! The node's log cleaner (Kafka's `LogCleaner` with one `CleanerThread`, and the choice of
//! `LogCleanerManager.grabFilthiestCompactedLog`), run as a step of the mirror manager's tick instead of
//! a thread: every `log.cleaner.backoff.ms` on the node's clock it picks the dirtiest cleanable
//! compacted log and runs one pass of the library's cleaner (`LogDir::clean`) on it, bounded by an I/O
//! budget, so a node that mirrors for months keeps `__mirror_state` and `__consumer_offsets` (and its
//! own compacted topics) bounded, and a tick never waits for more than one bounded pass.
//!
//! Which logs: every `__mirror_state` and `__consumer_offsets` partition (compacted, as Kafka creates
//! its coordinators' topics), and each partition of a topic whose `cleanup.policy` has `compact` that is
//! the node's own: a topic that is not mirrored, or a mirror topic's partition once it is STOPPED. A
//! partition still mirrored keeps the source's batches byte for byte (the source's cleaner compacts
//! them; a failback compares the two logs), so it is not cleaned here.

use std::num::NonZeroUsize;
use std::sync::Arc;

use klog_log::cleaner::{read_cleaner_checkpoint, CleanOptions, CleanReport, CleanerConfig};
use klog_log::coordinator::CONSUMER_OFFSETS_TOPIC;
use klog_log::partition_log::PartitionLog;

use crate::error::Error;
use crate::metadata::ClusterMeta;
use crate::node::{lock, Node};
use crate::records::MirrorKey;
use crate::state::MirrorState;
use crate::store::{MirrorStateStore, MIRROR_STATE_TOPIC};

/// The cleaner's broker-level settings, with Kafka's names.
#[derive(Debug, Clone, PartialEq)]
pub struct CleanerSettings {
    /// `log.cleaner.enable` (true).
    pub enable: bool,
    /// `log.cleaner.backoff.ms` (15000): how often, on the node's clock, a pass may run.
    pub backoff_ms: i64,
    /// The pass's settings: `log.cleaner.dedupe.buffer.size` and the rest. Its
    /// `io_max_bytes_per_second` (`log.cleaner.io.max.bytes.per.second`) sets the budget of a pass:
    /// at most that rate times `backoff_ms` dirty bytes (`CleanOptions::max_dirty_bytes`); `None` leaves
    /// a pass bounded by the dedupe buffer only, as Kafka's unthrottled default.
    pub config: CleanerConfig,
}

/// The mirror node's default cleaner rate: 10 MiB/s, so one pass every 15 s cleans at most 150 MiB of
/// dirty bytes (Kafka's own default is unthrottled; a mirror's fetches share the disk).
pub const DEFAULT_IO_MAX_BYTES_PER_SECOND: f64 = 10.0 * 1024.0 * 1024.0;

impl Default for CleanerSettings {
    fn default() -> Self {
        CleanerSettings {
            enable: true,
            backoff_ms: 15_000,
            config: CleanerConfig {
                io_max_bytes_per_second: Some(DEFAULT_IO_MAX_BYTES_PER_SECOND),
                ..CleanerConfig::default()
            },
        }
    }
}

impl CleanerSettings {
    /// The dirty bytes one pass may clean: the rate times the interval between passes.
    pub fn max_dirty_bytes(&self) -> Option<u64> {
        let rate = self.config.io_max_bytes_per_second?;
        let bytes = rate * (self.backoff_ms.max(1) as f64) / 1000.0;
        // At least one byte: a pass always makes progress (the pass rounds up to whole batches).
        Some(bytes.clamp(1.0, u64::MAX as f64) as u64)
    }
}

/// One pass the cleaner step ran: the partition and what the pass did (or why it failed).
#[derive(Debug)]
pub struct CleanedLog {
    /// The partition's topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The pass's report, or the error that stopped it (nothing was swapped in then).
    pub result: Result<CleanReport, Error>,
}

/// What the tick's cleaner pass did to one log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanedSummary {
    /// The partition's topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Whether segments were replaced.
    pub cleaned: bool,
    /// The log's bytes before and after the pass.
    pub bytes_before: u64,
    /// After.
    pub bytes_after: u64,
    /// The partition's new `cleaner-offset-checkpoint` entry.
    pub end_offset: i64,
    /// Why the pass failed, if it did.
    pub error: Option<String>,
}

impl CleanedSummary {
    /// The summary of one pass of the cleaner step.
    pub(crate) fn of(done: CleanedLog) -> Self {
        let mut summary = CleanedSummary {
            topic: done.topic,
            partition: done.partition,
            ..CleanedSummary::default()
        };
        match done.result {
            Ok(r) => {
                summary.cleaned = r.cleaned;
                summary.bytes_before = r.bytes_before;
                summary.bytes_after = r.bytes_after;
                summary.end_offset = r.end_offset;
            }
            Err(e) => summary.error = Some(e.to_string()),
        }
        summary
    }
}

/// The cleaner step's schedule between ticks.
#[derive(Debug, Default)]
pub(crate) struct CleanerSchedule {
    /// Not before this time (the node's clock): the next check for a log to clean.
    next_check_ms: i64,
}

/// Whether `topic` is one of klog's compacted internal topics.
fn is_internal(topic: &str) -> bool {
    topic == MIRROR_STATE_TOPIC || topic == CONSUMER_OFFSETS_TOPIC
}

/// Whether partition `partition` of `topic` is still the source's (a mirror topic not STOPPED).
fn still_mirrored(
    meta: &ClusterMeta,
    store: &MirrorStateStore,
    topic: &str,
    partition: i32,
) -> bool {
    let Some(t) = meta.topics.get(topic) else {
        return false;
    };
    let Some(m) = &t.mirror else {
        return false;
    };
    let Some(topic_id) = klog_log::checkpoint::TopicId::parse(&t.id) else {
        return true;
    };
    let key = MirrorKey {
        mirror: m.name.clone(),
        topic_id,
        partition,
    };
    store
        .state(&key)
        .is_none_or(|s| s.value.state != MirrorState::Stopped)
}

/// The compacted logs the node's cleaner may clean, in (topic, partition) order (see the module docs).
pub(crate) fn compacted_logs(node: &Node) -> Vec<Arc<PartitionLog>> {
    let meta = node.metadata();
    let logs: Vec<((String, i32), Arc<PartitionLog>)> = lock(&node.logs)
        .iter()
        .map(|(k, l)| (k.clone(), Arc::clone(l)))
        .collect();
    let store = lock(&node.store);
    logs.into_iter()
        .filter(|((topic, partition), log)| {
            skip_reason(&meta, &store, topic, *partition, log).is_none()
        })
        .map(|(_, log)| log)
        .collect()
}

/// `grabFilthiestCompactedLog`: among `logs`, the cleanable one with the highest dirty ratio (the first
/// on a tie). A log whose range cannot be computed is skipped (its own pass would report why).
fn filthiest(
    node: &Node,
    logs: &[Arc<PartitionLog>],
    now_ms: i64,
) -> Result<Option<Arc<PartitionLog>>, Error> {
    let checkpoint = read_cleaner_checkpoint(node.storage().as_ref(), node.root())?;
    let mut best: Option<(f64, &Arc<PartitionLog>)> = None;
    for log in logs {
        let at = checkpoint
            .get(&(log.topic().to_owned(), log.partition()))
            .copied();
        let Ok(range) = log.cleanable(at, now_ms) else {
            continue;
        };
        if !range.is_cleanable(log.config().min_cleanable_dirty_ratio) {
            continue;
        }
        if best.is_none_or(|(ratio, _)| range.cleanable_ratio > ratio) {
            best = Some((range.cleanable_ratio, log));
        }
    }
    Ok(best.map(|(_, log)| Arc::clone(log)))
}

/// One pass of the library's cleaner on `log`, through the node's log directory (which reads and
/// writes its `cleaner-offset-checkpoint`).
fn clean_one(
    node: &Node,
    log: &PartitionLog,
    config: &CleanerConfig,
    opts: &CleanOptions,
) -> Result<CleanReport, Error> {
    let mut reports = lock(&node.log_dir).clean(&[log], config, opts)?;
    reports.pop().ok_or_else(|| {
        Error::Refused(format!(
            "{}: the cleaner returned no report",
            log.dir().display()
        ))
    })
}

impl CleanerSchedule {
    /// The cleaner step of a tick: at most one bounded pass, when `backoff_ms` has passed since the last
    /// check and some compacted log is cleanable.
    pub(crate) fn maybe_clean(
        &mut self,
        node: &Node,
        settings: &CleanerSettings,
        now_ms: i64,
    ) -> Option<CleanedLog> {
        if !settings.enable || node.storage().is_read_only() || now_ms < self.next_check_ms {
            return None;
        }
        self.next_check_ms = now_ms.saturating_add(settings.backoff_ms.max(0));
        let logs = compacted_logs(node);
        let log = match filthiest(node, &logs, now_ms) {
            Ok(Some(log)) => log,
            Ok(None) => return None,
            Err(e) => {
                return Some(CleanedLog {
                    topic: klog_log::cleaner::CLEANER_OFFSET_CHECKPOINT.to_owned(),
                    partition: -1,
                    result: Err(e),
                })
            }
        };
        let opts = CleanOptions {
            now_ms,
            max_dirty_bytes: settings.max_dirty_bytes(),
            // One thread, as Kafka's `log.cleaner.threads` default: a background pass bounded by an I/O
            // rate must not take the core the mirror's fetches and appends run on.
            threads: NonZeroUsize::new(1),
            ..CleanOptions::default()
        };
        let result = clean_one(node, &log, &settings.config, &opts);
        if let Err(e) = &result {
            tracing::warn!(partition = %log.dir().display(), error = %e, "a cleaner pass failed; the log is tried again at the next check");
        }
        Some(CleanedLog {
            topic: log.topic().to_owned(),
            partition: log.partition(),
            result,
        })
    }
}

/// Why the node's cleaner leaves `topic`-`partition` alone, if it does.
fn skip_reason(
    meta: &ClusterMeta,
    store: &MirrorStateStore,
    topic: &str,
    partition: i32,
    log: &PartitionLog,
) -> Option<String> {
    if !log.config().cleanup_policy.compact {
        return Some("not compacted (cleanup.policy has no compact)".to_owned());
    }
    (!is_internal(topic) && still_mirrored(meta, store, topic, partition)).then(|| {
        "mirrored: the source's batches are kept as they are until the topic is stopped".to_owned()
    })
}

/// `klog clean` on a cluster root: every partition in (topic, partition) order, each on its own (one
/// log's failure is its report and the others go on): one pass on each compacted log the node's cleaner
/// may clean that is cleanable (every one with `opts.force`), a skipped report for the others.
pub(crate) fn clean_all(
    node: &Node,
    config: &CleanerConfig,
    opts: &CleanOptions,
) -> Vec<CleanedLog> {
    let meta = node.metadata();
    let logs: Vec<((String, i32), Arc<PartitionLog>)> = lock(&node.logs)
        .iter()
        .map(|(k, l)| (k.clone(), Arc::clone(l)))
        .collect();
    logs.into_iter()
        .map(|((topic, partition), log)| {
            let skipped = skip_reason(&meta, &lock(&node.store), &topic, partition, &log);
            let result = match skipped {
                Some(why) => Ok(CleanReport {
                    skipped: Some(why),
                    segments_before: log.segment_base_offsets().len(),
                    segments_after: log.segment_base_offsets().len(),
                    bytes_before: log.size_in_bytes(),
                    bytes_after: log.size_in_bytes(),
                    ..CleanReport::default()
                }),
                None => clean_one(node, &log, config, opts),
            };
            CleanedLog {
                topic,
                partition,
                result,
            }
        })
        .collect()
}
