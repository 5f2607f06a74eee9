//! `klog torture DIR`: appends and flushes random batches forever, printing `flushed <offset>`
//! after each flush returns. The real-process kill test SIGKILLs it at random moments and checks that a
//! reopen holds everything it reported flushed.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use klog::log::config::LogConfig;
use klog::log::format::{BatchBuilder, Compression};
use klog::log::io::{IoBackend, IoWorkload};
use klog::log::log_dir::LogDir;

use super::append::split_partition_dir;

#[derive(Debug, Args)]
pub struct TortureArgs {
    /// The partition directory to append to, `<log dir>/<topic>-<partition>`.
    dir: PathBuf,
    /// Seed of the random batches (the parent replays it to know what was acknowledged).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this many batches (default: until killed).
    #[arg(long)]
    batches: Option<u64>,
    /// The I/O backend: std, uring (the direct write path) or auto.
    #[arg(long, default_value = "std")]
    io_backend: String,
}

pub fn run(args: &TortureArgs) -> anyhow::Result<ExitCode> {
    let (root, name) = split_partition_dir(&args.dir)?;
    let backend = IoBackend::parse(&args.io_backend).ok_or_else(|| {
        anyhow::anyhow!(
            "--io-backend {}: expected std, uring or auto",
            args.io_backend
        )
    })?;
    // Every batch is flushed as it is appended: durable appends.
    let mut log_dir = LogDir::open_backend_for(backend, &root, IoWorkload::Durable)?;
    let config = LogConfig::from_pairs(["segment.bytes=262144", "index.interval.bytes=1024"])?;
    let (log, _) = log_dir.open_partition(&name, config)?;
    let mut rng = args.seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut out = super::stdout();
    writeln!(out, "opened {}", log.log_end_offset())?;
    out.flush()?;
    // Timestamps near now: Kafka's `message.timestamp.after.max.ms` refuses the far future.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut n = 0u64;
    super::shutdown::install()?;
    while args.batches.is_none_or(|max| n < max) && super::shutdown::requested().is_none() {
        let mut b = BatchBuilder::new(
            Compression::from_id((next() % 5) as u8).unwrap_or(Compression::None),
        );
        let records = 1 + next() % 20;
        for i in 0..records {
            let len = (next() % 2000) as usize;
            let value: Vec<u8> = (0..len).map(|j| (j as u64 ^ n ^ i) as u8).collect();
            b.append(
                now_ms + n as i64 % 1000,
                Some(&n.to_be_bytes()),
                Some(&value),
                &[],
            )?;
        }
        log.append_as_leader(&mut b.build()?, 0)?;
        n += 1;
        if next() % 4 == 0 {
            log.flush(log.log_end_offset())?;
            writeln!(out, "flushed {}", log.recovery_point())?;
            out.flush()?;
        }
    }
    // Stopped by a signal or the batch limit: a clean close (flush, checkpoints, marker, lock released).
    log_dir.close_partition(log)?;
    log_dir.close()?;
    Ok(super::shutdown::requested().map_or(ExitCode::SUCCESS, super::shutdown::exit_code))
}
