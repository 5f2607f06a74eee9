//! Deterministic crash simulation. Each iteration runs a seeded sequence of appends (idempotent and
//! transactional producers, markers, MIRROR_PID_RESET barriers, follower-style appends), rolls, flushes and
//! truncations on simulated storage; the power goes out at a chosen operation (any write, sync, resize or
//! directory change), the last write may be torn; then the log is recovered and checked:
//! - everything flushed before the power went out is there (the durability contract);
//! - the log holds what was appended, in order, every batch whole and byte-identical; above the recovery
//!   point a batch may be missing only with every batch after it in its segment (unflushed bytes lost at
//!   the segment's end while a later segment survived: recovery keeps that segment, as Kafka does);
//! - producer state after recovery equals the reference model's (`psm/tests/model`, Kafka's rules written
//!   out plainly, no code shared with `ProducerStateManager`) replay of the recovered log, and a fresh
//!   `ProducerStateManager` replays it without refusing a batch.
//!
//! The only error the workload may meet is the EIO `SimStorage` returns once the power is off: any other
//! (a validation or producer-state refusal of a valid append) fails the run with its seed, rather than
//! passing as a simulated power failure.
//!
//! A reader runs beside the writer: between steps it opens the partition read-only over the same disk and
//! must see exactly what the writer has appended (bytes, log end, producers), refuse every change, and
//! leave the disk untouched (not one simulated write, sync, resize or directory change).
//!
//! `cargo test` runs a fast subset. `KLOG_SIM_ITERATIONS=N` runs N crash points (the long mode);
//! `KLOG_SEED=S` replays one seed. A failure prints the seed and crash point.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::clock::ManualClock;
use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Batches, Compression, ControlRecordType, RecordBatch};
use klog_log::io::{SimStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::producer_state::summarize;
use klog_log::validator::AppendOrigin;
use klog_psm::{ProducerStateManager, PsmConfig};

/// The psm crate's reference model, shared with its model-based tests (recovery may depend on psm; the
/// model is test code, so it is included rather than exported). Not every part is used here.
#[path = "../../psm/tests/model/mod.rs"]
#[allow(dead_code)]
mod model;

/// The errno `SimStorage` fails every operation with once the power is off (`State::tick`, `Fault::Eio`).
const EIO: i32 = 5;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A producer the workload drives: its id, epoch, next sequence and whether a transaction is open.
struct Producer {
    id: i64,
    next_seq: i32,
    in_txn: bool,
}

fn config(direct: bool) -> LogConfig {
    // The direct write path runs with Kafka's preallocation too: a new segment is set to its full size
    // and zero-filled ahead of the writer, and its zero tail is what a crash leaves.
    let preallocate = if direct { "true" } else { "false" };
    LogConfig::from_pairs([
        "segment.bytes=2500",
        "index.interval.bytes=256",
        &format!("preallocate={preallocate}"),
    ])
    .unwrap()
}

fn open(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    options: OpenOptions,
    direct: bool,
) -> Result<PartitionLog, klog_log::Error> {
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    PartitionLog::open_with_clock(storage.clone(), dir, config(direct), options, clock)
        .map(|(l, _)| l)
}

type ProducerView = Vec<(i64, i16, i32, i64, Option<i64>)>;

fn view(entries: impl Iterator<Item = klog_psm::ProducerStateEntry>) -> ProducerView {
    let mut v: ProducerView = entries
        .map(|p| {
            (
                p.producer_id(),
                p.producer_epoch(),
                p.last_seq(),
                p.last_data_offset(),
                p.current_txn_first_offset(),
            )
        })
        .collect();
    v.sort();
    v
}

/// The recovered log's batches replayed from the start, as recovery replays them: through the reference
/// model (returned) and through a fresh `ProducerStateManager`, which must agree with it. A batch either
/// refuses fails the run: recovery kept it, so replaying it must succeed.
fn fresh_replay(log: &PartitionLog, ctx: &str) -> ProducerView {
    let mut psm = ProducerStateManager::new(PsmConfig::default());
    let config = PsmConfig::default();
    let mut model = model::Model::new(config.producer_id_expiration_ms, config.max_producers);
    for bytes in all_batches(log, ctx) {
        let (b, _) = RecordBatch::parse(&bytes, 0).expect("valid");
        let summary = [summarize(&b)];
        let origin = klog_psm::AppendOrigin::Replication;
        let plan = psm.plan_append(&summary, origin).unwrap_or_else(|e| {
            panic!(
                "{ctx}: replaying the batch at {} refused: {e}",
                b.base_offset()
            )
        });
        psm.apply(plan);
        if let Err(refusal) = model.append(&summary, origin) {
            panic!(
                "{ctx}: the model refused the batch at {}: {refusal:?}",
                b.base_offset()
            );
        }
        psm.update_map_end_offset(b.next_offset());
    }
    let expected = model_view(&model);
    assert_eq!(
        view(psm.producers().map(|(_, e)| e.clone())),
        expected,
        "{ctx}: a fresh ProducerStateManager's replay differs from the model's"
    );
    expected
}

/// Every batch of the log from its start, in order: reads until one returns nothing (a log end left past
/// the last batch, at an empty segment after lost batches, reads nothing there).
fn all_batches(log: &PartitionLog, ctx: &str) -> Vec<Vec<u8>> {
    log.update_high_watermark(log.log_end_offset());
    let mut got = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let r = log.read(offset, 1 << 20, None, true).unwrap();
        let before = got.len();
        for b in Batches::new(r.records.as_slice()) {
            let b = b.unwrap_or_else(|e| panic!("{ctx}: invalid batch after recovery: {e}"));
            offset = b.last_offset() + 1;
            got.push(b.as_bytes().to_vec());
        }
        if got.len() == before {
            break;
        }
    }
    got
}

