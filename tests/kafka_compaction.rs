//! Log compaction judged by real Kafka 4.4.0: a compacted topic (repeated keys, tombstones, transactions
//! committed and aborted, idempotent producers in every codec, headers) written by the Java workload with the
//! broker's cleaner held back (`min.cleanable.dirty.ratio=1`), its partition directory and root checkpoints
//! copied (the pre-clean copy, the input klog's cleaner is to be compared on), then cleaned by the broker
//! after the ratio is lowered. The test asserts what the broker's own pass did, offset by offset, against
//! what the workload wrote: the cleaned range `[0, checkpoint)` keeps exactly each key's last
//! non-aborted record, the rest is untouched, and no record's content changes.
//!
//! Skips with one line without Java, unless `KLOG_REQUIRE_KAFKA=1` (CI), where it fails.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use common::kafka::{copy_dir, kafka_available, workload, Cluster};
use common::scratch_dir;
use serde_json::Value;

const TOPIC: &str = "compacted";
const PARTITION: &str = "compacted-0";

/// The broker's `cleaner-offset-checkpoint` entry for partition 0 of TOPIC, if it has one.
fn cleaner_checkpoint(data: &Path) -> Option<i64> {
    let text = std::fs::read_to_string(data.join("cleaner-offset-checkpoint")).ok()?;
    text.lines().skip(2).find_map(|line| {
        let mut fields = line.split_whitespace();
        match (fields.next(), fields.next(), fields.next()) {
            (Some(TOPIC), Some("0"), Some(offset)) => offset.parse().ok(),
            _ => None,
        }
    })
}

/// A record's content as the workload prints it: everything but the producer's name and outcome.
fn content(record: &Value) -> Value {
    let mut record = record.clone();
    if let Some(map) = record.as_object_mut() {
        map.remove("producer");
        map.remove("txn");
    }
    record
}

#[test]
fn broker_compaction_keeps_each_keys_last_record() {
    if !kafka_available() {
        return;
    }
    let root = scratch_dir("kafka-compaction");
    let cluster = Cluster::format_with(&root, "log.cleaner.backoff.ms=300\n");
    let broker = cluster.start();
    let bootstrap = broker.bootstrap.clone();
    workload(&[
        "create-topic",
        &bootstrap,
        TOPIC,
        "cleanup.policy=compact",
        "internal.segment.bytes=16384",
        "min.cleanable.dirty.ratio=1",
        "delete.retention.ms=86400000",
    ]);
    let produced = workload(&["compact-produce", &bootstrap, TOPIC, "200", "40"]);
    assert!(
        produced.len() > 1000,
        "the workload wrote {} records",
        produced.len()
    );
    broker.stop();
    assert_eq!(
        cleaner_checkpoint(&cluster.data),
        None,
        "the broker cleaned before the ratio was lowered"
    );

    // The pre-clean copy: the partition and the root checkpoints, as the broker left them.
    let pre_clean = root.join("pre-clean");
    copy_dir(&cluster.data.join(PARTITION), &pre_clean.join(PARTITION));
    for name in [
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "replication-offset-checkpoint",
    ] {
        if cluster.data.join(name).exists() {
            std::fs::copy(cluster.data.join(name), pre_clean.join(name))
                .expect("copy a checkpoint");
        }
    }

    let broker = cluster.start();
    workload(&[
        "alter-topic-config",
        &bootstrap,
        TOPIC,
        "min.cleanable.dirty.ratio=0.01",
    ]);
    let deadline = Instant::now() + Duration::from_secs(120);
    let checkpoint = loop {
        if let Some(offset) = cleaner_checkpoint(&cluster.data) {
            break offset;
        }
        assert!(
            Instant::now() < deadline,
            "the broker's cleaner did not checkpoint {PARTITION}:\n{}",
            broker.tail()
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let consumed: Vec<Value> = workload(&["consume", &bootstrap, TOPIC, "read_committed"])
        .into_iter()
        .filter(|line| line.get("end_offset").is_none())
        .collect();
    broker.stop();

    let by_offset: BTreeMap<i64, &Value> = produced
        .iter()
        .map(|r| (r["offset"].as_i64().expect("an offset"), r))
        .collect();
    let end = by_offset.keys().next_back().copied().unwrap_or(0) + 1;
    assert!(
        checkpoint > 0 && checkpoint <= end,
        "checkpoint {checkpoint} outside the log [0, {end}]"
    );
    // Each key's last non-aborted offset below the checkpoint: what the broker's offset map held.
    let mut last_below: BTreeMap<String, i64> = BTreeMap::new();
    for (&offset, record) in by_offset.range(..checkpoint) {
        if record["txn"] != "aborted" {
            let key = record["key"].as_str().expect("every record is keyed");
            last_below.insert(key.to_owned(), offset);
        }
    }
    let mut kept = BTreeSet::new();
    for record in &consumed {
        let offset = record["offset"].as_i64().expect("an offset");
        let written = by_offset
            .get(&offset)
            .unwrap_or_else(|| panic!("offset {offset} was never written"));
        assert_eq!(content(record), content(written), "record {offset} changed");
        assert_ne!(written["txn"], "aborted", "aborted record {offset} served");
        if offset < checkpoint {
            let key = record["key"].as_str().expect("keyed");
            assert_eq!(
                last_below.get(key),
                Some(&offset),
                "offset {offset} (key {key}) below the checkpoint {checkpoint} is not its key's last"
            );
        }
        kept.insert(offset);
    }
    for (key, offset) in &last_below {
        assert!(
            kept.contains(offset),
            "key {key}'s last record {offset} was removed"
        );
    }
    for (&offset, record) in by_offset.range(checkpoint..) {
        if record["txn"] != "aborted" {
            assert!(
                kept.contains(&offset),
                "record {offset} above the cleaned range was removed"
            );
        }
    }
    assert!(
        kept.len() < produced.len() / 2,
        "the broker kept {} of {} records",
        kept.len(),
        produced.len()
    );
}
