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

use super::direct::{self, ChunkDevice, ChunkWrite, TailFile};
use super::fixed::{FileKey, Registered, Registration};
use super::{StdStorage, Storage, StorageFile};

/// Linux moves at most this many bytes in one read or write (`MAX_RW_COUNT`); larger buffers go in pieces.
const MAX_RW_BYTES: usize = 0x7fff_f000;
/// Operations in flight at once: a call has two (a write linked to an fdatasync), a batch of the direct
/// write path up to this many (more go in several submissions).
const RING_ENTRIES: u32 = 128;
const _: () = assert!(
    RING_ENTRIES < super::fixed::FILE_SLOTS,
    "a round never replaces a fixed-file slot it uses itself"
);

thread_local! {
    /// This thread's ring; `None` until its first I/O, and again after a ring had to be discarded.
    static RING: RefCell<Option<Ring>> = const { RefCell::new(None) };
}

/// A thread's ring, and what it registered for the direct write path (on its first batch of writes:
/// threads that only read register nothing).
struct Ring {
    // Declared first, so dropped first: the kernel lets go of the registered buffers before they are freed.
    ring: IoUring,
    registered: Option<Registered>,
}

impl Ring {
    /// The ring, and its registered buffers and files (registered now if this is the first time).
    fn parts(&mut self) -> (&mut IoUring, &mut Registered) {
        let registered = self
            .registered
            .get_or_insert_with(|| Registered::register(&self.ring.submitter()));
        (&mut self.ring, registered)
    }
}

/// What this thread's ring registers for the direct write path (registering it now if it has not yet):
/// whether the kernel took the buffers and the fixed-file table, or refused them (`fixed.rs`).
pub fn uring_registration() -> io::Result<Registration> {
    with_ring(|ring| (Ok(ring.parts().1.state()), true))
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

    /// The direct write path (`direct.rs`): the in-memory tail over an `O_DIRECT` file, or over a
    /// buffered one where the file system refuses `O_DIRECT` (tmpfs; see [`direct_io_supported`]).
    fn open_segment_log(
        &self,
        path: &Path,
        create: bool,
        size: u64,
        preallocate: Option<u64>,
    ) -> io::Result<Arc<dyn StorageFile>> {
        let dev = DirectDev::open(path, create)?;
        if create {
            if let Some(bytes) = preallocate {
                dev.read.set_len(bytes)?;
            }
        }
        Ok(Arc::new(TailFile::new(dev, path, size)?))
    }

    fn sync_files(&self, files: &[Arc<dyn StorageFile>]) -> io::Result<()> {
        direct::sync_files::<DirectDev>(files)
    }

    fn syncs_together(&self) -> bool {
        true
    }
}

/// Whether the file system holding `dir` takes `O_DIRECT` (tmpfs and some others refuse it with
/// EINVAL, and the direct write path then writes the same chunks buffered). Probed with a scratch file.
pub fn direct_io_supported(dir: &Path) -> io::Result<bool> {
    let probe = dir.join(".klog-odirect-probe");
    let _ = std::fs::remove_file(&probe);
    let dev = DirectDev::open(&probe, true);
    let _ = std::fs::remove_file(&probe);
    Ok(dev?.direct)
}

/// The descriptor the direct write path writes `file` through, if `file` is a segment `.log` this
/// backend opened: tests ask the kernel which flags it really carries (`/proc/self/fdinfo`).
#[cfg(test)]
pub(super) fn direct_write_fd(file: &dyn StorageFile) -> Option<std::os::fd::RawFd> {
    let tail = file.as_any()?.downcast_ref::<TailFile<DirectDev>>()?;
    Some(tail.device().write.as_raw_fd())
}

/// A segment `.log` under the direct write path: writes through io_uring on an `O_DIRECT` descriptor,
/// reads (of what is on the disk) with pread on a buffered one, which the kernel keeps coherent with
/// direct writes.
#[derive(Debug)]
struct DirectDev {
    write: File,
    read: File,
    path: PathBuf,
    /// The file system took `O_DIRECT`.
    direct: bool,
    /// `write`'s identity in the fixed-file tables of rings.
    key: FileKey,
}

