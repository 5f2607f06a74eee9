//! `mirror`: KIP-1279 mirroring throughput from a source cluster to a destination on the same disk,
//! beside its bound on the same backend (the same 1 MiB fetches, read beforehand, appended by
//! `append_as_mirror`) and klog's leader append of the same batches (same rounds, alternating), and
//! failover time per partition with and without fsync. The kernels are `cli/bench_mirror.rs`, shared with
//! `benches/mirror.rs`.
//!
//! `mirror/partitions` is the same at cluster scale (issue #17): `--partitions` partitions mirrored by
//! `Cluster` ticks until idle beside its bound (issue #28: the follower append, `append_as_follower`,
//! of the same fetched multi-batch sets into the same partitions, read beforehand, measured in the same
//! run) and klog's leader append of the same batches one per call (a comparison: it walks records and
//! checks producers, which the mirror does not), the failover of all of them at once, and the mirror's
//! peak RSS at two partition counts, each measured in a child process (this binary re-run with a hidden
//! flag) so that neither the batches built here nor the other runs' allocations count.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use klog::log::io::{open_backend, IoBackend};
use serde_json::{json, Value};

use super::{alternate, mb_per_s, BackendChoice, BenchArgs, Ctx, Report, Row, Series};
use crate::cli::bench_mirror;

pub(super) const MIRROR_ROW: &str = "mirror (fetch + append_as_mirror)";
/// At most this many rounds of the cluster-scale run: each builds two clusters of `--partitions`
/// partitions per backend, which takes far longer than the timed parts.
const MANY_ROUNDS: usize = 2;
/// The cluster-scale row (its partition count is in the report's title and details).
pub(super) const MANY_ROW: &str = "mirror of every partition (Cluster ticks until idle)";
/// The cluster-scale row's bound: the mirror's appends without its fetches.
pub(super) const MANY_BOUND: &str =
    "append_as_follower of the same fetched sets into the same partitions, read beforehand";
/// The cluster-scale comparison: what a producer's batches cost the same partitions.
const MANY_LEADER: &str =
    "leader append of the same batches into the same partitions, one per call";
/// The mirror's bound: its appends without its fetches.
const BOUND: &str = "append_as_mirror of the same 1 MiB fetches, read beforehand";
/// What the bound leaves out and no mirror that copies its fetches out of the source can: the copy.
/// The ratio of the bound's time to the bound's plus a plain `pread` of the same bytes from the
/// source's `.log` (issue #28: the physical ceiling of the mirror's ratio to its bound).
const READ_CEILING: &str =
    "ceiling of mirror / limit with the fetch's copy: limit / (limit + pread of the same fetches)";
/// The mirror beside that ceiling's work (its bound's appends plus the plain reads).
const TO_CEILING: &str = "mirror / (limit + pread of the same fetches)";

/// 16 KiB batches of 15 1-KiB records, as in `append`.
const RECORDS: usize = 15;
const VALUE: usize = 1024;

