//! `klog append` of hostile producer batches: each is refused with Kafka's error name, the command exits
//! non-zero, and the partition directory is left as it was (same files, same bytes, same log end).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use common::{klog, scratch_dir, stderr, stdout};
use klog::log::format::{crc32c, BatchBuilder, Compression};
use serde_json::Value;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn good_batch(records: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    for i in 0..records {
        b.append(
            now_ms(),
            Some(format!("k{i}").as_bytes()),
            Some(b"value"),
            &[],
        )
        .unwrap();
    }
    b.build().unwrap()
}

/// Sets the records count (and the last offset delta to match), then recomputes the CRC-32C.
fn with_records_count(mut batch: Vec<u8>, count: i32) -> Vec<u8> {
    batch[23..27].copy_from_slice(&(count - 1).to_be_bytes());
    batch[57..61].copy_from_slice(&count.to_be_bytes());
    let crc = crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

fn log_end_offset(dir: &str) -> i64 {
    let out = klog(&["read", dir, "--offset", "0", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    v["log_end_offset"].as_i64().unwrap()
}

#[test]
fn hostile_batches_exit_non_zero_with_kafkas_name_and_change_nothing() {
    let root = scratch_dir("cli-append-hostile");
    let dir = root.join("logs/orders-0");
    let d = dir.to_str().unwrap();
    let good = root.join("good.bin");
    std::fs::write(&good, good_batch(3)).unwrap();
    let out = klog(&["append", d, good.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));

    let century_ahead = {
        let mut b = BatchBuilder::new(Compression::None);
        b.append(
            now_ms() + 100 * 365 * 86_400_000,
            Some(b"k"),
            Some(b"v"),
            &[],
        )
        .unwrap();
        b.build().unwrap()
    };
    let cases = [
        (
            "count-above-records",
            with_records_count(good_batch(2), 3),
            "INVALID_RECORD",
        ),
        ("century-ahead", century_ahead, "INVALID_TIMESTAMP"),
    ];
    for (name, bytes, error) in cases {
        let before = files(&dir);
        let input = root.join(format!("{name}.bin"));
        std::fs::write(&input, bytes).unwrap();
        let out = klog(&["append", d, input.to_str().unwrap(), "--json"]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr(&out));
        let line: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
        assert_eq!(line["error"], error, "{name}: {line}");
        let after = files(&dir);
        for (file, bytes) in &before {
            // The checkpoints live in the parent; every file of the partition is unchanged.
            assert_eq!(after.get(file), Some(bytes), "{name}: {file} changed");
        }
        assert_eq!(after.len(), before.len(), "{name}: files were added");
        assert_eq!(log_end_offset(d), 3, "{name}");
    }
}

/// A follower keeps the leader's bytes without walking the records (as Kafka's follower does): a batch
/// declaring more records than it holds is appended, and `klog read` and `klog dump --deep` then report it
/// as an error naming the check, never a panic.
#[test]
fn a_malformed_follower_batch_reads_back_as_an_error_not_a_panic() {
    let root = scratch_dir("cli-append-hostile-follower");
    let dir = root.join("logs/orders-0");
    let d = dir.to_str().unwrap();
    let mut bad = with_records_count(good_batch(2), 3);
    bad[..8].copy_from_slice(&0i64.to_be_bytes());
    let input = root.join("follower.bin");
    std::fs::write(&input, &bad).unwrap();
    let out = klog(&["append", d, input.to_str().unwrap(), "--as", "follower"]);
    assert!(out.status.success(), "{}", stderr(&out));

    let segment = dir.join("00000000000000000000.log");
    let runs = [
        klog(&["read", d, "--offset", "0"]),
        klog(&["dump", segment.to_str().unwrap(), "--deep"]),
    ];
    for out in runs {
        assert_ne!(out.status.code(), Some(101), "a panic: {}", stderr(&out));
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert!(
            text.contains("declared 3 records but found 2"),
            "the error names the check: {text}"
        );
    }
}

/// A batch file larger than the memory the command may use: `klog append` walks it through a bounded
/// window, batch by batch. (It read the whole file into memory first, so a file bigger than the memory
/// failed with "out of memory" before one batch was appended.)
#[test]
fn a_batch_file_larger_than_the_allowed_memory_is_appended_whole() {
    use std::os::unix::process::CommandExt;

    const LIMIT: u64 = 32 << 20;
    let root = scratch_dir("cli-append-larger-than-memory");
    let mut batch = BatchBuilder::new(Compression::None);
    for i in 0..15 {
        batch
            .append(
                now_ms(),
                Some(format!("k{i}").as_bytes()),
                Some(&[7u8; 1024]),
                &[],
            )
            .unwrap();
    }
    let batch = batch.build().unwrap();
    let copies = (48usize << 20).div_ceil(batch.len());
    let input = root.join("batches.bin");
    std::fs::write(&input, batch.repeat(copies)).unwrap();
    assert!(std::fs::metadata(&input).unwrap().len() > LIMIT + (8 << 20));
    let dir = root.join("t-0");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_klog"));
    command
        .args(["append", "--json"])
        .arg(&dir)
        .arg(&input)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    // SAFETY: the closure runs in the child between fork and exec and only calls setrlimit, which is
    // async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: LIMIT,
                rlim_max: LIMIT,
            };
            match libc::setrlimit(libc::RLIMIT_DATA, &limit) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            }
        });
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        log_end_offset(dir.to_str().unwrap()),
        15 * copies as i64,
        "every batch appended"
    );
}

/// `klog append --as follower` of a batch over the topic's `max.message.bytes`: kept, as Kafka's
/// `appendAsFollower` keeps what its leader accepted (`ignoreRecordSize`), and read back whole; the same
/// batch as a producer's is MESSAGE_TOO_LARGE.
#[test]
fn a_follower_batch_over_max_message_bytes_is_appended_and_reads_back() {
    let root = scratch_dir("cli-append-follower-large");
    let dir = root.join("logs/orders-0");
    let d = dir.to_str().unwrap();
    let mut b = BatchBuilder::new(Compression::None).partition_leader_epoch(2);
    b.append(now_ms(), Some(b"k"), Some(&[b'v'; 4096]), &[])
        .unwrap();
    let large = b.build().unwrap();
    let input = root.join("large.bin");
    std::fs::write(&input, &large).unwrap();
    let limit = "max.message.bytes=1000";
    let input = input.to_str().unwrap();
    let out = klog(&[
        "append", d, input, "--as", "follower", "--config", limit, "--json",
    ]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let line: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(
        (line["base_offset"].as_i64(), line["last_offset"].as_i64()),
        (Some(0), Some(0))
    );
    let out = klog(&["read", d, "--offset", "0", "--config", limit, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let read: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let batch = &read["batches"][0];
    assert_eq!(batch["batch_size"].as_u64(), Some(large.len() as u64));
    assert_eq!(batch["crc_valid"], Value::Bool(true));
    assert_eq!(
        batch["records"][0]["value"].as_str().unwrap().len(),
        2 * 4096
    );
    assert_eq!(read["log_end_offset"].as_i64(), Some(1));

    let leader = root.join("logs/leader-0");
    let out = klog(&[
        "append",
        leader.to_str().unwrap(),
        input,
        "--config",
        limit,
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let line: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(line["error"].as_str(), Some("MESSAGE_TOO_LARGE"), "{line}");
}
