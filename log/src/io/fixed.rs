//! What a thread's ring registers for the direct write path: buffers and a fixed-file table.
//!
//! - **Registered buffers** (`WRITE_FIXED`): the kernel pins their pages once, at registration, instead
//!   of at every write. Index [`STAGING`] is a buffer of [`STAGING_CHUNKS`] chunks that the data of one
//!   round of writes is copied into (16 KiB, a microsecond, beside the device write it feeds); index
//!   [`ZEROS`] is the zeros of the fill ahead, shared by every ring. Writes of a round beyond the staging
//!   space go from their own buffers, still in the same submission.
//! - **Fixed files** (`types::Fixed`): an operation on a slot of the table skips the look-up and
//!   reference count of its descriptor. A slot is filled on a file's first write from this thread and
//!   kept (a few hundred at most, the least recently used replaced); it is keyed by a [`FileKey`] that is
//!   never reused (descriptor numbers are), and emptied at the ring's next round once the file closed.
//!   Until then the slot keeps the closed file open: a deleted segment's blocks return to the file system
//!   when every thread that wrote it has done I/O again (or exited).
//!
//! Both are optional: the kernel refuses buffers beyond the memlock limit (`ulimit -l`, unless the process
//! holds `CAP_IPC_LOCK`), and then the writes go from ordinary buffers and descriptors, with the same
//! bytes on disk. The first refusal in a process is logged (tracing, warn).

#![allow(unsafe_code)]

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use io_uring::Submitter;

use super::direct::{self, AlignedBuf, ALIGN, CHUNK};

/// Chunks the staging buffer of a ring holds (512 KiB: two spills, or a group commit of 32 appenders'
/// 16 KiB batches). With the zeros, 768 KiB of locked memory per ring that writes: a default memlock
/// limit (8 MiB) covers ten writing threads.
pub(super) const STAGING_CHUNKS: usize = 32;
/// Slots of a ring's fixed-file table; more than the operations of one round, so a round never replaces
/// a slot that it uses itself.
pub(super) const FILE_SLOTS: u32 = 256;
/// The registered buffer that writes are copied into.
const STAGING: u16 = 0;
/// The registered zeros of the fill ahead.
const ZEROS: u16 = 1;

/// Bumped when a file with a [`FileKey`] closes: rings then empty the slots of closed files.
static CLOSED: AtomicU64 = AtomicU64::new(0);
static NEXT_KEY: AtomicU64 = AtomicU64::new(0);
static WARNED_BUFFERS: AtomicBool = AtomicBool::new(false);
static WARNED_FILES: AtomicBool = AtomicBool::new(false);

/// What this thread's ring has registered (see [`super::uring_registration`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    /// Writes go from registered buffers (`WRITE_FIXED`).
    pub buffers: bool,
    /// Writes and syncs name files by their slot in a fixed-file table.
    pub files: bool,
}

/// A file's identity in fixed-file tables: an id never reused, and a token whose end tells a table that
/// the file closed.
#[derive(Debug)]
pub(super) struct FileKey {
    id: u64,
    alive: Option<Arc<()>>,
}

impl FileKey {
    pub(super) fn new() -> Self {
        FileKey {
            id: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            alive: Some(Arc::new(())),
        }
    }
}

impl Drop for FileKey {
    /// The token ends before the bump, so a ring that sees the bump sees the file closed.
    fn drop(&mut self) {
        self.alive = None;
        CLOSED.fetch_add(1, Ordering::Release);
    }
}

#[derive(Debug)]
struct Slot {
    id: u64,
    alive: Weak<()>,
    /// The round that last used it.
    round: u64,
}

/// A ring's fixed-file table: which file each slot holds.
#[derive(Debug)]
struct FileTable {
    slots: Vec<Option<Slot>>,
    /// Where the search for a slot to replace starts (round robin).
    hand: usize,
    seen_closed: u64,
}

/// The registered resources of one ring; see the module docs.
#[derive(Debug)]
pub(super) struct Registered {
    /// Registered at index [`STAGING`], with [`direct::zeros`] at [`ZEROS`]; `None` when refused.
    staging: Option<AlignedBuf>,
    /// Staging bytes used by the current round.
    used: usize,
    files: Option<FileTable>,
    round: u64,
}

