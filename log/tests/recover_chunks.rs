//! An unclean open checks each segment's `.log` in 1 MiB chunks, read once (by a helper thread ahead of
//! the check when a core is free, `segment/read_ahead.rs`). The cut must not depend on where the chunks
//! end: batches cut by a chunk's end, a batch larger than many chunks, a corrupt batch across a chunk's
//! end and a torn tail in the last chunk recover as the batches say, on a real 44 MiB segment.
//! (`segment/recover_tests.rs` checks the same damage with and without the helper against each other.)

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression, Tail};
use klog_log::io::{CountingStorage, IoOp, StdStorage};
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::segment::SegmentRecovery;

/// A boundary the batches are checked across: 16 chunks of 1 MiB (`segment/read_ahead.rs`, `CHUNK`).
const WINDOW: u64 = 16 << 20;
/// What the pass reads at a time.
const CHUNK: u64 = 1 << 20;

fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn config() -> LogConfig {
    let mut c = LogConfig::default();
    c.set("segment.bytes", &(128u64 << 20).to_string()).unwrap();
    c.set("max.message.bytes", &(24u64 << 20).to_string())
        .unwrap();
    c
}

fn unclean() -> OpenOptions {
    OpenOptions {
        recovery_point: 0,
        log_start_offset: 0,
        clean_shutdown: false,
    }
}

/// (position, first offset, size) of a batch.
type Placed = (u64, i64, u64);

/// One segment of ~44 MiB: batches of 100-700 KiB (some cut by each window's end) and, past 20 MiB, one
/// batch of 17 MiB, larger than a window. Returns the partition directory and every batch.
fn write(root: &Path) -> (PathBuf, Vec<Placed>) {
    let mut big_done = false;
    write_batches(root, 44 << 20, |position, i| {
        if position > 20 << 20 && !big_done {
            big_done = true;
            17 << 20
        } else {
            (100 << 10) + (i * 104_729) % (600 << 10)
        }
    })
}

/// One segment of batches of one record each, `value_bytes(position, index)` bytes of value, until it
/// holds `until` bytes.
fn write_batches(
    root: &Path,
    until: u64,
    mut value_bytes: impl FnMut(u64, usize) -> usize,
) -> (PathBuf, Vec<Placed>) {
    let dir = root.join("w-0");
    let (log, _) =
        PartitionLog::open(Arc::new(StdStorage), &dir, config(), OpenOptions::default()).unwrap();
    let (mut batches, mut position) = (Vec::new(), 0u64);
    let mut i = 0usize;
    while position < until {
        let mut b = BatchBuilder::new(Compression::None);
        let value = vec![i as u8; value_bytes(position, i)];
        b.append(1_700_000_000_000 + i as i64, Some(b"k"), Some(&value), &[])
            .unwrap();
        let mut batch = b.build().unwrap();
        let info = log.append_as_leader(&mut batch, 0).unwrap();
        batches.push((position, info.first_offset, batch.len() as u64));
        position += batch.len() as u64;
        i += 1;
    }
    log.flush(log.log_end_offset()).unwrap();
    log.close().unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0], "one segment");
    (dir, batches)
}

fn segment_file(dir: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join("00000000000000000000.log"))
        .unwrap()
}

