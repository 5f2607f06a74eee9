//! The fetcher's side of the manager: PREPARING's truncation to the last mirrored epoch (KIP-1279 §2.3)
//! and the fetch round of the MIRRORING partitions (§2.6, §3.3): one [`MirrorSource::fetch_each`] per
//! mirror's source with every due partition, in rotated order, within `fetch_response_max_bytes`; each
//! answer handled by Kafka's follower rules for fencing, divergence and out-of-range offsets; then one
//! flush of the logs that need one (docs/mirroring.md, "The fetch round").

use std::sync::Arc;

use klog_log::format::Batches;
use klog_log::partition_log::PartitionLog;

use super::fencing::{self, EpochCheck, SourceTruncation};
use super::{partition_log, source_error, Manager, PartitionRuntime, TickReport, Work};
use crate::error::Error;
use crate::metadata::StopMode;
use crate::node::{lock, Node};
use crate::source::{FetchRequest, FetchResponse, Isolation, MirrorSource, SourceError};
use crate::state::MirrorState;

/// Why a fetch did not complete.
pub(super) enum FetchOutcome {
    /// Retry the fetch after `mirror.fetch.backoff.ms`; the state stays MIRRORING.
    Backoff(String),
    /// Move the partition to FAILED.
    Fail(Error),
    /// A batch above the local leader epoch (its epoch): EPOCH_FENCING, nothing appended.
    Fence(i32),
    /// The source truncated below our log end (an unclean election there): ULE_RECOVERY if the mirror
    /// allows it, else FAILED without retries. Nothing was cut.
    SourceTruncated(SourceTruncation),
}

/// An answer that was handled: the source's high watermark when records (or none) were taken, `None`
/// when it truncated or learned the source's epoch instead (the next round continues).
#[derive(Default)]
pub(super) struct Fetched {
    pub(super) high_watermark: Option<i64>,
    /// Batches were appended (the log may need the round's flush).
    pub(super) appended: bool,
    /// The answer carried records (it used the round's budget: rotation moves past it).
    pub(super) took_records: bool,
    /// The local leader epoch is to be bumped to this (the epoch rule, `fencing`), before the
    /// partition's next append.
    pub(super) bump_to: Option<i32>,
}

/// PREPARING (§2.3): truncate to the end of the last mirrored epoch the source reports. Returns
/// whether anything was removed.
pub(super) fn prepare(node: &Node, source: &dyn MirrorSource, w: &Work) -> Result<bool, Error> {
    let lme = source
        .last_mirrored_epoch(&node.cluster_id(), w.key.topic_id, w.partition)
        .map_err(|e| source_error(&source.describe(), e))?;
    let log = partition_log(node, w)?;
    let leo = log.log_end_offset();
    let target = if lme < 0 {
        0
    } else {
        match log.latest_epoch() {
            None => 0,
            Some(latest) if lme > latest => {
                return Err(Error::Refused(format!(
                    "{}-{}: the source's last mirrored epoch {lme} is above every local epoch (latest {latest}); \
                     refusing to truncate the log (was data lost here?)",
                    w.topic, w.partition
                )));
            }
            Some(_) => log.end_offset_for_epoch(lme).map_or(0, |(_, o)| o),
        }
    };
    let mut truncated = false;
    if target < leo || (target == 0 && log.log_start_offset() > 0) {
        log.truncate_to(target)?;
        truncated = true;
    }
    if lme < 0 || log.log_end_offset() == 0 {
        return Ok(truncated);
    }
    // A failback: what this log wrote after the source's copy of it ended in the LME's own epoch
    // (a stray write on the old primary) is found by the follower's divergence rule, here, so that a
    // divergence while MIRRORING always means the source truncated.
    let mut source_epoch = 0;
    let (aligned, cuts) = fencing::align(node, source, w, &mut source_epoch)?;
    if !aligned {
        return Err(Error::Source {
            source_name: source.describe(),
            message: format!(
                "{}-{}: still diverging from the source after aligning down to offset {}",
                w.topic,
                w.partition,
                log.log_end_offset()
            ),
        });
    }
    Ok(truncated || cuts > 0)
}

