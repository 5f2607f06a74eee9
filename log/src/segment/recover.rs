//! A segment's recovery (Kafka's `LogSegment.recover`): the pass that checks every batch of the `.log`,
//! rebuilds the offset and time indexes and collects the leader epochs, then cuts an invalid tail;
//! through mapped windows of a real file, `pread` chunks otherwise.

use std::sync::atomic::Ordering;

use crate::error::IoContext;
use crate::format::{Batches, Tail};
use crate::{Corruption, Error};

#[cfg(target_os = "linux")]
use super::windows_ahead::WindowsAhead;
use super::{LogSegment, SegmentRecovery, State};

/// Bytes read at a time by `recover` through `pread` (one buffer, reused: it stays in the CPU cache).
const RECOVER_CHUNK: u64 = 1 << 20;
/// Bytes mapped at a time by `recover` when the `.log` is a real file. A map costs a page-table entry per
/// page where a `pread` copies the page: the copy was ~90% of an unclean open (BENCHMARKS.md). Large
/// enough that the map and unmap calls are noise, small enough to keep what an open maps bounded.
const RECOVER_WINDOW: u64 = 16 << 20;
/// How far before a window's end the next window starts, so that the batch the end cuts is whole in the
/// next one (batches up to this size; a larger one is mapped again from its start).
const WINDOW_OVERLAP: u64 = 1 << 20;

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

/// `[start, end)` of `file` mapped read-only with every page populated. `MADV_POPULATE_READ` reads what is
/// not cached and fails with the I/O error, where touching an unreadable page of a map raises SIGBUS.
#[cfg(target_os = "linux")]
fn map_populated(file: &std::fs::File, start: u64, end: u64) -> std::io::Result<memmap2::Mmap> {
    // SAFETY: recovery runs while the partition is opened, before any reader or writer can reach it,
    // with the log directory's lock held (no other klog process writes it), and the map is dropped
    // before the pass cuts the file (a map made or unmapped by the `WindowsAhead` helper is dropped
    // before `recover_mapped`'s thread scope, which joins the helper, returns): nothing shrinks the
    // file under the map.
    let map = unsafe {
        memmap2::MmapOptions::new()
            .offset(start)
            .len((end - start) as usize)
            .map(file)
    }?;
    map.advise(memmap2::Advice::PopulateRead)?;
    Ok(map)
}

/// Starts reading `[position, position + len)` of `file` into the page cache unless its first page is
/// cached already (a 1-byte `RWF_NOWAIT` read says so without waiting): on a warm cache the pass then
/// pays one syscall per window, not a page-cache lookup per page. Advice only: errors are ignored.
#[cfg(target_os = "linux")]
fn read_ahead_if_cold(file: &std::fs::File, position: u64, len: u64) {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    let mut byte = 0u8;
    let iov = libc::iovec {
        iov_base: (&mut byte as *mut u8).cast(),
        iov_len: 1,
    };
    // SAFETY: `iov` points at one writable byte that outlives the call; `fd` is open.
    let n = unsafe { libc::preadv2(fd, &iov, 1, position as libc::off_t, libc::RWF_NOWAIT) };
    if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
        // SAFETY: plain advice on an open descriptor; no memory is passed.
        unsafe {
            libc::posix_fadvise(
                fd,
                position as libc::off_t,
                len as libc::off_t,
                libc::POSIX_FADV_WILLNEED,
            )
        };
    }
}

/// Whether this kernel has `MADV_POPULATE_READ` (Linux 5.14+); without it recovery reads through `pread`,
/// never through a map whose unreadable page would raise SIGBUS.
#[cfg(target_os = "linux")]
fn populate_supported() -> bool {
    static SUPPORTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SUPPORTED.get_or_init(|| {
        memmap2::MmapOptions::new()
            .len(4096)
            .map_anon()
            .and_then(|m| m.advise(memmap2::Advice::PopulateRead))
            .is_ok()
    })
}

