//! Issue #13, "Done when": one `klog mirror run` process (the real binary, a child) rides out a source
//! outage (the source directory moved away for a few seconds and back) and a full destination disk
//! (a small tmpfs filled up, space freed later) and converges byte-identical without a restart. The
//! source's own writer (`klog append`) keeps working beside it: a local source is read, not locked.
//!
//! The full disk is a real one: the destination lives on a tmpfs mounted for the test, which needs root.
//! Without root the test says so and skips, except in CI (`CI` set or `KLOG_REQUIRE_KAFKA=1`), where
//! it fails.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{batches_near_now, klog, klog_ok, required, scratch_dir, stderr, stdout};
use serde_json::Value;

/// A tmpfs of `size` mounted at `dir`, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .is_ok_and(|o| o.status.success());
        ok.then(|| Tmpfs(dir.to_owned()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).output();
    }
}

/// `n` plain batches of 3 records of `value_bytes` each, timestamps near now.
fn batches(n: usize, value_bytes: usize, tag: &str) -> Vec<u8> {
    batches_near_now(n, value_bytes, |i, j| format!("{tag}-{i}-{j}"))
}

/// Appends `bytes` to the source partition `dir` with `klog append` (a writer of the source).
fn append(dir: &Path, scratch: &Path, bytes: &[u8]) {
    let input = scratch.join("in.bin");
    std::fs::write(&input, bytes).unwrap();
    klog_ok(&["append", dir.to_str().unwrap(), input.to_str().unwrap()]);
}

/// A running `klog mirror run ROOT --json`; its output lines are collected as they come.
struct MirrorRun {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl MirrorRun {
    fn start(root: &Path) -> MirrorRun {
        let mut child = Command::new(env!("CARGO_BIN_EXE_klog"))
            .args(["mirror", "run", root.to_str().unwrap(), "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn klog mirror run");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = BufReader::new(child.stdout.take().unwrap());
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        MirrorRun { child, lines }
    }

    fn line_count(&self) -> usize {
        self.lines.lock().unwrap().len()
    }

    /// The error events printed after the first `from` lines.
    fn errors_since(&self, from: usize) -> Vec<String> {
        self.lines.lock().unwrap()[from..]
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["event"] == "error")
            .map(|v| v["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// SIGTERM, then the exit status and stderr.
    fn stop(mut self) -> (std::process::ExitStatus, String) {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = self.child.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(self.child.stderr.as_mut().unwrap(), &mut err).unwrap();
        (status, err)
    }
}

impl Drop for MirrorRun {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `check` until it holds; fails naming `what` (and `context()`) after a generous deadline.
fn wait_for(what: &str, mut check: impl FnMut() -> bool, context: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !check() {
        assert!(
            Instant::now() < deadline,
            "gave up waiting for {what}: {}",
            context()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn same_log(a: &Path, b: &Path) -> bool {
    let seg = "00000000000000000000.log";
    match (std::fs::read(a.join(seg)), std::fs::read(b.join(seg))) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Writes zeros into `path` until the file system is full.
fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 64 << 10];
    loop {
        if let Err(e) = f.write_all(&chunk) {
            assert_eq!(
                e.raw_os_error(),
                Some(28),
                "filling {}: {e}",
                path.display()
            );
            break;
        }
    }
    let _ = f.sync_all();
}

#[test]
fn one_mirror_run_rides_out_a_source_outage_and_a_full_disk() {
    let root = scratch_dir("mirror-heal-cli");
    let disk = root.join("b-disk");
    let Some(_tmpfs) = Tmpfs::mount(&disk, "4m") else {
        assert!(
            std::env::var_os("CI").is_none() && !required("KLOG_REQUIRE_KAFKA"),
            "CI runs as root and must test a real full file system (mount -t tmpfs failed)"
        );
        common::skip("cannot mount a tmpfs here (not root)");
        return;
    };
    let (a, b) = (root.join("A"), disk.join("B"));
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    let (at, bt) = (a.join("t-0"), b.join("t-0"));
    klog_ok(&["cluster", "init", a_s]);
    klog_ok(&["cluster", "init", b_s]);
    klog_ok(&["topic", "create", a_s, "t"]);
    append(&at, &root, &batches(20, 300, "first"));
    klog_ok(&["mirror", "create", b_s, "m", "--source", a_s]);
    klog_ok(&["mirror", "add", b_s, "m", "t"]);

    let run = MirrorRun::start(&b);
    let context = || format!("output: {:?}", run.lines.lock().unwrap());
    wait_for("the first copy", || same_log(&at, &bt), context);

    // The source's own writer works while the mirror reads it, and the mirror follows.
    append(&at, &root, &batches(10, 300, "beside"));
    wait_for("the appends beside the run", || same_log(&at, &bt), context);

    // A source outage: the directory moves away for a few seconds and comes back.
    let seen = run.line_count();
    let away = root.join("A.away");
    std::fs::rename(&a, &away).unwrap();
    wait_for(
        "the run to notice the source is gone",
        || !run.errors_since(seen).is_empty(),
        context,
    );
    std::thread::sleep(Duration::from_secs(3));
    std::fs::rename(&away, &a).unwrap();
    append(&at, &root, &batches(10, 300, "after-outage"));
    wait_for(
        "convergence after the source came back",
        || same_log(&at, &bt),
        context,
    );

    // A full destination disk, freed later.
    let seen = run.line_count();
    let filler = disk.join("filler");
    fill(&filler);
    append(&at, &root, &batches(100, 2000, "disk-full"));
    wait_for(
        "the run to report the full disk",
        || {
            run.errors_since(seen)
                .iter()
                .any(|e| e.contains("No space left on device"))
        },
        context,
    );
    assert!(!same_log(&at, &bt));
    std::fs::remove_file(&filler).unwrap();
    wait_for(
        "convergence after space was freed",
        || same_log(&at, &bt),
        context,
    );
    let d: Value = serde_json::from_str(&klog_ok(&["mirror", "describe", b_s, "--json"])).unwrap();
    assert_eq!(d["partitions"][0]["state"], "MIRRORING", "{d}");

    let errors = run.errors_since(0);
    let (status, err) = run.stop();
    // Stopped by SIGTERM after a clean close: 128 + 15, the rule of every long-running writer.
    assert_eq!(status.code(), Some(143), "mirror run: {status:?} {err}");
    assert!(
        !errors
            .iter()
            .any(|e| e.contains("reopen it to recover") || e.contains("is in use")),
        "a retry did not heal: {errors:?}"
    );
    // The same process did it all: one run, closed cleanly, and the copy verifies.
    assert!(b.join(".kafka_cleanshutdown").exists());
    let v = klog(&["verify", b_s]);
    assert!(v.status.success(), "{}{}", stdout(&v), stderr(&v));
    assert!(same_log(&at, &bt));
}
