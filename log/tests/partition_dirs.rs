//! Partition directory names follow Kafka's rules (checked before anything is written), a checkpoint
//! line klog cannot parse is an error naming the file and the line, and one partition's checkpoint
//! entries never disappear because of another partition.

use std::path::Path;
use std::sync::Arc;

use klog_log::checkpoint::{
    read_offsets, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
};
use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression};
use klog_log::io::{read_file, write_atomic, SimStorage, Storage};
use klog_log::log_dir::LogDir;
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::Error;

const ROOT: &str = "/logs";

fn batch() -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(1_700_000_000_000, Some(b"k"), Some(b"v"), &[])
        .unwrap();
    b.build().unwrap()
}

fn storage() -> Arc<dyn Storage> {
    Arc::new(SimStorage::new(3))
}

/// `good-0` with 5 batches, its high watermark at the end and a log start of 2 (above its first base).
fn good_partition(storage: &Arc<dyn Storage>) {
    let mut dir = LogDir::open(storage.clone(), Path::new(ROOT)).unwrap();
    let (log, _) = dir.open_partition("good-0", LogConfig::default()).unwrap();
    for _ in 0..5 {
        log.append_as_leader(&mut batch(), 0).unwrap();
    }
    log.update_high_watermark(5);
    log.increment_log_start_offset(2).unwrap();
    dir.close_partition(log).unwrap();
    dir.close().unwrap();
}

fn offsets(storage: &Arc<dyn Storage>, file: &str) -> Vec<((String, i32), i64)> {
    read_offsets(storage.as_ref(), &Path::new(ROOT).join(file))
        .unwrap()
        .into_iter()
        .collect()
}

fn good_entries(storage: &Arc<dyn Storage>) -> [Vec<((String, i32), i64)>; 3] {
    [
        offsets(storage, RECOVERY_POINT_CHECKPOINT),
        offsets(storage, LOG_START_OFFSET_CHECKPOINT),
        offsets(storage, REPLICATION_OFFSET_CHECKPOINT),
    ]
}

const ILLEGAL: &[&str] = &[
    "my topic-0",
    "-0",
    ".-0",
    "..-0",
    "t",
    "t-",
    "t-x",
    "t-+1",
    "t-01",
    "t-2147483648",
    "t/x-0",
    "tö-0",
    "t-0.4f2a-delete",
    "t-0.4f2a-future",
    "t-0.4f2a-stray",
];

#[test]
fn illegal_partition_directory_names_are_refused_before_anything_is_written() {
    let storage = storage();
    good_partition(&storage);
    let before = good_entries(&storage);
    let long = format!("{}-0", "t".repeat(250));
    let names = ILLEGAL.iter().copied().chain([long.as_str()]);
    for name in names {
        let dir = LogDir::open(storage.clone(), Path::new(ROOT)).unwrap();
        let err = dir
            .open_partition(name, LogConfig::default())
            .expect_err(name);
        assert!(
            matches!(err, Error::InvalidPartitionDir { .. }),
            "{name}: {err}"
        );
        let message = err.to_string();
        assert!(message.contains(&format!("{ROOT}/{name}")), "{message}");
        assert!(
            storage.list(&Path::new(ROOT).join(name)).is_err(),
            "{name}: the directory was created"
        );
        if name.contains('/') {
            // A path: `PartitionLog::open` of it is `x-0` in the log directory `/logs/t`.
            dir.close().unwrap();
            continue;
        }
        let direct = PartitionLog::open(
            storage.clone(),
            &Path::new(ROOT).join(name),
            LogConfig::default(),
            OpenOptions::default(),
        );
        assert!(direct.is_err(), "{name}: PartitionLog::open accepted it");
        assert!(storage.list(&Path::new(ROOT).join(name)).is_err());
        dir.close().unwrap();
        assert_eq!(
            good_entries(&storage),
            before,
            "{name}: a checkpoint changed"
        );
    }
    // Kafka's legal names all open.
    let longest = format!("{}-7", "t".repeat(249));
    for name in [
        "a-0",
        "a.b_c-d-12",
        "__consumer_offsets-15",
        "x-2147483647",
        &longest,
    ] {
        let mut dir = LogDir::open(storage.clone(), Path::new(ROOT)).unwrap();
        let (log, _) = dir.open_partition(name, LogConfig::default()).unwrap();
        dir.close_partition(log).unwrap();
        dir.close().unwrap();
    }
    let entries = offsets(&storage, RECOVERY_POINT_CHECKPOINT);
    assert_eq!(entries.len(), 6, "{entries:?}");
}

#[test]
fn a_checkpoint_line_klog_cannot_parse_is_an_error_naming_the_file_and_line() {
    let storage = storage();
    good_partition(&storage);
    let path = Path::new(ROOT).join(REPLICATION_OFFSET_CHECKPOINT);
    let cases: &[(&str, usize)] = &[
        ("0\n2\ngood 0 5\nmy topic 0 5\n", 4),
        ("0\n2\n 0 5\ngood 0 5\n", 3),
        ("0\n1\ngood zero 5\n", 3),
        ("0\n1\ngood 0 five\n", 3),
        ("0\n1\ngood 0 99999999999999999999\n", 3),
        ("0\n3\ngood 0 5\n", 2),
        ("0\nmany\ngood 0 5\n", 2),
        ("7\n1\ngood 0 5\n", 1),
        ("\u{0}\u{1}garbage", 1),
    ];
    for (text, line) in cases {
        write_atomic(storage.as_ref(), &path, text.as_bytes()).unwrap();
        let err = LogDir::open(storage.clone(), Path::new(ROOT)).expect_err(text);
        match &err {
            Error::CorruptFile {
                path: p, line: l, ..
            } => {
                assert_eq!(
                    (p.as_path(), *l),
                    (path.as_path(), *line),
                    "{text:?}: {err}"
                )
            }
            other => panic!("{text:?}: {other}"),
        }
        // Nothing was rewritten: the file is as the operator left it.
        let now = read_file(storage.as_ref(), &path).unwrap().unwrap();
        assert_eq!(now, text.as_bytes());
    }
}

