//! Real Kafka logs replayed through the producer-state rules. The repository's fixtures (`fixtures/`, a
//! Kafka 4.4 broker's partitions: idempotent producers in every codec, transactions committed, aborted and
//! fenced, rolled segments) end in the state Kafka's own `.snapshot` records. When `../shared/fixtures` is
//! beside the checkout (CI): an idempotent producer's 28 batches (Kafka 3.4, `panic08/test-0`) and two logs
//! without producer ids (Kafka 4.2).

#[path = "../../tests/common/skip.rs"]
mod skip;

use klog_psm::{
    decode_snapshot, encode_snapshot, increment_sequence, AppendOrigin, BatchSummary, ControlKind,
    Error, ProducerStateManager, PsmConfig, SnapshotEntry, NO_SEQUENCE,
};

/// The repository's Kafka-written partition directories (`scripts/make-fixtures.sh`).
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/kafka-segments");
const SHARED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/fixtures/kafka-segments"
);

/// `../shared/fixtures`: used when present, required when `KLOG_REQUIRE_SHARED_FIXTURES=1` (CI).
fn shared_fixtures() -> Option<&'static str> {
    if std::path::Path::new(SHARED).is_dir() {
        return Some(SHARED);
    }
    assert!(
        std::env::var("KLOG_REQUIRE_SHARED_FIXTURES").map_or(true, |v| v != "1"),
        "KLOG_REQUIRE_SHARED_FIXTURES=1 but {SHARED} is missing"
    );
    skip::skip(&format!("the shared fixtures: {SHARED} is absent"));
    None
}

/// Reads a zigzag varint at `*at` (kafka-storage.md §1.2), advancing `*at`.
fn varint(bytes: &[u8], at: &mut usize) -> i64 {
    let mut raw = 0u64;
    for shift in (0..64).step_by(7) {
        let b = bytes[*at];
        *at += 1;
        raw |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
    }
    (raw >> 1) as i64 ^ -((raw & 1) as i64)
}

/// A control batch's kind from its first record: key = (version, type), value = (version, coordinator
/// epoch) for the transaction markers (kafka-storage.md §1.4). Control batches are never compressed.
fn control_kind(bytes: &[u8], batch: usize, producer_id: i64) -> ControlKind {
    let mut at = batch + 61;
    varint(bytes, &mut at); // length
    at += 1; // attributes
    varint(bytes, &mut at); // timestampDelta
    varint(bytes, &mut at); // offsetDelta
    let key_length = varint(bytes, &mut at) as usize;
    let control_type = i16::from_be_bytes([bytes[at + 2], bytes[at + 3]]);
    at += key_length;
    varint(bytes, &mut at); // valueLength
    let coordinator_epoch = i32::from_be_bytes(bytes[at + 2..at + 6].try_into().unwrap());
    match (control_type, producer_id >= 0) {
        (0, true) => ControlKind::Abort { coordinator_epoch },
        (1, true) => ControlKind::Commit { coordinator_epoch },
        (_, false) => ControlKind::Other,
        (t, true) => panic!("control type {t} with producer id {producer_id}"),
    }
}

/// The header fields of each v2 batch in a `.log` file (kafka-storage.md §1.1), read just far enough
/// to build the summaries; the log crate owns the real parser.
fn summaries(root: &str, path: &str) -> Vec<BatchSummary> {
    let bytes = std::fs::read(format!("{root}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"));
    let be = |at: usize, n: usize| {
        bytes[at..at + n]
            .iter()
            .fold(0i64, |v, b| (v << 8) | i64::from(*b))
    };
    let mut batches = Vec::new();
    let mut position = 0;
    while position + 61 <= bytes.len() {
        let base_offset = be(position, 8);
        let size = 12 + be(position + 8, 4) as usize;
        assert_eq!(bytes[position + 16], 2, "magic 2");
        let attributes = be(position + 21, 2);
        let last_offset_delta = be(position + 23, 4) as i32;
        let producer_id = be(position + 43, 8);
        let base_sequence = be(position + 53, 4) as i32;
        let is_control = attributes & 0x20 != 0;
        batches.push(BatchSummary {
            producer_id,
            producer_epoch: be(position + 51, 2) as i16,
            first_sequence: base_sequence,
            last_sequence: if base_sequence == NO_SEQUENCE {
                NO_SEQUENCE
            } else {
                increment_sequence(base_sequence, last_offset_delta)
            },
            first_offset: base_offset,
            last_offset: base_offset + i64::from(last_offset_delta),
            max_timestamp: be(position + 35, 8),
            is_transactional: attributes & 0x10 != 0,
            control: is_control.then(|| control_kind(&bytes, position, producer_id)),
        });
        position += size;
    }
    assert_eq!(position, bytes.len(), "{path}: whole batches only");
    batches
}

