//! One writer per log directory, judged by real Kafka: a running broker's `.lock` refuses klog's writers
//! (and lets its readers in), and a klog writer's lock refuses a broker, which fails to start with Kafka's
//! own "Failed to acquire lock" error. Kafka locks with `FileChannel.tryLock` (a POSIX `fcntl` lock), which
//! an `flock` would not see.

mod common;

use std::io::BufRead;
use std::process::{Command, Stdio};

use common::kafka::{kafka_available, Cluster};
use common::{klog, scratch_dir, stderr};

#[test]
fn kafka_and_klog_exclude_each_other_on_a_log_directory() {
    if !kafka_available() {
        return;
    }
    let root = scratch_dir("kafka-lock");
    let cluster = Cluster::format(&root.join("kafka"));
    let data = cluster.data.clone();
    let broker = cluster.start();

    let input = root.join("in.bin");
    std::fs::write(&input, b"").unwrap();
    let part = data.join("klog-0");
    for args in [
        vec!["append", part.to_str().unwrap(), input.to_str().unwrap()],
        vec!["recover", data.to_str().unwrap()],
    ] {
        let o = klog(&args);
        assert!(!o.status.success(), "klog {args:?} wrote beside a broker");
        let err = stderr(&o);
        assert!(
            err.contains("Failed to acquire lock on file .lock")
                && err.contains(data.to_str().unwrap()),
            "klog {args:?}: {err}"
        );
        assert!(err.contains("pid "), "the broker's pid is named: {err}");
    }
    assert!(!part.exists(), "the refused append created nothing");
    // Readers need no lock: a dry run over the broker's live directory works.
    let dry = klog(&["recover", data.to_str().unwrap(), "--dry-run", "--json"]);
    assert!(dry.status.success(), "{}", stderr(&dry));
    broker.stop();

    // Now klog holds the directory (a writer that runs until killed): the broker refuses to start.
    let mut writer = Command::new(env!("CARGO_BIN_EXE_klog"))
        .args(["torture", part.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kept open while the broker tries: a closed pipe would end the writer (and free the lock).
    let mut lines = std::io::BufReader::new(writer.stdout.take().unwrap());
    let mut first = String::new();
    lines.read_line(&mut first).unwrap();
    assert!(first.starts_with("opened"), "{first}");
    let drain = std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
    let refused = std::panic::catch_unwind(|| cluster.start());
    assert!(
        writer.try_wait().unwrap().is_none(),
        "the klog writer was still running while the broker tried"
    );
    writer.kill().unwrap();
    let _ = drain.join();
    writer.wait().unwrap();
    if let Ok(broker) = refused {
        broker.kill();
        panic!("a Kafka broker started on a directory klog was writing");
    }
    let log = std::fs::read_to_string(root.join("kafka/broker.log")).unwrap();
    let words = format!(
        "Failed to acquire lock on file .lock in {}. A Kafka instance in another process or thread is using this directory.",
        data.display()
    );
    assert!(
        log.contains(&words),
        "the broker's own words are in its log"
    );
}
