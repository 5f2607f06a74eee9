//! STOPPING (KIP-1279 §1.4, in the corrected order): the failover of mirror partitions. The LME is
//! recorded, the leader epoch bumped above it, the source's open transactions ended as the mirror's
//! [`StopMode`] says (`truncate`: the log cut to its LSO, the seed design; `abort`: one ABORT marker per
//! open transaction at the bumped epoch, the reference forks' `abortOngoingTransactions`), and a
//! MIRROR_PID_RESET barrier appended and flushed. Every step is idempotent by what this stop recorded,
//! so re-running it after a crash or a failure ends in the same state.
//!
//! A failover stops many partitions together, step by step across them, so each step's syncs are paid
//! once, not once per partition: one flush of every log, one `__mirror_state` write of every LME, one
//! metadata write of every epoch bump, the truncations and barriers, one flush of every log (each
//! log's right after its barrier where the storage syncs one file at a time). Each
//! partition still goes through its steps in order, and a partition whose step fails leaves the others
//! to go on without it.

use std::sync::Arc;

use klog_log::format::{AnyBatch, BatchBuilder, Batches, ControlRecordType};
use klog_log::partition_log::{on_threads, PartitionLog};
use klog_log::validator::AppendOrigin;
use klog_psm::ProducerStateEntry;

use super::{partition_log, MirrorSettings, Work};
use crate::error::Error;
use crate::metadata::StopMode;
use crate::node::{lock, Node};
use crate::records::MirrorRecord;
use crate::state::MirrorState;

/// One partition's stop between steps.
struct Stop<'a> {
    /// Its place in the caller's list (where its result goes).
    index: usize,
    w: &'a Work,
    log: Arc<PartitionLog>,
    /// This stop's LME, once recorded.
    lme: i32,
    /// The leader epoch the barrier is written at, once bumped.
    epoch: i32,
    truncated: bool,
}

/// Runs the stops of `works` together. Returns, per partition in order, whether the LSO truncation
/// removed anything, or the error that stopped that partition's stop.
///
/// Each step is skipped by what this stop recorded, never by what the log happens to end with (a log
/// mirrored back from a cluster that failed over ends with that cluster's barrier, possibly at our
/// current epoch):
/// - the LME is recorded once, in the same `__mirror_state` batch as a STOPPING record carrying it;
/// - the epoch bump is done when the leader epoch is above that LME;
/// - the barrier is done when the log ends with a MIRROR_PID_RESET above that LME: when the LME was
///   recorded every batch of the log was at or below it, and STOPPING admits no append but ours.
pub(super) fn stop_many(
    node: &Node,
    settings: &MirrorSettings,
    works: &[&Work],
) -> Vec<Result<bool, Error>> {
    if works.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<Option<Result<bool, Error>>> = works.iter().map(|_| None).collect();
    let mut stops = Vec::with_capacity(works.len());
    for (index, w) in works.iter().enumerate() {
        match partition_log(node, w) {
            Ok(log) => stops.push(Stop {
                index,
                w,
                log,
                lme: -1,
                epoch: 0,
                truncated: false,
            }),
            Err(e) => out[index] = Some(Err(e)),
        }
    }
    // 1. The fetcher is stopped: ours only runs inside tick, and the state is no longer MIRRORING.
    //    What it appended (or an earlier attempt of this stop) is made durable first.
    if settings.fsync {
        flush_all(&mut stops, &mut out);
    }
    // 2. LME: the latest epoch before the bump (-1: none), recorded once per stop.
    record_lmes(node, &mut stops, &mut out);
    // A stop whose barrier is written (and flushed by step 1) is done.
    let each = stops.iter().map(|s| barrier_above(&s.log, s.lme)).collect();
    settle(&mut stops, &mut out, each, |_, done| done.then_some(false));
    // 3. Bump the leader epochs above the LMEs, to draw the line for a future failback.
    bump_epochs(node, &mut stops, &mut out);
    // 4, 5. End the open transactions (truncate mode: cut to the local LSO; abort mode: an ABORT
    //    marker each), so none stays open across the barrier, then the barrier through the leader path
    //    (STOPPING admits exactly these appends).
    // 6. The barriers made durable: where the storage syncs many files in one call (io_uring), every
    //    log in one flush after all the barriers; otherwise each log right after its own barrier, on
    //    the same thread, so its sync overlaps the other partitions' barriers instead of waiting for
    //    the slowest of them (what a wave of 1,000 checkpoint writes ends with).
    let together = node.storage.syncs_together();
    let flush_each_barrier = settings.fsync && !together;
    cut_and_barrier_all(node, &mut stops, &mut out, flush_each_barrier);
    if settings.fsync && together {
        flush_all(&mut stops, &mut out);
    }
    for s in &stops {
        out[s.index] = Some(Ok(s.truncated));
    }
    out.into_iter()
        .map(|r| r.expect("every stop ends with a result"))
        .collect()
}

