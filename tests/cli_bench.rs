//! `klog bench` as a smoke test: every workload runs at tiny sizes and reports finite, positive figures
//! beside its baseline, in the documented JSON shape. Never asserts on speed (the machine is shared and
//! noisy).

mod common;

use common::{have_java, klog, required, scratch_dir, stderr, stdout};
use serde_json::Value;

fn positive(v: &Value, what: &str) -> f64 {
    let x = v
        .as_f64()
        .unwrap_or_else(|| panic!("{what} is not a number: {v}"));
    assert!(x.is_finite() && x > 0.0, "{what} = {x}");
    x
}

/// Tiny sizes for every workload: a few seconds in a debug build.
const TINY: [&str; 22] = [
    "--bytes",
    "4194304",
    "--recover-bytes",
    "4MiB",
    "--segments",
    "60",
    "--psm-batches",
    "5000",
    "--psm-producers",
    "100",
    "--parse-bytes",
    "1MiB",
    "--random-reads",
    "200",
    "--threads",
    "1,4",
    "--durable-appends",
    "40",
    "--rounds",
    "1",
    "--mirror-bytes",
    "1MiB",
];

const KEYS: [&str; 14] = [
    "append",
    "append/100B",
    "append/1MiB",
    "durable",
    "durable/partitions",
    "read",
    "read/random-offset",
    "read/random-timestamp",
    "recover",
    "recover/dir",
    "recover/clean-open",
    "psm",
    "parse",
    "mirror",
];

