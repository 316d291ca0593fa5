//! The crate's floors, kept: the import graph of `src/`, drawn from the code's own paths,
//! has no circle, and no file of the core imports a capability.
//!
//! Each file of `src/` (the binaries aside) is a node. An arrow runs from a file to each
//! file whose item it names through a path of the crate: `crate::…`, `super::…`, `self::…`
//! or a child module's name, in a `use` or inline in the code. A path through a folder's
//! re-export (a `pub use` in `trading/mod.rs`) is an arrow to that file and on to the
//! file that defines the item; a path through `lib.rs`'s re-exports (`crate::Breaker`) is
//! an arrow to the file that defines the item (`breaker.rs`), since `lib.rs` itself
//! imports every file. `lib.rs`'s own declarations and re-exports are no arrow.
//! Comments, strings and unit tests (`#[cfg(test)] mod`) are left out.
//!
//! The core is every file outside a capability's folder ([`CAPABILITIES`]). A capability
//! is one node for the circle check: a folder's `mod.rs` and its children may import each
//! other. `docs/design.md` ("Floors") draws the picture this keeps.
//!
//! `cargo test -p fusebox --test layers -- --ignored --nocapture` prints every file on its
//! floor and every arrow.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The folders of `src/` that stand on the core: no core file imports any file in them.
const CAPABILITIES: &[&str] = &[
    "admin",
    "chain",
    "config_file",
    "fleet",
    "http",
    "isolation",
    "prometheus",
    "registry",
    "replay",
    "retry",
    "trading",
];

/// A module path below the crate root: `[]` is `lib.rs`, `["trading", "probe"]` is
/// `trading/probe.rs`.
type Module = Vec<String>;

#[test]
fn the_import_graph_has_no_circle() {
    let graph = Graph::of_src().folded();
    if let Some(circle) = graph.circle() {
        panic!(
            "the imports of src/ run in a circle: {}",
            graph.show(&circle)
        );
    }
}

#[test]
fn no_core_file_imports_a_capability() {
    let graph = Graph::of_src();
    let up: Vec<String> = graph
        .arrows()
        .filter(|(from, to)| capability(from).is_none() && capability(to).is_some())
        .map(|(from, to)| format!("{} -> {}", graph.file(from), graph.file(to)))
        .collect();
    assert!(
        up.is_empty(),
        "core files import a capability:\n{}",
        up.join("\n")
    );
}

#[test]
fn the_machine_imports_only_the_core() {
    let graph = Graph::of_src();
    let machine = vec!["machine".to_string()];
    assert!(graph.nodes.contains_key(&machine), "src/machine.rs is gone");
    let above: Vec<&str> = graph.edges[&machine]
        .iter()
        .filter(|to| capability(to).is_some() || to.as_slice() == ["breaker"])
        .map(|to| graph.file(to))
        .collect();
    assert!(above.is_empty(), "src/machine.rs imports {above:?}");
}

/// Not a check: prints every file on its floor (floor 0 imports nothing of the crate;
/// files in a circle share a floor) and every arrow.
#[test]
#[ignore]
fn print_the_floors() {
    let graph = Graph::of_src();
    let floors = graph.floors();
    let top = floors.values().copied().max().unwrap_or(0);
    for floor in 0..=top {
        let files: Vec<&str> = floors
            .iter()
            .filter(|(_, f)| **f == floor)
            .map(|(m, _)| graph.file(m))
            .collect();
        println!("floor {floor}: {}", files.join(" "));
    }
    let arrows: Vec<_> = graph.arrows().collect();
    let between = |from: &Module, to: &Module| {
        capability(from).is_some() && capability(to).is_some() && capability(from) != capability(to)
    };
    println!(
        "{} files, {} arrows: {} from the core up to a capability, {} between two \
         capabilities",
        graph.nodes.len(),
        arrows.len(),
        arrows
            .iter()
            .filter(|(from, to)| capability(from).is_none() && capability(to).is_some())
            .count(),
        arrows.iter().filter(|(from, to)| between(from, to)).count(),
    );
    for (from, to) in arrows {
        println!("  {} -> {}", graph.file(from), graph.file(to));
    }
}

/// The capability a module belongs to, if any.
fn capability(module: &Module) -> Option<&str> {
    let first = module.first()?;
    CAPABILITIES
        .contains(&first.as_str())
        .then_some(first.as_str())
}

struct Graph {
    /// Every file, by module, with its path under `src/`.
    nodes: BTreeMap<Module, String>,
    /// The arrows out of each file.
    edges: BTreeMap<Module, BTreeSet<Module>>,
}