/// Steps 4 and 5 of every stop, on [`on_threads`] threads; with `flush`, step 6 too: each log flushed
/// after its barrier, on the barrier's thread.
fn cut_and_barrier_all(
    node: &Node,
    stops: &mut Vec<Stop<'_>>,
    out: &mut [Option<Result<bool, Error>>],
    flush: bool,
) {
    let mirrors: Vec<(Option<String>, StopMode)> = {
        let meta = lock(&node.meta);
        stops
            .iter()
            .map(|s| {
                meta.mirrors.get(&s.w.key.mirror).map_or_else(
                    || (None, StopMode::default()),
                    |m| (m.source_cluster_id.clone(), m.stop_mode),
                )
            })
            .collect()
    };
    let each = on_threads(stops, |i, s| {
        let (source_id, mode) = &mirrors[i];
        let truncated = cut_and_barrier(node, s, source_id.as_deref(), *mode)?;
        if flush {
            s.log.flush(s.log.log_end_offset())?;
        }
        Ok(truncated)
    });
    settle(stops, out, each, |s, truncated| {
        s.truncated = truncated;
        None
    });
}

/// Keeps the stops whose step succeeded (`next` may finish one with a result), records the others'
/// errors.
fn settle<T>(
    stops: &mut Vec<Stop<'_>>,
    out: &mut [Option<Result<bool, Error>>],
    each: Vec<Result<T, Error>>,
    mut next: impl FnMut(&mut Stop<'_>, T) -> Option<bool>,
) {
    assert_eq!(stops.len(), each.len(), "one result per stop");
    let mut kept = Vec::with_capacity(stops.len());
    for (mut s, r) in std::mem::take(stops).into_iter().zip(each) {
        match r.map(|v| next(&mut s, v)) {
            Ok(None) => kept.push(s),
            Ok(Some(done)) => out[s.index] = Some(Ok(done)),
            Err(e) => out[s.index] = Some(Err(e)),
        }
    }
    *stops = kept;
}

/// Every log flushed to its end, together ([`PartitionLog::flush_each`]).
fn flush_all(stops: &mut Vec<Stop<'_>>, out: &mut [Option<Result<bool, Error>>]) {
    let logs: Vec<&PartitionLog> = stops.iter().map(|s| s.log.as_ref()).collect();
    let each = PartitionLog::flush_each(&logs)
        .into_iter()
        .map(|r| r.map_err(Error::from))
        .collect();
    settle(stops, out, each, |_, ()| None);
}

/// The LME of every stop: the one it recorded, or (none yet) its log's latest epoch, recorded for all
/// of them in one `__mirror_state` write: per partition the LastMirrorEpoch record (when there is an
/// epoch: a lookup of none answers -1 anyway) and the STOPPING record again, now carrying it, in one
/// batch, so either both are on disk or neither.
fn record_lmes(node: &Node, stops: &mut Vec<Stop<'_>>, out: &mut [Option<Result<bool, Error>>]) {
    let mut records = Vec::new();
    let mut each = Vec::with_capacity(stops.len());
    for s in stops.iter_mut() {
        if let Some(lme) = recorded_lme(node, s.w) {
            s.lme = lme;
            each.push(Ok(false));
            continue;
        }
        each.push(lme_records(node, s.w, &s.log).map(|(lme, mut rs)| {
            s.lme = lme;
            records.append(&mut rs);
            true
        }));
    }
    let written = lock(&node.store).write_partitions(records);
    let store = lock(&node.store);
    let each = stops
        .iter()
        .zip(each)
        .map(|(s, r)| match r {
            Ok(true) => match written.get(&store.partition_of(&s.w.key)) {
                Some(Err(e)) => Err(shared(s.w, "recording the last mirrored epoch", e)),
                _ => Ok(()),
            },
            other => other.map(|_| ()),
        })
        .collect();
    drop(store);
    settle(stops, out, each, |_, ()| None);
}

/// Bumps, in one metadata write, the leader epoch of every stop whose epoch is not yet above its LME.
fn bump_epochs(node: &Node, stops: &mut Vec<Stop<'_>>, out: &mut [Option<Result<bool, Error>>]) {
    let mut bumps = Vec::new();
    for s in stops.iter_mut() {
        s.epoch = node.leader_epoch(&s.w.topic, s.w.partition).unwrap_or(0);
        if s.epoch <= s.lme {
            bumps.push((s.w.topic.as_str(), s.w.partition, s.lme + 1));
        }
    }
    let each = match node.bump_leader_epochs(&bumps) {
        Ok(_) => {
            for s in stops.iter_mut() {
                s.epoch = node.leader_epoch(&s.w.topic, s.w.partition).unwrap_or(0);
            }
            stops.iter().map(|_| Ok(())).collect()
        }
        Err(e) => stops
            .iter()
            .map(|s| {
                if s.epoch > s.lme {
                    Ok(())
                } else {
                    Err(shared(s.w, "the leader epoch bump", &e))
                }
            })
            .collect(),
    };
    settle(stops, out, each, |_, ()| None);
}

/// A failure of a write shared by many stops, as each of them meets it: an I/O error (retried as
/// one) naming the partition and the step.
fn shared(w: &Work, step: &str, e: &Error) -> Error {
    Error::io(
        std::path::Path::new(&format!("{}-{}", w.topic, w.partition)),
        std::io::Error::other(format!("{step} failed: {e}")),
    )
}

/// Steps 4 and 5 of one stop: the open transactions ended (`truncate`: the cut to the LSO; `abort`: an
/// ABORT marker each), then the barrier (not yet flushed). Returns whether the cut removed anything.
fn cut_and_barrier(
    node: &Node,
    s: &Stop<'_>,
    source_cluster_id: Option<&str>,
    mode: StopMode,
) -> Result<bool, Error> {
    let log = &s.log;
    let mut truncated = false;
    match mode {
        StopMode::Truncate => {
            let lso = log.last_stable_offset();
            truncated = lso < log.log_end_offset();
            if truncated {
                log.truncate_to(lso)?;
            }
            tracing::info!(key = ?s.w.key, lme = s.lme, epoch = s.epoch, lso, "failover: epoch bumped, log cut to the LSO");
        }
        StopMode::Abort => {
            let aborted = abort_open_transactions(node, s)?;
            log.update_high_watermark(log.log_end_offset());
            tracing::info!(key = ?s.w.key, lme = s.lme, epoch = s.epoch, aborted, "failover: epoch bumped, open transactions aborted");
        }
    }
    // The value no longer names the source (the newest reference layout, docs/compatibility.md); an
    // unknown source still skips the barrier, as the reference does.
    if source_cluster_id.is_some() {
        let mut barrier = BatchBuilder::mirror_pid_reset(node.clock.now_ms())?.build()?;
        log.append_as_leader_with_origin(&mut barrier, s.epoch, AppendOrigin::Coordinator)?;
        log.update_high_watermark(log.log_end_offset());
        tracing::info!(key = ?s.w.key, epoch = s.epoch, "failover: MIRROR_PID_RESET barrier written");
    }
    Ok(truncated)
}

/// Abort mode's step 4: one ABORT marker per producer with an open transaction, in the order the
/// transactions began, each through the leader path at the bumped epoch as the transaction
/// coordinator writes it (`UnifiedLog.buildEndTransactionRecords`): the producer's current epoch, the
/// coordinator epoch of its last marker (0 if none). Returns how many were written.
///
/// Idempotent by the log's producer state, which only this stop can change now: STOPPING admits no
/// append but its markers and its barrier, a marker closes exactly its producer's transaction, and
/// after a crash recovery rebuilds the producer state from the `.log`, so a marker that survived has
/// closed its transaction and one that was lost left it open. A re-run therefore writes exactly the
/// markers still missing, and the barrier (after which nothing is open) ends the step for good.
fn abort_open_transactions(node: &Node, s: &Stop<'_>) -> Result<usize, Error> {
    let log = &s.log;
    let mut open: Vec<ProducerStateEntry> = log
        .producers()
        .into_iter()
        .filter(|p| p.current_txn_first_offset().is_some())
        .collect();
    open.sort_by_key(|p| (p.current_txn_first_offset(), p.producer_id()));
    for p in &open {
        let mut marker = BatchBuilder::end_txn_marker(
            ControlRecordType::Abort,
            p.producer_id(),
            p.producer_epoch(),
            p.coordinator_epoch().max(0),
            node.clock.now_ms(),
        )?
        .build()?;
        log.append_as_leader_with_origin(&mut marker, s.epoch, AppendOrigin::Coordinator)?;
    }
    Ok(open.len())
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

/// The records that record `w`'s LME (its log's latest epoch, -1 if it has none): the LastMirrorEpoch
/// record when there is an epoch, then its STOPPING record carrying the LME. Returns the LME with them.
fn lme_records(
    node: &Node,
    w: &Work,
    log: &PartitionLog,
) -> Result<(i32, Vec<MirrorRecord>), Error> {
    let lme = log.latest_epoch().unwrap_or(-1);
    let mut stopping = lock(&node.store)
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
    Ok((lme, records))
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
