//! `KafkaSource` against a scripted broker on loopback that speaks the real wire format (encoded with
//! the kafka-protocol crate): version negotiation, leader routing from Metadata, FENCED_LEADER_EPOCH
//! without `CurrentLeader` (the epoch comes from Metadata), NOT_LEADER_OR_FOLLOWER, and an unknown
//! topic id that counts as gone only when Metadata agrees; and, with a second scripted broker, a
//! leader that moved (NOT_LEADER_OR_FOLLOWER naming the new one, or a leader that refuses
//! connections) followed within the same fetch; the metadata sync's DescribeConfigs (only the topic's
//! own values) and DescribeAcls on a broker without an authorizer. Real brokers prove the rest (`tests/kafka_mirror.rs`,
//! `tests/kafka_multi_broker.rs`); this runs without Java.

use std::collections::VecDeque;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

mod fake_broker;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, LeaderIdAndEpoch, PartitionData,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, DescribeAclsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    FetchRequest as KafkaFetch, FetchResponse as KafkaFetchResponse, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use klog_log::checkpoint::TopicId;
use klog_mirror::source::{FetchRequest, Isolation, SourceError};
use klog_mirror::{KafkaSource, MirrorSource};
use uuid::Uuid;

use fake_broker::{api_versions, serve, Request};

const TOPIC_ID: [u8; 16] = [7; 16];
const RECORDS: &[u8] = b"raw batch bytes as the broker sent them";

#[derive(Default)]
struct Script {
    port: u16,
    leader_epoch: i32,
    topic_known: bool,
    /// Partition error codes the next fetches answer with (then normal service).
    fetch_errors: VecDeque<i16>,
    metadata_requests: usize,
    /// `(version, current leader epoch, topic id)` of every fetch.
    fetches: Vec<(i16, i32, [u8; 16])>,
    /// Brokers Metadata names besides node 1, as `(node id, port)`.
    other_brokers: Vec<(i32, u16)>,
    /// The partition leader each Metadata response names, in turn (then node 1).
    metadata_leaders: VecDeque<i32>,
    /// The CurrentLeader `(leader id, epoch)` a scripted fetch error carries (none: Kafka's default).
    named_leader: Option<(i32, i32)>,
    /// The node that served each fetch.
    fetch_nodes: Vec<i32>,
}

fn respond(script: &Mutex<Script>, node: i32, request: Request, out: &mut BytesMut) -> Option<()> {
    let Request {
        key,
        version,
        body: mut frame,
    } = request;
    let mut s = script.lock().unwrap();
    match key {
        ApiKey::ApiVersions => api_versions(
            out,
            version,
            &[
                (ApiKey::ApiVersions, 0, 3),
                (ApiKey::Metadata, 0, 12),
                (ApiKey::Fetch, 4, 16),
                (ApiKey::ListOffsets, 1, 8),
                (ApiKey::DescribeConfigs, 1, 4),
                (ApiKey::DescribeAcls, 1, 3),
            ],
        ),
        ApiKey::Metadata => {
            s.metadata_requests += 1;
            let topic = MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                .with_topic_id(Uuid::from_bytes(TOPIC_ID));
            let leader = s.metadata_leaders.pop_front().unwrap_or(1);
            let topic = if s.topic_known {
                topic.with_partitions(vec![MetadataResponsePartition::default()
                    .with_partition_index(0)
                    .with_leader_id(leader.into())
                    .with_leader_epoch(s.leader_epoch)])
            } else {
                topic.with_error_code(3).with_topic_id(Uuid::nil())
            };
            let brokers = std::iter::once((1, s.port))
                .chain(s.other_brokers.iter().copied())
                .map(|(id, port)| {
                    MetadataResponseBroker::default()
                        .with_node_id(id.into())
                        .with_host(StrBytes::from_static_str("127.0.0.1"))
                        .with_port(port as i32)
                })
                .collect();
            MetadataResponse::default()
                .with_cluster_id(Some(StrBytes::from_static_str("fake-cluster-id-000000")))
                .with_brokers(brokers)
                .with_topics(vec![topic])
                .encode(out, version)
                .unwrap();
        }
        ApiKey::Fetch => {
            let request = KafkaFetch::decode(&mut frame, version).unwrap();
            let t = &request.topics[0];
            let p = &t.partitions[0];
            s.fetches
                .push((version, p.current_leader_epoch, *t.topic_id.as_bytes()));
            s.fetch_nodes.push(node);
            let data = PartitionData::default().with_partition_index(0);
            let named = s
                .named_leader
                .map_or_else(LeaderIdAndEpoch::default, |(id, epoch)| {
                    LeaderIdAndEpoch::default()
                        .with_leader_id(id.into())
                        .with_leader_epoch(epoch)
                });
            let data = match s.fetch_errors.pop_front() {
                // No CurrentLeader unless scripted: the source must ask Metadata for the epoch.
                Some(code) => data.with_error_code(code).with_current_leader(named),
                None if p.current_leader_epoch < s.leader_epoch => data
                    .with_error_code(74)
                    .with_current_leader(LeaderIdAndEpoch::default()),
                None => data
                    .with_high_watermark(10)
                    .with_last_stable_offset(10)
                    .with_log_start_offset(0)
                    .with_records(Some(Bytes::from_static(RECORDS))),
            };
            KafkaFetchResponse::default()
                .with_responses(vec![FetchableTopicResponse::default()
                    .with_topic_id(t.topic_id)
                    .with_partitions(vec![data])])
                .encode(out, version)
                .unwrap();
        }
        ApiKey::DescribeConfigs => {
            // A topic-set value, a default and a broker-level one (only the first is the topic's), a
            // sensitive topic-set one (no value), for the topic asked about.
            let request = DescribeConfigsRequest::decode(&mut frame, version).unwrap();
            assert_eq!(request.resources[0].resource_name.as_str(), "t");
            let entry = |name: &'static str, value: Option<&'static str>, source: i8| {
                DescribeConfigsResourceResult::default()
                    .with_name(StrBytes::from_static_str(name))
                    .with_value(value.map(StrBytes::from_static_str))
                    .with_config_source(source)
                    .with_is_sensitive(value.is_none())
            };
            let result = DescribeConfigsResult::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("t"))
                .with_configs(vec![
                    entry("retention.ms", Some("3600000"), 1),
                    entry("segment.bytes", Some("1073741824"), 5),
                    entry("max.message.bytes", Some("2000000"), 4),
                    entry("secret.thing", None, 1),
                ]);
            let result = if s.topic_known {
                result
            } else {
                result.with_error_code(3).with_configs(vec![])
            };
            DescribeConfigsResponse::default()
                .with_results(vec![result])
                .encode(out, version)
                .unwrap();
        }
        ApiKey::DescribeAcls => {
            // A broker without an authorizer.
            DescribeAclsResponse::default()
                .with_error_code(54)
                .with_error_message(Some(StrBytes::from_static_str(
                    "No Authorizer is configured on the broker",
                )))
                .encode(out, version)
                .unwrap();
        }
        other => panic!("the fake broker does not serve {other:?}"),
    }
    Some(())
}

