//! `klog bench [WORKLOAD...]`: measures the partition log beside the machine's own limits, in one run.
//!
//! Absolute figures on a shared VM swing 1.5–3x between runs (`shared/spec/field-notes.md` §6), so every
//! klog figure is shown beside a baseline measured in the same run on the same file system: a plain
//! `pwrite` loop for appends, `pwrite` + `fdatasync` for durable appends, a plain `pread` loop for reads.
//! Each round measures the baseline and every klog variant back to back (the order alternates between
//! rounds); the reported value is the median over rounds and the ratio is the median of the per-round
//! ratios, so a slow moment of the machine hits both sides of a ratio.
//!
//! Workloads (the data is always the same: 16 KiB batches of 15 uncompressed 1 KiB records, built once
//! with `BatchBuilder` and reused):
//! - `append`: `append_as_leader` of one batch at a time, no fsync; baseline: `write_all_at` of the same
//!   batches to a fresh file.
//! - `durable`: append then `flush(last offset + 1)` from one thread, and from `--threads` threads sharing
//!   one log (group commit); baseline: `write_all_at` + `fdatasync` from one thread.
//! - `read`: `read(offset, 1 MiB, None, true)` from offset 0 to the end of a closed and reopened log with
//!   small segments (the sealed ones are read through a memory map); baseline: `pread` of 1 MiB over the
//!   same `.log` files. Reported twice: as returned (a view of the bytes), and with the bytes copied out
//!   into a buffer, which is what the `pread` baseline delivers.

