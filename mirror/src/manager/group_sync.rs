//! The consumer-group offset sync that rides along with mirroring (KIP-1279 §3.5, P2's rules): per
//! mirror, every `metadata_refresh_ms`, the source's committed offsets on the mirror's topics are
//! written to this cluster's `__consumer_offsets` (see [`crate::groups`]), so a group that fails over
//! resumes at the same offsets, with no translation.
//!
//! - Only partitions that are MIRRORING take offsets: none while PAUSED (or PAUSING, PREPARING,
//!   FAILED), none once STOPPING or STOPPED (from then on this cluster's own consumers own them).
//! - An offset is written only when it differs from what is committed here (offset, leader epoch or
//!   metadata): the partitions are not compacted by klog, so an unchanged group costs nothing.
//! - Only the groups the mirror's `groups.include` matches and its `groups.exclude` does not (the
//!   reference's filters, [`crate::sync_config`]); a group filtered out is left alone here, as a group
//!   the source does not list.
//! - `synced = max(log start, min(source committed, log end))`: a group resumes no further than the data
//!   that was mirrored. An offset in range is the source's OffsetAndMetadata as it is; a clamped one
//!   takes, as the reference's `MirrorSourceSyncer` does, the leader epoch this log's leader-epoch cache
//!   gives the offset it was clamped to (Kafka's `epochForOffset`) and empty metadata, and is not
//!   written while the cache has no epoch for it. It is reported, and the mirror is synced again on
//!   the next tick that mirrors more data, until nothing is clamped; so is a mirror whose partitions
//!   are still on their way to MIRRORING.
//! - An offset the source no longer has for a group it still lists is deleted here (a tombstone), but
//!   only for a partition the source answered, without an error, as having no committed offset
//!   (OffsetFetch's -1). A partition the source did not answer for (an error, a topic its metadata does
//!   not resolve, a topic an authorizer hides, which Kafka drops from the answer) keeps its offset: one
//!   lost ACL must not delete a topic's offsets. A group the source does not list is left alone: it may
//!   be this cluster's own.
//! - No lock of this cluster is held while the source is asked.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use klog_log::checkpoint::TopicId;
use klog_log::coordinator::CONSUMER_OFFSETS_TOPIC;
use klog_log::partition_log::PartitionLog;

use super::{Manager, TickReport};
use crate::groups::{self, OffsetChange, OffsetKey};
use crate::metadata::DesiredState;
use crate::node::lock;
use crate::records::MirrorKey;
use crate::source::{CommittedOffset, SourceGroup};
use crate::state::MirrorState;

/// A synced offset that was moved into the destination's log (reported by the tick).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetClamp {
    /// The group id.
    pub group: String,
    /// The mirrored topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// What the source committed.
    pub source_offset: i64,
    /// What was written here.
    pub synced_offset: i64,
}

/// When each mirror's groups are next synced, and which mirrors want a sync as soon as data moves.
#[derive(Debug, Default)]
pub(crate) struct GroupSyncState {
    next_ms: BTreeMap<String, i64>,
    pending: BTreeSet<String>,
}

/// What one mirror's partitions allow.
#[derive(Default)]
struct Eligible {
    /// MIRRORING partitions, with their logs.
    logs: BTreeMap<(String, i32), Arc<PartitionLog>>,
    /// Some partition is still on its way to MIRRORING (UNKNOWN, PREPARING).
    arriving: bool,
}

impl Manager {
    /// Syncs the groups of every mirror that is due (its period passed, or it is pending and this tick
    /// moved something).
    pub(super) fn sync_group_offsets(&self, now: i64, report: &mut TickReport) {
        let mirrors: Vec<String> = self.node.metadata().mirrors.keys().cloned().collect();
        let moved = report.progressed();
        for mirror in mirrors {
            {
                let mut s = lock(&self.group_sync);
                let due = s.next_ms.get(&mirror).is_none_or(|t| now >= *t);
                let hurried = moved && s.pending.contains(&mirror);
                if !(due || hurried) {
                    continue;
                }
                s.next_ms
                    .insert(mirror.clone(), now + self.settings.metadata_refresh_ms);
            }
            let pending = match self.sync_mirror_groups(&mirror, report) {
                Ok(pending) => pending,
                Err(message) => {
                    report
                        .errors
                        .push((CONSUMER_OFFSETS_TOPIC.to_owned(), -1, message));
                    true
                }
            };
            let mut s = lock(&self.group_sync);
            if pending {
                s.pending.insert(mirror);
            } else {
                s.pending.remove(&mirror);
            }
        }
    }

    /// One mirror's sync; returns whether it wants another as soon as data moves.
    fn sync_mirror_groups(&self, mirror: &str, report: &mut TickReport) -> Result<bool, String> {
        let eligible = self.eligible(mirror);
        if eligible.logs.is_empty() {
            return Ok(eligible.arriving);
        }
        let topics: BTreeSet<String> = eligible.logs.keys().map(|(t, _)| t.clone()).collect();
        let source = self
            .source_for(mirror)
            .map_err(|e| format!("mirror {mirror}: group offsets: {e}"))?;
        let mut listed = source.committed_offsets(&topics).map_err(|e| {
            format!(
                "mirror {mirror}: group offsets from {}: {e}",
                source.describe()
            )
        })?;
        let filters = self
            .node
            .metadata()
            .mirrors
            .get(mirror)
            .map(|m| m.sync_filters())
            .unwrap_or_default();
        listed.retain(|g| filters.syncs_group(&g.group));
        // A write that failed earlier (a full disk) is reopened first: what survives it is what is here.
        groups::heal(&self.node).map_err(|e| e.to_string())?;
        let here = groups::committed_offsets(&self.node).map_err(|e| e.to_string())?;
        let (changes, clamps) = plan(&listed, &here, &eligible.logs);
        if !changes.is_empty() {
            groups::write(&self.node, &changes).map_err(|e| e.to_string())?;
        }
        report.offsets_synced += changes.len() as u64;
        let clamped = !clamps.is_empty();
        report.offset_clamps.extend(clamps);
        Ok(clamped || eligible.arriving)
    }

