//! What the mirror fetcher needs from a source cluster (KIP-1279 §3): the [`MirrorSource`] seam.
//! Two sources sit behind it: [`crate::serving::LocalSource`] (another klog cluster in this process)
//! and [`crate::kafka_source::KafkaSource`] (a Kafka cluster over the wire).

use std::collections::{BTreeMap, BTreeSet};

use klog_log::checkpoint::TopicId;

use crate::acl::AclBinding;

/// A fetch's isolation level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Up to the source's high watermark.
    ReadUncommitted,
    /// Up to the source's last stable offset (the seed design's mirror fetch).
    ReadCommitted,
}

/// One partition's fetch, as a consumer sends it (replica id -1: the source never counts us in its ISR).
#[derive(Debug, Clone)]
pub struct FetchRequest {
    /// The topic.
    pub topic: String,
    /// Its topic id.
    pub topic_id: TopicId,
    /// The partition.
    pub partition: i32,
    /// The first offset wanted (our log end).
    pub fetch_offset: i64,
    /// The epoch of the last local batch, for divergence detection.
    pub last_fetched_epoch: Option<i32>,
    /// The source leader epoch we believe in (0 at first: learned by fencing).
    pub current_leader_epoch: i32,
    /// At most this many bytes (at least one batch).
    pub max_bytes: usize,
    /// The isolation level.
    pub isolation: Isolation,
}

/// A source's answer to a fetch.
#[derive(Debug, Clone, Default)]
pub struct FetchResponse {
    /// The source's high watermark.
    pub high_watermark: i64,
    /// The source's last stable offset.
    pub last_stable_offset: i64,
    /// The source's log start offset.
    pub log_start_offset: i64,
    /// `(epoch, end offset)`: our log diverges from the source's after `end offset`.
    pub diverging_epoch: Option<(i32, i64)>,
    /// Whole batches (a source may also cut the last one short; the fetcher drops a partial tail).
    pub records: Vec<u8>,
}

/// A [`MirrorSource::fetch_many`] answer: `(index into the requests, that partition's result)`.
pub type FetchManyResponse = Vec<(usize, Result<FetchResponse, SourceError>)>;

/// Why a source could not answer (Kafka's names where it has them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The epoch we sent is older than the source leader's: fetch again with the epoch it carries.
    #[error("FENCED_LEADER_EPOCH (the source leader epoch is {leader_epoch})")]
    FencedLeaderEpoch {
        /// The source's leader epoch.
        leader_epoch: i32,
    },
    /// The source does not know the epoch we sent (it is behind): retry.
    #[error("UNKNOWN_LEADER_EPOCH")]
    UnknownLeaderEpoch,
    /// The offset is outside the source's log.
    #[error("OFFSET_OUT_OF_RANGE")]
    OffsetOutOfRange,
    /// The source has no such topic or partition (what was asked).
    #[error("UNKNOWN_TOPIC_OR_PARTITION: {0}")]
    UnknownTopicOrPartition(String),
    /// Connection failures, a source that is shut down: retried with backoff.
    #[error("source unavailable: {0}")]
    Unavailable(String),
    /// The source answered but refused (for example an LME lookup while it still mirrors from us).
    #[error("{0}")]
    Refused(String),
}

/// A source topic as metadata describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceTopic {
    /// Its topic id.
    pub id: TopicId,
    /// Its partition count.
    pub partitions: i32,
}

/// One committed offset of a consumer group (Kafka's OffsetCommit key and value, as a source reports
/// it and as `__consumer_offsets` stores it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CommittedOffset {
    /// The group id.
    pub group: String,
    /// The topic the offset is for.
    pub topic: String,
    /// The partition the offset is for.
    pub partition: i32,
    /// The next offset the group reads.
    pub offset: i64,
    /// The leader epoch of the record before `offset` as the committer knew it; -1 when unknown.
    pub leader_epoch: i32,
    /// The committer's metadata string.
    pub metadata: String,
    /// When it was committed (ms since the epoch; a Kafka source's OffsetFetch has none: when it was read).
    pub commit_timestamp: i64,
}

/// A source's consumer group with its committed offsets on the topics asked about.
///
/// A partition of those topics is in one of three cases, as Kafka's OffsetFetch answers it: in
/// `offsets` (committed), in `no_committed_offset` (the source resolved the partition and answered it
/// without an error, with offset -1: nothing is committed, so an offset synced earlier is gone at the
/// source), or in neither: not answered (an error for that partition or the group, a topic the source's
/// metadata does not resolve, a topic an authorizer hides from the caller, which Kafka drops from the
/// answer silently). A partition not answered says nothing about its offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceGroup {
    /// The group id.
    pub group: String,
    /// Kafka's group state (`Stable`, `Empty`, ...) as ListGroups reports it; a klog cluster, which has
    /// no group coordinator and so no members, reports `Empty`.
    pub state: String,
    /// Its committed offsets on the topics asked about.
    pub offsets: Vec<CommittedOffset>,
    /// `(topic, partition)` of the topics asked about that the source answered, without an error, as
    /// having no committed offset for this group.
    pub no_committed_offset: BTreeSet<(String, i32)>,
}

