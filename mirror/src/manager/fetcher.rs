//! The fetcher's side of the manager: PREPARING's truncation to the last mirrored epoch (KIP-1279 §2.3)
//! and one fetch of a MIRRORING partition (§2.6, §3.3) with Kafka's follower rules for fencing,
//! divergence and out-of-range offsets.

use klog_log::format::Batches;
use klog_log::partition_log::PartitionLog;

use super::{MirrorSettings, TickReport, Work};
use crate::error::Error;
use crate::node::Node;
use crate::source::{FetchRequest, FetchResponse, Isolation, MirrorSource, SourceError};

/// Why a fetch did not complete.
pub(super) enum FetchOutcome {
    /// Retry the fetch after `mirror.fetch.backoff.ms`; the state stays MIRRORING.
    Backoff(String),
    /// Move the partition to FAILED.
    Fail(Error),
}

/// A fetch that completed: the source's high watermark when records (or none) were taken, `None`
/// when the fetch truncated instead (the next fetch continues).
pub(super) struct Fetched {
    pub(super) high_watermark: Option<i64>,
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

/// The fetch a MIRRORING partition sends now: from its log end, at the source epoch we believe in.
pub(super) fn fetch_request(
    log: &PartitionLog,
    settings: &MirrorSettings,
    w: &Work,
    source_epoch: i32,
) -> FetchRequest {
    FetchRequest {
        topic: w.topic.clone(),
        topic_id: w.key.topic_id,
        partition: w.partition,
        fetch_offset: log.log_end_offset(),
        last_fetched_epoch: log.latest_epoch(),
        current_leader_epoch: source_epoch,
        max_bytes: settings.fetch_max_bytes,
        isolation: Isolation::ReadCommitted,
    }
}

/// Takes what one fetch of a MIRRORING partition answered. `source_epoch` is the source leader epoch
/// we believe in; a fencing error updates it (and the fetch is sent again at once, alone, at the
/// learned epoch).
pub(super) fn take_fetched(
    source: &dyn MirrorSource,
    settings: &MirrorSettings,
    w: &Work,
    log: &PartitionLog,
    answer: Result<FetchResponse, SourceError>,
    source_epoch: &mut i32,
    report: &mut TickReport,
) -> Result<Fetched, FetchOutcome> {
    let mut answer = answer;
    let response = loop {
        match answer {
            Ok(r) => break r,
            Err(SourceError::FencedLeaderEpoch { leader_epoch })
                if leader_epoch != *source_epoch =>
            {
                *source_epoch = leader_epoch;
                answer = source.fetch(&fetch_request(log, settings, w, *source_epoch));
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
                return Ok(Fetched {
                    high_watermark: None,
                });
            }
            Err(SourceError::UnknownTopicOrPartition(what)) => {
                return Err(FetchOutcome::Fail(Error::Refused(format!(
                    "the source topic is gone ({what}); remove it from the mirror to make it writable"
                ))));
            }
            Err(e) => return Err(FetchOutcome::Fail(source_error(&source.describe(), e))),
        }
    };
    if let Some((epoch, end)) = response.diverging_epoch {
        // Kafka's follower rule: in the same epoch, the smaller end; otherwise our end of that epoch
        // (the next fetch finds the rest).
        let target = match log.end_offset_for_epoch(epoch) {
            Some((e, o)) if e == epoch => end.min(o),
            Some((_, o)) => o,
            None => end.min(log.log_end_offset()),
        };
        log.truncate_to(target)
            .map_err(|e| FetchOutcome::Fail(e.into()))?;
        report.truncations += 1;
        return Ok(Fetched {
            high_watermark: None,
        });
    }
    let whole = whole_batches(&response.records);
    if whole > 0 {
        let info = log
            .append_as_mirror(&response.records[..whole])
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
