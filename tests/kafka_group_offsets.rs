//! Failover that a consumer group can follow (issue 15): a Java consumer group reads part of a topic on a
//! real Kafka 4.4 broker and commits; klog mirrors the topic over `kafka://` and carries the group's
//! committed offset (ListGroups + OffsetFetch) into its own `__consumer_offsets`; nothing moves while the
//! topic is paused, the newer commit arrives after resume; after failover Kafka's `kafka-dump-log
//! --offsets-decoder` prints klog's records with the same commits, and a second Kafka broker started on
//! klog's files (the data partition and the `__consumer_offsets` partition, adopted as `klog_to_kafka`
//! does) serves the group's committed offset, so a Java consumer of the group resumes exactly at the
//! next record.
//!
//! Skips with one line without Java, unless `KLOG_REQUIRE_KAFKA=1` (CI), where it fails.

mod common;
#[path = "mirror_support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::kafka::{copy_dir, dump_log, kafka_available, workload, Cluster as KafkaCluster};
use common::{scratch_dir, sorted_entries};
use klog::log::checkpoint::{
    read_offsets, read_partition_metadata, write_offsets, write_partition_metadata,
    LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
};
use klog::log::clock::ManualClock;
use klog::log::coordinator::{partition_for_group, CONSUMER_OFFSETS_TOPIC};
use klog::log::io::StdStorage;
use klog::mirror::{Cluster, ClusterOptions, MirrorState};
use serde_json::Value;
use support::{all_ok, state_of, topics};

const TOPIC: &str = "orders";
const GROUP: &str = "billing";
const REFRESH_MS: i64 = 30_000;
/// No wait is longer than this (a hang guard, not a timing assertion).
const CONVERGE: Duration = Duration::from_secs(120);

/// Kafka's default `offsets.topic.num.partitions` (the harness uses 1), which klog also uses: the group
/// maps to the same `__consumer_offsets` partition on both.
fn with_default_offsets_partitions(cluster: &KafkaCluster) {
    let path = cluster.root.join("server.properties");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("offsets.topic.num.partitions=1\n"));
    let text = text.replace(
        "offsets.topic.num.partitions=1\n",
        "offsets.topic.num.partitions=50\n",
    );
    std::fs::write(&path, text).unwrap();
}

/// `group-consume`: the offsets the group read, and what it committed.
fn group_consume(bootstrap: &str, count: usize, reset: &str) -> (Vec<i64>, i64) {
    let count_arg = count.to_string();
    let lines = workload(&["group-consume", bootstrap, TOPIC, GROUP, &count_arg, reset]);
    let (last, records) = lines.split_last().unwrap();
    let read = records
        .iter()
        .map(|r| r["offset"].as_i64().unwrap())
        .collect();
    (read, last["committed"].as_i64().unwrap())
}

fn committed(b: &Cluster) -> Option<(i64, i32)> {
    b.committed_offsets()
        .unwrap()
        .get(&(GROUP.to_owned(), TOPIC.to_owned(), 0))
        .map(|c| (c.offset, c.leader_epoch))
}

/// Ticks (the clock one refresh period further each time) until `done`.
fn converge(b: &Cluster, clock: &ManualClock, what: &str, done: impl Fn(&Cluster) -> bool) {
    let started = Instant::now();
    while !done(b) {
        assert!(
            started.elapsed() < CONVERGE,
            "{what}: not reached; last tick {:?}",
            b.tick()
        );
        clock.advance(REFRESH_MS);
        b.tick();
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    sorted_entries(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect()
}

/// `(key, payload)` of every record line of Kafka's `--offsets-decoder` dump.
fn kafka_records(dump: &str) -> Vec<(Value, Value)> {
    dump.lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once(" key: ")?;
            let (key, payload) = rest.split_once(" payload: ")?;
            Some((
                serde_json::from_str(key).unwrap(),
                serde_json::from_str(payload).unwrap_or(Value::Null),
            ))
        })
        .collect()
}

/// Replaces the broker's partition `name` by klog's, with the broker's topic id and checkpoints at
/// klog's log end (as `klog_to_kafka` adopts a partition).
fn adopt(kafka_data: &Path, klog_dir: &Path, name: &str, log_end_offset: i64) {
    let target = kafka_data.join(name);
    let id = read_partition_metadata(&StdStorage, &target)
        .unwrap()
        .expect("the broker's partition has its topic id");
    std::fs::remove_dir_all(&target).unwrap();
    copy_dir(&klog_dir.join(name), &target);
    write_partition_metadata(&StdStorage, &target, id).unwrap();
    let (topic, partition) = name.rsplit_once('-').unwrap();
    let key = (topic.to_owned(), partition.parse().unwrap());
    for (file, offset) in [
        (RECOVERY_POINT_CHECKPOINT, Some(log_end_offset)),
        (REPLICATION_OFFSET_CHECKPOINT, Some(log_end_offset)),
        (LOG_START_OFFSET_CHECKPOINT, None),
    ] {
        let path = kafka_data.join(file);
        let mut map = read_offsets(&StdStorage, &path).unwrap();
        match offset {
            Some(o) => map.insert(key.clone(), o),
            None => map.remove(&key),
        };
        write_offsets(&StdStorage, &path, &map).unwrap();
    }
}

