//! Serving as a source: a local node answers the mirror fetcher's requests of another cluster
//! ([`LocalSource`], behind the same [`MirrorSource`] seam as the `kafka://` source): topic
//! descriptions, consumer fetches with Kafka's leader-epoch fencing and divergence check, ListOffsets,
//! the last-mirrored-epoch lookup of a failback (KIP-1279 §2.4) and the committed offsets of its
//! consumer groups (its `__consumer_offsets`).
//!
//! The node is either open in this process ([`LocalSource::new`]) or a cluster root read from disk
//! ([`LocalSource::read`], what `klog mirror run` uses): a reader that takes no lock and follows what
//! the source's own writer appends (see `disk_view.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use klog_log::checkpoint::TopicId;
use klog_log::partition_log::PartitionLog;

use crate::acl::AclBinding;
use crate::disk_view::{DiskView, Need};
use crate::groups;
use crate::node::{lock, Node};
use crate::records::MirrorKey;
use crate::source::{
    CommittedOffset, FetchManyResponse, FetchRequest, FetchResponse, Isolation, MirrorSource,
    SourceError, SourceGroup, SourceTopic,
};
use crate::state::MirrorState;

/// Another klog cluster, as a mirror's source.
pub struct LocalSource {
    served: Served,
}

enum Served {
    /// A node open in this process (its writer, or a test's).
    Open(Arc<Node>),
    /// A cluster root on disk, read without its lock.
    Disk(DiskView),
}

impl LocalSource {
    /// Serves `node`, open in this process.
    pub fn new(node: Arc<Node>) -> Self {
        LocalSource {
            served: Served::Open(node),
        }
    }

    /// Serves the cluster in `root` by reading its files: no lock is taken (the source's writer and
    /// other mirrors of it keep working), its new appends are seen, and a root that goes away and comes
    /// back is followed.
    pub fn read(root: &Path) -> Self {
        LocalSource {
            served: Served::Disk(DiskView::new(root)),
        }
    }

    /// The node as `need` requires it (a view read from disk is refreshed first).
    fn node(&self, need: Need<'_>) -> Result<Arc<Node>, SourceError> {
        let node = match &self.served {
            Served::Open(node) => Arc::clone(node),
            Served::Disk(view) => view.node(need)?,
        };
        node.serving()?;
        Ok(node)
    }

    fn serve_topic(&self, name: &str) -> Result<Option<SourceTopic>, SourceError> {
        let node = self.node(Need::Meta)?;
        let meta = lock(&node.meta);
        Ok(meta.topics.get(name).and_then(|t| {
            Some(SourceTopic {
                id: TopicId::parse(&t.id)?,
                partitions: t.partitions,
            })
        }))
    }

    /// The partition's log and leader epoch; `offset` is where the caller reads next (see [`Need`]).
    fn served_log(
        &self,
        topic: &str,
        topic_id: TopicId,
        partition: i32,
        offset: Option<i64>,
    ) -> Result<(Arc<PartitionLog>, i32), SourceError> {
        let node = self.node(Need::Partition {
            topic,
            partition,
            offset,
        })?;
        log_on(&node, topic, topic_id, partition)
    }

    /// A consumer fetch, with Kafka's leader-epoch fencing and divergence check.
    fn serve_fetch(&self, req: &FetchRequest) -> Result<FetchResponse, SourceError> {
        let (log, leader_epoch) = self.served_log(
            &req.topic,
            req.topic_id,
            req.partition,
            Some(req.fetch_offset),
        )?;
        fetch_from(&log, leader_epoch, req, true)
    }

    /// Many partitions' fetches as one request (Kafka's Fetch): the node looked up once (a view read
    /// from disk is refreshed per partition it reads, by that partition's stamps), `max_bytes` bounding
    /// the records of the whole answer, each partition answered as [`Self::serve_fetch`] would. Only
    /// the first partition with records may exceed the limits by one batch (Kafka's rule); partitions
    /// the budget did not reach are left out (the fetcher asks for them again).
    /// The fetches of many partitions in one pass: the node looked up once (a root read from disk:
    /// each partition refreshed by its own stamps), the budget honoured with Kafka's rule (only the
    /// first partition with records may go over, by one batch), each answer handed over as soon as it is
    /// read, with no lock of this node held while `on_answer` runs.
    fn serve_fetch_each(
        &self,
        requests: &[FetchRequest],
        max_bytes: usize,
        on_answer: &mut dyn FnMut(usize, Result<FetchResponse, SourceError>),
    ) {
        let open = match &self.served {
            Served::Open(node) => Some(node.serving().map(|()| Arc::clone(node))),
            Served::Disk(_) => None,
        };
        let mut budget = max_bytes;
        for (i, req) in requests.iter().enumerate() {
            if budget == 0 {
                break;
            }
            let node = match &open {
                Some(node) => node.clone(),
                None => self.node(Need::Partition {
                    topic: &req.topic,
                    partition: req.partition,
                    offset: Some(req.fetch_offset),
                }),
            };
            let request = FetchRequest {
                max_bytes: req.max_bytes.min(budget),
                ..req.clone()
            };
            let min_one_batch = budget == max_bytes;
            let result = node
                .and_then(|node| log_on(&node, &req.topic, req.topic_id, req.partition))
                .and_then(|(log, epoch)| fetch_from(&log, epoch, &request, min_one_batch));
            if let Ok(r) = &result {
                budget = budget.saturating_sub(r.records.len());
            }
            on_answer(i, result);
        }
    }

