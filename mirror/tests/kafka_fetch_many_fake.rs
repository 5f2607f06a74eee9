//! `KafkaSource::fetch_many` against two scripted brokers on loopback that speak the real wire format
//! (encoded with the kafka-protocol crate) and keep KIP-227 fetch sessions as a broker does: one Fetch
//! per broker carrying the partitions it leads, full then incremental (only what changed, forgotten
//! partitions named), a session the broker lost answered by a full fetch at once, one partition's
//! error leaving the others of its broker alone, a leader that moved fetched again within the call
//! where it is led now, and a broken connection dropping its broker's session. Real brokers prove the rest (`tests/kafka_mirror_scale.rs`); this runs
//! without Java, and reaches what a real broker does not do on cue.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

mod fake_broker;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, LeaderIdAndEpoch, PartitionData,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, FetchRequest as KafkaFetch, FetchResponse as KafkaFetchResponse, MetadataResponse,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use klog_log::checkpoint::TopicId;
use klog_mirror::source::{FetchManyResponse, FetchRequest, Isolation, SourceError};
use klog_mirror::{KafkaSource, MirrorSource};
use uuid::Uuid;

use fake_broker::{api_versions, serve, Request};

const TOPIC_ID: [u8; 16] = [7; 16];
const RECORDS: &[u8] = b"raw batch bytes as the broker sent them";
const PARTITIONS: i32 = 4;

/// One Fetch as a scripted broker saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    node: i32,
    session_id: i32,
    session_epoch: i32,
    partitions: Vec<i32>,
    forgotten: Vec<i32>,
    max_bytes: i32,
}

/// A broker's fetch session: (id, the epoch it expects next, its partitions).
type Session = (i32, i32, BTreeSet<i32>);

#[derive(Default)]
struct Script {
    /// Node id -> port.
    ports: BTreeMap<i32, u16>,
    /// Partition -> the node Metadata names as its leader (and the only one that serves it).
    leaders: BTreeMap<i32, i32>,
    sessions: BTreeMap<i32, Session>,
    /// Sessions each node created so far (its ids are node * 100 + 1, + 2, ...).
    created: BTreeMap<i32, i32>,
    /// Top-level errors the next fetches to a node answer with (a lost session, ...).
    top_errors: VecDeque<(i32, i16)>,
    /// One-shot partition errors, with the CurrentLeader they carry.
    partition_errors: BTreeMap<(i32, i32), (i16, (i32, i32))>,
    fetches: Vec<Seen>,
    /// Nodes that close the connection instead of answering their next fetch.
    hang_ups: VecDeque<i32>,
}

impl Script {
    fn metadata(&self) -> MetadataResponse {
        let partitions = self
            .leaders
            .iter()
            .map(|(&p, &leader)| {
                MetadataResponsePartition::default()
                    .with_partition_index(p)
                    .with_leader_id(leader.into())
                    .with_leader_epoch(0)
            })
            .collect();
        let brokers = self
            .ports
            .iter()
            .map(|(&id, &port)| {
                MetadataResponseBroker::default()
                    .with_node_id(id.into())
                    .with_host(StrBytes::from_static_str("127.0.0.1"))
                    .with_port(port as i32)
            })
            .collect();
        MetadataResponse::default()
            .with_cluster_id(Some(StrBytes::from_static_str("fake-cluster-id-000000")))
            .with_brokers(brokers)
            .with_topics(vec![MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                .with_topic_id(Uuid::from_bytes(TOPIC_ID))
                .with_partitions(partitions)])
    }