/// Checks what recovery kept against what was appended: the same batches byte for byte, in order,
/// every one below `flushed` among them; a batch may be missing only at the end of its segment's
/// data (the next batch kept lies in a later segment). Returns how many batches were lost, and how many
/// runs of lost batches a kept batch follows (gaps recovery kept, as Kafka does).
fn check_survivors(
    log: &PartitionLog,
    appended: &[Vec<u8>],
    flushed: i64,
    ctx: &str,
) -> (usize, usize) {
    let got = all_batches(log, ctx);
    let bases = log.segment_base_offsets();
    let segment_of = |offset: i64| bases.iter().rposition(|&b| b <= offset);
    let mut kept = got.iter().peekable();
    let mut lost_in = None;
    let mut gaps = 0;
    for a in appended {
        let (batch, _) = RecordBatch::parse(a, 0).unwrap();
        if kept.peek().is_some_and(|g| *g == a) {
            kept.next();
            if let Some(seg) = lost_in.take() {
                gaps += 1;
                assert!(
                    segment_of(batch.base_offset()) > Some(seg),
                    "{ctx}: the batch at {} was kept after a lost batch of its own segment",
                    batch.base_offset()
                );
            }
            continue;
        }
        assert!(
            batch.next_offset() > flushed,
            "{ctx}: lost flushed data: the batch at {} (recovery point {flushed})",
            batch.base_offset()
        );
        lost_in = Some(segment_of(batch.base_offset()).unwrap_or(0));
    }
    assert!(
        kept.next().is_none(),
        "{ctx}: recovered batches differ from what was appended"
    );
    (appended.len() - got.len(), gaps)
}

/// The model's producers, as [`view`] shows a `ProducerStateManager`'s.
fn model_view(model: &model::Model) -> ProducerView {
    model
        .producers
        .iter()
        .map(|(pid, e)| {
            let last = e.batches.back();
            (
                *pid,
                e.epoch,
                last.map_or(-1, |b| b.last_seq),
                last.map_or(-1, |b| b.last_offset),
                e.txn_first_offset,
            )
        })
        .collect()
}