    /// The mirror's partitions that take offsets now.
    fn eligible(&self, mirror: &str) -> Eligible {
        let meta = self.node.metadata();
        let mut states = Vec::new();
        {
            // The store's lock alone (the logs' lock is taken after it is released: elsewhere the logs
            // are locked before the store).
            let store = lock(&self.node.store);
            for (name, t) in &meta.topics {
                let Some(m) = t.mirror.as_ref().filter(|m| m.name == mirror) else {
                    continue;
                };
                let Some(topic_id) = TopicId::parse(&t.id) else {
                    continue;
                };
                for partition in 0..t.partitions {
                    let key = MirrorKey {
                        mirror: mirror.to_owned(),
                        topic_id,
                        partition,
                    };
                    let state = store.state(&key).map(|s| s.value.state);
                    states.push((name.clone(), partition, m.desired, state));
                }
            }
        }
        let mut out = Eligible::default();
        for (name, partition, desired, state) in states {
            match state {
                Some(MirrorState::Mirroring) if desired == DesiredState::Start => {
                    if let Some(log) = self.node.log(&name, partition) {
                        out.logs.insert((name, partition), log);
                    }
                }
                None
                | Some(
                    MirrorState::Unknown
                    | MirrorState::Preparing
                    | MirrorState::EpochFencing
                    | MirrorState::UleRecovery,
                ) if desired == DesiredState::Start => out.arriving = true,
                _ => {}
            }
        }
        out
    }
}

/// What to write so `here` holds the source's offsets for the eligible partitions, and what was clamped.
fn plan(
    listed: &[SourceGroup],
    here: &BTreeMap<OffsetKey, CommittedOffset>,
    logs: &BTreeMap<(String, i32), Arc<PartitionLog>>,
) -> (Vec<OffsetChange>, Vec<OffsetClamp>) {
    let mut changes = Vec::new();
    let mut clamps = Vec::new();
    for g in listed {
        let mut seen = BTreeSet::new();
        for c in &g.offsets {
            let Some(log) = logs.get(&(c.topic.clone(), c.partition)) else {
                continue;
            };
            seen.insert((c.topic.clone(), c.partition));
            let (offset, synced) = clamp(c, log);
            if offset != c.offset {
                clamps.push(OffsetClamp {
                    group: c.group.clone(),
                    topic: c.topic.clone(),
                    partition: c.partition,
                    source_offset: c.offset,
                    synced_offset: offset,
                });
            }
            let Some(synced) = synced else {
                continue; // clamped where the log has no epoch yet
            };
            let key = (g.group.clone(), c.topic.clone(), c.partition);
            let unchanged = here.get(&key).is_some_and(|h| {
                (h.offset, h.leader_epoch, &h.metadata)
                    == (synced.offset, synced.leader_epoch, &synced.metadata)
            });
            if !unchanged {
                changes.push(OffsetChange::Commit(synced));
            }
        }
        // Offsets the source answered as deleted (or never committed) for a group it lists, on
        // eligible partitions; a partition it did not answer for says nothing.
        for (key, _) in here.range((g.group.clone(), String::new(), i32::MIN)..) {
            if key.0 != g.group {
                break;
            }
            let tp = (key.1.clone(), key.2);
            let deleted = g.no_committed_offset.contains(&tp) && !seen.contains(&tp);
            if logs.contains_key(&tp) && deleted {
                changes.push(OffsetChange::Delete(key.clone()));
            }
        }
    }
    (changes, clamps)
}

/// `max(log start, min(committed, log end))`, and the commit to write there: the source's as it is
/// when nothing moved; else that offset with the epoch Kafka's `epochForOffset` gives it in this log
/// and empty metadata, or none when the log has no epoch for it.
fn clamp(c: &CommittedOffset, log: &PartitionLog) -> (i64, Option<CommittedOffset>) {
    let offset = c
        .offset
        .min(log.log_end_offset())
        .max(log.log_start_offset());
    if offset == c.offset {
        return (offset, Some(c.clone()));
    }
    let synced = epoch_for_offset(log, offset).map(|leader_epoch| CommittedOffset {
        offset,
        leader_epoch,
        metadata: String::new(),
        ..c.clone()
    });
    (offset, synced)
}

/// Kafka's `LeaderEpochFileCache.epochForOffset`: the epoch of the last entry starting at or before
/// `offset`.
fn epoch_for_offset(log: &PartitionLog, offset: i64) -> Option<i32> {
    log.leader_epochs()
        .iter()
        .take_while(|e| e.start_offset <= offset)
        .last()
        .map(|e| e.epoch)
}
