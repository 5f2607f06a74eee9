//! The bodies of klog's fuzz targets: one plain function per parser of outside bytes in `klog_log::format`.
//!
//! `fuzz_targets/*.rs` are one-line libFuzzer wrappers around these functions, and the stable test
//! `tests/fuzz_corpus.rs` includes this file with `#[path]` to replay the seeds, the corpus and the
//! regressions without nightly. So this file depends on `klog_log` and `std` only.
//!
//! A target fails (panics) when a parser panics, or when an invariant that must hold for any input is broken:
//! a batch that parses is exactly `12 + batch_length` bytes, `parse` accepts exactly what `parse_unchecked_crc`
//! accepts once the CRC is right, a record iterator that ends cleanly consumed every byte, a codec round-trips
//! and honours its size cap, a builder's batch parses back to what was appended, and so on. Errors are fine:
//! every input is allowed to be rejected, as long as it is rejected with a `Result`.
//!
//! Targets that would otherwise stop at a checksum (v2 CRC-32C, legacy CRC-32) also run on a copy whose
//! checksum was recomputed, so the fuzzer reaches the record and codec code behind it.

pub mod seeds;

use klog_log::format::varint::{
    size_of_varint, size_of_varlong, write_unsigned_varint, write_unsigned_varlong, write_varint,
    write_varlong, Cursor,
};
use klog_log::format::{
    crc32c, AnyBatch, Attributes, BatchBuilder, Batches, Compression, ControlRecord,
    ControlRecordType, ControlValue, EndTxnMarker, Header, LeaderChange, LegacyEntry,
    MirrorPidReset, RecordBatch, RecordBatchMut, Tail, TimestampType, CRC_START, LOG_OVERHEAD,
    NO_SEQUENCE, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD,
};
use klog_log::kraft::{decode_control_value, MetadataRecord};
use klog_log::{Corruption, Error};

/// Decompression cap of the targets: large enough for every seed, small enough to keep executions fast.
pub const LIMIT: usize = 1 << 20;

/// The position handed to the parsers, so positions in errors and views are checked to be carried through.
pub const POSITION: u64 = 4096;

/// A target body: any input must either be rejected with a `Result` or parse with every invariant holding.
pub type Target = fn(&[u8]);

/// Every target, by the name of its `fuzz_targets/<name>.rs` and its seed directory.
pub const TARGETS: &[(&str, Target)] = &[
    ("batch_parse", batch_parse),
    ("batches_iter", batches_iter),
    ("records", records),
    ("codec_gzip", codec_gzip),
    ("codec_snappy", codec_snappy),
    ("codec_lz4", codec_lz4),
    ("codec_zstd", codec_zstd),
    ("legacy", legacy),
    ("legacy_wrapper", legacy_wrapper),
    ("control_record", control_record),
    ("varint", varint),
    ("builder_roundtrip", builder_roundtrip),
    ("coordinator_record", coordinator_record),
    ("metadata_record", metadata_record),
];

/// The target function of a name in [`TARGETS`].
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

// ---------------------------------------------------------------------------------------------------------
// Targets
// ---------------------------------------------------------------------------------------------------------

/// `RecordBatch::parse` / `parse_unchecked_crc` on raw bytes, then on a copy with the CRC-32C recomputed.
/// Every accessor, every record and header, the control record and `RecordBatchMut` stamping are exercised.
pub fn batch_parse(data: &[u8]) {
    check_batch_bytes(data);
    if let Ok((batch, _)) = RecordBatch::parse_unchecked_crc(data, POSITION) {
        let size = batch.size_in_bytes();
        let mut fixed = data.to_vec();
        let crc = crc32c(&fixed[CRC_START..size]);
        fixed[17..21].copy_from_slice(&crc.to_be_bytes());
        let parsed = RecordBatch::parse(&fixed, POSITION);
        assert!(
            parsed.is_ok(),
            "a batch whose structure parses must parse once its CRC is right: {:?}",
            parsed.err()
        );
        if fixed != data {
            check_batch_bytes(&fixed);
        }
    }
}

/// `Batches` over raw bytes, with and without the CRC check: positions, tails and every batch.
pub fn batches_iter(data: &[u8]) {
    let checked = walk_batches(Batches::at(data, POSITION), data);
    let unchecked = walk_batches(Batches::at(data, POSITION).without_crc(), data);
    assert!(
        checked.len() <= unchecked.len() && unchecked[..checked.len()] == checked[..],
        "the batches read with the CRC check must be a prefix of those read without: {checked:?} vs {unchecked:?}"
    );
    let from_zero: Vec<u64> = Batches::new(data)
        .map_while(Result::ok)
        .map(|b| b.position())
        .collect();
    let expected: Vec<u64> = checked.iter().map(|(p, _)| p - POSITION).collect();
    assert_eq!(from_zero, expected, "Batches::new starts positions at 0");
}

