//! A segment's recovery (Kafka's `LogSegment.recover`): the pass that checks every batch of the `.log`,
//! rebuilds the offset and time indexes and collects the leader epochs, then cuts an invalid tail; the
//! `.log` read in 1 MiB chunks, by a helper thread ahead of the check when a core is free
//! (`read_ahead.rs`).

use std::sync::atomic::Ordering;

use crate::error::IoContext;
use crate::format::{Batches, Tail, LOG_OVERHEAD, MIN_RECORD_OVERHEAD};
use crate::{Corruption, Error};

use super::read_ahead::{Pass, ReadAhead, CHUNK, HEADROOM};
use super::{LogSegment, SegmentRecovery, State};

/// What a recovery pass over one segment has found so far.
struct RecoveryPass {
    /// Bytes of the whole valid batches from the segment's start.
    valid: u64,
    epochs: Vec<(i32, i64)>,
    next_offset: i64,
    corruption: Option<Corruption>,
}

impl RecoveryPass {
    fn new(base_offset: i64) -> Self {
        RecoveryPass {
            valid: 0,
            epochs: Vec::new(),
            next_offset: base_offset,
            corruption: None,
        }
    }

    /// Counts a checked batch.
    fn take(&mut self, batch: &crate::format::AnyBatch<'_>) {
        if let crate::format::AnyBatch::V2(b) = batch {
            let epoch = b.partition_leader_epoch();
            if epoch >= 0 && self.epochs.last().is_none_or(|&(e, _)| e != epoch) {
                self.epochs.push((epoch, b.base_offset()));
            }
        }
        self.next_offset = batch.last_offset() + 1;
        self.valid += batch.size_in_bytes() as u64;
    }
}

/// `tail` with its bytes counted to the end of the file: the iterator counts to the end of the bytes it
/// was given, which for a corrupt batch depends on how much of the file the pass had read or mapped.
fn to_file_end(tail: Tail, size: u64) -> Tail {
    match tail {
        Tail::Clean => Tail::Clean,
        Tail::Partial { position, .. } => Tail::Partial {
            position,
            bytes: size - position,
        },
        Tail::ZeroFilled { position, .. } => Tail::ZeroFilled {
            position,
            bytes: size - position,
        },
        Tail::Corrupt { position, .. } => Tail::Corrupt {
            position,
            bytes: size - position,
        },
    }
}

/// The read buffers of recovery passes, lent to each segment's pass in turn: a log recovering many
/// segments allocates and faults them in once per open, not once per segment.
#[derive(Debug, Default)]
pub struct RecoverBuffers(Vec<Vec<u8>>);

/// The tail of the segment when the unchecked bytes `work[from..]` (the file's from `position`) already
/// decide it, so the pass need not read on: a batch whose length runs past the file's end is a partial
/// tail whatever follows. A run of zeros longer than the headroom is kept to its first `HEADROOM` bytes
/// instead: from a position whose first 12 bytes are zero the iterator ends there whatever follows
/// (zero-filled to the end, or a batch length too small), so later zeros change nothing but the memory
/// the carry would hold.
fn settled(work: &mut Vec<u8>, from: usize, position: u64, size: u64) -> Option<Tail> {
    let rest = &work[from..];
    let length = rest.get(8..LOG_OVERHEAD)?;
    let length = i32::from_be_bytes(length.try_into().ok()?);
    if length >= MIN_RECORD_OVERHEAD && position + LOG_OVERHEAD as u64 + length as u64 > size {
        return Some(Tail::Partial {
            position,
            bytes: size - position,
        });
    }
    if rest.len() > HEADROOM && rest.iter().all(|&b| b == 0) {
        work.truncate(from + HEADROOM);
    }
    None
}

impl LogSegment {
    /// Kafka's `recover`: rebuilds the offset and time indexes (and returns the epochs seen) from the `.log`,
    /// stopping at the first invalid batch and truncating the file there.
    pub fn recover(&self) -> Result<SegmentRecovery, Error> {
        self.recover_with(&mut |_| {})
    }

