//! Kafka's clean-shutdown rule (`LogManager.shutdown`): `.kafka_cleanshutdown` vouches that every log
//! of the directory was closed cleanly. A writer puts it down only for partition directories it closed
//! cleanly, or, when the marker was there at open, for those it never opened for writing; a partition
//! directory it cannot list withholds the marker (Kafka takes such a log directory offline). One writable
//! `LogDir` per root per process, and the small files are written through temp names of their own.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::checkpoint::CLEAN_SHUTDOWN_FILE;
use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression};
use klog_log::io::{write_atomic, SimStorage, StdStorage, Storage};
use klog_log::log_dir::{partition_dir_names, LogDir};
use klog_log::Error;

const ROOT: &str = "/logs";

fn batch() -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(1_700_000_000_000, Some(b"k"), Some(b"v"), &[])
        .unwrap();
    b.build().unwrap()
}

fn marker(storage: &dyn Storage) -> bool {
    storage
        .list(Path::new(ROOT))
        .unwrap()
        .iter()
        .any(|n| n == CLEAN_SHUTDOWN_FILE)
}

/// `x-0` and `y-0` with two batches each, closed cleanly; the marker kept only when `clean`.
fn two_partitions(sim: &SimStorage, clean: bool) {
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let mut dir = LogDir::open(storage.clone(), Path::new(ROOT)).unwrap();
    for name in ["x-0", "y-0"] {
        let (log, _) = dir.open_partition(name, LogConfig::default()).unwrap();
        log.append_as_leader(&mut batch(), 0).unwrap();
        log.append_as_leader(&mut batch(), 0).unwrap();
        dir.close_partition(log).unwrap();
    }
    dir.close().unwrap();
    assert!(marker(storage.as_ref()), "every partition closed cleanly");
    if !clean {
        storage
            .remove(&Path::new(ROOT).join(CLEAN_SHUTDOWN_FILE))
            .unwrap();
    }
}

#[test]
fn a_partition_directory_that_cannot_be_listed_withholds_the_marker() {
    for clean in [false, true] {
        let sim = SimStorage::new(7);
        two_partitions(&sim, clean);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        sim.deny_list(&Path::new(ROOT).join("x-0"));
        // Listed, so a recovery reports it instead of leaving it unchecked without a word.
        assert_eq!(
            partition_dir_names(storage.as_ref(), Path::new(ROOT)).unwrap(),
            ["x-0", "y-0"],
            "clean {clean}"
        );
        let mut dir = LogDir::open(storage.clone(), Path::new(ROOT)).unwrap();
        assert_eq!(dir.had_clean_shutdown(), clean);
        let opened = dir.open_partition("x-0", LogConfig::default());
        let err = opened.expect_err("x-0 cannot be listed").to_string();
        assert!(err.contains("/logs/x-0"), "{err}");
        let (y, _) = dir.open_partition("y-0", LogConfig::default()).unwrap();
        dir.close_partition(y).unwrap();
        dir.close().unwrap();
        assert!(
            !marker(storage.as_ref()),
            "clean {clean}: the marker vouched for x-0, which no one could read"
        );
    }
}

#[test]
fn a_partition_opened_and_never_closed_withholds_the_marker_of_a_clean_directory() {
    let sim = SimStorage::new(8);
    two_partitions(&sim, true);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let dir = LogDir::open(storage.clone(), Path::new(ROOT)).unwrap();
    assert!(dir.had_clean_shutdown());
    let (x, _) = dir.open_partition("x-0", LogConfig::default()).unwrap();
    x.append_as_leader(&mut batch(), 0).unwrap();
    drop(x); // neither flushed nor closed: its tail is not vouched for
    dir.close().unwrap();
    assert!(
        !marker(storage.as_ref()),
        "the marker vouched for x-0, which was never closed"
    );
}