/// The isolation a mirror fetches with, by its stop mode: a `truncate` mirror reads up to the source's
/// LSO (the seed design), an `abort` mirror up to its high watermark, open transactions included (the
/// reference forks: its stop aborts them instead of cutting them off).
pub(super) fn fetch_isolation(node: &Node, mirror: &str) -> Isolation {
    match lock(&node.meta).mirrors.get(mirror).map(|m| m.stop_mode) {
        Some(StopMode::Abort) => Isolation::ReadUncommitted,
        Some(StopMode::Truncate) | None => Isolation::ReadCommitted,
    }
}

/// The fetch request of a MIRRORING partition (from its log end, at the source leader epoch we believe
/// in), with its log. `max_bytes` is the partition's limit (`fetch_max_bytes`, never above the round's cap).
pub(super) fn request(
    node: &Node,
    w: &Work,
    source_epoch: i32,
    max_bytes: usize,
    isolation: Isolation,
) -> Result<(Arc<PartitionLog>, FetchRequest), Error> {
    let log = partition_log(node, w)?;
    let request = FetchRequest {
        topic: w.topic.clone(),
        topic_id: w.key.topic_id,
        partition: w.partition,
        fetch_offset: log.log_end_offset(),
        last_fetched_epoch: log.latest_epoch(),
        current_leader_epoch: source_epoch,
        max_bytes,
        isolation,
    };
    Ok((log, request))
}

/// One partition's answer of a round, by Kafka's follower rules and the reference's epoch rule
/// (`fencing`). `source_epoch` is the source leader epoch the request carried; fencing updates it,
/// and the partition fetches at it next round (not again within this one). `local_epoch` is the
/// partition's leader epoch here when it was asked. Appended batches are not flushed here: the round
/// flushes the logs that need it together.
pub(super) fn handle(
    source: &dyn MirrorSource,
    w: &Work,
    (log, local_epoch): (&PartitionLog, i32),
    answer: Result<FetchResponse, SourceError>,
    source_epoch: &mut i32,
    report: &mut TickReport,
) -> Result<Fetched, FetchOutcome> {
    let response = match answer {
        Ok(r) => r,
        Err(SourceError::FencedLeaderEpoch { leader_epoch }) if leader_epoch != *source_epoch => {
            *source_epoch = leader_epoch;
            report.epochs_learned += 1;
            return Ok(Fetched::default());
        }
        Err(SourceError::UnknownLeaderEpoch) => {
            // Our idea of the source epoch is ahead of the source's metadata: rediscover it.
            let was = std::mem::replace(source_epoch, 0);
            return Err(FetchOutcome::Backoff(format!(
                "{}: UNKNOWN_LEADER_EPOCH at epoch {was}",
                source.describe()
            )));
        }
        Err(SourceError::OffsetOutOfRange) => {
            out_of_range(source, w, log, report)?;
            return Ok(Fetched::default());
        }
        Err(SourceError::UnknownTopicOrPartition(what)) => {
            return Err(FetchOutcome::Fail(Error::Refused(format!(
                "the source topic is gone ({what}); remove it from the mirror to make it writable"
            ))));
        }
        Err(e) => return Err(FetchOutcome::Fail(source_error(&source.describe(), e))),
    };
    if let Some((epoch, end)) = response.diverging_epoch {
        let target = fencing::divergence_target(log, epoch, end);
        if target < log.log_end_offset() {
            return Err(FetchOutcome::SourceTruncated(SourceTruncation {
                diverging: Some((epoch, end)),
                target,
                log_end_offset: log.log_end_offset(),
                latest_epoch: log.latest_epoch(),
            }));
        }
        return Ok(Fetched::default());
    }
    let whole = whole_batches(&response.records);
    let bump_to = match fencing::check(
        local_epoch,
        *source_epoch,
        fencing::last_batch_epoch(&response.records[..whole]),
    ) {
        EpochCheck::Append { bump_to } => bump_to,
        EpochCheck::Fence { batch_epoch } => return Err(FetchOutcome::Fence(batch_epoch)),
        EpochCheck::StaleMetadata { batch_epoch } => {
            let fetched_at = std::mem::replace(source_epoch, 0);
            return Err(FetchOutcome::Fail(Error::Source {
                source_name: source.describe(),
                message: format!(
                    "{}-{}: a fetched batch carries leader epoch {batch_epoch}, above the source \
                     leader epoch {fetched_at} it was fetched at (stale metadata): refreshing",
                    w.topic, w.partition
                ),
            }));
        }
    };
    if whole > 0 {
        let info = log
            .append_as_mirror_unflushed(&response.records[..whole])
            .map_err(|e| FetchOutcome::Fail(e.into()))?;
        report.batches_appended += info.batches as u64;
        report.bytes_appended += info.bytes as u64;
    }
    let start = response.log_start_offset.min(log.log_end_offset());
    if start > log.log_start_offset() {
        log.increment_log_start_offset(start)
            .map_err(|e| FetchOutcome::Fail(e.into()))?;
    }
    Ok(Fetched {
        high_watermark: Some(response.high_watermark),
        appended: whole > 0,
        took_records: !response.records.is_empty(),
        bump_to,
    })
}

