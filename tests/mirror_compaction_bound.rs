//! klog's own compacted internal topics (issue #27, item 5): `__mirror_state` and `__consumer_offsets`
//! are created compacted, as Kafka creates its coordinators' topics, so only the cleaner ever removes
//! their superseded records and neither time nor size retention removes a live one.

#[path = "mirror_support/mod.rs"]
mod support;

use klog::log::coordinator::{partition_for_group, CONSUMER_OFFSETS_TOPIC};
use klog::log::io::StdStorage;
use std::sync::Arc;
use support::*;

#[test]
fn the_internal_topics_are_compacted_as_kafka_creates_them() {
    let env = Env::new();
    let a = env.cluster("a");
    a.create_topic("t", 1, None, &[]).unwrap();
    a.produce("t", 0, &mut plain(3, "t")).unwrap();
    a.commit_offset("g", "t", 0, 2).unwrap();
    let p = partition_for_group("g", 50) as i32;
    let check = |c: &klog::mirror::Cluster| {
        for (topic, partition) in [("__mirror_state", 0), (CONSUMER_OFFSETS_TOPIC, p)] {
            let config = c.log(topic, partition).unwrap().config().clone();
            assert!(
                config.cleanup_policy.compact && !config.cleanup_policy.delete,
                "{topic}: {:?}",
                config.cleanup_policy
            );
            // Kafka's `offsets.topic.segment.bytes` default, for both coordinator-state topics.
            assert_eq!(config.segment_bytes, 104_857_600, "{topic}");
        }
        // A plain topic keeps Kafka's default policy.
        assert!(c.log("t", 0).unwrap().config().cleanup_policy.delete);
    };
    check(&a);
    a.close().unwrap();
    drop(a);
    // Reopened, the partitions found on disk get the same configs.
    let a = env.reopen(Arc::new(StdStorage), "a");
    check(&a);
    assert_eq!(a.committed_offsets().unwrap().len(), 1);
}
