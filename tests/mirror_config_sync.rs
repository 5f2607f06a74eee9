//! The metadata sync's topic configs and ACL bindings (KIP-1279 §3.5) between local clusters: the
//! source's configs (but the excluded ones) reach the mirror topic and its open logs, local overrides win, the
//! source's ACL bindings for mirrored topics and groups are kept per mirror, and nothing moves while a
//! topic is paused or after it stopped.

#[path = "mirror_support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use klog::log::format::{BatchBuilder, Compression};
use klog::mirror::acl::AclBinding;
use klog::mirror::{Cluster, MirrorState};
use support::*;

/// Past the default `mirror.metadata.refresh.interval.ms` (30 s).
const REFRESH: i64 = 30_001;

fn set(c: &Cluster, topic: &str, changes: &[(&str, Option<&str>)]) {
    let changes: Vec<(String, Option<String>)> = changes
        .iter()
        .map(|(k, v)| (k.to_string(), v.map(str::to_owned)))
        .collect();
    c.alter_topic_configs(topic, &changes).unwrap();
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn acl(kind: &str, name: &str, pattern: &str, principal: &str, op: &str) -> AclBinding {
    AclBinding::parse(kind, name, pattern, principal, "*", op, "allow").unwrap()
}

fn segment_bases(c: &Cluster, topic: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(c.root().join(format!("{topic}-0")))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    names
}

fn no_errors(c: &Cluster) {
    let r = c.run_until_idle(50);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
}

#[test]
fn source_configs_reach_the_mirror_topic_and_its_logs_and_overrides_win() {
    let env = Env::new();
    let a = env.cluster("A");
    let configs: Vec<(String, String)> = [
        ("retention.ms", "3600000"),
        ("segment.bytes", "2048"),
        ("cleanup.policy", "compact"),
        // Synced as every source config is (the reference's rule), applied where klog applies it.
        ("flush.ms", "1000"),
        // On the reference's default topic.properties.exclude: not synced.
        ("message.timestamp.type", "LogAppendTime"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    a.create_topic("t", 1, None, &configs).unwrap();
    for i in 0..20 {
        let mut b = plain(5, &format!("b{i}"));
        a.produce("t", 0, &mut b).unwrap();
    }
    let b = env.cluster("B");
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    no_errors(&b);

    let synced = b.topic("t").unwrap();
    assert_eq!(
        synced.source_configs,
        map(&[
            ("cleanup.policy", "compact"),
            ("flush.ms", "1000"),
            ("retention.ms", "3600000"),
            ("segment.bytes", "2048")
        ])
    );
    assert!(
        synced.configs.keys().all(|k| k == "mirror.name"),
        "{:?}",
        synced.configs
    );
    let log = b.log("t", 0).unwrap();
    assert_eq!(
        (
            log.config().segment_bytes,
            log.config().retention_ms,
            log.config().flush_ms
        ),
        (2048, 3_600_000, 1000)
    );
    // Applied before the first fetch: the mirror rolls where the source rolled.
    assert!(segment_bases(&a, "t").len() > 2);
    assert_eq!(segment_bases(&b, "t"), segment_bases(&a, "t"));
    assert_eq!(b.describe()[0].state, Some(MirrorState::Mirroring));

    // A local override wins over the source; the source's other changes still arrive.
    set(&b, "t", &[("retention.ms", Some("1000"))]);
    set(
        &a,
        "t",
        &[
            ("retention.ms", Some("7200000")),
            ("segment.bytes", Some("4096")),
            ("cleanup.policy", None),
        ],
    );
    env.clock.advance(REFRESH);
    no_errors(&b);
    let t = b.topic("t").unwrap();
    assert_eq!(
        t.source_configs,
        map(&[
            ("flush.ms", "1000"),
            ("retention.ms", "7200000"),
            ("segment.bytes", "4096")
        ])
    );
    assert_eq!(
        t.configs.get("retention.ms").map(String::as_str),
        Some("1000")
    );
    let log = b.log("t", 0).unwrap();
    assert_eq!(
        (log.config().segment_bytes, log.config().retention_ms),
        (4096, 1000)
    );
    let described = b.describe_configs();
    let entries: Vec<(String, String, &str, Option<String>)> = described[0]
        .configs
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                c.value.clone(),
                c.source,
                c.source_value.clone(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        vec![
            ("flush.ms".into(), "1000".into(), "mirror", None),
            (
                "retention.ms".into(),
                "1000".into(),
                "local",
                Some("7200000".into())
            ),
            ("segment.bytes".into(), "4096".into(), "mirror", None),
        ]
    );

    // The synced configs survive a restart and are what the logs open with.
    b.close().unwrap();
    drop(b);
    let b = env.reopen(Arc::new(klog::log::io::StdStorage), "B");
    assert_eq!(b.log("t", 0).unwrap().config().segment_bytes, 4096);
}

#[test]
fn a_batch_only_the_sources_max_message_bytes_admits_is_mirrored() {
    let env = Env::new();
    let a = env.cluster("A");
    let big = [("max.message.bytes".to_string(), "3000000".to_string())];
    a.create_topic("t", 1, None, &big).unwrap();
    let mut builder = BatchBuilder::new(Compression::None);
    builder
        .append(
            1_700_000_000_000,
            Some(b"k"),
            Some(&vec![7u8; 1_500_000]),
            &[],
        )
        .unwrap();
    let mut batch = builder.build().unwrap();
    a.produce("t", 0, &mut batch).unwrap();
    let b = env.cluster("B");
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    no_errors(&b);
    assert_eq!(b.describe()[0].state, Some(MirrorState::Mirroring));
    assert_eq!(b.log("t", 0).unwrap().log_end_offset(), 1);
    assert_eq!(
        batches(&b.log("t", 0).unwrap()),
        batches(&a.log("t", 0).unwrap())
    );
}

#[test]
fn acl_bindings_of_mirrored_topics_and_groups_are_synced_per_mirror() {
    let env = Env::new();
    let a = env.cluster("A");
    a.create_topic("t", 1, None, &[]).unwrap();
    a.create_topic("other", 1, None, &[]).unwrap();
    let read_t = acl("topic", "t", "literal", "User:alice", "read");
    let prefixed = acl("topic", "t", "prefixed", "User:carol", "write");
    let group = acl("group", "g", "literal", "User:alice", "read");
    let other = acl("topic", "other", "literal", "User:bob", "read");
    let cluster = acl("cluster", "kafka-cluster", "literal", "User:admin", "alter");
    for b in [&read_t, &prefixed, &group, &other, &cluster] {
        assert!(a.add_acl(b.clone()).unwrap());
    }
    assert!(!a.add_acl(read_t.clone()).unwrap(), "already there");
    let b = env.cluster("B");
    let own = acl("topic", "local", "literal", "User:dave", "read");
    b.add_acl(own.clone()).unwrap();
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    no_errors(&b);
    let mut want = vec![group.clone(), prefixed.clone(), read_t.clone()];
    want.sort();
    assert_eq!(b.mirrors()["m"].acls, want);
    assert_eq!(
        b.metadata().acls,
        vec![own.clone()],
        "the cluster's own are apart"
    );
    let listed: Vec<(Option<String>, AclBinding)> = b
        .describe_acls()
        .into_iter()
        .map(|e| (e.mirror, e.binding))
        .collect();
    assert_eq!(listed[0], (None, own));
    assert_eq!(listed.len(), 4);

    // A binding the source dropped is dropped here too (the KIP's sync deletes extras).
    assert!(a.remove_acl(&prefixed).unwrap());
    env.clock.advance(REFRESH);
    no_errors(&b);
    assert_eq!(b.mirrors()["m"].acls, vec![group, read_t]);
}

#[test]
fn a_paused_topic_syncs_nothing_until_resumed_and_a_stopped_one_never_again() {
    let env = Env::new();
    let a = env.cluster("A");
    let retention = [("retention.ms".to_string(), "1000".to_string())];
    a.create_topic("t", 1, None, &retention).unwrap();
    let alice = acl("topic", "t", "literal", "User:alice", "read");
    a.add_acl(alice.clone()).unwrap();
    let b = env.cluster("B");
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    no_errors(&b);
    assert_eq!(
        b.topic("t").unwrap().source_configs,
        map(&[("retention.ms", "1000")])
    );
    assert_eq!(b.mirrors()["m"].acls, vec![alice.clone()]);

    all_ok(b.pause_topics("m", &topics(&["t"])).unwrap());
    no_errors(&b);
    let bob = acl("topic", "t", "literal", "User:bob", "read");
    set(&a, "t", &[("retention.ms", Some("2000"))]);
    a.add_acl(bob.clone()).unwrap();
    env.clock.advance(REFRESH);
    no_errors(&b);
    assert_eq!(b.describe()[0].state, Some(MirrorState::Paused));
    assert_eq!(
        b.topic("t").unwrap().source_configs,
        map(&[("retention.ms", "1000")])
    );
    assert_eq!(b.log("t", 0).unwrap().config().retention_ms, 1000);
    assert_eq!(b.mirrors()["m"].acls, vec![alice.clone()]);

    all_ok(b.resume_topics("m", &topics(&["t"])).unwrap());
    env.clock.advance(REFRESH);
    no_errors(&b);
    assert_eq!(
        b.topic("t").unwrap().source_configs,
        map(&[("retention.ms", "2000")])
    );
    assert_eq!(b.log("t", 0).unwrap().config().retention_ms, 2000);
    assert_eq!(b.mirrors()["m"].acls, vec![alice.clone(), bob.clone()]);

    // After failover the destination owns the topic: the source's changes no longer arrive, and the
    // bindings synced for it stay.
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    no_errors(&b);
    assert_eq!(b.describe()[0].state, Some(MirrorState::Stopped));
    set(&a, "t", &[("retention.ms", Some("3000"))]);
    a.remove_acl(&alice).unwrap();
    env.clock.advance(REFRESH);
    no_errors(&b);
    assert_eq!(
        b.topic("t").unwrap().source_configs,
        map(&[("retention.ms", "2000")])
    );
    assert_eq!(b.log("t", 0).unwrap().config().retention_ms, 2000);
    assert_eq!(b.mirrors()["m"].acls, vec![alice, bob]);
}

#[test]
fn bad_local_configs_and_acls_are_refused_by_name() {
    let env = Env::new();
    let a = env.cluster("A");
    a.create_topic("t", 1, None, &[]).unwrap();
    for (k, v, what) in [
        ("cleanup.policy", "shred", "cleanup.policy"),
        ("segment.bytes", "1", "segment.bytes"),
        ("mirror.name", "m", "mirror.name"),
    ] {
        let e = a
            .alter_topic_configs("t", &[(k.to_string(), Some(v.to_string()))])
            .unwrap_err()
            .to_string();
        assert!(e.contains(what), "{e}");
    }
    // An empty `cleanup.policy` is Kafka's empty list (`ValidList` has no item to refuse): neither
    // cleanup applies. The compaction configs are applied now, so klog's `LogConfig` is the judge.
    a.create_topic("u", 1, None, &[("cleanup.policy".into(), "".into())])
        .unwrap();
    let policy = a.log("u", 0).unwrap().config().cleanup_policy;
    assert!(!policy.compact && !policy.delete, "{policy:?}");
    let e = AclBinding::parse("topic", "t", "literal", "User:a", "*", "read", "maybe").unwrap_err();
    assert!(e.contains("permission type \"maybe\""), "{e}");
}

/// A source whose topic configs carry a value klog refuses (as a Kafka with other bounds might).
struct OddConfigs(klog::mirror::LocalSource);

impl klog::mirror::MirrorSource for OddConfigs {
    fn describe(&self) -> String {
        self.0.describe()
    }
    fn cluster_id(&self) -> Result<String, klog::mirror::source::SourceError> {
        self.0.cluster_id()
    }
    fn topic(
        &self,
        name: &str,
    ) -> Result<Option<klog::mirror::source::SourceTopic>, klog::mirror::source::SourceError> {
        self.0.topic(name)
    }
    fn fetch(
        &self,
        r: &klog::mirror::source::FetchRequest,
    ) -> Result<klog::mirror::source::FetchResponse, klog::mirror::source::SourceError> {
        self.0.fetch(r)
    }
    fn list_offsets(
        &self,
        t: &str,
        id: klog::log::checkpoint::TopicId,
        p: i32,
    ) -> Result<(i64, i64), klog::mirror::source::SourceError> {
        self.0.list_offsets(t, id, p)
    }
    fn last_mirrored_epoch(
        &self,
        c: &str,
        id: klog::log::checkpoint::TopicId,
        p: i32,
    ) -> Result<i32, klog::mirror::source::SourceError> {
        self.0.last_mirrored_epoch(c, id, p)
    }
    fn topic_configs(
        &self,
        _t: &str,
    ) -> Result<Option<BTreeMap<String, String>>, klog::mirror::source::SourceError> {
        Ok(Some(map(&[
            ("retention.ms", "5000"),
            ("segment.bytes", "1"),
        ])))
    }
    fn acls(&self) -> Result<Option<Vec<AclBinding>>, klog::mirror::source::SourceError> {
        self.0.acls()
    }
    fn committed_offsets(
        &self,
        topics: &std::collections::BTreeSet<String>,
    ) -> Result<Vec<klog::mirror::source::SourceGroup>, klog::mirror::source::SourceError> {
        self.0.committed_offsets(topics)
    }
}

#[test]
fn a_source_value_klog_refuses_is_reported_and_the_rest_applies() {
    let env = Env::new();
    let a = env.cluster("A");
    a.create_topic("t", 1, None, &[]).unwrap();
    let b = env.cluster("B");
    b.create_mirror("m", a.root().to_str().unwrap()).unwrap();
    b.connect_source("m", Arc::new(OddConfigs(a.as_source())));
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(50);
    assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
    assert!(
        r.errors[0].0 == "t" && r.errors[0].2.contains("segment.bytes"),
        "{:?}",
        r.errors
    );
    assert_eq!(
        b.topic("t").unwrap().source_configs,
        map(&[("retention.ms", "5000")])
    );
    assert_eq!(b.log("t", 0).unwrap().config().retention_ms, 5000);
    assert_eq!(b.describe()[0].state, Some(MirrorState::Mirroring));
}

#[test]
fn a_topic_added_between_syncs_has_the_sources_configs_before_its_first_fetch() {
    let env = Env::new();
    let a = env.cluster("A");
    a.create_topic("t1", 1, None, &[]).unwrap();
    let b = env.cluster("B");
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t1"])).unwrap());
    no_errors(&b); // the mirror's sync ran: the next one is 30 s away
    let big = [("max.message.bytes".to_string(), "3000000".to_string())];
    a.create_topic("t2", 1, None, &big).unwrap();
    let mut builder = BatchBuilder::new(Compression::None);
    builder
        .append(
            1_700_000_000_000,
            Some(b"k"),
            Some(&vec![7u8; 1_500_000]),
            &[],
        )
        .unwrap();
    let mut batch = builder.build().unwrap();
    a.produce("t2", 0, &mut batch).unwrap();
    all_ok(b.add_topics("m", &topics(&["t2"])).unwrap());
    assert_eq!(
        b.topic("t2").unwrap().source_configs,
        map(&[("max.message.bytes", "3000000")])
    );
    no_errors(&b);
    assert_eq!(b.log("t2", 0).unwrap().log_end_offset(), 1);
}
