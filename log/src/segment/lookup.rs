//! A segment's index lookups, trusting no entry (ARCHITECTURE.md: indexes are derived, "never trusted").
//!
//! An `.index` entry is a hint: before a lookup starts walking at its position, the batch header there must
//! parse, start inside the segment at or below the entry's offset, and end within the published size. A
//! `.timeindex` entry must name a batch whose max timestamp is the entry's. An entry that fails is passed
//! over for the one before it, then the segment's start, so a damaged index costs a longer walk, never a
//! wrong answer. Every fallback is counted ([`LogSegment::index_fallbacks`]) and the first of a segment is
//! a warning naming the file; the open's sanity check ([`LogSegment::sanity_check`]) finds the damage at the
//! ends of the index and has the segment's indexes rebuilt.
//!
//! Why an entry whose batch starts below its offset (not exactly at it) may be used: every batch before
//! that position ends below the batch's base offset, so it ends below the entry's offset, so below any
//! target the entry is looked up for. Kafka before 4.0 wrote such entries for a follower's batch set
//! (the set's last offset at its first batch's position).

use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{BatchPosition, LogSegment};
use crate::format::RECORD_BATCH_OVERHEAD;
use crate::format::{
    BatchStream, Batches, HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MIN_RECORD_OVERHEAD,
};
use crate::Error;

/// Entries before a bad one tried before the walk starts from the segment's start.
const EARLIER_ENTRIES_TRIED: usize = 4;

/// Bytes read at a time by `find_offset_by_timestamp`; doubled for a batch larger than this.
const TIMESTAMP_SEARCH_CHUNK: u64 = 64 << 10;

/// The map of a sealed segment a lookup read its headers from; None for the active one or before a
/// read maps it.
type SealedMap = Option<Arc<memmap2::Mmap>>;

/// A batch's header as a lookup reads it.
#[derive(Debug, Clone, Copy)]
pub(super) struct HeaderAt {
    pub(super) base_offset: i64,
    pub(super) last_offset: i64,
    pub(super) size: u32,
    /// A v2 batch's max timestamp; None for a legacy entry.
    pub(super) max_timestamp: Option<i64>,
}

/// The header at the start of `bytes` (see [`LogSegment::header_at`]); None where no batch can start.
pub(super) fn parse_header(bytes: &[u8]) -> Option<HeaderAt> {
    if bytes.len() < HEADER_SIZE_UP_TO_MAGIC {
        return None;
    }
    let be64 = |at: usize| i64::from_be_bytes(bytes[at..at + 8].try_into().expect("8"));
    let be32 = |at: usize| i32::from_be_bytes(bytes[at..at + 4].try_into().expect("4"));
    let (base_offset, len) = (be64(0), be32(8));
    let (last_offset, max_timestamp) = match bytes[16] {
        // Wrapping, as Java's: a corrupt delta near the limits must not panic.
        2 if bytes.len() >= 43 && len >= 49 => {
            (base_offset.wrapping_add(be32(23) as i64), Some(be64(35)))
        }
        0 | 1 if len >= MIN_RECORD_OVERHEAD => (base_offset, None),
        _ => return None,
    };
    Some(HeaderAt {
        base_offset,
        last_offset,
        size: LOG_OVERHEAD as u32 + len as u32,
        max_timestamp,
    })
}

/// The byte length of the whole batches at the start of `bytes` and the offset after the last of them
/// (`start_offset` when none is whole), from the headers alone: `bytes` are published bytes of a
/// segment (whole batches, checked when appended or recovered) cut anywhere by a read's `max_bytes`.
pub fn whole_batches(bytes: &[u8], start_offset: i64) -> (usize, i64) {
    let mut len = 0;
    let mut next = start_offset;
    while let Some(h) = bytes.get(len..).and_then(parse_header) {
        let end = len + h.size as usize;
        if end > bytes.len() {
            break; // the batch `max_bytes` cut
        }
        len = end;
        next = h.last_offset.saturating_add(1);
    }
    (len, next)
}

/// Which index a fallback passed over.
#[derive(Debug, Clone, Copy)]
enum IndexKind {
    Offset,
    Time,
}

impl LogSegment {
    /// How many lookups of this segment found an index entry pointing at the wrong bytes and walked from
    /// an earlier place instead, since it was opened.
    pub fn index_fallbacks(&self) -> u64 {
        self.index_fallbacks.load(Ordering::Relaxed)
    }

