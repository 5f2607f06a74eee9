//! The partition log against Kafka's own files and against a model, on every storage backend.

#[path = "../../tests/common/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::clock::ManualClock;
use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Batches, Compression};
use klog_log::io::{read_file, SimStorage, StdStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::{Error, KafkaError};

/// The repository's Kafka-written partition directories (`fixtures/`, made by `scripts/make-fixtures.sh`).
fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/kafka-segments")
}

/// `../shared/fixtures` beside the checkout: used when present, required when
/// `KLOG_REQUIRE_SHARED_FIXTURES=1` (CI).
fn shared_fixtures() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/kafka-segments");
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var("KLOG_REQUIRE_SHARED_FIXTURES").map_or(true, |v| v != "1"),
        "KLOG_REQUIRE_SHARED_FIXTURES=1 but {} is missing",
        dir.display()
    );
    skip::skip(&format!("the shared fixtures: {} is absent", dir.display()));
    None
}

/// A partition directory's file names with this extension, sorted.
fn names_with(dir: &Path, ext: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(&format!(".{ext}")))
        .collect();
    names.sort();
    names
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every backend the suite runs on: (name, storage, root directory).
fn backends(name: &str) -> Vec<(&'static str, Arc<dyn Storage>, PathBuf)> {
    let mut v: Vec<(&'static str, Arc<dyn Storage>, PathBuf)> = vec![
        (
            "std",
            Arc::new(StdStorage),
            temp_dir(&format!("{name}-std")),
        ),
        (
            "sim",
            Arc::new(SimStorage::new(42)),
            PathBuf::from(format!("/sim/{name}")),
        ),
    ];
    if let Ok(uring) = klog_log::io::open_backend(klog_log::io::IoBackend::Uring) {
        v.push(("uring", uring, temp_dir(&format!("{name}-uring"))));
    } else if std::env::var("KLOG_REQUIRE_URING").is_ok_and(|v| v == "1") {
        panic!("KLOG_REQUIRE_URING=1 but the io_uring backend is unavailable");
    } else {
        skip::skip("the uring backend's runs: io_uring is unavailable here");
    }
    v
}

fn batches_of(bytes: &[u8]) -> Vec<Vec<u8>> {
    Batches::new(bytes)
        .map(|b| b.unwrap().as_bytes().to_vec())
        .collect()
}

fn open(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    config: LogConfig,
    options: OpenOptions,
) -> PartitionLog {
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    PartitionLog::open_with_clock(storage.clone(), dir, config, options, clock)
        .unwrap()
        .0
}

/// Appending a Kafka broker's partition as a follower, one batch per append as the broker did, with the
/// topic's `segment.bytes`, and closing cleanly yields Kafka's own files byte for byte: the same rolls, every
/// `.log`, `.index`, `.timeindex` and `.txnindex`, and the leader-epoch checkpoint.
#[test]
fn kafka_partitions_are_reproduced_byte_for_byte() {
    let cases = [
        ("workload-0", "segment.bytes=16384"),
        ("batches-0", "segment.bytes=1073741824"),
        ("__transaction_state-0", "segment.bytes=104857600"),
    ];
    for (backend, storage, root) in backends("kafka-partitions") {
        for (partition, segment_bytes) in cases {
            let src = fixtures().join("clean").join(partition);
            let config = LogConfig::from_pairs([segment_bytes]).unwrap();
            let dir = root.join(partition);
            let log = open(&storage, &dir, config, OpenOptions::default());
            for name in names_with(&src, "log") {
                let bytes = std::fs::read(src.join(name)).unwrap();
                for batch in batches_of(&bytes) {
                    log.append_as_follower(&batch).unwrap();
                }
            }
            log.close().unwrap();
            let read = |name: &str| {
                read_file(storage.as_ref(), &dir.join(name))
                    .unwrap()
                    .unwrap_or_else(|| panic!("{backend} {partition}: klog wrote no {name}"))
            };
            for ext in ["log", "index", "timeindex", "txnindex"] {
                for name in names_with(&src, ext) {
                    let kafkas = std::fs::read(src.join(&name)).unwrap();
                    assert!(
                        read(&name) == kafkas,
                        "{backend} {partition}: {name} differs"
                    );
                }
            }
            // Kafka's restarts started epochs at the log end that no batch carries: only those are extra.
            let entries = |bytes: Vec<u8>| -> Vec<(i32, i64)> {
                let text = String::from_utf8(bytes).unwrap();
                text.lines()
                    .skip(2)
                    .map(|l| {
                        let (epoch, offset) = l.split_once(' ').unwrap();
                        (epoch.parse().unwrap(), offset.parse().unwrap())
                    })
                    .collect()
            };
            let ours = entries(read("leader-epoch-checkpoint"));
            let kafkas = entries(std::fs::read(src.join("leader-epoch-checkpoint")).unwrap());
            assert!(
                !ours.is_empty() && kafkas.starts_with(&ours),
                "{backend} {partition}: {ours:?} {kafkas:?}"
            );
            let end = log.log_end_offset();
            assert!(
                kafkas[ours.len()..].iter().all(|&(_, start)| start == end),
                "{kafkas:?}"
            );
        }
    }
}