impl Graph {
    fn of_src() -> Graph {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        walk(&src, &mut files);
        let mut parsed = BTreeMap::new();
        let mut nodes = BTreeMap::new();
        for path in files {
            let relative = path.strip_prefix(&src).unwrap();
            if relative.starts_with("bin") {
                continue;
            }
            let module = module_of(relative);
            let text = fs::read_to_string(&path).unwrap();
            nodes.insert(module.clone(), relative.display().to_string());
            parsed.insert(module.clone(), parse(&module, &text));
        }
        let mut edges = BTreeMap::new();
        for (module, file) in &parsed {
            let mut to = BTreeSet::new();
            if !module.is_empty() {
                for path in &file.paths {
                    for target in resolve(&parsed, path, 0) {
                        if &target != module && !target.is_empty() {
                            to.insert(target);
                        }
                    }
                }
            }
            edges.insert(module.clone(), to);
        }
        Graph { nodes, edges }
    }

    /// The graph with each capability's folder as one node, named after the folder:
    /// arrows between the files of one capability are its own business.
    fn folded(&self) -> Graph {
        let fold = |m: &Module| match capability(m) {
            Some(c) => vec![c.to_string()],
            None => m.clone(),
        };
        let mut nodes = BTreeMap::new();
        let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for (module, file) in &self.nodes {
            let folded = fold(module);
            let name = match capability(module) {
                Some(c) => format!("{c}/"),
                None => file.clone(),
            };
            nodes.insert(folded.clone(), name);
            edges.entry(folded).or_default();
        }
        for (from, to) in self.arrows() {
            let (from, to) = (fold(from), fold(to));
            if from != to {
                edges.entry(from).or_default().insert(to);
            }
        }
        Graph { nodes, edges }
    }

    /// A circle as a line of arrows, back to where it starts.
    fn show(&self, circle: &[Module]) -> String {
        let mut names: Vec<&str> = circle.iter().map(|m| self.file(m)).collect();
        names.push(self.file(&circle[0]));
        names.join(" -> ")
    }

    fn file(&self, module: &Module) -> &str {
        &self.nodes[module]
    }

    fn arrows(&self) -> impl Iterator<Item = (&Module, &Module)> {
        self.edges
            .iter()
            .flat_map(|(from, to)| to.iter().map(move |t| (from, t)))
    }

    /// A circle of arrows, if there is one: found by walking the graph depth first until
    /// a file on the current path comes up again.
    fn circle(&self) -> Option<Vec<Module>> {
        fn walk<'a>(
            g: &'a Graph,
            v: &'a Module,
            path: &mut Vec<&'a Module>,
            done: &mut BTreeSet<&'a Module>,
        ) -> Option<Vec<Module>> {
            if let Some(at) = path.iter().position(|p| *p == v) {
                return Some(path[at..].iter().map(|m| (*m).clone()).collect());
            }
            if !done.insert(v) {
                return None;
            }
            path.push(v);
            let found = g.edges[v].iter().find_map(|w| walk(g, w, path, done));
            path.pop();
            found
        }
        let mut done = BTreeSet::new();
        self.nodes
            .keys()
            .find_map(|v| walk(self, v, &mut Vec::new(), &mut done))
    }

    /// Each file's floor: 0 for a file that imports nothing of the crate, else one above
    /// the highest file it imports (files in a circle share the circle's floor).
    fn floors(&self) -> BTreeMap<&Module, usize> {
        let mut floors = BTreeMap::new();
        fn floor<'a>(
            g: &'a Graph,
            v: &'a Module,
            floors: &mut BTreeMap<&'a Module, usize>,
            visiting: &mut BTreeSet<&'a Module>,
        ) -> usize {
            if let Some(f) = floors.get(v) {
                return *f;
            }
            if !visiting.insert(v) {
                return 0;
            }
            let f = g.edges[v]
                .iter()
                .map(|w| floor(g, w, floors, visiting) + 1)
                .max()
                .unwrap_or(0);
            visiting.remove(v);
            floors.insert(v, f);
            f
        }
        for v in self.nodes.keys() {
            floor(self, v, &mut floors, &mut BTreeSet::new());
        }
        floors.remove(&Vec::new());
        floors
    }
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

/// `trading/mod.rs` is `trading`, `trading/probe.rs` is `trading::probe`, `lib.rs` the root.
fn module_of(relative: &Path) -> Module {
    let mut module: Module = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
        module.pop();
    }
    module
}

