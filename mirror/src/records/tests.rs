//! The `__mirror_state` codec against bytes written by hand from the forks' schemas.
use super::*;

fn key(p: i32) -> MirrorKey {
    MirrorKey {
        mirror: "m".into(),
        topic_id: TopicId::parse("AAAAAAAAAAAAAAAAAAAAAQ").unwrap(),
        partition: p,
    }
}

#[test]
fn java_string_hash_matches_java() {
    // Values computed by java.lang.String.hashCode.
    assert_eq!(java_string_hash(""), 0);
    assert_eq!(java_string_hash("a"), 97);
    assert_eq!(java_string_hash("hello"), 99162322);
    assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
    // Non-BMP characters hash as two UTF-16 units.
    assert_eq!(java_string_hash("\u{1F600}"), 1772899);
}

#[test]
fn coordinator_partition_uses_kafka_abs() {
    // "polygenelubricants" hashes to Integer.MIN_VALUE: Utils.abs gives 0, not a negative number.
    let h = java_string_hash("polygenelubricants");
    assert_eq!(h, i32::MIN);
    let k = key(3);
    let expected = java_string_hash(&k.coordinator_key()).unsigned_abs() % 50;
    assert_eq!(k.coordinator_partition(50), expected);
    assert_eq!(k.coordinator_key(), "m:AAAAAAAAAAAAAAAAAAAAAQ:3");
}

#[test]
fn records_round_trip_including_tombstones() {
    let records = [
        MirrorRecord::State(
            key(0),
            Some(PartitionStateValue::new(MirrorState::Mirroring)),
        ),
        MirrorRecord::State(
            key(1),
            Some(PartitionStateValue {
                previous: MirrorState::Preparing,
                retry_attempt: -1,
                error: Some("source is gone".into()),
                ..PartitionStateValue::new(MirrorState::Failed)
            }),
        ),
        MirrorRecord::State(
            key(3),
            Some(PartitionStateValue {
                previous: MirrorState::Stopping,
                retry_attempt: 2,
                error: Some("disk full".into()),
                next_retry_ms: Some(1_700_000_002_000),
                stopping_last_mirror_epoch: Some(-1),
                leader_epoch: 4,
                state_epoch: 9,
                ..PartitionStateValue::new(MirrorState::Failed)
            }),
        ),
        MirrorRecord::State(key(2), None),
        MirrorRecord::LastMirrorEpoch(key(0), Some(7)),
        MirrorRecord::LastMirrorEpoch(key(0), None),
    ];
    for r in records {
        let (k, v) = r.encode();
        assert_eq!(MirrorRecord::decode(Some(&k), v.as_deref()).unwrap(), r);
    }
}

/// The reference's `MirrorPartitionStateValue.json` (showuon/kafka), by hand: value version 0,
/// State int8, LeaderEpoch int32, StateEpoch int32, ErrorMessage nullable compact string,
/// RetryAttempt int16, PreviousState int8, tagged fields.
fn reference_state(state: i8, error: Option<&str>, previous: i8) -> Vec<u8> {
    let mut v = vec![0x00, 0x00, state as u8];
    v.extend_from_slice(&[0x00, 0x00, 0x00, 0x05]); // LeaderEpoch 5
    v.extend_from_slice(&[0x00, 0x00, 0x00, 0x0c]); // StateEpoch 12
    match error {
        None => v.push(0x00),
        Some(e) => {
            v.push(e.len() as u8 + 1);
            v.extend_from_slice(e.as_bytes());
        }
    }
    v.extend_from_slice(&[0x00, 0x03]); // RetryAttempt 3
    v.push(previous as u8);
    v.push(0x00); // no tagged fields
    v
}

