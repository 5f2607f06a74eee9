//! The real-process death test: a child `klog torture` appends and flushes; it is SIGKILLed at random
//! moments, 25 rounds on one partition directory; after every kill a reopen (with recovery) must hold
//! everything the child reported flushed, every batch whole and valid, offsets contiguous. While the child
//! writes, a reader opens the directory read-only (no lock, nothing changed) and must see the same: every
//! flushed batch, whole, contiguous; its open must not cost the writer a byte.
//!
//! What this proves is process death, not power loss: the page cache survives SIGKILL, so every write the
//! child made is still there whether or not it was ever fsynced, and this test would pass with `flush`
//! syncing nothing. Durability across power loss (flushed means synced) is the crash simulation's to prove
//! (`recovery/tests/crash_sim.rs`, on the simulated disk that drops what was not synced).
//! Seen (issue 14): with `StdStorage`'s `sync_data` and directory sync made no-ops, this test still
//! passed.
//!
//! On the uring backend (`--io-backend uring`, the direct write path) the test has teeth of its own: the
//! child's unflushed tail is in its memory, not the page cache, so a flush that did not write it out
//! loses reported batches at the kill (seen: a sync that skipped its writes failed round 0).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use klog::log::config::LogConfig;
use klog::log::format::Batches;
use klog::log::io::StdStorage;
use klog::log::log_dir::LogDir;
use klog::log::partition_log::{OpenOptions, PartitionLog};

/// A read-only open beside the running writer: the flushed prefix whole and contiguous.
fn read_beside_the_writer(dir: &std::path::Path, flushed: i64, round: usize) {
    let options = OpenOptions {
        recovery_point: 0,
        log_start_offset: 0,
        clean_shutdown: false,
    };
    let (log, _) =
        PartitionLog::open_read_only(Arc::new(StdStorage), dir, LogConfig::default(), options)
            .unwrap_or_else(|e| panic!("round {round}: a reader beside the writer failed: {e}"));
    assert_holds_flushed(&log, flushed, &format!("round {round}, the reader"));
}

/// `log` ends at or after `flushed`, and every batch in it is whole, valid and contiguous from 0.
fn assert_holds_flushed(log: &PartitionLog, flushed: i64, who: &str) {
    assert!(
        log.log_end_offset() >= flushed,
        "{who}: the log ends at {} but {flushed} was reported flushed",
        log.log_end_offset()
    );
    log.update_high_watermark(log.log_end_offset());
    let mut offset = 0;
    while offset < log.log_end_offset() {
        let r = log.read(offset, 1 << 22, None, true).unwrap();
        for b in Batches::new(r.records.as_slice()) {
            let b = b.unwrap_or_else(|e| panic!("{who}: invalid batch: {e}"));
            assert_eq!(b.base_offset(), offset, "{who}: contiguous");
            offset = b.last_offset() + 1;
        }
    }
}

#[test]
fn a_killed_writer_process_leaves_every_reported_batch_whole_and_contiguous() {
    kill_rounds("std");
}

/// The same on io_uring's direct write path: the child's unflushed tail lives in its memory and dies
/// with it, so here a kill does lose unflushed batches; never a flushed one.
#[test]
fn a_killed_uring_writer_leaves_every_reported_batch_whole_and_contiguous() {
    if let Err(e) = klog::log::io::uring_available() {
        assert!(
            std::env::var("KLOG_REQUIRE_URING").as_deref() != Ok("1"),
            "KLOG_REQUIRE_URING=1 but {e}"
        );
        common::skip(&format!("the uring kill test: {e}"));
        return;
    }
    kill_rounds("uring");
}

fn kill_rounds(backend: &str) {
    let root = common::scratch_dir(&format!("kill-test-{backend}"));
    let dir = root.join("logs/kill-0");
    let mut seed = 0x5eed_u64;
    let mut total_flushed_lines = 0;
    for round in 0..25 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let mut child = Command::new(env!("CARGO_BIN_EXE_klog"))
            .args([
                "torture",
                dir.to_str().unwrap(),
                "--seed",
                &seed.to_string(),
                "--io-backend",
                backend,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn klog torture");
        let stdout = child.stdout.take().unwrap();
        let lines_wanted = 1 + seed % 12;
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut flushed = -1i64;
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let mut seen = 0;
        while seen < lines_wanted && Instant::now() < deadline {
            line.clear();
            if reader.read_line(&mut line).unwrap() == 0 {
                break;
            }
            if let Some(o) = line.trim().strip_prefix("flushed ") {
                flushed = o.parse().unwrap();
                seen += 1;
            }
        }
        if flushed >= 0 {
            read_beside_the_writer(&dir, flushed, round);
        }
        // Let it run a little further past the last flush we saw, then kill it mid-write.
        std::thread::sleep(Duration::from_millis(seed % 20));
        child.kill().expect("SIGKILL");
        let status = child.wait().unwrap();
        assert!(
            !status.success(),
            "round {round}: the child was killed, not finished"
        );
        total_flushed_lines += seen;

        let log_dir = LogDir::open(Arc::new(StdStorage), &root.join("logs")).unwrap();
        let (log, _) = log_dir
            .open_partition("kill-0", LogConfig::default())
            .unwrap();
        assert_holds_flushed(
            &log,
            flushed,
            &format!("{backend} round {round}, after recovery"),
        );
        // The test reopened without a clean close, like the next child will.
    }
    assert!(
        total_flushed_lines >= 25,
        "the children flushed while the test watched"
    );
}