    fn count_fallback(&self, kind: IndexKind, why: &str) {
        let path = match kind {
            IndexKind::Offset => Self::index_path(&self.dir, self.base_offset),
            IndexKind::Time => Self::time_index_path(&self.dir, self.base_offset),
        };
        if self.index_fallbacks.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!(index = %path.display(), %why, "index entry not trusted: walking the .log from an earlier position (reported once per segment; recovery rebuilds the index)");
        } else {
            tracing::debug!(index = %path.display(), %why, "index entry not trusted");
        }
    }

    /// The header of the batch at `position`; None past the data or where no batch can be. The magic byte
    /// (at 16 in every format) decides the layout: a v2 batch's last offset is `base + last_offset_delta`;
    /// a legacy (v0/v1) entry's is its own offset (a compressed wrapper carries its last inner offset), and
    /// it may be shorter than a v2 header. The header comes from `map` (a sealed segment's) when given,
    /// else from one `pread` into the stack.
    pub(super) fn header_at(
        &self,
        position: u64,
        map: Option<&memmap2::Mmap>,
    ) -> Result<Option<HeaderAt>, Error> {
        let end = position
            .saturating_add(RECORD_BATCH_OVERHEAD as u64)
            .min(self.size());
        let want = end.saturating_sub(position) as usize;
        let mut header = [0u8; RECORD_BATCH_OVERHEAD];
        let bytes = match map {
            Some(map) if end as usize <= map.len() => &map[position as usize..end as usize],
            _ => {
                let n = self
                    .log_file()
                    .read_at(&mut header[..want], position)
                    .map_err(|e| Error::io(&self.log_path_of(), e))?;
                &header[..n]
            }
        };
        Ok(parse_header(bytes))
    }

    /// Why the batch at `position` cannot be the one an `.index` entry for `offset` points at; None when it
    /// can (see the module's note).
    /// The header read there is handed back with the verdict, so the walk that follows reads it once.
    fn offset_entry_problem(
        &self,
        offset: i64,
        position: u64,
        map: Option<&memmap2::Mmap>,
    ) -> Result<Result<HeaderAt, String>, Error> {
        let size = self.size();
        if position >= size {
            return Ok(Err(format!(
                "entry for offset {offset} points at position {position}, past the .log's {size} bytes"
            )));
        }
        let Some(h) = self.header_at(position, map)? else {
            return Ok(Err(format!(
                "entry for offset {offset} points at position {position}, where no batch header parses"
            )));
        };
        let problem = if h.base_offset < self.base_offset
            || h.base_offset > offset
            || h.last_offset < h.base_offset
        {
            format!(
                "entry for offset {offset} points at position {position}, where the batch holds offsets {}..={}",
                h.base_offset, h.last_offset
            )
        } else if position + h.size as u64 > size {
            format!(
                "entry for offset {offset} points at position {position}, where a batch of {} bytes runs past the .log's {size} bytes",
                h.size
            )
        } else {
            return Ok(Ok(h));
        };
        Ok(Err(problem))
    }

    /// Kafka's `offsetIndex.lookup(target).position` (checked as [`LogSegment::translate_offset`]'s start
    /// is): where a walk for `target` starts, at or before its batch (the cleaner's map build reads the
    /// batches from there, as Kafka's `buildOffsetMapForSegment` does).
    pub fn index_lookup_position(&self, target: i64) -> Result<u64, Error> {
        Ok(self.indexed_position(target, None)?.0)
    }

    /// Kafka's `offsetIndex.lookup(target).position`, checked: the position of the largest entry at or
    /// below `target` whose batch checks out (with its header, when one was read), trying a few entries
    /// before a bad one, then 0.
    pub(super) fn indexed_position(
        &self,
        target: i64,
        map: Option<&memmap2::Mmap>,
    ) -> Result<(u64, Option<HeaderAt>), Error> {
        let entry = self.state().offset_index.entry_at_or_below(target, 0)?;
        self.checked_position(target, entry, map)
    }

    /// [`LogSegment::indexed_position`] from `entry`, the largest entry at or below `target` (already
    /// found): the entries before it are searched for only when it fails its check.
    fn checked_position(
        &self,
        target: i64,
        mut entry: Option<(i64, u32)>,
        map: Option<&memmap2::Mmap>,
    ) -> Result<(u64, Option<HeaderAt>), Error> {
        let mut first_problem: Option<String> = None;
        let mut found = (0, None);
        for back in 1..=EARLIER_ENTRIES_TRIED + 1 {
            let Some((offset, position)) = entry else {
                break; // the segment's start
            };
            match self.offset_entry_problem(offset, position as u64, map)? {
                Ok(h) => {
                    found = (position as u64, Some(h));
                    break;
                }
                Err(why) => {
                    first_problem.get_or_insert(why);
                }
            }
            entry = match back <= EARLIER_ENTRIES_TRIED {
                true => self.state().offset_index.entry_at_or_below(target, back)?,
                false => None,
            };
        }
        if let Some(why) = first_problem {
            self.count_fallback(IndexKind::Offset, &why);
        }
        Ok(found)
    }

    /// The header at `position` when it is the batch holding `offset` (a batch of this segment, whole
    /// within the published size): the guess of a lookup that tries the index entry after `offset`.
    fn batch_holding(
        &self,
        offset: i64,
        position: u64,
        map: Option<&memmap2::Mmap>,
    ) -> Result<Option<HeaderAt>, Error> {
        let Some(h) = self.header_at(position, map)? else {
            return Ok(None);
        };
        let holds = (self.base_offset..=offset).contains(&h.base_offset)
            && h.last_offset >= offset
            && position + h.size as u64 <= self.size();
        Ok(holds.then_some(h))
    }

    /// Whether lookups of this segment should try the index entry after the offset first, and, after a
    /// lookup that could have, whether that entry's batch was the answer (a 2-bit saturating counter).
    fn next_entry_guess(&self, learned: Option<bool>) -> bool {
        let c = self.next_entry_hits.load(Ordering::Relaxed);
        match learned {
            None => c >= 2,
            Some(hit) => {
                let c = if hit {
                    (c + 1).min(3)
                } else {
                    c.saturating_sub(1)
                };
                self.next_entry_hits.store(c, Ordering::Relaxed);
                c >= 2
            }
        }
    }

    /// The first batch at or after `start_position` (walked from the checked index entry) whose last
    /// offset is >= `offset`, with its position.
    fn translate_header(
        &self,
        offset: i64,
        start_position: u64,
    ) -> Result<Option<(u64, HeaderAt)>, Error> {
        Ok(self.translate_mapped(offset, start_position)?.0)
    }

    /// [`LogSegment::translate_header`], with the map of the sealed segment it read the headers from.
    ///
    /// Kafka's index names each indexed batch by its LAST offset, so for an offset inside a batch the
    /// entry at or below it is the batch before: Kafka's walk reads that batch's header (a cache miss
    /// at another page of the segment) to step to the batch holding the offset. Where every batch is
    /// indexed (batches larger than `index.interval.bytes`, Java's default of 16 KiB against 4 KiB),
    /// the batch holding the offset is the NEXT entry's: the lookup reads that header first and, when
    /// it holds the offset, answers with the one header the read copies anyway. Whether the guess pays
    /// is learned per segment from every lookup (the walk's answer says what the guess would have
    /// been), so a segment of small batches, where entries skip batches, stops guessing. The guess is
    /// checked as an entry is (a batch of this segment holding the offset, whole); it never changes an
    /// answer: the batches hold increasing offsets, so a batch holding the offset is the first batch
    /// whose last offset reaches it.
    pub(super) fn translate_mapped(
        &self,
        offset: i64,
        start_position: u64,
    ) -> Result<(Option<(u64, HeaderAt)>, SealedMap), Error> {
        let (map, [below, above]) = {
            let mut state = self.state();
            // `make_active` drops the map, but a map taken just before stays valid: it is never shrunk.
            let map = (state.mapped.clone()).filter(|_| !self.active.load(Ordering::Acquire));
            (map, state.offset_index.entries_around(offset)?)
        };
        // An entry AT the offset names the batch holding it: the walk below reads that one header.
        let next_entry = above
            .filter(|_| below.is_none_or(|(o, _)| o < offset))
            .map(|(_, position)| position as u64)
            .filter(|p| *p >= start_position);
        if let Some(p) = next_entry.filter(|_| self.next_entry_guess(None)) {
            if let Some(h) = self.batch_holding(offset, p, map.as_deref())? {
                self.next_entry_guess(Some(true));
                return Ok((Some((p, h)), map));
            }
        }
        let found = self.walk_from_index(offset, start_position, below, map.as_deref())?;
        if let Some(p) = next_entry {
            self.next_entry_guess(Some(found.is_some_and(|(at, _)| at == p)));
        }
        Ok((found, map))
    }

    /// Kafka's `searchForOffsetFromPosition` from the checked entry `below` (or `start_position`, when
    /// later): the first batch whose last offset is >= `offset`.
    fn walk_from_index(
        &self,
        offset: i64,
        start_position: u64,
        below: Option<(i64, u32)>,
        map: Option<&memmap2::Mmap>,
    ) -> Result<Option<(u64, HeaderAt)>, Error> {
        let (indexed, mut checked) = self.checked_position(offset, below, map)?;
        let mut position = indexed.max(start_position);
        if position != indexed {
            checked = None;
        }
        let size = self.size();
        while position < size {
            let header = match checked.take() {
                Some(h) => Some(h),
                None => self.header_at(position, map)?,
            };
            let Some(h) = header else {
                return Ok(None);
            };
            if h.last_offset >= offset {
                return Ok(Some((position, h)));
            }
            position += h.size as u64;
        }
        Ok(None)
    }

    /// Kafka's `translateOffset`: the first batch whose last offset is >= `offset`, scanning from the index.
    /// A sealed segment already mapped (by a read) is scanned in its map; nothing is mapped here, so a
    /// lookup alone (truncation, the producer-state replay) never makes a later truncation copy the file.
    pub fn translate_offset(
        &self,
        offset: i64,
        start_position: u64,
    ) -> Result<Option<BatchPosition>, Error> {
        Ok(self
            .translate_header(offset, start_position)?
            .map(|(position, h)| BatchPosition {
                last_offset: h.last_offset,
                position: position as u32,
                size: h.size,
            }))
    }

    /// [`LogSegment::translate_offset`] from the segment's start, with the map of the sealed segment the
    /// headers were read from (None before a read maps it): a read slices the batches from that map
    /// instead of asking for it again.
    pub(crate) fn translate_for_read(
        &self,
        offset: i64,
    ) -> Result<Option<(BatchPosition, SealedMap)>, Error> {
        let (found, map) = self.translate_mapped(offset, 0)?;
        Ok(found.map(|(position, h)| {
            let at = BatchPosition {
                last_offset: h.last_offset,
                position: position as u32,
                size: h.size,
            };
            (at, map)
        }))
    }

    /// Kafka's `timeIndex.lookup(ts)`, checked: the entry's offset must lie in a batch of this segment
    /// whose max timestamp is the entry's (what an entry records); else `(-1, base)`, a walk from the start.
    /// With the position of that batch, when the check found it.
    fn time_lookup(&self, ts: i64) -> Result<(i64, i64, Option<u64>), Error> {
        let (entry_ts, offset) = self.state().time_index.lookup(ts)?;
        if entry_ts < 0 && offset == self.base_offset {
            return Ok((entry_ts, offset, None));
        }
        let found = self.translate_header(offset, 0)?;
        let fits = found.is_some_and(|(_, h)| {
            h.base_offset <= offset && h.max_timestamp.is_none_or(|max| max == entry_ts)
        });
        if let Some((position, _)) = found.filter(|_| fits) {
            return Ok((entry_ts, offset, Some(position)));
        }
        let batch = match found {
            Some((position, h)) => format!(
                "the batch at position {position} holds offsets {}..={} with max timestamp {}",
                h.base_offset,
                h.last_offset,
                h.max_timestamp
                    .map_or_else(|| "unknown".to_owned(), |ts| ts.to_string())
            ),
            None => "no batch of the segment holds it".to_owned(),
        };
        self.count_fallback(
            IndexKind::Time,
            &format!("entry ({entry_ts}, offset {offset}): {batch}"),
        );
        Ok((-1, self.base_offset, None))
    }

    /// Kafka's `readNextOffset`: the offset after the last batch, walking from the last (checked) index
    /// entry (the base offset when the segment is empty), and the bytes walked.
    pub fn read_next_offset(&self) -> Result<(i64, u64), Error> {
        let (position, _) = self.indexed_position(i64::MAX, None)?;
        let mut next = self.base_offset;
        let mut walked = 0u64;
        let mut stream = BatchStream::default().without_crc();
        self.scan::<Error>(&mut stream, position, &mut |b| {
            let b = b?;
            // A batch ending at i64::MAX leaves no offset for the log end: klog never appends one.
            next = b
                .last_offset()
                .checked_add(1)
                .ok_or_else(|| Error::CorruptBatch {
                    position: b.position(),
                    reason: crate::Corruption::OffsetOverflow {
                        segment_base: self.base_offset,
                        first: b.base_offset(),
                        last: b.last_offset(),
                    },
                })?;
            walked += b.size_in_bytes() as u64;
            Ok(ControlFlow::Continue(()))
        })?;
        Ok((next, walked))
    }

    /// Kafka's `findOffsetByTimestamp`: the first record with timestamp >= `ts` and offset >= `starting`.
    pub fn find_offset_by_timestamp(
        &self,
        ts: i64,
        starting_offset: i64,
    ) -> Result<Option<(i64, i64)>, Error> {
        // Every batch before the one holding the time entry's offset has a max timestamp below the
        // entry's (entries record a running max, at the earliest batch holding it): the walk may start
        // at that batch, which the entry's check found, instead of a second index lookup before it.
        let (_, indexed_offset, at) = self.time_lookup(ts)?;
        let position = match at.filter(|_| indexed_offset >= starting_offset) {
            Some(position) => position,
            None => {
                let target = indexed_offset.max(starting_offset);
                self.indexed_position(target, None)?.0
            }
        };
        // Walk forward from the indexed position a chunk at a time (the answer is usually a few batches
        // on: the time index has an entry every `index.interval.bytes`), never the whole segment.
        let end = self.size();
        let mut position = position;
        let mut chunk = TIMESTAMP_SEARCH_CHUNK;
        let mut scratch = Vec::new();
        while position < end {
            let bytes = self.slice(position, position.saturating_add(chunk).min(end))?;
            let mut batches = Batches::at(bytes.as_slice(), position).without_crc();
            for b in &mut batches {
                let crate::format::AnyBatch::V2(b) = b? else {
                    continue;
                };
                if b.max_timestamp() < ts {
                    continue;
                }
                for r in b.records(&mut scratch)? {
                    let r = r?;
                    if r.timestamp >= ts && r.offset >= starting_offset {
                        return Ok(Some((r.timestamp, r.offset)));
                    }
                }
            }
            // The iterator stops at the first batch the chunk cuts (a `Tail`, not an error).
            if batches.position() > position {
                position = batches.position();
            } else if position + chunk >= end {
                break; // a partial batch at the segment's end
            } else {
                chunk = chunk.saturating_mul(2); // one batch larger than the chunk
            }
        }
        Ok(None)
    }

    /// After truncation the time index may miss the max of batches after its last entry: walk them in a
    /// bounded window (a damaged index may send the walk back to the segment's start).
    pub(super) fn rescan_max_timestamp_after_index(&self) -> Result<(), Error> {
        let (_, offset) = self.state().time_index.last_entry()?;
        let (start, _) = self.indexed_position(offset, None)?;
        let mut best = self.state().max_timestamp_so_far.expect("loaded");
        let mut stream = BatchStream::default().without_crc();
        self.scan::<Error>(&mut stream, start, &mut |b| {
            if let Ok(crate::format::AnyBatch::V2(b)) = b {
                if b.max_timestamp() > best.0 {
                    best = (b.max_timestamp(), b.last_offset());
                }
            }
            Ok(ControlFlow::Continue(()))
        })?;
        self.state().max_timestamp_so_far = Some(best);
        Ok(())
    }

    /// Checks the indexes against Kafka's sanity rules, made stricter: entries increase, and the first and
    /// last `.index` entries and the last `.timeindex` entry point at the batches they name (the checks of
    /// a lookup). A failure is `CorruptIndex`: the open rebuilds the indexes from the `.log`.
    pub fn sanity_check(&self) -> Result<(), Error> {
        let corrupt = |path, reason| Error::CorruptIndex { path, reason };
        let index_path = Self::index_path(&self.dir, self.base_offset);
        let (first, last) = {
            let mut state = self.state();
            state.offset_index.sanity_check()?;
            state.time_index.sanity_check()?;
            state.txn_index.sanity_check(self.base_offset)?;
            let last = state.offset_index.last_offset()?;
            if last < self.base_offset {
                let reason = format!("last offset {last} is below the base offset");
                return Err(corrupt(index_path, reason));
            }
            (
                state.offset_index.first_entry()?,
                state.offset_index.entry_at_or_below(i64::MAX, 0)?,
            )
        };
        for (offset, position) in first.into_iter().chain(last) {
            if let Err(why) = self.offset_entry_problem(offset, position as u64, None)? {
                return Err(corrupt(index_path, why));
            }
        }
        let (entry_ts, offset) = self.state().time_index.last_entry()?;
        if entry_ts >= 0 || offset != self.base_offset {
            let found = self.translate_header(offset, 0)?;
            let fits = found.is_some_and(|(_, h)| {
                h.base_offset <= offset && h.max_timestamp.is_none_or(|max| max == entry_ts)
            });
            if !fits {
                let reason = format!(
                    "last entry ({entry_ts}, offset {offset}) names no batch of the segment with that max timestamp"
                );
                return Err(corrupt(
                    Self::time_index_path(&self.dir, self.base_offset),
                    reason,
                ));
            }
        }
        Ok(())
    }
}
