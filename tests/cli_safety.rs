//! Safe under real use (issue #12): one writer per log directory, readers that change nothing, a
//! read-only file system, and clean shutdown on SIGTERM. Each test drives the real binary as a user
//! in two shell windows would.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::tree::Tree;
use common::{batches_near_now, klog, klog_ok, required, scratch_dir, signal, stderr, stdout};

/// `n` producer batches of 3 records with timestamps near now (Kafka's timestamp bounds accept them).
fn producer_batches(n: usize) -> Vec<u8> {
    batches_near_now(n, 700, |i, _| format!("k{i}"))
}

/// A running `klog torture DIR`: it holds the log directory as its writer until killed.
struct Writer {
    child: Child,
    lines: BufReader<ChildStdout>,
    flushed: i64,
}

impl Writer {
    fn start(dir: &Path, seed: u64) -> Writer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_klog"))
            .args([
                "torture",
                dir.to_str().unwrap(),
                "--seed",
                &seed.to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn klog torture");
        let mut lines = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        lines.read_line(&mut first).unwrap();
        assert!(first.starts_with("opened"), "torture said {first:?}");
        Writer {
            child,
            lines,
            flushed: -1,
        }
    }

    /// Waits for `n` more `flushed <offset>` lines.
    fn wait_flushes(&mut self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = 0;
        let mut line = String::new();
        while seen < n && Instant::now() < deadline {
            line.clear();
            assert!(
                self.lines.read_line(&mut line).unwrap() > 0,
                "torture ended"
            );
            if let Some(o) = line.trim().strip_prefix("flushed ") {
                self.flushed = o.parse().unwrap();
                seen += 1;
            }
        }
        assert_eq!(seen, n, "torture flushed while the test watched");
    }

    fn kill(mut self) -> i64 {
        // Read what it reported up to now, so `flushed` is the last offset it vouched for.
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut self.lines, &mut rest);
        for l in rest.lines() {
            if let Some(o) = l.trim().strip_prefix("flushed ") {
                self.flushed = o.parse().unwrap();
            }
        }
        self.flushed
    }
}

fn assert_no_panic(o: &Output, what: &str) {
    assert_ne!(o.status.code(), Some(101), "{what} panicked: {}", stderr(o));
    assert!(
        !stderr(o).contains("panicked"),
        "{what} panicked: {}",
        stderr(o)
    );
}

#[test]
fn a_second_writer_is_refused_at_once_naming_the_directory() {
    let root = scratch_dir("safety-two-writers");
    let dir = root.join("logs/orders-0");
    let mut writer = Writer::start(&dir, 7);
    writer.wait_flushes(2);
    let input = root.join("in.bin");
    std::fs::write(&input, producer_batches(5)).unwrap();

    let append = klog(&["append", dir.to_str().unwrap(), input.to_str().unwrap()]);
    assert_no_panic(&append, "append");
    assert!(!append.status.success(), "a second writer was let in");
    let err = stderr(&append);
    let logs = root.join("logs");
    assert!(
        err.contains(".lock") && err.contains(logs.to_str().unwrap()),
        "the refusal names the lock and the directory: {err}"
    );
    assert!(
        err.contains(&format!("pid {}", writer.child.id())),
        "the refusal names the holder: {err}"
    );
    // Refused at once, not after waiting for the holder: it returned while the holder still runs.
    assert!(
        writer.child.try_wait().unwrap().is_none(),
        "the writer still holds the directory"
    );

    for args in [
        vec!["recover", logs.to_str().unwrap()],
        vec!["recover", dir.to_str().unwrap()],
    ] {
        let o = klog(&args);
        assert_no_panic(&o, "recover");
        assert!(!o.status.success(), "{args:?} ran beside the writer");
        assert!(stderr(&o).contains(".lock"), "{}", stderr(&o));
    }
    writer.wait_flushes(1);
    let flushed = writer.kill();

    // Nothing was lost: the writer's flushed data is all there after recovery.
    let o = klog(&["recover", logs.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(stdout(&o).lines().next().unwrap()).unwrap();
    assert!(r["log_end_offset"].as_i64().unwrap() >= flushed, "{r}");
    // And once the writer is gone, an append goes through.
    let append = klog(&["append", dir.to_str().unwrap(), input.to_str().unwrap()]);
    assert!(append.status.success(), "{}", stderr(&append));
}

/// Every reader of a partition directory and its log directory: `read`, `producers`, `verify`,
/// `recover --dry-run`, and `dump` of every file the partition holds.
fn readers<'a>(logs: &'a str, dir: &'a str, files: &'a [String]) -> Vec<Vec<&'a str>> {
    let mut all = vec![
        vec![
            "read",
            dir,
            "--offset",
            "0",
            "--max-bytes",
            "100000",
            "--json",
        ],
        vec!["producers", dir, "--json"],
        vec!["verify", dir, "--json"],
        vec!["verify", logs],
        vec!["recover", logs, "--dry-run", "--json"],
    ];
    let mut dump = vec!["dump"];
    dump.extend(files.iter().map(String::as_str));
    all.push(dump);
    all
}

