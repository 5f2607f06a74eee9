//! Fetch and ListOffsets at a partition's leader, following a leader that moved, and the mapping of
//! their partition errors onto [`SourceError`]s.

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{FetchRequest as KafkaFetch, ListOffsetsRequest};
use kafka_protocol::ResponseError;
use klog_log::checkpoint::TopicId;
use uuid::Uuid;

use super::broker_fetch::{FETCH_MIN_VERSION, FETCH_RESPONSE_SLACK, FETCH_TOPIC_ID_VERSION};
use super::brokers::Brokers;
use super::{topic_name, PartitionLeader, NO_LEADER};
use crate::kafka_wire::{error_name, CONTROL_RESPONSE_LIMIT};
use crate::source::{FetchRequest, FetchResponse, Isolation, SourceError};

/// How one fetch attempt at one broker ended, when it did not return data.
pub(super) enum Attempt {
    /// The broker we asked does not lead the partition (any more), or cannot be reached: the cached
    /// leader has been corrected or dropped, and the fetch may go again where the partition is led now.
    LeaderMoved(SourceError),
    Failed(SourceError),
}

impl Attempt {
    fn into_error(self) -> SourceError {
        match self {
            Attempt::LeaderMoved(e) | Attempt::Failed(e) => e,
        }
    }
}

/// What a fetch's partition error asks us to do (the mapping, testable without a broker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PartitionFailure {
    /// FENCED_LEADER_EPOCH, with the response's CurrentLeader when it carried an epoch (its leader id
    /// may still be -1).
    Fenced(Option<PartitionLeader>),
    /// NOT_LEADER_OR_FOLLOWER: the broker no longer leads; its CurrentLeader when it names one
    /// (KIP-951, Fetch v16+). The fetch is sent again at once where the partition is led now.
    NotLeader(Option<PartitionLeader>),
    UnknownLeaderEpoch,
    OffsetOutOfRange,
    /// UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID: gone only if Metadata agrees.
    UnknownTopic(String),
    /// Refresh metadata and try again later (every other retriable error).
    Retriable(String),
    /// A refusal that retrying does not cure (authorization, a corrupt message, ...).
    Fatal(String),
}

/// `current_leader` is the response's CurrentLeader (Kafka's default: leader -1, epoch -1).
pub(crate) fn classify(code: i16, current_leader: PartitionLeader) -> PartitionFailure {
    let name = error_name(code);
    let epoch_known = current_leader.leader_epoch >= 0;
    match code {
        74 => PartitionFailure::Fenced(epoch_known.then_some(current_leader)),
        6 => PartitionFailure::NotLeader(
            (epoch_known && current_leader.leader_id >= 0).then_some(current_leader),
        ),
        75 => PartitionFailure::UnknownLeaderEpoch,
        1 => PartitionFailure::OffsetOutOfRange,
        3 | 100 => PartitionFailure::UnknownTopic(name),
        _ => match ResponseError::try_from_code(code) {
            Some(e) if e.is_retriable() => PartitionFailure::Retriable(name),
            _ => PartitionFailure::Fatal(format!("{name} (error code {code})")),
        },
    }
}

/// A fetched partition's data, or the failure its error code names.
pub(crate) fn partition_result(p: &PartitionData) -> Result<FetchResponse, PartitionFailure> {
    if p.error_code != 0 {
        let current = PartitionLeader {
            leader_id: p.current_leader.leader_id.0,
            leader_epoch: p.current_leader.leader_epoch,
        };
        return Err(classify(p.error_code, current));
    }
    let d = &p.diverging_epoch;
    Ok(FetchResponse {
        high_watermark: p.high_watermark,
        last_stable_offset: p.last_stable_offset,
        log_start_offset: p.log_start_offset,
        diverging_epoch: (d.epoch >= 0 && d.end_offset >= 0).then_some((d.epoch, d.end_offset)),
        records: p.records.as_ref().map_or_else(Vec::new, |r| r.to_vec()),
    })
}

