//! Kafka's LogValidator on the leader append path: every hostile batch shape a producer (or the
//! coordinator) can send is refused with the error name Kafka returns, and a refused append writes
//! nothing (log end offset, files, producer state). Batches are hand-made byte by byte, with a valid
//! CRC-32C, so only the check under test can refuse them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::clock::ManualClock;
use klog_log::config::LogConfig;
use klog_log::format::varint::{write_varint, write_varlong};
use klog_log::format::{crc32c, BatchBuilder, Compression, RecordBatch};
use klog_log::io::{StdStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::validator::AppendOrigin;
use klog_log::KafkaError;

/// The broker's clock in these tests (2026-11-29).
const NOW: i64 = 1_796_000_000_000;
const PRODUCER_ID: i64 = 7;

/// One record's fields, any of which may be out of range.
#[derive(Clone)]
struct Rec {
    timestamp_delta: i64,
    offset_delta: i32,
    key_len: i32,
    key: Vec<u8>,
    value_len: i32,
    value: Vec<u8>,
    header_count: i32,
    /// Encoded headers, written after the count as they are.
    headers: Vec<u8>,
    /// Bytes inside the body after the headers (the body is then longer than its fields).
    extra: Vec<u8>,
    /// Added to the length varint (the body is then declared longer or shorter than it is).
    length_adjust: i32,
}

impl Rec {
    fn new(i: i32) -> Self {
        Rec {
            timestamp_delta: i as i64,
            offset_delta: i,
            key_len: 1,
            key: b"k".to_vec(),
            value_len: 10,
            value: vec![b'v'; 10],
            header_count: 0,
            headers: Vec::new(),
            extra: Vec::new(),
            length_adjust: 0,
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let mut body = vec![0u8];
        write_varlong(&mut body, self.timestamp_delta);
        write_varint(&mut body, self.offset_delta);
        write_varint(&mut body, self.key_len);
        body.extend_from_slice(&self.key);
        write_varint(&mut body, self.value_len);
        body.extend_from_slice(&self.value);
        write_varint(&mut body, self.header_count);
        body.extend_from_slice(&self.headers);
        body.extend_from_slice(&self.extra);
        write_varint(out, body.len() as i32 + self.length_adjust);
        out.extend_from_slice(&body);
    }
}

/// The header fields of a hand-made batch.
#[derive(Clone)]
struct Shape {
    records_count: i32,
    last_offset_delta: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    attributes: i16,
    producer_id: i64,
    base_sequence: i32,
}

impl Shape {
    fn for_records(n: usize) -> Self {
        Shape {
            records_count: n as i32,
            last_offset_delta: n as i32 - 1,
            base_timestamp: NOW,
            max_timestamp: NOW + n as i64 - 1,
            attributes: 0,
            producer_id: PRODUCER_ID,
            // The fixture's first batch holds sequences 0..=2: the next one, so only the check under
            // test can refuse it (not a duplicate).
            base_sequence: 3,
        }
    }
}

fn records(recs: &[Rec]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in recs {
        r.encode(&mut out);
    }
    out
}

/// A v2 batch around `payload` (already compressed if the attributes say so), CRC-32C computed.
fn batch(shape: &Shape, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 61];
    b[8..12].copy_from_slice(&((49 + payload.len()) as i32).to_be_bytes());
    b[12..16].copy_from_slice(&(-1i32).to_be_bytes());
    b[16] = 2;
    b[21..23].copy_from_slice(&shape.attributes.to_be_bytes());
    b[23..27].copy_from_slice(&shape.last_offset_delta.to_be_bytes());
    b[27..35].copy_from_slice(&shape.base_timestamp.to_be_bytes());
    b[35..43].copy_from_slice(&shape.max_timestamp.to_be_bytes());
    b[43..51].copy_from_slice(&shape.producer_id.to_be_bytes());
    b[51..53].copy_from_slice(&0i16.to_be_bytes());
    b[53..57].copy_from_slice(&shape.base_sequence.to_be_bytes());
    b[57..61].copy_from_slice(&shape.records_count.to_be_bytes());
    b.extend_from_slice(payload);
    let crc = crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

fn good(n: usize) -> Vec<Rec> {
    (0..n as i32).map(Rec::new).collect()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("validator")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A log on disk that already holds one good producer batch (offsets 0..=2, sequences 0..=2).
struct Fixture {
    log: PartitionLog,
    dir: PathBuf,
    clock: Arc<ManualClock>,
}

impl Fixture {
    fn new(name: &str, config: LogConfig) -> Self {
        let dir = temp_dir(name).join("t-0");
        let storage: Arc<dyn Storage> = Arc::new(StdStorage);
        let clock = Arc::new(ManualClock::new(NOW));
        let (log, _) = PartitionLog::open_with_clock(
            storage,
            &dir,
            config,
            OpenOptions::default(),
            clock.clone(),
        )
        .unwrap();
        let mut shape = Shape::for_records(3);
        shape.base_sequence = 0;
        let mut first = batch(&shape, &records(&good(3)));
        log.append_as_leader(&mut first, 0).unwrap();
        Fixture { log, dir, clock }
    }

    /// Everything a refused append must leave as it was.
    fn state(&self) -> (i64, String, BTreeMap<String, Vec<u8>>) {
        let mut files = BTreeMap::new();
        for entry in std::fs::read_dir(&self.dir).unwrap() {
            let path = entry.unwrap().path();
            files.insert(
                path.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&path).unwrap(),
            );
        }
        let producers = format!("{:?}", self.log.producers());
        (self.log.log_end_offset(), producers, files)
    }

    fn refuse(&self, bytes: Vec<u8>, origin: AppendOrigin, expected: KafkaError) -> String {
        let before = self.state();
        let mut bytes = bytes;
        let err = self
            .log
            .append_as_leader_with_origin(&mut bytes, 0, origin)
            .expect_err("a hostile batch must be refused");
        assert_eq!(err.kafka_error(), expected, "{err}");
        assert_eq!(
            self.state(),
            before,
            "a refused append wrote something: {err}"
        );
        err.to_string()
    }
}

/// Appends `bytes` as a producer to a fresh log and expects `expected`, with nothing written.
fn assert_refused(name: &str, bytes: Vec<u8>, expected: KafkaError) -> String {
    Fixture::new(name, LogConfig::default()).refuse(bytes, AppendOrigin::Client, expected)
}

#[test]
fn well_formed_batches_are_still_accepted() {
    let f = Fixture::new("accepted", LogConfig::default());
    let shape = Shape::for_records(140);
    let mut b = batch(&shape, &records(&good(140)));
    let info = f.log.append_as_leader(&mut b, 0).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (3, 142));
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let mut b = BatchBuilder::new(codec);
        for i in 0..5 {
            b.append(NOW + i, Some(b"k"), Some(b"value"), &[]).unwrap();
        }
        let mut bytes = b.build().unwrap();
        assert!(!f.log.append_as_leader(&mut bytes, 0).unwrap().duplicate);
    }
    assert_eq!(f.log.log_end_offset(), 163);
}

