//! `klog cluster export --kafka OUT` without a broker: a mirror partition not failed over is refused
//! (and `--force` takes it), a non-empty OUT and a locked cluster are refused, the partition files reach
//! OUT byte for byte (sealed segments linked, the rest copied), the JSON report's fields, group records
//! re-placed for another `offsets.topic.num.partitions`, and a kill at every step of an export leaves an
//! OUT without `meta.properties` that a second export names as incomplete. The broker's side is
//! `tests/kafka_export.rs`.

mod common;

use std::path::{Path, PathBuf};

use common::{fixtures, klog, klog_ok, scratch_dir, stderr};
use serde_json::Value;

fn batch(name: &str) -> String {
    fixtures()
        .join("batches")
        .join(name)
        .to_str()
        .unwrap()
        .to_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A source cluster A with topic `t` (2 partitions, small segments so t-0 has sealed ones) and a
/// consumer group's commit, and a cluster B mirroring it (MIRRORING after one run).
fn mirrored(dir: &Path) -> (PathBuf, PathBuf) {
    let (a, b) = (dir.join("A"), dir.join("B"));
    klog_ok(&["cluster", "init", s(&a)]);
    klog_ok(&["cluster", "init", s(&b)]);
    klog_ok(&[
        "topic",
        "create",
        s(&a),
        "t",
        "--partitions",
        "2",
        "--config",
        "segment.bytes=1000",
    ]);
    let t0 = a.join("t-0");
    for f in [
        "idempotent-none.bin",
        "txn-none.bin",
        "control-commit.bin",
        "idempotent-gzip.bin",
    ] {
        klog_ok(&["append", s(&t0), &batch(f)]);
    }
    klog_ok(&["topic", "elect", s(&a), "t"]);
    klog_ok(&["append", s(&t0), &batch("idempotent-lz4.bin")]);
    klog_ok(&["append", s(&a.join("t-1")), &batch("idempotent-none.bin")]);
    klog_ok(&["group", "commit", s(&a), "g1", "t", "0", "5"]);
    klog_ok(&["mirror", "create", s(&b), "m", "--source", s(&a)]);
    klog_ok(&["mirror", "add", s(&b), "m", "t"]);
    klog_ok(&["mirror", "run", s(&b), "--until-idle"]);
    (a, b)
}

fn fail_over(b: &Path) {
    klog_ok(&["mirror", "remove", s(b), "m", "t"]);
    let run = klog_ok(&["mirror", "run", s(b), "--until-idle"]);
    assert!(run.contains("STOPPING -> STOPPED"), "{run}");
}

fn export_json(args: &[&str]) -> Value {
    let mut all = vec!["cluster", "export"];
    all.extend_from_slice(args);
    all.push("--json");
    serde_json::from_str(&klog_ok(&all)).unwrap()
}

#[test]
fn a_partition_still_mirroring_is_refused_unless_forced() {
    let dir = scratch_dir("cli_export_mirroring");
    let (_, b) = mirrored(&dir);
    let out = dir.join("OUT");
    let o = klog(&["cluster", "export", s(&b), "--kafka", s(&out)]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("t-0 MIRRORING") && err.contains("t-1 MIRRORING") && err.contains("--force"),
        "{err}"
    );
    assert!(!out.join("meta.properties").exists());
    let r = export_json(&[s(&b), "--kafka", s(&out), "--force"]);
    assert_eq!(
        r["forced"],
        serde_json::json!(["t-0 MIRRORING", "t-1 MIRRORING"])
    );
    assert!(out.join("meta.properties").is_file());
}

/// A relative OUT is printed absolute in the broker config: Kafka resolves `log.dirs` against its own
/// working directory, not the one the export ran in.
#[test]
fn the_printed_log_dirs_is_absolute() {
    let dir = scratch_dir("cli_export_relative");
    let (_, b) = mirrored(&dir);
    fail_over(&b);
    let rel = std::process::Command::new(env!("CARGO_BIN_EXE_klog"))
        .current_dir(&dir)
        .args([
            "cluster",
            "export",
            s(&b),
            "--kafka",
            "OUT-relative",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(rel.status.success(), "{}", stderr(&rel));
    let rel: Value = serde_json::from_slice(&rel.stdout).unwrap();
    let abs = dir.join("OUT-relative").display().to_string();
    assert!(
        rel["broker_config"]
            .as_array()
            .unwrap()
            .contains(&Value::from(format!("log.dirs={abs}"))),
        "{}",
        rel["broker_config"]
    );
}

#[test]
fn export_after_failover_writes_the_files_byte_for_byte_and_reports_them() {
    let dir = scratch_dir("cli_export_stopped");
    let (_, b) = mirrored(&dir);
    fail_over(&b);
    let out = dir.join("OUT");
    let r = export_json(&[s(&b), "--kafka", s(&out), "--node-id", "3"]);
    let describe: Value =
        serde_json::from_str(&klog_ok(&["mirror", "describe", s(&b), "--json"])).unwrap();
    let row = |p: i64| {
        describe["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["topic"] == "t" && r["partition"] == p)
            .unwrap()
            .clone()
    };
    // The JSON contract (docs/cli.md).
    for key in [
        "out",
        "cluster_id",
        "node_id",
        "directory_id",
        "offsets_partitions",
        "offsets_replaced",
        "metadata_snapshot",
        "next_producer_id",
        "topics",
        "partitions",
        "configs_changed",
        "forced",
        "clean_shutdown",
        "bytes_linked",
        "bytes_copied",
        "files_linked",
        "files_copied",
        "broker_config",
    ] {
        assert!(r.get(key).is_some(), "no {key} in {r}");
    }
    assert_eq!(r["node_id"], 3);
    assert_eq!(r["offsets_partitions"], 50);
    assert_eq!(r["offsets_replaced"], false);
    assert_eq!(r["clean_shutdown"], true);
    assert_eq!(r["forced"], serde_json::json!([]));
    assert_eq!(r["topics"], serde_json::json!(["t", "__consumer_offsets"]));
    // The failover's barrier emptied the producer state; the ids are still in the batches (0 to 5):
    // a new producer on the broker must not be handed one of them.
    assert_eq!(describe["partitions"][0]["producers"], 0);
    assert_eq!(r["next_producer_id"], 6);
    let cluster_id = std::fs::read_to_string(b.join("meta.properties")).unwrap();
    assert!(cluster_id.contains(&format!("cluster.id={}", r["cluster_id"].as_str().unwrap())));
    let props = std::fs::read_to_string(out.join("meta.properties")).unwrap();
    for line in [
        "version=1".to_owned(),
        "node.id=3".to_owned(),
        format!("cluster.id={}", r["cluster_id"].as_str().unwrap()),
        format!("directory.id={}", r["directory_id"].as_str().unwrap()),
    ] {
        assert!(props.lines().any(|l| l == line), "{line} not in {props}");
    }
    assert!(r["broker_config"]
        .as_array()
        .unwrap()
        .contains(&Value::from("controller.quorum.voters=3@localhost:9093")));
    let parts = r["partitions"].as_array().unwrap();
    let t0 = parts
        .iter()
        .find(|p| p["topic"] == "t" && p["partition"] == 0)
        .unwrap();
    let d0 = row(0);
    // The barrier's epoch is the partition's leader epoch: the export's epoch is not below it.
    assert_eq!(t0["leader_epoch"], d0["leader_epoch"]);
    assert_eq!(t0["log_end_offset"], d0["log_end_offset"]);
    assert_eq!(t0["high_watermark"], d0["high_watermark"]);
    assert_eq!(t0["mirror_state"], "STOPPED");
    assert!(t0["latest_log_epoch"].as_i64().unwrap() <= t0["leader_epoch"].as_i64().unwrap());
    assert!(
        t0["files_linked"].as_u64().unwrap() >= 1,
        "sealed segments are linked: {t0}"
    );
    assert!(r["bytes_linked"].as_u64().unwrap() > 0 && r["bytes_copied"].as_u64().unwrap() > 0);
    // Every file of the partition directories is there byte for byte; sealed logs share the inode,
    // the active segment does not.
    for p in ["t-0", "t-1", "__consumer_offsets-"] {
        let dirs: Vec<_> = std::fs::read_dir(&b)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with(p))
            .collect();
        assert!(!dirs.is_empty(), "{p}");
        for d in dirs {
            let mut logs: Vec<_> = std::fs::read_dir(b.join(&d))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            logs.sort();
            for f in &logs {
                assert_eq!(
                    std::fs::read(b.join(&d).join(f)).unwrap(),
                    std::fs::read(out.join(&d).join(f)).unwrap(),
                    "{d}/{f}"
                );
            }
            let segs: Vec<_> = logs.iter().filter(|f| f.ends_with(".log")).collect();
            use std::os::unix::fs::MetadataExt;
            for (i, f) in segs.iter().enumerate() {
                let nlink = std::fs::metadata(out.join(&d).join(f)).unwrap().nlink();
                let active = i + 1 == segs.len();
                assert_eq!(nlink, if active { 1 } else { 2 }, "{d}/{f}");
            }
        }
    }
    for f in [
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "replication-offset-checkpoint",
        ".kafka_cleanshutdown",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let hw = std::fs::read_to_string(out.join("replication-offset-checkpoint")).unwrap();
    assert!(
        hw.lines()
            .any(|l| l == format!("t 0 {}", d0["high_watermark"])),
        "{hw}"
    );
    assert!(Path::new(r["metadata_snapshot"].as_str().unwrap()).is_file());
    // klog goes on writing its own files: an append to t-0 leaves the exported copy unchanged.
    let before: Vec<_> = std::fs::read_dir(out.join("t-0"))
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (p.clone(), std::fs::read(&p).unwrap())
        })
        .collect();
    klog_ok(&["append", s(&b.join("t-0")), &batch("idempotent-none.bin")]);
    for (p, bytes) in before {
        assert_eq!(std::fs::read(&p).unwrap(), bytes, "{}", p.display());
    }
}

#[test]
fn an_out_inside_the_cluster_root_is_refused_and_nothing_is_created() {
    let dir = scratch_dir("cli_export_inside_root");
    let (_, b) = mirrored(&dir);
    fail_over(&b);
    let before: Vec<_> = std::fs::read_dir(&b)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    // A new directory under the root, one under a partition directory, the root itself, and the root
    // reached through a symbolic link: each would put Kafka's files among klog's.
    let link = dir.join("link-to-b");
    std::os::unix::fs::symlink(&b, &link).unwrap();
    // A dangling link whose target would be created inside the root (seen failing: a bare "File exists").
    let dangling = dir.join("dangling-into-b");
    std::os::unix::fs::symlink(b.join("not-yet"), &dangling).unwrap();
    for out in [
        b.join("kafka-out"),
        b.join("t-0").join("out"),
        b.clone(),
        link.join("via-link"),
        dangling.clone(),
        dangling.join("below"),
    ] {
        let o = klog(&["cluster", "export", s(&b), "--kafka", s(&out)]);
        assert!(!o.status.success(), "{} accepted", out.display());
        assert!(
            stderr(&o).contains("inside the cluster"),
            "{}: {}",
            out.display(),
            stderr(&o)
        );
    }
    let after: Vec<_> = std::fs::read_dir(&b)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before, after, "the cluster root gained or lost an entry");
    assert!(!b.join("t-0").join("out").exists());
}

#[test]
fn a_non_empty_out_and_a_locked_cluster_are_refused() {
    let dir = scratch_dir("cli_export_refusals");
    let (_, b) = mirrored(&dir);
    fail_over(&b);
    let out = dir.join("OUT");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("something"), b"x").unwrap();
    let o = klog(&["cluster", "export", s(&b), "--kafka", s(&out)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("not empty"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        1,
        "nothing written"
    );
    // A finished export is refused as a Kafka log directory, not as an incomplete one.
    let done = dir.join("DONE");
    klog_ok(&["cluster", "export", s(&b), "--kafka", s(&done)]);
    let o = klog(&["cluster", "export", s(&b), "--kafka", s(&done)]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("already holds a Kafka log directory"),
        "{}",
        stderr(&o)
    );
    // Another writer holds the cluster's lock.
    let lock = klog::log::dir_lock::DirLock::acquire(&klog::log::io::StdStorage, &b).unwrap();
    let fresh = dir.join("FRESH");
    let o = klog(&["cluster", "export", s(&b), "--kafka", s(&fresh)]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(".lock") || stderr(&o).contains("lock"),
        "{}",
        stderr(&o)
    );
    assert!(!fresh.join("meta.properties").exists());
    drop(lock);
}

#[test]
fn a_kill_at_every_step_leaves_no_meta_properties_and_is_named_incomplete() {
    let dir = scratch_dir("cli_export_kill");
    let (_, b) = mirrored(&dir);
    fail_over(&b);
    let mut killed = 0;
    for step in 1.. {
        let out = dir.join(format!("OUT-{step}"));
        let step_s = step.to_string();
        let o = klog(&[
            "cluster",
            "export",
            s(&b),
            "--kafka",
            s(&out),
            "--abort-after-step",
            &step_s,
        ]);
        if o.status.success() {
            break;
        }
        if out.join("meta.properties").exists() {
            // Killed after the last step: the export is whole.
            break;
        }
        if std::fs::read_dir(&out).unwrap().next().is_none() {
            // Killed before anything reached OUT: an empty directory, which an export may use.
            continue;
        }
        killed += 1;
        let again = klog(&["cluster", "export", s(&b), "--kafka", s(&out)]);
        assert!(!again.status.success(), "step {step}");
        assert!(
            stderr(&again).contains("incomplete export"),
            "step {step}: {}",
            stderr(&again)
        );
        assert!(step < 100, "the export never finished");
    }
    assert!(killed >= 5, "only {killed} steps were killed");
    // The cluster is still whole and exportable after every kill.
    let r = export_json(&[s(&b), "--kafka", s(&dir.join("OUT-final"))]);
    assert_eq!(r["partitions"].as_array().unwrap().len(), 3);
}

#[test]
fn group_records_are_re_placed_for_another_offsets_partition_count() {
    let dir = scratch_dir("cli_export_offsets");
    let (_, b) = mirrored(&dir);
    fail_over(&b);
    for g in ["g2", "g3", "another-group"] {
        klog_ok(&["group", "commit", s(&b), g, "t", "1", "1"]);
    }
    klog_ok(&["group", "commit", s(&b), "g2", "t", "0", "3"]);
    let out = dir.join("OUT");
    let r = export_json(&[s(&b), "--kafka", s(&out), "--offsets-partitions", "7"]);
    assert_eq!(r["offsets_replaced"], true);
    assert_eq!(r["offsets_partitions"], 7);
    let mut seen = Vec::new();
    for g in ["g1", "g2", "g3", "another-group"] {
        let q = klog::log::coordinator::partition_for_group(g, 7);
        let file = out
            .join(format!("__consumer_offsets-{q}"))
            .join("00000000000000000000.log");
        let dump = klog_ok(&["dump", "--json", "--offsets-decoder", "--deep", s(&file)]);
        assert!(
            dump.contains(&format!("\"{g}\"")),
            "{g} not in partition {q}: {dump}"
        );
        seen.push(q);
    }
    // No partition directory beyond the target's count, and none for a partition without a group.
    for e in std::fs::read_dir(&out).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if let Some(q) = name.strip_prefix("__consumer_offsets-") {
            let q: u32 = q.parse().unwrap();
            assert!(seen.contains(&q), "{name}");
        }
    }
    // g2's two commits keep their order: the later one (t-0 at 3) after its t-1 commit.
    let q = klog::log::coordinator::partition_for_group("g2", 7);
    let file = out
        .join(format!("__consumer_offsets-{q}"))
        .join("00000000000000000000.log");
    let dump = klog_ok(&[
        "dump",
        "--offsets-decoder",
        "--deep",
        "--print-data-log",
        s(&file),
    ]);
    let first = dump.find("\"partition\":1").expect("g2's t-1 commit");
    let second = dump.find("\"partition\":0").expect("g2's t-0 commit");
    assert!(first < second, "{dump}");
}
