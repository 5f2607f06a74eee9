//! Model-based test: random appends, reads, rolls, truncations, retention, reopens and (on the simulator)
//! crashes, checked after every step against a plain list of batches. Runs on every backend.
//! A failing run prints its seed; `KLOG_SEED=<seed>` replays just that one.

#[path = "../../tests/common/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::clock::{Clock, ManualClock};
use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Batches, Compression, RecordBatchMut};
use klog_log::io::{SimStorage, StdStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};

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

#[derive(Clone)]
struct ModelBatch {
    base: i64,
    last: i64,
    bytes: Vec<u8>,
}

struct Harness {
    storage: Arc<dyn Storage>,
    sim: Option<SimStorage>,
    dir: PathBuf,
    config: LogConfig,
    clock: Arc<ManualClock>,
    log: Option<PartitionLog>,
    model: Vec<ModelBatch>,
    /// The log end a recovery left past the last batch: unflushed batches lost whole at the end of a
    /// segment whose successor survived (empty) leave the log end at that segment's base, as in Kafka.
    end_floor: i64,
    epoch: i32,
}

impl Harness {
    fn log(&self) -> &PartitionLog {
        self.log.as_ref().expect("open")
    }

    fn open(&mut self, options: OpenOptions) {
        let (log, report) = PartitionLog::open_with_clock(
            self.storage.clone(),
            &self.dir,
            self.config.clone(),
            options,
            self.clock.clone(),
        )
        .expect("open");
        if std::env::var("KLOG_TRACE").is_ok() {
            eprintln!("open {options:?}: {report:?}");
        }
        self.log = Some(log);
    }

    fn leader_append(&mut self, rng: &mut Rng) {
        let codec = Compression::from_id(rng.below(5) as u8).unwrap();
        let mut b = BatchBuilder::new(codec);
        let n = 1 + rng.below(8) as usize;
        for i in 0..n {
            let value = vec![b'a' + (i % 26) as u8; rng.below(300) as usize];
            b.append(self.clock.now_ms(), Some(&[i as u8]), Some(&value), &[])
                .unwrap();
        }
        let mut bytes = b.build().unwrap();
        let mut expected = bytes.clone();
        let info = self
            .log()
            .append_as_leader(&mut bytes, self.epoch)
            .expect("append");
        let mut m = RecordBatchMut::parse(&mut expected).unwrap();
        m.set_base_offset(info.first_offset);
        m.set_partition_leader_epoch(self.epoch);
        assert_eq!(bytes, expected, "the log stamps offsets and epoch only");
        assert_eq!(info.first_offset, self.model_end());
        self.model.push(ModelBatch {
            base: info.first_offset,
            last: info.last_offset,
            bytes,
        });
    }

    fn model_end(&self) -> i64 {
        let last = self
            .model
            .last()
            .map_or(self.log().log_start_offset(), |b| b.last + 1);
        last.max(self.end_floor)
    }

    fn check(&self, rng: &mut Rng, ctx: &str) {
        let log = self.log();
        let start = log.log_start_offset();
        if !self.model.is_empty() {
            assert_eq!(log.log_end_offset(), self.model_end(), "{ctx}: LEO");
        }
        let visible: Vec<&ModelBatch> = self.model.iter().filter(|b| b.last >= start).collect();
        log.update_high_watermark(log.log_end_offset());
        // Read everything from the start, in random chunk sizes.
        let mut offset = start;
        let mut got = Vec::new();
        let batches_end = visible.last().map_or(start, |b| b.last + 1);
        while offset < batches_end {
            let max = 1 + rng.below(4000) as usize;
            let r = log
                .read(offset, max, None, true)
                .unwrap_or_else(|e| panic!("{ctx}: read {offset}: {e}"));
            let bytes = r.records.as_slice();
            assert!(
                !bytes.is_empty(),
                "{ctx}: min one batch at {offset}: segments {:?} sizes {:?} leo {} start {} index {:?} batches {:?}",
                log.segment_base_offsets(),
                log.segment_base_offsets().iter().map(|b| log.segment(*b).unwrap().size()).collect::<Vec<_>>(),
                log.log_end_offset(),
                log.log_start_offset(),
                log.segment_base_offsets().iter().map(|b| log.segment(*b).unwrap().offset_index_entries().unwrap()).collect::<Vec<_>>(),
                log.segment_base_offsets().iter().map(|b| {
                    let s = log.segment(*b).unwrap();
                    let bytes = s.read_bytes(0, s.size() as usize).unwrap();
                    Batches::new(&bytes).map(|b| { let b = b.unwrap(); (b.position(), b.base_offset(), b.last_offset()) }).collect::<Vec<_>>()
                }).collect::<Vec<_>>()
            );
            for b in Batches::new(bytes) {
                got.push(b.expect("whole, valid batches").as_bytes().to_vec());
            }
            assert!(r.next_offset > offset);
            offset = r.next_offset;
        }
        let want: Vec<Vec<u8>> = visible.iter().map(|b| b.bytes.clone()).collect();
        assert_eq!(got.len(), want.len(), "{ctx}: batch count");
        assert!(got == want, "{ctx}: batch bytes differ");
    }

