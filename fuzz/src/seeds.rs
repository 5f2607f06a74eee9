//! The seed corpus of every target, generated from klog's own builders and from hand-built legacy entries
//! and control values (no bytes copied from elsewhere). `fuzz/seeds/<target>/<name>` holds what
//! [`all`] returns; regenerate with
//! `KLOG_WRITE_SEEDS=1 cargo test --test fuzz_corpus write_seeds` (without the variable, the test checks them).

use klog_log::format::varint::{write_unsigned_varint, write_varint, write_varlong};
use klog_log::format::{
    crc32c, BatchBuilder, Compression, ControlRecordType, EndTxnMarker, Header, MirrorPidReset,
    RecordBatch, CRC_START, RECORD_BATCH_OVERHEAD,
};

/// One seed file.
#[derive(Debug, Clone)]
pub struct Seed {
    pub target: &'static str,
    pub name: String,
    pub bytes: Vec<u8>,
}

const T0: i64 = 1_700_000_000_000;
const CLUSTER_ID: &str = "MkU3OEVBNTcwNTJENDM2Qg";

/// Every seed of every target.
pub fn all() -> Vec<Seed> {
    let mut seeds = Vec::new();
    let mut add = |target: &'static str, name: &str, bytes: Vec<u8>| {
        seeds.push(Seed {
            target,
            name: name.to_owned(),
            bytes,
        })
    };
    let batches = v2_batches();
    for (name, bytes) in &batches {
        add("batch_parse", name, bytes.clone());
        add("records", name, records_input(bytes));
    }
    for (name, bytes) in segments(&batches) {
        add("batches_iter", &name, bytes);
    }
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let target = match codec {
            Compression::Gzip => "codec_gzip",
            Compression::Snappy => "codec_snappy",
            Compression::Lz4 => "codec_lz4",
            _ => "codec_zstd",
        };
        for (name, bytes) in codec_streams(codec, &batches) {
            add(target, &name, bytes);
        }
    }
    for (name, bytes) in legacy_entries() {
        add("legacy", &name, bytes);
    }
    for (name, bytes) in legacy_wrappers() {
        add("legacy_wrapper", &name, bytes);
    }
    for (name, bytes) in control_values() {
        add("control_record", &name, bytes);
    }
    for (name, bytes) in varints() {
        add("varint", &name, bytes);
    }
    for (name, bytes) in builder_inputs() {
        add("builder_roundtrip", &name, bytes);
    }
    for (name, bytes) in coordinator_records() {
        add("coordinator_record", &name, bytes);
    }
    for (name, bytes) in metadata_records() {
        add("metadata_record", &name, bytes);
    }
    seeds
}

/// KRaft metadata record values, hand-built from Kafka's schemas: frame version 1, type, version, fields.
fn metadata_records() -> Vec<(String, Vec<u8>)> {
    let compact = |s: &str| {
        let mut v = Vec::new();
        write_unsigned_varint(&mut v, s.len() as u32 + 1);
        v.extend_from_slice(s.as_bytes());
        v
    };
    let id = [7u8; 16];
    let mut topic = vec![1, 2, 0];
    topic.extend(compact("topic"));
    topic.extend(id);
    topic.push(0);
    let config = |value: Option<&str>| {
        let mut v = vec![1, 4, 0, 2];
        v.extend(compact("topic"));
        v.extend(compact("index.interval.bytes"));
        v.extend(value.map_or(vec![0], compact));
        v.push(0);
        v
    };
    // PartitionRecord v2: partition 0, replicas [1, 2], isr [1], no removing/adding, leader 1, epochs,
    // directories [id], tagged: leaderRecoveryState (0) = 1, eligibleLeaderReplicas (1) = [2].
    let mut partition = vec![1, 3, 2, 0, 0, 0, 0];
    partition.extend(id);
    partition.extend([3, 0, 0, 0, 1, 0, 0, 0, 2, 2, 0, 0, 0, 1, 1, 1]);
    partition.extend([0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 5, 2]);
    partition.extend(id);
    partition.extend([2, 0, 1, 1, 1, 5, 2, 0, 0, 0, 2]);
    // PartitionChangeRecord v0: partition 3, tagged leader (1) = 2 and isr (0) = [2].
    let mut change = vec![1, 5, 0, 0, 0, 0, 3];
    change.extend(id);
    change.extend([2, 0, 5, 2, 0, 0, 0, 2, 1, 4, 0, 0, 0, 2]);
    let mut feature = vec![1, 12, 0];
    feature.extend(compact("metadata.version"));
    feature.extend([0, 33, 0]);
    let mut begin = vec![1, 23, 0, 1, 0];
    let name = compact("Bootstrap records");
    write_unsigned_varint(&mut begin, name.len() as u32);
    begin.extend(name);
    // SnapshotHeader (version 0, lastContainedLogTimestamp), a control value.
    let mut header = vec![0, 0];
    header.extend(T0.to_be_bytes());
    header.push(0);
    vec![
        ("topic".into(), topic),
        ("config".into(), config(Some("512"))),
        ("config_delete".into(), config(None)),
        ("partition_v2_tagged".into(), partition),
        ("partition_change_tagged".into(), change),
        ("feature_level".into(), feature),
        ("begin_transaction_named".into(), begin),
        ("snapshot_header_value".into(), header),
    ]
}

