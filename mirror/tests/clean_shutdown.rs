//! A cluster's close vouches, with `.kafka_cleanshutdown`, only for the partition directories it
//! closed cleanly (or found clean and never opened): a log directory that already held a partition
//! with a torn tail, not in `cluster.json`, must not be declared clean by `cluster init` and a close.
//! Kafka loads every partition directory of a log directory at startup; the node recovers the ones its
//! metadata does not name, so its marker is true.

use std::path::Path;
use std::sync::Arc;

use klog_log::checkpoint::CLEAN_SHUTDOWN_FILE;
use klog_log::clock::{Clock, SystemClock};
use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression};
use klog_log::io::{SimStorage, Storage};
use klog_log::log_dir::LogDir;
use klog_mirror::{Cluster, ClusterOptions};

const ROOT: &str = "/c";

fn batch(value: &[u8]) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(1_700_000_000_000, Some(b"k"), Some(value), &[])
        .unwrap();
    b.build().unwrap()
}

/// `x-0` with three batches (offsets 0..3) and half of a fourth after them, as a crash leaves it, in a
/// log directory without the clean-shutdown marker. Returns the length of the three whole batches.
fn torn_partition(sim: &SimStorage) -> usize {
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let mut dir = LogDir::open(storage.clone(), Path::new(ROOT)).unwrap();
    let (log, _) = dir.open_partition("x-0", LogConfig::default()).unwrap();
    for _ in 0..3 {
        log.append_as_leader(&mut batch(b"acked"), 0).unwrap();
    }
    dir.close_partition(log).unwrap();
    dir.close().unwrap();
    let root = Path::new(ROOT);
    storage.remove(&root.join(CLEAN_SHUTDOWN_FILE)).unwrap();
    let segment = root.join("x-0").join("00000000000000000000.log");
    let mut bytes = sim.live_bytes(&segment).unwrap();
    let whole = bytes.len();
    let torn = batch(b"torn");
    bytes.extend_from_slice(&torn[..torn.len() / 2]);
    sim.corrupt(&segment, bytes).unwrap();
    whole
}

fn has_marker(storage: &dyn Storage) -> bool {
    storage
        .list(Path::new(ROOT))
        .unwrap()
        .iter()
        .any(|n| n == CLEAN_SHUTDOWN_FILE)
}

#[test]
fn a_cluster_over_a_torn_partition_it_does_not_know_vouches_only_for_what_it_closed() {
    let sim = SimStorage::new(11);
    let whole = torn_partition(&sim);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let root = Path::new(ROOT);
    let cluster = Cluster::init(
        storage.clone(),
        clock.clone(),
        root,
        ClusterOptions::default(),
    )
    .unwrap();
    cluster.close().unwrap();
    drop(cluster);
    // Kafka loads every partition directory at startup: x-0 was recovered, so the marker is true.
    let segment = Path::new(ROOT).join("x-0").join("00000000000000000000.log");
    assert_eq!(
        sim.live_bytes(&segment).unwrap().len(),
        whole,
        "x-0's torn tail"
    );
    assert!(has_marker(storage.as_ref()));

    // The next writer adopts x-0 (a topic created over it) and appends: the batch must be read back at
    // the offset the append reported, and survive the next unclean recovery.
    let cluster = Cluster::open(storage.clone(), clock.clone(), root).unwrap();
    cluster.create_topic("x", 1, None, &[]).unwrap();
    let info = cluster.produce("x", 0, &mut batch(b"after")).unwrap();
    assert_eq!(info.first_offset, 3, "the append went after the torn bytes");
    let log = cluster.log("x", 0).unwrap();
    let read = log.read(info.first_offset, 1 << 20, None, true).unwrap();
    let bytes = read.records.as_slice();
    assert!(
        bytes.len() >= 8,
        "offset {} reads back nothing",
        info.first_offset
    );
    assert_eq!(i64::from_be_bytes(bytes[..8].try_into().unwrap()), 3);
    log.flush(log.log_end_offset()).unwrap();
    drop(log);
    cluster.close().unwrap();
    drop(cluster);

    // An unclean recovery keeps it: the log is 0..4.
    storage.remove(&root.join(CLEAN_SHUTDOWN_FILE)).unwrap();
    let cluster = Cluster::open(storage.clone(), clock, root).unwrap();
    assert_eq!(cluster.log("x", 0).unwrap().log_end_offset(), 4);
    cluster.close().unwrap();
}

#[test]
fn a_partition_directory_the_cluster_cannot_list_withholds_the_marker() {
    let sim = SimStorage::new(12);
    torn_partition(&sim);
    sim.deny_list(&Path::new(ROOT).join("x-0"));
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let cluster = Cluster::init(
        storage.clone(),
        clock,
        Path::new(ROOT),
        ClusterOptions::default(),
    )
    .unwrap();
    cluster.create_topic("t", 1, None, &[]).unwrap();
    cluster.produce("t", 0, &mut batch(b"v")).unwrap();
    cluster.close().unwrap();
    assert!(
        !has_marker(storage.as_ref()),
        "the marker vouched for x-0, which the cluster could not read"
    );
}
