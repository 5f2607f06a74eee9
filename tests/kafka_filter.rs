//! klog's per-batch filter (`klog::log::cleaner::filter_batch`) judged by Kafka 4.4.0's own
//! `MemoryRecords.filterTo`: the Java workload (`filter-to`) builds one batch per codec with Kafka's
//! `MemoryRecordsBuilder` and filters it with given decisions; klog filters the same source bytes with an
//! offset map, transaction state and producers arranged to reach the same decisions, and what it writes
//! must be Kafka's bytes (uncompressed and zstd) or Kafka's header fields and records (gzip, snappy, lz4,
//! whose streams come from other compressors: docs/compaction.md).
//!
//! Skips with one line without Java, unless `KLOG_REQUIRE_KAFKA=1` (CI), where it fails.

mod common;

use std::collections::HashMap;

use common::kafka::{kafka_available, workload};
use klog::log::cleaner::{
    filter_batch, BatchOutcome, CleanedTransactionMetadata, DigestKind, FilterContext, FilterStats,
    LastRecord, OffsetMap,
};
use klog::log::format::{Compression, RecordBatch};

/// `FilterTo.NOW` and `FilterTo.DELETE_RETENTION_MS`.
const NOW: i64 = 1_700_000_000_000;
const DELETE_RETENTION_MS: i64 = 86_400_000;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex from the workload"))
        .collect()
}

/// What klog writes for `source` under the decisions the scenario gave Kafka.
fn klog_filter(scenario: &str, source: &[u8]) -> (BatchOutcome, Vec<u8>) {
    let batch = RecordBatch::parse(source, 0)
        .expect("Kafka's batch parses")
        .0;
    let mut map = OffsetMap::new(1 << 22, 0.9, DigestKind::Md5);
    let mut producers = HashMap::new();
    let mut scratch = Vec::new();
    if !batch.is_control() {
        for r in batch.records(&mut scratch).expect("records") {
            let r = r.expect("record");
            let key = r.key.expect("the workload's records have keys");
            // A tombstone is superseded when the scenario drops it, and so is every record of an emptied batch.
            let superseded = match scenario {
                "retain-empty" => true,
                "drop-tombstones" | "drop-tombstones-lat" => r.value.is_none(),
                _ => false,
            };
            map.put(key, if superseded { i64::MAX - 1 } else { r.offset });
        }
        map.update_latest_offset(batch.last_offset());
    }
    if scenario == "retain-empty" {
        // The producer's last batch: RETAIN_EMPTY.
        producers.insert(
            batch.producer_id(),
            LastRecord {
                last_data_offset: Some(batch.last_offset()),
                producer_epoch: batch.producer_epoch(),
            },
        );
    }
    let mut txn = CleanedTransactionMetadata::new();
    let mut ctx = FilterContext {
        map: &map,
        txn: &mut txn,
        now_ms: NOW,
        delete_retention_ms: DELETE_RETENTION_MS,
        retain_legacy_deletes_and_txn_markers: true,
        high_watermark: i64::MAX,
        active_producers: &producers,
    };
    let mut out = Vec::new();
    let mut stats = FilterStats::default();
    let outcome = filter_batch(&batch, &mut ctx, &mut out, &mut stats).expect("klog filters it");
    (outcome, out)
}

/// Every header field but length and CRC, and every record (offset, timestamp, key, value, headers).
fn fields_and_records(bytes: &[u8]) -> (Vec<i64>, Vec<String>) {
    let b = RecordBatch::parse(bytes, 0).expect("a valid batch").0;
    let fields = vec![
        b.base_offset(),
        b.partition_leader_epoch() as i64,
        b.magic() as i64,
        b.attributes().0 as i64,
        b.last_offset_delta() as i64,
        b.base_timestamp(),
        b.max_timestamp(),
        b.producer_id(),
        b.producer_epoch() as i64,
        b.base_sequence() as i64,
        b.records_count() as i64,
    ];
    let mut scratch = Vec::new();
    let records = b
        .records(&mut scratch)
        .expect("records")
        .map(|r| {
            let r = r.expect("record");
            let headers: Vec<_> = r.headers.clone().collect();
            format!(
                "{} {} {:?} {:?} {:?} {:?}",
                r.offset, r.timestamp, r.timestamp_delta, r.key, r.value, headers
            )
        })
        .collect();
    (fields, records)
}

#[test]
fn klog_writes_what_kafkas_filter_to_writes() {
    if !kafka_available() {
        return;
    }
    let mut compared = 0;
    for (scenario, records, value_bytes) in [
        ("drop-tombstones", "20", "40"),
        ("drop-tombstones", "300", "1500"),
        ("drop-tombstones", "3000", "100"),
        ("drop-tombstones-lat", "50", "200"),
        ("keep-all", "20", "40"),
        ("keep-all", "300", "1500"),
        ("retain-empty", "20", "40"),
        ("marker", "1", "1"),
    ] {
        for line in workload(&["filter-to", scenario, records, value_bytes]) {
            let codec = line["codec"].as_str().expect("codec");
            let source = unhex(line["source"].as_str().expect("source"));
            let kafka = unhex(line["filtered"].as_str().expect("filtered"));
            let what = format!("{scenario} {records}x{value_bytes} {codec}");
            let (outcome, ours) = klog_filter(scenario, &source);
            let expected_outcome = match scenario {
                "retain-empty" => BatchOutcome::Empty,
                _ => BatchOutcome::Rebuilt,
            };
            assert_eq!(outcome, expected_outcome, "{what}");
            match Compression::from_name(codec).expect("a codec name") {
                Compression::None | Compression::Zstd => assert!(
                    ours == kafka,
                    "{what}: klog's {} bytes differ from Kafka's {} at byte {:?}",
                    ours.len(),
                    kafka.len(),
                    ours.iter().zip(&kafka).position(|(a, b)| a != b)
                ),
                _ => assert_eq!(
                    fields_and_records(&ours),
                    fields_and_records(&kafka),
                    "{what}"
                ),
            }
            compared += 1;
        }
    }
    assert_eq!(compared, 7 * 5 + 1, "every scenario and codec came back");
}
