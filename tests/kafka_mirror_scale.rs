//! Mirroring a few hundred partitions from a real three-broker Kafka 4.x cluster (KRaft, three
//! combined broker+controller nodes) over `kafka://`: the shape of the traffic at cluster scale.
//!
//! - Three topics of 100 partitions, each partition on one broker, the leaders spread over all three;
//!   records produced into every partition.
//! - `KafkaSource::fetch_many` directly: one call for all 300 partitions sends exactly one Fetch per
//!   broker (three), each opening a KIP-227 session; the next calls are incremental in the same
//!   sessions (same session id, the epoch one higher), and a partition with nothing new is absent from
//!   the answer.
//! - A klog `Cluster` mirroring all 300 converges byte for byte to the brokers' `.log` files, and no
//!   round sends more Fetch requests than there are source brokers (exactly three once every partition
//!   is MIRRORING), counted from the client's request log (`KafkaSource::request_counts`), every
//!   fetch after a broker's first one incremental in that broker's one session; and from the source
//!   side, each broker's own request log (`kafka.request.logger` at DEBUG) shows the same Fetch
//!   requests.
//!
//! One cluster for the file, one test. Skips with one line without Java, unless `KLOG_REQUIRE_KAFKA=1`
//! (CI), where it fails.

mod common;
#[path = "mirror_support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::kafka::{kafka_available, kafka_tools, workload, KraftCluster};
use common::scratch_dir;
use klog::log::clock::Clock;
use klog::mirror::kafka_source::RequestCounts;
use klog::mirror::source::{FetchRequest, Isolation};
use klog::mirror::{KafkaSource, MirrorSettings, MirrorSource, MirrorState};
use support::kafka::KafkaMirror as Mirror;
use support::{all_ok, batches, kafka_batches, kafka_end, state_of, topics};

const TOPICS: usize = 3;
const PARTITIONS: usize = 100;
const BROKERS: u64 = 3;
/// Records per topic, spread round-robin over its partitions.
const RECORDS_PER_TOPIC: &str = "10000";
/// No wait is longer than this (a hang guard, not a timing assertion).
const CONVERGE: Duration = Duration::from_secs(150);

fn topic_names() -> Vec<String> {
    (0..TOPICS).map(|t| format!("scale-{t}")).collect()
}

/// The broker that holds (and leads) partition `p`: 1, 2, 3, 1, ...
fn leader_of(p: usize) -> usize {
    p % 3 + 1
}

/// Creates the topics (one replica per partition, rotating over the brokers) and produces into every
/// partition, all topics at once.
fn create_and_produce(bootstrap: &str) {
    let assignment = (0..PARTITIONS)
        .map(|p| leader_of(p).to_string())
        .collect::<Vec<_>>()
        .join("/");
    std::thread::scope(|s| {
        for topic in topic_names() {
            let assignment = &assignment;
            s.spawn(move || {
                workload(&["create-topic-assigned", bootstrap, &topic, assignment]);
                kafka_tools(&[
                    "run",
                    "org.apache.kafka.tools.ProducerPerformance",
                    "--bootstrap-server",
                    bootstrap,
                    "--topic",
                    &topic,
                    "--num-records",
                    RECORDS_PER_TOPIC,
                    "--record-size",
                    "100",
                    "--throughput",
                    "-1",
                    "--command-property",
                    "acks=all",
                    "linger.ms=0",
                    "batch.size=2048",
                    "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner",
                ]);
            });
        }
    });
}

/// Every partition's directory at its broker.
fn partition_dirs(kafka: &KraftCluster) -> Vec<(String, i32, PathBuf)> {
    let mut out = Vec::new();
    for topic in topic_names() {
        for p in 0..PARTITIONS {
            let dir = kafka
                .node(leader_of(p) as i32)
                .partition_dir(&topic, p as i32);
            out.push((topic.clone(), p as i32, dir));
        }
    }
    out
}