    /// A broker's side of a Fetch, sessions as KIP-227 keeps them. A partition answers when it was
    /// in the request or has an error (it is no longer led here): the fake's "news".
    fn fetch(&mut self, node: i32, request: &KafkaFetch) -> KafkaFetchResponse {
        let asked: Vec<i32> = request
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.partition))
            .collect();
        let forgotten: Vec<i32> = request
            .forgotten_topics_data
            .iter()
            .flat_map(|t| t.partitions.iter().copied())
            .collect();
        self.fetches.push(Seen {
            node,
            session_id: request.session_id,
            session_epoch: request.session_epoch,
            partitions: asked.clone(),
            forgotten: forgotten.clone(),
            max_bytes: request.max_bytes,
        });
        if let Some(i) = self.top_errors.iter().position(|(n, _)| *n == node) {
            let (_, code) = self.top_errors.remove(i).unwrap_or_default();
            self.sessions.remove(&node);
            return KafkaFetchResponse::default().with_error_code(code);
        }
        let (session_id, answer) = match request.session_epoch {
            -1 => (0, asked.clone()),
            0 => {
                let n = self.created.entry(node).or_default();
                *n += 1;
                let id = node * 100 + *n;
                let set = asked.iter().copied().collect();
                self.sessions.insert(node, (id, 1, set));
                (id, asked.clone())
            }
            epoch => match self.sessions.get_mut(&node) {
                Some((id, expected, set)) if *id == request.session_id && *expected == epoch => {
                    *expected += 1;
                    set.extend(&asked);
                    set.retain(|p| !forgotten.contains(p));
                    let leaders = &self.leaders;
                    let news = set
                        .iter()
                        .copied()
                        .filter(|p| asked.contains(p) || leaders[p] != node)
                        .collect();
                    (*id, news)
                }
                Some(_) => return KafkaFetchResponse::default().with_error_code(71),
                None => return KafkaFetchResponse::default().with_error_code(70),
            },
        };
        let partitions = answer
            .into_iter()
            .map(|p| self.partition(node, p))
            .collect();
        KafkaFetchResponse::default()
            .with_session_id(session_id)
            .with_responses(vec![FetchableTopicResponse::default()
                .with_topic_id(Uuid::from_bytes(TOPIC_ID))
                .with_partitions(partitions)])
    }

    fn partition(&mut self, node: i32, p: i32) -> PartitionData {
        let data = PartitionData::default().with_partition_index(p);
        let named = |(id, epoch): (i32, i32)| {
            LeaderIdAndEpoch::default()
                .with_leader_id(id.into())
                .with_leader_epoch(epoch)
        };
        if let Some((code, leader)) = self.partition_errors.remove(&(node, p)) {
            return data
                .with_error_code(code)
                .with_current_leader(named(leader));
        }
        if self.leaders[&p] != node {
            return data
                .with_error_code(6)
                .with_current_leader(named((self.leaders[&p], 0)));
        }
        data.with_high_watermark(10)
            .with_last_stable_offset(10)
            .with_log_start_offset(0)
            .with_records(Some(Bytes::from_static(RECORDS)))
    }
}

/// The response to one request frame; `None`: hang up instead.
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
            ],
        ),
        ApiKey::Metadata => s.metadata().encode(out, version).unwrap(),
        ApiKey::Fetch => {
            if let Some(i) = s.hang_ups.iter().position(|n| *n == node) {
                s.hang_ups.remove(i);
                return None;
            }
            let request = KafkaFetch::decode(&mut frame, version).unwrap();
            s.fetch(node, &request).encode(out, version).unwrap();
        }
        other => panic!("the fake broker does not serve {other:?}"),
    }
    Some(())
}

/// Two scripted brokers, nodes 1 and 2; partitions 0 and 2 led by node 1, 1 and 3 by node 2.
fn fake_cluster() -> (KafkaSource, Arc<Mutex<Script>>) {
    let script = Arc::new(Mutex::new(Script {
        leaders: (0..PARTITIONS).map(|p| (p, p % 2 + 1)).collect(),
        ..Script::default()
    }));
    let mut bootstrap = Vec::new();
    for node in [1, 2] {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        script.lock().unwrap().ports.insert(node, port);
        bootstrap.push(format!("127.0.0.1:{port}"));
        let shared = Arc::clone(&script);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || serve(stream, |r, out| respond(&shared, node, r, out)));
            }
        });
    }
    let source = KafkaSource::new(&format!("kafka://{}", bootstrap.join(","))).unwrap();
    (source, script)
}

fn request(partition: i32, fetch_offset: i64) -> FetchRequest {
    FetchRequest {
        topic: "t".into(),
        topic_id: TopicId(TOPIC_ID),
        partition,
        fetch_offset,
        last_fetched_epoch: None,
        current_leader_epoch: 0,
        max_bytes: 1 << 16,
        isolation: Isolation::ReadCommitted,
    }
}

fn all_partitions() -> Vec<FetchRequest> {
    (0..PARTITIONS).map(|p| request(p, 0)).collect()
}

