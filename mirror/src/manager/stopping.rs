//! STOPPING (KIP-1279 §1.4, in the corrected order): the failover of one partition. The LME is
//! recorded, the leader epoch bumped above it, the log truncated to its LSO, and a MIRROR_PID_RESET
//! barrier appended and flushed. Every step is idempotent, so re-running it after a crash ends in the
//! same state.

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
pub(super) fn stop(node: &Node, settings: &MirrorSettings, w: &Work) -> Result<bool, Error> {
    // 1. The fetcher is stopped: ours only runs inside tick, and the state is no longer MIRRORING.
    //    What it appended is made durable before the LME is read from it.
    let log = partition_log(node, w)?;
    if settings.fsync {
        log.flush(log.log_end_offset())?;
    }
    let epoch_now = node.leader_epoch(&w.topic, w.partition).unwrap_or(0);
    if barrier_at_end(&log, epoch_now)? {
        return Ok(false); // a crash after the barrier: the stop already happened
    }
    // 2. LME: the latest epoch before the bump, recorded once per stop (an LME written after this
    //    STOPPING record belongs to this stop; recomputing it would see the bumped epoch).
    let stopping_offset = lock(&node.store)
        .state(&w.key)
        .filter(|s| s.value.state == MirrorState::Stopping)
        .map(|s| s.offset);
    let recorded = {
        let store = lock(&node.store);
        store
            .last_mirror_epoch(&w.key)
            .filter(|l| stopping_offset.is_some_and(|s| l.offset > s))
            .map(|l| l.value)
    };
    let lme = match recorded {
        Some(l) => Some(l),
        None => {
            let latest = log.latest_epoch();
            if let Some(e) = latest {
                lock(&node.store)
                    .write(vec![MirrorRecord::LastMirrorEpoch(w.key.clone(), Some(e))])?;
            }
            latest
        }
    };
    // 3. Bump the leader epoch above the LME, to draw the line for a future failback.
    let min = lme.map_or(0, |l| l + 1);
    let epoch = if epoch_now < min {
        node.bump_leader_epoch(&w.topic, w.partition, min)?
    } else {
        epoch_now
    };
    // 4. Truncate to the local LSO: no transaction stays open across the barrier.
    let lso = log.last_stable_offset();
    let truncated = lso < log.log_end_offset();
    if truncated {
        log.truncate_to(lso)?;
    }
    // 5. The barrier, through the leader path (STOPPING admits exactly this append), then flushed.
    let source_cluster_id = lock(&node.meta)
        .mirrors
        .get(&w.key.mirror)
        .and_then(|m| m.source_cluster_id.clone());
    if let Some(id) = source_cluster_id {
        let mut barrier = BatchBuilder::mirror_pid_reset(&id, node.clock.now_ms())?.build()?;
        log.append_as_leader_with_origin(&mut barrier, epoch, AppendOrigin::Coordinator)?;
        log.update_high_watermark(log.log_end_offset());
    }
    if settings.fsync {
        log.flush(log.log_end_offset())?;
    }
    Ok(truncated)
}

/// Whether the log ends with a MIRROR_PID_RESET barrier written at `epoch`.
fn barrier_at_end(log: &PartitionLog, epoch: i32) -> Result<bool, Error> {
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
                && b.partition_leader_epoch() == epoch
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
