//! A partition mirrored from a real Kafka 4.4 broker has the indexes Kafka wrote: every sealed segment's
//! `.index`, `.timeindex` and `.txnindex` byte for byte the broker's, the segments based at the same
//! offsets, and the active segment's meaningful entries the same (Kafka preallocates the active
//! segment's indexes; its clean shutdown trims them). `tests/mirror_indexes.rs` compares klog with
//! klog; this compares klog with Kafka.
//!
//! Why the two agree although klog appends whole fetched sets and Kafka's leader appended one produce
//! request (one batch) at a time: Kafka 4.4's `LogSegment.append` counts `index.interval.bytes` per
//! batch of an append, not per append, so the entries depend on the batches alone; and a Kafka Fetch
//! answers one partition from one segment only, so no fetched set spans a roll of the source and
//! klog's roll test (`size > segment.bytes - set size`) rolls where the leader's did. Kafka's own
//! follower appends fetched sets the same way.
//!
//! One field differs where Kafka's own follower would differ too: the last stable offset an aborted
//! transaction's `.txnindex` entry records. Kafka 4.4's `UnifiedLog.append` applies the producer state
//! of the whole appended set and only then asks `ProducerStateManager.lastStableOffset` for each
//! transaction the set completed: the first offset of any other producer's ongoing transaction, or the
//! marker's offset + 1. The leader appended the abort marker alone (370 in a run seen: nothing else
//! open); a follower, or klog's mirror, whose fetched set holds the marker and, after it, the first
//! batch of another producer's transaction records that batch's offset (386 in the same run). So
//! every other byte of a `.txnindex` entry is Kafka's, and its last stable offset is the leader's or
//! the first offset of another producer's transactional batch after the marker.
//!
//! The source's segment size is `internal.segment.bytes` (small segments for a short test; Kafka's
//! `segment.bytes` refuses less than 1 MiB). DescribeConfigs does not return internal configs, so the
//! mirror cannot learn it: the destination sets the same size as a local override
//! (`klog topic config`), the one config the test sets by hand; `index.interval.bytes` comes through
//! the metadata sync.
//!
//! One broker, one test. Skips with one line without Java, unless `KLOG_REQUIRE_KAFKA=1` (CI), where
//! it fails.

mod common;
#[path = "mirror_support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::kafka::{kafka_available, workload, Cluster as KafkaCluster};
use common::{klog_ok, scratch_dir, sorted_entries};
use serde_json::Value;
use support::{kafka_batches, Stored};

const TOPIC: &str = "indexed";
const SEGMENT_BYTES: &str = "65536";
const INDEX_INTERVAL_BYTES: &str = "3000";

/// The segment files of a partition directory by base offset: suffix (`index`, `timeindex`,
/// `txnindex`, `log`) -> path.
fn segments(dir: &Path) -> BTreeMap<i64, BTreeMap<String, PathBuf>> {
    let mut out: BTreeMap<i64, BTreeMap<String, PathBuf>> = BTreeMap::new();
    for path in sorted_entries(dir) {
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let Some((base, suffix)) = name.split_once('.') else {
            continue;
        };
        if !matches!(suffix, "log" | "index" | "timeindex" | "txnindex") {
            continue;
        }
        let Ok(base) = base.parse::<i64>() else {
            continue;
        };
        out.entry(base).or_default().insert(suffix.to_owned(), path);
    }
    out
}

/// The entries of an index file up to its first all-zero entry (what a preallocated index holds).
fn meaningful(bytes: &[u8], entry: usize) -> &[u8] {
    let n = bytes
        .chunks(entry)
        .take_while(|e| e.len() == entry && e.iter().any(|&b| b != 0))
        .count();
    &bytes[..n * entry]
}

fn read(path: Option<&PathBuf>) -> Vec<u8> {
    path.map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap_or_default()
}

/// Whether the batch is a transactional data batch (attributes bit 4, not a control batch).
fn transactional(b: &Stored) -> bool {
    let attributes = u16::from_be_bytes([b.bytes[21], b.bytes[22]]);
    attributes & 0x10 != 0 && !b.control
}

/// A `.txnindex` (34-byte entries: version, producer id, first, last and last stable offset) is
/// Kafka's but for the last stable offset, which is the leader's or, as a Kafka follower computes it
/// for a fetched set (see the module doc), the first offset of another producer's transactional batch
/// after the marker.
fn assert_txn_entries(base: i64, ours: &[u8], theirs: &[u8], batches: &[Stored]) {
    assert_eq!(
        ours.len(),
        theirs.len(),
        "segment {base}: .txnindex entries"
    );
    for (m, k) in ours.chunks(34).zip(theirs.chunks(34)) {
        assert_eq!(m[..26], k[..26], "segment {base}: .txnindex entry");
        let lso = |e: &[u8]| i64::from_be_bytes(e[26..34].try_into().unwrap());
        let (producer_id, last_offset) = (
            i64::from_be_bytes(k[2..10].try_into().unwrap()),
            i64::from_be_bytes(k[18..26].try_into().unwrap()),
        );
        let follower_lso = batches.iter().any(|b| {
            b.base_offset == lso(m)
                && b.base_offset > last_offset
                && b.producer_id != producer_id
                && transactional(b)
        });
        assert!(
            lso(m) == lso(k) || follower_lso,
            "segment {base}: aborted transaction of producer {producer_id} ending at {last_offset}: \
             last stable offset {} where Kafka's leader wrote {}",
            lso(m),
            lso(k)
        );
    }
}

