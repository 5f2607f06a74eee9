//! `verify`: checks a partition directory without changing anything. Every batch's CRC and framing, every
//! index entry against the `.log`, every `.txnindex` entry against its marker, every producer snapshot
//! against a replay from the one before it, and the partition's checkpoint files.

use std::path::{Path, PathBuf};

use klog_log::checkpoint::{read_checkpoint, read_partition_metadata};
use klog_log::format::{AnyBatch, Batches, ControlRecordType, Tail};
use klog_log::io::{read_file, Storage};
use klog_log::producer_state::{list_snapshots, read_snapshot, snapshot_path, summarize};
use klog_log::segment::{parse_base_offset, LogSegment};
use klog_log::Error;
use klog_psm::{AppendOrigin, ProducerStateManager, PsmConfig};

/// One thing wrong, and the file it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    pub what: String,
}

struct Checker<'a> {
    storage: &'a dyn Storage,
    dir: &'a Path,
    problems: Vec<Problem>,
}

impl Checker<'_> {
    fn problem(&mut self, file: PathBuf, what: impl Into<String>) {
        self.problems.push(Problem {
            file,
            what: what.into(),
        });
    }

    fn read(&mut self, path: &Path) -> Result<Option<Vec<u8>>, Error> {
        read_file(self.storage, path).map_err(|e| Error::Io {
            path: path.to_owned(),
            source: e,
        })
    }
}

/// A batch's place in the log: (segment base, position, last offset, base offset, control type if a marker).
type Located = (i64, u64, i64, i64, Option<ControlRecordType>);

/// Checks the partition directory `dir`; an empty list means it is consistent.
pub fn verify_partition(storage: &dyn Storage, dir: &Path) -> Result<Vec<Problem>, Error> {
    let mut c = Checker {
        storage,
        dir,
        problems: Vec::new(),
    };
    let names = storage.list(dir).map_err(|e| Error::Io {
        path: dir.to_owned(),
        source: e,
    })?;
    let bases: Vec<i64> = names
        .iter()
        .filter(|n| n.ends_with(".log") && n.len() == 24)
        .filter_map(|n| parse_base_offset(n))
        .collect();
    let mut batches: Vec<Located> = Vec::new();
    let mut next_expected: Option<i64> = None;
    for &base in &bases {
        check_segment(&mut c, base, &mut batches, &mut next_expected)?;
    }
    let log_end = next_expected.unwrap_or(bases.first().copied().unwrap_or(0));
    check_snapshots(&mut c, &batches)?;
    check_epochs(&mut c, log_end)?;
    if let Err(e) = read_partition_metadata(storage, dir) {
        c.problem(dir.join("partition.metadata"), e.to_string());
    }
    Ok(c.problems)
}

fn check_segment(
    c: &mut Checker<'_>,
    base: i64,
    batches: &mut Vec<Located>,
    next: &mut Option<i64>,
) -> Result<(), Error> {
    let log_path = LogSegment::log_path(c.dir, base);
    let bytes = c.read(&log_path)?.unwrap_or_default();
    let mut it = Batches::new(&bytes);
    let first_index = batches.len();
    for b in it.by_ref() {
        let b = match b {
            Ok(b) => b,
            Err(e) => {
                c.problem(log_path.clone(), e.to_string());
                break;
            }
        };
        if b.base_offset() < base || b.last_offset() - base > i32::MAX as i64 {
            c.problem(
                log_path.clone(),
                format!(
                    "batch at position {} has offsets outside the segment",
                    b.position()
                ),
            );
        }
        if next.is_some_and(|n| b.base_offset() < n) {
            c.problem(
                log_path.clone(),
                format!(
                    "batch at position {} goes back to offset {}",
                    b.position(),
                    b.base_offset()
                ),
            );
        }
        *next = Some(b.last_offset().wrapping_add(1));
        let control = match b {
            AnyBatch::V2(v) => v.control_record().ok().flatten().map(|r| r.record_type),
            AnyBatch::Legacy(_) => None,
        };
        batches.push((
            base,
            b.position(),
            b.last_offset(),
            b.base_offset(),
            control,
        ));
    }
    match it.tail() {
        Some(Tail::Partial { position, bytes }) => c.problem(
            log_path.clone(),
            format!("an incomplete batch of {bytes} bytes at position {position}"),
        ),
        Some(Tail::ZeroFilled { position, bytes }) => c.problem(
            log_path.clone(),
            format!("{bytes} zero bytes at position {position} (an untrimmed preallocated tail)"),
        ),
        _ => {}
    }
    check_indexes(c, base, &batches[first_index..])
}