    fn truncate(&mut self, rng: &mut Rng) {
        let start = self.log().log_start_offset();
        let candidates: Vec<i64> = self
            .model
            .iter()
            .filter(|b| b.base >= start)
            .map(|b| b.base)
            .collect();
        let Some(&to) = candidates.get(rng.below(candidates.len() as u64) as usize) else {
            return;
        };
        self.log().truncate_to(to).unwrap();
        self.model.retain(|b| b.base < to);
        self.end_floor = self.end_floor.min(to);
    }

    fn retention(&mut self) {
        let log = self.log();
        log.update_high_watermark(log.log_end_offset());
        log.delete_old_segments().unwrap();
        let start = log.log_start_offset();
        // At a batch, or at the first segment's base: a crash may have lost that segment's first
        // batches whole (unflushed) while a later segment survived.
        assert!(
            self.model.iter().any(|b| b.base == start)
                || start == self.model_end()
                || log.segment_base_offsets().first() == Some(&start),
            "log start at a batch boundary"
        );
        self.model.retain(|b| b.base >= start);
    }

    fn crash(&mut self, rng: &mut Rng) {
        let Some(sim) = self.sim.clone() else { return };
        let log = self.log.take().unwrap();
        let rp = log.recovery_point();
        let start = log.log_start_offset();
        drop(log);
        sim.crash(rng.below(2) == 0);
        self.open(OpenOptions {
            recovery_point: rp,
            log_start_offset: start,
            clean_shutdown: false,
        });
        let leo = self.log().log_end_offset();
        assert!(
            leo >= rp,
            "everything flushed survives: LEO {leo} < recovery point {rp}"
        );
        self.keep_survivors(start, rp);
        self.end_floor = leo;
        assert_eq!(self.model_end(), leo, "recovery cuts at a batch boundary");
    }

    /// After a crash: the model keeps the batches that survived. Everything below the recovery point
    /// does; above it a batch may be gone only with every batch after it in its segment (unflushed
    /// bytes lost at the segment's end, whole or cut by recovery), and never comes back altered (the
    /// bytes are compared by `check`).
    fn keep_survivors(&mut self, start: i64, rp: i64) {
        let log = self.log();
        let bases = log.segment_base_offsets();
        let segment_of = |offset: i64| bases.iter().rposition(|&b| b <= offset);
        log.update_high_watermark(log.log_end_offset());
        let mut present = std::collections::BTreeSet::new();
        let mut offset = start;
        loop {
            let r = log.read(offset, 1 << 20, None, true).unwrap();
            let before = present.len();
            for b in Batches::new(r.records.as_slice()) {
                let b = b.expect("whole, valid batches");
                present.insert(b.base_offset());
                offset = b.last_offset() + 1;
            }
            if present.len() == before {
                break;
            }
        }
        let mut lost_in: Option<usize> = None;
        for b in &self.model {
            if b.last < start {
                continue;
            }
            if !present.contains(&b.base) {
                assert!(b.last >= rp, "the flushed batch at {} was lost", b.base);
                lost_in = Some(segment_of(b.base).unwrap_or(0));
            } else if let Some(seg) = lost_in.take() {
                assert!(
                    segment_of(b.base) > Some(seg),
                    "the batch at {} survived after a lost batch of its own segment",
                    b.base
                );
            }
        }
        let kept: Vec<i64> = present.into_iter().collect();
        self.model
            .retain(|b| b.last < start || kept.binary_search(&b.base).is_ok());
    }
}

