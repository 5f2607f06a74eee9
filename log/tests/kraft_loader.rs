//! `load_metadata_log`: a `__cluster_metadata-0` directory read as Kafka's `MetadataLoader` reads it: the
//! newest snapshot, then the log from the snapshot's end offset; transactions applied at their end and
//! dropped on abort; a removed topic's configs gone; a config deleted by a null value; a record that does
//! not decode named by file and offset.

use std::path::{Path, PathBuf};

use klog_log::format::{BatchBuilder, Compression};
use klog_log::io::StdStorage;
use klog_log::kraft::{load_metadata_log, ConfigResourceType, SnapshotId};
use klog_log::{Error, MetadataCorruption};

fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn compact(s: &str) -> Vec<u8> {
    assert!(s.len() < 127);
    let mut v = vec![s.len() as u8 + 1];
    v.extend_from_slice(s.as_bytes());
    v
}

fn topic(name: &str, id: u8) -> Vec<u8> {
    let mut v = vec![1, 2, 0];
    v.extend(compact(name));
    v.extend([id; 16]);
    v.push(0);
    v
}

fn config(resource: &str, name: &str, value: Option<&str>) -> Vec<u8> {
    let mut v = vec![1, 4, 0, 2];
    v.extend(compact(resource));
    v.extend(compact(name));
    v.extend(value.map_or(vec![0], compact));
    v.push(0);
    v
}

fn remove_topic(id: u8) -> Vec<u8> {
    let mut v = vec![1, 9, 0];
    v.extend([id; 16]);
    v.push(0);
    v
}

const BEGIN: [u8; 4] = [1, 23, 0, 0];
const END: [u8; 4] = [1, 24, 0, 0];
const ABORT: [u8; 4] = [1, 25, 0, 0];

/// One batch of records (null keys) at `base_offset`.
fn batch(base_offset: i64, values: &[Vec<u8>]) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None).base_offset(base_offset);
    for v in values {
        b.append(1_000, None, Some(v), &[]).unwrap();
    }
    b.build().unwrap()
}

#[test]
fn the_newest_snapshot_then_the_log_from_its_end_with_transactions() {
    let dir = temp_dir("kraft-loader");
    // An older snapshot that must not be used, and the newest, ending at offset 3.
    std::fs::write(
        dir.join("00000000000000000001-0000000001.checkpoint"),
        batch(0, &[topic("old", 8)]),
    )
    .unwrap();
    let newest = SnapshotId {
        end_offset: 3,
        epoch: 1,
    };
    std::fs::write(
        dir.join(newest.file_name()),
        batch(
            0,
            &[
                topic("a", 1),
                config("a", "segment.bytes", Some("2048")),
                topic("b", 2),
                config("b", "retention.ms", Some("5")),
            ],
        ),
    )
    .unwrap();
    let mut log = batch(
        0,
        &[
            topic("below-the-snapshot", 9),
            topic("x", 10),
            topic("y", 11),
        ],
    );
    log.extend(batch(
        3,
        &[
            config("a", "index.interval.bytes", Some("100")),
            config("a", "segment.bytes", None),
            remove_topic(2),
        ],
    ));
    log.extend(batch(6, &[BEGIN.to_vec(), topic("c", 3), END.to_vec()]));
    log.extend(batch(9, &[BEGIN.to_vec(), topic("d", 4), ABORT.to_vec()]));
    log.extend(batch(12, &[BEGIN.to_vec(), topic("e", 5)]));
    std::fs::write(dir.join("00000000000000000000.log"), log).unwrap();

    let m = load_metadata_log(&StdStorage, &dir).unwrap();
    assert_eq!(m.snapshot, Some(newest));
    assert_eq!(m.end_offset, 14);
    assert_eq!(m.open_transaction, Some(12));
    let mut names: Vec<&str> = m.image.topics.values().map(|t| t.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["a", "c"]);
    let a = m.image.configs_of(ConfigResourceType::Topic, "a");
    assert_eq!(a.len(), 1, "{a:?}");
    assert_eq!(a["index.interval.bytes"], "100");
    assert!(
        m.image
            .configs_of(ConfigResourceType::Topic, "b")
            .is_empty(),
        "a removed topic's configs go with it"
    );
    let config = m.image.topic_config("a", None);
    assert_eq!(config.config.index_interval_bytes, 100);
    assert_eq!(
        config.config.segment_bytes,
        1 << 30,
        "deleted: Kafka's default"
    );
}

#[test]
fn a_record_that_does_not_decode_is_an_error_naming_file_and_offset() {
    let dir = temp_dir("kraft-loader-corrupt");
    let mut bad = topic("a", 1);
    bad.push(7); // a byte after the record
    let path = dir.join("00000000000000000000.log");
    std::fs::write(&path, batch(0, &[topic("ok", 2), bad])).unwrap();
    match load_metadata_log(&StdStorage, &dir) {
        Err(Error::CorruptMetadataRecord {
            path: p,
            offset: 1,
            reason: MetadataCorruption::Garbage { bytes: 1, .. },
        }) => assert_eq!(p, path),
        other => panic!("{other:?}"),
    }
    // A torn batch at the end (a crash) ends the read without an error.
    let mut torn = batch(0, &[topic("ok", 2)]);
    let next = batch(1, &[topic("torn", 3)]);
    torn.extend_from_slice(&next[..next.len() - 5]);
    std::fs::write(&path, torn).unwrap();
    let m = load_metadata_log(&StdStorage, &dir).unwrap();
    assert_eq!(m.end_offset, 1);
    assert_eq!(m.image.topics.len(), 1);
}