impl Registered {
    /// Registers the buffers and the file table with `submitter`'s ring; each that the kernel refuses is
    /// left out.
    pub(super) fn register(submitter: &Submitter<'_>) -> Registered {
        let staging = AlignedBuf::new(STAGING_CHUNKS * CHUNK);
        let zeros = direct::zeros();
        let iovecs = [
            libc::iovec {
                iov_base: staging.as_slice().as_ptr() as *mut libc::c_void,
                iov_len: staging.as_slice().len(),
            },
            libc::iovec {
                iov_base: zeros.as_ptr() as *mut libc::c_void,
                iov_len: zeros.len(),
            },
        ];
        // SAFETY: both buffers outlive the registration: the staging buffer is dropped with this
        // `Registered`, which `Ring` drops after its ring; the zeros are static. The kernel only reads
        // them (writes to files), and the staging buffer is refilled only between rounds, when no
        // operation is in flight.
        let staging = match unsafe { submitter.register_buffers(&iovecs) } {
            Ok(()) => Some(staging),
            Err(e) => {
                refused(&WARNED_BUFFERS, "registered buffers", &e);
                None
            }
        };
        let files = match submitter.register_files_sparse(FILE_SLOTS) {
            Ok(()) => Some(FileTable {
                slots: (0..FILE_SLOTS).map(|_| None).collect(),
                hand: 0,
                seen_closed: CLOSED.load(Ordering::Acquire),
            }),
            Err(e) => {
                refused(&WARNED_FILES, "a fixed-file table", &e);
                None
            }
        };
        Registered {
            staging,
            used: 0,
            files,
            round: 0,
        }
    }

    pub(super) fn state(&self) -> Registration {
        Registration {
            buffers: self.staging.is_some(),
            files: self.files.is_some(),
        }
    }

    /// Starts a round of operations (one submission, reaped whole before the next): the staging buffer
    /// is free again, and slots of files closed since the last round are emptied.
    pub(super) fn begin_round(&mut self, submitter: &Submitter<'_>) {
        self.round += 1;
        self.used = 0;
        if let Some(table) = &mut self.files {
            table.sweep_closed(submitter);
        }
    }

    /// Registered memory holding `bytes` for a write of this round: the zeros as they are, anything
    /// else copied into the staging buffer while it has room. `None`: write from `bytes` themselves.
    pub(super) fn buffer(&mut self, bytes: &[u8]) -> Option<(*const u8, u16)> {
        let staging = self.staging.as_mut()?;
        let zeros = direct::zeros();
        let (z, n) = (zeros.as_ptr() as usize, bytes.as_ptr() as usize);
        if n >= z && n + bytes.len() <= z + zeros.len() {
            return Some((bytes.as_ptr(), ZEROS));
        }
        let room = &mut staging.as_mut_slice()[self.used..];
        if bytes.len() > room.len() {
            return None;
        }
        room[..bytes.len()].copy_from_slice(bytes);
        let at = room.as_ptr();
        self.used += (bytes.len() as u64).div_ceil(ALIGN) as usize * ALIGN as usize;
        self.used = self.used.min(staging.as_slice().len());
        Some((at, STAGING))
    }

    /// The slot of the file `key` (descriptor `fd`) in this ring's table, filled on a miss; `None`: name
    /// the file by its descriptor.
    pub(super) fn file(
        &mut self,
        submitter: &Submitter<'_>,
        key: &FileKey,
        fd: RawFd,
    ) -> Option<u32> {
        let round = self.round;
        self.files.as_mut()?.slot_for(submitter, key, fd, round)
    }
}

impl FileTable {
    fn slot_for(
        &mut self,
        submitter: &Submitter<'_>,
        key: &FileKey,
        fd: RawFd,
        round: u64,
    ) -> Option<u32> {
        let alive = key.alive.as_ref()?;
        if let Some(i) = self
            .slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.id == key.id))
        {
            if let Some(slot) = &mut self.slots[i] {
                slot.round = round;
            }
            return Some(i as u32);
        }
        let i = self.victim(round);
        // A failed update (the file table full of the kernel's own, or an old kernel) leaves the slot as
        // it was; the write names the descriptor instead.
        submitter.register_files_update(i as u32, &[fd]).ok()?;
        self.slots[i] = Some(Slot {
            id: key.id,
            alive: Arc::downgrade(alive),
            round,
        });
        Some(i as u32)
    }

    /// An empty slot, else the next one round robin that this round does not use.
    fn victim(&mut self, round: u64) -> usize {
        if let Some(i) = self.slots.iter().position(Option::is_none) {
            return i;
        }
        let n = self.slots.len();
        let i = (0..n)
            .map(|k| (self.hand + k) % n)
            .find(|&i| self.slots[i].as_ref().is_some_and(|s| s.round != round));
        // A round has at most `RING_ENTRIES` operations, fewer than the slots.
        let i = i.expect("a round uses fewer files than the fixed-file table has slots");
        self.hand = (i + 1) % n;
        i
    }

    /// Empties the slots of closed files (the kernel's reference would keep them open).
    fn sweep_closed(&mut self, submitter: &Submitter<'_>) {
        let closed = CLOSED.load(Ordering::Acquire);
        if closed == self.seen_closed {
            return;
        }
        self.seen_closed = closed;
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if slot.as_ref().is_some_and(|s| s.alive.strong_count() == 0)
                && submitter.register_files_update(i as u32, &[-1]).is_ok()
            {
                *slot = None;
            }
        }
    }
}