/// Where a mirror's data comes from: another local cluster, or a Kafka cluster over the protocol.
pub trait MirrorSource: Send + Sync {
    /// Where it is, for messages.
    fn describe(&self) -> String;
    /// The source's cluster id.
    fn cluster_id(&self) -> Result<String, SourceError>;
    /// A topic's id and partition count (`None`: no such topic).
    fn topic(&self, name: &str) -> Result<Option<SourceTopic>, SourceError>;
    /// One partition's fetch.
    fn fetch(&self, request: &FetchRequest) -> Result<FetchResponse, SourceError>;
    /// The fetches of many partitions as one request, the shape of Kafka's Fetch as its replica fetcher
    /// sends it (one per source broker, every partition that broker leads). `max_bytes` bounds the
    /// records of the whole answer (`fetch.max.bytes`: the first partition with records gets at least
    /// one batch), each request's own `max_bytes` its partition (`max.partition.fetch.bytes`).
    ///
    /// The answer is `(index into requests, result)` in request order. A partition that is absent had
    /// nothing to say this time: the budget ran out before it, or an incremental fetch session (KIP-227)
    /// left it out because nothing changed. The fetcher asks for it again next round.
    ///
    /// The default sends one [`fetch`](Self::fetch) per partition within the budget; sources that can
    /// do better (one request per broker) override it.
    fn fetch_many(&self, requests: &[FetchRequest], max_bytes: usize) -> FetchManyResponse {
        let mut budget = max_bytes;
        let mut out = Vec::with_capacity(requests.len());
        for (i, request) in requests.iter().enumerate() {
            if budget == 0 {
                break;
            }
            let request = FetchRequest {
                max_bytes: request.max_bytes.min(budget),
                ..request.clone()
            };
            let result = self.fetch(&request);
            if let Ok(r) = &result {
                budget = budget.saturating_sub(r.records.len());
            }
            out.push((i, result));
        }
        out
    }
    /// [`fetch_many`](Self::fetch_many) with each partition's answer handed to `on_answer` as soon as
    /// it is there, in request order, so the fetcher appends and drops it before the next one is read:
    /// what is held is one answer, not the round's. No lock of the source is held while `on_answer` runs
    /// (it writes to the fetching cluster, which may itself be this source's source). The default
    /// answers through `fetch_many`, holding the round's answers at once; a source that reads its
    /// partitions one by one (a local source) overrides it.
    fn fetch_each(
        &self,
        requests: &[FetchRequest],
        max_bytes: usize,
        on_answer: &mut dyn FnMut(usize, Result<FetchResponse, SourceError>),
    ) {
        for (i, result) in self.fetch_many(requests, max_bytes) {
            on_answer(i, result);
        }
    }
    /// `(earliest, latest)` offsets (ListOffsets; latest is the high watermark).
    fn list_offsets(
        &self,
        topic: &str,
        topic_id: TopicId,
        partition: i32,
    ) -> Result<(i64, i64), SourceError>;
    /// The LME the source recorded when it stopped mirroring this partition from `requester_cluster_id`
    /// (-1 when it has none). Keyed by cluster id and topic id, not by mirror name (§2.4).
    fn last_mirrored_epoch(
        &self,
        requester_cluster_id: &str,
        topic_id: TopicId,
        partition: i32,
    ) -> Result<i32, SourceError>;
    /// Every consumer group the source lists, with its committed offsets on `topics` and the
    /// partitions of `topics` it answered as having none (ListGroups and OffsetFetch of each partition
    /// of `topics` on Kafka; the `__consumer_offsets` partitions of a klog cluster). See [`SourceGroup`]
    /// for what a partition left out of both means.
    fn committed_offsets(
        &self,
        topics: &std::collections::BTreeSet<String>,
    ) -> Result<Vec<SourceGroup>, SourceError>;
    /// The topic's configs set on the source (Kafka: the DescribeConfigs entries whose source is
    /// DYNAMIC_TOPIC_CONFIG; defaults are not sent, so a key the source dropped is seen to go). `None`:
    /// this source does not describe configs (what was synced stays as it is).
    fn topic_configs(&self, _topic: &str) -> Result<Option<BTreeMap<String, String>>, SourceError> {
        Ok(None)
    }
    /// Every ACL binding the source holds (Kafka: DescribeAcls matching any; none when it has no
    /// authorizer). `None`: this source does not describe ACLs (what was synced stays as it is).
    fn acls(&self) -> Result<Option<Vec<AclBinding>>, SourceError> {
        Ok(None)
    }
}
