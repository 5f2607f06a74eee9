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

use common::cleaned::{compare, kafka_indexes, segments};
use common::compaction::{cleaner_checkpoint, CompactedTopic, PARTITION, TOPIC};
use common::kafka::kafka_available;
use serde_json::Value;

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
    let (topic, broker) = CompactedTopic::create("kafka-compaction", 200, 40, &[]);
    broker.stop();
    assert_eq!(
        cleaner_checkpoint(&topic.cluster.data),
        None,
        "the broker cleaned before the ratio was lowered"
    );
    // The pre-clean copy: the partition and the root checkpoints, as the broker left them.
    let pre_clean = topic.root.join("pre-clean");
    topic.copy_data(&pre_clean);

    let broker = topic.cluster.start();
    topic.alter(&broker, &["min.cleanable.dirty.ratio=0.01"]);
    let checkpoint = topic.await_clean(&broker, None);
    let consumed: Vec<Value> =
        common::kafka::workload(&["consume", &broker.bootstrap, TOPIC, "read_committed"])
            .into_iter()
            .filter(|line| line.get("end_offset").is_none())
            .collect();
    broker.stop();
    broker_segments_follow_the_index_rule(&topic, checkpoint);
    the_comparison_tells_cleaned_from_pre_clean(&topic, &pre_clean);

    let produced = &topic.produced;
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

/// Kafka's index rule as `common::cleaned` states it reproduces the broker's own `.index` and
/// `.timeindex` of every segment it cleaned (below the checkpoint), so judging klog's indexes by it
/// where klog's `.log` differs (recompressed batches of another size) judges them by Kafka's.
fn broker_segments_follow_the_index_rule(topic: &CompactedTopic, checkpoint: i64) {
    let cleaned: Vec<_> = segments(&topic.partition_dir())
        .into_iter()
        .filter(|(base, _)| *base < checkpoint)
        .collect();
    assert!(
        cleaned.len() > 1,
        "the broker's pass left {} segments below {checkpoint}: the workload should make groups",
        cleaned.len()
    );
    for (base, files) in cleaned {
        let (index, timeindex) = kafka_indexes(&files.log, base, 4096);
        assert_eq!(files.index, index, "{base:020}.index by Kafka's rule");
        assert_eq!(
            files.timeindex, timeindex,
            "{base:020}.timeindex by Kafka's rule"
        );
    }
}

/// The comparison can fail: the pre-clean copy judged as if klog had cleaned it differs from the
/// broker's cleaned directory, while the broker's directory judged against itself does not.
fn the_comparison_tells_cleaned_from_pre_clean(
    topic: &CompactedTopic,
    pre_clean: &std::path::Path,
) {
    let broker = topic.partition_dir();
    let pre = pre_clean.join(PARTITION);
    let same = compare(&pre, &broker, &broker, 4096);
    assert!(
        same.differences.is_empty(),
        "the broker's directory against itself: {:#?}",
        same.differences
    );
    assert!(
        same.byte_identical > 0 && same.record_identical > 0,
        "{same:?}"
    );
    let uncleaned = compare(&pre, &broker, &pre, 4096);
    assert!(
        uncleaned.differences.len() > 1,
        "the pre-clean copy passed for the cleaned one: {uncleaned:?}"
    );
}
