//! No module circles in `src` or `cli/src`: a module that uses another is never used by
//! it, directly or through others, so each can be read, tested and changed
//! with only what is below it in mind.
//!
//! The test reads the sources: every `use` and every path that names a
//! module (`super::…`, `crate::…`, `jsontp_protocol::…`, `self::…`) is an edge from
//! the file's module to the deepest module the path reaches, following
//! the re-exports of a parent (`pub use child::Name`) to the child that
//! defines the name. A module's own children and ancestors are its
//! structure, not a use. Unit tests (`mod tests` at the end of a file) are
//! left out: their `super` is the file itself.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A module, as its path from its crate's root (`lib` or `bin`).
type Module = Vec<String>;

struct Source {
    module: Module,
    code: String,
}

/// The library's sources (crate `lib`), and the command's: its library
/// (crate `cli`, the file server) and its binary (crate `bin`).
fn sources() -> Vec<Source> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = sources_of(&root.join("src"), |_| "lib");
    out.extend(sources_of(&root.join("cli/src"), |first| {
        if first == "commands" || first == "main" {
            "bin"
        } else {
            "cli"
        }
    }));
    out
}

/// The sources under `src`, each in the crate `crate_of` names from the
/// first part of its path.
fn sources_of(src: &Path, crate_of: impl Fn(&str) -> &'static str) -> Vec<Source> {
    let mut files = Vec::new();
    walk(src, &mut files);
    let mut out = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap().with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        let crate_name = crate_of(&parts[0]);
        let last = parts.pop().unwrap();
        if !matches!(last.as_str(), "mod" | "lib" | "main") {
            parts.push(last);
        }
        let mut module = vec![crate_name.to_owned()];
        module.extend(parts);
        let text = fs::read_to_string(&file).unwrap();
        out.push(Source {
            module,
            code: code_of(&text),
        });
    }
    out
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The code of a file without comments, string literals and its unit
/// tests.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (b'/', Some(b'/')) => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            (b'/', Some(b'*')) => {
                let end = text[i + 2..].find("*/").map_or(bytes.len(), |e| i + 2 + e + 2);
                i = end;
            }
            (b'"', _) => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            // A char literal such as '"' or '\'' would open a string.
            (b'\'', _) if text[i..].len() >= 3 && (bytes[i + 2] == b'\'' || bytes[i + 1] == b'\\') => {
                let end = text[i + 1..].find('\'').map_or(bytes.len(), |e| {
                    // '\'' ends at its second quote.
                    let first = i + 1 + e;
                    if bytes[i + 1] == b'\\' && e == 1 {
                        first + 1
                    } else {
                        first
                    }
                });
                i = end + 1;
                out.push_str("' '");
            }
            _ => {
                let c = text[i..].chars().next().unwrap();
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

/// Every module path written in `code`: use trees expanded, and inline
/// paths.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut rest = code;
    // `use` statements: their brace trees expanded.
    while let Some(at) = find_word(rest, "use") {
        let after = &rest[at + 3..];
        let end = after.find(';').unwrap_or(after.len());
        expand(&after[..end], Vec::new(), &mut paths);
        rest = &after[end..];
    }
    // Inline paths anywhere: `super::a::b`, `crate::a`, `jsontp_protocol::a`.
    let bytes = code.as_bytes();
    for start in [
        "super::",
        "crate::",
        "jsontp_protocol::",
        "jsontp_cli::",
        "self::",
    ] {
        let mut from = 0;
        while let Some(found) = code[from..].find(start) {
            let at = from + found;
            from = at + start.len();
            if at > 0
                && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_' || bytes[at - 1] == b':')
            {
                continue;
            }
            let mut end = at;
            while end < bytes.len()
                && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_' || bytes[end] == b':')
            {
                end += 1;
            }
            let path: Vec<String> = code[at..end]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            paths.push(path);
        }
    }
    paths
}

fn find_word(text: &str, word: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(found) = text[from..].find(word) {
        let at = from + found;
        let before = at.checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(at + word.len());
        let boundary = |b: Option<&u8>| b.is_none_or(|b| !(b.is_ascii_alphanumeric() || *b == b'_'));
        if boundary(before.as_ref()) && boundary(after) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// Expands a use tree (`a::{b, c::{d, e as f}}`) into its paths.
fn expand(tree: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let mut base = prefix.clone();
        base.extend(segments(&tree[..open]));
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut depth = 0;
        let mut item_start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&inner[item_start..i], base.clone(), out);
                    item_start = i + 1;
                }
                _ => {}
            }
        }
        expand(&inner[item_start..], base, out);
    } else {
        let tree = tree.split(" as ").next().unwrap_or_default();
        let mut path = prefix;
        path.extend(segments(tree));
        if !path.is_empty() {
            out.push(path);
        }
    }
}