/// One fetch at the partition's leader. When that broker cannot be reached or no longer leads, the
/// fetch goes once more to where the partition is led now (the response's CurrentLeader, else
/// Metadata from the other brokers), as Kafka's own fetchers follow a moved leader: a leader that
/// moved while the brokers stay up is never a failure. Only a leader that is still unknown or
/// unreachable fails the call (the first failure, naming the broker, is returned).
pub(super) async fn fetch(
    b: &mut Brokers,
    req: &FetchRequest,
) -> Result<FetchResponse, SourceError> {
    let (address, _) = b
        .leader(&req.topic, req.topic_id, req.partition, false)
        .await?;
    let first = match fetch_from(b, req, &address).await {
        Err(Attempt::LeaderMoved(e)) => e,
        other => return other.map_err(Attempt::into_error),
    };
    match b
        .leader(&req.topic, req.topic_id, req.partition, false)
        .await
    {
        Ok((now, _)) if now != address => {
            fetch_from(b, req, &now).await.map_err(Attempt::into_error)
        }
        Ok(_) | Err(SourceError::Unavailable(_)) => Err(first),
        Err(e) => Err(e),
    }
}

/// One fetch sent to `address`.
pub(super) async fn fetch_from(
    b: &mut Brokers,
    req: &FetchRequest,
    address: &str,
) -> Result<FetchResponse, Attempt> {
    let max_bytes = i32::try_from(req.max_bytes).unwrap_or(i32::MAX).max(1);
    let limit = (max_bytes as usize).saturating_add(FETCH_RESPONSE_SLACK);
    let build = |version: i16| {
        let partition = FetchPartition::default()
            .with_partition(req.partition)
            .with_current_leader_epoch(req.current_leader_epoch)
            .with_fetch_offset(req.fetch_offset)
            .with_last_fetched_epoch(req.last_fetched_epoch.unwrap_or(-1))
            .with_log_start_offset(-1)
            .with_partition_max_bytes(max_bytes);
        let topic = if version >= FETCH_TOPIC_ID_VERSION {
            FetchTopic::default().with_topic_id(Uuid::from_bytes(req.topic_id.0))
        } else {
            FetchTopic::default().with_topic(topic_name(&req.topic))
        };
        KafkaFetch::default()
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(max_bytes)
            .with_isolation_level(match req.isolation {
                Isolation::ReadUncommitted => 0,
                Isolation::ReadCommitted => 1,
            })
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![topic.with_partitions(vec![partition])])
    };
    let (response, version) = match b.call(address, FETCH_MIN_VERSION, limit, build).await {
        Ok(r) => r,
        Err(e @ SourceError::Unavailable(_)) => {
            b.forget_leader(&req.topic);
            return Err(Attempt::LeaderMoved(e));
        }
        Err(e) => return Err(Attempt::Failed(e)),
    };
    let what = format!("{}-{} at {address}", req.topic, req.partition);
    if response.error_code != 0 {
        b.forget_leader(&req.topic);
        return Err(Attempt::Failed(SourceError::Unavailable(format!(
            "{what}: Fetch: {}",
            error_name(response.error_code)
        ))));
    }
    let data = response
        .responses
        .iter()
        .filter(|t| {
            if version >= FETCH_TOPIC_ID_VERSION {
                t.topic_id.as_bytes() == &req.topic_id.0
            } else {
                t.topic.0.as_str() == req.topic
            }
        })
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == req.partition)
        .ok_or_else(|| {
            Attempt::Failed(SourceError::Unavailable(format!(
                "{what}: the Fetch response has no such partition"
            )))
        })?;
    match partition_result(data) {
        Ok(r) => Ok(r),
        Err(PartitionFailure::NotLeader(named)) => {
            b.learn_leader(&req.topic, req.partition, named);
            Err(Attempt::LeaderMoved(SourceError::Unavailable(format!(
                "{what}: NOT_LEADER_OR_FOLLOWER"
            ))))
        }
        Err(failure) => fetch_failure(b, req, &what, failure)
            .await
            .map_err(Attempt::Failed),
    }
}

