//! Build-then-parse identity, CRC coverage, Kafka's test vectors, stamping and the batch iterator's tails.

use klog_log::format::{
    AnyBatch, BatchBuilder, Batches, Compression, ControlRecordType, ControlValue, Header,
    RecordBatch, RecordBatchMut, Tail, TimestampType,
};
use klog_log::{Corruption, Error};
use proptest::prelude::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Spec §1.7 data batch: one record, null key, value "hello", ts 1700000000000, PLE 0.
#[test]
fn builder_matches_the_spec_data_vector() {
    let mut b = BatchBuilder::new(Compression::None).partition_leader_epoch(0);
    b.append(1_700_000_000_000, None, Some(b"hello"), &[])
        .unwrap();
    let bytes = b.build().unwrap();
    let expected = hex("00 00 00 00 00 00 00 00 00 00 00 3d 00 00 00 00
         02 e6 41 a4 4b 00 00 00 00 00 00 00 00 01 8b cf
         e5 68 00 00 00 01 8b cf e5 68 00 ff ff ff ff ff
         ff ff ff ff ff ff ff ff ff 00 00 00 01 16 00 00
         00 01 0a 68 65 6c 6c 6f 00");
    assert_eq!(bytes, expected);
    let (batch, rest) = RecordBatch::parse(&bytes, 0).unwrap();
    assert!(rest.is_empty());
    assert_eq!(batch.crc(), 3_863_061_579);
}

/// Spec §1.7 COMMIT marker: base offset 1, PLE 0, pid 1000, epoch 0, coordinator epoch 5: 78 bytes.
#[test]
fn builder_matches_the_spec_commit_vector() {
    let bytes =
        BatchBuilder::end_txn_marker(ControlRecordType::Commit, 1000, 0, 5, 1_700_000_000_000)
            .unwrap()
            .base_offset(1)
            .partition_leader_epoch(0)
            .build()
            .unwrap();
    let expected = hex("00 00 00 00 00 00 00 01 00 00 00 42 00 00 00 00
         02 fc 84 b0 34 00 30 00 00 00 00 00 00 01 8b cf
         e5 68 00 00 00 01 8b cf e5 68 00 00 00 00 00 00
         00 03 e8 00 00 ff ff ff ff 00 00 00 01 20 00 00
         00 08 00 00 00 01 0c 00 00 00 00 00 05 00");
    assert_eq!(bytes, expected);
    let (batch, _) = RecordBatch::parse(&bytes, 0).unwrap();
    let control = batch.control_record().unwrap().unwrap();
    assert_eq!(control.record_type, ControlRecordType::Commit);
    assert!(matches!(control.value, ControlValue::EndTxn(m) if m.coordinator_epoch == 5));
}

#[test]
fn end_txn_marker_refuses_what_kafka_refuses() {
    assert!(BatchBuilder::end_txn_marker(ControlRecordType::Commit, -1, 0, 0, 0).is_err());
    assert!(BatchBuilder::end_txn_marker(ControlRecordType::MirrorPidReset, 5, 0, 0, 0).is_err());
}

#[test]
fn mirror_pid_reset_batch_has_the_kip_layout() {
    let bytes = BatchBuilder::mirror_pid_reset(1_700_000_000_123)
        .unwrap()
        .base_offset(42)
        .partition_leader_epoch(7)
        .build()
        .unwrap();
    let (batch, _) = RecordBatch::parse(&bytes, 0).unwrap();
    assert_eq!(
        batch.attributes().0,
        0x20,
        "control, not transactional, no codec, CreateTime"
    );
    assert_eq!(
        (
            batch.producer_id(),
            batch.producer_epoch(),
            batch.base_sequence()
        ),
        (-1, -1, -1)
    );
    assert_eq!(
        (
            batch.base_offset(),
            batch.last_offset(),
            batch.records_count()
        ),
        (42, 42, 1)
    );
    assert_eq!(batch.partition_leader_epoch(), 7);
    let mut scratch = Vec::new();
    let records: Vec<_> = batch
        .records(&mut scratch)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(records[0].key, Some(&[0u8, 0, 0, 7][..]));
    assert_eq!(records[0].value, Some(&[0u8, 0, 0][..]), "{{Version}} only");
    assert!(records[0].headers.is_empty());
    let control = batch.control_record().unwrap().unwrap();
    assert_eq!(control.record_type, ControlRecordType::MirrorPidReset);
    match control.value {
        ControlValue::MirrorPidReset(v) => {
            assert_eq!(v.version, 0);
            assert_eq!(v.source_cluster_id, None);
        }
        other => panic!("unexpected value {other:?}"),
    }
}

#[test]
fn stamping_offsets_and_epoch_keeps_the_crc_and_log_append_time_recomputes_it() {
    let mut b = BatchBuilder::new(Compression::Lz4).producer(9, 1, 0);
    for i in 0..3 {
        b.append(1000 + i, Some(b"k"), Some(b"v"), &[]).unwrap();
    }
    let mut bytes = b.build().unwrap();
    let crc_before = RecordBatch::parse(&bytes, 0).unwrap().0.crc();
    let mut m = RecordBatchMut::parse(&mut bytes).unwrap();
    m.set_base_offset(500);
    m.set_partition_leader_epoch(3);
    assert_eq!(m.as_batch().crc(), crc_before);
    m.set_log_append_time(99_999);
    let (batch, _) = RecordBatch::parse(&bytes, 0).unwrap();
    assert_ne!(batch.crc(), crc_before);
    assert_eq!(
        (
            batch.base_offset(),
            batch.last_offset(),
            batch.partition_leader_epoch()
        ),
        (500, 502, 3)
    );
    assert_eq!(batch.timestamp_type(), TimestampType::LogAppendTime);
    let mut scratch = Vec::new();
    for (i, r) in batch.records(&mut scratch).unwrap().enumerate() {
        let r = r.unwrap();
        assert_eq!(
            (r.offset, r.timestamp, r.sequence),
            (500 + i as i64, 99_999, i as i32)
        );
    }
}

#[test]
fn sequences_wrap_in_last_sequence_and_per_record() {
    let mut b = BatchBuilder::new(Compression::None).producer(1, 0, i32::MAX - 1);
    for _ in 0..4 {
        b.append(5, None, Some(b"x"), &[]).unwrap();
    }
    let bytes = b.build().unwrap();
    let (batch, _) = RecordBatch::parse(&bytes, 0).unwrap();
    assert_eq!(batch.last_sequence(), 1);
    let mut scratch = Vec::new();
    let seqs: Vec<i32> = batch
        .records(&mut scratch)
        .unwrap()
        .map(|r| r.unwrap().sequence)
        .collect();
    assert_eq!(seqs, vec![i32::MAX - 1, i32::MAX, 0, 1]);
}

#[test]
fn batches_iterator_tells_tails_apart() {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(1, Some(b"a"), Some(b"b"), &[]).unwrap();
    let one = b.build().unwrap();
    let two = [one.clone(), one.clone()].concat();

    let mut it = Batches::new(&two);
    assert_eq!(it.by_ref().count(), 2);
    assert_eq!(it.tail(), Some(Tail::Clean));

    let mut zeros = two.clone();
    zeros.extend(std::iter::repeat_n(0u8, 4096));
    let mut it = Batches::new(&zeros);
    assert_eq!(it.by_ref().filter(|b| b.is_ok()).count(), 2);
    assert_eq!(
        it.tail(),
        Some(Tail::ZeroFilled {
            position: two.len() as u64,
            bytes: 4096
        })
    );

    let torn = &two[..two.len() - 5];
    let mut it = Batches::new(torn);
    assert_eq!(it.by_ref().filter(|b| b.is_ok()).count(), 1);
    assert_eq!(
        it.tail(),
        Some(Tail::Partial {
            position: one.len() as u64,
            bytes: one.len() as u64 - 5
        })
    );

    let mut garbage = two.clone();
    garbage.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6, 7]);
    let results: Vec<_> = Batches::new(&garbage).collect();
    assert_eq!(results.len(), 3);
    match &results[2] {
        Err(Error::CorruptBatch {
            position,
            reason:
                Corruption::BatchLengthTooSmall {
                    batch_length: 3, ..
                },
        }) => {
            assert_eq!(*position, two.len() as u64)
        }
        other => panic!("expected a too-small batch length, got {other:?}"),
    }

    let mut flipped = two.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0x40;
    let results: Vec<_> = Batches::new(&flipped).collect();
    assert!(matches!(
        &results[1],
        Err(Error::CorruptBatch {
            reason: Corruption::Crc { .. },
            ..
        })
    ));
}

