//! An abort-mode failover from a real Kafka 4.4 broker with transactions left open (issue 25, item 1):
//! Java transactional producers each commit a transaction and leave the next one open; klog mirrors
//! the topic over `kafka://` with `--stop-mode abort` (read_uncommitted) and fails over. klog's log is
//! the broker's byte for byte up to the broker's log end, then one ABORT marker per open producer and
//! one MIRROR_PID_RESET barrier, all above the source's epoch. A second broker started on klog's files
//! (adopted as `kafka_group_offsets` adopts them) serves them: a Java read_committed consumer sees none
//! of the open transactions' records, a read_uncommitted one sees every record at its source offset.
//!
//! Skips with one line without Java, unless `KLOG_REQUIRE_KAFKA=1` (CI), where it fails.

mod common;
#[path = "mirror_support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use common::kafka::{copy_dir, kafka_available, workload, Cluster as KafkaCluster};
use common::scratch_dir;
use klog::log::checkpoint::{
    read_offsets, read_partition_metadata, write_offsets, write_partition_metadata,
    LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
};
use klog::log::clock::SystemClock;
use klog::log::format::ControlRecordType;
use klog::log::io::StdStorage;
use klog::mirror::{Cluster, ClusterOptions, MirrorState, StopMode};
use serde_json::Value;
use support::{all_ok, control_type, converge, kafka_batches, state_of, topics};

const TOPIC: &str = "open-txns";

/// The records of a `consume` run (its last line is `{"end_offset", "position"}`).
fn consume(bootstrap: &str, isolation: &str) -> Vec<Value> {
    let mut lines = workload(&["consume", bootstrap, TOPIC, isolation]);
    let last = lines.pop().expect("the end line");
    assert!(last.get("end_offset").is_some(), "{last}");
    lines
}

fn offsets(records: &[Value]) -> Vec<i64> {
    records
        .iter()
        .map(|r| r["offset"].as_i64().unwrap())
        .collect()
}

/// Replaces the broker's partition `name` by klog's, with the broker's topic id and checkpoints at
/// klog's log end (as `kafka_group_offsets` adopts a partition).
fn adopt(kafka_data: &Path, klog_dir: &Path, name: &str, log_end_offset: i64) {
    let target = kafka_data.join(name);
    let id = read_partition_metadata(&StdStorage, &target)
        .unwrap()
        .expect("the broker's partition has its topic id");
    std::fs::remove_dir_all(&target).unwrap();
    copy_dir(&klog_dir.join(name), &target);
    write_partition_metadata(&StdStorage, &target, id).unwrap();
    let key = (TOPIC.to_owned(), 0);
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
fn an_abort_mode_failover_from_kafka_aborts_the_open_transactions_at_their_source_offsets() {
    if !kafka_available() {
        return;
    }
    let root = scratch_dir("kafka-mirror-stop-abort");
    let source = KafkaCluster::format(&root.join("source"));
    let broker = source.start();
    workload(&["create-topic", &broker.bootstrap, TOPIC]);
    assert_eq!(
        workload(&["send", &broker.bootstrap, TOPIC, "0", "10", "all"]).len(),
        10
    );
    let sent = workload(&["open-transactions", &broker.bootstrap, TOPIC, "5", "2"]);
    assert_eq!(sent.len(), 20);
    let open: BTreeSet<i64> = sent
        .iter()
        .filter(|r| r["committed"] == false)
        .map(|r| r["offset"].as_i64().unwrap())
        .collect();
    assert_eq!(open.len(), 10);
    // What the source's consumers see, before klog touches anything.
    let source_all = consume(&broker.bootstrap, "read_uncommitted");
    let source_committed = consume(&broker.bootstrap, "read_committed");
    assert!(
        offsets(&source_committed)
            .iter()
            .all(|o| o < open.first().unwrap()),
        "read_committed stops at the first open transaction"
    );

    // klog mirrors in abort mode (read_uncommitted: the open transactions too), then fails over.
    let klog_root = root.join("klog");
    let b = Cluster::init(
        Arc::new(StdStorage),
        Arc::new(SystemClock),
        &klog_root,
        ClusterOptions::default(),
    )
    .unwrap();
    b.create_mirror_with_stop_mode(
        "m",
        &format!("kafka://{}", broker.bootstrap),
        StopMode::Abort,
    )
    .unwrap();
    all_ok(b.add_topics("m", &topics(&[TOPIC])).unwrap());
    let source_end = offsets(&source_all).last().unwrap() + 1;
    converge(&b, "mirrored to the source's log end", |b| {
        b.log(TOPIC, 0).unwrap().log_end_offset() == source_end
    });
    all_ok(b.remove_topics("m", &topics(&[TOPIC])).unwrap());
    converge(&b, "failover", |b| {
        state_of(b, TOPIC, 0) == Some(MirrorState::Stopped)
    });
    let log_end = b.log(TOPIC, 0).unwrap().log_end_offset();
    assert_eq!(log_end, source_end + 3, "two ABORT markers and the barrier");
    assert_eq!(b.log(TOPIC, 0).unwrap().last_stable_offset(), log_end);
    b.close().unwrap();
    drop(b);
    broker.stop();

    // Byte for byte the broker's log, then one ABORT per open producer and the barrier, above its epoch.
    let partition = format!("{TOPIC}-0");
    let from_source = kafka_batches(&source.data.join(&partition));
    assert_eq!(from_source.last().unwrap().last_offset + 1, source_end);
    let here = kafka_batches(&klog_root.join(&partition));
    assert_eq!(
        here[..from_source.len()],
        from_source[..],
        "the source's batches"
    );
    let own = &here[from_source.len()..];
    assert_eq!(
        own.iter().map(control_type).collect::<Vec<_>>(),
        [
            Some(ControlRecordType::Abort),
            Some(ControlRecordType::Abort),
            Some(ControlRecordType::MirrorPidReset)
        ],
        "{own:?}"
    );
    let source_epoch = from_source.iter().map(|s| s.epoch).max().unwrap();
    assert!(own.iter().all(|s| s.epoch > source_epoch), "{own:?}");
    let open_producers: BTreeSet<i64> = from_source
        .iter()
        .filter(|s| open.contains(&s.base_offset))
        .map(|s| s.producer_id)
        .collect();
    let aborted: BTreeSet<i64> = own[..2].iter().map(|s| s.producer_id).collect();
    assert_eq!(aborted, open_producers, "one ABORT per open producer");

    // A broker that adopts klog's files: read_committed sees none of the open transactions' records,
    // read_uncommitted every record at its source offset.
    let target = KafkaCluster::format(&root.join("target"));
    let broker = target.start();
    workload(&["create-topic", &broker.bootstrap, TOPIC]);
    broker.stop();
    adopt(&target.data, &klog_root, &partition, log_end);
    let broker = target.start();
    let committed = consume(&broker.bootstrap, "read_committed");
    let open_seen: Vec<i64> = offsets(&committed)
        .into_iter()
        .filter(|o| open.contains(o))
        .collect();
    assert!(open_seen.is_empty(), "read_committed saw {open_seen:?}");
    let want: Vec<&Value> = source_all
        .iter()
        .filter(|r| !open.contains(&r["offset"].as_i64().unwrap()))
        .collect();
    assert_eq!(committed.iter().collect::<Vec<_>>(), want, "read_committed");
    assert_eq!(
        consume(&broker.bootstrap, "read_uncommitted"),
        source_all,
        "read_uncommitted: every record at its source offset"
    );
    let errors = broker.error_lines();
    assert!(errors.is_empty(), "the broker logged errors: {errors:#?}");
    broker.stop();
}
