//! `klog dump` of the coordinators' internal topics and of empty control batches, on batches built here.
//!
//! Each test states what klog must print; where Java is present, real Kafka's `kafka-dump-log` (with the
//! matching decoder) also prints the same bytes. Files that a real broker wrote are compared in
//! `kafka_internal_topics.rs`.

mod common;

use std::path::{Path, PathBuf};

use common::kafka::{dump_log, kafka_available};
use common::{klog, scratch_dir, stderr, stdout};
use klog::log::format::{BatchBuilder, Compression};

/// A v2 control batch with no records, as Kafka's log cleaner leaves one when it removes a transaction's
/// marker but keeps the batch (its producer state must survive).
fn empty_control_batch(base_offset: i64, producer_id: i64) -> Vec<u8> {
    let mut b = Vec::with_capacity(61);
    b.extend_from_slice(&base_offset.to_be_bytes());
    b.extend_from_slice(&49i32.to_be_bytes()); // batch_length: the header after it
    b.extend_from_slice(&3i32.to_be_bytes()); // partition_leader_epoch
    b.push(2); // magic
    b.extend_from_slice(&0u32.to_be_bytes()); // crc, set below
    b.extend_from_slice(&0x0030i16.to_be_bytes()); // attributes: transactional + control
    b.extend_from_slice(&0i32.to_be_bytes()); // last_offset_delta
    b.extend_from_slice(&1_700_000_000_000i64.to_be_bytes()); // base_timestamp
    b.extend_from_slice(&1_700_000_000_000i64.to_be_bytes()); // max_timestamp
    b.extend_from_slice(&producer_id.to_be_bytes());
    b.extend_from_slice(&0i16.to_be_bytes()); // producer_epoch
    b.extend_from_slice(&(-1i32).to_be_bytes()); // base_sequence
    b.extend_from_slice(&0i32.to_be_bytes()); // records_count
    let crc = klog::log::format::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

fn segment(dir: &Path, partition_dir: &str, bytes: &[u8]) -> PathBuf {
    let d = dir.join(partition_dir);
    std::fs::create_dir_all(&d).unwrap();
    let f = d.join("00000000000000000000.log");
    std::fs::write(&f, bytes).unwrap();
    f
}

fn klog_dump(file: &Path, flags: &[&str]) -> std::process::Output {
    let mut args = vec!["dump"];
    args.extend_from_slice(flags);
    args.push(file.to_str().unwrap());
    klog(&args)
}

fn assert_same_lines(ours: &str, kafka: &str, what: &str) {
    for (i, (o, k)) in ours.lines().zip(kafka.lines()).enumerate() {
        assert_eq!(o, k, "{what}: line {} differs", i + 1);
    }
    assert_eq!(ours, kafka, "{what}: bytes");
}

#[test]
fn an_empty_control_batch_is_printed_not_refused() {
    let dir = scratch_dir("cli-dump-empty-control");
    let mut bytes = Vec::new();
    let mut b = BatchBuilder::new(Compression::None);
    b.append(1_700_000_000_000, Some(b"k"), Some(b"v"), &[])
        .unwrap();
    b.build_into(&mut bytes).unwrap();
    bytes.extend_from_slice(&empty_control_batch(1, 4242));
    let file = segment(&dir, "t-0", &bytes);
    for flags in [&[][..], &["--deep"], &["--print-data-log"]] {
        let out = klog_dump(&file, flags);
        assert!(out.status.success(), "{flags:?}: {}", stderr(&out));
        let text = stdout(&out);
        let line = text
            .lines()
            .find(|l| l.starts_with("baseOffset: 1 "))
            .unwrap_or_else(|| panic!("{flags:?}: no line for the empty batch in {text}"));
        assert!(
            line.contains(" count: 0 ")
                && line.contains(" producerId: 4242 ")
                && line.contains(" isControl: true ")
                && line.ends_with(" isvalid: true"),
            "{line}"
        );
        assert_eq!(text.lines().filter(|l| l.starts_with("| ")).count(), {
            if flags.is_empty() {
                0
            } else {
                1
            }
        });
    }
    let out = klog_dump(&file, &["--json", "--deep"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let last: serde_json::Value =
        serde_json::from_str(stdout(&out).lines().last().unwrap()).unwrap();
    assert_eq!(last["is_control"], true);
    assert_eq!(last["record_count"], 0);
    assert_eq!(last["control_type"], serde_json::Value::Null);
    assert_eq!(last["records"], serde_json::json!([]));
    if kafka_available() {
        for (ours, theirs) in [
            (&[][..], &[][..]),
            (&["--deep"], &["--deep-iteration"]),
            (&["--print-data-log"], &["--print-data-log"]),
        ] {
            let kafka = dump_log(std::slice::from_ref(&file), theirs);
            assert_same_lines(&stdout(&klog_dump(&file, ours)), &kafka, "empty control");
        }
    }
}

/// Classic (non-flexible) encodings, to write records of every older version by hand.
fn s(v: &str) -> Vec<u8> {
    [&(v.len() as i16).to_be_bytes()[..], v.as_bytes()].concat()
}

fn b(v: &[u8]) -> Vec<u8> {
    [&(v.len() as i32).to_be_bytes()[..], v].concat()
}

fn i16b(v: i16) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

fn i32b(v: i32) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

fn i64b(v: i64) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

const NULL_STRING: [u8; 2] = [0xff, 0xff];
const NULL_BYTES: [u8; 4] = [0xff; 4];

/// A classic consumer group's member: subscription v1 (owned partitions) and assignment v0 (user data).
fn classic_member(version: i16) -> Vec<u8> {
    let subscription = [
        i16b(1),
        i32b(1),
        s("orders"),
        NULL_BYTES.to_vec(),
        i32b(1),
        s("orders"),
        i32b(1),
        i32b(0),
    ]
    .concat();
    let assignment = [
        i16b(0),
        i32b(1),
        s("orders"),
        i32b(2),
        i32b(0),
        i32b(1),
        b(b"ud"),
    ]
    .concat();
    let mut m = s("member-1");
    if version >= 3 {
        m.extend(NULL_STRING);
    }
    m.extend([s("client"), s("/127.0.0.1")].concat());
    if version >= 1 {
        m.extend(i32b(300_000));
    }
    m.extend([i32b(45_000), b(&subscription), b(&assignment)].concat());
    m
}

fn group_metadata_value(version: i16, protocol_type: &str) -> Vec<u8> {
    let mut v = [
        i16b(version),
        s(protocol_type),
        i32b(3),
        s("range"),
        s("member-1"),
    ]
    .concat();
    if version >= 2 {
        v.extend(i64b(1_700_000_000_123));
    }
    v.extend([i32b(1), classic_member(version)].concat());
    v
}

fn offsets_records() -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let key1 = [i16b(1), s("g"), s("orders"), i32b(2)].concat();
    let commit = |version: i16| {
        let mut v = [i16b(version), i64b(5)].concat();
        if version >= 3 {
            v.extend(i32b(7));
        }
        v.extend([s("m\u{1}\"é"), i64b(1_700_000_000_000)].concat());
        if version == 1 {
            v.extend(i64b(1_700_000_600_000));
        }
        v
    };
    let mut records: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0..=3)
        .map(|version| (key1.clone(), Some(commit(version))))
        .collect();
    records.push((
        [i16b(0), s("legacy"), s("orders"), i32b(0)].concat(),
        Some(commit(0)),
    ));
    for version in 0..=3 {
        records.push((
            [i16b(2), s("g")].concat(),
            Some(group_metadata_value(version, "consumer")),
        ));
    }
    records.push((
        [i16b(2), s("g")].concat(),
        Some(group_metadata_value(1, "connect")),
    ));
    records.push((key1.clone(), None)); // a tombstone
    records.push(([i16b(99), s("g")].concat(), Some(i16b(0)))); // a type from a newer release
    records.push((key1.clone(), Some([i16b(9), i64b(5)].concat()))); // an unknown version
    records.push((key1.clone(), Some(commit(3)[..7].to_vec()))); // cut inside the offset
    records.push(([i16b(1), NULL_STRING.to_vec()].concat(), Some(commit(3)))); // a null group
    records.push((vec![0], Some(commit(3)))); // no record type
    records
}

fn transaction_records() -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let key = [i16b(0), s("tx-1")].concat();
    let value = |status: i8, partitions: Option<&[(&str, &[i32])]>| {
        let mut v = [
            i16b(0),
            i64b(1000),
            i16b(2),
            i32b(60_000),
            vec![status as u8],
        ]
        .concat();
        match partitions {
            None => v.extend(NULL_BYTES),
            Some(ps) => {
                v.extend(i32b(ps.len() as i32));
                for (topic, ids) in ps {
                    v.extend([s(topic), i32b(ids.len() as i32)].concat());
                    for id in *ids {
                        v.extend(i32b(*id));
                    }
                }
            }
        }
        v.extend([i64b(1_700_000_000_500), i64b(1_700_000_000_000)].concat());
        v
    };
    vec![
        (key.clone(), Some(value(1, Some(&[("orders", &[0, 3])])))),
        (key.clone(), Some(value(4, None))),
        (key.clone(), Some(value(9, Some(&[])))), // a state this release does not know
        (key, None),
    ]
}

