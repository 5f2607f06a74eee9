//! The cost of the library's `tracing` events on the append path: none expected, because events sit at
//! opens, rolls, truncations, retention, snapshots and failures, never per batch.
//!
//! Data: 16 KiB producer batches of 140 100-byte records (the shape where per-batch work weighs most), 64
//! distinct ones built once and cycled through, appended as leader into a fresh log with 1 MiB segments
//! (so the timed part rolls, and each roll emits its event).
//!
//! - `tracing_append/no_subscriber`: what an embedder that installs nothing pays;
//! - `tracing_append/subscriber_trace`: the same with a `tracing-subscriber` fmt subscriber enabled at
//!   TRACE (every event formatted, written to a sink): the most the events could cost.
//!
//! The paired line `paired/tracing_append/no_subscriber_vs_subscriber_trace` (stderr) times both back to
//! back, alternating which goes first, 21 rounds (7 with `--quick`), and prints the median ratio of the
//! subscriber's time to no subscriber's time, by wall and by thread CPU time: 1.0 means the events cost
//! nothing per batch. No time is asserted. Run: `cargo bench --bench tracing`; `cargo test --benches` runs each once.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use klog::log::clock::{Clock, SystemClock};
use klog::log::config::LogConfig;
use klog::log::format::{BatchBuilder, Compression};
use klog::log::io::{open_backend, IoBackend, Storage};
use klog::log::partition_log::{OpenOptions, PartitionLog};
use tracing_subscriber::EnvFilter;

mod common;

use common::{alternating, quartiles, thread_cpu_time, CriterionArgs};

const POOL_BATCHES: usize = 64;
const LOG_BYTES: usize = if cfg!(debug_assertions) {
    1 << 20
} else {
    8 << 20
};

fn build_pool() -> Vec<Vec<u8>> {
    let now = SystemClock.now_ms();
    (0..POOL_BATCHES)
        .map(|i| {
            let mut b = BatchBuilder::new(Compression::None);
            for j in 0..140 {
                let value = [(i * 140 + j) as u8; 100];
                b.append(now, None, Some(&value), &[]).expect("record");
            }
            b.build().expect("batch")
        })
        .collect()
}

struct Env {
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    pool: Vec<Vec<u8>>,
    batches: usize,
}

impl Env {
    fn new() -> Self {
        let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-tracing");
        let _ = std::fs::remove_dir_all(&scratch);
        std::fs::create_dir_all(&scratch).expect("scratch dir");
        let pool = build_pool();
        let batches = LOG_BYTES.div_ceil(pool[0].len());
        Env {
            dir: scratch.join("bench-0"),
            storage: open_backend(IoBackend::Std).expect("std backend"),
            pool,
            batches,
        }
    }

    /// Appends `self.batches` batches into a fresh log; the (wall, thread CPU) time of the appends alone.
    /// CPU time does not advance while other processes hold the CPU: the steadier figure on a busy machine.
    fn time_appends(&mut self) -> (Duration, Duration) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let mut config = LogConfig::default();
        config
            .set("segment.bytes", &(1 << 20).to_string())
            .expect("segment.bytes");
        let (log, _) = PartitionLog::open(
            self.storage.clone(),
            &self.dir,
            config,
            OpenOptions::default(),
        )
        .expect("open log");
        let (start, cpu) = (Instant::now(), thread_cpu_time());
        for i in 0..self.batches {
            let batch = &mut self.pool[i % POOL_BATCHES];
            // A leader assigns offsets from the log end; the builder's base offset must be 0.
            batch[..8].copy_from_slice(&0i64.to_be_bytes());
            black_box(log.append_as_leader(batch, 0).expect("append"));
        }
        let wall = start.elapsed();
        let cpu = thread_cpu_time()
            .zip(cpu)
            .map_or(wall, |(end, begin)| end - begin);
        log.close().expect("close");
        (wall, cpu)
    }

    /// `time_appends` with a TRACE-level fmt subscriber writing every event to a sink.
    fn time_appends_traced(&mut self) -> (Duration, Duration) {
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(EnvFilter::new("trace"))
            .with_writer(std::io::sink)
            .finish();
        tracing::subscriber::with_default(subscriber, || self.time_appends())
    }
}

fn bench_tracing(c: &mut Criterion) {
    let mut env = Env::new();
    let bytes: usize = (0..env.batches)
        .map(|i| env.pool[i % POOL_BATCHES].len())
        .sum();
    let mut g = c.benchmark_group("tracing_append");
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("no_subscriber", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| env.time_appends().0).sum())
    });
    g.bench_function("subscriber_trace", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| env.time_appends_traced().0).sum())
    });
    g.finish();

    let args = CriterionArgs::from_env();
    let rounds = args.paired_rounds(21, 7);
    let id = "paired/tracing_append/no_subscriber_vs_subscriber_trace";
    if args.selected(rounds, id) {
        let env = std::cell::RefCell::new(env);
        let samples = alternating(
            rounds,
            || env.borrow_mut().time_appends(),
            || env.borrow_mut().time_appends_traced(),
        );
        if rounds == 1 {
            eprintln!("{id}: ran once (test mode, not a measurement)");
        } else {
            let ratio = |side: fn(&(Duration, Duration)) -> Duration| {
                quartiles(
                    samples
                        .iter()
                        .map(|(plain, traced)| {
                            side(traced).as_secs_f64() / side(plain).as_secs_f64()
                        })
                        .collect(),
                )
            };
            let (wall, cpu) = (ratio(|t| t.0), ratio(|t| t.1));
            eprintln!(
                "{id}: traced/plain wall ratio {:.3} (IQR {:.3}-{:.3}); cpu-time ratio {:.3} (IQR \
                 {:.3}-{:.3}); {rounds} rounds of {} batches ({bytes} bytes)",
                wall.1,
                wall.0,
                wall.2,
                cpu.1,
                cpu.0,
                cpu.2,
                env.borrow().batches
            );
        }
        let _ = std::fs::remove_dir_all(env.borrow().dir.parent().expect("scratch"));
    }
}

fn config_criterion() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config_criterion();
    targets = bench_tracing
}
criterion_main!(benches);