#[test]
fn a_record_count_above_the_records_present_is_invalid_record() {
    let mut shape = Shape::for_records(3);
    shape.records_count = 4;
    shape.last_offset_delta = 3;
    let msg = assert_refused(
        "count-above",
        batch(&shape, &records(&good(3))),
        KafkaError::InvalidRecord,
    );
    assert!(msg.contains("declared 4 records but found 3"), "{msg}");
}

#[test]
fn a_record_count_below_the_records_present_is_invalid_record() {
    let mut shape = Shape::for_records(3);
    shape.records_count = 2;
    shape.last_offset_delta = 1;
    let msg = assert_refused(
        "count-below",
        batch(&shape, &records(&good(3))),
        KafkaError::InvalidRecord,
    );
    assert!(
        msg.contains("remain after the last declared record"),
        "{msg}"
    );
}

#[test]
fn trailing_bytes_after_the_last_record_are_invalid_record() {
    let mut payload = records(&good(3));
    payload.extend_from_slice(&[0, 0, 0]);
    assert_refused(
        "trailing",
        batch(&Shape::for_records(3), &payload),
        KafkaError::InvalidRecord,
    );
}

#[test]
fn an_empty_batch_and_a_count_that_disagrees_with_the_offsets_are_invalid_record() {
    let mut shape = Shape::for_records(1);
    shape.records_count = 0;
    shape.last_offset_delta = -1;
    assert_refused("empty", batch(&shape, &[]), KafkaError::InvalidRecord);
    let mut shape = Shape::for_records(3);
    shape.last_offset_delta = 5;
    assert_refused(
        "lod-mismatch",
        batch(&shape, &records(&good(3))),
        KafkaError::InvalidRecord,
    );
}

