//! `klog dump`: batches as `kafka-dump-log` prints them (text), or one JSON object per batch (`--json`).
//!
//! The text lines follow `DumpLogSegments.scala` so an operator can diff the two tools. Problems never stop
//! the dump early where the framing still holds: a CRC mismatch prints `isvalid: false` and goes on; a
//! record that does not decode prints an error and the next batch follows. Any problem makes the exit
//! status 1.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use klog::log::format::{
    AnyBatch, BatchStream, Batches, ControlRecord, ControlValue, LegacyEntry, LegacyRecord, Record,
    RecordBatch, Tail, TimestampType,
};
use serde::Serialize;

#[derive(Debug, Args)]
pub struct DumpArgs {
    /// One JSON object per batch per line (see docs/cli.md).
    #[arg(long)]
    json: bool,
    /// Also print every record (Kafka's --deep-iteration); control records are decoded.
    #[arg(long)]
    deep: bool,
    /// Text mode: print keys and values as UTF-8 (Kafka's --print-data-log); implies --deep.
    #[arg(long)]
    print_data_log: bool,
    /// For .index and .timeindex files: only check them (Kafka's --index-sanity-check).
    #[arg(long)]
    index_sanity_check: bool,
    /// Decode records as `__mirror_state` records (on by itself for files in `__mirror_state-<n>`
    /// directories); implies --print-data-log.
    #[arg(long)]
    mirror_state_decoder: bool,
    #[command(flatten)]
    coordinator: super::dump_coordinator::DecoderArgs,
    /// Decode records as KRaft metadata records (on by itself for files in `__cluster_metadata-0` and
    /// for `.checkpoint` snapshots, unless --no-decoder); implies --print-data-log.
    #[arg(long)]
    cluster_metadata_decoder: bool,
    /// Files to dump: `.log` segments, KRaft snapshots (`<offset>-<epoch>.checkpoint`), `.bin` files of
    /// concatenated batches, `.index`, `.timeindex`,
    /// `.txnindex`, `leader-epoch-checkpoint`, the log directory's offset checkpoints, `partition.metadata`.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

impl DumpArgs {
    pub fn new(files: Vec<PathBuf>, json: bool, deep: bool) -> Self {
        DumpArgs {
            json,
            deep,
            print_data_log: false,
            index_sanity_check: false,
            mirror_state_decoder: false,
            coordinator: Default::default(),
            cluster_metadata_decoder: false,
            files,
        }
    }
}

impl DumpArgs {
    pub fn set_print_data_log(&mut self, on: bool) {
        self.print_data_log = on;
    }
}

pub fn run(args: &DumpArgs) -> anyhow::Result<ExitCode> {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut clean = true;
    for path in &args.files {
        clean &= dump_file(args, path, &mut out)?;
    }
    out.flush()?;
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Dumps one file; `Ok(false)` when the file had problems (reported on stderr / as JSON error lines).
fn dump_file(args: &DumpArgs, path: &Path, out: &mut impl Write) -> anyhow::Result<bool> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let snapshot = super::dump_metadata::snapshot_header(path);
    if !matches!(ext, "log" | "bin") && snapshot.is_none() {
        let meta = super::dump_meta::MetaArgs {
            json: args.json,
            index_sanity_check: args.index_sanity_check,
        };
        return super::dump_meta::dump(&meta, path, out);
    }
    let file = fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let len = file
        .metadata()
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    if !args.json {
        writeln!(out, "Dumping {}", path.display())?;
        if let Some(base) = segment_base_offset(path).filter(|_| ext == "log") {
            writeln!(out, "Log starting offset: {base}")?;
        }
        if let Some(header) = &snapshot {
            writeln!(out, "{header}")?;
        }
    }
    // A window that advances batch by batch, printing as it goes: memory is one window (or one batch
    // larger than it), never the file.
    let mut read_at = |buf: &mut [u8], position: u64| {
        file.read_at(buf, position)
            .map_err(|e| klog::log::Error::Io {
                path: path.to_owned(),
                source: e,
            })
    };
    let mut dumper = Dumper::new(args, path);
    let tail = BatchStream::default().without_crc().scan::<anyhow::Error>(
        &mut read_at,
        0,
        len,
        &mut |batch| {
            dumper.one(batch, out)?;
            Ok(ControlFlow::Continue(()))
        },
    )?;
    dumper.finish(tail, out)
}

/// Dumps concatenated batches (a file's, or a read's); `Ok(false)` when they had problems.
pub fn dump_batches(
    args: &DumpArgs,
    path: &Path,
    data: &[u8],
    out: &mut impl Write,
) -> anyhow::Result<bool> {
    let mut dumper = Dumper::new(args, path);
    let mut batches = Batches::new(data).without_crc();
    for batch in batches.by_ref() {
        dumper.one(batch, out)?;
    }
    dumper.finish(batches.tail(), out)
}

fn batch_error_position(e: &klog::log::Error) -> u64 {
    match e {
        klog::log::Error::CorruptBatch { position, .. } => *position,
        _ => 0,
    }
}

/// `<20 digits>.log` -> the base offset, as Kafka parses a segment name.
fn segment_base_offset(path: &Path) -> Option<i64> {
    let name = path.file_name()?.to_str()?;
    name.split('.').next()?.parse().ok()
}

struct Dumper<'a> {
    args: &'a DumpArgs,
    mirror_state: bool,
    coordinator: Option<klog::log::coordinator::Coordinator>,
    cluster_metadata: bool,
    deep: bool,
    path: &'a Path,
    scratch: Vec<u8>,
    clean: bool,
    last_record_offset: Option<i64>,
    non_consecutive: Vec<(i64, i64)>,
    non_consecutive_more: u64,
}

