//! Walking the batches of a file in bounded memory (Kafka's `FileLogInputStream`): a window of a few MiB
//! advances batch by batch, a batch larger than the window is read alone (bounded by its checked length,
//! never past the end), and a zero-filled tail is checked a window at a time, never held.
//!
//! The walk sees exactly what [`Batches`] would see over the whole file in one slice: the same batches,
//! errors, positions and [`Tail`], so `dump`, `verify` and the log end offset stay in step with recovery.

use std::ops::ControlFlow;

use super::batches::{AnyBatch, Batches, Tail};
use super::{HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MIN_RECORD_OVERHEAD};
use crate::{Corruption, Error};

/// The window of a walk unless the caller picks one.
pub const DEFAULT_WINDOW_BYTES: usize = 4 << 20;

/// Reads up to `buf.len()` bytes at a position of the file; fewer only at its end.
pub type ReadAt<'a> = dyn FnMut(&mut [u8], u64) -> Result<usize, Error> + 'a;

/// Takes each batch of a walk (or the error that ends it); `Break` stops the walk.
pub type OnBatch<'a, E> =
    dyn for<'b> FnMut(Result<AnyBatch<'b>, Error>) -> Result<ControlFlow<()>, E> + 'a;

/// One reusable buffer walking files batch by batch.
#[derive(Debug)]
pub struct BatchStream {
    window: usize,
    verify_crc: bool,
    buf: Vec<u8>,
    bytes_read: u64,
}

impl Default for BatchStream {
    fn default() -> Self {
        Self::new(DEFAULT_WINDOW_BYTES)
    }
}

impl BatchStream {
    /// A stream reading through a window of `window_bytes` (at least one batch beyond it).
    pub fn new(window_bytes: usize) -> Self {
        BatchStream {
            window: window_bytes.max(HEADER_SIZE_UP_TO_MAGIC),
            verify_crc: true,
            buf: Vec::new(),
            bytes_read: 0,
        }
    }

    /// Skips the CRC check (structure is still checked), as [`Batches::without_crc`].
    pub fn without_crc(mut self) -> Self {
        self.verify_crc = false;
        self
    }

    /// Whether the walks from now on check each batch's CRC (see [`BatchStream::without_crc`]).
    pub fn set_verify_crc(&mut self, verify: bool) {
        self.verify_crc = verify;
    }

    /// Bytes read from files so far: what a caller proves a walk linear with.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// Hands every batch in `[start, end)` to `on_batch` (an error ends the walk after it is handed over,
    /// as [`Batches`] does). Returns how the data ended, or `None` when `on_batch` stopped the walk.
    pub fn scan<E: From<Error>>(
        &mut self,
        read_at: &mut ReadAt<'_>,
        start: u64,
        end: u64,
        on_batch: &mut OnBatch<'_, E>,
    ) -> Result<Option<Tail>, E> {
        // `buf[..filled]` holds the file's bytes from `buf_start`; `read_to` is the next byte to read.
        let (mut filled, mut buf_start, mut read_to) = (0usize, start, start);
        loop {
            let want = self.next_read(filled, read_to, end);
            if self.buf.len() < filled + want {
                self.buf.resize(filled + want, 0);
            }
            let n = self.read(read_at, filled, want, read_to)?;
            filled += n;
            read_to += n as u64;
            let at_end = read_to >= end || n < want;
            let mut batches = Batches::at(&self.buf[..filled], buf_start);
            if !self.verify_crc {
                batches = batches.without_crc();
            }
            for batch in batches.by_ref() {
                if on_batch(batch)?.is_break() {
                    return Ok(None);
                }
            }
            let tail = batches.tail().unwrap_or(Tail::Clean);
            let consumed = (batches.position() - buf_start) as usize;
            match tail {
                Tail::Corrupt { position, .. } => {
                    let bytes = end.saturating_sub(position);
                    return Ok(Some(Tail::Corrupt { position, bytes }));
                }
                _ if at_end => return Ok(Some(tail)),
                Tail::ZeroFilled { position, bytes } if bytes >= HEADER_SIZE_UP_TO_MAGIC as u64 => {
                    return self.zero_run(read_at, position, read_to, end, on_batch);
                }
                Tail::Partial { position, .. } => {
                    if let Some(size) = self.declared_size(consumed, filled) {
                        if position + size > end {
                            // Cut by the end of the data whatever comes: a torn tail, not read further.
                            let bytes = end - position;
                            return Ok(Some(Tail::Partial { position, bytes }));
                        }
                    }
                }
                _ => {}
            }
            self.buf.copy_within(consumed..filled, 0);
            filled -= consumed;
            buf_start += consumed as u64;
        }
    }