/// The files of a partition directory, sorted.
fn files_of(dir: &Path) -> Vec<String> {
    common::sorted_entries(dir)
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| p.to_str().unwrap().to_owned())
        .collect()
}

#[test]
fn readers_beside_a_running_writer_change_nothing_and_lose_nothing() {
    let root = scratch_dir("safety-readers-beside-writer");
    let logs = root.join("logs");
    let dir = logs.join("events-0");
    let (l, d) = (logs.to_str().unwrap(), dir.to_str().unwrap());
    for round in 0..3u64 {
        let mut writer = Writer::start(&dir, 11 + round);
        writer.wait_flushes(2);
        // While it writes: no reader needs the lock, none fails on what a live writer leaves.
        let files = files_of(&dir);
        for args in readers(l, d, &files) {
            let o = klog(&args);
            assert_no_panic(&o, args[0]);
            assert!(
                !stderr(&o).contains(".lock"),
                "{} is a reader and needs no lock: {}",
                args[0],
                stderr(&o)
            );
            if args[0] == "read" || args[0] == "producers" {
                assert!(o.status.success(), "{args:?}: {}", stderr(&o));
            }
        }
        // Paused (still the holder of the lock, files open, its tail unflushed and its indexes
        // preallocated): the whole tree, bytes, names, sizes, modes and mtimes, is what it was after
        // every reader ran.
        signal(&writer.child, "STOP");
        let before = Tree::of(&logs);
        let files = files_of(&dir);
        for args in readers(l, d, &files) {
            let o = klog(&args);
            assert_no_panic(&o, args[0]);
            let changed = Tree::of(&logs).changes_since(&before);
            assert!(
                changed.is_empty(),
                "round {round}: `klog {}` changed the log directory of a running writer: {changed:?}",
                args.join(" ")
            );
        }
        signal(&writer.child, "CONT");
        writer.wait_flushes(2);
        let flushed = writer.kill();
        let o = klog(&["read", d, "--offset", "0", "--max-bytes", "1", "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let r: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
        assert!(
            r["log_end_offset"].as_i64().unwrap() >= flushed,
            "round {round}: a reader lost flushed data: {r}, flushed {flushed}"
        );
    }
}

/// A read-only bind mount of `src` at `dst`, unmounted on drop; None where this process may not mount.
struct ReadOnlyMount(PathBuf);

impl ReadOnlyMount {
    fn new(src: &Path, dst: &Path) -> Option<ReadOnlyMount> {
        std::fs::create_dir_all(dst).unwrap();
        let mount = |args: &[&str]| {
            Command::new("mount")
                .args(args)
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if !mount(&["--bind", src.to_str()?, dst.to_str()?]) {
            return None;
        }
        let m = ReadOnlyMount(dst.to_owned());
        mount(&["-o", "remount,bind,ro", dst.to_str()?]).then_some(m)
    }
}

impl Drop for ReadOnlyMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).output();
    }
}

