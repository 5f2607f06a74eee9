//! Random operation sequences run against the ProducerStateManager and the reference model in
//! `model/`: every append's outcome (ok, duplicate, or which refusal; the completed transactions with
//! their last stable offsets) and the whole state after every operation must agree.

mod model;

use klog_psm::{
    decode_snapshot, encode_snapshot, increment_sequence, AppendOrigin, BatchMetadata,
    BatchSummary, ControlKind, ProducerStateManager, PsmConfig,
};
use model::{Entry, Model, Refusal};
use proptest::prelude::*;
use std::collections::{BTreeMap, VecDeque};

const EXPIRATION_MS: i64 = 5_000;

#[derive(Debug, Clone)]
enum EpochHint {
    Same,
    Bump,
    Older,
    Fixed(i16),
}

#[derive(Debug, Clone)]
enum SeqHint {
    Next,
    Retry(usize),
    Zero,
    Random(i32),
    NearMax(i32),
}

#[derive(Debug, Clone)]
enum Kind {
    Data,
    Txn,
    Commit(i32),
    Abort(i32),
    Barrier,
    Other,
    Empty,
}

#[derive(Debug, Clone)]
struct BatchPlan {
    producer: i64,
    epoch: EpochHint,
    seq: SeqHint,
    records: i32,
    kind: Kind,
    jitter_ms: i64,
}

#[derive(Debug, Clone)]
enum Op {
    Append {
        origin: AppendOrigin,
        batches: Vec<BatchPlan>,
    },
    HighWatermark(i64),
    LogStart(i64),
    Expire(i64),
    SnapshotReload(i64),
    Truncate,
    Clear,
}

fn batch_plan() -> impl Strategy<Value = BatchPlan> {
    let epoch = prop_oneof![
        8 => Just(EpochHint::Same),
        1 => Just(EpochHint::Bump),
        1 => Just(EpochHint::Older),
        1 => (0i16..3).prop_map(EpochHint::Fixed),
    ];
    let seq = prop_oneof![
        10 => Just(SeqHint::Next),
        3 => (0usize..6).prop_map(SeqHint::Retry),
        1 => Just(SeqHint::Zero),
        1 => any::<i32>().prop_map(SeqHint::Random),
        2 => (0i32..3).prop_map(SeqHint::NearMax),
    ];
    let kind = prop_oneof![
        8 => Just(Kind::Data),
        5 => Just(Kind::Txn),
        2 => (0i32..3).prop_map(Kind::Commit),
        2 => (0i32..3).prop_map(Kind::Abort),
        1 => Just(Kind::Barrier),
        1 => Just(Kind::Other),
        1 => Just(Kind::Empty),
    ];
    (0i64..6, epoch, seq, 1i32..4, kind, -300i64..1_000).prop_map(
        |(producer, epoch, seq, records, kind, jitter_ms)| BatchPlan {
            producer: if producer == 5 { -1 } else { producer },
            epoch,
            seq,
            records,
            kind,
            jitter_ms,
        },
    )
}

fn op() -> impl Strategy<Value = Op> {
    let origin = prop_oneof![
        4 => Just(AppendOrigin::Client),
        1 => Just(AppendOrigin::Coordinator),
        2 => Just(AppendOrigin::Replication),
    ];
    prop_oneof![
        20 => (origin, proptest::collection::vec(batch_plan(), 1..5))
            .prop_map(|(origin, batches)| Op::Append { origin, batches }),
        2 => (0i64..6).prop_map(Op::HighWatermark),
        1 => (0i64..6).prop_map(Op::LogStart),
        2 => (0i64..8_000).prop_map(Op::Expire),
        2 => (0i64..8_000).prop_map(Op::SnapshotReload),
        1 => Just(Op::Truncate),
        1 => Just(Op::Clear),
    ]
}

/// Offsets and time, owned by the "log".
struct Harness {
    psm: ProducerStateManager,
    model: Model,
    next_offset: i64,
    now_ms: i64,
}

impl Harness {
    fn new(max_producers: usize) -> Self {
        let config = PsmConfig {
            producer_id_expiration_ms: EXPIRATION_MS,
            max_producers,
        };
        Harness {
            psm: ProducerStateManager::new(config),
            model: Model::new(EXPIRATION_MS, max_producers),
            next_offset: 0,
            now_ms: 1_000_000,
        }
    }

