//! The direct write path of a segment's `.log`: the writer's tail in memory, aligned chunks to the disk.
//!
//! A [`TailFile`] is what a backend with a write path of its own (io_uring: `O_DIRECT`; the simulation:
//! the same logic with crash points) returns from [`super::Storage::open_segment_log`]. Appends land in an
//! aligned buffer holding the file from `base` (a multiple of [`ALIGN`]) to the log's end; readers of that
//! range are answered from it. The device only ever sees whole aligned chunks:
//! - a sync writes everything pending, the last block padded with zeros, as [`CHUNK`]-sized writes all in
//!   flight at once, none of them `RWF_DSYNC`, then ONE fdatasync per file. On a device without FUA
//!   (this project's VMs) every `RWF_DSYNC` write ends in its own cache flush, so a group of 8 batches
//!   cost 8 device flushes; it now costs one. The padded block is rewritten with the next chunk: its
//!   first bytes are identical in both writes, so a write torn at any sector keeps every durable byte.
//! - once [`SPILL`] bytes are pending, an append writes them the same way, not synced;
//! - the file is zero-filled ahead of the data, in the same batch as the data and not synced on its own:
//!   the next fdatasync makes it durable with the data (size included), and later data writes overwrite
//!   allocated, written blocks, so their fdatasync is a device flush only. The window starts at
//!   [`FIRST_FILL`] and doubles with each fill up to [`FILL_WINDOW`]: a partition that gets one batch (a
//!   failover's barrier on each of 1,000 partitions) writes 64 KiB of zeros, not 1 MiB.
//!
//! A file's device writes take turns (its `io` lock: two writes of the same padded block in flight at
//! once could land in either order), but its fdatasync does not: the turn is held for the writes only,
//! so the next group's writes run while this group's device flush does. A sync's durable claim is what
//! had COMPLETED when it was issued ([`Ticket`]), never what completes during it. Writes run on a copy
//! of the pending bytes, outside the lock of the tail: appenders keep appending while a sync is on the
//! disk, which is what lets a group commit gather the next group. Only blocks a completed write covered
//! leave memory.
//!
//! The bytes on disk stay Kafka's: batches, then zeros (what Kafka's `preallocate=true` leaves, which
//! recovery already cuts as a `Tail`), trimmed to the log's size when the segment rolls or closes.
//! Another handle (another process, a reader's map) sees only what reached the disk: the last sync, or
//! the last spilled chunk; `os_path` is `None` while bytes are pending, so the segment never maps a file
//! that lacks them.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::StorageFile;

/// The alignment of `O_DIRECT` positions, lengths and buffers: a page, which every block size divides.
pub const ALIGN: u64 = 4096;
/// Pending bytes that make an append write its aligned part without waiting for a sync.
pub const SPILL: usize = 256 << 10;
/// The largest single write; a sync or spill of more is several writes in flight together.
pub const CHUNK: usize = 16 << 10;
/// The tail buffer of a file opened or sealed: one block and a batch.
const INITIAL_BUF: usize = 32 << 10;
/// The largest single write of the zero fill.
const FILL_PIECE: usize = 256 << 10;
/// The most zero-filled at a time ahead of the data.
pub const FILL_WINDOW: u64 = 1 << 20;
/// The first zero fill of a file opened or cut; each fill after it doubles, up to [`FILL_WINDOW`].
pub const FIRST_FILL: u64 = 64 << 10;

fn align_down(x: u64) -> u64 {
    x / ALIGN * ALIGN
}

fn align_up(x: u64) -> u64 {
    x.div_ceil(ALIGN) * ALIGN
}

/// One write of a batch: a device, an aligned position, aligned bytes. Not durable until an fdatasync
/// of the device issued after it completed.
pub struct ChunkWrite<'a, D> {
    pub dev: &'a D,
    pub position: u64,
    pub bytes: &'a [u8],
}

