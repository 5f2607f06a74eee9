//! The fetcher's side of the manager: PREPARING's truncation to the last mirrored epoch (KIP-1279 §2.3)
//! and the fetch round of the MIRRORING partitions (§2.6, §3.3): one [`MirrorSource::fetch_each`] per
//! mirror's source with every due partition, in rotated order, within `fetch_response_max_bytes`; each
//! answer handled by Kafka's follower rules for fencing, divergence and out-of-range offsets; then one
//! flush of the logs that need one (docs/mirroring.md, "The fetch round").

use std::sync::Arc;

use klog_log::format::Batches;
use klog_log::partition_log::PartitionLog;

use super::{Manager, PartitionRuntime, TickReport, Work};
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
}

pub(super) fn source_error(source: &str, e: SourceError) -> Error {
    match e {
        SourceError::Refused(m)
            if m.contains("cluster id changed") || m.contains("is this cluster") =>
        {
            Error::Refused(m)
        }
        other => Error::Source {
            source_name: source.to_owned(),
            message: other.to_string(),
        },
    }
}

pub(super) fn partition_log(node: &Node, w: &Work) -> Result<std::sync::Arc<PartitionLog>, Error> {
    node.log(&w.topic, w.partition)
        .ok_or_else(|| Error::Refused(format!("{}-{} has no log", w.topic, w.partition)))
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
    if target < leo || (target == 0 && log.log_start_offset() > 0) {
        log.truncate_to(target)?;
        return Ok(true);
    }
    Ok(false)
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

/// One partition's answer of a round, by Kafka's follower rules. `source_epoch` is the source leader
/// epoch the request carried; fencing updates it, and the partition fetches at it next round (not
/// again within this one). Appended batches are not flushed here: the round flushes the logs that
/// need it together.
pub(super) fn handle(
    source: &dyn MirrorSource,
    w: &Work,
    log: &PartitionLog,
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
        diverged(log, epoch, end)?;
        report.truncations += 1;
        return Ok(Fetched::default());
    }
    let whole = whole_batches(&response.records);
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
    })
}

/// A diverging epoch: Kafka's follower rule. In the same epoch, the smaller end; otherwise our end of
/// that epoch (the next fetch finds the rest).
fn diverged(log: &PartitionLog, epoch: i32, end: i64) -> Result<(), FetchOutcome> {
    let target = match log.end_offset_for_epoch(epoch) {
        Some((e, o)) if e == epoch => end.min(o),
        Some((_, o)) => o,
        None => end.min(log.log_end_offset()),
    };
    log.truncate_to(target)
        .map_err(|e| FetchOutcome::Fail(e.into()))
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
        log.truncate_to(end)
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

/// A round's partition that was asked for: its work, the epoch it asked at, its log.
type Asked = Option<(Work, i32, Arc<PartitionLog>)>;

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
                    asked.push(Some((w, rt.source_epoch, log)));
                    requests.push(r);
                }
                Err(e) => self.fetch_done(&w, Err(FetchOutcome::Fail(e)), now, report),
            }
        }
        if requests.is_empty() {
            return;
        }
        let mut last_served = None;
        // Each answer is appended and dropped as it arrives: what is held is one answer from a source
        // that streams them (a local source), at most the cap from one that answers all at once.
        source.fetch_each(&requests, cap, &mut |i, answer| {
            // An index the request did not have, or one answered twice, is not ours to handle.
            let Some((w, mut epoch, log)) = asked.get_mut(i).and_then(Option::take) else {
                return;
            };
            let outcome = handle(source.as_ref(), &w, &log, answer, &mut epoch, report);
            self.update_runtime(&w, |r| r.source_epoch = epoch);
            let (took, wrote) = outcome
                .as_ref()
                .map_or((false, false), |f| (f.took_records, f.appended));
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
        };
        if let Err(e) = done {
            self.unrecorded_error(w, e, now, report);
        }
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
