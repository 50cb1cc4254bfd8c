//! A crate's modules as its files make them, and which of them name which:
//! the graph the architecture test reads for import cycles and for a type
//! whose `impl` blocks are spread over many files.
//!
//! Read from the source text, not the compiler: `use` statements (braces
//! expanded) and `crate::`/`super::` paths in code, each taken to the
//! deepest module it names. A file's `#[cfg(test)] mod tests` is left out
//! (its `super` is the file's own module, and tests may reach anywhere).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside its crate: `["grade", "hab"]`; the root is `[]`.
pub type Module = Vec<String>;

/// Each module's file.
pub fn files(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut modules = BTreeMap::new();
    walk(src, src, &mut modules);
    modules
}

fn walk(src: &Path, dir: &Path, modules: &mut BTreeMap<Module, PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(src, &path, modules);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let mut module: Module = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                module.pop();
            }
            modules.insert(module, path);
        }
    }
}

/// The source of a file without its test module and its comments (a doc
/// link names a module without importing it).
pub fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => &text,
    };
    text.lines()
        .map(|line| match line.trim_start().starts_with("//") {
            true => "",
            false => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules `module`'s code names (other than itself).
pub fn named(module: &Module, code: &str, modules: &BTreeMap<Module, PathBuf>) -> BTreeSet<Module> {
    let mut paths = Vec::new();
    for statement in use_statements(code) {
        expand(&statement, &mut paths);
    }
    paths.extend(code_paths(code));
    paths
        .into_iter()
        .filter_map(|path| resolve(module, &path))
        .filter_map(|path| deepest(&path, modules))
        .filter(|target| target != module)
        .collect()
}

/// The `use` statements' paths, without `use`, visibility and `;`.
fn use_statements(code: &str) -> Vec<String> {
    let mut statements = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        rest = &rest[at + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest.find(';').unwrap_or(rest.len());
        let statement: String = rest[..end].split_whitespace().collect();
        if statement.starts_with("crate::") || statement.starts_with("super::") {
            statements.push(statement);
        }
        rest = &rest[end..];
    }
    statements
}

/// `a::{b, c::{d, e}}` as `a::b`, `a::c::d`, `a::c::e`.
fn expand(statement: &str, out: &mut Vec<String>) {
    let Some(open) = statement.find('{') else {
        out.push(statement.to_string());
        return;
    };
    let prefix = &statement[..open];
    let inner = &statement[open + 1..statement.rfind('}').unwrap_or(statement.len())];
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                expand(&format!("{prefix}{}", &inner[start..i]), out);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < inner.len() {
        expand(&format!("{prefix}{}", &inner[start..]), out);
    }
}

/// `crate::…` and `super::…` paths written in code outside `use`.
fn code_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for root in ["crate::", "super::"] {
        let mut rest = code;
        while let Some(at) = rest.find(root) {
            let before = rest[..at].chars().last();
            let path: String = rest[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            rest = &rest[at + root.len()..];
            // `crate::{…}` opens a use statement, read whole above.
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
                || path.ends_with("::")
            {
                continue;
            }
            paths.push(path);
        }
    }
    paths
}

/// A path as segments from the crate's root.
fn resolve(module: &Module, path: &str) -> Option<Module> {
    let mut segments = path.split("::").filter(|s| !s.is_empty()).peekable();
    let mut at: Module = match segments.peek() {
        Some(&"crate") => {
            segments.next();
            Vec::new()
        }
        Some(&"super") => module.clone(),
        _ => return None,
    };
    while segments.peek() == Some(&"super") {
        segments.next();
        at.pop()?;
    }
    at.extend(segments.map(str::to_string));
    Some(at)
}

/// The deepest module that `path` lies in.
fn deepest(path: &Module, modules: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| modules.contains_key(prefix))
}

/// The import cycles between sibling modules (neither inside the other):
/// each a set of siblings that name each other round, in module order.
pub fn sibling_cycles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    // Lift each edge to the children of the two ends' common parent.
    let mut siblings: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (from, targets) in edges {
        for to in targets {
            let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                continue; // one inside the other: a parent and its child
            }
            siblings
                .entry(from[..=common].to_vec())
                .or_default()
                .insert(to[..=common].to_vec());
        }
    }
    components(&siblings)
        .into_iter()
        .filter(|c| c.len() > 1)
        .collect()
}