    fn serve_list_offsets(
        &self,
        topic: &str,
        topic_id: TopicId,
        partition: i32,
    ) -> Result<(i64, i64), SourceError> {
        let (log, _) = self.served_log(topic, topic_id, partition, None)?;
        Ok((log.log_start_offset(), log.high_watermark()))
    }

    /// Every group of this node's `__consumer_offsets` (a klog cluster lists the groups that have
    /// offsets), with its offsets on `topics`; every other partition of those of `topics` this node has
    /// is answered as having no committed offset, as Kafka's OffsetFetch answers -1.
    fn serve_committed_offsets(
        &self,
        topics: &BTreeSet<String>,
    ) -> Result<Vec<SourceGroup>, SourceError> {
        let node = self.node(Need::Groups)?;
        let offsets = groups::committed_offsets(&node)
            .map_err(|e| SourceError::Unavailable(format!("{}: {e}", node.root().display())))?;
        let partitions: Vec<(String, i32)> = {
            let meta = lock(&node.meta);
            topics
                .iter()
                .filter_map(|name| meta.topics.get(name).map(|t| (name, t.partitions)))
                .flat_map(|(name, n)| (0..n).map(move |p| (name.clone(), p)))
                .collect()
        };
        let mut by_group: BTreeMap<String, Vec<CommittedOffset>> = BTreeMap::new();
        for c in offsets.into_values() {
            let offsets = by_group.entry(c.group.clone()).or_default();
            if topics.contains(&c.topic) {
                offsets.push(c);
            }
        }
        Ok(by_group
            .into_iter()
            .map(|(group, offsets)| {
                let committed: BTreeSet<(&str, i32)> = offsets
                    .iter()
                    .map(|c| (c.topic.as_str(), c.partition))
                    .collect();
                let no_committed_offset = partitions
                    .iter()
                    .filter(|(t, p)| !committed.contains(&(t.as_str(), *p)))
                    .cloned()
                    .collect();
                SourceGroup {
                    group,
                    state: "Empty".into(),
                    offsets,
                    no_committed_offset,
                }
            })
            .collect())
    }

    /// The LME lookup (§2.4, keyed as recommended): among this cluster's mirrors from
    /// `requester_cluster_id`, the one holding this topic must have STOPPED the partition (a source that
    /// still mirrors from the requester would make a loop), and its LME record is the answer.
    fn serve_last_mirrored_epoch(
        &self,
        requester_cluster_id: &str,
        topic_id: TopicId,
        partition: i32,
    ) -> Result<i32, SourceError> {
        let node = self.node(Need::State)?;
        let meta = lock(&node.meta);
        let Some((_, t)) = meta
            .topics
            .iter()
            .find(|(_, t)| t.id == topic_id.to_string())
        else {
            return Ok(-1);
        };
        let Some(m) = &t.mirror else {
            return Ok(-1);
        };
        let from_requester = meta
            .mirrors
            .get(&m.name)
            .and_then(|mm| mm.source_cluster_id.as_deref())
            == Some(requester_cluster_id);
        if !from_requester {
            return Ok(-1);
        }
        let key = MirrorKey {
            mirror: m.name.clone(),
            topic_id,
            partition,
        };
        let store = lock(&node.store);
        let state = store.state(&key).map(|s| s.value.state);
        if state != Some(MirrorState::Stopped) {
            return Err(SourceError::Refused(format!(
                "partition {partition} of topic {topic_id} is still mirrored from cluster {requester_cluster_id} here \
                 (mirror {}, state {}): stop it before mirroring back",
                m.name,
                state.unwrap_or(MirrorState::Unknown)
            )));
        }
        Ok(store.last_mirror_epoch(&key).map_or(-1, |s| s.value))
    }
}

/// `topic`-`partition` of `node` as a source serves it: its log and leader epoch (a topic id that is
/// not the served topic's is an unknown partition).
fn log_on(
    node: &Node,
    topic: &str,
    topic_id: TopicId,
    partition: i32,
) -> Result<(Arc<PartitionLog>, i32), SourceError> {
    let unknown = || SourceError::UnknownTopicOrPartition(format!("{topic}-{partition}"));
    let epoch = {
        let meta = lock(&node.meta);
        let t = meta.topics.get(topic).ok_or_else(unknown)?;
        if t.id != topic_id.to_string() {
            return Err(unknown());
        }
        *t.leader_epochs
            .get(partition as usize)
            .ok_or_else(unknown)?
    };
    let log = node.log(topic, partition).ok_or_else(unknown)?;
    Ok((log, epoch))
}

