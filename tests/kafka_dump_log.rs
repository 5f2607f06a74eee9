//! Real Kafka is the judge of `klog dump`'s text: Kafka's own `kafka-dump-log` (the pinned release, run by
//! `interop/kafka-tools.sh`) and `klog dump` must print the same bytes for every fixture segment, every
//! fixture batch and a spread of batches klog built, in every mode.
//!
//! Skips with one line when Java is absent, unless `KLOG_REQUIRE_KAFKA=1` (CI), where it fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{
    fixture_batch, fixture_manifest, fixture_segments, fixtures, have_java, klog,
    klog_built_batches, repo_path, required, scratch_dir, shared_fixtures,
};

fn kafka_available() -> bool {
    if have_java() {
        return true;
    }
    assert!(
        !required("KLOG_REQUIRE_KAFKA"),
        "KLOG_REQUIRE_KAFKA=1 but java is not installed"
    );
    common::skip("java is not installed, so real Kafka cannot judge");
    false
}

fn kafka_dump_log(files: &[PathBuf], flags: &[&str]) -> String {
    let list = files
        .iter()
        .map(|f| f.to_str().unwrap())
        .collect::<Vec<_>>()
        .join(",");
    let out = Command::new(repo_path("interop/kafka-tools.sh"))
        .args(["dump-log", "--files", &list])
        .args(flags)
        .output()
        .expect("interop/kafka-tools.sh runs");
    assert!(
        out.status.success(),
        "kafka-dump-log failed: {}",
        common::stderr(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn klog_dump(files: &[PathBuf], flags: &[&str]) -> String {
    let mut args = vec!["dump"];
    args.extend_from_slice(flags);
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    let out = klog(&args);
    assert!(
        out.status.success(),
        "klog dump failed: {}",
        common::stderr(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Kafka dispatches on the suffix, so each `.bin` batch goes into its own directory as a `.log` segment.
fn as_segments(name: &str, files: &[(String, Vec<u8>)]) -> Vec<PathBuf> {
    let dir = scratch_dir(name);
    files
        .iter()
        .map(|(stem, bytes)| {
            let d = dir.join(stem);
            std::fs::create_dir_all(&d).unwrap();
            let f = d.join("00000000000000000000.log");
            std::fs::write(&f, bytes).unwrap();
            f
        })
        .collect()
}

/// Kafka's output has a `Dumping <file>` line for each file asked for, in order: the comparison covered
/// every one of them (an empty or shortened list would otherwise compare two empty dumps).
fn assert_dumped_each(kafka: &str, files: &[PathBuf], what: &str) {
    let dumped: Vec<&str> = kafka
        .lines()
        .filter_map(|l| l.strip_prefix("Dumping "))
        .collect();
    let asked: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    assert_eq!(dumped, asked, "{what}: the files Kafka dumped");
}

fn assert_same_lines(ours: &str, kafka: &str, what: &str) {
    assert!(!kafka.is_empty());
    for (i, (o, k)) in ours.lines().zip(kafka.lines()).enumerate() {
        assert_eq!(o, k, "{what}: line {} differs", i + 1);
    }
    assert_eq!(
        ours.lines().count(),
        kafka.lines().count(),
        "{what}: line count"
    );
    assert_eq!(ours, kafka, "{what}: bytes");
}

const MODES: [(&[&str], &[&str]); 3] = [
    (&[], &[]),
    (&["--deep"], &["--deep-iteration"]),
    (
        &["--print-data-log"],
        &["--deep-iteration", "--print-data-log"],
    ),
];

#[test]
fn dump_text_matches_kafka_dump_log_on_fixture_segments_and_batches() {
    if !kafka_available() {
        return;
    }
    let manifest = fixture_manifest();
    let batches = manifest["batches"].as_array().unwrap().len();
    let segments: usize = manifest["partitions"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|copy| copy.as_object().unwrap().values())
        .map(|p| p["segments"].as_array().unwrap().len())
        .sum();
    compare_fixture_tree(&fixtures(), "kafka-dump-fixture-batches", segments, batches);
}

/// The shared fixtures' four real Kafka partitions and 13 batches, when present.
#[test]
fn dump_text_matches_kafka_dump_log_on_shared_fixture_segments_and_batches() {
    if !kafka_available() {
        return;
    }
    let Some(shared) = shared_fixtures() else {
        return;
    };
    compare_fixture_tree(&shared, "kafka-dump-shared-batches", 4, 13);
}

/// Every segment and every single-batch file of a fixture tree, dumped by both in every mode.
fn compare_fixture_tree(root: &Path, scratch: &str, segments: usize, batch_files: usize) {
    let mut files = fixture_segments(root);
    // An empty list would compare nothing.
    assert_eq!(files.len(), segments, "fixture segments: {files:?}");
    let batch_dir = root.join("batches");
    let batches: Vec<(String, Vec<u8>)> = common::sorted_entries(&batch_dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .map(|p| {
            (
                p.file_stem().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    assert_eq!(batches.len(), batch_files);
    files.extend(as_segments(scratch, &batches));
    // klog decodes an internal topic's records by itself; Kafka is asked for the same decoder.
    let (decoded, plain): (Vec<PathBuf>, Vec<PathBuf>) =
        files.into_iter().partition(|f| kafka_decoder(f).is_some());
    for (ours_flags, kafka_flags) in MODES {
        let kafka = kafka_dump_log(&plain, kafka_flags);
        let ours = klog_dump(&plain, ours_flags);
        assert_dumped_each(&kafka, &plain, &format!("fixtures {kafka_flags:?}"));
        assert_same_lines(&ours, &kafka, &format!("fixtures {kafka_flags:?}"));
        for f in &decoded {
            let one = std::slice::from_ref(f);
            let flags = [kafka_decoder(f).expect("a decoder")];
            let kafka = kafka_dump_log(one, &flags);
            let ours = klog_dump(one, ours_flags);
            assert_dumped_each(&kafka, one, &format!("{f:?} {ours_flags:?}"));
            assert_same_lines(&ours, &kafka, &format!("{f:?} {ours_flags:?}"));
        }
    }
}

/// The `kafka-dump-log` decoder klog picks by itself for a file of an internal topic's partition.
fn kafka_decoder(file: &Path) -> Option<&'static str> {
    const DECODERS: &[(&str, &str)] = &[
        ("__cluster_metadata-", "--cluster-metadata-decoder"),
        ("__consumer_offsets-", "--offsets-decoder"),
        ("__transaction_state-", "--transaction-log-decoder"),
    ];
    let dir = file.parent()?.file_name()?.to_str()?;
    DECODERS
        .iter()
        .find(|(prefix, _)| dir.starts_with(prefix))
        .map(|(_, flag)| *flag)
}

/// klog's own batches: identical except the MIRROR_PID_RESET record, which an unmodified Kafka can only call
/// `UNKNOWN(7)` and klog decodes.
#[test]
fn dump_text_matches_kafka_dump_log_on_klog_built_batches() {
    if !kafka_available() {
        return;
    }
    let (bytes, _) = klog_built_batches();
    let files = as_segments("kafka-dump-klog-built", &[("klog-built".into(), bytes)]);
    for (ours_flags, kafka_flags) in MODES {
        let kafka = kafka_dump_log(&files, kafka_flags);
        let ours = klog_dump(&files, ours_flags);
        let barrier_kafka = " controlType: UNKNOWN(7)";
        let barrier_klog = r#" mirrorPidReset: {"version":0}"#;
        if !ours_flags.is_empty() {
            assert_eq!(kafka.matches(barrier_kafka).count(), 1);
            assert_eq!(ours.matches(barrier_klog).count(), 1);
        }
        assert_dumped_each(&kafka, &files, &format!("klog-built {kafka_flags:?}"));
        let ours = ours.replace(barrier_klog, barrier_kafka);
        assert_same_lines(&ours, &kafka, &format!("klog-built {kafka_flags:?}"));
    }
}

/// Index files (Kafka's own, and ones klog wrote), printed and sanity-checked as Kafka does.
#[test]
fn index_dumps_match_kafka_dump_log() {
    if !kafka_available() {
        return;
    }
    // Kafka's own indexes: the broker's partitions (several with entries), and the shared fixtures'.
    let mut files = Vec::new();
    for p in [
        "clean/workload-0",
        "clean/batches-0",
        "clean/__transaction_state-0",
    ] {
        files.extend(
            common::sorted_entries(&fixtures().join("kafka-segments").join(p))
                .into_iter()
                .filter(|e| {
                    e.extension()
                        .is_some_and(|x| x == "index" || x == "timeindex")
                }),
        );
    }
    if let Some(shared) = shared_fixtures() {
        for p in [
            "nomanazeem/__cluster_metadata-0",
            "nomanazeem/__consumer_offsets-15",
        ] {
            let dir = shared.join("kafka-segments").join(p);
            files.push(dir.join("00000000000000000000.index"));
            files.push(dir.join("00000000000000000000.timeindex"));
        }
    }
    // A partition klog wrote: several segments with index entries.
    let root = scratch_dir("kafka-dump-klog-indexes");
    let mut input = Vec::new();
    for i in 0..40 {
        let mut b = klog::log::format::BatchBuilder::new(klog::log::format::Compression::None);
        b.append(
            1_700_000_000_000 + i,
            Some(b"k"),
            Some(&vec![b'v'; 900]),
            &[],
        )
        .unwrap();
        b.build_into(&mut input).unwrap();
    }
    std::fs::write(root.join("in.bin"), &input).unwrap();
    let dir = root.join("logs/idx-0");
    let out = klog(&[
        "append",
        dir.to_str().unwrap(),
        root.join("in.bin").to_str().unwrap(),
        "--config",
        "segment.bytes=20000",
    ]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    for e in common::sorted_entries(&dir) {
        if e.extension()
            .is_some_and(|x| x == "index" || x == "timeindex")
        {
            files.push(e);
        }
    }
    assert!(files.len() >= 20, "{files:?}");
    let kafka = kafka_dump_log(&files, &[]);
    let ours = klog_dump(&files, &[]);
    assert_dumped_each(&kafka, &files, "index dumps");
    assert_same_lines(&ours, &kafka, "index dumps");
    let kafka = kafka_dump_log(&files, &["--index-sanity-check"]);
    let ours = klog_dump(&files, &["--index-sanity-check"]);
    assert_same_lines(&ours, &kafka, "index sanity checks");
}

/// Producer snapshots and transaction indexes klog wrote (and Kafka's own snapshots) print as Kafka prints them.
#[test]
fn snapshot_and_txnindex_dumps_match_kafka_dump_log() {
    if !kafka_available() {
        return;
    }
    let root = scratch_dir("kafka-dump-snapshots");
    let dir = root.join("logs/txn-0");
    let d = dir.to_str().unwrap();
    let batches = fixtures().join("batches");
    let txn = fixture_batch("txn-none.bin");
    let txn_producer = txn["producer_id"].as_i64().unwrap();
    let abort = root.join("abort.bin");
    let marker = klog::log::format::BatchBuilder::end_txn_marker(
        klog::log::format::ControlRecordType::Abort,
        txn_producer,
        txn["producer_epoch"].as_i64().unwrap() as i16,
        7,
        1_700_000_000_100,
    )
    .unwrap()
    .build()
    .unwrap();
    std::fs::write(&abort, marker).unwrap();
    for f in [
        batches.join("idempotent-none.bin"),
        batches.join("txn-none.bin"),
        abort.clone(),
        batches.join("idempotent-zstd.bin"),
    ] {
        let out = klog(&["append", d, f.to_str().unwrap()]);
        assert!(out.status.success(), "{}", common::stderr(&out));
    }
    let mut files: Vec<PathBuf> = common::sorted_entries(&dir)
        .into_iter()
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "snapshot" || e == "txnindex")
        })
        .collect();
    assert!(
        files.iter().any(|p| p.extension().unwrap() == "txnindex"),
        "the abort was indexed: {files:?}"
    );
    assert!(files.iter().any(|p| p.extension().unwrap() == "snapshot"));
    // Kafka's own: every snapshot and transaction index of the broker's partitions, and the shared ones.
    for p in [
        "clean/workload-0",
        "clean/batches-0",
        "clean/__transaction_state-0",
    ] {
        files.extend(
            common::sorted_entries(&fixtures().join("kafka-segments").join(p))
                .into_iter()
                .filter(|e| {
                    e.extension()
                        .is_some_and(|x| x == "snapshot" || x == "txnindex")
                }),
        );
    }
    if let Some(shared) = shared_fixtures() {
        for p in [
            "nomanazeem/__cluster_metadata-0/00000000000000002067.snapshot",
            "nomanazeem/__consumer_offsets-15/00000000000000000256.snapshot",
        ] {
            files.push(shared.join("kafka-segments").join(p));
        }
    }
    let kafka = kafka_dump_log(&files, &[]);
    let ours = klog_dump(&files, &[]);
    assert_dumped_each(&kafka, &files, "snapshot and txnindex dumps");
    assert!(
        kafka.contains(&format!("producerId: {txn_producer} ")),
        "{kafka}"
    );
    assert_same_lines(&ours, &kafka, "snapshot and txnindex dumps");
}