#[test]
fn a_consumer_group_fails_over_to_klog_and_resumes_on_a_broker_reading_klogs_files() {
    if !kafka_available() {
        return;
    }
    let root = scratch_dir("kafka-group-offsets");
    let source = KafkaCluster::format(&root.join("source"));
    with_default_offsets_partitions(&source);
    let broker = source.start();
    workload(&["create-topic", &broker.bootstrap, TOPIC]);
    assert_eq!(
        workload(&["send", &broker.bootstrap, TOPIC, "0", "30", "all"]).len(),
        30
    );
    let (read, at) = group_consume(&broker.bootstrap, 12, "earliest");
    assert_eq!((read.first(), at), (Some(&0), 12));

    // klog mirrors the topic and the group's offset.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let clock = Arc::new(ManualClock::new(now));
    let klog_root = root.join("klog");
    let b = Cluster::init(
        Arc::new(StdStorage),
        clock.clone(),
        &klog_root,
        ClusterOptions::default(),
    )
    .unwrap();
    b.create_mirror("m", &format!("kafka://{}", broker.bootstrap))
        .unwrap();
    all_ok(b.add_topics("m", &topics(&[TOPIC])).unwrap());
    converge(&b, &clock, "mirrored with the group's offset", |b| {
        b.log(TOPIC, 0).unwrap().log_end_offset() == 30 && committed(b).is_some_and(|c| c.0 == 12)
    });
    // Kafka's own commit, verbatim: the leader epoch the Java consumer committed with.
    assert_eq!(committed(&b), Some((12, 0)));

    // Paused: the group commits more at the source, nothing moves here.
    all_ok(b.pause_topics("m", &topics(&[TOPIC])).unwrap());
    b.run_until_idle(10);
    assert_eq!(state_of(&b, TOPIC, 0), Some(MirrorState::Paused));
    let (read, at) = group_consume(&broker.bootstrap, 5, "none");
    assert_eq!((read.first(), at), (Some(&12), 17));
    for _ in 0..3 {
        clock.advance(REFRESH_MS);
        assert_eq!(b.tick().offsets_synced, 0);
    }
    assert_eq!(committed(&b), Some((12, 0)));
    // Resumed: it moves.
    all_ok(b.resume_topics("m", &topics(&[TOPIC])).unwrap());
    converge(&b, &clock, "the commit made while paused", |b| {
        committed(b).is_some_and(|c| c.0 == 17)
    });

    // Failover: from now on the destination owns the offsets; a later source commit does not arrive.
    all_ok(b.remove_topics("m", &topics(&[TOPIC])).unwrap());
    converge(&b, &clock, "failover", |b| {
        state_of(b, TOPIC, 0) == Some(MirrorState::Stopped)
    });
    let log_end = b.log(TOPIC, 0).unwrap().log_end_offset();
    assert_eq!(log_end, 31, "the 30 records and the failover barrier");
    let (_, at) = group_consume(&broker.bootstrap, 1, "none");
    assert_eq!(at, 18);
    clock.advance(REFRESH_MS);
    b.run_until_idle(10);
    assert_eq!(committed(&b), Some((17, 0)));
    let n = partition_for_group(GROUP, 50) as i32;
    let offsets_end = b.log(CONSUMER_OFFSETS_TOPIC, n).unwrap().log_end_offset();
    b.close().unwrap();
    broker.stop();

    // Kafka's own decoder prints klog's records: the group's commits, in order.
    let offsets_dir = format!("{CONSUMER_OFFSETS_TOPIC}-{n}");
    let dump = dump_log(
        &segments(&klog_root.join(&offsets_dir)),
        &["--offsets-decoder"],
    );
    let commits: Vec<i64> = kafka_records(&dump)
        .iter()
        .filter(|(k, _)| {
            k["data"]["group"] == GROUP
                && k["data"]["topic"] == TOPIC
                && k["data"]["partition"] == 0
        })
        .map(|(_, v)| v["data"]["offset"].as_i64().unwrap())
        .collect();
    // The first sync, when the mirror had no data yet, clamped the commit to 0 where the log has no
    // epoch and wrote nothing (as the reference's syncer skips it); then 12 as soon as the data
    // arrived, then the commit made while paused.
    assert_eq!(commits, [12, 17], "{dump}");

    // A second broker adopts klog's files: the topic and __consumer_offsets exist in its metadata
    // (created by a first run), then their partitions are replaced by klog's.
    let target = KafkaCluster::format(&root.join("target"));
    with_default_offsets_partitions(&target);
    let broker = target.start();
    workload(&["create-topic", &broker.bootstrap, TOPIC]);
    workload(&["send", &broker.bootstrap, TOPIC, "0", "1", "all"]);
    let (_, at) = group_consume(&broker.bootstrap, 1, "earliest");
    assert_eq!(at, 1, "the broker's own group coordinator works");
    broker.stop();
    adopt(&target.data, &klog_root, &format!("{TOPIC}-0"), log_end);
    adopt(&target.data, &klog_root, &offsets_dir, offsets_end);
    let broker = target.start();
    // The group resumes exactly at the next record after its committed offset.
    let (read, at) = group_consume(&broker.bootstrap, 3, "none");
    assert_eq!((read, at), (vec![17, 18, 19], 20));
    let errors = broker.error_lines();
    assert!(errors.is_empty(), "the broker logged errors: {errors:#?}");
    broker.stop();
}
