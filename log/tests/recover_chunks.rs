//! An unclean open of a real file checks each segment through maps of 16 MiB windows instead of copying it
//! through `pread`s (the copy was ~90% of the open's time). The cut must not depend on how the bytes were
//! read: batches cut by a window's end, a batch larger than a window, a corrupt batch across a window's
//! end and a torn tail in the last window give the same recovery through maps (std storage) as through
//! 1 MiB `pread`s (the same files behind a storage that cannot be mapped).

use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression, Tail};
use klog_log::io::{CountingStorage, IoOp, StdStorage, Storage, StorageFile};
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::segment::SegmentRecovery;

/// The window `recover` maps at a time (`segment/recover.rs`, `RECOVER_WINDOW`).
const WINDOW: u64 = 16 << 20;

/// StdStorage whose files say they are not on a real file system, so recovery reads them with `pread`.
#[derive(Debug)]
struct NoMap;

#[derive(Debug)]
struct NoMapFile(Arc<dyn StorageFile>);

impl StorageFile for NoMapFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        self.0.read_at(buf, position)
    }
    fn write_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
        self.0.write_at(buf, position)
    }
    fn sync(&self) -> io::Result<()> {
        self.0.sync()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn len(&self) -> io::Result<u64> {
        self.0.len()
    }
    fn os_path(&self) -> Option<&Path> {
        None
    }
}

impl Storage for NoMap {
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        Ok(Arc::new(NoMapFile(StdStorage.create(path)?)))
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        Ok(Arc::new(NoMapFile(StdStorage.open(path)?)))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        StdStorage.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        StdStorage.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        StdStorage.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        StdStorage.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        StdStorage.create_dir_all(dir)
    }
    fn name(&self) -> &'static str {
        "no-map"
    }
}

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

/// Recovers a copy of `dir` through maps and another through `pread`s; both must find the same. Returns
/// the recovery, the log end offset and the `.log` length after it.
fn recover_both(dir: &Path) -> (SegmentRecovery, i64, u64) {
    let mut results = Vec::new();
    for (name, storage) in [
        ("mapped-0", Arc::new(StdStorage) as Arc<dyn Storage>),
        ("read-0", Arc::new(NoMap)),
    ] {
        let copy = dir.parent().unwrap().join(name);
        copy_dir(dir, &copy);
        let (log, report) = PartitionLog::open(storage, &copy, config(), unclean()).unwrap();
        let (_, rec) = report.recovered_segments[0].clone();
        let len = std::fs::metadata(copy.join("00000000000000000000.log"))
            .unwrap()
            .len();
        results.push((rec, log.log_end_offset(), len));
        log.close().unwrap();
    }
    let read = results.pop().unwrap();
    let mapped = results.pop().unwrap();
    assert_eq!(mapped, read, "maps and preads disagree");
    mapped
}

#[test]
fn an_unclean_open_of_a_real_file_copies_no_log_bytes() {
    let root = temp_dir("recover-windows-copy");
    let (dir, batches) = write(&root);
    let size: u64 = batches.iter().map(|b| b.2).sum();
    let counting = Arc::new(CountingStorage::new(Arc::new(StdStorage)));
    let (log, report) = PartitionLog::open(counting.clone(), &dir, config(), unclean()).unwrap();
    assert_eq!(report.recovered_segments[0].1.valid_bytes, size);
    // Before the maps, the pass read every byte of the `.log` through `pread` (44 MiB here).
    let read = counting.count(IoOp::ReadBytes, "log");
    assert!(
        read < 1 << 20,
        "the open copied {read} of the .log's {size} bytes"
    );
    log.close().unwrap();
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_clean_segment_across_windows_and_a_batch_larger_than_one_recover_whole() {
    let root = temp_dir("recover-windows-clean");
    let (dir, batches) = write(&root);
    let size: u64 = batches.iter().map(|b| b.2).sum();
    assert!(
        batches.iter().any(|b| b.2 > WINDOW),
        "a batch larger than a window"
    );
    across(&batches, WINDOW);
    let (rec, leo, len) = recover_both(&dir);
    assert_eq!((rec.valid_bytes, rec.truncated_bytes, len), (size, 0, size));
    assert_eq!(rec.tail, Tail::Clean);
    assert!(rec.corruption.is_none());
    assert_eq!(leo, batches.last().unwrap().1 + 1);
    std::fs::remove_dir_all(&root).unwrap();
}

/// The next window is mapped ahead starting 1 MiB before the current one ends: a batch of 3 MiB
/// across the end does not start in it, and is found whole in a window mapped from its start.
#[test]
fn a_batch_larger_than_the_windows_overlap_across_a_window_end_recovers_whole() {
    let root = temp_dir("recover-windows-overlap");
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
    let (rec, leo, len) = recover_both(&dir);
    assert_eq!((rec.valid_bytes, rec.truncated_bytes, len), (size, 0, size));
    assert_eq!(rec.tail, Tail::Clean);
    assert_eq!(leo, batches.last().unwrap().1 + 1);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_corrupt_batch_across_a_window_end_cuts_the_log_at_its_start() {
    let root = temp_dir("recover-windows-corrupt");
    let (dir, batches) = write(&root);
    // One flipped byte in the window after the boundary, inside the batch that crosses it.
    let (pos, first, size) = across(&batches, WINDOW);
    let f = segment_file(&dir);
    let at = WINDOW + (pos + size - WINDOW) / 2;
    let mut byte = [0u8];
    f.read_exact_at(&mut byte, at).unwrap();
    f.write_all_at(&[byte[0] ^ 0x40], at).unwrap();
    drop(f);
    let (rec, leo, len) = recover_both(&dir);
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
fn a_torn_tail_of_a_batch_larger_than_a_window_is_cut() {
    let root = temp_dir("recover-windows-torn");
    let (dir, batches) = write(&root);
    let end: u64 = batches.iter().map(|b| b.2).sum();
    // The first half of a copy of the 17 MiB batch after the last one, as a crash mid-write leaves it:
    // the pass maps more than a window to find that it ends with the file.
    let &(pos, _, size) = batches.iter().find(|b| b.2 > WINDOW).unwrap();
    let f = segment_file(&dir);
    let mut big = vec![0u8; size as usize / 2];
    f.read_exact_at(&mut big, pos).unwrap();
    f.write_all_at(&big, end).unwrap();
    drop(f);
    let (rec, leo, len) = recover_both(&dir);
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