/// The same on the shared fixtures (Kafka 3.4 and 4.2 brokers), when present.
#[test]
fn shared_kafka_fixture_indexes_are_reproduced_byte_for_byte() {
    let Some(shared) = shared_fixtures() else {
        return;
    };
    let cases = [
        ("nomanazeem", "__cluster_metadata-0", 34, 35),
        ("nomanazeem", "__consumer_offsets-15", 5, 6),
        ("panic08", "test-0", 0, 1),
        ("bheem", "cities-0", 0, 1),
    ];
    for (backend, storage, root) in backends("fixture-indexes") {
        for (owner, partition, index_entries, time_entries) in cases {
            let src = shared.join(owner).join(partition);
            let log_bytes = std::fs::read(src.join("00000000000000000000.log")).unwrap();
            let dir = root.join(partition);
            let log = open(&storage, &dir, LogConfig::default(), OpenOptions::default());
            for batch in batches_of(&log_bytes) {
                log.append_as_follower(&batch).unwrap();
            }
            log.close().unwrap();
            let read = |name: &str| {
                read_file(storage.as_ref(), &dir.join(name))
                    .unwrap()
                    .unwrap()
            };
            assert_eq!(
                read("00000000000000000000.log"),
                log_bytes,
                "{backend} {partition}: .log"
            );
            let index = read("00000000000000000000.index");
            let time_index = read("00000000000000000000.timeindex");
            assert_eq!(
                index.len(),
                index_entries * 8,
                "{backend} {partition}: .index entries"
            );
            assert_eq!(
                time_index.len(),
                time_entries * 12,
                "{backend} {partition}: .timeindex entries"
            );
            if index_entries > 0 {
                assert_eq!(
                    index,
                    std::fs::read(src.join("00000000000000000000.index")).unwrap(),
                    "{backend} {partition}"
                );
                assert_eq!(
                    time_index,
                    std::fs::read(src.join("00000000000000000000.timeindex")).unwrap(),
                    "{backend} {partition}"
                );
            }
            let epochs = read("leader-epoch-checkpoint");
            assert_eq!(
                epochs,
                std::fs::read(src.join("leader-epoch-checkpoint")).unwrap(),
                "{backend} {partition}"
            );
        }
    }
}

/// A copy of a Kafka partition directory (no indexes at all, unclean) opens: indexes rebuilt as Kafka wrote
/// them, every batch readable, the end offset right (Kafka's snapshot at its clean shutdown names it).
#[test]
fn a_kafka_directory_without_indexes_opens_and_rebuilds_them() {
    let src = fixtures().join("clean/batches-0");
    let dir = temp_dir("kafka-copy-own").join("batches-0");
    std::fs::create_dir_all(&dir).unwrap();
    for f in [
        "00000000000000000000.log",
        "leader-epoch-checkpoint",
        "partition.metadata",
    ] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let snapshots = names_with(&src, "snapshot");
    let end: i64 = snapshots.last().unwrap()[..20].parse().unwrap();
    let storage: Arc<dyn Storage> = Arc::new(StdStorage);
    let (log, report) =
        PartitionLog::open(storage, &dir, LogConfig::default(), OpenOptions::default()).unwrap();
    assert_eq!(report.rebuilt_indexes, vec![0]);
    assert_eq!(log.log_end_offset(), end);
    assert!(log.topic_id().unwrap().is_some());
    log.update_high_watermark(end);
    let read = log.read(end / 2, 1 << 20, None, true).unwrap();
    assert!(!batches_of(read.records.as_slice()).is_empty());
    assert_eq!(read.next_offset, end);
    log.close().unwrap();
    for name in [
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
    ] {
        let ours = std::fs::read(dir.join(name)).unwrap();
        assert!(
            ours == std::fs::read(src.join(name)).unwrap(),
            "{name} differs from Kafka's"
        );
    }
}