/// Fails the run unless `e` is the simulated power failure: `SimStorage`'s EIO, once its power is off.
fn assert_power_off(e: &klog_log::Error, sim: &SimStorage, off_at: u64, ctx: &str) {
    let eio = matches!(e, klog_log::Error::Io { source, .. } if source.raw_os_error() == Some(EIO));
    assert!(
        eio && sim.ops() >= off_at,
        "{ctx}: the workload failed with something other than the simulated power failure \
         (operation {} of {off_at}): {e}",
        sim.ops()
    );
}

/// One step of the workload; `Err` once the storage has died.
fn step(
    log: &PartitionLog,
    rng: &mut Rng,
    producers: &mut [Producer],
    appended: &mut Vec<Vec<u8>>,
    flushed: &mut i64,
) -> Result<(), klog_log::Error> {
    let now = 1_800_000_000_000;
    match rng.below(100) {
        0..=49 => {
            let p = &mut producers[rng.below(3) as usize];
            let txn = p.id == 3 && (p.in_txn || rng.below(2) == 0);
            let n = 1 + rng.below(4) as i32;
            let codec = Compression::from_id(rng.below(5) as u8).unwrap();
            let mut b = BatchBuilder::new(codec)
                .producer(p.id, 0, p.next_seq)
                .transactional(txn);
            for i in 0..n {
                b.append(
                    now,
                    Some(&[i as u8]),
                    Some(&vec![b'v'; rng.below(300) as usize]),
                    &[],
                )
                .unwrap();
            }
            let mut bytes = b.build().unwrap();
            let info = log.append_as_leader(&mut bytes, 0)?;
            assert!(!info.duplicate);
            p.next_seq += n;
            p.in_txn |= txn;
            appended.push(bytes);
        }
        50..=59 => {
            let p = &mut producers[2];
            if p.in_txn {
                let kind = if rng.below(2) == 0 {
                    ControlRecordType::Commit
                } else {
                    ControlRecordType::Abort
                };
                let mut m = BatchBuilder::end_txn_marker(kind, p.id, 0, 0, now)
                    .unwrap()
                    .build()
                    .unwrap();
                log.append_as_leader_with_origin(&mut m, 0, AppendOrigin::Coordinator)?;
                p.in_txn = false;
                appended.push(m);
            }
        }
        60..=63 => {
            let mut m = BatchBuilder::mirror_pid_reset(now)
                .unwrap()
                .build()
                .unwrap();
            log.append_as_leader_with_origin(&mut m, 0, AppendOrigin::Coordinator)?;
            for p in producers.iter_mut() {
                // Forgotten producers start over as unknown ones: any sequence is accepted.
                p.in_txn = false;
            }
            appended.push(m);
        }
        64..=69 => {
            // A follower-style append: the next offsets, bytes kept as they are.
            let mut b = BatchBuilder::new(Compression::None)
                .base_offset(log.log_end_offset())
                .partition_leader_epoch(0);
            b.append(now, None, Some(b"replicated"), &[]).unwrap();
            let bytes = b.build().unwrap();
            log.append_as_follower(&bytes)?;
            appended.push(bytes);
        }
        70..=74 => log.roll()?,
        75..=89 => {
            log.flush(log.log_end_offset())?;
            *flushed = log.recovery_point();
        }
        _ => {
            // Truncate to a batch boundary above what was flushed (a follower truncating to its leader).
            let mut offsets = Vec::new();
            let mut next = 0;
            for b in appended.iter() {
                let (batch, _) = RecordBatch::parse(b, 0).unwrap();
                offsets.push(next);
                next = batch.next_offset();
            }
            let candidates: Vec<usize> = (0..offsets.len())
                .filter(|i| offsets[*i] >= *flushed)
                .collect();
            if let Some(&i) = candidates.get(rng.below(candidates.len() as u64) as usize) {
                log.truncate_to(offsets[i])?;
                appended.truncate(i);
                for p in producers.iter_mut() {
                    p.in_txn = false;
                    p.next_seq = 0;
                }
                producers.iter_mut().for_each(|p| p.id += 100); // fresh producers after a truncation
            }
        }
    }
    Ok(())
}

