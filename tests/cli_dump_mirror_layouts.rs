//! `klog dump` of what the KIP-1279 reference forks write: both layouts of the MIRROR_PID_RESET barrier's
//! value, and `__mirror_state` records in the reference layout and in klog's older one. Every value is
//! written out by hand from the forks' JSON schemas (showuon/kafka and aiven/kafka
//! `MirrorPidResetRecord.json`, `MirrorPartitionStateValue.json`, `LastMirrorEpochsValue.json`), never by
//! klog's encoder; only the batch framing around them is klog's.

mod common;

use common::{klog, klog_ok, scratch_dir, stderr, stdout};
use klog::log::format::{crc32c, BatchBuilder, Compression};
use serde_json::Value;

const NOW: i64 = 1_700_000_000_000;

/// A one-record batch at `base_offset` with `key` and `value`, producer id -1; `control` sets the
/// control flag (with the CRC made right again), as a broker's coordinator writes a control batch.
fn batch(base_offset: i64, key: &[u8], value: &[u8], control: bool) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None).base_offset(base_offset);
    b.append(NOW, Some(key), Some(value), &[]).unwrap();
    let mut bytes = b.build().unwrap();
    if control {
        bytes[22] |= 0x20; // attributes bit 5: control
        let crc = crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    }
    bytes
}

/// MIRROR_PID_RESET's control key: version 0, type 7.
const BARRIER_KEY: [u8; 4] = [0x00, 0x00, 0x00, 0x07];

/// The newest showuon/kafka schema, `{Version int16}` flexible: version 0, no tagged fields.
const NEWEST_BARRIER: [u8; 3] = [0x00, 0x00, 0x00];

/// aiven/kafka's (and earlier showuon's) `{Version int16, SourceClusterId string}` flexible: version 0,
/// compact string (length + 1 = 23, the 22-character id), no tagged fields.
fn earlier_barrier() -> Vec<u8> {
    let mut v = vec![0x00, 0x00, 23];
    v.extend_from_slice(b"MkU3OEVBNTcwNTJENDM2Qg");
    v.push(0x00);
    v
}

