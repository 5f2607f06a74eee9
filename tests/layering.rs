//! Dependencies point one way: psm <- log <- recovery <- mirror <- klog. A lower crate naming a higher one
//! fails here; psm stays pure (none of ours). Inside each crate, files import one another one way too: a
//! circle of files (two or more) that name each other fails, naming its files.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

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
const MIRROR_MODULES: [&str; 24] = [
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
    "log_cleaner",
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

/// The crates whose files must not import one another in a circle: every library and binary root.
const CRATE_ROOTS: [&str; 6] = [
    "psm/src/lib.rs",
    "log/src/lib.rs",
    "recovery/src/lib.rs",
    "mirror/src/lib.rs",
    "src/lib.rs",
    "src/main.rs",
];

/// A token of Rust source with comments, strings and character literals gone.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    PathSep,
    Punct(char),
}

/// `source` as tokens: comments (`//`, nested `/* */`), string, raw string and character literals are
/// dropped, lifetimes kept as a `'` and an identifier.
fn tokens(source: &str) -> Vec<Token> {
    let chars: Vec<char> = source.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if let Some((skip, hashes)) = raw_string_start(&chars[..i], &chars[i..]) {
            i += skip;
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            while i < chars.len() && !chars[i..].starts_with(&close) {
                i += 1;
            }
            i += close.len();
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{1F600}') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                out.push(Token::Punct('\''));
                i += 1;
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token::Ident(chars[start..i].iter().collect()));
        } else if c == ':' && next == Some(':') {
            out.push(Token::PathSep);
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(Token::Punct(c));
            }
            i += 1;
        }
    }
    out
}

/// At `r"`, `r#"`, `br"`, ... (not inside an identifier such as `bar"`): the length of the opening and
/// its number of `#`s.
fn raw_string_start(before: &[char], chars: &[char]) -> Option<(usize, usize)> {
    if before
        .last()
        .is_some_and(|p| p.is_alphanumeric() || *p == '_')
    {
        return None;
    }
    let mut i = usize::from(chars.first() == Some(&'b'));
    if chars.get(i) != Some(&'r') {
        return None;
    }
    i += 1;
    let hashes = chars[i..].iter().take_while(|c| **c == '#').count();
    (chars.get(i + hashes) == Some(&'"')).then_some((i + hashes + 1, hashes))
}

/// The paths a `use` tree names, each whole: `a::{b, c::{d, e as f}}` is `a::b`, `a::c::d`, `a::c::e`.
fn use_paths(tree: &[Token], prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut depth = 0;
    let mut start = 0;
    for (i, t) in tree.iter().enumerate() {
        match t {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => depth -= 1,
            Token::Punct(',') if depth == 0 => {
                use_item(&tree[start..i], prefix, out);
                start = i + 1;
            }
            _ => {}
        }
    }
    use_item(&tree[start..], prefix, out);
}

fn use_item(item: &[Token], prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    for (i, t) in item.iter().enumerate() {
        match t {
            Token::Ident(name) if name == "as" => break,
            Token::Ident(name) => path.push(name.clone()),
            Token::Punct('{') => {
                let inner = item.get(i + 1..item.len().saturating_sub(1)).unwrap_or(&[]);
                return use_paths(inner, &path, out);
            }
            _ => {}
        }
    }
    if path.len() > prefix.len() {
        out.push(path);
    }
}