#[test]
fn offset_deltas_out_of_order_are_invalid_record() {
    let mut recs = good(3);
    recs[1].offset_delta = 2;
    recs[2].offset_delta = 1;
    let msg = assert_refused(
        "offset-deltas",
        batch(&Shape::for_records(3), &records(&recs)),
        KafkaError::InvalidRecord,
    );
    assert!(msg.contains("offset delta"), "{msg}");
}

#[test]
fn a_key_length_below_minus_one_is_invalid_record() {
    let mut recs = good(3);
    recs[1].key_len = -5;
    recs[1].key.clear();
    let msg = assert_refused(
        "key-length",
        batch(&Shape::for_records(3), &records(&recs)),
        KafkaError::InvalidRecord,
    );
    assert!(
        msg.contains("record 1") && msg.contains("key length -5"),
        "{msg}"
    );
}

#[test]
fn a_value_length_below_minus_one_or_past_the_body_is_invalid_record() {
    let mut recs = good(2);
    recs[0].value_len = -2;
    recs[0].value.clear();
    assert_refused(
        "value-negative",
        batch(&Shape::for_records(2), &records(&recs)),
        KafkaError::InvalidRecord,
    );
    let mut recs = good(2);
    recs[1].value_len = 1000;
    assert_refused(
        "value-past-end",
        batch(&Shape::for_records(2), &records(&recs)),
        KafkaError::InvalidRecord,
    );
}

#[test]
fn a_huge_or_negative_header_count_is_invalid_record() {
    let mut recs = good(2);
    recs[1].header_count = 1_000_000_000;
    let msg = assert_refused(
        "header-count-huge",
        batch(&Shape::for_records(2), &records(&recs)),
        KafkaError::InvalidRecord,
    );
    assert!(msg.contains("header count 1000000000"), "{msg}");
    let mut recs = good(2);
    recs[0].header_count = -1;
    assert_refused(
        "header-count-negative",
        batch(&Shape::for_records(2), &records(&recs)),
        KafkaError::InvalidRecord,
    );
}

#[test]
fn a_negative_header_key_length_or_bad_header_value_length_is_invalid_record() {
    let mut header = Vec::new();
    write_varint(&mut header, -1);
    write_varint(&mut header, 1);
    header.push(b'x');
    let mut recs = good(2);
    recs[0].header_count = 1;
    recs[0].headers = header;
    assert_refused(
        "header-key-null",
        batch(&Shape::for_records(2), &records(&recs)),
        KafkaError::InvalidRecord,
    );
    let mut header = Vec::new();
    write_varint(&mut header, 1);
    header.push(b'h');
    write_varint(&mut header, -3);
    let mut recs = good(2);
    recs[1].header_count = 1;
    recs[1].headers = header;
    assert_refused(
        "header-value-negative",
        batch(&Shape::for_records(2), &records(&recs)),
        KafkaError::InvalidRecord,
    );
}

#[test]
fn a_body_that_differs_from_its_declared_length_is_invalid_record() {
    let mut recs = good(3);
    recs[1].extra = vec![0, 0];
    assert_refused(
        "body-longer",
        batch(&Shape::for_records(3), &records(&recs)),
        KafkaError::InvalidRecord,
    );
    let mut recs = good(3);
    recs[2].length_adjust = 40;
    assert_refused(
        "length-past-end",
        batch(&Shape::for_records(3), &records(&recs)),
        KafkaError::InvalidRecord,
    );
    let mut recs = good(3);
    recs[0].length_adjust = -3;
    assert_refused(
        "length-short",
        batch(&Shape::for_records(3), &records(&recs)),
        KafkaError::InvalidRecord,
    );
}

#[test]
fn an_overlong_varint_is_invalid_record() {
    let mut payload = records(&good(1));
    // The record length as a 6-byte varint.
    let mut bad = vec![0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
    bad.extend_from_slice(&payload.split_off(1));
    assert_refused(
        "varint",
        batch(&Shape::for_records(1), &bad),
        KafkaError::InvalidRecord,
    );
}

#[test]
fn compressed_batches_are_walked_after_inflating() {
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let mut shape = Shape::for_records(3);
        shape.records_count = 5;
        shape.last_offset_delta = 4;
        shape.attributes = codec.id() as i16;
        let mut payload = Vec::new();
        codec.compress(&records(&good(3)), &mut payload);
        assert_refused(
            &format!("compressed-count-{codec}"),
            batch(&shape, &payload),
            KafkaError::InvalidRecord,
        );
        let mut recs = good(3);
        recs[2].key_len = -7;
        recs[2].key.clear();
        let mut payload = Vec::new();
        codec.compress(&records(&recs), &mut payload);
        shape = Shape::for_records(3);
        shape.attributes = codec.id() as i16;
        assert_refused(
            &format!("compressed-key-{codec}"),
            batch(&shape, &payload),
            KafkaError::InvalidRecord,
        );
    }
}

