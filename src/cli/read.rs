//! `klog read DIR --offset N`: a fetch from the partition directory DIR, as a consumer would get it: whole
//! batches from the one holding N, at most `--max-bytes` (at least one batch), up to the high watermark.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use klog::log::io::StdStorage;
use klog::log::log_dir::LogDir;
use serde_json::json;

use super::append::split_partition_dir;
use super::dump::{dump_batches, DumpArgs};
use super::topic_config::{configs_json, configs_text, ConfigArgs, TopicConfigs};

#[derive(Debug, Args)]
pub struct ReadArgs {
    /// The partition directory, `<log dir>/<topic>-<partition>`.
    dir: PathBuf,
    #[arg(long)]
    offset: i64,
    #[arg(long, default_value_t = 1_048_576)]
    max_bytes: usize,
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
    let read = log.read(
        args.offset,
        args.max_bytes,
        Some(log.high_watermark()),
        true,
    );
    log.close()?;
    log_dir.close()?;
    let read = match read {
        Ok(r) => r,
        Err(e) => {
            let name = e.kafka_error().name();
            if args.json {
                outln!("{}", json!({"error": name, "message": e.to_string()}));
            } else {
                errln!("klog: error {name}: {e}");
            }
            return Ok(ExitCode::from(1));
        }
    };
    let bytes = read.records.as_slice();
    let mut dump = DumpArgs::new(Vec::new(), args.json, true);
    dump.set_print_data_log(args.print_data_log);
    let mut batches = Vec::new();
    let clean = dump_batches(&dump, &args.dir, bytes, &mut batches)?;
    if args.json {
        let batches: Vec<serde_json::Value> = String::from_utf8(batches)?
            .lines()
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()?;
        let v = json!({
            "offset": args.offset,
            "next_offset": read.next_offset,
            "high_watermark": read.high_watermark,
            "log_start_offset": read.log_start_offset,
            "log_end_offset": read.log_end_offset,
            "batches": batches,
            "metadata_log": configs.metadata_dir().map(|d| d.display().to_string()),
            "configs": configs_json(&config),
        });
        outln!("{v}");
    } else {
        out!("{}", String::from_utf8(batches)?);
        outln!(
            "next offset: {} high watermark: {} log start offset: {} log end offset: {}",
            read.next_offset,
            read.high_watermark,
            read.log_start_offset,
            read.log_end_offset
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