/// The difference of two counts of Fetch requests, per broker.
fn fetches_since(before: &RequestCounts, now: &RequestCounts) -> BTreeMap<String, u64> {
    now.by_broker("Fetch")
        .into_iter()
        .map(|(b, n)| (b.clone(), n - before.get("Fetch", &b)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// `fetch_many` on a source of its own: one Fetch per broker, sessions opened then reused.
fn fetch_many_directly(bootstrap: &str, dirs: &[(String, i32, PathBuf)]) {
    let source = KafkaSource::new(&format!("kafka://{bootstrap}")).unwrap();
    let ids: BTreeMap<String, _> = topic_names()
        .into_iter()
        .map(|t| {
            let id = source.topic(&t).unwrap().expect("created").id;
            (t, id)
        })
        .collect();
    let mut requests: Vec<FetchRequest> = dirs
        .iter()
        .map(|(topic, p, _)| FetchRequest {
            topic: topic.clone(),
            topic_id: ids[topic],
            partition: *p,
            fetch_offset: 0,
            last_fetched_epoch: None,
            current_leader_epoch: 0,
            max_bytes: 1 << 20,
            isolation: Isolation::ReadCommitted,
        })
        .collect();
    // For the record (printed, not asserted): what the same partitions cost one Fetch each.
    let single = Instant::now();
    for r in &requests {
        source.fetch(r).unwrap();
    }
    let single = single.elapsed();
    let before = source.request_counts();
    let many = Instant::now();
    let answer = source.fetch_many(&requests, 64 << 20);
    let many = many.elapsed();
    eprintln!(
        "{} partitions from offset 0: one Fetch each {single:?}, fetch_many {many:?}",
        requests.len()
    );
    let sent = fetches_since(&before, &source.request_counts());
    assert_eq!(
        sent.len() as u64,
        BROKERS,
        "a Fetch to every broker: {sent:?}"
    );
    assert!(
        sent.values().all(|&n| n == 1),
        "one Fetch per broker: {sent:?}"
    );
    assert_eq!(
        answer.len(),
        requests.len(),
        "a full fetch answers for every partition"
    );
    for (i, result) in &answer {
        let r = result
            .as_ref()
            .unwrap_or_else(|e| panic!("{:?}: {e}", dirs[*i]));
        let end = kafka_end(&dirs[*i].2);
        assert!(end > 0, "{:?}: records were produced into it", dirs[*i]);
        assert_eq!(r.high_watermark, end, "{:?}", dirs[*i]);
        assert!(!r.records.is_empty(), "{:?}", dirs[*i]);
        requests[*i].fetch_offset = r.high_watermark;
    }
    let sessions = source.fetch_sessions();
    assert_eq!(sessions.len() as u64, BROKERS, "{sessions:?}");
    assert!(
        sessions.values().all(|&(id, epoch)| id != 0 && epoch == 1),
        "every broker opened a session: {sessions:?}"
    );

    // Every partition at its end: the offsets changed, so they are sent; nothing new to answer
    // with but the answer for those that were sent and the broker had news about.
    source.fetch_many(&requests, 64 << 20);
    // Nothing changed since: an incremental fetch carrying no partition, and an empty answer.
    let before = source.request_counts();
    let idle = Instant::now();
    let answer = source.fetch_many(&requests, 64 << 20);
    eprintln!(
        "an incremental fetch_many with no news: {:?}",
        idle.elapsed()
    );
    let sent = fetches_since(&before, &source.request_counts());
    assert!(
        sent.len() as u64 == BROKERS && sent.values().all(|&n| n == 1),
        "{sent:?}"
    );
    assert!(
        answer.is_empty(),
        "no partition had news: {:?}",
        answer.len()
    );
    let later = source.fetch_sessions();
    for (broker, &(id, epoch)) in &sessions {
        assert_eq!(
            later[broker],
            (id, epoch + 2),
            "{broker}: the same session, two fetches on"
        );
    }
}

/// Turns on each broker's request log (`kafka.request.logger` at DEBUG, through Kafka's own
/// `kafka-configs --entity-type broker-loggers`): a line per completed request in its log.
fn request_log_on(kafka: &KraftCluster, bootstrap: &str) {
    std::thread::scope(|s| {
        for node in &kafka.nodes {
            let id = node.id.to_string();
            s.spawn(move || {
                kafka_tools(&[
                    "run",
                    "org.apache.kafka.tools.ConfigCommand",
                    "--bootstrap-server",
                    bootstrap,
                    "--entity-type",
                    "broker-loggers",
                    "--entity-name",
                    &id,
                    "--alter",
                    "--add-config",
                    "kafka.request.logger=DEBUG",
                ])
            });
        }
    });
}

/// The Fetch requests from klog a broker's request log shows (Fetch is API key 1).
fn logged_fetches(log_file: &Path) -> u64 {
    let text = std::fs::read_to_string(log_file).unwrap_or_default();
    text.lines()
        .filter(|l| {
            l.contains("Completed request:")
                && l.contains("\"clientId\":\"klog-mirror\"")
                && l.contains("\"requestApiKey\":1,")
        })
        .count() as u64
}

/// A sample request-log line, for a failure message.
fn sample_request_line(log_file: &Path) -> String {
    let text = std::fs::read_to_string(log_file).unwrap_or_default();
    text.lines()
        .find(|l| l.contains("Completed request:"))
        .map_or("none".to_owned(), |l| l.chars().take(600).collect())
}

/// What these tests ask of the shared [`Mirror`] beyond its ticks.
trait MirrorExt {
    fn counts(&self) -> RequestCounts;
    /// Whether every partition is MIRRORING at its broker's end.
    fn caught_up(&self, targets: &[(String, i32, i64)]) -> bool;
}

impl MirrorExt for Mirror {
    fn counts(&self) -> RequestCounts {
        let sources = self.sources.lock().unwrap();
        assert_eq!(sources.len(), 1, "one source for the one mirror");
        sources[0].request_counts()
    }

    fn caught_up(&self, targets: &[(String, i32, i64)]) -> bool {
        targets.iter().all(|(t, p, end)| {
            self.cluster.log(t, *p).unwrap().log_end_offset() == *end
                && state_of(&self.cluster, t, *p) == Some(MirrorState::Mirroring)
        })
    }
}

/// A klog cluster at `root` mirroring through recorded Kafka sources: small per-partition fetches
/// (several rounds before a partition is caught up), syncs off (what is counted is requests).
fn mirror(root: &Path) -> Mirror {
    let settings = MirrorSettings {
        fetch_max_bytes: 4 << 10,
        fsync: false,
        ..MirrorSettings::default()
    };
    Mirror::new(root, false, settings, Duration::from_millis(50))
}

#[test]
fn hundreds_of_partitions_one_fetch_per_broker_per_round() {
    if !kafka_available() {
        return;
    }
    let started = Instant::now();
    let phase = |name: &str| eprintln!("{name}: {:?} since start", started.elapsed());
    let root = scratch_dir("kafka-mirror-scale");
    let mut kafka = KraftCluster::format(&root.join("kafka"), 3);
    kafka.start_all();
    phase("three nodes started");
    let bootstrap = kafka.bootstrap();
    create_and_produce(&bootstrap);
    phase("300 partitions created and produced into");
    let dirs = partition_dirs(&kafka);
    fetch_many_directly(&bootstrap, &dirs);
    phase("fetch_many directly");

    request_log_on(&kafka, &bootstrap);
    let logged_before: Vec<u64> = kafka
        .nodes
        .iter()
        .map(|n| logged_fetches(n.log_file()))
        .collect();
    phase("request logs on");

    let m = mirror(&root.join("klog"));
    m.cluster
        .create_mirror("m", &format!("kafka://{bootstrap}"))
        .unwrap();
    let names = topic_names();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    all_ok(m.cluster.add_topics("m", &topics(&names)).unwrap());
    let targets: Vec<(String, i32, i64)> = dirs
        .iter()
        .map(|(t, p, dir)| (t.clone(), *p, kafka_end(dir)))
        .collect();
    let deadline = Instant::now() + CONVERGE;
    let mut rounds = 0;
    let mut errors = Vec::new();
    while !m.caught_up(&targets) {
        let before = m.counts();
        let report = m.cluster.tick();
        let sent = fetches_since(&before, &m.counts());
        assert!(
            sent.values().all(|&n| n == 1),
            "round {rounds}: at most one Fetch per broker: {sent:?}"
        );
        errors.extend(report.errors.iter().cloned());
        if !report.progressed() {
            std::thread::sleep(Duration::from_millis(100));
            if let Some(t) = report.next_retry_ms {
                m.clock.set(t.max(m.clock.now_ms()));
            }
        }
        rounds += 1;
        assert!(
            Instant::now() < deadline,
            "no convergence after {rounds} rounds; errors {errors:?}"
        );
    }
    phase("300 partitions mirrored");
    assert!(errors.is_empty(), "{errors:?}");
    // Caught up, every partition MIRRORING: each round is exactly one Fetch per broker.
    for _ in 0..3 {
        let before = m.counts();
        m.cluster.tick();
        let sent = fetches_since(&before, &m.counts());
        assert!(
            sent.len() as u64 == BROKERS && sent.values().all(|&n| n == 1),
            "requests per round = source brokers: {sent:?}"
        );
    }
    let counts = m.counts();
    let sessions = m.sources.lock().unwrap()[0].fetch_sessions();
    for (broker, n) in counts.by_broker("Fetch") {
        // A full fetch opens the session at epoch 1, each incremental one adds one: every fetch
        // after the first was incremental, in the one session.
        assert_eq!(sessions[&broker].1 as u64, n, "{broker}: {sessions:?}");
    }
    eprintln!(
        "{rounds} rounds to converge; Fetch requests per broker {:?}, Metadata {}",
        counts.by_broker("Fetch"),
        counts.total("Metadata")
    );
    // The same count from the source side: each broker's request log shows exactly the Fetch
    // requests the client counted for it (a line is written once its response is sent: wait for
    // the last few).
    let deadline = Instant::now() + CONVERGE;
    for (node, before) in kafka.nodes.iter().zip(logged_before) {
        let ours = counts.get("Fetch", &node.bootstrap());
        loop {
            let theirs = logged_fetches(node.log_file()) - before;
            if theirs == ours {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {}: {theirs} Fetch requests from klog in its request log, {ours} counted by \
                 the client; a line: {}",
                node.id,
                sample_request_line(node.log_file())
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    phase("request logs agree");
    for (t, p, dir) in &dirs {
        let ours = batches(&m.cluster.log(t, *p).unwrap());
        let theirs = kafka_batches(dir);
        assert_eq!(ours.len(), theirs.len(), "{t}-{p}");
        for (o, k) in ours.iter().zip(&theirs) {
            assert_eq!(
                (o.base_offset, o.epoch),
                (k.base_offset, k.epoch),
                "{t}-{p}"
            );
            assert!(
                o.bytes == k.bytes,
                "{t}-{p}: batch at {} differs",
                o.base_offset
            );
        }
    }
    phase("byte for byte");
    drop(m);
    drop(kafka);
    let _ = std::fs::remove_dir_all(&root);
}
