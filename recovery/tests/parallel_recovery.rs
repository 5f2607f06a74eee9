//! A log directory's partitions recover on several threads at once (Kafka's
//! `num.recovery.threads.per.data.dir`), with exactly the outcome of recovering them one by one: the
//! same reports, the same files, one partition's failure still its own.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression};
use klog_log::io::{StdStorage, Storage, StorageFile};
use klog_log::log_dir::LogDir;
use klog_recovery::{LogLoader, RecoveryReport};

const PARTITIONS: usize = 8;

fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 6_000,
        index_interval_bytes: 1_000,
        ..LogConfig::default()
    }
}

/// `PARTITIONS` partitions of 30 batches each, closed, then made to look like a crash: no clean-shutdown
/// marker, no recovery points (every segment is rescanned), and a torn last batch in `p-3`.
fn build(root: &Path) {
    let storage: Arc<dyn Storage> = Arc::new(StdStorage);
    let mut log_dir = LogDir::open(storage, root).unwrap();
    for p in 0..PARTITIONS {
        let (log, _) = log_dir.open_partition(&format!("p-{p}"), config()).unwrap();
        for i in 0..30i64 {
            let mut b = BatchBuilder::new(Compression::None)
                .base_offset(i)
                .partition_leader_epoch(0);
            b.append(
                1_700_000_000_000 + i,
                Some(b"k"),
                Some(&[b'a' + p as u8; 700]),
                &[],
            )
            .unwrap();
            log.append_as_follower(&b.build().unwrap()).unwrap();
        }
        log_dir.close_partition(log).unwrap();
    }
    log_dir.close().unwrap();
    for f in [".kafka_cleanshutdown", "recovery-point-offset-checkpoint"] {
        let _ = std::fs::remove_file(root.join(f));
    }
    let torn = std::fs::read_dir(root.join("p-3"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .max()
        .unwrap();
    let len = std::fs::metadata(&torn).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&torn)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
}

/// Every file under `root` with its bytes (the `.lock` aside), sorted by path.
fn files(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in walk(root) {
        let rel = entry.strip_prefix(root).unwrap().display().to_string();
        if rel != ".lock" {
            out.push((rel, std::fs::read(&entry).unwrap()));
        }
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Recovers `root` on `threads` threads through `storage`, closes everything; the reports without their
/// durations.
fn recover(root: &Path, storage: Arc<dyn Storage>, threads: usize) -> Vec<RecoveryReport> {
    let loader = LogLoader::new(storage, config()).with_threads(threads);
    let (mut log_dir, outcomes) = loader.load_dir(root, true).unwrap();
    let mut reports = Vec::new();
    for (name, outcome) in outcomes {
        let (log, mut report) = outcome.unwrap_or_else(|e| panic!("{name}: {e}"));
        log_dir.close_partition(log).unwrap();
        report.duration_ms = 0;
        reports.push(report);
    }
    log_dir.close().unwrap();
    reports
}

/// A storage that counts how many `.log` opens are in progress at once. With `rendezvous`, the first
/// open waits (up to a generous bound, once: a serial loader still finishes) for another one to
/// arrive: two threads really loading at once meet there.
#[derive(Debug)]
struct Meeting {
    inner: StdStorage,
    rendezvous: Mutex<bool>,
    state: Mutex<(usize, usize)>,
    changed: Condvar,
}

impl Meeting {
    fn new(rendezvous: bool) -> Arc<Meeting> {
        Arc::new(Meeting {
            inner: StdStorage,
            rendezvous: Mutex::new(rendezvous),
            state: Mutex::new((0, 0)),
            changed: Condvar::new(),
        })
    }

    fn max_inside(&self) -> usize {
        self.state.lock().unwrap().1
    }

    fn enter(&self, path: &Path) -> Option<()> {
        if path.extension().is_none_or(|e| e != "log") {
            return None;
        }
        let mut s = self.state.lock().unwrap();
        s.0 += 1;
        s.1 = s.1.max(s.0);
        self.changed.notify_all();
        if std::mem::take(&mut *self.rendezvous.lock().unwrap()) {
            let (guard, _) = self
                .changed
                .wait_timeout_while(s, Duration::from_secs(20), |s| s.1 < 2)
                .unwrap();
            s = guard;
        }
        s.0 -= 1;
        Some(())
    }
}

impl Storage for Meeting {
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        self.inner.create(path)
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        self.enter(path);
        self.inner.open(path)
    }
    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        self.enter(path);
        self.inner.open_read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn name(&self) -> &'static str {
        "meeting"
    }
    fn lock_dir(&self, dir: &Path) -> io::Result<Option<std::fs::File>> {
        self.inner.lock_dir(dir)
    }
}

#[test]
fn several_threads_recover_exactly_what_one_thread_recovers() {
    let one = temp_dir("parallel-one");
    let four = temp_dir("parallel-four");
    build(&one);
    build(&four);
    assert_eq!(files(&one), files(&four), "the two copies start equal");

    let serial = Meeting::new(false);
    let serial_reports = recover(&one, serial.clone(), 1);
    assert_eq!(
        serial.max_inside(),
        1,
        "one thread opens one segment at a time"
    );

    let parallel = Meeting::new(true);
    let parallel_reports = recover(&four, parallel.clone(), 4);
    assert!(
        parallel.max_inside() >= 2,
        "with 4 threads two partitions were never loading at once"
    );

    assert_eq!(serial_reports.len(), PARTITIONS);
    assert_eq!(
        parallel_reports, serial_reports,
        "same reports, in the same (name) order"
    );
    let torn = serial_reports
        .iter()
        .find(|r| r.partition == "p-3")
        .unwrap();
    assert_eq!(torn.truncated.len(), 1, "{torn:?}");
    assert!(serial_reports
        .iter()
        .filter(|r| r.partition != "p-3")
        .all(|r| r.truncated.is_empty() && r.log_end_offset == 30));
    assert_eq!(
        files(&one),
        files(&four),
        "the same bytes on disk after recovery"
    );
}

#[test]
fn a_failing_partition_is_its_own_with_several_threads() {
    let root = temp_dir("parallel-failing");
    build(&root);
    // A directory Kafka would refuse to name a partition: its load fails, the others do not care.
    std::fs::create_dir_all(root.join("not a partition-x")).unwrap();
    let storage: Arc<dyn Storage> = Arc::new(StdStorage);
    let loader = LogLoader::new(storage, config()).with_threads(3);
    let (mut log_dir, outcomes) = loader.load_dir(&root, true).unwrap();
    let mut failed = Vec::new();
    for (name, outcome) in outcomes {
        match outcome {
            Ok((log, _)) => log_dir.close_partition(log).unwrap(),
            Err(e) => failed.push((name, e.to_string())),
        }
    }
    log_dir.close().unwrap();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].0, "not a partition-x");
}