#[test]
fn records_iteration_catches_count_and_trailing_byte_lies() {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(1, None, Some(b"v"), &[]).unwrap();
    b.append(2, None, Some(b"w"), &[]).unwrap();
    let good = b.build().unwrap();
    for (count, expect_missing) in [(3i32, true), (1, false)] {
        let mut bytes = good.clone();
        bytes[57..61].copy_from_slice(&count.to_be_bytes());
        let crc = klog_log::format::crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        let (batch, _) = RecordBatch::parse(&bytes, 0).unwrap();
        let mut scratch = Vec::new();
        let err = batch
            .records(&mut scratch)
            .unwrap()
            .find_map(Result::err)
            .unwrap();
        match err {
            Error::CorruptBatch {
                reason:
                    Corruption::MissingRecords {
                        declared: 3,
                        found: 2,
                    },
                ..
            } => {
                assert!(expect_missing)
            }
            Error::CorruptBatch {
                reason: Corruption::TrailingBytes { .. },
                ..
            } => assert!(!expect_missing),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[derive(Debug, Clone)]
struct RecordSpec {
    ts_offset: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

fn record_spec() -> impl Strategy<Value = RecordSpec> {
    let bytes = proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64));
    let header = (
        "[a-z]{0,8}",
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16)),
    );
    (
        0i64..100_000,
        bytes.clone(),
        bytes,
        proptest::collection::vec(header, 0..3),
    )
        .prop_map(|(ts_offset, key, value, headers)| RecordSpec {
            ts_offset,
            key,
            value,
            headers,
        })
}