#[derive(Serialize)]
struct BatchJson {
    position: u64,
    base_offset: i64,
    last_offset: i64,
    batch_size: usize,
    magic: i8,
    partition_leader_epoch: Option<i32>,
    crc: u32,
    crc_valid: bool,
    compression: String,
    timestamp_type: Option<&'static str>,
    is_transactional: bool,
    is_control: bool,
    control_type: Option<String>,
    producer_id: Option<i64>,
    producer_epoch: Option<i16>,
    base_sequence: Option<i32>,
    last_sequence: Option<i32>,
    record_count: Option<i32>,
    base_timestamp: Option<i64>,
    max_timestamp: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    records: Option<Vec<RecordJson>>,
}

#[derive(Serialize)]
struct RecordJson {
    offset: i64,
    timestamp: Option<i64>,
    key: Option<String>,
    value: Option<String>,
    headers: Vec<HeaderJson>,
    /// The decoded `__mirror_state` record (`{"key": ..., "payload": ...}`) with the decoder on.
    #[serde(skip_serializing_if = "Option::is_none")]
    mirror_state: Option<serde_json::Value>,
    /// The decoded `__consumer_offsets` / `__transaction_state` record with a coordinator decoder on.
    #[serde(skip_serializing_if = "Option::is_none")]
    coordinator: Option<super::dump_coordinator::CoordinatorJson>,
    /// The decoded KRaft metadata record or KRaft control record, with that decoder on.
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster_metadata: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct HeaderJson {
    key: String,
    value: Option<String>,
}

#[derive(Serialize)]
struct ErrorJson<'a> {
    position: u64,
    error: &'a str,
}

fn hex(bytes: Option<&[u8]>) -> Option<String> {
    use std::fmt::Write as _;
    bytes.map(|b| {
        let mut s = String::with_capacity(b.len() * 2);
        for byte in b {
            let _ = write!(s, "{byte:02x}");
        }
        s
    })
}

fn timestamp_type_json(t: TimestampType) -> &'static str {
    match t {
        TimestampType::CreateTime => "create_time",
        TimestampType::LogAppendTime => "log_append_time",
    }
}

/// Non-consecutive offset pairs kept for the report at the end (16 bytes each): a compacted log has one
/// per gap, so past this many only their number is kept.
const NON_CONSECUTIVE_KEPT: usize = 65_536;