/// OFFSET_OUT_OF_RANGE (§2.6): behind the source's start -> restart there; ahead of its end -> cut.
fn out_of_range(
    source: &dyn MirrorSource,
    w: &Work,
    log: &PartitionLog,
    report: &mut TickReport,
) -> Result<(), FetchOutcome> {
    let (start, end) = source
        .list_offsets(&w.topic, w.key.topic_id, w.partition)
        .map_err(|e| FetchOutcome::Fail(source_error(&source.describe(), e)))?;
    let leo = log.log_end_offset();
    let r = if end < leo {
        // The source's log ends below ours: it truncated (an unclean election there).
        return Err(FetchOutcome::SourceTruncated(SourceTruncation {
            diverging: None,
            target: end,
            log_end_offset: leo,
            latest_epoch: log.latest_epoch(),
        }));
    } else if start > leo {
        log.truncate_fully_and_start_at(start)
    } else {
        return Err(FetchOutcome::Backoff(format!(
            "{}: OFFSET_OUT_OF_RANGE at {leo} inside the source's range [{start}, {end}]",
            source.describe()
        )));
    };
    r.map_err(|e| FetchOutcome::Fail(e.into()))?;
    report.truncations += 1;
    Ok(())
}

/// The length of the complete batches at the front of `bytes` (a fetch may end in a partial batch).
fn whole_batches(bytes: &[u8]) -> usize {
    let mut end = 0;
    for b in Batches::new(bytes).without_crc() {
        match b {
            Ok(b) => end = (b.position() as usize) + b.size_in_bytes(),
            Err(_) => break,
        }
    }
    end
}

/// A round's partition that was asked for: its work, the epoch it asked at, its log, its leader
/// epoch here.
type Asked = Option<(Work, i32, Arc<PartitionLog>, i32)>;