fn replay_one_by_one(
    psm: &mut ProducerStateManager,
    batches: &[BatchSummary],
    origin: AppendOrigin,
) {
    for batch in batches {
        let plan = psm
            .plan_append(std::slice::from_ref(batch), origin)
            .expect("Kafka accepted it");
        assert!(!plan.is_duplicate(), "{batch:?}");
        assert!(psm.apply(plan).is_empty());
        psm.update_map_end_offset(batch.last_offset + 1);
    }
}

/// Every segment of one partition directory of the fixtures, in offset order.
fn partition_summaries(partition: &str) -> Vec<BatchSummary> {
    let dir = format!("{FIXTURES}/{partition}");
    let mut logs: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| {
            e.expect("a directory entry")
                .file_name()
                .into_string()
                .expect("utf-8")
        })
        .filter(|name| name.ends_with(".log"))
        .collect();
    logs.sort();
    logs.iter()
        .flat_map(|log| summaries(FIXTURES, &format!("{partition}/{log}")))
        .collect()
}

/// Kafka's snapshot at the log end offset, its entries sorted by producer id.
fn kafka_snapshot(partition: &str, log_end_offset: i64) -> Vec<SnapshotEntry> {
    let path = format!("{FIXTURES}/{partition}/{log_end_offset:020}.snapshot");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut entries = decode_snapshot(&bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
    entries.sort_by_key(|e| e.producer_id);
    entries
}

/// Replaying the broker's logs as a follower (one batch at a time, or all at once) ends in the producer
/// state Kafka wrote in its snapshot at the clean shutdown: producers in every codec, committed, aborted
/// and fenced transactions.
#[test]
fn kafka_logs_replay_to_the_state_of_kafkas_own_snapshot() {
    for partition in ["clean/workload-0", "clean/batches-0"] {
        let batches = partition_summaries(partition);
        assert!(batches
            .iter()
            .any(|b| matches!(b.control, Some(ControlKind::Abort { .. }))));
        assert!(batches
            .iter()
            .any(|b| matches!(b.control, Some(ControlKind::Commit { .. }))));
        let end = batches.last().expect("batches").last_offset + 1;
        let theirs = kafka_snapshot(partition, end);
        assert!(theirs.len() >= 6, "{partition}: {theirs:?}");

        let mut psm = ProducerStateManager::new(PsmConfig::default());
        let mut completed = 0;
        for batch in &batches {
            let plan = psm
                .plan_append(std::slice::from_ref(batch), AppendOrigin::Replication)
                .unwrap_or_else(|e| panic!("{partition}: Kafka wrote {batch:?}: {e}"));
            assert!(!plan.is_duplicate(), "{batch:?}");
            completed += psm.apply(plan).len();
            psm.update_map_end_offset(batch.last_offset + 1);
        }
        let markers = batches
            .iter()
            .filter(|b| b.has_producer_id() && b.control.is_some());
        assert_eq!(
            completed,
            markers.count(),
            "{partition}: each marker ends a transaction"
        );
        assert_eq!(psm.snapshot(), theirs, "{partition}: one batch at a time");
        assert_eq!(psm.map_end_offset(), end);
        // The file klog would write for that state is Kafka's, byte for byte (entry order included).
        let path = format!("{FIXTURES}/{partition}/{end:020}.snapshot");
        let kafkas = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(encode_snapshot(&psm.snapshot()), kafkas, "{path}");

        let mut follower = ProducerStateManager::new(PsmConfig::default());
        let plan = follower
            .plan_append(&batches, AppendOrigin::Replication)
            .expect("replicated");
        follower.apply(plan);
        assert_eq!(follower.snapshot(), theirs, "{partition}: one append");
    }
}

/// The internal topics' logs (the transaction coordinator's, KRaft's) carry no producer ids.
#[test]
fn logs_without_producer_ids_leave_no_producer_state() {
    for path in [
        "clean/__transaction_state-0/00000000000000000000.log",
        "clean/__cluster_metadata-0/00000000000000000000.log",
    ] {
        let batches = summaries(FIXTURES, path);
        assert!(batches.iter().all(|b| b.producer_id == -1), "{path}");
        let mut psm = ProducerStateManager::new(PsmConfig::default());
        replay_one_by_one(&mut psm, &batches, AppendOrigin::Replication);
        assert!(psm.is_empty(), "{path}");
        assert_eq!(psm.snapshot(), vec![]);
    }
}

#[test]
fn an_idempotent_producer_log_replays_as_the_broker_accepted_it() {
    let Some(shared) = shared_fixtures() else {
        return;
    };
    let batches = summaries(shared, "panic08/test-0/00000000000000000000.log");
    assert_eq!(batches.len(), 28);
    let mut psm = ProducerStateManager::new(PsmConfig::default());
    replay_one_by_one(&mut psm, &batches, AppendOrigin::Client);

    let entry = psm.producer(0).expect("producer 0");
    assert_eq!(
        (
            entry.producer_epoch(),
            entry.last_seq(),
            entry.last_data_offset()
        ),
        (0, 96, 96)
    );
    assert_eq!(entry.last_timestamp(), batches[27].max_timestamp);
    assert_eq!(psm.map_end_offset(), 97);

    // The broker would answer retries of the last five batches from its cache ...
    for batch in &batches[23..] {
        let retry = BatchSummary {
            first_offset: 97,
            last_offset: 97 + batch.last_offset - batch.first_offset,
            ..*batch
        };
        let plan = psm
            .plan_append(&[retry], AppendOrigin::Client)
            .expect("duplicate");
        let duplicate = plan.duplicate.expect("a retry of a cached batch");
        assert_eq!(
            (duplicate.first_offset, duplicate.last_offset),
            (batch.first_offset, batch.last_offset)
        );
        assert_eq!(duplicate.timestamp, batch.max_timestamp);
    }
    // ... and refuse an older one.
    let sixth = BatchSummary {
        first_offset: 97,
        ..batches[22]
    };
    assert!(matches!(
        psm.plan_append(&[sixth], AppendOrigin::Client),
        Err(Error::OutOfOrderSequence { .. })
    ));

    // A follower fetching everything in one append ends in the same state.
    let mut follower = ProducerStateManager::new(PsmConfig::default());
    let plan = follower
        .plan_append(&batches, AppendOrigin::Replication)
        .expect("replicated");
    follower.apply(plan);
    assert_eq!(follower.snapshot(), psm.snapshot());
    assert_eq!(
        follower
            .producer(0)
            .map(|e| e.batch_metadata().collect::<Vec<_>>()),
        psm.producer(0)
            .map(|e| e.batch_metadata().collect::<Vec<_>>())
    );
}

#[test]
fn shared_logs_without_producer_ids_leave_no_producer_state() {
    let Some(shared) = shared_fixtures() else {
        return;
    };
    for path in [
        "nomanazeem/__consumer_offsets-15/00000000000000000000.log",
        "nomanazeem/__cluster_metadata-0/00000000000000000000.log",
    ] {
        let batches = summaries(shared, path);
        assert!(batches.iter().all(|b| b.producer_id == -1), "{path}");
        let mut psm = ProducerStateManager::new(PsmConfig::default());
        replay_one_by_one(&mut psm, &batches, AppendOrigin::Replication);
        assert!(psm.is_empty(), "{path}");
        assert_eq!(psm.snapshot(), vec![]);
    }
}
