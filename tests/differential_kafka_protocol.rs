//! Differential test of klog's v2 batch reader and writer against an independent implementation, the
//! `kafka-protocol` crate (tychedelia/kafka-protocol-rs 0.18, `kafka_protocol::records`).
//!
//! 1. Fixtures: every `.bin` under `fixtures/batches/` and every `.log` under `fixtures/kafka-segments/*/*/`
//!    (and under `../shared/fixtures/` when it is beside the checkout), decoded by both sides and compared
//!    batch by batch and record by record, with exact expected counts (the manifest's for `fixtures/`).
//! 2. klog's `BatchBuilder` → both decoders (random batches, every codec).
//! 3. kafka-protocol's `RecordBatchEncoder` → klog's decoder (random records, every codec), including klog's CRC
//!    check and a byte-for-byte comparison with what `BatchBuilder` writes for the same records.
//!
//! What kafka-protocol 0.18 exposes, and where it departs from Kafka (`../shared/spec/kafka-storage.md` §1):
//!
//! * Per record (`records::Record`): offset, timestamp, sequence, key, value, headers, and the batch's
//!   transactional / control / delete-horizon flags, partition leader epoch, producer id and epoch, timestamp
//!   type. Per batch (`RecordSet`): compression and magic. `decode_batch_info` adds the raw header fields record
//!   count, base offset (`min_offset`), base timestamp (`min_timestamp`) and base sequence. It exposes neither
//!   `maxTimestamp`, `lastOffsetDelta`, the CRC, nor the record attributes byte.
//! * **Headers are an `IndexMap<StrBytes, Option<Bytes>>`.** Repeated keys, which Kafka allows (headers are a
//!   list), collapse: `IndexMap::insert` keeps the first position and the last value. Header keys must be UTF-8
//!   or the whole batch fails to decode (Java decodes them leniently). We compare klog's header *list* against that
//!   collapse of it, which is exact list equality whenever keys are unique (all fixtures, all random batches).
//! * **LogAppendTime is wrong on read:** kafka-protocol reports `baseTimestamp + timestampDelta` for every record,
//!   while Kafka reports the batch's `maxTimestamp` (`RecordIterator`, spec §1.3). klog does what Kafka does.
//!   So for LogAppendTime batches kafka-protocol's timestamp is checked against klog's raw `timestamp_delta`,
//!   and klog's timestamp against `maxTimestamp`.
//! * **LogAppendTime is lost on write:** `RecordBatchEncoder` never sets attribute bit 3, whatever the records'
//!   `timestamp_type`; encoded batches are always CreateTime.
//! * **Sequences are wrong on read in two cases:** kafka-protocol computes `baseSequence.wrapping_add(delta)`.
//!   Kafka (spec §1.1, `DefaultRecord.readFrom`) gives -1 when `baseSequence < 0`, and wraps from
//!   `i32::MAX` to 0, not to `i32::MIN`. So record sequences are compared against Kafka's rule (written out
//!   independently below) on klog's side, against kafka-protocol's rule on its side, and against each other
//!   where the two rules coincide (base >= 0, no wrap). The raw base sequence is compared in every batch.
//! * Legacy v0/v1 message sets are refused ("message sets v{n} are unsupported"); control batches are decoded
//!   as ordinary records with `control = true` (their key and value raw).
//! * Codecs: the default features enable all four (gzip flate2, snappy with xerial framing and a raw fallback,
//!   lz4 through liblz4 with block and content checksums on write, zstd), so every codec is exercised both ways.

mod common;

use std::cell::Cell;
use std::path::{Path, PathBuf};

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    self as kp, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
};
use klog::log::format::{
    AnyBatch, BatchBuilder, Batches, Compression, ControlRecordType, ControlValue, Header, Record,
    RecordBatch, Tail, TimestampType,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

// ---------------------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------------------

/// Kafka's record sequence (`DefaultRecord.readFrom` with `DefaultRecordBatch.incrementSequence`, spec §1.1):
/// `incrementSequence(baseSequence, offsetDelta)` when `baseSequence >= 0`, otherwise -1. Written out here so
/// that the reference shares no code with klog.
fn kafka_record_sequence(base_sequence: i32, offset_delta: i32) -> i32 {
    if base_sequence < 0 {
        -1
    } else if base_sequence > i32::MAX - offset_delta {
        offset_delta - (i32::MAX - base_sequence) - 1
    } else {
        base_sequence + offset_delta
    }
}

fn to_kp_compression(c: Compression) -> kp::Compression {
    match c {
        Compression::None => kp::Compression::None,
        Compression::Gzip => kp::Compression::Gzip,
        Compression::Snappy => kp::Compression::Snappy,
        Compression::Lz4 => kp::Compression::Lz4,
        Compression::Zstd => kp::Compression::Zstd,
    }
}

fn to_klog_timestamp_type(t: kp::TimestampType) -> TimestampType {
    match t {
        kp::TimestampType::Creation => TimestampType::CreateTime,
        kp::TimestampType::LogAppend => TimestampType::LogAppendTime,
    }
}

type HeaderList<'a> = Vec<(&'a [u8], Option<&'a [u8]>)>;

/// What kafka-protocol's header map holds after decoding the header list `list`: `IndexMap::insert` per header,
/// so a repeated key keeps its first position and takes its last value.
fn collapse_like_index_map<'a>(list: &HeaderList<'a>) -> HeaderList<'a> {
    let mut out: HeaderList<'a> = Vec::with_capacity(list.len());
    for &(k, v) in list {
        match out.iter_mut().find(|(ok, _)| *ok == k) {
            Some(slot) => slot.1 = v,
            None => out.push((k, v)),
        }
    }
    out
}

fn kp_headers(map: &IndexMap<StrBytes, Option<Bytes>>) -> HeaderList<'_> {
    map.iter()
        .map(|(k, v)| (k.as_bytes(), v.as_deref()))
        .collect()
}

/// How much one comparison covered.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Compared {
    batches: usize,
    control_batches: usize,
    records: usize,
    headers: usize,
    /// Records whose header list had a repeated key, compared against kafka-protocol's collapsed map.
    records_with_duplicate_header_keys: usize,
    log_append_time_batches: usize,
}