    /// [`LogSegment::recover`], handing every valid batch to `on_batch` as the pass checks it, so the
    /// caller can derive more state (the producer state) without reading the segment again.
    pub fn recover_with(
        &self,
        on_batch: &mut dyn FnMut(&crate::format::AnyBatch<'_>),
    ) -> Result<SegmentRecovery, Error> {
        self.recover_through(&mut RecoverBuffers::default(), on_batch, &mut || Ok(()))
    }

    /// [`LogSegment::recover_with`], reading through `buffers`: a caller recovering many segments passes
    /// the same buffers to each, so they are allocated, zeroed and faulted in once per open, not per
    /// segment.
    /// `before_cut` runs when the pass found bytes to cut, before the cut is made (and made durable): a
    /// log deletes its later segments there, so a crash never leaves the cut without the evidence for
    /// deleting them.
    pub fn recover_through(
        &self,
        buffers: &mut RecoverBuffers,
        on_batch: &mut dyn FnMut(&crate::format::AnyBatch<'_>),
        before_cut: &mut dyn FnMut() -> Result<(), Error>,
    ) -> Result<SegmentRecovery, Error> {
        let size = self.log_file().len().at(&self.log_path_of())?;
        self.size.store(size, Ordering::Release);
        let mut state = self.state();
        // Rebuilt over the old files, synced by the next flush (`IndexFile::rebuild` says why that is
        // safe): an unclean open that cuts nothing then syncs nothing.
        state.offset_index.file().rebuild()?;
        state.time_index.file().rebuild()?;
        state.txn_index.truncate_to(i64::MIN)?;
        state.max_timestamp_so_far = Some((-1, -1));
        // The pass counts from 0 like Kafka's local `lastIndexEntry`; the segment's own counter is left as
        // it was (Kafka's `recover` never touches `bytesSinceLastIndexEntry`: after a restart the next
        // entry is placed as if the segment had just been created).
        let bytes_since_last_index_entry =
            std::mem::replace(&mut state.bytes_since_last_index_entry, 0);
        let mut pass = RecoveryPass::new(self.base_offset);
        let (_counted, core_free) = Pass::begin();
        let spawn = core_free && size > CHUNK as u64;
        #[cfg(test)]
        let spawn = tests_hook::HELPER.with(|h| h.get()).unwrap_or(spawn);
        let tail = self.recover_read(buffers, size, spawn, &mut state, &mut pass, on_batch)?;
        let tail = to_file_end(tail, size);
        drop(state);
        if pass.valid < size {
            before_cut()?;
        }
        self.cut(pass.valid, size)?;
        let mut state = self.state();
        let (ts, off) = state.max_timestamp_so_far.expect("set above");
        state.time_index.maybe_append(ts, off, true)?;
        state.bytes_since_last_index_entry = bytes_since_last_index_entry;
        Ok(SegmentRecovery {
            valid_bytes: pass.valid,
            truncated_bytes: size - pass.valid,
            tail,
            corruption: pass.corruption,
            epochs: pass.epochs,
            next_offset: pass.next_offset,
        })
    }

    /// The recovery pass over the chunks of the `.log` (`read_ahead.rs`), read by a helper thread ahead
    /// of this one when `spawn`. A batch cut by a chunk's end stays unchecked (the iterator ends with a
    /// `Tail`, not an error) and is checked with the next chunk: its bytes are copied into the headroom
    /// in front of that chunk, or (a batch larger than the headroom) the chunk is added to a carry buffer
    /// that holds it. Each check sees the file's bytes from the last whole batch to the end of the chunks
    /// read, as a pass reading the whole file at once would, so the cut does not depend on the helper or
    /// on where the chunks end. The last chunk decides the segment's tail.
    fn recover_read(
        &self,
        buffers: &mut RecoverBuffers,
        size: u64,
        spawn: bool,
        state: &mut State,
        pass: &mut RecoveryPass,
        on_batch: &mut dyn FnMut(&crate::format::AnyBatch<'_>),
    ) -> Result<Tail, Error> {
        let file = self.log_file();
        std::thread::scope(|scope| {
            let mut ahead = ReadAhead::start(scope, &*file, size, spawn, &mut buffers.0);
            #[cfg(test)]
            tests_hook::HELPED.with(|h| h.set(h.get() || ahead.has_helper()));
            let (tail, work) = self.check_chunks(&mut ahead, size, state, pass, on_batch)?;
            ahead.recycle(work);
            ahead.finish(&mut buffers.0);
            Ok(tail)
        })
    }

    /// [`recover_read`](Self::recover_read)'s loop; returns the tail and the last buffer checked.
    fn check_chunks(
        &self,
        ahead: &mut ReadAhead<'_>,
        size: u64,
        state: &mut State,
        pass: &mut RecoveryPass,
        on_batch: &mut dyn FnMut(&crate::format::AnyBatch<'_>),
    ) -> Result<(Tail, Vec<u8>), Error> {
        // `work[from..]`: the file's bytes from `position` to the end of the chunks read (a run of zeros
        // in it kept to its first `HEADROOM` bytes, `settled`).
        let (mut work, mut from, mut position) = (Vec::new(), 0usize, 0u64);
        loop {
            let chunk = ahead
                .next()
                .map_err(|e| Error::io(&self.log_path_of(), e))?;
            let left = work.len() - from;
            if left <= HEADROOM {
                let mut buf = chunk.buf;
                buf[HEADROOM - left..HEADROOM].copy_from_slice(&work[from..]);
                let last = std::mem::replace(&mut work, buf);
                if last.capacity() > 0 {
                    ahead.recycle(last);
                }
                from = HEADROOM - left;
            } else {
                work.drain(..from);
                from = 0;
                work.extend_from_slice(&chunk.buf[HEADROOM..HEADROOM + chunk.len]);
                ahead.recycle(chunk.buf);
            }
            let at_end = chunk.len == 0 || ahead.position() >= size;
            let (next, tail) =
                self.check_batches(state, pass, &work[from..], position, on_batch)?;
            if pass.corruption.is_some() || at_end {
                return Ok((tail.unwrap_or(Tail::Clean), work));
            }
            from += (next - position) as usize;
            position = next;
            if let Some(tail) = settled(&mut work, from, position, size) {
                return Ok((tail, work));
            }
        }
    }

    /// Checks the batches of `bytes` (the file's bytes from `start`) into `pass`, indexing each and handing
    /// it to `on_batch`, until the bytes end or a check fails (`pass.corruption`). Returns the position
    /// after the last whole batch taken and how the bytes ended.
    fn check_batches(
        &self,
        state: &mut State,
        pass: &mut RecoveryPass,
        bytes: &[u8],
        start: u64,
        on_batch: &mut dyn FnMut(&crate::format::AnyBatch<'_>),
    ) -> Result<(u64, Option<Tail>), Error> {
        let mut batches = Batches::at(bytes, start);
        for batch in batches.by_ref() {
            let batch = match batch {
                Ok(b) => b,
                Err(Error::CorruptBatch { reason, .. }) => {
                    pass.corruption = Some(reason);
                    break;
                }
                Err(e) => return Err(e),
            };
            if let Some(c) = self.offset_overflow(&batch) {
                pass.corruption = Some(c);
                break;
            }
            self.index_batch(state, &batch)?;
            on_batch(&batch);
            pass.take(&batch);
        }
        Ok((batches.position(), batches.tail()))
    }

    /// The batch's offsets as a check: they must lie in this segment (relative offsets fit an `i32`) and
    /// leave an offset for the log end.
    fn offset_overflow(&self, batch: &crate::format::AnyBatch<'_>) -> Option<Corruption> {
        let (first, last) = (batch.base_offset(), batch.last_offset());
        // `last` may have wrapped (a corrupt delta) or be i64::MAX (no offset left for the log end).
        let relative = last.checked_sub(self.base_offset);
        (relative.is_none_or(|r| r > i32::MAX as i64)
            || first < self.base_offset
            || last < first
            || last == i64::MAX)
            .then_some(Corruption::OffsetOverflow {
                segment_base: self.base_offset,
                first,
                last,
            })
    }
}

/// Lets the tests choose how a pass reads (`recover_tests.rs`) and see which way it did, on their thread.
#[cfg(test)]
pub(super) mod tests_hook {
    use std::cell::Cell;
    thread_local! {
        /// `Some(helper)`: the passes of this thread read ahead on a helper thread or not, whatever the
        /// cores say.
        pub static HELPER: Cell<Option<bool>> = const { Cell::new(None) };
        /// Whether a pass of this thread had a helper.
        pub static HELPED: Cell<bool> = const { Cell::new(false) };
    }
}