fn segments(text: &str) -> Vec<String> {
    text.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

struct Graph {
    modules: BTreeSet<Module>,
    /// For each folder module: a name it re-exports, and the child module
    /// it comes from.
    reexports: BTreeMap<Module, BTreeMap<String, String>>,
}

impl Graph {
    fn new(sources: &[Source]) -> Graph {
        let modules = sources.iter().map(|s| s.module.clone()).collect();
        let mut graph = Graph {
            modules,
            reexports: BTreeMap::new(),
        };
        let parents: Vec<&Source> = sources.iter().filter(|s| graph.has_children(&s.module)).collect();
        for source in parents {
            let mut names = BTreeMap::new();
            let mut rest = source.code.as_str();
            while let Some(at) = find_word(rest, "use") {
                let after = &rest[at + 3..];
                let end = after.find(';').unwrap_or(after.len());
                let mut paths = Vec::new();
                expand(&after[..end], Vec::new(), &mut paths);
                for path in paths {
                    let mut child = source.module.clone();
                    child.push(path[0].clone());
                    if path.len() >= 2 && graph.modules.contains(&child) {
                        let last = path.last().unwrap();
                        let alias = after[..end]
                            .split(&format!("{last} as "))
                            .nth(1)
                            .and_then(|s| s.split([',', '}', ' ']).next())
                            .unwrap_or(last);
                        names.insert(alias.to_owned(), path[0].clone());
                    }
                }
                rest = &after[end..];
            }
            graph.reexports.insert(source.module.clone(), names);
        }
        graph
    }

    fn has_children(&self, module: &Module) -> bool {
        self.modules
            .iter()
            .any(|m| m.len() == module.len() + 1 && is_prefix(module, m))
    }

    /// The deepest module `path`, written in `source`, names.
    fn resolve(&self, source: &Source, path: &[String]) -> Option<Module> {
        let (mut at, rest) = match path.first()?.as_str() {
            "crate" => (vec![source.module[0].clone()], &path[1..]),
            "jsontp_protocol" => (vec!["lib".to_owned()], &path[1..]),
            "jsontp_cli" => (vec!["cli".to_owned()], &path[1..]),
            "self" => (source.module.clone(), &path[1..]),
            "super" => {
                let mut at = source.module.clone();
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    at.pop();
                    rest = &rest[1..];
                }
                (at, rest)
            }
            // A child of the file's own module (`use child::X` in a
            // folder file).
            first => {
                let mut child = source.module.clone();
                child.push(first.to_owned());
                if self.modules.contains(&child) {
                    (source.module.clone(), path)
                } else {
                    return None;
                }
            }
        };
        for segment in rest {
            let mut next = at.clone();
            next.push(segment.clone());
            if self.modules.contains(&next) {
                at = next;
                continue;
            }
            match self.reexports.get(&at).and_then(|names| names.get(segment)) {
                Some(child) => {
                    at.push(child.clone());
                    // The child may re-export it in turn; the name is
                    // resolved again there.
                    return self.resolve_name(at, segment);
                }
                None => break,
            }
        }
        Some(at)
    }

    fn resolve_name(&self, mut at: Module, name: &str) -> Option<Module> {
        while let Some(child) = self.reexports.get(&at).and_then(|names| names.get(name)) {
            at.push(child.clone());
        }
        Some(at)
    }
}

fn is_prefix(a: &Module, b: &Module) -> bool {
    a.len() <= b.len() && b[..a.len()] == a[..]
}

fn edges(sources: &[Source]) -> BTreeMap<Module, BTreeSet<Module>> {
    let graph = Graph::new(sources);
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for source in sources {
        for path in paths_in(&source.code) {
            let Some(target) = graph.resolve(source, &path) else {
                continue;
            };
            if is_prefix(&target, &source.module) || is_prefix(&source.module, &target) {
                continue;
            }
            edges.entry(source.module.clone()).or_default().insert(target);
        }
    }
    edges
}