/// The strongly connected components of `graph` (Tarjan's algorithm).
fn components(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        found: Vec<Vec<Module>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, at: &'a Module) {
            let n = self.index.len();
            self.index.insert(at, n);
            self.low.insert(at, n);
            self.stack.push(at);
            for next in self.graph.get(at).into_iter().flatten() {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[at].min(self.low[next]);
                    self.low.insert(at, low);
                } else if self.stack.contains(&next) {
                    let low = self.low[at].min(self.index[next]);
                    self.low.insert(at, low);
                }
            }
            if self.low[at] == self.index[at] {
                let mut component = Vec::new();
                while let Some(m) = self.stack.pop() {
                    component.push(m.clone());
                    if m == at {
                        break;
                    }
                }
                component.sort();
                self.found.push(component);
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node) {
            walk.visit(node);
        }
    }
    walk.found
}

/// The files holding an inherent `impl` block of each type: `module::Type`
/// where the type is defined (a type of one name defined in two modules
/// is told apart by the one nearest the `impl`).
pub fn inherent_impls(modules: &BTreeMap<Module, PathBuf>) -> BTreeMap<String, BTreeSet<PathBuf>> {
    let defined = definitions(modules);
    let mut impls: BTreeMap<String, BTreeSet<PathBuf>> = BTreeMap::new();
    for (module, path) in modules {
        for name in code(path).lines().filter_map(inherent_impl) {
            let owner = defined
                .get(&name)
                .into_iter()
                .flatten()
                .filter(|d| module.starts_with(d))
                .max_by_key(|d| d.len())
                .or_else(|| defined.get(&name).filter(|d| d.len() == 1).map(|d| &d[0]));
            let key = match owner {
                Some(owner) => format!("{}::{name}", owner.join("::")),
                None => name,
            };
            impls.entry(key).or_default().insert(path.clone());
        }
    }
    impls
}

/// The modules defining a struct or an enum of each name.
fn definitions(modules: &BTreeMap<Module, PathBuf>) -> BTreeMap<String, Vec<Module>> {
    let mut defined: BTreeMap<String, Vec<Module>> = BTreeMap::new();
    for (module, path) in modules {
        for line in code(path).lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let Some(at) = words.iter().position(|w| *w == "struct" || *w == "enum") else {
                continue;
            };
            if !words[..at].iter().all(|w| w.starts_with("pub")) {
                continue;
            }
            if let Some(name) = words.get(at + 1) {
                let name: String = name
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                defined.entry(name).or_default().push(module.clone());
            }
        }
    }
    defined
}

/// The type of an inherent `impl` block's first line, if it is one.
fn inherent_impl(line: &str) -> Option<String> {
    let line = line.trim();
    let rest = line.strip_prefix("impl")?;
    if !(rest.starts_with(' ') || rest.starts_with('<'))
        || !line.ends_with('{')
        || line.contains(" for ")
    {
        return None;
    }
    let name: String = skip_generics(rest.trim_start())
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// `<…> rest` as `rest`.
fn skip_generics(text: &str) -> &str {
    if !text.starts_with('<') {
        return text;
    }
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => {
                depth -= 1;
                if depth == 0 {
                    return &text[i + 1..];
                }
            }
            _ => {}
        }
    }
    ""
}

#[test]
fn a_cycle_between_siblings_is_found_and_a_parent_with_its_child_is_not() {
    let m = |path: &str| -> Module {
        path.split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let modules: BTreeMap<Module, PathBuf> = ["", "a", "a::x", "b", "c"]
        .iter()
        .map(|p| (m(p), PathBuf::new()))
        .collect();
    // a::x names b through a grouped use, b names a in code, c names a only.
    let named_by_x = named(&m("a::x"), "use crate::{b::Thing, c};", &modules);
    assert_eq!(named_by_x, [m("b"), m("c")].into_iter().collect());
    let named_by_b = named(&m("b"), "fn f() { crate::a::helper() }", &modules);
    let named_by_a = named(&m("a"), "use self::x::Y;\nuse super::c;", &modules);
    let edges: BTreeMap<Module, BTreeSet<Module>> = [
        (m("a::x"), named_by_x),
        (m("b"), named_by_b),
        (m("a"), named_by_a),
    ]
    .into_iter()
    .collect();
    assert_eq!(sibling_cycles(&edges), [vec![m("a"), m("b")]]);
}