#[cfg(not(target_os = "linux"))]
fn populate_supported() -> bool {
    false
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
        self.recover_through(&mut Vec::new(), on_batch, &mut || Ok(()))
    }

    /// [`LogSegment::recover_with`], reading through `buf`: a caller recovering many segments passes the
    /// same buffer to each, so it is allocated, zeroed and faulted in once per open, not per segment.
    /// `before_cut` runs when the pass found bytes to cut, before the cut is made (and made durable): a
    /// log deletes its later segments there, so a crash never leaves the cut without the evidence for
    /// deleting them.
    pub fn recover_through(
        &self,
        buf: &mut Vec<u8>,
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
        let tail = match self.mappable_log(size)? {
            Some(file) => self.recover_mapped(&file, size, &mut state, &mut pass, on_batch)?,
            None => self.recover_read(buf, size, &mut state, &mut pass, on_batch)?,
        };
        let tail = to_file_end(tail, size);
        drop(state);
        if pass.valid < size {
            before_cut()?;
        }
        // Any window map of the pass is gone by now: the cut may shrink the file in place.
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

    /// The recovery pass through `pread`s (storage that cannot be mapped: simulated, read-only, a direct
    /// write path's file): `RECOVER_CHUNK` reads into one reused buffer. `buf` holds the file's bytes from
    /// `buf_start`; a batch cut by a read stays in it (the iterator ends with a `Tail`, not an error) and
    /// is completed by the next read. The last read decides the segment's tail. `buf[..filled]` is live;
    /// the buffer is zeroed only when it grows (a batch larger than a chunk), not on every read.
    fn recover_read(
        &self,
        buf: &mut Vec<u8>,
        size: u64,
        state: &mut State,
        pass: &mut RecoveryPass,
        on_batch: &mut dyn FnMut(&crate::format::AnyBatch<'_>),
    ) -> Result<Tail, Error> {
        let mut filled = 0usize;
        let (mut buf_start, mut read_to) = (0u64, 0u64);
        loop {
            let want = RECOVER_CHUNK.min(size - read_to) as usize;
            if buf.len() < filled + want {
                buf.resize(filled + want, 0);
            }
            let n = self
                .log_file()
                .read_at(&mut buf[filled..filled + want], read_to)
                .map_err(|e| Error::io(&self.log_path_of(), e))?;
            filled += n;
            read_to += n as u64;
            let at_end = n == 0 || read_to >= size;
            let (position, tail) =
                self.check_batches(state, pass, &buf[..filled], buf_start, on_batch)?;
            if pass.corruption.is_some() || at_end {
                return Ok(tail.unwrap_or(Tail::Clean));
            }
            let consumed = (position - buf_start) as usize;
            buf.copy_within(consumed..filled, 0);
            filled -= consumed;
            buf_start += consumed as u64;
        }
    }

    /// The `.log` opened for mapping when the pass can read it through maps: a real file, not empty, on a
    /// kernel that populates a map with an error instead of a SIGBUS (Linux 5.14+).
    fn mappable_log(&self, size: u64) -> Result<Option<std::fs::File>, Error> {
        let log = self.log_file();
        let Some(path) = log.os_path().filter(|_| size > 0 && populate_supported()) else {
            return Ok(None);
        };
        Ok(Some(std::fs::File::open(path).at(path)?))
    }

    /// The recovery pass through maps: each `RECOVER_WINDOW` of the file is mapped, its pages populated in
    /// one call, checked in place and unmapped, so nothing is copied and at most three windows (or one
    /// batch larger than a window) are mapped at once. A segment of more than one window has a helper
    /// thread ([`WindowsAhead`]) map and populate the next window, and unmap the last, while this one
    /// checks the current window; the next window starts `WINDOW_OVERLAP` before the current one ends,
    /// so the batch its end cuts is whole in it unless that batch is larger than the overlap (then the
    /// window from that batch on is mapped here, as without the helper).
    #[cfg(target_os = "linux")]
    fn recover_mapped(
        &self,
        file: &std::fs::File,
        size: u64,
        state: &mut State,
        pass: &mut RecoveryPass,
        on_batch: &mut dyn FnMut(&crate::format::AnyBatch<'_>),
    ) -> Result<Tail, Error> {
        let path = self.log_path_of();
        std::thread::scope(|scope| {
            let spawn = size > RECOVER_WINDOW;
            let mut ahead =
                WindowsAhead::start(scope, file, map_populated, read_ahead_if_cold, spawn);
            let mut window = map_populated(file, 0, RECOVER_WINDOW.min(size)).at(&path)?;
            let (mut window_start, mut start) = (0u64, 0u64);
            loop {
                let end = window_start + window.len() as u64;
                let at_end = end >= size;
                if !at_end {
                    let next = end.saturating_sub(WINDOW_OVERLAP).max(start);
                    let next_end = next.saturating_add(RECOVER_WINDOW).min(size);
                    ahead.request(next, next_end, RECOVER_WINDOW.min(size - next_end));
                }
                let bytes = &window[(start - window_start) as usize..];
                let (position, tail) = self.check_batches(state, pass, bytes, start, on_batch)?;
                ahead.unmap(window);
                if pass.corruption.is_some() || at_end {
                    return Ok(tail.unwrap_or(Tail::Clean));
                }
                (window_start, window) = match ahead.take() {
                    Some((next, map)) if next <= position && position > start => {
                        (next, map.at(&path)?)
                    }
                    unused => {
                        if let Some((_, Ok(map))) = unused {
                            ahead.unmap(map);
                        }
                        // No whole batch from `start` in the window: one batch is larger than it, so
                        // map more of it.
                        let len = if position == start {
                            (end - start).saturating_mul(2)
                        } else {
                            RECOVER_WINDOW
                        };
                        let map_end = position.saturating_add(len).min(size);
                        (position, map_populated(file, position, map_end).at(&path)?)
                    }
                };
                start = position;
            }
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn recover_mapped(
        &self,
        _file: &std::fs::File,
        size: u64,
        state: &mut State,
        pass: &mut RecoveryPass,
        on_batch: &mut dyn FnMut(&crate::format::AnyBatch<'_>),
    ) -> Result<Tail, Error> {
        self.recover_read(&mut Vec::new(), size, state, pass, on_batch)
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
