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
const TINY: [&str; 26] = [
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
    "--partitions",
    "20",
    "--clean-bytes",
    "4MiB",
];

const KEYS: [&str; 16] = [
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
    "mirror/partitions",
    "clean",
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
    // How many appends each flush covered, per backend and group size: at least one, at most the group
    // (an appender waits for its flush before its next append).
    let per_flush = &doc["workloads"]["durable"]["details"]["appends_per_flush"];
    for b in &backends {
        for t in [1u32, 4] {
            let covered = per_flush[*b][t.to_string()]
                .as_f64()
                .unwrap_or_else(|| panic!("appends_per_flush of {b}, {t}: {per_flush}"));
            assert!((1.0..=t as f64).contains(&covered), "{b} {t}: {per_flush}");
        }
    }
    // Every goal names its figure; a measured value is finite.
    let goals = doc["goals"].as_array().expect("goals");
    assert!(goals.len() >= 9, "{goals:?}");
    for g in goals {
        check_goal(g);
    }
}

/// A goal names its figure; `met` follows its direction (`better`: "higher" met at or above the
/// target, "lower" below it); a goal without a target (`better` null) is reported, never met or missed.
/// Only a klog / Kafka goal has a ceiling (limit / Kafka), and it is beyond the bound exactly when it is
/// missed with its target above that ceiling.
fn check_goal(g: &Value) {
    assert!(g["name"].is_string() && g["figure"].is_string(), "{g}");
    let ceiling = g["ceiling"].as_f64();
    let beyond = g["beyond_bound"].as_bool().expect("beyond_bound");
    if let Some(c) = ceiling {
        assert!(c.is_finite() && c > 0.0, "{g}");
        assert!(g["figure"].as_str().unwrap().ends_with("/ Kafka"), "{g}");
    } else {
        assert!(g["ceiling"].is_null(), "{g}");
    }
    assert_eq!(
        beyond,
        g["met"] == false && ceiling.is_some_and(|c| g["target"].as_f64().unwrap() > c),
        "{g}"
    );
    let Some(v) = g["value"].as_f64() else {
        assert!(g["met"].is_null(), "{g}");
        return;
    };
    assert!(v.is_finite(), "{g}");
    match g["better"].as_str() {
        Some("higher") => {
            assert!(v > 0.0, "{g}");
            assert_eq!(
                g["met"].as_bool(),
                Some(v >= g["target"].as_f64().unwrap()),
                "{g}"
            );
        }
        Some("lower") => {
            assert!(v > 0.0, "{g}");
            assert_eq!(
                g["met"].as_bool(),
                Some(v < g["target"].as_f64().unwrap()),
                "{g}"
            );
        }
        _ => {
            assert!(g["better"].is_null() && g["target"].is_null(), "{g}");
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
    assert!(
        text.contains("goals (issues #8, #17, #18, #27, #28):"),
        "{text}"
    );
    // io_backend=auto: the decision a writer of the scratch directory takes (probed and recorded at
    // the run's start), beside the choice this run's own figures make, per workload.
    assert!(
        text.contains("io_backend=auto: the decision every writer of this file system takes"),
        "{text}"
    );
    let decision = &doc["auto_decision"];
    assert_eq!(decision["source"], "measured", "{decision}");
    assert!(
        decision["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("/klog-io-backend")),
        "{decision}"
    );
    let auto = doc["auto"].as_array().expect("auto");
    assert_eq!(auto.len(), 3, "{auto:?}");
    for a in auto {
        let decided = a["decided_choice"].as_str().unwrap_or_default();
        assert!(decided == "std" || decided == "uring", "{a}");
        assert!(
            a["decided_std_ns"].as_u64().is_some_and(|n| n > 0),
            "std is probed first for every class: {a}"
        );
        assert!(
            text.contains(&format!(
                "{:<28} decided {decided} (probe: std ",
                a["workload"].as_str().unwrap()
            )),
            "{text}"
        );
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
        common::skip("java is not installed, so Kafka's side of klog bench cannot run");
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
    // Every klog / Kafka goal carries its ceiling: its report's limit over Kafka's figure.
    let goals = doc["goals"].as_array().unwrap();
    for (name, key) in [
        ("buffered append >= 3x Kafka UnifiedLog", "append"),
        (
            "buffered append of 100 B records >= 2x Kafka",
            "append/100B",
        ),
        ("unclean recovery >= 5x Kafka LogLoader", "recover"),
        ("psm replay >= 5x Kafka ProducerStateManager", "psm"),
    ] {
        let g = goals
            .iter()
            .find(|g| g["name"] == name)
            .unwrap_or_else(|| panic!("no goal {name}: {goals:?}"));
        check_goal(g);
        let w = &doc["workloads"][key];
        let expected =
            w["baseline"]["value"].as_f64().unwrap() / w["kafka"]["value"].as_f64().unwrap();
        let ceiling = positive(&g["ceiling"], &format!("{name} ceiling"));
        assert!((ceiling - expected).abs() <= 1e-9 * expected, "{g}\n{w}");
    }
}

/// `clean` at the smallest size: the generated partition has every shape it promises (repeated keys,
/// tombstones, committed and aborted transactions, several sealed segments), the bound is the faster of
/// the two plain reads and says which, and Kafka's own `Cleaner` cleaned the same bytes to the same end
/// offset, removing records. Kafka's side skips without Java unless KLOG_REQUIRE_KAFKA=1.
#[test]
fn bench_cleans_beside_a_plain_read_and_kafka() {
    let java = have_java();
    if !java {
        assert!(
            !required("KLOG_REQUIRE_KAFKA"),
            "KLOG_REQUIRE_KAFKA=1 but java is not installed"
        );
        common::skip("java is not installed, so Kafka's Cleaner in klog bench clean cannot run");
    }
    let mut extra = vec!["clean", "--dedupe-buffer-size", "16MiB"];
    if !java {
        extra.push("--no-kafka");
    }
    let (text, doc, _) = run_bench("cli-bench-clean", &extra);
    assert!(text.contains("clean: one compaction pass"), "{text}");
    let clean = &doc["workloads"]["clean"];
    let d = &clean["details"];
    for key in [
        "records",
        "keys",
        "tombstones",
        "committed_transactions",
        "aborted_transactions",
        "dirty_bytes",
    ] {
        positive(&d[key], key);
    }
    assert!(d["keys"].as_u64() < d["records"].as_u64(), "{d}");
    assert!(d["segments"].as_u64().unwrap() >= 2, "{d}");
    assert!(d["dirty_bytes"].as_u64().unwrap() >= 4 << 20, "{d}");
    assert_eq!(doc["conditions"]["dedupe_buffer_size"], 16 << 20);
    // The bound is the faster plain read, and its name says which one it is.
    let (pread, mmap) = (
        positive(&d["pread_mb_per_s"], "pread"),
        positive(&d["mmap_mb_per_s"], "mmap"),
    );
    let bound = positive(&clean["baseline"]["value"], "clean baseline");
    assert_eq!(bound, pread.max(mmap), "{d}");
    let name = clean["baseline"]["name"].as_str().unwrap();
    let expected = if pread >= mmap {
        ("pread", "preads (")
    } else {
        ("mmap", "mmap + memcpy of")
    };
    assert_eq!(d["bound"], expected.0, "{d}");
    assert!(name.contains(expected.1), "{name}");
    // klog's pass, on every backend, cleaned the same range; its peak RSS was measured in a child.
    // Each backend on the default threads, then the first backend on one thread, last.
    let rows = clean["results"].as_array().unwrap();
    assert!(rows.iter().any(|r| r["backend"] == "std"), "{clean}");
    let (last, default) = rows.split_last().unwrap();
    assert_eq!(
        last["name"], "PartitionLog::clean, one pass, 1 thread",
        "{last}"
    );
    assert_eq!(last["backend"], rows[0]["backend"], "{clean}");
    for r in rows {
        if !std::ptr::eq(r, last) {
            assert_eq!(r["name"], "PartitionLog::clean, one pass", "{r}");
        }
        positive(&r["value"], "klog pass");
        positive(&r["ratio"], "klog pass / bound");
    }
    assert!(!default.is_empty(), "{clean}");
    let passes = d["klog"].as_array().unwrap();
    assert_eq!(passes.len(), rows.len(), "{d}");
    assert_eq!(passes[passes.len() - 1]["threads"], 1, "{d}");
    assert!(d["threads"].as_u64() >= Some(1), "{d}");
    // The pass beside its I/O done the cheapest way: the sealed bytes read twice, the survivors written.
    positive(&d["io_bound_mb_per_s"], "the I/O bound");
    assert_eq!(d["survivor_bytes"], passes[0]["bytes_written"], "{d}");
    let comparisons = clean["comparisons"].as_array().unwrap();
    let io = comparisons
        .iter()
        .find(|c| {
            c["name"]
                .as_str()
                .is_some_and(|n| n.contains("/ the same I/O done the cheapest way"))
        })
        .unwrap_or_else(|| panic!("no I/O bound comparison: {comparisons:?}"));
    positive(&io["ratio"], "klog pass / I/O bound");
    for p in passes {
        assert_eq!(p["bytes"], d["dirty_bytes"], "{p}");
        assert_eq!(p["end_offset"], d["first_uncleanable_offset"], "{p}");
        assert!(p["log_bytes_after"].as_u64() < p["bytes"].as_u64(), "{p}");
        assert!(
            p["records_retained"].as_u64() < p["records_read"].as_u64(),
            "{p}"
        );
    }
    let rss = &d["rss"];
    assert!(
        rss["peak_rss_kib"].as_u64() >= rss["rss_before_kib"].as_u64(),
        "{rss}"
    );
    positive(&rss["growth_over_budget"], "clean RSS growth / budget");
    let goals = doc["goals"].as_array().unwrap();
    for name in [
        "cleaning >= 2x Kafka's Cleaner on the same bytes",
        "cleaning >= 0.5x a plain read of the same bytes",
        "clean peak RSS growth / (dedupe buffer + 32 MiB)",
    ] {
        let g = goals
            .iter()
            .find(|g| g["name"] == name)
            .unwrap_or_else(|| panic!("no goal {name}: {goals:?}"));
        check_goal(g);
    }
    if !java {
        return;
    }
    let k = &clean["kafka"];
    assert_eq!(k["status"], "measured", "{k}\n{text}");
    assert_eq!(k["kafka_version"], "4.4.0", "{k}");
    positive(&k["value"], "Kafka Cleaner");
    let kd = &k["details"];
    // Kafka cleaned exactly the sealed segments, up to the active segment, and removed records.
    assert_eq!(kd["bytes"], d["dirty_bytes"], "{k}");
    assert_eq!(kd["end_offset"], d["first_uncleanable_offset"], "{k}");
    assert_eq!(kd["dedupe_buffer_size"], 16 << 20, "{k}");
    assert!(kd["log_bytes_after"].as_u64() < kd["bytes"].as_u64(), "{k}");
    assert!(
        kd["messages_written"].as_u64() < kd["messages_read"].as_u64(),
        "{k}"
    );
}

/// `mirror --partitions 20`: the cluster-scale run mirrors every partition beside its bound, the
/// follower append of the same fetched sets into the same partitions (and the leader append of the same
/// batches as a comparison), fails all of them over at once, and measures the mirror's peak RSS in two child
/// processes; its goals read the right way round (a failover time is met below its target).
#[test]
fn bench_mirrors_many_partitions() {
    let (text, doc, root) = run_bench("cli-bench-partitions", &["mirror", "--no-kafka"]);
    assert!(text.contains("mirror/partitions: "), "{text}");
    let wl = &doc["workloads"]["mirror/partitions"];
    let d = &wl["details"];
    assert_eq!(d["partitions"], 20, "{d}");
    assert_eq!(d["topics"], 20, "{d}");
    assert_eq!(doc["conditions"]["partitions"], 20);
    let per = d["batches_per_partition"]
        .as_u64()
        .expect("batches_per_partition");
    assert!(per >= 1, "{d}");
    // The same bytes as the one-partition run, in whole batches per partition.
    let one = doc["workloads"]["mirror"]["details"]["bytes"]
        .as_u64()
        .unwrap();
    let bytes = d["bytes"].as_u64().unwrap();
    assert!(bytes <= one && bytes * 2 > one, "{bytes} of {one}");
    let backends = doc["conditions"]["backends"].as_array().unwrap();
    let rows = wl["results"].as_array().unwrap();
    assert_eq!(rows.len(), backends.len(), "{wl}");
    for r in rows {
        assert_eq!(
            r["name"],
            "mirror of every partition (Cluster ticks until idle)"
        );
        positive(&r["value"], "mirror of 20 partitions");
        assert_eq!(
            r["bound"]["name"],
            "append_as_follower of the same fetched sets into the same partitions, read beforehand",
            "{r}"
        );
        positive(&r["bound"]["value"], "follower append into 20 partitions");
    }
    for b in backends {
        let b = b.as_str().unwrap();
        positive(
            &d["leader_append_mb_per_s"][b]["value"],
            "leader append into 20 partitions",
        );
    }
    // The plainest read of the same fetches, and the ceiling it puts on the ratio to the bound of a
    // mirror that copies them out of its source: below 1, as the read takes time.
    for wl in [&doc["workloads"]["mirror"], wl] {
        positive(
            &wl["details"]["pread_mb_per_s"]["value"],
            "pread of the fetches",
        );
        let ceilings: Vec<f64> = wl["comparisons"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| {
                c["name"]
                    .as_str()
                    .unwrap()
                    .starts_with("ceiling of mirror / limit")
            })
            .map(|c| positive(&c["ratio"], "ceiling"))
            .collect();
        assert_eq!(ceilings.len(), backends.len(), "{wl}");
        assert!(ceilings.iter().all(|c| *c < 1.0), "{ceilings:?}");
    }
    let failover = d["failover"].as_array().expect("failover");
    assert_eq!(failover.len(), backends.len(), "{d}");
    for f in failover {
        assert_eq!(f["partitions"], 20, "{f}");
        positive(&f["s"], "failover of 20 partitions");
        assert_eq!(f["runs"].as_array().unwrap().len(), 1, "{f}");
    }
    // Peak RSS at a tenth of the topics and at all of them, each a child that mirrored every byte.
    let rss = &d["rss"];
    let runs = rss["runs"].as_array().expect("rss runs");
    let counts: Vec<u64> = runs
        .iter()
        .map(|r| r["partitions"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [2, 20], "{rss}");
    for r in runs {
        positive(&r["peak_rss_kib"], "peak RSS");
        assert_eq!(
            r["bytes"].as_u64().unwrap(),
            bytes / 20 * r["partitions"].as_u64().unwrap(),
            "{r}"
        );
    }
    assert!(
        rss["per_partition_kib"].as_f64().unwrap().is_finite(),
        "{rss}"
    );
    let goals = doc["goals"].as_array().unwrap();
    let goal = |name: &str| {
        goals
            .iter()
            .find(|g| g["name"] == name)
            .unwrap_or_else(|| panic!("no goal {name} in {goals:?}"))
    };
    for g in goals {
        check_goal(g);
    }
    let ratio = goal("mirror at cluster scale >= 0.8x follower append");
    assert_eq!(
        (ratio["better"].as_str(), ratio["target"].as_f64()),
        (Some("higher"), Some(0.8))
    );
    let fo = goal("failover of every partition at once < 1 s");
    assert_eq!(
        (fo["better"].as_str(), fo["target"].as_f64()),
        (Some("lower"), Some(1.0))
    );
    let std_s = failover.iter().find(|f| f["backend"] == "std").unwrap()["s"].clone();
    assert_eq!(fo["value"], std_s, "{fo}");
    let per_partition = goal("mirror peak RSS per partition (KiB)");
    assert_eq!(
        per_partition["value"], rss["per_partition_kib"],
        "{per_partition}"
    );
    assert!(per_partition["met"].is_null(), "{per_partition}");
    // The text and report.md give the target with its direction.
    let line = text
        .lines()
        .find(|l| {
            l.trim_start()
                .starts_with("failover of every partition at once < 1 s")
        })
        .unwrap_or_else(|| panic!("no failover goal in {text}"));
    let columns = &line["  failover of every partition at once < 1 s".len()..];
    assert!(columns.contains("  < 1  "), "{line}");
    let md = std::fs::read_to_string(root.join("report/report.md")).unwrap();
    assert!(
        md.contains("| failover of every partition at once < 1 s | "),
        "{md}"
    );
    assert!(md.contains(" | < 1 | "), "{md}");
    assert!(
        md.contains("| mirror peak RSS per partition (KiB) | "),
        "{md}"
    );
}

#[test]
fn bench_refuses_bad_sizes() {
    let out = klog(&["bench", "append", "--bytes", "12 parsecs"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--bytes"), "{}", stderr(&out));
}