impl std::ops::AddAssign for Compared {
    fn add_assign(&mut self, o: Self) {
        self.batches += o.batches;
        self.control_batches += o.control_batches;
        self.records += o.records;
        self.headers += o.headers;
        self.records_with_duplicate_header_keys += o.records_with_duplicate_header_keys;
        self.log_append_time_batches += o.log_append_time_batches;
    }
}

fn klog_records<'s>(
    batch: &'s RecordBatch<'_>,
    scratch: &'s mut Vec<u8>,
    ctx: &str,
) -> Vec<Record<'s>> {
    batch
        .records(scratch)
        .unwrap_or_else(|e| panic!("{ctx}: klog cannot open the records: {e}"))
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{ctx}: klog cannot read a record: {e}"))
}

/// The uncompressed record stream of a batch, as klog inflates it.
fn plaintext(batch: &RecordBatch<'_>) -> Vec<u8> {
    let mut scratch = Vec::new();
    let n = batch.records(&mut scratch).unwrap().count();
    assert_eq!(n, batch.records_count() as usize);
    if batch.compression().unwrap() == Compression::None {
        batch.records_payload().to_vec()
    } else {
        scratch
    }
}

/// Compares one klog batch with kafka-protocol's decoding of the same bytes: every field both expose.
fn compare_v2(batch: &RecordBatch<'_>, set: &kp::RecordSet, ctx: &str) -> Compared {
    let mut seen = Compared {
        batches: 1,
        ..Compared::default()
    };

    // Batch header, through kafka-protocol's header-only decoder (one batch's bytes, so exactly one info).
    let infos =
        RecordBatchDecoder::decode_batch_info(&mut Bytes::copy_from_slice(batch.as_bytes()))
            .unwrap_or_else(|e| panic!("{ctx}: kafka-protocol decode_batch_info failed: {e:#}"));
    assert_eq!(infos.len(), 1, "{ctx}: one batch");
    let info = &infos[0];
    let codec = batch
        .compression()
        .unwrap_or_else(|e| panic!("{ctx}: klog compression: {e}"));
    assert_eq!(info.version, batch.magic(), "{ctx}: magic");
    assert_eq!(set.version, batch.magic(), "{ctx}: magic (RecordSet)");
    assert_eq!(
        info.compression,
        to_kp_compression(codec),
        "{ctx}: compression"
    );
    assert_eq!(
        set.compression,
        to_kp_compression(codec),
        "{ctx}: compression (RecordSet)"
    );
    assert_eq!(
        info.record_count,
        batch.records_count(),
        "{ctx}: record count"
    );
    assert_eq!(info.min_offset, batch.base_offset(), "{ctx}: base offset");
    assert_eq!(
        info.min_timestamp,
        batch.base_timestamp(),
        "{ctx}: base timestamp"
    );
    assert_eq!(
        info.base_sequence,
        batch.base_sequence(),
        "{ctx}: base sequence"
    );
    assert_eq!(
        info.transactional,
        batch.is_transactional(),
        "{ctx}: transactional"
    );
    assert_eq!(info.control, batch.is_control(), "{ctx}: control");
    assert_eq!(
        info.delete_horizon,
        batch.delete_horizon_ms().is_some(),
        "{ctx}: delete horizon"
    );
    assert_eq!(
        info.partition_leader_epoch,
        batch.partition_leader_epoch(),
        "{ctx}: partition leader epoch"
    );
    assert_eq!(info.producer_id, batch.producer_id(), "{ctx}: producer id");
    assert_eq!(
        info.producer_epoch,
        batch.producer_epoch(),
        "{ctx}: producer epoch"
    );
    assert_eq!(
        to_klog_timestamp_type(info.timestamp_type),
        batch.timestamp_type(),
        "{ctx}: timestamp type"
    );
    if batch.timestamp_type() == TimestampType::LogAppendTime {
        seen.log_append_time_batches = 1;
    }

    // Records.
    let mut scratch = Vec::new();
    let ours = klog_records(batch, &mut scratch, ctx);
    assert_eq!(
        ours.len(),
        batch.records_count() as usize,
        "{ctx}: klog record count"
    );
    assert_eq!(
        set.records.len(),
        ours.len(),
        "{ctx}: record count (kafka-protocol vs klog)"
    );
    let base_seq = batch.base_sequence();
    for (i, (k, p)) in ours.iter().zip(&set.records).enumerate() {
        let ctx = format!("{ctx}, record {i} (offset {})", k.offset);
        let ctx = ctx.as_str();
        assert_eq!(p.offset, k.offset, "{ctx}: offset");
        assert_eq!(
            k.offset,
            batch.base_offset() + k.offset_delta as i64,
            "{ctx}: offset delta"
        );

        // kafka-protocol always reports base + delta; Kafka (and klog) report maxTimestamp under LogAppendTime.
        assert_eq!(
            p.timestamp,
            batch.base_timestamp() + k.timestamp_delta,
            "{ctx}: timestamp delta"
        );
        match batch.timestamp_type() {
            TimestampType::CreateTime => assert_eq!(p.timestamp, k.timestamp, "{ctx}: timestamp"),
            TimestampType::LogAppendTime => {
                assert_eq!(
                    k.timestamp,
                    batch.max_timestamp(),
                    "{ctx}: LogAppendTime timestamp"
                )
            }
        }

        assert_eq!(p.key.as_deref(), k.key, "{ctx}: key");
        assert_eq!(p.value.as_deref(), k.value, "{ctx}: value");

        let ours_h: HeaderList<'_> = k.headers.clone().collect();
        assert_eq!(ours_h.len(), k.headers.len(), "{ctx}: header count");
        let collapsed = collapse_like_index_map(&ours_h);
        assert_eq!(kp_headers(&p.headers), collapsed, "{ctx}: headers");
        if collapsed.len() != ours_h.len() {
            seen.records_with_duplicate_header_keys += 1;
        }
        seen.headers += ours_h.len();

        // Batch-level fields kafka-protocol repeats on every record.
        assert_eq!(p.producer_id, batch.producer_id(), "{ctx}: producer id");
        assert_eq!(
            p.producer_epoch,
            batch.producer_epoch(),
            "{ctx}: producer epoch"
        );
        assert_eq!(
            p.transactional,
            batch.is_transactional(),
            "{ctx}: transactional"
        );
        assert_eq!(p.control, batch.is_control(), "{ctx}: control");
        assert_eq!(
            p.delete_horizon,
            batch.delete_horizon_ms().is_some(),
            "{ctx}: delete horizon"
        );
        assert_eq!(
            p.partition_leader_epoch,
            batch.partition_leader_epoch(),
            "{ctx}: leader epoch"
        );
        assert_eq!(
            to_klog_timestamp_type(p.timestamp_type),
            batch.timestamp_type(),
            "{ctx}: timestamp type"
        );

        // Sequences: Kafka's rule for klog, kafka-protocol's own rule for it, equality where they coincide.
        let delta = k.offset_delta;
        assert_eq!(
            k.sequence,
            kafka_record_sequence(base_seq, delta),
            "{ctx}: klog sequence vs Kafka's rule"
        );
        assert_eq!(
            p.sequence,
            base_seq.wrapping_add(delta),
            "{ctx}: kafka-protocol sequence rule"
        );
        if base_seq >= 0 && base_seq.checked_add(delta).is_some() {
            assert_eq!(p.sequence, k.sequence, "{ctx}: sequence");
        }
    }
    if let Some(last) = ours.last() {
        assert_eq!(
            last.offset_delta,
            batch.last_offset_delta(),
            "{ctx}: last offset delta"
        );
    }
    // kafka-protocol does not expose maxTimestamp; under CreateTime it must be the largest record timestamp.
    if batch.timestamp_type() == TimestampType::CreateTime && !set.records.is_empty() {
        let max = set.records.iter().map(|r| r.timestamp).max().unwrap();
        assert_eq!(
            batch.max_timestamp(),
            max,
            "{ctx}: max timestamp vs kafka-protocol's records"
        );
    }

    // Control batches: kafka-protocol hands back the raw key; klog parses it.
    if batch.is_control() {
        seen.control_batches = 1;
        let control = batch
            .control_record()
            .unwrap_or_else(|e| panic!("{ctx}: klog control record: {e}"))
            .expect("a control batch has a control record");
        let key = set.records[0]
            .key
            .as_ref()
            .expect("control key is not null");
        assert!(key.len() >= 4, "{ctx}: control key length");
        assert_eq!(
            i16::from_be_bytes([key[0], key[1]]),
            control.key_version,
            "{ctx}: control key version"
        );
        assert_eq!(
            i16::from_be_bytes([key[2], key[3]]),
            control.record_type.id(),
            "{ctx}: control type"
        );
        if let ControlValue::EndTxn(m) = control.value {
            let v = set.records[0].value.as_ref().expect("marker value");
            assert_eq!(
                i16::from_be_bytes([v[0], v[1]]),
                m.version,
                "{ctx}: marker version"
            );
            assert_eq!(
                i32::from_be_bytes([v[2], v[3], v[4], v[5]]),
                m.coordinator_epoch,
                "{ctx}: coordinator epoch"
            );
        }
    }
    seen.records = ours.len();
    seen
}