/// Runs `klog bench` with `extra` arguments at tiny sizes; returns stdout and the JSON document.
fn run_bench(name: &str, extra: &[&str]) -> (String, Value, std::path::PathBuf) {
    let root = scratch_dir(name);
    let json_path = root.join("bench.json");
    let report = root.join("report");
    let mut args = vec![
        "bench",
        "--dir",
        root.to_str().unwrap(),
        "--json",
        json_path.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ];
    args.extend(TINY);
    args.extend(extra);
    let out = klog(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    (stdout(&out), doc, root)
}

fn check_workloads(doc: &Value) {
    let backends: Vec<&str> = doc["conditions"]["backends"]
        .as_array()
        .expect("backends")
        .iter()
        .map(|b| b.as_str().unwrap())
        .collect();
    assert!(backends.contains(&"std"), "{backends:?}");
    // `--backend both` skips uring with a note where io_uring is unavailable; CI requires it.
    if required("KLOG_REQUIRE_URING") {
        assert!(
            backends.contains(&"uring"),
            "KLOG_REQUIRE_URING=1 but the bench skipped uring: {}",
            doc["conditions"]["skipped_backends"]
        );
    }
    for key in KEYS {
        let wl = &doc["workloads"][key];
        assert!(wl.is_object(), "workload {key} missing from {doc}");
        positive(&wl["baseline"]["value"], &format!("{key} baseline"));
        let results = wl["results"].as_array().expect("results");
        assert!(!results.is_empty(), "{key}: no results");
        let cpu_only = matches!(key, "psm" | "parse");
        // The log directory's recovery compares thread counts on the first backend only.
        if !cpu_only && key != "recover/dir" {
            for backend in &backends {
                assert!(
                    results.iter().any(|r| r["backend"] == *backend),
                    "{key}: no result for backend {backend}"
                );
            }
        }
        for r in results {
            let what = format!("{key} {} {}", r["name"], r["backend"]);
            positive(&r["value"], &what);
            positive(&r["ratio"], &format!("{what} ratio"));
            // A row with Kafka's figure for its own work (a group, a thread count) is against that.
            let kafka = if r["kafka"].is_object() {
                &r["kafka"]
            } else {
                &wl["kafka"]
            };
            if kafka["status"] == "measured" {
                positive(&r["kafka_ratio"], &format!("{what} kafka_ratio"));
            } else {
                assert!(r["kafka_ratio"].is_null(), "{what}: {}", r["kafka_ratio"]);
            }
        }
        for c in wl["comparisons"].as_array().expect("comparisons") {
            positive(&c["ratio"], &format!("{key} {}", c["name"]));
        }
    }
    // Mirroring copied every byte, and failover was timed with and without fsync on each backend.
    let mirror = &doc["workloads"]["mirror"];
    let failover = mirror["details"]["failover"].as_array().expect("failover");
    assert_eq!(failover.len(), backends.len() * 2, "{mirror}");
    for f in failover {
        positive(&f["ms_per_partition"], "failover ms");
    }
    assert!(
        mirror["details"]["bytes"].as_u64().unwrap() > 900_000,
        "{mirror}"
    );
    // The group commits are all there, per backend, each beside its own bound: one fdatasync per as many
    // batches as appenders (one fdatasync per write is no bound for a group).
    let durable = doc["workloads"]["durable"]["results"].as_array().unwrap();
    for t in [1, 4] {
        let name = format!("group commit, {t} threads");
        let rows: Vec<&Value> = durable
            .iter()
            .filter(|r| r["name"] == name.as_str())
            .collect();
        assert_eq!(rows.len(), backends.len(), "{name}");
        for r in rows {
            let bound = &r["bound"];
            positive(&bound["value"], &format!("{name} bound"));
            let ratio = r["value"].as_f64().unwrap() / bound["value"].as_f64().unwrap();
            let median_ratio = r["ratio"].as_f64().unwrap();
            assert!((ratio - median_ratio).abs() < 1e-9, "{name}: {r}");
            if t > 1 {
                assert!(
                    bound["name"]
                        .as_str()
                        .unwrap()
                        .contains(&format!("{t} batches")),
                    "{r}"
                );
            }
        }
    }
    // The mirror is set against its own appends on the same backend; the leader append is a comparison.
    for r in mirror["results"].as_array().unwrap() {
        positive(
            &r["bound"]["value"],
            &format!("mirror {} bound", r["backend"]),
        );
    }
    // The sequential read's limit moves the bytes as klog's read + copy does; the view, which touches
    // no byte, is no row against it.
    let read = &doc["workloads"]["read"];
    assert!(
        read["baseline"]["name"].as_str().unwrap().contains("mmap"),
        "{read}"
    );
    for r in read["results"].as_array().unwrap() {
        assert_eq!(r["name"], "read + copy out", "{r}");
        assert!(r["bound"].is_null(), "{r}");
    }
    positive(&read["details"]["pread_mb_per_s"]["value"], "pread loop");
    assert!(
        doc["workloads"]["durable"]["details"]["fdatasync_us"]["p50"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    // Every goal names its figure; a measured value is finite.
    let goals = doc["goals"].as_array().expect("goals");
    assert!(goals.len() >= 9, "{goals:?}");
    for g in goals {
        assert!(g["name"].is_string() && g["target"].is_number(), "{g}");
        if let Some(v) = g["value"].as_f64() {
            assert!(v.is_finite() && v > 0.0, "{g}");
            assert_eq!(
                g["met"].as_bool(),
                Some(v >= g["target"].as_f64().unwrap()),
                "{g}"
            );
        } else {
            assert!(g["met"].is_null(), "{g}");
        }
    }
}

fn check_report(root: &std::path::Path) {
    let report = root.join("report");
    let md = std::fs::read_to_string(report.join("report.md")).expect("report.md");
    for key in KEYS {
        assert!(
            md.contains(&format!("## `{key}`")),
            "report.md has no {key} section"
        );
    }
    let svgs: Vec<_> = std::fs::read_dir(&report)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "svg"))
        .collect();
    assert_eq!(svgs.len(), KEYS.len(), "{svgs:?}");
    for svg in &svgs {
        let text = std::fs::read_to_string(svg).unwrap();
        assert!(
            text.starts_with("<svg") && text.contains("<rect"),
            "{}",
            svg.display()
        );
        let name = svg.file_name().unwrap().to_str().unwrap();
        assert!(md.contains(name), "report.md does not show {name}");
    }
}

#[test]
fn bench_runs_every_workload_beside_its_baseline() {
    let (text, doc, root) = run_bench("cli-bench", &["--no-kafka"]);
    for key in KEYS {
        assert!(
            text.contains(&format!("{key}: ")),
            "no {key} table in:\n{text}"
        );
    }
    assert!(
        text.contains("Kafka column: not measured (--no-kafka)"),
        "{text}"
    );
    assert!(text.contains("goals (issues #8, #18):"), "{text}");
    // io_backend=auto: the choice this run measured for each workload, beside the built-in one.
    assert!(text.contains("io_backend=auto:"), "{text}");
    let auto = doc["auto"].as_array().expect("auto");
    assert_eq!(auto.len(), 3, "{auto:?}");
    for a in auto {
        assert!(a["built_in_choice"].is_string(), "{a}");
    }
    check_workloads(&doc);
    for key in ["append", "recover", "psm"] {
        let k = &doc["workloads"][key]["kafka"];
        assert_eq!(k["status"], "absent", "{key}: {k}");
        assert_eq!(k["reason"], "--no-kafka", "{key}: {k}");
    }
    check_report(&root);
    // The scratch directory is gone afterwards; only the JSON and the report are left.
    let mut left: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, vec!["bench.json", "report"]);
}

