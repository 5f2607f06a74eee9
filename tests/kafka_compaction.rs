//! Log compaction judged by real Kafka 4.4.0: a compacted topic (repeated keys, tombstones, transactions
//! committed and aborted, idempotent producers in every codec, headers, 16 KiB segments so a pass makes
//! several groups) written by the Java workload with the broker's cleaner held back
//! (`min.cleanable.dirty.ratio=1`), its log directory copied (the pre-clean copy), then cleaned by the
//! broker after the ratio is lowered; more records (over 1000 keys, so most survive and every codec's
//! batches holding a tombstone are rebuilt with a horizon), a second copy, and a second broker pass after
//! the first pass's delete horizons (`delete.retention.ms=15000`), which removes the tombstones it kept.
//!
//! Asserted: what the broker's first pass kept, offset by offset, against what the workload wrote; that
//! Kafka's index rule reproduces the broker's cleaned indexes; then klog's own pass over each pre-clean
//! copy, with the topic config the broker's metadata log holds and the broker's clean time (recovered
//! from the horizons it wrote), judged batch by batch against the broker's (`common::cleaned`) with the
//! same `cleaner-offset-checkpoint`; and a broker started on klog's cleaned directory serves exactly the
//! records klog reads there.
//!
//! Skips with one line without Java, unless `KLOG_REQUIRE_KAFKA=1` (CI), where it fails.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::cleaned::{batches, compare, kafka_indexes, owned_records, segments, Comparison};
use common::compaction::{
    cleaner_checkpoint, copy_dir_keeping_mtimes, CompactedTopic, PARTITION, TOPIC,
};
use common::kafka::{kafka_available, workload, Broker};
use common::klog_cleaner::{
    clean, clean_time, delete_horizons, served_records, topic_config, wall_clock_ms,
};
use serde_json::Value;

/// The delete retention of the test topic: short, so a second pass runs after the first one's horizons.
const DELETE_RETENTION_MS: i64 = 15_000;

/// A record's content as the workload prints it: everything but the producer's name and outcome.
fn content(record: &Value) -> Value {
    let mut record = record.clone();
    if let Some(map) = record.as_object_mut() {
        map.remove("producer");
        map.remove("txn");
    }
    record
}

/// The workload's `consume` lines for its records (its closing `end_offset` line left out).
fn consume(broker: &Broker, isolation: &str) -> Vec<Value> {
    workload(&["consume", &broker.bootstrap, TOPIC, isolation])
        .into_iter()
        .filter(|line| line.get("end_offset").is_none())
        .collect()
}

/// One broker pass: the ratio lowered, the checkpoint awaited past `before`, the ratio raised again so
/// nothing more is cleaned; the checkpoint and the wall-clock window the pass ran in.
fn broker_pass(topic: &CompactedTopic, broker: &Broker, before: Option<i64>) -> (i64, (i64, i64)) {
    let from = wall_clock_ms();
    topic.alter(broker, &["min.cleanable.dirty.ratio=0.01"]);
    let checkpoint = topic.await_clean(broker, before);
    let to = wall_clock_ms();
    topic.alter(broker, &["min.cleanable.dirty.ratio=1"]);
    (checkpoint, (from, to))
}

