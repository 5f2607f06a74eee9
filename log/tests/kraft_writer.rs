//! `kraft::writer`: metadata records encoded from their schemas and KRaft snapshots laid out as Kafka's
//! `RecordsSnapshotWriter` lays them out, read back by klog's own loader.

use std::path::{Path, PathBuf};

use klog_log::format::{AnyBatch, Batches, ControlRecordType};
use klog_log::io::StdStorage;
use klog_log::kraft::writer::{snapshot_bytes, try_encode_record, MAX_BATCH_SIZE_BYTES};
use klog_log::kraft::{
    decode_control_value, encode_record, load_metadata_log, write_snapshot, ConfigResource,
    ConfigResourceType, KraftWriteError, MetadataRecord, MetadataRecordOut, SnapshotId,
};

fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn image_records() -> Vec<MetadataRecordOut> {
    vec![
        MetadataRecordOut::FeatureLevel {
            name: "metadata.version".into(),
            feature_level: 33,
        },
        MetadataRecordOut::FeatureLevel {
            name: "transaction.version".into(),
            feature_level: 2,
        },
        MetadataRecordOut::Topic {
            name: "orders".into(),
            topic_id: [7; 16],
        },
        MetadataRecordOut::Partition {
            partition_id: 0,
            topic_id: [7; 16],
            replicas: vec![1],
            isr: vec![1],
            leader: 1,
            leader_epoch: 4,
            partition_epoch: 6,
            directories: vec![[9; 16]],
        },
        MetadataRecordOut::Partition {
            partition_id: 1,
            topic_id: [7; 16],
            replicas: vec![1, 2],
            isr: vec![2],
            leader: 2,
            leader_epoch: 11,
            partition_epoch: 12,
            directories: vec![[9; 16], [8; 16]],
        },
        MetadataRecordOut::Config {
            resource_type: 2,
            resource_name: "orders".into(),
            name: "cleanup.policy".into(),
            value: Some("compact".into()),
        },
        MetadataRecordOut::Config {
            resource_type: 4,
            resource_name: String::new(),
            name: "min.insync.replicas".into(),
            value: Some("1".into()),
        },
        MetadataRecordOut::ProducerIds {
            broker_id: 1,
            broker_epoch: 5,
            next_producer_id: 5000,
        },
    ]
}

/// (a) A snapshot written by the writer loads with klog's loader into the image its records describe.
#[test]
fn a_written_snapshot_loads_into_the_image_it_describes() {
    let dir = temp_dir("kraft-writer-round-trip");
    let path = write_snapshot(&dir, 100, 7, 1_700_000_000_000, &image_records()).unwrap();
    assert_eq!(
        path.file_name().unwrap(),
        "00000000000000000100-0000000007.checkpoint"
    );
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        names,
        ["00000000000000000100-0000000007.checkpoint"],
        "no temp file left"
    );
    let log = load_metadata_log(&StdStorage, &dir).unwrap();
    assert_eq!(
        log.snapshot,
        Some(SnapshotId {
            end_offset: 100,
            epoch: 7
        })
    );
    assert_eq!(log.end_offset, 100);
    assert_eq!(log.records, 8);
    let image = &log.image;
    assert_eq!(image.features["metadata.version"], 33);
    assert_eq!(image.features["transaction.version"], 2);
    let topic = image.topic("orders").unwrap();
    assert_eq!(topic.topic_id.0, [7; 16]);
    let p0 = &topic.partitions[&0];
    assert_eq!(
        (p0.replicas.as_slice(), p0.isr.as_slice()),
        (&[1][..], &[1][..])
    );
    assert_eq!((p0.leader, p0.leader_epoch, p0.partition_epoch), (1, 4, 6));
    let p1 = &topic.partitions[&1];
    assert_eq!(
        (p1.replicas.as_slice(), p1.isr.as_slice()),
        (&[1, 2][..], &[2][..])
    );
    assert_eq!(
        (p1.leader, p1.leader_epoch, p1.partition_epoch),
        (2, 11, 12)
    );
    let topic_configs = &image.configs[&ConfigResource {
        resource_type: ConfigResourceType::Topic,
        name: "orders".into(),
    }];
    assert_eq!(topic_configs["cleanup.policy"], "compact");
    let broker_configs = &image.configs[&ConfigResource {
        resource_type: ConfigResourceType::Broker,
        name: String::new(),
    }];
    assert_eq!(broker_configs["min.insync.replicas"], "1");
}

