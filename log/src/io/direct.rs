//! The direct write path of a segment's `.log`: the writer's tail in memory, aligned chunks to the disk.
//!
//! A [`TailFile`] is what a backend with a write path of its own (io_uring: `O_DIRECT`; the simulation:
//! the same logic with crash points) returns from [`super::Storage::open_segment_log`]. Appends land in an
//! aligned buffer holding the file from `base` (a multiple of [`ALIGN`]) to the log's end; readers of that
//! range are answered from it. The device only ever sees whole aligned chunks:
//! - once [`SPILL`] bytes are pending, the aligned part is written (not synced) and only the unaligned
//!   remainder (< [`ALIGN`] bytes) stays in memory;
//! - a sync writes everything pending, the last block padded with zeros, as [`CHUNK`]-sized writes all in
//!   flight at once, each `RWF_DSYNC` (durable on completion: no separate fdatasync unless an earlier
//!   unsynced write or resize is outstanding). The padded block is rewritten with the next chunk: its
//!   first bytes are identical in both writes, so a write torn at any sector keeps every durable byte.
//! - the file is zero-filled ([`FILL_WINDOW`] at a time, durably) ahead of the data, so a data write
//!   overwrites allocated, written blocks and changes no file metadata: its `RWF_DSYNC` is a device flush.
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
pub const CHUNK: usize = 32 << 10;
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
struct AlignedBuf {
    bytes: Vec<u8>,
    start: usize,
    cap: usize,
}

impl AlignedBuf {
    fn new(cap: usize) -> Self {
        let cap = align_up(cap.max(1) as u64) as usize;
        let bytes = vec![0u8; cap + ALIGN as usize];
        let start = bytes.as_ptr().align_offset(ALIGN as usize);
        assert!(start < ALIGN as usize, "a byte buffer can be aligned");
        AlignedBuf { bytes, start, cap }
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[self.start..self.start + self.cap]
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.start + self.cap]
    }
}

/// Zeros to fill with, shared by every file.
fn zeros() -> &'static [u8] {
    static ZEROS: std::sync::OnceLock<AlignedBuf> = std::sync::OnceLock::new();
    &ZEROS.get_or_init(|| AlignedBuf::new(CHUNK)).as_slice()[..CHUNK]
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

    fn reserve(&mut self, extra: usize) {
        let need = self.len + extra;
        if need <= self.buf.cap {
            return;
        }
        let mut bigger = AlignedBuf::new(need.max(self.buf.cap * 2));
        bigger.as_mut_slice()[..self.len].copy_from_slice(&self.buf.as_slice()[..self.len]);
        self.buf = bigger;
    }

    /// Everything from `base` to the data's end, padded to a whole block, in [`CHUNK`] pieces.
    fn pieces(&self) -> Vec<(u64, &[u8])> {
        let padded = align_up(self.len as u64) as usize;
        let bytes = &self.buf.as_slice()[..padded];
        bytes
            .chunks(CHUNK)
            .enumerate()
            .map(|(i, c)| (self.base + (i * CHUNK) as u64, c))
            .collect()
    }

    /// The aligned part of the pending bytes is on the device: keep only the last partial block.
    fn advance(&mut self) {
        let keep_from = (align_down(self.end()) - self.base) as usize;
        let rest = self.len - keep_from;
        let slice = self.buf.as_mut_slice();
        slice.copy_within(keep_from..self.len, 0);
        slice[rest..self.len.max(rest)].fill(0);
        self.base += keep_from as u64;
        self.len = rest;
    }

    /// The zero fill needed before the pending bytes are written: `[from, to)`, or None.
    fn fill_needed(&self) -> Option<(u64, u64)> {
        if self.written_end >= self.end() {
            return None; // nothing to write (a trimmed, sealed segment stays trimmed)
        }
        let hi = align_up(self.end());
        let from = self.filled.max(hi);
        (self.filled < hi + CHUNK as u64).then_some((from, from + FILL_WINDOW))
    }
}

