//! `io_backend=auto` resolved through the log directory's measured decision by the CLI's writers
//! (issue #28): the first writer's open measures and records `klog-io-backend`, the next reads it back,
//! the backend each writer took (named by its `-v` line) is the recorded choice for its workload, a
//! forced backend consults nothing, and a reader neither probes nor writes the file.

mod common;

use std::path::Path;
use std::process::Command;

use common::{scratch_dir, stderr};
use klog::log::io::{backend_name, AutoDecision, IoWorkload, AUTO_DECISION_FILE};

const BATCHES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/fixtures/batches/idempotent-none.bin"
);

/// Runs `klog -v ARGS` and returns its stderr (the command must succeed).
fn klog_v(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_klog"))
        .arg("-v")
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "klog {args:?}: {}", stderr(&out));
    stderr(&out)
}

/// The fields of the `io_backend chosen` line for `dir` (exactly one).
fn chosen(stderr: &str, dir: &Path) -> (String, String, String, String) {
    let dir_field = format!("dir={}", dir.display());
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("io_backend chosen") && l.contains(&dir_field))
        .collect();
    assert_eq!(lines.len(), 1, "one choice line for {dir_field}: {stderr}");
    let field = |name: &str| -> String {
        let at = lines[0]
            .find(&format!(" {name}="))
            .unwrap_or_else(|| panic!("no {name}= in {}", lines[0]));
        let rest = &lines[0][at + name.len() + 2..];
        rest.split(' ').next().unwrap_or("").to_owned()
    };
    (
        field("workload"),
        field("backend"),
        field("reason"),
        field("decision"),
    )
}

fn recorded(root: &Path) -> AutoDecision {
    let text = std::fs::read_to_string(root.join(AUTO_DECISION_FILE)).expect("decision recorded");
    AutoDecision::decode(&text).expect("the recorded decision parses")
}

fn workload(key: &str) -> IoWorkload {
    match key {
        "buffered" => IoWorkload::Buffered,
        "durable" => IoWorkload::Durable,
        "many_partitions" => IoWorkload::ManyPartitions,
        other => panic!("unknown workload {other}"),
    }
}

/// The backend a writer took is the recorded choice for its workload (std where io_uring chosen by
/// the decision cannot open in this process, said by `reason=unavailable`).
fn assert_took_the_recorded_choice(line: &(String, String, String, String), root: &Path) {
    let (w, backend, reason, _) = line;
    let expected = backend_name(recorded(root).backend(workload(w)));
    if reason != "unavailable" {
        assert_eq!(backend, expected, "{line:?}");
    } else {
        assert_eq!(backend, "std", "{line:?}");
    }
}

#[test]
fn append_measures_then_reads_the_record_and_takes_its_choice() {
    let root = scratch_dir("cli-auto-append");
    let part = root.join("orders-0");
    let part = part.to_str().unwrap();

    let first = chosen(&klog_v(&["append", part, BATCHES]), &root);
    assert_eq!(first.0, "buffered", "append without flush.messages=1");
    assert_eq!(first.3, "measured", "{first:?}");
    assert!(root.join(AUTO_DECISION_FILE).exists());
    assert_took_the_recorded_choice(&first, &root);
    let written = std::fs::read(root.join(AUTO_DECISION_FILE)).unwrap();

    let second = chosen(&klog_v(&["append", part, BATCHES]), &root);
    assert_eq!(second.3, "cached", "read back, not measured: {second:?}");
    assert_eq!(second.1, first.1);
    assert_eq!(
        std::fs::read(root.join(AUTO_DECISION_FILE)).unwrap(),
        written,
        "a cached decision is not rewritten"
    );

    // flush.messages=1: every append synced, so the durable class.
    let durable = chosen(
        &klog_v(&["append", part, BATCHES, "--config", "flush.messages=1"]),
        &root,
    );
    assert_eq!(durable.0, "durable");
    assert_eq!(durable.3, "cached");
    assert_took_the_recorded_choice(&durable, &root);

    // `klog clean` is a writer of the same directory: buffered, the recorded choice read back; its dry
    // run is a reader and names no choice.
    let rootp = root.to_str().unwrap();
    let clean = chosen(&klog_v(&["clean", rootp]), &root);
    assert_eq!(
        (clean.0.as_str(), clean.3.as_str()),
        ("buffered", "cached"),
        "{clean:?}"
    );
    assert_took_the_recorded_choice(&clean, &root);
    let dry = klog_v(&["clean", "--dry-run", rootp]);
    assert!(!dry.contains("io_backend chosen"), "{dry}");

    // Forced: no decision consulted.
    let forced = chosen(
        &klog_v(&["append", part, BATCHES, "--config", "io_backend=std"]),
        &root,
    );
    assert_eq!(
        (forced.1.as_str(), forced.2.as_str(), forced.3.as_str()),
        ("std", "forced", "none")
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_cluster_writer_takes_the_durable_choice_and_a_reader_probes_nothing() {
    let root = scratch_dir("cli-auto-cluster");
    let r = root.to_str().unwrap();
    let init = chosen(&klog_v(&["cluster", "init", r]), &root);
    assert_eq!((init.0.as_str(), init.3.as_str()), ("durable", "measured"));
    assert_took_the_recorded_choice(&init, &root);

    let create = chosen(&klog_v(&["topic", "create", r, "orders"]), &root);
    assert_eq!(
        (create.0.as_str(), create.3.as_str()),
        ("durable", "cached")
    );
    assert_took_the_recorded_choice(&create, &root);

    // A reader: no choice line, and the recorded file untouched (removed here: not written back).
    std::fs::remove_file(root.join(AUTO_DECISION_FILE)).unwrap();
    let describe = klog_v(&["mirror", "describe", r]);
    assert!(!describe.contains("io_backend chosen"), "{describe}");
    let read = klog_v(&[
        "read",
        root.join("orders-0").to_str().unwrap(),
        "--offset",
        "0",
    ]);
    assert!(!read.contains("io_backend chosen"), "{read}");
    assert!(
        !root.join(AUTO_DECISION_FILE).exists(),
        "a reader writes no decision"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_root_that_holds_no_cluster_is_refused_with_nothing_probed() {
    let root = scratch_dir("cli-auto-nocluster");
    std::fs::create_dir_all(&root).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_klog"))
        .args(["topic", "create", root.to_str().unwrap(), "orders"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("not a klog cluster"),
        "{}",
        stderr(&out)
    );
    assert!(!root.join(AUTO_DECISION_FILE).exists());
    std::fs::remove_dir_all(&root).unwrap();
}