/// A consumer fetch from `log`, led at `leader_epoch`: Kafka's leader-epoch fencing and divergence
/// check, then at most `req.max_bytes` (one whole batch more only with `min_one_batch`).
fn fetch_from(
    log: &PartitionLog,
    leader_epoch: i32,
    req: &FetchRequest,
    min_one_batch: bool,
) -> Result<FetchResponse, SourceError> {
    if req.current_leader_epoch < leader_epoch {
        return Err(SourceError::FencedLeaderEpoch { leader_epoch });
    }
    if req.current_leader_epoch > leader_epoch {
        return Err(SourceError::UnknownLeaderEpoch);
    }
    let base = FetchResponse {
        high_watermark: log.high_watermark(),
        last_stable_offset: log.last_stable_offset(),
        log_start_offset: log.log_start_offset(),
        diverging_epoch: None,
        records: Vec::new(),
    };
    if let Some(fetched) = req.last_fetched_epoch {
        match log.end_offset_for_epoch(fetched) {
            None => return Err(SourceError::OffsetOutOfRange),
            Some((epoch, end)) if epoch < fetched || end < req.fetch_offset => {
                return Ok(FetchResponse {
                    diverging_epoch: Some((epoch, end)),
                    ..base
                })
            }
            Some(_) => {}
        }
    }
    if req.fetch_offset < log.log_start_offset() || req.fetch_offset > log.log_end_offset() {
        return Err(SourceError::OffsetOutOfRange);
    }
    let read = match req.isolation {
        Isolation::ReadCommitted => log
            .read_committed(req.fetch_offset, req.max_bytes, min_one_batch)
            .map(|(r, _)| r),
        Isolation::ReadUncommitted => log.read(
            req.fetch_offset,
            req.max_bytes,
            Some(log.high_watermark()),
            min_one_batch,
        ),
    }
    .map_err(|e| match e.kafka_error() {
        klog_log::KafkaError::OffsetOutOfRange => SourceError::OffsetOutOfRange,
        _ => SourceError::Unavailable(e.to_string()),
    })?;
    Ok(FetchResponse {
        records: read.records.into_vec(),
        ..base
    })
}

impl MirrorSource for LocalSource {
    fn describe(&self) -> String {
        match &self.served {
            Served::Open(node) => node.root().display().to_string(),
            Served::Disk(view) => view.root().display().to_string(),
        }
    }

    fn cluster_id(&self) -> Result<String, SourceError> {
        Ok(self.node(Need::Meta)?.cluster_id())
    }

    fn topic(&self, name: &str) -> Result<Option<SourceTopic>, SourceError> {
        self.serve_topic(name)
    }

    fn fetch(&self, request: &FetchRequest) -> Result<FetchResponse, SourceError> {
        self.serve_fetch(request)
    }

    fn fetch_many(&self, requests: &[FetchRequest], max_bytes: usize) -> FetchManyResponse {
        let mut out = Vec::with_capacity(requests.len());
        self.serve_fetch_each(requests, max_bytes, &mut |i, r| out.push((i, r)));
        out
    }

    fn fetch_each(
        &self,
        requests: &[FetchRequest],
        max_bytes: usize,
        on_answer: &mut dyn FnMut(usize, Result<FetchResponse, SourceError>),
    ) {
        self.serve_fetch_each(requests, max_bytes, on_answer)
    }

    fn list_offsets(
        &self,
        topic: &str,
        topic_id: TopicId,
        partition: i32,
    ) -> Result<(i64, i64), SourceError> {
        self.serve_list_offsets(topic, topic_id, partition)
    }

    fn last_mirrored_epoch(
        &self,
        requester_cluster_id: &str,
        topic_id: TopicId,
        partition: i32,
    ) -> Result<i32, SourceError> {
        self.serve_last_mirrored_epoch(requester_cluster_id, topic_id, partition)
    }

    fn committed_offsets(
        &self,
        topics: &BTreeSet<String>,
    ) -> Result<Vec<SourceGroup>, SourceError> {
        self.serve_committed_offsets(topics)
    }

    fn topic_configs(&self, topic: &str) -> Result<Option<BTreeMap<String, String>>, SourceError> {
        let node = self.node(Need::Meta)?;
        let meta = lock(&node.meta);
        meta.topics
            .get(topic)
            .map(|t| Some(t.effective_configs()))
            .ok_or_else(|| SourceError::UnknownTopicOrPartition(topic.to_owned()))
    }

    /// Its own bindings and those its mirrors synced (a chain passes them on).
    fn acls(&self) -> Result<Option<Vec<AclBinding>>, SourceError> {
        let node = self.node(Need::Meta)?;
        let meta = lock(&node.meta);
        let all: BTreeSet<AclBinding> = meta
            .acls
            .iter()
            .chain(meta.mirrors.values().flat_map(|m| m.acls.iter()))
            .cloned()
            .collect();
        Ok(Some(all.into_iter().collect()))
    }
}
