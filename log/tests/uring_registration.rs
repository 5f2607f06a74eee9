//! io_uring's direct write path with registered buffers and fixed files, and its fallback to plain
//! buffers when the kernel refuses to register them (`RLIMIT_MEMLOCK`): the bytes on disk are the same.
//!
//! Alone in its test binary because it lowers the process's memlock limit.

// setrlimit and capset: the only way to make a real kernel refuse the registration.
#![allow(unsafe_code)]

#[path = "../../tests/common/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::io::{open_backend, uring_registration, IoBackend, Storage};

/// `CAP_IPC_LOCK` lifts the memlock limit from io_uring's accounting (`linux/capability.h`).
const CAP_IPC_LOCK: u32 = 14;
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
/// `ulimit -l` of older distributions and containers.
const OLD_DEFAULT_MEMLOCK: libc::rlim_t = 64 << 10;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

fn uring_or_skip() -> Option<Arc<dyn Storage>> {
    match open_backend(IoBackend::Uring) {
        Ok(s) if s.name() == "uring" => Some(s),
        _ if std::env::var("KLOG_REQUIRE_URING").is_ok_and(|v| v == "1") => {
            panic!("KLOG_REQUIRE_URING=1 but the io_uring backend is unavailable")
        }
        _ => {
            skip::skip("io_uring is unavailable here");
            None
        }
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Capabilities are per thread: this drops `CAP_IPC_LOCK` from the calling thread's effective set only,
/// so a ring it makes is charged against `RLIMIT_MEMLOCK` even when the test runs as root.
fn drop_ipc_lock_in_this_thread() {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: header and a two-element data array, as capget(2) expects for version 3.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
    assert_eq!(r, 0, "capget: {}", std::io::Error::last_os_error());
    data[0].effective &= !(1 << CAP_IPC_LOCK);
    // SAFETY: as above; pid 0 is the calling thread.
    let r = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
    assert_eq!(r, 0, "capset: {}", std::io::Error::last_os_error());
}

fn memlock() -> libc::rlimit {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit to fill.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) },
        0
    );
    lim
}

fn set_memlock(lim: libc::rlimit) {
    // SAFETY: a valid rlimit; only the soft limit moves, within the hard one.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) }, 0);
}

/// Bytes that are not zeros anywhere, so a block written from the wrong buffer shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 + 1).collect()
}

/// Appends `data` to a new segment `.log` through the direct path in pieces (spills on the way), syncs,
/// and returns this thread's registration as the writes saw it. The file is trimmed and closed.
fn write_segment(storage: &dyn Storage, path: &Path, data: &[u8]) -> klog_log::io::Registration {
    let file = storage
        .open_segment_log(path, true, 0, Some(8 << 20))
        .unwrap();
    let mut at = 0;
    for piece in data.chunks(7 * 1000 + 13) {
        file.write_at(piece, at).unwrap();
        at += piece.len() as u64;
    }
    file.sync().unwrap();
    let registration = uring_registration().unwrap();
    file.seal(at).unwrap();
    registration
}

#[test]
fn a_refused_registration_falls_back_to_plain_buffers_and_writes_the_same_bytes() {
    let Some(storage) = uring_or_skip() else {
        return;
    };
    let dir = temp_dir("uring-registration");
    let data = pattern(700 << 10);

    // As the process runs: registered wherever the memlock limit (or CAP_IPC_LOCK) allows it.
    let registered = std::thread::scope(|s| {
        s.spawn(|| write_segment(&*storage, &dir.join("a.log"), &data))
            .join()
            .unwrap()
    });
    assert_eq!(std::fs::read(dir.join("a.log")).unwrap(), data);
    assert!(
        registered.files,
        "a fixed-file table costs no locked memory"
    );
    let caps = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    let can_lock = caps
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|eff| eff & (1 << CAP_IPC_LOCK) != 0);
    let limit = memlock();
    if can_lock || limit.rlim_cur >= 2 << 20 {
        assert!(registered.buffers, "{registered:?} with memlock {limit:?}");
    }

    // A thread charged for locked memory under the old default limit, 64 KiB: enough for the ring itself
    // (newer kernels charge it too), not for the buffers.
    set_memlock(libc::rlimit {
        rlim_cur: OLD_DEFAULT_MEMLOCK.min(limit.rlim_max),
        rlim_max: limit.rlim_max,
    });
    let refused = std::thread::scope(|s| {
        s.spawn(|| {
            drop_ipc_lock_in_this_thread();
            write_segment(&*storage, &dir.join("b.log"), &data)
        })
        .join()
        .unwrap()
    });
    set_memlock(limit);
    assert!(!refused.buffers, "{refused:?}");
    assert_eq!(std::fs::read(dir.join("b.log")).unwrap(), data);
    let _ = std::fs::remove_dir_all(&dir);
}