    /// A window, or the rest of a batch larger than it that starts the buffer; never past `end`.
    fn next_read(&self, filled: usize, read_to: u64, end: u64) -> usize {
        let rest = self
            .declared_size(0, filled)
            .map_or(0, |size| (size as usize).saturating_sub(filled));
        (self.window.max(rest) as u64).min(end.saturating_sub(read_to)) as usize
    }

    /// The whole size the batch at `buf[at..filled]` declares, once its length field is in.
    fn declared_size(&self, at: usize, filled: usize) -> Option<u64> {
        let field = self
            .buf
            .get(at + 8..at + LOG_OVERHEAD)
            .filter(|_| at + LOG_OVERHEAD <= filled)?;
        let size = i32::from_be_bytes(field.try_into().expect("4 bytes"));
        (size >= MIN_RECORD_OVERHEAD).then_some(LOG_OVERHEAD as u64 + size as u64)
    }

    /// Fills `buf[at..at + want]` from `position`, short only at the end of the file.
    fn read(
        &mut self,
        read_at: &mut ReadAt<'_>,
        at: usize,
        want: usize,
        position: u64,
    ) -> Result<usize, Error> {
        let mut done = 0;
        while done < want {
            let n = read_at(&mut self.buf[at + done..at + want], position + done as u64)?;
            if n == 0 {
                break;
            }
            done += n;
        }
        self.bytes_read += done as u64;
        Ok(done)
    }

