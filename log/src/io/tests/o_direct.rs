//! Whether the direct write path really writes with `O_DIRECT`: asked of the kernel
//! (`/proc/self/fdinfo`), on a file system chosen because it takes `O_DIRECT`, so a backend that falls
//! back to buffered writes fails here instead of passing every other test unnoticed.

use std::path::{Path, PathBuf};

use super::super::{direct_io_supported, read_file, uring, StorageFile};
use super::{pattern, uring_or_skip, uring_required};

/// Whether a file in `dir` opens with `O_DIRECT`, asked of the kernel directly (not through the
/// backend under test).
fn takes_o_direct(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let probe = dir.join(".o-direct-probe");
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe);
    let _ = std::fs::remove_file(&probe);
    opened.is_ok()
}

/// A scratch directory for the direct write path's tests on a file system that takes `O_DIRECT`: the
/// system temp dir is tmpfs on many machines, which refuses it on older kernels (the direct path then
/// writes buffered and the tests would check nothing of it), so the target dir and `/var/tmp` are tried
/// next. `None` (after one line) where none does, unless `KLOG_REQUIRE_URING=1` asks for a failure.
pub(super) fn direct_scratch_dir(name: &str) -> Option<PathBuf> {
    let target = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|deps| deps.join("klog-io-scratch")));
    let candidates: Vec<PathBuf> = [Some(std::env::temp_dir()), target, Some("/var/tmp".into())]
        .into_iter()
        .flatten()
        .collect();
    for base in &candidates {
        if std::fs::create_dir_all(base).is_ok() && takes_o_direct(base) {
            let dir = base.join(format!("klog-io-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            return Some(dir);
        }
    }
    let why = format!("no file system of {candidates:?} takes O_DIRECT");
    assert!(!uring_required(), "KLOG_REQUIRE_URING=1 but {why}");
    super::skip::skip(&format!("the direct path's O_DIRECT check: {why}"));
    None
}

/// Whether the kernel says `fd` was opened with `O_DIRECT` (the `flags:` line of
/// `/proc/self/fdinfo/<fd>`, in octal): what the file really is, not what the backend believes.
pub(super) fn opened_with_o_direct(fd: std::os::fd::RawFd) -> bool {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
        .unwrap_or_else(|e| panic!("/proc/self/fdinfo/{fd}: {e}"));
    let flags = info
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .unwrap_or_else(|| panic!("no flags line in /proc/self/fdinfo/{fd}: {info}"));
    let flags = u32::from_str_radix(flags.trim(), 8)
        .unwrap_or_else(|e| panic!("flags {flags:?} of fd {fd}: {e}"));
    flags & libc::O_DIRECT as u32 != 0
}

/// Fails unless `f`, a segment `.log` of the uring backend in a directory that takes `O_DIRECT`, is
/// written through a descriptor the kernel opened with `O_DIRECT`.
pub(super) fn assert_written_with_o_direct(f: &dyn StorageFile, path: &Path) {
    let fd = uring::direct_write_fd(f).expect("a segment .log of the direct path");
    assert!(
        opened_with_o_direct(fd),
        "{}: the file system takes O_DIRECT but the direct path writes buffered",
        path.display()
    );
}

/// The uring backend's segment `.log`s are written through a descriptor the kernel opened with
/// `O_DIRECT`: the direct path really runs, instead of falling back to buffered writes as it does where
/// the file system refuses `O_DIRECT`.
#[test]
fn uring_segment_logs_are_written_with_o_direct() {
    let Some(storage) = uring_or_skip() else {
        return;
    };
    let Some(dir) = direct_scratch_dir("odirect") else {
        return;
    };
    storage.create_dir_all(&dir).unwrap();
    let path = dir.join("00000000000000000000.log");
    let f = storage
        .open_segment_log(&path, true, 0, Some(1 << 20))
        .unwrap();
    assert_written_with_o_direct(f.as_ref(), &path);
    assert!(
        direct_io_supported(&dir).unwrap(),
        "the backend's own probe"
    );
    // Reopened at its end (the partial last block read back into memory): O_DIRECT again.
    let reopened = storage.open_segment_log(&path, false, 0, None).unwrap();
    assert_written_with_o_direct(reopened.as_ref(), &path);
    drop(reopened);
    let bytes = pattern(70_000, 3);
    f.write_at(&bytes, 0).unwrap();
    f.sync().unwrap();
    let disk = read_file(storage.as_ref(), &path).unwrap().unwrap();
    assert!(disk[..bytes.len()] == bytes[..]);
    drop(f);
    std::fs::remove_dir_all(&dir).unwrap();
}