pub(super) fn run(ctx: &Ctx) -> anyhow::Result<Vec<Report>> {
    let per_batch = (RECORDS * (VALUE + 40)) as u64;
    let count = (ctx.args.mirror_bytes / per_batch).max(1) as usize;
    ctx.progress.say("building batches");
    let batches = bench_mirror::build_batches(count, RECORDS, VALUE);
    let bytes: u64 = batches.iter().map(|b| b.len() as u64).sum();
    let mut sources = Vec::new();
    let mut chunks = Vec::new();
    for b in &ctx.backends {
        ctx.progress.say(&format!("source log ({})", b.name));
        let root = ctx.scratch.join(format!("mirror-source-{}", b.name));
        let (source, _) = bench_mirror::append_run(&b.storage, &root, "t", &batches)?;
        chunks.push(bench_mirror::fetch_chunks(&source, "t")?);
        sources.push(source);
    }
    let nb = ctx.backends.len();
    // Per backend, three slots: the bound (the same fetches appended, no fetching), the mirror, and the
    // leader append of the same batches one per call (what a producer sends).
    let mut bounds: Vec<Series> = vec![Series::default(); nb];
    let mut rows: Vec<Series> = vec![Series::default(); nb];
    let mut leader: Vec<Series> = vec![Series::default(); nb];
    // Once a round: the plainest read of the same fetches (`pread` from the source's `.log`).
    let mut reads = Series::default();
    let mut n = 0;
    for round in 0..ctx.rounds() {
        reads.push(mb_per_s(
            bytes,
            bench_mirror::pread_run(&sources[0], "t", &chunks[0])?,
        ));
        ctx.progress.say(&format!("round {}", round + 1));
        let slots: Vec<usize> = (0..3 * nb).collect();
        for &slot in alternate(round, &slots) {
            n += 1;
            let root = ctx.scratch.join(format!("mirror-run-{n}"));
            let (i, what) = (slot / 3, slot % 3);
            let b = &ctx.backends[i];
            match what {
                0 => {
                    let (c, t) =
                        bench_mirror::mirror_append_run(&b.storage, &root, "t", &chunks[i])?;
                    c.close()?;
                    bounds[i].push(mb_per_s(bytes, t));
                }
                1 => {
                    let (t, mirrored) =
                        bench_mirror::mirror_run(&b.storage, &root, &sources[i], "t")?;
                    anyhow::ensure!(mirrored == bytes, "mirrored {mirrored} of {bytes} bytes");
                    rows[i].push(mb_per_s(bytes, t));
                }
                _ => {
                    let (c, t) = bench_mirror::append_run(&b.storage, &root, "t", &batches)?;
                    c.close()?;
                    leader[i].push(mb_per_s(bytes, t));
                }
            }
            std::fs::remove_dir_all(&root).ok();
        }
    }
    for s in &sources {
        s.close()?;
    }
    // Failover: 16 partitions of 64 batches, STOPPING -> STOPPED, per partition.
    let mut failover = Vec::new();
    let mut failover_text = Vec::new();
    let small = &batches[..64.min(batches.len())];
    for b in &ctx.backends {
        for fsync in [true, false] {
            ctx.progress
                .say(&format!("failover ({}, fsync={fsync})", b.name));
            n += 1;
            let dir = ctx.scratch.join(format!("mirror-failover-{n}"));
            std::fs::create_dir_all(&dir)?;
            let per = bench_mirror::failover_run(&b.storage, &dir, 16, small, fsync)?;
            failover_text.push(format!(
                "{} {:.1} ms{}",
                b.name,
                per.as_secs_f64() * 1e3,
                if fsync { "" } else { " without fsync" }
            ));
            failover.push(json!({
                "backend": b.name,
                "fsync": fsync,
                "partitions": 16,
                "ms_per_partition": per.as_secs_f64() * 1e3,
            }));
            std::fs::remove_dir_all(&dir).ok();
        }
    }
    let mut report = Report::new(
        "mirror",
        format!(
            "{:.1} MiB of {count} 16 KiB batches mirrored from a source cluster on the same disk (1 MiB \
             read_committed fetches, appended unchanged) beside its bound on the same backend: the same \
             fetches, read beforehand, passed to append_as_mirror (the mirror without fetching); failover \
             (STOPPING -> STOPPED) per partition of 16: {}",
            bytes as f64 / (1 << 20) as f64,
            failover_text.join(", ")
        ),
        "MB/s",
    );
    let bound_name = BOUND.to_owned();
    report.baseline_name = format!("{bound_name} ({})", ctx.backends[0].name);
    report.baseline = bounds[0].clone();
    for (i, b) in ctx.backends.iter().enumerate() {
        report.rows.push(
            Row::new(MIRROR_ROW, b.name, rows[i].clone()).bounded(&bound_name, bounds[i].clone()),
        );
        report.comparisons.push((
            format!(
                "{MIRROR_ROW} / leader append of the same batches, one 16 KiB batch per call, {}",
                b.name
            ),
            super::ratios(&rows[i], &leader[i]),
        ));
        let (ceiling, to_ceiling) = read_ceiling(&rows[i], &bounds[i], &reads);
        report
            .comparisons
            .push((format!("{READ_CEILING}, {}", b.name), ceiling));
        report
            .comparisons
            .push((format!("{TO_CEILING}, {}", b.name), to_ceiling));
    }
    report.extra = json!({
        "bytes": bytes,
        "batches": count,
        "records": count * RECORDS,
        "failover": failover,
        "fetches": chunks[0].len(),
        "pread_mb_per_s": {"value": reads.median(), "runs": reads.runs},
        "leader_append_mb_per_s": ctx.backends.iter().zip(&leader)
            .map(|(b, s)| (b.name.to_owned(), json!({"value": s.median(), "runs": s.runs})))
            .collect::<serde_json::Map<_, _>>(),
    });
    let many = partitions(ctx)?;
    Ok(vec![report, many])
}

