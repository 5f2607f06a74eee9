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
//! - A round's fetches (`fetch_many`, `fetch_many.rs`) go as ONE Fetch per source leader carrying
//!   every partition it leads, in that broker's KIP-227 incremental fetch session
//!   (`fetch_session.rs`: full first, then only what changed, forgotten partitions named), the
//!   brokers fetched concurrently (`broker_fetch.rs`); partition errors stay per partition, and a
//!   partition whose leader moved is fetched again within the call where it is led now.
//! - Every request is counted per API and broker ([`KafkaSource::request_counts`]) and logged at
//!   tracing `debug`: the client's request log.
//! - Consumer-group offsets (`groups.rs`): ListGroups to every broker, then FindCoordinator and
//!   OffsetFetch per classic or consumer group.
//! - The metadata sync's DescribeConfigs (a topic's DYNAMIC_TOPIC_CONFIG entries) and DescribeAcls
//!   (every binding; none when the source has no authorizer) go to any broker (`admin.rs`).
//! - Kafka has no last-mirrored-epoch lookup: `last_mirrored_epoch` is -1, so PREPARING against Kafka
//!   truncates the local partition to 0 and mirrors it again from the source's log start.
//!
//! The trait is synchronous: the source owns a single-threaded tokio runtime and blocks on it; one
//! call runs at a time (inside a `fetch_many`, one task per broker, each owning that broker's
//! connection and session while it runs).

mod admin;
mod broker_fetch;
mod brokers;
mod fetch;
mod fetch_many;
mod fetch_session;
mod groups;
mod request_counts;

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Mutex;

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use klog_log::checkpoint::TopicId;

use crate::acl::AclBinding;
use crate::kafka_wire::error_name;
use crate::source::{
    FetchManyResponse, FetchRequest, FetchResponse, MirrorSource, SourceError, SourceGroup,
    SourceTopic,
};
use brokers::Brokers;
#[cfg(test)]
use fetch::{classify, partition_result, PartitionFailure};
pub use request_counts::RequestCounts;

/// The scheme of a Kafka source.
pub const KAFKA_SCHEME: &str = "kafka://";
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
    pub(crate) leader_id: i32,
    pub(crate) leader_epoch: i32,
}

/// A source over the Kafka protocol: `kafka://host:port[,host:port...]` bootstrap brokers, then the leaders Metadata names.
pub struct KafkaSource {
    source: String,
    runtime: tokio::runtime::Runtime,
    inner: Mutex<Brokers>,
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
            runtime,
            inner: Mutex::new(Brokers::new(source, bootstrap)),
        })
    }

    /// Every FENCED_LEADER_EPOCH this source received with the leader epoch in the response's
    /// CurrentLeader, as (the CurrentLeaderEpoch we sent, the epoch it carried): how a test sees that a
    /// real broker fenced us and the epoch came from the response, not from the Metadata fallback.
    pub fn fenced_leader_epochs(&self) -> Vec<(i32, i32)> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.fenced.clone()
    }

    /// Every request this source sent, by API and broker address (the client's request log, counted).
    pub fn request_counts(&self) -> RequestCounts {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.counts.clone()
    }

    /// Each source broker's KIP-227 fetch session, by address: (session id, the epoch its next fetch
    /// carries). Id 0 or epoch 0: the next fetch there is full.
    pub fn fetch_sessions(&self) -> BTreeMap<String, (i32, i32)> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner
            .sessions
            .iter()
            .map(|(address, s)| (address.clone(), (s.id(), s.epoch())))
            .collect()
    }

    fn with_inner<T>(&self, f: impl AsyncFnOnce(&mut Brokers) -> T) -> T {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        self.runtime.block_on(f(&mut inner))
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
            inner.refresh(&[]).await?;
            inner
                .cluster_id
                .clone()
                .ok_or_else(|| SourceError::Refused(format!("{}: no cluster id", self.source)))
        })
    }

    fn topic(&self, name: &str) -> Result<Option<SourceTopic>, SourceError> {
        self.with_inner(async |inner| {
            let m = inner.refresh(&[name]).await?;
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
        self.with_inner(async |inner| fetch::fetch(inner, request).await)
    }

    /// One Fetch per source leader carrying every partition it leads, in its incremental fetch
    /// session, the leaders fetched concurrently (`fetch_many.rs`).
    fn fetch_many(&self, requests: &[FetchRequest], max_bytes: usize) -> FetchManyResponse {
        self.with_inner(async |inner| fetch_many::fetch_many(inner, requests, max_bytes).await)
    }

    fn list_offsets(
        &self,
        topic: &str,
        topic_id: TopicId,
        partition: i32,
    ) -> Result<(i64, i64), SourceError> {
        self.with_inner(async |inner| {
            let earliest =
                fetch::list_offset(inner, topic, topic_id, partition, EARLIEST_TIMESTAMP).await?;
            let latest =
                fetch::list_offset(inner, topic, topic_id, partition, LATEST_TIMESTAMP).await?;
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

    fn committed_offsets(
        &self,
        topics: &BTreeSet<String>,
    ) -> Result<Vec<SourceGroup>, SourceError> {
        self.with_inner(async |inner| groups::committed_offsets(inner, topics).await)
    }

    fn topic_configs(&self, topic: &str) -> Result<Option<BTreeMap<String, String>>, SourceError> {
        self.with_inner(async |inner| inner.describe_topic_configs(topic).await)
            .map(Some)
    }

    fn acls(&self) -> Result<Option<Vec<AclBinding>>, SourceError> {
        self.with_inner(async |inner| inner.describe_acls().await)
            .map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{
        EpochEndOffset, LeaderIdAndEpoch, PartitionData,
    };

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
        let mut inner = Brokers::new("kafka://127.0.0.1:9092", vec!["127.0.0.1:9092".into()]);
        inner.brokers.insert(1, "127.0.0.1:9092".into());
        inner.brokers.insert(2, "127.0.0.1:9093".into());
        let topic = brokers::TopicMetadata {
            id: TopicId([7; 16]),
            partitions: [(0, named(1, 3)), (1, named(2, 3))].into(),
        };
        inner.topics.insert("t".into(), topic.clone());
        inner.learn_leader("t", 0, Some(named(2, 4)));
        assert_eq!(inner.topics["t"].partitions[&0], named(2, 4));
        assert_eq!(inner.topics["t"].partitions[&1], named(2, 3), "untouched");
        // A broker Metadata never named (we do not connect to it), or no leader: ask Metadata.
        inner.learn_leader("t", 0, Some(named(9, 5)));
        assert!(!inner.topics.contains_key("t"));
        inner.topics.insert("t".into(), topic);
        inner.learn_leader("t", 1, None);
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
        std::thread::sleep(brokers::RECONNECT_BACKOFF_INITIAL * 2);
        let e = source.cluster_id().unwrap_err();
        assert!(
            matches!(&e, SourceError::Unavailable(m) if m.contains("ApiVersions")),
            "{e:?}"
        );
        peer.join().unwrap();
    }
}
