//! The `.snapshot` codec: the spec's vectors, real Kafka files, round trips and every decode error.

#[path = "../../tests/common/skip.rs"]
mod skip;

use klog_psm::{decode_snapshot, encode_snapshot, Error, SnapshotCorruption, SnapshotEntry};
use proptest::prelude::*;

/// The repository's Kafka-written partition directories (`fixtures/`, made by `scripts/make-fixtures.sh`).
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/kafka-segments");
/// Third-party captures beside the checkout: used when present, required in CI.
const SHARED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/fixtures/kafka-segments/nomanazeem"
);

fn shared_fixtures() -> Option<&'static str> {
    if std::path::Path::new(SHARED).is_dir() {
        return Some(SHARED);
    }
    assert!(
        std::env::var("KLOG_REQUIRE_SHARED_FIXTURES").map_or(true, |v| v != "1"),
        "KLOG_REQUIRE_SHARED_FIXTURES=1 but {SHARED} is missing"
    );
    skip::skip(&format!("the shared fixtures: {SHARED} is absent"));
    None
}

/// Every `.snapshot` file of the repository's fixtures, sorted.
fn fixture_snapshots() -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let list = |dir: &std::path::Path| -> Vec<std::path::PathBuf> {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        entries
            .map(|e| e.expect("a directory entry").path())
            .collect()
    };
    for copy in list(std::path::Path::new(FIXTURES)) {
        for partition in list(&copy).into_iter().filter(|p| p.is_dir()) {
            files.extend(
                list(&partition)
                    .into_iter()
                    .filter(|f| f.extension().is_some_and(|e| e == "snapshot")),
            );
        }
    }
    files.sort();
    files
}

const EMPTY: [u8; 10] = [0x00, 0x01, 0x48, 0x67, 0x4b, 0xc7, 0x00, 0x00, 0x00, 0x00];

/// The spec's one-entry example (kafka-storage.md §2.6): pid 1000, epoch 0, lastSeq 2, lastOffset 2,
/// delta 2, timestamp 1700000000000, coordinator epoch −1, no transaction.
fn one_entry() -> SnapshotEntry {
    SnapshotEntry {
        producer_id: 1000,
        producer_epoch: 0,
        last_sequence: 2,
        last_offset: 2,
        offset_delta: 2,
        timestamp: 1_700_000_000_000,
        coordinator_epoch: -1,
        current_txn_first_offset: -1,
    }
}

fn hex(text: &str) -> Vec<u8> {
    text.split_whitespace()
        .map(|byte| u8::from_str_radix(byte, 16).expect("hex byte"))
        .collect()
}

fn corruption(bytes: &[u8]) -> SnapshotCorruption {
    match decode_snapshot(bytes) {
        Err(Error::CorruptSnapshot(reason)) => reason,
        other => panic!("expected a corrupt snapshot, got {other:?}"),
    }
}

#[test]
fn the_empty_snapshot_vector() {
    assert_eq!(encode_snapshot(&[]), EMPTY);
    assert_eq!(decode_snapshot(&EMPTY), Ok(vec![]));
}

#[test]
fn the_one_entry_vector() {
    // The spec computed these bytes; the CRC checks below confirm them independently of our encoder.
    let expected = hex(
        "00 01 77 39 41 25 00 00 00 01 00 00 00 00 00 00 03 e8 00 00 00 00 00 02 00 00 00 00 00 00 00 02 \
         00 00 00 02 00 00 01 8b cf e5 68 00 ff ff ff ff ff ff ff ff ff ff ff ff",
    );
    assert_eq!(expected.len(), 56);
    assert_eq!(crc32c::crc32c(&expected[6..]), 0x7739_4125);
    assert_eq!(encode_snapshot(&[one_entry()]), expected);
    assert_eq!(decode_snapshot(&expected), Ok(vec![one_entry()]));
}

