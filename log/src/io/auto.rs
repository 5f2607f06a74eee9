//! `io_backend=auto` as a measured decision per log directory: which backend each workload class takes
//! (buffered appends, durable appends, partitions flushed together) on the file system the directory
//! lives on.
//!
//! The decision comes from a short probe at a writer's first open (a few MiB through each backend, the
//! whole probe bounded by [`PROBE_BUDGET`]) or from the result a previous probe recorded in the log
//! directory's root ([`AUTO_DECISION_FILE`], written atomically through the seam). Kafka 4.4.0 ignores
//! it: `LogManager.loadLogs` loads only the root's sub-directories, so a broker still accepts the
//! directory. A recorded result is re-measured when the device it was measured on is not the directory's
//! device now, or when it does not parse (a warning names the file: a bad cache is never an error). A
//! read-only directory is never probed nor written: it gets std. io_uring unavailable (kernel, seccomp,
//! `RLIMIT_MEMLOCK`) resolves every class to std with the reason recorded.

use std::fmt::Write as _;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{
    read_file, unique_tmp_path, uring_available, write_atomic, IoBackend, IoWorkload, StdStorage,
    Storage,
};

/// The file in a log directory's root recording `Auto`'s decision (klog's own; Kafka skips files there).
pub const AUTO_DECISION_FILE: &str = "klog-io-backend";
/// The probe stops measuring once it has taken this long and keeps std for what it did not measure.
pub const PROBE_BUDGET: Duration = Duration::from_millis(400);
/// A class takes io_uring only when it was at least this much faster than std (noise is not a reason).
pub const URING_MARGIN: f64 = 1.10;
const FORMAT_VERSION: u32 = 1;
/// Buffered probe: this many bytes in 16 KiB writes, per backend.
const BUFFERED_PROBE_BYTES: usize = 2 << 20;
const PROBE_WRITE: usize = 16 << 10;
/// Durable probe: this many 4 KiB write + fdatasync round trips, per backend.
const DURABLE_PROBE_SYNCS: usize = 4;
/// Partitions-together probe: this many files written and synced together, per backend.
const MANY_PROBE_FILES: usize = 4;

/// Where a decision came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionSource {
    /// Probed at this open and recorded.
    Measured,
    /// Read from [`AUTO_DECISION_FILE`], measured by an earlier open on the same device.
    Cached,
    /// Not probed (a read-only directory, or no file system to probe): std for every class.
    Unprobed(String),
}

impl DecisionSource {
    /// `measured`, `cached` or `unprobed`, as the `-v` line names it.
    pub fn name(&self) -> &'static str {
        match self {
            DecisionSource::Measured => "measured",
            DecisionSource::Cached => "cached",
            DecisionSource::Unprobed(_) => "unprobed",
        }
    }
}

/// One workload class's choice and the figures it was made from (nanoseconds per probe, `None` when
/// that backend was not measured).
#[derive(Debug, Clone, PartialEq)]
pub struct ClassChoice {
    /// The backend this class takes.
    pub backend: IoBackend,
    /// The std backend's probe time.
    pub std_ns: Option<u64>,
    /// The io_uring backend's probe time.
    pub uring_ns: Option<u64>,
}

impl ClassChoice {
    fn std_unmeasured() -> Self {
        ClassChoice {
            backend: IoBackend::Std,
            std_ns: None,
            uring_ns: None,
        }
    }

    fn from_figures(std_ns: Option<u64>, uring_ns: Option<u64>) -> Self {
        let backend = match (std_ns, uring_ns) {
            (Some(s), Some(u)) if (s as f64) >= (u.max(1) as f64) * URING_MARGIN => {
                IoBackend::Uring
            }
            _ => IoBackend::Std,
        };
        ClassChoice {
            backend,
            std_ns,
            uring_ns,
        }
    }
}

/// `Auto`'s decision for one log directory.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoDecision {
    /// The log directory's device id (`st_dev`) the figures were measured on; 0 when unknown.
    pub device: u64,
    /// `None` when this process may use io_uring, else why not.
    pub uring_unavailable: Option<String>,
    /// Appends flushed now and then.
    pub buffered: ClassChoice,
    /// Appends each followed by a flush.
    pub durable: ClassChoice,
    /// Partitions flushed together.
    pub many_partitions: ClassChoice,
    /// Measured now, read from the recorded file, or not probed.
    pub source: DecisionSource,
}

impl AutoDecision {
    /// The choice for `workload`.
    pub fn class(&self, workload: IoWorkload) -> &ClassChoice {
        match workload {
            IoWorkload::Buffered => &self.buffered,
            IoWorkload::Durable => &self.durable,
            IoWorkload::ManyPartitions => &self.many_partitions,
        }
    }