fn check_indexes(c: &mut Checker<'_>, base: i64, batches: &[Located]) -> Result<(), Error> {
    let index_path = LogSegment::index_path(c.dir, base);
    match c.read(&index_path)? {
        None => c.problem(
            index_path.clone(),
            "missing (it would be rebuilt from the .log)",
        ),
        Some(bytes) => {
            if bytes.len() % 8 != 0 {
                c.problem(
                    index_path.clone(),
                    format!("length {} is not a multiple of 8", bytes.len()),
                );
            }
            let mut last = None;
            for e in bytes.chunks_exact(8) {
                let offset =
                    base.wrapping_add(i32::from_be_bytes(e[0..4].try_into().expect("4")) as i64);
                let position = i32::from_be_bytes(e[4..8].try_into().expect("4")) as u64;
                if last.is_some_and(|l| offset <= l) {
                    c.problem(
                        index_path.clone(),
                        format!("entry for offset {offset} does not increase"),
                    );
                }
                last = Some(offset);
                match batches.iter().find(|b| b.1 == position) {
                    Some(b) if b.2 == offset => {}
                    Some(b) => c.problem(
                        index_path.clone(),
                        format!(
                            "offset {offset} at position {position}, but that batch ends at {}",
                            b.2
                        ),
                    ),
                    None => c.problem(
                        index_path.clone(),
                        format!(
                            "offset {offset} points at position {position}, where no batch starts"
                        ),
                    ),
                }
            }
        }
    }
    let time_path = LogSegment::time_index_path(c.dir, base);
    if let Some(bytes) = c.read(&time_path)? {
        if bytes.len() % 12 != 0 {
            c.problem(
                time_path.clone(),
                format!("length {} is not a multiple of 12", bytes.len()),
            );
        }
        let mut last_ts = i64::MIN;
        for e in bytes.chunks_exact(12) {
            let ts = i64::from_be_bytes(e[0..8].try_into().expect("8"));
            let offset =
                base.wrapping_add(i32::from_be_bytes(e[8..12].try_into().expect("4")) as i64);
            if ts <= last_ts {
                c.problem(
                    time_path.clone(),
                    format!("timestamp {ts} does not increase"),
                );
            }
            last_ts = ts;
            if !batches.iter().any(|b| b.2 == offset) {
                c.problem(
                    time_path.clone(),
                    format!("offset {offset} is not the last offset of any batch"),
                );
            }
        }
    } else {
        c.problem(time_path, "missing (it would be rebuilt from the .log)");
    }
    let txn_path = LogSegment::txn_index_path(c.dir, base);
    if let Some(bytes) = c.read(&txn_path)? {
        match klog_log::txn_index::parse_entries(&bytes) {
            Err(e) => c.problem(txn_path.clone(), e),
            Ok(entries) => {
                for e in entries {
                    let last = e.last_offset.get();
                    if !batches
                        .iter()
                        .any(|b| b.2 == last && b.4 == Some(ControlRecordType::Abort))
                    {
                        c.problem(txn_path.clone(), format!("aborted transaction ending at {last}, where there is no ABORT marker"));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Each snapshot must equal a replay from the previous one (the oldest can only be decoded).
fn check_snapshots(c: &mut Checker<'_>, batches: &[Located]) -> Result<(), Error> {
    let offsets = list_snapshots(c.storage, c.dir)?;
    let mut previous: Option<(i64, ProducerStateManager)> = None;
    for o in offsets {
        let entries = match read_snapshot(c.storage, c.dir, o) {
            Ok(e) => e,
            Err(e) => {
                c.problem(snapshot_path(c.dir, o), e.to_string());
                previous = None;
                continue;
            }
        };
        if let Some((from, mut psm)) = previous.take() {
            replay(c, &mut psm, batches, from, o)?;
            let mut want = entries.clone();
            want.sort_by_key(|e| e.producer_id);
            if psm.snapshot() != want {
                c.problem(
                    snapshot_path(c.dir, o),
                    format!("differs from a replay of the log from the snapshot at {from}"),
                );
            }
        }
        let mut psm = ProducerStateManager::new(PsmConfig {
            producer_id_expiration_ms: i64::MAX,
            ..PsmConfig::default()
        });
        psm.load_snapshot(entries, o, 0);
        previous = Some((o, psm));
    }
    Ok(())
}

fn replay(
    c: &mut Checker<'_>,
    psm: &mut ProducerStateManager,
    batches: &[Located],
    from: i64,
    to: i64,
) -> Result<(), Error> {
    let mut current: Option<(i64, Vec<u8>)> = None;
    for &(seg, position, last, _, _) in batches.iter().filter(|b| b.2 >= from && b.3 < to) {
        if current.as_ref().is_none_or(|(s, _)| *s != seg) {
            current = Some((
                seg,
                c.read(&LogSegment::log_path(c.dir, seg))?
                    .unwrap_or_default(),
            ));
        }
        let bytes = &current.as_ref().expect("loaded").1[position as usize..];
        let Some(Ok(AnyBatch::V2(b))) = Batches::new(bytes).next() else {
            continue;
        };
        if let Ok(plan) = psm.plan_append(&[summarize(&b)], AppendOrigin::Replication) {
            psm.apply(plan);
        }
        psm.update_map_end_offset(last.saturating_add(1));
    }
    Ok(())
}

fn check_epochs(c: &mut Checker<'_>, log_end: i64) -> Result<(), Error> {
    let path = c.dir.join("leader-epoch-checkpoint");
    match read_checkpoint(c.storage, &path) {
        Err(e) => c.problem(path, e.to_string()),
        Ok(entries) => {
            let mut last: Option<(i64, i64)> = None;
            for e in entries {
                let parsed: Option<(i64, i64)> = match e.as_slice() {
                    [a, b] => a.parse().ok().zip(b.parse().ok()),
                    _ => None,
                };
                let Some((epoch, start)) = parsed else {
                    c.problem(path.clone(), format!("entry {e:?} is not 'epoch offset'"));
                    continue;
                };
                if last.is_some_and(|(le, ls)| epoch <= le || start < ls) {
                    c.problem(
                        path.clone(),
                        format!("epoch {epoch} at {start} does not follow the entry before"),
                    );
                }
                if start > log_end {
                    c.problem(
                        path.clone(),
                        format!("epoch {epoch} starts at {start}, past the log end {log_end}"),
                    );
                }
                last = Some((epoch, start));
            }
        }
    }
    Ok(())
}