/// The layout of `RecordsSnapshotWriter`: header control batch at offset 0, data batches from 1, footer
/// at n+1; every batch at the snapshot's epoch, with no producer, CreateTime at the writer's clock.
#[test]
fn the_snapshot_is_laid_out_as_kafkas_records_snapshot_writer_lays_it_out() {
    let records = image_records();
    let bytes = snapshot_bytes(
        Path::new("x"),
        7,
        1_700_000_000_000,
        &records,
        1_800_000_000_000,
    )
    .unwrap();
    let batches: Vec<_> = Batches::new(&bytes)
        .map(|b| match b.unwrap() {
            AnyBatch::V2(b) => b,
            AnyBatch::Legacy(_) => panic!("a legacy batch"),
        })
        .collect();
    assert_eq!(batches.len(), 3);
    for b in &batches {
        assert_eq!(b.partition_leader_epoch(), 7);
        assert_eq!(
            (b.producer_id(), b.producer_epoch(), b.base_sequence()),
            (-1, -1, -1)
        );
        assert!(!b.is_transactional());
        assert_eq!(b.base_timestamp(), 1_800_000_000_000);
        assert_eq!(b.max_timestamp(), 1_800_000_000_000);
        b.verify_crc().unwrap();
    }
    let (header, data, footer) = (&batches[0], &batches[1], &batches[2]);
    assert!(header.is_control() && footer.is_control() && !data.is_control());
    assert_eq!((header.base_offset(), header.records_count()), (0, 1));
    assert_eq!((data.base_offset(), data.records_count()), (1, 8));
    assert_eq!((footer.base_offset(), footer.records_count()), (9, 1));
    let control = |b: &klog_log::format::RecordBatch<'_>| {
        let mut scratch = Vec::new();
        let record = b.records(&mut scratch).unwrap().next().unwrap().unwrap();
        let (_, kind) = ControlRecordType::parse_key(record.key).unwrap();
        let value = record.value.unwrap().to_vec();
        let (label, message) = decode_control_value(kind, &value).unwrap().unwrap();
        (label, message.to_kafka_json())
    };
    assert_eq!(
        control(header),
        (
            "SnapshotHeader",
            r#"{"version":0,"lastContainedLogTimestamp":1700000000000}"#.to_string()
        )
    );
    assert_eq!(
        control(footer),
        ("SnapshotFooter", r#"{"version":0}"#.to_string())
    );
    let mut scratch = Vec::new();
    for (record, out) in data.records(&mut scratch).unwrap().zip(&records) {
        let record = record.unwrap();
        assert_eq!(record.key, None);
        assert_eq!(record.headers.len(), 0);
        assert_eq!(record.timestamp_delta, 0);
        assert_eq!(record.value, Some(encode_record(out).as_slice()));
    }
}