/// klog's value before #25 (aiven/kafka's numbering), by hand: value version 0, State int8,
/// PreviousState int8, RetryAttempt int16, ErrorMessage nullable compact string, tagged fields.
fn older_state(state: i8, previous: i8, error: Option<&str>, tags: &[u8]) -> Vec<u8> {
    let mut v = vec![0x00, 0x00, state as u8, previous as u8, 0x00, 0x02];
    match error {
        None => v.push(0x00),
        Some(e) => {
            v.push(e.len() as u8 + 1);
            v.extend_from_slice(e.as_bytes());
        }
    }
    v.extend_from_slice(tags);
    v
}

fn decoded(k: &[u8], v: &[u8]) -> (PartitionStateValue, ValueLayout) {
    let d = DecodedRecord::decode(Some(k), Some(v)).unwrap();
    let MirrorRecord::State(_, Some(value)) = d.record else {
        panic!("a state record: {d:?}")
    };
    (value, d.layout.unwrap())
}

#[test]
fn reference_state_values_decode_in_the_reference_numbering() {
    let (k, _) = MirrorRecord::State(key(5), None).encode();
    // STOPPED 7, previous STOPPING 6.
    let (v, layout) = decoded(&k, &reference_state(7, None, 6));
    assert_eq!(layout, ValueLayout::Reference);
    assert_eq!(
        (
            v.state,
            v.previous,
            v.leader_epoch,
            v.state_epoch,
            v.retry_attempt
        ),
        (MirrorState::Stopped, MirrorState::Stopping, 5, 12, 3)
    );
    // FAILED 8 with a message, previous UNKNOWN -1; EPOCH_FENCING 1 and ULE_RECOVERY 2.
    let (v, _) = decoded(&k, &reference_state(8, Some("source gone"), -1));
    assert_eq!(
        (v.state, v.previous, v.error.as_deref()),
        (
            MirrorState::Failed,
            MirrorState::Unknown,
            Some("source gone")
        )
    );
    let (v, _) = decoded(&k, &reference_state(1, None, 3));
    assert_eq!(
        (v.state, v.previous),
        (MirrorState::EpochFencing, MirrorState::Mirroring)
    );
    let (v, _) = decoded(&k, &reference_state(2, None, 3));
    assert_eq!(v.state, MirrorState::UleRecovery);
    let json = DecodedRecord::decode(Some(&k), Some(&reference_state(3, None, 0)))
        .unwrap()
        .to_json();
    assert_eq!(json["layout"], "reference");
    assert_eq!(json["payload"]["state"], "MIRRORING");
    assert_eq!(json["payload"]["previousState"], "PREPARING");
    assert_eq!(json["payload"]["stateEpoch"], 12);
}

#[test]
fn older_state_values_still_decode_in_the_older_numbering() {
    let (k, _) = MirrorRecord::State(key(5), None).encode();
    // STOPPED 5, previous UNKNOWN 16: what klog wrote for a finished failover.
    let (v, layout) = decoded(&k, &older_state(5, 16, None, &[0x00]));
    assert_eq!(layout, ValueLayout::Older);
    assert_eq!(
        (v.state, v.previous, v.retry_attempt, v.leader_epoch),
        (MirrorState::Stopped, MirrorState::Unknown, 2, -1)
    );
    // STOPPING 4 with its tag 1 (the stop's LME 7) and tag 0 (next retry 0x0102).
    let mut tags = vec![0x02];
    tags.extend_from_slice(&[0x00, 0x08, 0, 0, 0, 0, 0, 0, 0x01, 0x02]);
    tags.extend_from_slice(&[0x01, 0x04, 0, 0, 0, 7]);
    let (v, layout) = decoded(&k, &older_state(4, 1, None, &tags));
    assert_eq!(layout, ValueLayout::Older);
    assert_eq!(
        (
            v.state,
            v.previous,
            v.stopping_last_mirror_epoch,
            v.next_retry_ms
        ),
        (
            MirrorState::Stopping,
            MirrorState::Mirroring,
            Some(7),
            Some(0x0102)
        )
    );
    // FAILED 6 with a message, previous PREPARING 0.
    let (v, layout) = decoded(&k, &older_state(6, 0, Some("disk full"), &[0x00]));
    assert_eq!(layout, ValueLayout::Older);
    assert_eq!(
        (v.state, v.previous, v.error.as_deref()),
        (
            MirrorState::Failed,
            MirrorState::Preparing,
            Some("disk full")
        )
    );
    // Every older state decodes as itself (EPOCH_FENCING 7 and ULE_RECOVERY 8 as klog wrote them there).
    for s in ALL_OLDER {
        let b = s.to_older_byte();
        assert_eq!(decoded(&k, &older_state(b, 16, None, &[0x00])).0.state, s);
    }
}