/// The batch across the window end `boundary`: it starts before and ends after it.
fn across(batches: &[Placed], boundary: u64) -> Placed {
    *batches
        .iter()
        .find(|b| b.0 < boundary && b.0 + b.2 > boundary)
        .expect("a batch across the boundary")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// Recovers a copy of `dir` unclean; returns the recovery, the log end offset and the `.log` length
/// after it.
fn recover_copy(dir: &Path) -> (SegmentRecovery, i64, u64) {
    let copy = dir.parent().unwrap().join("recovered-0");
    copy_dir(dir, &copy);
    let (log, report) =
        PartitionLog::open(Arc::new(StdStorage), &copy, config(), unclean()).unwrap();
    let (_, rec) = report.recovered_segments[0].clone();
    let len = std::fs::metadata(copy.join("00000000000000000000.log"))
        .unwrap()
        .len();
    let leo = log.log_end_offset();
    log.close().unwrap();
    std::fs::remove_dir_all(&copy).unwrap();
    (rec, leo, len)
}

#[test]
fn an_unclean_open_reads_each_log_byte_once_in_chunks() {
    let root = temp_dir("recover-chunks-reads");
    let (dir, batches) = write(&root);
    let size: u64 = batches.iter().map(|b| b.2).sum();
    let counting = Arc::new(CountingStorage::new(Arc::new(StdStorage)));
    let (log, report) = PartitionLog::open(counting.clone(), &dir, config(), unclean()).unwrap();
    assert_eq!(report.recovered_segments[0].1.valid_bytes, size);
    let read = counting.count(IoOp::ReadBytes, "log");
    let reads = counting.count(IoOp::Read, "log");
    assert!(
        (size..size + CHUNK).contains(&read),
        "the open read {read} bytes of the .log's {size}"
    );
    // One read per chunk, and a few small ones of the open's other steps (the log end's walk from the
    // last index entry, the active segment's first batch).
    assert!(reads <= size.div_ceil(CHUNK) + 8, "{reads} reads");
    assert_eq!(counting.count(IoOp::LargestRead, "log"), CHUNK);
    log.close().unwrap();
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_clean_segment_across_chunk_ends_and_a_batch_of_many_chunks_recover_whole() {
    let root = temp_dir("recover-chunks-clean");
    let (dir, batches) = write(&root);
    let size: u64 = batches.iter().map(|b| b.2).sum();
    assert!(
        batches.iter().any(|b| b.2 > WINDOW),
        "a batch larger than a window"
    );
    across(&batches, WINDOW);
    let (rec, leo, len) = recover_copy(&dir);
    assert_eq!((rec.valid_bytes, rec.truncated_bytes, len), (size, 0, size));
    assert_eq!(rec.tail, Tail::Clean);
    assert!(rec.corruption.is_none());
    assert_eq!(leo, batches.last().unwrap().1 + 1);
    std::fs::remove_dir_all(&root).unwrap();
}

/// A batch of 3 MiB starting 1-2 MiB before a chunk's end is larger than the headroom a chunk keeps for
/// the batch the last one cut: it is carried across the chunks it spans and found whole.
#[test]
fn a_batch_of_three_chunks_across_a_chunk_end_recovers_whole() {
    let root = temp_dir("recover-chunks-overlap");
    let (dir, batches) = write_batches(&root, 40 << 20, |position, _| {
        if (WINDOW - (2 << 20)..WINDOW - (1 << 20)).contains(&position) {
            3 << 20
        } else {
            300 << 10
        }
    });
    let (pos, _, big) = across(&batches, WINDOW);
    assert!(big > 3 << 20 && pos < WINDOW - (1 << 20), "{pos} {big}");
    let size: u64 = batches.iter().map(|b| b.2).sum();
    let (rec, leo, len) = recover_copy(&dir);
    assert_eq!((rec.valid_bytes, rec.truncated_bytes, len), (size, 0, size));
    assert_eq!(rec.tail, Tail::Clean);
    assert_eq!(leo, batches.last().unwrap().1 + 1);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_corrupt_batch_across_a_chunk_end_cuts_the_log_at_its_start() {
    let root = temp_dir("recover-chunks-corrupt");
    let (dir, batches) = write(&root);
    // One flipped byte in the window after the boundary, inside the batch that crosses it.
    let (pos, first, size) = across(&batches, WINDOW);
    let f = segment_file(&dir);
    let at = WINDOW + (pos + size - WINDOW) / 2;
    let mut byte = [0u8];
    f.read_exact_at(&mut byte, at).unwrap();
    f.write_all_at(&[byte[0] ^ 0x40], at).unwrap();
    drop(f);
    let (rec, leo, len) = recover_copy(&dir);
    assert_eq!((rec.valid_bytes, len, leo), (pos, pos, first));
    assert!(rec.corruption.is_some(), "{rec:?}");
    // The tail counts the bytes to the end of the file, however much of it the pass had read.
    let file_end: u64 = batches.iter().map(|b| b.2).sum();
    assert_eq!(
        rec.tail,
        Tail::Corrupt {
            position: pos,
            bytes: file_end - pos
        }
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_torn_tail_of_a_batch_of_many_chunks_is_cut() {
    let root = temp_dir("recover-chunks-torn");
    let (dir, batches) = write(&root);
    let end: u64 = batches.iter().map(|b| b.2).sum();
    // The first half of a copy of the 17 MiB batch after the last one, as a crash mid-write leaves it:
    // its length runs past the file's end, so it is a partial tail whatever the chunks after it hold.
    let &(pos, _, size) = batches.iter().find(|b| b.2 > WINDOW).unwrap();
    let f = segment_file(&dir);
    let mut big = vec![0u8; size as usize / 2];
    f.read_exact_at(&mut big, pos).unwrap();
    f.write_all_at(&big, end).unwrap();
    drop(f);
    let (rec, leo, len) = recover_copy(&dir);
    assert_eq!((rec.valid_bytes, len), (end, end));
    assert_eq!(leo, batches.last().unwrap().1 + 1);
    assert!(rec.corruption.is_none(), "{rec:?}");
    assert_eq!(
        rec.tail,
        Tail::Partial {
            position: end,
            bytes: size / 2
        }
    );
    std::fs::remove_dir_all(&root).unwrap();
}
