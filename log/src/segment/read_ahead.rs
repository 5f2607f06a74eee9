//! The second core of a segment's recovery pass (`recover.rs`): while the recovering thread checks chunk
//! k (the CRC-32C of every batch, the indexes, the producer state), a helper thread reads chunk k+1 into
//! the next buffer of a small ring. A `pread` into a buffer that stays in the CPU cache costs less than
//! mapping the same bytes (populating and unmapping a 16 MiB window cost more than copying it out on the
//! AMD EPYC machines, BENCHMARKS.md "Recovery"), and the CRC of cached bytes is a fraction of the copy:
//! with the copy on one core and the check on the other, the pass takes about the time of the copy.
//!
//! The chunks are read in order, each from where the last one ended, and handed to the pass in that
//! order, so the pass checks the same bytes in the same slices with or without the helper: only where the
//! read runs changes. Without a helper (a segment of one chunk, no core to spare, no thread to be had)
//! each chunk is read on the calling thread when it is asked for.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::Scope;

use crate::io::StorageFile;

/// Bytes read at a time (one `pread`); with `HEADROOM`, a buffer stays in a core's 1 MiB L2 cache.
pub(super) const CHUNK: usize = 1 << 20;
/// Bytes before each chunk in its buffer: the batch the last chunk's end cut is copied there, in front
/// of the rest of it, so the pass checks it in place. A larger one is carried in a buffer of its own.
pub(super) const HEADROOM: usize = 128 << 10;
/// Buffers in the ring: the one being checked, the one being read, and one ready between them.
pub(super) const BUFFERS: usize = 3;

/// Recovery passes running in this process now: a pass takes a helper only while every running pass
/// could have one (a log directory recovered on as many threads as cores has no core to spare, and a
/// helper there would only add its hand-offs to the same work).
static PASSES: AtomicUsize = AtomicUsize::new(0);

/// A pass counted in [`PASSES`] while it lives.
pub(super) struct Pass(());

impl Pass {
    /// Counts a pass; whether a core is free for its helper.
    pub(super) fn begin() -> (Self, bool) {
        let running = PASSES.fetch_add(1, Ordering::AcqRel) + 1;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (Pass(()), running * 2 <= cores)
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        PASSES.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A chunk of the file: its bytes are `buf[HEADROOM..HEADROOM + len]`; `len` is 0 at the file's end.
pub(super) struct Chunk {
    pub(super) buf: Vec<u8>,
    pub(super) len: usize,
}

/// Reads `[position, position + want)` of `file` into `buf` after its headroom (one `read_at`, as the
/// pass without a helper does).
fn read_chunk(
    file: &dyn StorageFile,
    mut buf: Vec<u8>,
    position: u64,
    want: usize,
) -> io::Result<Chunk> {
    buf.resize(HEADROOM + want, 0);
    let len = file.read_at(&mut buf[HEADROOM..], position)?;
    Ok(Chunk { buf, len })
}

type Helper = (mpsc::Sender<Vec<u8>>, mpsc::Receiver<io::Result<Chunk>>);

/// The chunks of one segment's `.log`, in order: read ahead by a helper thread, or here when asked.
pub(super) struct ReadAhead<'env> {
    file: &'env dyn StorageFile,
    size: u64,
    /// Where the next chunk starts: the end of the chunks handed out.
    read_to: u64,
    helper: Option<Helper>,
    /// Buffers not lent out (without a helper: those the next chunks are read into).
    spare: Vec<Vec<u8>>,
}

impl<'env> ReadAhead<'env> {
    /// The chunks of the first `size` bytes of `file`, read ahead by a thread in `scope` when `spawn`
    /// and the thread can be started. `pool` lends the ring's buffers (kept across a log's segments, so
    /// they are allocated and faulted in once per open); [`finish`](Self::finish) returns them.
    pub(super) fn start<'scope>(
        scope: &'scope Scope<'scope, 'env>,
        file: &'env dyn StorageFile,
        size: u64,
        spawn: bool,
        pool: &mut Vec<Vec<u8>>,
    ) -> Self {
        // New buffers first: the last one given back is the first one read into again (the pass of a
        // single chunk then uses one buffer however many segments it recovers).
        let lent = pool.len().saturating_sub(BUFFERS);
        let mut spare: Vec<Vec<u8>> = (pool.len() - lent..BUFFERS).map(|_| Vec::new()).collect();
        spare.extend(pool.drain(lent..));
        let helper = if spawn {
            // The helper fills every buffer: the pass checks the chunks it hands over in them.
            Self::spawn(scope, file, size).inspect(|(empties, _)| {
                for buf in spare.drain(..).rev() {
                    let _ = empties.send(buf);
                }
            })
        } else {
            None
        };
        ReadAhead {
            file,
            size,
            read_to: 0,
            helper,
            spare,
        }
    }