const ALL_OLDER: [MirrorState; 10] = [
    MirrorState::Preparing,
    MirrorState::EpochFencing,
    MirrorState::UleRecovery,
    MirrorState::Mirroring,
    MirrorState::Pausing,
    MirrorState::Paused,
    MirrorState::Stopping,
    MirrorState::Stopped,
    MirrorState::Failed,
    MirrorState::Unknown,
];

#[test]
fn klog_writes_the_reference_layout_with_its_fields_tagged() {
    let mut v = PartitionStateValue::new(MirrorState::Stopping);
    v.stopping_last_mirror_epoch = Some(7);
    v.next_retry_ms = Some(0x0102);
    let (k, bytes) = MirrorRecord::State(key(5), Some(v.clone())).encode();
    let bytes = bytes.unwrap();
    // Version 0, STOPPING 6, LeaderEpoch -1, StateEpoch 0, null message, retry 0, previous
    // UNKNOWN -1, then 3 tags: 10000 (varint 90 4e) = 1, 10001 = next retry, 10002 = the stop's LME.
    let mut expected = vec![0x00, 0x00, 0x06, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0x00];
    expected.extend_from_slice(&[0x00, 0x00, 0xff, 0x03]);
    expected.extend_from_slice(&[0x90, 0x4e, 0x01, 0x01]);
    expected.extend_from_slice(&[0x91, 0x4e, 0x08, 0, 0, 0, 0, 0, 0, 0x01, 0x02]);
    expected.extend_from_slice(&[0x92, 0x4e, 0x04, 0, 0, 0, 7]);
    assert_eq!(bytes, expected);
    assert_eq!(decoded(&k, &bytes), (v, ValueLayout::Klog));
    // A reference reader takes it: the fields of its schema, then tags it does not know.
    let (plain, layout) = decoded(
        &k,
        &bytes[..15]
            .iter()
            .chain(&[0u8])
            .copied()
            .collect::<Vec<_>>(),
    );
    assert_eq!(layout, ValueLayout::Reference);
    assert_eq!(plain, PartitionStateValue::new(MirrorState::Stopping));
    // A known tag of the wrong size is a named error.
    let mut short = bytes[..15].to_vec();
    short.extend_from_slice(&[0x01, 0x92, 0x4e, 0x02, 0x00, 0x07]);
    assert!(MirrorRecord::decode(Some(&k), Some(&short))
        .unwrap_err()
        .contains("stopping last mirror epoch"));
}

/// `LastMirrorEpochsValue`: the stored reference JSON and klog's older value have LastMirrorEpoch
/// int32 alone; the reference's shard also writes LastMirrorOffset (int64).
#[test]
fn last_mirror_epoch_values_decode_with_and_without_the_offset() {
    let (k, _) = MirrorRecord::LastMirrorEpoch(key(0), None).encode();
    let epoch_only = [0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x00];
    let d = DecodedRecord::decode(Some(&k), Some(&epoch_only)).unwrap();
    assert_eq!(d.record, MirrorRecord::LastMirrorEpoch(key(0), Some(3)));
    assert_eq!(
        (d.layout, d.last_mirror_offset),
        (Some(ValueLayout::Older), None)
    );
    let mut with_offset = vec![0x00, 0x00, 0x00, 0x00, 0x00, 0x03];
    with_offset.extend_from_slice(&42i64.to_be_bytes());
    with_offset.push(0x00);
    let d = DecodedRecord::decode(Some(&k), Some(&with_offset)).unwrap();
    assert_eq!(d.record, MirrorRecord::LastMirrorEpoch(key(0), Some(3)));
    assert_eq!(d.last_mirror_offset, Some(42));
    assert_eq!(d.to_json()["payload"]["lastMirrorOffset"], 42);
}

