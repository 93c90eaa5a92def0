//! The workspace's sources read as tokens: enough of Rust's lexer to skip comments,
//! strings and characters, and enough of its item grammar to find modules, paths and
//! function bodies. No parser crate: the checks need only these three things.

use std::fs;
use std::path::{Path, PathBuf};

/// One token: a word or one punctuation character, and the line it starts on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The word, or the punctuation character as a one-character string.
    pub text: String,
    /// Its line.
    pub line: usize,
}

impl Token {
    /// Whether the token is exactly `s`.
    pub fn is(&self, s: &str) -> bool {
        self.text == s
    }

    /// Whether the token is a word (an identifier or keyword).
    pub fn is_word(&self) -> bool {
        self.text
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
    }
}

/// The tokens of `src`, without comments, string, byte-string and character literals
/// (a literal leaves one `"` token, so items stay apart) and lifetimes.
pub fn tokens(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let n = chars.len();
    let count_lines = |from: usize, to: usize, line: &mut usize| {
        *line += chars[from..to.min(n)]
            .iter()
            .filter(|&&c| c == '\n')
            .count();
    };
    while i < n {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < n && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            let start = i;
            let mut depth = 0;
            while i < n {
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
            count_lines(start, i, &mut line);
        } else if let Some(end) = raw_string_end(&chars, i) {
            out.push(Token {
                text: "\"".into(),
                line,
            });
            count_lines(i, end, &mut line);
            i = end;
        } else if c == '"' || (c == 'b' && chars.get(i + 1) == Some(&'"')) {
            let start = i;
            out.push(Token {
                text: "\"".into(),
                line,
            });
            i += if c == 'b' { 2 } else { 1 };
            while i < n && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            count_lines(start, i, &mut line);
        } else if c == '\'' || (c == 'b' && chars.get(i + 1) == Some(&'\'')) {
            let q = if c == 'b' { i + 1 } else { i };
            if chars.get(q + 1) == Some(&'\\') {
                // An escaped character: up to the closing quote.
                let mut j = q + 2;
                while j < n && chars[j] != '\'' {
                    j += 1;
                }
                out.push(Token {
                    text: "'".into(),
                    line,
                });
                i = j + 1;
            } else if chars.get(q + 2) == Some(&'\'') {
                out.push(Token {
                    text: "'".into(),
                    line,
                });
                i = q + 3;
            } else if c == 'b' {
                out.push(Token {
                    text: "b".into(),
                    line,
                });
                i += 1;
            } else {
                // A lifetime or label: the quote and its word go.
                i += 1;
                while i < n && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < n && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Token {
                text: chars[start..i].iter().collect(),
                line,
            });
        } else {
            out.push(Token {
                text: c.to_string(),
                line,
            });
            i += 1;
        }
    }
    out
}

/// Where the raw string (`r"…"`, `r#"…"#`, `br#"…"#`) starting at `i` ends, if one does.
fn raw_string_end(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if chars.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < chars.len() {
        if chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(chars.len())
}

/// The index just past the bracket that closes the one at `open` (`(`, `[` or `{`).
pub fn close_of(toks: &[Token], open: usize) -> usize {
    let (o, c) = match toks[open].text.as_str() {
        "(" => ("(", ")"),
        "[" => ("[", "]"),
        _ => ("{", "}"),
    };
    let mut depth = 0;
    let mut i = open;
    while i < toks.len() {
        if toks[i].is(o) {
            depth += 1;
        } else if toks[i].is(c) {
            depth -= 1;
            if depth == 0 {
                return i + 1;
            }
        }
        i += 1;
    }
    toks.len()
}

/// Whether the attribute whose tokens are `attr` (inside `#[…]`) compiles its item only
/// for tests: `cfg(test)`, or a `cfg(all(test, …))`.
pub fn is_test_cfg(attr: &[Token]) -> bool {
    attr.first().is_some_and(|t| t.is("cfg"))
        && attr.iter().any(|t| t.is("test"))
        && !attr.iter().any(|t| t.is("not"))
}

/// One crate's source: its name (the directory under `crates/`) and its `src/` directory.
pub struct Crate {
    /// The directory name under `crates/`.
    pub name: String,
    /// Its `src/`.
    pub src: PathBuf,
    /// Its root file: `lib.rs`, or `main.rs` for a binary alone.
    pub root: PathBuf,
}

/// The workspace's crates, in name order.
pub fn crates() -> Vec<Crate> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let src = path.join("src");
        for root in ["lib.rs", "main.rs"] {
            if src.join(root).is_file() {
                out.push(Crate {
                    name: path.file_name().unwrap().to_string_lossy().into_owned(),
                    src: src.clone(),
                    root: src.join(root),
                });
                break;
            }
        }
    }
    assert!(
        out.len() >= 8,
        "found only {} crates under {}",
        out.len(),
        dir.display()
    );
    out
}