/// Per backend: the follower append of the fetched sets (the bound), the leader append into the N
/// partitions (a comparison), the mirror of them, the failover of all.
#[derive(Default, Clone)]
struct ManySeries {
    bound: Series,
    leader: Series,
    mirror: Series,
    failover_s: Series,
}

/// `mirror/partitions`: `--partitions` partitions holding `--mirror-bytes` in all (whole batches, the
/// same ones in every partition), mirrored beside the leader append of the same batches into the same
/// partitions, and failed over all at once; then the mirror's peak RSS. Each partition's first batch
/// is appended before the clock starts on both sides: it writes the partition's leader-epoch
/// checkpoint, synced, once in the partition's life, and at a few batches per partition those
/// thousand syncs would be most of what is timed.
fn partitions(ctx: &Ctx) -> anyhow::Result<Report> {
    let n = ctx.args.partitions;
    let layout = bench_mirror::partition_layout(n);
    let per_partition = batches_per_partition(ctx.args);
    let batches = &bench_mirror::build_batches(per_partition, RECORDS, VALUE);
    // Timed: every batch but each partition's first (see `bench_mirror::append_many_run`).
    let bytes = batches[1..].iter().map(|b| b.len() as u64).sum::<u64>() * n as u64;
    let nb = ctx.backends.len();
    // Every cluster of this part stays until its end: ext4 scans past recently deleted inodes when it
    // allocates new ones, so removing a thousand partitions right before creating the next thousand
    // makes the setup between runs many times slower (the timed parts are not affected).
    let dir = ctx.scratch.join("mirror-many");
    let mut sources = Vec::new();
    for b in &ctx.backends {
        ctx.progress
            .say(&format!("source of {n} partitions ({})", b.name));
        let root = dir.join(format!("source-{}", b.name));
        sources.push(bench_mirror::append_many_run(&b.storage, &root, &layout, batches, 0)?.0);
    }
    // The sets the mirror fetches, read once: every backend's source holds the same bytes.
    ctx.progress.say("reading the fetched sets of the bound");
    let sets = bench_mirror::many_fetch_sets(&sources[0], &layout)?;
    let set_bytes: u64 = sets
        .iter()
        .flat_map(|s| &s.rest)
        .map(|r| r.len() as u64)
        .sum();
    anyhow::ensure!(
        set_bytes == bytes,
        "the bound's sets hold {set_bytes} of {bytes} bytes"
    );
    let mut series = vec![ManySeries::default(); nb];
    let mut reads = Series::default();
    let mut runs = 0;
    let rounds = ctx.rounds().min(MANY_ROUNDS);
    for round in 0..rounds {
        reads.push(mb_per_s(
            bytes,
            bench_mirror::pread_many_run(&sources[0], &layout, &sets)?,
        ));
        let slots: Vec<usize> = (0..3 * nb).collect();
        for &slot in alternate(round, &slots) {
            runs += 1;
            let root = dir.join(format!("run-{runs}"));
            let (i, b) = (slot / 3, &ctx.backends[slot / 3]);
            let step = |what: &str| {
                ctx.progress.say(&format!(
                    "round {}: {what} {n} partitions ({})",
                    round + 1,
                    b.name
                ))
            };
            if slot % 3 == 0 {
                step("follower append of the fetched sets into");
                let (c, t) = bench_mirror::follower_many_run(&b.storage, &root, &layout, &sets)?;
                drop(c);
                series[i].bound.push(mb_per_s(bytes, t));
                continue;
            }
            if slot % 3 == 1 {
                step("leader append into");
                let (c, t) = bench_mirror::append_many_run(&b.storage, &root, &layout, batches, 1)?;
                drop(c);
                series[i].leader.push(mb_per_s(bytes, t));
                continue;
            }
            // The failover of all of them once per backend, after the last round's mirror.
            let failover = round + 1 == rounds;
            step(if failover {
                "mirror and failover of"
            } else {
                "mirror of"
            });
            let (c, run) =
                bench_mirror::mirror_many_run(&b.storage, &root, &sources[i], &layout, failover)?;
            drop(c);
            anyhow::ensure!(
                run.bytes == bytes,
                "mirrored {} of {bytes} bytes",
                run.bytes
            );
            series[i].mirror.push(mb_per_s(bytes, run.mirror));
            if let Some(d) = run.failover {
                series[i].failover_s.push(d.as_secs_f64());
            }
        }
    }
    // No cluster of this part is closed: closing rewrites the log directory's checkpoints once per
    // partition, which at a thousand partitions takes far longer than anything measured here.
    drop((sources, sets));
    ctx.progress.say(&format!(
        "peak RSS of the mirror ({})",
        ctx.backends[0].name
    ));
    let rss = rss(ctx, &dir)?;
    std::fs::remove_dir_all(&dir).ok();
    Ok(many_report(
        ctx,
        &layout,
        (per_partition, bytes),
        &series,
        &reads,
        rss,
    ))
}