/// The fetches the brokers saw since `from`, by node.
fn seen_since(script: &Mutex<Script>, from: usize) -> BTreeMap<i32, Vec<Seen>> {
    let mut out: BTreeMap<i32, Vec<Seen>> = BTreeMap::new();
    for s in &script.lock().unwrap().fetches[from..] {
        out.entry(s.node).or_default().push(s.clone());
    }
    out
}

/// A node's address, as the source names its brokers.
fn address(script: &Mutex<Script>, node: i32) -> String {
    format!("127.0.0.1:{}", script.lock().unwrap().ports[&node])
}

fn fetches(script: &Mutex<Script>) -> usize {
    script.lock().unwrap().fetches.len()
}

fn answered(answer: &FetchManyResponse) -> Vec<usize> {
    answer.iter().map(|(i, _)| *i).collect()
}

fn assert_all_ok(answer: &FetchManyResponse) {
    for (i, r) in answer {
        let r = r.as_ref().unwrap_or_else(|e| panic!("partition {i}: {e}"));
        assert_eq!(r.records, RECORDS);
        assert_eq!(r.high_watermark, 10);
    }
}

#[test]
fn one_fetch_per_broker_full_then_incremental() {
    let (source, script) = fake_cluster();
    let mut requests = all_partitions();
    let answer = source.fetch_many(&requests, 1 << 20);
    assert_eq!(answered(&answer), [0, 1, 2, 3]);
    assert_all_ok(&answer);
    let seen = seen_since(&script, 0);
    let full = |node, partitions: &[i32]| Seen {
        node,
        session_id: 0,
        session_epoch: 0,
        partitions: partitions.to_vec(),
        forgotten: vec![],
        max_bytes: 1 << 19,
    };
    assert_eq!(seen[&1], [full(1, &[0, 2])], "half the budget each");
    assert_eq!(seen[&2], [full(2, &[1, 3])]);
    let counts = source.request_counts();
    assert_eq!(counts.total("Fetch"), 2);
    assert_eq!(counts.by_broker("Fetch").len(), 2);
    let sessions = source.fetch_sessions();
    assert_eq!(
        (
            sessions[&address(&script, 1)],
            sessions[&address(&script, 2)]
        ),
        ((101, 1), (201, 1))
    );

    // Partition 0 moved on, partition 3 is not asked for any more: node 1 is sent partition 0
    // alone, node 2 nothing but the forgetting of partition 3. Only partition 0 has news.
    requests[0].fetch_offset = 10;
    requests.pop();
    let from = fetches(&script);
    let answer = source.fetch_many(&requests, 1 << 20);
    assert_eq!(answered(&answer), [0]);
    assert_all_ok(&answer);
    let seen = seen_since(&script, from);
    let incremental = |node, id, partitions: &[i32], forgotten: &[i32]| Seen {
        node,
        session_id: id,
        session_epoch: 1,
        partitions: partitions.to_vec(),
        forgotten: forgotten.to_vec(),
        max_bytes: 1 << 19,
    };
    assert_eq!(seen[&1], [incremental(1, 101, &[0], &[])]);
    assert_eq!(seen[&2], [incremental(2, 201, &[], &[3])]);
    assert_eq!(source.request_counts().total("Fetch"), 4);
    let sessions = source.fetch_sessions();
    assert_eq!(
        (
            sessions[&address(&script, 1)],
            sessions[&address(&script, 2)]
        ),
        ((101, 2), (201, 2))
    );
}

#[test]
fn a_lost_session_is_a_full_fetch_at_once_not_an_error() {
    let (source, script) = fake_cluster();
    let requests = all_partitions();
    source.fetch_many(&requests, 1 << 20);
    for (node, code) in [(1, 70), (2, 71)] {
        script.lock().unwrap().top_errors.push_back((node, code));
        let from = fetches(&script);
        let answer = source.fetch_many(&requests, 1 << 20);
        // The full fetch answers for all of that broker's partitions; the other broker's
        // incremental one had no news.
        let led = if node == 1 { [0, 2] } else { [1, 3] };
        assert_eq!(answered(&answer), led, "error {code}");
        assert_all_ok(&answer);
        let seen = &seen_since(&script, from)[&node];
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(seen[0].session_epoch > 0, "{seen:?}");
        assert_eq!(seen[1].session_epoch, 0, "then a full fetch: {seen:?}");
        assert_eq!(seen[1].partitions.len(), 2, "{seen:?}");
        // A lost session is not named again; one that is merely out of step is closed by name.
        let expect_id = if code == 70 { 0 } else { seen[0].session_id };
        assert_eq!(seen[1].session_id, expect_id, "{seen:?}");
    }
}