/// The strongly connected components with more than one module (Tarjan).
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'e> {
        edges: &'e BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on_stack: BTreeSet<Module>,
        found: Vec<Vec<Module>>,
    }
    fn visit(s: &mut State<'_>, m: &Module) {
        let i = s.index.len();
        s.index.insert(m.clone(), i);
        s.low.insert(m.clone(), i);
        s.stack.push(m.clone());
        s.on_stack.insert(m.clone());
        for next in s.edges.get(m).into_iter().flatten() {
            if !s.index.contains_key(next) {
                visit(s, next);
                let low = s.low[m].min(s.low[next]);
                s.low.insert(m.clone(), low);
            } else if s.on_stack.contains(next) {
                let low = s.low[m].min(s.index[next]);
                s.low.insert(m.clone(), low);
            }
        }
        if s.low[m] == s.index[m] {
            let mut component = Vec::new();
            loop {
                let top = s.stack.pop().unwrap();
                s.on_stack.remove(&top);
                let done = &top == m;
                component.push(top);
                if done {
                    break;
                }
            }
            if component.len() > 1 {
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for m in edges.keys() {
        if !s.index.contains_key(m) {
            visit(&mut s, m);
        }
    }
    s.found
}

fn name(m: &Module) -> String {
    m.join("::")
}

#[test]
fn no_module_circle_in_src() {
    let sources = sources();
    let edges = edges(&sources);
    let found = circles(&edges);
    let report: Vec<String> = found
        .iter()
        .map(|component| {
            let members: BTreeSet<&Module> = component.iter().collect();
            let mut lines = Vec::new();
            for m in &members {
                for target in edges
                    .get(*m)
                    .into_iter()
                    .flatten()
                    .filter(|t| members.contains(t))
                {
                    lines.push(format!("  {} uses {}", name(m), name(target)));
                }
            }
            lines.join("\n")
        })
        .collect();
    assert!(found.is_empty(), "module circles:\n{}", report.join("\n\n"));
}

/// The floors of the library, lowest first: a module uses only modules on
/// its own floor or below. The adapters serve any `Handler`; the
/// application layer is one, built on them, never the other way round.
const FLOORS: [&str; 4] = ["message", "machine", "io_adapters", "app"];

/// The uses that run from a floor up to a higher one.
fn uses_upward(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    let floor = |m: &Module| -> Option<usize> {
        (m.first().map(String::as_str) == Some("lib"))
            .then(|| {
                FLOORS
                    .iter()
                    .position(|f| m.get(1).map(String::as_str) == Some(*f))
            })
            .flatten()
    };
    let mut upward = Vec::new();
    for (from, targets) in edges {
        for to in targets {
            if let (Some(low), Some(high)) = (floor(from), floor(to))
                && high > low
            {
                upward.push(format!("{} uses {}", name(from), name(to)));
            }
        }
    }
    upward
}

#[test]
fn no_module_uses_a_floor_above_its_own() {
    let upward = uses_upward(&edges(&sources()));
    assert!(
        upward.is_empty(),
        "uses up the floors:\n  {}",
        upward.join("\n  ")
    );
}

#[test]
fn the_floor_check_finds_an_adapter_that_uses_the_application_layer() {
    let source = |module: &[&str], code: &str| Source {
        module: module.iter().map(|s| (*s).to_owned()).collect(),
        code: code_of(code),
    };
    let sources = [
        source(&["lib"], "pub mod app;\npub mod io_adapters;"),
        source(
            &["lib", "app"],
            "pub struct Refusal;\nuse crate::io_adapters::Handler;",
        ),
        source(
            &["lib", "io_adapters"],
            "pub trait Handler {}\nfn f() { crate::app::Refusal; }",
        ),
    ];
    assert_eq!(uses_upward(&edges(&sources)), ["lib::io_adapters uses lib::app"]);
}

/// The test finds what it is meant to find: a circle written in two
/// files, through a parent's re-export.
#[test]
fn the_check_finds_a_circle_through_a_re_export() {
    let source = |module: &[&str], code: &str| Source {
        module: module.iter().map(|s| (*s).to_owned()).collect(),
        code: code_of(code),
    };
    let sources = [
        source(&["lib"], "pub mod a;\nmod b;"),
        source(&["lib", "a"], "mod x;\npub use x::Thing;"),
        source(&["lib", "a", "x"], "use crate::b::helper; // uses b\n"),
        source(
            &["lib", "b"],
            "use super::a::Thing;\nfn f() { crate::a::Thing::new(); }",
        ),
    ];
    let found = circles(&edges(&sources));
    assert_eq!(found.len(), 1, "{found:?}");
    let members: BTreeSet<String> = found[0].iter().map(name).collect();
    assert_eq!(
        members,
        BTreeSet::from(["lib::a::x".to_owned(), "lib::b".to_owned()])
    );
    // Without the use back, no circle.
    let sources = [
        source(&["lib"], "pub mod a;\nmod b;"),
        source(&["lib", "a"], "mod x;\npub use x::Thing;"),
        source(
            &["lib", "a", "x"],
            "// use crate::b::helper;\nconst S: &str = \"crate::b\";",
        ),
        source(&["lib", "b"], "use super::a::Thing;"),
    ];
    assert!(circles(&edges(&sources)).is_empty());
}
