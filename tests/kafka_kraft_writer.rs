//! klog's KRaft writer judged by a real Kafka 4.4: a snapshot written by `kraft::write_snapshot` decodes
//! with `kafka-dump-log --cluster-metadata-decoder` to the values written, and the schema encoder is the
//! exact inverse of the decoder on every record of a broker's own `__cluster_metadata` log (segments and
//! snapshots, data records and KRaft control records), and a Kafka node started on a metadata directory
//! holding only a snapshot klog wrote serves the topic it describes.
//! Skips with one line without Java, unless `KLOG_REQUIRE_KAFKA=1` (CI), where it fails.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use klog::log::checkpoint::TopicId;
use klog::log::io::StdStorage;
use klog::log::kraft::load_metadata_log;

use common::kafka::{dump_log, kafka_available, kafka_tools, workload, Cluster};
use common::{scratch_dir, sorted_entries};
use klog::log::format::{AnyBatch, Batches, ControlRecordType};
use klog::log::kraft::{
    control_schema, decode_control_value, encode_control_value, uuid_string, write_snapshot,
    MetadataRecord, MetadataRecordOut,
};

/// (b) Every record of a snapshot klog wrote is printed by Kafka's own dump tool with the values written,
/// and the header and footer control records are Kafka's.
#[test]
fn kafka_dump_log_decodes_a_snapshot_klog_wrote() {
    if !kafka_available() {
        return;
    }
    let dir = scratch_dir("kraft-writer-dump").join("__cluster_metadata-0");
    std::fs::create_dir_all(&dir).unwrap();
    let topic_id = [0x11; 16];
    let directory = [0x22; 16];
    let records = vec![
        MetadataRecordOut::FeatureLevel {
            name: "metadata.version".into(),
            feature_level: 33,
        },
        MetadataRecordOut::Topic {
            name: "orders".into(),
            topic_id,
        },
        MetadataRecordOut::Partition {
            partition_id: 3,
            topic_id,
            replicas: vec![1, 2],
            isr: vec![2],
            leader: 2,
            leader_epoch: 17,
            partition_epoch: 21,
            directories: vec![directory, directory],
        },
        MetadataRecordOut::Config {
            resource_type: 2,
            resource_name: "orders".into(),
            name: "retention.ms".into(),
            value: Some("86400000".into()),
        },
        MetadataRecordOut::Config {
            resource_type: 4,
            resource_name: String::new(),
            name: "log.retention.ms".into(),
            value: None,
        },
        MetadataRecordOut::ProducerIds {
            broker_id: 1,
            broker_epoch: 9,
            next_producer_id: 7000,
        },
    ];
    let path = write_snapshot(&dir, 42, 5, 1_700_000_000_123, &records).unwrap();
    let dump = dump_log(&[path], &["--cluster-metadata-decoder"]);
    let id = uuid_string(&topic_id);
    let dir_id = uuid_string(&directory);
    let expected = [
        r#"{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":33}}"#.to_string(),
        format!(r#"{{"type":"TOPIC_RECORD","version":0,"data":{{"name":"orders","topicId":"{id}"}}}}"#),
        format!(
            r#"{{"type":"PARTITION_RECORD","version":2,"data":{{"partitionId":3,"topicId":"{id}","replicas":[1,2],"isr":[2],"removingReplicas":[],"addingReplicas":[],"leader":2,"leaderEpoch":17,"partitionEpoch":21,"directories":["{dir_id}","{dir_id}"]}}}}"#
        ),
        r#"{"type":"CONFIG_RECORD","version":0,"data":{"resourceType":2,"resourceName":"orders","name":"retention.ms","value":"86400000"}}"#.to_string(),
        r#"{"type":"CONFIG_RECORD","version":0,"data":{"resourceType":4,"resourceName":"","name":"log.retention.ms","value":null}}"#.to_string(),
        r#"{"type":"PRODUCER_IDS_RECORD","version":0,"data":{"brokerId":1,"brokerEpoch":9,"nextProducerId":7000}}"#.to_string(),
    ];
    let payloads: Vec<&str> = dump
        .lines()
        .filter_map(|l| l.split_once(" payload: ").map(|(_, p)| p))
        .collect();
    assert_eq!(payloads, expected, "kafka-dump-log:\n{dump}");
    assert!(
        dump.contains(r#"SnapshotHeader {"version":0,"lastContainedLogTimestamp":1700000000123}"#),
        "{dump}"
    );
    assert!(dump.contains(r#"SnapshotFooter {"version":0}"#), "{dump}");
    for offset in 1..=6 {
        assert!(
            dump.contains(&format!("| offset: {offset} ")),
            "record offset {offset}:\n{dump}"
        );
    }
    assert!(
        dump.contains("baseOffset: 7 lastOffset: 7"),
        "footer at n+1:\n{dump}"
    );
    assert!(!dump.contains("Error"), "{dump}");
}

/// (c) On every record of a real broker's metadata log, decoding and re-encoding gives Kafka's bytes: the
/// schema encoder is the decoder's exact inverse, record type by record type.
#[test]
fn the_encoder_gives_back_kafkas_bytes_for_every_record_of_a_real_metadata_log() {
    if !kafka_available() {
        return;
    }
    let root = scratch_dir("kraft-writer-real-log");
    let cluster = Cluster::format_with(&root, "metadata.log.max.snapshot.interval.ms=2000\n");
    let broker = cluster.start();
    let b = broker.bootstrap.clone();
    workload(&["create-topic", &b, "encoded", "retention.ms=3600000"]);
    workload(&["create-topic", &b, "doomed"]);
    workload(&["produce", &b, "encoded", "20"]);
    kafka_tools(&[
        "run",
        "org.apache.kafka.tools.ConfigCommand",
        "--bootstrap-server",
        &b,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "encoded",
        "--delete-config",
        "retention.ms",
    ]);
    kafka_tools(&[
        "run",
        "org.apache.kafka.tools.TopicCommand",
        "--bootstrap-server",
        &b,
        "--delete",
        "--topic",
        "doomed",
    ]);
    // Give the controller time for a snapshot of all of it (every 2 s when records were added).
    std::thread::sleep(std::time::Duration::from_secs(5));
    broker.stop();

    let dir = cluster.meta.join("__cluster_metadata-0");
    let mut types = BTreeSet::new();
    let mut files = 0;
    for path in sorted_entries(&dir) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.ends_with(".log") || name.ends_with(".checkpoint")) {
            continue;
        }
        files += 1;
        reencode_file(&path, &mut types);
    }
    assert!(files >= 2, "a segment and a snapshot at least");
    for t in [
        "FEATURE_LEVEL_RECORD",
        "TOPIC_RECORD",
        "PARTITION_RECORD",
        "CONFIG_RECORD",
        "PRODUCER_IDS_RECORD",
        "REGISTER_BROKER_RECORD",
        "REMOVE_TOPIC_RECORD",
        "SnapshotHeader",
        "SnapshotFooter",
    ] {
        assert!(
            types.contains(t),
            "no {t} in the broker's metadata log: {types:?}"
        );
    }
}

/// Decodes and re-encodes every record of one metadata log file, asserting the bytes are Kafka's.
fn reencode_file(path: &Path, types: &mut BTreeSet<String>) {
    let bytes = std::fs::read(path).unwrap();
    let mut scratch = Vec::new();
    for batch in Batches::new(&bytes) {
        let AnyBatch::V2(batch) = batch.unwrap() else {
            panic!("{}: a legacy batch", path.display());
        };
        for record in batch.records(&mut scratch).unwrap() {
            let record = record.unwrap();
            let at = format!("{} offset {}", path.display(), record.offset);
            let value = record.value.expect("a value");
            if batch.is_control() {
                let (_, kind) = ControlRecordType::parse_key(record.key).unwrap();
                let Some(decoded) = decode_control_value(kind, value) else {
                    continue; // LeaderChange: not a schema of this engine yet.
                };
                let (label, message) = decoded.unwrap();
                let name = match label {
                    "KRaftVoters" => "VotersRecord".to_owned(),
                    other => format!("{other}Record"),
                };
                let schema = control_schema(&name).expect("the control record's schema");
                let out = encode_control_value(schema, &message).unwrap();
                assert_eq!(out, value, "{at}: {label}");
                types.insert(label.to_owned());
            } else {
                let decoded = MetadataRecord::decode(Some(value)).unwrap();
                assert_eq!(
                    decoded.encode().unwrap(),
                    value,
                    "{at}: {}",
                    decoded.to_kafka_json()
                );
                types.insert(decoded.type_name().to_owned());
            }
        }
    }
}

/// A Kafka 4.4 node whose `__cluster_metadata-0` holds nothing but a snapshot klog wrote (the feature
/// levels Kafka's own format chose, a topic, its partition on this broker's log directory, a config and
/// the producer ids handed out) starts, serves the topic under its id, and gives new producers ids from
/// the snapshot's next producer id on (the experiment X8 of shared/spec/kraft-bootstrap.md, made by klog).
#[test]
fn a_kafka_node_starts_on_a_snapshot_klog_wrote() {
    if !kafka_available() {
        return;
    }
    let root = scratch_dir("kraft-writer-broker-start");
    let cluster = Cluster::format(&root);
    let meta_dir = cluster.meta.join("__cluster_metadata-0");
    // The features `kafka-storage format` chose, read back with klog's loader; metadata.version first,
    // then the others by name, as Kafka's bootstrap orders them.
    let formatted = load_metadata_log(&StdStorage, &meta_dir).unwrap();
    let mut features: Vec<(String, i16)> = formatted.image.features.into_iter().collect();
    features.sort_by_key(|(name, _)| (name != "metadata.version", name.clone()));
    assert_eq!(features[0].0, "metadata.version", "{features:?}");
    for name in std::fs::read_dir(&meta_dir).unwrap() {
        let path = name.unwrap().path();
        if path.extension().is_some_and(|e| e == "checkpoint") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let properties = std::fs::read_to_string(cluster.data.join("meta.properties")).unwrap();
    let directory_id = properties
        .lines()
        .find_map(|l| l.strip_prefix("directory.id="))
        .and_then(TopicId::parse)
        .expect("the data directory's directory.id");
    let topic_id = TopicId::from_random([0x5c; 16]);
    let mut records: Vec<MetadataRecordOut> = features
        .into_iter()
        .map(|(name, feature_level)| MetadataRecordOut::FeatureLevel {
            name,
            feature_level,
        })
        .collect();
    records.extend([
        MetadataRecordOut::Topic {
            name: "prepared".into(),
            topic_id: topic_id.0,
        },
        MetadataRecordOut::Partition {
            partition_id: 0,
            topic_id: topic_id.0,
            replicas: vec![1],
            isr: vec![1],
            leader: 1,
            leader_epoch: 3,
            partition_epoch: 3,
            directories: vec![directory_id.0],
        },
        MetadataRecordOut::Config {
            resource_type: 2,
            resource_name: "prepared".into(),
            name: "retention.ms".into(),
            value: Some("86400000".into()),
        },
        MetadataRecordOut::ProducerIds {
            broker_id: 1,
            broker_epoch: 1,
            next_producer_id: 5000,
        },
    ]);
    write_snapshot(&meta_dir, 10, 2, 0, &records).unwrap();

    let broker = cluster.start();
    let b = broker.bootstrap.clone();
    let partitions = workload(&["describe-topic", &b, "prepared"]);
    assert_eq!(partitions.len(), 1, "{partitions:?}");
    assert_eq!(partitions[0]["leader"], 1, "{partitions:?}");
    let written = workload(&["produce", &b, "prepared", "10"]);
    assert!(!written.is_empty());
    let errors = broker.error_lines();
    assert!(errors.is_empty(), "the broker logged errors: {errors:#?}");
    broker.stop();

    let part = cluster.data.join("prepared-0");
    let metadata = std::fs::read_to_string(part.join("partition.metadata")).unwrap();
    assert!(metadata.contains(&topic_id.to_string()), "{metadata}");
    let log = std::fs::read(part.join("00000000000000000000.log")).unwrap();
    let mut producers = BTreeSet::new();
    for batch in Batches::new(&log) {
        if let AnyBatch::V2(batch) = batch.unwrap() {
            if batch.producer_id() >= 0 {
                producers.insert(batch.producer_id());
            }
        }
    }
    assert!(!producers.is_empty());
    assert!(
        producers.iter().all(|p| *p >= 5000),
        "producer ids from the snapshot's next producer id on: {producers:?}"
    );
}
