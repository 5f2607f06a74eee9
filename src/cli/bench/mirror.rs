//! `mirror`: KIP-1279 mirroring throughput from a source cluster to a destination on the same disk,
//! beside klog's plain leader append of the same batches (the baseline, same rounds, alternating), and
//! failover time per partition with and without fsync. The kernels are `cli/bench_mirror.rs`, shared with
//! `benches/mirror.rs`.

use serde_json::json;

use super::{alternate, mb_per_s, Ctx, Report, Row, Series};
use crate::cli::bench_mirror;

pub(super) const MIRROR_ROW: &str = "mirror (fetch + append_as_mirror)";

/// 16 KiB batches of 15 1-KiB records, as in `append`.
const RECORDS: usize = 15;
const VALUE: usize = 1024;

pub(super) fn run(ctx: &Ctx) -> anyhow::Result<Vec<Report>> {
    let per_batch = (RECORDS * (VALUE + 40)) as u64;
    let count = (ctx.args.mirror_bytes / per_batch).max(1) as usize;
    ctx.progress.say("building batches");
    let batches = bench_mirror::build_batches(count, RECORDS, VALUE);
    let bytes: u64 = batches.iter().map(|b| b.len() as u64).sum();
    let std = &ctx.backends[0];
    let mut sources = Vec::new();
    for b in &ctx.backends {
        ctx.progress.say(&format!("source log ({})", b.name));
        let root = ctx.scratch.join(format!("mirror-source-{}", b.name));
        let (source, _) = bench_mirror::append_run(&b.storage, &root, "t", &batches)?;
        sources.push(source);
    }
    let mut baseline = Series::default();
    let mut rows: Vec<Series> = vec![Series::default(); ctx.backends.len()];
    let mut n = 0;
    for round in 0..ctx.rounds() {
        ctx.progress.say(&format!("round {}", round + 1));
        let slots: Vec<usize> = (0..=ctx.backends.len()).collect();
        for &slot in alternate(round, &slots) {
            n += 1;
            let root = ctx.scratch.join(format!("mirror-run-{n}"));
            if slot == 0 {
                let (c, t) = bench_mirror::append_run(&std.storage, &root, "t", &batches)?;
                c.close()?;
                baseline.push(mb_per_s(bytes, t));
            } else {
                let b = &ctx.backends[slot - 1];
                let (t, mirrored) =
                    bench_mirror::mirror_run(&b.storage, &root, &sources[slot - 1], "t")?;
                anyhow::ensure!(mirrored == bytes, "mirrored {mirrored} of {bytes} bytes");
                rows[slot - 1].push(mb_per_s(bytes, t));
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
             read_committed fetches, appended unchanged) beside the same batches leader-appended one per \
             call; failover (STOPPING -> STOPPED) per partition of 16: {}",
            bytes as f64 / (1 << 20) as f64,
            failover_text.join(", ")
        ),
        "MB/s",
    );
    report.baseline_name = "klog leader append (std), one batch per call".into();
    report.baseline = baseline;
    for (b, series) in ctx.backends.iter().zip(rows) {
        report.rows.push(Row {
            name: MIRROR_ROW.into(),
            backend: b.name,
            series,
        });
    }
    report.extra = json!({
        "bytes": bytes,
        "batches": count,
        "records": count * RECORDS,
        "failover": failover,
    });
    Ok(vec![report])
}
