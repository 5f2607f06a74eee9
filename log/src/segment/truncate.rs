//! A segment's truncation (Kafka's `LogSegment.truncateTo`): cutting the `.log` and its indexes back to
//! an offset, replacing a `.log` that may be mapped instead of shrinking it in place.

use std::sync::atomic::Ordering;

use crate::error::IoContext;
use crate::Error;

use super::LogSegment;

/// Bytes copied at a time when a truncation replaces a `.log` that was mapped (`replace_with_prefix`).
const REPLACE_CHUNK: u64 = 1 << 20;

impl LogSegment {
    /// Kafka's `truncateTo`: drops every batch with offset >= `offset`; the segment becomes active.
    /// Returns the bytes removed.
    pub fn truncate_to(&self, offset: i64) -> Result<u64, Error> {
        let found = self.translate_offset(offset, 0)?;
        let new_size = match found {
            Some(p) if p.last_offset >= offset && (p.position as u64) < self.size() => {
                p.position as u64
            }
            _ => self.size(),
        };
        let old = self.size();
        let mut state = self.state();
        state.offset_index.truncate_to(offset)?;
        state.time_index.truncate_to(offset)?;
        state.txn_index.truncate_to(offset)?;
        if new_size < old {
            if state.ever_mapped {
                state.mapped = None;
                drop(state);
                self.replace_with_prefix(new_size)?;
                state = self.state();
            } else {
                // Durable at once: truncated batches must not come back after a crash.
                let log = self.log_file();
                log.set_len(new_size).at(&self.log_path_of())?;
                log.sync().at(&self.log_path_of())?;
            }
        }
        self.size.store(new_size, Ordering::Release);
        if new_size == 0 {
            state.rolling_based_timestamp = None;
        }
        state.bytes_since_last_index_entry = 0;
        state.max_timestamp_so_far = None;
        self.load_max_timestamp(&mut state)?;
        drop(state);
        self.rescan_max_timestamp_after_index()?;
        self.active.store(true, Ordering::Release);
        Ok(old - new_size)
    }

    /// Replaces the `.log` with its first `len` bytes in a new file, so maps of the old file stay valid.
    /// The prefix is copied through one buffer of at most `REPLACE_CHUNK` bytes (a truncation into a
    /// 1 GiB sealed segment must not hold 1 GiB), written to a temp name of its own (`<name>.log.<pid>-<n>.tmp`), synced, renamed over the
    /// `.log` and the directory synced: a crash leaves the old file or the new one (a stray `.tmp` is
    /// removed by the next open).
    pub(super) fn replace_with_prefix(&self, len: u64) -> Result<(), Error> {
        let path = self.log_path_of();
        let tmp = crate::io::unique_tmp_path(&path);
        let file = self.storage.create(&tmp).at(&tmp)?;
        let old = self.log_file();
        let mut buf = vec![0u8; (len.min(REPLACE_CHUNK)) as usize];
        let mut copied = 0u64;
        while copied < len {
            let want = (len - copied).min(buf.len() as u64) as usize;
            let n = old.read_at(&mut buf[..want], copied).at(&path)?;
            if n == 0 {
                let why = format!("the .log ends at {copied} bytes, before the {len} kept");
                let eof = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, why);
                return Err(Error::io(&path, eof));
            }
            file.write_at(&buf[..n], copied).at(&tmp)?;
            copied += n as u64;
        }
        file.sync().at(&tmp)?;
        drop(file);
        self.storage.rename(&tmp, &path).at(&path)?;
        self.storage.sync_dir(&self.dir).at(&self.dir)?;
        *self.log.lock().expect("segment log lock poisoned") =
            self.storage.open(&path).at(&path)?;
        Ok(())
    }
}