/// The problems `verify --json` of one partition listed, as (file name, problem).
fn problems(line: &str) -> Vec<(String, String)> {
    findings(line, "problems", "problem")
}

/// verify's notes (derived state the next open rebuilds) as (file name, note).
fn notes(line: &str) -> Vec<(String, String)> {
    findings(line, "notes", "note")
}

fn findings(line: &str, list: &str, field: &str) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    v[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} list: {v}"))
        .iter()
        .map(|p| {
            let file = Path::new(p["file"].as_str().unwrap());
            let name = file.file_name().unwrap().to_str().unwrap().to_owned();
            (name, p[field].as_str().unwrap().to_owned())
        })
        .collect()
}

#[test]
fn inspection_works_on_a_read_only_copy_and_writes_nothing() {
    let root = scratch_dir("safety-read-only");
    let logs = root.join("logs");
    let dir = logs.join("orders-0");
    let input = root.join("in.bin");
    std::fs::write(&input, producer_batches(60)).unwrap();
    let o = klog(&[
        "append",
        dir.to_str().unwrap(),
        input.to_str().unwrap(),
        "--config",
        "segment.bytes=40000",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The state after a crash: no clean-shutdown marker, one index gone, a torn batch at the end.
    let _ = std::fs::remove_file(logs.join(".kafka_cleanshutdown"));
    let _ = std::fs::remove_file(logs.join("recovery-point-offset-checkpoint"));
    let index = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "index"))
        .min()
        .unwrap();
    std::fs::remove_file(&index).unwrap();
    let last_log = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .max()
        .unwrap();
    let torn = producer_batches(1);
    let torn_at = std::fs::metadata(&last_log).unwrap().len();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&last_log)
        .unwrap();
    std::io::Write::write_all(&mut f, &torn[..torn.len() / 2]).unwrap();
    drop(f);

    // CI runs as root and must test a real read-only file system (`.ci/run` sets KLOG_REQUIRE_MOUNT).
    let mount = ReadOnlyMount::new(&logs, &root.join("ro"));
    if mount.is_none() {
        assert!(
            !required("KLOG_REQUIRE_MOUNT") && std::env::var_os("CI").is_none(),
            "KLOG_REQUIRE_MOUNT=1 (or CI) but no read-only bind mount could be made (mount --bind, then \
             mount -o remount,bind,ro; needs root)"
        );
        common::skip("no read-only bind mount here (not root): the read-only file system part only checks the tree is unchanged");
    }
    let ro_logs = if mount.is_some() {
        root.join("ro")
    } else {
        logs.clone()
    };
    let ro_dir = ro_logs.join("orders-0");
    let rd = ro_dir.to_str().unwrap();
    let before = Tree::of(&logs);

    let read = klog(&[
        "read",
        rd,
        "--offset",
        "0",
        "--max-bytes",
        "1000000",
        "--json",
    ]);
    assert_eq!(read.status.code(), Some(0), "read: {}", stderr(&read));
    let r: serde_json::Value = serde_json::from_str(stdout(&read).trim()).unwrap();
    assert_eq!(r["log_end_offset"], 180, "{r}");
    assert!(!r["batches"].as_array().unwrap().is_empty());

    let p = klog(&["producers", rd, "--json"]);
    assert_eq!(p.status.code(), Some(0), "producers: {}", stderr(&p));

    let dry = klog(&["recover", ro_logs.to_str().unwrap(), "--dry-run", "--json"]);
    assert_eq!(
        dry.status.code(),
        Some(0),
        "recover --dry-run: {}",
        stderr(&dry)
    );
    let rep: serde_json::Value =
        serde_json::from_str(stdout(&dry).lines().next().unwrap()).unwrap();
    assert_eq!(rep["log_end_offset"], 180, "{rep}");
    assert_eq!(
        rep["bytes_truncated"],
        torn.len() / 2,
        "the torn tail it would cut: {rep}"
    );

    // verify: exit 1, and exactly the crash's findings, read from the read-only files.
    let v = klog(&["verify", rd, "--json"]);
    assert_no_panic(&v, "verify");
    assert_eq!(
        v.status.code(),
        Some(1),
        "verify: {}{}",
        stdout(&v),
        stderr(&v)
    );
    assert_eq!(stderr(&v), "", "verify on a read-only file system");
    let found = problems(stdout(&v).trim());
    let (index_name, log_name) = (
        index.file_name().unwrap().to_str().unwrap(),
        last_log.file_name().unwrap().to_str().unwrap(),
    );
    let cut = torn.len() / 2;
    assert_eq!(
        found,
        [(
            log_name.to_owned(),
            format!("an incomplete batch of {cut} bytes at position {torn_at}")
        )],
        "verify's problems: the torn tail, nothing else"
    );
    assert_eq!(
        notes(stdout(&v).trim()),
        [(
            index_name.to_owned(),
            "missing: derived from the .log, rebuilt by the next open (as Kafka's LogLoader does)"
                .to_owned()
        )],
        "verify's notes: the missing index (derived state), nothing else"
    );

    // dump of the torn segment on the mount: every whole batch, then exit 1 naming the torn tail.
    let ro_last_log = ro_dir.join(log_name);
    let dump = klog(&["dump", ro_last_log.to_str().unwrap()]);
    assert_no_panic(&dump, "dump");
    assert_eq!(dump.status.code(), Some(1), "dump: {}", stderr(&dump));
    let segment_base: i64 = log_name.trim_end_matches(".log").parse().unwrap();
    let dumped = stdout(&dump);
    assert_eq!(
        dumped
            .lines()
            .filter(|l| l.starts_with("baseOffset:"))
            .count() as i64,
        (180 - segment_base) / 3,
        "every whole batch of the segment: {dumped}"
    );
    assert_eq!(
        dumped.lines().last(),
        Some(format!("Found {cut} invalid bytes at the end of {log_name}").as_str())
    );
    assert_eq!(
        stderr(&dump),
        format!(
            "klog: error: {}: truncated batch at position {torn_at}: {cut} bytes do not form a whole batch\n",
            ro_last_log.display()
        )
    );

    // A writer on the read-only mount fails cleanly, naming the file system.
    if mount.is_some() {
        let a = klog(&["append", rd, input.to_str().unwrap()]);
        assert_no_panic(&a, "append on a read-only file system");
        assert_eq!(a.status.code(), Some(2), "append: {}", stderr(&a));
        assert!(
            stderr(&a).contains("Read-only file system"),
            "{}",
            stderr(&a)
        );
    }
    drop(mount);
    let changed = Tree::of(&logs).changes_since(&before);
    assert!(
        changed.is_empty(),
        "a reader changed the log directory: {changed:?}"
    );
}

