//! A [`MirrorSource`] over the Kafka protocol: a mirror whose source is `kafka://host:port[,host:port]`
//! fetches from a real Kafka cluster as a consumer (replica id -1, so the source never counts us in
//! its ISR).
//!
//! - Metadata gives the cluster id, a topic's id and partition count, and each partition's leader and
//!   leader epoch; fetches and ListOffsets go to the partition leader. Only the bootstrap addresses and
//!   the brokers the metadata names are ever connected to.
//! - Fetch v12+ (v13+ by topic id when the broker speaks it) carries `CurrentLeaderEpoch` and
//!   `LastFetchedEpoch`, so the source fences us and reports a diverging epoch exactly as it does for
//!   its own followers; records are passed on byte for byte (a partial trailing batch included: the
//!   fetcher drops it).
//! - A leader that moved is followed within the same fetch, as Kafka's own fetchers do: on
//!   NOT_LEADER_OR_FOLLOWER the fetch goes once more to the leader the response's CurrentLeader names
//!   (KIP-951), and when the cached leader refuses connections, to the leader Metadata (asked of the
//!   other brokers) names now. FENCED_LEADER_EPOCH also points the cache at the leader it names, so
//!   the manager's immediate retry at the new epoch goes straight there.
//! - Errors map onto [`SourceError`]: FENCED_LEADER_EPOCH (with the epoch from the response's
//!   CurrentLeader, else from Metadata), UNKNOWN_LEADER_EPOCH, OFFSET_OUT_OF_RANGE, an unknown topic
//!   (only once Metadata confirms it is gone or has another id), and everything retriable (a leader
//!   still unknown or unreachable, a broken connection) as `Unavailable` after a metadata refresh,
//!   which the manager retries with backoff. A connection that failed is retried no sooner than its
//!   own backoff (100 ms doubling to 5 s).
//! - The metadata sync's DescribeConfigs (a topic's DYNAMIC_TOPIC_CONFIG entries) and DescribeAcls
//!   (every binding; none when the source has no authorizer) go to any broker (`admin`).
//! - Kafka has no last-mirrored-epoch lookup: `last_mirrored_epoch` is -1, so PREPARING against Kafka
//!   truncates the local partition to 0 and mirrors it again from the source's log start.
//!
//! The trait is synchronous: the source owns a single-threaded tokio runtime and blocks on it; one
//! call runs at a time.

mod admin;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    FetchRequest as KafkaFetch, ListOffsetsRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};
use kafka_protocol::ResponseError;
use klog_log::checkpoint::TopicId;
use uuid::Uuid;

use crate::acl::AclBinding;
use crate::kafka_wire::{error_name, Connection, CONTROL_RESPONSE_LIMIT};
use crate::source::{
    FetchRequest, FetchResponse, Isolation, MirrorSource, SourceError, SourceTopic,
};

/// The scheme of a Kafka source.
pub const KAFKA_SCHEME: &str = "kafka://";
/// Fetch v12 added `LastFetchedEpoch` and `DivergingEpoch`; v13 fetches by topic id.
const FETCH_MIN_VERSION: i16 = 12;
const FETCH_TOPIC_ID_VERSION: i16 = 13;
/// Metadata v10 added topic ids (v7 leader epochs, v2 the cluster id).
const METADATA_MIN_VERSION: i16 = 10;
/// A fetch response may exceed `max_bytes` by one batch (KIP-74: the first batch is always returned
/// whole), up to the source's `max.message.bytes` (1 MiB by default), plus headers.
const FETCH_RESPONSE_SLACK: usize = 2 << 20;
const RECONNECT_BACKOFF_INITIAL: Duration = Duration::from_millis(100);
const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(5);
const EARLIEST_TIMESTAMP: i64 = -2;
const LATEST_TIMESTAMP: i64 = -1;
/// What a response says when it names no current leader (Kafka's defaults).
const NO_LEADER: PartitionLeader = PartitionLeader {
    leader_id: -1,
    leader_epoch: -1,
};