/// Records of a v2 batch. The input is a header prefix and a record payload; the target wraps them in a
/// batch with a correct CRC (compressing the payload when the prefix picks a codec), so every execution
/// reaches the record parser.
///
/// Layout: `attributes u8 | attributes high byte u8 | records_count i32 | base_sequence i32 | base_offset i64 |
/// base_timestamp i64 | last_offset_delta i32 | max_timestamp i64 | payload...` (missing bytes read as 0).
pub fn records(data: &[u8]) {
    let mut input = Input::new(data);
    let attributes = input.u8();
    let attributes_high = input.u8();
    let records_count = input.i32();
    let base_sequence = input.i32();
    let base_offset = input.i64();
    let base_timestamp = input.i64();
    let last_offset_delta = input.i32();
    let max_timestamp = input.i64();
    let payload = input.rest();

    let codec = Compression::ALL[usize::from(attributes & 0x07) % Compression::ALL.len()];
    let attributes = (attributes & !0x07) | codec.id();
    let mut buf = vec![0u8; RECORD_BATCH_OVERHEAD];
    codec.compress(payload, &mut buf);
    let batch_length = i32::try_from(buf.len() - LOG_OVERHEAD).expect("fuzz inputs are small");
    buf[0..8].copy_from_slice(&base_offset.to_be_bytes());
    buf[8..12].copy_from_slice(&batch_length.to_be_bytes());
    buf[12..16].copy_from_slice(&(-1i32).to_be_bytes());
    buf[16] = 2;
    buf[21] = attributes_high;
    buf[22] = attributes;
    buf[23..27].copy_from_slice(&last_offset_delta.to_be_bytes());
    buf[27..35].copy_from_slice(&base_timestamp.to_be_bytes());
    buf[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
    buf[43..51].copy_from_slice(&(-1i64).to_be_bytes());
    buf[51..53].copy_from_slice(&(-1i16).to_be_bytes());
    buf[53..57].copy_from_slice(&base_sequence.to_be_bytes());
    buf[57..61].copy_from_slice(&records_count.to_be_bytes());
    let crc = crc32c(&buf[CRC_START..]);
    buf[17..21].copy_from_slice(&crc.to_be_bytes());

    let (batch, rest) = RecordBatch::parse(&buf, POSITION).unwrap_or_else(|e| {
        panic!("a well-formed batch header with a correct CRC must parse: {e}")
    });
    assert!(rest.is_empty());
    assert_eq!(batch.compression().ok(), Some(codec));
    assert_eq!(
        batch.records_payload().len(),
        buf.len() - RECORD_BATCH_OVERHEAD
    );
    exercise_batch(&batch, &buf, rest, POSITION);
}

pub fn codec_gzip(data: &[u8]) {
    codec(Compression::Gzip, data);
}

pub fn codec_snappy(data: &[u8]) {
    codec(Compression::Snappy, data);
}

pub fn codec_lz4(data: &[u8]) {
    codec(Compression::Lz4, data);
}

pub fn codec_zstd(data: &[u8]) {
    codec(Compression::Zstd, data);
}

/// `LegacyEntry::parse` / `parse_unchecked_crc` on raw bytes, then on a copy with the CRC-32 recomputed.
pub fn legacy(data: &[u8]) {
    check_legacy_bytes(data);
    if let Ok((entry, _)) = LegacyEntry::parse_unchecked_crc(data, POSITION) {
        let mut fixed = data.to_vec();
        fixed[12..16].copy_from_slice(&entry.compute_crc().to_be_bytes());
        let parsed = LegacyEntry::parse(&fixed, POSITION);
        assert!(
            parsed.is_ok(),
            "a legacy entry whose structure parses must parse once its CRC is right: {:?}",
            parsed.err()
        );
        if fixed != data {
            check_legacy_bytes(&fixed);
        }
    }
}

/// A compressed legacy wrapper around fuzzed inner entries: the target recomputes the inner CRCs, compresses
/// the inner message set and wraps it in a valid outer entry, so `LegacyEntry::records` unwraps it.
///
/// Layout: `flags u8 (bits 0-1 codec gzip/snappy/lz4/gzip, bit 2 magic 1, bit 3 LogAppendTime, bits 4-7 kept
/// as attribute bits) | wrapper offset i64 | wrapper timestamp i64 | inner message set...`.
pub fn legacy_wrapper(data: &[u8]) {
    let mut input = Input::new(data);
    let flags = input.u8();
    let offset = input.i64();
    let timestamp = input.i64();
    let mut inner = input.rest().to_vec();
    let codec = [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Gzip,
    ][usize::from(flags & 0x03)];
    let magic: i8 = if flags & 0x04 != 0 { 1 } else { 0 };
    let attributes = codec.id() | (flags & 0xf8);

    // Recompute the CRC of each structurally valid inner entry; stop at the first that is not.
    let mut at = 0;
    let mut inner_entries = 0usize;
    while at < inner.len() {
        let Ok((entry, _)) = LegacyEntry::parse_unchecked_crc(&inner[at..], 0) else {
            break;
        };
        let (size, crc) = (entry.size_in_bytes(), entry.compute_crc());
        inner[at + 12..at + 16].copy_from_slice(&crc.to_be_bytes());
        at += size;
        inner_entries += 1;
    }
    let inner_complete = at == inner.len();

    let mut value = Vec::new();
    codec.compress(&inner, &mut value);
    let mut buf = Vec::with_capacity(34 + value.len());
    buf.extend_from_slice(&offset.to_be_bytes());
    buf.extend_from_slice(&[0; 8]); // size, crc: filled below
    buf.push(magic as u8);
    buf.push(attributes);
    if magic == 1 {
        buf.extend_from_slice(&timestamp.to_be_bytes());
    }
    buf.extend_from_slice(&(-1i32).to_be_bytes());
    let value_len = i32::try_from(value.len()).expect("fuzz inputs are small");
    buf.extend_from_slice(&value_len.to_be_bytes());
    buf.extend_from_slice(&value);
    let size = i32::try_from(buf.len() - LOG_OVERHEAD).expect("fuzz inputs are small");
    buf[8..12].copy_from_slice(&size.to_be_bytes());
    let crc = LegacyEntry::parse_unchecked_crc(&buf, POSITION)
        .unwrap_or_else(|e| panic!("a well-formed legacy wrapper must parse: {e}"))
        .0
        .compute_crc();
    buf[12..16].copy_from_slice(&crc.to_be_bytes());

    let (entry, rest) = LegacyEntry::parse(&buf, POSITION)
        .unwrap_or_else(|e| panic!("a legacy wrapper with a correct CRC must parse: {e}"));
    assert!(rest.is_empty());
    assert_eq!(entry.compression().ok(), Some(codec));
    exercise_legacy(&entry, &buf, rest, POSITION);

    let mut scratch = Vec::new();
    match entry.records(&mut scratch) {
        Ok(records) => {
            assert!(
                inner_complete,
                "records() accepted an inner message set that does not parse"
            );
            assert_eq!(records.len(), inner_entries, "one record per inner entry");
        }
        Err(e) => {
            // Nested compression and trailing partial entries are rejected; a clean, uncompressed set is not.
            let nested = inner_nested_compression(&inner);
            assert!(
                !inner_complete || nested,
                "records() rejected a clean inner message set: {e}"
            );
        }
    }
}

/// Control record keys and values: `ControlRecord::parse`, `EndTxnMarker::parse`, `MirrorPidReset::parse`,
/// `LeaderChange::parse`.
///
/// Layout: `flags u8 (bit 0 null key, bit 1 null value) | key length u8 | key | value...`.
pub fn control_record(data: &[u8]) {
    let mut input = Input::new(data);
    let flags = input.u8();
    let key_len = usize::from(input.u8());
    let key = input.bytes(key_len);
    let value = input.rest();
    let key = (flags & 0x01 == 0).then_some(key);
    let value_opt = (flags & 0x02 == 0).then_some(value);

    check_end_txn_marker(value);
    check_mirror_pid_reset(value);
    check_leader_change(value);

    match ControlRecord::parse(key, value_opt) {
        Ok(record) => {
            let key = key.expect("a control record has a key");
            assert!(key.len() >= 4);
            assert_eq!(record.key_version, be_i16(key, 0));
            assert!(record.key_version >= 0);
            let id = be_i16(key, 2);
            assert_eq!(record.record_type.id(), id);
            assert_eq!(ControlRecordType::from_id(id), record.record_type);
            assert_eq!(record.record_type.key(), [0, 0, key[2], key[3]]);
            assert!(!record.record_type.json_name().is_empty());
            assert_eq!(
                record.record_type.to_string(),
                record.record_type.kafka_name()
            );
            match (&record.value, record.record_type) {
                (ControlValue::EndTxn(m), ControlRecordType::Abort | ControlRecordType::Commit) => {
                    assert_eq!(Ok(*m), EndTxnMarker::parse(value));
                }
                (ControlValue::MirrorPidReset(m), ControlRecordType::MirrorPidReset) => {
                    assert_eq!(Ok(m.clone()), MirrorPidReset::parse(value));
                }
                (ControlValue::LeaderChange(m), ControlRecordType::LeaderChange) => {
                    assert_eq!(Ok(m.clone()), LeaderChange::parse(value));
                }
                (ControlValue::Raw(raw), _) => assert_eq!(raw.as_deref(), value_opt),
                (v, t) => panic!("control type {t:?} decoded as {v:?}"),
            }
        }
        Err(reason) => assert!(
            matches!(
                reason,
                Corruption::ControlKey(_) | Corruption::ControlValue(_)
            ),
            "a control record fails with a control key or value reason, not {reason:?}"
        ),
    }
}

/// The varint `Cursor`: every reader, run to the end of the input, with re-encoding checks.
pub fn varint(data: &[u8]) {
    for kind in 0..8u8 {
        let mut c = Cursor::new(data);
        let mut k = kind;
        loop {
            let before = c.position();
            assert_eq!(before + c.remaining(), data.len());
            assert_eq!(c.rest(), &data[before..]);
            let ok = match k % 8 {
                0 => c.read_varint("v").map(|v| {
                    let mut w = Vec::new();
                    write_varint(&mut w, v);
                    assert_eq!(w.len(), size_of_varint(v));
                    assert!(
                        w.len() <= c.position() - before,
                        "minimal encoding is shortest"
                    );
                    assert_eq!(Cursor::new(&w).read_varint("w"), Ok(v));
                }),
                1 => c.read_varlong("v").map(|v| {
                    let mut w = Vec::new();
                    write_varlong(&mut w, v);
                    assert_eq!(w.len(), size_of_varlong(v));
                    assert!(
                        w.len() <= c.position() - before,
                        "minimal encoding is shortest"
                    );
                    assert_eq!(Cursor::new(&w).read_varlong("w"), Ok(v));
                }),
                2 => c.read_unsigned_varint("v").map(|v| {
                    let mut w = Vec::new();
                    write_unsigned_varint(&mut w, v);
                    assert!(w.len() <= c.position() - before);
                    assert_eq!(Cursor::new(&w).read_unsigned_varint("w"), Ok(v));
                }),
                3 => c.read_unsigned_varlong("v").map(|v| {
                    let mut w = Vec::new();
                    write_unsigned_varlong(&mut w, v);
                    assert!(w.len() <= c.position() - before);
                    assert_eq!(Cursor::new(&w).read_unsigned_varlong("w"), Ok(v));
                }),
                4 => c.read_nullable_bytes("b").map(|b| {
                    if let Some(b) = b {
                        assert_eq!(b, &data[c.position() - b.len()..c.position()]);
                    }
                }),
                5 => c.read_i16("i").map(|v| assert_eq!(v, be_i16(data, before))),
                6 => c.read_i32("i").map(|v| assert_eq!(v, be_i32(data, before))),
                _ => c.read_i64("i").map(|v| assert_eq!(v, be_i64(data, before))),
            };
            match ok {
                Ok(()) => assert!(c.position() > before, "a successful read consumes bytes"),
                Err(_) => break,
            }
            k = k.wrapping_add(data.get(before).copied().unwrap_or(1));
        }
    }
}

/// `BatchBuilder` driven by fuzz input, then parsed back: every appended field must come back as written.
/// Also builds the COMMIT/ABORT and MIRROR_PID_RESET control batches and stamps the batch in place.
/// A `__consumer_offsets` or `__transaction_state` record (`flags` bit 0: the transaction coordinator,
/// bit 1: a null value; then a key length byte, the key, the value): decoded, printed as Kafka's JSON, and
/// what decodes re-encodes to bytes that decode the same.
pub fn coordinator_record(data: &[u8]) {
    use klog_log::coordinator::{encode, Coordinator, CoordinatorRecord};
    let mut input = Input::new(data);
    let flags = input.u8();
    let key_len = usize::from(input.u8());
    let key = input.bytes(key_len);
    let value = input.rest();
    let coordinator = if flags & 0x01 == 0 {
        Coordinator::Group
    } else {
        Coordinator::Transaction
    };
    let value = (flags & 0x02 == 0).then_some(value);
    let _ = klog_log::coordinator::OffsetCommitKey::decode(key);
    if let Some(v) = value {
        let _ = klog_log::coordinator::OffsetCommitValue::decode(v);
    }
    let Ok(r) = CoordinatorRecord::decode(coordinator, Some(key), value) else {
        return;
    };
    let _ = r.key_json().to_string();
    let _ = r.value_json().map(|j| j.to_string());
    let key_again = [
        &r.record_type.to_be_bytes()[..],
        &encode(r.key_schema, 0, &r.key).expect("a decoded key encodes"),
    ]
    .concat();
    let value_again = r.value.as_ref().map(|(version, schema, s)| {
        [
            &version.to_be_bytes()[..],
            &encode(schema, *version, s).expect("a decoded value encodes"),
        ]
        .concat()
    });
    let again = CoordinatorRecord::decode(coordinator, Some(&key_again), value_again.as_deref())
        .expect("re-encoded bytes decode");
    assert_eq!(again, r, "a decoded record re-encodes to itself");
}

pub fn builder_roundtrip(data: &[u8]) {
    let mut input = Input::new(data);
    let spec = BatchSpec::read(&mut input);
    let mut builder = spec.builder();
    let mut appended: Vec<Appended> = Vec::new();
    let record_count = input.u8() % 32;
    for _ in 0..record_count {
        let a = Appended::read(&mut input, appended.last().map(|a| a.offset_delta));
        let headers: Vec<Header<'_>> = a
            .headers
            .iter()
            .map(|(k, v)| Header {
                key: k,
                value: v.as_deref(),
            })
            .collect();
        let result = builder.append_with_offset_delta(
            a.offset_delta,
            a.timestamp,
            a.key.as_deref(),
            a.value.as_deref(),
            &headers,
        );
        let last = appended.last().map(|a| a.offset_delta);
        let valid = a.offset_delta >= 0
            && last.is_none_or(|l| a.offset_delta > l)
            && (a.timestamp >= 0 || a.timestamp == NO_TIMESTAMP);
        assert_eq!(result.is_ok(), valid, "append of {a:?} after {last:?}");
        if valid {
            appended.push(a);
        }
    }
    assert_eq!(builder.record_count() as usize, appended.len());
    match builder.build() {
        Err(e) => {
            assert!(appended.is_empty(), "build failed: {e}");
            assert!(matches!(e, Error::InvalidInput(_)));
        }
        Ok(bytes) => {
            assert!(!appended.is_empty(), "an empty batch was built");
            spec.check(&bytes, &appended);
            let mut two = Vec::new();
            builder.build_into(&mut two).expect("builds again");
            assert_eq!(two, bytes, "build is deterministic");
            builder
                .clone()
                .base_offset(spec.base_offset.wrapping_add(1000))
                .build_into(&mut two)
                .expect("builds again");
            let batches: Vec<_> = Batches::new(&two).collect();
            assert_eq!(batches.len(), 2);
            assert!(batches.iter().all(Result::is_ok));
        }
    }
    let control = input.u8();
    if control & 0x01 != 0 {
        check_end_txn_builder(&mut input);
    }
    if control & 0x02 != 0 {
        check_mirror_pid_reset_builder(&mut input);
    }
}

// ---------------------------------------------------------------------------------------------------------
// v2 batches
// ---------------------------------------------------------------------------------------------------------

/// Both parse functions on `data`: they must agree, and a batch that parses is fully exercised.
fn check_batch_bytes(data: &[u8]) {
    let unchecked = RecordBatch::parse_unchecked_crc(data, POSITION);
    let checked = RecordBatch::parse(data, POSITION);
    match (&unchecked, &checked) {
        (Ok((u, ur)), Ok((c, cr))) => {
            assert_eq!(u.as_bytes(), c.as_bytes());
            assert_eq!(ur, cr);
            assert!(c.verify_crc().is_ok());
            assert_eq!(c.compute_crc(), c.crc());
        }
        (Ok((u, _)), Err(e)) => {
            assert_corrupt_at(e, POSITION);
            assert!(
                matches!(reason(e), Corruption::Crc { stored, computed } if *stored == u.crc() && *computed == u.compute_crc()),
                "only the CRC can fail after the structure passed: {e}"
            );
            assert!(u.verify_crc().is_err());
        }
        (Err(u), Err(c)) => {
            assert_corrupt_at(u, POSITION);
            assert_eq!(u.to_string(), c.to_string(), "structure is checked first");
        }
        (Err(u), Ok(_)) => panic!("parse accepted what parse_unchecked_crc rejected: {u}"),
    }
    // The mutable views accept exactly what the read-only ones accept, and see the same batch.
    let mut copy = data.to_vec();
    match (&unchecked, RecordBatchMut::parse_unchecked_crc(&mut copy)) {
        (Ok((u, _)), Ok(m)) => assert_eq!(m.as_batch().as_bytes(), u.as_bytes()),
        (Err(u), Err(m)) => assert_eq!(reason(u), reason(&m), "the same check fails"),
        (u, m) => panic!(
            "RecordBatchMut::parse_unchecked_crc disagrees: {u:?} vs {:?}",
            m.err()
        ),
    }
    let mut copy = data.to_vec();
    match (&checked, RecordBatchMut::parse(&mut copy)) {
        (Ok((c, _)), Ok(m)) => assert_eq!(m.as_batch().as_bytes(), c.as_bytes()),
        (Err(c), Err(m)) => assert_eq!(reason(c), reason(&m), "the same check fails"),
        (c, m) => panic!("RecordBatchMut::parse disagrees: {c:?} vs {:?}", m.err()),
    }
    if let Ok((batch, rest)) = unchecked {
        exercise_batch(&batch, data, rest, POSITION);
    }
    if let Ok((batch, _)) = checked {
        exercise_mut(data, &batch);
    }
}

/// Every accessor of a parsed batch against the raw bytes it was parsed from (`buf`), then its records.
fn exercise_batch(b: &RecordBatch<'_>, buf: &[u8], rest: &[u8], position: u64) {
    let size = b.size_in_bytes();
    assert!(size >= RECORD_BATCH_OVERHEAD);
    assert_eq!(size, LOG_OVERHEAD + b.batch_length() as usize);
    assert_eq!(b.as_bytes(), &buf[..size]);
    assert_eq!(rest, &buf[size..]);
    assert_eq!(b.position(), position);
    assert_eq!(b.magic(), 2);
    assert_eq!(b.base_offset(), be_i64(buf, 0));
    assert_eq!(b.batch_length(), be_i32(buf, 8));
    assert_eq!(b.partition_leader_epoch(), be_i32(buf, 12));
    assert_eq!(b.crc(), be_i32(buf, 17) as u32);
    assert_eq!(b.attributes(), Attributes(buf[22]));
    assert_eq!(b.last_offset_delta(), be_i32(buf, 23));
    assert_eq!(b.base_timestamp(), be_i64(buf, 27));
    assert_eq!(b.max_timestamp(), be_i64(buf, 35));
    assert_eq!(b.producer_id(), be_i64(buf, 43));
    assert_eq!(b.producer_epoch(), be_i16(buf, 51));
    assert_eq!(b.base_sequence(), be_i32(buf, 53));
    assert_eq!(b.records_count(), be_i32(buf, 57));
    assert_eq!(b.header().records_count.get(), b.records_count());
    assert_eq!(b.compute_crc(), crc32c(&buf[CRC_START..size]));
    assert_eq!(
        b.last_offset(),
        b.base_offset()
            .wrapping_add(i64::from(b.last_offset_delta()))
    );
    assert_eq!(b.next_offset(), b.last_offset().wrapping_add(1));
    assert_eq!(b.records_payload(), &buf[RECORD_BATCH_OVERHEAD..size]);

    let attributes = buf[22];
    match b.compression() {
        Ok(codec) => assert_eq!(codec.id(), attributes & 0x07),
        Err(e) => {
            assert!(attributes & 0x07 > 4);
            assert!(
                matches!(reason(&e), Corruption::UnknownCompression { id } if *id == attributes & 0x07)
            );
        }
    }
    let log_append_time = attributes & 0x08 != 0;
    assert_eq!(
        b.timestamp_type() == TimestampType::LogAppendTime,
        log_append_time
    );
    assert!(!b.timestamp_type().kafka_name().is_empty());
    assert_eq!(b.is_transactional(), attributes & 0x10 != 0);
    assert_eq!(b.is_control(), attributes & 0x20 != 0);
    assert_eq!(
        b.delete_horizon_ms(),
        (attributes & 0x40 != 0).then_some(b.base_timestamp())
    );
    assert_eq!(b.has_producer_id(), b.producer_id() >= 0);
    let last_sequence = b.last_sequence();
    if b.base_sequence() == NO_SEQUENCE {
        assert_eq!(last_sequence, NO_SEQUENCE);
    } else if b.base_sequence() >= 0 && b.last_offset_delta() >= 0 {
        assert!(last_sequence >= 0, "sequences wrap from i32::MAX to 0");
    }
    exercise_records(b);
}

/// The first record of a batch as the control-record decoding sees it.
enum FirstRecord {
    None,
    Err(String),
    Ok(Option<Vec<u8>>, Option<Vec<u8>>),
}

/// Iterates every record of `b` (inflating at most [`LIMIT`] bytes) and cross-checks `control_record()`.
fn exercise_records(b: &RecordBatch<'_>) {
    let count = b.records_count();
    let mut scratch = Vec::new();
    let records = match b.records_with_limit(&mut scratch, LIMIT) {
        Ok(records) => records,
        Err(e) => {
            assert_corrupt_at(&e, b.position());
            let r = reason(&e);
            let too_large = matches!(r, Corruption::DecompressedTooLarge { .. });
            match b.compression() {
                _ if count < 0 => assert!(
                    matches!(r, Corruption::NegativeRecordCount { count: c } if *c == count)
                ),
                Err(_) => assert!(matches!(r, Corruption::UnknownCompression { .. })),
                Ok(Compression::None) => {
                    panic!("an uncompressed batch with a record count >= 0 must iterate: {e}")
                }
                Ok(codec) => assert!(
                    matches!(r, Corruption::Decompression { codec: c, .. } | Corruption::DecompressedTooLarge { codec: c, limit: LIMIT } if *c == codec),
                    "{e}"
                ),
            }
            // control_record() inflates with the default (128 MiB) cap: only ask when that stays cheap.
            if b.is_control() && !too_large {
                assert!(b.control_record().is_err());
            }
            return;
        }
    };
    let mut first = FirstRecord::None;
    let mut records = records;
    let (mut found, mut consumed, mut failed) = (0i64, 0usize, false);
    for item in records.by_ref() {
        assert!(!failed, "the record iterator stops after an error");
        match item {
            Ok(record) => {
                check_record(b, &record);
                if found == 0 {
                    first = FirstRecord::Ok(
                        record.key.map(<[u8]>::to_vec),
                        record.value.map(<[u8]>::to_vec),
                    );
                }
                found += 1;
                consumed += record.size_in_bytes;
            }
            Err(e) => {
                assert_corrupt_at(&e, b.position());
                if found == 0 {
                    first = FirstRecord::Err(e.to_string());
                }
                failed = true;
            }
        }
        assert!(
            found <= i64::from(count),
            "more records than the declared count"
        );
    }
    assert!(records.next().is_none(), "the record iterator is fused");
    let data_len = match b.compression() {
        Ok(Compression::None) => b.records_payload().len(),
        _ => scratch.len(),
    };
    assert!(consumed <= data_len);
    if !failed {
        assert_eq!(
            found,
            i64::from(count),
            "a clean iteration yields the declared count"
        );
        assert_eq!(consumed, data_len, "a clean iteration consumes every byte");
    }
    // The leader's validator walks the same bytes: it must accept exactly what the reader iterates.
    let data = match b.compression() {
        Ok(Compression::None) => b.records_payload(),
        _ => scratch.as_slice(),
    };
    let walk = klog_log::format::walk_records(data, count, b.base_timestamp());
    assert_eq!(
        walk.is_ok(),
        !failed,
        "walk_records and Records disagree: {walk:?}"
    );
    check_control_record(b, first);
}

fn check_record(b: &RecordBatch<'_>, r: &klog_log::format::Record<'_>) {
    assert_eq!(
        r.offset,
        b.base_offset().wrapping_add(i64::from(r.offset_delta))
    );
    if b.timestamp_type() == TimestampType::LogAppendTime {
        assert_eq!(r.timestamp, b.max_timestamp());
    } else {
        assert_eq!(
            r.timestamp,
            b.base_timestamp().wrapping_add(r.timestamp_delta)
        );
    }
    // Kafka's DefaultRecord: sequence = incrementSequence(baseSequence, offsetDelta) if baseSequence >= 0,
    // else -1 (kafka-storage.md §1.1).
    if b.base_sequence() < 0 {
        assert_eq!(
            r.sequence,
            NO_SEQUENCE,
            "a batch with base sequence {} has no record sequences",
            b.base_sequence()
        );
    }
    assert!(r.size_in_bytes >= 7, "the smallest record is 7 bytes");
    let declared = r.headers.len();
    assert_eq!(r.headers.is_empty(), declared == 0);
    let mut header_bytes = 0;
    let mut n = 0;
    for (key, value) in r.headers.clone() {
        header_bytes += key.len() + value.map_or(0, <[u8]>::len);
        n += 1;
    }
    assert_eq!(n, declared, "the header iterator yields the declared count");
    let payload = r.key.map_or(0, <[u8]>::len) + r.value.map_or(0, <[u8]>::len) + header_bytes;
    assert!(
        payload + 7 <= r.size_in_bytes,
        "keys, values and headers fit in the record"
    );
}

/// `control_record()` must be what decoding the first record gives.
fn check_control_record(b: &RecordBatch<'_>, first: FirstRecord) {
    let got = b.control_record();
    if !b.is_control() {
        assert!(matches!(got, Ok(None)));
        return;
    }
    match first {
        FirstRecord::None => assert!(
            matches!(
                got.as_ref().map_err(reason),
                Err(Corruption::EmptyControlBatch)
            ),
            "{got:?}"
        ),
        FirstRecord::Err(msg) => {
            assert_eq!(got.expect_err("the first record failed").to_string(), msg)
        }
        FirstRecord::Ok(key, value) => {
            let expected = ControlRecord::parse(key.as_deref(), value.as_deref());
            match (got, expected) {
                (Ok(Some(g)), Ok(e)) => assert_eq!(g, e),
                (Err(g), Err(e)) => assert_eq!(reason(&g), &e),
                (g, e) => panic!("control_record() gave {g:?}, decoding the first record {e:?}"),
            }
        }
    }
}

/// `RecordBatchMut` stamping on a copy of a batch that passed `parse`: the CRC stays valid and only the
/// stamped fields change.
fn exercise_mut(buf: &[u8], b: &RecordBatch<'_>) {
    let size = b.size_in_bytes();
    let mut copy = buf[..size].to_vec();
    let new_base = b.base_offset().wrapping_add(7);
    let new_epoch = b.partition_leader_epoch() ^ 0x55;
    let new_time = b.max_timestamp().wrapping_add(1);
    {
        let mut m = RecordBatchMut::parse(&mut copy)
            .unwrap_or_else(|e| panic!("RecordBatchMut rejects what RecordBatch accepts: {e}"));
        m.set_base_offset(new_base);
        m.set_partition_leader_epoch(new_epoch);
        m.set_log_append_time(new_time);
        let v = m.as_batch();
        assert_eq!(v.base_offset(), new_base);
        assert_eq!(v.partition_leader_epoch(), new_epoch);
        assert_eq!(v.max_timestamp(), new_time);
        assert_eq!(v.timestamp_type(), TimestampType::LogAppendTime);
    }
    let (stamped, _) = RecordBatch::parse(&copy, 0)
        .unwrap_or_else(|e| panic!("stamping must keep the CRC valid: {e}"));
    assert_eq!(stamped.size_in_bytes(), size);
    assert_eq!(stamped.attributes().0, buf[22] | Attributes::TIMESTAMP_TYPE);
    for (i, (&new, &old)) in copy.iter().zip(buf).enumerate() {
        let stamped_field = matches!(i, 0..=7 | 12..=15 | 17..=20 | 22 | 35..=42);
        assert!(stamped_field || new == old, "byte {i} changed by stamping");
    }
}

fn walk_batches(mut it: Batches<'_>, data: &[u8]) -> Vec<(u64, usize)> {
    let mut read = Vec::new();
    let mut consumed = 0usize;
    let mut failed = false;
    assert!(it.tail().is_none());
    // Not a `for` loop: the iterator's position and tail are checked between items.
    #[allow(clippy::while_let_on_iterator)]
    while let Some(item) = it.next() {
        assert!(!failed, "the batch iterator stops after an error");
        match item {
            Ok(batch) => {
                assert_eq!(batch.position(), POSITION + consumed as u64);
                let size = batch.size_in_bytes();
                let bytes = &data[consumed..];
                assert_eq!(batch.as_bytes(), &bytes[..size]);
                match batch {
                    AnyBatch::V2(b) => {
                        assert_eq!(
                            (
                                batch.base_offset(),
                                batch.last_offset(),
                                batch.max_timestamp()
                            ),
                            (b.base_offset(), b.last_offset(), b.max_timestamp())
                        );
                        exercise_batch(&b, bytes, &bytes[size..], b.position());
                    }
                    AnyBatch::Legacy(e) => {
                        assert_eq!(
                            (
                                batch.base_offset(),
                                batch.last_offset(),
                                batch.max_timestamp()
                            ),
                            (e.offset, e.offset, e.timestamp.unwrap_or(-1))
                        );
                        exercise_legacy(&e, bytes, &bytes[size..], e.position());
                    }
                }
                read.push((batch.position(), size));
                consumed += size;
                assert_eq!(it.position(), POSITION + consumed as u64);
                assert!(it.tail().is_none());
            }
            Err(e) => {
                assert_corrupt_at(&e, POSITION + consumed as u64);
                failed = true;
            }
        }
    }
    assert!(it.next().is_none(), "the batch iterator is fused");
    let rest = &data[consumed..];
    let here = POSITION + consumed as u64;
    let left = rest.len() as u64;
    match it
        .tail()
        .expect("the tail is known once the iteration ended")
    {
        Tail::Clean => assert!(!failed && rest.is_empty()),
        Tail::Partial { position, bytes } => {
            assert!(!failed);
            assert_eq!((position, bytes), (here, left));
            assert!(rest.iter().any(|&b| b != 0), "a partial tail is not zeros");
            let declared = rest
                .get(8..12)
                .map(|s| i64::from(be_i32(s, 0)) + LOG_OVERHEAD as i64);
            assert!(
                rest.len() < 17 || declared.is_some_and(|d| d > rest.len() as i64),
                "a partial tail is short or declares more than is left"
            );
        }
        Tail::ZeroFilled { position, bytes } => {
            assert!(!failed);
            assert_eq!((position, bytes), (here, left));
            assert!(!rest.is_empty() && rest.iter().all(|&b| b == 0));
        }
        Tail::Corrupt { position, bytes } => {
            assert!(failed, "a corrupt tail comes with an error");
            assert_eq!((position, bytes), (here, left));
        }
    }
    read
}

// ---------------------------------------------------------------------------------------------------------
// Legacy v0/v1
// ---------------------------------------------------------------------------------------------------------

fn check_legacy_bytes(data: &[u8]) {
    let unchecked = LegacyEntry::parse_unchecked_crc(data, POSITION);
    let checked = LegacyEntry::parse(data, POSITION);
    match (&unchecked, &checked) {
        (Ok((u, _)), Ok((c, _))) => {
            assert_eq!(u.as_bytes(), c.as_bytes());
            assert_eq!(c.compute_crc(), c.crc);
        }
        (Ok((u, _)), Err(e)) => assert!(
            matches!(reason(e), Corruption::Crc { stored, computed } if *stored == u.crc && *computed == u.compute_crc()),
            "only the CRC can fail after the structure passed: {e}"
        ),
        (Err(u), Err(c)) => {
            assert_corrupt_at(u, POSITION);
            assert_eq!(u.to_string(), c.to_string(), "structure is checked first");
        }
        (Err(u), Ok(_)) => panic!("parse accepted what parse_unchecked_crc rejected: {u}"),
    }
    if let Ok((entry, rest)) = unchecked {
        exercise_legacy(&entry, data, rest, POSITION);
    }
}

/// Every field of a legacy entry against its bytes, then its records.
fn exercise_legacy(e: &LegacyEntry<'_>, buf: &[u8], rest: &[u8], position: u64) {
    let size = e.size_in_bytes();
    assert_eq!(size, LOG_OVERHEAD + be_i32(buf, 8) as usize);
    assert_eq!(e.as_bytes(), &buf[..size]);
    assert_eq!(rest, &buf[size..]);
    assert_eq!(e.position(), position);
    assert_eq!(e.offset, be_i64(buf, 0));
    assert_eq!(e.crc, be_i32(buf, 12) as u32);
    assert_eq!(e.magic, buf[16] as i8);
    assert_eq!(e.attributes, buf[17]);
    assert!(e.magic == 0 || e.magic == 1);
    let v1 = e.magic == 1;
    assert_eq!(e.timestamp, v1.then(|| be_i64(buf, 18)));
    let overhead = LOG_OVERHEAD + 4 + 1 + 1 + if v1 { 8 } else { 0 } + 4 + 4;
    let payload = e.key.map_or(0, <[u8]>::len) + e.value.map_or(0, <[u8]>::len);
    assert_eq!(
        overhead + payload,
        size,
        "a legacy entry has no trailing bytes"
    );
    assert_eq!(e.timestamp_type().is_some(), v1);
    if v1 {
        assert_eq!(
            e.timestamp_type() == Some(TimestampType::LogAppendTime),
            e.attributes & 0x08 != 0
        );
    }
    let codec = e.compression();
    match &codec {
        Ok(c) => assert_eq!(c.id(), e.attributes & 0x07),
        Err(err) => {
            assert!(e.attributes & 0x07 > 3);
            assert!(matches!(reason(err), Corruption::UnknownCompression { .. }));
        }
    }
    let mut scratch = Vec::new();
    match e.records(&mut scratch) {
        Ok(records) => {
            let codec = codec.expect("records() needs a known codec");
            for r in &records {
                assert_eq!(r.timestamp_type, e.timestamp_type());
            }
            if codec == Compression::None {
                assert_eq!(records.len(), 1);
                let r = &records[0];
                assert_eq!(
                    (r.offset, r.timestamp, r.crc, r.key, r.value),
                    (e.offset, e.timestamp, e.crc, e.key, e.value)
                );
            } else if let (true, Some(last)) = (v1, records.last()) {
                assert_eq!(
                    last.offset, e.offset,
                    "a v1 wrapper's offset is its last inner offset"
                );
                if e.timestamp_type() == Some(TimestampType::LogAppendTime) {
                    assert!(records.iter().all(|r| r.timestamp == e.timestamp));
                }
            }
        }
        Err(err) => {
            assert!(
                !matches!(codec, Ok(Compression::None)),
                "an uncompressed legacy entry is its own record: {err}"
            );
            assert_corrupt_at(&err, position);
        }
    }
}

/// Whether a (CRC-fixed) inner message set holds an entry that is itself compressed.
fn inner_nested_compression(inner: &[u8]) -> bool {
    let mut rest = inner;
    while let Ok((entry, next)) = LegacyEntry::parse_unchecked_crc(rest, 0) {
        if entry.attributes & 0x07 != 0 {
            return true;
        }
        rest = next;
    }
    false
}

// ---------------------------------------------------------------------------------------------------------
// Codecs and control values
// ---------------------------------------------------------------------------------------------------------

/// `data` as a compressed stream (the cap is honoured, exactly), then `data` compressed and inflated back.
fn codec(codec: Compression, data: &[u8]) {
    let mut out = vec![0xAA; 7]; // decompress replaces the buffer's contents
    let first = codec.decompress(data, &mut out, LIMIT);
    // The outcome is a function of the input and the cap, not of the buffer's history: `records()` inflates
    // every batch into one scratch buffer reused across batches.
    let mut roomy = Vec::with_capacity(64 * 1024);
    let second = codec.decompress(data, &mut roomy, LIMIT);
    match (&first, &second) {
        (Ok(()), Ok(())) => assert!(roomy == out, "{codec}: output depends on the buffer's capacity"),
        (Err(a), Err(b)) => assert_eq!(
            std::mem::discriminant(a),
            std::mem::discriminant(b),
            "{codec}: {a:?} into a fresh buffer, {b:?} into one with capacity"
        ),
        (a, b) => panic!(
            "{codec}: {a:?} ({} bytes) into a fresh buffer, {b:?} ({} bytes) into one with 64 KiB capacity",
            out.len(),
            roomy.len()
        ),
    }
    match first {
        Ok(()) => {
            let n = out.len();
            assert!(n <= LIMIT);
            let mut again = b"junk".to_vec();
            codec.decompress(data, &mut again, n).unwrap_or_else(|e| {
                panic!("{codec}: inflates to {n} bytes with a cap of {LIMIT} but not with a cap of {n}: {e}")
            });
            assert_eq!(again, out, "{codec}: same stream, same bytes");
            if n > 0 {
                let err = codec.decompress(data, &mut again, n - 1);
                assert_eq!(
                    err,
                    Err(Corruption::DecompressedTooLarge {
                        codec,
                        limit: n - 1
                    }),
                    "{codec}: {n} bytes with a cap of {}",
                    n - 1
                );
            }
        }
        Err(Corruption::DecompressedTooLarge { codec: c, limit }) => {
            assert_eq!((c, limit), (codec, LIMIT));
        }
        Err(Corruption::Decompression { codec: c, detail }) => {
            assert_eq!(c, codec);
            assert!(!detail.is_empty());
        }
        Err(other) => panic!("{codec}: unexpected failure {other:?}"),
    }

    let mut compressed = b"prefix".to_vec();
    codec.compress(data, &mut compressed);
    assert!(compressed.starts_with(b"prefix"), "compress appends");
    let stream = &compressed[6..];
    let mut back = Vec::new();
    codec
        .decompress(stream, &mut back, data.len())
        .unwrap_or_else(|e| panic!("{codec}: round trip of {} bytes failed: {e}", data.len()));
    assert_eq!(back, data, "{codec}: round trip");
    if !data.is_empty() {
        assert_eq!(
            codec.decompress(stream, &mut back, data.len() - 1),
            Err(Corruption::DecompressedTooLarge {
                codec,
                limit: data.len() - 1
            })
        );
    }
}

fn check_end_txn_marker(value: &[u8]) {
    match EndTxnMarker::parse(value) {
        Ok(m) => {
            assert!(value.len() >= 6 && m.version >= 0);
            assert_eq!(&m.encode()[..], &value[..6]);
        }
        Err(r) => assert!(value.len() < 6 || be_i16(value, 0) < 0, "{r:?}"),
    }
}

fn check_mirror_pid_reset(value: &[u8]) {
    if let Ok(m) = MirrorPidReset::parse(value) {
        assert!(m.version >= 0);
        assert_eq!(m.version, be_i16(value, 0));
        let encoded = m.encode();
        assert!(encoded.len() <= value.len(), "minimal encoding is shortest");
        assert_eq!(MirrorPidReset::parse(&encoded), Ok(m.clone()));
        // The newest layout has nothing between the version and its tagged fields.
        assert_eq!(m.source_cluster_id.is_none(), encoded.len() == 3);
    }
}

fn check_leader_change(value: &[u8]) {
    if let Ok(m) = LeaderChange::parse(value) {
        assert_eq!(m.version, be_i16(value, 0));
        assert_eq!(m.leader_id, be_i32(value, 2));
        assert!(
            (m.voters.len() + m.granting_voters.len()) * 5 <= value.len(),
            "each voter takes at least 5 bytes"
        );
        let json = m.to_kafka_json();
        assert!(json.starts_with('{') && json.ends_with('}'));
    }
}

// ---------------------------------------------------------------------------------------------------------
// Builder round trip
// ---------------------------------------------------------------------------------------------------------

#[derive(Debug)]
struct BatchSpec {
    codec: Compression,
    log_append_time: Option<i64>,
    transactional: bool,
    delete_horizon: Option<i64>,
    producer: Option<(i64, i16, i32)>,
    base_offset: i64,
    partition_leader_epoch: i32,
}

impl BatchSpec {
    fn read(input: &mut Input<'_>) -> Self {
        let flags = input.u8();
        let codec = Compression::ALL[usize::from(flags & 0x07) % Compression::ALL.len()];
        let base_offset = input.i64();
        let partition_leader_epoch = input.i32();
        let log_append_time = (flags & 0x08 != 0).then(|| input.i64());
        let delete_horizon = (flags & 0x20 != 0).then(|| input.i64());
        let producer = (flags & 0x40 != 0).then(|| (input.i64(), input.i16(), input.i32()));
        BatchSpec {
            codec,
            log_append_time,
            transactional: flags & 0x10 != 0,
            delete_horizon,
            producer,
            base_offset,
            partition_leader_epoch,
        }
    }

    fn builder(&self) -> BatchBuilder {
        let mut b = BatchBuilder::new(self.codec)
            .base_offset(self.base_offset)
            .partition_leader_epoch(self.partition_leader_epoch)
            .transactional(self.transactional);
        if let Some(t) = self.log_append_time {
            b = b.log_append_time(t);
        }
        if let Some(h) = self.delete_horizon {
            b = b.delete_horizon_ms(h);
        }
        if let Some((id, epoch, seq)) = self.producer {
            b = b.producer(id, epoch, seq);
        }
        b
    }

    /// The built batch parses, and every header field and record is what was asked for.
    fn check(&self, bytes: &[u8], appended: &[Appended]) {
        let (b, rest) = RecordBatch::parse(bytes, POSITION)
            .unwrap_or_else(|e| panic!("the builder's batch must parse: {e}"));
        assert!(rest.is_empty());
        exercise_batch(&b, bytes, rest, POSITION);
        let (pid, epoch, seq) = self.producer.unwrap_or((-1, -1, -1));
        let last = appended.last().expect("non-empty");
        let max_ts = appended
            .iter()
            .map(|a| a.timestamp)
            .fold(NO_TIMESTAMP, i64::max);
        assert_eq!(b.base_offset(), self.base_offset);
        assert_eq!(b.partition_leader_epoch(), self.partition_leader_epoch);
        assert_eq!(b.compression().ok(), Some(self.codec));
        assert_eq!(b.is_transactional(), self.transactional);
        assert!(!b.is_control());
        assert_eq!(b.delete_horizon_ms(), self.delete_horizon);
        assert_eq!(b.last_offset_delta(), last.offset_delta);
        assert_eq!(b.records_count() as usize, appended.len());
        assert_eq!(
            (b.producer_id(), b.producer_epoch(), b.base_sequence()),
            (pid, epoch, seq)
        );
        assert_eq!(
            b.base_timestamp(),
            self.delete_horizon.unwrap_or(appended[0].timestamp)
        );
        assert_eq!(b.max_timestamp(), self.log_append_time.unwrap_or(max_ts));
        let mut scratch = Vec::new();
        let records: Vec<_> = b
            .records_with_limit(&mut scratch, LIMIT)
            .expect("the builder's records inflate")
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("the builder's records must parse: {e}"));
        assert_eq!(records.len(), appended.len());
        for (r, a) in records.iter().zip(appended) {
            assert_eq!(r.offset_delta, a.offset_delta);
            assert_eq!(
                r.offset,
                self.base_offset.wrapping_add(i64::from(a.offset_delta))
            );
            assert_eq!(r.timestamp, self.log_append_time.unwrap_or(a.timestamp));
            assert_eq!(r.attributes, 0);
            assert_eq!(r.key, a.key.as_deref());
            assert_eq!(r.value, a.value.as_deref());
            let headers: Vec<_> = r.headers.clone().collect();
            let expected: Vec<_> = a
                .headers
                .iter()
                .map(|(k, v)| (k.as_bytes(), v.as_deref()))
                .collect();
            assert_eq!(headers, expected);
            if seq >= 0 {
                assert_eq!(
                    r.sequence,
                    klog_log::format::increment_sequence(seq, a.offset_delta)
                );
            } else {
                assert_eq!(r.sequence, NO_SEQUENCE);
            }
        }
    }
}