impl Manager {
    /// One mirror's part of a fetch round: every due partition of it in one
    /// [`MirrorSource::fetch_many`], in rotated order, within the round's cap; each answer handled by
    /// the per-partition rules ([`handle`]) and dropped before the next. Partitions that appended go
    /// into `appended` for the round's flush.
    pub(super) fn fetch_from(
        &self,
        mirror: &str,
        mut partitions: Vec<(Work, PartitionRuntime)>,
        now: i64,
        report: &mut TickReport,
        appended: &mut Vec<(Work, Arc<PartitionLog>)>,
    ) {
        let source = match self.source_for(mirror) {
            Ok(s) => s,
            Err(e) => {
                for (w, _) in &partitions {
                    let error = source_error(mirror, e.clone());
                    self.fetch_done(w, Err(FetchOutcome::Fail(error)), now, report);
                }
                return;
            }
        };
        self.rotate(mirror, &mut partitions);
        let cap = self.settings.fetch_response_max_bytes.max(1);
        let partition_max = self.settings.fetch_max_bytes.clamp(1, cap);
        let mut asked: Vec<Asked> = Vec::with_capacity(partitions.len());
        let mut requests = Vec::with_capacity(partitions.len());
        let isolation = fetch_isolation(&self.node, mirror);
        for (w, rt) in partitions {
            match request(&self.node, &w, rt.source_epoch, partition_max, isolation) {
                Ok((log, r)) => {
                    let local_epoch = self.node.leader_epoch(&w.topic, w.partition).unwrap_or(0);
                    asked.push(Some((w, rt.source_epoch, log, local_epoch)));
                    requests.push(r);
                }
                Err(e) => self.fetch_done(&w, Err(FetchOutcome::Fail(e)), now, report),
            }
        }
        if requests.is_empty() {
            return;
        }
        let mut last_served = None;
        let mut bumps = Vec::new();
        // Each answer is appended and dropped as it arrives: what is held is one answer from a source
        // that streams them (a local source), at most the cap from one that answers all at once.
        source.fetch_each(&requests, cap, &mut |i, answer| {
            // An index the request did not have, or one answered twice, is not ours to handle.
            let Some((w, mut epoch, log, local)) = asked.get_mut(i).and_then(Option::take) else {
                return;
            };
            let outcome = handle(
                source.as_ref(),
                &w,
                (&log, local),
                answer,
                &mut epoch,
                report,
            );
            self.update_runtime(&w, |r| r.source_epoch = epoch);
            let (took, wrote) = outcome
                .as_ref()
                .map_or((false, false), |f| (f.took_records, f.appended));
            if let Some(target) = outcome.as_ref().ok().and_then(|f| f.bump_to) {
                bumps.push((w.clone(), target));
            }
            if took {
                last_served = Some((w.topic.clone(), w.partition));
            }
            self.fetch_done(&w, outcome, now, report);
            if wrote {
                appended.push((w, log));
            }
        });
        if let Some(key) = last_served {
            lock(&self.fetch_rotation).insert(mirror.to_owned(), key);
        }
        self.bump_epochs(bumps, now, report);
    }

    /// The round's proactive epoch bumps (`fencing`: a source epoch within the threshold of the local
    /// one), in one `cluster.json` write, before any of their partitions appends again. A failed write
    /// leaves them to the next round (what was appended is at or below the local epoch still).
    fn bump_epochs(&self, bumps: Vec<(Work, i32)>, now: i64, report: &mut TickReport) {
        let due: Vec<(&str, i32, i32)> = bumps
            .iter()
            .filter(|(w, target)| {
                self.node.leader_epoch(&w.topic, w.partition).unwrap_or(0) < *target
            })
            .map(|(w, target)| (w.topic.as_str(), w.partition, *target))
            .collect();
        if due.is_empty() {
            return;
        }
        match self.node.bump_leader_epochs(&due) {
            Ok(epochs) => {
                report.epoch_bumps += epochs.len() as u64;
                tracing::info!(
                    partitions = epochs.len(),
                    "local leader epochs bumped above the source's"
                );
            }
            Err(e) => {
                for (w, _) in &bumps {
                    let until = now + self.settings.fetch_backoff_ms;
                    self.update_runtime(w, |r| r.not_before_ms = until);
                    report.errors.push((
                        w.topic.clone(),
                        w.partition,
                        format!("bumping the leader epoch above the source's failed: {e}"),
                    ));
                }
            }
        }
    }

