//! `klog bench` as a smoke test: every workload runs on a small log and reports positive figures beside
//! its baseline. Never asserts on speed (the machine is shared and noisy).

mod common;

use common::{klog, scratch_dir, stderr, stdout};
use serde_json::Value;

fn positive(v: &Value, what: &str) -> f64 {
    let x = v
        .as_f64()
        .unwrap_or_else(|| panic!("{what} is not a number: {v}"));
    assert!(x.is_finite() && x > 0.0, "{what} = {x}");
    x
}

#[test]
fn bench_runs_every_workload_beside_its_baseline() {
    let root = scratch_dir("cli-bench");
    let json_path = root.join("bench.json");
    let out = klog(&[
        "bench",
        "append",
        "durable",
        "read",
        "--bytes",
        "4194304",
        "--dir",
        root.to_str().unwrap(),
        "--json",
        json_path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for w in ["append:", "durable:", "read:"] {
        assert!(text.contains(w), "no {w} table in:\n{text}");
    }
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let backends: Vec<&str> = doc["conditions"]["backends"]
        .as_array()
        .expect("backends")
        .iter()
        .map(|b| b.as_str().unwrap())
        .collect();
    assert!(backends.contains(&"std"), "{backends:?}");
    for w in ["append", "durable", "read"] {
        let wl = &doc["workloads"][w];
        assert!(wl.is_object(), "workload {w} missing from {doc}");
        positive(&wl["baseline"]["value"], &format!("{w} baseline"));
        let results = wl["results"].as_array().expect("results");
        assert!(!results.is_empty(), "{w}: no results");
        for backend in &backends {
            assert!(
                results.iter().any(|r| r["backend"] == *backend),
                "{w}: no result for backend {backend}"
            );
        }
        for r in results {
            let what = format!("{w} {} {}", r["name"], r["backend"]);
            positive(&r["value"], &what);
            positive(&r["ratio"], &format!("{what} ratio"));
        }
        for c in wl["comparisons"].as_array().expect("comparisons") {
            positive(&c["ratio"], &format!("{w} {}", c["name"]));
        }
    }
    // The scratch directory is gone afterwards; only the JSON is left.
    let left: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("bench.json")]);
}

#[test]
fn bench_refuses_bad_sizes() {
    let out = klog(&["bench", "append", "--bytes", "12 parsecs"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--bytes"), "{}", stderr(&out));
}