#[test]
fn a_codec_stream_that_does_not_inflate_is_corrupt_message() {
    let mut shape = Shape::for_records(3);
    shape.attributes = Compression::Gzip.id() as i16;
    assert_refused(
        "bad-gzip",
        batch(&shape, b"\x1f\x8b\x08\x00garbage garbage"),
        KafkaError::CorruptMessage,
    );
}

/// `members` gzip members of 1 MiB of zeros each, concatenated (Kafka's `GZIPInputStream` and klog's
/// reader both read a multi-member stream): a bomb of `members` MiB built without compressing it all.
fn gzip_bomb(members: usize) -> Vec<u8> {
    let mut member = Vec::new();
    Compression::Gzip.compress(&vec![0u8; 1 << 20], &mut member);
    member.repeat(members)
}

/// A gzip batch of about 70 KB that inflates to 64 MiB (well past 64 x the 100 KB max.message.bytes)
/// is refused while inflating, naming the limit.
#[test]
fn a_compression_bomb_is_message_too_large() {
    let mut config = LogConfig::default();
    config.set("max.message.bytes", "100000").unwrap();
    let f = Fixture::new("bomb", config);
    let mut shape = Shape::for_records(1);
    shape.attributes = Compression::Gzip.id() as i16;
    let payload = gzip_bomb(64);
    assert!(payload.len() < 100_000, "{}", payload.len());
    let msg = f.refuse(
        batch(&shape, &payload),
        AppendOrigin::Client,
        KafkaError::MessageTooLarge,
    );
    assert!(msg.contains("6400000 bytes"), "the limit is named: {msg}");
    // Snappy compresses at most ~21x, so its bomb is a raw stream declaring 1 GiB in its preamble:
    // refused on the declared size, before anything is allocated.
    let mut shape = Shape::for_records(1);
    shape.attributes = Compression::Snappy.id() as i16;
    let mut declared_gib = Vec::new();
    write_varint(&mut declared_gib, 1 << 29); // zigzag: an unsigned varint of 1 GiB
    declared_gib.extend_from_slice(&[0u8; 64]);
    f.refuse(
        batch(&shape, &declared_gib),
        AppendOrigin::Client,
        KafkaError::MessageTooLarge,
    );
    // The other codecs stop at the same limit (8 MiB of zeros: a few KB compressed).
    for codec in [Compression::Lz4, Compression::Zstd] {
        let mut shape = Shape::for_records(1);
        shape.attributes = codec.id() as i16;
        let mut payload = Vec::new();
        codec.compress(&vec![0u8; 8 << 20], &mut payload);
        assert!(payload.len() < 100_000 - 61, "{codec}: {}", payload.len());
        f.refuse(
            batch(&shape, &payload),
            AppendOrigin::Client,
            KafkaError::MessageTooLarge,
        );
    }
}

#[test]
fn more_than_one_batch_from_a_producer_is_invalid_record() {
    let mut two = batch(&Shape::for_records(2), &records(&good(2)));
    let mut second = Shape::for_records(2);
    second.base_sequence = 5;
    two.extend_from_slice(&batch(&second, &records(&good(2))));
    assert_refused("two-batches", two, KafkaError::InvalidRecord);
}

#[test]
fn control_batches_are_refused_from_a_producer_and_walked_from_the_coordinator() {
    let f = Fixture::new("control", LogConfig::default());
    let marker = || {
        BatchBuilder::end_txn_marker(
            klog_log::format::ControlRecordType::Abort,
            PRODUCER_ID,
            0,
            0,
            NOW,
        )
        .unwrap()
        .build()
        .unwrap()
    };
    let msg = f.refuse(marker(), AppendOrigin::Client, KafkaError::InvalidRecord);
    assert!(msg.contains("control"), "{msg}");
    // The coordinator's own marker with a record count it does not hold.
    let mut bad = marker();
    bad[57..61].copy_from_slice(&2i32.to_be_bytes());
    bad[23..27].copy_from_slice(&1i32.to_be_bytes());
    let crc = crc32c(&bad[21..]);
    bad[17..21].copy_from_slice(&crc.to_be_bytes());
    f.refuse(bad, AppendOrigin::Coordinator, KafkaError::InvalidRecord);
    let mut good_marker = marker();
    f.log
        .append_as_leader_with_origin(&mut good_marker, 0, AppendOrigin::Coordinator)
        .unwrap();
}