/// Walks `data` with klog's `Batches` and kafka-protocol's sequential decoder side by side.
fn compare_file(data: &[u8], name: &str) -> (Compared, usize) {
    let mut seen = Compared::default();
    let mut legacy = 0;
    let mut kp_buf = Bytes::copy_from_slice(data);
    let mut batches = Batches::new(data);
    for item in batches.by_ref() {
        let batch = item.unwrap_or_else(|e| panic!("{name}: klog: {e}"));
        let ctx = format!("{name}: batch at position {}", batch.position());
        assert_eq!(
            (data.len() - kp_buf.len()) as u64,
            batch.position(),
            "{ctx}: both decoders are at the same position"
        );
        match batch {
            AnyBatch::V2(b) => {
                let set = RecordBatchDecoder::decode(&mut kp_buf)
                    .unwrap_or_else(|e| panic!("{ctx}: kafka-protocol failed: {e:#}"));
                seen += compare_v2(&b, &set, &ctx);
            }
            AnyBatch::Legacy(e) => {
                // kafka-protocol cannot read v0/v1: check that it refuses, then step over the entry.
                let err = RecordBatchDecoder::decode(&mut kp_buf.clone()).unwrap_err();
                assert!(err.to_string().contains("unsupported"), "{ctx}: {err:#}");
                kp_buf.advance(e.size_in_bytes());
                legacy += 1;
            }
        }
    }
    assert_eq!(
        batches.tail(),
        Some(Tail::Clean),
        "{name}: klog ends cleanly"
    );
    assert!(
        kp_buf.is_empty(),
        "{name}: kafka-protocol consumed every byte"
    );
    (seen, legacy)
}

// ---------------------------------------------------------------------------------------------------------
// 1. Fixtures
// ---------------------------------------------------------------------------------------------------------

fn files_with_extension(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == ext))
        .collect();
    v.sort();
    v
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