    /// The backend `workload` takes.
    pub fn backend(&self, workload: IoWorkload) -> IoBackend {
        self.class(workload).backend
    }

    fn unprobed(device: u64, why: String) -> Self {
        AutoDecision {
            device,
            uring_unavailable: uring_available().err().map(|e| e.to_string()),
            buffered: ClassChoice::std_unmeasured(),
            durable: ClassChoice::std_unmeasured(),
            many_partitions: ClassChoice::std_unmeasured(),
            source: DecisionSource::Unprobed(why),
        }
    }

    /// The recorded form: `key=value` lines.
    pub fn encode(&self) -> String {
        let mut s = format!("version={FORMAT_VERSION}\ndevice={}\n", self.device);
        let _ = writeln!(
            s,
            "uring={}",
            self.uring_unavailable.as_deref().unwrap_or("available")
        );
        for (workload, c) in self.classes() {
            let name = workload.key();
            let ns = |v: Option<u64>| v.map_or("-".to_string(), |n| n.to_string());
            let _ = writeln!(
                s,
                "{name}={} std_ns={} uring_ns={}",
                backend_name(c.backend),
                ns(c.std_ns),
                ns(c.uring_ns)
            );
        }
        s
    }

    /// Each workload class with its choice.
    pub fn classes(&self) -> [(IoWorkload, &ClassChoice); 3] {
        [
            (IoWorkload::Buffered, &self.buffered),
            (IoWorkload::Durable, &self.durable),
            (IoWorkload::ManyPartitions, &self.many_partitions),
        ]
    }

    /// Parses the recorded form; `Err` says what is wrong (the caller re-measures).
    pub fn decode(text: &str) -> Result<Self, String> {
        let mut fields = std::collections::BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let (k, v) = line
                .split_once('=')
                .ok_or_else(|| format!("line {}: no '=' in {line:?}", n + 1))?;
            if fields.insert(k, v).is_some() {
                return Err(format!("line {}: {k} given twice", n + 1));
            }
        }
        let get = |k: &str| fields.get(k).copied().ok_or_else(|| format!("no {k} line"));
        if get("version")? != FORMAT_VERSION.to_string() {
            return Err(format!(
                "version {} is not {FORMAT_VERSION}",
                get("version")?
            ));
        }
        let device = get("device")?.parse().map_err(|e| format!("device: {e}"))?;
        let uring = get("uring")?;
        let class = |k: &str| parse_class(get(k)?).map_err(|e| format!("{k}: {e}"));
        Ok(AutoDecision {
            device,
            uring_unavailable: (uring != "available").then(|| uring.to_string()),
            buffered: class(IoWorkload::Buffered.key())?,
            durable: class(IoWorkload::Durable.key())?,
            many_partitions: class(IoWorkload::ManyPartitions.key())?,
            source: DecisionSource::Cached,
        })
    }
}

fn parse_class(v: &str) -> Result<ClassChoice, String> {
    let mut parts = v.split(' ');
    let backend = match parts.next() {
        Some("std") => IoBackend::Std,
        Some("uring") => IoBackend::Uring,
        other => return Err(format!("backend {other:?} is neither std nor uring")),
    };
    let mut ns = |key: &str| -> Result<Option<u64>, String> {
        let part = parts.next().ok_or_else(|| format!("no {key}"))?;
        let value = part
            .strip_prefix(key)
            .and_then(|p| p.strip_prefix('='))
            .ok_or_else(|| format!("{part:?} is not {key}=..."))?;
        match value {
            "-" => Ok(None),
            n => n.parse().map(Some).map_err(|e| format!("{key}: {e}")),
        }
    };
    let (std_ns, uring_ns) = (ns("std_ns")?, ns("uring_ns")?);
    if parts.next().is_some() {
        return Err("trailing fields".into());
    }
    Ok(ClassChoice {
        backend,
        std_ns,
        uring_ns,
    })
}

/// `auto`, `std` or `uring`.
pub fn backend_name(backend: IoBackend) -> &'static str {
    match backend {
        IoBackend::Auto => "auto",
        IoBackend::Std => "std",
        IoBackend::Uring => "uring",
    }
}