#[test]
fn a_producer_id_without_a_sequence_is_invalid_record() {
    let mut shape = Shape::for_records(2);
    shape.base_sequence = -1;
    assert_refused(
        "no-sequence",
        batch(&shape, &records(&good(2))),
        KafkaError::InvalidRecord,
    );
}

#[test]
fn the_timestamp_defaults_are_kafka_4s() {
    let c = LogConfig::default();
    assert_eq!(c.message_timestamp_after_max_ms, 3_600_000, "one hour");
    assert_eq!(c.message_timestamp_before_max_ms, i64::MAX, "unbounded");
}

/// `n` records from `ahead_ms` after NOW, sequences from `base_sequence`.
fn shifted(ahead_ms: i64, n: usize, base_sequence: i32) -> Vec<u8> {
    let mut shape = Shape::for_records(n);
    shape.base_sequence = base_sequence;
    shape.base_timestamp = NOW + ahead_ms;
    shape.max_timestamp = NOW + ahead_ms + n as i64 - 1;
    batch(&shape, &records(&good(n)))
}

#[test]
fn a_create_time_a_century_ahead_is_invalid_timestamp_by_default() {
    let century = 100 * 365 * 24 * 3_600_000i64;
    let msg = assert_refused(
        "century",
        shifted(century, 2, 3),
        KafkaError::InvalidTimestamp,
    );
    assert!(
        msg.contains("record 1"),
        "the latest record is named: {msg}"
    );
    assert_refused(
        "two-hours",
        shifted(2 * 3_600_000, 2, 3),
        KafkaError::InvalidTimestamp,
    );
    let f = Fixture::new("within-an-hour", LogConfig::default());
    let mut b = shifted(30 * 60_000, 2, 3);
    assert!(!f.log.append_as_leader(&mut b, 0).unwrap().duplicate);
    // Long ago is fine by default (before.max.ms is unbounded), refused once it is set.
    let mut old = shifted(-10 * century / 100, 2, 5);
    assert!(!f.log.append_as_leader(&mut old, 0).unwrap().duplicate);
    // The range follows the broker's clock: two hours ahead of NOW is fine three hours later.
    f.clock.advance(3 * 3_600_000);
    let mut later = shifted(2 * 3_600_000, 2, 7);
    assert!(!f.log.append_as_leader(&mut later, 0).unwrap().duplicate);
}

#[test]
fn every_record_timestamp_is_checked_not_only_the_batch_maximum() {
    let mut recs = good(3);
    recs[2].timestamp_delta = 10 * 3_600_000;
    // The header claims a harmless maximum; the third record is ten hours ahead.
    let msg = assert_refused(
        "record-ts",
        batch(&Shape::for_records(3), &records(&recs)),
        KafkaError::InvalidTimestamp,
    );
    assert!(msg.contains("record 2"), "{msg}");
}

#[test]
fn before_max_ms_refuses_old_records_and_log_append_time_ignores_both() {
    let mut config = LogConfig::default();
    config
        .set("message.timestamp.before.max.ms", "60000")
        .unwrap();
    let f = Fixture::new("before-max", config.clone());
    f.refuse(
        shifted(-120_000, 2, 3),
        AppendOrigin::Client,
        KafkaError::InvalidTimestamp,
    );
    config
        .set("message.timestamp.type", "LogAppendTime")
        .unwrap();
    let f = Fixture::new("log-append-time", config);
    let mut b = shifted(100 * 365 * 24 * 3_600_000, 2, 3);
    assert!(!f.log.append_as_leader(&mut b, 0).unwrap().duplicate);
}

