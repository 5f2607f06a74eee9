//! A log directory's checkpoints may name any i64 (a hand-edited file, a copy from another broker, a bug
//! elsewhere): opening, reading, appending and closing never panic, and the offsets keep their order
//! (log start <= high watermark <= log end, recovery point <= log end).

use std::path::Path;
use std::sync::Arc;

use klog_log::checkpoint::{
    write_clean_shutdown, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
};
use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression};
use klog_log::io::{write_atomic, SimStorage, Storage};
use klog_log::log_dir::LogDir;
use klog_log::KafkaError;
use proptest::prelude::*;

fn batch(base_offset: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None).base_offset(base_offset);
    b.append(1_700_000_000_000, Some(b"k"), Some(b"v"), &[])
        .unwrap();
    b.append(1_700_000_000_001, Some(b"k"), Some(b"w"), &[])
        .unwrap();
    let mut out = Vec::new();
    b.build_into(&mut out).unwrap();
    out
}

/// A log directory with `t-0` holding 20 offsets in 4 segments, closed cleanly or not.
fn log_dir(clean: bool) -> (Arc<dyn Storage>, &'static Path) {
    let root = Path::new("/logs");
    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(7));
    let mut dir = LogDir::open(storage.clone(), root).unwrap();
    let config = LogConfig::from_pairs(["segment.bytes=250"]).unwrap();
    let (log, _) = dir.open_partition("t-0", config).unwrap();
    for _ in 0..10 {
        log.append_as_leader(&mut batch(0), 0).unwrap();
    }
    log.update_high_watermark(log.log_end_offset());
    dir.close_partition(log).unwrap();
    dir.close().unwrap();
    if clean {
        write_clean_shutdown(storage.as_ref(), root, -1).unwrap();
    }
    (storage, root)
}

fn set(storage: &dyn Storage, root: &Path, file: &str, value: Option<i64>) {
    let text = match value {
        Some(v) => format!("0\n1\nt 0 {v}\n"),
        None => "0\n0\n".to_owned(),
    };
    write_atomic(storage, &root.join(file), text.as_bytes()).unwrap();
}

/// Offsets worth trying: the ends of the range, around the log (0..20), and anything.
fn offset() -> impl Strategy<Value = Option<i64>> {
    prop_oneof![
        Just(None),
        Just(Some(i64::MIN)),
        Just(Some(i64::MAX)),
        Just(Some(i64::MAX - 1)),
        (-3i64..25).prop_map(Some),
        any::<i64>().prop_map(Some),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn any_checkpoint_values_open_read_append_and_close(
        recovery_point in offset(),
        log_start in offset(),
        high_watermark in offset(),
        clean in any::<bool>(),
        follower in any::<bool>(),
    ) {
        let (storage, root) = log_dir(clean);
        set(storage.as_ref(), root, RECOVERY_POINT_CHECKPOINT, recovery_point);
        set(storage.as_ref(), root, LOG_START_OFFSET_CHECKPOINT, log_start);
        set(storage.as_ref(), root, REPLICATION_OFFSET_CHECKPOINT, high_watermark);

        let mut dir = LogDir::open(storage.clone(), root).unwrap();
        let (log, _) = dir.open_partition("t-0", LogConfig::default()).unwrap();
        let (start, hw, end, rp) =
            (log.log_start_offset(), log.high_watermark(), log.log_end_offset(), log.recovery_point());
        prop_assert!(start <= hw && hw <= end && rp <= end, "{start} {hw} {end} {rp}");
        if let Some(ls) = log_start.filter(|ls| *ls > 20) {
            // Kafka's LogLoader: a log start beyond the log end empties the log and starts it there.
            prop_assert_eq!((start, end), (ls, ls));
        }
        let read = log.read(start, 1 << 20, None, true).unwrap();
        prop_assert_eq!(read.log_end_offset, end);
        let appended = if follower {
            log.append_as_follower(&batch(end))
        } else {
            log.append_as_leader(&mut batch(0), 0)
        };
        match appended {
            Ok(info) => prop_assert_eq!((info.first_offset, info.last_offset), (end, end + 1)),
            Err(e) => {
                // Only a log already at the end of the offset range refuses.
                prop_assert!(end > i64::MAX - 2, "{e}");
                // A follower batch whose own last offset wraps is refused as invalid before that.
                let expected = [KafkaError::OffsetOutOfRange, KafkaError::InvalidRecord];
                prop_assert!(expected.contains(&e.kafka_error()), "{}", e);
            }
        }
        log.flush(log.log_end_offset()).unwrap();
        dir.close_partition(log).unwrap();
        dir.close().unwrap();
        let again = LogDir::open(storage.clone(), root).unwrap();
        let (log, _) = again.open_partition("t-0", LogConfig::default()).unwrap();
        prop_assert!(log.log_start_offset() <= log.log_end_offset());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any bytes as a checkpoint file: never a panic; a strict read succeeds exactly when salvaging finds
    /// nothing wrong, and then both give the same entries.
    #[test]
    fn any_checkpoint_bytes_parse_or_are_named(
        body in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..64),
            "0\n[0-9]{1,2}\n([a-z _.-]{0,6} -?[0-9]{0,3} -?[0-9]{0,20}\n){0,4}".prop_map(String::into_bytes),
        ],
    ) {
        let storage = SimStorage::new(1);
        let path = Path::new("/logs/recovery-point-offset-checkpoint");
        storage.create_dir_all(Path::new("/logs")).unwrap();
        write_atomic(&storage, path, &body).unwrap();
        let strict = klog_log::checkpoint::read_offsets(&storage, path);
        let (salvaged, problems) = klog_log::checkpoint::read_offsets_salvaging(&storage, path).unwrap();
        match strict {
            Ok(map) => {
                prop_assert!(problems.is_empty());
                prop_assert_eq!(map, salvaged);
            }
            Err(e) => {
                prop_assert!(!problems.is_empty());
                let named = matches!(e, klog_log::Error::CorruptFile { .. });
                prop_assert!(named, "{}", e);
            }
        }
    }

    /// Any directory name: never a panic, and an accepted partition directory is exactly
    /// `<topic>-<partition>` with a legal topic (so its checkpoint line reads back).
    #[test]
    fn accepted_partition_directory_names_round_trip(name in "[a-z0-9 ._+-]{0,12}|\\PC{0,12}") {
        use klog_log::topic_partition::{parse_partition_dir_name, validate_topic, PartitionDirName};
        if let Ok(PartitionDirName::Partition { topic, partition }) = parse_partition_dir_name(&name) {
            prop_assert_eq!(format!("{topic}-{partition}"), name);
            prop_assert!(validate_topic(&topic).is_ok() && partition >= 0);
        }
    }
}
