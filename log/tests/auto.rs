//! `io_backend=auto` as a measured, recorded decision (issue #28): `LogDir::open_backend(Auto)` consults
//! the decision, records it in the log directory's root, reads the record back on the next open instead
//! of measuring, measures again over a corrupt record or one from another device, and never probes or
//! writes a read-only directory or a forced backend's.

use std::path::PathBuf;
use std::sync::Arc;

use klog_log::config::LogConfig;
use klog_log::io::{
    decide, AutoDecision, DecisionSource, IoBackend, IoWorkload, ReadOnlyStorage, StdStorage,
    AUTO_DECISION_FILE,
};
use klog_log::log_dir::LogDir;

fn fresh(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("klog-auto-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    root
}

fn recorded(root: &std::path::Path) -> AutoDecision {
    let text = std::fs::read_to_string(root.join(AUTO_DECISION_FILE)).expect("decision recorded");
    AutoDecision::decode(&text).expect("the recorded decision parses")
}

fn open_auto(root: &std::path::Path) -> AutoDecision {
    let log_dir = LogDir::open_backend(IoBackend::Auto, root).unwrap();
    let decision = log_dir
        .io_decision()
        .expect("Auto consults the decision")
        .clone();
    log_dir.close().unwrap();
    decision
}

#[test]
fn first_open_measures_and_records_second_reads_the_record() {
    let root = fresh("record");
    let first = open_auto(&root);
    assert_eq!(first.source, DecisionSource::Measured);
    // The figures it chose by: std measured for every class (the probe's budget covers std first).
    assert!(first.buffered.std_ns.is_some(), "{first:?}");
    assert!(first.durable.std_ns.is_some(), "{first:?}");
    assert_eq!(
        first.uring_unavailable.is_none(),
        first.buffered.uring_ns.is_some()
    );
    let on_disk = recorded(&root);
    assert_eq!(on_disk.device, first.device);
    assert_eq!(on_disk.buffered, first.buffered);
    assert_eq!(on_disk.durable, first.durable);
    assert_eq!(on_disk.many_partitions, first.many_partitions);
    // No probe file is left behind.
    let names: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.contains("probe")), "{names:?}");

    let second = open_auto(&root);
    assert_eq!(
        second.source,
        DecisionSource::Cached,
        "read, not measured again"
    );
    assert_eq!(second.buffered, first.buffered);
    assert_eq!(second.durable, first.durable);
    // The directory's storage is the buffered choice, and partitions open on it.
    let mut log_dir = LogDir::open_backend(IoBackend::Auto, &root).unwrap();
    let (log, _) = log_dir.open_partition("t-0", LogConfig::default()).unwrap();
    assert_eq!(
        log_dir.storage().name(),
        klog_log::io::backend_name(second.backend(IoWorkload::Buffered))
    );
    log_dir.close_partition(log).unwrap();
    log_dir.close().unwrap();
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_corrupt_record_is_measured_again_and_rewritten() {
    let root = fresh("corrupt");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join(AUTO_DECISION_FILE), b"version=1\ndevice=banana\n").unwrap();
    let decision = open_auto(&root);
    assert_eq!(decision.source, DecisionSource::Measured);
    assert_eq!(recorded(&root).buffered, decision.buffered);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_record_from_another_device_is_measured_again() {
    let root = fresh("device");
    let first = open_auto(&root);
    let mut moved = first.clone();
    moved.device = first.device.wrapping_add(1);
    std::fs::write(root.join(AUTO_DECISION_FILE), moved.encode()).unwrap();
    let again = open_auto(&root);
    assert_eq!(again.source, DecisionSource::Measured);
    assert_eq!(recorded(&root).device, first.device);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_read_only_dir_is_neither_probed_nor_written() {
    let root = fresh("readonly");
    std::fs::create_dir_all(&root).unwrap();
    let view = ReadOnlyStorage::new(Arc::new(StdStorage));
    let decision = decide(&view, &root);
    assert!(
        matches!(decision.source, DecisionSource::Unprobed(_)),
        "{decision:?}"
    );
    assert_eq!(decision.backend(IoWorkload::Buffered), IoBackend::Std);
    assert_eq!(
        std::fs::read_dir(&root).unwrap().count(),
        0,
        "nothing written"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_forced_backend_skips_the_decision() {
    let root = fresh("forced");
    let log_dir = LogDir::open_backend(IoBackend::Std, &root).unwrap();
    assert!(log_dir.io_decision().is_none());
    assert_eq!(log_dir.storage().name(), "std");
    log_dir.close().unwrap();
    assert!(!root.join(AUTO_DECISION_FILE).exists());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn the_record_round_trips_and_bad_lines_are_named() {
    let root = fresh("roundtrip");
    let d = open_auto(&root);
    let mut back = AutoDecision::decode(&d.encode()).unwrap();
    back.source = DecisionSource::Measured;
    assert_eq!(back, d);
    let err = AutoDecision::decode(
        "version=1\ndevice=3\nuring=available\nbuffered=floppy std_ns=1 uring_ns=-\n",
    )
    .unwrap_err();
    assert!(err.contains("buffered") && err.contains("floppy"), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_writer_takes_the_recorded_choice_for_the_workload_it_does_most() {
    use klog_log::io::{backend_name, ChoiceReason};
    let root = fresh("workload");
    let log_dir = LogDir::open_backend_for(IoBackend::Auto, &root, IoWorkload::Durable).unwrap();
    let choice = log_dir
        .backend_choice()
        .expect("the choice is kept")
        .clone();
    log_dir.close().unwrap();
    let on_disk = recorded(&root);
    assert_eq!(choice.workload, IoWorkload::Durable);
    assert_eq!(
        choice.decision.as_ref().map(|d| &d.durable),
        Some(&on_disk.durable)
    );
    match &choice.reason {
        ChoiceReason::Measured => assert_eq!(choice.backend, on_disk.durable.backend),
        // Only io_uring that the decision chose but cannot open, or cannot be used at all, gives std.
        ChoiceReason::Unavailable(_) => assert_eq!(choice.backend, IoBackend::Std),
        other => panic!("a first open measures: {other:?}"),
    }

    // The next writer, another workload: read back, and the directory's storage is that class's choice.
    let log_dir =
        LogDir::open_backend_for(IoBackend::Auto, &root, IoWorkload::ManyPartitions).unwrap();
    let choice = log_dir.backend_choice().unwrap().clone();
    assert_eq!(
        choice.decision.as_ref().map(|d| d.source.clone()),
        Some(DecisionSource::Cached)
    );
    assert_eq!(log_dir.storage().name(), backend_name(choice.backend));
    if choice.reason == ChoiceReason::Cached {
        assert_eq!(choice.backend, on_disk.many_partitions.backend);
    }
    log_dir.close().unwrap();

    // Forced: the choice says so and carries no decision.
    let log_dir = LogDir::open_backend_for(IoBackend::Std, &root, IoWorkload::Durable).unwrap();
    let forced = log_dir.backend_choice().unwrap();
    assert_eq!(
        (
            forced.reason.clone(),
            forced.backend,
            forced.decision.is_none()
        ),
        (ChoiceReason::Forced, IoBackend::Std, true)
    );
    log_dir.close().unwrap();
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn backend_for_records_then_reads_back_and_names_its_choice() {
    let root = fresh("backend-for");
    let (storage, choice) =
        LogDir::backend_for(IoBackend::Auto, &root, IoWorkload::Durable).unwrap();
    assert_eq!(storage.name(), klog_log::io::backend_name(choice.backend));
    let decision = choice.decision.expect("Auto consults the decision");
    assert_eq!(decision.source, DecisionSource::Measured);
    assert_eq!(recorded(&root).durable, decision.durable);
    let (_, again) = LogDir::backend_for(IoBackend::Auto, &root, IoWorkload::Buffered).unwrap();
    assert_eq!(
        again.decision.map(|d| d.source),
        Some(DecisionSource::Cached)
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn the_reason_says_when_io_uring_is_unavailable() {
    use klog_log::io::{choose, ChoiceReason};
    let text = "version=1\ndevice=7\nuring=io_uring_setup: EPERM (seccomp)\n\
                buffered=std std_ns=10 uring_ns=-\ndurable=std std_ns=10 uring_ns=-\n\
                many_partitions=std std_ns=10 uring_ns=-\n";
    let decision = AutoDecision::decode(text).unwrap();
    let (storage, choice) = choose(&decision, IoWorkload::Durable);
    assert_eq!(storage.name(), "std");
    assert_eq!(
        choice.reason,
        ChoiceReason::Unavailable("io_uring_setup: EPERM (seccomp)".into())
    );
    assert_eq!(
        choice.reason.to_string(),
        "unavailable (io_uring_setup: EPERM (seccomp))"
    );
    // A recorded uring choice where this process cannot open io_uring: std, saying why.
    let uring_text = text
        .replace("uring=io_uring_setup: EPERM (seccomp)", "uring=available")
        .replace(
            "durable=std std_ns=10 uring_ns=-",
            "durable=uring std_ns=10 uring_ns=5",
        );
    let decision = AutoDecision::decode(&uring_text).unwrap();
    let (storage, choice) = choose(&decision, IoWorkload::Durable);
    match klog_log::io::uring_available() {
        Ok(()) => {
            assert_eq!(storage.name(), "uring");
            assert_eq!(choice.reason, ChoiceReason::Cached);
        }
        Err(_) => {
            assert_eq!(storage.name(), "std");
            assert!(
                matches!(choice.reason, ChoiceReason::Unavailable(_)),
                "{choice:?}"
            );
        }
    }
    // Unprobed (a read-only directory): std, and the reason is why.
    let root = fresh("unprobed-reason");
    std::fs::create_dir_all(&root).unwrap();
    let view = ReadOnlyStorage::new(Arc::new(StdStorage));
    let (_, choice) = choose(&decide(&view, &root), IoWorkload::Buffered);
    assert_eq!(
        choice.reason,
        ChoiceReason::Unprobed("read-only storage".into())
    );
    std::fs::remove_dir_all(&root).unwrap();
}
