//! The direct write path of a segment's `.log`: the writer's tail in memory, aligned chunks to the disk.
//!
//! A [`TailFile`] is what a backend with a write path of its own (io_uring: `O_DIRECT`; the simulation:
//! the same logic with crash points) returns from [`super::Storage::open_segment_log`]. Appends land in an
//! aligned buffer holding the file from `base` (a multiple of [`ALIGN`]) to the log's end; readers of that
//! range are answered from it. The device only ever sees whole aligned chunks:
//! - a sync writes everything pending, the last block padded with zeros, as [`CHUNK`]-sized writes all in
//!   flight at once, each `RWF_DSYNC` (durable on completion: no separate fdatasync unless an earlier
//!   unsynced write or resize is outstanding). The padded block is rewritten with the next chunk: its
//!   first bytes are identical in both writes, so a write torn at any sector keeps every durable byte.
//! - once [`SPILL`] bytes are pending, an append writes them the same way, not synced;
//! - the file is zero-filled ([`FILL_WINDOW`] at a time, durably) ahead of the data, so a data write
//!   overwrites allocated, written blocks and changes no file metadata: its `RWF_DSYNC` is a device flush.
//!
//! Device writes of a file take turns (its `io` lock) and run on a copy of the pending bytes, outside the
//! lock of the tail: appenders keep appending while a sync is on the disk, which is what lets a group
//! commit gather the next group. Only blocks a completed write covered leave memory.
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
/// Zero-filled at a time ahead of the data.
pub const FILL_WINDOW: u64 = 1 << 20;

fn align_down(x: u64) -> u64 {
    x / ALIGN * ALIGN
}

fn align_up(x: u64) -> u64 {
    x.div_ceil(ALIGN) * ALIGN
}