#[test]
fn the_partitions_with_the_most_segments_start_first() {
    let root = temp_dir("parallel-largest-first");
    build(&root);
    // `p-6` gets five times the segments of the others: it is started first, not when its name comes up
    // (last but one), where it would run alone after the others finished.
    let storage: Arc<dyn Storage> = Arc::new(StdStorage);
    let mut log_dir = LogDir::open(storage.clone(), &root).unwrap();
    let (log, _) = log_dir.open_partition("p-6", config()).unwrap();
    for i in 30..150i64 {
        let mut b = BatchBuilder::new(Compression::None)
            .base_offset(i)
            .partition_leader_epoch(0);
        b.append(1_700_000_000_000 + i, Some(b"k"), Some(&[b'g'; 700]), &[])
            .unwrap();
        log.append_as_follower(&b.build().unwrap()).unwrap();
    }
    log_dir.close_partition(log).unwrap();
    log_dir.close().unwrap();
    let loader = LogLoader::new(storage.clone(), config()).with_threads(2);
    let log_dir = LogDir::open(storage, &root).unwrap();
    let names = loader.partition_names(&root).unwrap();
    // Two partitions may start, one per thread; the rest never do.
    let asked = std::sync::atomic::AtomicUsize::new(0);
    let stop = || asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 2;
    let outcomes = loader.load_partitions(&log_dir, &names, false, &stop, &|_| {});
    let started: Vec<&str> = outcomes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        started,
        ["p-0", "p-6"],
        "p-6 (most segments), then p-0 (first name)"
    );
    for (_, outcome) in outcomes {
        let (log, report) = outcome.unwrap();
        assert!(report.truncated.is_empty() || report.partition == "p-3");
        log.close().unwrap();
    }
}
