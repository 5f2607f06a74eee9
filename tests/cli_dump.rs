//! `klog dump` on bad input: a clear message naming the file, the position and the check; a non-zero exit;
//! never a panic.

mod common;

use common::{klog, scratch_dir, stderr, stdout};
use klog::log::format::{BatchBuilder, Compression};
use serde_json::Value;

fn two_batches() -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    for base in [0, 1] {
        let mut b = BatchBuilder::new(Compression::None).base_offset(base);
        b.append(1_700_000_000_000, Some(b"k"), Some(b"value"), &[])
            .unwrap();
        b.build_into(&mut out).unwrap();
    }
    let first = out.len() / 2;
    (out, first)
}

fn write(dir: &std::path::Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_str().unwrap().to_owned()
}

#[test]
fn crc_mismatch_prints_isvalid_false_and_fails() {
    let dir = scratch_dir("cli-dump-crc");
    let (mut bytes, first) = two_batches();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let f = write(&dir, "bad.bin", &bytes);
    let out = klog(&["dump", &f]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains(&format!("position: {first} ")), "{text}");
    assert_eq!(text.matches("isvalid: true").count(), 1);
    assert_eq!(text.matches("isvalid: false").count(), 1);

    let out = klog(&["dump", "--json", &f]);
    assert_eq!(out.status.code(), Some(1));
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[1]["crc_valid"], false);
    assert_eq!(lines[1]["position"], first);
}

#[test]
fn truncated_tail_names_the_position_and_fails() {
    let dir = scratch_dir("cli-dump-torn");
    let (bytes, first) = two_batches();
    let f = write(&dir, "00000000000000000000.log", &bytes[..bytes.len() - 3]);
    let out = klog(&["dump", &f]);
    assert_eq!(out.status.code(), Some(1));
    let torn = bytes.len() - 3 - first;
    assert!(stdout(&out).contains(&format!(
        "Found {torn} invalid bytes at the end of 00000000000000000000.log"
    )));
    let err = stderr(&out);
    assert!(
        err.contains(&f) && err.contains(&format!("truncated batch at position {first}")),
        "{err}"
    );

    let out = klog(&["dump", "--json", &f]);
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["position"], first);
    assert!(lines[1]["error"].as_str().unwrap().contains("truncated"));
}

#[test]
fn a_zero_filled_preallocated_tail_is_not_an_error() {
    let dir = scratch_dir("cli-dump-zeros");
    let (mut bytes, _) = two_batches();
    bytes.resize(bytes.len() + 8192, 0);
    let f = write(&dir, "00000000000000000000.log", &bytes);
    let out = klog(&["dump", "--json", &f]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 2);
    assert!(stderr(&out).contains("8192 zero bytes"), "{}", stderr(&out));
}

#[test]
fn garbage_after_a_batch_is_corruption_with_its_check_named() {
    let dir = scratch_dir("cli-dump-garbage");
    let (mut bytes, _) = two_batches();
    let at = bytes.len();
    bytes.extend_from_slice(&[
        0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 5, 0xde, 0xad, 0xbe, 0xef, 0x02, 1, 2,
    ]);
    let f = write(&dir, "x.bin", &bytes);
    let out = klog(&["dump", "--json", &f]);
    assert_eq!(out.status.code(), Some(1));
    let last: Value = serde_json::from_str(stdout(&out).lines().last().unwrap()).unwrap();
    assert_eq!(last["position"], at);
    assert!(
        last["error"]
            .as_str()
            .unwrap()
            .contains("batch length 5 is smaller than the minimum 14"),
        "{last}"
    );
}

#[test]
fn undecodable_records_are_reported_and_later_batches_still_dumped() {
    let dir = scratch_dir("cli-dump-records");
    let (mut bytes, first) = two_batches();
    // Claim 2 records in the first batch (it holds 1) and fix the CRC: framing holds, records do not.
    bytes[57..61].copy_from_slice(&2i32.to_be_bytes());
    let crc = klog::log::format::crc32c(&bytes[21..first]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    let f = write(&dir, "y.bin", &bytes);
    let out = klog(&["dump", "--deep", &f]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("corrupt batch at position 0: declared 2 records but found 1"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).contains(&format!("position: {first} ")));

    let out = klog(&["dump", "--json", "--deep", &f]);
    assert_eq!(out.status.code(), Some(1));
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "batch, its error, the next batch");
    assert_eq!(
        (
            lines[0]["position"].clone(),
            lines[0]["record_count"].clone()
        ),
        (Value::from(0), Value::from(2))
    );
    assert_eq!(lines[1]["position"], 0);
    assert!(lines[1]["error"]
        .as_str()
        .unwrap()
        .contains("declared 2 records but found 1"));
    assert_eq!(lines[2]["position"], first);
}

#[test]
fn arbitrary_bytes_never_crash_the_dump() {
    let dir = scratch_dir("cli-dump-fuzz");
    let mut seed = 7u64;
    for i in 0..40 {
        let len = (i * 37) % 300;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        let f = write(&dir, &format!("r{i}.bin"), &bytes);
        let out = klog(&["dump", "--json", "--deep", &f]);
        assert!(
            matches!(out.status.code(), Some(0) | Some(1)),
            "exit {:?}: {}",
            out.status,
            stderr(&out)
        );
        assert!(!stderr(&out).contains("panicked"));
    }
}

#[test]
fn wrong_arguments_get_a_clear_error() {
    let out = klog(&["dump", "/nonexistent/00000000000000000000.log"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("/nonexistent/00000000000000000000.log"),
        "{}",
        stderr(&out)
    );
    let dir = scratch_dir("cli-dump-args");
    let f = write(&dir, "notes.txt", b"hello");
    let out = klog(&["dump", &f]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("unsupported file type"));
    let out = klog(&["dump"]);
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
}
