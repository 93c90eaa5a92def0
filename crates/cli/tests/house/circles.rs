//! No import circle between the modules of one crate.
//!
//! A module depends on another when its production code names it: a `use crate::a::b`,
//! `use super::…` or `self::…` line (use groups expanded), or a `crate::a::b::f()` path in
//! code. A module and its own ancestors are one unit (the parent declares the child, and
//! a root's re-exports are its table of contents), so edges between them do not count.
//! Test-only code (`#[cfg(test)]`) does not count either. A circle is a strongly
//! connected set of two or more module files; the check prints each with one path round it
//! and the line behind every step.

use crate::source::{Crate, ModFile, Scope, Token, crates, module_files, walk};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Circles tolerated while they are being untangled, as (crate, files under its `src/`):
/// none now. A listed circle missing from the code fails the check as surely as a new
/// one, so the list can only shrink.
const KNOWN_ELSEWHERE: &[(&str, &[&str])] = &[];

/// Why one module depends on another: the line and the path written there.
#[derive(Debug, Clone)]
struct Because {
    line: usize,
    path: String,
}

/// One crate's module graph: its files, and for each the files it depends on.
struct Graph {
    files: Vec<ModFile>,
    edges: Vec<BTreeMap<usize, Because>>,
}

/// The module files of `krate` and the edges between them.
fn graph(krate: &Crate) -> Graph {
    let files = module_files(krate);
    // Every production module, file or inline, and the file it lives in.
    let mut modules: HashMap<Vec<String>, usize> = HashMap::new();
    for (n, f) in files.iter().enumerate() {
        modules.insert(f.path.clone(), n);
        walk(&f.toks, |_, scope| {
            for k in 1..=scope.inline.len() {
                let mut p = f.path.clone();
                p.extend(scope.inline[..k].iter().cloned());
                modules.entry(p).or_insert(n);
            }
        });
    }
    let mut edges = vec![BTreeMap::new(); files.len()];
    for (n, f) in files.iter().enumerate() {
        walk(&f.toks, |i, scope| {
            for (path, line) in paths_at(&f.toks, i, scope) {
                let here: Vec<String> = f.path.iter().chain(&scope.inline).cloned().collect();
                let Some(target) = resolve(&modules, &here, &path) else {
                    continue;
                };
                let (a, b) = (&f.path, &files[target].path);
                if target == n || a.starts_with(b) || b.starts_with(a) {
                    continue;
                }
                edges[n].entry(target).or_insert(Because {
                    line,
                    path: path.join("::"),
                });
            }
        });
    }
    Graph { files, edges }
}

/// The paths that start at token `i` when it begins a `crate::`, `super::` or `self::`
/// path (not the middle of one, nor a `pub(in crate::…)`), each with its line.
fn paths_at(toks: &[Token], i: usize, scope: &Scope) -> Vec<(Vec<String>, usize)> {
    let t = &toks[i];
    if scope.test || !(t.is("crate") || t.is("super") || t.is("self")) {
        return Vec::new();
    }
    let colons =
        toks.get(i + 1).is_some_and(|a| a.is(":")) && toks.get(i + 2).is_some_and(|a| a.is(":"));
    let before = i.checked_sub(1).map(|b| toks[b].text.as_str());
    if !colons || matches!(before, Some(":") | Some("in")) {
        return Vec::new();
    }
    let (paths, _) = tree(toks, i, Vec::new());
    paths.into_iter().map(|p| (p, t.line)).collect()
}

/// The paths of the use tree (or plain path) starting at token `i`, under `prefix`, and
/// the index past it.
fn tree(toks: &[Token], mut i: usize, mut prefix: Vec<String>) -> (Vec<Vec<String>>, usize) {
    loop {
        let Some(t) = toks.get(i) else {
            return (vec![prefix], i);
        };
        if t.is_word() {
            prefix.push(t.text.clone());
            i += 1;
            let colons = toks.get(i).is_some_and(|a| a.is(":"))
                && toks.get(i + 1).is_some_and(|a| a.is(":"));
            if colons {
                i += 2;
                continue;
            }
            return (vec![prefix], i);
        }
        if t.is("{") {
            i += 1;
            let mut out = Vec::new();
            while i < toks.len() && !toks[i].is("}") {
                let (p, j) = tree(toks, i, prefix.clone());
                out.extend(p);
                i = j.max(i + 1);
                if toks.get(i).is_some_and(|a| a.is("as")) {
                    i += 2;
                }
                if toks.get(i).is_some_and(|a| a.is(",")) {
                    i += 1;
                }
            }
            return (out, i + 1);
        }
        return (vec![prefix], i + usize::from(t.is("*")));
    }
}