/// The repository's fixtures: every batch and record as the manifest (from `kafka-dump-log`) counts them.
#[test]
fn fixtures_agree_with_kafka_protocol() {
    let root = common::fixtures();
    let manifest = common::fixture_manifest();
    let entries = manifest["batches"].as_array().unwrap();
    let bins = files_with_extension(&root.join("batches"), "bin");
    assert_eq!(bins.len(), entries.len(), "fixture .bin files: {bins:?}");
    let mut bin_total = Compared::default();
    for m in entries {
        let name = m["file"].as_str().unwrap();
        let (seen, legacy) = compare_file(
            &std::fs::read(root.join("batches").join(name)).unwrap(),
            name,
        );
        assert_eq!(legacy, 0, "{name}");
        assert_eq!(seen.batches, 1, "{name}: one batch per .bin");
        assert_eq!(
            seen.records as u64,
            m["record_count"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            seen.control_batches,
            usize::from(m["is_control"] == true),
            "{name}"
        );
        let headers: usize = m["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["headers"].as_array().unwrap().len())
            .sum();
        assert_eq!(seen.headers, headers, "{name}: headers");
        bin_total += seen;
    }
    assert_eq!(bin_total.records_with_duplicate_header_keys, 0);
    let mut seg_total = Compared::default();
    let mut segments = 0;
    for (copy, partitions) in manifest["partitions"].as_object().unwrap() {
        for (partition, p) in partitions.as_object().unwrap() {
            for seg in p["segments"].as_array().unwrap() {
                let file = seg["file"].as_str().unwrap();
                let name = format!("{copy}/{partition}/{file}");
                let data = std::fs::read(root.join("kafka-segments").join(&name)).unwrap();
                let (seen, legacy) = compare_file(&data, &name);
                assert_eq!(legacy, 0, "{name}: magic 2");
                assert_eq!(
                    seen.batches as u64,
                    seg["batches"].as_u64().unwrap(),
                    "{name}"
                );
                assert_eq!(
                    seen.records as u64,
                    seg["records"].as_u64().unwrap(),
                    "{name}"
                );
                assert_eq!(
                    seen.control_batches as u64,
                    seg["control_batches"].as_u64().unwrap(),
                    "{name}"
                );
                seg_total += seen;
                segments += 1;
            }
        }
    }
    assert_eq!(
        common::fixture_segments(&root).len(),
        segments,
        "the manifest lists every segment"
    );
    assert_eq!(seg_total.records_with_duplicate_header_keys, 0);
    eprintln!("fixtures: .bin {bin_total:?}; segments {seg_total:?}");
}

/// `../shared/fixtures` (third-party captures), when beside the checkout: their README's exact counts.
#[test]
fn shared_fixtures_agree_with_kafka_protocol() {
    let Some(root) = common::shared_fixtures() else {
        return;
    };

    // Single batches: five records each, except the two broker-written control batches (one marker each).
    let bins = files_with_extension(&root.join("batches"), "bin");
    assert_eq!(bins.len(), 13, "fixture .bin files: {bins:?}");
    let mut bin_total = Compared::default();
    for path in &bins {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let data = std::fs::read(path).unwrap();
        let (seen, legacy) = compare_file(&data, &name);
        assert_eq!(legacy, 0, "{name}");
        assert_eq!(seen.batches, 1, "{name}: one batch per .bin");
        let expected = if name.starts_with("control-") { 1 } else { 5 };
        assert_eq!(seen.records, expected, "{name}: records compared");
        assert_eq!(
            seen.control_batches,
            usize::from(name.starts_with("control-")),
            "{name}"
        );
        bin_total += seen;
    }
    assert_eq!(bin_total.batches, 13);
    assert_eq!(bin_total.records, 11 * 5 + 2);
    assert_eq!(bin_total.control_batches, 2);
    // librdkafka idempotent (5 files) and kafka-python (5 files): one header per record; the txn commit has none.
    assert_eq!(bin_total.headers, 10 * 5);
    assert_eq!(bin_total.records_with_duplicate_header_keys, 0);

    // Real segments: (partition directory, batches, records, control batches).
    let expected: [(&str, usize, usize, usize); 4] = [
        ("bheem/cities-0", 11, 11, 0),
        ("nomanazeem/__cluster_metadata-0", 1842, 2067, 1),
        ("nomanazeem/__consumer_offsets-15", 88, 256, 0),
        ("panic08/test-0", 28, 97, 0),
    ];
    let mut logs = Vec::new();
    for owner in subdirs(&root.join("kafka-segments")) {
        for partition in subdirs(&owner) {
            logs.extend(files_with_extension(&partition, "log"));
        }
    }
    assert_eq!(logs.len(), expected.len(), "segment .log files: {logs:?}");
    let mut seg_total = Compared::default();
    for (path, (dir, batches, records, control)) in logs.iter().zip(expected) {
        let rel = path.strip_prefix(root.join("kafka-segments")).unwrap();
        let name = rel.to_string_lossy().into_owned();
        assert!(name.starts_with(dir), "{name} is not under {dir}");
        let data = std::fs::read(path).unwrap();
        let (seen, legacy) = compare_file(&data, &name);
        assert_eq!(legacy, 0, "{name}: all fixture segments are magic 2");
        assert_eq!(seen.batches, batches, "{name}: batches compared");
        assert_eq!(seen.records, records, "{name}: records compared");
        assert_eq!(seen.control_batches, control, "{name}: control batches");
        seg_total += seen;
    }
    assert_eq!(seg_total.records, 2067 + 256 + 97 + 11);
    assert_eq!(seg_total.batches, 1842 + 88 + 28 + 11);
    assert_eq!(seg_total.records_with_duplicate_header_keys, 0);
    eprintln!("fixtures: .bin {bin_total:?}; segments {seg_total:?}");
}

// ---------------------------------------------------------------------------------------------------------
// Random inputs
// ---------------------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct GenRecord {
    /// Offsets skipped before this record (compaction gaps).
    gap: i32,
    /// Timestamp relative to the batch's base, or `None` for -1 (no timestamp).
    ts: Option<i64>,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    /// Unique keys, in generation order.
    headers: Vec<(String, Option<Vec<u8>>)>,
}

fn codec_strategy() -> impl Strategy<Value = Compression> {
    prop::sample::select(Compression::ALL.to_vec())
}

fn payload_strategy() -> impl Strategy<Value = Option<Vec<u8>>> {
    let bytes = prop_oneof![
        6 => prop::collection::vec(any::<u8>(), 0..48),
        3 => "(ab|cd|e|klog ){0,80}".prop_map(String::into_bytes),
        1 => prop::collection::vec(any::<u8>(), 500..3000),
    ];
    prop::option::weighted(0.85, bytes)
}

fn headers_strategy() -> impl Strategy<Value = Vec<(String, Option<Vec<u8>>)>> {
    prop::collection::vec(
        (
            prop_oneof!["[a-z]{0,4}", "\\PC{0,6}"],
            prop::option::of(prop::collection::vec(any::<u8>(), 0..12)),
        ),
        0..5,
    )
    .prop_map(|hs| {
        let mut out: Vec<(String, Option<Vec<u8>>)> = Vec::new();
        for (k, v) in hs {
            if !out.iter().any(|(ok, _)| *ok == k) {
                out.push((k, v));
            }
        }
        out
    })
}

fn record_strategy() -> impl Strategy<Value = GenRecord> {
    (
        prop_oneof![4 => Just(0i32), 1 => 1i32..4],
        prop_oneof![19 => (-50_000i64..200_000).prop_map(Some), 1 => Just(None)],
        payload_strategy(),
        payload_strategy(),
        headers_strategy(),
    )
        .prop_map(|(gap, ts, key, value, headers)| GenRecord {
            gap,
            ts,
            key,
            value,
            headers,
        })
}

/// (producer id, epoch, base sequence): none; the group coordinator's pid -1 with sequence >= 0; or a producer
/// whose base sequence is often close enough to `i32::MAX` to wrap inside the batch.
fn producer_strategy() -> impl Strategy<Value = (i64, i16, i32)> {
    let sequence = prop_oneof![
        2 => 0i32..1000,
        2 => (i32::MAX - 15)..=i32::MAX,
        1 => 0i32..=i32::MAX,
    ];
    prop_oneof![
        1 => Just((-1i64, -1i16, -1i32)),
        1 => (0i32..100).prop_map(|s| (-1i64, -1i16, s)),
        4 => (0i64..=i64::MAX, 0i16..=i16::MAX, sequence),
    ]
}

fn ple_strategy() -> impl Strategy<Value = i32> {
    prop_oneof![Just(-1i32), 0i32..10, any::<i32>()]
}

/// Record offsets deltas and absolute timestamps for `records` in a batch based at `base_ts`.
fn deltas_and_timestamps(records: &[GenRecord], base_ts: i64) -> Vec<(i32, i64)> {
    let mut delta = -1i32;
    records
        .iter()
        .map(|r| {
            delta += 1 + r.gap;
            (delta, r.ts.map_or(-1, |t| base_ts + t))
        })
        .collect()
}

fn klog_headers(r: &GenRecord) -> Vec<Header<'_>> {
    r.headers
        .iter()
        .map(|(k, v)| Header {
            key: k.as_str(),
            value: v.as_deref(),
        })
        .collect()
}