fn fake_broker() -> (String, Arc<Mutex<Script>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = Arc::new(Mutex::new(Script {
        port,
        leader_epoch: 5,
        topic_known: true,
        ..Script::default()
    }));
    listen(listener, &script, 1);
    (format!("kafka://127.0.0.1:{port}"), script)
}

/// Serves `listener` as node `node` of the scripted cluster.
fn listen(listener: TcpListener, script: &Arc<Mutex<Script>>, node: i32) {
    let shared = Arc::clone(script);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || serve(stream, |r, out| respond(&shared, node, r, out)));
        }
    });
}

/// A second broker of the scripted cluster, node `node`, named by Metadata from now on.
fn add_broker(script: &Arc<Mutex<Script>>, node: i32) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    script.lock().unwrap().other_brokers.push((node, port));
    listen(listener, script, node);
}

fn fetch_at(epoch: i32) -> FetchRequest {
    FetchRequest {
        topic: "t".into(),
        topic_id: TopicId(TOPIC_ID),
        partition: 0,
        fetch_offset: 0,
        last_fetched_epoch: None,
        current_leader_epoch: epoch,
        max_bytes: 1 << 16,
        isolation: Isolation::ReadCommitted,
    }
}

#[test]
fn fencing_routing_and_unknown_topics_against_a_scripted_broker() {
    let (source_uri, script) = fake_broker();
    let source = KafkaSource::new(&source_uri).unwrap();
    assert_eq!(source.cluster_id().unwrap(), "fake-cluster-id-000000");
    let described = source.topic("t").unwrap().unwrap();
    assert_eq!((described.id, described.partitions), (TopicId(TOPIC_ID), 1));

    // Epoch discovery: fenced at 0 with no CurrentLeader -> the epoch Metadata reports.
    assert_eq!(
        source.fetch(&fetch_at(0)).unwrap_err(),
        SourceError::FencedLeaderEpoch { leader_epoch: 5 }
    );
    let r = source.fetch(&fetch_at(5)).unwrap();
    assert_eq!(r.records, RECORDS);
    assert_eq!((r.high_watermark, r.last_stable_offset), (10, 10));
    {
        let s = script.lock().unwrap();
        // Fetch at the highest version both speak (16), by topic id.
        assert!(s.fetches.iter().all(|f| f.0 == 16 && f.2 == TOPIC_ID));
        assert_eq!(s.fetches.iter().map(|f| f.1).collect::<Vec<_>>(), [0, 5]);
    }

    // NOT_LEADER_OR_FOLLOWER: unavailable now, Metadata asked again before the next fetch.
    script.lock().unwrap().fetch_errors.push_back(6);
    let before = script.lock().unwrap().metadata_requests;
    let e = source.fetch(&fetch_at(5)).unwrap_err();
    assert!(
        matches!(&e, SourceError::Unavailable(m) if m.contains("NOT_LEADER_OR_FOLLOWER")),
        "{e:?}"
    );
    assert_eq!(source.fetch(&fetch_at(5)).unwrap().records, RECORDS);
    assert_eq!(script.lock().unwrap().metadata_requests, before + 1);

    // UNKNOWN_TOPIC_ID while Metadata still names the topic: a transient, not a deleted topic.
    script.lock().unwrap().fetch_errors.push_back(100);
    let e = source.fetch(&fetch_at(5)).unwrap_err();
    assert!(
        matches!(&e, SourceError::Unavailable(m) if m.contains("UNKNOWN_TOPIC_ID")),
        "{e:?}"
    );
    // Once Metadata agrees it is gone, it is gone.
    {
        let mut s = script.lock().unwrap();
        s.fetch_errors.push_back(100);
        s.topic_known = false;
    }
    let e = source.fetch(&fetch_at(5)).unwrap_err();
    assert!(
        matches!(e, SourceError::UnknownTopicOrPartition(_)),
        "{e:?}"
    );
    assert_eq!(source.topic("t").unwrap(), None);
}

