//! Kafka's rules for partition directory names and klog's for checkpoint files, from the command line:
//! an illegal name is refused before anything is written, a checkpoint line klog cannot parse is named
//! (file and line) and never silently dropped; `recover` reads past it and says so.

mod common;

use std::path::{Path, PathBuf};

use common::{klog, scratch_dir, stderr, stdout};
use klog::log::checkpoint::{read_offsets, write_clean_shutdown};
use klog::log::format::{BatchBuilder, Compression};
use klog::log::io::StdStorage;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn input(root: &Path) -> PathBuf {
    let mut out = Vec::new();
    for _ in 0..4 {
        let mut b = BatchBuilder::new(Compression::None);
        b.append(1_700_000_000_000, Some(b"k"), Some(b"v"), &[])
            .unwrap();
        b.build_into(&mut out).unwrap();
    }
    let path = root.join("in.bin");
    std::fs::write(&path, out).unwrap();
    path
}

/// Every file of the log directory (not recursing into partitions) with its bytes.
fn root_files(logs: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(logs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    v.sort();
    v
}

/// `logs/good-0` with 4 offsets, closed with the clean-shutdown marker down.
fn good_log_dir(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let root = scratch_dir(name);
    let file = input(&root);
    let logs = root.join("logs");
    let out = klog(&["append", s(&logs.join("good-0")), s(&file)]);
    assert!(out.status.success(), "{}", stderr(&out));
    write_clean_shutdown(&StdStorage, &logs, -1).unwrap();
    (root, logs, file)
}

#[test]
fn append_to_an_illegal_partition_directory_is_refused_and_writes_nothing() {
    let (_root, logs, file) = good_log_dir("dirs-append-illegal");
    let before = root_files(&logs);
    for name in ["my topic-0", "-0", "t-01", "t-x", "..-0", "t-0.abc-delete"] {
        let dir = logs.join(name);
        let out = klog(&["append", s(&dir), s(&file)]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(s(&dir)) && err.contains("not a partition directory"),
            "{name}: {err}"
        );
        assert!(!dir.exists(), "{name}: created");
        assert_eq!(
            root_files(&logs),
            before,
            "{name}: the log directory changed"
        );
    }
}

#[test]
fn recover_and_verify_name_an_illegal_directory_and_handle_the_others() {
    let (_root, logs, _file) = good_log_dir("dirs-recover-illegal");
    let illegal = logs.join("my topic-0");
    std::fs::create_dir_all(&illegal).unwrap();
    let segment = "00000000000000000000.log";
    std::fs::copy(logs.join("good-0").join(segment), illegal.join(segment)).unwrap();
    // The checkpoint holds no line for it: nothing klog writes can name it.
    for cmd in ["verify", "recover"] {
        let out = klog(&[cmd, s(&logs)]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{cmd}: {}{}",
            stdout(&out),
            stderr(&out)
        );
        let all = format!("{}{}", stdout(&out), stderr(&out));
        assert!(
            all.contains("my topic-0") && all.contains("is not allowed in a topic name"),
            "{cmd}: {all}"
        );
        assert!(all.contains("good-0"), "{cmd}: {all}");
    }
    assert_eq!(
        std::fs::read_dir(&illegal).unwrap().count(),
        1,
        "recover touched the illegal directory"
    );
    let points = read_offsets(&StdStorage, &logs.join("recovery-point-offset-checkpoint")).unwrap();
    assert_eq!(points.len(), 1, "{points:?}");
    // Named directly, it is refused.
    let out = klog(&["recover", s(&illegal)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("not a partition directory"));
}

#[test]
fn a_garbage_checkpoint_is_named_by_readers_and_salvaged_by_recover() {
    let (_root, logs, _file) = good_log_dir("dirs-garbage-checkpoint");
    let hw = logs.join("replication-offset-checkpoint");
    let garbage = "0\n2\ngood 0 4\nmy topic 0 9\n";
    std::fs::write(&hw, garbage).unwrap();
    let good = logs.join("good-0");
    for args in [
        vec!["read", s(&good), "--offset", "0"],
        vec!["producers", s(&good)],
    ] {
        let out = klog(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(s(&hw)) && err.contains("line 4"),
            "{args:?}: {err}"
        );
        assert_eq!(std::fs::read_to_string(&hw).unwrap(), garbage, "rewritten");
    }
    // verify names it too (text and JSON), and changes nothing.
    let out = klog(&["verify", s(&logs)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("{}: line 4:", hw.display())),
        "{}",
        stdout(&out)
    );
    let out = klog(&["verify", s(&good), "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let first: serde_json::Value =
        serde_json::from_str(stdout(&out).lines().next().unwrap()).unwrap();
    assert_eq!(first["log_dir"], s(&logs));
    assert_eq!(first["ok"], false);
    assert_eq!(first["problems"][0]["file"], s(&hw));
    assert_eq!(std::fs::read_to_string(&hw).unwrap(), garbage, "rewritten");

    let out = klog(&["recover", s(&logs)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("warning") && err.contains(s(&hw)) && err.contains("line 4"),
        "{err}"
    );
    let hws = read_offsets(&StdStorage, &hw).unwrap();
    assert_eq!(hws.get(&("good".to_owned(), 0)), Some(&4), "{hws:?}");
    let out = klog(&["read", s(&good), "--offset", "0", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// A partition directory that is a file: `append` exits 2 naming it. The message said the operating
/// system's error twice (`logs/b-0: File exists (os error 17): File exists (os error 17)`): an error
/// whose text already ends with its cause's was printed with that cause again.
#[test]
fn a_partition_directory_that_is_a_file_is_named_with_its_cause_once() {
    let (_root, logs, file) = good_log_dir("dirs-partition-is-a-file");
    let stray = logs.join("b-0");
    std::fs::write(&stray, b"not a directory").unwrap();
    let out = klog(&["append", s(&stray), s(&file)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(s(&stray)), "{err}");
    assert_eq!(err.matches("(os error").count(), 1, "{err}");
    assert_eq!(std::fs::read(&stray).unwrap(), b"not a directory");
}