/// A segment `.log` written through the direct path; see the module docs.
#[derive(Debug)]
pub struct TailFile<D: ChunkDevice> {
    dev: D,
    path: PathBuf,
    tail: Mutex<Tail>,
}

impl<D: ChunkDevice> TailFile<D> {
    /// A file whose data ends at `end` (the last partial block is read into memory).
    pub fn new(dev: D, path: &Path, end: u64) -> io::Result<Self> {
        let base = align_down(end);
        let len = (end - base) as usize;
        let mut buf = AlignedBuf::new(SPILL + CHUNK);
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
        })
    }

    fn lock(&self) -> MutexGuard<'_, Tail> {
        self.tail.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Syncs every file given, their writes (and zero fills) each in one batch: one io_uring submission
    /// for all of them, then one more for the fdatasyncs of those that need one. The result of each file.
    pub fn sync_many(files: &[&TailFile<D>]) -> Vec<io::Result<()>> {
        // Locks in address order, so two batches sharing files cannot deadlock.
        let mut order: Vec<usize> = (0..files.len()).collect();
        order.sort_by_key(|&i| files[i] as *const TailFile<D> as usize);
        order.dedup_by_key(|i| files[*i] as *const TailFile<D> as usize);
        let mut guards: Vec<(usize, MutexGuard<'_, Tail>)> =
            order.iter().map(|&i| (i, files[i].lock())).collect();
        let mut results: Vec<io::Result<()>> = (0..files.len()).map(|_| Ok(())).collect();
        for (i, g) in &guards {
            results[*i] = g.check();
        }
        guards.retain(|(_, g)| g.failed.is_none());
        {
            let mut targets: Vec<(&D, &mut Tail)> = guards
                .iter_mut()
                .map(|(i, g)| (&files[*i].dev, &mut **g))
                .collect();
            if let Err(e) = fill(&mut targets) {
                for (i, g) in guards.iter_mut() {
                    results[*i] = Err(g.fail(clone_error(&e)));
                }
                return results;
            }
        }
        let mut writes = Vec::new();
        let mut owner = Vec::new();
        for (k, (i, g)) in guards.iter().enumerate() {
            if TailFile::<D>::all_written(g) {
                continue; // written already (a spill, a trim): an fdatasync below makes it durable
            }
            for (position, bytes) in g.pieces() {
                writes.push(ChunkWrite {
                    dev: &files[*i].dev,
                    position,
                    bytes,
                    dsync: !g.dirty,
                });
                owner.push(k);
            }
        }
        let done = D::write_batch(&writes);
        drop(writes);
        let mut failed = vec![false; guards.len()];
        for (k, r) in owner.into_iter().zip(done) {
            if let Err(e) = r {
                if !failed[k] {
                    results[guards[k].0] = Err(guards[k].1.fail(e));
                }
                failed[k] = true;
            }
        }
        let mut to_sync = Vec::new();
        for (k, (i, g)) in guards.iter_mut().enumerate() {
            if failed[k] {
                continue;
            }
            g.written_end = g.end();
            if g.dirty {
                to_sync.push(k);
            } else {
                g.durable_end = g.end();
            }
            g.advance();
            let _ = i;
        }
        let devs: Vec<&D> = to_sync.iter().map(|&k| &files[guards[k].0].dev).collect();
        for (&k, r) in to_sync.iter().zip(D::sync_batch(&devs)) {
            let (i, g) = &mut guards[k];
            match r {
                Ok(()) => {
                    g.dirty = false;
                    g.durable_end = g.end();
                }
                Err(e) => results[*i] = Err(g.fail(e)),
            }
        }
        results
    }
}

