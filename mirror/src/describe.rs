//! `describe`: every partition of a node with its mirror state, offsets, lag and failure, and every
//! mirror with its sync configs and its lag, as `klog mirror describe` prints them.
//!
//! Lag is the reference's `getPartitionLag`: `max(0, source high watermark - local high watermark)`,
//! the source's high watermark as its last fetch answer carried it (or, in a fresh process, as
//! ListOffsets gives it). A mirror's lag is the sum over its partitions whose lag is known, of the
//! topics still mirrored (a removed topic's partitions are the destination's own).

use std::collections::BTreeMap;

use klog_log::checkpoint::TopicId;

use crate::manager::Manager;
use crate::metadata::{ClusterMeta, DesiredState, StopMode};
use crate::node::{lock, Node};
use crate::records::MirrorKey;
use crate::state::MirrorState;
use crate::sync_config::{effective_value, MIRROR_SYNC_CONFIGS};

/// A partition as `describe` reports it (the JSON of `klog mirror describe --json`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PartitionDescription {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The topic id.
    pub topic_id: String,
    /// The mirror the topic is in, if any.
    pub mirror: Option<String>,
    /// That mirror's stop design (`truncate` or `abort`).
    pub stop_mode: Option<StopMode>,
    /// The desired state the controller recorded.
    pub desired: Option<DesiredState>,
    /// The state recorded in `__mirror_state` (UNKNOWN before the first).
    pub state: Option<MirrorState>,
    /// The partition's leader epoch here.
    pub leader_epoch: i32,
    /// The log start offset.
    pub log_start_offset: i64,
    /// The log end offset.
    pub log_end_offset: i64,
    /// The high watermark.
    pub high_watermark: i64,
    /// The last stable offset.
    pub last_stable_offset: i64,
    /// The source's high watermark, as last fetched.
    pub source_end_offset: Option<i64>,
    /// The source's end minus our high watermark.
    pub lag: Option<i64>,
    /// The LME recorded by the last stop.
    pub last_mirrored_epoch: Option<i32>,
    /// A FAILED partition's retry count (-1: not retried).
    pub retry_attempt: Option<i16>,
    /// FAILED: the state whose action failed.
    pub failed_state: Option<MirrorState>,
    /// FAILED and retried: when (ms since the epoch, the cluster's clock; at or before now: at the next
    /// pass). `None` when it is not retried until `resume` or `retry` resets it.
    pub next_retry_ms: Option<i64>,
    /// A FAILED partition's error.
    pub error: Option<String>,
    /// Producers in the partition's producer state.
    pub producers: usize,
}

/// A mirror config as `describe` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MirrorConfigEntry {
    /// The reference's name (`topic.properties.exclude`, ...).
    pub name: String,
    /// The value in force.
    pub value: String,
    /// Whether it is the default (not set at `mirror create`).
    pub default: bool,
}

/// A mirror as `describe` reports it (the `mirrors` of `klog mirror describe --json`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MirrorDescription {
    /// The mirror's name.
    pub mirror: String,
    /// Its source: a cluster root or `kafka://host:port`.
    pub source: String,
    /// The source's cluster id, once learned.
    pub source_cluster_id: Option<String>,
    /// Its sync configs in force.
    pub configs: Vec<MirrorConfigEntry>,
    /// Its partitions here that are still mirrored (their topic not removed from the mirror).
    pub partitions: usize,
    /// The sum of its partitions' lags (those known); `None` when none is known.
    pub lag: Option<i64>,
    /// The largest partition lag.
    pub max_partition_lag: Option<i64>,
    /// Partitions whose lag is not known (no fetch answer yet, the source not reachable).
    pub partitions_without_lag: usize,
}