fn gen_header_list(r: &GenRecord) -> HeaderList<'_> {
    r.headers
        .iter()
        .map(|(k, v)| (k.as_bytes(), v.as_deref()))
        .collect()
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: 256,
        // Keep proptest from writing regression files next to the test (other people own that directory).
        failure_persistence: None,
        ..Config::default()
    })
}

fn count_codecs(counts: &[Cell<usize>; 5], c: Compression) {
    let cell = &counts[c.id() as usize];
    cell.set(cell.get() + 1);
}

fn bump(c: &Cell<usize>) {
    c.set(c.get() + 1);
}

// ---------------------------------------------------------------------------------------------------------
// 2. klog's BatchBuilder → kafka-protocol's decoder (and klog's)
// ---------------------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct GenBatch {
    codec: Compression,
    base_offset: i64,
    ple: i32,
    producer: (i64, i16, i32),
    transactional: bool,
    log_append_time: Option<i64>,
    delete_horizon: Option<i64>,
    base_ts: i64,
    records: Vec<GenRecord>,
}

fn gen_batch_strategy() -> impl Strategy<Value = GenBatch> {
    (
        (
            codec_strategy(),
            prop_oneof![Just(0i64), 0i64..(1 << 50)],
            ple_strategy(),
            producer_strategy(),
            any::<bool>(),
        ),
        (
            prop::option::of(0i64..(1 << 42)),
            prop::option::weighted(0.2, 0i64..(1 << 42)),
            (1i64 << 20)..(1 << 42),
            prop::collection::vec(record_strategy(), 1..20),
        ),
    )
        .prop_map(
            |(
                (codec, base_offset, ple, producer, transactional),
                (log_append_time, delete_horizon, base_ts, records),
            )| {
                GenBatch {
                    codec,
                    base_offset,
                    ple,
                    producer,
                    transactional,
                    log_append_time,
                    delete_horizon,
                    base_ts,
                    records,
                }
            },
        )
}

#[test]
fn klog_built_batches_agree_with_kafka_protocol() {
    let codecs: [Cell<usize>; 5] = Default::default();
    let (wraps, log_append, no_seq, records, headers) = (
        Cell::new(0),
        Cell::new(0),
        Cell::new(0),
        Cell::new(0),
        Cell::new(0),
    );
    runner()
        .run(&gen_batch_strategy(), |g| {
            let (pid, epoch, seq) = g.producer;
            let mut b = BatchBuilder::new(g.codec)
                .base_offset(g.base_offset)
                .partition_leader_epoch(g.ple)
                .producer(pid, epoch, seq)
                .transactional(g.transactional);
            if let Some(t) = g.log_append_time {
                b = b.log_append_time(t);
            }
            if let Some(h) = g.delete_horizon {
                b = b.delete_horizon_ms(h);
            }
            let placed = deltas_and_timestamps(&g.records, g.base_ts);
            for (r, &(delta, ts)) in g.records.iter().zip(&placed) {
                b.append_with_offset_delta(
                    delta,
                    ts,
                    r.key.as_deref(),
                    r.value.as_deref(),
                    &klog_headers(r),
                )
                .unwrap();
            }
            let bytes = b.build().unwrap();

            let ctx = format!("{:?} batch", g.codec);
            let parsed: Vec<AnyBatch<'_>> = Batches::new(&bytes).collect::<Result<_, _>>().unwrap();
            assert_eq!(parsed.len(), 1, "{ctx}");
            let AnyBatch::V2(batch) = parsed[0] else {
                panic!("{ctx}: not v2")
            };
            let set = RecordBatchDecoder::decode(&mut Bytes::copy_from_slice(&bytes))
                .unwrap_or_else(|e| panic!("{ctx}: kafka-protocol failed: {e:#}"));
            let seen = compare_v2(&batch, &set, &ctx);
            assert_eq!(seen.records, g.records.len());

            // Both against the generated input.
            let mut scratch = Vec::new();
            let ours = klog_records(&batch, &mut scratch, &ctx);
            for (((k, p), r), &(delta, ts)) in
                ours.iter().zip(&set.records).zip(&g.records).zip(&placed)
            {
                assert_eq!(k.offset, g.base_offset + delta as i64);
                assert_eq!(k.timestamp, g.log_append_time.unwrap_or(ts));
                if g.log_append_time.is_none() {
                    assert_eq!(p.timestamp, ts);
                }
                assert_eq!(k.key, r.key.as_deref());
                assert_eq!(k.value, r.value.as_deref());
                let hs: HeaderList<'_> = k.headers.clone().collect();
                assert_eq!(hs, gen_header_list(r));
                assert_eq!(kp_headers(&p.headers), gen_header_list(r));
                assert_eq!(k.sequence, kafka_record_sequence(seq, delta));
                headers.set(headers.get() + hs.len());
            }
            assert_eq!(batch.delete_horizon_ms(), g.delete_horizon);

            count_codecs(&codecs, g.codec);
            records.set(records.get() + ours.len());
            if g.log_append_time.is_some() {
                bump(&log_append);
            }
            if seq < 0 {
                bump(&no_seq);
            }
            if seq >= 0 && seq.checked_add(batch.last_offset_delta()).is_none() {
                bump(&wraps);
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));

    let codecs = codecs.map(Cell::into_inner);
    eprintln!(
        "klog→kafka-protocol: per codec {codecs:?}, {} records, {} headers, {} LogAppendTime, {} wrapping, {} without sequence",
        records.get(),
        headers.get(),
        log_append.get(),
        wraps.get(),
        no_seq.get()
    );
    assert!(
        codecs.iter().all(|&n| n >= 10),
        "every codec covered: {codecs:?}"
    );
    assert!(records.get() >= 256, "records compared: {}", records.get());
    assert!(headers.get() >= 100, "headers compared: {}", headers.get());
    assert!(
        log_append.get() >= 20,
        "LogAppendTime batches: {}",
        log_append.get()
    );
    assert!(
        wraps.get() >= 5,
        "batches whose sequence wraps: {}",
        wraps.get()
    );
    assert!(
        no_seq.get() >= 5,
        "batches without a sequence: {}",
        no_seq.get()
    );
}

// ---------------------------------------------------------------------------------------------------------
// 3. kafka-protocol's RecordBatchEncoder → klog's decoder
// ---------------------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct GenKpBatch {
    codec: Compression,
    base_offset: i64,
    ple: i32,
    producer: (i64, i16, i32),
    transactional: bool,
    delete_horizon: bool,
    sorted_timestamps: bool,
    base_ts: i64,
    records: Vec<GenRecord>,
}