/// The same on the shared fixtures' Kafka 3.4 directory, when present.
#[test]
fn a_shared_kafka_directory_without_indexes_opens_and_rebuilds_them() {
    let Some(shared) = shared_fixtures() else {
        return;
    };
    let dir = temp_dir("kafka-copy").join("test-0");
    std::fs::create_dir_all(&dir).unwrap();
    for f in [
        "00000000000000000000.log",
        "leader-epoch-checkpoint",
        "partition.metadata",
    ] {
        std::fs::copy(shared.join("panic08/test-0").join(f), dir.join(f)).unwrap();
    }
    let storage: Arc<dyn Storage> = Arc::new(StdStorage);
    let (log, report) =
        PartitionLog::open(storage, &dir, LogConfig::default(), OpenOptions::default()).unwrap();
    assert_eq!(report.rebuilt_indexes, vec![0]);
    assert_eq!(log.log_end_offset(), 97);
    assert!(log.topic_id().unwrap().is_some());
    log.update_high_watermark(97);
    let read = log.read(50, 1 << 20, None, true).unwrap();
    let batches = batches_of(read.records.as_slice());
    assert!(!batches.is_empty());
    assert_eq!(read.next_offset, 97);
}

fn build(records: usize, value_len: usize, ts: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    for i in 0..records {
        b.append(
            ts + i as i64,
            Some(format!("k{i}").as_bytes()),
            Some(&vec![b'v'; value_len]),
            &[],
        )
        .unwrap();
    }
    b.build().unwrap()
}

#[test]
fn leader_append_assigns_offsets_stamps_epochs_and_refuses_bad_batches_whole() {
    for (backend, storage, root) in backends("leader-append") {
        let dir = root.join("orders-0");
        let log = open(&storage, &dir, LogConfig::default(), OpenOptions::default());
        let mut b = build(3, 10, 1_800_000_000_000);
        let info = log.append_as_leader(&mut b, 5).unwrap();
        assert_eq!((info.first_offset, info.last_offset), (0, 2), "{backend}");
        let mut b = build(2, 10, 1_800_000_000_000);
        assert_eq!(log.append_as_leader(&mut b, 6).unwrap().first_offset, 3);
        let epochs: Vec<(i32, i64)> = log
            .leader_epochs()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect();
        assert_eq!(epochs, vec![(5, 0), (6, 3)]);

        let mut corrupt = build(1, 10, 1_800_000_000_000);
        let last = corrupt.len() - 1;
        corrupt[last] ^= 1;
        let err = log.append_as_leader(&mut corrupt, 6).unwrap_err();
        assert_eq!(
            err.kafka_error(),
            KafkaError::CorruptMessage,
            "{backend}: {err}"
        );

        let mut huge = build(1, 2_000_000, 1_800_000_000_000);
        assert_eq!(
            log.append_as_leader(&mut huge, 6)
                .unwrap_err()
                .kafka_error(),
            KafkaError::MessageTooLarge
        );

        let mut marker =
            BatchBuilder::end_txn_marker(klog_log::format::ControlRecordType::Commit, 1, 0, 0, 0)
                .unwrap()
                .build()
                .unwrap();
        assert_eq!(
            log.append_as_leader(&mut marker, 6)
                .unwrap_err()
                .kafka_error(),
            KafkaError::InvalidRecord
        );
        assert_eq!(
            log.log_end_offset(),
            5,
            "{backend}: nothing was written by refused appends"
        );

        log.update_high_watermark(5);
        let read = log.read(0, 1 << 20, None, false).unwrap();
        let got = batches_of(read.records.as_slice());
        assert_eq!(got.len(), 2);
        let (first, _) = klog_log::format::RecordBatch::parse(&got[1], 0).unwrap();
        assert_eq!(
            (first.base_offset(), first.partition_leader_epoch()),
            (3, 6)
        );
    }
}