// ---------------------------------------------------------------------------------------------------------
// v2 batches
// ---------------------------------------------------------------------------------------------------------

fn data_batch(codec: Compression, records: usize) -> BatchBuilder {
    let mut b = BatchBuilder::new(codec)
        .base_offset(100)
        .partition_leader_epoch(3);
    for i in 0..records {
        let key = format!("key-{i}");
        let value = format!("value-{i}-").repeat(1 + i % 3);
        let headers = [
            Header {
                key: "trace",
                value: Some(b"abc"),
            },
            Header {
                key: "null",
                value: None,
            },
        ];
        b.append(
            T0 + i as i64,
            Some(key.as_bytes()),
            Some(value.as_bytes()),
            &headers[..i % 3],
        )
        .expect("valid record");
    }
    b
}

fn build(b: &BatchBuilder) -> Vec<u8> {
    b.build().expect("a batch with records builds")
}

/// The v2 batches every batch-level target starts from.
pub fn v2_batches() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for codec in Compression::ALL {
        out.push((
            format!("data_{}", codec.name()),
            build(&data_batch(codec, 5)),
        ));
    }
    let txn = data_batch(Compression::None, 3)
        .producer(42, 7, 100)
        .transactional(true);
    out.push(("transactional".into(), build(&txn)));
    let idempotent = data_batch(Compression::Zstd, 4).producer(43, 0, i32::MAX - 1);
    out.push(("idempotent_sequence_wrap_zstd".into(), build(&idempotent)));
    let lat = data_batch(Compression::Lz4, 3).log_append_time(T0 + 5000);
    out.push(("log_append_time_lz4".into(), build(&lat)));

    let mut compacted = BatchBuilder::new(Compression::None)
        .base_offset(1000)
        .delete_horizon_ms(T0 + 86_400_000);
    compacted
        .append_with_offset_delta(0, T0, Some(b"a"), Some(b"1"), &[])
        .expect("valid");
    compacted
        .append_with_offset_delta(3, T0 + 1, Some(b"b"), None, &[])
        .expect("valid tombstone");
    compacted
        .append_with_offset_delta(7, -1, None, Some(b""), &[])
        .expect("valid");
    out.push(("compacted_gaps_tombstone".into(), build(&compacted)));

    for (name, marker) in [
        ("commit", ControlRecordType::Commit),
        ("abort", ControlRecordType::Abort),
    ] {
        let b = BatchBuilder::end_txn_marker(marker, 42, 7, 11, T0 + 9)
            .expect("valid marker")
            .base_offset(103);
        out.push((name.into(), build(&b)));
    }
    let reset = BatchBuilder::mirror_pid_reset(T0).expect("valid barrier");
    out.push(("mirror_pid_reset".into(), build(&reset)));
    out.push(("leader_change".into(), leader_change_batch()));
    out
}