fn build(codec: Compression, pid: i64, seq: i32, txn: bool, records: &[RecordSpec]) -> Vec<u8> {
    let mut b = BatchBuilder::new(codec)
        .base_offset(1000)
        .partition_leader_epoch(4)
        .producer(pid, 2, seq)
        .transactional(txn);
    for r in records {
        let headers: Vec<Header<'_>> = r
            .headers
            .iter()
            .map(|(k, v)| Header {
                key: k,
                value: v.as_deref(),
            })
            .collect();
        b.append(
            1_700_000_000_000 + r.ts_offset,
            r.key.as_deref(),
            r.value.as_deref(),
            &headers,
        )
        .unwrap();
    }
    b.build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn build_then_parse_is_identity(
        codec_id in 0u8..5,
        pid in -1i64..5,
        seq in prop_oneof![Just(-1), 0..10, Just(i32::MAX - 3)],
        txn: bool,
        records in proptest::collection::vec(record_spec(), 1..20),
    ) {
        let codec = Compression::from_id(codec_id).unwrap();
        let bytes = build(codec, pid, seq, txn, &records);
        let (batch, rest) = RecordBatch::parse(&bytes, 0).unwrap();
        prop_assert!(rest.is_empty());
        prop_assert_eq!(batch.compression().unwrap(), codec);
        prop_assert_eq!(batch.records_count() as usize, records.len());
        prop_assert_eq!(batch.last_offset(), 1000 + records.len() as i64 - 1);
        prop_assert_eq!(batch.is_transactional(), txn);
        let max_ts = records.iter().map(|r| 1_700_000_000_000 + r.ts_offset).max().unwrap();
        prop_assert_eq!(batch.max_timestamp(), max_ts);
        prop_assert_eq!(batch.base_timestamp(), 1_700_000_000_000 + records[0].ts_offset);
        let mut scratch = Vec::new();
        let parsed: Vec<_> = batch.records(&mut scratch).unwrap().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(parsed.len(), records.len());
        for (i, (p, r)) in parsed.iter().zip(&records).enumerate() {
            prop_assert_eq!(p.offset, 1000 + i as i64);
            prop_assert_eq!(p.timestamp, 1_700_000_000_000 + r.ts_offset);
            prop_assert_eq!(p.key, r.key.as_deref());
            prop_assert_eq!(p.value, r.value.as_deref());
            let headers: Vec<_> = p.headers.clone().map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec))).collect();
            let expected: Vec<_> = r.headers.iter().map(|(k, v)| (k.as_bytes().to_vec(), v.clone())).collect();
            prop_assert_eq!(headers, expected);
        }
    }

    /// Every byte inside the CRC range (attributes..end), flipped, is caught by the CRC check.
    #[test]
    fn any_flipped_byte_in_the_crc_range_is_caught(
        codec_id in 0u8..5,
        records in proptest::collection::vec(record_spec(), 1..5),
        pick: prop::sample::Index,
        bit in 0u8..8,
    ) {
        let codec = Compression::from_id(codec_id).unwrap();
        let mut bytes = build(codec, 3, 0, false, &records);
        let i = 21 + pick.index(bytes.len() - 21);
        bytes[i] ^= 1 << bit;
        let err = RecordBatch::parse(&bytes, 0).unwrap_err();
        let is_crc = matches!(err, Error::CorruptBatch { reason: Corruption::Crc { .. }, .. });
        prop_assert!(is_crc, "byte {} flipped gave {:?}", i, err);
    }

    /// No input makes the iterator or record decoding panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut scratch = Vec::new();
        for b in Batches::new(&bytes).without_crc().flatten() {
            if let AnyBatch::V2(batch) = b {
                if let Ok(records) = batch.records(&mut scratch) {
                    for r in records { let _ = r.map(|r| r.headers.count()); }
                }
                let _ = batch.control_record();
            }
        }
    }
}

#[test]
fn truncated_batches_report_how_much_was_needed() {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(1, None, Some(b"v"), &[]).unwrap();
    let bytes = b.build().unwrap();
    let err = RecordBatch::parse(&bytes[..40], 128).unwrap_err();
    match err {
        Error::CorruptBatch {
            position: 128,
            reason:
                Corruption::Truncated {
                    needed: 61,
                    available: 40,
                },
        } => {}
        other => panic!("unexpected {other:?}"),
    }
}
