//! KIP-1279 mirroring: a local cluster that mirrors a topic of another cluster, byte for byte, then
//! fails over (the topic becomes writable here).
//!
//! Run: `cargo run --example mirror` mirrors from a second local klog cluster it creates (in a temporary
//! directory). `cargo run --example mirror -- kafka://HOST:PORT TOPIC` mirrors TOPIC from a running Kafka
//! cluster instead (bootstrap brokers, plaintext) for a few seconds and prints the state of each partition.

use std::error::Error;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use klog::log::clock::SystemClock;
use klog::log::format::{BatchBuilder, Compression};
use klog::log::io::{StdStorage, Storage};
use klog::mirror::{Cluster, ClusterOptions, MirrorState};

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scratch = tempfile::tempdir()?;
    match args.as_slice() {
        [] => from_local_cluster(scratch.path()),
        [source, topic] if source.starts_with("kafka://") => {
            from_kafka(scratch.path(), source, topic)
        }
        _ => Err("usage: mirror [kafka://HOST:PORT[,HOST:PORT...] TOPIC]".into()),
    }
}

fn storage() -> Arc<dyn Storage> {
    Arc::new(StdStorage)
}

/// A cluster: one root directory (a Kafka log directory, `cluster.json`, `__mirror_state`).
fn cluster(root: &Path) -> Result<Cluster, Box<dyn Error>> {
    Ok(Cluster::init(
        storage(),
        Arc::new(SystemClock),
        root,
        ClusterOptions::default(),
    )?)
}

fn from_local_cluster(scratch: &Path) -> Result<(), Box<dyn Error>> {
    // The source: a topic with some records.
    let source = Arc::new(cluster(&scratch.join("primary"))?);
    source.create_topic("orders", 1, None, &[])?;
    for i in 0..5 {
        let mut b = BatchBuilder::new(Compression::Snappy).producer(7, 0, i * 2);
        b.append(1_700_000_000_000, None, Some(b"order"), &[])?;
        b.append(1_700_000_000_000, None, Some(b"order"), &[])?;
        source.produce("orders", 0, &mut b.build()?)?;
    }

    // The mirror: created by name with its source, the source served in process here.
    let dr = cluster(&scratch.join("dr"))?;
    let source_root = scratch.join("primary");
    dr.create_mirror("dr", source_root.to_str().ok_or("a UTF-8 path")?)?;
    dr.connect_source("dr", Arc::new(source.as_source()));
    for (topic, result) in dr.add_topics("dr", &["orders".to_owned()])? {
        result.map_err(|e| format!("{topic}: {e}"))?;
    }
    // `tick` drives the state machine and the fetchers; a server calls it in its own loop.
    let report = dr.run_until_idle(1000);
    for (topic, partition, from, to) in &report.transitions {
        println!("{topic}-{partition}: {from} -> {to}");
    }
    let mirrored = dr.log("orders", 0).ok_or("no mirrored partition")?;
    println!(
        "mirrored {} offsets, read-only while mirroring",
        mirrored.log_end_offset()
    );
    assert_eq!(mirrored.log_end_offset(), 10);

    // Failover: remove the topic from the mirror; STOPPING records the last mirrored epoch, bumps the
    // epoch, writes the MIRROR_PID_RESET barrier, and the topic becomes writable (STOPPED).
    for (topic, result) in dr.remove_topics("dr", &["orders".to_owned()])? {
        result.map_err(|e| format!("{topic}: {e}"))?;
    }
    let report = dr.run_until_idle(1000);
    for (topic, partition, from, to) in &report.transitions {
        println!("{topic}-{partition}: {from} -> {to}");
    }
    let state = dr.describe().into_iter().next().and_then(|d| d.state);
    assert_eq!(state, Some(MirrorState::Stopped));
    dr.close()?;
    source.close()?;
    Ok(())
}

fn from_kafka(scratch: &Path, bootstrap: &str, topic: &str) -> Result<(), Box<dyn Error>> {
    let dr = cluster(&scratch.join("dr"))?;
    // A `kafka://` source is connected to when first needed (Metadata, Fetch, ListOffsets).
    dr.create_mirror("from-kafka", bootstrap)?;
    for (topic, result) in dr.add_topics("from-kafka", &[topic.to_owned()])? {
        result.map_err(|e| format!("{topic}: {e}"))?;
    }
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        let report = dr.tick();
        for (topic, partition, from, to) in &report.transitions {
            println!("{topic}-{partition}: {from} -> {to}");
        }
        for (topic, partition, error) in &report.errors {
            println!("{topic}-{partition}: {error}");
        }
        if !report.progressed() {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    for d in dr.describe() {
        println!(
            "{}-{}: {:?}, local log end {}, lag {:?}",
            d.topic, d.partition, d.state, d.log_end_offset, d.lag
        );
    }
    dr.close()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn mirrors_from_a_local_cluster_and_fails_over() {
        let dir = tempfile::tempdir().unwrap();
        super::from_local_cluster(dir.path()).unwrap();
    }
}