/// The device under a [`TailFile`]: positioned reads, and batches of aligned writes and syncs that a
/// backend may run all at once (io_uring: one submission).
pub trait ChunkDevice: Send + Sync + std::fmt::Debug + Sized + 'static {
    /// Runs every write; the result of each, in order. Writes of one batch may complete in any order.
    fn write_batch(writes: &[ChunkWrite<'_, Self>]) -> Vec<io::Result<()>>;
    /// fdatasync of every device; the result of each, in order.
    fn sync_batch(devs: &[&Self]) -> Vec<io::Result<()>>;
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize>;
    fn set_len(&self, len: u64) -> io::Result<()>;
    fn len(&self) -> io::Result<u64>;
    fn path(&self) -> Option<&Path>;
}

/// A heap buffer aligned to [`ALIGN`], zeroed beyond what it holds: a vector one block longer than
/// needed, used from its first aligned byte (it never reallocates, so the start stays aligned).
pub(super) struct AlignedBuf {
    bytes: Vec<u8>,
    start: usize,
    cap: usize,
}

impl AlignedBuf {
    pub(super) fn new(cap: usize) -> Self {
        let cap = align_up(cap.max(1) as u64) as usize;
        let bytes = vec![0u8; cap + ALIGN as usize];
        let start = bytes.as_ptr().align_offset(ALIGN as usize);
        assert!(start < ALIGN as usize, "a byte buffer can be aligned");
        AlignedBuf { bytes, start, cap }
    }

    pub(super) fn as_slice(&self) -> &[u8] {
        &self.bytes[self.start..self.start + self.cap]
    }

    pub(super) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.start + self.cap]
    }
}

/// Zeros to fill with, shared by every file (and registered with every ring that writes, `fixed.rs`).
pub(super) fn zeros() -> &'static [u8] {
    static ZEROS: std::sync::OnceLock<AlignedBuf> = std::sync::OnceLock::new();
    &ZEROS.get_or_init(|| AlignedBuf::new(FILL_PIECE)).as_slice()[..FILL_PIECE]
}

#[derive(Debug)]
struct Tail {
    /// Aligned; every byte below it is on the device (written, maybe not synced).
    base: u64,
    buf: AlignedBuf,
    /// Bytes of `buf` in use: the file's data ends at `base + len`.
    len: usize,
    /// Every byte below it is durable.
    durable_end: u64,
    /// Every byte below it is on the device (written, maybe not synced).
    written_end: u64,
    /// Device changes (completed writes and resizes) so far.
    changes: u64,
    /// `changes` when the latest fdatasync that succeeded was issued: a sync is needed while below it.
    synced: u64,
    /// Cuts of the file so far: a sync issued before a cut claims nothing after it.
    cuts: u64,
    /// The device is zero-filled (maybe not durably yet) up to here, from the data's aligned end on.
    filled: u64,
    /// The size of the next zero fill.
    fill_window: u64,
    /// A write or sync failed: every later call fails too. A failed fdatasync is never retried (the
    /// kernel may have dropped the pages it could not write, and a second one would succeed).
    failed: Option<io::Error>,
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({})", self.cap)
    }
}

impl Tail {
    /// The earlier failure, if any, as this call's error.
    fn check(&self) -> io::Result<()> {
        match &self.failed {
            Some(e) => Err(io::Error::new(
                e.kind(),
                format!("an earlier write or sync of this file failed: {e}"),
            )),
            None => Ok(()),
        }
    }

    fn fail(&mut self, e: io::Error) -> io::Error {
        let copy = clone_error(&e);
        self.failed.get_or_insert(e);
        copy
    }

    fn end(&self) -> u64 {
        self.base + self.len as u64
    }

    fn all_written(&self) -> bool {
        self.written_end >= self.end()
    }

    fn reserve(&mut self, extra: usize) {
        let need = self.len + extra;
        if need <= self.buf.cap {
            return;
        }
        let mut bigger = AlignedBuf::new(need.max(self.buf.cap * 2));
        bigger.as_mut_slice()[..self.len].copy_from_slice(&self.buf.as_slice()[..self.len]);
        self.buf = bigger;
    }

    /// A copy of everything from `base` to the data's end, padded with zeros to a whole block; None when
    /// all of it is on the device.
    fn snapshot(&self) -> Option<Snapshot> {
        if self.all_written() {
            return None;
        }
        let padded = align_up(self.len as u64) as usize;
        let mut bytes = AlignedBuf::new(padded);
        bytes.as_mut_slice()[..self.len].copy_from_slice(&self.buf.as_slice()[..self.len]);
        Some(Snapshot {
            base: self.base,
            end: self.end(),
            bytes,
            padded,
        })
    }