fn many_report(
    ctx: &Ctx,
    layout: &[(String, i32)],
    (per_partition, bytes): (usize, u64),
    series: &[ManySeries],
    reads: &Series,
    rss: Value,
) -> Report {
    let n = ctx.args.partitions;
    let failover_text: Vec<String> = ctx
        .backends
        .iter()
        .zip(series)
        .map(|(b, s)| format!("{} {:.2} s", b.name, s.failover_s.median()))
        .collect();
    let mut report = Report::new(
        "mirror/partitions",
        format!(
            "{:.1} MiB timed in {n} partitions ({} topics, {per_partition} 16 KiB batches each, the first \
             appended before the clock on both sides) mirrored from a source cluster on the same disk \
             by Cluster ticks until idle (PREPARING done beforehand), \
             beside its bound: append_as_follower of the same fetched sets (read beforehand, \
             fetch_max_bytes each) into the same partitions, round-robin as a fetch round, no record \
             walk; klog's leader append of the same batches, one per call, is a comparison line; failover of all {n} at once (RemoveTopicsFromMirror to every partition \
             STOPPED, barrier written and flushed): {}; peak RSS per partition: {}",
            bytes as f64 / (1 << 20) as f64,
            layout.len(),
            failover_text.join(", "),
            rss["per_partition_kib"]
                .as_f64()
                .map_or("-".into(), |v| format!("{v:.1} KiB")),
        ),
        "MB/s",
    );
    report.baseline_name = format!("{MANY_BOUND} ({})", ctx.backends[0].name);
    report.baseline = series[0].bound.clone();
    for (b, s) in ctx.backends.iter().zip(series) {
        report.rows.push(
            Row::new(MANY_ROW, b.name, s.mirror.clone()).bounded(MANY_BOUND, s.bound.clone()),
        );
        report.comparisons.push((
            format!("{MANY_ROW} / {MANY_LEADER}, {}", b.name),
            super::ratios(&s.mirror, &s.leader),
        ));
        let (ceiling, to_ceiling) = read_ceiling(&s.mirror, &s.bound, reads);
        report
            .comparisons
            .push((format!("{READ_CEILING}, {}", b.name), ceiling));
        report
            .comparisons
            .push((format!("{TO_CEILING}, {}", b.name), to_ceiling));
    }
    report.extra = json!({
        "partitions": n,
        "topics": layout.len(),
        "batches_per_partition": per_partition,
        "bytes": bytes,
        "pread_mb_per_s": {"value": reads.median(), "runs": reads.runs},
        "failover": ctx.backends.iter().zip(series).map(|(b, s)| json!({
            "backend": b.name,
            "partitions": n,
            "fsync": true,
            "s": s.failover_s.median(),
            "runs": s.failover_s.runs,
        })).collect::<Vec<_>>(),
        "rss": rss,
        "leader_append_mb_per_s": ctx.backends.iter().zip(series)
            .map(|(b, s)| (b.name.to_owned(), json!({"value": s.leader.median(), "runs": s.leader.runs})))
            .collect::<serde_json::Map<_, _>>(),
    });
    report
}

/// Per round, from rates in MB/s of the same bytes: the ceiling `limit / (limit + read)` (times add:
/// the read's share of a mirror that reads, then appends) and the mirror's ratio to that work.
fn read_ceiling(mirror: &Series, bound: &Series, reads: &Series) -> (Vec<f64>, Vec<f64>) {
    let rounds = mirror.runs.iter().zip(&bound.runs).zip(&reads.runs);
    rounds
        .map(|((m, b), r)| {
            let both = 1.0 / (1.0 / b + 1.0 / r);
            (both / b, m / both)
        })
        .unzip()
}