fn gen_kp_batch_strategy() -> impl Strategy<Value = GenKpBatch> {
    (
        (
            codec_strategy(),
            prop_oneof![Just(0i64), 0i64..(1 << 50)],
            ple_strategy(),
            producer_strategy(),
            any::<bool>(),
        ),
        (
            prop::bool::weighted(0.2),
            prop::bool::weighted(0.75),
            (1i64 << 20)..(1 << 42),
            prop::collection::vec(record_strategy(), 1..20),
        ),
    )
        .prop_map(
            |(
                (codec, base_offset, ple, producer, transactional),
                (delete_horizon, sorted_timestamps, base_ts, records),
            )| {
                GenKpBatch {
                    codec,
                    base_offset,
                    ple,
                    producer,
                    transactional,
                    delete_horizon,
                    sorted_timestamps,
                    base_ts,
                    records,
                }
            },
        )
}

#[test]
fn kafka_protocol_encoded_batches_decode_in_klog() {
    let codecs: [Cell<usize>; 5] = Default::default();
    let (wraps, identical, same_plaintext, records) =
        (Cell::new(0), Cell::new(0), Cell::new(0), Cell::new(0));
    runner()
        .run(&gen_kp_batch_strategy(), |g| {
            let (pid, epoch, seq) = g.producer;
            let mut placed = deltas_and_timestamps(&g.records, g.base_ts);
            // kafka-protocol's base offset is the smallest record offset: the first record's delta is 0.
            let first_delta = placed[0].0;
            for p in &mut placed {
                p.0 -= first_delta;
            }
            if g.sorted_timestamps {
                let mut ts: Vec<i64> = placed.iter().map(|p| p.1).collect();
                ts.sort_unstable();
                for (p, t) in placed.iter_mut().zip(ts) {
                    p.1 = t;
                }
            }
            // kafka-protocol groups records into one batch while `offset - sequence` stays constant, so a batch
            // without a sequence is expressed as sequences -1 + delta (base sequence -1), and one whose sequence
            // wraps as `wrapping_add` (its decoder's rule).
            let kp_records: Vec<kp::Record> = g
                .records
                .iter()
                .zip(&placed)
                .map(|(r, &(delta, ts))| kp::Record {
                    transactional: g.transactional,
                    control: false,
                    delete_horizon: g.delete_horizon,
                    partition_leader_epoch: g.ple,
                    producer_id: pid,
                    producer_epoch: epoch,
                    timestamp_type: kp::TimestampType::Creation,
                    offset: g.base_offset + delta as i64,
                    sequence: seq.wrapping_add(delta),
                    timestamp: ts,
                    key: r.key.clone().map(Bytes::from),
                    value: r.value.clone().map(Bytes::from),
                    headers: r
                        .headers
                        .iter()
                        .map(|(k, v)| {
                            (StrBytes::from_string(k.clone()), v.clone().map(Bytes::from))
                        })
                        .collect(),
                })
                .collect();
            let mut buf = BytesMut::new();
            RecordBatchEncoder::encode(
                &mut buf,
                &kp_records,
                &RecordEncodeOptions {
                    version: 2,
                    compression: to_kp_compression(g.codec),
                },
            )
            .unwrap_or_else(|e| panic!("kafka-protocol encode failed: {e:#}"));
            let bytes = buf.freeze();
            let ctx = format!("kafka-protocol {:?} batch", g.codec);

            // klog: exactly one batch, CRC valid, nothing left over.
            let mut it = Batches::new(&bytes);
            let parsed: Vec<AnyBatch<'_>> = it
                .by_ref()
                .collect::<Result<_, _>>()
                .unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert_eq!(it.tail(), Some(Tail::Clean), "{ctx}");
            assert_eq!(parsed.len(), 1, "{ctx}: one batch");
            let AnyBatch::V2(batch) = parsed[0] else {
                panic!("{ctx}: not v2")
            };
            let (again, rest) =
                RecordBatch::parse(&bytes, 0).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert!(rest.is_empty());
            again
                .verify_crc()
                .unwrap_or_else(|e| panic!("{ctx}: klog CRC check: {e}"));

            // Header fields against the input.
            let n = g.records.len();
            let min_ts = placed.iter().map(|p| p.1).min().unwrap();
            let max_ts = placed.iter().map(|p| p.1).max().unwrap();
            let last_delta = placed[n - 1].0;
            assert_eq!(batch.magic(), 2);
            assert_eq!(batch.base_offset(), g.base_offset, "{ctx}");
            assert_eq!(batch.last_offset_delta(), last_delta, "{ctx}");
            assert_eq!(batch.records_count(), n as i32, "{ctx}");
            assert_eq!(batch.base_timestamp(), min_ts, "{ctx}");
            assert_eq!(batch.max_timestamp(), max_ts, "{ctx}");
            assert_eq!(batch.partition_leader_epoch(), g.ple, "{ctx}");
            assert_eq!(batch.producer_id(), pid, "{ctx}");
            assert_eq!(batch.producer_epoch(), epoch, "{ctx}");
            assert_eq!(batch.base_sequence(), seq, "{ctx}");
            assert_eq!(batch.is_transactional(), g.transactional, "{ctx}");
            assert!(!batch.is_control(), "{ctx}");
            assert_eq!(
                batch.delete_horizon_ms(),
                g.delete_horizon.then_some(min_ts),
                "{ctx}"
            );
            assert_eq!(batch.timestamp_type(), TimestampType::CreateTime, "{ctx}");
            assert_eq!(batch.compression().unwrap(), g.codec, "{ctx}");

            // Records against the input.
            let mut scratch = Vec::new();
            let ours = klog_records(&batch, &mut scratch, &ctx);
            assert_eq!(ours.len(), n);
            for ((k, r), &(delta, ts)) in ours.iter().zip(&g.records).zip(&placed) {
                assert_eq!(k.offset, g.base_offset + delta as i64, "{ctx}");
                assert_eq!(k.offset_delta, delta, "{ctx}");
                assert_eq!(k.timestamp, ts, "{ctx}");
                assert_eq!(k.key, r.key.as_deref(), "{ctx}");
                assert_eq!(k.value, r.value.as_deref(), "{ctx}");
                let hs: HeaderList<'_> = k.headers.clone().collect();
                assert_eq!(hs, gen_header_list(r), "{ctx}: headers in order");
                assert_eq!(
                    k.sequence,
                    kafka_record_sequence(seq, delta),
                    "{ctx}: Kafka's sequence"
                );
                assert_eq!(k.attributes, 0, "{ctx}: record attributes");
            }
            let total: usize = ours.iter().map(|r| r.size_in_bytes).sum();
            assert_eq!(
                total,
                plaintext(&batch).len(),
                "{ctx}: record sizes cover the stream"
            );

            // kafka-protocol reads its own batch back the way klog does, and exactly as it was given.
            let set = RecordBatchDecoder::decode(&mut bytes.clone()).unwrap();
            compare_v2(&batch, &set, &ctx);
            assert_eq!(set.records, kp_records, "{ctx}: kafka-protocol round trip");

            // klog's writer, given the same records, writes the same record stream; uncompressed, the same bytes.
            // Both take the base timestamp from the delete horizon or the first record, kafka-protocol from the
            // smallest timestamp, so this holds when those coincide.
            if g.delete_horizon || placed[0].1 == min_ts {
                let mut b = BatchBuilder::new(g.codec)
                    .base_offset(g.base_offset)
                    .partition_leader_epoch(g.ple)
                    .producer(pid, epoch, seq)
                    .transactional(g.transactional);
                if g.delete_horizon {
                    b = b.delete_horizon_ms(min_ts);
                }
                for (r, &(delta, ts)) in g.records.iter().zip(&placed) {
                    b.append_with_offset_delta(
                        delta,
                        ts,
                        r.key.as_deref(),
                        r.value.as_deref(),
                        &klog_headers(r),
                    )
                    .unwrap();
                }
                let built = b.build().unwrap();
                let (mine, _) = RecordBatch::parse(&built, 0).unwrap();
                assert_eq!(plaintext(&mine), plaintext(&batch), "{ctx}: record stream");
                bump(&same_plaintext);
                if g.codec == Compression::None {
                    assert_eq!(&built[..], &bytes[..], "{ctx}: byte-identical batches");
                    bump(&identical);
                }
            }

            count_codecs(&codecs, g.codec);
            records.set(records.get() + n);
            if seq >= 0 && seq.checked_add(last_delta).is_none() {
                bump(&wraps);
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));

    let codecs = codecs.map(Cell::into_inner);
    eprintln!(
        "kafka-protocol→klog: per codec {codecs:?}, {} records, {} wrapping, {} same record stream as BatchBuilder, \
         {} byte-identical",
        records.get(),
        wraps.get(),
        same_plaintext.get(),
        identical.get()
    );
    assert!(
        codecs.iter().all(|&n| n >= 10),
        "every codec covered: {codecs:?}"
    );
    assert!(records.get() >= 256);
    assert!(
        wraps.get() >= 5,
        "batches whose sequence wraps: {}",
        wraps.get()
    );
    assert!(
        same_plaintext.get() >= 50,
        "record streams compared: {}",
        same_plaintext.get()
    );
    assert!(
        identical.get() >= 10,
        "byte-identical batches: {}",
        identical.get()
    );
}

// ---------------------------------------------------------------------------------------------------------
// kafka-protocol's departures from Kafka, pinned so the exclusions above stay justified
// ---------------------------------------------------------------------------------------------------------

fn decode_one(bytes: &[u8]) -> (RecordBatch<'_>, kp::RecordSet) {
    let (batch, rest) = RecordBatch::parse(bytes, 0).unwrap();
    assert!(rest.is_empty());
    let set = RecordBatchDecoder::decode(&mut Bytes::copy_from_slice(bytes)).unwrap();
    (batch, set)
}

#[test]
fn kafka_protocol_collapses_repeated_header_keys() {
    let mut b = BatchBuilder::new(Compression::None);
    let headers = [
        Header {
            key: "a",
            value: Some(b"1"),
        },
        Header {
            key: "b",
            value: None,
        },
        Header {
            key: "a",
            value: Some(b"3"),
        },
    ];
    b.append(1_700_000_000_000, None, Some(b"v"), &headers)
        .unwrap();
    let bytes = b.build().unwrap();
    let (batch, set) = decode_one(&bytes);
    let mut scratch = Vec::new();
    let ours = klog_records(&batch, &mut scratch, "dup headers");
    // Kafka's headers are a list: klog keeps all three, in order.
    let list: HeaderList<'_> = ours[0].headers.clone().collect();
    assert_eq!(
        list,
        vec![
            (&b"a"[..], Some(&b"1"[..])),
            (b"b", None),
            (b"a", Some(b"3"))
        ]
    );
    // kafka-protocol keeps one entry per key: first position, last value.
    assert_eq!(
        kp_headers(&set.records[0].headers),
        vec![(&b"a"[..], Some(&b"3"[..])), (b"b", None)]
    );
    let seen = compare_v2(&batch, &set, "dup headers");
    assert_eq!(seen.records_with_duplicate_header_keys, 1);
}

#[test]
fn kafka_protocol_log_append_time_and_sequence_quirks() {
    // LogAppendTime on read: Kafka reports maxTimestamp for every record; kafka-protocol base + delta.
    let mut b = BatchBuilder::new(Compression::None)
        .producer(7, 1, i32::MAX - 1)
        .log_append_time(1_800_000_000_000);
    for i in 0..4 {
        b.append(1_700_000_000_000 + i, None, Some(b"x"), &[])
            .unwrap();
    }
    let bytes = b.build().unwrap();
    let (batch, set) = decode_one(&bytes);
    let mut scratch = Vec::new();
    let ours = klog_records(&batch, &mut scratch, "lat");
    for (i, (k, p)) in ours.iter().zip(&set.records).enumerate() {
        assert_eq!(k.timestamp, 1_800_000_000_000);
        assert_eq!(p.timestamp, 1_700_000_000_000 + i as i64);
        assert_eq!(p.timestamp_type, kp::TimestampType::LogAppend);
    }
    // Sequence wrap: Kafka goes MAX-1, MAX, 0, 1; kafka-protocol MAX-1, MAX, MIN, MIN+1.
    let klog_seqs: Vec<i32> = ours.iter().map(|r| r.sequence).collect();
    let kp_seqs: Vec<i32> = set.records.iter().map(|r| r.sequence).collect();
    assert_eq!(klog_seqs, vec![i32::MAX - 1, i32::MAX, 0, 1]);
    assert_eq!(
        kp_seqs,
        vec![i32::MAX - 1, i32::MAX, i32::MIN, i32::MIN + 1]
    );

    // No sequence: Kafka gives -1 for every record; kafka-protocol -1 + delta.
    let mut b = BatchBuilder::new(Compression::None);
    for _ in 0..3 {
        b.append(5, None, None, &[]).unwrap();
    }
    let bytes = b.build().unwrap();
    let (batch, set) = decode_one(&bytes);
    let mut scratch = Vec::new();
    let ours = klog_records(&batch, &mut scratch, "no seq");
    assert!(ours.iter().all(|r| r.sequence == -1));
    assert_eq!(
        set.records.iter().map(|r| r.sequence).collect::<Vec<_>>(),
        vec![-1, 0, 1]
    );

    // LogAppendTime on write: kafka-protocol's encoder never sets attribute bit 3.
    let record = kp::Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: kp::TimestampType::LogAppend,
        offset: 0,
        sequence: -1,
        timestamp: 42,
        key: None,
        value: Some(Bytes::from_static(b"v")),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: kp::Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, [&record], &options).unwrap();
    let (batch, _) = RecordBatch::parse(&buf, 0).unwrap();
    assert_eq!(batch.timestamp_type(), TimestampType::CreateTime);
}