/// A reader's open beside the live writer: the same log, and not one operation on the disk. Under the
/// direct write path another handle sees only what reached the disk (the writer's tail is in its
/// memory until a sync or a spill): then the reader's log is a prefix of the writer's.
fn check_reader(
    sim: &SimStorage,
    dir: &Path,
    writer: &PartitionLog,
    appended: &[Vec<u8>],
    ctx: &str,
    direct: bool,
) {
    let ops = sim.ops();
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let options = OpenOptions {
        recovery_point: 0,
        log_start_offset: writer.log_start_offset(),
        clean_shutdown: false,
    };
    let (reader, _) = PartitionLog::open_read_only(storage, dir, config(direct), options)
        .unwrap_or_else(|e| panic!("{ctx}: a reader could not open beside the writer: {e}"));
    if direct {
        assert!(
            reader.log_end_offset() <= writer.log_end_offset(),
            "{ctx}: reader's log end past the writer's"
        );
    } else {
        assert_eq!(
            reader.log_end_offset(),
            writer.log_end_offset(),
            "{ctx}: reader's log end"
        );
    }
    reader.update_high_watermark(reader.log_end_offset());
    let mut got = Vec::new();
    let mut offset = reader.log_start_offset();
    while offset < reader.log_end_offset() {
        let r = reader.read(offset, 1 << 20, None, true).unwrap();
        for b in Batches::new(r.records.as_slice()) {
            let b = b.unwrap_or_else(|e| panic!("{ctx}: reader saw an invalid batch: {e}"));
            offset = b.last_offset() + 1;
            got.push(b.as_bytes().to_vec());
        }
    }
    if direct {
        assert!(
            got.len() <= appended.len() && got == appended[..got.len()],
            "{ctx}: the reader's batches are not a prefix of the writer's"
        );
    } else {
        assert!(
            got == appended,
            "{ctx}: the reader's batches differ from the writer's"
        );
        assert_eq!(
            view(reader.producers().into_iter()),
            view(writer.producers().into_iter()),
            "{ctx}: the reader's producer state differs from the writer's"
        );
    }
    let refused = reader.append_as_follower(appended.last().map_or(&[][..], |b| b));
    assert!(
        matches!(refused, Err(klog_log::Error::ReadOnly { .. })),
        "{ctx}: a reader appended: {refused:?}"
    );
    drop(reader);
    assert_eq!(sim.ops(), ops, "{ctx}: the reader changed the disk");
}