/// Kafka's follower does not validate records, and neither does klog's: a follower or mirror keeps the
/// leader's bytes. A batch with records missing therefore reaches the log; reading it back gives the
/// batch, and walking its records gives an error naming the batch and the check, never a panic.
#[test]
fn a_malformed_follower_batch_is_kept_and_reads_back_with_a_clear_error() {
    let f = Fixture::new("follower", LogConfig::default());
    let mut shape = Shape::for_records(3);
    shape.records_count = 4;
    shape.last_offset_delta = 3;
    let mut bytes = batch(&shape, &records(&good(3)));
    bytes[..8].copy_from_slice(&3i64.to_be_bytes());
    f.log.append_as_follower(&bytes).unwrap();
    f.log.update_high_watermark(f.log.log_end_offset());
    let read = f.log.read(3, 1 << 20, None, false).unwrap();
    let (b, _) = RecordBatch::parse(read.records.as_slice(), 0).unwrap();
    let mut scratch = Vec::new();
    let results: Vec<_> = b.records(&mut scratch).unwrap().collect();
    let err = results.last().unwrap().as_ref().unwrap_err().to_string();
    assert!(err.contains("declared 4 records but found 3"), "{err}");
}

/// Kafka's in-place validation sets a CreateTime batch's max timestamp to its records' maximum
/// (`setMaxTimestamp(CREATE_TIME, maxBatchTimestamp)`, CRC recomputed): a producer's wrong header cannot
/// reach the time index.
#[test]
fn the_max_timestamp_is_set_to_the_records_maximum() {
    let f = Fixture::new("max-timestamp", LogConfig::default());
    for (claimed, base_sequence) in [(NOW + 10 * 3_600_000, 3), (NOW - 5_000, 6)] {
        let mut shape = Shape::for_records(3);
        shape.max_timestamp = claimed;
        shape.base_sequence = base_sequence;
        let mut recs = good(3);
        recs[1].timestamp_delta = 30 * 60_000;
        let mut bytes = batch(&shape, &records(&recs));
        let info = f.log.append_as_leader(&mut bytes, 0).unwrap();
        assert!(!info.duplicate);
        f.log.update_high_watermark(f.log.log_end_offset());
        let read = f.log.read(info.first_offset, 1 << 20, None, false).unwrap();
        let (stored, _) = RecordBatch::parse(read.records.as_slice(), 0).expect("CRC still valid");
        assert_eq!(
            stored.max_timestamp(),
            NOW + 30 * 60_000,
            "claimed {claimed}"
        );
    }
    assert_eq!(
        f.log.offset_for_timestamp(NOW + 3_600_000).unwrap(),
        None,
        "no batch claims a time ten hours ahead"
    );
}

/// Kafka checks a batch's CRC before it reads a record (`UnifiedLog.analyzeAndValidateRecords` calls
/// `ensureValid` before `LogValidator` iterates): a batch that fails its CRC is CORRUPT_MESSAGE whatever
/// else is wrong with it. (Guards any reordering of the two for speed: walking first was measured, on
/// branch `append-100b`, and did not pay.)
#[test]
fn a_batch_failing_its_crc_is_corrupt_message_even_if_its_records_are_malformed() {
    let mut shape = Shape::for_records(3);
    shape.base_sequence = 3;
    let mut trailing = records(&good(3));
    trailing.extend_from_slice(&[0, 0, 0]);
    let mut short = good(3);
    short[1].length_adjust = 1;
    let cases = [
        ("crc-good-records", records(&good(3))),
        ("crc-trailing", trailing),
        ("crc-short-body", records(&short)),
    ];
    for (name, payload) in cases {
        let mut bytes = batch(&shape, &payload);
        bytes[17] ^= 0x01;
        let msg = assert_refused(name, bytes, KafkaError::CorruptMessage);
        assert!(msg.contains("crc mismatch"), "{name}: {msg}");
    }
}

/// A magic 0 message (a pre-0.10 producer's) with a wrong CRC-32 is CORRUPT_MESSAGE, as before the
/// format check refuses it for a leader.
#[test]
fn a_legacy_message_failing_its_crc_is_corrupt_message() {
    let value = b"old producer";
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&0i64.to_be_bytes());
    bytes.extend_from_slice(&(14 + value.len() as i32).to_be_bytes());
    bytes.extend_from_slice(&0u32.to_be_bytes()); // not the CRC-32 of what follows
    bytes.extend_from_slice(&[0, 0]); // magic 0, attributes
    bytes.extend_from_slice(&(-1i32).to_be_bytes());
    bytes.extend_from_slice(&(value.len() as i32).to_be_bytes());
    bytes.extend_from_slice(value);
    let msg = assert_refused("crc-legacy", bytes, KafkaError::CorruptMessage);
    assert!(msg.contains("crc mismatch"), "{msg}");
}