/// What one file says about the crate's paths.
struct File {
    /// Every path of the crate the file's own code names, made absolute.
    paths: Vec<Module>,
    /// Names a `use` binds in the file's module, and the absolute path each stands for:
    /// how a path that goes through this file reaches the file that defines the item.
    uses: BTreeMap<String, Module>,
    /// The modules whose items a glob `use` brings in.
    globs: Vec<Module>,
}

/// Follows `path` to the file that defines what it names: every file it goes through
/// (a re-export), and that file last.
fn resolve(files: &BTreeMap<Module, File>, path: &Module, depth: usize) -> Vec<Module> {
    let mut module = path.clone();
    while !module.is_empty() && !files.contains_key(&module) {
        module.pop();
    }
    let rest = &path[module.len()..];
    // A re-export, in `lib.rs` or a folder's `mod.rs`, is followed to the file that
    // defines the item (`lib.rs` itself is no node of an arrow: see `Graph::of_src`).
    if depth < 8 {
        if let Some(name) = rest.first() {
            let file = &files[&module];
            if let Some(target) = file.uses.get(name) {
                let mut next = target.clone();
                next.extend_from_slice(&rest[1..]);
                let mut all = vec![module.clone()];
                all.extend(resolve(files, &next, depth + 1));
                return all;
            }
            for glob in &file.globs {
                let mut next = glob.clone();
                next.extend_from_slice(rest);
                let found = resolve(files, &next, depth + 1);
                if found.last() != Some(glob) {
                    let mut all = vec![module.clone()];
                    all.extend(found);
                    return all;
                }
            }
        }
    }
    vec![module]
}

#[derive(Debug, PartialEq)]
enum Token {
    Ident(String),
    Colons,
    Punct(char),
}