/// A KRaft LEADER_CHANGE control batch: built as data, then flagged as control with the CRC recomputed.
fn leader_change_batch() -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None).partition_leader_epoch(5);
    b.append(
        T0,
        Some(&ControlRecordType::LeaderChange.key()),
        Some(&leader_change_value(1, &[1, 2, 3], &[1, 2])),
        &[],
    )
    .expect("valid");
    let mut bytes = build(&b);
    bytes[22] |= 0x20;
    let crc = crc32c(&bytes[CRC_START..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    bytes
}

fn leader_change_value(leader: i32, voters: &[i32], granting: &[i32]) -> Vec<u8> {
    let mut v = 0i16.to_be_bytes().to_vec();
    v.extend_from_slice(&leader.to_be_bytes());
    for list in [voters, granting] {
        write_unsigned_varint(&mut v, list.len() as u32 + 1);
        for id in list {
            v.extend_from_slice(&id.to_be_bytes());
            v.push(0); // tagged fields
        }
    }
    v.push(0);
    v
}

/// The `records` target's input for a built batch: its header fields and its uncompressed records.
fn records_input(batch: &[u8]) -> Vec<u8> {
    let (b, _) = RecordBatch::parse(batch, 0).expect("a built batch parses");
    let codec = b.compression().expect("a known codec");
    let mut payload = Vec::new();
    codec
        .decompress(b.records_payload(), &mut payload, 1 << 20)
        .expect("a built batch inflates");
    let mut out = vec![batch[22], batch[21]];
    out.extend_from_slice(&b.records_count().to_be_bytes());
    out.extend_from_slice(&b.base_sequence().to_be_bytes());
    out.extend_from_slice(&b.base_offset().to_be_bytes());
    out.extend_from_slice(&b.base_timestamp().to_be_bytes());
    out.extend_from_slice(&b.last_offset_delta().to_be_bytes());
    out.extend_from_slice(&b.max_timestamp().to_be_bytes());
    out.extend_from_slice(&payload);
    out
}

/// Concatenations as a segment file or a fetch response holds them, with the tails `Batches` tells apart.
fn segments(batches: &[(String, Vec<u8>)]) -> Vec<(String, Vec<u8>)> {
    let get = |name: &str| {
        batches
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.clone())
            .expect("a known batch")
    };
    let concat = |names: &[&str]| names.iter().flat_map(|n| get(n)).collect::<Vec<u8>>();
    let mut out = Vec::new();
    let txn = concat(&[
        "transactional",
        "commit",
        "data_none",
        "abort",
        "mirror_pid_reset",
    ]);
    out.push(("transactions_clean".into(), txn.clone()));
    let mut zeros = concat(&["data_none", "commit"]);
    zeros.extend_from_slice(&[0u8; 96]);
    out.push(("zero_filled_tail".into(), zeros));
    let mut partial = concat(&["data_gzip", "leader_change"]);
    partial.extend_from_slice(&get("data_none")[..40]);
    out.push(("partial_tail".into(), partial));
    out.push((
        "every_codec".into(),
        concat(&[
            "data_gzip",
            "data_snappy",
            "data_lz4",
            "data_zstd",
            "compacted_gaps_tombstone",
        ]),
    ));
    let mut mixed: Vec<u8> = legacy_entries()
        .into_iter()
        .filter(|(n, _)| n.starts_with("v0_plain") || n.starts_with("v1_gzip"))
        .flat_map(|(_, b)| b)
        .collect();
    mixed.extend_from_slice(&get("data_none"));
    out.push(("legacy_then_v2".into(), mixed));
    let mut corrupt = get("data_none");
    let mut bad = get("commit");
    let last = bad.len() - 1;
    bad[last] ^= 0x01;
    corrupt.extend_from_slice(&bad);
    corrupt.extend_from_slice(&get("abort"));
    out.push(("crc_mismatch".into(), corrupt));
    out
}

// ---------------------------------------------------------------------------------------------------------
// Codecs
// ---------------------------------------------------------------------------------------------------------

/// Repetitive text past snappy's 32 KiB and LZ4's 64 KiB blocks that still compresses to a small seed.
fn pattern(n: usize) -> Vec<u8> {
    b"kafka log segment "
        .iter()
        .copied()
        .cycle()
        .take(n)
        .collect()
}

fn compress(codec: Compression, input: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    codec.compress(input, &mut out);
    out
}

fn codec_streams(codec: Compression, batches: &[(String, Vec<u8>)]) -> Vec<(String, Vec<u8>)> {
    let records = &batches
        .iter()
        .find(|(n, _)| n == "data_none")
        .expect("data_none")
        .1[RECORD_BATCH_OVERHEAD..];
    let mut out = vec![
        ("empty".to_string(), compress(codec, b"")),
        (
            "text".to_string(),
            compress(codec, b"hello hello hello kafka"),
        ),
        ("records".to_string(), compress(codec, records)),
        ("pattern_70k".to_string(), compress(codec, &pattern(70_000))),
    ];
    // Concatenated streams: gzip members, xerial streams, zstd frames; each decoder reads on.
    let mut two = compress(codec, b"first ");
    two.extend_from_slice(&compress(codec, b"second"));
    out.push(("two_streams".to_string(), two));
    if codec == Compression::Snappy {
        out.push(("raw_block".to_string(), raw_snappy_abcd()));
    }
    out
}

