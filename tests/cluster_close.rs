//! Closing (and checkpointing) a cluster of many partitions writes each log-directory checkpoint once,
//! not once per partition: a cluster of 1,000 partitions used to spend ~28 s in `close`, rewriting and
//! syncing three files whose size grows with the partition count once per partition (quadratic).

mod mirror_support;

use std::sync::Arc;

use klog::log::io::{CountingStorage, IoOp, StdStorage};
use klog::mirror::Cluster;
use mirror_support::{plain, Env};

/// Checkpoint files put in place (each is written to a temp file, then renamed over the old one).
fn rewrites(storage: &CountingStorage) -> u64 {
    storage.count(IoOp::Rename, "recovery-point-offset-checkpoint")
}

fn cluster_of(env: &Env, storage: &Arc<CountingStorage>, partitions: i32) -> Arc<Cluster> {
    let c = env.cluster_on(storage.clone(), "a");
    c.create_topic("t", partitions, None, &[]).unwrap();
    for p in 0..partitions {
        c.produce("t", p, &mut plain(2, &format!("p{p}"))).unwrap();
    }
    c
}

#[test]
fn a_checkpoint_of_many_partitions_writes_each_file_once() {
    let env = Env::new();
    let storage = Arc::new(CountingStorage::new(Arc::new(StdStorage)));
    let c = cluster_of(&env, &storage, 60);
    let before = rewrites(&storage);
    c.checkpoint().unwrap();
    assert_eq!(rewrites(&storage) - before, 1);
    let before = rewrites(&storage);
    c.close().unwrap();
    assert_eq!(rewrites(&storage) - before, 1);
    // And what was written is every partition's: a reopen finds a clean shutdown and every log end.
    let reopened = env.reopen(storage.clone(), "a");
    for p in 0..60 {
        assert_eq!(
            reopened.log("t", p).unwrap().log_end_offset(),
            2,
            "partition {p}"
        );
    }
    let rp =
        std::fs::read_to_string(env.root("a").join("recovery-point-offset-checkpoint")).unwrap();
    assert!(
        rp.lines().filter(|l| l.starts_with("t ")).count() == 60,
        "{rp}"
    );
}

#[test]
fn deleting_a_topic_of_many_partitions_writes_each_checkpoint_once() {
    let env = Env::new();
    let storage = Arc::new(CountingStorage::new(Arc::new(StdStorage)));
    let c = cluster_of(&env, &storage, 60);
    let before = rewrites(&storage);
    c.delete_topic("t").unwrap();
    assert_eq!(rewrites(&storage) - before, 1);
    assert!(c.log("t", 0).is_none());
}
