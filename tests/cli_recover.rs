//! `klog recover` and `klog verify`: on Kafka's own directories (rescanned, indexes rebuilt byte for byte),
//! on a directory corrupted in the middle, on one killed mid-write, and `--dry-run` writing nothing.

mod common;

use std::path::{Path, PathBuf};

use common::{fixture_manifest, fixtures, klog, scratch_dir, shared_fixtures, stderr, stdout};
use serde_json::Value;

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_tree(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
            let mut perm = std::fs::metadata(&dest).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perm.set_readonly(false);
            std::fs::set_permissions(&dest, perm).unwrap();
        }
    }
}

fn json_lines(s: &str) -> Vec<Value> {
    s.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn tree_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v = Vec::new();
    for e in common::sorted_entries(dir) {
        if e.is_dir() {
            v.extend(tree_bytes(&e));
        } else {
            v.push((e.clone(), std::fs::read(&e).unwrap()));
        }
    }
    v
}

/// The broker's log directory after its clean shutdown, every index deleted: `klog recover` rebuilds each
/// `.index`, `.timeindex` and `.txnindex` as Kafka wrote it and finds the log end the manifest records.
#[test]
fn kafka_directories_recover_to_the_same_end_with_byte_identical_indexes() {
    let root = scratch_dir("recover-kafka-own").join("logs");
    copy_tree(&fixtures().join("kafka-segments/clean"), &root);
    let originals = index_files(&root);
    assert!(originals.len() >= 16, "{} index files", originals.len());
    let manifest = fixture_manifest();
    let mut ends: Vec<(String, i64)> = manifest["partitions"]["clean"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(p, v)| (p.clone(), v["log_end_offset"].as_i64().unwrap()))
        .collect();
    ends.sort();
    let reports = recover_without_indexes(&root, &originals);
    assert_eq!(partition_ends(&reports), ends);
    assert!(reports
        .iter()
        .all(|r| r["truncated"] == serde_json::json!([]) && r["bytes_truncated"] == 0));
}

