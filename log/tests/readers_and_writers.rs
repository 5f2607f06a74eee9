//! Readers and writers are different doors (issue #12): a read-only open changes nothing on disk (not one
//! write, sync, resize or directory change), sees the log a writer would see after recovery, and refuses
//! every change; a writer holds its log directory's `.lock`, and a partition has one writer per process.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::clock::ManualClock;
use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Batches, Compression};
use klog_log::io::{ReadOnlyStorage, SimStorage, StdStorage, Storage};
use klog_log::log_dir::LogDir;
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::Error;

fn batch(i: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None).producer(7, 0, i as i32);
    b.append(
        5_000 + i as i64,
        Some(b"key"),
        Some(&vec![i as u8; 200 + i * 11]),
        &[],
    )
    .unwrap();
    b.build().unwrap()
}

fn config() -> LogConfig {
    LogConfig::from_pairs(["segment.bytes=2500", "index.interval.bytes=200"]).unwrap()
}

fn open(storage: &Arc<dyn Storage>, dir: &Path, options: OpenOptions) -> PartitionLog {
    PartitionLog::open_with_clock(
        storage.clone(),
        dir,
        config(),
        options,
        Arc::new(ManualClock::new(5_000)),
    )
    .unwrap()
    .0
}

fn unclean() -> OpenOptions {
    OpenOptions {
        recovery_point: 0,
        log_start_offset: 0,
        clean_shutdown: false,
    }
}

fn all_batches(log: &PartitionLog) -> Vec<Vec<u8>> {
    log.update_high_watermark(log.log_end_offset());
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let r = log.read(offset, 1 << 20, None, true).unwrap();
        for b in Batches::new(r.records.as_slice()) {
            let b = b.unwrap();
            offset = b.last_offset() + 1;
            out.push(b.as_bytes().to_vec());
        }
    }
    out
}

/// A log of `n` batches over several segments, then a torn half batch at its end and its indexes gone:
/// the state after a crash.
fn crashed_log(sim: &SimStorage, dir: &Path, n: usize) -> Vec<Vec<u8>> {
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let log = open(&storage, dir, OpenOptions::default());
    let mut appended = Vec::new();
    for i in 0..n {
        let mut b = batch(i);
        log.append_as_leader(&mut b, 0).unwrap();
        appended.push(b);
    }
    log.flush(log.log_end_offset()).unwrap();
    let last = *log.segment_base_offsets().last().unwrap();
    drop(log);
    let path = dir.join(format!("{last:020}.log"));
    let f = storage.open(&path).unwrap();
    let torn = batch(n);
    f.write_at(&torn[..torn.len() / 2], f.len().unwrap())
        .unwrap();
    f.sync().unwrap();
    storage
        .remove(&dir.join(format!("{last:020}.index")))
        .unwrap();
    storage.sync_dir(dir).unwrap();
    appended
}

#[test]
fn a_read_only_open_of_a_crashed_log_sees_the_recovered_log_and_changes_nothing() {
    let sim = SimStorage::new(1);
    let dir = PathBuf::from("/ro/t-0");
    let appended = crashed_log(&sim, &dir, 30);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let names = storage.list(&dir).unwrap();
    let ops = sim.ops();

    let (reader, report) =
        PartitionLog::open_read_only(storage.clone(), &dir, config(), unclean()).unwrap();
    assert!(reader.is_read_only());
    assert_eq!(all_batches(&reader), appended);
    assert_eq!(reader.producers().len(), 1);
    assert_eq!(reader.producers()[0].last_seq(), 29);
    // The reader read around the torn tail; the disk still has it, and its missing index.
    assert_eq!(reader.log_end_offset(), 30, "{report:?}");
    let last = *reader.segment_base_offsets().last().unwrap();
    let on_disk = sim
        .live_bytes(&dir.join(format!("{last:020}.log")))
        .unwrap()
        .len() as u64;
    assert_eq!(
        on_disk,
        reader.segment(last).unwrap().size() + batch(30).len() as u64 / 2
    );
    assert_eq!(
        sim.ops(),
        ops,
        "the read-only open wrote, synced or resized something"
    );
    assert_eq!(storage.list(&dir).unwrap(), names);

    // Every change is refused, and still nothing reaches the disk.
    let refusals = [
        reader.append_as_leader(&mut batch(31), 0).map(|_| ()),
        reader.append_as_follower(&appended[0]).map(|_| ()),
        reader.roll(),
        reader.truncate_to(3),
        reader.truncate_fully_and_start_at(100),
        reader.increment_log_start_offset(2).map(|_| ()),
        reader.take_snapshot().map(|_| ()),
    ];
    for r in refusals {
        assert!(matches!(r, Err(Error::ReadOnly { .. })), "{r:?}");
    }
    reader.close().unwrap();
    drop(reader);
    assert_eq!(sim.ops(), ops);

    // The writer's recovery agrees with what the reader saw.
    let writer = open(&storage, &dir, unclean());
    assert_eq!(all_batches(&writer), appended);
}