#[test]
fn follower_append_keeps_bytes_and_refuses_going_backwards() {
    for (backend, storage, root) in backends("follower-append") {
        let dir = root.join("f-0");
        let log = open(&storage, &dir, LogConfig::default(), OpenOptions::default());
        let mut b = BatchBuilder::new(Compression::Zstd)
            .base_offset(10)
            .partition_leader_epoch(3);
        b.append(5, Some(b"k"), Some(b"v"), &[]).unwrap();
        let bytes = b.build().unwrap();
        log.append_as_follower(&bytes).unwrap();
        assert_eq!(log.log_end_offset(), 11, "{backend}");
        let err = log.append_as_follower(&bytes).unwrap_err();
        assert_eq!(err.kafka_error(), KafkaError::UnexpectedAppendOffset);
        log.update_high_watermark(11);
        assert_eq!(
            log.read(10, 1000, None, true).unwrap().records.as_slice(),
            &bytes[..]
        );
        assert_eq!(
            log.read(5, 1000, None, true).unwrap().records.as_slice(),
            &bytes[..],
            "the batch holding 5.."
        );
        assert!(matches!(
            log.read(12, 1000, None, true),
            Err(Error::Rejected {
                error: KafkaError::OffsetOutOfRange,
                ..
            })
        ));
    }
}

/// The published end bounds reads: a read bounded by the high watermark never returns batches above it.
#[test]
fn reads_are_whole_batches_bounded_by_max_bytes_and_upper_bound() {
    for (backend, storage, root) in backends("reads") {
        let dir = root.join("r-0");
        let config = LogConfig::from_pairs(["segment.bytes=2000"]).unwrap();
        let log = open(&storage, &dir, config, OpenOptions::default());
        let mut sizes = Vec::new();
        for _ in 0..30 {
            let mut b = build(2, 50, 1_800_000_000_000);
            sizes.push(b.len());
            log.append_as_leader(&mut b, 0).unwrap();
        }
        assert!(
            log.segment_base_offsets().len() >= 3,
            "{backend}: segment.bytes rolls: {:?}",
            log.segment_base_offsets()
        );
        log.update_high_watermark(40);
        let r = log.read(0, sizes[0] + 10, Some(40), false).unwrap();
        assert_eq!(batches_of(r.records.as_slice()).len(), 1, "{backend}");
        assert_eq!(r.next_offset, 2);
        let r = log.read(0, 5, Some(40), true).unwrap();
        assert_eq!(
            batches_of(r.records.as_slice()).len(),
            1,
            "{backend}: min one batch"
        );
        let r = log.read(0, 5, Some(40), false).unwrap();
        assert!(r.records.as_slice().is_empty());
        let mut offset = 0;
        while offset < 40 {
            let r = log.read(offset, 1 << 20, Some(40), false).unwrap();
            for b in batches_of(r.records.as_slice()) {
                let (b, _) = klog_log::format::RecordBatch::parse(&b, 0).unwrap();
                assert_eq!(b.base_offset(), offset, "{backend}");
                assert!(b.last_offset() < 40);
                offset = b.next_offset();
            }
        }
        assert_eq!(offset, 40);
        assert!(log
            .read(40, 1 << 20, Some(40), false)
            .unwrap()
            .records
            .as_slice()
            .is_empty());
        assert_eq!(
            log.offset_for_timestamp(1_800_000_000_001).unwrap(),
            Some((1_800_000_000_001, 1))
        );
    }
}