/// One module's file.
#[derive(Debug, Clone)]
pub struct ModFile {
    /// The module's path from the crate root (empty for the root).
    pub path: Vec<String>,
    /// The file.
    pub file: PathBuf,
    /// Its tokens.
    pub toks: Vec<Token>,
}

/// Every production module file of a crate (those under `#[cfg(test)]` left out), walked
/// from the root along its `mod name;` lines.
pub fn module_files(krate: &Crate) -> Vec<ModFile> {
    let mut out = Vec::new();
    let mut todo = vec![(Vec::new(), krate.root.clone())];
    while let Some((path, file)) = todo.pop() {
        let text = fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        let toks = tokens(&text);
        let dir = child_dir(&file, path.is_empty());
        for (inline, name, _) in file_mods(&toks) {
            let mut child_path = path.clone();
            child_path.extend(inline.iter().cloned());
            child_path.push(name.clone());
            let mut d = dir.clone();
            for m in &inline {
                d = d.join(m);
            }
            let flat = d.join(format!("{name}.rs"));
            let nested = d.join(&name).join("mod.rs");
            let found = if flat.is_file() {
                flat
            } else if nested.is_file() {
                nested
            } else {
                panic!(
                    "{}: `mod {name};` names neither {} nor {}",
                    file.display(),
                    flat.display(),
                    nested.display()
                )
            };
            todo.push((child_path, found));
        }
        out.push(ModFile { path, file, toks });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The directory a file's `mod name;` children live in.
fn child_dir(file: &Path, root: bool) -> PathBuf {
    let parent = file.parent().unwrap().to_path_buf();
    let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
    if root || stem == "mod" {
        parent
    } else {
        parent.join(stem)
    }
}

/// What one token sits in, as a file is walked.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// The inline modules (`mod name { … }`) around it, outermost first.
    pub inline: Vec<String>,
    /// Whether it is compiled only for tests.
    pub test: bool,
}

/// Walks the tokens of a file, calling `visit(i, scope)` on each token outside attributes,
/// with the inline modules around it and whether it is test-only code. Returns the
/// production `mod name;` declarations found on the way, as (inline modules, name, line).
pub fn walk(
    toks: &[Token],
    mut visit: impl FnMut(usize, &Scope),
) -> Vec<(Vec<String>, String, usize)> {
    let mut mods = Vec::new();
    // Each `{` open: whether it opened an inline module (then the scope to go back to).
    let mut stack: Vec<Option<Scope>> = Vec::new();
    let mut scope = Scope::default();
    let mut pending_test = false;
    let mut i = 0;
    while i < toks.len() {
        let t = &toks[i];
        if t.is("#") && toks.get(i + 1).is_some_and(|n| n.is("[") || n.is("!")) {
            let open = if toks[i + 1].is("!") { i + 2 } else { i + 1 };
            let end = close_of(toks, open);
            if is_test_cfg(&toks[(open + 1).min(end)..end.saturating_sub(1)])
                && !toks[i + 1].is("!")
            {
                pending_test = true;
            }
            i = end;
            continue;
        }
        if t.is("mod")
            && let (Some(name), Some(after)) = (toks.get(i + 1), toks.get(i + 2))
            && name.is_word()
        {
            if after.is(";") {
                if !scope.test && !pending_test {
                    mods.push((scope.inline.clone(), name.text.clone(), t.line));
                }
                pending_test = false;
                i += 3;
                continue;
            }
            if after.is("{") {
                stack.push(Some(scope.clone()));
                scope.inline.push(name.text.clone());
                scope.test |= pending_test;
                pending_test = false;
                i += 3;
                continue;
            }
        }
        visit(i, &scope);
        if t.is("{") {
            stack.push(None);
            pending_test = false;
        } else if t.is("}") {
            if let Some(Some(back)) = stack.pop() {
                scope = back;
            }
            pending_test = false;
        } else if t.is(";") {
            pending_test = false;
        } else if pending_test && t.is("fn") {
            // A test-only function: its body is test code.
            let mut j = i;
            while j < toks.len() && !toks[j].is("{") && !toks[j].is(";") {
                j += 1;
            }
            if j < toks.len() && toks[j].is("{") {
                i = close_of(toks, j);
                pending_test = false;
                continue;
            }
        } else if pending_test && ITEMS.contains(&t.text.as_str()) {
            let mut j = i;
            while j < toks.len() && !toks[j].is("{") && !toks[j].is(";") {
                j += 1;
            }
            i = if j < toks.len() && toks[j].is("{") {
                close_of(toks, j)
            } else {
                j + 1
            };
            pending_test = false;
            continue;
        }
        i += 1;
    }
    mods
}

/// The keywords that start an item whose whole text a `#[cfg(test)]` before it removes.
const ITEMS: [&str; 9] = [
    "impl",
    "use",
    "const",
    "static",
    "struct",
    "enum",
    "trait",
    "type",
    "macro_rules",
];

/// The production `mod name;` declarations of a file.
fn file_mods(toks: &[Token]) -> Vec<(Vec<String>, String, usize)> {
    walk(toks, |_, _| {})
}