/// Batches in each partition of the cluster-scale run: `--mirror-bytes` in all, at least two each
/// (the first is not timed).
fn batches_per_partition(args: &BenchArgs) -> usize {
    let per_batch = (RECORDS * (VALUE + 40)) as u64;
    let count = (args.mirror_bytes / per_batch).max(1) as usize;
    (count / args.partitions).max(2)
}

/// The mirror's peak RSS at a tenth of the topics and at all of them, each in a child process on the
/// first backend, and the per-partition cost: the difference over the difference in partitions.
fn rss(ctx: &Ctx, dir: &Path) -> anyhow::Result<Value> {
    let topics = bench_mirror::partition_layout(ctx.args.partitions).len();
    let small = (topics / 10).max(1);
    let mut counts = vec![small];
    if topics > small {
        counts.push(topics);
    }
    let mut runs = Vec::new();
    for topics in counts {
        // Beside the other clusters of the run, removed with them (see `partitions`).
        let dir = dir.join(format!("rss-{topics}"));
        std::fs::create_dir_all(&dir)?;
        runs.push(rss_run(ctx, &dir, topics)?);
    }
    let kib = |r: &Value, k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    let per_partition = match runs.as_slice() {
        [a, b] => {
            (kib(b, "peak_rss_kib") - kib(a, "peak_rss_kib"))
                / (kib(b, "partitions") - kib(a, "partitions"))
        }
        _ => f64::NAN,
    };
    Ok(json!({
        "backend": ctx.backends[0].name,
        "runs": runs,
        "per_partition_kib": per_partition.is_finite().then_some(per_partition),
    }))
}

/// Runs this binary as the memory measurement's child; returns the JSON line it printed.
fn rss_run(ctx: &Ctx, dir: &Path, topics: usize) -> anyhow::Result<Value> {
    let exe = std::env::current_exe().context("finding this binary to re-run it")?;
    let out = std::process::Command::new(&exe)
        .arg("bench")
        .arg("mirror")
        .args(["--backend", ctx.backends[0].name])
        .args(["--partitions", &ctx.args.partitions.to_string()])
        .args(["--mirror-bytes", &ctx.args.mirror_bytes.to_string()])
        .args(["--mirror-rss-topics", &topics.to_string()])
        .arg("--mirror-rss-child")
        .arg("--dir")
        .arg(dir)
        .output()
        .with_context(|| format!("running {}", exe.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "the memory measurement's child ({} topics) failed ({}): {}",
        topics,
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line)
        .with_context(|| format!("the memory measurement's child printed `{line}`, not JSON"))
}

/// The child: builds a source cluster of the first `--mirror-rss-topics` topics of the `--partitions`
/// layout in `--dir` (the parent's batches per partition), mirrors it into another, then prints its
/// peak RSS. The source is in this process too (a local source is read in the mirror's process), so
/// the figure holds the source's partitions' state as well as the mirror's.
pub(super) fn rss_child(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    let dir = args
        .dir
        .as_ref()
        .context("--mirror-rss-child needs --dir")?;
    let backend = match args.backend {
        BackendChoice::Uring => IoBackend::Uring,
        _ => IoBackend::Std,
    };
    let storage = open_backend(backend)?;
    let layout: Vec<(String, i32)> = bench_mirror::partition_layout(args.partitions)
        .into_iter()
        .take(args.mirror_rss_topics.max(1))
        .collect();
    let partitions: i32 = layout.iter().map(|(_, n)| n).sum();
    let batches = bench_mirror::build_batches(batches_per_partition(args), RECORDS, VALUE);
    let (source, _) =
        bench_mirror::append_many_run(&storage, &dir.join("source"), &layout, &batches, 0)?;
    let (_mirror, run) =
        bench_mirror::mirror_many_run(&storage, &dir.join("dest"), &source, &layout, false)?;
    let peak = bench_mirror::peak_rss_kib()?;
    outln!(
        "{}",
        json!({"partitions": partitions, "bytes": run.bytes, "peak_rss_kib": peak})
    );
    Ok(ExitCode::SUCCESS)
}
