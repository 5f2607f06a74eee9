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
use klog::log::format::{crc32c, BatchBuilder, Compression, Header, RecordBatch};

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

/// klog filters `source` dropping the records at `drop` (their keys superseded in the map), at `NOW`.
fn klog_drop(source: &[u8], drop: &[i64]) -> Vec<u8> {
    let batch = RecordBatch::parse(source, 0)
        .expect("the test's batch parses")
        .0;
    let mut map = OffsetMap::new(1 << 20, 0.9, DigestKind::Md5);
    let mut scratch = Vec::new();
    for r in batch.records(&mut scratch).expect("records") {
        let r = r.expect("record");
        let offset = if drop.contains(&r.offset) {
            i64::MAX - 1
        } else {
            r.offset
        };
        map.put(r.key.expect("keyed"), offset);
    }
    map.update_latest_offset(batch.last_offset());
    let mut txn = CleanedTransactionMetadata::new();
    let producers = HashMap::new();
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
    filter_batch(&batch, &mut ctx, &mut out, &mut FilterStats::default()).expect("klog filters it");
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Replaces the one occurrence of `from` in an uncompressed batch by `to` (same length) and fixes the CRC.
fn patch(batch: &mut [u8], from: &[u8], to: &[u8]) {
    let at = batch
        .windows(from.len())
        .position(|w| w == from)
        .expect("the placeholder is in the batch");
    batch[at..at + to.len()].copy_from_slice(to);
    let crc = crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Batches Kafka's builder cannot make, built here and filtered by both: header keys that are not UTF-8
/// (Kafka reads them into a Java `String`), batches that already carry a delete horizon (kept by the
/// rebuild; a tombstone past it goes), and a LogAppendTime batch.
#[test]
fn klog_rebuilds_unusual_batches_as_kafkas_filter_to_does() {
    if !kafka_available() {
        return;
    }
    let mut cases: Vec<(String, Vec<u8>, Vec<i64>)> = Vec::new();
    // Header keys: a surrogate, a truncated 4-byte sequence, an overlong NUL, a stray 0xff and continuation.
    let mut b = BatchBuilder::new(Compression::None).base_offset(10);
    let h0 = [Header {
        key: "AAAA",
        value: Some(b"x"),
    }];
    let h1 = [
        Header {
            key: "BBB",
            value: None,
        },
        Header {
            key: "CCCCC",
            value: Some(b"y"),
        },
    ];
    b.append(1_000, Some(b"a"), Some(b"1"), &h0).unwrap();
    b.append(1_001, Some(b"b"), Some(b"2"), &h1).unwrap();
    b.append(1_002, Some(b"c"), Some(b"3"), &[]).unwrap();
    let mut bad = b.build().unwrap();
    patch(&mut bad, b"AAAA", &[0xed, 0xa0, 0x80, 0x41]);
    patch(&mut bad, b"BBB", &[0xf0, 0x9f, 0x98]);
    patch(&mut bad, b"CCCCC", &[0xc0, 0x80, 0xff, 0x80, 0x41]);
    cases.push(("non-UTF-8 header keys".into(), bad, vec![12]));
    for codec in Compression::ALL {
        for (horizon, drop) in [(NOW + 1_000, vec![21]), (NOW - 1, vec![20])] {
            let mut b = BatchBuilder::new(codec)
                .base_offset(20)
                .producer(42, 1, 10)
                .delete_horizon_ms(horizon);
            b.append(3_000, Some(b"t"), None, &[]).unwrap();
            b.append(3_001, Some(b"u"), Some(b"1"), &[]).unwrap();
            b.append(3_002, Some(b"v"), Some(b"2"), &[]).unwrap();
            cases.push((
                format!("{codec} horizon {horizon}"),
                b.build().unwrap(),
                drop,
            ));
        }
        let mut b = BatchBuilder::new(codec)
            .base_offset(30)
            .partition_leader_epoch(4)
            .log_append_time(55_555);
        for i in 0..5u8 {
            b.append(4_000 + i as i64, Some(&[b'k', i]), Some(&[i; 100]), &[])
                .unwrap();
        }
        cases.push((
            format!("{codec} LogAppendTime"),
            b.build().unwrap(),
            vec![31, 33],
        ));
    }
    for (what, source, drop) in &cases {
        let list = drop
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let lines = workload(&["filter-to-bytes", &list, &hex(source)]);
        let kafka = unhex(lines[0]["filtered"].as_str().expect("filtered"));
        let ours = klog_drop(source, drop);
        let codec = RecordBatch::parse(source, 0)
            .unwrap()
            .0
            .compression()
            .unwrap();
        if matches!(codec, Compression::None | Compression::Zstd) {
            assert!(
                ours == kafka,
                "{what}: klog {}\nKafka {}",
                hex(&ours),
                hex(&kafka)
            );
        } else {
            assert_eq!(
                fields_and_records(&ours),
                fields_and_records(&kafka),
                "{what}"
            );
        }
    }
}
