//! `klog topic config`, `klog acl` and the config and ACL parts of `klog mirror describe` (docs/cli.md):
//! a mirror run carries the source's topic configs and ACL bindings, a local override wins and is shown
//! with the source's value, and bad input is named.

mod common;

use common::{klog, klog_ok, scratch_dir, stderr, stdout};
use serde_json::{json, Value};

#[test]
fn a_mirror_run_carries_configs_and_acls_and_describe_shows_them() {
    let dir = scratch_dir("cli_mirror_configs");
    let (a, b) = (dir.join("A"), dir.join("B"));
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    klog_ok(&["cluster", "init", a_s]);
    klog_ok(&["cluster", "init", b_s]);
    klog_ok(&[
        "topic",
        "create",
        a_s,
        "t",
        "--config",
        "retention.ms=3600000",
        "--config",
        "cleanup.policy=compact",
    ]);
    let acl = [
        "--resource-type",
        "topic",
        "--resource-name",
        "t",
        "--principal",
        "User:alice",
        "--operation",
        "read",
    ];
    let added = klog_ok(&[&["acl", "add", a_s][..], &acl[..]].concat());
    assert!(
        added.starts_with("added ALLOW READ on TOPIC t (LITERAL) for User:alice"),
        "{added}"
    );
    klog_ok(&["mirror", "create", b_s, "m", "--source", a_s]);
    klog_ok(&["mirror", "add", b_s, "m", "t"]);
    klog_ok(&["mirror", "run", b_s, "--until-idle"]);

    // An override on the mirror topic, and a source change a second run picks up.
    let set = klog_ok(&[
        "topic",
        "config",
        b_s,
        "t",
        "--set",
        "retention.ms=1000",
        "--json",
    ]);
    let set: Value = serde_json::from_str(&set).unwrap();
    assert_eq!(
        set["configs"],
        json!([
            {"name": "cleanup.policy", "value": "compact", "source": "mirror"},
            {"name": "retention.ms", "value": "1000", "source": "local", "source_value": "3600000"}
        ])
    );
    klog_ok(&[
        "topic",
        "config",
        a_s,
        "t",
        "--delete",
        "cleanup.policy",
        "--set",
        "segment.ms=60000",
    ]);
    klog_ok(&["mirror", "run", b_s, "--until-idle"]);

    let d: Value =
        serde_json::from_str(&klog_ok(&["mirror", "describe", b_s, "--json", "--acls"])).unwrap();
    assert_eq!(d["partitions"][0]["state"], "MIRRORING");
    assert_eq!(
        d["configs"],
        json!([{"topic": "t", "mirror": "m", "configs": [
            {"name": "retention.ms", "value": "1000", "source": "local", "source_value": "3600000"},
            {"name": "segment.ms", "value": "60000", "source": "mirror"}
        ]}])
    );
    assert_eq!(
        d["acls"],
        json!([{"mirror": "m", "resource_type": "TOPIC", "resource_name": "t",
                "pattern_type": "LITERAL", "principal": "User:alice", "host": "*",
                "operation": "READ", "permission_type": "ALLOW"}])
    );
    let plain = klog_ok(&["mirror", "describe", b_s]);
    assert!(
        plain.contains("retention.ms") && plain.contains("local (source: 3600000)"),
        "{plain}"
    );
    assert!(
        !plain.contains("User:alice"),
        "ACLs only with --acls: {plain}"
    );
    let with_acls = klog_ok(&["mirror", "describe", b_s, "--acls"]);
    assert!(with_acls.contains("User:alice"), "{with_acls}");
    let listed: Value = serde_json::from_str(&klog_ok(&["acl", "list", b_s, "--json"])).unwrap();
    assert_eq!(listed["acls"], d["acls"]);
    let removed = klog_ok(&[&["acl", "remove", a_s][..], &acl[..]].concat());
    assert!(removed.starts_with("removed "), "{removed}");
}

#[test]
fn bad_configs_and_acls_are_named() {
    let dir = scratch_dir("cli_mirror_configs_bad");
    let a = dir.join("A");
    let a_s = a.to_str().unwrap();
    klog_ok(&["cluster", "init", a_s]);
    klog_ok(&["topic", "create", a_s, "t"]);
    for (args, what) in [
        (
            vec!["topic", "config", a_s, "t", "--set", "cleanup.policy=shred"],
            "cleanup.policy",
        ),
        (
            vec!["topic", "config", a_s, "t", "--set", "retention.ms"],
            "expected KEY=VALUE",
        ),
        (vec!["topic", "config", a_s, "nope"], "no topic nope"),
        (
            vec![
                "acl",
                "add",
                a_s,
                "--resource-type",
                "topic",
                "--resource-name",
                "t",
                "--principal",
                "User:a",
                "--operation",
                "fly",
            ],
            "operation \"fly\"",
        ),
    ] {
        let out = klog(&args);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr(&out).contains(what), "{args:?}: {}", stderr(&out));
    }
}

/// The listing commands are readers: beside a writer holding the cluster's `.lock` (here this test
/// process, as a running `klog mirror run` would), `acl list`, `topic config` without a change,
/// `group describe` and `mirror describe` answer instead of being refused, and change nothing.
#[test]
fn listings_answer_beside_a_running_writer() {
    use std::sync::Arc;

    use klog::log::clock::SystemClock;
    use klog::log::io::StdStorage;
    use klog::mirror::Cluster;

    let dir = scratch_dir("cli_mirror_configs_readers");
    let a = dir.join("A");
    let a_s = a.to_str().unwrap();
    klog_ok(&["cluster", "init", a_s]);
    klog_ok(&[
        "topic",
        "create",
        a_s,
        "t",
        "--config",
        "retention.ms=3600000",
    ]);
    klog_ok(&[
        "acl",
        "add",
        a_s,
        "--resource-type",
        "topic",
        "--resource-name",
        "t",
        "--principal",
        "User:alice",
        "--operation",
        "read",
    ]);
    let writer = Cluster::open(Arc::new(StdStorage), Arc::new(SystemClock), &a).unwrap();
    let acls: Value = serde_json::from_str(&klog_ok(&["acl", "list", a_s, "--json"])).unwrap();
    assert_eq!(acls["acls"].as_array().map(Vec::len), Some(1), "{acls}");
    let configs: Value =
        serde_json::from_str(&klog_ok(&["topic", "config", a_s, "t", "--json"])).unwrap();
    assert!(configs.to_string().contains("3600000"), "{configs}");
    klog_ok(&["group", "describe", a_s]);
    klog_ok(&["mirror", "describe", a_s]);
    // A change is a writer's, and is refused while the writer runs.
    let out = klog(&["topic", "config", a_s, "t", "--set", "retention.ms=1000"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(stderr(&out).contains(".lock"), "{}", stderr(&out));
    writer.close().unwrap();
}