/// Zero-fills ahead of each tail that needs it (one batch for all, each write durable).
fn fill<D: ChunkDevice>(targets: &mut [(&D, &mut Tail)]) -> io::Result<()> {
    let mut writes = Vec::new();
    let mut ranges = Vec::new();
    for (k, (dev, tail)) in targets.iter().enumerate() {
        if let Some((from, to)) = tail.fill_needed() {
            let mut p = from;
            while p < to {
                let n = (to - p).min(CHUNK as u64) as usize;
                writes.push(ChunkWrite {
                    dev: *dev,
                    position: p,
                    bytes: &zeros()[..n],
                    dsync: true,
                });
                p += n as u64;
            }
            ranges.push((k, to));
        }
    }
    if writes.is_empty() {
        return Ok(());
    }
    D::write_batch(&writes)
        .into_iter()
        .collect::<io::Result<()>>()?;
    for (k, to) in ranges {
        targets[k].1.filled = to;
    }
    Ok(())
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

impl<D: ChunkDevice> TailFile<D> {
    /// Whether every byte of the data is on the device (written, maybe not synced).
    fn all_written(tail: &Tail) -> bool {
        tail.written_end >= tail.end()
    }

    /// Writes the pending bytes: only their aligned part unless `all`, never synced.
    fn write_out(&self, tail: &mut Tail, all: bool, fill_ahead: bool) -> io::Result<()> {
        tail.check()?;
        if fill_ahead {
            if let Err(e) = fill(&mut [(&self.dev, &mut *tail)]) {
                return Err(tail.fail(e));
            }
        }
        let upto = if all {
            tail.end()
        } else {
            align_down(tail.end())
        };
        if upto <= tail.written_end.max(tail.base) && Self::all_written(tail) {
            return Ok(());
        }
        let writes: Vec<_> = tail
            .pieces()
            .into_iter()
            .filter(|(p, _)| *p < upto)
            .map(|(position, bytes)| ChunkWrite {
                dev: &self.dev,
                position,
                bytes,
                dsync: false,
            })
            .collect();
        if writes.is_empty() {
            return Ok(());
        }
        let done = D::write_batch(&writes);
        drop(writes);
        tail.dirty = true;
        if let Err(e) = done.into_iter().collect::<io::Result<()>>() {
            return Err(tail.fail(e));
        }
        if all {
            tail.written_end = tail.end();
            tail.advance();
        } else {
            tail.written_end = tail.written_end.max(upto);
            tail.advance();
        }
        Ok(())
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
        let mut tail = self.lock();
        tail.check()?;
        if position != tail.end() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: a segment written through the direct path is appended to at its end {}, \
                     not written at {position}",
                    self.path.display(),
                    tail.end()
                ),
            ));
        }
        tail.reserve(buf.len());
        let len = tail.len;
        tail.buf.as_mut_slice()[len..len + buf.len()].copy_from_slice(buf);
        tail.len += buf.len();
        if tail.len >= SPILL {
            self.write_out(&mut tail, false, true)?;
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Self::sync_many(&[self]).pop().unwrap_or(Ok(()))
    }

    /// Cuts or trims the file. The pending bytes below `len` reach the device first: a trimmed segment is
    /// sealed and read (mapped) from the disk.
    fn set_len(&self, len: u64) -> io::Result<()> {
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
        self.write_out(&mut tail, true, false)?;
        if let Err(e) = self.dev.set_len(len) {
            return Err(tail.fail(e));
        }
        tail.filled = align_up(len);
        tail.dirty = true;
        Ok(())
    }

    /// Always trims: the zero fill ahead may have grown the file since any length was read.
    fn seal(&self, size: u64) -> io::Result<()> {
        self.set_len(size)
    }

    fn len(&self) -> io::Result<u64> {
        let end = self.lock().end();
        Ok(self.dev.len()?.max(end))
    }

    /// `None` while bytes are pending in memory: the file on disk lacks them, so nothing may map it.
    fn os_path(&self) -> Option<&Path> {
        let tail = self.lock();
        (Self::all_written(&tail) && self.dev.path().is_some()).then_some(self.path.as_path())
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
        let mut tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        if !Self::all_written(&tail) {
            let _ = self.write_out(&mut tail, true, false);
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