#[test]
fn a_read_only_log_dir_keeps_the_marker_and_checkpoints() {
    let sim = SimStorage::new(2);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let root = PathBuf::from("/ro-dir");
    let mut log_dir = LogDir::open(storage.clone(), &root).unwrap();
    let (log, _) = log_dir.open_partition("t-0", config()).unwrap();
    for i in 0..5 {
        log.append_as_leader(&mut batch(i), 0).unwrap();
    }
    log_dir.close_partition(log).unwrap();
    log_dir.close().unwrap();
    // A clean shutdown of the whole directory (a fresh directory had no marker to put back).
    klog_log::checkpoint::write_clean_shutdown(storage.as_ref(), &root, -1).unwrap();
    let ops = sim.ops();

    let mut reader_dir = LogDir::open_read_only(storage.clone(), &root).unwrap();
    assert!(reader_dir.had_clean_shutdown());
    let (reader, _) = reader_dir.open_partition("t-0", config()).unwrap();
    assert_eq!(reader.log_end_offset(), 5);
    reader_dir.checkpoint(&reader).unwrap();
    reader_dir.close_partition(reader).unwrap();
    reader_dir.close().unwrap();
    assert_eq!(sim.ops(), ops);
    assert!(storage
        .list(&root)
        .unwrap()
        .contains(&".kafka_cleanshutdown".to_string()));

    // A directory that is not there is an error, and is not created.
    let missing = LogDir::open_read_only(storage.clone(), Path::new("/nowhere"));
    assert!(missing.is_err());
    assert!(storage.list(Path::new("/nowhere")).is_err());
    let missing = PartitionLog::open_read_only(
        storage.clone(),
        &root.join("t-9"),
        config(),
        OpenOptions::default(),
    );
    assert!(missing.is_err());
    assert_eq!(sim.ops(), ops);
}

#[test]
fn the_overlay_never_copies_a_segment_and_never_maps() {
    let sim = SimStorage::new(3);
    let inner: Arc<dyn Storage> = Arc::new(sim.clone());
    inner.create_dir_all(Path::new("/o")).unwrap();
    let big = inner.create(Path::new("/o/big.log")).unwrap();
    big.write_at(&vec![7u8; 100 << 20], 0).unwrap();
    let small = inner.create(Path::new("/o/small.index")).unwrap();
    small.write_at(&[1u8; 64], 0).unwrap();
    let ops = sim.ops();
    let view = ReadOnlyStorage::new(inner.clone());
    // Shrinking a segment lowers what the view shows; writing into one is refused, not copied.
    let f = view.open(Path::new("/o/big.log")).unwrap();
    assert!(f.os_path().is_none());
    let err = f.write_at(b"x", 0).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
    let err = f.set_len(200 << 20).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
    f.set_len(10).unwrap();
    assert_eq!(f.len().unwrap(), 10);
    assert_eq!(
        view.open(Path::new("/o/big.log")).unwrap().len().unwrap(),
        10
    );
    assert_eq!(
        sim.live_bytes(Path::new("/o/big.log")).unwrap().len(),
        100 << 20
    );
    // A small file is copied on write; the disk keeps its bytes.
    let s = view.open(Path::new("/o/small.index")).unwrap();
    s.write_at(&[2u8; 8], 0).unwrap();
    let mut buf = [0u8; 8];
    s.read_at(&mut buf, 0).unwrap();
    assert_eq!(buf, [2u8; 8]);
    assert_eq!(
        sim.live_bytes(Path::new("/o/small.index")).unwrap(),
        vec![1u8; 64]
    );
    // Creations, renames and removals are the view's alone.
    view.create(Path::new("/o/new.snapshot")).unwrap();
    view.rename(Path::new("/o/new.snapshot"), Path::new("/o/x.snapshot"))
        .unwrap();
    view.remove(Path::new("/o/small.index")).unwrap();
    assert_eq!(
        view.list(Path::new("/o")).unwrap(),
        vec!["big.log".to_string(), "x.snapshot".to_string()]
    );
    assert_eq!(
        inner.list(Path::new("/o")).unwrap(),
        vec!["big.log".to_string(), "small.index".to_string()]
    );
    assert_eq!(sim.ops(), ops);
}

#[test]
fn one_writer_per_log_directory_and_per_partition() {
    let root = std::env::temp_dir().join(format!("klog-rw-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let storage: Arc<dyn Storage> = Arc::new(StdStorage);
    let log_dir = LogDir::open(storage.clone(), &root).unwrap();
    assert!(root.join(".lock").exists());
    assert_eq!(
        std::fs::read_to_string(root.join(".lock")).unwrap(),
        std::process::id().to_string()
    );
    let (log, _) = log_dir.open_partition("t-0", config()).unwrap();
    // The same process: the lock is shared, but a partition has one writer.
    let second = log_dir.open_partition("t-0", config());
    assert!(
        matches!(second, Err(Error::PartitionInUse { .. })),
        "{second:?}"
    );
    let (other, _) = log_dir.open_partition("t-1", config()).unwrap();
    // A reader needs neither.
    let (reader, _) = PartitionLog::open_read_only(
        storage.clone(),
        &root.join("t-0"),
        config(),
        OpenOptions::default(),
    )
    .unwrap();
    assert_eq!(reader.log_end_offset(), 0);
    drop((log, other, log_dir));
    // Released: a new writer gets in.
    let (log, _) = PartitionLog::open(
        storage.clone(),
        &root.join("t-0"),
        config(),
        OpenOptions::default(),
    )
    .unwrap();
    drop(log);
    std::fs::remove_dir_all(&root).unwrap();
}