impl DirectDev {
    fn open(path: &Path, create: bool) -> io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut options = OpenOptions::new();
        options.read(true).write(true);
        if create {
            options.create_new(true);
        }
        let read = options.open(path)?;
        let write = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path);
        let (write, direct) = match write {
            Ok(f) => (f, true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => (read.try_clone()?, false),
            Err(e) => return Err(e),
        };
        Ok(DirectDev {
            write,
            read,
            path: path.to_owned(),
            direct,
            key: FileKey::new(),
        })
    }

    /// A write of `bytes` in the current round of `ring`: from registered memory and a fixed file where
    /// the ring has them (`fixed.rs`), else from `bytes` and the descriptor.
    fn round_write_entry(
        &self,
        ring: &IoUring,
        registered: &mut Registered,
        w: &ChunkWrite<'_, Self>,
    ) -> io::Result<squeue::Entry> {
        let offset = checked_offset(w.position)?;
        let len = w.bytes.len() as u32;
        let buffer = registered.buffer(w.bytes);
        let slot = registered.file(&ring.submitter(), &self.key, self.write.as_raw_fd());
        macro_rules! write_to {
            ($file:expr) => {
                match buffer {
                    Some((at, index)) => opcode::WriteFixed::new($file, at, len, index)
                        .offset(offset)
                        .build(),
                    None => opcode::Write::new($file, w.bytes.as_ptr(), len)
                        .offset(offset)
                        .build(),
                }
            };
        }
        Ok(match slot {
            Some(slot) => write_to!(types::Fixed(slot)),
            None => write_to!(types::Fd(self.write.as_raw_fd())),
        })
    }

    /// An fdatasync in the current round of `ring`, of the fixed file where the ring has it.
    fn round_sync_entry(&self, ring: &IoUring, registered: &mut Registered) -> squeue::Entry {
        let fd = self.write.as_raw_fd();
        match registered.file(&ring.submitter(), &self.key, fd) {
            Some(slot) => opcode::Fsync::new(types::Fixed(slot)),
            None => opcode::Fsync::new(types::Fd(fd)),
        }
        .flags(types::FsyncFlags::DATASYNC)
        .build()
    }

    fn write_entry(&self, bytes: &[u8], position: u64) -> io::Result<squeue::Entry> {
        Ok(opcode::Write::new(
            types::Fd(self.write.as_raw_fd()),
            bytes.as_ptr(),
            bytes.len() as u32,
        )
        .offset(checked_offset(position)?)
        .build())
    }

    /// The rest of a write that completed short or was interrupted, one piece at a time.
    fn finish_write(&self, bytes: &[u8], position: u64) -> io::Result<()> {
        let mut done = 0;
        while done < bytes.len() {
            let entry = self.write_entry(&bytes[done..], position + done as u64)?;
            let [res] = complete([entry])?.results;
            done += written(res)?;
        }
        Ok(())
    }
}

impl ChunkDevice for DirectDev {
    /// Every write in one submission (at most `RING_ENTRIES` at a time), all in flight together, from
    /// registered buffers and fixed files where the ring has them.
    fn write_batch(writes: &[ChunkWrite<'_, Self>]) -> Vec<io::Result<()>> {
        let mut results = Vec::with_capacity(writes.len());
        for part in writes.chunks(RING_ENTRIES as usize) {
            let round = run_round(|ring, registered| {
                part.iter()
                    .map(|w| w.dev.round_write_entry(ring, registered, w))
                    .collect()
            });
            match round {
                // Outside the ring: finishing a short write runs operations of its own.
                Ok(r) => results.extend(part.iter().zip(r).map(|(w, res)| finish(w, res))),
                Err(e) => results.extend(part.iter().map(|_| Err(copy_error(&e)))),
            }
        }
        results
    }

    /// One file's fdatasync as a plain system call on the calling thread (through io_uring it would be
    /// punted to an io-wq worker, a handoff and a wakeup for nothing); many files' in one submission,
    /// where the device and the file system take them all at once.
    fn sync_batch(devs: &[&Self]) -> Vec<io::Result<()>> {
        if let [dev] = devs {
            return vec![dev.read.sync_data()];
        }
        let mut results = Vec::with_capacity(devs.len());
        for part in devs.chunks(RING_ENTRIES as usize) {
            let round = run_round(|ring, registered| {
                Ok(part
                    .iter()
                    .map(|d| d.round_sync_entry(ring, registered))
                    .collect())
            });
            match round {
                Ok(r) => results.extend(part.iter().zip(r).map(|(d, res)| match res {
                    0 => Ok(()),
                    // Interrupted before it ran: run it again on its own. A failed fdatasync is
                    // never retried (the kernel may have dropped the pages it could not write).
                    e if retryable(e) => d.read.sync_data(),
                    e => Err(io::Error::from_raw_os_error(-e)),
                })),
                Err(e) => results.extend(part.iter().map(|_| Err(copy_error(&e)))),
            }
        }
        results
    }

    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        loop {
            match self.read.read_at(buf, position) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.read.set_len(len)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.read.metadata()?.len())
    }

    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }
}

