//! Reads (Kafka's `UnifiedLog.read` and `fetchOffsetByTimestamp`): whole batches from an offset, the
//! committed read bounded by the last stable offset, and the offset for a timestamp.

use crate::segment::{whole_batches, SegmentBytes};
use crate::txn_index::AbortedTxn;
use crate::{Error, KafkaError};

use super::{LogReadInfo, PartitionLog};

impl PartitionLog {
    /// Reads whole batches from `start_offset`, at most `max_bytes` (but one whole batch when
    /// `min_one_batch`), never past `upper_bound` (e.g. the high watermark; the log end when `None`).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use klog_log::{config::LogConfig, io::StdStorage, partition_log::{OpenOptions, PartitionLog}};
    /// # use klog_log::format::{BatchBuilder, Compression};
    /// # let root = std::env::temp_dir().join(format!("klog-doc-{}-{}", "read", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&root);
    /// # let (log, _) = PartitionLog::open(Arc::new(StdStorage), &root.join("orders-0"), LogConfig::default(), OpenOptions::default())?;
    /// # for _ in 0..3 {
    /// #     let mut b = BatchBuilder::new(Compression::None);
    /// #     b.append(1_700_000_000_000, None, Some(b"v"), &[])?;
    /// #     log.append_as_leader(&mut b.build()?, 0)?;
    /// # }
    /// log.update_high_watermark(2); // replicas have offsets 0 and 1
    /// let read = log.read(0, 1 << 20, Some(log.high_watermark()), true)?;
    /// assert_eq!(read.next_offset, 2); // whole batches, never past the bound
    /// let rest = log.read(read.next_offset, 1 << 20, None, true)?; // `None`: up to the log end
    /// assert_eq!(rest.next_offset, 3);
    /// # log.close()?;
    /// # std::fs::remove_dir_all(&root).unwrap();
    /// # Ok::<(), klog_log::Error>(())
    /// ```
    pub fn read(
        &self,
        start_offset: i64,
        max_bytes: usize,
        upper_bound: Option<i64>,
        min_one_batch: bool,
    ) -> Result<LogReadInfo, Error> {
        let leo = self.log_end_offset();
        let log_start = self.log_start_offset();
        let info = |records, next_offset| LogReadInfo {
            records,
            next_offset,
            high_watermark: self.high_watermark(),
            log_start_offset: log_start,
            log_end_offset: leo,
        };
        if start_offset < log_start || start_offset > leo {
            return Err(Error::rejected(
                KafkaError::OffsetOutOfRange,
                format!("offset {start_offset} is outside [{log_start}, {leo}]"),
            ));
        }
        let bound = upper_bound.unwrap_or(leo).min(leo);
        if start_offset >= bound {
            return Ok(info(SegmentBytes::Owned(Vec::new()), start_offset));
        }
        let mut next = self.segment_floor(start_offset);
        while let Some(seg) = next.take() {
            let Some((found, map)) = seg.translate_for_read(start_offset)? else {
                next = self.segment_after(seg.base_offset());
                continue;
            };
            let start = found.position as u64;
            // The bound needs a lookup only when it falls inside this segment: at the log end or at a
            // later segment's base, every batch here is below it.
            let bound_beyond = bound >= leo
                || self
                    .next_base_offset(seg.base_offset())
                    .is_some_and(|n| n <= bound);
            let max_position = match bound_beyond {
                true => seg.size(),
                false => match seg.translate_offset(bound, 0)? {
                    Some(p) if p.last_offset >= bound => p.position as u64,
                    _ => seg.size(),
                },
            };
            if start >= max_position {
                return Ok(info(SegmentBytes::Owned(Vec::new()), start_offset));
            }
            // `max_bytes` is the caller's (a fetch's, an argument): any usize.
            let mut limit = start.saturating_add(max_bytes as u64).min(max_position);
            if min_one_batch && limit < start + found.size as u64 {
                limit = (start + found.size as u64).min(max_position);
            }
            // The map the lookup read the headers from, when it covers the range (a sealed segment's).
            let bytes = match map {
                Some(map) if limit as usize <= map.len() => SegmentBytes::Mapped {
                    map,
                    start: start as usize,
                    end: limit as usize,
                },
                _ => seg.slice(start, limit)?,
            };
            let (whole, next) = whole_batches(bytes.as_slice(), start_offset);
            let records = match bytes {
                SegmentBytes::Mapped { map, start, .. } => SegmentBytes::Mapped {
                    map,
                    start,
                    end: start + whole,
                },
                SegmentBytes::Owned(mut v) => {
                    v.truncate(whole);
                    SegmentBytes::Owned(v)
                }
            };
            return Ok(info(records, next));
        }
        Ok(info(SegmentBytes::Owned(Vec::new()), start_offset))
    }

    /// Lookups of the open segments that found an index entry pointing at the wrong bytes and walked the
    /// `.log` from an earlier position instead (each also traced; see `segment/lookup.rs`).
    pub fn index_fallbacks(&self) -> u64 {
        self.segment_list()
            .iter()
            .map(|s| s.index_fallbacks())
            .sum()
    }

    /// The first offset whose record timestamp is >= `timestamp`, with that timestamp.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>, Error> {
        let start = self.log_start_offset();
        for seg in self.segment_list() {
            if seg.base_offset() < start && seg.max_timestamp()? < timestamp {
                continue;
            }
            if seg.max_timestamp()? >= timestamp {
                if let Some(found) = seg.find_offset_by_timestamp(timestamp, start)? {
                    return Ok(Some(found));
                }
            }
        }
        Ok(None)
    }

    /// A read_committed fetch: bounded by the last stable offset, with the aborted transactions that
    /// overlap the returned range (as a Fetch response carries them).
    pub fn read_committed(
        &self,
        start_offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<(LogReadInfo, Vec<AbortedTxn>), Error> {
        let lso = self.last_stable_offset();
        let info = self.read(start_offset, max_bytes, Some(lso), min_one_batch)?;
        let upper = info.next_offset;
        let mut aborted = Vec::new();
        if upper > start_offset {
            for seg in self.segments_from(start_offset) {
                let (found, complete) = seg.collect_aborted(start_offset, upper);
                aborted.extend(found);
                if complete {
                    break;
                }
            }
        }
        Ok((info, aborted))
    }
}