    /// The zero fill a write of the data up to `end` needs first: `[from, to)`, or None.
    fn fill_needed(&self, end: u64) -> Option<(u64, u64)> {
        let hi = align_up(end);
        let from = self.filled.max(hi);
        (self.filled < hi + CHUNK as u64).then_some((from, from + self.fill_window))
    }

    /// What an fdatasync issued now would make durable; None when nothing changed since the last one.
    fn ticket(&self) -> Option<Ticket> {
        (self.synced < self.changes).then_some(Ticket {
            changes: self.changes,
            written_end: self.written_end,
            cuts: self.cuts,
        })
    }

    /// An fdatasync issued with `ticket` succeeded: what had completed before it is durable (and nothing
    /// that completed during it, nor anything of a file cut since).
    fn synced(&mut self, ticket: &Ticket) {
        self.synced = self.synced.max(ticket.changes);
        if ticket.cuts == self.cuts {
            self.durable_end = self.durable_end.max(ticket.written_end);
        }
    }

    /// A write of the data up to `end` completed (not durable yet): the blocks below it leave memory,
    /// the partial last one stays (it is rewritten with the next write).
    fn written(&mut self, end: u64) {
        self.written_end = self.written_end.max(end);
        self.changes += 1;
        let cut = align_down(end);
        if cut <= self.base {
            return;
        }
        let keep_from = (cut - self.base) as usize;
        let len = self.len;
        let slice = self.buf.as_mut_slice();
        slice.copy_within(keep_from..len, 0);
        slice[len - keep_from..len].fill(0);
        self.base = cut;
        self.len = len - keep_from;
    }
}

/// What one fdatasync of a file covers, read when it is issued: the device changes and the data end that
/// had completed by then.
#[derive(Debug, Clone, Copy)]
struct Ticket {
    changes: u64,
    written_end: u64,
    cuts: u64,
}

/// The pending bytes of a file as they were when a write of them began.
struct Snapshot {
    base: u64,
    end: u64,
    bytes: AlignedBuf,
    padded: usize,
}

impl Snapshot {
    fn pieces(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.bytes.as_slice()[..self.padded]
            .chunks(CHUNK)
            .enumerate()
            .map(|(i, c)| (self.base + (i * CHUNK) as u64, c))
    }
}

/// A segment `.log` written through the direct path; see the module docs.
#[derive(Debug)]
pub struct TailFile<D: ChunkDevice> {
    dev: D,
    path: PathBuf,
    tail: Mutex<Tail>,
    /// Held for every device write: one batch of a file at a time, in order.
    io: Mutex<()>,
}

/// What one file brings to a batch: its snapshot and the zero fill it needs.
struct Plan {
    snapshot: Option<Snapshot>,
    fill: Option<(u64, u64)>,
}

impl<D: ChunkDevice> TailFile<D> {
    /// The device under the tail, for tests that check how the backend opened it.
    #[cfg(test)]
    pub(super) fn device(&self) -> &D {
        &self.dev
    }

