//! The filter's rules, each against bytes laid out by hand from the spec's tables (kafka-compaction.md
//! §4.6 header, §4.8 empty header, §4.9 records), independent of `BatchBuilder`'s encoder.

use std::collections::HashMap;

use super::*;
use crate::cleaner::DigestKind;
use crate::format::{crc32c, BatchBuilder, Compression, ControlRecordType, Header};
use crate::txn_index::AbortedTxn;

const NOW: i64 = 1_700_000_000_000;
const RETENTION: i64 = 86_400_000;
const PID: i64 = 42;

/// A record as §4.9 lays it out: (offset delta, timestamp delta, key, value, headers).
type RecordSpec<'a> = (
    i32,
    i64,
    Option<&'a [u8]>,
    Option<&'a [u8]>,
    &'a [(&'a [u8], Option<&'a [u8]>)],
);

fn zigzag_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn nullable(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => zigzag_varint(out, -1),
        Some(b) => {
            zigzag_varint(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

/// §4.9: length, attributes 0, timestamp delta, offset delta, key, value, headers.
fn record_bytes(r: &RecordSpec<'_>) -> Vec<u8> {
    let (offset_delta, ts_delta, key, value, headers) = *r;
    let mut body = vec![0u8];
    zigzag_varint(&mut body, ts_delta);
    zigzag_varint(&mut body, offset_delta as i64);
    nullable(&mut body, key);
    nullable(&mut body, value);
    zigzag_varint(&mut body, headers.len() as i64);
    for (k, v) in headers {
        nullable(&mut body, Some(k));
        nullable(&mut body, *v);
    }
    let mut out = Vec::new();
    zigzag_varint(&mut out, body.len() as i64);
    out.extend_from_slice(&body);
    out
}

/// The header fields of §4.6 that a test chooses.
#[derive(Clone, Copy)]
struct Fields {
    base_offset: i64,
    leader_epoch: i32,
    attributes: u8,
    last_offset_delta: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
}

impl Fields {
    fn plain(base_offset: i64) -> Self {
        Fields {
            base_offset,
            leader_epoch: 5,
            attributes: 0,
            last_offset_delta: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
        }
    }
}

/// A whole v2 batch of uncompressed records, laid out per §4.6 byte by byte.
fn kafka_batch(f: Fields, records: &[RecordSpec<'_>]) -> Vec<u8> {
    let payload: Vec<u8> = records.iter().flat_map(record_bytes).collect();
    let mut b = Vec::new();
    b.extend_from_slice(&f.base_offset.to_be_bytes()); // 0: BaseOffset
    b.extend_from_slice(&((49 + payload.len()) as i32).to_be_bytes()); // 8: Length
    b.extend_from_slice(&f.leader_epoch.to_be_bytes()); // 12: PartitionLeaderEpoch
    b.push(2); // 16: Magic
    b.extend_from_slice(&[0; 4]); // 17: CRC, below
    b.extend_from_slice(&[0, f.attributes]); // 21: Attributes, high byte 0
    b.extend_from_slice(&f.last_offset_delta.to_be_bytes()); // 23
    b.extend_from_slice(&f.base_timestamp.to_be_bytes()); // 27
    b.extend_from_slice(&f.max_timestamp.to_be_bytes()); // 35
    b.extend_from_slice(&f.producer_id.to_be_bytes()); // 43
    b.extend_from_slice(&f.producer_epoch.to_be_bytes()); // 51
    b.extend_from_slice(&f.base_sequence.to_be_bytes()); // 53
    b.extend_from_slice(&(records.len() as i32).to_be_bytes()); // 57
    assert_eq!(b.len(), 61);
    b.extend_from_slice(&payload);
    let crc = crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

fn view(bytes: &[u8]) -> RecordBatch<'_> {
    RecordBatch::parse(bytes, 0).unwrap().0
}

/// The state of one test pass: map, transactions, producers.
struct Pass {
    map: OffsetMap,
    txn: CleanedTransactionMetadata,
    producers: HashMap<i64, LastRecord>,
    now_ms: i64,
    high_watermark: i64,
    retain_legacy: bool,
    stats: FilterStats,
}

impl Pass {
    fn new(keys: &[(&[u8], i64)]) -> Self {
        let mut map = OffsetMap::new(64 * 1024, 0.9, DigestKind::Md5);
        for (k, o) in keys {
            map.put(k, *o);
        }
        Pass {
            map,
            txn: CleanedTransactionMetadata::new(),
            producers: HashMap::new(),
            now_ms: NOW,
            high_watermark: i64::MAX,
            retain_legacy: true,
            stats: FilterStats::default(),
        }
    }

    fn latest(mut self, offset: i64) -> Self {
        self.map.update_latest_offset(offset);
        self
    }

    fn filter(&mut self, bytes: &[u8]) -> (BatchOutcome, Vec<u8>) {
        let mut out = Vec::new();
        let outcome = self.try_filter(bytes, &mut out).unwrap();
        (outcome, out)
    }

    fn try_filter(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<BatchOutcome, Error> {
        let mut ctx = FilterContext {
            map: &self.map,
            txn: &mut self.txn,
            now_ms: self.now_ms,
            delete_retention_ms: RETENTION,
            retain_legacy_deletes_and_txn_markers: self.retain_legacy,
            high_watermark: self.high_watermark,
            active_producers: &self.producers,
        };
        filter_batch(&view(bytes), &mut ctx, out, &mut self.stats)
    }
}

const A: &[u8] = b"a";
const B: &[u8] = b"b";
const C: &[u8] = b"c";

#[test]
fn nothing_removed_is_copied_verbatim() {
    let mut f = Fields::plain(10);
    f.last_offset_delta = 2;
    f.base_timestamp = 1_000;
    f.max_timestamp = 1_002;
    let src = kafka_batch(
        f,
        &[
            (0, 0, Some(A), Some(b"1"), &[]),
            (1, 1, Some(B), Some(b"2"), &[]),
            (2, 2, Some(C), Some(b"3"), &[]),
        ],
    );
    let mut pass = Pass::new(&[(A, 10), (B, 11), (C, 12)]);
    let (outcome, out) = pass.filter(&src);
    assert_eq!(outcome, BatchOutcome::Whole);
    assert_eq!(out, src);
    assert_eq!(pass.stats.records_read, 3);
    assert_eq!(pass.stats.records_retained, 3);
    assert_eq!(pass.stats.bytes_written, src.len() as u64);
}

#[test]
fn a_superseded_record_is_removed_and_the_batch_rebuilt_as_kafka_lays_it_out() {
    // Source: a@100 (ts 5000), b@101 (ts 5007), a@102 (ts 5003); a's latest is 102.
    let mut f = Fields::plain(100);
    f.last_offset_delta = 2;
    f.base_timestamp = 5_000;
    f.max_timestamp = 5_007;
    f.producer_id = PID;
    f.producer_epoch = 3;
    f.base_sequence = 17;
    let src = kafka_batch(
        f,
        &[
            (0, 0, Some(A), Some(b"old"), &[]),
            (1, 7, Some(B), Some(b"bb"), &[(b"h", Some(b"x"))]),
            (2, 3, Some(A), Some(b"new"), &[]),
        ],
    );
    let mut pass = Pass::new(&[(A, 102), (B, 101)]);
    let (outcome, out) = pass.filter(&src);
    assert_eq!(outcome, BatchOutcome::Rebuilt);
    // §4.7: same base offset, last offset delta, producer fields and leader epoch; the base timestamp is
    // the first kept record's (5007), the max recomputed over the kept ones; deltas re-encoded from 5007.
    let mut want = f;
    want.base_timestamp = 5_007;
    want.max_timestamp = 5_007;
    let expected = kafka_batch(
        want,
        &[
            (1, 0, Some(B), Some(b"bb"), &[(b"h", Some(b"x"))]),
            (2, -4, Some(A), Some(b"new"), &[]),
        ],
    );
    assert_eq!(out, expected);
    assert_eq!(pass.stats.batches_rebuilt, 1);
    assert_eq!(pass.stats.records_retained, 2);
    assert_eq!(pass.stats.bytes_written, expected.len() as u64);
}

#[test]
fn the_last_offset_delta_survives_when_the_last_record_goes() {
    let mut f = Fields::plain(0);
    f.last_offset_delta = 2;
    f.max_timestamp = 2;
    let src = kafka_batch(
        f,
        &[
            (0, 0, Some(A), Some(b"1"), &[]),
            (1, 1, Some(B), Some(b"2"), &[]),
            (2, 2, Some(C), Some(b"3"), &[]),
        ],
    );
    let mut pass = Pass::new(&[(A, 0), (B, 9), (C, 9)]).latest(9);
    let (outcome, out) = pass.filter(&src);
    assert_eq!(outcome, BatchOutcome::Rebuilt);
    let mut want = f;
    want.max_timestamp = 0;
    assert_eq!(out, kafka_batch(want, &[(0, 0, Some(A), Some(b"1"), &[])]));
    assert_eq!(
        view(&out).last_offset(),
        2,
        "the producer's last sequence is kept"
    );
    assert_eq!(view(&out).records_count(), 1);
}

#[test]
fn keyless_records_go_below_the_map_and_stay_past_it() {
    let mut f = Fields::plain(0);
    f.last_offset_delta = 1;
    f.max_timestamp = 1;
    let src = kafka_batch(
        f,
        &[
            (0, 0, None, Some(b"1"), &[]),
            (1, 1, Some(A), Some(b"2"), &[]),
        ],
    );
    let mut pass = Pass::new(&[(A, 1)]);
    let (_, out) = pass.filter(&src);
    let mut want = f;
    want.base_timestamp = 1;
    assert_eq!(out, kafka_batch(want, &[(1, 0, Some(A), Some(b"2"), &[])]));
    // Past the map's latest offset every record stays, keyless or not: verbatim.
    let mut pass = Pass::new(&[]).latest(-1);
    assert_eq!(pass.filter(&src), (BatchOutcome::Whole, src.clone()));
    // A key the map does not hold (below its latest offset) stays too.
    let mut pass = Pass::new(&[(C, 7)]);
    let (_, out) = pass.filter(&src);
    assert_eq!(view(&out).records_count(), 1);
}

/// KIP-534, first pass: a kept tombstone sets the horizon `now + delete.retention.ms` into the base
/// timestamp with attributes bit 6; the record deltas become negative.
#[test]
fn a_tombstone_sets_the_delete_horizon_on_the_first_pass() {
    let mut f = Fields::plain(7);
    f.last_offset_delta = 1;
    f.base_timestamp = 1_000;
    f.max_timestamp = 1_010;
    let src = kafka_batch(
        f,
        &[
            (0, 0, Some(A), Some(b"v"), &[]),
            (1, 10, Some(B), None, &[]),
        ],
    );
    let mut pass = Pass::new(&[(A, 7), (B, 8)]);
    let (outcome, out) = pass.filter(&src);
    assert_eq!(outcome, BatchOutcome::Rebuilt);
    let horizon = NOW + RETENTION;
    let mut want = f;
    want.attributes = 0x40;
    want.base_timestamp = horizon;
    let expected = kafka_batch(
        want,
        &[
            (0, 1_000 - horizon, Some(A), Some(b"v"), &[]),
            (1, 1_010 - horizon, Some(B), None, &[]),
        ],
    );
    assert_eq!(out, expected);
    let rebuilt = view(&out);
    assert_eq!(rebuilt.delete_horizon_ms(), Some(horizon));
    let mut scratch = Vec::new();
    let ts: Vec<i64> = rebuilt
        .records(&mut scratch)
        .unwrap()
        .map(|r| r.unwrap().timestamp)
        .collect();
    assert_eq!(
        ts,
        vec![1_000, 1_010],
        "record timestamps survive the horizon"
    );

    // Before the horizon a later pass keeps the batch as it is; at it, the tombstone goes.
    let mut before = Pass::new(&[(A, 7), (B, 8)]);
    before.now_ms = horizon - 1;
    assert_eq!(before.filter(&out), (BatchOutcome::Whole, out.clone()));
    let mut after = Pass::new(&[(A, 7), (B, 8)]);
    after.now_ms = horizon;
    let (outcome, again) = after.filter(&out);
    assert_eq!(outcome, BatchOutcome::Rebuilt);
    assert_eq!(after.stats.tombstones_removed, 1);
    // The horizon already set stays, though no tombstone remains (§4.5).
    let mut kept = want;
    kept.last_offset_delta = 1;
    kept.max_timestamp = 1_000;
    assert_eq!(
        again,
        kafka_batch(kept, &[(0, 1_000 - horizon, Some(A), Some(b"v"), &[])])
    );
}

#[test]
fn a_batch_of_only_an_expired_tombstone_is_dropped() {
    let mut f = Fields::plain(3);
    f.attributes = 0x40;
    f.base_timestamp = NOW - 1;
    f.max_timestamp = 1;
    let src = kafka_batch(f, &[(0, 2 - NOW, Some(A), None, &[])]);
    let mut pass = Pass::new(&[(A, 3)]);
    assert_eq!(pass.filter(&src), (BatchOutcome::Dropped, vec![]));
    assert_eq!(pass.stats.tombstones_removed, 1);
    assert_eq!(pass.stats.records_retained, 0);
}

/// §4.8, byte for byte: the empty header of an aborted zstd batch that is its producer's last.
#[test]
fn the_producers_last_batch_is_kept_as_kafkas_empty_header() {
    let mut b = BatchBuilder::new(Compression::Zstd)
        .base_offset(200)
        .partition_leader_epoch(9)
        .producer(PID, 4, 30)
        .transactional(true);
    for i in 0..3 {
        b.append(8_000 + i, Some(A), Some(b"x"), &[]).unwrap();
    }
    let src = b.build().unwrap();
    let mut pass = Pass::new(&[(A, 202)]);
    pass.txn
        .add_aborted_transactions(&[AbortedTxn::new(PID, 200, 203, 200)]);
    pass.producers.insert(
        PID,
        LastRecord {
            last_data_offset: Some(202),
            producer_epoch: 4,
        },
    );
    let (outcome, out) = pass.filter(&src);
    assert_eq!(outcome, BatchOutcome::Empty);
    let mut expected: Vec<u8> = Vec::new();
    expected.extend_from_slice(&200i64.to_be_bytes());
    expected.extend_from_slice(&49i32.to_be_bytes());
    expected.extend_from_slice(&9i32.to_be_bytes());
    expected.push(2);
    expected.extend_from_slice(&[0; 4]);
    expected.extend_from_slice(&[0x00, 0x10]); // transactional, no codec, no horizon
    expected.extend_from_slice(&2i32.to_be_bytes());
    expected.extend_from_slice(&(-1i64).to_be_bytes());
    expected.extend_from_slice(&8_002i64.to_be_bytes());
    expected.extend_from_slice(&PID.to_be_bytes());
    expected.extend_from_slice(&4i16.to_be_bytes());
    expected.extend_from_slice(&30i32.to_be_bytes());
    expected.extend_from_slice(&0i32.to_be_bytes());
    let crc = crc32c(&expected[21..]);
    expected[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(out, expected);
    assert_eq!(pass.stats.batches_emptied, 1);
    assert_eq!(pass.stats.aborted_removed, 3);
}

#[test]
fn aborted_data_is_dropped_unread() {
    let mut f = Fields::plain(50);
    f.attributes = 0x10;
    f.producer_id = PID;
    f.producer_epoch = 0;
    f.base_sequence = 0;
    f.last_offset_delta = 1;
    let src = kafka_batch(
        f,
        &[
            (0, 0, Some(A), Some(b"1"), &[]),
            (1, 0, Some(B), Some(b"2"), &[]),
        ],
    );
    let mut pass = Pass::new(&[(A, 50), (B, 51)]);
    pass.txn
        .add_aborted_transactions(&[AbortedTxn::new(PID, 50, 52, 50)]);
    assert_eq!(pass.filter(&src), (BatchOutcome::Dropped, vec![]));
    assert_eq!(pass.stats.aborted_removed, 2);
}

#[test]
fn the_batch_ending_at_the_high_watermark_is_kept_empty() {
    let mut f = Fields::plain(20);
    f.last_offset_delta = 1;
    let src = kafka_batch(
        f,
        &[
            (0, 0, Some(A), Some(b"1"), &[]),
            (1, 0, Some(A), Some(b"2"), &[]),
        ],
    );
    let mut pass = Pass::new(&[(A, 99)]);
    pass.high_watermark = 22;
    let (outcome, out) = pass.filter(&src);
    assert_eq!(outcome, BatchOutcome::Empty);
    assert_eq!(out.len(), 61);
    let empty = view(&out);
    assert_eq!((empty.base_offset(), empty.last_offset()), (20, 21));
    // Below the high watermark (KAFKA-20452), the same batch goes.
    let mut pass = Pass::new(&[(A, 99)]);
    pass.high_watermark = 23;
    assert_eq!(pass.filter(&src), (BatchOutcome::Dropped, vec![]));
}

/// A COMMIT whose transaction has no data left: first pass sets the horizon (kept, rebuilt), a pass
/// before the horizon copies it, a pass at it drops it; kept empty when it is the producer's last entry.
#[test]
fn a_marker_of_an_empty_transaction_gets_a_horizon_then_goes() {
    let src = BatchBuilder::end_txn_marker(ControlRecordType::Commit, PID, 2, 6, 4_000)
        .unwrap()
        .base_offset(30)
        .partition_leader_epoch(1)
        .build()
        .unwrap();
    let mut pass = Pass::new(&[]);
    let (outcome, out) = pass.filter(&src);
    assert_eq!(outcome, BatchOutcome::Rebuilt);
    let horizon = NOW + RETENTION;
    let mut f = Fields::plain(30);
    f.leader_epoch = 1;
    f.attributes = 0x10 | 0x20 | 0x40;
    f.base_timestamp = horizon;
    f.max_timestamp = 4_000;
    f.producer_id = PID;
    f.producer_epoch = 2;
    let value = [0u8, 0, 0, 0, 0, 6];
    let key = [0u8, 0, 0, 1];
    assert_eq!(
        out,
        kafka_batch(f, &[(0, 4_000 - horizon, Some(&key), Some(&value), &[])])
    );

    let mut before = Pass::new(&[]);
    before.now_ms = horizon - 1;
    assert_eq!(before.filter(&out), (BatchOutcome::Whole, out.clone()));
    let mut at = Pass::new(&[]);
    at.now_ms = horizon;
    assert_eq!(at.filter(&out), (BatchOutcome::Dropped, vec![]));
    assert_eq!(at.stats.markers_removed, 1);

    // The producer's last entry is this marker (no data offset, same epoch): kept as an empty header.
    let mut last = Pass::new(&[]);
    last.now_ms = horizon;
    last.producers.insert(
        PID,
        LastRecord {
            last_data_offset: None,
            producer_epoch: 2,
        },
    );
    let (outcome, empty) = last.filter(&out);
    assert_eq!(outcome, BatchOutcome::Empty);
    let e = view(&empty);
    assert!(e.is_control() && e.is_transactional() && e.delete_horizon_ms().is_none());
    assert_eq!(e.records_count(), 0);
    // And that empty control batch is discardable on the pass after (already cleaned).
    let mut next = Pass::new(&[]);
    next.now_ms = horizon + 1;
    assert_eq!(next.filter(&empty), (BatchOutcome::Dropped, vec![]));
}

#[test]
fn a_commit_with_its_data_kept_is_copied_verbatim() {
    let mut data = BatchBuilder::new(Compression::None)
        .base_offset(0)
        .producer(PID, 0, 0)
        .transactional(true);
    data.append(1, Some(A), Some(b"1"), &[]).unwrap();
    let data = data.build().unwrap();
    let commit = BatchBuilder::end_txn_marker(ControlRecordType::Commit, PID, 0, 0, 2)
        .unwrap()
        .base_offset(1)
        .build()
        .unwrap();
    let mut pass = Pass::new(&[(A, 0)]);
    assert_eq!(pass.filter(&data), (BatchOutcome::Whole, data.clone()));
    assert_eq!(pass.filter(&commit), (BatchOutcome::Whole, commit.clone()));
}

/// Every codec on the rebuild path: the rebuilt batch is valid, keeps the codec, the header fields and
/// exactly the kept records (offsets, timestamps, keys, values, headers); LogAppendTime keeps its time.
#[test]
fn every_codec_rebuilds_the_kept_records() {
    for codec in Compression::ALL {
        for log_append in [false, true] {
            let mut b = BatchBuilder::new(codec)
                .base_offset(1_000)
                .partition_leader_epoch(3)
                .producer(PID, 1, 500);
            if log_append {
                b = b.log_append_time(77_777);
            }
            let value = vec![b'z'; 3_000];
            for i in 0..40i64 {
                let key = [b'k', (i % 10) as u8];
                let h = [Header {
                    key: "trace",
                    value: Some(&[i as u8]),
                }];
                b.append(10_000 + i, Some(&key), Some(&value), &h).unwrap();
            }
            let src = b.build().unwrap();
            // The last 10 records hold every key's latest offset.
            let keys: Vec<[u8; 2]> = (0..10).map(|i| [b'k', i as u8]).collect();
            let entries: Vec<(&[u8], i64)> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| (&k[..], 1_030 + i as i64))
                .collect();
            let mut pass = Pass::new(&entries);
            let (outcome, out) = pass.filter(&src);
            assert_eq!(outcome, BatchOutcome::Rebuilt, "{codec}");
            let rebuilt = view(&out);
            let source = view(&src);
            assert_eq!(rebuilt.compression().unwrap(), codec);
            assert_eq!(rebuilt.timestamp_type(), source.timestamp_type());
            assert_eq!(rebuilt.base_offset(), 1_000);
            assert_eq!(rebuilt.last_offset_delta(), 39);
            assert_eq!(rebuilt.partition_leader_epoch(), 3);
            assert_eq!(
                (
                    rebuilt.producer_id(),
                    rebuilt.producer_epoch(),
                    rebuilt.base_sequence()
                ),
                (PID, 1, 500)
            );
            let max = if log_append { 77_777 } else { 10_039 };
            assert_eq!(rebuilt.max_timestamp(), max, "{codec} {log_append}");
            let (mut s1, mut s2) = (Vec::new(), Vec::new());
            let got: Vec<_> = rebuilt
                .records(&mut s1)
                .unwrap()
                .map(|r| {
                    let r = r.unwrap();
                    let h: Vec<_> = r.headers.clone().collect();
                    (
                        r.offset,
                        r.timestamp,
                        r.key.map(<[u8]>::to_vec),
                        r.value.map(<[u8]>::to_vec),
                        format!("{h:?}"),
                    )
                })
                .collect();
            let want: Vec<_> = source
                .records(&mut s2)
                .unwrap()
                .map(|r| r.unwrap())
                .filter(|r| r.offset >= 1_030)
                .map(|r| {
                    let h: Vec<_> = r.headers.clone().collect();
                    (
                        r.offset,
                        r.timestamp,
                        r.key.map(<[u8]>::to_vec),
                        r.value.map(<[u8]>::to_vec),
                        format!("{h:?}"),
                    )
                })
                .collect();
            assert_eq!(got.len(), 10);
            assert_eq!(got, want, "{codec} {log_append}");
        }
    }
}

/// An uncompressed LogAppendTime rebuild, by hand: every record reports the batch's max timestamp, so
/// the base timestamp is it and every delta 0.
#[test]
fn a_log_append_time_batch_is_rebuilt_around_its_append_time() {
    let mut f = Fields::plain(0);
    f.attributes = 0x08;
    f.last_offset_delta = 1;
    f.base_timestamp = 10;
    f.max_timestamp = 99;
    let src = kafka_batch(
        f,
        &[
            (0, 0, Some(A), Some(b"1"), &[]),
            (1, 5, Some(B), Some(b"2"), &[]),
        ],
    );
    let mut pass = Pass::new(&[(A, 9), (B, 1)]).latest(9);
    let (_, out) = pass.filter(&src);
    let mut want = f;
    want.base_timestamp = 99;
    assert_eq!(out, kafka_batch(want, &[(1, 0, Some(B), Some(b"2"), &[])]));
}

#[test]
fn header_keys_that_are_not_utf8_come_out_as_a_java_string_writes_them() {
    let mut f = Fields::plain(0);
    f.last_offset_delta = 1;
    let bad: &[u8] = b"k\xffey";
    let src = kafka_batch(
        f,
        &[
            (0, 0, Some(A), Some(b"1"), &[]),
            (1, 0, Some(B), Some(b"2"), &[(bad, None)]),
        ],
    );
    let mut pass = Pass::new(&[(A, 5), (B, 1)]).latest(5);
    let (_, out) = pass.filter(&src);
    let fixed: &[u8] = "k\u{fffd}ey".as_bytes();
    assert_eq!(
        out,
        kafka_batch(f, &[(1, 0, Some(B), Some(b"2"), &[(fixed, None)])])
    );
}

#[test]
fn a_corrupt_record_is_an_error_naming_the_batch_not_a_panic() {
    let mut f = Fields::plain(0);
    f.last_offset_delta = 0;
    let mut src = kafka_batch(f, &[(0, 0, Some(A), Some(b"1"), &[])]);
    src[61] = 0x7f; // a record length past the batch
    let crc = crc32c(&src[21..]);
    src[17..21].copy_from_slice(&crc.to_be_bytes());
    let mut pass = Pass::new(&[(A, 0)]);
    let mut out = Vec::new();
    let err = pass.try_filter(&src, &mut out).unwrap_err();
    assert!(
        matches!(err, Error::CorruptBatch { position: 0, .. }),
        "{err}"
    );
    assert!(out.is_empty(), "nothing written for a batch that failed");
}

fn legacy_message(offset: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> Vec<u8> {
    let mut body = vec![1u8, 0];
    body.extend_from_slice(&1_234i64.to_be_bytes());
    for part in [key, value] {
        match part {
            None => body.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(p) => {
                body.extend_from_slice(&(p.len() as i32).to_be_bytes());
                body.extend_from_slice(p);
            }
        }
    }
    let mut entry = offset.to_be_bytes().to_vec();
    entry.extend_from_slice(&(4 + body.len() as i32).to_be_bytes());
    entry.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    entry.extend_from_slice(&body);
    entry
}

#[test]
fn legacy_entries_follow_the_legacy_rules_and_a_kept_one_is_refused_not_guessed() {
    let superseded = legacy_message(4, Some(A), Some(b"old"));
    let tombstone = legacy_message(5, Some(B), None);
    let live = legacy_message(6, Some(C), Some(b"v"));
    let mut pass = Pass::new(&[(A, 9), (B, 5), (C, 6)]).latest(9);
    pass.retain_legacy = false;
    let run = |pass: &mut Pass, bytes: &[u8]| {
        let entry = LegacyEntry::parse(bytes, 4_096).unwrap().0;
        let mut ctx = FilterContext {
            map: &pass.map,
            txn: &mut pass.txn,
            now_ms: pass.now_ms,
            delete_retention_ms: RETENTION,
            retain_legacy_deletes_and_txn_markers: pass.retain_legacy,
            high_watermark: pass.high_watermark,
            active_producers: &pass.producers,
        };
        filter_legacy_entry(&entry, &mut ctx, &mut pass.stats)
    };
    assert_eq!(run(&mut pass, &superseded).unwrap(), BatchOutcome::Dropped);
    assert_eq!(run(&mut pass, &tombstone).unwrap(), BatchOutcome::Dropped);
    assert_eq!(pass.stats.tombstones_removed, 1);
    let err = run(&mut pass, &live).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Uncleanable {
                position: 4_096,
                ..
            }
        ),
        "{err}"
    );
    // With the legacy rule retaining deletes, the tombstone is kept: refused the same way.
    pass.retain_legacy = true;
    assert!(matches!(
        run(&mut pass, &tombstone),
        Err(Error::Uncleanable { .. })
    ));
}

#[test]
fn for_each_key_yields_data_keys_only() {
    for codec in Compression::ALL {
        let mut b = BatchBuilder::new(codec).base_offset(40);
        b.append(1, Some(A), Some(b"1"), &[]).unwrap();
        b.append(2, None, Some(b"2"), &[]).unwrap();
        b.append(3, Some(B), None, &[]).unwrap();
        let bytes = b.build().unwrap();
        let mut seen = Vec::new();
        for_each_key(&view(&bytes), &mut |o, k| {
            seen.push((o, k.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![(40, A.to_vec()), (42, B.to_vec())], "{codec}");
    }
    let marker = BatchBuilder::end_txn_marker(ControlRecordType::Abort, PID, 0, 0, 1)
        .unwrap()
        .build()
        .unwrap();
    let mut calls = 0;
    for_each_key(&view(&marker), &mut |_, _| {
        calls += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(calls, 0, "a control record's key is no data key");
    let legacy = legacy_message(8, Some(C), Some(b"x"));
    let entry = LegacyEntry::parse(&legacy, 0).unwrap().0;
    let mut seen = Vec::new();
    for_each_key_any(&AnyBatch::Legacy(entry), &mut |o, k| {
        seen.push((o, k.to_vec()));
        Ok(())
    })
    .unwrap();
    assert_eq!(seen, vec![(8, C.to_vec())]);
}

#[test]
fn key_digests_are_the_keys_from_start_on_as_the_map_digests_them() {
    let map = OffsetMap::new(4096, 0.9, DigestKind::Xxh3);
    let mut b = BatchBuilder::new(Compression::None).base_offset(40);
    b.append(1, Some(A), Some(b"1"), &[]).unwrap();
    b.append(2, None, Some(b"2"), &[]).unwrap();
    b.append(3, Some(B), None, &[]).unwrap();
    b.append(4, Some(C), Some(b"4"), &[]).unwrap();
    let bytes = b.build().unwrap();
    let mut out = vec![(0, map.digest(b"stale"))];
    key_digests(&AnyBatch::V2(view(&bytes)), 41, &map, &mut out).unwrap();
    assert_eq!(out, vec![(42, map.digest(B)), (43, map.digest(C))]);
    let marker = BatchBuilder::end_txn_marker(ControlRecordType::Abort, PID, 0, 0, 1)
        .unwrap()
        .build()
        .unwrap();
    key_digests(&AnyBatch::V2(view(&marker)), 0, &map, &mut out).unwrap();
    assert!(out.is_empty(), "a control record's key is no data key");
}

proptest::proptest! {
    /// Any batch sequence filtered with an empty map and no tombstones comes out verbatim.
    #[test]
    fn an_empty_map_keeps_every_batch_verbatim(
        batches in proptest::collection::vec(
            (0usize..5, proptest::bool::ANY, proptest::collection::vec(
                (proptest::option::of(proptest::collection::vec(0u8.., 0..8)),
                 proptest::collection::vec(0u8.., 0..40),
                 0i64..10_000,
                 proptest::bool::ANY),
                1..12)),
            1..8)
    ) {
        let mut input = Vec::new();
        let mut offset = 0i64;
        for (codec, transactional, records) in &batches {
            let mut b = BatchBuilder::new(Compression::ALL[*codec])
                .base_offset(offset)
                .partition_leader_epoch(2);
            if *transactional {
                b = b.producer(PID, 0, offset as i32).transactional(true);
            }
            for (key, value, ts, with_header) in records {
                let h = [Header { key: "h", value: Some(value) }];
                let headers: &[Header<'_>] = if *with_header { &h } else { &[] };
                b.append(*ts, key.as_deref(), Some(value), headers).unwrap();
            }
            offset += records.len() as i64;
            b.build_into(&mut input).unwrap();
        }
        let mut pass = Pass::new(&[]);
        let mut out = Vec::new();
        let mut rest = &input[..];
        while !rest.is_empty() {
            let (batch, next) = RecordBatch::parse(rest, 0).unwrap();
            let mut ctx = FilterContext {
                map: &pass.map,
                txn: &mut pass.txn,
                now_ms: NOW,
                delete_retention_ms: RETENTION,
                retain_legacy_deletes_and_txn_markers: true,
                high_watermark: offset,
                active_producers: &pass.producers,
            };
            let outcome = filter_batch(&batch, &mut ctx, &mut out, &mut pass.stats).unwrap();
            proptest::prop_assert_eq!(outcome, BatchOutcome::Whole);
            rest = next;
        }
        proptest::prop_assert_eq!(out, input);
    }
}

proptest::proptest! {
    /// Bytes changed anywhere after the header's CRC (the CRC then fixed, so the batch parses) never make the
    /// filter panic: it answers with an outcome whose output parses as whole batches, or with an error and
    /// nothing written.
    #[test]
    fn damaged_records_are_an_error_or_valid_output_never_a_panic(
        codec in 0usize..5,
        control in proptest::bool::ANY,
        flips in proptest::collection::vec((0usize..4096, 0u8..), 1..6),
        superseded in proptest::collection::vec(proptest::bool::ANY, 6),
    ) {
        let src = if control {
            BatchBuilder::end_txn_marker(ControlRecordType::Commit, PID, 0, 1, 5)
                .unwrap()
                .base_offset(6)
                .build()
                .unwrap()
        } else {
            let mut b = BatchBuilder::new(Compression::ALL[codec]).base_offset(0);
            for i in 0..6i64 {
                let key = [b'k', i as u8];
                let value: Option<&[u8]> = if i % 3 == 0 { None } else { Some(b"value") };
                let h = [Header { key: "h", value: Some(b"x") }];
                b.append(100 + i, Some(&key), value, &h).unwrap();
            }
            b.build().unwrap()
        };
        let mut bytes = src.clone();
        for (at, byte) in flips {
            let at = 23 + at % (bytes.len() - 23);
            bytes[at] ^= byte | 1;
        }
        let crc = crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        let Ok((batch, _)) = RecordBatch::parse(&bytes, 0) else {
            return Ok(());
        };
        let keys: Vec<[u8; 2]> = (0..6).map(|i| [b'k', i as u8]).collect();
        let entries: Vec<(&[u8], i64)> = keys
            .iter()
            .zip(&superseded)
            .enumerate()
            .map(|(i, (k, s))| (&k[..], if *s { 99 } else { i as i64 }))
            .collect();
        let mut pass = Pass::new(&entries);
        pass.now_ms = if superseded[0] { i64::MAX } else { NOW };
        pass.high_watermark = batch.next_offset();
        let mut out = Vec::new();
        match pass.try_filter(&bytes, &mut out) {
            Ok(_) => {
                let mut rest = &out[..];
                while !rest.is_empty() {
                    let (b, next) = RecordBatch::parse(rest, 0).expect("the filter writes whole, valid batches");
                    let mut scratch = Vec::new();
                    for r in b.records(&mut scratch).expect("its records inflate") {
                        r.expect("its records parse");
                    }
                    rest = next;
                }
            }
            Err(_) => proptest::prop_assert!(out.is_empty(), "nothing written for a batch that failed"),
        }
    }
}

/// §4.4's marker life cycle over three passes of one aborted transaction: the first removes its data and
/// keeps the ABORT (its data was seen; the `AbortedTxn` goes to the cleaned `.txnindex`), the second finds
/// no data left and sets the marker's horizon, the third, past the horizon, drops it.
#[test]
fn an_abort_marker_outlives_its_data_by_the_delete_retention() {
    let mut data = BatchBuilder::new(Compression::Lz4)
        .base_offset(0)
        .producer(PID, 0, 0)
        .transactional(true);
    data.append(1, Some(A), Some(b"aborted"), &[]).unwrap();
    data.append(2, Some(B), Some(b"aborted"), &[]).unwrap();
    let data = data.build().unwrap();
    let abort = BatchBuilder::end_txn_marker(ControlRecordType::Abort, PID, 0, 2, 3)
        .unwrap()
        .base_offset(2)
        .build()
        .unwrap();
    let mut live = BatchBuilder::new(Compression::None).base_offset(3);
    live.append(4, Some(C), Some(b"live"), &[]).unwrap();
    let live = live.build().unwrap();
    let txn = AbortedTxn::new(PID, 0, 2, 0);
    let run = |now: i64, log: &[&[u8]]| {
        let mut pass = Pass::new(&[(C, 3)]);
        pass.now_ms = now;
        pass.txn.add_aborted_transactions(&[txn]);
        let mut out = Vec::new();
        let outcomes: Vec<_> = log
            .iter()
            .map(|b| pass.try_filter(b, &mut out).unwrap())
            .collect();
        (
            outcomes,
            out,
            pass.txn.take_retained_aborted_transactions(),
            pass.stats,
        )
    };

    let (outcomes, first, retained, stats) = run(NOW, &[&data, &abort, &live]);
    use BatchOutcome::*;
    assert_eq!(outcomes, vec![Dropped, Whole, Whole]);
    assert_eq!(
        retained,
        vec![txn],
        "the kept ABORT's entry for the cleaned .txnindex"
    );
    assert_eq!(stats.aborted_removed, 2);
    assert_eq!(first, [&abort[..], &live[..]].concat());

    let (outcomes, second, retained, _) = run(NOW, &[&abort, &live]);
    assert_eq!(outcomes, vec![Rebuilt, Whole]);
    assert!(
        retained.is_empty(),
        "no data of it left: no .txnindex entry"
    );
    let marker = view(&second);
    assert_eq!(marker.delete_horizon_ms(), Some(NOW + RETENTION));
    assert!(marker.is_control() && marker.records_count() == 1);
    let second_marker = second[..marker.size_in_bytes()].to_vec();

    let (outcomes, _, _, _) = run(NOW + RETENTION - 1, &[&second_marker]);
    assert_eq!(outcomes, vec![Whole], "kept until its horizon");
    let (outcomes, third, _, stats) = run(NOW + RETENTION, &[&second_marker, &live]);
    assert_eq!(outcomes, vec![Dropped, Whole]);
    assert_eq!(third, live);
    assert_eq!(stats.markers_removed, 1);
}