#[test]
fn sigterm_stops_mirror_run_cleanly() {
    let root = scratch_dir("safety-sigterm-mirror");
    let (a, b) = (root.join("A"), root.join("B"));
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    klog_ok(&["cluster", "init", a_s]);
    klog_ok(&["cluster", "init", b_s]);
    klog_ok(&["topic", "create", a_s, "t", "--partitions", "2"]);
    let input = root.join("in.bin");
    std::fs::write(&input, producer_batches(40)).unwrap();
    for p in 0..2 {
        klog_ok(&[
            "append",
            a.join(format!("t-{p}")).to_str().unwrap(),
            input.to_str().unwrap(),
        ]);
    }
    klog_ok(&["mirror", "create", b_s, "m", "--source", a_s]);
    klog_ok(&["mirror", "add", b_s, "m", "t"]);

    let mut child = Command::new(env!("CARGO_BIN_EXE_klog"))
        .args(["mirror", "run", b_s])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn klog mirror run");
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    let mut mirroring = 0;
    let mut line = String::new();
    while mirroring < 2 {
        line.clear();
        assert!(
            lines.read_line(&mut line).unwrap() > 0,
            "mirror run ended early"
        );
        if line.contains("-> MIRRORING") {
            mirroring += 1;
        }
    }
    // While it runs, the cluster is its: a second writer is refused.
    let second = klog(&[
        "append",
        b.join("t-0").to_str().unwrap(),
        input.to_str().unwrap(),
    ]);
    assert!(stderr(&second).contains(".lock"), "{}", stderr(&second));
    let recover = klog(&["recover", b_s]);
    assert!(!recover.status.success(), "recover ran beside mirror run");
    assert!(stderr(&recover).contains(".lock"), "{}", stderr(&recover));
    let admin = klog(&["topic", "create", b_s, "other"]);
    assert!(stderr(&admin).contains(".lock"), "{}", stderr(&admin));
    // Readers are welcome.
    let describe = klog(&["mirror", "describe", b_s, "--json"]);
    assert!(describe.status.success(), "{}", stderr(&describe));
    let d: serde_json::Value = serde_json::from_str(&stdout(&describe)).unwrap();
    assert_eq!(d["partitions"][0]["state"], "MIRRORING", "{d}");
    let read = klog(&[
        "read",
        b.join("t-1").to_str().unwrap(),
        "--offset",
        "0",
        "--json",
    ]);
    assert!(read.status.success(), "{}", stderr(&read));
    assert!(!b.join(".kafka_cleanshutdown").exists(), "open: no marker");

    signal(&child, "TERM");
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    // The one rule of every long-running writer: stopped by a signal, closed cleanly, 128 + signal.
    assert_eq!(
        status.code(),
        Some(143),
        "mirror run after SIGTERM: {status:?} {err}"
    );
    assert!(err.contains("closing cleanly"), "{err}");

    // Clean: the marker is down, every partition is checkpointed, the lock is free, and the next open
    // rescans nothing.
    assert!(b.join(".kafka_cleanshutdown").exists());
    let rp = std::fs::read_to_string(b.join("recovery-point-offset-checkpoint")).unwrap();
    for p in 0..2 {
        assert!(rp.contains(&format!("t {p} 120")), "{rp}");
    }
    let reports = klog_ok(&["recover", b_s, "--json"]);
    for l in reports.lines() {
        let r: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(r["clean_shutdown"], true, "{r}");
        assert_eq!(r["segments_scanned"], 0, "{r}");
    }
    let v = klog(&["verify", b_s]);
    assert!(v.status.success(), "{}{}", stdout(&v), stderr(&v));
}