/// A completed write of the direct path: done, finished piece by piece (short or interrupted), or failed.
fn finish(w: &ChunkWrite<'_, DirectDev>, res: i32) -> io::Result<()> {
    match res {
        n if n >= 0 && n as usize == w.bytes.len() => Ok(()),
        n if n > 0 => w
            .dev
            .finish_write(&w.bytes[n as usize..], w.position + n as u64),
        e if retryable(e) => w.dev.finish_write(w.bytes, w.position),
        0 => Err(io::ErrorKind::WriteZero.into()),
        e => Err(io::Error::from_raw_os_error(-e)),
    }
}

/// One round on this thread's ring: `build` makes its entries (at most [`RING_ENTRIES`]) with the
/// ring's registered buffers and files, which stay the round's until every entry has completed.
fn run_round(
    build: impl FnOnce(&IoUring, &mut Registered) -> io::Result<Vec<squeue::Entry>>,
) -> io::Result<Vec<i32>> {
    with_ring(|ring| {
        let (ring, registered) = ring.parts();
        registered.begin_round(&ring.submitter());
        let mut entries = match build(ring, registered) {
            Ok(entries) => entries,
            Err(e) => return (Err(e), true),
        };
        let (result, keep) = submit_and_reap(ring, &mut entries);
        (result.map(|(results, _)| results), keep)
    })
}

fn copy_error(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.to_string()),
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
fn complete<const N: usize>(mut entries: [squeue::Entry; N]) -> io::Result<Completed<N>> {
    let (results, in_one_submission) =
        with_ring(|ring| submit_and_reap(&mut ring.ring, &mut entries))?;
    let mut fixed = [0i32; N];
    fixed.copy_from_slice(&results);
    Ok(Completed {
        results: fixed,
        in_one_submission,
    })
}

/// Runs `f` on this thread's ring; a ring that `f` says is unusable is dropped.
fn with_ring<T>(f: impl FnOnce(&mut Ring) -> (io::Result<T>, bool)) -> io::Result<T> {
    RING.try_with(|slot| {
        let mut slot = slot
            .try_borrow_mut()
            .map_err(|_| io::Error::other("this thread's io_uring is already in use"))?;
        let mut ring = match slot.take() {
            Some(ring) => ring,
            None => Ring {
                ring: new_ring()?,
                registered: None,
            },
        };
        let (result, keep) = f(&mut ring);
        if keep {
            *slot = Some(ring);
        }
        result
    })
    .map_err(|_| io::Error::other("this thread's io_uring was already destroyed"))?
}