/// Returns whether the power went out during the workload, whether recovery lost unflushed batches, and
/// whether a kept batch follows lost ones.
/// `direct`: segment logs go through the direct write path (in-memory tail, aligned chunks written in
/// batches in flight together, preallocated and zero-filled segments), as on the uring backend.
fn iteration(seed: u64, crash_at: u64, steps: usize, direct: bool) -> (bool, bool, bool) {
    let sim = if direct {
        SimStorage::new(seed).with_direct_writes()
    } else {
        SimStorage::new(seed)
    };
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let dir = PathBuf::from("/crash/t-0");
    let log = open(&storage, &dir, OpenOptions::default(), direct).expect("open");
    let off_at = sim.ops() + crash_at;
    sim.power_off_at(off_at);
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut producers: Vec<Producer> = (1..=3)
        .map(|id| Producer {
            id,
            next_seq: 0,
            in_txn: false,
        })
        .collect();
    let mut appended = Vec::new();
    let mut flushed = 0;
    let mut power_failed = false;
    // The reader's own random stream, so the workload is the same with or without it.
    let mut reader_rng = Rng(seed
        .wrapping_add(crash_at)
        .wrapping_mul(0x2545_F491_4F6C_DD1D)
        | 1);
    for i in 0..steps {
        let ctx = format!("seed {seed} crash at op +{crash_at}, step {i}");
        if let Err(e) = step(&log, &mut rng, &mut producers, &mut appended, &mut flushed) {
            assert_power_off(&e, &sim, off_at, &ctx);
            power_failed = true;
            break;
        }
        if reader_rng.below(10) == 0 {
            check_reader(&sim, &dir, &log, &appended, &ctx, direct);
        }
    }
    drop(log);
    sim.crash(rng.below(2) == 0);
    let log = open(
        &storage,
        &dir,
        OpenOptions {
            recovery_point: flushed,
            log_start_offset: 0,
            clean_shutdown: false,
        },
        direct,
    )
    .unwrap_or_else(|e| panic!("seed {seed} crash at {crash_at}: recovery failed: {e}"));
    let ctx = format!("seed {seed} crash at op +{crash_at}");
    assert!(
        log.log_end_offset() >= flushed,
        "{ctx}: lost flushed data: LEO {} < {flushed}",
        log.log_end_offset()
    );
    // What was appended, byte for byte, less unflushed batches lost at a segment's end.
    let (lost, gaps) = check_survivors(&log, &appended, flushed, &ctx);
    assert_eq!(
        view(log.producers().into_iter()),
        fresh_replay(&log, &ctx),
        "{ctx}: recovered producer state differs from the model's replay of the recovered log"
    );
    (power_failed, lost > 0, gaps > 0)
}

#[test]
fn crash_at_any_operation_keeps_the_durability_contract() {
    crash_points(false);
}

/// The same workload and checks with the direct write path: torn chunk rewrites, zero-filled and
/// preallocated tails, and batches of writes in flight when the power goes (each lands whole, torn at a
/// sector or not at all). Recovery must end at a prefix of what was appended and keep every flush.
#[test]
fn crash_at_any_operation_keeps_the_durability_contract_on_the_direct_write_path() {
    crash_points(true);
}

fn crash_points(direct: bool) {
    let iterations: u64 =
        std::env::var("KLOG_SIM_ITERATIONS").map_or(600, |v| v.parse().expect("a number"));
    let seeds: Vec<u64> = match std::env::var("KLOG_SEED") {
        Ok(s) => vec![s.parse().expect("KLOG_SEED is a number")],
        Err(_) => (1..=iterations.div_ceil(150)).collect(),
    };
    let mut run = 0u64;
    let (mut power_failures, mut losses, mut gaps) = (0u64, 0u64, 0u64);
    'outer: for &seed in &seeds {
        for crash_at in 1..=150 {
            if run >= iterations {
                break 'outer;
            }
            match std::panic::catch_unwind(|| iteration(seed, crash_at, 80, direct)) {
                Ok((failed, lost, gap)) => {
                    power_failures += failed as u64;
                    losses += lost as u64;
                    gaps += gap as u64;
                }
                Err(e) => {
                    eprintln!(
                        "failing iteration: KLOG_SEED={seed}, crash at operation +{crash_at}, \
                         direct write path: {direct}"
                    );
                    std::panic::resume_unwind(e);
                }
            }
            run += 1;
        }
    }
    eprintln!(
        "crash simulation (direct write path: {direct}): {run} crash points over {} seeds ({power_failures} mid-workload, {losses} lost unflushed batches, {gaps} with a gap kept before a later segment), no failures",
        seeds.len()
    );
    assert!(run >= iterations.min(150 * seeds.len() as u64));
    assert!(
        power_failures * 2 >= run,
        "most crash points must land inside the workload: {power_failures} of {run}"
    );
    assert!(
        losses > 0,
        "some crashes must lose unflushed data, or the check proves nothing"
    );
}
