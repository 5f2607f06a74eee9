//! Producer state throughput and memory: `klog_psm::ProducerStateManager` beside the minimum a producer
//! table costs, in one run.
//!
//! Groups (each holds its baseline; compare only within one run, the VM is noisy):
//! - `psm_replay/*`: 1,000,000 batch summaries from 10,000 producers, built up front, replayed as recovery
//!   replays a log: one batch per `plan_append`, then `apply`, then `update_map_end_offset`, into a fresh
//!   manager. Every producer is idempotent (15-record batches, consecutive sequences); every 10th one is
//!   transactional and commits after 4 data batches (a COMMIT marker batch). Producers are picked in a
//!   fixed pseudo-random order.
//!   - `klog_replication`: `AppendOrigin::Replication` for every batch (recovery, followers).
//!   - `klog_client`: `Client` for data batches (duplicate search and sequence checks) and `Coordinator`
//!     for the markers, as a leader sees them.
//!   - `hashmap_mul` (baseline): `HashMap<i64, (i16, i32, i64)>::insert(producer id, (epoch, last
//!     sequence, last offset))` per batch with a one-multiply hasher: the minimum a producer table costs
//!     (klog's table hashes with one folded multiply, so a SipHash map is no bound for it).
//!   - `hashmap_std` (reference): the same with std's default hasher (SipHash-1-3), to show what SipHash
//!     costs.
//! - `psm_snapshot/*`: a snapshot of 1,000,000 producers (46,000,010 bytes): `encode_snapshot`,
//!   `decode_snapshot`, `ProducerStateManager::snapshot()` (entries from the live table, sorted),
//!   `load_snapshot` (a fresh table from entries), beside `memcpy` of the same byte count into a
//!   pre-faulted buffer.
//!
//! Paired ratios (stderr, `paired/...` lines): each compared pair timed back to back, alternating which
//! goes first, for 11 rounds (5 with `--quick`); the median of per-round time ratios by thread CPU time and
//! by wall time. Quote those. `KLOG_BENCH_PAIRED=0` skips them.
//!
//! Memory (stderr, `memory/...` lines): live heap bytes per producer after building a manager of 10k,
//! 100k and 1M producers, counted by this binary's global allocator (requested sizes; the counter is only
//! switched on around those measurements, so elsewhere it costs one relaxed load per allocation).
//! `KLOG_BENCH_MEMORY=0` skips it.
//!
//! Run: `cargo bench --bench psm` (`-- --quick` for a short run); `cargo test --benches` runs each once at
//! small sizes.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use common::{alternating, quartiles, thread_cpu_time, CriterionArgs};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use klog::psm::{
    decode_snapshot, encode_snapshot, AppendOrigin, BatchSummary, ControlKind,
    ProducerStateManager, PsmConfig, SnapshotEntry, SNAPSHOT_ENTRY_SIZE,
};