/// A raw (librdkafka-style, unframed) snappy block, hand-encoded: "abcd" four times.
pub fn raw_snappy_abcd() -> Vec<u8> {
    // length 16 | literal "abcd" | copy(len 8, offset 4) | copy(len 4, offset 4)
    vec![0x10, 0x0c, b'a', b'b', b'c', b'd', 0x11, 0x04, 0x01, 0x04]
}

// ---------------------------------------------------------------------------------------------------------
// Legacy v0/v1
// ---------------------------------------------------------------------------------------------------------

/// CRC-32 (IEEE, `java.util.zip.CRC32`), bitwise: independent of the crate under test.
pub fn crc32_ieee(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// One legacy log entry: `offset | size | crc | magic | attributes | [timestamp] | key | value`.
pub fn legacy_entry(
    offset: i64,
    magic: u8,
    attributes: u8,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Vec<u8> {
    let mut record = vec![magic, attributes];
    if magic == 1 {
        record.extend_from_slice(&timestamp.to_be_bytes());
    }
    for field in [key, value] {
        match field {
            None => record.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(b) => {
                record.extend_from_slice(&(b.len() as i32).to_be_bytes());
                record.extend_from_slice(b);
            }
        }
    }
    let mut out = offset.to_be_bytes().to_vec();
    out.extend_from_slice(&((record.len() + 4) as i32).to_be_bytes());
    out.extend_from_slice(&crc32_ieee(&record).to_be_bytes());
    out.extend_from_slice(&record);
    out
}

fn inner_set(magic: u8, first_offset: i64, n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| {
            let value = format!("legacy value {i}");
            legacy_entry(
                first_offset + i as i64,
                magic,
                0,
                T0 + i as i64,
                Some(format!("k{i}").as_bytes()),
                Some(value.as_bytes()),
            )
        })
        .collect()
}

fn legacy_entries() -> Vec<(String, Vec<u8>)> {
    let mut out = vec![
        (
            "v0_plain".to_string(),
            legacy_entry(5, 0, 0, 0, None, Some(b"a v0 message")),
        ),
        (
            "v1_create_time".to_string(),
            legacy_entry(6, 1, 0, T0, Some(b"key"), Some(b"a v1 message")),
        ),
        (
            "v1_log_append_time_null_value".to_string(),
            legacy_entry(7, 1, 0x08, T0 + 1, Some(b"key"), None),
        ),
    ];
    for (codec, magic) in [
        (Compression::Gzip, 1u8),
        (Compression::Snappy, 0),
        (Compression::Lz4, 1),
        (Compression::Lz4, 0),
    ] {
        // v1 inner offsets are relative and the wrapper carries the last absolute one; v0 inner are absolute.
        let (inner, wrapper_offset) = if magic == 1 {
            (inner_set(1, 0, 3), 102)
        } else {
            (inner_set(0, 100, 3), 102)
        };
        let value = compress(codec, &inner);
        let name = format!("v{magic}_{}_wrapper", codec.name());
        let entry = legacy_entry(wrapper_offset, magic, codec.id(), T0, None, Some(&value));
        out.push((name, entry));
    }
    out
}

fn legacy_wrappers() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, flags, magic) in [
        ("v1_gzip", 0x04u8, 1u8),
        ("v0_snappy", 0x01, 0),
        ("v1_lz4_log_append_time", 0x04 | 0x08 | 0x02, 1),
        ("v0_lz4", 0x02, 0),
    ] {
        let mut input = vec![flags];
        input.extend_from_slice(&102i64.to_be_bytes());
        input.extend_from_slice(&(T0 + 77).to_be_bytes());
        let first = if magic == 1 { 0 } else { 100 };
        input.extend_from_slice(&inner_set(magic, first, 3));
        out.push((name.to_string(), input));
    }
    out
}

// ---------------------------------------------------------------------------------------------------------
// Control values, varints, builder inputs
// ---------------------------------------------------------------------------------------------------------

fn control_input(flags: u8, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = vec![flags, key.len() as u8];
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    out
}

