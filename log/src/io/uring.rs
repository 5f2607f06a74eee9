//! The uring backend: reads, writes and fdatasync as io_uring operations, on one ring per thread.
//!
//! Every call is synchronous: it pushes its operations, enters the kernel once to submit them and wait,
//! and returns only after every operation it pushed has completed. So the buffers a caller lends are
//! borrowed for longer than the kernel uses them, and the public API is safe. One shared ring would need
//! a lock that queues every reader behind every fdatasync, so each thread that does I/O gets its own
//! small ring instead, made on its first call and closed when the thread exits.
//!
//! What it buys: `write_at_and_sync` links the write to an fdatasync, one system call for both. What it
//! does not: a buffered write through io_uring costs more than pwrite on ext4, and an fdatasync always
//! runs on an io-wq worker thread (`shared/spec/field-notes.md` §2.5, §6), so one operation at a time is
//! no faster than std. Directory operations, opening files, `set_len` and `len` are metadata calls and
//! go through std.

#![allow(unsafe_code)]

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use io_uring::{opcode, squeue, types, IoUring, Probe};

use super::{StdStorage, Storage, StorageFile};

/// Linux moves at most this many bytes in one read or write (`MAX_RW_COUNT`); larger buffers go in pieces.
const MAX_RW_BYTES: usize = 0x7fff_f000;
/// A call has at most two operations in flight (a write linked to an fdatasync).
const RING_ENTRIES: u32 = 4;

thread_local! {
    /// This thread's ring; `None` until its first I/O, and again after a ring had to be discarded.
    static RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };
}

/// Checks that this process may use io_uring for reads, writes and fsync: it builds a ring and probes
/// the opcodes. The error says why not (old kernel, seccomp or sysctl, memlock limit).
pub fn uring_available() -> io::Result<()> {
    let ring = new_ring()?;
    let mut probe = Probe::new();
    ring.submitter().register_probe(&mut probe).map_err(|e| {
        unavailable(
            e,
            "the kernel cannot list its io_uring opcodes (older than 5.6)",
        )
    })?;
    for (code, name) in [
        (opcode::Read::CODE, "READ"),
        (opcode::Write::CODE, "WRITE"),
        (opcode::Fsync::CODE, "FSYNC"),
    ] {
        if !probe.is_supported(code) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("io_uring unavailable: the kernel lacks the {name} opcode"),
            ));
        }
    }
    Ok(())
}

/// Storage whose file reads, writes and syncs go through io_uring. Build it with [`UringStorage::new`],
/// which fails when io_uring is unavailable.
#[derive(Debug)]
pub struct UringStorage {
    dirs: StdStorage,
}

impl UringStorage {
    /// A ring of its own; fails where io_uring is missing or forbidden.
    pub fn new() -> io::Result<Self> {
        uring_available()?;
        Ok(UringStorage { dirs: StdStorage })
    }
}

#[derive(Debug)]
struct UringFile {
    file: File,
    path: PathBuf,
}

impl UringFile {
    fn fd(&self) -> types::Fd {
        types::Fd(self.file.as_raw_fd())
    }

    fn write_entry(&self, buf: &[u8], position: u64) -> io::Result<squeue::Entry> {
        let len = buf.len().min(MAX_RW_BYTES) as u32;
        Ok(opcode::Write::new(self.fd(), buf.as_ptr(), len)
            .offset(checked_offset(position)?)
            .build())
    }

    fn sync_entry(&self) -> squeue::Entry {
        opcode::Fsync::new(self.fd())
            .flags(types::FsyncFlags::DATASYNC)
            .build()
    }
}