pub(super) async fn fetch_failure(
    b: &mut Brokers,
    req: &FetchRequest,
    what: &str,
    failure: PartitionFailure,
) -> Result<FetchResponse, SourceError> {
    tracing::warn!(
        what,
        ?failure,
        current_leader_epoch = req.current_leader_epoch,
        "fetch from the source failed"
    );
    match failure {
        PartitionFailure::Fenced(Some(current)) => {
            b.fenced
                .push((req.current_leader_epoch, current.leader_epoch));
            // The manager fetches again at once at the new epoch: send it to the leader named.
            b.learn_leader(&req.topic, req.partition, Some(current));
            Err(SourceError::FencedLeaderEpoch {
                leader_epoch: current.leader_epoch,
            })
        }
        PartitionFailure::Fenced(None) => {
            let (_, p) = b
                .leader(&req.topic, req.topic_id, req.partition, true)
                .await?;
            if p.leader_epoch > req.current_leader_epoch {
                Err(SourceError::FencedLeaderEpoch {
                    leader_epoch: p.leader_epoch,
                })
            } else {
                Err(SourceError::Unavailable(format!(
                    "{what}: FENCED_LEADER_EPOCH at epoch {} but Metadata still says {}",
                    req.current_leader_epoch, p.leader_epoch
                )))
            }
        }
        PartitionFailure::UnknownLeaderEpoch => Err(SourceError::UnknownLeaderEpoch),
        PartitionFailure::OffsetOutOfRange => Err(SourceError::OffsetOutOfRange),
        PartitionFailure::UnknownTopic(name) => {
            // Gone only if Metadata agrees; otherwise a broker that does not host it (yet).
            b.leader(&req.topic, req.topic_id, req.partition, true)
                .await?;
            Err(SourceError::Unavailable(format!(
                "{what}: {name} although Metadata names it"
            )))
        }
        PartitionFailure::Retriable(name) => {
            b.forget_leader(&req.topic);
            Err(SourceError::Unavailable(format!("{what}: {name}")))
        }
        PartitionFailure::NotLeader(named) => {
            b.learn_leader(&req.topic, req.partition, named);
            Err(SourceError::Unavailable(format!(
                "{what}: NOT_LEADER_OR_FOLLOWER"
            )))
        }
        PartitionFailure::Fatal(m) => Err(SourceError::Refused(format!("{what}: {m}"))),
    }
}

pub(super) async fn list_offset(
    b: &mut Brokers,
    topic: &str,
    topic_id: TopicId,
    partition: i32,
    timestamp: i64,
) -> Result<i64, SourceError> {
    let (address, _) = b.leader(topic, topic_id, partition, false).await?;
    let build = |_| {
        ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_isolation_level(0)
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(timestamp)])])
    };
    let (response, _) = b.call(&address, 1, CONTROL_RESPONSE_LIMIT, build).await?;
    let what = format!("{topic}-{partition} at {address}");
    let p = response
        .topics
        .iter()
        .filter(|t| t.name.0.as_str() == topic)
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == partition)
        .ok_or_else(|| {
            SourceError::Unavailable(format!(
                "{what}: the ListOffsets response has no such partition"
            ))
        })?;
    if p.error_code == 0 {
        return Ok(p.offset);
    }
    match classify(p.error_code, NO_LEADER) {
        PartitionFailure::UnknownTopic(name) => {
            b.leader(topic, topic_id, partition, true).await?;
            Err(SourceError::Unavailable(format!(
                "{what}: ListOffsets: {name} although Metadata names it"
            )))
        }
        PartitionFailure::Fatal(m) => {
            Err(SourceError::Refused(format!("{what}: ListOffsets: {m}")))
        }
        _ => {
            b.forget_leader(topic);
            Err(SourceError::Unavailable(format!(
                "{what}: ListOffsets: {}",
                error_name(p.error_code)
            )))
        }
    }
}