/// Every mirror of `meta` with its configs and the lag of its partitions among `rows`.
pub(crate) fn describe_mirrors(
    meta: &ClusterMeta,
    rows: &[PartitionDescription],
) -> Vec<MirrorDescription> {
    let mut by_mirror: BTreeMap<&str, Vec<Option<i64>>> = BTreeMap::new();
    for r in rows {
        // A removed topic is no longer mirrored: its lag is not the mirror's.
        if r.desired == Some(DesiredState::Stop) {
            continue;
        }
        if let Some(m) = r.mirror.as_deref() {
            by_mirror.entry(m).or_default().push(r.lag);
        }
    }
    meta.mirrors
        .iter()
        .map(|(name, m)| {
            let lags = by_mirror.get(name.as_str()).cloned().unwrap_or_default();
            let known: Vec<i64> = lags.iter().flatten().copied().collect();
            MirrorDescription {
                mirror: name.clone(),
                source: m.source.clone(),
                source_cluster_id: m.source_cluster_id.clone(),
                configs: MIRROR_SYNC_CONFIGS
                    .iter()
                    .map(|(n, _)| MirrorConfigEntry {
                        name: (*n).to_owned(),
                        value: effective_value(&m.configs, n),
                        default: !m.configs.contains_key(*n),
                    })
                    .collect(),
                partitions: lags.len(),
                lag: (!known.is_empty()).then(|| known.iter().sum()),
                max_partition_lag: known.iter().copied().max(),
                partitions_without_lag: lags.len() - known.len(),
            }
        })
        .collect()
}

/// `describe`, with the source's end offset asked from the source for mirror partitions the fetcher
/// has not reported on yet (a fresh process): lag is then known without running the fetcher.
pub(crate) fn describe_live(node: &Node, manager: &Manager) -> Vec<PartitionDescription> {
    let mut rows = describe(node, manager);
    for r in &mut rows {
        let mirroring = matches!(
            r.state,
            Some(
                MirrorState::Mirroring
                    | MirrorState::EpochFencing
                    | MirrorState::UleRecovery
                    | MirrorState::Paused
                    | MirrorState::Pausing
                    | MirrorState::Preparing
            )
        );
        let (Some(mirror), true, None) = (r.mirror.clone(), mirroring, r.source_end_offset) else {
            continue;
        };
        let Some(id) = TopicId::parse(&r.topic_id) else {
            continue;
        };
        if let Ok(source) = manager.source_for(&mirror) {
            if let Ok((_, end)) = source.list_offsets(&r.topic, id, r.partition) {
                r.source_end_offset = Some(end);
                r.lag = Some((end - r.high_watermark).max(0));
            }
        }
    }
    rows
}

pub(crate) fn describe(node: &Node, manager: &Manager) -> Vec<PartitionDescription> {
    let meta = lock(&node.meta).clone();
    let now = node.clock.now_ms();
    let store = lock(&node.store);
    let logs = lock(&node.logs);
    let mut out = Vec::new();
    for (name, t) in &meta.topics {
        let id = TopicId::parse(&t.id).expect("validated");
        for p in 0..t.partitions {
            let Some(log) = logs.get(&(name.clone(), p)) else {
                continue;
            };
            let key = t.mirror.as_ref().map(|m| MirrorKey {
                mirror: m.name.clone(),
                topic_id: id,
                partition: p,
            });
            let stored = key.as_ref().and_then(|k| store.state(k));
            let failed = stored
                .map(|s| &s.value)
                .filter(|v| v.state == MirrorState::Failed);
            let source_hw = manager.source_high_watermark(name, p);
            out.push(PartitionDescription {
                topic: name.clone(),
                partition: p,
                topic_id: t.id.clone(),
                mirror: t.mirror.as_ref().map(|m| m.name.clone()),
                stop_mode: t
                    .mirror
                    .as_ref()
                    .and_then(|m| meta.mirrors.get(&m.name))
                    .map(|m| m.stop_mode),
                desired: t.mirror.as_ref().map(|m| m.desired),
                state: key
                    .as_ref()
                    .map(|_| stored.map_or(MirrorState::Unknown, |s| s.value.state)),
                leader_epoch: t.leader_epochs[p as usize],
                log_start_offset: log.log_start_offset(),
                log_end_offset: log.log_end_offset(),
                high_watermark: log.high_watermark(),
                last_stable_offset: log.last_stable_offset(),
                source_end_offset: source_hw,
                lag: source_hw.map(|hw| (hw - log.high_watermark()).max(0)),
                last_mirrored_epoch: key
                    .as_ref()
                    .and_then(|k| store.last_mirror_epoch(k))
                    .map(|s| s.value),
                retry_attempt: failed.map(|v| v.retry_attempt),
                failed_state: failed.map(|v| v.previous),
                next_retry_ms: failed
                    .filter(|v| v.retry_attempt >= 0)
                    .map(|v| v.next_retry_ms.unwrap_or(now)),
                error: stored.and_then(|s| s.value.error.clone()),
                producers: log.producers().len(),
            });
        }
    }
    out
}
