//! `klog read DIR --offset N`: a fetch from the partition directory DIR, as a consumer would get it: whole
//! batches from the one holding N, at most `--max-bytes` (at least one batch), up to the high watermark.
//! With `--isolation-level read_committed` the fetch stops at the last stable offset and the batches of
//! aborted transactions (found in the `.txnindex` files) are left out, as a read_committed consumer skips
//! them: it walks the batches in order, a producer is aborted from the first offset of its aborted
//! transaction until its ABORT marker, and its transactional data batches in between are dropped.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use klog::log::format::{AnyBatch, Batches, ControlRecordType};
use klog::log::io::StdStorage;
use klog::log::log_dir::LogDir;
use klog::log::partition_log::{LogReadInfo, PartitionLog};
use klog::log::txn_index::AbortedTxn;
use serde_json::json;

use super::append::split_partition_dir;
use super::dump::{dump_batches, DumpArgs};
use super::topic_config::{configs_json, configs_text, ConfigArgs, TopicConfigs};

#[derive(Debug, Args)]
pub struct ReadArgs {
    /// The partition directory, `<log dir>/<topic>-<partition>`.
    dir: PathBuf,
    /// The offset to read from: the batch holding it is the first returned.
    #[arg(long)]
    offset: i64,
    /// At most this many bytes of batches (but always one whole batch, as a fetch's first batch).
    #[arg(long, default_value_t = 1_048_576)]
    max_bytes: usize,
    /// read_uncommitted reads up to the high watermark; read_committed stops at the last stable offset
    /// and leaves out the batches of aborted transactions, as a Kafka consumer at that level.
    #[arg(long, value_enum, default_value_t = IsolationLevel::ReadUncommitted)]
    isolation_level: IsolationLevel,
    /// Print keys and values (text mode).
    #[arg(long)]
    print_data_log: bool,
    /// One JSON object: the offsets and the batches (as `klog dump --json --deep` prints them).
    #[arg(long)]
    json: bool,
    /// Topic configs over the metadata log's (reading depends on few: an unclean partition's in-memory
    /// index rebuild follows `index.interval.bytes`).
    #[command(flatten)]
    config: ConfigArgs,
}

/// Kafka's `isolation.level` of a consumer (and of a Fetch request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
enum IsolationLevel {
    /// Every batch up to the high watermark, open and aborted transactions included.
    ReadUncommitted,
    /// Up to the last stable offset, without the batches of aborted transactions.
    ReadCommitted,
}

impl IsolationLevel {
    fn name(self) -> &'static str {
        match self {
            IsolationLevel::ReadUncommitted => "read_uncommitted",
            IsolationLevel::ReadCommitted => "read_committed",
        }
    }
}

/// The fetch at the requested level: read_committed bounded by the LSO, with the aborted transactions.
fn fetch(
    log: &PartitionLog,
    args: &ReadArgs,
) -> Result<(LogReadInfo, Vec<AbortedTxn>), klog::log::Error> {
    match args.isolation_level {
        IsolationLevel::ReadUncommitted => log
            .read(
                args.offset,
                args.max_bytes,
                Some(log.high_watermark()),
                true,
            )
            .map(|r| (r, Vec::new())),
        IsolationLevel::ReadCommitted => log.read_committed(args.offset, args.max_bytes, true),
    }
}