    /// Orders a mirror's partitions for its round: by (topic, partition), starting after the partition
    /// its last round took records from last. A budget that runs out then serves the partitions it did
    /// not reach first next time, as Kafka's fetcher moves the partitions that returned data to the end.
    fn rotate(&self, mirror: &str, partitions: &mut [(Work, PartitionRuntime)]) {
        partitions.sort_by(|(a, _), (b, _)| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        let Some((topic, partition)) = lock(&self.fetch_rotation).get(mirror).cloned() else {
            return;
        };
        let start = partitions.partition_point(|(w, _)| {
            (w.topic.as_str(), w.partition) <= (topic.as_str(), partition)
        });
        partitions.rotate_left(start);
    }

    /// What a partition's answer leaves in its runtime: a high watermark learned ends a backoff and a
    /// FAILED episode's count; a backoff waits `fetch_backoff_ms`; a failure moves it to FAILED.
    fn fetch_done(
        &self,
        w: &Work,
        outcome: Result<Fetched, FetchOutcome>,
        now: i64,
        report: &mut TickReport,
    ) {
        let done = match outcome {
            Ok(fetched) => {
                if let Some(hw) = fetched.high_watermark {
                    self.update_runtime(w, |r| {
                        r.source_high_watermark = Some(hw);
                        r.not_before_ms = 0;
                        r.failures = 0;
                    });
                }
                Ok(())
            }
            Err(FetchOutcome::Backoff(msg)) => {
                let until = now + self.settings.fetch_backoff_ms;
                self.update_runtime(w, |r| r.not_before_ms = until);
                report.errors.push((w.topic.clone(), w.partition, msg));
                Ok(())
            }
            Err(FetchOutcome::Fail(e)) => self.fail(w, MirrorState::Mirroring, e, now, report),
            Err(FetchOutcome::Fence(batch_epoch)) => {
                self.update_runtime(w, |r| r.fence_epoch = r.fence_epoch.max(batch_epoch));
                let value = self.entering(w, MirrorState::Mirroring, MirrorState::EpochFencing);
                self.transition(w, value, report)
            }
            Err(FetchOutcome::SourceTruncated(t)) => self.source_truncated(w, t, now, report),
        };
        if let Err(e) = done {
            self.unrecorded_error(w, e, now, report);
        }
    }

    /// A source that truncated below our log end while mirroring: ULE_RECOVERY when the mirror allows
    /// unclean elections (`mirror.support.unclean.leader.election`), else FAILED without retries,
    /// naming the partition, the offsets and the epochs (nothing is cut: the records the source lost
    /// stay here until the operator decides).
    fn source_truncated(
        &self,
        w: &Work,
        t: SourceTruncation,
        now: i64,
        report: &mut TickReport,
    ) -> Result<(), Error> {
        let allowed = self
            .node
            .metadata()
            .mirrors
            .get(&w.key.mirror)
            .is_some_and(|m| m.support_unclean_leader_election);
        tracing::warn!(key = ?w.key, ?t.diverging, t.target, t.log_end_offset, allowed, "the source truncated below our log end (unclean leader election)");
        if !allowed {
            return self.fail(w, MirrorState::Mirroring, t.refusal(w), now, report);
        }
        let value = self.entering(w, MirrorState::Mirroring, MirrorState::UleRecovery);
        self.transition(w, value, report)
    }

    /// The round's flush: the logs it appended to whose topic asks for a flush now (`flush.messages`,
    /// `flush.ms`; Kafka's defaults never do) are flushed together, in one submission where the storage
    /// syncs files together (io_uring), not one sync per partition. A failed flush is met again by each
    /// log's own flush, so only the partitions whose log failed go to FAILED.
    pub(super) fn flush_round(
        &self,
        appended: Vec<(Work, Arc<PartitionLog>)>,
        now: i64,
        report: &mut TickReport,
    ) {
        let due: Vec<_> = appended
            .into_iter()
            .filter(|(_, log)| log.flush_due())
            .collect();
        let logs: Vec<&PartitionLog> = due.iter().map(|(_, log)| log.as_ref()).collect();
        if logs.is_empty() || PartitionLog::flush_many(&logs).is_ok() {
            return;
        }
        for (w, log) in &due {
            if let Err(e) = log.flush(log.log_end_offset()) {
                self.fetch_done(w, Err(FetchOutcome::Fail(e.into())), now, report);
            }
        }
    }
}
