//! `mirror`: KIP-1279 mirroring throughput from a source cluster to a destination on the same disk,
//! beside its bound on the same backend (the same 1 MiB fetches, read beforehand, appended by
//! `append_as_mirror`) and klog's leader append of the same batches (same rounds, alternating), and
//! failover time per partition with and without fsync. The kernels are `cli/bench_mirror.rs`, shared with
//! `benches/mirror.rs`.

use serde_json::json;

use super::{alternate, mb_per_s, Ctx, Report, Row, Series};
use crate::cli::bench_mirror;

pub(super) const MIRROR_ROW: &str = "mirror (fetch + append_as_mirror)";
/// The mirror's bound: its appends without its fetches.
const BOUND: &str = "append_as_mirror of the same 1 MiB fetches, read beforehand";

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
    let mut n = 0;
    for round in 0..ctx.rounds() {
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
    }
    report.extra = json!({
        "bytes": bytes,
        "batches": count,
        "records": count * RECORDS,
        "failover": failover,
        "fetches": chunks[0].len(),
        "leader_append_mb_per_s": ctx.backends.iter().zip(&leader)
            .map(|(b, s)| (b.name.to_owned(), json!({"value": s.median(), "runs": s.runs})))
            .collect::<serde_json::Map<_, _>>(),
    });
    Ok(vec![report])
}