/// The batches of `bytes` a read_committed consumer keeps: Kafka's `Fetcher` rule. `aborted` is sorted
/// by first offset; a producer enters the aborted set at its transaction's first offset and leaves it at
/// its ABORT marker. Control batches are kept (a fetch returns them; `dump` shows the markers).
fn without_aborted(bytes: &[u8], aborted: &[AbortedTxn]) -> Vec<u8> {
    let mut pending: Vec<&AbortedTxn> = aborted.iter().collect();
    pending.sort_by_key(|t| t.first_offset.get());
    let mut pending = pending.into_iter().peekable();
    let mut aborting = std::collections::HashSet::new();
    let mut kept = Vec::with_capacity(bytes.len());
    let mut consumed = 0;
    for batch in Batches::new(bytes) {
        let Ok(batch) = batch else {
            // Left as read: the dump names the problem where it is.
            kept.extend_from_slice(&bytes[consumed..]);
            break;
        };
        consumed += batch.size_in_bytes();
        let AnyBatch::V2(b) = batch else {
            kept.extend_from_slice(batch.as_bytes());
            continue;
        };
        while let Some(t) = pending.next_if(|t| t.first_offset.get() <= b.last_offset()) {
            aborting.insert(t.producer_id.get());
        }
        let abort_marker = b.is_control()
            && matches!(b.control_record(), Ok(Some(r)) if r.record_type == ControlRecordType::Abort);
        if abort_marker {
            aborting.remove(&b.producer_id());
        } else if b.is_transactional() && !b.is_control() && aborting.contains(&b.producer_id()) {
            continue;
        }
        kept.extend_from_slice(b.as_bytes());
    }
    kept
}

pub fn run(args: &ReadArgs) -> anyhow::Result<ExitCode> {
    let (root, name) = split_partition_dir(&args.dir)?;
    anyhow::ensure!(
        args.dir.is_dir(),
        "{}: no such partition directory",
        args.dir.display()
    );
    // A reader: no lock, nothing on disk changed (a torn tail is read around, not cut).
    let log_dir = LogDir::open_read_only(std::sync::Arc::new(StdStorage), &root)?;
    let configs = TopicConfigs::load(&args.config, &root)?;
    let config = configs.for_partition(&root, &name);
    let (log, _) = log_dir.open_partition(&name, config.config.clone())?;
    let read = fetch(&log, args);
    let last_stable_offset = log.last_stable_offset();
    log.close()?;
    log_dir.close()?;
    let (read, aborted) = match read {
        Ok(r) => r,
        Err(e) => {
            let name = e.kafka_error().name();
            if args.json {
                outln!("{}", json!({"error": name, "message": e.message()}));
            } else {
                super::print_error(Some(name), e.message());
            }
            return Ok(ExitCode::from(1));
        }
    };
    let bytes = match args.isolation_level {
        IsolationLevel::ReadUncommitted => read.records.as_slice().to_vec(),
        IsolationLevel::ReadCommitted => without_aborted(read.records.as_slice(), &aborted),
    };
    let mut dump = DumpArgs::new(Vec::new(), args.json, true);
    dump.set_print_data_log(args.print_data_log);
    let mut batches = Vec::new();
    let clean = dump_batches(&dump, &args.dir, &bytes, &mut batches)?;
    if args.json {
        let batches: Vec<serde_json::Value> = String::from_utf8(batches)?
            .lines()
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()?;
        let mut v = json!({
            "offset": args.offset,
            "isolation_level": args.isolation_level.name(),
            "next_offset": read.next_offset,
            "high_watermark": read.high_watermark,
            "last_stable_offset": last_stable_offset,
            "log_start_offset": read.log_start_offset,
            "log_end_offset": read.log_end_offset,
            "batches": batches,
            "metadata_log": configs.metadata_dir().map(|d| d.display().to_string()),
            "configs": configs_json(&config),
        });
        if args.isolation_level == IsolationLevel::ReadCommitted {
            // As a Fetch response carries them: the aborted transactions overlapping the returned range.
            v["aborted_transactions"] = aborted
                .iter()
                .map(|t| json!({"producer_id": t.producer_id.get(), "first_offset": t.first_offset.get()}))
                .collect();
        }
        outln!("{v}");
    } else {
        out!("{}", String::from_utf8(batches)?);
        outln!(
            "next offset: {} high watermark: {} last stable offset: {} log start offset: {} log end offset: {} isolation level: {}",
            read.next_offset,
            read.high_watermark,
            last_stable_offset,
            read.log_start_offset,
            read.log_end_offset,
            args.isolation_level.name()
        );
        if let Some(c) = configs_text(&config) {
            outln!("configs: {c}");
        }
    }
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