#[derive(Debug)]
struct Appended {
    offset_delta: i32,
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

impl Appended {
    fn read(input: &mut Input<'_>, last: Option<i32>) -> Self {
        let op = input.u8();
        let offset_delta = if op & 0x40 != 0 {
            input.i32()
        } else {
            last.map_or(0, |l| l.saturating_add(1))
                .saturating_add(i32::from(op & 0x03))
        };
        let timestamp = if op & 0x80 != 0 {
            input.i64()
        } else if op & 0x04 != 0 {
            NO_TIMESTAMP
        } else {
            i64::from(input.u16())
        };
        let key = (op & 0x08 == 0).then(|| {
            let n = usize::from(input.u8() % 64);
            input.bytes(n).to_vec()
        });
        let value = (op & 0x10 == 0).then(|| {
            let n = usize::from(input.u16() % 1024);
            input.bytes(n).to_vec()
        });
        let header_count = if op & 0x20 != 0 { input.u8() % 4 } else { 0 };
        let headers = (0..header_count)
            .map(|_| {
                let n = usize::from(input.u8() % 16);
                let key = String::from_utf8_lossy(input.bytes(n)).into_owned();
                let flags = input.u8();
                let value = (flags & 0x80 == 0).then(|| {
                    let n = usize::from(flags % 32);
                    input.bytes(n).to_vec()
                });
                (key, value)
            })
            .collect();
        Appended {
            offset_delta,
            timestamp,
            key,
            value,
            headers,
        }
    }
}

fn check_end_txn_builder(input: &mut Input<'_>) {
    let marker = match input.u8() % 3 {
        0 => ControlRecordType::Abort,
        1 => ControlRecordType::Commit,
        _ => ControlRecordType::from_id(input.i16()),
    };
    let (producer_id, producer_epoch) = (input.i64(), input.i16());
    let (coordinator_epoch, timestamp) = (input.i32(), input.i64());
    let built = BatchBuilder::end_txn_marker(
        marker,
        producer_id,
        producer_epoch,
        coordinator_epoch,
        timestamp,
    );
    let valid = matches!(marker, ControlRecordType::Abort | ControlRecordType::Commit)
        && producer_id >= 0
        && (timestamp >= 0 || timestamp == NO_TIMESTAMP);
    let bytes = match built.and_then(|b| b.build()) {
        Ok(bytes) => bytes,
        Err(e) => {
            assert!(!valid, "end_txn_marker rejected valid input: {e}");
            return;
        }
    };
    assert!(
        valid,
        "end_txn_marker accepted {marker:?} for producer {producer_id}"
    );
    let (b, rest) = RecordBatch::parse(&bytes, POSITION).expect("a marker parses");
    exercise_batch(&b, &bytes, rest, POSITION);
    assert!(b.is_control() && b.is_transactional());
    assert_eq!(
        (b.producer_id(), b.producer_epoch(), b.base_sequence()),
        (producer_id, producer_epoch, NO_SEQUENCE)
    );
    assert_eq!(b.records_count(), 1);
    let expected = ControlRecord {
        key_version: 0,
        record_type: marker,
        value: ControlValue::EndTxn(EndTxnMarker {
            version: 0,
            coordinator_epoch,
        }),
    };
    assert_eq!(
        b.control_record().expect("a marker decodes"),
        Some(expected)
    );
}

fn check_mirror_pid_reset_builder(input: &mut Input<'_>) {
    let n = usize::from(input.u8() % 64);
    // The bytes that were once the cluster id stay consumed, so the committed seeds keep their meaning.
    input.bytes(n);
    let timestamp = input.i64();
    let valid = timestamp >= 0 || timestamp == NO_TIMESTAMP;
    let bytes = match BatchBuilder::mirror_pid_reset(timestamp).and_then(|b| b.build()) {
        Ok(bytes) => bytes,
        Err(e) => {
            assert!(!valid, "mirror_pid_reset rejected valid input: {e}");
            return;
        }
    };
    assert!(valid);
    let (b, rest) = RecordBatch::parse(&bytes, POSITION).expect("a barrier parses");
    exercise_batch(&b, &bytes, rest, POSITION);
    assert!(b.is_control() && !b.is_transactional());
    assert_eq!(
        (b.producer_id(), b.producer_epoch(), b.base_sequence()),
        (-1, -1, -1)
    );
    let expected = ControlRecord {
        key_version: 0,
        record_type: ControlRecordType::MirrorPidReset,
        value: ControlValue::MirrorPidReset(MirrorPidReset::new()),
    };
    assert_eq!(
        b.control_record().expect("a barrier decodes"),
        Some(expected)
    );
}

// ---------------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------------

/// Reads fixed-width big-endian fields from fuzz input; missing bytes read as 0.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0u8; N];
        for x in &mut a {
            *x = self.u8();
        }
        a
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes(self.array())
    }

    pub fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.array())
    }

    pub fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.array())
    }

    pub fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.array())
    }

    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.data.split_at(n.min(self.data.len()));
        self.data = b;
        a
    }

    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }
}

