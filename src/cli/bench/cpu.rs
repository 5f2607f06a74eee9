//! The workloads without I/O: `psm` (producer-state replay, beside a bare hash map and Kafka's
//! ProducerStateManager) and `parse` (zero-copy parse + CRC-32C, beside raw CRC-32C and memcpy).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::hint::black_box;
use std::time::Instant;

use anyhow::bail;
use klog::log::format::{crc32c, Batches};
use klog::psm::{BatchSummary, ControlKind, ProducerStateManager, PsmConfig};
use serde_json::json;

use super::disk::{build_pool, Rng, SHAPES};
use super::{alternate, mb_per_s, per_s, ratios, Ctx, Report, Row, Series};

pub(super) const PSM_ROW: &str = "ProducerStateManager replay (Replication)";
pub(super) const PARSE_ROW: &str = "Batches::new: parse + CRC-32C";

// ---------------------------------------------------------------------------------------------------
// psm

const RECORDS_PER_BATCH: i64 = 15;
/// Data batches per transaction of a transactional producer, then a COMMIT marker.
const TXN_DATA_BATCHES: u8 = 4;
const BASE_TIMESTAMP: i64 = 1_800_000_000_000;
/// Producer ids are spread like a broker's (a block per broker), not 0..n.
const PRODUCER_ID_BASE: i64 = 4_000_000;

/// The generator of `benches/psm.rs` (and of `KafkaBench psm`, step for step): `batches` summaries from
/// `producers` producers drawn at random (fixed seed), offsets from 0; every producer idempotent, every
/// 10th transactional, committing after `TXN_DATA_BATCHES` data batches.
fn build_summaries(producers: usize, batches: usize) -> Vec<BatchSummary> {
    let mut state = vec![(0i32, 0u8); producers];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut next_offset = 0i64;
    let mut out = Vec::with_capacity(batches);
    for i in 0..batches {
        let p = (rng.next() % producers as u64) as usize;
        let transactional = p.is_multiple_of(10);
        let producer_id = PRODUCER_ID_BASE + p as i64 * 3;
        let (seq, open) = &mut state[p];
        let max_timestamp = BASE_TIMESTAMP + i as i64;
        let summary = if transactional && *open == TXN_DATA_BATCHES {
            *open = 0;
            BatchSummary {
                producer_id,
                producer_epoch: 0,
                first_sequence: -1,
                last_sequence: -1,
                first_offset: next_offset,
                last_offset: next_offset,
                max_timestamp,
                is_transactional: true,
                control: Some(ControlKind::Commit {
                    coordinator_epoch: 0,
                }),
            }
        } else {
            let first_sequence = *seq;
            *seq += RECORDS_PER_BATCH as i32;
            if transactional {
                *open += 1;
            }
            BatchSummary {
                producer_id,
                producer_epoch: 0,
                first_sequence,
                last_sequence: first_sequence + RECORDS_PER_BATCH as i32 - 1,
                first_offset: next_offset,
                last_offset: next_offset + RECORDS_PER_BATCH - 1,
                max_timestamp,
                is_transactional: transactional,
                control: None,
            }
        };
        next_offset = summary.last_offset + 1;
        out.push(summary);
    }
    out
}

/// Recovery's loop: the next batch's producer prefetched, each batch replayed (`replay`: a Replication
/// plan of one batch, applied), then the map end offset moved. Returns completed transactions.
fn replay(summaries: &[BatchSummary]) -> anyhow::Result<(usize, usize)> {
    let mut psm = ProducerStateManager::new(PsmConfig::default());
    let mut completed = 0;
    for (i, s) in summaries.iter().enumerate() {
        if let Some(next) = summaries.get(i + 1) {
            psm.prefetch(next.producer_id);
        }
        completed += usize::from(psm.replay(s)?.is_some());
        psm.update_map_end_offset(s.last_offset + 1);
    }
    Ok((completed, psm.producers().count()))
}

/// klog's producer-id hash (`psm/src/producer_table.rs`): `(id ^ seed) * K`, folded. The bound must not
/// pay SipHash's rounds where klog pays one multiplication.
#[derive(Default)]
struct FoldedMultiply {
    state: u64,
}