#[test]
fn a_partition_mirrored_from_kafka_has_the_indexes_kafka_wrote() {
    if !kafka_available() {
        return;
    }
    let root = scratch_dir("kafka-mirror-indexes");
    let kafka = KafkaCluster::format(&root.join("kafka"));
    let broker = kafka.start();
    let bootstrap = broker.bootstrap.clone();
    workload(&[
        "create-topic",
        &bootstrap,
        TOPIC,
        &format!("internal.segment.bytes={SEGMENT_BYTES}"),
        &format!("index.interval.bytes={INDEX_INTERVAL_BYTES}"),
    ]);
    // Every codec, idempotent and transactional producers, aborted transactions (a `.txnindex`).
    workload(&["produce", &bootstrap, TOPIC, "60"]);
    // Then small lz4 batches (a flush every 10 records) from a plain producer: several of them make
    // up one index interval, where most of the workload's batches pass it alone.
    workload(&["send", &bootstrap, TOPIC, "0", "300", "1", "5"]);

    let dest = root.join("klog");
    let dest_s = dest.to_str().unwrap();
    klog_ok(&["cluster", "init", dest_s]);
    klog_ok(&[
        "mirror",
        "create",
        dest_s,
        "m",
        "--source",
        &format!("kafka://{bootstrap}"),
    ]);
    let added = klog_ok(&["mirror", "add", dest_s, "m", TOPIC, "--json"]);
    let added: Value = serde_json::from_str(added.lines().next().unwrap()).unwrap();
    assert_eq!(added["error"], Value::Null, "{added}");
    klog_ok(&[
        "topic",
        "config",
        dest_s,
        TOPIC,
        "--set",
        &format!("segment.bytes={SEGMENT_BYTES}"),
    ]);
    let run = klog_ok(&["mirror", "run", dest_s, "--until-idle", "--json"]);
    let summary: Value = serde_json::from_str(run.lines().last().unwrap()).unwrap();
    assert_eq!(summary["event"], "summary", "{run}");
    // A clean stop: the broker closes its active segment (trimmed indexes, the time index's last entry).
    broker.stop();

    let (theirs_dir, ours_dir) = (
        kafka.data.join(format!("{TOPIC}-0")),
        dest.join(format!("{TOPIC}-0")),
    );
    let described: Value =
        serde_json::from_str(&klog_ok(&["topic", "config", dest_s, TOPIC, "--json"])).unwrap();
    let interval = described["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "index.interval.bytes")
        .cloned();
    assert_eq!(
        interval
            .as_ref()
            .map(|c| (c["value"].to_string(), c["source"].clone())),
        Some((format!("\"{INDEX_INTERVAL_BYTES}\""), "mirror".into())),
        "index.interval.bytes came from the source: {described}"
    );
    let (theirs, ours) = (segments(&theirs_dir), segments(&ours_dir));
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        theirs.keys().collect::<Vec<_>>(),
        "segment base offsets"
    );
    assert!(theirs.len() >= 4, "several sealed segments: {theirs:?}");
    let active = *theirs.keys().last().unwrap();
    let batches = kafka_batches(&theirs_dir);
    let (mut offset_entries, mut txn_entries) = (0, 0);
    for (base, files) in &theirs {
        let mine = &ours[base];
        assert_eq!(
            read(files.get("log")),
            read(mine.get("log")),
            "segment {base}: the .log"
        );
        for (suffix, entry) in [("index", 8), ("timeindex", 12), ("txnindex", 34)] {
            let (k, m) = (read(files.get(suffix)), read(mine.get(suffix)));
            if suffix == "txnindex" {
                assert_txn_entries(*base, &m, &k, &batches);
            } else if *base == active {
                assert_eq!(
                    meaningful(&m, entry),
                    meaningful(&k, entry),
                    "active segment {base}: .{suffix} entries"
                );
            } else {
                assert!(
                    m == k,
                    "sealed segment {base}: .{suffix} differs: klog {} bytes, Kafka {} bytes",
                    m.len(),
                    k.len()
                );
            }
            match suffix {
                "index" => offset_entries += meaningful(&k, entry).len() / entry,
                "txnindex" => txn_entries += k.len() / entry,
                _ => {}
            }
        }
    }
    assert!(
        offset_entries > 2 * theirs.len(),
        "several index entries a segment: {offset_entries}"
    );
    assert!(txn_entries >= 1, "the workload aborts transactions");
}
