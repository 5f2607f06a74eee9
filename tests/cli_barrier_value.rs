//! A MIRROR_PID_RESET barrier whose value does not parse: `klog dump` still names its control type and
//! reports the value by the batch's offset; `klog verify` reports it as a problem.

mod common;

use common::{klog, scratch_dir, stderr, stdout};
use klog::log::format::{crc32c, BatchBuilder, Compression};
use serde_json::Value;

const NOW: i64 = 1_700_000_000_000;

/// A producer's batch at offset 0, then a barrier at offset 1 whose value has a negative version.
fn segment_with_a_bad_barrier() -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None).producer(1, 0, 0);
    b.append(NOW, None, Some(b"v"), &[]).unwrap();
    let mut bytes = b.build().unwrap();
    let mut barrier = BatchBuilder::mirror_pid_reset(NOW)
        .unwrap()
        .base_offset(1)
        .build()
        .unwrap();
    // The one record ends with its value `00 00 00` ({Version}) and an empty header count.
    let at = barrier.len() - 4;
    assert_eq!(
        barrier[at..],
        [0, 0, 0, 0],
        "the barrier's value, then no headers"
    );
    barrier[at] = 0xff;
    let crc = crc32c(&barrier[21..]);
    barrier[17..21].copy_from_slice(&crc.to_be_bytes());
    bytes.extend(barrier);
    bytes
}

#[test]
fn dump_and_verify_report_a_barrier_value_that_does_not_parse() {
    let root = scratch_dir("cli-barrier-value");
    let dir = root.join("orders-0");
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("00000000000000000000.log");
    std::fs::write(&log, segment_with_a_bad_barrier()).unwrap();
    let log = log.to_str().unwrap();

    let out = klog(&["dump", log]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("MIRROR_PID_RESET control batch at offset 1 has a value that does not parse")
            && err.contains("negative MirrorPidResetRecord version"),
        "{err}"
    );

    let out = klog(&["dump", "--json", log]);
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[1]["base_offset"], 1);
    assert_eq!(
        lines[1]["control_type"], "mirror_pid_reset",
        "decided by the key"
    );
    assert!(lines[2]["error"]
        .as_str()
        .unwrap()
        .contains("control batch at offset 1"));

    let out = klog(&["verify", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out)
            .contains("MIRROR_PID_RESET control batch at offset 1 has a value that does not parse"),
        "{}",
        stdout(&out)
    );
}