impl StorageFile for UringFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let rest = &mut buf[done..];
            let len = rest.len().min(MAX_RW_BYTES) as u32;
            let offset = checked_offset(position.saturating_add(done as u64))?;
            let read = opcode::Read::new(self.fd(), rest.as_mut_ptr(), len)
                .offset(offset)
                .build();
            let [res] = complete([read])?.results;
            match res {
                0 => break,
                n if n > 0 => done += n as usize,
                e if retryable(e) => {}
                e => return Err(io::Error::from_raw_os_error(-e)),
            }
        }
        Ok(done)
    }

    fn write_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
        let mut done = 0;
        while done < buf.len() {
            let write = self.write_entry(&buf[done..], position.saturating_add(done as u64))?;
            let [res] = complete([write])?.results;
            done += written(res)?;
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        loop {
            match complete([self.sync_entry()])?.results {
                [0] => return Ok(()),
                [e] if retryable(e) => {}
                [e] => return Err(io::Error::from_raw_os_error(-e)),
            }
        }
    }

    /// One submission: a write linked (`IO_LINK`) to an fdatasync. A short write cancels the fdatasync;
    /// then the rest is written the same way, and the last fdatasync covers every piece.
    fn write_at_and_sync(&self, buf: &[u8], position: u64) -> io::Result<()> {
        let mut done = 0;
        while done < buf.len() {
            let write = self
                .write_entry(&buf[done..], position.saturating_add(done as u64))?
                .flags(squeue::Flags::IO_LINK);
            let pair = complete([write, self.sync_entry()])?;
            let [wrote, synced] = pair.results;
            done += written(wrote)?;
            if done < buf.len() {
                continue;
            }
            return match synced {
                // The fdatasync ran after the last piece of the write completed: durable.
                0 if pair.in_one_submission => Ok(()),
                // The kernel took the pair in two submissions, so the link did not hold; or the
                // fdatasync was cancelled or interrupted. Sync again, on its own.
                0 => self.sync(),
                e if e == -libc::ECANCELED || retryable(e) => self.sync(),
                // A failed fdatasync is reported, never retried: the kernel may have dropped the
                // dirty pages it could not write, and a second fdatasync would then succeed.
                e => Err(io::Error::from_raw_os_error(-e)),
            };
        }
        self.sync()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn os_path(&self) -> Option<&Path> {
        Some(&self.path)
    }
}

impl Storage for UringStorage {
    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)?;
        Ok(Arc::new(UringFile {
            file,
            path: path.to_owned(),
        }))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(Arc::new(UringFile {
            file,
            path: path.to_owned(),
        }))
    }

    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let file = OpenOptions::new().read(true).open(path)?;
        Ok(Arc::new(UringFile {
            file,
            path: path.to_owned(),
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.dirs.rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.dirs.remove(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.dirs.sync_dir(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.dirs.list(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.dirs.create_dir_all(dir)
    }

    fn name(&self) -> &'static str {
        "uring"
    }
}

/// io_uring reads an offset of `u64::MAX` as "the file position", so offsets are bounded the way
/// pwrite bounds them (a non-negative `off_t`).
fn checked_offset(position: u64) -> io::Result<u64> {
    if position > i64::MAX as u64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("file position {position} is beyond i64::MAX"),
        ));
    }
    Ok(position)
}

/// The bytes a write completion reports, or its error.
fn written(res: i32) -> io::Result<usize> {
    match res {
        n if n > 0 => Ok(n as usize),
        0 => Err(io::ErrorKind::WriteZero.into()),
        e if retryable(e) => Ok(0),
        e => Err(io::Error::from_raw_os_error(-e)),
    }
}

/// Completion results that mean "try the same operation again".
fn retryable(res: i32) -> bool {
    res == -libc::EINTR || res == -libc::EAGAIN
}

/// The results of a batch of operations, in the order they were pushed.
struct Completed<const N: usize> {
    results: [i32; N],
    /// The kernel took all of them in one submission, so links between them held.
    in_one_submission: bool,
}

/// Runs `entries` on this thread's ring (made on first use) and waits for all of them.
fn complete<const N: usize>(entries: [squeue::Entry; N]) -> io::Result<Completed<N>> {
    RING.try_with(|slot| {
        let mut slot = slot
            .try_borrow_mut()
            .map_err(|_| io::Error::other("this thread's io_uring is already in use"))?;
        let mut ring = match slot.take() {
            Some(ring) => ring,
            None => new_ring()?,
        };
        let (result, keep) = submit_and_reap(&mut ring, entries);
        if keep {
            *slot = Some(ring);
        }
        result
    })
    .map_err(|_| io::Error::other("this thread's io_uring was already destroyed"))?
}