/// Kafka's own UnifiedLog, LogLoader and ProducerStateManager beside klog (interop/bench). Skips without
/// Java unless KLOG_REQUIRE_KAFKA=1.
#[test]
fn bench_measures_kafka_beside_klog() {
    if !have_java() {
        assert!(
            !required("KLOG_REQUIRE_KAFKA"),
            "KLOG_REQUIRE_KAFKA=1 but java is not installed"
        );
        eprintln!("skipping: java is not installed, so Kafka's side of klog bench cannot run");
        return;
    }
    let (text, doc, _) = run_bench("cli-bench-kafka", &["append", "durable", "recover", "psm"]);
    for key in [
        "append",
        "append/100B",
        "durable",
        "recover",
        "recover/dir",
        "psm",
    ] {
        let k = &doc["workloads"][key]["kafka"];
        assert_eq!(k["status"], "measured", "{key}: {k}\n{text}");
        assert_eq!(k["kafka_version"], "4.4.0", "{key}: {k}");
        positive(&k["value"], &format!("{key} Kafka"));
        for r in doc["workloads"][key]["results"].as_array().unwrap() {
            positive(
                &r["kafka_ratio"],
                &format!("{key} {} kafka_ratio", r["name"]),
            );
        }
    }
    // Each group of appenders and each thread count has Kafka's figure for the same work.
    for (key, row, what) in [
        ("durable", "group commit, 4 threads", "4 appenders"),
        (
            "recover/dir",
            "log directory, 1 thread",
            "LogLoader pool, 1 thread",
        ),
    ] {
        let r = doc["workloads"][key]["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == row && r["backend"] == "std")
            .unwrap_or_else(|| panic!("{key}: no row {row}"));
        assert_eq!(r["kafka"]["status"], "measured", "{key} {row}: {r}");
        let name = r["kafka"]["name"].as_str().unwrap();
        assert!(name.starts_with(what), "{key} {row}: {name}");
    }
    // Kafka's pool recovered every partition klog did, to the same log ends.
    let dir = &doc["workloads"]["recover/dir"];
    assert_eq!(
        dir["kafka"]["details"]["log_end_offsets_sum"], dir["details"]["log_end_offsets_sum"],
        "{dir}"
    );
    // Kafka recovered the same log klog did, and replayed the same producers.
    let recover = &doc["workloads"]["recover"];
    assert_eq!(
        recover["kafka"]["details"]["log_end_offset"], recover["details"]["log_end_offset"],
        "{recover}"
    );
    let psm = &doc["workloads"]["psm"];
    assert_eq!(
        psm["kafka"]["details"]["producers"], psm["details"]["live_producers"],
        "{psm}"
    );
}

#[test]
fn bench_refuses_bad_sizes() {
    let out = klog(&["bench", "append", "--bytes", "12 parsecs"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--bytes"), "{}", stderr(&out));
}