/// `kafka://host:port[,host:port...]` -> the bootstrap addresses.
pub fn parse_bootstrap(source: &str) -> Result<Vec<String>, String> {
    let list = source
        .strip_prefix(KAFKA_SCHEME)
        .ok_or_else(|| format!("{source:?} does not start with {KAFKA_SCHEME}"))?;
    let mut out = Vec::new();
    for address in list.split(',') {
        let address = address.trim();
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| format!("{source}: {address:?} is not host:port"))?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if bare.is_empty() || bare.contains(['/', '@', '?', '#', ' ']) {
            return Err(format!("{source}: {address:?} has no valid host"));
        }
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => return Err(format!("{source}: {address:?} has no valid port")),
        }
        out.push(address.to_owned());
    }
    Ok(out)
}

/// A partition as Metadata (or a fetch response's CurrentLeader) last described it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PartitionLeader {
    leader_id: i32,
    leader_epoch: i32,
}

/// How one fetch attempt at one broker ended, when it did not return data.
enum Attempt {
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

#[derive(Debug, Clone)]
struct TopicMetadata {
    id: TopicId,
    partitions: BTreeMap<i32, PartitionLeader>,
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

#[derive(Default)]
struct Inner {
    /// Open connections, by address.
    connections: BTreeMap<String, Connection>,
    /// Per address: not before this instant, and the next delay.
    backoff: BTreeMap<String, (Instant, Duration)>,
    /// Node id -> `host:port`, from the latest Metadata.
    brokers: BTreeMap<i32, String>,
    cluster_id: Option<String>,
    topics: BTreeMap<String, TopicMetadata>,
    /// Every FENCED_LEADER_EPOCH whose CurrentLeader carried the epoch, as (sent, carried).
    fenced: Vec<(i32, i32)>,
}

/// A source over the Kafka protocol: `kafka://host:port[,host:port...]` bootstrap brokers, then the leaders Metadata names.
pub struct KafkaSource {
    source: String,
    bootstrap: Vec<String>,
    runtime: tokio::runtime::Runtime,
    inner: Mutex<Inner>,
}

impl KafkaSource {
    /// A source for `kafka://host:port[,host:port]`. Connects lazily, on the first call.
    pub fn new(source: &str) -> Result<KafkaSource, SourceError> {
        let bootstrap = parse_bootstrap(source).map_err(SourceError::Refused)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| SourceError::Unavailable(format!("{source}: tokio runtime: {e}")))?;
        Ok(KafkaSource {
            source: source.to_owned(),
            bootstrap,
            runtime,
            inner: Mutex::new(Inner::default()),
        })
    }

    /// Every FENCED_LEADER_EPOCH this source received with the leader epoch in the response's
    /// CurrentLeader, as (the CurrentLeaderEpoch we sent, the epoch it carried): how a test sees that a
    /// real broker fenced us and the epoch came from the response, not from the Metadata fallback.
    pub fn fenced_leader_epochs(&self) -> Vec<(i32, i32)> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.fenced.clone()
    }

    fn with_inner<T>(&self, f: impl AsyncFnOnce(&mut Inner) -> T) -> T {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        self.runtime.block_on(f(&mut inner))
    }

    /// Sends one request to `address` at the highest version both sides speak (at least `needed`).
    /// A connection that failed is closed; the next call reconnects (after its backoff).
    async fn call<R: Request>(
        inner: &mut Inner,
        address: &str,
        needed: i16,
        limit: usize,
        build: impl FnOnce(i16) -> R,
    ) -> Result<(R::Response, i16), SourceError> {
        if !inner.connections.contains_key(address) {
            if let Some((not_before, _)) = inner.backoff.get(address) {
                let now = Instant::now();
                if now < *not_before {
                    return Err(SourceError::Unavailable(format!(
                        "{address}: not reconnecting for another {} ms after a failure",
                        (*not_before - now).as_millis()
                    )));
                }
            }
            match Connection::open(address).await {
                Ok(c) => {
                    inner.backoff.remove(address);
                    tracing::debug!(address, "connected to a source broker");
                    inner.connections.insert(address.to_owned(), c);
                }
                Err(e) => {
                    let delay = inner
                        .backoff
                        .get(address)
                        .map_or(RECONNECT_BACKOFF_INITIAL, |b| {
                            (b.1 * 2).min(RECONNECT_BACKOFF_MAX)
                        });
                    tracing::warn!(
                        address,
                        error = %e,
                        backoff_ms = delay.as_millis() as u64,
                        "connecting to a source broker failed"
                    );
                    inner
                        .backoff
                        .insert(address.to_owned(), (Instant::now() + delay, delay));
                    return Err(e);
                }
            }
        }
        let conn = inner.connections.get_mut(address).expect("connected above");
        let version = conn.version::<R>(needed)?;
        let request = build(version);
        match conn.call(&request, version, limit).await {
            Ok(r) => Ok((r, version)),
            Err(e) => {
                if matches!(e, SourceError::Unavailable(_)) {
                    tracing::warn!(address, error = %e, "source broker connection dropped");
                    inner.connections.remove(address);
                }
                Err(e)
            }
        }
    }