fn control_values() -> Vec<(String, Vec<u8>)> {
    let marker = |epoch| {
        EndTxnMarker {
            version: 0,
            coordinator_epoch: epoch,
        }
        .encode()
    };
    let key = |t: ControlRecordType| t.key();
    let mut tagged = vec![0, 0, 3, b'a', b'b'];
    tagged.extend_from_slice(&[1, 9, 2, 0xaa, 0xbb]);
    vec![
        (
            "commit".into(),
            control_input(0, &key(ControlRecordType::Commit), &marker(5)),
        ),
        (
            "abort".into(),
            control_input(0, &key(ControlRecordType::Abort), &marker(0)),
        ),
        (
            "commit_v1_key_v3_marker".into(),
            control_input(0, &[0, 1, 0, 1], &[0, 3, 0, 0, 0, 9, 7]),
        ),
        (
            "mirror_pid_reset".into(),
            control_input(
                0,
                &key(ControlRecordType::MirrorPidReset),
                &MirrorPidReset::with_source_cluster_id(CLUSTER_ID).encode(),
            ),
        ),
        (
            "mirror_pid_reset_newest".into(),
            control_input(
                0,
                &key(ControlRecordType::MirrorPidReset),
                &MirrorPidReset::new().encode(),
            ),
        ),
        (
            "mirror_pid_reset_tagged".into(),
            control_input(0, &key(ControlRecordType::MirrorPidReset), &tagged),
        ),
        (
            "leader_change".into(),
            control_input(
                0,
                &key(ControlRecordType::LeaderChange),
                &leader_change_value(2, &[1, 2, 3], &[2, 3]),
            ),
        ),
        (
            "snapshot_header_raw".into(),
            control_input(0, &key(ControlRecordType::SnapshotHeader), &[0, 0, 0, 0, 0]),
        ),
        (
            "unknown_type_null_value".into(),
            control_input(0x02, &[0, 0, 0, 42], &[]),
        ),
        ("null_key".into(), control_input(0x01, &[], &marker(1))),
    ]
}

fn varints() -> Vec<(String, Vec<u8>)> {
    let mut ints = Vec::new();
    for v in [0, -1, 1, 63, -64, 64, 8191, i32::MAX, i32::MIN] {
        write_varint(&mut ints, v);
    }
    let mut longs = Vec::new();
    for v in [0, -1, i64::from(i32::MAX) + 1, i64::MAX, i64::MIN] {
        write_varlong(&mut longs, v);
    }
    let mut nullable = Vec::new();
    write_varint(&mut nullable, 3);
    nullable.extend_from_slice(b"abc");
    write_varint(&mut nullable, -1);
    write_varint(&mut nullable, 0);
    vec![
        ("varints".into(), ints),
        ("varlongs".into(), longs),
        ("nullable_bytes".into(), nullable),
        (
            "overlong_5th_byte".into(),
            vec![0xff, 0xff, 0xff, 0xff, 0x7f, 0x01],
        ),
        ("fixed_width".into(), (0u8..32).collect()),
    ]
}