/// The decision for the log directory `root` (created if missing, unless `storage` is read-only): the
/// recorded one when it was measured on `root`'s device and parses, else a probe's, recorded through
/// `storage`. Never fails: what cannot be probed or recorded is std, with a warning saying why.
pub fn decide(storage: &dyn Storage, root: &Path) -> AutoDecision {
    if storage.is_read_only() {
        return AutoDecision::unprobed(device_of(root), "read-only storage".into());
    }
    let _ = storage.create_dir_all(root);
    let device = device_of(root);
    let path = root.join(AUTO_DECISION_FILE);
    match read_file(storage, &path) {
        Ok(Some(bytes)) => match std::str::from_utf8(&bytes)
            .map_err(|e| e.to_string())
            .and_then(AutoDecision::decode)
        {
            Ok(d) if d.device == device => return d,
            Ok(d) => tracing::info!(file = %path.display(), recorded = d.device, device,
                "io_backend=auto: recorded on another device, measuring again"),
            Err(why) => tracing::warn!(file = %path.display(), %why,
                "io_backend=auto: the recorded decision does not parse, measuring again"),
        },
        Ok(None) => {}
        Err(e) => tracing::warn!(file = %path.display(), error = %e,
            "io_backend=auto: the recorded decision cannot be read, measuring again"),
    }
    let decision = match probe(root, device) {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(dir = %root.display(), error = %e, "io_backend=auto: cannot probe, std");
            return AutoDecision::unprobed(device, format!("probe failed: {e}"));
        }
    };
    if let Err(e) = write_atomic(storage, &path, decision.encode().as_bytes()) {
        tracing::warn!(file = %path.display(), error = %e, "io_backend=auto: decision not recorded");
    }
    decision
}

fn device_of(root: &Path) -> u64 {
    std::fs::metadata(root).map(|m| m.dev()).unwrap_or(0)
}

/// Measures each class through std and (when available) io_uring on files in `root`, removed after.
fn probe(root: &Path, device: u64) -> io::Result<AutoDecision> {
    let started = Instant::now();
    let uring_unavailable = uring_available().err().map(|e| e.to_string());
    let std: Arc<dyn Storage> = Arc::new(StdStorage);
    let uring = match &uring_unavailable {
        None => super::open_backend(IoBackend::Uring).ok(),
        Some(_) => None,
    };
    let scratch = unique_tmp_path(&root.join("klog-io-probe"));
    let result = (|| -> io::Result<[[Option<u64>; 2]; 3]> {
        let mut figures = [[None; 2]; 3];
        for (class, run) in [probe_buffered, probe_durable, probe_many]
            .into_iter()
            .enumerate()
        {
            for (i, backend) in [Some(&std), uring.as_ref()].into_iter().enumerate() {
                let Some(b) = backend else { continue };
                if started.elapsed() > PROBE_BUDGET {
                    break;
                }
                figures[class][i] = Some(run(b.as_ref(), &scratch)?);
            }
        }
        Ok(figures)
    })();
    for n in 0..MANY_PROBE_FILES {
        let _ = std.remove(&numbered(&scratch, n));
    }
    let _ = std.remove(&scratch);
    let f = result?;
    let decision = AutoDecision {
        device,
        uring_unavailable,
        buffered: ClassChoice::from_figures(f[0][0], f[0][1]),
        durable: ClassChoice::from_figures(f[1][0], f[1][1]),
        many_partitions: ClassChoice::from_figures(f[2][0], f[2][1]),
        source: DecisionSource::Measured,
    };
    tracing::info!(dir = %root.display(), took_us = started.elapsed().as_micros() as u64,
        decision = %decision.encode().replace('\n', "; "), "io_backend=auto: measured");
    Ok(decision)
}

fn numbered(path: &Path, n: usize) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

fn elapsed_ns(started: Instant) -> u64 {
    started.elapsed().as_nanos().max(1) as u64
}

fn probe_buffered(storage: &dyn Storage, path: &Path) -> io::Result<u64> {
    let _ = storage.remove(path);
    let file = storage.open_segment_log(path, true, 0, None)?;
    let chunk = vec![0x5au8; PROBE_WRITE];
    let started = Instant::now();
    for n in 0..BUFFERED_PROBE_BYTES / PROBE_WRITE {
        file.write_at(&chunk, (n * PROBE_WRITE) as u64)?;
    }
    let ns = elapsed_ns(started);
    drop(file);
    storage.remove(path)?;
    Ok(ns)
}

fn probe_durable(storage: &dyn Storage, path: &Path) -> io::Result<u64> {
    let _ = storage.remove(path);
    let file = storage.create(path)?;
    let chunk = vec![0xa5u8; 4096];
    let started = Instant::now();
    for n in 0..DURABLE_PROBE_SYNCS {
        file.write_at_and_sync(&chunk, (n * chunk.len()) as u64)?;
    }
    let ns = elapsed_ns(started);
    drop(file);
    storage.remove(path)?;
    Ok(ns)
}