#[test]
fn dump_prints_both_layouts_of_the_barrier_value() {
    let root = scratch_dir("cli-dump-barrier-layouts");
    let dir = root.join("orders-0");
    std::fs::create_dir_all(&dir).unwrap();
    let mut bytes = batch(0, &BARRIER_KEY, &NEWEST_BARRIER, true);
    bytes.extend(batch(1, &BARRIER_KEY, &earlier_barrier(), true));
    let log = dir.join("00000000000000000000.log");
    std::fs::write(&log, bytes).unwrap();
    let log = log.to_str().unwrap();

    // Before #25 the newest layout was refused: "MIRROR_PID_RESET control batch at offset 0 has a
    // value that does not parse: ... null source cluster id".
    let out = klog(&["dump", "--deep", log]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(r#"| offset: 0 CreateTime: 1700000000000 keySize: 4 valueSize: 3 sequence: -1 headerKeys: [] mirrorPidReset: {"version":0}"#),
        "{text}"
    );
    assert!(
        text.contains(r#"| offset: 1 CreateTime: 1700000000000 keySize: 4 valueSize: 26 sequence: -1 headerKeys: [] mirrorPidReset: {"version":0,"sourceClusterId":"MkU3OEVBNTcwNTJENDM2Qg"}"#),
        "{text}"
    );
    let out = klog_ok(&["dump", "--json", log]);
    let batches: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(batches.len(), 2, "{out}");
    for b in &batches {
        assert_eq!(b["control_type"], "mirror_pid_reset", "{b}");
    }
}

/// A `__mirror_state` key (record type, then `{MirrorName string, TopicId uuid, Partition int32}` at
/// version 0, not flexible).
fn state_key(record_type: i16, partition: i32) -> Vec<u8> {
    let mut k = record_type.to_be_bytes().to_vec();
    k.extend_from_slice(&[0x00, 0x01, b'm']);
    k.extend_from_slice(&[0u8; 15]);
    k.push(0x01); // topic id AAAAAAAAAAAAAAAAAAAAAQ
    k.extend_from_slice(&partition.to_be_bytes());
    k
}

#[test]
fn dump_decodes_mirror_state_records_in_both_layouts() {
    let root = scratch_dir("cli-dump-mirror-state-layouts");
    let dir = root.join("__mirror_state-0");
    std::fs::create_dir_all(&dir).unwrap();
    // Reference MirrorPartitionStateValue v0: STOPPED 7, LeaderEpoch 13, StateEpoch 4, null message,
    // RetryAttempt 0, PreviousState STOPPING 6, no tags.
    let reference = [
        0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x06,
        0x00,
    ];
    // klog's older value: STOPPED 5, PreviousState STOPPING 4, RetryAttempt 0, null message, no tags.
    let older = [0x00, 0x00, 0x05, 0x04, 0x00, 0x00, 0x00, 0x00];
    // LastMirrorEpochsValue as the reference's shard writes it: LastMirrorEpoch 2, LastMirrorOffset 41.
    let mut lme = vec![0x00, 0x00, 0x00, 0x00, 0x00, 0x02];
    lme.extend_from_slice(&41i64.to_be_bytes());
    lme.push(0x00);
    let mut bytes = batch(0, &state_key(2, 0), &reference, false);
    bytes.extend(batch(1, &state_key(2, 1), &older, false));
    bytes.extend(batch(2, &state_key(1, 0), &lme, false));
    let log = dir.join("00000000000000000000.log");
    std::fs::write(&log, bytes).unwrap();
    let log = log.to_str().unwrap();

    // Before #25 the reference's values were refused: "unknown state 7", "8 bytes left after the value".
    let text = klog_ok(&["dump", log]);
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("| offset")).collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (line, layout) in lines.iter().zip(["reference", "older", "reference"]) {
        assert!(line.ends_with(&format!(" layout: {layout}")), "{line}");
    }
    let out = klog_ok(&["dump", "--json", log]);
    let records: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .flat_map(|b| b["records"].as_array().cloned().unwrap_or_default())
        .map(|r| r["mirror_state"].clone())
        .collect();
    assert_eq!(records.len(), 3, "{out}");
    let (reference, older, lme) = (&records[0], &records[1], &records[2]);
    assert_eq!(reference["payload"]["state"], "STOPPED");
    assert_eq!(reference["payload"]["previousState"], "STOPPING");
    assert_eq!(reference["payload"]["leaderEpoch"], 13);
    assert_eq!(reference["payload"]["stateEpoch"], 4);
    assert_eq!(older["payload"]["state"], "STOPPED");
    assert_eq!(older["payload"]["previousState"], "STOPPING");
    assert_eq!(older["layout"], "older");
    assert_eq!(lme["payload"]["lastMirrorEpoch"], 2);
    assert_eq!(lme["payload"]["lastMirrorOffset"], 41);

    // The same bytes under another directory name need the flag, as kafka-dump-log's decoders do.
    let other = root.join("copy-0");
    std::fs::create_dir_all(&other).unwrap();
    let copy = other.join("00000000000000000000.log");
    std::fs::copy(log, &copy).unwrap();
    let copy = copy.to_str().unwrap();
    assert!(!klog_ok(&["dump", copy]).contains("layout:"));
    let decoded = klog_ok(&["dump", "--mirror-state-decoder", copy]);
    assert_eq!(decoded.matches(" layout: ").count(), 3, "{decoded}");
}

/// What klog itself writes to `__mirror_state`, read back by `klog dump`: the reference layout with
/// klog's tag, each state one StateEpoch above the last, LeaderEpoch the partition's epoch then.
#[test]
fn a_failover_writes_its_states_in_the_reference_layout() {
    let dir = scratch_dir("cli-dump-mirror-state-written");
    let (a, b) = (dir.join("A"), dir.join("B"));
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    klog_ok(&["cluster", "init", a_s]);
    klog_ok(&["cluster", "init", b_s]);
    klog_ok(&["topic", "create", a_s, "t"]);
    let batch = common::repo_path("fixtures/batches/idempotent-none.bin");
    klog_ok(&[
        "append",
        a.join("t-0").to_str().unwrap(),
        batch.to_str().unwrap(),
    ]);
    klog_ok(&["topic", "elect", a_s, "t"]);
    klog_ok(&["mirror", "create", b_s, "m", "--source", a_s]);
    klog_ok(&["mirror", "add", b_s, "m", "t"]);
    klog_ok(&["mirror", "run", b_s, "--until-idle"]);
    klog_ok(&["mirror", "remove", b_s, "m", "t"]);
    klog_ok(&["mirror", "run", b_s, "--until-idle"]);
    let describe: Value =
        serde_json::from_str(&klog_ok(&["mirror", "describe", b_s, "--json"])).unwrap();
    let row = describe["partitions"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["topic"] == "t"))
        .cloned()
        .unwrap_or_else(|| panic!("{describe}"));
    assert_eq!(row["state"], "STOPPED");

    let mut states = Vec::new();
    for entry in std::fs::read_dir(&b).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("__mirror_state-") {
            continue;
        }
        for log in common::sorted_entries(&path) {
            if log.extension().is_some_and(|e| e == "log") {
                let out = klog_ok(&["dump", "--json", log.to_str().unwrap()]);
                for line in out.lines() {
                    let batch: Value = serde_json::from_str(line).unwrap();
                    for r in batch["records"].as_array().cloned().unwrap_or_default() {
                        let m = &r["mirror_state"];
                        if m["key"]["type"] == "MirrorPartitionState" {
                            states.push(m.clone());
                        }
                    }
                }
            }
        }
    }
    let names: Vec<&str> = states
        .iter()
        .map(|s| s["payload"]["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        // STOPPING twice: entered, then again with the LME the stop recorded.
        ["PREPARING", "MIRRORING", "STOPPING", "STOPPING", "STOPPED"],
        "{states:?}"
    );
    for (i, s) in states.iter().enumerate() {
        assert_eq!(s["layout"], "klog", "{s}");
        assert_eq!(s["payload"]["stateEpoch"], i as i64 + 1, "{s}");
    }
    // The failover bumped the epoch before STOPPED was written.
    assert_eq!(
        states[4]["payload"]["leaderEpoch"], row["leader_epoch"],
        "{row}"
    );
    assert_eq!(states[0]["payload"]["leaderEpoch"], 0);
}