fn parse(module: &Module, text: &str) -> File {
    let tokens = tokenize(&strip(text));
    let children: BTreeSet<String> = tokens
        .windows(3)
        .filter_map(|w| match w {
            [Token::Ident(m), Token::Ident(name), Token::Punct(';')] if m == "mod" => {
                Some(name.clone())
            }
            _ => None,
        })
        .collect();
    let mut file = File {
        paths: Vec::new(),
        uses: BTreeMap::new(),
        globs: Vec::new(),
    };
    // The inline modules the scan is inside: name, brace depth at its opening, whether
    // it is a unit test module.
    let mut scopes: Vec<(String, usize, bool)> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < tokens.len() {
        let in_test = scopes.iter().any(|s| s.2);
        let mut here = module.clone();
        here.extend(scopes.iter().map(|s| s.0.clone()));
        let at_top = scopes.is_empty();
        match &tokens[i] {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                depth -= 1;
                if scopes.last().is_some_and(|s| s.1 == depth) {
                    scopes.pop();
                }
            }
            Token::Ident(m) if m == "mod" => {
                if let (Some(Token::Ident(name)), Some(Token::Punct('{'))) =
                    (tokens.get(i + 1), tokens.get(i + 2))
                {
                    let test = in_test || after_cfg_test(&tokens[..i]);
                    scopes.push((name.clone(), depth, test));
                    depth += 1;
                    i += 3;
                    continue;
                }
            }
            Token::Ident(u) if u == "use" => {
                let end = tokens[i..]
                    .iter()
                    .position(|t| *t == Token::Punct(';'))
                    .map_or(tokens.len(), |p| i + p);
                let mut leaves = Vec::new();
                use_tree(&tokens[i + 1..end], &mut Vec::new(), &mut leaves);
                for (path, bound, glob) in leaves {
                    let Some(absolute) = absolute(&here, &children, &path, at_top) else {
                        continue;
                    };
                    if !in_test {
                        file.paths.push(absolute.clone());
                    }
                    if at_top {
                        if glob {
                            file.globs.push(absolute);
                        } else if let Some(name) = bound {
                            file.uses.insert(name, absolute);
                        }
                    }
                }
                i = end + 1;
                continue;
            }
            Token::Ident(first)
                if matches!(tokens.get(i + 1), Some(Token::Colons))
                    && !matches!(i.checked_sub(1).map(|p| &tokens[p]), Some(Token::Colons)) =>
            {
                let mut path = vec![first.clone()];
                let mut j = i + 1;
                while let (Some(Token::Colons), Some(Token::Ident(next))) =
                    (tokens.get(j), tokens.get(j + 1))
                {
                    path.push(next.clone());
                    j += 2;
                }
                if let Some(absolute) = absolute(&here, &children, &path, at_top) {
                    if !in_test {
                        file.paths.push(absolute);
                    }
                }
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    file
}

/// Whether the tokens before an item end with `#[cfg(test)]`.
fn after_cfg_test(before: &[Token]) -> bool {
    let attribute = [
        Token::Punct('#'),
        Token::Punct('['),
        Token::Ident("cfg".into()),
        Token::Punct('('),
        Token::Ident("test".into()),
        Token::Punct(')'),
        Token::Punct(']'),
    ];
    before.ends_with(&attribute)
}

/// Makes a path written in module `here` absolute, if it is a path of the crate.
fn absolute(
    here: &Module,
    children: &BTreeSet<String>,
    path: &[String],
    at_top: bool,
) -> Option<Module> {
    let mut out = here.clone();
    let mut rest = path;
    match path.first()?.as_str() {
        "crate" => {
            out.clear();
            rest = &path[1..];
        }
        "self" => rest = &path[1..],
        "super" => {
            while rest.first().is_some_and(|s| s == "super") {
                out.pop();
                rest = &rest[1..];
            }
        }
        first if at_top && children.contains(first) => {}
        _ => return None,
    }
    out.extend(rest.iter().cloned());
    Some(out)
}

/// The leaves of a use tree: each path, the name it binds (none for `_`), and whether it
/// is a glob.
fn use_tree(
    tokens: &[Token],
    prefix: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>, bool)>,
) {
    let mut i = 0;
    let start = prefix.len();
    while i < tokens.len() {
        match &tokens[i] {
            Token::Ident(name) if name == "as" => {
                if let (Some(Token::Ident(alias)), Some(last)) = (tokens.get(i + 1), out.last_mut())
                {
                    last.1 = (alias != "_").then(|| alias.clone());
                }
                i += 2;
            }
            Token::Ident(name) if name == "self" && !prefix.is_empty() => {
                out.push((prefix.clone(), prefix.last().cloned(), false));
                i += 1;
            }
            Token::Ident(name) => {
                prefix.push(name.clone());
                if !matches!(tokens.get(i + 1), Some(Token::Colons)) {
                    out.push((prefix.clone(), Some(name.clone()), false));
                    prefix.truncate(start);
                }
                i += 1;
            }
            Token::Colons => i += 1,
            Token::Punct('*') => {
                out.push((prefix.clone(), None, true));
                prefix.truncate(start);
                i += 1;
            }
            Token::Punct('{') => {
                let mut level = 0;
                let mut close = i;
                for (k, t) in tokens.iter().enumerate().skip(i) {
                    match t {
                        Token::Punct('{') => level += 1,
                        Token::Punct('}') => {
                            level -= 1;
                            if level == 0 {
                                close = k;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                // Each comma-separated subtree at this level.
                let inner = &tokens[i + 1..close];
                let mut level = 0;
                let mut from = 0;
                for (k, t) in inner.iter().enumerate() {
                    match t {
                        Token::Punct('{') => level += 1,
                        Token::Punct('}') => level -= 1,
                        Token::Punct(',') if level == 0 => {
                            use_tree(&inner[from..k], prefix, out);
                            from = k + 1;
                        }
                        _ => {}
                    }
                }
                use_tree(&inner[from..], prefix, out);
                prefix.truncate(start);
                i = close + 1;
            }
            _ => i += 1,
        }
    }
    prefix.truncate(start);
}

fn tokenize(code: &str) -> Vec<Token> {
    let chars: Vec<char> = code.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token::Ident(chars[start..i].iter().collect()));
            continue;
        }
        if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push(Token::Colons);
            i += 2;
            continue;
        }
        if !c.is_whitespace() {
            tokens.push(Token::Punct(c));
        }
        i += 1;
    }
    tokens
}

/// The code with its comments, strings and character literals blanked out.
fn strip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let before = i.checked_sub(1).map(|p| chars[p]);
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut level = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    level += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    level -= 1;
                    i += 2;
                    if level == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r'
            && !before.is_some_and(ident)
            && matches!(next, Some('"' | '#'))
            && raw_string_end(&chars, i + 1).is_some()
        {
            i = raw_string_end(&chars, i + 1).unwrap();
            out.push(' ');
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(' ');
        } else if c == '\'' && next == Some('\\') {
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push(' ');
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push(' ');
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Where a raw string whose hashes start at `at` ends (one past its last `#`), if `at`
/// opens one.
fn raw_string_end(chars: &[char], at: usize) -> Option<usize> {
    let mut i = at;
    while chars.get(i) == Some(&'#') {
        i += 1;
    }
    if chars.get(i) != Some(&'"') {
        return None;
    }
    let hashes = i - at;
    i += 1;
    while i < chars.len() {
        if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
            return Some(i + 1 + hashes);
        }
        i += 1;
    }
    None
}