/// Every path a file names, with the module it is named from (the file's module, or an inline module
/// inside it, such as `mod tests { use super::*; }`): `use` trees and paths in code (`a::b::c`).
fn named_paths(source: &str, module: &[String]) -> Vec<(Vec<String>, Vec<String>)> {
    let toks = tokens(source);
    let mut out = Vec::new();
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let here: Vec<String> = module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(name, _)| name.clone()))
            .collect();
        match &toks[i] {
            Token::Ident(kw) if kw == "mod" => {
                if let (Some(Token::Ident(name)), Some(Token::Punct('{'))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    inline.push((name.clone(), depth + 1));
                }
            }
            Token::Ident(kw) if kw == "use" && (i == 0 || toks[i - 1] != Token::PathSep) => {
                let end = toks[i..]
                    .iter()
                    .position(|t| *t == Token::Punct(';'))
                    .map_or(toks.len(), |p| i + p);
                let mut paths = Vec::new();
                use_paths(&toks[i + 1..end], &[], &mut paths);
                out.extend(paths.into_iter().map(|p| (here.clone(), p)));
                i = end;
            }
            Token::Ident(first)
                if toks.get(i + 1) == Some(&Token::PathSep)
                    && (i == 0 || toks[i - 1] != Token::PathSep) =>
            {
                let mut path = vec![first.clone()];
                let mut j = i + 1;
                while toks.get(j) == Some(&Token::PathSep) {
                    match toks.get(j + 1) {
                        Some(Token::Ident(name)) => path.push(name.clone()),
                        _ => break,
                    }
                    j += 2;
                }
                out.push((here.clone(), path));
                i = j;
                continue;
            }
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The modules of a crate that have a file of their own, from its root along `mod name;` declarations
/// (`name.rs` or `name/mod.rs` beside, or under the folder of, the declaring file).
fn module_files(
    root: &Path,
    read: &dyn Fn(&Path) -> Option<String>,
) -> BTreeMap<Vec<String>, PathBuf> {
    let mut files = BTreeMap::new();
    let mut todo = vec![(Vec::<String>::new(), root.to_path_buf())];
    while let Some((module, path)) = todo.pop() {
        let Some(source) = read(&path) else { continue };
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let dir = path.parent().unwrap_or(Path::new(""));
        let children = if matches!(stem, "mod" | "lib" | "main") || module.is_empty() {
            dir.to_path_buf()
        } else {
            dir.join(stem)
        };
        let toks = tokens(&source);
        for w in toks.windows(3) {
            if let [Token::Ident(kw), Token::Ident(name), Token::Punct(';')] = w {
                if kw == "mod" {
                    let mut child = module.clone();
                    child.push(name.clone());
                    for candidate in [
                        children.join(format!("{name}.rs")),
                        children.join(name).join("mod.rs"),
                    ] {
                        if read(&candidate).is_some() {
                            todo.push((child.clone(), candidate));
                            break;
                        }
                    }
                }
            }
        }
        files.insert(module, path);
    }
    files
}

/// The file a path named from `from` lands in: the deepest module with a file along it. None for a
/// path outside the crate (`std::...`, another crate, a local type's `Self::...`).
fn resolve(
    from: &[String],
    path: &[String],
    files: &BTreeMap<Vec<String>, PathBuf>,
) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    let mut module: Vec<String> = match first.as_str() {
        "crate" => Vec::new(),
        "self" => from.to_vec(),
        "super" => from[..from.len().checked_sub(1)?].to_vec(),
        name => {
            let mut child = from.to_vec();
            child.push(name.to_owned());
            if !files.contains_key(&child) {
                return None;
            }
            return resolve(from, &[&["self".to_owned()], path].concat(), files);
        }
    };
    for segment in rest {
        match segment.as_str() {
            "super" => {
                module.pop();
            }
            "self" => {}
            name => {
                module.push(name.to_owned());
                if !files.contains_key(&module) {
                    module.pop();
                    break;
                }
            }
        }
    }
    // An inline module (`mod tests { .. }`) lives in its enclosing file.
    while !files.contains_key(&module) {
        module.pop();
    }
    Some(module)
}

/// Which files of a crate name which: an edge for every path into another file's module, except a
/// module naming its own descendants (`mod` declarations, `pub use child::Item`, dispatch to a child):
/// a module owns its children; the circles that count are between files that are not each other's
/// ancestors, or a child naming its parent while the parent reaches it through a third file.
fn import_graph(
    root: &Path,
    read: &dyn Fn(&Path) -> Option<String>,
) -> BTreeMap<String, BTreeSet<String>> {
    let files = module_files(root, read);
    let mut graph = BTreeMap::new();
    for (module, path) in &files {
        let mut edges = BTreeSet::new();
        let source = read(path).unwrap_or_default();
        for (from, named) in named_paths(&source, module) {
            let Some(target) = resolve(&from, &named, &files) else {
                continue;
            };
            if target.starts_with(module) {
                continue; // this file, or one of its descendants
            }
            edges.insert(files[&target].display().to_string());
        }
        graph.insert(path.display().to_string(), edges);
    }
    graph
}