/// One writer and several readers at once: every read is whole, valid batches with contiguous offsets,
/// never past the published end, whatever the interleaving (rolls included).
#[test]
fn concurrent_readers_never_see_a_partial_batch() {
    for (backend, storage, root) in backends("concurrent") {
        let dir = root.join("c-0");
        let config = LogConfig::from_pairs(["segment.bytes=50000"]).unwrap();
        let log = Arc::new(open(&storage, &dir, config, OpenOptions::default()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let total_reads = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let readers: Vec<_> = (0..3)
            .map(|r| {
                let (log, stop, total_reads) = (log.clone(), stop.clone(), total_reads.clone());
                std::thread::spawn(move || {
                    let mut reads = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Acquire) {
                        let leo = log.log_end_offset();
                        if leo == 0 {
                            continue;
                        }
                        let start = (reads * 7 + r) as i64 % leo;
                        let got = log
                            .read(start, 20_000, None, true)
                            .expect("read within range");
                        let mut expect_from = None;
                        for b in Batches::new(got.records.as_slice()) {
                            let b = b.expect("a reader never sees a partial or torn batch");
                            if let Some(next) = expect_from {
                                assert_eq!(b.base_offset(), next, "contiguous");
                            }
                            expect_from = Some(b.last_offset() + 1);
                        }
                        reads += 1;
                        total_reads.fetch_add(1, std::sync::atomic::Ordering::Release);
                    }
                    reads
                })
            })
            .collect();
        for _ in 0..400 {
            let mut b = build(3, 200, 1_800_000_000_000);
            log.append_as_leader(&mut b, 0).unwrap();
        }
        // On a loaded machine the readers may get no CPU before the appends end: let them read the
        // (rolled) log at least once before stopping them.
        while total_reads.load(std::sync::atomic::Ordering::Acquire) < 3 {
            std::thread::yield_now();
        }
        stop.store(true, std::sync::atomic::Ordering::Release);
        let reads: u64 = readers.into_iter().map(|r| r.join().expect("reader")).sum();
        assert!(reads > 0, "{backend}: readers ran");
        assert!(
            log.segment_base_offsets().len() > 3,
            "{backend}: rolls happened under the readers"
        );
    }
}

/// `segment.ms` rolls by record time (the first batch's timestamp against the new batch's max), as Kafka.
#[test]
fn segment_ms_rolls_by_record_timestamps() {
    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(1));
    let config = LogConfig::from_pairs(["segment.ms=1000"]).unwrap();
    let log = open(
        &storage,
        Path::new("/t/time-0"),
        config,
        OpenOptions::default(),
    );
    for ts in [10_000, 10_500, 10_999, 11_001, 11_500, 12_100] {
        log.append_as_leader(&mut build(1, 10, ts), 0).unwrap();
    }
    assert_eq!(log.segment_base_offsets(), vec![0, 3, 5]);
}

#[test]
fn retention_by_size_time_and_log_start_never_passes_the_high_watermark() {
    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(1));
    let config = LogConfig::from_pairs([
        "segment.bytes=1000",
        "retention.bytes=2500",
        "retention.ms=-1",
    ])
    .unwrap();
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    let (log, _) = PartitionLog::open_with_clock(
        storage.clone(),
        Path::new("/t/ret-0"),
        config,
        OpenOptions::default(),
        clock.clone(),
    )
    .unwrap();
    for _ in 0..20 {
        log.append_as_leader(&mut build(1, 300, 1_800_000_000_000), 0)
            .unwrap();
    }
    let segments = log.segment_base_offsets().len();
    assert!(segments > 5);
    // Nothing below the high watermark yet: nothing may go.
    assert!(log.delete_old_segments().unwrap().is_empty());
    log.update_high_watermark(log.log_end_offset());
    let deleted = log.delete_old_segments().unwrap();
    assert!(!deleted.is_empty());
    assert!(
        log.size_in_bytes() <= 2500 + 1000,
        "within retention.bytes plus one segment"
    );
    assert_eq!(log.log_start_offset(), log.segment_base_offsets()[0]);
    assert!(
        log.read(0, 100, None, true).is_err(),
        "below the log start is out of range"
    );

    // Time: everything older than retention.ms goes, but the log keeps an (empty) active segment.
    let config = LogConfig::from_pairs(["segment.bytes=1000", "retention.ms=1000"]).unwrap();
    let (log, _) = PartitionLog::open_with_clock(
        storage.clone(),
        Path::new("/t/ret-1"),
        config,
        OpenOptions::default(),
        clock.clone(),
    )
    .unwrap();
    for _ in 0..10 {
        log.append_as_leader(&mut build(1, 300, 1_800_000_000_000), 0)
            .unwrap();
    }
    log.update_high_watermark(log.log_end_offset());
    clock.advance(5_000);
    log.delete_old_segments().unwrap();
    assert_eq!(log.log_start_offset(), 10);
    assert_eq!(log.segment_base_offsets(), vec![10]);
    assert_eq!(log.log_end_offset(), 10);

    // Log start offset (DeleteRecords): never above the high watermark; whole segments below it go.
    let config = LogConfig::from_pairs(["segment.bytes=1000", "retention.ms=-1"]).unwrap();
    let (log, _) = PartitionLog::open_with_clock(
        storage,
        Path::new("/t/ret-2"),
        config,
        OpenOptions::default(),
        clock,
    )
    .unwrap();
    for _ in 0..10 {
        log.append_as_leader(&mut build(1, 300, 1_800_000_000_000), 0)
            .unwrap();
    }
    log.update_high_watermark(6);
    assert!(log.increment_log_start_offset(7).is_err());
    assert!(log.increment_log_start_offset(5).unwrap());
    let deleted = log.delete_old_segments().unwrap();
    assert!(deleted.iter().all(|b| *b < 5));
    assert_eq!(log.log_start_offset(), 5);
    assert!(log.segment_base_offsets()[0] <= 5);
}