fn run(storage: Arc<dyn Storage>, sim: Option<SimStorage>, root: &Path, seed: u64, steps: usize) {
    let config = LogConfig::from_pairs([
        "segment.bytes=3000",
        "index.interval.bytes=300",
        "retention.bytes=6000",
    ])
    .unwrap();
    let mut h = Harness {
        storage,
        sim,
        dir: root.join(format!("model-{seed}")),
        config,
        clock: Arc::new(ManualClock::new(1_800_000_000_000)),
        log: None,
        model: Vec::new(),
        end_floor: 0,
        epoch: 0,
    };
    h.open(OpenOptions::default());
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    for step in 0..steps {
        let op = rng.below(100);
        let ctx = format!("seed {seed} step {step} op {op}");
        h.clock.advance(rng.below(1000) as i64);
        match op {
            0..=54 => h.leader_append(&mut rng),
            55..=59 => h.log().roll().unwrap(),
            60..=64 => h.truncate(&mut rng),
            65..=69 => h.retention(),
            70..=79 => h.log().flush(h.log().log_end_offset()).unwrap(),
            80..=84 => {
                h.log().close().unwrap();
                let (rp, start) = (h.log().recovery_point(), h.log().log_start_offset());
                h.log = None;
                h.open(OpenOptions {
                    recovery_point: rp,
                    log_start_offset: start,
                    clean_shutdown: true,
                });
            }
            85..=89 => {
                let (rp, start) = (h.log().recovery_point(), h.log().log_start_offset());
                h.log = None;
                h.open(OpenOptions {
                    recovery_point: rp,
                    log_start_offset: start,
                    clean_shutdown: false,
                });
            }
            90..=94 => h.crash(&mut rng),
            _ => h.epoch += 1,
        }
        if std::env::var("KLOG_TRACE").is_ok() {
            let l = h.log();
            eprintln!(
                "{ctx}: leo {} rp {} start {} segments {:?}",
                l.log_end_offset(),
                l.recovery_point(),
                l.log_start_offset(),
                l.segment_base_offsets()
            );
        }
        h.check(&mut rng, &ctx);
    }
}

fn seeds() -> Vec<u64> {
    match std::env::var("KLOG_SEED") {
        Ok(s) => vec![s.parse().expect("KLOG_SEED is a number")],
        Err(_) => {
            let n = std::env::var("KLOG_SIM_SEEDS")
                .map_or(6, |n| n.parse().expect("KLOG_SIM_SEEDS is a number"));
            (1..=n).collect()
        }
    }
}

fn temp_root(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run_seeds(name: &str, make: impl Fn() -> (Arc<dyn Storage>, Option<SimStorage>, PathBuf)) {
    for seed in seeds() {
        let (storage, sim, root) = make();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run(storage, sim, &root, seed, 250)
        }));
        if let Err(e) = result {
            eprintln!("{name}: failing seed {seed}; replay with KLOG_SEED={seed}");
            std::panic::resume_unwind(e);
        }
    }
}

#[test]
fn model_on_sim_with_crashes() {
    run_seeds("sim", || {
        let sim = SimStorage::new(9);
        (Arc::new(sim.clone()), Some(sim), PathBuf::from("/sim"))
    });
}

#[test]
fn model_on_std() {
    run_seeds("std", || {
        (Arc::new(StdStorage), None, temp_root("model-std"))
    });
}

#[test]
fn model_on_uring() {
    let Ok(uring) = klog_log::io::open_backend(klog_log::io::IoBackend::Uring) else {
        let required = std::env::var("KLOG_REQUIRE_URING").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "KLOG_REQUIRE_URING=1 but io_uring is unavailable"
        );
        skip::skip("io_uring is unavailable here");
        return;
    };
    run_seeds("uring", || (uring.clone(), None, temp_root("model-uring")));
}

#[test]
fn batches_from_a_crash_are_whole_or_absent() {
    // Every batch left after any crash parses with a valid CRC (torn writes are cut, never half-read).
    for seed in 1..=20u64 {
        let sim = SimStorage::new(seed);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let dir = PathBuf::from("/c/t-0");
        let clock = Arc::new(ManualClock::new(0));
        let (log, _) = PartitionLog::open_with_clock(
            storage.clone(),
            &dir,
            LogConfig::default(),
            OpenOptions::default(),
            clock.clone(),
        )
        .unwrap();
        for i in 0..20 {
            let mut b = BatchBuilder::new(Compression::None);
            b.append(0, None, Some(&vec![7u8; 700 + i]), &[]).unwrap();
            log.append_as_leader(&mut b.build().unwrap(), 0).unwrap();
            if i == 9 {
                log.flush(log.log_end_offset()).unwrap();
            }
        }
        drop(log);
        sim.crash(true);
        let (log, _) = PartitionLog::open_with_clock(
            storage,
            &dir,
            LogConfig::default(),
            OpenOptions {
                recovery_point: 10,
                log_start_offset: 0,
                clean_shutdown: false,
            },
            clock,
        )
        .unwrap();
        assert!(
            log.log_end_offset() >= 10,
            "seed {seed}: flushed batches survive"
        );
        log.update_high_watermark(log.log_end_offset());
        let r = log.read(0, 1 << 20, None, true).unwrap();
        let mut n = 0;
        for b in Batches::new(r.records.as_slice()) {
            b.expect("every batch after a crash is whole and valid");
            n += 1;
        }
        assert_eq!(n as i64, log.log_end_offset(), "seed {seed}");
    }
}