    /// Metadata for `topics` (none: just brokers and the cluster id), from the first broker that
    /// answers: known brokers first, then the bootstrap addresses. Updates the cache and returns the
    /// response.
    async fn refresh(
        &self,
        inner: &mut Inner,
        topics: &[&str],
    ) -> Result<MetadataResponse, SourceError> {
        let mut addresses: Vec<String> = inner.brokers.values().cloned().collect();
        for b in &self.bootstrap {
            if !addresses.contains(b) {
                addresses.push(b.clone());
            }
        }
        let request_topics: Vec<MetadataRequestTopic> = topics
            .iter()
            .map(|t| MetadataRequestTopic::default().with_name(Some(topic_name(t))))
            .collect();
        let mut last = None;
        for address in addresses {
            let build = |_| {
                MetadataRequest::default()
                    .with_topics(Some(request_topics.clone()))
                    .with_allow_auto_topic_creation(false)
            };
            match Self::call(
                inner,
                &address,
                METADATA_MIN_VERSION,
                CONTROL_RESPONSE_LIMIT,
                build,
            )
            .await
            {
                Ok((response, _)) => {
                    self.absorb(inner, &response, &address)?;
                    return Ok(response);
                }
                Err(e @ SourceError::Unavailable(_)) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            SourceError::Unavailable(format!("{}: no broker to ask", self.source))
        }))
    }

    fn absorb(
        &self,
        inner: &mut Inner,
        m: &MetadataResponse,
        from: &str,
    ) -> Result<(), SourceError> {
        if m.error_code != 0 {
            return Err(SourceError::Unavailable(format!(
                "{from}: Metadata: {}",
                error_name(m.error_code)
            )));
        }
        let cluster_id = m
            .cluster_id
            .as_ref()
            .map(|s| s.as_str().to_owned())
            .ok_or_else(|| {
                SourceError::Refused(format!("{from}: Metadata carries no cluster id"))
            })?;
        if !m.brokers.is_empty() {
            inner.brokers = m
                .brokers
                .iter()
                .map(|b| (b.node_id.0, broker_address(b.host.as_str(), b.port)))
                .collect();
        }
        inner.cluster_id = Some(cluster_id);
        for t in &m.topics {
            let Some(name) = t.name.as_ref().map(|n| n.0.as_str().to_owned()) else {
                continue;
            };
            match t.error_code {
                0 => {
                    let partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            (
                                p.partition_index,
                                PartitionLeader {
                                    leader_id: p.leader_id.0,
                                    leader_epoch: p.leader_epoch,
                                },
                            )
                        })
                        .collect();
                    let id = TopicId(*t.topic_id.as_bytes());
                    inner.topics.insert(name, TopicMetadata { id, partitions });
                }
                _ => {
                    inner.topics.remove(&name);
                }
            }
        }
        Ok(())
    }

    /// The leader of a partition and its epoch, refreshing Metadata when the cache does not know it.
    /// The topic must have `topic_id` at the source.
    async fn leader(
        &self,
        inner: &mut Inner,
        topic: &str,
        topic_id: TopicId,
        partition: i32,
        refresh: bool,
    ) -> Result<(String, PartitionLeader), SourceError> {
        let known = inner
            .topics
            .get(topic)
            .is_some_and(|t| t.partitions.contains_key(&partition));
        if refresh || !known {
            let m = self.refresh(inner, &[topic]).await?;
            if let Some(t) = m
                .topics
                .iter()
                .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
            {
                if t.error_code != 0 && t.error_code != 3 {
                    return Err(SourceError::Unavailable(format!(
                        "{}: Metadata for {topic}: {}",
                        self.source,
                        error_name(t.error_code)
                    )));
                }
            }
        }
        let gone = || {
            SourceError::UnknownTopicOrPartition(format!("{topic}-{partition} at {}", self.source))
        };
        let t = inner.topics.get(topic).ok_or_else(gone)?;
        if t.id != topic_id {
            return Err(SourceError::UnknownTopicOrPartition(format!(
                "{topic} has id {} at {}, not {topic_id}",
                t.id, self.source
            )));
        }
        let p = *t.partitions.get(&partition).ok_or_else(gone)?;
        if p.leader_id < 0 {
            return Err(SourceError::Unavailable(format!(
                "{}: {topic}-{partition} has no leader",
                self.source
            )));
        }
        let address = inner.brokers.get(&p.leader_id).cloned().ok_or_else(|| {
            SourceError::Unavailable(format!(
                "{}: the leader of {topic}-{partition}, node {}, is not among the brokers Metadata names",
                self.source, p.leader_id
            ))
        })?;
        Ok((address, p))
    }

    /// One fetch at the partition's leader. When that broker cannot be reached or no longer leads, the
    /// fetch goes once more to where the partition is led now (the response's CurrentLeader, else
    /// Metadata from the other brokers), as Kafka's own fetchers follow a moved leader: a leader that
    /// moved while the brokers stay up is never a failure. Only a leader that is still unknown or
    /// unreachable fails the call (the first failure, naming the broker, is returned).
    async fn fetch_async(
        &self,
        inner: &mut Inner,
        req: &FetchRequest,
    ) -> Result<FetchResponse, SourceError> {
        let (address, _) = self
            .leader(inner, &req.topic, req.topic_id, req.partition, false)
            .await?;
        let first = match self.fetch_from(inner, req, &address).await {
            Err(Attempt::LeaderMoved(e)) => e,
            other => return other.map_err(Attempt::into_error),
        };
        match self
            .leader(inner, &req.topic, req.topic_id, req.partition, false)
            .await
        {
            Ok((now, _)) if now != address => self
                .fetch_from(inner, req, &now)
                .await
                .map_err(Attempt::into_error),
            Ok(_) | Err(SourceError::Unavailable(_)) => Err(first),
            Err(e) => Err(e),
        }
    }

    /// One fetch sent to `address`.
    async fn fetch_from(
        &self,
        inner: &mut Inner,
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
        let (response, version) =
            match Self::call(inner, address, FETCH_MIN_VERSION, limit, build).await {
                Ok(r) => r,
                Err(e @ SourceError::Unavailable(_)) => {
                    self.forget_leader(inner, &req.topic);
                    return Err(Attempt::LeaderMoved(e));
                }
                Err(e) => return Err(Attempt::Failed(e)),
            };
        let what = format!("{}-{} at {address}", req.topic, req.partition);
        if response.error_code != 0 {
            self.forget_leader(inner, &req.topic);
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
                self.learn_leader(inner, &req.topic, req.partition, named);
                Err(Attempt::LeaderMoved(SourceError::Unavailable(format!(
                    "{what}: NOT_LEADER_OR_FOLLOWER"
                ))))
            }
            Err(failure) => self
                .fetch_failure(inner, req, &what, failure)
                .await
                .map_err(Attempt::Failed),
        }
    }

    async fn fetch_failure(
        &self,
        inner: &mut Inner,
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
                inner
                    .fenced
                    .push((req.current_leader_epoch, current.leader_epoch));
                // The manager fetches again at once at the new epoch: send it to the leader named.
                self.learn_leader(inner, &req.topic, req.partition, Some(current));
                Err(SourceError::FencedLeaderEpoch {
                    leader_epoch: current.leader_epoch,
                })
            }
            PartitionFailure::Fenced(None) => {
                let (_, p) = self
                    .leader(inner, &req.topic, req.topic_id, req.partition, true)
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
                self.leader(inner, &req.topic, req.topic_id, req.partition, true)
                    .await?;
                Err(SourceError::Unavailable(format!(
                    "{what}: {name} although Metadata names it"
                )))
            }
            PartitionFailure::Retriable(name) => {
                self.forget_leader(inner, &req.topic);
                Err(SourceError::Unavailable(format!("{what}: {name}")))
            }
            PartitionFailure::NotLeader(named) => {
                self.learn_leader(inner, &req.topic, req.partition, named);
                Err(SourceError::Unavailable(format!(
                    "{what}: NOT_LEADER_OR_FOLLOWER"
                )))
            }
            PartitionFailure::Fatal(m) => Err(SourceError::Refused(format!("{what}: {m}"))),
        }
    }

    /// Drops a topic's cached leaders so the next call asks Metadata.
    fn forget_leader(&self, inner: &mut Inner, topic: &str) {
        inner.topics.remove(topic);
    }

    /// Caches the leader a response named for a partition (its CurrentLeader), so the next fetch goes
    /// straight there rather than to Metadata, which may still name the old leader for a moment. Only
    /// a broker Metadata has named is used (we connect to no other); otherwise the next call asks
    /// Metadata.
    fn learn_leader(
        &self,
        inner: &mut Inner,
        topic: &str,
        partition: i32,
        named: Option<PartitionLeader>,
    ) {
        let usable = named.filter(|l| inner.brokers.contains_key(&l.leader_id));
        let cached = inner
            .topics
            .get_mut(topic)
            .and_then(|t| t.partitions.get_mut(&partition));
        match (usable, cached) {
            (Some(leader), Some(entry)) => *entry = leader,
            _ => self.forget_leader(inner, topic),
        }
    }

    async fn list_offset(
        &self,
        inner: &mut Inner,
        topic: &str,
        topic_id: TopicId,
        partition: i32,
        timestamp: i64,
    ) -> Result<i64, SourceError> {
        let (address, _) = self
            .leader(inner, topic, topic_id, partition, false)
            .await?;
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
        let (response, _) = Self::call(inner, &address, 1, CONTROL_RESPONSE_LIMIT, build).await?;
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
                self.leader(inner, topic, topic_id, partition, true).await?;
                Err(SourceError::Unavailable(format!(
                    "{what}: ListOffsets: {name} although Metadata names it"
                )))
            }
            PartitionFailure::Fatal(m) => {
                Err(SourceError::Refused(format!("{what}: ListOffsets: {m}")))
            }
            _ => {
                self.forget_leader(inner, topic);
                Err(SourceError::Unavailable(format!(
                    "{what}: ListOffsets: {}",
                    error_name(p.error_code)
                )))
            }
        }
    }
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