#[test]
fn the_marker_goes_down_for_what_was_closed_or_left_alone() {
    // Unclean at open: vouched only once every partition directory was opened and closed cleanly.
    let sim = SimStorage::new(9);
    two_partitions(&sim, false);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let mut dir = LogDir::open(storage.clone(), Path::new(ROOT)).unwrap();
    let (x, _) = dir.open_partition("x-0", LogConfig::default()).unwrap();
    dir.close_partition(x).unwrap();
    dir.close().unwrap();
    assert!(
        !marker(storage.as_ref()),
        "y-0 was neither clean nor closed"
    );
    let mut dir = LogDir::open(storage.clone(), Path::new(ROOT)).unwrap();
    for name in ["x-0", "y-0"] {
        let (log, _) = dir.open_partition(name, LogConfig::default()).unwrap();
        dir.close_partition(log).unwrap();
    }
    dir.close().unwrap();
    assert!(marker(storage.as_ref()));
    // Clean at open: a partition left alone stays as clean as it was.
    let mut dir = LogDir::open(storage.clone(), Path::new(ROOT)).unwrap();
    let (y, _) = dir.open_partition("y-0", LogConfig::default()).unwrap();
    dir.close_partition(y).unwrap();
    dir.close().unwrap();
    assert!(marker(storage.as_ref()));
}

fn scratch(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("klog-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    root
}

#[test]
fn one_writable_log_dir_per_root_in_a_process() {
    let root = scratch("one-log-dir");
    let storage: Arc<dyn Storage> = Arc::new(StdStorage);
    let mut first = LogDir::open(storage.clone(), &root).unwrap();
    let second = LogDir::open(storage.clone(), &root);
    match &second {
        Err(Error::LogDirInUse { dir }) => assert_eq!(dir, &root),
        other => panic!("a second writable LogDir of {}: {other:?}", root.display()),
    }
    // A reader needs no claim.
    let reader = LogDir::open_read_only(storage.clone(), &root).unwrap();
    drop(reader);
    let (log, _) = first.open_partition("t-0", LogConfig::default()).unwrap();
    log.append_as_leader(&mut batch(), 0).unwrap();
    first.close_partition(log).unwrap();
    first.close().unwrap();
    assert!(root.join(CLEAN_SHUTDOWN_FILE).exists());
    // Released by the close: the next writer gets in, and a dropped one releases it too.
    let again = LogDir::open(storage.clone(), &root).unwrap();
    drop(again);
    let again = LogDir::open(storage.clone(), &root).unwrap();
    again.close().unwrap();
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn small_files_written_at_once_from_two_threads_each_land_whole() {
    // Two writers of one file (two checkpoints racing in one process) through one fixed temp name
    // removed, created and renamed each other's temp file: a rename found nothing, or a file held
    // the other's half-written bytes.
    let root = scratch("write-atomic-race");
    std::fs::create_dir_all(&root).unwrap();
    let path = root.join("recovery-point-offset-checkpoint");
    let texts: Vec<Vec<u8>> = (0..2u8).map(|t| vec![b'a' + t; 64 * 1024]).collect();
    std::thread::scope(|scope| {
        let texts = &texts;
        for text in texts {
            let path = &path;
            scope.spawn(move || {
                for _ in 0..200 {
                    write_atomic(&StdStorage, path, text).unwrap();
                    let now = std::fs::read(path).unwrap();
                    assert!(texts.contains(&now), "a file mixing two writes");
                }
            });
        }
    });
    let left: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        left,
        ["recovery-point-offset-checkpoint"],
        "temp files left"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_log_dir_shut_down_opens_no_more_partitions() {
    let sim = SimStorage::new(11);
    two_partitions(&sim, true);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let mut dir = LogDir::open(storage.clone(), Path::new(ROOT)).unwrap();
    assert!(
        dir.shut_down().unwrap(),
        "nothing opened since a clean shutdown"
    );
    assert!(marker(storage.as_ref()));
    // The marker now vouches for x-0 as it is: a write through this LogDir would make it lie.
    match dir.open_partition("x-0", LogConfig::default()) {
        Err(Error::LogDirShutDown { dir: d }) => assert_eq!(d, Path::new(ROOT)),
        other => panic!("a partition opened after the shutdown: {other:?}"),
    }
    drop(dir);
    // A new open of the directory may write again.
    let dir = LogDir::open(storage, Path::new(ROOT)).unwrap();
    let (log, _) = dir.open_partition("x-0", LogConfig::default()).unwrap();
    assert_eq!(log.log_end_offset(), 2);
}
