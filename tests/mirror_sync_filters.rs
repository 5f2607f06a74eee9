//! The metadata sync's filters as the reference implementation has them (issue 25, "Metadata sync
//! filters"): every source topic config but `topic.properties.exclude` and the configs never taken,
//! ACL bindings by `acls.include`, groups by `groups.include` / `groups.exclude`, a clamped group
//! offset with the epoch of the offset it was clamped to and empty metadata; and each mirror's lag.
//! The source is a local cluster whose configs, bindings or groups a script replaces.

#[path = "mirror_support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use klog::log::checkpoint::TopicId;
use klog::mirror::acl::AclBinding;
use klog::mirror::source::{
    CommittedOffset, FetchRequest, FetchResponse, SourceError, SourceGroup, SourceTopic,
};
use klog::mirror::{Cluster, LocalSource, MirrorSettings, MirrorSource, MirrorState};
use support::*;

/// A local source whose topic configs, ACL bindings or groups are the script's when set.
struct Scripted {
    local: LocalSource,
    configs: Option<BTreeMap<String, String>>,
    acls: Option<Vec<AclBinding>>,
    groups: Option<Vec<SourceGroup>>,
}

impl Scripted {
    fn new(a: &Cluster) -> Self {
        Scripted {
            local: a.as_source(),
            configs: None,
            acls: None,
            groups: None,
        }
    }
}

