//! Kafka's `.lock`, taken so that a Kafka broker and klog exclude each other.
//!
//! Kafka's `LogManager` locks `<log dir>/.lock` with `FileChannel.tryLock()`, which on Linux is a POSIX
//! record lock (`fcntl(F_SETLK)`) over the whole file. An `flock` would not conflict with it (Linux keeps
//! the two kinds apart), so klog takes an open-file-description lock (`F_OFD_SETLK`): it conflicts with
//! Kafka's POSIX lock, belongs to the open file (not the process, so closing some other descriptor of the
//! file does not drop it, the classic POSIX-lock trap) and is released when the file is closed.
#![allow(unsafe_code)]

use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::Path;

use super::LOCK_FILE;

/// Opens `<dir>/.lock` and tries the exclusive lock once. On success the holder's pid is written into it
/// (Kafka's file is empty and Kafka only locks it, so the content is free for a helpful error).
pub(super) fn lock_dir(dir: &Path) -> io::Result<std::fs::File> {
    let path = dir.join(LOCK_FILE);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)?;
    try_lock(&file)?;
    file.set_len(0)?;
    file.write_all(std::process::id().to_string().as_bytes())?;
    Ok(file)
}

#[cfg(target_os = "linux")]
fn try_lock(file: &std::fs::File) -> io::Result<()> {
    // The whole file, from 0 to its end whatever it becomes (Kafka locks [0, Long.MAX_VALUE)).
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = 0;
    fl.l_len = 0;
    fl.l_pid = 0; // required to be 0 for OFD locks
                  // SAFETY: `file` is an open descriptor for the duration of the call and `fl` is a valid, initialised
                  // `struct flock` that the kernel only reads for F_OFD_SETLK.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl) };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Err(io::Error::from(io::ErrorKind::WouldBlock)),
        _ => Err(e),
    }
}

/// Releases the lock taken by [`lock_dir`] on its open file description. Closing the file is not enough:
/// a copy of the descriptor (a child forked by another thread keeps one until it execs) shares the
/// description and with it the lock, so the directory would stay locked, to this very process too.
#[cfg(target_os = "linux")]
pub(crate) fn unlock_dir(file: &std::fs::File) {
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_UNLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = 0;
    fl.l_len = 0;
    fl.l_pid = 0;
    // SAFETY: as in `try_lock`: an open descriptor and a valid `struct flock` the kernel only reads. A
    // failure leaves the lock to the close that follows, as before.
    let _ = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl) };
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn unlock_dir(file: &std::fs::File) {
    let _ = file.unlock();
}

#[cfg(not(target_os = "linux"))]
fn try_lock(file: &std::fs::File) -> io::Result<()> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => Err(io::Error::from(io::ErrorKind::WouldBlock)),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// The pid of a process holding a POSIX lock on `<dir>/.lock` (a Kafka broker), if the kernel names one.
#[cfg(target_os = "linux")]
pub(crate) fn posix_lock_holder(dir: &Path) -> Option<u32> {
    let file = std::fs::File::open(dir.join(LOCK_FILE)).ok()?;
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: as in `try_lock`; F_OFD_GETLK writes the conflicting lock's description into `fl`.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) };
    // An OFD holder reports pid -1; a POSIX holder (Kafka) its pid.
    (r == 0 && fl.l_type != libc::F_UNLCK as libc::c_short && fl.l_pid > 0)
        .then_some(fl.l_pid as u32)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn posix_lock_holder(_dir: &Path) -> Option<u32> {
    None
}
