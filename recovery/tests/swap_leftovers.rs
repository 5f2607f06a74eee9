//! Completing Kafka's interrupted segment replacement (`LogLoader.removeTempFilesAndCollectSwapFiles`) at
//! the states a kill between two renames leaves. The real broker killed at each rename is
//! tests/kafka_compaction_swap.rs; this pins the states without Java.

use std::path::Path;

use klog_log::io::{SimStorage, Storage};
use klog_recovery::swap::complete_swaps;

fn put(storage: &SimStorage, path: &Path, bytes: &[u8]) {
    let file = storage.create(path).unwrap();
    file.write_at(bytes, 0).unwrap();
    file.sync().unwrap();
}

#[test]
fn index_swaps_left_after_the_log_swap_was_renamed_take_their_place() {
    // Killed after `.log.swap -> .log` and before the indexes' renames: the old indexes are already
    // `.deleted`; the new ones are only under `.swap`. Kafka renames every remaining `.swap`.
    let storage = SimStorage::new(7);
    let dir = Path::new("/d/t-0");
    storage.create_dir_all(dir).unwrap();
    put(&storage, &dir.join("00000000000000000000.log"), b"new log");
    put(
        &storage,
        &dir.join("00000000000000000000.index.swap"),
        b"new index",
    );
    put(
        &storage,
        &dir.join("00000000000000000000.timeindex.swap"),
        b"new timeindex",
    );
    put(
        &storage,
        &dir.join("00000000000000000000.index.deleted"),
        b"old index",
    );
    let report = complete_swaps(&storage, dir).unwrap();
    let mut names = storage.list(dir).unwrap();
    names.sort();
    assert!(
        !names.iter().any(|n| n.ends_with(".swap")),
        "a .swap left: {names:?}"
    );
    assert!(
        names.contains(&"00000000000000000000.index".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"00000000000000000000.timeindex".to_owned()),
        "{names:?}"
    );
    assert_eq!(report.completed, vec![0]);
    let index = klog_log::io::read_file(&storage, &dir.join("00000000000000000000.index"))
        .unwrap()
        .unwrap();
    assert_eq!(index, b"new index");
}