/// Inputs in `builder_roundtrip`'s layout (see `BatchSpec::read` and `Appended::read` in `lib.rs`).
fn builder_inputs() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for codec in Compression::ALL {
        // flags: codec, producer (0x40), transactional (0x10) for odd ids, LogAppendTime (0x08) for lz4.
        let mut flags = codec.id() | 0x40;
        if codec.id() % 2 == 1 {
            flags |= 0x10;
        }
        if codec == Compression::Lz4 {
            flags |= 0x08;
        }
        let mut v = vec![flags];
        v.extend_from_slice(&(200 + i64::from(codec.id())).to_be_bytes()); // base offset
        v.extend_from_slice(&4i32.to_be_bytes()); // partition leader epoch
        if flags & 0x08 != 0 {
            v.extend_from_slice(&(T0 + 1).to_be_bytes()); // append time
        }
        v.extend_from_slice(&99i64.to_be_bytes()); // producer id
        v.extend_from_slice(&2i16.to_be_bytes()); // epoch
        v.extend_from_slice(&(i32::MAX - 1).to_be_bytes()); // base sequence
        v.push(4); // records
        for i in 0..4u8 {
            // op: offset gap i%4, headers when i is odd
            let op = (i % 4) | if i % 2 == 1 { 0x20 } else { 0 };
            v.push(op);
            v.extend_from_slice(&(1000 + u16::from(i)).to_be_bytes()); // timestamp
            v.push(3);
            v.extend_from_slice(b"key");
            v.extend_from_slice(&12u16.to_be_bytes());
            v.extend_from_slice(b"value value ");
            if op & 0x20 != 0 {
                v.push(1); // one header
                v.push(2);
                v.extend_from_slice(b"hk");
                v.push(3);
                v.extend_from_slice(b"hv!");
            }
        }
        v.push(0x03); // both control builders
        v.push(1); // COMMIT
        v.extend_from_slice(&99i64.to_be_bytes());
        v.extend_from_slice(&2i16.to_be_bytes());
        v.extend_from_slice(&6i32.to_be_bytes());
        v.extend_from_slice(&T0.to_be_bytes());
        v.push(CLUSTER_ID.len() as u8);
        v.extend_from_slice(CLUSTER_ID.as_bytes());
        v.extend_from_slice(&T0.to_be_bytes());
        out.push((format!("{}_producer", codec.name()), v));
    }
    // Delete horizon, explicit offset deltas, a null timestamp and an invalid one (rejected by append).
    let mut v = vec![0x20];
    v.extend_from_slice(&0i64.to_be_bytes());
    v.extend_from_slice(&(-1i32).to_be_bytes());
    v.extend_from_slice(&(T0 + 86_400_000).to_be_bytes()); // delete horizon
    v.push(3);
    v.push(0x40 | 0x04 | 0x08 | 0x10); // explicit delta, null timestamp, null key, null value
    v.extend_from_slice(&5i32.to_be_bytes());
    v.push(0x80 | 0x08 | 0x10); // invalid timestamp: rejected
    v.extend_from_slice(&(-5i64).to_be_bytes());
    v.push(0x01); // gap of one after delta 5
    v.extend_from_slice(&7u16.to_be_bytes());
    v.push(0);
    v.extend_from_slice(&0u16.to_be_bytes());
    v.push(0);
    out.push(("delete_horizon_deltas".into(), v));
    out
}

// ---------------------------------------------------------------------------------------------------------
// coordinator records
// ---------------------------------------------------------------------------------------------------------

/// `flags | key length | key | value` for the coordinator_record target: offset commits at every value
/// version, a tombstone, and a transaction log record.
fn coordinator_records() -> Vec<(String, Vec<u8>)> {
    use klog_log::coordinator::{OffsetCommitKey, OffsetCommitValue};
    let input =
        |flags: u8, key: &[u8], value: &[u8]| [&[flags, key.len() as u8][..], key, value].concat();
    let key = OffsetCommitKey {
        group: "group".into(),
        topic: "orders".into(),
        partition: 3,
    }
    .encode()
    .expect("a short key encodes");
    let value = OffsetCommitValue {
        offset: 42,
        leader_epoch: 5,
        metadata: "meta".into(),
        commit_timestamp: T0,
        expire_timestamp: T0 + 1000,
        topic_id: Some([7; 16]),
    };
    let mut out: Vec<(String, Vec<u8>)> = (0..=4)
        .map(|v| {
            let bytes = value.encode(v).expect("a valid version encodes");
            (format!("offset-commit-v{v}"), input(0, &key, &bytes))
        })
        .collect();
    out.push(("offset-commit-tombstone".into(), input(0x02, &key, &[])));
    // TransactionLogValue v1: producer 1000 epoch 2, 60 s, Ongoing, orders [0], timestamps, one tag.
    let txn_key = [&[0u8, 0, 0, 4][..], b"tx-1"].concat();
    let mut txn_value = vec![0u8, 1];
    txn_value.extend_from_slice(&1000i64.to_be_bytes());
    txn_value.extend_from_slice(&2i16.to_be_bytes());
    txn_value.extend_from_slice(&60_000i32.to_be_bytes());
    txn_value.extend_from_slice(&[1, 2, 7]);
    txn_value.extend_from_slice(b"orders");
    txn_value.extend_from_slice(&[2, 0, 0, 0, 0, 0]);
    txn_value.extend_from_slice(&T0.to_be_bytes());
    txn_value.extend_from_slice(&T0.to_be_bytes());
    txn_value.extend_from_slice(&[1, 2, 2, 0, 2]);
    out.push((
        "transaction-log-v1".into(),
        input(0x01, &txn_key, &txn_value),
    ));
    out
}
