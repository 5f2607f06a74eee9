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
