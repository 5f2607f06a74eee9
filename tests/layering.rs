//! Dependencies point one way: psm <- log <- recovery <- mirror <- klog. A lower crate naming a higher one
//! fails here; psm stays pure (none of ours).

use std::path::Path;

const ORDER: [&str; 5] = [
    "klog-psm",
    "klog-log",
    "klog-recovery",
    "klog-mirror",
    "klog",
];

fn manifest(dir: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(dir)
        .join("Cargo.toml");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The klog crates named in a manifest's dependency tables (normal, dev and build).
fn our_dependencies(toml: &str) -> Vec<String> {
    let mut in_deps = false;
    let mut deps = Vec::new();
    for line in toml.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line.ends_with("dependencies]");
            continue;
        }
        if in_deps {
            if let Some(name) = line.split(['=', '.', ' ']).next() {
                if name.starts_with("klog-") {
                    deps.push(name.to_owned());
                }
            }
        }
    }
    deps
}

#[test]
fn crates_depend_only_downwards() {
    for (dir, name) in [
        ("psm", "klog-psm"),
        ("log", "klog-log"),
        ("recovery", "klog-recovery"),
        ("mirror", "klog-mirror"),
    ] {
        let level = ORDER.iter().position(|n| *n == name).unwrap();
        for dep in our_dependencies(&manifest(dir)) {
            let dep_level = ORDER
                .iter()
                .position(|n| *n == dep)
                .unwrap_or_else(|| panic!("unknown crate {dep}"));
            assert!(dep_level < level, "{name} must not depend on {dep}: dependencies point psm <- log <- recovery <- mirror <- klog");
        }
    }
    assert!(our_dependencies(&manifest("psm")).is_empty(), "psm is pure");
    assert_eq!(our_dependencies(&manifest("log")), ["klog-psm"]);
}

#[test]
fn the_checker_sees_dependencies() {
    let toml = "[package]\nname = \"x\"\n[dependencies]\nklog-mirror.workspace = true\nserde = \"1\"\n[dev-dependencies]\nklog-log = { path = \"../log\" }\n";
    assert_eq!(our_dependencies(toml), ["klog-mirror", "klog-log"]);
}

/// Inside klog-mirror the modules are layered too: each names only modules before it in this list
/// (`mirror/src/lib.rs` explains the order). A cycle, or the manager named from below, fails here.
const MIRROR_MODULES: [&str; 23] = [
    "error",
    "state",
    "records",
    "store",
    "acl",
    "sync_config",
    "metadata",
    "source",
    "kafka_wire",
    "kafka_source",
    "node",
    "heal",
    "topics",
    "config_sync",
    "admin",
    "groups",
    "disk_view",
    "serving",
    "manager",
    "describe",
    "cluster",
    "export",
    "import",
];

/// The crate root's re-exports, by the module that defines them.
fn mirror_reexport_module(name: &str) -> Option<&'static str> {
    Some(match name {
        "Cluster"
        | "ClusterOptions"
        | "MirrorDescription"
        | "MirrorSettings"
        | "PartitionDescription" => "cluster",
        "Error" | "MirrorError" => "error",
        "KafkaSource" => "kafka_source",
        "TickReport" | "OffsetClamp" => "manager",
        "DesiredState" => "metadata",
        "LocalSource" => "serving",
        "MirrorSource" => "source",
        "MirrorState" => "state",
        _ => return None,
    })
}

/// The modules a source file names through `crate::` paths, outside comments.
fn crate_paths(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in source.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let head = item.trim().split("::").next().unwrap_or("").trim();
                    if !head.is_empty() {
                        names.push(head.to_owned());
                    }
                }
            } else {
                let head: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.push(head);
            }
        }
    }
    names
}

fn mirror_sources(dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            mirror_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push((
                path.display().to_string(),
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
    }
}

/// The layer a file of mirror/src belongs to: its top module (`manager/fetcher.rs` is `manager`).
fn mirror_module_of(path: &str) -> String {
    let rel = path.split("mirror/src/").nth(1).unwrap_or(path);
    let first = rel.split('/').next().unwrap_or(rel);
    first.trim_end_matches(".rs").to_owned()
}

#[test]
fn mirror_modules_depend_only_on_earlier_ones() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("mirror/src");
    let mut files = Vec::new();
    mirror_sources(&src, &mut files);
    assert!(files.len() >= MIRROR_MODULES.len(), "{files:?}");
    for (path, text) in files {
        let module = mirror_module_of(&path);
        if module == "lib" {
            continue;
        }
        let level = MIRROR_MODULES
            .iter()
            .position(|m| *m == module)
            .unwrap_or_else(|| panic!("{path}: module {module} is not in MIRROR_MODULES"));
        for name in crate_paths(&text) {
            let target = mirror_reexport_module(&name).unwrap_or(name.as_str());
            let target_level = MIRROR_MODULES
                .iter()
                .position(|m| *m == target)
                .unwrap_or_else(|| panic!("{path}: names crate::{name}, not a known module"));
            assert!(
                target_level <= level,
                "{path} ({module}) names crate::{name} ({target}), a module above it"
            );
        }
    }
}

#[test]
fn the_mirror_checker_sees_paths() {
    let text = "use crate::node::{lock, Node};\nuse crate::{admin, topics::x};\n// crate::cluster in a comment\nlet e = crate::Error::Refused(s);\n";
    assert_eq!(crate_paths(text), ["node", "admin", "topics", "Error"]);
    assert_eq!(
        mirror_module_of("/x/mirror/src/manager/fetcher.rs"),
        "manager"
    );
}
