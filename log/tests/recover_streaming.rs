//! `LogSegment::recover` reads a segment in 1 MiB pieces into one buffer: batches cut by a read, a batch
//! larger than a read, a torn tail and a corrupt batch far past the first read must come out exactly as
//! a whole-file scan would judge them.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression, Tail};
use klog_log::io::{StdStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};

fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("r-0")
}

fn config() -> LogConfig {
    let mut c = LogConfig::default();
    c.set("segment.bytes", &(64u64 << 20).to_string()).unwrap();
    c.set("max.message.bytes", &(4u64 << 20).to_string())
        .unwrap();
    c
}

fn storage() -> Arc<dyn Storage> {
    Arc::new(StdStorage)
}

/// One segment of ~5 MiB: batches of 1 to 40 KiB records (cut at every 1 MiB boundary somewhere) and one
/// 1.5 MiB batch. Returns the directory, (position, first offset, size) of every batch, and the end.
fn write(name: &str) -> (PathBuf, Vec<(u64, i64, u64)>, i64) {
    let dir = temp_dir(name);
    let (log, _) = PartitionLog::open(storage(), &dir, config(), OpenOptions::default()).unwrap();
    let mut batches = Vec::new();
    let mut position = 0u64;
    let mut i = 0usize;
    while position < 5 << 20 {
        let value_bytes = if i == 40 {
            3 << 19
        } else {
            1024 + (i * 7919) % (40 << 10)
        };
        let mut b = BatchBuilder::new(Compression::None);
        for r in 0..3 {
            let value = vec![(i + r) as u8; value_bytes / 3];
            b.append(1_700_000_000_000 + i as i64, Some(b"k"), Some(&value), &[])
                .unwrap();
        }
        let mut batch = b.build().unwrap();
        let info = log.append_as_leader(&mut batch, 0).unwrap();
        batches.push((position, info.first_offset, batch.len() as u64));
        position += batch.len() as u64;
        i += 1;
    }
    let leo = log.log_end_offset();
    log.flush(leo).unwrap();
    log.close().unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0], "one segment");
    (dir, batches, leo)
}

fn unclean() -> OpenOptions {
    OpenOptions {
        recovery_point: 0,
        log_start_offset: 0,
        clean_shutdown: false,
    }
}

fn segment_file(dir: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join("00000000000000000000.log"))
        .unwrap()
}

#[test]
fn a_clean_multi_megabyte_segment_recovers_whole() {
    let (dir, batches, leo) = write("recover-stream-clean");
    let (log, report) = PartitionLog::open(storage(), &dir, config(), unclean()).unwrap();
    assert_eq!(log.log_end_offset(), leo);
    let (_, rec) = &report.recovered_segments[0];
    let end: u64 = batches.iter().map(|b| b.2).sum();
    assert_eq!((rec.valid_bytes, rec.truncated_bytes), (end, 0));
    assert_eq!(rec.tail, Tail::Clean);
    assert!(rec.corruption.is_none());
    // Every batch is readable at its offset after the rebuilt indexes.
    for &(_, first, size) in &batches {
        let r = log.read(first, size as usize, None, true).unwrap();
        assert_eq!(r.records.as_slice().len() as u64, size, "batch at {first}");
    }
    log.close().unwrap();
}

#[test]
fn a_torn_tail_after_many_reads_is_cut() {
    let (dir, batches, leo) = write("recover-stream-torn");
    let end: u64 = batches.iter().map(|b| b.2).sum();
    // Half of a copy of the last batch, as a crash mid-write leaves it.
    let f = segment_file(&dir);
    let &(pos, _, size) = batches.last().unwrap();
    let mut last = vec![0u8; size as usize];
    f.read_exact_at(&mut last, pos).unwrap();
    f.write_all_at(&last[..size as usize / 2], end).unwrap();
    drop(f);
    let (log, report) = PartitionLog::open(storage(), &dir, config(), unclean()).unwrap();
    assert_eq!(log.log_end_offset(), leo);
    let (_, rec) = &report.recovered_segments[0];
    assert_eq!((rec.valid_bytes, rec.truncated_bytes), (end, size / 2));
    assert!(
        matches!(rec.tail, Tail::Partial { position, .. } if position == end),
        "{:?}",
        rec.tail
    );
    log.close().unwrap();
}

#[test]
fn a_corrupt_batch_past_the_first_reads_cuts_the_log_there() {
    let (dir, batches, _) = write("recover-stream-corrupt");
    // The first batch starting after 3 MiB: one flipped byte inside its records.
    let &(pos, first, size) = batches.iter().find(|b| b.0 > 3 << 20).unwrap();
    let f = segment_file(&dir);
    let at = pos + size / 2;
    let mut byte = [0u8];
    f.read_exact_at(&mut byte, at).unwrap();
    f.write_all_at(&[byte[0] ^ 0x40], at).unwrap();
    drop(f);
    let (log, report) = PartitionLog::open(storage(), &dir, config(), unclean()).unwrap();
    assert_eq!(log.log_end_offset(), first);
    let (_, rec) = &report.recovered_segments[0];
    assert_eq!(rec.valid_bytes, pos);
    assert!(rec.corruption.is_some(), "{rec:?}");
    assert!(
        matches!(rec.tail, Tail::Corrupt { position, .. } if position == pos),
        "{:?}",
        rec.tail
    );
    log.close().unwrap();
}