/// Kafka's own snapshots, empty (internal topics) and with idempotent, transactional and fenced producers:
/// each decodes, and encoding what it decoded gives Kafka's file back byte for byte, entry order
/// included (Kafka writes its `HashMap`'s iteration order; klog writes the same order, see
/// `encode_snapshot`). Some of them list producers out of id order (a producer id that is a multiple
/// of 16 comes first), so the order is really checked.
#[test]
fn real_kafka_snapshots_decode_and_encode_back_byte_for_byte() {
    let files = fixture_snapshots();
    let (mut empty, mut producers, mut transactional, mut out_of_id_order) = (0, 0, 0, 0);
    for path in &files {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let entries = decode_snapshot(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let ours = encode_snapshot(&entries);
        assert_eq!(ours, bytes, "{}", path.display());
        // The order comes from the producers, not from the order they are handed over in.
        let mut reversed = entries.clone();
        reversed.reverse();
        assert_eq!(encode_snapshot(&reversed), bytes, "{}", path.display());
        empty += usize::from(entries.is_empty());
        producers += entries.len();
        transactional += entries.iter().filter(|e| e.coordinator_epoch >= 0).count();
        out_of_id_order += usize::from(!entries.is_sorted_by_key(|e| e.producer_id));
    }
    assert!(files.len() >= 10 && empty >= 2, "{files:?}");
    assert!(producers >= 20, "{producers} producer entries");
    assert!(transactional >= 1, "producers that ended transactions");
    assert!(
        out_of_id_order >= 1,
        "some Kafka snapshot lists its producers out of id order"
    );
}

#[test]
fn shared_kafka_snapshots_decode() {
    let Some(shared) = shared_fixtures() else {
        return;
    };
    for file in [
        "__cluster_metadata-0/00000000000000002067.snapshot",
        "__consumer_offsets-15/00000000000000000256.snapshot",
    ] {
        let path = format!("{shared}/{file}");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(decode_snapshot(&bytes), Ok(vec![]), "{path}");
        assert_eq!(
            encode_snapshot(&[]),
            bytes,
            "{path}: our empty snapshot is Kafka's byte for byte"
        );
    }
}

/// Java 17's `HashMap` order of the producer ids `1000 * k + 7`, `k` in `0..100` (put in increasing
/// order), as `k`.
const JAVA_ORDER_OF_A_HUNDRED: [i64; 100] = [
    96, 0, 32, 64, 85, 21, 53, 74, 10, 42, 95, 31, 63, 84, 20, 52, 73, 9, 41, 94, 30, 62, 83, 19,
    51, 72, 8, 40, 93, 29, 61, 82, 18, 50, 71, 7, 39, 92, 28, 60, 81, 17, 49, 70, 6, 38, 91, 27,
    59, 80, 16, 48, 69, 5, 37, 90, 26, 58, 79, 15, 47, 68, 4, 36, 89, 25, 57, 78, 14, 46, 67, 99,
    3, 35, 88, 24, 56, 77, 13, 45, 66, 98, 2, 34, 87, 23, 55, 76, 12, 44, 97, 1, 33, 65, 86, 22,
    54, 75, 11, 43,
];

fn ids_written(ids: &[i64]) -> Vec<i64> {
    let entries: Vec<SnapshotEntry> = ids
        .iter()
        .map(|&producer_id| SnapshotEntry {
            producer_id,
            ..one_entry()
        })
        .collect();
    decode_snapshot(&encode_snapshot(&entries))
        .expect("valid")
        .iter()
        .map(|e| e.producer_id)
        .collect()
}

/// `java.util.HashMap<Long, _>`'s order, as Java 17 printed `keySet()` of a map the ids were put into
/// in increasing order (the order Kafka allocates producer ids in): bucket `h ^ (h >>> 16)` of
/// `h = (int) (v ^ (v >>> 32))`, masked by the table size (16 buckets up to 12 entries, 32 up to 24,
/// 256 for 100). Java lists ids sharing a bucket in the order they were put in, which a snapshot does
/// not record: klog lists them by id.
#[test]
fn entries_are_written_in_the_order_kafkas_hash_map_lists_them() {
    // 16 buckets: 16 and 32 in bucket 0, 1 and 17 in bucket 1, 11 in bucket 11; the input order is
    // not the output's.
    assert_eq!(ids_written(&[11, 17, 16, 1, 32]), [16, 32, 1, 17, 11]);
    // -3 is 0xffff_ffff_ffff_fffd: hashCode 2, bucket 2. 1 << 32 has hashCode 1; 1 << 16 spreads to 1.
    assert_eq!(ids_written(&[5, -3, 1 << 32, 3]), [1 << 32, -3, 3, 5]);
    assert_eq!(ids_written(&[2, 1 << 16]), [1 << 16, 2]);
    // 12 producers: 16 buckets, 16 is in bucket 0. 13 producers: 32 buckets, 16 is in bucket 16.
    let twelve: Vec<i64> = (5..=16).collect();
    assert_eq!(
        ids_written(&twelve),
        [16, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    );
    let thirteen: Vec<i64> = (4..=16).collect();
    assert_eq!(ids_written(&thirteen), thirteen);
    // 100 producers 1,000 apart (a broker's id blocks): 256 buckets.
    let hundred: Vec<i64> = (0..100).map(|i| 1_000 * i + 7).collect();
    let java: Vec<i64> = JAVA_ORDER_OF_A_HUNDRED
        .iter()
        .map(|&k| 1_000 * k + 7)
        .collect();
    assert_eq!(ids_written(&hundred), java);
}

#[test]
fn a_file_in_any_entry_order_decodes_in_file_order() {
    // Kafka writes HashMap order; readers must not depend on it.
    let a = encode_snapshot(&[SnapshotEntry {
        producer_id: 9,
        ..one_entry()
    }]);
    let b = encode_snapshot(&[SnapshotEntry {
        producer_id: 1,
        ..one_entry()
    }]);
    let mut bytes = a[..6].to_vec();
    bytes.extend_from_slice(&2i32.to_be_bytes());
    bytes.extend_from_slice(&a[10..]);
    bytes.extend_from_slice(&b[10..]);
    let crc = crc32c::crc32c(&bytes[6..]);
    bytes[2..6].copy_from_slice(&crc.to_be_bytes());
    let ids: Vec<i64> = decode_snapshot(&bytes)
        .expect("valid")
        .iter()
        .map(|e| e.producer_id)
        .collect();
    assert_eq!(ids, vec![9, 1]);
}

#[test]
fn a_bad_crc_is_reported_with_both_values() {
    let mut bytes = encode_snapshot(&[one_entry()]);
    bytes[20] ^= 0x01;
    let computed = crc32c::crc32c(&bytes[6..]);
    let reason = corruption(&bytes);
    assert_eq!(
        reason,
        SnapshotCorruption::Crc {
            stored: 0x7739_4125,
            computed
        }
    );
    assert_eq!(
        reason.to_string(),
        format!("Snapshot is corrupt (CRC is no longer valid). Stored crc: {}. Computed crc: {computed}", 0x7739_4125u32)
    );
    assert_eq!(
        Error::CorruptSnapshot(reason).kafka_error_name(),
        "CORRUPT_SNAPSHOT"
    );
}

#[test]
fn an_unknown_version_is_rejected() {
    for version in [0i16, 2, -1] {
        let mut bytes = EMPTY.to_vec();
        bytes[..2].copy_from_slice(&version.to_be_bytes());
        let reason = corruption(&bytes);
        assert_eq!(reason, SnapshotCorruption::UnknownVersion { version });
        assert_eq!(
            reason.to_string(),
            format!("Snapshot contained an unknown file version {version}")
        );
    }
}

#[test]
fn a_negative_count_is_rejected() {
    let mut bytes = EMPTY.to_vec();
    bytes[6..10].copy_from_slice(&(-1i32).to_be_bytes());
    assert_eq!(
        corruption(&bytes),
        SnapshotCorruption::NegativeCount { count: -1 }
    );
}

#[test]
fn a_short_header_is_rejected() {
    for length in 0..10 {
        let reason = corruption(&EMPTY[..length]);
        assert!(
            matches!(reason, SnapshotCorruption::Truncated { available, .. } if available == length),
            "{reason:?}"
        );
    }
}

#[test]
fn a_count_larger_than_the_entries_is_rejected() {
    let bytes = encode_snapshot(&[one_entry()]);
    for length in 10..bytes.len() {
        let reason = corruption(&bytes[..length]);
        assert!(
            matches!(
                reason,
                SnapshotCorruption::Truncated {
                    field: "producer_entries",
                    needed: 56,
                    ..
                }
            ),
            "{reason:?}"
        );
    }
    let mut huge = EMPTY.to_vec();
    huge[6..10].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(matches!(
        corruption(&huge),
        SnapshotCorruption::Truncated { .. }
    ));
}

#[test]
fn the_schema_is_checked_before_the_version_and_the_crc() {
    // Kafka reads the whole struct first: a truncated file with a bad version is a schema failure.
    let mut bytes = encode_snapshot(&[one_entry()]);
    bytes[1] = 9;
    assert!(matches!(
        corruption(&bytes[..30]),
        SnapshotCorruption::Truncated { .. }
    ));
    assert!(matches!(
        corruption(&bytes),
        SnapshotCorruption::UnknownVersion { version: 9 }
    ));
}

#[test]
fn trailing_bytes_are_accepted_only_when_the_crc_covers_them_as_in_kafka() {
    let mut bytes = encode_snapshot(&[one_entry()]);
    bytes.extend_from_slice(&[1, 2, 3]);
    assert!(matches!(corruption(&bytes), SnapshotCorruption::Crc { .. }));
    let crc = crc32c::crc32c(&bytes[6..]);
    bytes[2..6].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(decode_snapshot(&bytes), Ok(vec![one_entry()]));
}

fn entry() -> impl Strategy<Value = SnapshotEntry> {
    (
        any::<i64>(),
        any::<i16>(),
        any::<i32>(),
        any::<i64>(),
        any::<i32>(),
        any::<i64>(),
        any::<i32>(),
        any::<i64>(),
    )
        .prop_map(
            |(
                producer_id,
                producer_epoch,
                last_sequence,
                last_offset,
                offset_delta,
                timestamp,
                coordinator_epoch,
                current_txn_first_offset,
            )| {
                SnapshotEntry {
                    producer_id,
                    producer_epoch,
                    last_sequence,
                    last_offset,
                    offset_delta,
                    timestamp,
                    coordinator_epoch,
                    current_txn_first_offset,
                }
            },
        )
}

proptest! {
    #[test]
    fn encode_then_decode_is_identity_up_to_order(entries in proptest::collection::vec(entry(), 0..20)) {
        let bytes = encode_snapshot(&entries);
        prop_assert_eq!(bytes.len(), 10 + 46 * entries.len());
        let mut expected = entries.clone();
        expected.sort_by_key(|e| e.producer_id);
        let mut decoded = decode_snapshot(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        decoded.sort_by_key(|e| e.producer_id);
        prop_assert_eq!(decoded, expected);
    }

    #[test]
    fn one_flipped_byte_is_detected(entries in proptest::collection::vec(entry(), 0..5), index in any::<prop::sample::Index>(), bit in 0u8..8) {
        let mut bytes = encode_snapshot(&entries);
        let index = index.index(bytes.len());
        bytes[index] ^= 1 << bit;
        prop_assert!(decode_snapshot(&bytes).is_err(), "flipped bit {} of byte {}", bit, index);
    }

    #[test]
    fn decoding_any_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_snapshot(&bytes);
    }
}