/// Pushes, submits and waits until every entry has completed: their results in order, and whether the
/// kernel took them in one submission (so links between them held). Also returns whether the ring may
/// be used again: not when the kernel refused the entries, which then still sit in its submission queue.
fn submit_and_reap(
    ring: &mut IoUring,
    entries: &mut [squeue::Entry],
) -> (io::Result<(Vec<i32>, bool)>, bool) {
    let n = entries.len();
    for (i, entry) in entries.iter_mut().enumerate() {
        entry.set_user_data(i as u64);
    }
    // SAFETY: each entry names a buffer and a file descriptor that our caller borrows for the whole
    // call, and this function does not return while the kernel may still touch them: either every
    // entry's completion has been reaped below, or the kernel consumed none of the entries and the ring
    // holding them is dropped by `with_ring` (closing it discards entries it never read). The queue is
    // empty between calls, since every call reaps all of its completions.
    if unsafe { ring.submission().push_multiple(entries) }.is_err() {
        return (
            Err(io::Error::other("io_uring submission queue full")),
            true,
        );
    }
    let mut results = vec![0i32; n];
    let mut reaped = 0;
    let mut in_one_submission = None;
    while reaped < n {
        match ring.submit_and_wait(n - reaped) {
            Ok(submitted) => {
                in_one_submission.get_or_insert(submitted == n);
            }
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                ) => {}
            Err(e) if reaped == 0 && ring.submission().len() == n => return (Err(e), false),
            Err(e) => abandon(e),
        }
        for cqe in ring.completion() {
            if let Some(slot) = results.get_mut(cqe.user_data() as usize) {
                *slot = cqe.result();
                reaped += 1;
            }
        }
    }
    (Ok((results, in_one_submission == Some(true))), true)
}

/// The kernel holds some of our buffers and can no longer be asked when it lets go of them. Returning
/// would let the caller free or reuse memory the kernel may still write, so the process stops.
fn abandon(e: io::Error) -> ! {
    eprintln!("klog: io_uring_enter failed with operations in flight ({e}); aborting");
    std::process::abort()
}

/// A plain ring. `SINGLE_ISSUER` and `DEFER_TASKRUN` would fit a ring that only its own thread touches,
/// but measured no faster here, and a plain ring works on every kernel that has the opcodes.
///
/// Its thread's io-wq may run [`IOWQ_BOUNDED_WORKERS`] operations on regular files at once: every
/// fdatasync, and every `O_DIRECT` write the file system cannot take without blocking (an extending or
/// unwritten-extent write on ext4), runs on an io-wq worker, and the kernel's default limit for them is
/// `min(ring entries, 4 x CPUs)`: 8 on a 2-CPU machine, so a flush of 64 partitions in one submission
/// kept only 8 fdatasyncs in flight where the device and the journal take all 64 together. A kernel
/// older than 5.15 refuses the call and keeps its default (the figures then show it).
fn new_ring() -> io::Result<IoUring> {
    let ring = IoUring::new(RING_ENTRIES).map_err(|e| unavailable(e, "could not create a ring"))?;
    let mut max = [IOWQ_BOUNDED_WORKERS, 0];
    let _ = ring.submitter().register_iowq_max_workers(&mut max);
    Ok(ring)
}

/// The most io-wq workers this thread's rings may run on regular files at once: one per operation of a
/// full ring, so a batch's fdatasyncs are all in flight together.
pub const IOWQ_BOUNDED_WORKERS: u32 = RING_ENTRIES;

/// The io-wq worker limits of this thread's rings, `[bounded, unbounded]` (making its ring if it has
/// none yet): what a new ring set, or the kernel's defaults where it refused.
pub fn uring_iowq_max_workers() -> io::Result<[u32; 2]> {
    with_ring(|ring| {
        // Zeros change nothing and return the limits in force.
        let mut max = [0, 0];
        let r = ring.ring.submitter().register_iowq_max_workers(&mut max);
        (r.map(|()| max), true)
    })
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

    /// The kernel's default (`min(entries, 4 x CPUs)`, 8 on the 2-CPU test machines) kept a flush of 64
    /// partitions to 8 fdatasyncs in flight; a thread's ring lifts it to a full ring's worth.
    #[test]
    fn a_threads_io_wq_runs_a_full_ring_of_file_operations_at_once() {
        if uring_available().is_err() {
            eprintln!("skipped: io_uring is unavailable here");
            return;
        }
        // On a fresh thread: its first ring is the one that sets the limit.
        let limits = std::thread::spawn(uring_iowq_max_workers)
            .join()
            .expect("the thread ran");
        match limits {
            Ok([bounded, _]) => assert_eq!(bounded, IOWQ_BOUNDED_WORKERS),
            // Kernels before 5.15 have no IORING_REGISTER_IOWQ_MAX_WORKERS.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                eprintln!("skipped: this kernel cannot set io-wq limits: {e}")
            }
            Err(e) => panic!("reading the io-wq limits: {e}"),
        }
    }
}