fn records_segment(
    dir: &Path,
    partition_dir: &str,
    records: &[(Vec<u8>, Option<Vec<u8>>)],
) -> PathBuf {
    let mut bytes = Vec::new();
    for (i, (k, v)) in records.iter().enumerate() {
        let mut batch = BatchBuilder::new(Compression::None).base_offset(i as i64);
        batch
            .append(1_700_000_000_000 + i as i64, Some(k), v.as_deref(), &[])
            .unwrap();
        batch.build_into(&mut bytes).unwrap();
    }
    segment(dir, partition_dir, &bytes)
}

#[test]
fn every_older_version_decodes_as_kafka_decodes_it() {
    let dir = scratch_dir("cli-dump-coordinator-versions");
    let offsets = records_segment(&dir, "__consumer_offsets-0", &offsets_records());
    let out = klog_dump(&offsets, &[]);
    let text = stdout(&out);
    // The decode errors are reported and make the exit status 1; the type from a newer release does not.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).matches("record at offset").count(),
        4,
        "{}",
        stderr(&out)
    );
    for want in [
        r#"key: {"type":"1","data":{"group":"g","topic":"orders","partition":2}} payload: {"version":"1","data":{"offset":5,"metadata":"m\u0001\"é","commitTimestamp":1700000000000,"expireTimestamp":1700000600000}}"#,
        r#"payload: {"version":"3","data":{"offset":5,"leaderEpoch":7,"metadata":"m\u0001\"é","commitTimestamp":1700000000000}}"#,
        r#""subscription":{"topics":["orders"],"userData":null,"ownedPartitions":[{"topic":"orders","partitions":[0]}]},"assignment":{"assignedPartitions":[{"topic":"orders","partitions":[0,1]}],"userData":"dWQ="}"#,
        " payload: <DELETE>",
        " key: Unknown record type 99 at offset 11, skipping.",
        " key: Error at offset 12, skipping. Found an unknown record version 9 for 1 type",
        " key: Error at offset 13, skipping. Could not read record with version 3 from value's buffer due to: null.",
        " key: Error at offset 14, skipping. Could not read record with version 1 from key's buffer due to: non-nullable field group was serialized as null.",
        " key: Error at offset 15, skipping. Could not read version from key's buffer.",
    ] {
        assert!(text.contains(want), "no {want} in\n{text}");
    }
    let transactions = records_segment(&dir, "__transaction_state-0", &transaction_records());
    let out = klog_dump(&transactions, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ttext = stdout(&out);
    for want in [
        r#"key: {"type":"0","data":{"transactionalId":"tx-1"}} payload: {"version":"0","data":{"producerId":1000,"producerEpoch":2,"transactionTimeoutMs":60000,"transactionStatus":"Ongoing","transactionPartitions":[{"topic":"orders","partitionIds":[0,3]}],"transactionLastUpdateTimestampMs":1700000000500,"transactionStartTimestampMs":1700000000000}}"#,
        r#""transactionStatus":"CompleteCommit","transactionPartitions":null"#,
        r#""transactionStatus":"9""#,
    ] {
        assert!(ttext.contains(want), "no {want} in\n{ttext}");
    }
    // Outside the topic's directory, the flag chooses the decoder; --no-decoder turns the choice off.
    let elsewhere = records_segment(&dir, "t-0", &transaction_records());
    let flagged = stdout(&klog_dump(&elsewhere, &["--transaction-log-decoder"]));
    assert_eq!(
        flagged.lines().skip(1).collect::<Vec<_>>(),
        ttext.lines().skip(1).collect::<Vec<_>>()
    );
    let raw = stdout(&klog_dump(&transactions, &["--no-decoder", "--deep"]));
    assert!(
        !raw.contains("transactionalId") && raw.contains("| offset: 3 "),
        "{raw}"
    );
    if kafka_available() {
        let kafka = dump_log(std::slice::from_ref(&offsets), &["--offsets-decoder"]);
        assert_same_lines(&text, &kafka, "__consumer_offsets, every version");
        let kafka = dump_log(
            std::slice::from_ref(&transactions),
            &["--transaction-log-decoder"],
        );
        assert_same_lines(&ttext, &kafka, "__transaction_state, every version");
    }
}