/// Pushes, submits and waits until every entry has completed. Returns whether the ring may be used
/// again: not when the kernel refused the entries, which then still sit in its submission queue.
fn submit_and_reap<const N: usize>(
    ring: &mut IoUring,
    mut entries: [squeue::Entry; N],
) -> (io::Result<Completed<N>>, bool) {
    for (i, entry) in entries.iter_mut().enumerate() {
        entry.set_user_data(i as u64);
    }
    // SAFETY: each entry names a buffer and a file descriptor that our caller borrows for the whole
    // call, and this function does not return while the kernel may still touch them: either every
    // entry's completion has been reaped below, or the kernel consumed none of the entries and the ring
    // holding them is dropped by `complete` (closing it discards entries it never read). The queue is
    // empty between calls, since every call reaps all of its completions.
    if unsafe { ring.submission().push_multiple(&entries) }.is_err() {
        return (
            Err(io::Error::other("io_uring submission queue full")),
            true,
        );
    }
    let mut results = [0i32; N];
    let mut reaped = 0;
    let mut in_one_submission = None;
    while reaped < N {
        match ring.submit_and_wait(N - reaped) {
            Ok(submitted) => {
                in_one_submission.get_or_insert(submitted == N);
            }
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                ) => {}
            Err(e) if reaped == 0 && ring.submission().len() == N => return (Err(e), false),
            Err(e) => abandon(e),
        }
        for cqe in ring.completion() {
            if let Some(slot) = results.get_mut(cqe.user_data() as usize) {
                *slot = cqe.result();
                reaped += 1;
            }
        }
    }
    let completed = Completed {
        results,
        in_one_submission: in_one_submission == Some(true),
    };
    (Ok(completed), true)
}

/// The kernel holds some of our buffers and can no longer be asked when it lets go of them. Returning
/// would let the caller free or reuse memory the kernel may still write, so the process stops.
fn abandon(e: io::Error) -> ! {
    eprintln!("klog: io_uring_enter failed with operations in flight ({e}); aborting");
    std::process::abort()
}

/// A plain ring. `SINGLE_ISSUER` and `DEFER_TASKRUN` would fit a ring that only its own thread touches,
/// but measured no faster here, and a plain ring works on every kernel that has the opcodes.
fn new_ring() -> io::Result<IoUring> {
    IoUring::new(RING_ENTRIES).map_err(|e| unavailable(e, "could not create a ring"))
}

fn unavailable(e: io::Error, otherwise: &str) -> io::Error {
    let why = match e.raw_os_error() {
        Some(libc::ENOSYS) => {
            "the kernel has no io_uring (ENOSYS: older than 5.1, or built without it)"
        }
        Some(libc::EPERM) => {
            "io_uring is forbidden here (EPERM: a seccomp filter such as Docker's default, or the \
             sysctl kernel.io_uring_disabled)"
        }
        Some(libc::ENOMEM) => {
            "the ring could not be allocated (ENOMEM: see the memlock limit, `ulimit -l`)"
        }
        _ => otherwise,
    };
    io::Error::new(e.kind(), format!("io_uring unavailable: {why}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_beyond_off_t_are_refused_not_read_as_the_file_position() {
        assert_eq!(
            checked_offset(u64::MAX).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(checked_offset(i64::MAX as u64).unwrap(), i64::MAX as u64);
    }

    #[test]
    fn write_completions_map_to_progress_or_errors() {
        assert_eq!(written(4096).unwrap(), 4096);
        assert_eq!(written(-libc::EINTR).unwrap(), 0, "interrupted: resubmit");
        assert_eq!(written(-libc::EAGAIN).unwrap(), 0, "would block: resubmit");
        assert_eq!(written(0).unwrap_err().kind(), io::ErrorKind::WriteZero);
        assert_eq!(
            written(-libc::ENOSPC).unwrap_err().raw_os_error(),
            Some(libc::ENOSPC)
        );
    }

    #[test]
    fn errors_say_why_io_uring_is_unavailable() {
        let eperm = unavailable(io::Error::from_raw_os_error(libc::EPERM), "x");
        assert_eq!(eperm.kind(), io::ErrorKind::PermissionDenied);
        assert!(eperm.to_string().contains("io_uring_disabled"), "{eperm}");
        let enosys = unavailable(io::Error::from_raw_os_error(libc::ENOSYS), "x");
        assert_eq!(enosys.kind(), io::ErrorKind::Unsupported);
        let enomem = unavailable(io::Error::from_raw_os_error(libc::ENOMEM), "x");
        assert!(enomem.to_string().contains("ulimit -l"), "{enomem}");
    }
}
