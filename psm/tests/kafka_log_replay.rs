//! Real Kafka logs replayed through the producer-state rules: an idempotent producer's 28 batches
//! (Kafka 3.4, `panic08/test-0`) and two logs without producer ids (Kafka 4.2).

use klog_psm::{
    increment_sequence, AppendOrigin, BatchSummary, ControlKind, Error, ProducerStateManager,
    PsmConfig, NO_SEQUENCE,
};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/fixtures/kafka-segments"
);

/// The header fields of each v2 batch in a `.log` file (kafka-storage.md §1.1), read just far enough
/// to build the summaries; the log crate owns the real parser.
fn summaries(path: &str) -> Vec<BatchSummary> {
    let bytes =
        std::fs::read(format!("{FIXTURES}/{path}")).unwrap_or_else(|e| panic!("{path}: {e}"));
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
        assert!(
            !(is_control && producer_id >= 0),
            "no transaction markers in these fixtures"
        );
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
            control: is_control.then_some(ControlKind::Other),
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

#[test]
fn an_idempotent_producer_log_replays_as_the_broker_accepted_it() {
    let batches = summaries("panic08/test-0/00000000000000000000.log");
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
fn logs_without_producer_ids_leave_no_producer_state() {
    for path in [
        "nomanazeem/__consumer_offsets-15/00000000000000000000.log",
        "nomanazeem/__cluster_metadata-0/00000000000000000000.log",
    ] {
        let batches = summaries(path);
        assert!(batches.iter().all(|b| b.producer_id == -1), "{path}");
        let mut psm = ProducerStateManager::new(PsmConfig::default());
        replay_one_by_one(&mut psm, &batches, AppendOrigin::Replication);
        assert!(psm.is_empty(), "{path}");
        assert_eq!(psm.snapshot(), vec![]);
    }
}