/// CRC-32 (IEEE), the legacy message checksum.
fn crc32_ieee(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A magic-1 message (an old broker's `__consumer_offsets` segment holds these), uncompressed.
fn legacy_v1_message(offset: i64, key: &[u8], value: Option<&[u8]>) -> Vec<u8> {
    let mut body = vec![1u8, 0]; // magic 1, attributes: no codec, CreateTime
    body.extend(i64b(1_500_000_000_000 + offset));
    body.extend(b(key));
    match value {
        Some(v) => body.extend(b(v)),
        None => body.extend(NULL_BYTES),
    }
    let crc = crc32_ieee(&body);
    [
        i64b(offset),
        i32b(4 + body.len() as i32),
        crc.to_be_bytes().to_vec(),
        body,
    ]
    .concat()
}

#[test]
fn an_old_brokers_message_set_decodes_as_kafka_decodes_it() {
    let dir = scratch_dir("cli-dump-coordinator-legacy");
    let key = [i16b(1), s("old-group"), s("orders"), i32b(0)].concat();
    let value = [
        i16b(1),
        i64b(17),
        s(""),
        i64b(1_500_000_000_000),
        i64b(1_500_086_400_000),
    ]
    .concat();
    let bytes = [
        legacy_v1_message(0, &key, Some(&value)),
        legacy_v1_message(
            1,
            &[i16b(2), s("old-group")].concat(),
            Some(&group_metadata_value(0, "consumer")),
        ),
        legacy_v1_message(2, &key, None),
    ]
    .concat();
    let file = segment(&dir, "__consumer_offsets-7", &bytes);
    let out = klog_dump(&file, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains(r#"isValid: true crc: "#) && text.contains(r#"payload: {"version":"1","data":{"offset":17,"metadata":"","commitTimestamp":1500000000000,"expireTimestamp":1500086400000}}"#), "{text}");
    assert!(text.contains(" payload: <DELETE>"), "{text}");
    let json = stdout(&klog_dump(&file, &["--json"]));
    assert_eq!(
        json.matches(r#""coordinator":{"record_type":"#).count(),
        3,
        "{json}"
    );
    if kafka_available() {
        let kafka = dump_log(std::slice::from_ref(&file), &["--offsets-decoder"]);
        assert_same_lines(&text, &kafka, "a magic-1 __consumer_offsets segment");
    }
}