    /// A file whose data ends at `end` (the last partial block is read into memory).
    pub fn new(dev: D, path: &Path, end: u64) -> io::Result<Self> {
        let base = align_down(end);
        let len = (end - base) as usize;
        // Small to start with (a broker has thousands of active segments): it grows with what is pending.
        let mut buf = AlignedBuf::new(INITIAL_BUF);
        read_exact(&dev, &mut buf.as_mut_slice()[..len], base)?;
        let tail = Tail {
            base,
            buf,
            len,
            durable_end: end,
            written_end: end,
            failed: None,
            changes: 0,
            synced: 0,
            cuts: 0,
            filled: align_up(end),
            fill_window: FIRST_FILL,
        };
        Ok(TailFile {
            dev,
            path: path.to_owned(),
            tail: Mutex::new(tail),
            io: Mutex::new(()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Tail> {
        self.tail.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn io_turn(&self) -> MutexGuard<'_, ()> {
        self.io.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Under the `io` turn: what this file writes in the next batch (an error: it failed earlier).
    fn plan(&self, fill_ahead: bool) -> io::Result<Plan> {
        let tail = self.lock();
        tail.check()?;
        let snapshot = tail.snapshot();
        let fill = match &snapshot {
            Some(s) if fill_ahead => tail.fill_needed(s.end),
            _ => None,
        };
        Ok(Plan { snapshot, fill })
    }

    /// Writes what every file has pending and (with `sync`) makes it durable: one batch of writes for
    /// all of them (zero fills and data together, none `RWF_DSYNC`), then one batch of fdatasyncs. Each
    /// file's writes take their turn (`io`), its fdatasync does not: the next batch of a file may be
    /// written while this one's sync runs. The result of each file.
    fn flush_files(files: &[&TailFile<D>], sync: bool, fill_ahead: bool) -> Vec<io::Result<()>> {
        let mut order: Vec<usize> = (0..files.len()).collect();
        order.sort_by_key(|&i| files[i] as *const TailFile<D> as usize);
        order.dedup_by_key(|i| files[*i] as *const TailFile<D> as usize);
        let mut results = Self::write_files(files, &order, fill_ahead);
        if sync {
            Self::sync_written(files, &order, &mut results);
        }
        results
    }

    /// Under every file's turn (taken in address order, so two batches sharing files cannot deadlock):
    /// the zero fills and the data of every file, all in flight together. The result of each file.
    fn write_files(
        files: &[&TailFile<D>],
        order: &[usize],
        fill_ahead: bool,
    ) -> Vec<io::Result<()>> {
        let _turns: Vec<MutexGuard<'_, ()>> = order.iter().map(|&i| files[i].io_turn()).collect();
        let mut results: Vec<io::Result<()>> = (0..files.len()).map(|_| Ok(())).collect();
        let mut plans = Vec::new();
        for &i in order {
            match files[i].plan(fill_ahead) {
                Ok(p) => plans.push((i, p)),
                Err(e) => results[i] = Err(e),
            }
        }
        let mut writes = Vec::new();
        let mut owner = Vec::new();
        for (k, (i, p)) in plans.iter().enumerate() {
            let dev = &files[*i].dev;
            // The fill lies beyond the data's padded end: the two never overlap.
            if let Some((from, to)) = p.fill {
                for position in (from..to).step_by(FILL_PIECE) {
                    let n = (to - position).min(FILL_PIECE as u64) as usize;
                    let bytes = &zeros()[..n];
                    writes.push(ChunkWrite {
                        dev,
                        position,
                        bytes,
                    });
                    owner.push(k);
                }
            }
            for (position, bytes) in p.snapshot.iter().flat_map(Snapshot::pieces) {
                writes.push(ChunkWrite {
                    dev,
                    position,
                    bytes,
                });
                owner.push(k);
            }
        }
        let mut failed: Vec<Option<io::Error>> = plans.iter().map(|_| None).collect();
        for (k, r) in owner.into_iter().zip(D::write_batch(&writes)) {
            if let Err(e) = r {
                failed[k].get_or_insert(e);
            }
        }
        drop(writes);
        for ((i, p), failure) in plans.iter().zip(failed) {
            let mut tail = files[*i].lock();
            if let Some(e) = failure {
                results[*i] = Err(tail.fail(e));
                continue;
            }
            if let Some((_, to)) = p.fill {
                tail.filled = to;
                tail.fill_window = (tail.fill_window * 2).min(FILL_WINDOW);
                tail.changes += 1;
            }
            if let Some(snap) = &p.snapshot {
                tail.written(snap.end);
            }
        }
        results
    }

    /// One fdatasync of every file that changed since its last one, all together and outside the turns;
    /// each covers what had completed when it was issued (its [`Ticket`]).
    fn sync_written(files: &[&TailFile<D>], order: &[usize], results: &mut [io::Result<()>]) {
        let mut tickets = Vec::new();
        for &i in order {
            if results[i].is_err() {
                continue;
            }
            let tail = files[i].lock();
            match tail.check() {
                Err(e) => results[i] = Err(e),
                Ok(()) => tickets.extend(tail.ticket().map(|t| (i, t))),
            }
        }
        let devs: Vec<&D> = tickets.iter().map(|&(i, _)| &files[i].dev).collect();
        for ((i, ticket), r) in tickets.iter().zip(D::sync_batch(&devs)) {
            let mut tail = files[*i].lock();
            match r {
                Ok(()) => tail.synced(ticket),
                Err(e) => results[*i] = Err(tail.fail(e)),
            }
        }
    }

    /// Syncs every file given: one batch of writes for all of them (one io_uring submission), then one
    /// of fdatasyncs for those that changed. The result of each file.
    pub fn sync_many(files: &[&TailFile<D>]) -> Vec<io::Result<()>> {
        Self::flush_files(files, true, true)
    }

    /// Writes what is pending, not synced (a spill, or the last write before a resize or a drop).
    fn write_out(&self, fill_ahead: bool) -> io::Result<()> {
        Self::flush_files(&[self], false, fill_ahead)
            .pop()
            .unwrap_or(Ok(()))
    }
}

fn read_exact<D: ChunkDevice>(dev: &D, buf: &mut [u8], position: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match dev.read_at(&mut buf[done..], position + done as u64)? {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "the file ends before its data's end {}",
                        position + buf.len() as u64
                    ),
                ))
            }
            n => done += n,
        }
    }
    Ok(())
}