fn refused(warned: &AtomicBool, what: &str, e: &std::io::Error) {
    if !warned.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "io_uring refused {what} ({e}; for buffers see the memlock limit, `ulimit -l`): the direct \
             write path goes on without them, at the cost of a page pinning or a descriptor look-up per \
             write"
        );
    } else {
        tracing::debug!("io_uring refused {what} on this thread's ring ({e})");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use io_uring::IoUring;

    fn scratch_file(name: &str) -> std::fs::File {
        let path = std::env::temp_dir().join(format!("klog-fixed-{}-{name}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        file
    }

    /// A ring with its registration, or None where this kernel or process refuses a fixed-file table.
    fn registered() -> Option<(IoUring, Registered)> {
        let ring = IoUring::new(8).ok()?;
        let reg = Registered::register(&ring.submitter());
        reg.files.is_some().then_some((ring, reg))
    }

    fn occupied(reg: &Registered) -> usize {
        let table = reg.files.as_ref().unwrap();
        table.slots.iter().filter(|s| s.is_some()).count()
    }

    #[test]
    fn a_file_keeps_its_slot_until_it_closes_and_the_next_round_empties_it() {
        use std::os::fd::AsRawFd;
        let Some((ring, mut reg)) = registered() else {
            return;
        };
        let (a, b) = (scratch_file("a"), scratch_file("b"));
        let (ka, kb) = (FileKey::new(), FileKey::new());
        reg.begin_round(&ring.submitter());
        let sa = reg.file(&ring.submitter(), &ka, a.as_raw_fd()).unwrap();
        let sb = reg.file(&ring.submitter(), &kb, b.as_raw_fd()).unwrap();
        assert_ne!(sa, sb);
        reg.begin_round(&ring.submitter());
        assert_eq!(reg.file(&ring.submitter(), &ka, a.as_raw_fd()), Some(sa));
        drop(ka);
        assert_eq!(occupied(&reg), 2, "emptied only at the next round");
        reg.begin_round(&ring.submitter());
        assert_eq!(occupied(&reg), 1, "the closed file's slot is emptied");
        assert_eq!(reg.file(&ring.submitter(), &kb, b.as_raw_fd()), Some(sb));
    }

    #[test]
    fn a_full_table_replaces_a_slot_that_the_round_does_not_use() {
        use std::os::fd::AsRawFd;
        let Some((ring, mut reg)) = registered() else {
            return;
        };
        let file = scratch_file("full");
        let keys: Vec<FileKey> = (0..FILE_SLOTS).map(|_| FileKey::new()).collect();
        reg.begin_round(&ring.submitter());
        for k in &keys {
            reg.file(&ring.submitter(), k, file.as_raw_fd()).unwrap();
        }
        reg.begin_round(&ring.submitter());
        let first = reg.file(&ring.submitter(), &keys[0], file.as_raw_fd());
        let extra = FileKey::new();
        let slot = reg.file(&ring.submitter(), &extra, file.as_raw_fd());
        assert!(
            slot.is_some() && slot != first,
            "{slot:?} replaced {first:?}"
        );
        assert_eq!(occupied(&reg), FILE_SLOTS as usize);
    }

    #[test]
    fn zeros_are_written_in_place_and_data_from_a_copy_while_the_staging_buffer_has_room() {
        let Ok(ring) = IoUring::new(8) else {
            return;
        };
        let mut reg = Registered::register(&ring.submitter());
        if reg.staging.is_none() {
            return;
        }
        reg.begin_round(&ring.submitter());
        let zeros = &direct::zeros()[..CHUNK];
        assert_eq!(reg.buffer(zeros), Some((zeros.as_ptr(), ZEROS)));
        let data = vec![7u8; CHUNK];
        for _ in 0..STAGING_CHUNKS {
            let (at, index) = reg.buffer(&data).unwrap();
            assert_eq!(index, STAGING);
            // SAFETY: `at` points at CHUNK bytes of the staging buffer, which `reg` owns.
            #[allow(unsafe_code)]
            let staged = unsafe { std::slice::from_raw_parts(at, CHUNK) };
            assert_eq!(staged, &data[..]);
        }
        assert_eq!(
            reg.buffer(&data),
            None,
            "full: the write goes from its own buffer"
        );
        reg.begin_round(&ring.submitter());
        assert!(reg.buffer(&data).is_some(), "free again in the next round");
    }
}
