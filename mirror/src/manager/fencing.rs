//! The destination's leader epoch kept above the source's (the reference's `validateLeaderEpoch` in
//! `MirrorFetcherThread`, EPOCH_FENCING in `MirrorMetadataManager`) and the convergence with a source
//! that truncated below us (ULE_RECOVERY; PREPARING's alignment after a failback).
//!
//! "The local epoch" of a mirror partition is its leader epoch in `cluster.json` (the controller's
//! epoch, Kafka's `partition.getLeaderEpoch`), not the leader-epoch cache: the cache holds the
//! source's epochs, as the mirrored batches carry them, and a bump never writes an entry into it
//! (Kafka's `makeLeader` does not assign an epoch start for a mirror partition). The rule, for every
//! fetched answer before anything of it is appended:
//! - its last batch's epoch above the local epoch: nothing is appended, the partition goes to
//!   EPOCH_FENCING, whose action bumps the local epoch (persisted) before MIRRORING resumes;
//! - otherwise, the source's epoch (or the batch's) above `local - LEADER_EPOCH_BUMP_THRESHOLD`: the
//!   answer is appended and the local epoch is bumped to that epoch + `LEADER_EPOCH_BUMP_INCREMENT`,
//!   persisted at the end of the round, before the partition's next append;
//! - a batch above the epoch the source was fetched at: the source's metadata is stale; the
//!   partition fails (retried) and learns the epoch again.
//!
//! So every batch a mirror appends is at or below the local epoch, and the barrier a failover writes
//! at the local epoch (or above the LME) is above every epoch the source used that klog saw.

use klog_log::format::{AnyBatch, Batches};
use klog_log::partition_log::PartitionLog;

use super::{partition_log, source_error, Manager, TickReport, Work};
use crate::error::Error;
use crate::node::Node;
use crate::source::{FetchRequest, Isolation, MirrorSource, SourceError};
use crate::state::MirrorState;

/// A source epoch this close to the local epoch (or closer) bumps it (the reference's
/// `LEADER_EPOCH_BUMP_THRESHOLD`).
pub const LEADER_EPOCH_BUMP_THRESHOLD: i32 = 3;
/// A bump puts the local epoch this far above the source's (`LEADER_EPOCH_BUMP_INCREMENT`).
pub const LEADER_EPOCH_BUMP_INCREMENT: i32 = 10;

/// What the epoch rule says of one fetched answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EpochCheck {
    /// Append; then, when set, bump the local epoch to this.
    Append { bump_to: Option<i32> },
    /// A batch above the local epoch: append nothing, EPOCH_FENCING.
    Fence { batch_epoch: i32 },
    /// A batch above the epoch the source was fetched at: its metadata is stale.
    StaleMetadata { batch_epoch: i32 },
}

/// The rule (see the module docs): `local` the local epoch, `source` the source leader epoch the
/// fetch was answered at, `batch` the last fetched batch's epoch (none: no records).
pub(crate) fn check(local: i32, source: i32, batch: Option<i32>) -> EpochCheck {
    if let Some(b) = batch {
        if b > local {
            return EpochCheck::Fence { batch_epoch: b };
        }
        if b > source {
            return EpochCheck::StaleMetadata { batch_epoch: b };
        }
    }
    let seen = batch.map_or(source, |b| b.max(source));
    let bump_to = (seen > local.saturating_sub(LEADER_EPOCH_BUMP_THRESHOLD))
        .then(|| seen.saturating_add(LEADER_EPOCH_BUMP_INCREMENT));
    EpochCheck::Append { bump_to }
}

