//! Every command's human-readable output, as a newcomer meets it: the demo's steps in order and its
//! scratch directory gone afterwards, no Rust Debug formatting (`Some(1)`, `None`, `[(0, 0)]`,
//! `Struct { field: .. }`, `212.509169ms`) in any text a command prints, and one error format on stderr
//! (`klog: error: WHAT`, a refusal's Kafka name once: `klog: error: NAME: WHAT`).
//!
//! The data is klog's own (the demo's two clusters, kept with `--keep`, and the repository's fixtures);
//! `../shared/fixtures`, when present, adds real brokers' directories (a KRaft metadata log among them).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{fixtures, klog, scratch_dir, shared_fixtures, sorted_entries, stderr, stdout};

/// The first line of `text` that shows Rust Debug formatting, and what gave it away.
fn debug_formatting(text: &str) -> Option<(String, &'static str)> {
    for line in text.lines() {
        let found = if line.contains("Some(") {
            Some("Some(")
        } else if line
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .any(|w| w == "None")
        {
            Some("None")
        } else if vec_debug(line) {
            Some("a Vec's Debug")
        } else if struct_debug(line) {
            Some("a struct's Debug")
        } else if duration_debug(line) {
            Some("a Duration's Debug")
        } else if line.contains("\\\"") {
            Some("a string's Debug escapes")
        } else {
            None
        };
        if let Some(why) = found {
            return Some((line.to_owned(), why));
        }
    }
    None
}

/// `[(0, 0)]`, `["a"]`: a derived Debug of a Vec, outside a JSON payload (whose arrays look alike).
fn vec_debug(line: &str) -> bool {
    let text = line.split('{').next().unwrap_or("");
    text.contains("[(") || text.contains("[\"") || text.contains("[Some")
}

/// `Name { field: ...`: a derived Debug of a struct.
fn struct_debug(line: &str) -> bool {
    line.match_indices(" { ").any(|(at, _)| {
        let before = line[..at].rsplit(' ').next().unwrap_or("");
        let after = &line[at + 3..];
        let field: String = after
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        before
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_uppercase())
            && before.chars().all(|c| c.is_ascii_alphanumeric())
            && !field.is_empty()
            && after[field.len()..].starts_with(": ")
    })
}

/// `212.509169ms`, `423.39µs`: a Duration's Debug (more digits than a person reads, or µs/ns units).
fn duration_debug(line: &str) -> bool {
    line.split(|c: char| c.is_whitespace() || "[](),;".contains(c))
        .any(|w| {
            let digits = w.trim_end_matches(|c: char| c.is_alphabetic() || c == 'µ');
            let unit = &w[digits.len()..];
            let numeric =
                !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit() || c == '.');
            let long_fraction = digits.split('.').nth(1).is_some_and(|f| f.len() > 3);
            numeric && (unit == "µs" || unit == "ns" || (long_fraction && unit.ends_with('s')))
        })
}

/// Fails naming the command and line if either stream shows Debug formatting.
fn assert_no_debug(what: &str, out: &Output) {
    for (stream, text) in [("stdout", stdout_lossy(out)), ("stderr", stderr(out))] {
        if let Some((line, why)) = debug_formatting(&text) {
            panic!("{what}: {why} on {stream}: {line}");
        }
    }
}