#[test]
fn kafka_protocol_encoded_txn_marker_is_klogs_byte_for_byte() {
    // A COMMIT marker as kafka-protocol's encoder writes it from a control record...
    let marker = kp::Record {
        transactional: true,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: 3,
        producer_id: 1000,
        producer_epoch: 2,
        timestamp_type: kp::TimestampType::Creation,
        offset: 41,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: Some(Bytes::copy_from_slice(&ControlRecordType::Commit.key())),
        value: Some(Bytes::from_static(&[0, 0, 0, 0, 0, 5])),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: kp::Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, [&marker], &options).unwrap();
    // ...is what klog's `end_txn_marker` builds (78 bytes, spec §1.5), and klog parses it as a COMMIT.
    let built =
        BatchBuilder::end_txn_marker(ControlRecordType::Commit, 1000, 2, 5, 1_700_000_000_000)
            .unwrap()
            .base_offset(41)
            .partition_leader_epoch(3)
            .build()
            .unwrap();
    assert_eq!(built.len(), 78);
    assert_eq!(&buf[..], &built[..]);
    let (batch, set) = decode_one(&buf);
    let control = batch.control_record().unwrap().unwrap();
    assert_eq!(control.record_type, ControlRecordType::Commit);
    assert_eq!(compare_v2(&batch, &set, "marker").control_batches, 1);
}

