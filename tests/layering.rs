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