fn stdout_lossy(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The detector itself: each form it must catch, and Kafka's own text it must let through.
#[test]
fn the_detector_tells_debug_from_kafkas_text() {
    for bad in [
        "last mirrored epoch Some(1)",
        "from snapshot None; snapshots deleted [0]",
        "epochs [(0, 0), (1, 33)]",
        "not stopped: PartitionDescription { topic: \"orders\", partition: 0 }",
        "done in 212.509169ms",
        "4. [423.39µs] group",
        "names [\"a\", \"b\"]",
    ] {
        assert!(debug_formatting(bad).is_some(), "not caught: {bad}");
    }
    for good in [
        "| offset: 0 CreateTime: 1 keySize: 2 valueSize: 104 sequence: 0 headerKeys: [codec]",
        "deleteHorizonMs: OptionalLong.empty position: 0 compresscodec: none",
        r#"| offset: 3 mirrorPidReset: {"version":0}"#,
        "1. The primary (11.03 ms)",
        "offset 99 is outside [0, 49]",
    ] {
        assert_eq!(debug_formatting(good), None, "{good}");
    }
}

/// `klog demo --keep DIR`: the demo's clusters, kept for the commands below.
fn demo_clusters(name: &str) -> (PathBuf, String) {
    let dir = scratch_dir(name).join("demo");
    let out = klog(&["demo", "--keep", s(&dir)]);
    assert!(out.status.success(), "demo failed: {}", stderr(&out));
    assert!(
        dir.join("dr").join("orders-0").is_dir(),
        "--keep left nothing"
    );
    (dir, stdout(&out))
}

/// The numbered headings of the demo and the lines printed under each (heading 0: before the first).
fn demo_sections(text: &str) -> Vec<(String, Vec<String>)> {
    let mut sections = vec![(String::new(), Vec::new())];
    for line in text.lines() {
        let numbered = line
            .split_once(". ")
            .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if numbered {
            sections.push((line.to_owned(), Vec::new()));
        } else if let Some(last) = sections.last_mut() {
            last.1.push(line.to_owned());
        }
    }
    sections
}

/// Each of the demo's detail lines is printed under its own step's heading: the first mirror's
/// transitions under 2 (they printed under 1, before 2's heading), the failover's under 3, the
/// `group describe` tables under 4 (they printed before its heading), the failback's under 5.
#[test]
fn demo_prints_each_step_heading_before_its_details() {
    let (_, text) = demo_clusters("text_demo_order");
    let sections = demo_sections(&text);
    let under = |n: usize| -> String {
        let (heading, lines) = sections
            .get(n)
            .unwrap_or_else(|| panic!("no step {n} in:\n{text}"));
        assert!(heading.starts_with(&format!("{n}. ")), "{heading}\n{text}");
        lines.join("\n")
    };
    assert!(
        !sections[0].1.iter().any(|l| l.contains(" -> ")),
        "a transition before step 1:\n{text}"
    );
    assert!(
        !under(1).contains(" -> "),
        "step 1 holds transitions:\n{text}"
    );
    let two = under(2);
    assert!(
        two.contains("orders-0: UNKNOWN -> PREPARING") && two.contains("segment byte-identical"),
        "step 2:\n{text}"
    );
    let three = under(3);
    assert!(
        three.contains("orders-0: STOPPING -> STOPPED") && three.contains("last mirrored epoch 1,"),
        "step 3:\n{text}"
    );
    assert!(!three.contains("group describe"), "step 3:\n{text}");
    let four = under(4);
    assert_eq!(
        four.matches("klog group describe").count(),
        2,
        "step 4:\n{text}"
    );
    assert!(four.contains("GROUP"), "step 4:\n{text}");
    let five = under(5);
    assert!(
        five.contains("orders-0: UNKNOWN -> PREPARING") && five.contains("stray write"),
        "step 5:\n{text}"
    );
    assert!(
        under(6).contains("crash with a torn write"),
        "step 6:\n{text}"
    );
    let seven = under(7);
    assert!(
        seven.contains("process.roles=broker,controller")
            && seven.contains("exported 2 partitions"),
        "step 7:\n{text}"
    );
    if let Some((line, why)) = debug_formatting(&text) {
        panic!("demo: {why}: {line}");
    }
}

/// Without `--keep` the demo works in a new directory under the temp dir and removes it at the end.
#[test]
fn demo_removes_its_scratch_directory() {
    let tmp = scratch_dir("text_demo_tmp");
    let out = Command::new(env!("CARGO_BIN_EXE_klog"))
        .arg("demo")
        .env("TMPDIR", &tmp)
        .output()
        .expect("klog runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stdout(&out);
    assert!(
        said.contains(s(&tmp)),
        "the demo names its directory: {said}"
    );
    let left: Vec<_> = sorted_entries(&tmp);
    assert!(left.is_empty(), "the demo left {left:?} behind");
}

/// Runs `klog ARGS`, which must exit with `code`, and checks its text for Debug formatting.
fn checked(code: i32, args: &[&str]) -> Output {
    let out = klog(args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "klog {args:?}: {}{}",
        stdout_lossy(&out),
        stderr(&out)
    );
    assert_no_debug(&format!("klog {}", args.join(" ")), &out);
    out
}

/// Every command's text over the demo's clusters: dumps of every file kind, read, producers, recover,
/// verify, the cluster/mirror/group/topic/acl describe commands, and errors.
#[test]
fn no_command_prints_debug_formatting() {
    let (dir, _) = demo_clusters("text_commands");
    let (dr, primary) = (dir.join("dr"), dir.join("primary"));
    let orders = dr.join("orders-0");
    for file in sorted_entries(&orders) {
        checked(0, &["dump", s(&file)]);
        checked(0, &["dump", "--deep", s(&file)]);
    }
    for file in sorted_entries(&dr) {
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.ends_with("-checkpoint") {
            checked(0, &["dump", s(&file)]);
        }
    }
    for internal in ["__consumer_offsets-9", "__mirror_state-0"] {
        for file in sorted_entries(&dr.join(internal)) {
            if file.extension().is_some_and(|e| e == "log") {
                checked(0, &["dump", s(&file)]);
            }
        }
    }
    checked(
        0,
        &["read", s(&orders), "--offset", "0", "--print-data-log"],
    );
    checked(0, &["producers", s(&orders)]);
    checked(0, &["recover", "--dry-run", s(&dr)]);
    checked(0, &["verify", s(&dr)]);
    checked(0, &["recover", s(&primary)]);
    for root in [&dr, &primary] {
        checked(0, &["mirror", "describe", s(root)]);
        checked(0, &["group", "describe", s(root)]);
        checked(0, &["acl", "list", s(root)]);
        checked(0, &["topic", "config", s(root), "orders"]);
    }
    // A batch file with a partial batch after its last one: its message showed the tail's Debug
    // (`Partial { position: .., bytes: .. }`).
    let mut batches =
        std::fs::read(fixtures().join("batches").join("idempotent-none.bin")).unwrap();
    batches.extend_from_slice(&batches.clone()[..30]);
    let torn = dir.join("torn.bin");
    std::fs::create_dir_all(dir.join("bad")).unwrap();
    std::fs::write(&torn, batches).unwrap();
    let out = checked(1, &["append", s(&dir.join("bad").join("t-0")), s(&torn)]);
    let out = format!("{}{}", stdout_lossy(&out), stderr(&out));
    assert!(out.contains("partial batch"), "{out}");
    checked(1, &["read", s(&orders), "--offset", "99"]);
    checked(2, &["topics", s(&dr)]);
    checked(1, &["mirror", "add", s(&dr), "nosuch", "orders"]);
    checked(2, &["dump", s(&dir.join("nothing.log"))]);
}

/// The administration commands' text, over clusters made here: init, topic create/config/alter/elect,
/// acl add/list, mirror create/add/run/pause/resume/remove/describe, group commit/describe.
#[test]
fn administration_commands_print_no_debug_formatting() {
    let dir = scratch_dir("text_admin");
    let (a, b) = (dir.join("A"), dir.join("B"));
    let (a_s, b_s) = (s(&a), s(&b));
    let batch = fixtures().join("batches").join("idempotent-none.bin");
    checked(0, &["cluster", "init", a_s]);
    checked(0, &["cluster", "init", b_s]);
    checked(0, &["topic", "create", a_s, "t", "--partitions", "2"]);
    checked(0, &["append", s(&a.join("t-0")), s(&batch)]);
    checked(
        0,
        &["topic", "config", a_s, "t", "--set", "retention.ms=60000"],
    );
    checked(0, &["topic", "alter", a_s, "t", "--partitions", "3"]);
    checked(0, &["topic", "elect", a_s, "t"]);
    checked(
        0,
        &[
            "acl",
            "add",
            a_s,
            "--resource-type",
            "TOPIC",
            "--resource-name",
            "t",
            "--principal",
            "User:alice",
            "--operation",
            "READ",
        ],
    );
    checked(0, &["acl", "list", a_s]);
    checked(0, &["group", "commit", a_s, "g", "t", "0", "1"]);
    checked(0, &["mirror", "create", b_s, "m", "--source", a_s]);
    checked(0, &["mirror", "add", b_s, "m", "t"]);
    checked(0, &["mirror", "run", b_s, "--until-idle"]);
    checked(0, &["mirror", "pause", b_s, "m", "t"]);
    checked(0, &["mirror", "run", b_s, "--until-idle"]);
    checked(0, &["mirror", "resume", b_s, "m", "t"]);
    checked(0, &["mirror", "describe", b_s]);
    checked(0, &["mirror", "remove", b_s, "m", "t"]);
    checked(0, &["mirror", "run", b_s, "--until-idle"]);
    checked(0, &["mirror", "describe", b_s]);
    checked(0, &["group", "describe", b_s]);
    checked(0, &["acl", "list", b_s]);
}

/// The repository's fixtures (a real broker's clean and SIGKILLed partition directories): dump, read,
/// producers, recover --dry-run and verify.
#[test]
fn fixtures_text_has_no_debug_formatting() {
    let segments = fixtures().join("kafka-segments");
    for copy in sorted_entries(&segments) {
        for partition in sorted_entries(&copy) {
            for file in sorted_entries(&partition) {
                let out = klog(&["dump", s(&file)]);
                assert_no_debug(&format!("dump {}", file.display()), &out);
            }
            assert_no_debug("producers", &klog(&["producers", s(&partition)]));
            assert_no_debug("read", &klog(&["read", s(&partition), "--offset", "0"]));
        }
        assert_no_debug(
            "recover --dry-run",
            &klog(&["recover", "--dry-run", s(&copy)]),
        );
        assert_no_debug("verify", &klog(&["verify", s(&copy)]));
        if copy.join("__cluster_metadata-0").is_dir() {
            checked(0, &["topics", s(&copy)]);
        }
    }
}

/// `../shared/fixtures` (gated like the other shared-fixture tests): other brokers' directories,
/// a KRaft metadata log among them (`topics`, `dump` of its segments and snapshots).
#[test]
fn shared_fixtures_text_has_no_debug_formatting() {
    let Some(shared) = shared_fixtures() else {
        return;
    };
    for owner in sorted_entries(&shared.join("kafka-segments")) {
        if !owner.is_dir() {
            continue;
        }
        let has_metadata = owner.join("__cluster_metadata-0").is_dir();
        for partition in sorted_entries(&owner) {
            for file in sorted_entries(&partition) {
                assert_no_debug(
                    &format!("dump {}", file.display()),
                    &klog(&["dump", s(&file)]),
                );
            }
        }
        assert_no_debug("verify", &klog(&["verify", s(&owner)]));
        assert_no_debug(
            "recover --dry-run",
            &klog(&["recover", "--dry-run", s(&owner)]),
        );
        if has_metadata {
            assert_no_debug("topics", &klog(&["topics", s(&owner)]));
        }
    }
}

/// The stderr lines of a failed command that are not warnings.
fn error_lines(out: &Output) -> Vec<String> {
    stderr(out)
        .lines()
        .filter(|l| !l.starts_with("klog: warning: "))
        .map(str::to_owned)
        .collect()
}

/// One error format for every command, as docs/cli.md states it: `klog: error: WHAT`, WHAT naming the
/// file or directory first when there is one, and a refusal Kafka names with that name once
/// (`klog: error: OFFSET_OUT_OF_RANGE: offset 99 is outside [0, 49]`).
#[test]
fn every_command_reports_errors_in_one_format() {
    let (dir, _) = demo_clusters("text_errors");
    let dr = dir.join("dr");
    let orders = dr.join("orders-0");
    let missing = dir.join("nothing.log");
    let a_file = dir.join("a-0");
    std::fs::write(&a_file, b"not a directory").unwrap();
    let batch = fixtures().join("batches").join("idempotent-none.bin");
    let cases: Vec<(Vec<&str>, i32, Option<&str>, &str)> = vec![
        (
            vec!["read", s(&orders), "--offset", "99"],
            1,
            Some("OFFSET_OUT_OF_RANGE"),
            "offset 99 is outside [0, 49]",
        ),
        (
            vec!["mirror", "add", s(&dr), "nosuch", "orders"],
            1,
            Some("UNKNOWN_MIRROR"),
            "nosuch",
        ),
        (
            vec!["group", "commit", s(&dr), "", "orders", "0", "1"],
            1,
            Some("INVALID_REQUEST"),
            "group",
        ),
        (vec!["topics", s(&dr)], 2, None, "no KRaft metadata log"),
        // Kafka's ConfigException text: the value as given, not quoted as a Rust Debug string.
        (
            vec!["producers", s(&orders), "--config", "segment.bytes=abc"],
            2,
            None,
            "invalid value abc for configuration segment.bytes",
        ),
        (vec!["dump", s(&missing)], 2, None, s(&missing)),
        (vec!["append", s(&a_file), s(&batch)], 2, None, s(&a_file)),
        (vec!["verify", s(&missing)], 2, None, s(&missing)),
        (
            vec!["mirror", "describe", s(&missing)],
            2,
            None,
            "not a klog cluster",
        ),
    ];
    for (args, code, name, what) in cases {
        let out = klog(&args);
        let said = error_lines(&out);
        assert_eq!(out.status.code(), Some(code), "klog {args:?}: {said:?}");
        assert!(!said.is_empty(), "klog {args:?} said nothing on stderr");
        for line in &said {
            assert!(line.starts_with("klog: error: "), "klog {args:?}: {line}");
        }
        let all = said.join("\n");
        assert!(all.contains(what), "klog {args:?}: {all}");
        if let Some(name) = name {
            let expected = format!("klog: error: {name}: ");
            assert!(all.starts_with(&expected), "klog {args:?}: {all}");
            assert_eq!(
                all.matches(name).count(),
                1,
                "klog {args:?} names {name} twice: {all}"
            );
        }
    }
}

/// Every command docs/cli.md documents is listed by `klog --help` (`torture` was documented and hidden).
#[test]
fn help_lists_every_documented_command() {
    let docs = std::fs::read_to_string(common::repo_path("docs/cli.md")).unwrap();
    let help = stdout(&klog(&["--help"]));
    let listed: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let documented: Vec<&str> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("## `klog "))
        .filter_map(|l| l.split([' ', '`']).next())
        .collect();
    assert!(documented.len() > 8, "{documented:?}");
    // Documented in prose: the cluster commands' section and the writers' list (`torture`).
    let in_prose = ["cluster", "topic", "mirror", "group", "acl", "torture"];
    for command in documented.into_iter().chain(in_prose) {
        assert!(
            listed.contains(&command),
            "docs/cli.md documents `klog {command}`, --help lists {listed:?}"
        );
    }
}