#[test]
fn one_partitions_error_leaves_the_others_of_its_broker_alone() {
    let (source, script) = fake_cluster();
    script
        .lock()
        .unwrap()
        .partition_errors
        .insert((1, 0), (74, (1, 9)));
    let answer = source.fetch_many(&all_partitions(), 1 << 20);
    assert_eq!(answered(&answer), [0, 1, 2, 3]);
    assert_eq!(
        answer[0].1.as_ref().unwrap_err(),
        &SourceError::FencedLeaderEpoch { leader_epoch: 9 }
    );
    assert_all_ok(&answer[1..].to_vec());
    assert_eq!(source.fenced_leader_epochs(), [(0, 9)]);
}

#[test]
fn a_moved_leader_is_fetched_again_at_once_where_it_is_led_now() {
    let (source, script) = fake_cluster();
    let requests = all_partitions();
    source.fetch_many(&requests, 1 << 20);
    // Partition 0 moves to node 2: node 1's session says NOT_LEADER_OR_FOLLOWER naming node 2.
    script.lock().unwrap().leaders.insert(0, 2);
    let from = fetches(&script);
    let answer = source.fetch_many(&requests, 1 << 20);
    assert_eq!(answered(&answer), [0], "{answer:?}");
    assert_all_ok(&answer);
    let seen = seen_since(&script, from);
    assert_eq!(seen[&1].len(), 1);
    assert_eq!(seen[&2].len(), 2, "its session's fetch, then the moved one");
    let moved = &seen[&2][1];
    assert_eq!(
        (
            moved.session_id,
            moved.session_epoch,
            moved.partitions.clone()
        ),
        (0, -1, vec![0]),
        "sessionless, partition 0 alone"
    );
    // The next round: partition 0 joins node 2's session and node 1's forgets it.
    let from = fetches(&script);
    let answer = source.fetch_many(&requests, 1 << 20);
    assert_eq!(answered(&answer), [0]);
    let seen = seen_since(&script, from);
    assert_eq!(
        (
            seen[&1][0].partitions.clone(),
            seen[&1][0].forgotten.clone()
        ),
        (vec![], vec![0])
    );
    assert_eq!(
        (
            seen[&2][0].partitions.clone(),
            seen[&2][0].forgotten.clone()
        ),
        (vec![0], vec![])
    );
}

#[test]
fn a_broken_connection_drops_the_brokers_session() {
    let (source, script) = fake_cluster();
    let requests = all_partitions();
    source.fetch_many(&requests, 1 << 20);
    script.lock().unwrap().hang_ups.push_back(1);
    let answer = source.fetch_many(&requests, 1 << 20);
    // Node 1's partitions fail naming it (its leader is still node 1); node 2 had no news.
    assert_eq!(answered(&answer), [0, 2], "{answer:?}");
    let node1 = address(&script, 1);
    for (i, r) in &answer {
        assert!(
            matches!(r, Err(SourceError::Unavailable(m)) if m.contains(&node1)),
            "partition {i}: {r:?}"
        );
    }
    let sessions = source.fetch_sessions();
    assert!(!sessions.contains_key(&node1), "{sessions:?}");
    assert_eq!(sessions[&address(&script, 2)], (201, 2));
    // The next fetch to node 1 opens a new connection and a new session: full.
    let from = fetches(&script);
    let answer = source.fetch_many(&requests, 1 << 20);
    assert_eq!(answered(&answer), [0, 2]);
    assert_all_ok(&answer);
    let seen = &seen_since(&script, from)[&1];
    assert_eq!(
        (
            seen[0].session_id,
            seen[0].session_epoch,
            seen[0].partitions.clone()
        ),
        (0, 0, vec![0, 2])
    );
    assert_eq!(source.fetch_sessions()[&node1], (102, 1));
}