fn reason(e: &Error) -> &Corruption {
    match e {
        Error::CorruptBatch { reason, .. } => reason,
        other => panic!("a parser failed with a non-corruption error: {other}"),
    }
}

fn assert_corrupt_at(e: &Error, at: u64) {
    match e {
        Error::CorruptBatch { position, .. } => {
            assert_eq!(*position, at, "the error names the batch's position: {e}")
        }
        other => panic!("a parser failed with a non-corruption error: {other}"),
    }
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A KRaft metadata record's value (`MetadataRecord::decode`: frame, type, version, the schema-driven
/// flexible decoding) and the same bytes as each KRaft control record's value. A record that decodes
/// prints as Kafka's JSON (`{"type":"<its type>","version":V,"data":{...}}`); nothing panics.
pub fn metadata_record(data: &[u8]) {
    if let Ok(record) = MetadataRecord::decode(Some(data)) {
        let json = record.to_kafka_json();
        let head = format!(
            "{{\"type\":\"{}\",\"version\":{},\"data\":{{",
            record.type_name(),
            record.version
        );
        assert!(json.starts_with(&head) && json.ends_with("}}"), "{json}");
    }
    for t in [
        ControlRecordType::SnapshotHeader,
        ControlRecordType::SnapshotFooter,
        ControlRecordType::KraftVersion,
        ControlRecordType::KraftVoters,
    ] {
        match decode_control_value(t, data) {
            Some(Ok((_, message))) => assert!(message.to_kafka_json().starts_with('{')),
            Some(Err(_)) => {}
            None => panic!("{t:?} is a KRaft control record"),
        }
    }
}