impl<'a> Dumper<'a> {
    fn new(args: &'a DumpArgs, path: &'a Path) -> Self {
        let in_state_dir = path
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("__mirror_state-"));
        let mirror_state =
            args.mirror_state_decoder || (in_state_dir && !args.coordinator.no_decoder);
        let coordinator = args.coordinator.coordinator_for(path);
        let cluster_metadata = args.cluster_metadata_decoder
            || (!args.coordinator.no_decoder && super::dump_metadata::applies(false, path));
        Dumper {
            args,
            mirror_state,
            coordinator,
            cluster_metadata,
            deep: args.deep
                || args.print_data_log
                || mirror_state
                || coordinator.is_some()
                || cluster_metadata,
            path,
            scratch: Vec::new(),
            clean: true,
            last_record_offset: None,
            non_consecutive: Vec::new(),
            non_consecutive_more: 0,
        }
    }

    /// One step of the iteration: a batch, or the error that ends it.
    fn one(
        &mut self,
        batch: Result<AnyBatch<'_>, klog::log::Error>,
        out: &mut impl Write,
    ) -> anyhow::Result<()> {
        match batch {
            Ok(batch) => self.batch(batch, out),
            Err(e) => Ok(self.error(e.to_string(), batch_error_position(&e), out)?),
        }
    }

    /// The tail and the non-consecutive offsets; whether everything was clean.
    fn finish(mut self, tail: Option<Tail>, out: &mut impl Write) -> anyhow::Result<bool> {
        self.tail(tail, out)?;
        self.report_non_consecutive();
        Ok(self.clean)
    }

    fn error(&mut self, message: String, position: u64, out: &mut impl Write) -> io::Result<()> {
        self.clean = false;
        if self.args.json {
            serde_json::to_writer(
                &mut *out,
                &ErrorJson {
                    position,
                    error: &message,
                },
            )?;
            writeln!(out)
        } else {
            out.flush()?;
            super::print_error(None, format_args!("{}: {message}", self.path.display()));
            Ok(())
        }
    }

    fn tail(&mut self, tail: Option<Tail>, out: &mut impl Write) -> io::Result<()> {
        match tail {
            Some(Tail::Partial { position, bytes }) => {
                if !self.args.json {
                    let name = self
                        .path
                        .file_name()
                        .map(|n| n.to_string_lossy())
                        .unwrap_or_default();
                    writeln!(out, "Found {bytes} invalid bytes at the end of {name}")?;
                }
                let message = format!("truncated batch at position {position}: {bytes} bytes do not form a whole batch");
                self.error(message, position, out)
            }
            Some(Tail::ZeroFilled { position, bytes }) => {
                errln!(
                    "klog: {}: {bytes} zero bytes from position {position} (a preallocated tail, not data)",
                    self.path.display()
                );
                Ok(())
            }
            Some(Tail::Clean) | Some(Tail::Corrupt { .. }) | None => Ok(()),
        }
    }

    fn report_non_consecutive(&self) {
        if self.non_consecutive.is_empty() || self.args.json {
            return;
        }
        errln!("Non-consecutive offsets in {}", self.path.display());
        for (a, b) in &self.non_consecutive {
            errln!("  {a} is followed by {b}");
        }
        if self.non_consecutive_more > 0 {
            errln!("  ... and {} more", self.non_consecutive_more);
        }
    }

    fn note_record_offset(&mut self, offset: i64) {
        if let Some(last) = self.last_record_offset {
            if offset != last.wrapping_add(1) {
                if self.non_consecutive.len() < NON_CONSECUTIVE_KEPT {
                    self.non_consecutive.push((last, offset));
                } else {
                    self.non_consecutive_more += 1;
                }
            }
        }
        self.last_record_offset = Some(offset);
    }

    fn batch(&mut self, batch: AnyBatch<'_>, out: &mut impl Write) -> anyhow::Result<()> {
        match batch {
            AnyBatch::V2(b) => self.v2(b, out),
            AnyBatch::Legacy(e) => self.legacy(e, out),
        }
    }

    fn v2(&mut self, b: RecordBatch<'_>, out: &mut impl Write) -> anyhow::Result<()> {
        let crc_valid = b.compute_crc() == b.crc();
        if !crc_valid {
            self.clean = false;
        }
        // Problems found while decoding are reported after the batch's own line.
        let mut problems = Vec::new();
        // The type is read from the key alone, as Kafka decides a control batch: a barrier whose value
        // does not parse is still a MIRROR_PID_RESET, and the problem names the batch by its offset. A
        // control batch the cleaner emptied has no record and no problem.
        let control_type = klog::log::producer_state::control_record_type(&b);
        if let Err(e) = control_record(&b) {
            let problem = klog::log::producer_state::control_record_problem(&b);
            problems.push(problem.unwrap_or_else(|| e.to_string()));
        }
        let compression = match b.compression() {
            Ok(c) => c.name().to_string(),
            Err(_) => format!("unknown_{}", b.attributes().compression_id()),
        };
        if self.args.json {
            let records = self.deep.then(|| self.v2_records_json(&b, &mut problems));
            let json = BatchJson {
                position: b.position(),
                base_offset: b.base_offset(),
                last_offset: b.last_offset(),
                batch_size: b.size_in_bytes(),
                magic: b.magic(),
                partition_leader_epoch: Some(b.partition_leader_epoch()),
                crc: b.crc(),
                crc_valid,
                compression,
                timestamp_type: Some(timestamp_type_json(b.timestamp_type())),
                is_transactional: b.is_transactional(),
                is_control: b.is_control(),
                control_type: control_type.map(|t| t.json_name()),
                producer_id: Some(b.producer_id()),
                producer_epoch: Some(b.producer_epoch()),
                base_sequence: Some(b.base_sequence()),
                last_sequence: Some(b.last_sequence()),
                record_count: Some(b.records_count()),
                base_timestamp: Some(b.base_timestamp()),
                max_timestamp: Some(b.max_timestamp()),
                records,
            };
            serde_json::to_writer(&mut *out, &json)?;
            writeln!(out)?;
        } else {
            self.v2_line(&b, &compression, crc_valid, out)?;
            if self.deep {
                self.v2_records_text(&b, &mut problems, out)?;
            }
        }
        problems.dedup();
        for p in problems {
            self.error(p, b.position(), out)?;
        }
        Ok(())
    }

    fn v2_line(
        &self,
        b: &RecordBatch<'_>,
        compression: &str,
        crc_valid: bool,
        out: &mut impl Write,
    ) -> io::Result<()> {
        let horizon = match b.delete_horizon_ms() {
            Some(ms) => format!("OptionalLong[{ms}]"),
            None => "OptionalLong.empty".into(),
        };
        writeln!(
            out,
            "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} producerId: {} \
             producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} isControl: {} deleteHorizonMs: {} \
             position: {} {}: {} size: {} magic: {} compresscodec: {} crc: {} isvalid: {}",
            b.base_offset(),
            b.last_offset(),
            b.records_count(),
            b.base_sequence(),
            b.last_sequence(),
            b.producer_id(),
            b.producer_epoch(),
            b.partition_leader_epoch(),
            b.is_transactional(),
            b.is_control(),
            horizon,
            b.position(),
            b.timestamp_type().kafka_name(),
            b.max_timestamp(),
            b.size_in_bytes(),
            b.magic(),
            compression,
            b.crc(),
            crc_valid
        )
    }

    fn v2_records_json(
        &mut self,
        b: &RecordBatch<'_>,
        problems: &mut Vec<String>,
    ) -> Vec<RecordJson> {
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut json = Vec::new();
        match b.records(&mut scratch) {
            Ok(records) => {
                for r in records {
                    match r {
                        Ok(r) => {
                            let mut j = record_json(&r);
                            if self.mirror_state && !b.is_control() {
                                j.mirror_state = Some(mirror_state_json(&r));
                            }
                            if self.cluster_metadata {
                                j.cluster_metadata = cluster_metadata_json(b, &r);
                            }
                            if let Some(c) = self.coordinator.filter(|_| !b.is_control()) {
                                let decoded =
                                    super::dump_coordinator::decode(c, r.offset, r.key, r.value);
                                problems.extend(decoded.problem(r.offset));
                                j.coordinator = Some(decoded.json());
                            }
                            json.push(j);
                        }
                        Err(e) => problems.push(e.to_string()),
                    }
                }
            }
            Err(e) => problems.push(e.to_string()),
        }
        self.scratch = scratch;
        json
    }

    fn v2_records_text(
        &mut self,
        b: &RecordBatch<'_>,
        problems: &mut Vec<String>,
        out: &mut impl Write,
    ) -> anyhow::Result<()> {
        let mut scratch = std::mem::take(&mut self.scratch);
        let result = self.v2_records_text_with(b, &mut scratch, problems, out);
        self.scratch = scratch;
        result
    }

    fn v2_records_text_with(
        &mut self,
        b: &RecordBatch<'_>,
        scratch: &mut Vec<u8>,
        problems: &mut Vec<String>,
        out: &mut impl Write,
    ) -> anyhow::Result<()> {
        let records = match b.records(scratch) {
            Ok(records) => records,
            Err(e) => {
                problems.push(e.to_string());
                return Ok(());
            }
        };
        for r in records {
            match r {
                Ok(r) => {
                    self.note_record_offset(r.offset);
                    self.record_text(b, &r, problems, out)?;
                }
                Err(e) => problems.push(e.to_string()),
            }
        }
        Ok(())
    }

    fn record_text(
        &self,
        b: &RecordBatch<'_>,
        r: &Record<'_>,
        problems: &mut Vec<String>,
        out: &mut impl Write,
    ) -> anyhow::Result<()> {
        let header_keys: Vec<String> = r
            .headers
            .clone()
            .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
            .collect();
        write!(
            out,
            "| offset: {} {}: {} keySize: {} valueSize: {} sequence: {} headerKeys: [{}]",
            r.offset,
            b.timestamp_type().kafka_name(),
            r.timestamp,
            r.key.map_or(-1, |k| k.len() as i64),
            r.value.map_or(-1, |v| v.len() as i64),
            r.sequence,
            header_keys.join(",")
        )?;
        if b.is_control() {
            match ControlRecord::parse(r.key, r.value) {
                Ok(c) => write!(out, "{}", control_text(&c))?,
                Err(e) => write!(out, " controlError: {e}")?,
            }
        } else if let Some(c) = self.coordinator {
            let decoded = super::dump_coordinator::decode(c, r.offset, r.key, r.value);
            problems.extend(decoded.problem(r.offset));
            write!(out, "{}", decoded.kafka_text(r.offset))?;
        } else if self.cluster_metadata {
            let (text, problem) = super::dump_metadata::payload_text(r);
            write!(out, "{text}")?;
            problems.extend(problem);
        } else if self.mirror_state {
            let decoded = mirror_state_json(r);
            match (decoded.get("key"), decoded.get("payload")) {
                (Some(k), Some(p)) => {
                    write!(out, " key: {k} payload: {p}")?;
                    if let Some(layout) = decoded.get("layout").and_then(|l| l.as_str()) {
                        write!(out, " layout: {layout}")?;
                    }
                }
                _ => write!(out, " {decoded}")?,
            }
        } else if self.args.print_data_log {
            if let Some(k) = r.key {
                write!(out, " key: {}", String::from_utf8_lossy(k))?;
            }
            if let Some(v) = r.value {
                write!(out, " payload: {}", String::from_utf8_lossy(v))?;
            }
        }
        writeln!(out)?;
        Ok(())
    }

    fn legacy(&mut self, e: LegacyEntry<'_>, out: &mut impl Write) -> anyhow::Result<()> {
        let crc_valid = e.compute_crc() == e.crc;
        if !crc_valid {
            self.clean = false;
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut problems = Vec::new();
        let records = match e.records(&mut scratch) {
            Ok(r) => Some(r),
            Err(err) => {
                self.error(err.to_string(), e.position(), out)?;
                None
            }
        };
        let compression = match e.compression() {
            Ok(c) => c.name().to_string(),
            Err(_) => format!("unknown_{}", e.attributes & 0x07),
        };
        if self.args.json {
            let json = BatchJson {
                position: e.position(),
                base_offset: records
                    .as_ref()
                    .and_then(|r| r.first())
                    .map_or(e.offset, |r| r.offset),
                last_offset: e.offset,
                batch_size: e.size_in_bytes(),
                magic: e.magic,
                partition_leader_epoch: None,
                crc: e.crc,
                crc_valid,
                compression,
                timestamp_type: e.timestamp_type().map(timestamp_type_json),
                is_transactional: false,
                is_control: false,
                control_type: None,
                producer_id: None,
                producer_epoch: None,
                base_sequence: None,
                last_sequence: None,
                record_count: records.as_ref().map(|r| r.len() as i32),
                base_timestamp: None,
                max_timestamp: e.timestamp,
                records: if self.deep {
                    Some(
                        records
                            .iter()
                            .flatten()
                            .map(|r| self.legacy_record_json(r, &mut problems))
                            .collect(),
                    )
                } else {
                    None
                },
            };
            serde_json::to_writer(&mut *out, &json)?;
            writeln!(out)?;
        } else {
            let ts_type = e
                .timestamp_type()
                .map_or("NoTimestampType", |t| t.kafka_name());
            writeln!(
                out,
                "offset: {} position: {} {}: {} size: {} magic: {} compresscodec: {} crc: {} isvalid: {}",
                e.offset,
                e.position(),
                ts_type,
                e.timestamp.unwrap_or(-1),
                e.size_in_bytes(),
                e.magic,
                compression,
                e.crc,
                crc_valid
            )?;
            if self.deep {
                for r in records.iter().flatten() {
                    self.note_record_offset(r.offset);
                    self.legacy_record_text(ts_type, r, &mut problems, out)?;
                }
            }
        }
        self.scratch = scratch;
        for p in problems {
            self.error(p, e.position(), out)?;
        }
        Ok(())
    }

    fn legacy_record_text(
        &self,
        ts_type: &str,
        r: &LegacyRecord<'_>,
        problems: &mut Vec<String>,
        out: &mut impl Write,
    ) -> io::Result<()> {
        write!(
            out,
            "| offset: {} {}: {} keySize: {} valueSize: {} isValid: true crc: {}",
            r.offset,
            ts_type,
            r.timestamp.unwrap_or(-1),
            r.key.map_or(-1, |k| k.len() as i64),
            r.value.map_or(-1, |v| v.len() as i64),
            r.crc
        )?;
        if let Some(c) = self.coordinator {
            let decoded = super::dump_coordinator::decode(c, r.offset, r.key, r.value);
            problems.extend(decoded.problem(r.offset));
            write!(out, "{}", decoded.kafka_text(r.offset))?;
        } else if self.args.print_data_log {
            if let Some(k) = r.key {
                write!(out, " key: {}", String::from_utf8_lossy(k))?;
            }
            if let Some(v) = r.value {
                write!(out, " payload: {}", String::from_utf8_lossy(v))?;
            }
        }
        writeln!(out)
    }

    fn legacy_record_json(&self, r: &LegacyRecord<'_>, problems: &mut Vec<String>) -> RecordJson {
        let mut j = legacy_record_json(r);
        if let Some(c) = self.coordinator {
            let decoded = super::dump_coordinator::decode(c, r.offset, r.key, r.value);
            problems.extend(decoded.problem(r.offset));
            j.coordinator = Some(decoded.json());
        }
        j
    }
}