#[test]
fn a_leader_that_moved_is_followed_within_the_fetch() {
    let (source_uri, script) = fake_broker();
    add_broker(&script, 2);
    // Node 3 is named by Metadata but refuses connections (a port that was free a moment ago).
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    script.lock().unwrap().other_brokers.push((3, dead));
    let source = KafkaSource::new(&source_uri).unwrap();
    source.topic("t").unwrap().unwrap();
    assert_eq!(source.fetch(&fetch_at(5)).unwrap().records, RECORDS);

    // Node 1 no longer leads and names node 2 in CurrentLeader: the same call fetches from node 2
    // (Metadata, which might still name node 1, is not needed). Seen to fail before the fetcher
    // followed a moved leader: Unavailable("... NOT_LEADER_OR_FOLLOWER"), the partition FAILED.
    {
        let mut s = script.lock().unwrap();
        s.fetch_errors.push_back(6);
        s.named_leader = Some((2, 5));
    }
    let metadata_before = script.lock().unwrap().metadata_requests;
    let r = source.fetch(&fetch_at(5));
    assert_eq!(r.unwrap().records, RECORDS);
    {
        let s = script.lock().unwrap();
        assert_eq!(s.fetch_nodes[s.fetch_nodes.len() - 2..], [1, 2]);
        assert_eq!(s.metadata_requests, metadata_before);
    }
    assert_eq!(source.fetch(&fetch_at(5)).unwrap().records, RECORDS);
    assert_eq!(*script.lock().unwrap().fetch_nodes.last().unwrap(), 2);

    // The leader moves to node 3, which refuses connections; Metadata asked again after the refusal
    // names node 1: the same call fetches from node 1.
    script.lock().unwrap().metadata_leaders.extend([3, 1]);
    source.topic("t").unwrap().unwrap(); // Metadata: node 3 leads
    let r = source.fetch(&fetch_at(5));
    assert_eq!(r.unwrap().records, RECORDS);
    assert_eq!(*script.lock().unwrap().fetch_nodes.last().unwrap(), 1);

    // A leader Metadata still names but nobody can reach fails the call, naming the broker.
    script.lock().unwrap().metadata_leaders.extend([3, 3]);
    source.topic("t").unwrap().unwrap();
    let e = source.fetch(&fetch_at(5)).unwrap_err();
    assert!(
        matches!(&e, SourceError::Unavailable(m) if m.contains(&format!("127.0.0.1:{dead}"))),
        "{e:?}"
    );
}

/// DescribeConfigs: only the topic's own (DYNAMIC_TOPIC_CONFIG) values, never defaults, broker
/// settings or a sensitive value; an unknown topic is named. DescribeAcls on a broker without an
/// authorizer (SECURITY_DISABLED): no bindings, not an error.
#[test]
fn topic_configs_are_the_topics_own_and_no_authorizer_means_no_bindings() {
    let (bootstrap, script) = fake_broker();
    let source = KafkaSource::new(&bootstrap).unwrap();
    let configs = source.topic_configs("t").unwrap().unwrap();
    assert_eq!(
        configs.into_iter().collect::<Vec<_>>(),
        vec![("retention.ms".to_string(), "3600000".to_string())]
    );
    assert_eq!(source.acls().unwrap(), Some(vec![]));
    script.lock().unwrap().topic_known = false;
    assert_eq!(
        source.topic_configs("t").unwrap_err(),
        SourceError::UnknownTopicOrPartition("t".into())
    );
}
