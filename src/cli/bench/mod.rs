//! `klog bench [WORKLOAD...]`: measures klog beside the machine's limits and beside Kafka's own code, in
//! one run.
//!
//! Absolute figures on a shared VM swing 1.5–3x between runs (`shared/spec/field-notes.md` §6), so every
//! klog figure is shown beside a baseline measured in the same run on the same file system (the limit:
//! the same work by the plainest code: `pwrite` loops, `fdatasync` as often as klog can at best, `mmap` +
//! memcpy, raw CRC-32C, a hash map with klog's hash; a row whose work the report's baseline does not
//! bound carries its own `Bound`), and, where Kafka has
//! the same operation, beside Apache Kafka's own storage code run by `interop/bench/kafka-bench.sh` in the
//! same invocation. Each round measures the baseline and every klog variant back to back (the order
//! alternates between rounds); a value is the median over rounds and a ratio to the limit is the median of
//! the per-round ratios, so a slow moment of the machine hits both sides. Kafka runs in its own JVM after
//! warm-up rounds, so a ratio to Kafka is the ratio of the two medians.
//!
//! One module per family of workloads: `disk` (append, durable, read), `recover`, `cpu` (psm, parse).
//! `kafka` runs the Java side, `charts` writes the Markdown report with SVG charts. A workload is a
//! `Workload` variant plus one arm in `Workload::run`; it returns `Report`s, each of which becomes one key
//! of the JSON's `workloads` object.

mod charts;
mod clean;
mod cpu;
mod disk;
mod goals;
mod kafka;
mod mirror;
mod recover;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use klog::log::io::{
    backend_name, decide, open_backend, AutoDecision, ClassChoice, DecisionSource, IoBackend,
    IoWorkload, StdStorage, Storage, AUTO_DECISION_FILE,
};
use serde_json::{json, Value};

use goals::{goals, print_goals, Goal};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Leader appends without fsync (1 KiB records in 16 KiB batches, and 100 B / 1 MiB records),
    /// beside a pwrite loop and Kafka's UnifiedLog.appendAsLeader.
    Append,
    /// Append + flush: one appender beside pwrite + fdatasync, and group commit with --threads
    /// appenders beside pwrite of as many batches + one fdatasync; fdatasync latency.
    Durable,
    /// Sequential reads from offset 0 beside mmap + memcpy (and a pread loop), random reads by offset
    /// and by timestamp beside mmap + memcpy of the same batches (and one pread per batch).
    Read,
    /// Unclean recovery of a partition beside a plain read and Kafka's LogLoader; clean open of many
    /// segments beside list + open + fstat.
    Recover,
    /// Producer-state replay of 1M batches from 10k producers beside a hash map with klog's hash and
    /// Kafka's ProducerStateManager.
    Psm,
    /// Zero-copy parse + CRC-32C of a buffer of batches beside raw CRC-32C and memcpy.
    Parse,
    /// KIP-1279 mirroring from a source cluster beside the append of the same fetches read beforehand
    /// (and klog's leader append of the same batches); failover time per partition with and without
    /// fsync; then --partitions partitions mirrored beside the follower append of the same fetched
    /// sets into them (and the leader append of the same bytes), the failover of all of them, and the
    /// mirror's peak RSS per partition.
    Mirror,
    /// One compaction pass over a compacted partition (tombstones, transactions, 1 KiB values)
    /// beside a plain read of the same segment bytes and Kafka's own Cleaner on the same segments;
    /// the pass's peak memory beside the dedupe buffer.
    Clean,
}

impl Workload {
    /// The default run, in order.
    const DEFAULT: [Workload; 8] = [
        Workload::Append,
        Workload::Durable,
        Workload::Read,
        Workload::Recover,
        Workload::Psm,
        Workload::Parse,
        Workload::Mirror,
        Workload::Clean,
    ];