/// The batch's control record; none for a control batch the log cleaner emptied (it keeps the batch for
/// its producer state), which Kafka's dump prints like any other.
fn control_record(b: &RecordBatch<'_>) -> Result<Option<ControlRecord>, klog::log::Error> {
    if b.is_control() && b.records_count() == 0 {
        return Ok(None);
    }
    b.control_record()
}

fn control_text(c: &ControlRecord) -> String {
    match &c.value {
        ControlValue::EndTxn(m) => format!(
            " endTxnMarker: {} coordinatorEpoch: {}",
            c.record_type, m.coordinator_epoch
        ),
        ControlValue::MirrorPidReset(m) => {
            format!(" mirrorPidReset: {}", m.to_kafka_json())
        }
        ControlValue::LeaderChange(l) => format!(" LeaderChange: {}", l.to_kafka_json()),
        ControlValue::Raw(v) => super::dump_metadata::control_text(c.record_type, v.as_deref())
            .unwrap_or_else(|| format!(" controlType: {}({})", c.record_type, c.record_type.id())),
    }
}

fn record_json(r: &Record<'_>) -> RecordJson {
    RecordJson {
        offset: r.offset,
        timestamp: Some(r.timestamp),
        key: hex(r.key),
        value: hex(r.value),
        headers: r
            .headers
            .clone()
            .map(|(k, v)| HeaderJson {
                key: String::from_utf8_lossy(k).into_owned(),
                value: hex(v),
            })
            .collect(),
        mirror_state: None,
        coordinator: None,
        cluster_metadata: None,
    }
}

/// A record's `"cluster_metadata"`: the metadata record, or the KRaft control record of a control batch.
fn cluster_metadata_json(b: &RecordBatch<'_>, r: &Record<'_>) -> Option<serde_json::Value> {
    if !b.is_control() {
        return Some(super::dump_metadata::record_json(r));
    }
    let c = ControlRecord::parse(r.key, r.value).ok()?;
    super::dump_metadata::control_json(c.record_type, r.value)
}

/// A `__mirror_state` record decoded in whichever layout it is (`"layout"` names it), or
/// `{"error": ...}` naming what failed.
fn mirror_state_json(r: &Record<'_>) -> serde_json::Value {
    match klog::mirror::records::DecodedRecord::decode(r.key, r.value) {
        Ok(m) => m.to_json(),
        Err(e) => serde_json::json!({ "error": e }),
    }
}

fn legacy_record_json(r: &LegacyRecord<'_>) -> RecordJson {
    RecordJson {
        offset: r.offset,
        timestamp: r.timestamp,
        key: hex(r.key),
        value: hex(r.value),
        headers: Vec::new(),
        mirror_state: None,
        coordinator: None,
        cluster_metadata: None,
    }
}
