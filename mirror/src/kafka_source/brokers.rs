//! The source cluster as one [`KafkaSource`](super::KafkaSource) sees it: connections to its brokers
//! (each with its reconnect backoff and its KIP-227 fetch session), the Metadata cache (cluster id,
//! brokers, each topic's id and partition leaders) that routes every request to the partition's
//! leader, and the count of every request sent.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
use kafka_protocol::protocol::Request;
use klog_log::checkpoint::TopicId;

use super::fetch_session::FetchSession;
use super::request_counts::RequestCounts;
use super::{broker_address, topic_name, PartitionLeader};
use crate::kafka_wire::{api_name, error_name, Connection, CONTROL_RESPONSE_LIMIT};
use crate::source::SourceError;

/// Metadata v10 added topic ids (v7 leader epochs, v2 the cluster id).
const METADATA_MIN_VERSION: i16 = 10;
pub(super) const RECONNECT_BACKOFF_INITIAL: Duration = Duration::from_millis(100);
const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// A topic as Metadata described it.
#[derive(Debug, Clone)]
pub(super) struct TopicMetadata {
    pub(super) id: TopicId,
    pub(super) partitions: BTreeMap<i32, PartitionLeader>,
}

/// Connections and the Metadata cache of one source cluster.
pub(super) struct Brokers {
    /// `kafka://...`, for messages.
    pub(super) source: String,
    pub(super) bootstrap: Vec<String>,
    /// Open connections, by address.
    connections: BTreeMap<String, Connection>,
    /// Per address: not before this instant, and the next delay.
    backoff: BTreeMap<String, (Instant, Duration)>,
    /// Node id -> `host:port`, from the latest Metadata.
    pub(super) brokers: BTreeMap<i32, String>,
    /// The source's cluster id, from the first Metadata.
    pub(super) cluster_id: Option<String>,
    /// Each topic's id and partition leaders, as Metadata (or a response's CurrentLeader) said.
    pub(super) topics: BTreeMap<String, TopicMetadata>,
    /// Every FENCED_LEADER_EPOCH whose CurrentLeader carried the epoch, as (sent, carried).
    pub(super) fenced: Vec<(i32, i32)>,
    /// Each broker's incremental fetch session, by address (none yet: the next fetch is full).
    pub(super) sessions: BTreeMap<String, FetchSession>,
    /// Every request sent, by API and address.
    pub(super) counts: RequestCounts,
}

impl Brokers {
    pub(super) fn new(source: &str, bootstrap: Vec<String>) -> Brokers {
        Brokers {
            source: source.to_owned(),
            bootstrap,
            connections: BTreeMap::new(),
            backoff: BTreeMap::new(),
            brokers: BTreeMap::new(),
            cluster_id: None,
            topics: BTreeMap::new(),
            fenced: Vec::new(),
            sessions: BTreeMap::new(),
            counts: RequestCounts::default(),
        }
    }

    /// Sends one request to `address` at the highest version both sides speak (at least `needed`).
    /// A connection that failed is closed; the next call reconnects (after its backoff).
    pub(super) async fn call<R: Request>(
        &mut self,
        address: &str,
        needed: i16,
        limit: usize,
        build: impl FnOnce(i16) -> R,
    ) -> Result<(R::Response, i16), SourceError> {
        let mut conn = match self.check_out(address)? {
            Some(c) => c,
            None => {
                let opened = Connection::open(address).await;
                self.opened(address, opened.as_ref().err());
                opened?
            }
        };
        let version = match conn.version::<R>(needed) {
            Ok(v) => v,
            Err(e) => {
                self.check_in(address, Some(conn));
                return Err(e);
            }
        };
        let request = build(version);
        self.counts.record(R::KEY, address);
        tracing::debug!(
            address,
            api = api_name(R::KEY),
            version,
            "request to the source"
        );
        match conn.call(&request, version, limit).await {
            Ok(r) => {
                self.check_in(address, Some(conn));
                Ok((r, version))
            }
            Err(e) => {
                if matches!(e, SourceError::Unavailable(_)) {
                    tracing::warn!(address, error = %e, "source broker connection dropped");
                    self.check_in(address, None);
                } else {
                    self.check_in(address, Some(conn));
                }
                Err(e)
            }
        }
    }

    /// Takes `address`'s open connection out for a request (a concurrent fetch owns it meanwhile):
    /// `None` when there is none and one may be opened now; `Unavailable` while a failed connect
    /// backs off.
    pub(super) fn check_out(&mut self, address: &str) -> Result<Option<Connection>, SourceError> {
        if let Some(c) = self.connections.remove(address) {
            return Ok(Some(c));
        }
        if let Some((not_before, _)) = self.backoff.get(address) {
            let now = Instant::now();
            if now < *not_before {
                return Err(SourceError::Unavailable(format!(
                    "{address}: not reconnecting for another {} ms after a failure",
                    (*not_before - now).as_millis()
                )));
            }
        }
        Ok(None)
    }