/// One write of a batch: a device, an aligned position, aligned bytes, and whether it must be durable
/// when it completes (`RWF_DSYNC`).
pub struct ChunkWrite<'a, D> {
    pub dev: &'a D,
    pub position: u64,
    pub bytes: &'a [u8],
    pub dsync: bool,
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
    /// A write or resize since the last fdatasync that `RWF_DSYNC` did not cover.
    dirty: bool,
    /// The device is zero-filled (durably) up to here, from the data's aligned end on.
    filled: u64,
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
        (self.filled < hi + CHUNK as u64).then_some((from, from + FILL_WINDOW))
    }

    /// A write of the data up to `end` completed (durable with `durable`): the blocks below it leave
    /// memory, the partial last one stays (it is rewritten with the next write).
    fn written(&mut self, end: u64, durable: bool) {
        self.written_end = self.written_end.max(end);
        if durable {
            self.durable_end = self.durable_end.max(end);
        }
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

/// What one file brings to a batch: its snapshot, the zero fill it needs, whether writes must be
/// followed by an fdatasync.
struct Plan {
    snapshot: Option<Snapshot>,
    fill: Option<(u64, u64)>,
    dirty: bool,
}

impl<D: ChunkDevice> TailFile<D> {
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
            dirty: false,
            filled: align_up(end),
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

    /// Under the `io` turn: what this file writes in the next batch (None: it failed earlier).
    fn plan(&self, fill_ahead: bool) -> io::Result<Plan> {
        let tail = self.lock();
        tail.check()?;
        let snapshot = tail.snapshot();
        let fill = match &snapshot {
            Some(s) if fill_ahead => tail.fill_needed(s.end),
            _ => None,
        };
        Ok(Plan {
            snapshot,
            fill,
            dirty: tail.dirty,
        })
    }

    /// Writes and (with `sync`) makes durable what every file has pending, in as few batches as the
    /// device allows: the zero fills, then the data (`RWF_DSYNC` unless the file is dirty), then an
    /// fdatasync of the dirty ones. Each file's device writes take their turn (`io`), its appenders do
    /// not wait. The result of each file.
    fn flush_files(files: &[&TailFile<D>], sync: bool, fill_ahead: bool) -> Vec<io::Result<()>> {
        // Turns in address order, so two batches sharing files cannot deadlock.
        let mut order: Vec<usize> = (0..files.len()).collect();
        order.sort_by_key(|&i| files[i] as *const TailFile<D> as usize);
        order.dedup_by_key(|i| files[*i] as *const TailFile<D> as usize);
        let _turns: Vec<MutexGuard<'_, ()>> = order.iter().map(|&i| files[i].io_turn()).collect();
        let mut results: Vec<io::Result<()>> = (0..files.len()).map(|_| Ok(())).collect();
        let mut plans = Vec::new();
        for &i in &order {
            match files[i].plan(fill_ahead) {
                Ok(p) => plans.push((i, p)),
                Err(e) => results[i] = Err(e),
            }
        }
        // The zero fills, durable, before any data lands beyond what was filled.
        let fills: Vec<_> = plans
            .iter()
            .filter_map(|(i, p)| p.fill.map(|f| (*i, f)))
            .collect();
        let mut writes = Vec::new();
        for &(i, (from, to)) in &fills {
            let mut p = from;
            while p < to {
                let n = (to - p).min(FILL_PIECE as u64) as usize;
                writes.push(ChunkWrite {
                    dev: &files[i].dev,
                    position: p,
                    bytes: &zeros()[..n],
                    dsync: true,
                });
                p += n as u64;
            }
        }
        if let Err(e) = D::write_batch(&writes)
            .into_iter()
            .collect::<io::Result<()>>()
        {
            for (i, _) in &plans {
                results[*i] = Err(files[*i].lock().fail(clone_error(&e)));
            }
            return results;
        }
        for &(i, (_, to)) in &fills {
            files[i].lock().filled = to;
        }
        // The data of every file, all in flight together.
        let mut writes = Vec::new();
        let mut owner = Vec::new();
        for (k, (i, p)) in plans.iter().enumerate() {
            if let Some(snap) = &p.snapshot {
                for (position, bytes) in snap.pieces() {
                    writes.push(ChunkWrite {
                        dev: &files[*i].dev,
                        position,
                        bytes,
                        dsync: sync && !p.dirty,
                    });
                    owner.push(k);
                }
            }
        }
        let mut failed = vec![false; plans.len()];
        for (k, r) in owner.into_iter().zip(D::write_batch(&writes)) {
            if let Err(e) = r {
                let i = plans[k].0;
                if !failed[k] {
                    results[i] = Err(files[i].lock().fail(e));
                }
                failed[k] = true;
            }
        }
        drop(writes);
        let mut to_sync = Vec::new();
        for (k, (i, p)) in plans.iter().enumerate() {
            if failed[k] {
                continue;
            }
            let durable = sync && !p.dirty;
            let mut tail = files[*i].lock();
            if let Some(snap) = &p.snapshot {
                tail.written(snap.end, durable);
                if !durable {
                    tail.dirty = true;
                }
            }
            if sync && tail.dirty {
                to_sync.push(*i);
            }
        }
        let devs: Vec<&D> = to_sync.iter().map(|&i| &files[i].dev).collect();
        for (&i, r) in to_sync.iter().zip(D::sync_batch(&devs)) {
            let mut tail = files[i].lock();
            match r {
                Ok(()) => {
                    tail.dirty = false;
                    let written = tail.written_end;
                    tail.durable_end = tail.durable_end.max(written);
                }
                Err(e) => results[i] = Err(tail.fail(e)),
            }
        }
        results
    }

    /// Syncs every file given: one batch of writes for all of them (one io_uring submission), then one
    /// of fdatasyncs for those that need one. The result of each file.
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
                    read_exact(
                        &self.dev,
                        &mut tail.buf.as_mut_slice()[..n],
                        align_down(len),
                    )?;
                }
                tail.durable_end = tail.durable_end.min(len);
                tail.written_end = tail.written_end.min(len);
            }
        }
        self.write_out(false)?;
        let _turn = self.io_turn();
        let mut tail = self.lock();
        if let Err(e) = self.dev.set_len(len) {
            return Err(tail.fail(e));
        }
        tail.filled = align_up(len);
        tail.dirty = true;
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