impl MirrorSource for Scripted {
    fn describe(&self) -> String {
        self.local.describe()
    }
    fn cluster_id(&self) -> Result<String, SourceError> {
        self.local.cluster_id()
    }
    fn topic(&self, name: &str) -> Result<Option<SourceTopic>, SourceError> {
        self.local.topic(name)
    }
    fn fetch(&self, r: &FetchRequest) -> Result<FetchResponse, SourceError> {
        self.local.fetch(r)
    }
    fn list_offsets(&self, t: &str, id: TopicId, p: i32) -> Result<(i64, i64), SourceError> {
        self.local.list_offsets(t, id, p)
    }
    fn last_mirrored_epoch(&self, c: &str, id: TopicId, p: i32) -> Result<i32, SourceError> {
        self.local.last_mirrored_epoch(c, id, p)
    }
    fn committed_offsets(
        &self,
        topics: &BTreeSet<String>,
    ) -> Result<Vec<SourceGroup>, SourceError> {
        match &self.groups {
            Some(g) => Ok(g.clone()),
            None => self.local.committed_offsets(topics),
        }
    }
    fn topic_configs(&self, t: &str) -> Result<Option<BTreeMap<String, String>>, SourceError> {
        match &self.configs {
            Some(c) => Ok(Some(c.clone())),
            None => self.local.topic_configs(t),
        }
    }
    fn acls(&self) -> Result<Option<Vec<AclBinding>>, SourceError> {
        match &self.acls {
            Some(a) => Ok(Some(a.clone())),
            None => self.local.acls(),
        }
    }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A mirror's configs as `create_mirror_with_configs` takes them.
fn configs_of(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn acl(kind: &str, name: &str, principal: &str, op: &str) -> AclBinding {
    AclBinding::parse(kind, name, "literal", principal, "*", op, "allow").unwrap()
}

/// `A` with topic `t` (one partition, 10 records) and `B` mirroring it through `script`, with the
/// mirror's sync `configs`.
fn mirrored(
    env: &Env,
    configs: &[(&str, &str)],
    script: impl FnOnce(&mut Scripted),
) -> (Arc<Cluster>, Arc<Cluster>) {
    let a = env.cluster("A");
    a.create_topic("t", 1, None, &[]).unwrap();
    a.produce("t", 0, &mut plain(10, "t")).unwrap();
    let b = env.cluster("B");
    b.create_mirror_with_configs("m", a.root().to_str().unwrap(), &configs_of(configs))
        .unwrap();
    let mut source = Scripted::new(&a);
    script(&mut source);
    b.connect_source("m", Arc::new(source));
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    (a, b)
}

/// A source's dynamic configs, some on the reference's default exclude list, some never taken.
fn source_configs() -> BTreeMap<String, String> {
    map(&[
        ("retention.ms", "3600000"),
        ("flush.ms", "1000"),
        ("compression.type", "zstd"),
        ("message.timestamp.type", "LogAppendTime"),
        ("min.insync.replicas", "2"),
        ("unclean.leader.election.enable", "true"),
        ("leader.replication.throttled.replicas", "*"),
        ("mirror.name", "other"),
        ("mirror.support.unclean.leader.election", "true"),
        ("remote.storage.enable", "true"),
        ("io_backend", "uring"),
    ])
}

#[test]
fn every_source_config_is_synced_but_the_excluded_and_those_never_taken() {
    let env = Env::new();
    let (_a, b) = mirrored(&env, &[], |s| s.configs = Some(source_configs()));
    let r = b.run_until_idle(50);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(
        b.topic("t").unwrap().source_configs,
        map(&[
            ("compression.type", "zstd"),
            ("flush.ms", "1000"),
            ("retention.ms", "3600000"),
        ])
    );
    // Applied where klog applies it (flush.ms), kept otherwise (compression.type).
    let log = b.log("t", 0).unwrap();
    assert_eq!(
        (log.config().flush_ms, log.config().retention_ms),
        (1000, 3_600_000)
    );
    assert_eq!(b.describe()[0].state, Some(MirrorState::Mirroring));
}

#[test]
fn a_mirrors_exclude_list_replaces_the_default_and_mirror_configs_stay_out() {
    let env = Env::new();
    let (_a, b) = mirrored(
        &env,
        &[(
            "topic.properties.exclude",
            "retention\\..*, compression\\..*",
        )],
        |s| s.configs = Some(source_configs()),
    );
    let r = b.run_until_idle(50);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(
        b.topic("t").unwrap().source_configs,
        map(&[
            ("flush.ms", "1000"),
            ("leader.replication.throttled.replicas", "*"),
            ("message.timestamp.type", "LogAppendTime"),
            ("min.insync.replicas", "2"),
            ("unclean.leader.election.enable", "true"),
        ])
    );
    assert_eq!(b.log("t", 0).unwrap().config().retention_ms, 604_800_000);
}

#[test]
fn a_source_config_klog_does_not_know_is_refused_by_name_and_the_rest_applies() {
    let env = Env::new();
    let (_a, b) = mirrored(&env, &[], |s| {
        s.configs = Some(map(&[
            ("retention.ms", "5000"),
            ("confluent.placement.constraints", "{}"),
        ]))
    });
    let r = b.run_until_idle(50);
    assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
    let (topic, _, message) = &r.errors[0];
    assert!(
        topic == "t"
            && message.contains("confluent.placement.constraints")
            && message.contains("topic.properties.exclude"),
        "{message}"
    );
    assert_eq!(
        b.topic("t").unwrap().source_configs,
        map(&[("retention.ms", "5000")])
    );
}

#[test]
fn acl_bindings_outside_acls_include_are_not_synced() {
    let bindings = vec![
        acl("topic", "t", "User:alice", "read"),
        acl("topic", "t", "User:bob", "write"),
        acl("group", "g", "User:alice", "read"),
    ];
    let env = Env::new();
    let (_a, b) = mirrored(&env, &[("acls.include", "TOPIC;*;READ")], |s| {
        s.acls = Some(bindings.clone())
    });
    let r = b.run_until_idle(50);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(b.mirrors()["m"].acls, vec![bindings[0].clone()]);

    // The default (`*`) takes every binding of a mirrored topic and every group binding.
    let env = Env::new();
    let (_a, b) = mirrored(&env, &[], |s| s.acls = Some(bindings.clone()));
    b.run_until_idle(50);
    let mut all = bindings.clone();
    all.sort();
    assert_eq!(b.mirrors()["m"].acls, all);
}

fn group(id: &str, offset: i64, leader_epoch: i32, metadata: &str) -> SourceGroup {
    SourceGroup {
        group: id.into(),
        state: "Empty".into(),
        offsets: vec![CommittedOffset {
            group: id.into(),
            topic: "t".into(),
            partition: 0,
            offset,
            leader_epoch,
            metadata: metadata.into(),
            commit_timestamp: 1,
        }],
        no_committed_offset: BTreeSet::new(),
    }
}

#[test]
fn groups_are_synced_by_include_and_exclude() {
    let env = Env::new();
    let (_a, b) = mirrored(
        &env,
        &[
            ("groups.include", "app-.*, billing"),
            ("groups.exclude", "app-test.*"),
        ],
        |s| {
            s.groups = Some(vec![
                group("app-1", 4, 0, ""),
                group("app-test-1", 5, 0, ""),
                group("billing", 6, 0, ""),
                group("other", 7, 0, ""),
            ])
        },
    );
    // An offset of an excluded group that is already here is left alone (as one the source does
    // not list).
    b.commit_offset("other", "t", 0, 1).unwrap();
    let r = b.run_until_idle(50);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let synced: BTreeMap<String, i64> = b
        .committed_offsets()
        .unwrap()
        .into_iter()
        .map(|((g, _, _), c)| (g, c.offset))
        .collect();
    assert_eq!(
        synced,
        [
            ("app-1".to_string(), 4),
            ("billing".into(), 6),
            ("other".into(), 1)
        ]
        .into_iter()
        .collect()
    );
}

#[test]
fn a_clamped_offset_takes_the_epoch_of_where_it_lands_and_empty_metadata() {
    let env = Env::new();
    let a = env.cluster("A");
    a.create_topic("t", 1, None, &[]).unwrap();
    a.produce("t", 0, &mut plain(3, "e0")).unwrap();
    a.bump_leader_epoch("t", 0, 0).unwrap();
    a.bump_leader_epoch("t", 0, 0).unwrap();
    a.produce("t", 0, &mut plain(3, "e2")).unwrap();
    let b = env.cluster("B");
    b.create_mirror("m", a.root().to_str().unwrap()).unwrap();
    let mut source = Scripted::new(&a);
    source.groups = Some(vec![
        // Beyond the source's end: clamped to the log end, 6, in epoch 2.
        group("far", 100, 9, "from the source"),
        // In range: the source's commit as it is, its epoch and metadata included.
        group("near", 2, 5, "kept"),
    ]);
    b.connect_source("m", Arc::new(source));
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(50);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let here = b.committed_offsets().unwrap();
    let far = &here[&("far".to_string(), "t".to_string(), 0)];
    assert_eq!(
        (far.offset, far.leader_epoch, far.metadata.as_str()),
        (6, 2, "")
    );
    let near = &here[&("near".to_string(), "t".to_string(), 0)];
    assert_eq!(
        (near.offset, near.leader_epoch, near.metadata.as_str()),
        (2, 5, "kept")
    );
    let clamp = r.offset_clamps.last().expect("reported");
    assert_eq!(
        (
            clamp.group.as_str(),
            clamp.source_offset,
            clamp.synced_offset
        ),
        ("far", 100, 6)
    );
}

#[test]
fn lag_per_partition_and_per_mirror_after_a_partial_mirror() {
    let env = Env::new();
    let a = env.cluster("A");
    a.create_topic("t", 2, None, &[]).unwrap();
    for i in 0..4 {
        a.produce("t", 0, &mut plain(5, &format!("p0-{i}")))
            .unwrap();
        a.produce("t", 1, &mut plain(2, &format!("p1-{i}")))
            .unwrap();
    }
    let b = env.cluster("B");
    // One batch per partition per fetch: the first ticks leave the mirror behind.
    let b = Arc::new(
        Arc::try_unwrap(b)
            .ok()
            .unwrap()
            .with_settings(MirrorSettings {
                fetch_max_bytes: 1,
                ..MirrorSettings::default()
            }),
    );
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    let rows = b.describe();
    let m = &b.describe_mirrors(&rows)[0];
    assert_eq!(
        (m.lag, m.partitions_without_lag, m.partitions),
        (None, 2, 2)
    );
    // PREPARING -> MIRRORING, then one fetch per partition.
    while b.describe().iter().any(|r| r.log_end_offset == 0) {
        b.tick();
    }
    let rows = b.describe();
    let lags: Vec<(i64, Option<i64>, Option<i64>)> = rows
        .iter()
        .map(|r| (r.high_watermark, r.source_end_offset, r.lag))
        .collect();
    assert_eq!(lags, vec![(5, Some(20), Some(15)), (2, Some(8), Some(6))]);
    let m = &b.describe_mirrors(&rows)[0];
    assert_eq!(
        (
            m.mirror.as_str(),
            m.lag,
            m.max_partition_lag,
            m.partitions_without_lag
        ),
        ("m", Some(21), Some(15), 0)
    );
    b.run_until_idle(50);
    let rows = b.describe();
    assert_eq!(b.describe_mirrors(&rows)[0].lag, Some(0));
    // After the failover the topic is the destination's own: not the mirror's lag any more.
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(50);
    a.produce("t", 0, &mut plain(5, "after")).unwrap();
    let rows = b.describe_live();
    let m = &b.describe_mirrors(&rows)[0];
    assert_eq!(
        (m.partitions, m.lag, m.partitions_without_lag),
        (0, None, 0)
    );
}

#[test]
fn bad_mirror_configs_are_refused_by_name() {
    let env = Env::new();
    let a = env.cluster("A");
    let b = env.cluster("B");
    let source = a.root().to_str().unwrap().to_owned();
    for (pairs, what) in [
        (
            vec![("groups.includes", ".*")],
            "unknown mirror config \"groups.includes\"",
        ),
        (
            vec![("topic.properties.exclude", "a,[")],
            "topic.properties.exclude: bad regex \"[\"",
        ),
        (vec![("acls.include", "TOPIC;*;FLY")], "operation \"FLY\""),
    ] {
        let e = b
            .create_mirror_with_configs("m", &source, &configs_of(&pairs))
            .unwrap_err();
        assert_eq!(e.error_name(), Some("INVALID_REQUEST"));
        assert!(e.to_string().contains(what), "{e}");
    }
    assert!(b.mirrors().is_empty());
    // Kept across a restart, shown with the defaults of the others.
    b.create_mirror_with_configs("m", &source, &configs_of(&[("groups.exclude", "tmp-.*")]))
        .unwrap();
    b.close().unwrap();
    drop(b);
    let b = env.reopen(Arc::new(klog::log::io::StdStorage), "B");
    let d = &b.describe_mirrors(&b.describe())[0];
    let configs: Vec<(&str, &str, bool)> = d
        .configs
        .iter()
        .map(|c| (c.name.as_str(), c.value.as_str(), c.default))
        .collect();
    assert_eq!(
        configs,
        vec![
            (
                "topic.properties.exclude",
                klog::mirror::sync_config::TOPIC_PROPERTIES_EXCLUDE_DEFAULT,
                true
            ),
            ("groups.include", ".*", true),
            ("groups.exclude", "tmp-.*", false),
            ("acls.include", "*", true),
        ]
    );
}

#[test]
fn an_offset_below_the_log_start_is_clamped_to_it_with_its_epoch() {
    let env = Env::new();
    let a = env.cluster("A");
    a.create_topic("t", 1, None, &[]).unwrap();
    a.produce("t", 0, &mut plain(3, "e0")).unwrap();
    a.bump_leader_epoch("t", 0, 0).unwrap();
    a.bump_leader_epoch("t", 0, 0).unwrap();
    a.produce("t", 0, &mut plain(3, "e2")).unwrap();
    let b = env.cluster("B");
    b.create_mirror("m", a.root().to_str().unwrap()).unwrap();
    let mut source = Scripted::new(&a);
    source.groups = Some(vec![group("low", 1, 0, "kept")]);
    b.connect_source("m", Arc::new(source));
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(50);
    let key = ("low".to_string(), "t".to_string(), 0);
    let c = &b.committed_offsets().unwrap()[&key];
    assert_eq!(
        (c.offset, c.leader_epoch, c.metadata.as_str()),
        (1, 0, "kept")
    );

    // The source's log start moves past the commit (retention, DeleteRecords); the mirror follows.
    a.log("t", 0)
        .unwrap()
        .increment_log_start_offset(4)
        .unwrap();
    env.clock.advance(30_001);
    let r = b.run_until_idle(50);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(b.log("t", 0).unwrap().log_start_offset(), 4);
    let c = &b.committed_offsets().unwrap()[&key];
    assert_eq!((c.offset, c.leader_epoch, c.metadata.as_str()), (4, 2, ""));
}