impl Hasher for FoldedMultiply {
    fn finish(&self) -> u64 {
        self.state
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_i64(&mut self, i: i64) {
        self.write_u64(i as u64);
    }

    fn write_u64(&mut self, x: u64) {
        const SEED: u64 = 0x6b6c_6f67_5eed_0001;
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let product = u128::from(x ^ SEED) * u128::from(K);
        self.state ^= (product as u64) ^ ((product >> 64) as u64);
    }
}

/// The least a producer table costs: one hash-map insert per batch, with klog's hash (std's `HashMap`
/// is the same SwissTable as the `hashbrown` table klog keeps its producers in).
fn hashmap_baseline(summaries: &[BatchSummary]) -> usize {
    let mut map = HashMap::<i64, (i16, i32, i64), BuildHasherDefault<FoldedMultiply>>::default();
    for s in summaries {
        map.insert(
            s.producer_id,
            (s.producer_epoch, s.last_sequence, s.last_offset),
        );
    }
    black_box(&map).len()
}

pub(super) fn psm(ctx: &Ctx) -> anyhow::Result<Vec<Report>> {
    let (batches, producers) = (ctx.args.psm_batches, ctx.args.psm_producers);
    ctx.progress.say("building the batch summaries");
    let summaries = build_summaries(producers, batches);
    // Warm-up, and the figures checked below.
    let (completed, live) = replay(&summaries)?;
    hashmap_baseline(&summaries);
    let mut baseline = Series::default();
    let mut series = Series::default();
    for round in 0..ctx.rounds() {
        for &slot in alternate(round, &[0, 1]) {
            let start = Instant::now();
            if slot == 0 {
                ctx.progress
                    .say(&format!("HashMap::insert, round {}", round + 1));
                black_box(hashmap_baseline(&summaries));
                baseline.push(per_s(batches as u64, start.elapsed()));
            } else {
                ctx.progress
                    .say(&format!("klog replay, round {}", round + 1));
                let r = replay(&summaries)?;
                let elapsed = start.elapsed();
                if r != (completed, live) {
                    bail!("replays differ: {r:?} and {:?}", (completed, live));
                }
                series.push(per_s(batches as u64, elapsed));
            }
        }
    }
    let mut report = Report::new(
        "psm",
        format!(
            "replay of {batches} batch summaries from {producers} producers into a fresh \
             ProducerStateManager (prefetch of the next producer, replay, update_map_end_offset per \
             batch); every 10th producer transactional ({completed} commits)"
        ),
        "batches/s",
    );
    report.baseline_name = "HashMap<i64, _>::insert per batch (klog's folded-multiply hash)".into();
    report.baseline = baseline;
    report.rows.push(Row::new(PSM_ROW, "-", series));
    report.extra = json!({
        "batches": batches,
        "producers": producers,
        "live_producers": live,
        "completed_transactions": completed,
    });
    ctx.progress.say("Kafka ProducerStateManager");
    let psm_dir = ctx.scratch.join("kafka-psm");
    report.kafka = ctx.kafka.run(
        "ProducerStateManager replay (REPLICATION)",
        &[
            "psm".into(),
            batches.to_string(),
            producers.to_string(),
            ctx.rounds().to_string(),
            "3".into(),
            psm_dir.display().to_string(),
        ],
    );
    let _ = std::fs::remove_dir_all(&psm_dir);
    Ok(vec![report])
}

// ---------------------------------------------------------------------------------------------------
// parse

/// Bytes walked per measurement (whole passes over the buffer).
const PARSE_BYTES_PER_MEASUREMENT: u64 = 256 << 20;

fn klog_parse(buf: &[u8]) -> anyhow::Result<u64> {
    let mut records = 0u64;
    for b in Batches::new(buf) {
        match b? {
            klog::log::format::AnyBatch::V2(b) => records += b.records_count() as u64,
            klog::log::format::AnyBatch::Legacy(_) => bail!("a legacy entry in the parse buffer"),
        }
    }
    Ok(records)
}

/// CRC-32C over `[21..end)` of each batch, from precomputed ranges: what the check alone costs.
fn raw_crc(buf: &[u8], ranges: &[(usize, usize)]) -> u32 {
    let mut x = 0;
    for &(start, end) in ranges {
        x ^= crc32c(&buf[start..end]);
    }
    x
}

pub(super) fn parse(ctx: &Ctx) -> anyhow::Result<Vec<Report>> {
    let pool = build_pool(SHAPES[0])?;
    let mut buf = Vec::with_capacity(ctx.args.parse_bytes as usize + pool[0].len());
    let mut ranges = Vec::new();
    let mut i = 0;
    while (buf.len() as u64) < ctx.args.parse_bytes {
        let b = &pool[i % pool.len()];
        ranges.push((buf.len() + 21, buf.len() + b.len()));
        buf.extend_from_slice(b);
        i += 1;
    }
    let bytes = buf.len() as u64;
    let passes = PARSE_BYTES_PER_MEASUREMENT.div_ceil(bytes).max(1);
    let mut copy = vec![0u8; buf.len()];
    let expected = klog_parse(&buf)?;
    let (mut baseline, mut series, mut memcpy) =
        (Series::default(), Series::default(), Series::default());
    for round in 0..ctx.rounds() {
        ctx.progress.say(&format!("round {}", round + 1));
        for &slot in alternate(round, &[0, 1, 2]) {
            let start = Instant::now();
            for _ in 0..passes {
                match slot {
                    0 => {
                        black_box(raw_crc(&buf, &ranges));
                    }
                    1 => {
                        if klog_parse(black_box(&buf))? != expected {
                            bail!("the parse counted other records");
                        }
                    }
                    _ => {
                        copy.copy_from_slice(black_box(&buf));
                        black_box(&copy);
                    }
                }
            }
            let v = mb_per_s(bytes * passes, start.elapsed());
            [&mut baseline, &mut series, &mut memcpy][slot].push(v);
        }
    }
    let mut report = Report::new(
        "parse",
        format!(
            "Batches::new over {:.1} MiB of {} uncompressed {}-byte batches: bounds, magic and \
             CRC-32C checked; {passes} passes each",
            bytes as f64 / (1 << 20) as f64,
            ranges.len(),
            pool[0].len()
        ),
        "MB/s",
    );
    report.baseline_name = "raw CRC-32C of each batch's [21..end)".into();
    report.comparisons.push((
        "parse + CRC / memcpy of the same bytes".into(),
        ratios(&series, &memcpy),
    ));
    report.baseline = baseline;
    report.rows.push(Row::new(PARSE_ROW, "-", series));
    report.extra = json!({
        "bytes": bytes,
        "batches": ranges.len(),
        "records": expected,
        "memcpy_mb_per_s": memcpy.median(),
    });
    Ok(vec![report])
}