    /// Zeros from `zero_start` (at least a length field's worth): a preallocated tail if they reach the
    /// end, else the zero length field is a corrupt batch there, as [`Batches`] would say.
    fn zero_run<E: From<Error>>(
        &mut self,
        read_at: &mut ReadAt<'_>,
        zero_start: u64,
        mut read_to: u64,
        end: u64,
        on_batch: &mut OnBatch<'_, E>,
    ) -> Result<Option<Tail>, E> {
        while read_to < end {
            let want = (self.window as u64).min(end - read_to) as usize;
            if self.buf.len() < want {
                self.buf.resize(want, 0);
            }
            let n = self.read(read_at, 0, want, read_to)?;
            if self.buf[..n].iter().any(|&b| b != 0) {
                let reason = Corruption::BatchLengthTooSmall {
                    batch_length: 0,
                    minimum: MIN_RECORD_OVERHEAD,
                };
                let _ = on_batch(Err(Error::corrupt(zero_start, reason)))?;
                let bytes = end - zero_start;
                return Ok(Some(Tail::Corrupt {
                    position: zero_start,
                    bytes,
                }));
            }
            read_to += n as u64;
            if n < want {
                break;
            }
        }
        let bytes = read_to - zero_start;
        Ok(Some(Tail::ZeroFilled {
            position: zero_start,
            bytes,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{BatchBuilder, Compression};

    fn batches(sizes: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        for (base, &size) in sizes.iter().enumerate() {
            let mut b = BatchBuilder::new(Compression::None).base_offset(base as i64);
            b.append(1, Some(b"k"), Some(&vec![7u8; size]), &[])
                .unwrap();
            b.build_into(&mut out).unwrap();
        }
        out
    }

    /// (position, last offset) of every batch, the error positions, the tail.
    type Seen = (Vec<(u64, i64)>, Vec<u64>, Option<Tail>);

    /// What a walk saw, and the bytes it read.
    fn walk(data: &[u8], window: usize) -> (Seen, u64) {
        let mut stream = BatchStream::new(window);
        let seen = walk_with(&mut stream, data);
        (seen, stream.bytes_read())
    }

    /// What a walk through `stream` (maybe used before) saw.
    fn walk_with(stream: &mut BatchStream, data: &[u8]) -> Seen {
        let (mut seen, mut errors) = (Vec::new(), Vec::new());
        let mut read_at = |buf: &mut [u8], pos: u64| -> Result<usize, Error> {
            let from = (pos as usize).min(data.len());
            let n = buf.len().min(data.len() - from);
            buf[..n].copy_from_slice(&data[from..from + n]);
            Ok(n)
        };
        let tail = stream
            .scan::<Error>(&mut read_at, 0, data.len() as u64, &mut |b| {
                match b {
                    Ok(b) => seen.push((b.position(), b.last_offset())),
                    Err(Error::CorruptBatch { position, .. }) => errors.push(position),
                    Err(e) => return Err(e),
                }
                Ok(ControlFlow::Continue(()))
            })
            .unwrap();
        (seen, errors, tail)
    }

    /// What one slice over the whole data yields.
    fn whole(data: &[u8]) -> Seen {
        let mut it = Batches::new(data);
        let (mut seen, mut errors) = (Vec::new(), Vec::new());
        for b in it.by_ref() {
            match b {
                Ok(b) => seen.push((b.position(), b.last_offset())),
                Err(Error::CorruptBatch { position, .. }) => errors.push(position),
                Err(e) => panic!("{e}"),
            }
        }
        (seen, errors, it.tail())
    }

    fn same_as_one_slice(data: &[u8]) {
        for window in [17, 64, 100, 1000, 5000, 1 << 20] {
            let ((seen, errors, tail), read) = walk(data, window);
            let (w_seen, w_errors, w_tail) = whole(data);
            assert_eq!((&seen, &errors), (&w_seen, &w_errors), "window {window}");
            match (tail, w_tail) {
                // The walk names every byte from the corrupt batch on, not only the window's.
                (
                    Some(Tail::Corrupt { position: a, .. }),
                    Some(Tail::Corrupt { position: b, .. }),
                ) => {
                    assert_eq!(a, b, "window {window}")
                }
                (a, b) => assert_eq!(a, b, "window {window}"),
            }
            assert!(read <= data.len() as u64, "window {window}: read {read}");
        }
    }

    #[test]
    fn any_window_sees_what_one_slice_sees() {
        let data = batches(&[10, 3000, 1, 20_000, 5]);
        same_as_one_slice(&data);
        let mut torn = data.clone();
        torn.truncate(data.len() - 3);
        same_as_one_slice(&torn);
        let mut zeros = data.clone();
        zeros.extend(vec![0u8; 70_000]);
        same_as_one_slice(&zeros);
        let mut zeros_then_data = zeros.clone();
        zeros_then_data.extend(batches(&[1]));
        same_as_one_slice(&zeros_then_data);
        let mut bad_crc = data.clone();
        bad_crc[100] ^= 1;
        same_as_one_slice(&bad_crc);
        let mut few_zeros = data.clone();
        few_zeros.extend([0u8; 5]);
        same_as_one_slice(&few_zeros);
    }

    #[test]
    fn a_reused_stream_sees_only_the_file_it_walks() {
        // The buffer keeps the last file's bytes past what a read fills: none of them may show.
        let big = batches(&[20_000, 30_000, 10]);
        let small = batches(&[10, 3000, 1]);
        let mut torn = small.clone();
        torn.truncate(small.len() - 3);
        let mut zeros = small.clone();
        zeros.extend(vec![0u8; 9000]);
        let mut bad_crc = small.clone();
        bad_crc[100] ^= 1;
        for window in [64, 5000, 1 << 20] {
            let mut stream = BatchStream::new(window);
            for data in [&big, &torn, &big, &small, &zeros, &bad_crc, &Vec::new()] {
                let (seen, errors, tail) = walk_with(&mut stream, data);
                let (w_seen, w_errors, w_tail) = whole(data);
                assert_eq!((&seen, &errors), (&w_seen, &w_errors), "window {window}");
                match (tail, w_tail) {
                    (
                        Some(Tail::Corrupt { position: a, .. }),
                        Some(Tail::Corrupt { position: b, .. }),
                    ) => {
                        assert_eq!(a, b, "window {window}")
                    }
                    (a, b) => assert_eq!(a, b, "window {window}"),
                }
            }
        }
    }

    #[test]
    fn a_length_past_the_end_is_not_read() {
        let mut data = batches(&[10, 10]);
        let second = data.len() / 2;
        data[second + 8..second + 12].copy_from_slice(&i32::MAX.to_be_bytes());
        let ((seen, _, tail), read) = walk(&data, 64);
        assert_eq!(seen.len(), 1);
        assert_eq!(
            tail,
            Some(Tail::Partial {
                position: second as u64,
                bytes: (data.len() - second) as u64
            })
        );
        assert!(read <= data.len() as u64);
    }

    #[test]
    fn a_stop_ends_the_walk() {
        let data = batches(&[10, 10, 10]);
        let mut stream = BatchStream::new(1 << 20);
        let mut read_at = |buf: &mut [u8], pos: u64| -> Result<usize, Error> {
            let n = buf.len().min(data.len() - pos as usize);
            buf[..n].copy_from_slice(&data[pos as usize..pos as usize + n]);
            Ok(n)
        };
        let mut seen = 0;
        let tail = stream
            .scan::<Error>(&mut read_at, 0, data.len() as u64, &mut |_| {
                seen += 1;
                Ok(ControlFlow::Break(()))
            })
            .unwrap();
        assert_eq!((seen, tail), (1, None));
    }
}
