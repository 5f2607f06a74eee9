//! STOPPING (KIP-1279 §1.4, in the corrected order): the failover of one partition. The LME is
//! recorded, the leader epoch bumped above it, the log truncated to its LSO, and a MIRROR_PID_RESET
//! barrier appended and flushed. Every step is idempotent by what this stop recorded, so re-running it
//! after a crash or a failure ends in the same state.

use klog_log::format::{AnyBatch, BatchBuilder, Batches, ControlRecordType};
use klog_log::partition_log::PartitionLog;
use klog_log::validator::AppendOrigin;

use super::fetcher::partition_log;
use super::{MirrorSettings, Work};
use crate::error::Error;
use crate::node::{lock, Node};
use crate::records::MirrorRecord;
use crate::state::MirrorState;

/// Runs the stop of `w`. Returns whether the LSO truncation removed anything.
///
/// Each step is skipped by what this stop recorded, never by what the log happens to end with (a log
/// mirrored back from a cluster that failed over ends with that cluster's barrier, possibly at our
/// current epoch):
/// - the LME is recorded once, in the same `__mirror_state` batch as a STOPPING record carrying it;
/// - the epoch bump is done when the leader epoch is above that LME;
/// - the barrier is done when the log ends with a MIRROR_PID_RESET above that LME: when the LME was
///   recorded every batch of the log was at or below it, and STOPPING admits no append but ours.
pub(super) fn stop(node: &Node, settings: &MirrorSettings, w: &Work) -> Result<bool, Error> {
    // 1. The fetcher is stopped: ours only runs inside tick, and the state is no longer MIRRORING.
    //    What it appended (or an earlier attempt of this stop) is made durable first.
    let log = partition_log(node, w)?;
    if settings.fsync {
        log.flush(log.log_end_offset())?;
    }
    // 2. LME: the latest epoch before the bump (-1: none), recorded once per stop.
    let lme = match recorded_lme(node, w) {
        Some(lme) => lme,
        None => record_lme(node, w, &log)?,
    };
    if barrier_above(&log, lme)? {
        return Ok(false); // this stop's barrier is written (and flushed by step 1)
    }
    // 3. Bump the leader epoch above the LME, to draw the line for a future failback.
    let epoch_now = node.leader_epoch(&w.topic, w.partition).unwrap_or(0);
    let epoch = if epoch_now <= lme {
        node.bump_leader_epoch(&w.topic, w.partition, lme + 1)?
    } else {
        epoch_now
    };
    // 4. Truncate to the local LSO: no transaction stays open across the barrier.
    let lso = log.last_stable_offset();
    let truncated = lso < log.log_end_offset();
    if truncated {
        log.truncate_to(lso)?;
    }
    tracing::info!(key = ?w.key, lme, epoch, lso, "failover: epoch bumped, log cut to the LSO");
    // 5. The barrier, through the leader path (STOPPING admits exactly this append), then flushed.
    let source_cluster_id = lock(&node.meta)
        .mirrors
        .get(&w.key.mirror)
        .and_then(|m| m.source_cluster_id.clone());
    if let Some(id) = source_cluster_id {
        let mut barrier = BatchBuilder::mirror_pid_reset(&id, node.clock.now_ms())?.build()?;
        log.append_as_leader_with_origin(&mut barrier, epoch, AppendOrigin::Coordinator)?;
        log.update_high_watermark(log.log_end_offset());
        tracing::info!(key = ?w.key, epoch, "failover: MIRROR_PID_RESET barrier written");
    }
    if settings.fsync {
        log.flush(log.log_end_offset())?;
    }
    Ok(truncated)
}

/// The LME the stop in progress on `w` recorded, as `__mirror_state` holds it now (STOPPING, or FAILED
/// from STOPPING): what a FAILED record and a retried STOPPING record carry on.
pub(super) fn lme_of_stop_in_progress(node: &Node, w: &Work) -> Option<i32> {
    lock(&node.store)
        .state(&w.key)
        .map(|s| &s.value)
        .filter(|v| {
            v.state == MirrorState::Stopping
                || (v.state == MirrorState::Failed && v.previous == MirrorState::Stopping)
        })
        .and_then(|v| v.stopping_last_mirror_epoch)
}

/// The LME this stop recorded: carried in its STOPPING record, or (a STOPPING record written before
/// klog carried it) an LME record written after that STOPPING record.
fn recorded_lme(node: &Node, w: &Work) -> Option<i32> {
    let store = lock(&node.store);
    let stopping = store
        .state(&w.key)
        .filter(|s| s.value.state == MirrorState::Stopping)?;
    if let Some(lme) = stopping.value.stopping_last_mirror_epoch {
        return Some(lme);
    }
    store
        .last_mirror_epoch(&w.key)
        .filter(|l| l.offset > stopping.offset)
        .map(|l| l.value)
}

/// Records the LME (the log's latest epoch, -1 if it has none) as one `__mirror_state` batch: the
/// LastMirrorEpoch record (when there is an epoch: a lookup of none answers -1 anyway) and the STOPPING
/// record again, now carrying it. Either both are on disk or neither.
fn record_lme(node: &Node, w: &Work, log: &PartitionLog) -> Result<i32, Error> {
    let lme = log.latest_epoch().unwrap_or(-1);
    let mut store = lock(&node.store);
    let mut stopping = store
        .state(&w.key)
        .map(|s| s.value.clone())
        .filter(|v| v.state == MirrorState::Stopping)
        .ok_or_else(|| Error::Refused(format!("{}-{} is not STOPPING", w.topic, w.partition)))?;
    stopping.stopping_last_mirror_epoch = Some(lme);
    let mut records = Vec::with_capacity(2);
    if lme >= 0 {
        records.push(MirrorRecord::LastMirrorEpoch(w.key.clone(), Some(lme)));
    }
    records.push(MirrorRecord::State(w.key.clone(), Some(stopping)));
    store.write(records)?;
    Ok(lme)
}

/// Whether the log ends with a MIRROR_PID_RESET barrier at an epoch above `lme`.
fn barrier_above(log: &PartitionLog, lme: i32) -> Result<bool, Error> {
    let leo = log.log_end_offset();
    if leo <= log.log_start_offset() {
        return Ok(false);
    }
    let read = log.read(leo - 1, 1 << 16, Some(leo), true)?;
    let mut last = None;
    let mut scratch = Vec::new();
    for b in Batches::new(read.records.as_slice()) {
        if let AnyBatch::V2(b) = b? {
            let is_barrier = b.is_control()
                && b.partition_leader_epoch() > lme
                && b.records(&mut scratch)?
                    .next()
                    .and_then(|r| r.ok())
                    .and_then(|r| r.key)
                    .is_some_and(|k| k == ControlRecordType::MirrorPidReset.key());
            last = Some(is_barrier);
        }
    }
    Ok(last == Some(true))
}