// ---------------------------------------------------------------------------------------------------
// Counting allocator (memory per producer)

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; the counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if COUNTING.load(Relaxed) && !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if COUNTING.load(Relaxed) && !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        if COUNTING.load(Relaxed) {
            LIVE.fetch_sub(layout.size() as isize, Relaxed);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if COUNTING.load(Relaxed) && !p.is_null() {
            LIVE.fetch_add(new_size as isize - layout.size() as isize, Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Live heap bytes allocated by `f` and still held by what it returns.
fn live_bytes_of<T>(f: impl FnOnce() -> T) -> (T, isize) {
    LIVE.store(0, Relaxed);
    COUNTING.store(true, Relaxed);
    let value = f();
    COUNTING.store(false, Relaxed);
    (value, LIVE.load(Relaxed))
}

// ---------------------------------------------------------------------------------------------------
// Workload

const RELEASE: bool = !cfg!(debug_assertions);
/// Batches replayed per iteration of `psm_replay` (unoptimised builds: a smoke test).
const REPLAY_BATCHES: usize = if RELEASE { 1_000_000 } else { 20_000 };
const REPLAY_PRODUCERS: usize = if RELEASE { 10_000 } else { 1_000 };
/// Producers in the `psm_snapshot` snapshot.
const SNAPSHOT_PRODUCERS: usize = if RELEASE { 1_000_000 } else { 10_000 };
const RECORDS_PER_BATCH: i64 = 15;
/// Data batches per transaction of a transactional producer, then a COMMIT marker.
const TXN_DATA_BATCHES: u8 = 4;
const BASE_TIMESTAMP: i64 = 1_800_000_000_000;
/// Producer ids are spread like a broker's (a block per broker), not 0..n.
const PRODUCER_ID_BASE: i64 = 4_000_000;

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn producer_id(p: usize) -> i64 {
    PRODUCER_ID_BASE + (p as i64) * 3
}

fn is_transactional(p: usize) -> bool {
    p.is_multiple_of(10)
}

/// `batches` summaries from `producers` producers in log order, offsets from 0, one millisecond apart.
/// Every producer is idempotent; every 10th is transactional and commits every `TXN_DATA_BATCHES`
/// data batches. Producers are drawn at random (fixed seed).
fn build_summaries(producers: usize, batches: usize) -> Vec<BatchSummary> {
    // (next sequence, data batches in the open transaction)
    let mut state = vec![(0i32, 0u8); producers];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut next_offset = 0i64;
    let mut out = Vec::with_capacity(batches);
    for i in 0..batches {
        let p = (rng.next() % producers as u64) as usize;
        let (seq, open) = &mut state[p];
        let timestamp = BASE_TIMESTAMP + i as i64;
        let summary = if is_transactional(p) && *open == TXN_DATA_BATCHES {
            *open = 0;
            BatchSummary {
                producer_id: producer_id(p),
                producer_epoch: 0,
                first_sequence: -1,
                last_sequence: -1,
                first_offset: next_offset,
                last_offset: next_offset,
                max_timestamp: timestamp,
                is_transactional: true,
                control: Some(ControlKind::Commit {
                    coordinator_epoch: 0,
                }),
            }
        } else {
            let first_sequence = *seq;
            *seq += RECORDS_PER_BATCH as i32;
            if is_transactional(p) {
                *open += 1;
            }
            BatchSummary {
                producer_id: producer_id(p),
                producer_epoch: 0,
                first_sequence,
                last_sequence: first_sequence + RECORDS_PER_BATCH as i32 - 1,
                first_offset: next_offset,
                last_offset: next_offset + RECORDS_PER_BATCH - 1,
                max_timestamp: timestamp,
                is_transactional: is_transactional(p),
                control: None,
            }
        };
        next_offset = summary.last_offset + 1;
        out.push(summary);
    }
    out
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// `Replication` for everything (recovery).
    Replication,
    /// `Client` for data, `Coordinator` for markers (a leader).
    Client,
}

/// Recovery's loop: one batch per plan, apply, move the map end offset.
fn replay(psm: &mut ProducerStateManager, summaries: &[BatchSummary], origin: Origin) -> usize {
    let mut completed = 0;
    for s in summaries {
        let origin = match (origin, s.control) {
            (Origin::Replication, _) => AppendOrigin::Replication,
            (Origin::Client, None) => AppendOrigin::Client,
            (Origin::Client, Some(_)) => AppendOrigin::Coordinator,
        };
        let plan = psm
            .plan_append(std::slice::from_ref(s), origin)
            .expect("a valid batch");
        debug_assert!(!plan.is_duplicate());
        completed += psm.apply(plan).len();
        psm.update_map_end_offset(s.last_offset + 1);
    }
    completed
}

fn fresh_psm() -> ProducerStateManager {
    ProducerStateManager::new(PsmConfig::default())
}

fn replay_fresh(summaries: &[BatchSummary], origin: Origin) -> ProducerStateManager {
    let mut psm = fresh_psm();
    black_box(replay(&mut psm, summaries, origin));
    psm
}

fn hashmap_baseline<S: std::hash::BuildHasher + Default>(
    summaries: &[BatchSummary],
) -> HashMap<i64, (i16, i32, i64), S> {
    let mut map = HashMap::<i64, (i16, i32, i64), S>::default();
    for s in summaries {
        map.insert(
            s.producer_id,
            (s.producer_epoch, s.last_sequence, s.last_offset),
        );
    }
    map
}

/// One multiply (Fibonacci hashing): the cheapest hasher worth using for integer keys.
#[derive(Default)]
struct MulHasher(u64);

impl Hasher for MulHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_i64(&mut self, i: i64) {
        self.0 = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type MulBuild = BuildHasherDefault<MulHasher>;

/// Snapshot entries of `producers` producers as a table after many batches would hold them; 1% have an
/// open transaction.
fn build_snapshot_entries(producers: usize) -> Vec<SnapshotEntry> {
    (0..producers)
        .map(|p| {
            let last_offset = 1_000_000 + p as i64 * RECORDS_PER_BATCH + RECORDS_PER_BATCH - 1;
            SnapshotEntry {
                producer_id: producer_id(p),
                producer_epoch: (p % 3) as i16,
                last_sequence: (p % 1000) as i32 * 15 + 14,
                last_offset,
                offset_delta: RECORDS_PER_BATCH as i32 - 1,
                timestamp: BASE_TIMESTAMP + p as i64,
                coordinator_epoch: if is_transactional(p) { 5 } else { -1 },
                current_txn_first_offset: if p % 100 == 0 { last_offset - 40 } else { -1 },
            }
        })
        .collect()
}

/// `now` for `load_snapshot`: nothing in the snapshot is expired.
fn snapshot_now(producers: usize) -> i64 {
    BASE_TIMESTAMP + producers as i64
}

// ---------------------------------------------------------------------------------------------------
// Paired ratios

/// Command-line mode shared by the paired ratios and the memory measurement.
struct Mode {
    /// 0: skip; 1: run once (test mode).
    rounds: usize,
    filters: Vec<String>,
    memory: bool,
    listing: bool,
}

impl Mode {
    fn from_args() -> Self {
        let args = CriterionArgs::from_env();
        let profiling = args.profiling();
        let rounds = args.paired_rounds(11, 5);
        let memory = !std::env::var("KLOG_BENCH_MEMORY").is_ok_and(|v| v == "0")
            && !args.has("--list")
            && !profiling
            && (args.filters.is_empty()
                || args.filters.iter().any(|f| "memory".contains(f.as_str())));
        Mode {
            rounds,
            listing: args.has("--list"),
            filters: args.filters,
            memory,
        }
    }

    /// Whether a criterion filter (taken as a substring) can select one of `ids` (`group/function`), or
    /// a paired line of the group; the group's setup is skipped otherwise.
    fn wants_group(&self, group: &str, ids: &[&str]) -> bool {
        !self.listing
            && (self.filters.is_empty()
                || self.filters.iter().any(|f| {
                    f.starts_with(group)
                        || f.starts_with("paired")
                        || ids
                            .iter()
                            .any(|id| format!("{group}/{id}").contains(f.as_str()))
                }))
    }

    fn selected(&self, id: &str) -> bool {
        self.rounds > 0
            && (self.filters.is_empty() || self.filters.iter().any(|f| id.contains(f.as_str())))
    }

    /// Times `a` and `b` back to back, alternating which goes first; prints the median over rounds of
    /// time(a) / time(b) (how many times slower `a` is than `b`) by thread CPU time and by wall time,
    /// and each side's median throughput in `unit`s per second. `setup` runs before each timed call,
    /// untimed; its value is passed to the call and dropped after the clock stops.
    #[allow(clippy::too_many_arguments)]
    fn compare<S, A, B, RA, RB>(
        &self,
        id: &str,
        units: f64,
        unit: &str,
        mut setup: impl FnMut() -> S,
        (a_name, mut a): (&str, A),
        (b_name, mut b): (&str, B),
    ) where
        A: FnMut(S) -> RA,
        B: FnMut(S) -> RB,
    {
        let id = format!("paired/{id}/{a_name}_vs_{b_name}");
        if !self.selected(&id) {
            return;
        }
        let mut time_a = |s: S| {
            let (w, c) = (Instant::now(), thread_cpu_time());
            let r = black_box(a(s));
            let cpu = thread_cpu_time().zip(c).map(|(end, start)| end - start);
            let wall = w.elapsed();
            drop(r);
            (cpu.unwrap_or(wall).as_secs_f64(), wall.as_secs_f64())
        };
        let mut time_b = |s: S| {
            let (w, c) = (Instant::now(), thread_cpu_time());
            let r = black_box(b(s));
            let cpu = thread_cpu_time().zip(c).map(|(end, start)| end - start);
            let wall = w.elapsed();
            drop(r);
            (cpu.unwrap_or(wall).as_secs_f64(), wall.as_secs_f64())
        };
        // Warm-up: one call each.
        time_a(setup());
        time_b(setup());
        // Per round: (cpu a, cpu b, wall a, wall b).
        let setup = std::cell::RefCell::new(setup);
        let fresh = || (setup.borrow_mut())();
        let samples: Vec<_> = alternating(self.rounds, || time_a(fresh()), || time_b(fresh()))
            .into_iter()
            .map(|(x, y)| (x.0, y.0, x.1, y.1))
            .collect();
        if self.rounds == 1 {
            eprintln!("{id}: ran once (test mode, not a measurement)");
            return;
        }
        let cpu = quartiles(samples.iter().map(|s| s.0 / s.1).collect());
        let wall = quartiles(samples.iter().map(|s| s.2 / s.3).collect());
        let rate = |v: Vec<f64>| units / quartiles(v).1;
        eprintln!(
            "{id}: time ratio a/b by cpu {:.3} (IQR {:.3}-{:.3}), by wall {:.3} (IQR {:.3}-{:.3}); \
             {} rounds; cpu-time medians {a_name} {:.4e} {unit}/s, {b_name} {:.4e} {unit}/s; \
             wall medians {a_name} {:.4e} {unit}/s, {b_name} {:.4e} {unit}/s",
            cpu.1,
            cpu.0,
            cpu.2,
            wall.1,
            wall.0,
            wall.2,
            self.rounds,
            rate(samples.iter().map(|s| s.0).collect()),
            rate(samples.iter().map(|s| s.1).collect()),
            rate(samples.iter().map(|s| s.2).collect()),
            rate(samples.iter().map(|s| s.3).collect()),
        );
    }
}

// ---------------------------------------------------------------------------------------------------
// Benchmarks

fn bench_replay(c: &mut Criterion, mode: &Mode, summaries: &[BatchSummary]) {
    let mut g = c.benchmark_group("psm_replay");
    g.throughput(Throughput::Elements(summaries.len() as u64));
    g.sample_size(10);
    g.bench_function("klog_replication", |b| {
        b.iter_with_large_drop(|| replay_fresh(summaries, Origin::Replication))
    });
    g.bench_function("klog_client", |b| {
        b.iter_with_large_drop(|| replay_fresh(summaries, Origin::Client))
    });
    g.bench_function("hashmap_std", |b| {
        b.iter_with_large_drop(|| hashmap_baseline::<std::hash::RandomState>(summaries))
    });
    g.bench_function("hashmap_mul", |b| {
        b.iter_with_large_drop(|| hashmap_baseline::<MulBuild>(summaries))
    });
    g.finish();

    let n = summaries.len() as f64;
    for (name, origin) in [
        ("klog_replication", Origin::Replication),
        ("klog_client", Origin::Client),
    ] {
        mode.compare(
            "psm_replay",
            n,
            "batches",
            || (),
            (name, |()| replay_fresh(summaries, origin)),
            ("hashmap_mul", |()| hashmap_baseline::<MulBuild>(summaries)),
        );
    }
    mode.compare(
        "psm_replay",
        n,
        "batches",
        || (),
        ("hashmap_std", |()| {
            hashmap_baseline::<std::hash::RandomState>(summaries)
        }),
        ("hashmap_mul", |()| hashmap_baseline::<MulBuild>(summaries)),
    );
}

fn bench_snapshot(c: &mut Criterion, mode: &Mode) {
    let producers = SNAPSHOT_PRODUCERS;
    let entries = build_snapshot_entries(producers);
    let bytes = encode_snapshot(&entries);
    assert_eq!(bytes.len(), 10 + SNAPSHOT_ENTRY_SIZE * producers);
    // Written in Kafka's HashMap order, not the id order `entries` are in.
    let mut decoded = decode_snapshot(&bytes).expect("decodes");
    decoded.sort_by_key(|e| e.producer_id);
    assert_eq!(decoded, entries);
    let now = snapshot_now(producers);
    let mut psm = fresh_psm();
    psm.load_snapshot(entries.clone(), 2_000_000_000, now);
    assert_eq!(psm.len(), producers);
    assert_eq!(psm.snapshot(), entries);
    let mut copy = vec![1u8; bytes.len()];

    let mut g = c.benchmark_group("psm_snapshot");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.sample_size(10);
    g.bench_function("encode", |b| {
        b.iter_with_large_drop(|| encode_snapshot(black_box(&entries)))
    });
    g.bench_function("decode", |b| {
        b.iter_with_large_drop(|| decode_snapshot(black_box(&bytes)).expect("decodes"))
    });
    g.bench_function("psm_snapshot", |b| {
        b.iter_with_large_drop(|| black_box(&psm).snapshot())
    });
    g.bench_function("psm_load_snapshot", |b| {
        b.iter_batched(
            || (fresh_psm(), entries.clone()),
            |(mut fresh, entries)| {
                fresh.load_snapshot(entries, 2_000_000_000, now);
                fresh
            },
            BatchSize::PerIteration,
        )
    });
    g.bench_function("memcpy", |b| {
        b.iter(|| {
            copy.copy_from_slice(black_box(&bytes));
            black_box(&copy);
        })
    });
    g.finish();

    let mb = bytes.len() as f64 / 1e6;
    type Side<'a> = &'a dyn Fn() -> Box<dyn std::any::Any>;
    let sides: [(&str, Side<'_>); 3] = [
        ("encode", &|| Box::new(encode_snapshot(black_box(&entries)))),
        ("decode", &|| {
            Box::new(decode_snapshot(black_box(&bytes)).expect("decodes"))
        }),
        ("psm_snapshot", &|| Box::new(black_box(&psm).snapshot())),
    ];
    for (name, side) in sides {
        mode.compare(
            "psm_snapshot",
            mb,
            "MB",
            || (),
            (name, |()| side()),
            ("memcpy", |()| {
                copy.copy_from_slice(black_box(&bytes));
                black_box(copy[copy.len() / 2])
            }),
        );
    }
    mode.compare(
        "psm_snapshot",
        mb,
        "MB",
        || (fresh_psm(), entries.clone()),
        (
            "psm_load_snapshot",
            |(mut fresh, entries): (ProducerStateManager, Vec<SnapshotEntry>)| {
                fresh.load_snapshot(entries, 2_000_000_000, now);
                fresh
            },
        ),
        ("memcpy", |_| {
            copy.copy_from_slice(black_box(&bytes));
            black_box(copy[copy.len() / 2])
        }),
    );
}

/// Live heap bytes per producer of managers built two ways, at 10k, 100k and 1M producers.
fn measure_memory() {
    let sizes: &[usize] = if RELEASE {
        &[10_000, 100_000, 1_000_000]
    } else {
        &[10_000]
    };
    for &producers in sizes {
        // 1. Replayed: 5 batches per producer on average (the queue of 5 full for most), drawn at random
        //    as in `psm_replay`, so a producer's consecutive batches are ~`producers` batches apart.
        let summaries = build_summaries(producers, producers * 5);
        let high_watermark = summaries.last().map_or(0, |s| s.last_offset + 1);
        let (psm, live) = live_bytes_of(|| {
            let mut psm = fresh_psm();
            replay(&mut psm, &summaries, Origin::Replication);
            // As a leader would: committed transactions below the high watermark are forgotten.
            psm.on_high_watermark_updated(high_watermark);
            psm
        });
        let spilled = psm
            .producers()
            .filter(|(_, e)| e.has_spilled_batch_metadata())
            .count();
        let cached: usize = psm
            .producers()
            .map(|(_, e)| e.batch_metadata().count())
            .sum();
        eprintln!(
            "memory/replayed/{producers}: {:.1} bytes/producer ({live} bytes, {} producers, {:.2} cached \
             batches/producer, {:.1}% spilled, {} open transactions)",
            live as f64 / psm.len() as f64,
            psm.len(),
            cached as f64 / psm.len() as f64,
            100.0 * spilled as f64 / psm.len() as f64,
            psm.producers()
                .filter(|(_, e)| e.current_txn_first_offset().is_some())
                .count(),
        );
        drop(psm);
        drop(summaries);

        // 2. Loaded from a snapshot (one batch each, never spilled).
        let entries = build_snapshot_entries(producers);
        let now = snapshot_now(producers);
        let (psm, live) = live_bytes_of(|| {
            let mut psm = fresh_psm();
            psm.load_snapshot(entries, 2_000_000_000, now);
            psm
        });
        // `entries` was moved in and freed inside the window: add its size back.
        let live = live + (producers * std::mem::size_of::<SnapshotEntry>()) as isize;
        eprintln!(
            "memory/loaded/{producers}: {:.1} bytes/producer ({live} bytes, {} producers)",
            live as f64 / psm.len() as f64,
            psm.len(),
        );
    }
}

fn bench_psm(c: &mut Criterion) {
    let mode = Mode::from_args();
    if mode.memory {
        measure_memory();
    }
    if !mode.wants_group("psm_replay", &REPLAY_IDS) {
        if mode.wants_group("psm_snapshot", &SNAPSHOT_IDS) {
            bench_snapshot(c, &mode);
        }
        return;
    }
    let summaries = build_summaries(REPLAY_PRODUCERS, REPLAY_BATCHES);
    // The workload is valid for both origins and ends in the same state.
    let a = replay_fresh(&summaries, Origin::Replication);
    let b = replay_fresh(&summaries, Origin::Client);
    assert_eq!(a.len(), REPLAY_PRODUCERS);
    assert_eq!(a.snapshot(), b.snapshot());
    drop((a, b));
    bench_replay(c, &mode, &summaries);
    drop(summaries);
    if mode.wants_group("psm_snapshot", &SNAPSHOT_IDS) {
        bench_snapshot(c, &mode);
    }
}

const REPLAY_IDS: [&str; 4] = [
    "klog_replication",
    "klog_client",
    "hashmap_std",
    "hashmap_mul",
];
const SNAPSHOT_IDS: [&str; 5] = [
    "encode",
    "decode",
    "psm_snapshot",
    "psm_load_snapshot",
    "memcpy",
];

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_psm
}
criterion_main!(benches);