/// The epoch of the last whole batch of `bytes` (epochs never go down along a log, so the highest).
pub(crate) fn last_batch_epoch(bytes: &[u8]) -> Option<i32> {
    let mut last = None;
    for b in Batches::new(bytes).without_crc() {
        match b {
            Ok(AnyBatch::V2(b)) => last = Some(b.partition_leader_epoch()),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    last
}

/// The target of an epoch bump above `seen` (an epoch the source used), if the local epoch is not
/// already at least there.
pub(crate) fn bump_target(node: &Node, w: &Work, seen: i32) -> Option<i32> {
    let target = seen.saturating_add(LEADER_EPOCH_BUMP_INCREMENT);
    let local = node.leader_epoch(&w.topic, w.partition).unwrap_or(0);
    (local < target).then_some(target)
}

/// A source truncation met while mirroring: where Kafka's follower rule cuts our log, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceTruncation {
    /// The source's answer: `(epoch, end offset)` of a diverging epoch, or `None` for an
    /// OFFSET_OUT_OF_RANGE whose source log ends at `target`.
    pub(crate) diverging: Option<(i32, i64)>,
    /// Where our log would be cut.
    pub(crate) target: i64,
    /// Our log end offset.
    pub(crate) log_end_offset: i64,
    /// Our latest epoch.
    pub(crate) latest_epoch: Option<i32>,
}

impl SourceTruncation {
    /// The non-retryable failure of a mirror that does not allow it, naming the partition, the
    /// offsets and the epochs.
    pub(crate) fn refusal(&self, w: &Work) -> Error {
        let source = match self.diverging {
            Some((epoch, end)) => format!("the source's epoch {epoch} ends at offset {end}"),
            None => format!("the source's log ends at offset {}", self.target),
        };
        let ours = self
            .latest_epoch
            .map_or_else(|| "none".to_owned(), |e| e.to_string());
        Error::Refused(format!(
            "{}-{}: detected log truncation during mirroring (an unclean leader election at the \
             source): {source}, below our log end offset {} (our latest epoch {ours}); our log would \
             be cut to {}. Not truncated: mirror.support.unclean.leader.election is false for \
             mirror {} (create the mirror with it true to converge, or remove the topic to fail over \
             with what is here)",
            w.topic, w.partition, self.log_end_offset, self.target, w.key.mirror
        ))
    }
}

/// Kafka's follower rule for a diverging epoch: in the same epoch the smaller end; otherwise our end
/// of the largest epoch below it (the next fetch finds the rest).
pub(crate) fn divergence_target(log: &PartitionLog, epoch: i32, end: i64) -> i64 {
    match log.end_offset_for_epoch(epoch) {
        Some((e, o)) if e == epoch => end.min(o),
        Some((_, o)) => o,
        None => end.min(log.log_end_offset()),
    }
    .min(log.log_end_offset())
}

/// At most this many fetches align a log in one step (each truncation moves it down an epoch).
const MAX_ALIGNMENT_FETCHES: usize = 16;

/// Aligns `w`'s log with the source's by Kafka's follower truncation: fetches one batch at the log
/// end with the last epoch, and cuts where the source's answer says the logs diverge, until they do
/// not. Returns whether it converged (`false`: still diverging after the step's fetches) and the
/// truncations made. Records are not appended: MIRRORING fetches them.
pub(crate) fn align(
    node: &Node,
    source: &dyn MirrorSource,
    w: &Work,
    source_epoch: &mut i32,
) -> Result<(bool, u64), Error> {
    let log = partition_log(node, w)?;
    let mut truncations = 0;
    for _ in 0..MAX_ALIGNMENT_FETCHES {
        let request = FetchRequest {
            topic: w.topic.clone(),
            topic_id: w.key.topic_id,
            partition: w.partition,
            fetch_offset: log.log_end_offset(),
            last_fetched_epoch: log.latest_epoch(),
            current_leader_epoch: *source_epoch,
            max_bytes: 1,
            isolation: Isolation::ReadCommitted,
        };
        let leo = log.log_end_offset();
        match source.fetch(&request) {
            Ok(r) => match r.diverging_epoch {
                Some((epoch, end)) if divergence_target(&log, epoch, end) < leo => {
                    log.truncate_to(divergence_target(&log, epoch, end))?;
                    truncations += 1;
                }
                _ => return Ok((true, truncations)),
            },
            Err(SourceError::FencedLeaderEpoch { leader_epoch })
                if leader_epoch != *source_epoch =>
            {
                *source_epoch = leader_epoch;
            }
            Err(SourceError::OffsetOutOfRange) => {
                let (start, end) = source
                    .list_offsets(&w.topic, w.key.topic_id, w.partition)
                    .map_err(|e| source_error(&source.describe(), e))?;
                if end < leo {
                    log.truncate_to(end)?;
                    truncations += 1;
                } else if start > leo {
                    log.truncate_fully_and_start_at(start)?;
                    truncations += 1;
                } else {
                    return Ok((true, truncations));
                }
            }
            Err(e) => return Err(source_error(&source.describe(), e)),
        }
    }
    Ok((false, truncations))
}

impl Manager {
    /// EPOCH_FENCING's action for the round's fencing partitions: each local epoch bumped above the
    /// epochs its source showed (the batch that was refused, the source's epoch, the log's latest),
    /// all in one `cluster.json` write (temp file, sync, rename), then MIRRORING. Idempotent: a re-run
    /// after a crash that finds the epoch already there only moves on.
    pub(super) fn fence_round(&self, works: Vec<Work>, now: i64, report: &mut TickReport) {
        let mut bumps = Vec::with_capacity(works.len());
        for w in &works {
            let rt = self.runtime_of(w);
            let latest = self
                .node
                .log(&w.topic, w.partition)
                .and_then(|l| l.latest_epoch())
                .unwrap_or(-1);
            let seen = rt.fence_epoch.max(rt.source_epoch).max(latest);
            bumps.push(bump_target(&self.node, w, seen));
        }
        let writes: Vec<(&str, i32, i32)> = works
            .iter()
            .zip(&bumps)
            .filter_map(|(w, b)| b.map(|t| (w.topic.as_str(), w.partition, t)))
            .collect();
        let written = self.node.bump_leader_epochs(&writes);
        if written.is_ok() {
            report.epoch_bumps += writes.len() as u64;
        }
        for (w, bump) in works.iter().zip(bumps) {
            let done = match (&written, bump) {
                (Err(e), Some(target)) => {
                    let e = Error::io(
                        std::path::Path::new(&format!("{}-{}", w.topic, w.partition)),
                        std::io::Error::other(format!(
                            "the leader epoch bump to {target} failed: {e}"
                        )),
                    );
                    self.fail(w, MirrorState::EpochFencing, e, now, report)
                }
                _ => {
                    if let Some(target) = bump {
                        tracing::info!(key = ?w.key, epoch = target, "EPOCH_FENCING: local leader epoch bumped above the source's");
                    }
                    self.update_runtime(w, |r| r.fence_epoch = -1);
                    let value = self.entering(w, MirrorState::EpochFencing, MirrorState::Mirroring);
                    self.transition(w, value, report)
                }
            };
            if let Err(e) = done {
                self.unrecorded_error(w, e, now, report);
            }
        }
    }

    /// ULE_RECOVERY's action: the log aligned with the source's by Kafka's follower truncation, then
    /// MIRRORING. Still diverging after one step's fetches: stays, and goes on next tick.
    pub(super) fn recover_from_unclean_election(
        &self,
        w: &Work,
        now: i64,
        report: &mut TickReport,
    ) -> Result<(), Error> {
        let mut epoch = self.runtime_of(w).source_epoch;
        let aligned = self
            .source(w)
            .and_then(|s| align(&self.node, s.as_ref(), w, &mut epoch));
        self.update_runtime(w, |r| r.source_epoch = epoch);
        match aligned {
            Ok((converged, truncations)) => {
                report.truncations += truncations;
                if !converged {
                    return Ok(());
                }
                tracing::info!(key = ?w.key, truncations, "ULE_RECOVERY: converged with the source");
                self.transition(
                    w,
                    self.entering(w, MirrorState::UleRecovery, MirrorState::Mirroring),
                    report,
                )
            }
            Err(e) => self.fail(w, MirrorState::UleRecovery, e, now, report),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_rule_is_the_references() {
        use EpochCheck::*;
        // A batch above the local epoch is never appended.
        assert_eq!(check(12, 13, Some(13)), Fence { batch_epoch: 13 });
        assert_eq!(check(0, 2, Some(2)), Fence { batch_epoch: 2 });
        // Within the threshold (local - 3 < epoch): appended, then bumped to epoch + 10.
        assert_eq!(check(12, 10, Some(10)), Append { bump_to: Some(20) });
        assert_eq!(check(12, 12, Some(12)), Append { bump_to: Some(22) });
        // The source's own epoch counts, with or without records.
        assert_eq!(check(12, 11, Some(5)), Append { bump_to: Some(21) });
        assert_eq!(check(12, 10, None), Append { bump_to: Some(20) });
        assert_eq!(check(0, 0, None), Append { bump_to: Some(10) });
        // Far enough below: nothing to do.
        assert_eq!(check(12, 9, Some(9)), Append { bump_to: None });
        assert_eq!(check(12, 2, None), Append { bump_to: None });
        // A batch above the epoch the source answered at: stale metadata.
        assert_eq!(check(12, 4, Some(5)), StaleMetadata { batch_epoch: 5 });
        // No overflow at the top of the range.
        assert_eq!(
            check(i32::MAX, i32::MAX, None),
            Append {
                bump_to: Some(i32::MAX)
            }
        );
    }
}