#[test]
fn malformed_records_are_named_errors() {
    let (k, v) = MirrorRecord::LastMirrorEpoch(key(0), Some(3)).encode();
    let v = v.unwrap();
    assert!(MirrorRecord::decode(None, Some(&v))
        .unwrap_err()
        .contains("no key"));
    assert!(MirrorRecord::decode(Some(&k[..5]), Some(&v))
        .unwrap_err()
        .contains("topic id"));
    assert!(MirrorRecord::decode(Some(&k), Some(&v[..4]))
        .unwrap_err()
        .contains("last mirror epoch"));
    let mut bad = v.clone();
    bad[1] = 9;
    assert!(MirrorRecord::decode(Some(&k), Some(&bad))
        .unwrap_err()
        .contains("version 9"));
    let mut long = v.clone();
    long.push(0);
    assert!(MirrorRecord::decode(Some(&k), Some(&long))
        .unwrap_err()
        .contains("left after"));
    let mut kind = k.clone();
    kind[1] = 9;
    assert!(MirrorRecord::decode(Some(&kind), Some(&v))
        .unwrap_err()
        .contains("record type 9"));
}

/// Fields are checked in the order a value's bytes hold them: a bad error message before a tagged
/// field cut short is the error given (found comparing the engine-based decoder with the hand-written
/// one it replaced).
#[test]
fn the_first_bad_field_in_byte_order_is_the_error() {
    let (k, _) = MirrorRecord::State(key(0), None).encode();
    // FAILED, leader epoch -1, state epoch 0, error "bo\xa0o", retry 0, previous 3, then klog's tag
    // whose last field is one byte short.
    let mut v = vec![
        0, 0, 8, 255, 255, 255, 255, 0, 0, 0, 0, 5, b'b', b'o', 0xa0, b'o',
    ];
    v.extend_from_slice(&[0, 0, 3, 2, 0x90, 0x4e, 1, 1, 0x92, 0x4e, 4, 255, 255, 255]);
    assert_eq!(
        MirrorRecord::decode(Some(&k), Some(&v)).unwrap_err(),
        "error message is not UTF-8"
    );
    // The same value with the message fixed names the short tagged field.
    v[14] = b'o';
    assert_eq!(
        MirrorRecord::decode(Some(&k), Some(&v)).unwrap_err(),
        "tagged field: need 4 bytes, 3 remain"
    );
}

/// A klog tagged field present with its type's zero reads as present, and is written back.
#[test]
fn a_tagged_field_present_with_zero_is_not_absent() {
    let mut v = PartitionStateValue::new(MirrorState::Failed);
    v.next_retry_ms = Some(0);
    v.stopping_last_mirror_epoch = Some(0);
    let record = MirrorRecord::State(key(0), Some(v));
    let (k, bytes) = record.encode();
    assert_eq!(
        MirrorRecord::decode(Some(&k), bytes.as_deref()).unwrap(),
        record
    );
    let none = MirrorRecord::State(key(0), Some(PartitionStateValue::new(MirrorState::Failed)));
    let (_, shorter) = none.encode();
    assert_eq!(
        bytes.unwrap().len(),
        shorter.as_ref().unwrap().len() + 2 * 3 + 8 + 4
    );
    assert_eq!(
        MirrorRecord::decode(Some(&k), shorter.as_deref()).unwrap(),
        none
    );
}