/// The broker's partition as SIGKILL left it (active indexes preallocated, no clean-shutdown marker) recovers
/// to what Kafka's own recovery of the same crash wrote: every file byte for byte.
#[test]
fn a_killed_kafka_directory_recovers_to_what_kafka_recovered() {
    let root = scratch_dir("recover-kafka-killed").join("logs");
    copy_tree(&fixtures().join("kafka-segments/killed"), &root);
    let out = klog(&["recover", root.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let reports = json_lines(&stdout(&out));
    let end = fixture_manifest()["partitions"]["clean"]["workload-0"]["log_end_offset"].clone();
    assert_eq!(reports.len(), 1, "{reports:?}");
    let r = &reports[0];
    assert_eq!(r["clean_shutdown"], false, "{r}");
    assert_eq!(
        (&r["log_end_offset"], &r["truncated"]),
        (&end, &serde_json::json!([])),
        "{r}"
    );
    let kafkas = fixtures().join("kafka-segments/clean/workload-0");
    let ours = root.join("workload-0");
    for ext in ["log", "index", "timeindex", "txnindex"] {
        let names = |d: &Path| -> Vec<PathBuf> {
            common::sorted_entries(d)
                .into_iter()
                .filter(|p| p.extension().is_some_and(|e| e == ext))
                .map(|p| PathBuf::from(p.file_name().unwrap()))
                .collect()
        };
        assert_eq!(names(&ours), names(&kafkas), ".{ext} files");
        for name in names(&kafkas) {
            let same = std::fs::read(ours.join(&name)).unwrap()
                == std::fs::read(kafkas.join(&name)).unwrap();
            assert!(same, "{name:?} differs from Kafka's");
        }
    }
    let out = klog(&["verify", root.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stdout(&out));
}

/// `verify` of the SIGKILLed broker's directory before any recovery: the active segment's preallocated,
/// untrimmed `.index` and `.timeindex` are one note each (derived state recovery rebuilds), not one
/// problem per zero slot (1,704 lines before), and the directory verifies.
#[test]
fn a_killed_kafka_directory_verifies_with_one_note_per_untrimmed_index() {
    let root = scratch_dir("verify-kafka-killed").join("logs");
    copy_tree(&fixtures().join("kafka-segments/killed"), &root);
    let out = klog(&["verify", root.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stdout(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    let dir = root.join("workload-0").display().to_string();
    assert_eq!(
        lines,
        vec![
            format!("{dir}/00000000000000000214.index: note: 512 zero-filled slots from byte 0: a preallocated index not trimmed (its broker did not stop cleanly); rebuilt from the .log by the next open"),
            format!("{dir}/00000000000000000214.timeindex: note: 341 zero-filled slots from byte 0: a preallocated index not trimmed (its broker did not stop cleanly); rebuilt from the .log by the next open"),
            format!("{dir}: ok"),
        ],
    );
    let out = klog(&["verify", root.to_str().unwrap(), "--json"]);
    assert!(out.status.success());
    let v = &json_lines(&stdout(&out))[0];
    assert_eq!(
        (&v["ok"], &v["problems"]),
        (&Value::Bool(true), &serde_json::json!([])),
        "{v}"
    );
    assert_eq!(v["notes"].as_array().map(Vec::len), Some(2), "{v}");
}

/// A cleanly stopped broker's `__cluster_metadata-0` has no `.index` or `.timeindex` (Kafka never loaded
/// them): derived state, noted, and the directory verifies (it exited 1 before).
#[test]
fn a_clean_metadata_log_without_indexes_verifies() {
    let root = scratch_dir("verify-kafka-clean").join("logs");
    copy_tree(&fixtures().join("kafka-segments/clean"), &root);
    let meta = root.join("__cluster_metadata-0");
    assert!(!meta.join("00000000000000000000.index").exists());
    let out = klog(&["verify", meta.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stdout(&out));
    let v = &json_lines(&stdout(&out))[0];
    assert_eq!(v["ok"], true, "{v}");
    let notes: Vec<&str> = v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["file"].as_str().unwrap())
        .collect();
    assert_eq!(notes.len(), 2, "{v}");
    assert!(
        notes[0].ends_with("00000000000000000000.index") && notes[1].ends_with(".timeindex"),
        "{v}"
    );
    let out = klog(&["verify", root.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stdout(&out));
}

/// Kafka 4.2's `__cluster_metadata-0` and `__consumer_offsets-15` from the shared fixtures, when present.
#[test]
fn shared_kafka_directories_recover_to_the_same_end_with_byte_identical_indexes() {
    let Some(shared) = shared_fixtures() else {
        return;
    };
    let root = scratch_dir("recover-kafka").join("logs");
    copy_tree(&shared.join("kafka-segments/nomanazeem"), &root);
    let originals = index_files(&root);
    assert_eq!(originals.len(), 4);
    let reports = recover_without_indexes(&root, &originals);
    assert_eq!(
        partition_ends(&reports),
        vec![
            ("__cluster_metadata-0".into(), 2067),
            ("__consumer_offsets-15".into(), 256)
        ]
    );
    assert!(reports
        .iter()
        .all(|r| r["truncated"] == serde_json::json!([])
            && r["bytes_truncated"] == 0
            && r["clean_shutdown"] == false));
}

/// Every `.index`, `.timeindex` and `.txnindex` under `root`, with its bytes.
fn index_files(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    tree_bytes(root)
        .into_iter()
        .filter(|(p, _)| {
            p.extension()
                .is_some_and(|e| e == "index" || e == "timeindex" || e == "txnindex")
        })
        .collect()
}

fn partition_ends(reports: &[Value]) -> Vec<(String, i64)> {
    reports
        .iter()
        .map(|r| {
            (
                r["partition"].as_str().unwrap().to_owned(),
                r["log_end_offset"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// Deletes the index files, checks `verify` notes them missing (derived state: exit 0), recovers, checks each is rebuilt byte for
/// byte and `verify` then passes; returns the recovery reports.
fn recover_without_indexes(root: &Path, originals: &[(PathBuf, Vec<u8>)]) -> Vec<Value> {
    for (p, _) in originals {
        std::fs::remove_file(p).unwrap();
    }
    let out = klog(&["verify", root.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "missing indexes are not problems: {}",
        stdout(&out)
    );
    let text = stdout(&out);
    for (p, _) in originals
        .iter()
        .filter(|(p, _)| p.extension().is_some_and(|e| e != "txnindex"))
    {
        let note = format!("{}: note: missing: derived from the .log", p.display());
        assert!(
            text.lines().any(|l| l.starts_with(&note)),
            "{} noted: {text}",
            p.display()
        );
    }
    let out = klog(&["recover", root.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let reports = json_lines(&stdout(&out));
    for (p, bytes) in originals {
        assert_eq!(
            &std::fs::read(p).unwrap(),
            bytes,
            "{} rebuilt byte for byte",
            p.display()
        );
    }
    let out = klog(&["verify", root.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stdout(&out));
    reports
}

fn build_log(root: &Path, name: &str) -> PathBuf {
    std::fs::create_dir_all(root).unwrap();
    let dir = root.join(name);
    let mut input = Vec::new();
    for i in 0..30 {
        let mut b = klog::log::format::BatchBuilder::new(klog::log::format::Compression::None)
            .producer(3, 0, i * 2);
        b.append(1_700_000_000_000, Some(b"k"), Some(&vec![b'x'; 400]), &[])
            .unwrap();
        b.append(1_700_000_000_001, Some(b"k"), Some(&vec![b'y'; 400]), &[])
            .unwrap();
        b.build_into(&mut input).unwrap();
    }
    let file = root.join(format!("{name}.bin"));
    std::fs::write(&file, input).unwrap();
    let out = klog(&[
        "append",
        dir.to_str().unwrap(),
        file.to_str().unwrap(),
        "--config",
        "segment.bytes=8000",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    dir
}

#[test]
fn corruption_in_the_middle_is_cut_and_reported_with_its_position() {
    let root = scratch_dir("recover-corrupt").join("logs");
    let dir = build_log(&root, "c-0");
    // A crash (no clean-shutdown marker), the recovery point forgotten so the last segment is rescanned,
    // and a byte flipped in its third batch.
    std::fs::remove_file(root.join(".kafka_cleanshutdown")).unwrap();
    std::fs::remove_file(root.join("recovery-point-offset-checkpoint")).unwrap();
    let mut segs: Vec<PathBuf> = common::sorted_entries(&dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    segs.sort();
    let last = segs.last().unwrap().clone();
    let mut bytes = std::fs::read(&last).unwrap();
    let third = {
        let mut pos = 0;
        for _ in 0..2 {
            let len =
                i32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().unwrap()) as usize + 12;
            pos += len;
        }
        pos
    };
    bytes[third + 100] ^= 0xff;
    std::fs::write(&last, &bytes).unwrap();
    let out = klog(&["verify", dir.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert!(
        v["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["problem"].as_str().unwrap().contains("crc")),
        "{v}"
    );

    let before = tree_bytes(&root);
    let out = klog(&["recover", dir.to_str().unwrap(), "--json", "--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(tree_bytes(&root), before, "--dry-run writes nothing");
    let dry: Value = serde_json::from_str(stdout(&out).trim()).unwrap();

    let out = klog(&["recover", dir.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(r["truncated"], dry["truncated"], "the dry run predicted it");
    assert_eq!(r["truncated"].as_array().unwrap().len(), 1, "{r}");
    let t = &r["truncated"][0];
    assert_eq!(t["position"], third as u64);
    assert_eq!(t["bytes"], (bytes.len() - third) as u64);
    assert_eq!(r["bytes_truncated"], t["bytes"]);
    assert!(t["reason"].as_str().unwrap().contains("crc"), "{t}");
    assert_eq!(r["log_end_offset"], t["offset"]);
    assert_eq!(r["producers"], 1);
    let out = klog(&["verify", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stdout(&out));
}

/// The `.log` files of a partition directory: (path, bytes).
fn log_sizes(dir: &Path) -> Vec<(PathBuf, u64)> {
    common::sorted_entries(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| {
            let len = std::fs::metadata(&p).unwrap().len();
            (p, len)
        })
        .collect()
}

/// With the indexes gone (as after a crash of Kafka, or deleted by an operator), a corrupt batch in a
/// middle segment: `truncated` lists the cut and every later segment deleted, and the bytes it reports
/// are the bytes that left the `.log` files.
#[test]
fn recover_json_reports_every_cut_and_deleted_segment_with_indexes_missing() {
    let root = scratch_dir("recover-report-missing").join("logs");
    let dir = build_log(&root, "m-0");
    // A crash: no clean-shutdown marker, no recovery point, no indexes (Kafka's state after a kill).
    std::fs::remove_file(root.join(".kafka_cleanshutdown")).unwrap();
    std::fs::remove_file(root.join("recovery-point-offset-checkpoint")).unwrap();
    for p in common::sorted_entries(&dir) {
        if p.extension()
            .is_some_and(|e| e == "index" || e == "timeindex")
        {
            std::fs::remove_file(p).unwrap();
        }
    }
    let before = log_sizes(&dir);
    assert!(before.len() >= 4, "{before:?}");
    let (second, _) = &before[1];
    let mut bytes = std::fs::read(second).unwrap();
    let first_len = i32::from_be_bytes(bytes[8..12].try_into().unwrap()) as usize + 12;
    bytes[first_len + 100] ^= 0xff;
    std::fs::write(second, &bytes).unwrap();

    let out = klog(&["recover", dir.to_str().unwrap(), "--json", "--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dry: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let out = klog(&["recover", dir.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(r["truncated"], dry["truncated"], "the dry run predicted it");

    let after = log_sizes(&dir);
    let total = |v: &[(PathBuf, u64)]| v.iter().map(|(_, n)| n).sum::<u64>();
    let cuts = r["truncated"].as_array().unwrap();
    let reported: u64 = cuts.iter().map(|t| t["bytes"].as_u64().unwrap()).sum();
    assert_eq!(reported, total(&before) - total(&after), "{r}");
    assert_eq!(r["bytes_truncated"], reported);
    assert_eq!(r["bytes_validated"], total(&after), "{r}");
    assert_eq!(
        cuts.len(),
        before.len() - 1,
        "the cut and each later segment: {r}"
    );
    assert_eq!(cuts[0]["position"], first_len as u64);
    assert_eq!(cuts[0]["offset"], r["log_end_offset"]);
    assert!(cuts[0]["reason"].as_str().unwrap().contains("crc"), "{r}");
    for (cut, (path, size)) in cuts[1..].iter().zip(&before[2..]) {
        assert!(!path.exists(), "{} deleted", path.display());
        assert_eq!(cut["bytes"], *size, "{r}");
        assert!(cut["reason"]
            .as_str()
            .unwrap()
            .starts_with("segment deleted"));
    }
    let out = klog(&["verify", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stdout(&out));
}

#[test]
fn a_directory_killed_mid_write_recovers_and_verifies() {
    let root = scratch_dir("recover-killed").join("logs");
    let dir = root.join("k-0");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_klog"))
        .args(["torture", dir.to_str().unwrap(), "--seed", "11"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut flushed = 0;
    while flushed < 5 {
        line.clear();
        if std::io::BufRead::read_line(&mut reader, &mut line).unwrap() == 0 {
            break;
        }
        flushed += line.starts_with("flushed") as usize;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let out = klog(&["recover", root.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(r["clean_shutdown"], false);
    assert!(r["segments_scanned"].as_u64().unwrap() >= 1);
    let out = klog(&["verify", root.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stdout(&out));
}

/// `--threads` changes how many partitions recover at once, never what recovery does: the reports (but
/// their durations) and the bytes left on disk are those of a one-thread recovery.
#[test]
fn recover_on_several_threads_reports_and_writes_what_one_thread_does() {
    let base = scratch_dir("recover-threads");
    let one = base.join("one");
    let four = base.join("four");
    for root in [&one, &four] {
        for p in 0..6 {
            build_log(root, &format!("t-{p}"));
        }
        // An unclean shutdown with no recovery points: every segment of every partition is rescanned.
        std::fs::remove_file(root.join("recovery-point-offset-checkpoint")).unwrap();
        let _ = std::fs::remove_file(root.join(".kafka_cleanshutdown"));
    }
    let run = |root: &Path, threads: &str| {
        let out = klog(&[
            "recover",
            root.to_str().unwrap(),
            "--json",
            "--threads",
            threads,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let mut reports = json_lines(&stdout(&out));
        for r in &mut reports {
            r.as_object_mut().unwrap().remove("duration_ms");
        }
        reports
    };
    let serial = run(&one, "1");
    let parallel = run(&four, "4");
    assert_eq!(serial.len(), 6);
    assert_eq!(parallel, serial);
    assert!(serial
        .iter()
        .all(|r| r["clean_shutdown"] == false && r["segments_scanned"].as_u64() > Some(0)));
    let strip = |root: &Path| {
        tree_bytes(root)
            .into_iter()
            .map(|(p, b)| (p.strip_prefix(root).unwrap().to_owned(), b))
            // `.lock`, and the io_backend decision each root's first writer measured (its own timings).
            .filter(|(p, _)| p != Path::new(".lock") && p != Path::new("klog-io-backend"))
            .collect::<Vec<_>>()
    };
    assert!(one.join("klog-io-backend").exists() && four.join("klog-io-backend").exists());
    assert_eq!(strip(&one), strip(&four));
    let bad = klog(&["recover", one.to_str().unwrap(), "--threads", "0"]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("--threads"), "{}", stderr(&bad));
}