    /// Turns hints into a concrete batch, reading the model's state and this request's earlier batches.
    fn resolve(
        &mut self,
        plan: &BatchPlan,
        running: &mut BTreeMap<i64, (i16, i32)>,
    ) -> BatchSummary {
        let first_offset = self.next_offset;
        self.now_ms += 10;
        let timestamp = self.now_ms + plan.jitter_ms;
        let stored = self.model.producers.get(&plan.producer);
        let (stored_epoch, stored_seq) = stored.map_or((0, -1), |e| {
            (e.epoch.max(0), e.batches.back().map_or(-1, |b| b.last_seq))
        });
        let (base_epoch, last_seq) = running
            .get(&plan.producer)
            .copied()
            .unwrap_or((stored_epoch, stored_seq));
        let epoch = match plan.epoch {
            EpochHint::Same => base_epoch,
            EpochHint::Bump => base_epoch + 1,
            EpochHint::Older => base_epoch - 1,
            EpochHint::Fixed(e) => e,
        };
        let mut records = plan.records;
        let first_sequence = match plan.seq {
            SeqHint::Next => increment_sequence(last_seq, 1),
            SeqHint::Zero => 0,
            SeqHint::Random(r) => r & i32::MAX,
            SeqHint::NearMax(k) => i32::MAX - k,
            SeqHint::Retry(k) => {
                match stored.and_then(|e| e.batches.iter().rev().nth(k % e.batches.len().max(1))) {
                    Some(cached) => {
                        records = cached.offset_delta + 1;
                        cached.first_seq()
                    }
                    None => increment_sequence(last_seq, 1),
                }
            }
        };
        let control = match plan.kind {
            Kind::Data | Kind::Txn => None,
            Kind::Commit(c) => Some(ControlKind::Commit {
                coordinator_epoch: c,
            }),
            Kind::Abort(c) => Some(ControlKind::Abort {
                coordinator_epoch: c,
            }),
            Kind::Barrier => Some(ControlKind::MirrorPidReset),
            Kind::Other => Some(ControlKind::Other),
            Kind::Empty => Some(ControlKind::Empty),
        };
        if control.is_some() {
            records = 1;
        }
        let batch = BatchSummary {
            producer_id: if matches!(plan.kind, Kind::Barrier) {
                -1
            } else {
                plan.producer
            },
            producer_epoch: epoch,
            first_sequence: if control.is_some() {
                -1
            } else {
                first_sequence
            },
            last_sequence: if control.is_some() {
                -1
            } else {
                increment_sequence(first_sequence, records - 1)
            },
            first_offset,
            last_offset: first_offset + i64::from(records) - 1,
            max_timestamp: timestamp,
            is_transactional: matches!(plan.kind, Kind::Txn | Kind::Commit(_) | Kind::Abort(_)),
            control,
        };
        self.next_offset += i64::from(records);
        if control.is_none() {
            running.insert(plan.producer, (epoch, batch.last_sequence));
        } else if batch.producer_id >= 0 {
            running.insert(plan.producer, (epoch, last_seq));
        }
        batch
    }