#[test]
fn sigterm_closes_a_writer_cleanly_and_the_next_open_rescans_nothing() {
    let root = scratch_dir("safety-sigterm-writer");
    let logs = root.join("logs");
    let dir = logs.join("w-0");
    let mut writer = Writer::start(&dir, 3);
    writer.wait_flushes(3);
    signal(&writer.child, "TERM");
    let status = writer.child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(143),
        "torture after SIGTERM: {status:?}"
    );
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut writer.lines, &mut rest).unwrap();
    assert!(logs.join(".kafka_cleanshutdown").exists());
    let o = klog_ok(&["recover", logs.to_str().unwrap(), "--json"]);
    let r: serde_json::Value = serde_json::from_str(o.trim()).unwrap();
    assert_eq!(r["clean_shutdown"], true, "{r}");
    assert_eq!(r["segments_scanned"], 0, "{r}");
    assert!(
        r["log_end_offset"].as_i64().unwrap() >= writer.flushed,
        "{r}"
    );

    // `klog append` to a fresh directory closes it the same way.
    let fresh = root.join("fresh/f-0");
    let input = root.join("in.bin");
    std::fs::write(&input, producer_batches(3)).unwrap();
    klog_ok(&["append", fresh.to_str().unwrap(), input.to_str().unwrap()]);
    let o = klog_ok(&["recover", root.join("fresh").to_str().unwrap(), "--json"]);
    let r: serde_json::Value = serde_json::from_str(o.trim()).unwrap();
    assert_eq!(
        (r["clean_shutdown"].clone(), r["segments_scanned"].clone()),
        (true.into(), 0.into()),
        "{r}"
    );
}

