//! `KafkaSource::committed_offsets` against a scripted broker speaking the real wire format: the
//! OffsetFetch names every partition of the mirrored topics the metadata resolves (not "all topics",
//! where Kafka leaves out what has nothing committed and, with an authorizer, a topic the caller may not
//! describe), and the answer tells the three cases apart: a committed offset, -1 without an error
//! (nothing committed: the destination may delete its copy), and an error or a partition left out (not
//! answered: nothing may be deleted).

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

mod fake_broker;

use bytes::BytesMut;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    ApiKey, FindCoordinatorResponse, GroupId, ListGroupsResponse, MetadataRequest,
    MetadataResponse, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use klog_mirror::{KafkaSource, MirrorSource};
use uuid::Uuid;

use fake_broker::{api_versions, serve, Request};

/// Topic `t` has four partitions; `gone` is unknown to the metadata.
const PARTITIONS: i32 = 4;
/// TOPIC_AUTHORIZATION_FAILED.
const AUTHORIZATION_FAILED: i16 = 29;

/// One OffsetFetch's topics as asked: `None` for "all topics", else `(name, partitions)`.
type Asked = Option<Vec<(String, Vec<i32>)>>;

#[derive(Default)]
struct Script {
    port: u16,
    /// Every OffsetFetch's topics.
    asked: Vec<Asked>,
}

fn str(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn metadata(request: MetadataRequest, port: u16) -> MetadataResponse {
    let topics = request
        .topics
        .unwrap_or_default()
        .into_iter()
        .filter_map(|t| t.name)
        .map(|name| {
            let topic = MetadataResponseTopic::default().with_name(Some(name.clone()));
            if name.0.as_str() != "t" {
                return topic.with_error_code(3).with_topic_id(Uuid::nil());
            }
            let partitions = (0..PARTITIONS)
                .map(|p| {
                    MetadataResponsePartition::default()
                        .with_partition_index(p)
                        .with_leader_id(1.into())
                })
                .collect();
            topic
                .with_topic_id(Uuid::from_bytes([7; 16]))
                .with_partitions(partitions)
        })
        .collect();
    MetadataResponse::default()
        .with_cluster_id(Some(str("fake-cluster-id-000000")))
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(1.into())
            .with_host(str("127.0.0.1"))
            .with_port(port as i32)])
        .with_topics(topics)
}

/// Group `g`'s answer: t-0 committed at 5, t-1 nothing committed (-1, no error), t-2 an authorization
/// error, t-3 left out; and a topic nobody asked about.
fn offset_fetch() -> OffsetFetchResponse {
    let partition = |index: i32, offset: i64, error: i16| {
        OffsetFetchResponsePartitions::default()
            .with_partition_index(index)
            .with_committed_offset(offset)
            .with_committed_leader_epoch(if offset >= 0 { 2 } else { -1 })
            .with_metadata(Some(str("")))
            .with_error_code(error)
    };
    let t = OffsetFetchResponseTopics::default()
        .with_name(TopicName(str("t")))
        .with_partitions(vec![
            partition(0, 5, 0),
            partition(1, -1, 0),
            partition(2, -1, AUTHORIZATION_FAILED),
        ]);
    let other = OffsetFetchResponseTopics::default()
        .with_name(TopicName(str("other")))
        .with_partitions(vec![partition(0, 9, 0)]);
    OffsetFetchResponse::default().with_groups(vec![OffsetFetchResponseGroup::default()
        .with_group_id(GroupId(str("g")))
        .with_topics(vec![t, other])])
}

fn respond(script: &Mutex<Script>, request: Request, out: &mut BytesMut) -> Option<()> {
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
                (ApiKey::ListGroups, 0, 5),
                (ApiKey::FindCoordinator, 0, 6),
                (ApiKey::OffsetFetch, 0, 9),
            ],
        ),
        ApiKey::Metadata => metadata(
            MetadataRequest::decode(&mut frame, version).unwrap(),
            s.port,
        )
        .encode(out, version)
        .unwrap(),
        ApiKey::ListGroups => ListGroupsResponse::default()
            .with_groups(vec![ListedGroup::default()
                .with_group_id(GroupId(str("g")))
                .with_protocol_type(str("consumer"))
                .with_group_state(str("Empty"))])
            .encode(out, version)
            .unwrap(),
        ApiKey::FindCoordinator => FindCoordinatorResponse::default()
            .with_coordinators(vec![Coordinator::default()
                .with_key(str("g"))
                .with_node_id(1.into())
                .with_host(str("127.0.0.1"))
                .with_port(s.port as i32)])
            .encode(out, version)
            .unwrap(),
        ApiKey::OffsetFetch => {
            let request = OffsetFetchRequest::decode(&mut frame, version).unwrap();
            let asked = request.groups[0].topics.as_ref().map(|topics| {
                topics
                    .iter()
                    .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                    .collect()
            });
            s.asked.push(asked);
            offset_fetch().encode(out, version).unwrap();
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
        ..Script::default()
    }));
    let shared = Arc::clone(&script);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || serve(stream, |r, out| respond(&shared, r, out)));
        }
    });
    (format!("kafka://127.0.0.1:{port}"), script)
}

#[test]
fn offset_fetch_names_the_partitions_and_tells_no_offset_from_no_answer() {
    let (uri, script) = fake_broker();
    let source = KafkaSource::new(&uri).unwrap();
    let topics: BTreeSet<String> = ["t".to_owned(), "gone".to_owned()].into();
    let groups = source.committed_offsets(&topics).unwrap();
    assert_eq!(groups.len(), 1, "{groups:?}");
    let g = &groups[0];
    assert_eq!((g.group.as_str(), g.state.as_str()), ("g", "Empty"));
    let committed: Vec<_> = g
        .offsets
        .iter()
        .map(|c| (c.topic.as_str(), c.partition, c.offset, c.leader_epoch))
        .collect();
    assert_eq!(
        committed,
        [("t", 0, 5, 2)],
        "only what was asked and committed"
    );
    assert_eq!(
        g.no_committed_offset,
        [("t".to_owned(), 1)].into(),
        "-1 without an error is 'nothing committed'; an error or a partition left out is no answer"
    );
    // Every partition of the resolved topic named; the unresolved one not asked about.
    let asked = script.lock().unwrap().asked.clone();
    assert_eq!(
        asked,
        [Some(vec![("t".to_owned(), (0..PARTITIONS).collect())])]
    );
}
