//! The metadata sync's topic configs and ACL bindings from a real Kafka 4.4 broker (KIP-1279 §3.5):
//! a broker running KRaft's StandardAuthorizer (every PLAINTEXT client is `User:ANONYMOUS`, made a super
//! user) holds a topic with configs set and ACL bindings made by Kafka's own `kafka-acls` tool; klog
//! mirrors the topic over `kafka://` and takes its configs but the excluded ones (DescribeConfigs) and the
//! bindings for the topic and groups (DescribeAcls). Changes made with `kafka-configs` and `kafka-acls`
//! while the topic is paused do not arrive; after resume they do.
//!
//! Skips with one line without Java, unless `KLOG_REQUIRE_KAFKA=1` (CI), where it fails.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::kafka::{kafka_available, kafka_tools, workload, Cluster as KafkaCluster};
use common::scratch_dir;
use klog::log::clock::{Clock, ManualClock};
use klog::log::io::StdStorage;
use klog::mirror::acl::AclBinding;
use klog::mirror::{Cluster, ClusterOptions, MirrorState};

const TOPIC: &str = "cfg";
/// A hang guard, not a timing assertion.
const CONVERGE: Duration = Duration::from_secs(120);
/// Past `mirror.metadata.refresh.interval.ms` (30 s by default).
const REFRESH: i64 = 30_001;

fn acls(bootstrap: &str, args: &[&str]) {
    let mut all = vec![
        "run",
        "org.apache.kafka.tools.AclCommand",
        "--bootstrap-server",
        bootstrap,
    ];
    all.extend_from_slice(args);
    kafka_tools(&all);
}

fn alter_config(bootstrap: &str, config: &str) {
    kafka_tools(&[
        "run",
        "org.apache.kafka.tools.ConfigCommand",
        "--bootstrap-server",
        bootstrap,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        TOPIC,
        "--add-config",
        config,
    ]);
}

fn binding(kind: &str, name: &str, pattern: &str, principal: &str, op: &str) -> AclBinding {
    AclBinding::parse(kind, name, pattern, principal, "*", op, "allow").unwrap()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Ticks (real time passing a little between idle ticks) until `done`, or the hang guard trips.
fn tick_until(c: &Cluster, what: &str, done: impl Fn(&Cluster) -> bool) {
    let deadline = Instant::now() + CONVERGE;
    let mut errors = Vec::new();
    while !done(c) {
        let r = c.tick();
        if !r.progressed() {
            std::thread::sleep(Duration::from_millis(50));
        }
        errors.extend(r.errors);
        assert!(Instant::now() < deadline, "{what}: errors {errors:?}");
    }
}

fn state(c: &Cluster) -> Option<MirrorState> {
    c.describe()[0].state
}

#[test]
fn configs_and_acls_from_kafka_follow_the_source_and_halt_while_paused() {
    if !kafka_available() {
        return;
    }
    let root = scratch_dir("kafka-mirror-configs");
    let kafka = KafkaCluster::format(&root.join("kafka"));
    std::fs::OpenOptions::new()
        .append(true)
        .open(root.join("kafka/server.properties"))
        .unwrap()
        .write_all(
            b"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n\
              super.users=User:ANONYMOUS\n",
        )
        .unwrap();
    let broker = kafka.start();
    let bootstrap = broker.bootstrap.clone();
    workload(&[
        "create-topic",
        &bootstrap,
        TOPIC,
        "retention.ms=3600000",
        "cleanup.policy=compact",
        "max.message.bytes=2000000",
        // Kept though klog does not apply it: every config but the excluded ones is synced.
        "compression.type=zstd",
        // On the reference's default topic.properties.exclude: not synced.
        "message.timestamp.type=LogAppendTime",
        "min.insync.replicas=1",
    ]);
    workload(&["create-topic", &bootstrap, "other"]);
    let alice = ["--allow-principal", "User:alice", "--operation", "Read"];
    acls(
        &bootstrap,
        &[&["--add", "--topic", TOPIC][..], &alice[..]].concat(),
    );
    acls(
        &bootstrap,
        &[&["--add", "--group", "g"][..], &alice[..]].concat(),
    );
    acls(
        &bootstrap,
        &[
            "--add",
            "--topic",
            "other",
            "--allow-principal",
            "User:bob",
            "--operation",
            "Read",
        ],
    );
    acls(
        &bootstrap,
        &[
            "--add",
            "--topic",
            "cf",
            "--resource-pattern-type",
            "prefixed",
            "--allow-principal",
            "User:carol",
            "--operation",
            "Write",
        ],
    );

    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let b = Cluster::init(
        Arc::new(StdStorage),
        dyn_clock,
        &root.join("B"),
        ClusterOptions::default(),
    )
    .unwrap();
    b.create_mirror("m", &format!("kafka://{bootstrap}"))
        .unwrap();
    for (t, r) in b.add_topics("m", &[TOPIC.to_string()]).unwrap() {
        r.unwrap_or_else(|e| panic!("{t}: {e}"));
    }
    tick_until(&b, "MIRRORING", |c| {
        state(c) == Some(MirrorState::Mirroring)
    });

    let t = b.topic(TOPIC).unwrap();
    assert_eq!(
        t.source_configs,
        map(&[
            ("cleanup.policy", "compact"),
            ("compression.type", "zstd"),
            ("max.message.bytes", "2000000"),
            ("retention.ms", "3600000"),
        ])
    );
    let log = b.log(TOPIC, 0).unwrap();
    assert_eq!(
        (log.config().max_message_bytes, log.config().retention_ms),
        (2_000_000, 3_600_000)
    );
    let read_t = binding("topic", TOPIC, "literal", "User:alice", "read");
    let group = binding("group", "g", "literal", "User:alice", "read");
    let prefixed = binding("topic", "cf", "prefixed", "User:carol", "write");
    let mut want = vec![read_t.clone(), group.clone(), prefixed.clone()];
    want.sort();
    assert_eq!(
        b.mirrors()["m"].acls,
        want,
        "bob's binding is for a topic not mirrored"
    );

    // Paused: kafka-configs and kafka-acls changes stay on the source.
    for (t, r) in b.pause_topics("m", &[TOPIC.to_string()]).unwrap() {
        r.unwrap_or_else(|e| panic!("{t}: {e}"));
    }
    tick_until(&b, "PAUSED", |c| state(c) == Some(MirrorState::Paused));
    alter_config(&bootstrap, "retention.ms=7200000");
    acls(
        &bootstrap,
        &[&["--remove", "--force", "--topic", TOPIC][..], &alice[..]].concat(),
    );
    clock.advance(REFRESH);
    for _ in 0..3 {
        b.tick();
    }
    assert_eq!(
        b.topic(TOPIC).unwrap().source_configs["retention.ms"],
        "3600000"
    );
    assert_eq!(b.mirrors()["m"].acls, want);

    // Resumed: they arrive at the next sync.
    for (t, r) in b.resume_topics("m", &[TOPIC.to_string()]).unwrap() {
        r.unwrap_or_else(|e| panic!("{t}: {e}"));
    }
    clock.advance(REFRESH);
    tick_until(&b, "the changed retention.ms", |c| {
        c.topic(TOPIC).unwrap().source_configs["retention.ms"] == "7200000"
    });
    assert_eq!(b.log(TOPIC, 0).unwrap().config().retention_ms, 7_200_000);
    let mut want = vec![group, prefixed];
    want.sort();
    assert_eq!(b.mirrors()["m"].acls, want);
    b.close().unwrap();
    broker.stop();
}