fn probe_many(storage: &dyn Storage, path: &Path) -> io::Result<u64> {
    let chunk = vec![0x3cu8; 4096];
    let mut files = Vec::with_capacity(MANY_PROBE_FILES);
    for n in 0..MANY_PROBE_FILES {
        let p = numbered(path, n);
        let _ = storage.remove(&p);
        files.push(storage.create(&p)?);
    }
    let started = Instant::now();
    for f in &files {
        f.write_at(&chunk, 0)?;
    }
    storage.sync_files(&files)?;
    let ns = elapsed_ns(started);
    drop(files);
    for n in 0..MANY_PROBE_FILES {
        storage.remove(&numbered(path, n))?;
    }
    Ok(ns)
}

/// Why a writer took the backend it took (its `-v` line names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChoiceReason {
    /// `io_backend=std` or `io_backend=uring`: no decision consulted.
    Forced,
    /// `Auto`: the decision measured at this open (and recorded in [`AUTO_DECISION_FILE`]).
    Measured,
    /// `Auto`: the decision recorded in [`AUTO_DECISION_FILE`] by an earlier open.
    Cached,
    /// `Auto`: std because io_uring is unavailable to this process (why).
    Unavailable(String),
    /// `Auto`: std with no probe (why: a read-only directory, a probe that failed).
    Unprobed(String),
}

impl ChoiceReason {
    /// The reason's one-word name, as `-v` prints it: `forced`, `measured`, `cached`, `unavailable`,
    /// `unprobed`.
    pub fn name(&self) -> &'static str {
        match self {
            ChoiceReason::Forced => "forced",
            ChoiceReason::Measured => "measured",
            ChoiceReason::Cached => "cached",
            ChoiceReason::Unavailable(_) => "unavailable",
            ChoiceReason::Unprobed(_) => "unprobed",
        }
    }
}

impl std::fmt::Display for ChoiceReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChoiceReason::Unavailable(why) | ChoiceReason::Unprobed(why) => {
                write!(f, "{} ({why})", self.name())
            }
            _ => f.write_str(self.name()),
        }
    }
}

/// The backend a writer took for its workload, why, and the decision it came from (`None` when forced).
#[derive(Debug, Clone, PartialEq)]
pub struct BackendChoice {
    /// The workload class the writer does most.
    pub workload: IoWorkload,
    /// The backend taken: `Std` or `Uring`, never `Auto`.
    pub backend: IoBackend,
    /// Why.
    pub reason: ChoiceReason,
    /// `Auto`'s decision for the directory.
    pub decision: Option<AutoDecision>,
}

impl BackendChoice {
    /// A forced backend's choice.
    pub fn forced(backend: IoBackend, workload: IoWorkload) -> Self {
        BackendChoice {
            workload,
            backend,
            reason: ChoiceReason::Forced,
            decision: None,
        }
    }

    /// The `-v` line (info): which backend the writer of `dir` took for which workload, why, and where
    /// the decision came from (`decision=measured|cached|unprobed`, `none` when forced).
    pub fn log(&self, dir: &Path) {
        let decision = self.decision.as_ref().map_or("none", |d| d.source.name());
        tracing::info!(dir = %dir.display(), workload = %self.workload.key(),
            backend = %backend_name(self.backend), reason = %self.reason, decision = %decision,
            "io_backend chosen");
    }
}

/// The storage `decision` gives `workload`, with why: std when io_uring is unavailable or cannot be
/// opened after all.
pub fn choose(decision: &AutoDecision, workload: IoWorkload) -> (Arc<dyn Storage>, BackendChoice) {
    let choice = |backend, reason| BackendChoice {
        workload,
        backend,
        reason,
        decision: Some(decision.clone()),
    };
    let decided = match &decision.source {
        DecisionSource::Measured => ChoiceReason::Measured,
        DecisionSource::Cached => ChoiceReason::Cached,
        DecisionSource::Unprobed(why) => ChoiceReason::Unprobed(why.clone()),
    };
    match decision.backend(workload) {
        IoBackend::Uring => match super::open_backend(IoBackend::Uring) {
            Ok(s) => (s, choice(IoBackend::Uring, decided)),
            Err(e) => (
                Arc::new(StdStorage),
                choice(IoBackend::Std, ChoiceReason::Unavailable(e.to_string())),
            ),
        },
        _ => {
            let reason = match (&decision.uring_unavailable, decided) {
                (Some(why), ChoiceReason::Measured | ChoiceReason::Cached) => {
                    ChoiceReason::Unavailable(why.clone())
                }
                (_, decided) => decided,
            };
            (Arc::new(StdStorage), choice(IoBackend::Std, reason))
        }
    }
}
