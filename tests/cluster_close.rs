//! Closing (and checkpointing) a cluster of many partitions writes each log-directory checkpoint once,
//! not once per partition: a cluster of 1,000 partitions used to spend ~28 s in `close`, rewriting and
//! syncing three files whose size grows with the partition count once per partition (quadratic).

mod mirror_support;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use klog::log::io::{StdStorage, Storage, StorageFile};
use klog::mirror::Cluster;
use mirror_support::{plain, Env};

/// Std storage that counts the checkpoint files put in place (each is written to a temp file, then
/// renamed over the old one).
#[derive(Debug, Default)]
struct CountingCheckpoints {
    renames: AtomicU64,
}

impl Storage for CountingCheckpoints {
    fn create(&self, path: &Path) -> std::io::Result<Arc<dyn StorageFile>> {
        StdStorage.create(path)
    }
    fn open(&self, path: &Path) -> std::io::Result<Arc<dyn StorageFile>> {
        StdStorage.open(path)
    }
    fn open_read(&self, path: &Path) -> std::io::Result<Arc<dyn StorageFile>> {
        StdStorage.open_read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        if to
            .file_name()
            .is_some_and(|n| n == "recovery-point-offset-checkpoint")
        {
            self.renames.fetch_add(1, Ordering::Relaxed);
        }
        StdStorage.rename(from, to)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        StdStorage.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        StdStorage.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        StdStorage.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        StdStorage.create_dir_all(dir)
    }
    fn name(&self) -> &'static str {
        "counting-checkpoints"
    }
    fn lock_dir(&self, dir: &Path) -> std::io::Result<Option<std::fs::File>> {
        StdStorage.lock_dir(dir)
    }
}

fn cluster_of(env: &Env, storage: &Arc<CountingCheckpoints>, partitions: i32) -> Arc<Cluster> {
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
    let storage = Arc::new(CountingCheckpoints::default());
    let c = cluster_of(&env, &storage, 60);
    let before = storage.renames.load(Ordering::Relaxed);
    c.checkpoint().unwrap();
    assert_eq!(storage.renames.load(Ordering::Relaxed) - before, 1);
    let before = storage.renames.load(Ordering::Relaxed);
    c.close().unwrap();
    assert_eq!(storage.renames.load(Ordering::Relaxed) - before, 1);
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
    let storage = Arc::new(CountingCheckpoints::default());
    let c = cluster_of(&env, &storage, 60);
    let before = storage.renames.load(Ordering::Relaxed);
    c.delete_topic("t").unwrap();
    assert_eq!(storage.renames.load(Ordering::Relaxed) - before, 1);
    assert!(c.log("t", 0).is_none());
}