    fn append(&mut self, origin: AppendOrigin, plans: &[BatchPlan]) -> Result<(), TestCaseError> {
        let mut running = BTreeMap::new();
        let batches: Vec<BatchSummary> = plans
            .iter()
            .map(|p| self.resolve(p, &mut running))
            .collect();
        let expected = self.model.append(&batches, origin);
        // A one-batch replication append also goes through `replay` (recovery's path) on a twin of the
        // manager: same outcome, same state after.
        let twin = match (origin, batches.as_slice()) {
            (AppendOrigin::Replication, [batch]) => {
                let mut twin = self.psm.clone();
                let outcome = twin
                    .replay(batch)
                    .map(|completed| (None, completed.into_iter().collect::<Vec<_>>()))
                    .map_err(|error| Refusal::of(&error));
                Some((twin, outcome))
            }
            _ => None,
        };
        let actual = match self.psm.plan_append(&batches, origin) {
            Err(error) => Err(Refusal::of(&error)),
            Ok(plan) => {
                let duplicate = plan.duplicate;
                Ok((duplicate, self.psm.apply(plan)))
            }
        };
        prop_assert_eq!(&actual, &expected, "append {:?} as {:?}", batches, origin);
        if let Some((twin, outcome)) = twin {
            prop_assert_eq!(&outcome, &actual, "replay of {:?}", batches);
            twin.assert_invariants();
            prop_assert_eq!(twin.snapshot(), self.psm.snapshot());
            let cached = |m: &ProducerStateManager| -> Vec<(i64, Vec<BatchMetadata>)> {
                m.producers()
                    .map(|(pid, e)| (pid, e.batch_metadata().collect()))
                    .collect()
            };
            prop_assert_eq!(cached(&twin), cached(&self.psm));
            prop_assert_eq!(
                twin.first_unstable_offset(),
                self.psm.first_unstable_offset()
            );
            prop_assert_eq!(
                twin.first_undecided_offset(),
                self.psm.first_undecided_offset()
            );
            prop_assert_eq!(twin.is_empty(), self.psm.is_empty());
        }
        if let Ok((None, _)) = actual {
            let end = batches
                .last()
                .map_or(self.next_offset, |b| b.last_offset + 1);
            self.psm.update_map_end_offset(end);
            self.model.map_end_offset = end;
        }
        Ok(())
    }

    fn run(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Append { origin, batches } => self.append(*origin, batches)?,
            Op::HighWatermark(back) => {
                let hw = (self.next_offset - back).max(0);
                self.psm.on_high_watermark_updated(hw);
                self.model.on_high_watermark(hw);
            }
            Op::LogStart(back) => {
                let start = (self.next_offset - back).max(0);
                self.psm.on_log_start_offset_incremented(start);
                self.model.on_log_start(start);
            }
            Op::Expire(advance) => {
                self.now_ms += advance;
                let removed = self.psm.remove_expired_producers(self.now_ms);
                prop_assert_eq!(removed, self.model.remove_expired(self.now_ms));
            }
            Op::SnapshotReload(advance) => {
                self.now_ms += advance;
                let entries = self.psm.snapshot();
                prop_assert_eq!(&entries, &self.model.snapshot());
                let decoded = decode_snapshot(&encode_snapshot(&entries))
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let end = self.psm.map_end_offset();
                self.psm.load_snapshot(decoded, end, self.now_ms);
                self.model.load(&entries, end, self.now_ms);
            }
            Op::Truncate => {
                self.psm.truncate_fully_and_start_at(self.next_offset);
                self.model.truncate_fully(self.next_offset);
            }
            Op::Clear => {
                self.psm.clear();
                self.model.clear();
            }
        }
        self.compare()
    }

    fn compare(&self) -> Result<(), TestCaseError> {
        self.psm.assert_invariants();
        let actual: BTreeMap<i64, Entry> = self
            .psm
            .producers()
            .map(|(pid, e)| {
                let entry = Entry {
                    epoch: e.producer_epoch(),
                    coordinator_epoch: e.coordinator_epoch(),
                    last_timestamp: e.last_timestamp(),
                    txn_first_offset: e.current_txn_first_offset(),
                    batches: e.batch_metadata().collect::<VecDeque<BatchMetadata>>(),
                };
                (pid, entry)
            })
            .collect();
        prop_assert_eq!(&actual, &self.model.producers);
        prop_assert_eq!(self.psm.len(), self.model.producers.len());
        prop_assert_eq!(
            self.psm.first_unstable_offset(),
            self.model.first_unstable_offset()
        );
        prop_assert_eq!(
            self.psm.first_undecided_offset(),
            self.model.first_undecided_offset()
        );
        prop_assert_eq!(self.psm.map_end_offset(), self.model.map_end_offset);
        Ok(())
    }
}

proptest! {
    // 512 cases by default; PROPTEST_CASES=20000 for a deeper search.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_manager_agrees_with_the_reference_model(
        max_producers in prop_oneof![Just(2usize), Just(4), Just(usize::MAX)],
        ops in proptest::collection::vec(op(), 1..60),
    ) {
        let mut harness = Harness::new(max_producers);
        for op in &ops {
            harness.run(op)?;
        }
    }
}