    fn spawn<'scope>(
        scope: &'scope Scope<'scope, 'env>,
        file: &'env dyn StorageFile,
        size: u64,
    ) -> Option<Helper> {
        let (empties, empty) = mpsc::channel::<Vec<u8>>();
        let (chunks, filled) = mpsc::channel::<io::Result<Chunk>>();
        std::thread::Builder::new()
            .name("klog-recover-read".into())
            .spawn_scoped(scope, move || {
                let mut read_to = 0u64;
                for buf in empty {
                    let want = (size - read_to).min(CHUNK as u64) as usize;
                    let chunk = read_chunk(file, buf, read_to, want);
                    if let Ok(c) = &chunk {
                        read_to += c.len as u64;
                    }
                    let last = chunk.as_ref().map_or(true, |c| c.len == 0) || read_to >= size;
                    if chunks.send(chunk).is_err() || last {
                        return;
                    }
                }
            })
            .ok()?;
        Some((empties, filled))
    }

    /// Whether the chunks are read by a helper thread.
    #[cfg(test)]
    pub(super) fn has_helper(&self) -> bool {
        self.helper.is_some()
    }

    /// The next chunk, from where the last one ended (`len` 0 past the file's end).
    pub(super) fn next(&mut self) -> io::Result<Chunk> {
        let ahead = self
            .helper
            .as_ref()
            .and_then(|(_, filled)| filled.recv().ok());
        let chunk = match ahead {
            Some(Ok(chunk)) => chunk,
            _ => {
                // No helper, it is gone, or its read failed: the chunk is read here, so only an error of
                // this thread's read fails the pass (not one of the helper's own, a ring it could not
                // set up say). The helper stops after an error.
                self.helper = None;
                let buf = self.spare.pop().unwrap_or_default();
                let want = (self.size - self.read_to).min(CHUNK as u64) as usize;
                read_chunk(self.file, buf, self.read_to, want)?
            }
        };
        self.read_to += chunk.len as u64;
        Ok(chunk)
    }

    /// Where the chunks handed out so far end.
    pub(super) fn position(&self) -> u64 {
        self.read_to
    }

    /// Gives a buffer back to be read into again.
    pub(super) fn recycle(&mut self, buf: Vec<u8>) {
        match &self.helper {
            Some((empties, _)) => {
                if let Err(mpsc::SendError(buf)) = empties.send(buf) {
                    self.spare.push(buf);
                }
            }
            None => self.spare.push(buf),
        }
    }

    /// Stops the helper (after the read it is doing) and returns every buffer to `pool`.
    pub(super) fn finish(mut self, pool: &mut Vec<Vec<u8>>) {
        if let Some((empties, filled)) = self.helper.take() {
            drop(empties);
            // Ends when the helper has returned, dropping its sender.
            pool.extend(filled.into_iter().filter_map(|c| c.ok()).map(|c| c.buf));
        }
        pool.append(&mut self.spare);
    }
}