/// A segment in the unflushed range whose indexes are corrupt (rebuilt at open) and whose `.log` ends
/// in a torn batch still cuts the log there: every later segment goes, so the log stays a prefix of what
/// was appended. (The rebuild used to take the segment out of recovery's cut-and-delete rule.)
/// Kafka deletes by `retention.ms` / `retention.bytes` only when `cleanup.policy` has `delete`
/// (`UnifiedLog.deleteOldSegments`): a compact-only topic keeps its data for the cleaner, and only the
/// log start offset removes segments.
#[test]
fn a_compact_only_log_is_never_deleted_by_time_or_size() {
    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(11));
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    for (i, (policy, kept)) in [
        ("compact", true),
        ("compact,delete", false),
        ("delete", false),
    ]
    .into_iter()
    .enumerate()
    {
        let config = LogConfig::from_pairs([
            "segment.bytes=1000",
            "retention.ms=1000",
            "retention.bytes=100",
            &format!("cleanup.policy={policy}"),
        ])
        .unwrap();
        let dir = PathBuf::from(format!("/t/policy-{i}"));
        let (log, _) = PartitionLog::open_with_clock(
            storage.clone(),
            &dir,
            config,
            OpenOptions::default(),
            clock.clone(),
        )
        .unwrap();
        for _ in 0..10 {
            log.append_as_leader(&mut build(1, 300, 1_800_000_000_000), 0)
                .unwrap();
        }
        log.update_high_watermark(log.log_end_offset());
        clock.advance(5_000);
        let deleted = log.delete_old_segments().unwrap();
        if kept {
            assert!(deleted.is_empty(), "{policy}: {deleted:?} deleted");
            assert_eq!(log.log_start_offset(), 0, "{policy}");
        } else {
            assert!(!deleted.is_empty(), "{policy}: nothing deleted");
        }
    }
}

#[test]
fn a_torn_segment_with_a_corrupt_index_still_cuts_the_log() {
    let storage: Arc<dyn Storage> = Arc::new(StdStorage);
    let dir = temp_dir("torn-with-corrupt-index").join("t-0");
    let config = LogConfig::from_pairs(["segment.bytes=4096", "index.interval.bytes=1"]).unwrap();
    let log = open(&storage, &dir, config.clone(), OpenOptions::default());
    for _ in 0..12 {
        log.append_as_leader(&mut build(2, 300, 1_800_000_000_000), 0)
            .unwrap();
    }
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 3, "{bases:?}");
    drop(log); // no clean close: everything counts as unflushed (recovery point 0)
    let first = dir.join("00000000000000000000.log");
    let mut bytes = std::fs::read(&first).unwrap();
    let last = bytes.len() - 10;
    bytes[last] ^= 0xff; // the first segment's last batch fails its CRC
    std::fs::write(&first, &bytes).unwrap();
    std::fs::write(dir.join("00000000000000000000.index"), [0xffu8; 12]).unwrap(); // not a whole entry
    let log = open(&storage, &dir, config, OpenOptions::default());
    assert_eq!(
        log.segment_base_offsets(),
        vec![0],
        "later segments must go"
    );
    let kept = Batches::new(&std::fs::read(&first).unwrap()).count() as i64;
    assert_eq!(
        log.log_end_offset(),
        kept * 2,
        "the log ends before the torn batch"
    );
    assert!(log.log_end_offset() < bases[1]);
}