use std::fs::{File, OpenOptions};
use std::hint::black_box;
use std::io::{IsTerminal, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use klog::log::config::LogConfig;
use klog::log::format::{BatchBuilder, Compression};
use klog::log::io::{open_backend, IoBackend, Storage};
use klog::log::partition_log::{OpenOptions as LogOpenOptions, PartitionLog};
use serde_json::{json, Value};

/// Records per batch: 15 records of a 1 KiB value and an 8-byte key fill a Java producer's 16 KiB batch.
const RECORDS_PER_BATCH: usize = 15;
const VALUE_BYTES: usize = 1024;
/// Distinct batches cycled through (about 1 MiB: stays in the CPU cache, as a broker's receive buffers do).
const POOL_BATCHES: usize = 64;
/// `max_bytes` of each read, and the size of each baseline `pread`.
const READ_BYTES: usize = 1 << 20;
/// Each read measurement reads at least this much (whole passes over the log, at most `MAX_READ_PASSES`).
const READ_BYTES_PER_MEASUREMENT: u64 = 512 << 20;
const MAX_READ_PASSES: u64 = 64;
const DEFAULT_DURABLE_APPENDS: u64 = 2000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Leader appends without fsync, beside a plain pwrite loop.
    Append,
    /// Append + flush, one thread and group commit, beside pwrite + fdatasync.
    Durable,
    /// Sequential reads of a reopened log, beside a plain pread loop.
    Read,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendChoice {
    Std,
    Uring,
    /// std, and uring where this process may use io_uring (otherwise skipped with a note).
    Both,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Workloads to run, in the order given (default: append durable read).
    #[arg(value_enum)]
    workloads: Vec<Workload>,
    /// The I/O backends klog is measured with.
    #[arg(long, value_enum, default_value = "both")]
    backend: BackendChoice,
    /// Bytes appended by each `append` run, and the size of the log `read` reads (suffixes KiB, MiB, GiB).
    #[arg(long, default_value = "256MiB", value_parser = parse_bytes)]
    bytes: u64,
    /// Appends per `durable` measurement (default: 2000, or a quarter of the batches in --bytes if fewer).
    #[arg(long)]
    durable_appends: Option<u64>,
    /// Appender threads sharing one log in the group-commit measurement.
    #[arg(long, default_value_t = 8)]
    threads: usize,
    /// Rounds; each measures the baseline and every klog variant back to back. Medians are reported.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// `segment.bytes` of the `append` and `durable` logs.
    #[arg(long, default_value = "1GiB", value_parser = parse_bytes)]
    segment_bytes: u64,
    /// `segment.bytes` of the log `read` reads (default: 64 MiB, less for small --bytes, so that the log
    /// has sealed segments).
    #[arg(long, value_parser = parse_bytes)]
    read_segment_bytes: Option<u64>,
    /// Where the scratch directory is made (default: the current directory); the baselines use the same
    /// file system.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Also write the results to FILE as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// `4194304`, `8MiB`, `64KiB`, `1GiB` (K, M, G and KB, MB, GB are read as binary units too).
fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{s}`: expected a number of bytes, e.g. 4194304 or 8MiB"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        other => {
            return Err(format!(
                "`{s}`: unknown unit `{other}` (use KiB, MiB or GiB)"
            ))
        }
    };
    n.checked_mul(1 << shift)
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("`{s}`: out of range"))
}

/// The backends measured, with their storage.
struct Backend {
    name: &'static str,
    storage: Arc<dyn Storage>,
}

/// One measured figure per round.
#[derive(Debug, Clone, Default)]
struct Series {
    runs: Vec<f64>,
}

impl Series {
    fn push(&mut self, v: f64) {
        self.runs.push(v);
    }

    fn median(&self) -> f64 {
        median(&self.runs)
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(f64::total_cmp);
    let mid = s.len() / 2;
    if s.len() % 2 == 1 {
        s[mid]
    } else {
        (s[mid - 1] + s[mid]) / 2.0
    }
}

/// Per-round ratios of two series measured in the same rounds.
fn ratios(a: &Series, b: &Series) -> Vec<f64> {
    a.runs.iter().zip(&b.runs).map(|(x, y)| x / y).collect()
}

/// A klog figure beside its baseline.
struct Row {
    name: String,
    backend: &'static str,
    series: Series,
}

/// A workload's results: the baseline, klog's rows, and extra ratios between rows.
struct Report {
    workload: &'static str,
    title: String,
    unit: &'static str,
    baseline_name: &'static str,
    baseline: Series,
    rows: Vec<Row>,
    /// (what is compared, per-round ratios)
    comparisons: Vec<(String, Vec<f64>)>,
    extra: Value,
}

impl Report {
    fn row(&self, name: &str, backend: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.name == name && r.backend == backend)
    }

    fn print(&self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(out, "{}: {}", self.workload, self.title)?;
        let unit = self.unit;
        let w = self
            .rows
            .iter()
            .map(|r| r.name.len())
            .chain([self.baseline_name.len(), 4])
            .max()
            .unwrap_or(4);
        writeln!(
            out,
            "  {:<w$}  {:<7}  {:>12}  {:>12}  {:>7}",
            "what", "backend", unit, "baseline", "ratio"
        )?;
        writeln!(
            out,
            "  {:<w$}  {:<7}  {:>12.1}  {:>12}  {:>7}",
            self.baseline_name,
            "-",
            self.baseline.median(),
            "",
            "1.00"
        )?;
        for r in &self.rows {
            writeln!(
                out,
                "  {:<w$}  {:<7}  {:>12.1}  {:>12.1}  {:>7.2}",
                r.name,
                r.backend,
                r.series.median(),
                self.baseline.median(),
                median(&ratios(&r.series, &self.baseline))
            )?;
        }
        for (name, v) in &self.comparisons {
            writeln!(out, "  ratio {name}: {:.2}", median(v))?;
        }
        writeln!(out)
    }

    fn to_json(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                let rs = ratios(&r.series, &self.baseline);
                json!({
                    "name": r.name,
                    "backend": r.backend,
                    "value": r.series.median(),
                    "runs": r.series.runs,
                    "ratio": median(&rs),
                    "ratios": rs,
                })
            })
            .collect();
        let comparisons: Vec<Value> = self
            .comparisons
            .iter()
            .map(|(name, v)| json!({"name": name, "ratio": median(v), "ratios": v}))
            .collect();
        json!({
            "title": self.title,
            "unit": self.unit,
            "baseline": {
                "name": self.baseline_name,
                "value": self.baseline.median(),
                "runs": self.baseline.runs,
            },
            "results": rows,
            "comparisons": comparisons,
            "details": self.extra,
        })
    }
}

/// The scratch directory, removed on the way out (also after an error).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Prints progress on stderr when it is a terminal.
struct Progress(bool);

impl Progress {
    fn say(&self, what: &str) {
        if self.0 {
            eprint!("\r\x1b[2Kklog bench: {what}");
            let _ = std::io::stderr().flush();
        }
    }

    fn done(&self) {
        if self.0 {
            eprint!("\r\x1b[2K");
        }
    }
}

struct Ctx<'a> {
    args: &'a BenchArgs,
    scratch: PathBuf,
    backends: Vec<Backend>,
    pool: Vec<Vec<u8>>,
    batch_bytes: usize,
    progress: Progress,
}

pub fn run(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    if args.threads == 0 {
        bail!("--threads must be at least 1");
    }
    let workloads = if args.workloads.is_empty() {
        vec![Workload::Append, Workload::Durable, Workload::Read]
    } else {
        args.workloads.clone()
    };
    let base = args.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let scratch = Scratch(base.join(format!(".klog-bench-{}-{nanos}", std::process::id())));
    std::fs::create_dir_all(&scratch.0)
        .with_context(|| format!("creating {}", scratch.0.display()))?;

    let mut backends = Vec::new();
    let mut skipped = Vec::new();
    if matches!(args.backend, BackendChoice::Std | BackendChoice::Both) {
        backends.push(Backend {
            name: "std",
            storage: open_backend(IoBackend::Std)?,
        });
    }
    if matches!(args.backend, BackendChoice::Uring | BackendChoice::Both) {
        match open_backend(IoBackend::Uring) {
            Ok(storage) => backends.push(Backend {
                name: "uring",
                storage,
            }),
            Err(e) if args.backend == BackendChoice::Both => {
                eprintln!("klog bench: skipping the uring backend: {e}");
                skipped.push(json!({"backend": "uring", "reason": e.to_string()}));
            }
            Err(e) => return Err(e).context("--backend uring"),
        }
    }

    let pool = build_pool()?;
    let batch_bytes = pool[0].len();
    let ctx = Ctx {
        args,
        scratch: scratch.0.clone(),
        backends,
        pool,
        batch_bytes,
        progress: Progress(std::io::stderr().is_terminal()),
    };

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(
        out,
        "klog bench in {} ({} rounds; medians; ratio = klog / baseline, per round)\n",
        ctx.scratch.display(),
        args.rounds
    )?;
    let mut reports = Vec::new();
    for w in workloads {
        let report = match w {
            Workload::Append => append(&ctx)?,
            Workload::Durable => durable(&ctx)?,
            Workload::Read => read(&ctx)?,
        };
        ctx.progress.done();
        report.print(&mut out)?;
        out.flush()?;
        reports.push(report);
    }

    if let Some(path) = &args.json {
        let mut workloads = serde_json::Map::new();
        for r in &reports {
            workloads.insert(r.workload.to_owned(), r.to_json());
        }
        let doc = json!({
            "klog_version": env!("CARGO_PKG_VERSION"),
            "dir": ctx.scratch.display().to_string(),
            "conditions": {
                "bytes": args.bytes,
                "batch_bytes": batch_bytes,
                "records_per_batch": RECORDS_PER_BATCH,
                "value_bytes": VALUE_BYTES,
                "rounds": args.rounds,
                "threads": args.threads,
                "durable_appends": durable_appends(&ctx),
                "segment_bytes": args.segment_bytes,
                "read_segment_bytes": read_segment_bytes(&ctx),
                "read_bytes": READ_BYTES,
                "backends": ctx.backends.iter().map(|b| b.name).collect::<Vec<_>>(),
                "skipped_backends": skipped,
                "mb": 1_000_000,
            },
            "workloads": workloads,
        });
        let text = serde_json::to_string_pretty(&doc)? + "\n";
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    drop(ctx);
    drop(scratch);
    Ok(ExitCode::SUCCESS)
}

/// The batches appended: `POOL_BATCHES` distinct producer batches (base offset 0, no producer id).
fn build_pool() -> anyhow::Result<Vec<Vec<u8>>> {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut value = vec![0u8; VALUE_BYTES];
    let mut pool = Vec::with_capacity(POOL_BATCHES);
    for i in 0..POOL_BATCHES {
        let mut b = BatchBuilder::new(Compression::None);
        for j in 0..RECORDS_PER_BATCH {
            for chunk in value.chunks_mut(8) {
                // xorshift64*: incompressible values.
                rng ^= rng >> 12;
                rng ^= rng << 25;
                rng ^= rng >> 27;
                let x = rng.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
                chunk.copy_from_slice(&x[..chunk.len()]);
            }
            let key = format!("k{:07}", i * RECORDS_PER_BATCH + j);
            b.append(now, Some(key.as_bytes()), Some(&value), &[])?;
        }
        pool.push(b.build()?);
    }
    Ok(pool)
}

/// Makes a stamped batch a producer batch again (base offset 0), so it can be appended once more. The
/// base offset is outside the CRC.
fn reset_base_offset(batch: &mut [u8]) {
    batch[..8].copy_from_slice(&0i64.to_be_bytes());
}

fn config(segment_bytes: u64) -> anyhow::Result<LogConfig> {
    let mut c = LogConfig::default();
    c.set("segment.bytes", &segment_bytes.to_string())?;
    Ok(c)
}

fn batches_for(ctx: &Ctx, bytes: u64) -> u64 {
    bytes.div_ceil(ctx.batch_bytes as u64).max(1)
}

fn durable_appends(ctx: &Ctx) -> u64 {
    ctx.args.durable_appends.unwrap_or_else(|| {
        (batches_for(ctx, ctx.args.bytes) / 4)
            .min(DEFAULT_DURABLE_APPENDS)
            .max(ctx.args.threads as u64)
    })
}

fn read_segment_bytes(ctx: &Ctx) -> u64 {
    ctx.args.read_segment_bytes.unwrap_or_else(|| {
        (64u64 << 20)
            .min(ctx.args.bytes / 4)
            .max(4 * ctx.batch_bytes as u64)
    })
}

fn mb_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e6
}

fn per_s(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn fresh_file(path: &Path) -> anyhow::Result<File> {
    let _ = std::fs::remove_file(path);
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))
}

/// A fresh partition directory `bench-0` under the scratch dir.
fn fresh_log(
    ctx: &Ctx,
    storage: &Arc<dyn Storage>,
    segment_bytes: u64,
) -> anyhow::Result<(PartitionLog, PathBuf)> {
    let dir = ctx.scratch.join("bench-0");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let (log, _) = PartitionLog::open(
        storage.clone(),
        &dir,
        config(segment_bytes)?,
        LogOpenOptions::default(),
    )?;
    Ok((log, dir))
}

/// Syncs and closes a log outside the timed part, so its writeback does not leak into the next figure.
fn finish_log(log: PartitionLog, dir: &Path) -> anyhow::Result<()> {
    log.flush(log.log_end_offset())?;
    log.close()?;
    drop(log);
    std::fs::remove_dir_all(dir)?;
    Ok(())
}

/// `items` in order on even rounds and reversed on odd ones.
fn alternate<T>(round: usize, items: &[T]) -> Vec<&T> {
    let mut v: Vec<&T> = items.iter().collect();
    if round % 2 == 1 {
        v.reverse();
    }
    v
}

// ---------------------------------------------------------------------------------------------------
// append

fn pwrite_run(ctx: &Ctx, pool: &[Vec<u8>], n: u64) -> anyhow::Result<Duration> {
    let path = ctx.scratch.join("baseline.bin");
    let file = fresh_file(&path)?;
    let mut position = 0u64;
    let start = Instant::now();
    for i in 0..n as usize {
        let b = &pool[i % pool.len()];
        file.write_all_at(b, position)?;
        position += b.len() as u64;
    }
    let elapsed = start.elapsed();
    file.sync_data()?;
    drop(file);
    std::fs::remove_file(&path)?;
    Ok(elapsed)
}

fn klog_append_run(
    ctx: &Ctx,
    storage: &Arc<dyn Storage>,
    pool: &mut [Vec<u8>],
    n: u64,
) -> anyhow::Result<Duration> {
    let (log, dir) = fresh_log(ctx, storage, ctx.args.segment_bytes)?;
    let len = pool.len();
    let start = Instant::now();
    for i in 0..n as usize {
        let b = &mut pool[i % len];
        reset_base_offset(b);
        log.append_as_leader(b, 0)?;
    }
    let elapsed = start.elapsed();
    finish_log(log, &dir)?;
    Ok(elapsed)
}

fn append(ctx: &Ctx) -> anyhow::Result<Report> {
    let n = batches_for(ctx, ctx.args.bytes);
    let bytes = n * ctx.batch_bytes as u64;
    let mut pool = ctx.pool.clone();
    let mut baseline = Series::default();
    let mut series: Vec<Series> = vec![Series::default(); ctx.backends.len()];
    // Slot 0 is the baseline, slot i + 1 backend i.
    let slots: Vec<usize> = (0..=ctx.backends.len()).collect();
    for round in 0..ctx.args.rounds {
        for &slot in alternate(round, &slots) {
            if slot == 0 {
                ctx.progress
                    .say(&format!("append: pwrite, round {}", round + 1));
                baseline.push(mb_per_s(bytes, pwrite_run(ctx, &ctx.pool, n)?));
            } else {
                let b = &ctx.backends[slot - 1];
                ctx.progress
                    .say(&format!("append: klog {}, round {}", b.name, round + 1));
                let d = klog_append_run(ctx, &b.storage, &mut pool, n)?;
                series[slot - 1].push(mb_per_s(bytes, d));
            }
        }
    }
    let rows: Vec<Row> = ctx
        .backends
        .iter()
        .zip(series)
        .map(|(b, s)| Row {
            name: "append_as_leader".into(),
            backend: b.name,
            series: s,
        })
        .collect();
    let mut report = Report {
        workload: "append",
        title: format!(
            "{n} leader appends of one {}-byte batch ({RECORDS_PER_BATCH} x {VALUE_BYTES} B records, \
             uncompressed), {:.1} MiB, no fsync, segment.bytes {}",
            ctx.batch_bytes,
            bytes as f64 / (1 << 20) as f64,
            ctx.args.segment_bytes
        ),
        unit: "MB/s",
        baseline_name: "pwrite loop (write_all_at)",
        baseline,
        rows,
        comparisons: Vec::new(),
        extra: json!({"appends": n, "bytes": bytes}),
    };
    add_uring_vs_std(&mut report, &["append_as_leader"]);
    Ok(report)
}

fn add_uring_vs_std(report: &mut Report, names: &[&str]) {
    for name in names {
        if let (Some(u), Some(s)) = (report.row(name, "uring"), report.row(name, "std")) {
            let v = ratios(&u.series, &s.series);
            report.comparisons.push((format!("uring / std, {name}"), v));
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// durable

fn pwrite_sync_run(ctx: &Ctx, batch: &[u8], n: u64) -> anyhow::Result<Duration> {
    let path = ctx.scratch.join("baseline.bin");
    let file = fresh_file(&path)?;
    let mut position = 0u64;
    let start = Instant::now();
    for _ in 0..n {
        file.write_all_at(batch, position)?;
        file.sync_data()?;
        position += batch.len() as u64;
    }
    let elapsed = start.elapsed();
    drop(file);
    std::fs::remove_file(&path)?;
    Ok(elapsed)
}

fn durable_single_run(
    ctx: &Ctx,
    storage: &Arc<dyn Storage>,
    batch: &mut [u8],
    n: u64,
) -> anyhow::Result<Duration> {
    let (log, dir) = fresh_log(ctx, storage, ctx.args.segment_bytes)?;
    let start = Instant::now();
    for _ in 0..n {
        reset_base_offset(batch);
        let info = log.append_as_leader(batch, 0)?;
        log.flush(info.last_offset + 1)?;
    }
    let elapsed = start.elapsed();
    finish_log(log, &dir)?;
    Ok(elapsed)
}

/// `threads` appenders sharing one log, each appending then flushing up to its own last offset; returns
/// the time from the common start until the last finished, and the appends made.
fn durable_group_run(
    ctx: &Ctx,
    storage: &Arc<dyn Storage>,
    n: u64,
) -> anyhow::Result<(Duration, u64)> {
    let (log, dir) = fresh_log(ctx, storage, ctx.args.segment_bytes)?;
    let log = Arc::new(log);
    let threads = ctx.args.threads;
    let per_thread = n.div_ceil(threads as u64);
    let barrier = Barrier::new(threads + 1);
    let elapsed = std::thread::scope(|s| -> anyhow::Result<Duration> {
        let mut handles = Vec::new();
        for t in 0..threads {
            let log = &log;
            let barrier = &barrier;
            let mut batch = ctx.pool[t % ctx.pool.len()].clone();
            handles.push(s.spawn(move || -> anyhow::Result<()> {
                barrier.wait();
                for _ in 0..per_thread {
                    reset_base_offset(&mut batch);
                    let info = log.append_as_leader(&mut batch, 0)?;
                    log.flush(info.last_offset + 1)?;
                }
                Ok(())
            }));
        }
        barrier.wait();
        let start = Instant::now();
        let mut result = Ok(());
        for h in handles {
            let r = h
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("an appender thread panicked")));
            if result.is_ok() {
                result = r;
            }
        }
        result.map(|()| start.elapsed())
    })?;
    let log = Arc::into_inner(log).expect("the appender threads have ended");
    finish_log(log, &dir)?;
    Ok((elapsed, per_thread * threads as u64))
}

fn durable(ctx: &Ctx) -> anyhow::Result<Report> {
    let n = durable_appends(ctx);
    let threads = ctx.args.threads;
    let group = format!("group commit, {threads} threads");
    let mut batch = ctx.pool[0].clone();
    let mut baseline = Series::default();
    let nb = ctx.backends.len();
    // Per backend: single, group.
    let mut single: Vec<Series> = vec![Series::default(); nb];
    let mut grouped: Vec<Series> = vec![Series::default(); nb];
    let slots: Vec<usize> = (0..=2 * nb).collect();
    let mut group_appends = 0;
    for round in 0..ctx.args.rounds {
        for &slot in alternate(round, &slots) {
            if slot == 0 {
                ctx.progress
                    .say(&format!("durable: pwrite + fdatasync, round {}", round + 1));
                baseline.push(per_s(n, pwrite_sync_run(ctx, &ctx.pool[0], n)?));
                continue;
            }
            let i = (slot - 1) / 2;
            let b = &ctx.backends[i];
            if (slot - 1) % 2 == 0 {
                ctx.progress.say(&format!(
                    "durable: klog {} single, round {}",
                    b.name,
                    round + 1
                ));
                let d = durable_single_run(ctx, &b.storage, &mut batch, n)?;
                single[i].push(per_s(n, d));
            } else {
                ctx.progress.say(&format!(
                    "durable: klog {} {group}, round {}",
                    b.name,
                    round + 1
                ));
                let (d, appends) = durable_group_run(ctx, &b.storage, n)?;
                group_appends = appends;
                grouped[i].push(per_s(appends, d));
            }
        }
    }
    let mut rows = Vec::new();
    let mut comparisons = Vec::new();
    for (i, b) in ctx.backends.iter().enumerate() {
        comparisons.push((
            format!("{group} / single, {}", b.name),
            ratios(&grouped[i], &single[i]),
        ));
        rows.push(Row {
            name: "append + flush, single".into(),
            backend: b.name,
            series: single[i].clone(),
        });
        rows.push(Row {
            name: group.clone(),
            backend: b.name,
            series: grouped[i].clone(),
        });
    }
    let mut report = Report {
        workload: "durable",
        title: format!(
            "{n} appends of one {}-byte batch, each followed by flush(last offset + 1); \
             group commit: {threads} threads share one log",
            ctx.batch_bytes
        ),
        unit: "appends/s",
        baseline_name: "pwrite + fdatasync loop",
        baseline,
        rows,
        comparisons,
        extra: json!({"appends": n, "group_appends": group_appends, "threads": threads}),
    };
    add_uring_vs_std(&mut report, &["append + flush, single", &group]);
    Ok(report)
}

// ---------------------------------------------------------------------------------------------------
// read

/// Writes the log `read` reads (std backend), closes it, and returns its `.log` files and end offset.
fn write_read_log(ctx: &Ctx, dir: &Path) -> anyhow::Result<(Vec<PathBuf>, i64)> {
    let n = batches_for(ctx, ctx.args.bytes);
    let (log, _) = PartitionLog::open(
        open_backend(IoBackend::Std)?,
        dir,
        config(read_segment_bytes(ctx))?,
        LogOpenOptions::default(),
    )?;
    let mut pool = ctx.pool.clone();
    let len = pool.len();
    for i in 0..n as usize {
        let b = &mut pool[i % len];
        reset_base_offset(b);
        log.append_as_leader(b, 0)?;
    }
    let leo = log.log_end_offset();
    log.flush(leo)?;
    log.close()?;
    drop(log);
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    logs.retain(|p| p.extension().is_some_and(|e| e == "log"));
    logs.sort();
    Ok((logs, leo))
}

fn pread_pass(logs: &[PathBuf], buf: &mut [u8]) -> anyhow::Result<u64> {
    let mut total = 0u64;
    for path in logs {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let mut position = 0u64;
        loop {
            let n = file.read_at(buf, position)?;
            if n == 0 {
                break;
            }
            black_box(&buf[..n]);
            position += n as u64;
        }
        total += position;
    }
    Ok(total)
}

/// Reads the whole log from offset 0; with `copy`, copies every returned byte into `buf`.
fn klog_read_pass(log: &PartitionLog, copy: bool, buf: &mut Vec<u8>) -> anyhow::Result<u64> {
    let leo = log.log_end_offset();
    let mut offset = 0i64;
    let mut total = 0u64;
    while offset < leo {
        let info = log.read(offset, READ_BYTES, None, true)?;
        let bytes = info.records.as_slice();
        if bytes.is_empty() || info.next_offset <= offset {
            bail!("read at offset {offset} returned nothing before the log end {leo}");
        }
        if copy {
            if buf.len() < bytes.len() {
                buf.resize(bytes.len(), 0);
            }
            buf[..bytes.len()].copy_from_slice(bytes);
            black_box(&buf[..bytes.len()]);
        } else {
            black_box(bytes);
        }
        total += bytes.len() as u64;
        offset = info.next_offset;
    }
    Ok(total)
}

fn timed<F: FnMut() -> anyhow::Result<u64>>(passes: u64, mut f: F) -> anyhow::Result<f64> {
    let start = Instant::now();
    let mut bytes = 0;
    for _ in 0..passes {
        bytes += f()?;
    }
    Ok(mb_per_s(bytes, start.elapsed()))
}

fn read(ctx: &Ctx) -> anyhow::Result<Report> {
    let dir = ctx.scratch.join("read-0");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    ctx.progress.say("read: writing the log");
    let (logs, leo) = write_read_log(ctx, &dir)?;
    let log_bytes: u64 = logs
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()))
        .sum::<Result<_, _>>()?;
    let passes = READ_BYTES_PER_MEASUREMENT
        .div_ceil(log_bytes.max(1))
        .clamp(1, MAX_READ_PASSES);
    let reopen = LogOpenOptions {
        recovery_point: leo,
        log_start_offset: 0,
        clean_shutdown: true,
    };
    let cfg = config(read_segment_bytes(ctx))?;
    let mut opened = Vec::new();
    for b in &ctx.backends {
        let (log, _) = PartitionLog::open(b.storage.clone(), &dir, cfg.clone(), reopen)?;
        if log.log_end_offset() != leo {
            bail!(
                "the reopened log ends at {} instead of {leo}",
                log.log_end_offset()
            );
        }
        opened.push(log);
    }
    let mut buf = vec![0u8; READ_BYTES];
    let mut copy_buf = vec![0u8; READ_BYTES];
    // Warm-up: the page cache, the maps of sealed segments, the lazily loaded indexes.
    pread_pass(&logs, &mut buf)?;
    for log in &opened {
        klog_read_pass(log, false, &mut copy_buf)?;
    }
    let nb = ctx.backends.len();
    let mut baseline = Series::default();
    let mut view: Vec<Series> = vec![Series::default(); nb];
    let mut copied: Vec<Series> = vec![Series::default(); nb];
    let slots: Vec<usize> = (0..=2 * nb).collect();
    for round in 0..ctx.args.rounds {
        for &slot in alternate(round, &slots) {
            if slot == 0 {
                ctx.progress
                    .say(&format!("read: pread, round {}", round + 1));
                baseline.push(timed(passes, || pread_pass(&logs, &mut buf))?);
                continue;
            }
            let i = (slot - 1) / 2;
            let copy = (slot - 1) % 2 == 1;
            ctx.progress.say(&format!(
                "read: klog {}{}, round {}",
                ctx.backends[i].name,
                if copy { " + copy" } else { "" },
                round + 1
            ));
            let v = timed(passes, || klog_read_pass(&opened[i], copy, &mut copy_buf))?;
            if copy {
                copied[i].push(v);
            } else {
                view[i].push(v);
            }
        }
    }
    let mut rows = Vec::new();
    for (i, b) in ctx.backends.iter().enumerate() {
        rows.push(Row {
            name: "read (view of the bytes)".into(),
            backend: b.name,
            series: view[i].clone(),
        });
        rows.push(Row {
            name: "read + copy out".into(),
            backend: b.name,
            series: copied[i].clone(),
        });
    }
    for log in opened {
        log.close()?;
    }
    let segments = logs.len();
    let mut report = Report {
        workload: "read",
        title: format!(
            "read(offset, {READ_BYTES}, None, true) from 0 to the end, {:.1} MiB in {segments} \
             segments ({} sealed, memory-mapped), reopened after a clean close; {passes} passes each",
            log_bytes as f64 / (1 << 20) as f64,
            segments.saturating_sub(1)
        ),
        unit: "MB/s",
        baseline_name: "pread loop, 1 MiB",
        baseline,
        rows,
        comparisons: Vec::new(),
        extra: json!({
            "log_bytes": log_bytes,
            "segments": segments,
            "passes": passes,
            "log_end_offset": leo,
        }),
    };
    add_uring_vs_std(
        &mut report,
        &["read (view of the bytes)", "read + copy out"],
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(report)
}