#[test]
fn salvaging_keeps_the_entries_that_parse_and_names_the_others() {
    let storage = storage();
    good_partition(&storage);
    let path = Path::new(ROOT).join(RECOVERY_POINT_CHECKPOINT);
    write_atomic(
        storage.as_ref(),
        &path,
        b"0\n3\ngood 0 5\nmy topic 0 5\nother 1 7\n",
    )
    .unwrap();
    let (mut dir, problems) = LogDir::open_salvaging(storage.clone(), Path::new(ROOT)).unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        matches!(&problems[0], Error::CorruptFile { path: p, line: 4, .. } if *p == path),
        "{}",
        problems[0]
    );
    let (log, _) = dir.open_partition("good-0", LogConfig::default()).unwrap();
    assert_eq!(log.recovery_point(), 5);
    assert_eq!(log.log_start_offset(), 2);
    dir.close_partition(log).unwrap();
    dir.close().unwrap();
    // The rewrite keeps every entry that parsed (also `other-1`, which was not opened).
    let entries = offsets(&storage, RECOVERY_POINT_CHECKPOINT);
    assert_eq!(
        entries,
        vec![(("good".into(), 0), 5), (("other".into(), 1), 7)]
    );
}

#[test]
fn a_good_partitions_entries_survive_another_partitions_open_and_close() {
    let storage = storage();
    good_partition(&storage);
    let before = good_entries(&storage);
    // The case: an illegal neighbour used to write a line that made the next open drop every entry.
    let mut dir = LogDir::open(storage.clone(), Path::new(ROOT)).unwrap();
    assert!(dir
        .open_partition("my topic-0", LogConfig::default())
        .is_err());
    let (other, _) = dir.open_partition("other-0", LogConfig::default()).unwrap();
    other.append_as_leader(&mut batch(), 0).unwrap();
    dir.close_partition(other).unwrap();
    dir.close().unwrap();
    let dir = LogDir::open(storage.clone(), Path::new(ROOT)).unwrap();
    let (good, _) = dir.open_partition("good-0", LogConfig::default()).unwrap();
    assert_eq!(
        (
            good.log_start_offset(),
            good.high_watermark(),
            good.log_end_offset()
        ),
        (2, 5, 5)
    );
    let after = good_entries(&storage);
    for (b, a) in before.iter().zip(&after) {
        for entry in b {
            assert!(a.contains(entry), "{entry:?} dropped: {a:?}");
        }
    }
}

#[test]
fn two_log_dir_users_in_one_process_keep_each_others_entries() {
    let storage = storage();
    good_partition(&storage);
    // Both read the checkpoints before either writes.
    let mut a = LogDir::open(storage.clone(), Path::new(ROOT)).unwrap();
    let mut b = LogDir::open(storage.clone(), Path::new(ROOT)).unwrap();
    let (good, _) = a.open_partition("good-0", LogConfig::default()).unwrap();
    good.append_as_leader(&mut batch(), 0).unwrap();
    good.update_high_watermark(6);
    good.flush(6).unwrap();
    a.checkpoint(&good).unwrap();
    let (other, _) = b.open_partition("other-0", LogConfig::default()).unwrap();
    other.append_as_leader(&mut batch(), 0).unwrap();
    other.flush(1).unwrap();
    b.checkpoint(&other).unwrap();
    let points = offsets(&storage, RECOVERY_POINT_CHECKPOINT);
    assert_eq!(
        points,
        vec![(("good".into(), 0), 6), (("other".into(), 0), 1)],
        "b's write kept a's newer entry"
    );
    let hws = offsets(&storage, REPLICATION_OFFSET_CHECKPOINT);
    assert!(hws.contains(&(("good".into(), 0), 6)), "{hws:?}");
}

/// Kafka's `UnifiedLog.assignTopicId`: a partition directory whose `partition.metadata` names another
/// topic id belongs to another topic of that name (a deleted topic's leftover, a directory copied in).
/// `set_topic_id` overwrote the file, so `klog topic create` over such a directory served the old
/// topic's records as the new topic's; now it is refused naming both ids, and the file is kept.
#[test]
fn a_partition_directory_of_another_topic_id_is_not_adopted() {
    use klog_log::checkpoint::{read_partition_metadata, TopicId};
    let storage = storage();
    let mut dir = LogDir::open(storage.clone(), Path::new(ROOT)).unwrap();
    let (log, _) = dir.open_partition("t-0", LogConfig::default()).unwrap();
    let first = TopicId::from_random([1; 16]);
    log.set_topic_id(first).unwrap();
    log.set_topic_id(first).unwrap(); // the same id again: nothing to refuse
    log.append_as_leader(&mut batch(), 0).unwrap();
    let other = TopicId::from_random([2; 16]);
    let err = log.set_topic_id(other).unwrap_err();
    assert!(matches!(err, Error::InconsistentTopicId { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&first.to_string()) && text.contains(&other.to_string()),
        "{text}"
    );
    assert_eq!(
        read_partition_metadata(storage.as_ref(), &Path::new(ROOT).join("t-0")).unwrap(),
        Some(first)
    );
    dir.close_partition(log).unwrap();
    dir.close().unwrap();
}