/// Records past 8 MiB go into a new batch, as `BatchAccumulator` starts one when the next does not fit.
#[test]
fn data_batches_hold_at_most_eight_mib() {
    let value = "v".repeat(30_000);
    let records: Vec<_> = (0..600)
        .map(|i| MetadataRecordOut::Config {
            resource_type: 2,
            resource_name: "t".into(),
            name: format!("k{i}"),
            value: Some(value.clone()),
        })
        .collect();
    let bytes = snapshot_bytes(Path::new("x"), 1, 0, &records, 0).unwrap();
    let sizes: Vec<(i64, usize, i32)> = Batches::new(&bytes)
        .map(|b| {
            let b = b.unwrap();
            match b {
                AnyBatch::V2(b) => (b.base_offset(), b.size_in_bytes(), b.records_count()),
                AnyBatch::Legacy(_) => panic!("a legacy batch"),
            }
        })
        .collect();
    // Header, three data batches (600 records of about 30 kB: 18 MB), footer.
    assert_eq!(sizes.len(), 5, "{sizes:?}");
    assert!(sizes
        .iter()
        .all(|(_, size, _)| *size <= MAX_BATCH_SIZE_BYTES));
    let data = &sizes[1..4];
    for pair in sizes.windows(2) {
        assert_eq!(
            pair[0].0 + pair[0].2 as i64,
            pair[1].0,
            "offsets continue: {sizes:?}"
        );
    }
    assert_eq!(data.iter().map(|d| d.2).sum::<i32>(), 600);
    // The first two are full: one more record would not have fit.
    for full in &data[..2] {
        assert!(full.1 + 30_030 > MAX_BATCH_SIZE_BYTES, "{full:?}");
    }
    assert_eq!(sizes[4].0, 601, "the footer follows the last record");
}

#[test]
fn a_bad_snapshot_id_or_an_over_long_string_is_an_error_naming_the_file() {
    let dir = temp_dir("kraft-writer-refusals");
    let e = write_snapshot(&dir, 0, 0, 0, &image_records()).unwrap_err();
    assert!(
        matches!(e, KraftWriteError::InvalidSnapshotId { .. }),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("00000000000000000000-0000000000.checkpoint"),
        "{e}"
    );
    let long = MetadataRecordOut::Config {
        resource_type: 2,
        resource_name: "t".into(),
        name: "k".into(),
        value: Some("x".repeat(40_000)),
    };
    assert!(try_encode_record(&long).is_err());
    assert!(encode_record(&long).is_empty());
    let e = write_snapshot(&dir, 5, 1, 0, &[long]).unwrap_err();
    assert!(matches!(e, KraftWriteError::Record { index: 0, .. }), "{e}");
    assert!(e.to_string().contains("ConfigRecord: field value"), "{e}");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "nothing written"
    );
}

/// Each record type decodes back to the values written, at the version agreed (PartitionRecord v2).
#[test]
fn every_record_type_decodes_back_to_its_values() {
    let json: Vec<String> = image_records()
        .iter()
        .map(|r| {
            let bytes = encode_record(r);
            let decoded = MetadataRecord::decode(Some(&bytes)).unwrap();
            decoded.to_kafka_json()
        })
        .collect();
    assert_eq!(
        json[0],
        r#"{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":33}}"#
    );
    assert_eq!(
        json[2],
        r#"{"type":"TOPIC_RECORD","version":0,"data":{"name":"orders","topicId":"BwcHBwcHBwcHBwcHBwcHBw"}}"#
    );
    assert_eq!(
        json[3],
        r#"{"type":"PARTITION_RECORD","version":2,"data":{"partitionId":0,"topicId":"BwcHBwcHBwcHBwcHBwcHBw","replicas":[1],"isr":[1],"removingReplicas":[],"addingReplicas":[],"leader":1,"leaderEpoch":4,"partitionEpoch":6,"directories":["CQkJCQkJCQkJCQkJCQkJCQ"]}}"#
    );
    assert_eq!(
        json[5],
        r#"{"type":"CONFIG_RECORD","version":0,"data":{"resourceType":2,"resourceName":"orders","name":"cleanup.policy","value":"compact"}}"#
    );
    assert_eq!(
        json[7],
        r#"{"type":"PRODUCER_IDS_RECORD","version":0,"data":{"brokerId":1,"brokerEpoch":5,"nextProducerId":5000}}"#
    );
}