    /// The outcome of opening a connection to `address` (an ApiVersions request, counted): a failure
    /// starts or doubles the address's backoff.
    pub(super) fn opened(&mut self, address: &str, failure: Option<&SourceError>) {
        self.counts.record(
            kafka_protocol::messages::ApiKey::ApiVersions as i16,
            address,
        );
        match failure {
            None => {
                self.backoff.remove(address);
                tracing::debug!(address, "connected to a source broker");
            }
            Some(e) => {
                let delay = self
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
                self.backoff
                    .insert(address.to_owned(), (Instant::now() + delay, delay));
            }
        }
    }

    /// Returns a connection checked out; `None`: it broke, so it stays closed and the broker's fetch
    /// session is dropped with it (the next fetch there starts a new one).
    pub(super) fn check_in(&mut self, address: &str, conn: Option<Connection>) {
        match conn {
            Some(c) => {
                self.connections.insert(address.to_owned(), c);
            }
            None => {
                self.sessions.remove(address);
            }
        }
    }

    /// Metadata for `topics` (none: just brokers and the cluster id), from the first broker that
    /// answers: known brokers first, then the bootstrap addresses. Updates the cache and returns the
    /// response.
    pub(super) async fn refresh(
        &mut self,
        topics: &[&str],
    ) -> Result<MetadataResponse, SourceError> {
        let mut addresses: Vec<String> = self.brokers.values().cloned().collect();
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
            match self
                .call(
                    &address,
                    METADATA_MIN_VERSION,
                    CONTROL_RESPONSE_LIMIT,
                    build,
                )
                .await
            {
                Ok((response, _)) => {
                    self.absorb(&response, &address)?;
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

    pub(super) fn absorb(&mut self, m: &MetadataResponse, from: &str) -> Result<(), SourceError> {
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
            self.brokers = m
                .brokers
                .iter()
                .map(|b| (b.node_id.0, broker_address(b.host.as_str(), b.port)))
                .collect();
        }
        self.cluster_id = Some(cluster_id);
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
                    self.topics.insert(name, TopicMetadata { id, partitions });
                }
                _ => {
                    self.topics.remove(&name);
                }
            }
        }
        Ok(())
    }

    /// The leader of a partition and its epoch, refreshing Metadata when the cache does not know it.
    /// The topic must have `topic_id` at the source.
    pub(super) async fn leader(
        &mut self,
        topic: &str,
        topic_id: TopicId,
        partition: i32,
        refresh: bool,
    ) -> Result<(String, PartitionLeader), SourceError> {
        if refresh || !self.knows(topic, partition) {
            let m = self.refresh(&[topic]).await?;
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
        self.cached_leader(topic, topic_id, partition)
    }

    /// The leader of a partition and its epoch as the cache knows them (no request).
    pub(super) fn cached_leader(
        &self,
        topic: &str,
        topic_id: TopicId,
        partition: i32,
    ) -> Result<(String, PartitionLeader), SourceError> {
        let gone = || {
            SourceError::UnknownTopicOrPartition(format!("{topic}-{partition} at {}", self.source))
        };
        let t = self.topics.get(topic).ok_or_else(gone)?;
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
        let address = self.brokers.get(&p.leader_id).cloned().ok_or_else(|| {
            SourceError::Unavailable(format!(
                "{}: the leader of {topic}-{partition}, node {}, is not among the brokers Metadata names",
                self.source, p.leader_id
            ))
        })?;
        Ok((address, p))
    }

    /// Whether the cache knows `topic`'s `partition` (else a lookup needs Metadata first).
    pub(super) fn knows(&self, topic: &str, partition: i32) -> bool {
        self.topics
            .get(topic)
            .is_some_and(|t| t.partitions.contains_key(&partition))
    }

    /// Drops a topic's cached leaders so the next call asks Metadata.
    pub(super) fn forget_leader(&mut self, topic: &str) {
        self.topics.remove(topic);
    }

    /// Caches the leader a response named for a partition (its CurrentLeader), so the next fetch goes
    /// straight there rather than to Metadata, which may still name the old leader for a moment. Only
    /// a broker Metadata has named is used (we connect to no other); otherwise the next call asks
    /// Metadata.
    pub(super) fn learn_leader(
        &mut self,
        topic: &str,
        partition: i32,
        named: Option<PartitionLeader>,
    ) {
        let usable = named.filter(|l| self.brokers.contains_key(&l.leader_id));
        let cached = self
            .topics
            .get_mut(topic)
            .and_then(|t| t.partitions.get_mut(&partition));
        match (usable, cached) {
            (Some(leader), Some(entry)) => *entry = leader,
            _ => self.forget_leader(topic),
        }
    }
}
