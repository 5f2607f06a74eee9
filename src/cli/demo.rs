//! `klog demo`: the main job on an embedded default. At this stage: build batches in every codec, a
//! transaction committed and one aborted, and the MIRROR_PID_RESET barrier; write them as a segment file;
//! read them back zero-copy, checking every CRC and record; print the dump.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{ensure, Context};
use klog::log::format::{
    AnyBatch, BatchBuilder, Batches, Compression, ControlRecordType, Header, Tail,
};

use super::dump;

const SOURCE_CLUSTER_ID: &str = "a2xvZy1kZW1vLXNvdXJjZQ";

pub fn run(dir: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let dir = match dir {
        Some(d) => d,
        None => default_dir()?,
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let segment = dir.join("00000000000000000000.log");
    println!("klog demo: writing record batches to {}", segment.display());

    let started = Instant::now();
    let (bytes, expected) = build_demo_log()?;
    std::fs::write(&segment, &bytes).with_context(|| format!("writing {}", segment.display()))?;
    println!(
        "  built {} batches ({} bytes): one idempotent batch per codec, a committed and an aborted \
         transaction, and a MIRROR_PID_RESET barrier, in {:?}",
        expected.len(),
        bytes.len(),
        started.elapsed()
    );

    let started = Instant::now();
    let data = std::fs::read(&segment)?;
    let mut batches = Batches::new(&data);
    let mut scratch = Vec::new();
    let mut records = 0usize;
    let mut seen = Vec::new();
    for batch in batches.by_ref() {
        let AnyBatch::V2(batch) = batch? else {
            anyhow::bail!("demo wrote only v2 batches");
        };
        for r in batch.records(&mut scratch)? {
            r?;
            records += 1;
        }
        seen.push((batch.base_offset(), batch.last_offset()));
    }
    ensure!(
        batches.tail() == Some(Tail::Clean),
        "unexpected tail {:?}",
        batches.tail()
    );
    ensure!(seen == expected, "read back {seen:?}, wrote {expected:?}");
    println!(
        "  read back {} batches and {records} records zero-copy, every CRC-32C valid, in {:?}",
        seen.len(),
        started.elapsed()
    );
    println!();
    dump::run(&dump::DumpArgs::new(vec![segment], false, true))
}

fn default_dir() -> anyhow::Result<PathBuf> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    Ok(std::env::temp_dir().join(format!("klog-demo-{}-{nanos}", std::process::id())))
}

/// (base offset, last offset) of a batch.
type OffsetRange = (i64, i64);

/// The demo log and the offsets of each batch in it.
fn build_demo_log() -> anyhow::Result<(Vec<u8>, Vec<OffsetRange>)> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64;
    let mut out = Vec::new();
    let mut offsets = Vec::new();
    let mut next = 0i64;
    let mut push = |builder: BatchBuilder, out: &mut Vec<u8>| -> anyhow::Result<()> {
        let count = builder.record_count() as i64;
        builder
            .base_offset(next)
            .partition_leader_epoch(0)
            .build_into(out)?;
        offsets.push((next, next + count - 1));
        next += count;
        Ok(())
    };
    for (pid, codec) in Compression::ALL.into_iter().enumerate() {
        let mut b = BatchBuilder::new(codec).producer(pid as i64 + 1, 0, 0);
        for i in 0..5 {
            let key = format!("k{i}");
            let value = format!("{codec} value {i} ").repeat(8);
            let headers = [Header {
                key: "codec",
                value: Some(codec.name().as_bytes()),
            }];
            b.append(
                now + i,
                Some(key.as_bytes()),
                Some(value.as_bytes()),
                &headers,
            )?;
        }
        push(b, &mut out)?;
    }
    for (seq, marker) in [
        (0, ControlRecordType::Commit),
        (3, ControlRecordType::Abort),
    ] {
        let mut txn = BatchBuilder::new(Compression::None)
            .producer(4242, 0, seq)
            .transactional(true);
        for i in 0..3 {
            txn.append(
                now,
                Some(b"txn"),
                Some(format!("{marker} record {i}").as_bytes()),
                &[],
            )?;
        }
        push(txn, &mut out)?;
        push(
            BatchBuilder::end_txn_marker(marker, 4242, 0, 0, now)?,
            &mut out,
        )?;
    }
    push(
        BatchBuilder::mirror_pid_reset(SOURCE_CLUSTER_ID, now)?,
        &mut out,
    )?;
    Ok((out, offsets))
}
