//! `klog read` of uncompressed legacy messages (magic 0 and 1): a hand-built message set appended as a
//! follower reads back at every offset, with its keys and values.

mod common;

use common::{klog, scratch_dir, stderr, stdout};
use serde_json::Value;

/// Plain CRC-32 (IEEE, java.util.zip.CRC32), the legacy message checksum.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// One uncompressed legacy message at `offset` (magic 0 without a timestamp, magic 1 with one).
fn legacy_message(magic: u8, offset: i64, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut body = vec![magic, 0];
    if magic == 1 {
        body.extend_from_slice(&(1_700_000_000_000 + offset).to_be_bytes());
    }
    for part in [key, value] {
        body.extend_from_slice(&(part.len() as i32).to_be_bytes());
        body.extend_from_slice(part);
    }
    let mut entry = offset.to_be_bytes().to_vec();
    entry.extend_from_slice(&(4 + body.len() as i32).to_be_bytes());
    entry.extend_from_slice(&crc32(&body).to_be_bytes());
    entry.extend_from_slice(&body);
    entry
}

#[test]
fn read_returns_legacy_messages_at_their_offsets() {
    let root = scratch_dir("cli-legacy-read");
    let input = root.join("legacy.bin");
    let set: Vec<u8> = (0..8i64)
        .flat_map(|o| {
            let magic = if o < 4 { 0 } else { 1 };
            legacy_message(
                magic,
                o,
                format!("k{o}").as_bytes(),
                format!("v{o}").as_bytes(),
            )
        })
        .collect();
    std::fs::write(&input, set).unwrap();
    let dir = root.join("logs/old-0");
    let d = dir.to_str().unwrap();
    let out = klog(&["append", d, input.to_str().unwrap(), "--as", "follower"]);
    assert!(out.status.success(), "{}", stderr(&out));

    for offset in 0..8i64 {
        let out = klog(&["read", d, "--offset", &offset.to_string(), "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
        let batches = v["batches"].as_array().unwrap();
        let offsets: Vec<i64> = batches
            .iter()
            .map(|b| b["last_offset"].as_i64().unwrap())
            .collect();
        assert_eq!(
            offsets,
            (offset..8).collect::<Vec<_>>(),
            "read at {offset}: {v}"
        );
        assert_eq!(batches[0]["magic"], u8::from(offset >= 4), "{v}");
        let record = &batches[0]["records"][0];
        assert_eq!(record["offset"], offset);
        assert_eq!(v["next_offset"], 8);
    }
    let out = klog(&[
        "read",
        d,
        "--offset",
        "5",
        "--max-bytes",
        "1",
        "--print-data-log",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("key: k5 payload: v5"), "{text}");
    assert!(!text.contains("key: k6"), "one message only: {text}");
}
