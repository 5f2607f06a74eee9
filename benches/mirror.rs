//! Mirroring throughput beside its bound (its own appends without its fetches) and klog's leader append
//! of the same batches, and failover time.
//!
//! - `mirror/mirror_append`: the source's 1 MiB fetches, read beforehand, passed to `append_as_mirror`
//!   of a fresh cluster (the baseline: the mirror's work without fetching, in the same 1 MiB calls).
//! - `mirror/leader_append`: 16 KiB batches (15 records of 1 KiB) leader-appended to a fresh cluster, one
//!   per call as a producer sends them (a reference, not a bound: other calls, other work).
//! - `mirror/mirror`: the same batches mirrored from a source cluster into a fresh cluster on the same
//!   disk (fetch read_committed from the source, `append_as_mirror`, producer state and epochs rebuilt).
//! - paired ratios (stderr): the two timed back to back, alternating, for 7 rounds (3 with `--quick`);
//!   `KLOG_BENCH_PAIRED=0` skips them.
//! - failover (stderr): STOPPING -> STOPPED per partition over 16 partitions, with and without fsync.
//!
//! Run: `cargo bench --bench mirror`; `cargo test --benches` runs each once at a small size.

#[path = "../src/cli/bench_mirror.rs"]
#[allow(dead_code)]
mod bench_mirror;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use klog::log::io::{StdStorage, Storage};

mod common;

use common::{alternating, quartiles, CriterionArgs};

fn scratch() -> PathBuf {
    let base = std::env::var_os("KLOG_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = base.join(format!("mirror-bench-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn bench(c: &mut Criterion) {
    let storage: Arc<dyn Storage> = Arc::new(StdStorage);
    let args = CriterionArgs::from_env();
    // `cargo test --benches`: run everything once at a small size.
    let test_mode = !args.has("--bench") || args.has("--test");
    let count = if test_mode { 16 } else { 1024 }; // 16 MiB in a real run
    let batches = bench_mirror::build_batches(count, 15, 1024);
    let bytes: u64 = batches.iter().map(|b| b.len() as u64).sum();
    let dir = scratch();
    let (source, _) =
        bench_mirror::append_run(&storage, &dir.join("source"), "t", &batches).unwrap();
    let chunks = bench_mirror::fetch_chunks(&source, "t").unwrap();
    let n = std::cell::Cell::new(0u64);
    let next = |what: &str| {
        n.set(n.get() + 1);
        dir.join(format!("{what}-{}", n.get()))
    };
    let mut g = c.benchmark_group("mirror");
    g.throughput(Throughput::Bytes(bytes));
    g.sample_size(10);
    // iter_custom: only the appends / the mirroring are timed, not cluster creation and removal.
    g.bench_function("mirror_append", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let root = next("bound");
                let (c, t) =
                    bench_mirror::mirror_append_run(&storage, &root, "t", &chunks).unwrap();
                c.close().unwrap();
                std::fs::remove_dir_all(&root).ok();
                total += t;
            }
            total
        })
    });
    g.bench_function("leader_append", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let root = next("append");
                let (c, t) = bench_mirror::append_run(&storage, &root, "t", &batches).unwrap();
                c.close().unwrap();
                std::fs::remove_dir_all(&root).ok();
                total += t;
            }
            total
        })
    });
    g.bench_function("mirror", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let root = next("mirror");
                let (t, _) = bench_mirror::mirror_run(&storage, &root, &source, "t").unwrap();
                std::fs::remove_dir_all(&root).ok();
                total += t;
            }
            total
        })
    });
    g.finish();

    let rounds = args.paired_rounds(7, 3);
    if rounds == 0 {
        return;
    }
    let run_append = || {
        let root = next("pa");
        let (c, t) = bench_mirror::mirror_append_run(&storage, &root, "t", &chunks).unwrap();
        c.close().unwrap();
        std::fs::remove_dir_all(&root).ok();
        t
    };
    let run_mirror = || {
        let root = next("pm");
        let (t, _) = bench_mirror::mirror_run(&storage, &root, &source, "t").unwrap();
        std::fs::remove_dir_all(&root).ok();
        t
    };
    let ratios: Vec<f64> = alternating(rounds, run_append, run_mirror)
        .into_iter()
        .map(|(ta, tm)| ta.as_secs_f64() / tm.as_secs_f64())
        .collect();
    eprintln!(
        "paired/mirror_vs_mirror_append: {:.3} (mirror rate / rate of its appends without fetching, \
         median of {rounds}, {} MiB)",
        quartiles(ratios).1,
        bytes >> 20
    );
    let (parts, per) = if test_mode { (2, 2) } else { (16, 64) };
    let small = &batches[..per.min(batches.len())];
    for fsync in [true, false] {
        let d = next(if fsync { "fo-sync" } else { "fo-nosync" });
        let t: Duration = bench_mirror::failover_run(&storage, &d, parts, small, fsync).unwrap();
        eprintln!(
            "failover/per_partition fsync={fsync}: {:.3} ms ({parts} partitions of {per} batches)",
            t.as_secs_f64() * 1e3
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

criterion_group!(benches, bench);
criterion_main!(benches);