/// The file of the deepest module `path` names, written in module `here`.
fn resolve(
    modules: &HashMap<Vec<String>, usize>,
    here: &[String],
    path: &[String],
) -> Option<usize> {
    let mut cur: Vec<String> = match path.first()?.as_str() {
        "crate" => Vec::new(),
        _ => here.to_vec(),
    };
    for (k, seg) in path.iter().enumerate() {
        match seg.as_str() {
            "crate" if k == 0 => {}
            "self" => {}
            "super" => {
                cur.pop()?;
            }
            _ => {
                let mut next = cur.clone();
                next.push(seg.clone());
                if modules.contains_key(&next) {
                    cur = next;
                } else {
                    break;
                }
            }
        }
    }
    modules.get(&cur).copied()
}

/// The strongly connected sets of two or more files (Tarjan's algorithm).
fn circles(g: &Graph) -> Vec<Vec<usize>> {
    struct Tarjan<'a> {
        g: &'a Graph,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.next);
            self.low[v] = self.next;
            self.next += 1;
            self.stack.push(v);
            self.on[v] = true;
            for &w in self.g.edges[v].keys() {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(iw) if self.on[w] => self.low[v] = self.low[v].min(iw),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut set = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on[w] = false;
                    set.push(w);
                    if w == v {
                        break;
                    }
                }
                if set.len() > 1 {
                    set.sort();
                    self.out.push(set);
                }
            }
        }
    }
    let n = g.files.len();
    let mut t = Tarjan {
        g,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            t.visit(v);
        }
    }
    t.out
}

/// A file's name under its crate's `src/`.
fn name(krate: &Crate, f: &ModFile) -> String {
    f.file
        .strip_prefix(&krate.src)
        .unwrap_or(&f.file)
        .display()
        .to_string()
}

/// One way round the circle `set`, from its first file back to it, with the line behind
/// each step.
fn round(krate: &Crate, g: &Graph, set: &[usize]) -> String {
    let start = set[0];
    let inside: BTreeSet<usize> = set.iter().copied().collect();
    // Breadth first from `start` inside the set, back to `start`.
    let mut from: HashMap<usize, usize> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    let mut last = None;
    'search: while let Some(v) = queue.pop_front() {
        for &w in g.edges[v].keys() {
            if w == start {
                last = Some(v);
                break 'search;
            }
            if inside.contains(&w) && !from.contains_key(&w) {
                from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    let mut back = Vec::new();
    let mut v = last.unwrap_or(start);
    while v != start {
        back.push(v);
        v = from[&v];
    }
    back.reverse();
    let steps: Vec<usize> = [start].into_iter().chain(back).chain([start]).collect();
    let mut text = name(krate, &g.files[start]);
    for w in steps.windows(2) {
        let because = &g.edges[w[0]][&w[1]];
        text += &format!(
            "\n      -> {}   ({}:{}: {})",
            name(krate, &g.files[w[1]]),
            name(krate, &g.files[w[0]]),
            because.line,
            because.path
        );
    }
    text
}

#[test]
fn no_import_circle_between_the_modules_of_a_crate() {
    let mut problems = Vec::new();
    let mut found: BTreeSet<(String, Vec<String>)> = BTreeSet::new();
    for krate in crates() {
        let g = graph(&krate);
        for set in circles(&g) {
            let names: Vec<String> = set.iter().map(|&v| name(&krate, &g.files[v])).collect();
            let mut sorted = names.clone();
            sorted.sort();
            let known = KNOWN_ELSEWHERE.iter().any(|(c, files)| {
                *c == krate.name && files.iter().copied().eq(sorted.iter().map(String::as_str))
            });
            if !known {
                problems.push(format!(
                    "import circle in crate `{}`: {}",
                    krate.name,
                    round(&krate, &g, &set)
                ));
            }
            found.insert((krate.name.clone(), sorted));
        }
    }
    for (c, files) in KNOWN_ELSEWHERE {
        let key = (c.to_string(), files.iter().map(|s| s.to_string()).collect());
        if !found.contains(&key) {
            problems.push(format!(
                "the circle {files:?} in crate `{c}` is gone: take it off KNOWN_ELSEWHERE"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_check_sees_a_circle_through_a_use_group_and_a_code_path() {
    use crate::source::tokens;
    let toks = tokens("use crate::{a::X, b::{self, Y as Z}};\nfn f() { super::super::c::g(); }");
    let (paths, _) = tree(&toks, 1, Vec::new());
    let shown: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(shown, ["crate::a::X", "crate::b::self", "crate::b::Y"]);
    let mut modules = HashMap::new();
    for (n, m) in [vec![], vec!["a"], vec!["b"], vec!["c"], vec!["c", "d"]]
        .into_iter()
        .enumerate()
    {
        modules.insert(m.into_iter().map(String::from).collect::<Vec<_>>(), n);
    }
    let here = ["c".to_string(), "d".to_string(), "inner".to_string()];
    let path: Vec<String> = ["super", "super", "c", "g"].map(String::from).to_vec();
    // `super` from an inline module `inner` of c/d: c/d, then c, then `c::c` is no module.
    assert_eq!(resolve(&modules, &here, &path), Some(3));
    let path: Vec<String> = ["crate", "c", "d", "f"].map(String::from).to_vec();
    assert_eq!(resolve(&modules, &here, &path), Some(4));
}
