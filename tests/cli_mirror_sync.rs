//! `klog mirror create --config` (a mirror's sync filters by the reference's names), the mirrors part
//! of `klog mirror describe` (configs, lag per mirror) and `klog mirror run`'s lag lines (docs/cli.md).

mod common;

use common::{fixtures, klog, klog_ok, scratch_dir, stderr};
use serde_json::{json, Value};

fn batch(name: &str) -> String {
    fixtures()
        .join("batches")
        .join(name)
        .to_str()
        .unwrap()
        .to_owned()
}

#[test]
fn mirror_configs_are_set_at_create_and_describe_and_run_show_them_with_the_lag() {
    let dir = scratch_dir("cli_mirror_sync");
    let (a, b) = (dir.join("A"), dir.join("B"));
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    let at = a.join("t-0");
    klog_ok(&["cluster", "init", a_s]);
    klog_ok(&["cluster", "init", b_s]);
    klog_ok(&["topic", "create", a_s, "t"]);
    klog_ok(&[
        "append",
        at.to_str().unwrap(),
        &batch("idempotent-none.bin"),
    ]);

    for (args, what) in [
        (
            vec!["--config", "groups.include=ok,("],
            "groups.include: bad regex \"(\"",
        ),
        (
            vec!["--config", "group.include=x"],
            "unknown mirror config \"group.include\"",
        ),
        (vec!["--config", "acls.include"], "expected KEY=VALUE"),
        (
            vec![
                "--config",
                "groups.exclude=a",
                "--config",
                "groups.exclude=b",
            ],
            "groups.exclude: given twice",
        ),
    ] {
        let out = klog(
            &[
                &["mirror", "create", b_s, "bad", "--source", a_s][..],
                &args,
            ]
            .concat(),
        );
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr(&out).contains(what), "{args:?}: {}", stderr(&out));
    }
    klog_ok(&[
        "mirror",
        "create",
        b_s,
        "m",
        "--source",
        a_s,
        "--config",
        "groups.exclude=tmp-.*",
        "--config",
        "acls.include=TOPIC;*;READ",
    ]);
    klog_ok(&["mirror", "add", b_s, "m", "t"]);

    // One lag line per pass with --lag-interval 0; the last one says the mirror caught up.
    let run = klog_ok(&[
        "mirror",
        "run",
        b_s,
        "--until-idle",
        "--json",
        "--lag-interval",
        "0",
    ]);
    let lags: Vec<Value> = run
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["event"] == "lag")
        .collect();
    assert!(!lags.is_empty(), "{run}");
    assert_eq!(
        lags.last().unwrap(),
        &json!({"event": "lag", "mirror": "m", "lag": 0, "max_partition_lag": 0,
                "partitions": [{"topic": "t", "partition": 0, "lag": 0}]})
    );

    // The source moves on while the topic is paused: describe asks the source and shows the lag.
    klog_ok(&["mirror", "pause", b_s, "m", "t"]);
    klog_ok(&["mirror", "run", b_s, "--until-idle"]);
    klog_ok(&[
        "append",
        at.to_str().unwrap(),
        &batch("idempotent-gzip.bin"),
    ]);
    let d: Value = serde_json::from_str(&klog_ok(&["mirror", "describe", b_s, "--json"])).unwrap();
    assert_eq!(d["partitions"][0]["lag"], 5);
    let m = &d["mirrors"][0];
    assert_eq!(
        (
            &m["mirror"],
            &m["lag"],
            &m["max_partition_lag"],
            &m["partitions"]
        ),
        (&json!("m"), &json!(5), &json!(5), &json!(1))
    );
    assert_eq!(m["source"], json!(std::fs::canonicalize(&a).unwrap()));
    assert_eq!(
        m["configs"],
        json!([
            {"name": "topic.properties.exclude", "default": true,
             "value": klog::mirror::sync_config::TOPIC_PROPERTIES_EXCLUDE_DEFAULT},
            {"name": "groups.include", "value": ".*", "default": true},
            {"name": "groups.exclude", "value": "tmp-.*", "default": false},
            {"name": "acls.include", "value": "TOPIC;*;READ", "default": false},
        ])
    );
    let text = klog_ok(&["mirror", "describe", b_s]);
    assert!(
        text.contains("groups.exclude") && text.contains("tmp-.*") && text.contains("(default)"),
        "{text}"
    );
    let run = klog_ok(&["mirror", "run", b_s, "--until-idle"]);
    assert!(
        run.contains("mirror m: lag"),
        "the summary ends with each mirror's lag: {run}"
    );
}

/// A refusal names Kafka's error once: `klog: error: UNKNOWN_MIRROR: no mirror named nosuch`, and in JSON
/// `{"error": "UNKNOWN_MIRROR", "message": "no mirror named nosuch"}`. The message used to carry the name
/// again (`klog: error UNKNOWN_MIRROR: UNKNOWN_MIRROR: ...`), in every command that reports one.
#[test]
fn a_refusal_names_its_error_once() {
    let dir = scratch_dir("cli_mirror_sync_names");
    let root = dir.join("B");
    let root_s = root.to_str().unwrap();
    klog_ok(&["cluster", "init", root_s]);
    let text = klog(&["mirror", "add", root_s, "nosuch", "t"]);
    assert_eq!(text.status.code(), Some(1), "{}", stderr(&text));
    assert_eq!(
        stderr(&text).matches("UNKNOWN_MIRROR").count(),
        1,
        "{}",
        stderr(&text)
    );
    let out = klog(&["mirror", "add", root_s, "nosuch", "t", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"], "UNKNOWN_MIRROR", "{v}");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("nosuch") && !message.contains("UNKNOWN_MIRROR"),
        "{v}"
    );
    let group = klog(&["group", "commit", root_s, "", "t", "0", "1", "--json"]);
    let v: Value = serde_json::from_slice(&group.stdout).unwrap();
    assert_eq!(v["error"], "INVALID_REQUEST", "{v}");
    assert!(
        !v["message"].as_str().unwrap().contains("INVALID_REQUEST"),
        "{v}"
    );
}