fn broker_address(host: &str, port: i32) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

impl MirrorSource for KafkaSource {
    fn describe(&self) -> String {
        self.source.clone()
    }

    fn cluster_id(&self) -> Result<String, SourceError> {
        self.with_inner(async |inner| {
            if let Some(id) = &inner.cluster_id {
                return Ok(id.clone());
            }
            self.refresh(inner, &[]).await?;
            inner
                .cluster_id
                .clone()
                .ok_or_else(|| SourceError::Refused(format!("{}: no cluster id", self.source)))
        })
    }

    fn topic(&self, name: &str) -> Result<Option<SourceTopic>, SourceError> {
        self.with_inner(async |inner| {
            let m = self.refresh(inner, &[name]).await?;
            let answer = m
                .topics
                .iter()
                .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name));
            match answer.map(|t| t.error_code) {
                None | Some(3) => Ok(None),
                Some(0) => Ok(inner.topics.get(name).map(|t| SourceTopic {
                    id: t.id,
                    partitions: t.partitions.len() as i32,
                })),
                Some(code) => Err(SourceError::Unavailable(format!(
                    "{}: Metadata for {name}: {}",
                    self.source,
                    error_name(code)
                ))),
            }
        })
    }

    fn fetch(&self, request: &FetchRequest) -> Result<FetchResponse, SourceError> {
        self.with_inner(async |inner| self.fetch_async(inner, request).await)
    }

    fn list_offsets(
        &self,
        topic: &str,
        topic_id: TopicId,
        partition: i32,
    ) -> Result<(i64, i64), SourceError> {
        self.with_inner(async |inner| {
            let earliest = self
                .list_offset(inner, topic, topic_id, partition, EARLIEST_TIMESTAMP)
                .await?;
            let latest = self
                .list_offset(inner, topic, topic_id, partition, LATEST_TIMESTAMP)
                .await?;
            Ok((earliest, latest))
        })
    }

    /// Kafka keeps no last mirrored epoch: -1, so PREPARING truncates to 0.
    fn last_mirrored_epoch(
        &self,
        _requester_cluster_id: &str,
        _topic_id: TopicId,
        _partition: i32,
    ) -> Result<i32, SourceError> {
        Ok(-1)
    }

    fn topic_configs(&self, topic: &str) -> Result<Option<BTreeMap<String, String>>, SourceError> {
        self.with_inner(async |inner| self.describe_topic_configs(inner, topic).await)
            .map(Some)
    }

    fn acls(&self) -> Result<Option<Vec<AclBinding>>, SourceError> {
        self.with_inner(async |inner| self.describe_acls(inner).await)
            .map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{EpochEndOffset, LeaderIdAndEpoch};

    #[test]
    fn bootstrap_lists_parse_and_bad_ones_are_named() {
        assert_eq!(
            parse_bootstrap("kafka://127.0.0.1:9092,localhost:19092").unwrap(),
            vec!["127.0.0.1:9092", "localhost:19092"]
        );
        assert_eq!(
            parse_bootstrap("kafka://[::1]:9092").unwrap(),
            vec!["[::1]:9092"]
        );
        for bad in [
            "kafka://",
            "kafka://host",
            "kafka://:9092",
            "kafka://h:0",
            "kafka://h:x",
            "kafka://h:1/p",
            "/tmp/x",
        ] {
            let e = parse_bootstrap(bad).unwrap_err();
            assert!(
                e.contains(bad.trim_start_matches("kafka://")) || e.contains(bad),
                "{bad}: {e}"
            );
        }
    }

    fn named(leader_id: i32, leader_epoch: i32) -> PartitionLeader {
        PartitionLeader {
            leader_id,
            leader_epoch,
        }
    }

    #[test]
    fn partition_errors_map_onto_source_errors() {
        assert_eq!(
            classify(74, named(2, 7)),
            PartitionFailure::Fenced(Some(named(2, 7)))
        );
        assert_eq!(
            classify(74, named(-1, 7)),
            PartitionFailure::Fenced(Some(named(-1, 7)))
        );
        assert_eq!(classify(74, NO_LEADER), PartitionFailure::Fenced(None));
        assert_eq!(
            classify(6, named(3, 4)),
            PartitionFailure::NotLeader(Some(named(3, 4)))
        );
        assert_eq!(classify(6, NO_LEADER), PartitionFailure::NotLeader(None));
        assert_eq!(
            classify(6, named(-1, 4)),
            PartitionFailure::NotLeader(None),
            "a leader id of -1 names no leader"
        );
        assert_eq!(
            classify(75, NO_LEADER),
            PartitionFailure::UnknownLeaderEpoch
        );
        assert_eq!(classify(1, NO_LEADER), PartitionFailure::OffsetOutOfRange);
        assert_eq!(
            classify(3, NO_LEADER),
            PartitionFailure::UnknownTopic("UNKNOWN_TOPIC_OR_PARTITION".into())
        );
        assert_eq!(
            classify(100, NO_LEADER),
            PartitionFailure::UnknownTopic("UNKNOWN_TOPIC_ID".into())
        );
        assert_eq!(
            classify(56, NO_LEADER),
            PartitionFailure::Retriable("KAFKA_STORAGE_ERROR".into())
        );
        assert_eq!(
            classify(29, NO_LEADER),
            PartitionFailure::Fatal("TOPIC_AUTHORIZATION_FAILED (error code 29)".into())
        );
        assert_eq!(
            classify(31000, NO_LEADER),
            PartitionFailure::Fatal("UNKNOWN_ERROR_CODE_31000 (error code 31000)".into())
        );
    }

    #[test]
    fn a_named_leader_is_cached_only_when_metadata_named_its_broker() {
        let source = KafkaSource::new("kafka://127.0.0.1:9092").unwrap();
        let mut inner = Inner::default();
        inner.brokers.insert(1, "127.0.0.1:9092".into());
        inner.brokers.insert(2, "127.0.0.1:9093".into());
        let topic = TopicMetadata {
            id: TopicId([7; 16]),
            partitions: [(0, named(1, 3)), (1, named(2, 3))].into(),
        };
        inner.topics.insert("t".into(), topic.clone());
        source.learn_leader(&mut inner, "t", 0, Some(named(2, 4)));
        assert_eq!(inner.topics["t"].partitions[&0], named(2, 4));
        assert_eq!(inner.topics["t"].partitions[&1], named(2, 3), "untouched");
        // A broker Metadata never named (we do not connect to it), or no leader: ask Metadata.
        source.learn_leader(&mut inner, "t", 0, Some(named(9, 5)));
        assert!(!inner.topics.contains_key("t"));
        inner.topics.insert("t".into(), topic);
        source.learn_leader(&mut inner, "t", 1, None);
        assert!(!inner.topics.contains_key("t"));
    }

    #[test]
    fn partition_data_passes_records_through_and_maps_the_diverging_epoch() {
        let records = bytes::Bytes::from_static(b"\x00\x01raw batch bytes, partial tail too");
        let ok = PartitionData::default()
            .with_high_watermark(40)
            .with_last_stable_offset(38)
            .with_log_start_offset(5)
            .with_records(Some(records.clone()));
        let r = partition_result(&ok).unwrap();
        assert_eq!(
            (r.high_watermark, r.last_stable_offset, r.log_start_offset),
            (40, 38, 5)
        );
        assert_eq!(r.records, records.to_vec());
        assert_eq!(
            r.diverging_epoch, None,
            "Kafka's default epoch -1 means none"
        );

        let diverged = ok
            .clone()
            .with_records(None)
            .with_diverging_epoch(EpochEndOffset::default().with_epoch(3).with_end_offset(17));
        let r = partition_result(&diverged).unwrap();
        assert_eq!(r.diverging_epoch, Some((3, 17)));
        assert!(r.records.is_empty());

        let fenced = PartitionData::default()
            .with_error_code(74)
            .with_current_leader(
                LeaderIdAndEpoch::default()
                    .with_leader_id(1.into())
                    .with_leader_epoch(9),
            );
        assert_eq!(
            partition_result(&fenced).unwrap_err(),
            PartitionFailure::Fenced(Some(named(1, 9)))
        );
    }

    #[test]
    fn an_unreachable_bootstrap_is_unavailable_and_backs_off() {
        // A port that was free a moment ago: nothing listens there (loopback only).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let source = KafkaSource::new(&format!("kafka://127.0.0.1:{port}")).unwrap();
        let first = source.cluster_id().unwrap_err();
        assert!(
            matches!(&first, SourceError::Unavailable(m) if m.contains(&format!("127.0.0.1:{port}"))),
            "{first:?}"
        );
        let second = source.cluster_id().unwrap_err();
        assert!(
            matches!(&second, SourceError::Unavailable(m) if m.contains("not reconnecting")),
            "{second:?}"
        );
        assert_eq!(source.last_mirrored_epoch("x", TopicId([0; 16]), 0), Ok(-1));
    }

    #[test]
    fn a_peer_that_sends_garbage_is_unavailable_not_a_panic() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let peer = std::thread::spawn(move || {
            // Two connections: a frame over any limit, then a frame whose body does not decode.
            for reply in [
                &(i32::MAX).to_be_bytes()[..],
                &[0, 0, 0, 6, 0, 0, 0, 0, 0xff, 0xff][..],
            ] {
                let (mut s, _) = listener.accept().unwrap();
                let mut buf = [0u8; 512];
                let _ = s.read(&mut buf);
                s.write_all(reply).unwrap();
            }
        });
        let source = KafkaSource::new(&format!("kafka://127.0.0.1:{port}")).unwrap();
        let e = source.cluster_id().unwrap_err();
        assert!(
            matches!(&e, SourceError::Unavailable(m) if m.contains("over the")),
            "{e:?}"
        );
        std::thread::sleep(RECONNECT_BACKOFF_INITIAL * 2);
        let e = source.cluster_id().unwrap_err();
        assert!(
            matches!(&e, SourceError::Unavailable(m) if m.contains("ApiVersions")),
            "{e:?}"
        );
        peer.join().unwrap();
    }
}
