//! A mirrored partition's `.index` and `.timeindex` are the source's, byte for byte, when both use the same
//! configs: the mirror appends whole fetches, and Kafka 4.x indexes each batch of an append on its own
//! (`LogSegment.append`), exactly as the source's leader did one batch at a time. `klog verify` of the
//! mirror is clean. Both sides here are klog's index code: `tests/kafka_mirror_indexes.rs` holds the
//! mirror to the indexes a real Kafka broker wrote.

#[path = "mirror_support/mod.rs"]
mod support;

use std::path::Path;

use klog::log::format::{BatchBuilder, Compression};
use klog::recovery::verify_partition;
use support::*;

const SEGMENT: &str = "00000000000000000000";

/// `n` plain batches of 1 to 12 records with values of 10 to 2,000 bytes (some batches alone pass the
/// index interval, some need several), timestamps going back now and then.
fn varied_batches(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let records = 1 + (i * 7) % 12;
            let value = vec![b'v'; 10 + (i * 389) % 2_000];
            let ts =
                1_700_000_000_000 - 600_000 + i as i64 * 1_000 - if i % 5 == 3 { 7_000 } else { 0 };
            let mut b = BatchBuilder::new(Compression::None);
            for r in 0..records {
                b.append(ts + r as i64, Some(b"key"), Some(&value), &[])
                    .unwrap();
            }
            b.build().unwrap()
        })
        .collect()
}

/// (relative offset, position) of every `.index` entry.
type OffsetEntries = Vec<(i32, u32)>;
/// (timestamp, relative offset) of every `.timeindex` entry.
type TimeEntries = Vec<(i64, i32)>;

fn entries(dir: &Path) -> (OffsetEntries, TimeEntries) {
    let index = std::fs::read(dir.join(format!("{SEGMENT}.index"))).unwrap();
    let time = std::fs::read(dir.join(format!("{SEGMENT}.timeindex"))).unwrap();
    (
        index
            .chunks(8)
            .map(|e| {
                (
                    i32::from_be_bytes(e[0..4].try_into().unwrap()),
                    u32::from_be_bytes(e[4..8].try_into().unwrap()),
                )
            })
            .collect(),
        time.chunks(12)
            .map(|e| {
                (
                    i64::from_be_bytes(e[0..8].try_into().unwrap()),
                    i32::from_be_bytes(e[8..12].try_into().unwrap()),
                )
            })
            .collect(),
    )
}

#[test]
fn a_mirror_has_the_sources_indexes_byte_for_byte_and_verifies_clean() {
    let env = Env::new();
    let configs = [("index.interval.bytes".to_string(), "1000".to_string())];
    let a = env.cluster("a");
    let id = a.create_topic("t", 1, None, &configs).unwrap();
    let produced = varied_batches(600);
    let total: usize = produced.iter().map(Vec::len).sum();
    assert!(total > 2 << 20, "several fetches of 1 MiB: {total} bytes");
    for mut b in produced {
        a.produce("t", 0, &mut b).unwrap();
    }
    let b = env.cluster("b");
    // The mirror's topic with the source's id and configs (a mirror created alone takes the defaults).
    b.create_topic("t", 1, Some(id), &configs).unwrap();
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    let report = b.run_until_idle(100);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(batches(&log(&b, "t")), batches(&log(&a, "t")));
    let (source_dir, mirror_dir) = (log(&a, "t").dir().to_owned(), log(&b, "t").dir().to_owned());
    b.close().unwrap();
    a.close().unwrap();

    let (source_index, source_time) = entries(&source_dir);
    assert!(
        source_index.len() > 100,
        "{} index entries",
        source_index.len()
    );
    let (mirror_index, mirror_time) = entries(&mirror_dir);
    assert_eq!(mirror_index, source_index, ".index entries");
    assert_eq!(mirror_time, source_time, ".timeindex entries");
    for suffix in [".log", ".index", ".timeindex"] {
        let name = format!("{SEGMENT}{suffix}");
        assert!(
            files_equal(&source_dir.join(&name), &mirror_dir.join(&name)),
            "{name} differs"
        );
    }
    for dir in [&source_dir, &mirror_dir] {
        let problems = verify_partition(&klog::log::io::StdStorage, dir).unwrap();
        assert!(problems.is_empty(), "{}: {problems:?}", dir.display());
    }
}