fn clone_error(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

impl<D: ChunkDevice> StorageFile for TailFile<D> {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        let (base, upto) = {
            let tail = self.lock();
            let upto = (position + buf.len() as u64).min(tail.end());
            if position >= upto {
                return Ok(0);
            }
            let from = position.max(tail.base);
            if from < upto {
                let src =
                    &tail.buf.as_slice()[(from - tail.base) as usize..(upto - tail.base) as usize];
                buf[(from - position) as usize..(upto - position) as usize].copy_from_slice(src);
            }
            (tail.base, upto)
        };
        // Below `base` the bytes are on the device and stay there while this reads them.
        if position < base {
            let disk_end = base.min(upto);
            read_exact(
                &self.dev,
                &mut buf[..(disk_end - position) as usize],
                position,
            )?;
        }
        Ok((upto - position) as usize)
    }

    fn write_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
        let spill = {
            let mut tail = self.lock();
            tail.check()?;
            if position != tail.end() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{}: a segment written through the direct path is appended to at its end \
                         {}, not written at {position}",
                        self.path.display(),
                        tail.end()
                    ),
                ));
            }
            tail.reserve(buf.len());
            let len = tail.len;
            tail.buf.as_mut_slice()[len..len + buf.len()].copy_from_slice(buf);
            tail.len += buf.len();
            tail.end() - tail.written_end.max(tail.base) >= SPILL as u64
        };
        if spill {
            self.write_out(true)?;
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Self::sync_many(&[self]).pop().unwrap_or(Ok(()))
    }

    /// Cuts or trims the file. The pending bytes below `len` reach the device first: a trimmed segment is
    /// sealed and read (mapped) from the disk.
    fn set_len(&self, len: u64) -> io::Result<()> {
        {
            let _turn = self.io_turn();
            let mut tail = self.lock();
            tail.check()?;
            if len < tail.end() {
                if len >= tail.base {
                    let keep = (len - tail.base) as usize;
                    let old = tail.len;
                    tail.buf.as_mut_slice()[keep..old].fill(0);
                    tail.len = keep;
                } else {
                    let old = tail.len;
                    tail.buf.as_mut_slice()[..old].fill(0);
                    tail.base = align_down(len);
                    tail.len = (len - tail.base) as usize;
                    let n = tail.len;
                    let read = read_exact(
                        &self.dev,
                        &mut tail.buf.as_mut_slice()[..n],
                        align_down(len),
                    );
                    // The tail no longer says what the device holds: the file is failed, like a
                    // failed write (an append to it would be taken at a cut that never happened).
                    if let Err(e) = read {
                        return Err(tail.fail(e));
                    }
                }
                tail.durable_end = tail.durable_end.min(len);
                tail.written_end = tail.written_end.min(len);
                tail.cuts += 1;
            }
        }
        self.write_out(false)?;
        let _turn = self.io_turn();
        let mut tail = self.lock();
        if let Err(e) = self.dev.set_len(len) {
            return Err(tail.fail(e));
        }
        tail.filled = align_up(len);
        tail.fill_window = FIRST_FILL;
        tail.changes += 1;
        Ok(())
    }

    /// Always trims: the zero fill ahead may have grown the file since any length was read. A sealed
    /// segment is only read, so its buffer shrinks back to the last partial block.
    fn seal(&self, size: u64) -> io::Result<()> {
        self.set_len(size)?;
        let mut tail = self.lock();
        if tail.buf.cap > INITIAL_BUF && tail.len <= INITIAL_BUF {
            let mut small = AlignedBuf::new(INITIAL_BUF);
            let len = tail.len;
            small.as_mut_slice()[..len].copy_from_slice(&tail.buf.as_slice()[..len]);
            tail.buf = small;
        }
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        let end = self.lock().end();
        Ok(self.dev.len()?.max(end))
    }

    /// `None` while bytes are pending in memory: the file on disk lacks them, so nothing may map it.
    fn os_path(&self) -> Option<&Path> {
        let tail = self.lock();
        (tail.all_written() && self.dev.path().is_some()).then_some(self.path.as_path())
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

/// A file dropped without a sync (a log dropped without `close`) still writes its tail out, unsynced,
/// so a later open in the same run finds what std's page cache would have kept. A killed process loses
/// it: at most [`SPILL`] bytes, none of them flushed.
impl<D: ChunkDevice> Drop for TailFile<D> {
    fn drop(&mut self) {
        if !self.lock().all_written() {
            let _ = self.write_out(false);
        }
    }
}

/// [`TailFile::sync_many`] over the files of a batch that are `TailFile<D>`; the others sync one by one.
pub fn sync_files<D: ChunkDevice>(files: &[Arc<dyn StorageFile>]) -> io::Result<()> {
    let mut tails = Vec::new();
    for f in files {
        match f.as_any().and_then(|a| a.downcast_ref::<TailFile<D>>()) {
            Some(t) => tails.push(t),
            None => f.sync()?,
        }
    }
    TailFile::sync_many(&tails).into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail(end: u64) -> Tail {
        Tail {
            base: align_down(end),
            buf: AlignedBuf::new(INITIAL_BUF),
            len: (end - align_down(end)) as usize,
            durable_end: end,
            written_end: end,
            changes: 0,
            synced: 0,
            cuts: 0,
            filled: align_up(end),
            fill_window: FIRST_FILL,
            failed: None,
        }
    }

    fn append(tail: &mut Tail, n: usize) {
        tail.reserve(n);
        tail.len += n;
    }

    /// The rule group commit relies on once the fdatasync runs outside the write turn: a sync claims
    /// what had completed when it was issued, not what completed while it ran.
    #[test]
    fn a_sync_claims_only_writes_completed_before_it_was_issued() {
        let mut t = tail(0);
        assert!(t.ticket().is_none(), "nothing written: no sync needed");
        append(&mut t, 5000);
        t.written(5000);
        let first = t.ticket().expect("a write since the last sync");
        // The next group's write completes while the first sync is on the device.
        append(&mut t, 3000);
        t.written(8000);
        t.synced(&first);
        assert_eq!(
            t.durable_end, 5000,
            "the first sync covers the first write only"
        );
        let second = t.ticket().expect("the second write is not synced yet");
        t.synced(&second);
        assert_eq!(t.durable_end, 8000);
        assert!(t.ticket().is_none());
        // Syncs completing out of order never move the claim back.
        t.synced(&first);
        assert_eq!(t.durable_end, 8000);
    }

    /// A sync issued before a cut claims nothing after it: the bytes it covered may be gone.
    #[test]
    fn a_sync_issued_before_a_cut_claims_nothing_after_it() {
        let mut t = tail(0);
        append(&mut t, 9000);
        t.written(9000);
        let before_cut = t.ticket().expect("written");
        t.durable_end = t.durable_end.min(100);
        t.written_end = t.written_end.min(100);
        t.cuts += 1;
        t.synced(&before_cut);
        assert_eq!(t.durable_end, 0);
    }
}
