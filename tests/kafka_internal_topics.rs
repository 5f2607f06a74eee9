//! The coordinators' internal topics a real broker wrote, dumped by klog and by Kafka's own
//! `kafka-dump-log` with the matching decoder: the same bytes, line for line.
//!
//! One broker (KRaft, one partition per internal topic): the Java workload produces (idempotent and
//! transactional producers, so `__transaction_state` fills), then a classic consumer group and a
//! KIP-848 consumer group each commit offsets, plainly and inside a transaction
//! (`sendOffsetsToTransaction`, so `__consumer_offsets` holds a transaction and its marker).
//!
//! Skips with one line when Java is absent, unless `KLOG_REQUIRE_KAFKA=1` (CI), where it fails.

mod common;

use std::path::{Path, PathBuf};

use common::kafka::{dump_log, kafka_available, workload, Cluster};
use common::{klog, scratch_dir, sorted_entries, stderr, stdout};
use serde_json::Value;

fn segments(partition_dir: &Path) -> Vec<PathBuf> {
    sorted_entries(partition_dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect()
}

fn klog_dump(files: &[PathBuf], flags: &[&str]) -> String {
    let mut args = vec!["dump"];
    args.extend_from_slice(flags);
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    let out = klog(&args);
    assert!(out.status.success(), "klog dump failed: {}", stderr(&out));
    stdout(&out)
}

fn assert_same_lines(ours: &str, kafka: &str, what: &str) {
    assert!(kafka.lines().count() > 2, "{what}: kafka printed {kafka}");
    for (i, (o, k)) in ours.lines().zip(kafka.lines()).enumerate() {
        assert_eq!(o, k, "{what}: line {} differs", i + 1);
    }
    assert_eq!(ours, kafka, "{what}: bytes");
}

/// The `payload: {...}` JSON of each record line of Kafka's dump, by offset.
fn kafka_payloads(kafka: &str) -> Vec<(i64, Value)> {
    kafka
        .lines()
        .filter_map(|l| {
            let offset = l
                .strip_prefix("| offset: ")?
                .split(' ')
                .next()?
                .parse()
                .ok()?;
            let payload = l.split_once(" payload: ")?.1;
            Some((offset, serde_json::from_str(payload).unwrap_or(Value::Null)))
        })
        .collect()
}

/// klog's JSON carries the same data objects as Kafka's text, record by record.
fn assert_json_matches(files: &[PathBuf], kafka: &str, what: &str) {
    let json = klog_dump(files, &["--json"]);
    let mut ours = Vec::new();
    for line in json.lines() {
        let batch: Value = serde_json::from_str(line).unwrap();
        for r in batch["records"].as_array().into_iter().flatten() {
            if batch["is_control"] == true {
                assert!(r.get("coordinator").is_none(), "{what}: {r}");
                continue;
            }
            let c = &r["coordinator"];
            assert!(c["key_schema"].is_string(), "{what}: {r}");
            let data = match &c["value"] {
                Value::Null => Value::String("<DELETE>".into()),
                v => v["data"].clone(),
            };
            ours.push((r["offset"].as_i64().unwrap(), data));
        }
    }
    let theirs: Vec<(i64, Value)> = kafka_payloads(kafka)
        .into_iter()
        .map(|(o, v)| {
            (
                o,
                if v.is_null() {
                    "<DELETE>".into()
                } else {
                    v["data"].clone()
                },
            )
        })
        .collect();
    assert_eq!(ours.len(), theirs.len(), "{what}: records");
    for (o, k) in ours.iter().zip(&theirs) {
        assert_eq!(o, k, "{what}: JSON of the record at offset {}", k.0);
    }
}

#[test]
fn internal_topics_dump_as_kafka_dump_log_decodes_them() {
    if !kafka_available() {
        return;
    }
    let root = scratch_dir("kafka-internal-topics");
    let cluster = Cluster::format(&root);
    let broker = cluster.start();
    let bootstrap = broker.bootstrap.clone();
    workload(&["create-topic", &bootstrap, "orders"]);
    workload(&["produce", &bootstrap, "orders", "8"]);
    for (group, protocol) in [("klog-classic", "classic"), ("klog-consumer", "consumer")] {
        let out = workload(&["commit-offsets", &bootstrap, "orders", group, protocol]);
        assert_eq!(out.last().unwrap()["group"], group);
    }
    broker.stop();

    let offsets = segments(&cluster.data.join("__consumer_offsets-0"));
    let transactions = segments(&cluster.data.join("__transaction_state-0"));
    assert!(!offsets.is_empty() && !transactions.is_empty());

    let kafka = dump_log(&offsets, &["--offsets-decoder"]);
    for (what, record) in [
        (
            "an offset commit",
            "key: {\"type\":\"1\",\"data\":{\"group\":\"klog-classic\"",
        ),
        (
            "a classic group",
            "key: {\"type\":\"2\",\"data\":{\"group\":\"klog-classic\"}}",
        ),
        (
            "a consumer group",
            "key: {\"type\":\"3\",\"data\":{\"groupId\":\"klog-consumer\"}}",
        ),
        (
            "a member's subscription",
            "\"subscription\":{\"topics\":[\"orders\"]",
        ),
        (
            "the commit's metadata",
            "\"metadata\":\"klog \\\"metadata\\\"\\n\"",
        ),
        ("a transaction marker", "isControl: true"),
    ] {
        assert!(
            kafka.contains(record),
            "no {what} in Kafka's dump:\n{kafka}"
        );
    }
    // Chosen by the partition directory, and by flag.
    assert_same_lines(&klog_dump(&offsets, &[]), &kafka, "__consumer_offsets");
    assert_same_lines(
        &klog_dump(&offsets, &["--offsets-decoder"]),
        &kafka,
        "__consumer_offsets --offsets-decoder",
    );
    assert_json_matches(&offsets, &kafka, "__consumer_offsets");

    let kafka = dump_log(&transactions, &["--transaction-log-decoder"]);
    for txn in [
        "klog-txn-a",
        "klog-txn-b",
        "klog-classic-txn",
        "klog-consumer-txn",
    ] {
        assert!(
            kafka.contains(&format!("{{\"transactionalId\":\"{txn}\"}}")),
            "no {txn} in Kafka's dump:\n{kafka}"
        );
    }
    assert_same_lines(
        &klog_dump(&transactions, &[]),
        &kafka,
        "__transaction_state",
    );
    assert_same_lines(
        &klog_dump(&transactions, &["--transaction-log-decoder"]),
        &kafka,
        "__transaction_state --transaction-log-decoder",
    );
    assert_json_matches(&transactions, &kafka, "__transaction_state");
}