#[test]
fn klog_cleans_as_the_broker_does() {
    if !kafka_available() {
        return;
    }
    let retention = format!("delete.retention.ms={DELETE_RETENTION_MS}");
    let (mut topic, broker) = CompactedTopic::create("kafka-compaction", 200, 40, &[&retention]);
    broker.stop();
    assert_eq!(
        cleaner_checkpoint(&topic.cluster.data),
        None,
        "the broker cleaned before the ratio was lowered"
    );
    let (pre1, pre2) = (
        topic.root.join("pre-clean-1"),
        topic.root.join("pre-clean-2"),
    );
    topic.copy_data(&pre1);

    let broker = topic.cluster.start();
    let (c1, window1) = broker_pass(&topic, &broker, None);
    let consumed = consume(&broker, "read_committed");
    let first = topic.produced.clone();
    topic.produce_more(&broker, 100, 1000);
    broker.stop();
    topic.copy_data(&pre2);
    broker_kept_each_keys_last_record(&first, &consumed, c1);

    // The second pass runs after every horizon the first one set.
    let horizons1 = delete_horizons(&pre2.join(PARTITION));
    let latest = horizons1
        .last()
        .copied()
        .expect("the first pass kept tombstones");
    while wall_clock_ms() <= latest + 1000 {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let broker = topic.cluster.start();
    let (c2, window2) = broker_pass(&topic, &broker, Some(c1));
    broker.stop();
    assert!(c2 > c1, "the second pass ended at {c2}, the first at {c1}");
    let after2 = topic.partition_dir();
    broker_segments_follow_the_index_rule(&after2, c2);
    the_comparison_tells_cleaned_from_pre_clean(&pre1.join(PARTITION), &pre2.join(PARTITION), c1);
    let horizons2: BTreeSet<i64> = delete_horizons(&after2)
        .difference(&horizons1)
        .copied()
        .collect();

    let mut config = topic_config(&topic.cluster.meta);
    assert_eq!(config.delete_retention_ms, DELETE_RETENTION_MS);
    // The metadata log ends with the ratio raised again; each pass ran with it lowered.
    assert_eq!(config.min_cleanable_dirty_ratio, 1.0);
    config.min_cleanable_dirty_ratio = 0.01;
    let interval = config.index_interval_bytes;
    let now1 = clean_time(&horizons1, DELETE_RETENTION_MS, window1);
    let now2 = clean_time(&horizons2, DELETE_RETENTION_MS, window2);
    tombstones_past_the_horizon_went(&pre2.join(PARTITION), &after2, now2, c2);

    let klog1 = topic.root.join("klog-1");
    copy_dir_keeping_mtimes(&pre1, &klog1);
    let report = clean(&klog1, &config, now1);
    assert_eq!(
        (report.end_offset, cleaner_checkpoint(&klog1)),
        (c1, Some(c1)),
        "{report:?}"
    );
    same_checkpoint_file(&pre2, &klog1);
    let first_pass = compare(
        &pre1.join(PARTITION),
        &pre2.join(PARTITION),
        &klog1.join(PARTITION),
        interval,
        Some(c1),
    );
    let klog2 = topic.root.join("klog-2");
    copy_dir_keeping_mtimes(&pre2, &klog2);
    let report = clean(&klog2, &config, now2);
    assert_eq!(
        (report.end_offset, cleaner_checkpoint(&klog2)),
        (c2, Some(c2)),
        "{report:?}"
    );
    same_checkpoint_file(&topic.cluster.data, &klog2);
    assert!(
        report.groups.iter().any(|g| g.len() > 1),
        "the second pass should group several cleaned segments into one: {:?}",
        report.groups
    );
    let second_pass = compare(
        &pre2.join(PARTITION),
        &after2,
        &klog2.join(PARTITION),
        interval,
        None,
    );
    assert_agree("first pass", &first_pass);
    assert_agree("second pass", &second_pass);

    a_broker_serves_what_klog_cleaned(&topic, &klog2);
}

/// klog's `cleaner-offset-checkpoint` in `klog_dir` is the broker's in `broker_dir`, byte for byte (the
/// broker's other compacted log, `__transaction_state-0`, is one active segment: never cleaned).
fn same_checkpoint_file(broker_dir: &Path, klog_dir: &Path) {
    let read = |dir: &Path| {
        std::fs::read_to_string(dir.join("cleaner-offset-checkpoint"))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
    };
    assert_eq!(
        read(klog_dir),
        read(broker_dir),
        "cleaner-offset-checkpoint"
    );
}

/// The judgement of one pass: no difference, and batches of each kind were judged.
fn assert_agree(pass: &str, comparison: &Comparison) {
    eprintln!(
        "{pass}: {} batches byte-identical, {} recompressed record-identical ({} of them byte-identical too; by codec, (same bytes, other bytes): {:?}), {} segments with differing .logs, {} with differing mtimes",
        comparison.byte_identical,
        comparison.record_identical,
        comparison.recompressed_bytes_equal,
        comparison.recompressed_by_codec,
        comparison.logs_differing,
        comparison.mtimes_differing
    );
    assert!(
        comparison.differences.is_empty(),
        "klog's {pass} differs from the broker's:\n{}",
        comparison.differences.join("\n")
    );
    assert!(comparison.byte_identical > 0, "{pass}: {comparison:?}");
}

/// The broker's second pass removed every tombstone whose horizon had passed (`horizon <= now`) below
/// its checkpoint, and there was one to remove: the pass exercised the delete horizon.
fn tombstones_past_the_horizon_went(pre: &Path, after: &Path, now: i64, checkpoint: i64) {
    let expired = |dir: &Path| -> usize {
        let mut count = 0;
        for (base, files) in segments(dir) {
            for batch in batches(&files.log) {
                if base >= checkpoint || batch.delete_horizon_ms().is_none_or(|h| h > now) {
                    continue;
                }
                let records = owned_records(&batch).expect("readable records");
                count += records
                    .iter()
                    .filter(|r| r.4.is_none() && !batch.is_control())
                    .count();
            }
        }
        count
    };
    assert!(
        expired(pre) > 0,
        "no tombstone's horizon had passed at {now}"
    );
    assert_eq!(expired(after), 0, "tombstones past their horizon were kept");
}

/// A broker started on klog's cleaned log directory (in place of its own) serves, read uncommitted from
/// offset 0, exactly the records klog reads there.
fn a_broker_serves_what_klog_cleaned(topic: &CompactedTopic, klog_dir: &Path) {
    let config = topic_config(&topic.cluster.meta);
    let expected = served_records(klog_dir, PARTITION, &config);
    std::fs::remove_dir_all(&topic.cluster.data).expect("remove the broker's data");
    copy_dir_keeping_mtimes(klog_dir, &topic.cluster.data);
    let broker = topic.cluster.start();
    let served = consume(&broker, "read_uncommitted");
    broker.stop();
    assert!(!expected.is_empty());
    assert_eq!(
        served.len(),
        expected.len(),
        "records served by the broker vs read by klog"
    );
    for (theirs, ours) in served.iter().zip(&expected) {
        assert_eq!(theirs, ours, "the broker on klog's cleaned directory");
    }
}

/// What the broker's first pass kept, against what the workload wrote: below the checkpoint exactly each
/// key's last non-aborted record, above it everything not aborted, and no record's content changed.
fn broker_kept_each_keys_last_record(produced: &[Value], consumed: &[Value], checkpoint: i64) {
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
    for record in consumed {
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
fn broker_segments_follow_the_index_rule(partition: &Path, checkpoint: i64) {
    let cleaned: Vec<_> = segments(partition)
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

/// The comparison can fail: the pre-clean copy `pre` judged as if klog had cleaned it differs from the
/// broker's cleaned directory `cleaned` below its checkpoint, while `cleaned` against itself does not.
fn the_comparison_tells_cleaned_from_pre_clean(pre: &Path, cleaned: &Path, checkpoint: i64) {
    let same = compare(pre, cleaned, cleaned, 4096, Some(checkpoint));
    assert!(
        same.differences.is_empty(),
        "the broker's directory against itself: {:#?}",
        same.differences
    );
    assert!(
        same.byte_identical > 0 && same.record_identical > 0,
        "{same:?}"
    );
    let uncleaned = compare(pre, cleaned, pre, 4096, Some(checkpoint));
    assert!(
        uncleaned.differences.len() > 1,
        "the pre-clean copy passed for the cleaned one: {uncleaned:?}"
    );
}