    fn name(self) -> &'static str {
        match self {
            Workload::Append => "append",
            Workload::Durable => "durable",
            Workload::Read => "read",
            Workload::Recover => "recover",
            Workload::Psm => "psm",
            Workload::Parse => "parse",
            Workload::Mirror => "mirror",
            Workload::Clean => "clean",
        }
    }

    fn run(self, ctx: &Ctx) -> anyhow::Result<Vec<Report>> {
        match self {
            Workload::Append => disk::append(ctx),
            Workload::Durable => disk::durable(ctx),
            Workload::Read => disk::read(ctx),
            Workload::Recover => recover::run(ctx),
            Workload::Psm => cpu::psm(ctx),
            Workload::Parse => cpu::parse(ctx),
            Workload::Mirror => mirror::run(ctx),
            Workload::Clean => clean::run(ctx),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendChoice {
    /// pread/pwrite/fdatasync through std.
    Std,
    /// io_uring (Linux 5.6 or later, where this process may use it).
    Uring,
    /// std, and uring where this process may use io_uring (otherwise skipped with a note).
    Both,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Workloads to run, in the order given (default: append durable read recover psm parse mirror clean).
    #[arg(value_enum)]
    workloads: Vec<Workload>,
    /// The I/O backends klog is measured with (workloads that touch the disk).
    #[arg(long, value_enum, default_value = "both")]
    backend: BackendChoice,
    /// Bytes appended by each `append` run, and the size of the log `read` reads (suffixes KiB, MiB, GiB).
    #[arg(long, default_value = "256MiB", value_parser = parse_bytes)]
    bytes: u64,
    /// Appends per `durable` measurement (default: 2000, or a quarter of the batches in --bytes if fewer).
    #[arg(long)]
    durable_appends: Option<u64>,
    /// Appender thread counts sharing one log in the group-commit measurements.
    #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
    threads: Vec<usize>,
    /// Rounds; each measures the baseline and every klog variant back to back. Medians are reported.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// `segment.bytes` of the `append` and `durable` logs.
    #[arg(long, default_value = "1GiB", value_parser = parse_bytes)]
    segment_bytes: u64,
    /// `segment.bytes` of the log `read` reads (default: 64 MiB, less for small --bytes, so that the log
    /// has sealed segments).
    #[arg(long, value_parser = parse_bytes)]
    read_segment_bytes: Option<u64>,
    /// Random reads per measurement (by offset, and by timestamp).
    #[arg(long, default_value_t = 20_000)]
    random_reads: u64,
    /// Size of the partition `recover` recovers after an unclean shutdown.
    #[arg(long, default_value = "1GiB", value_parser = parse_bytes)]
    recover_bytes: u64,
    /// Segments of the log `recover` opens cleanly (lowered, with a note, to what the open-files limit
    /// allows).
    #[arg(long, default_value_t = 10_000)]
    segments: u64,
    /// Batches replayed by `psm`.
    #[arg(long, default_value_t = 1_000_000)]
    psm_batches: usize,
    /// Producers the `psm` batches come from.
    #[arg(long, default_value_t = 10_000)]
    psm_producers: usize,
    /// Size of the buffer of batches `parse` walks.
    #[arg(long, default_value = "16MiB", value_parser = parse_bytes)]
    parse_bytes: u64,
    /// Size of the partition `mirror` copies; the cluster-scale run spreads the same bytes over
    /// --partitions partitions.
    #[arg(long, default_value = "64MiB", value_parser = parse_bytes)]
    mirror_bytes: u64,
    /// Partitions of `mirror`'s cluster-scale run (topics of up to 50 partitions): mirrored beside the
    /// leader append of the same bytes into them, failed over all at once, and its peak RSS measured.
    #[arg(long, default_value_t = 1000)]
    partitions: usize,
    /// The memory measurement's child: mirrors the first --mirror-rss-topics topics of the
    /// --partitions layout from a source it builds in --dir, then prints its peak RSS as JSON.
    #[arg(long, hide = true)]
    mirror_rss_child: bool,
    /// How many topics the memory measurement's child mirrors.
    #[arg(long, hide = true, default_value_t = 1)]
    mirror_rss_topics: usize,
    /// Size of the compacted partition `clean` cleans (its sealed segments).
    #[arg(long, default_value = "1GiB", value_parser = parse_bytes)]
    clean_bytes: u64,
    /// `log.cleaner.dedupe.buffer.size` of both cleaners in `clean` (Kafka's default).
    #[arg(long, default_value = "128MiB", value_parser = parse_bytes)]
    dedupe_buffer_size: u64,
    /// The offset map's digest of klog's pass in `clean`: `xxh3` (klog's default: 16 bytes, so the same
    /// slots and full point as MD5), `md5` (Kafka 4.4.0's) or `sha256`. Kafka's side always uses MD5.
    #[arg(long, default_value = "xxh3", value_parser = parse_digest)]
    digest: klog::log::cleaner::DigestKind,
    /// The clean memory measurement's child: cleans a copy of the partition this summary names, then
    /// prints its peak RSS as JSON.
    #[arg(long, hide = true, value_name = "FILE")]
    clean_rss_child: Option<PathBuf>,
    /// Do not run Kafka's side (interop/bench/kafka-bench.sh); the Kafka column then says so.
    #[arg(long)]
    no_kafka: bool,
    /// The script that runs Kafka's side (default: interop/bench/kafka-bench.sh of this source tree).
    #[arg(long, value_name = "SCRIPT")]
    kafka_bench: Option<PathBuf>,
    /// Where the scratch directory is made (default: the current directory); the baselines use the same
    /// file system.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Also write the results to FILE as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also write a Markdown report with SVG charts into DIR (created if missing).
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
}

/// `4194304`, `8MiB`, `64KiB`, `1GiB` (K, M, G and KB, MB, GB are read as binary units too).
fn parse_digest(s: &str) -> Result<klog::log::cleaner::DigestKind, String> {
    klog::log::cleaner::DigestKind::from_name(s.trim())
        .ok_or_else(|| format!("`{s}`: expected a digest: xxh3, md5 or sha256"))
}

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

/// A backend klog is measured with.
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
    /// The row's own limit, where the report's baseline is not a bound for this row's work (a group
    /// commit of T appenders beside T writes per fdatasync, a backend beside the same work on that
    /// backend). Measured in the same rounds as the row.
    bound: Option<Bound>,
    /// Kafka's figure for this row's own work, where it differs from the report's (a group commit of T
    /// appenders beside Kafka's T appenders, a recovery on T threads beside Kafka's on T threads).
    kafka: Option<Kafka>,
}

/// A baseline that bounds one row: what it is, and its figure per round.
#[derive(Clone)]
struct Bound {
    name: String,
    series: Series,
}

impl Row {
    fn new(name: impl Into<String>, backend: &'static str, series: Series) -> Self {
        Row {
            name: name.into(),
            backend,
            series,
            bound: None,
            kafka: None,
        }
    }

    fn bounded(mut self, name: impl Into<String>, series: Series) -> Self {
        self.bound = Some(Bound {
            name: name.into(),
            series,
        });
        self
    }

    /// The per-round ratios to this row's limit: its own bound, else the report's baseline.
    fn ratios(&self, baseline: &Series) -> Vec<f64> {
        ratios(
            &self.series,
            self.bound.as_ref().map_or(baseline, |b| &b.series),
        )
    }
}

/// Kafka's figure for a report, or why there is none.
enum Kafka {
    /// Kafka has no like-for-like operation here (or it is not measured for this variant).
    NotMeasured,
    /// Java (or the harness) is absent, or `--no-kafka`.
    Absent(String),
    /// The Java program ran and failed.
    Failed(String),
    Measured {
        what: String,
        version: String,
        warmup_rounds: u64,
        series: Series,
        /// What the Java side reports of its run (sizes, the log end offset it recovered, ...).
        details: Value,
    },
}

impl Kafka {
    fn median(&self) -> Option<f64> {
        match self {
            Kafka::Measured { series, .. } => Some(series.median()),
            _ => None,
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Kafka::NotMeasured => json!({"status": "not_measured"}),
            Kafka::Absent(why) => json!({"status": "absent", "reason": why}),
            Kafka::Failed(why) => json!({"status": "failed", "reason": why}),
            Kafka::Measured {
                what,
                version,
                warmup_rounds,
                series,
                details,
            } => json!({
                "status": "measured",
                "name": what,
                "kafka_version": version,
                "warmup_rounds": warmup_rounds,
                "value": series.median(),
                "runs": series.runs,
                "details": details,
            }),
        }
    }

    /// Kafka's line in a report's table.
    fn print(&self, out: &mut impl Write, w: usize, baseline: f64) -> std::io::Result<()> {
        match self {
            Kafka::Measured { what, series, .. } => writeln!(
                out,
                "  {:<w$}  {:<7}  {:>12.1}  {:>11}  {:>11}",
                format!("Kafka: {what}"),
                "jvm",
                series.median(),
                format!("{:.2}", series.median() / baseline),
                "1.00"
            ),
            Kafka::Absent(why) | Kafka::Failed(why) => {
                writeln!(out, "  Kafka: not measured ({why})")
            }
            Kafka::NotMeasured => Ok(()),
        }
    }

    /// What the text table shows in the Kafka column.
    fn cell(&self, klog: f64) -> String {
        match self {
            Kafka::Measured { series, .. } => format!("{:.2}", klog / series.median()),
            Kafka::NotMeasured => "-".into(),
            Kafka::Absent(_) => "absent".into(),
            Kafka::Failed(_) => "failed".into(),
        }
    }
}

/// One table of results: the limit, klog's rows, Kafka, and extra ratios between rows.
struct Report {
    /// The key in the JSON's `workloads` object: the workload's name, `/variant` for the others.
    key: String,
    title: String,
    /// Always a rate (higher is faster).
    unit: &'static str,
    baseline_name: String,
    baseline: Series,
    rows: Vec<Row>,
    /// (what is compared, per-round ratios)
    comparisons: Vec<(String, Vec<f64>)>,
    kafka: Kafka,
    extra: Value,
}

impl Report {
    fn new(key: impl Into<String>, title: String, unit: &'static str) -> Self {
        Report {
            key: key.into(),
            title,
            unit,
            baseline_name: String::new(),
            baseline: Series::default(),
            rows: Vec::new(),
            comparisons: Vec::new(),
            kafka: Kafka::NotMeasured,
            extra: Value::Null,
        }
    }

    fn row(&self, name: &str, backend: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.name == name && r.backend == backend)
    }

    /// klog / limit of a row: the median of its per-round ratios.
    fn ratio(&self, name: &str, backend: &str) -> Option<f64> {
        self.row(name, backend)
            .map(|r| median(&r.ratios(&self.baseline)))
    }

    /// klog / Kafka of a row: the ratio of the medians.
    fn kafka_ratio(&self, name: &str, backend: &str) -> Option<f64> {
        let k = self.kafka.median()?;
        self.row(name, backend).map(|r| r.series.median() / k)
    }

    /// limit / Kafka of a row (the ratio of the medians, as `kafka_ratio`): the best klog / Kafka any
    /// implementation held to the row's limit can reach.
    fn ceiling(&self, name: &str, backend: &str) -> Option<f64> {
        let k = self.kafka.median()?;
        self.row(name, backend).map(|r| {
            r.bound
                .as_ref()
                .map_or(&self.baseline, |b| &b.series)
                .median()
                / k
        })
    }

    fn comparison(&self, name: &str) -> Option<f64> {
        self.comparisons
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| median(v))
    }

    fn add_uring_vs_std(&mut self, names: &[&str]) {
        for name in names {
            if let (Some(u), Some(s)) = (self.row(name, "uring"), self.row(name, "std")) {
                let v = ratios(&u.series, &s.series);
                self.comparisons.push((format!("uring / std, {name}"), v));
            }
        }
    }

    fn print(&self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(out, "{}: {}", self.key, self.title)?;
        let unit = self.unit;
        let kafka_name = std::iter::once(&self.kafka)
            .chain(self.rows.iter().filter_map(|r| r.kafka.as_ref()))
            .map(|k| match k {
                Kafka::Measured { what, .. } => what.len() + "Kafka: ".len(),
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        let w = self
            .rows
            .iter()
            .map(|r| r.name.len())
            .chain([self.baseline_name.len() + "limit: ".len(), kafka_name])
            .chain(
                self.rows
                    .iter()
                    .filter_map(|r| r.bound.as_ref().map(|b| b.name.len() + "limit: ".len())),
            )
            .max()
            .unwrap_or(4);
        writeln!(
            out,
            "  {:<w$}  {:<7}  {:>12}  {:>11}  {:>11}",
            "what", "backend", unit, "klog/limit", "klog/Kafka"
        )?;
        writeln!(
            out,
            "  {:<w$}  {:<7}  {:>12.1}  {:>11}  {:>11}",
            format!("limit: {}", self.baseline_name),
            "-",
            self.baseline.median(),
            "1.00",
            ""
        )?;
        self.kafka.print(out, w, self.baseline.median())?;
        for r in &self.rows {
            if let Some(Kafka::Measured { .. }) = &r.kafka {
                r.kafka
                    .as_ref()
                    .map_or(Ok(()), |k| k.print(out, w, self.baseline.median()))?;
            }
        }
        for r in &self.rows {
            if let Some(b) = &r.bound {
                writeln!(
                    out,
                    "  {:<w$}  {:<7}  {:>12.1}  {:>11}  {:>11}",
                    format!("limit: {}", b.name),
                    r.backend,
                    b.series.median(),
                    "1.00",
                    ""
                )?;
            }
            writeln!(
                out,
                "  {:<w$}  {:<7}  {:>12.1}  {:>11.2}  {:>11}",
                r.name,
                r.backend,
                r.series.median(),
                median(&r.ratios(&self.baseline)),
                r.kafka
                    .as_ref()
                    .unwrap_or(&self.kafka)
                    .cell(r.series.median())
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
                let rs = r.ratios(&self.baseline);
                let bound = r.bound.as_ref().map(
                    |b| json!({"name": b.name, "value": b.series.median(), "runs": b.series.runs}),
                );
                json!({
                    "name": r.name,
                    "backend": r.backend,
                    "value": r.series.median(),
                    "runs": r.series.runs,
                    "bound": bound,
                    "ratio": median(&rs),
                    "ratios": rs,
                    "kafka_ratio": r.kafka.as_ref().unwrap_or(&self.kafka).median()
                        .map(|k| r.series.median() / k),
                    "kafka": r.kafka.as_ref().map(Kafka::to_json),
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
            "kafka": self.kafka.to_json(),
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

/// A one-line progress display on stderr when it is a terminal: the workload, its step, elapsed time.
struct Progress {
    on: bool,
    start: Instant,
    workload: std::cell::Cell<(usize, usize, &'static str)>,
}

impl Progress {
    fn say(&self, what: &str) {
        if self.on {
            let (i, n, name) = self.workload.get();
            let secs = self.start.elapsed().as_secs();
            eprint!(
                "\r\x1b[2Kklog bench [{i}/{n} {name}, {}:{:02}] {what}",
                secs / 60,
                secs % 60
            );
            let _ = std::io::stderr().flush();
        }
    }

    fn done(&self) {
        if self.on {
            eprint!("\r\x1b[2K");
        }
    }
}

struct Ctx<'a> {
    args: &'a BenchArgs,
    scratch: PathBuf,
    backends: Vec<Backend>,
    progress: Progress,
    kafka: kafka::KafkaSide,
}

impl Ctx<'_> {
    fn rounds(&self) -> usize {
        self.args.rounds
    }
}

pub fn run(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    if args.threads.is_empty() || args.threads.contains(&0) {
        bail!("--threads must list thread counts of at least 1");
    }
    if args.psm_producers == 0 || args.psm_batches == 0 {
        bail!("--psm-batches and --psm-producers must be at least 1");
    }
    if args.partitions == 0 {
        bail!("--partitions must be at least 1");
    }
    if args.mirror_rss_child {
        return mirror::rss_child(args);
    }
    if args.clean_rss_child.is_some() {
        return clean::rss_child(args);
    }
    let workloads = if args.workloads.is_empty() {
        Workload::DEFAULT.to_vec()
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

    // `io_backend=auto`'s decision for the scratch log directory, as a writer's first open makes it
    // (probed before the workloads, so they do not share the disk with it).
    let decision = decide(&StdStorage, &scratch.0);
    let decision_file = scratch.0.join(AUTO_DECISION_FILE);
    let (backends, skipped) = backends(args)?;
    let ctx = Ctx {
        args,
        scratch: scratch.0.clone(),
        backends,
        progress: Progress {
            on: std::io::stderr().is_terminal(),
            start: Instant::now(),
            workload: std::cell::Cell::new((0, 0, "")),
        },
        kafka: kafka::KafkaSide::detect(args),
    };

    let mut out = super::stdout();
    writeln!(
        out,
        "klog bench in {} ({} rounds; medians; klog/limit = median of per-round ratios; \
         klog/Kafka = ratio of medians; higher is faster)\n",
        ctx.scratch.display(),
        args.rounds
    )?;
    if let Some(why) = ctx.kafka.absent_reason() {
        writeln!(out, "Kafka column: not measured ({why})\n")?;
    }
    let started = Instant::now();
    let mut reports = Vec::new();
    // SIGTERM/SIGINT: the workload in progress finishes (its logs closed cleanly), then the scratch
    // directory is removed and the run ends with what it measured.
    super::shutdown::install()?;
    for (i, w) in workloads.iter().enumerate() {
        if let Some(signal) = super::shutdown::requested() {
            ctx.progress.done();
            errln!(
                "klog bench: signal {signal}: stopped after {i} of {} workloads; scratch removed",
                workloads.len()
            );
            drop(ctx);
            drop(scratch);
            return Ok(super::shutdown::exit_code(signal));
        }
        ctx.progress
            .workload
            .set((i + 1, workloads.len(), w.name()));
        for report in w.run(&ctx)? {
            ctx.progress.done();
            report.print(&mut out)?;
            out.flush()?;
            reports.push(report);
        }
    }
    ctx.progress.done();
    let goals = goals(&reports);
    print_goals(&mut out, &goals)?;
    let auto = auto_choices(&reports, &decision);
    print_auto(&mut out, &auto, &decision, &decision_file)?;
    let elapsed = started.elapsed();
    writeln!(out, "total time: {:.1} s", elapsed.as_secs_f64())?;

    let mut doc = document(&ctx, &reports, &goals, &skipped, elapsed);
    doc["auto"] = auto.iter().map(AutoChoice::to_json).collect();
    doc["auto_decision"] = decision_json(&decision, &decision_file);
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&doc)? + "\n";
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(dir) = &args.report {
        charts::write_report(dir, &doc, &reports, &goals)
            .with_context(|| format!("writing the report into {}", dir.display()))?;
    }
    drop(ctx);
    drop(scratch);
    Ok(ExitCode::SUCCESS)
}

fn backends(args: &BenchArgs) -> anyhow::Result<(Vec<Backend>, Vec<Value>)> {
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
                errln!("klog bench: skipping the uring backend: {e}");
                skipped.push(json!({"backend": "uring", "reason": e.to_string()}));
            }
            Err(e) => return Err(e).context("--backend uring"),
        }
    }
    Ok((backends, skipped))
}

/// `io_backend=auto` for one workload: the backend this run measured faster beside the choice the
/// scratch log directory's decision made (its probe, recorded in the directory as every writer's is).
struct AutoChoice {
    workload: IoWorkload,
    /// uring / std of each figure the choice rests on (per-round medians).
    figures: Vec<(String, f64)>,
    /// The decision's choice for the workload, with its probe figures.
    decided: ClassChoice,
}

impl AutoChoice {
    /// uring when it won every figure measured, std otherwise (std is the backend that always works).
    fn measured(&self) -> Option<IoBackend> {
        if self.figures.is_empty() {
            return None;
        }
        let uring = self.figures.iter().all(|(_, v)| v.is_finite() && *v > 1.0);
        Some(if uring {
            IoBackend::Uring
        } else {
            IoBackend::Std
        })
    }

    fn to_json(&self) -> Value {
        json!({
            "workload": self.workload.name(),
            "figures": self.figures.iter().map(|(n, v)| json!({"figure": n, "uring_over_std": v})).collect::<Vec<_>>(),
            "measured_choice": self.measured().map(backend_name),
            "decided_choice": backend_name(self.decided.backend),
            "decided_std_ns": self.decided.std_ns,
            "decided_uring_ns": self.decided.uring_ns,
        })
    }

    /// The decision's choice and the probe figures it rests on.
    fn decided_text(&self) -> String {
        let ns = |v: Option<u64>| {
            v.map_or("not measured".into(), |n| {
                format!("{:.2} ms", n as f64 / 1e6)
            })
        };
        format!(
            "{} (probe: std {}, uring {})",
            backend_name(self.decided.backend),
            ns(self.decided.std_ns),
            ns(self.decided.uring_ns)
        )
    }
}

/// The scratch log directory's decision as the JSON's `auto_decision`: where it came from and its file.
fn decision_json(decision: &AutoDecision, file: &Path) -> Value {
    let source = match &decision.source {
        DecisionSource::Measured => "measured".to_owned(),
        DecisionSource::Cached => "cached".to_owned(),
        DecisionSource::Unprobed(why) => format!("unprobed: {why}"),
    };
    json!({
        "file": file.display().to_string(),
        "source": source,
        "device": decision.device,
        "uring_unavailable": decision.uring_unavailable,
    })
}

/// The figures `io_backend=auto` chooses by: buffered appends by the leader append, durable appends
/// by the one appender and the group commit of 8, partitions flushed together by the 64-partition flush.
fn auto_choices(reports: &[Report], decision: &AutoDecision) -> Vec<AutoChoice> {
    let c = |key: &str, name: String| {
        reports
            .iter()
            .find(|r| r.key == key)
            .and_then(|r| r.comparison(&name))
            .map(|v| (format!("{key}: {name}"), v))
    };
    let buffered = [c("append", format!("uring / std, {}", disk::APPEND_ROW))];
    let durable = [
        c("durable", format!("uring / std, {}", disk::SINGLE_ROW)),
        c("durable", "uring / std, group commit, 8 threads".into()),
    ];
    let partitions = [c(
        "durable/partitions",
        format!("uring / std, {}", disk::PARTITIONS_ROW),
    )];
    vec![
        AutoChoice {
            workload: IoWorkload::Buffered,
            figures: buffered.into_iter().flatten().collect(),
            decided: decision.buffered.clone(),
        },
        AutoChoice {
            workload: IoWorkload::Durable,
            figures: durable.into_iter().flatten().collect(),
            decided: decision.durable.clone(),
        },
        AutoChoice {
            workload: IoWorkload::ManyPartitions,
            figures: partitions.into_iter().flatten().collect(),
            decided: decision.many_partitions.clone(),
        },
    ]
}

fn print_auto(
    out: &mut impl Write,
    choices: &[AutoChoice],
    decision: &AutoDecision,
    file: &Path,
) -> std::io::Result<()> {
    let source = match &decision.source {
        DecisionSource::Measured => "measured at this run's start".to_owned(),
        DecisionSource::Cached => "read back".to_owned(),
        DecisionSource::Unprobed(why) => format!("not probed: {why}"),
    };
    writeln!(
        out,
        "io_backend=auto: the decision every writer of this file system takes ({}, {source}{}) beside this run:",
        file.display(),
        decision
            .uring_unavailable
            .as_deref()
            .map_or(String::new(), |why| format!("; io_uring unavailable: {why}"))
    )?;
    for a in choices {
        let decided = a.decided_text();
        let Some(measured) = a.measured() else {
            writeln!(
                out,
                "  {:<28} decided {decided}; this run measured no uring / std figure for it",
                a.workload.name()
            )?;
            continue;
        };
        let figures: Vec<String> = a
            .figures
            .iter()
            .map(|(n, v)| format!("{n} = {v:.2}"))
            .collect();
        let agree = if measured == a.decided.backend {
            "agrees"
        } else {
            "DIFFERS"
        };
        writeln!(
            out,
            "  {:<28} decided {decided}; {} by this run ({agree}): {}",
            a.workload.name(),
            backend_name(measured),
            figures.join(", ")
        )?;
    }
    writeln!(out)
}

fn document(
    ctx: &Ctx,
    reports: &[Report],
    goals: &[Goal],
    skipped: &[Value],
    elapsed: Duration,
) -> Value {
    let args = ctx.args;
    let mut workloads = serde_json::Map::new();
    for r in reports {
        workloads.insert(r.key.clone(), r.to_json());
    }
    json!({
        "klog_version": env!("CARGO_PKG_VERSION"),
        "dir": ctx.scratch.display().to_string(),
        "elapsed_s": elapsed.as_secs_f64(),
        "conditions": {
            "bytes": args.bytes,
            "rounds": args.rounds,
            "threads": args.threads,
            "segment_bytes": args.segment_bytes,
            "recover_bytes": args.recover_bytes,
            "segments": args.segments,
            "psm_batches": args.psm_batches,
            "psm_producers": args.psm_producers,
            "parse_bytes": args.parse_bytes,
            "mirror_bytes": args.mirror_bytes,
            "partitions": args.partitions,
            "clean_bytes": args.clean_bytes,
            "dedupe_buffer_size": args.dedupe_buffer_size,
            "digest": args.digest.name(),
            "random_reads": args.random_reads,
            "backends": ctx.backends.iter().map(|b| b.name).collect::<Vec<_>>(),
            "skipped_backends": skipped,
            "kafka": ctx.kafka.describe(),
            "machine": machine(),
            "mb": 1_000_000,
        },
        "workloads": workloads,
        "goals": goals.iter().map(Goal::to_json).collect::<Vec<_>>(),
    })
}

/// CPU model, CPUs, kernel: what BENCHMARKS.md's conditions need, read from /proc.
fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_owned());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_owned());
    json!({
        "cpu": model,
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "kernel": kernel,
    })
}

/// `items` in order on even rounds and reversed on odd ones.
fn alternate<T>(round: usize, items: &[T]) -> Vec<&T> {
    let mut v: Vec<&T> = items.iter().collect();
    if round % 2 == 1 {
        v.reverse();
    }
    v
}

fn mb_per_s(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e6
}

fn per_s(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}