// ---------------------------------------------------------------------------------------------------------
// Where klog disagreed with Kafka (found by this test's reference rule, then fixed in klog)
// ---------------------------------------------------------------------------------------------------------

/// Kafka's `DefaultRecord.readFrom` gives every record sequence -1 when `baseSequence < 0`
/// (`int sequence = baseSequence >= 0 ? incrementSequence(baseSequence, offsetDelta) : NO_SEQUENCE`; spec
/// §1.1). klog's `Records::parse_one` (`log/src/format/record.rs`) used to test `base_sequence == NO_SEQUENCE`,
/// so a base sequence of -2 yields -2, -1, 0, ... and `i32::MIN` yields MIN, MIN+1, ... (kafka-protocol has the
/// same departure: `wrapping_add`). Only a corrupt or hostile batch has such a base sequence; Kafka's
/// batch-level `lastSequence()` does test `== NO_SEQUENCE`, and klog's `last_sequence()` matches that.
/// klog now tests `base_sequence < 0`, as Kafka does; this test keeps it that way.
#[test]
fn klog_record_sequence_is_minus_one_for_any_negative_base_sequence() {
    for base in [-2, -100, i32::MIN] {
        let mut b = BatchBuilder::new(Compression::None).producer(5, 0, base);
        for _ in 0..3 {
            b.append(0, None, None, &[]).unwrap();
        }
        let bytes = b.build().unwrap();
        let (batch, set) = decode_one(&bytes);
        let mut scratch = Vec::new();
        let ours: Vec<i32> = klog_records(&batch, &mut scratch, "negative base sequence")
            .iter()
            .map(|r| r.sequence)
            .collect();
        let theirs: Vec<i32> = set.records.iter().map(|r| r.sequence).collect();
        assert_eq!(
            theirs,
            vec![base, base.wrapping_add(1), base.wrapping_add(2)],
            "kafka-protocol's rule"
        );
        assert_eq!(
            ours,
            vec![-1, -1, -1],
            "base sequence {base}: Kafka reports -1 for every record"
        );
        assert_eq!(
            batch.last_sequence(),
            base + 2,
            "lastSequence() only treats -1 specially"
        );
    }
}