/// Reads a child's stdout lines until one satisfies `until` (the line itself), failing if it ends first.
fn read_until(lines: &mut impl BufRead, what: &str, until: impl Fn(&str) -> bool) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        let mut line = String::new();
        assert!(
            lines.read_line(&mut line).unwrap() > 0,
            "ended before {what}: {seen:?}"
        );
        let done = until(line.trim_end());
        seen.push(line.trim_end().to_owned());
        if done {
            return seen;
        }
    }
}

/// A long `klog append` stopped by SIGINT (Ctrl-C): exit 130, the batches it reported (and only those)
/// are the log, flushed and checkpointed under the marker; the lock is free for the next writer.
#[test]
fn sigint_stops_a_long_append_cleanly_and_it_exits_130() {
    let root = scratch_dir("safety-sigint-append");
    let logs = root.join("logs");
    let dir = logs.join("a-0");
    let input = root.join("in.bin");
    // Far more batches than fit in the stdout pipe: the append is still running when the signal
    // comes, blocked on its output until the test reads it.
    let total = 20_000;
    std::fs::write(&input, batches_near_now(total, 10, |i, _| format!("k{i}"))).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_klog"))
        .args([
            "append",
            dir.to_str().unwrap(),
            input.to_str().unwrap(),
            "--json",
            "--config",
            "segment.bytes=65536",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn klog append");
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    // The first appended batch: the handler is installed (it is before the first batch).
    let mut reported = read_until(&mut lines, "the first batch", |_| true);
    signal(&child, "INT");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut lines, &mut rest).unwrap();
    reported.extend(rest.lines().map(str::to_owned));
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(
        status.code(),
        Some(130),
        "append after SIGINT: {status:?} {err}"
    );
    assert!(err.contains("append interrupted by signal 2"), "{err}");
    let k = reported.len();
    assert!(
        k < total,
        "the append was cut short: {k} of {total} batches"
    );
    for (i, l) in reported.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let base = 3 * i as i64;
        assert_eq!(
            (v["base_offset"].as_i64(), v["last_offset"].as_i64()),
            (Some(base), Some(base + 2)),
            "{l}"
        );
    }
    // Closed cleanly: marker, recovery point at the end, nothing to rescan; the log is exactly the
    // reported prefix.
    assert!(logs.join(".kafka_cleanshutdown").exists());
    let o = klog_ok(&["recover", logs.to_str().unwrap(), "--json"]);
    let r: serde_json::Value = serde_json::from_str(o.trim()).unwrap();
    assert_eq!(
        (
            &r["clean_shutdown"],
            &r["segments_scanned"],
            &r["log_end_offset"]
        ),
        (&true.into(), &0.into(), &(3 * k as i64).into()),
        "{r}"
    );
    let more = root.join("more.bin");
    std::fs::write(&more, producer_batches(1)).unwrap();
    let next = klog_ok(&[
        "append",
        dir.to_str().unwrap(),
        more.to_str().unwrap(),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(next.trim()).unwrap();
    assert_eq!(v["base_offset"], 3 * k as i64, "{next}");
}

/// A long `klog recover` (hundreds of crashed partitions) stopped by SIGTERM: exit 143, the
/// partitions it reported are recovered and checkpointed, no marker (it did not recover them all), and
/// the next run, with the lock free, finishes the rest and finds every log whole.
#[test]
fn sigterm_stops_a_long_recover_cleanly_and_it_exits_143() {
    let root = scratch_dir("safety-sigterm-recover");
    let logs = root.join("logs");
    let first = logs.join("r-0");
    let input = root.join("in.bin");
    std::fs::write(&input, producer_batches(60)).unwrap();
    klog_ok(&[
        "append",
        first.to_str().unwrap(),
        input.to_str().unwrap(),
        "--config",
        "segment.bytes=20000",
    ]);
    // A crash of a broker with many partitions: no marker, no checkpoints, no indexes.
    let partitions = 300;
    for p in 1..partitions {
        common::kafka::copy_dir(&first, &logs.join(format!("r-{p}")));
    }
    for f in common::sorted_entries(&logs)
        .into_iter()
        .filter(|f| f.is_file())
    {
        std::fs::remove_file(f).unwrap();
    }
    for p in 0..partitions {
        for f in common::sorted_entries(&logs.join(format!("r-{p}"))) {
            if f.extension().is_some_and(|e| e == "index") {
                std::fs::remove_file(f).unwrap();
            }
        }
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_klog"))
        .args([
            "recover",
            logs.to_str().unwrap(),
            "--json",
            "--threads",
            "1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn klog recover");
    // Recovery has begun once it rebuilds its first index (the handler is installed before).
    let began = Instant::now();
    while !(0..partitions).any(|p| {
        common::sorted_entries(&logs.join(format!("r-{p}")))
            .iter()
            .any(|f| f.extension().is_some_and(|e| e == "index"))
    }) {
        assert!(child.try_wait().unwrap().is_none(), "recover ended first");
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "no index rebuilt"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    signal(&child, "TERM");
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(143),
        "recover after SIGTERM: {}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("recover interrupted by signal 15"),
        "{}",
        stderr(&out)
    );
    let reports: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        !reports.is_empty() && reports.len() < partitions,
        "{} of {partitions} partitions recovered before the signal was answered",
        reports.len()
    );
    for r in &reports {
        assert_eq!(
            (&r["log_end_offset"], &r["bytes_truncated"]),
            (&180.into(), &0.into()),
            "{r}"
        );
    }
    assert!(
        !logs.join(".kafka_cleanshutdown").exists(),
        "the marker vouches for partitions the interrupted run never recovered"
    );
    let done = klog_ok(&["recover", logs.to_str().unwrap(), "--json"]);
    let rest: Vec<serde_json::Value> = done
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rest.len(), partitions);
    for r in &rest {
        assert_eq!(
            (&r["log_end_offset"], &r["bytes_truncated"]),
            (&180.into(), &0.into()),
            "{r}"
        );
    }
    assert!(logs.join(".kafka_cleanshutdown").exists());
    let v = klog(&["verify", logs.to_str().unwrap()]);
    assert_eq!(v.status.code(), Some(0), "{}{}", stdout(&v), stderr(&v));
}

/// `klog bench` stopped by SIGTERM after its first workload: exit 143, the workload in progress
/// finished, nothing after it ran, and its scratch directory (the logs it wrote) is gone.
#[test]
fn sigterm_stops_bench_between_workloads_and_it_exits_143() {
    const WORKLOADS: [&str; 5] = ["append", "psm", "parse", "read", "recover"];
    let root = scratch_dir("safety-sigterm-bench");
    let json = root.join("bench.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_klog"))
        .args([
            "bench",
            "--dir",
            root.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ])
        .args(["--backend", "std"])
        .args([
            "--bytes",
            "1MiB",
            "--recover-bytes",
            "1MiB",
            "--segments",
            "10",
        ])
        .args([
            "--psm-batches",
            "2000",
            "--psm-producers",
            "50",
            "--parse-bytes",
            "1MiB",
        ])
        .args(["--random-reads", "50", "--rounds", "1", "--no-kafka"])
        .args(WORKLOADS)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn klog bench");
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    read_until(&mut lines, "the append report", |l| l.starts_with("append"));
    signal(&child, "TERM");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut lines, &mut rest).unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(143), "bench after SIGTERM: {err}");
    // Stopped between workloads (the report of each comes when it is done): those after it never ran.
    let done: usize = err
        .split_once("signal 15: stopped after ")
        .and_then(|(_, t)| t.split_once(" of 5 workloads"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no stop message: {err}"));
    assert!((1..5).contains(&done), "{err}");
    for w in &WORKLOADS[done..] {
        assert!(
            !rest.lines().any(|l| l.starts_with(&format!("{w}:"))),
            "{w} ran after the signal: {rest}"
        );
    }
    assert!(
        !json.exists(),
        "an interrupted bench writes no JSON document"
    );
    let left: Vec<_> = common::sorted_entries(&root)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with(".klog-bench-")
        })
        .collect();
    assert!(left.is_empty(), "scratch left behind: {left:?}");
}