/// Every import circle of a graph (its strongly connected components of two or more files), each as
/// one walk around it: `[a, b, c, a]`.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reaches = |from: &String, to: &String| -> bool {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(node) = todo.pop() {
            if &node == to {
                return true;
            }
            if seen.insert(node.clone()) {
                todo.extend(graph.get(&node).into_iter().flatten().cloned());
            }
        }
        false
    };
    let mut done = BTreeSet::new();
    let mut found = Vec::new();
    for node in graph.keys() {
        if done.contains(node) {
            continue;
        }
        let component: BTreeSet<String> = graph
            .keys()
            .filter(|other| reaches(node, other) && reaches(other, node))
            .cloned()
            .collect();
        done.extend(component.iter().cloned());
        if component.len() < 2 {
            continue;
        }
        // One walk from `node` through the component back to it (breadth first: the shortest).
        let mut parent = BTreeMap::new();
        let mut queue = VecDeque::from([node.clone()]);
        let mut last = None;
        'walk: while let Some(at) = queue.pop_front() {
            for next in graph.get(&at).into_iter().flatten() {
                if next == node {
                    last = Some(at.clone());
                    break 'walk;
                }
                if component.contains(next) && !parent.contains_key(next) {
                    parent.insert(next.clone(), at.clone());
                    queue.push_back(next.clone());
                }
            }
        }
        let mut walk = Vec::new();
        let mut at = last;
        while let Some(file) = at {
            at = parent.get(&file).cloned();
            walk.push(file);
        }
        walk.reverse();
        walk.push(node.clone());
        found.push(walk);
    }
    found
}

#[test]
fn no_import_circle_inside_a_crate() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &Path| std::fs::read_to_string(repo.join(p)).ok();
    let mut failures = Vec::new();
    for root in CRATE_ROOTS {
        let graph = import_graph(Path::new(root), &read);
        assert!(!graph.is_empty(), "{root}: not found");
        // The facade (src/lib.rs) is re-exports only; the others are trees of files.
        assert!(
            graph.len() > 1 || root == "src/lib.rs",
            "{root}: no modules found"
        );
        for walk in circles(&graph) {
            failures.push(walk.join(" -> "));
        }
    }
    assert!(
        failures.is_empty(),
        "files that import each other in a circle (move the shared piece to the file that owns it, or below both):\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_circle_checker_sees_circles() {
    let files: BTreeMap<&str, &str> = [
        (
            "x/lib.rs",
            "mod a;\nmod b;\nmod c;\nmod p;\npub use p::Q;\n",
        ),
        (
            "x/a.rs",
            r##"let q = '"'; let r = r#"crate::c "x""#; fn f<'a>(x: &'a str) {}
use crate::b::B; // crate::c in a comment
let s = "crate::c \" crate::c";
"##,
        ),
        ("x/b.rs", "pub struct B;\nfn f() { crate::c::run(); }\n"),
        ("x/c.rs", "use crate::{p::q::Q, a::{self, A as Z}};\n"),
        // A parent dispatching to its child, the child using the parent: the module's own tree.
        (
            "x/p/mod.rs",
            "mod q;\npub use q::Q;\nfn go() { q::run() }\npub(crate) fn helper() {}\n",
        ),
        (
            "x/p/q.rs",
            "use super::helper;\npub struct Q;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        ),
    ]
    .into_iter()
    .collect();
    let read = |p: &Path| files.get(p.to_str()?).map(|s| s.to_string());
    let graph = import_graph(Path::new("x/lib.rs"), &read);
    assert_eq!(graph.len(), 6, "{graph:?}");
    assert_eq!(
        circles(&graph),
        [["x/a.rs", "x/b.rs", "x/c.rs", "x/a.rs"]],
        "{graph:?}"
    );
    assert_eq!(
        graph["x/a.rs"].iter().collect::<Vec<_>>(),
        ["x/b.rs"],
        "comments, strings and character literals name nothing"
    );
    assert_eq!(
        graph["x/p/q.rs"].iter().collect::<Vec<_>>(),
        ["x/p/mod.rs"],
        "a child's inline tests naming super:: are in the child"
    );
    assert!(graph["x/p/mod.rs"].is_empty(), "{graph:?}");
}
