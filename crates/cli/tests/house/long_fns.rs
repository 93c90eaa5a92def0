//! No production function over [`MAX_LINES`] lines without a reason in its doc.
//!
//! A function counts from the line of its `fn` to the line of its closing brace. A long
//! one passes when its doc says why it is long, in a sentence containing [`REASON`]
//! ("Long because one match over every record kind reads best whole."). Test-only code
//! (`#[cfg(test)]`) does not count. The check prints every long function it sees.

use crate::source::{Token, close_of, crates, module_files, walk};
use std::collections::BTreeSet;
use std::fs;

/// The most lines a function may have without a reason.
const MAX_LINES: usize = 100;

/// What a long function's doc says, in the sentence giving its reason.
const REASON: &str = "Long because";

/// Long functions tolerated without a reason while they are being shortened, as (file
/// under `crates/`, function): none now. An entry whose function is short now (or has its
/// reason, or is gone) fails the check as surely as a new long function, so the list can
/// only shrink.
const KNOWN_ELSEWHERE: &[(&str, &str)] = &[];

/// One long function.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Long {
    /// Its file under `crates/`.
    file: String,
    /// Its name.
    name: String,
    /// The line of its `fn`.
    line: usize,
    /// Its length in lines.
    lines: usize,
    /// Whether its doc gives the reason.
    reasoned: bool,
}

/// Where the body of the function whose `fn` is token `i` opens, if it has one.
fn body_of(toks: &[Token], i: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, t) in toks.iter().enumerate().skip(i + 2) {
        match t.text.as_str() {
            "(" | "[" => depth += 1,
            ")" | "]" => depth = depth.saturating_sub(1),
            "{" if depth == 0 => return Some(j),
            ";" if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

/// The doc comment above line `line` (1-based) of `text`, past attributes.
fn doc_above(text: &str, line: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut doc = Vec::new();
    let mut k = line.saturating_sub(1);
    while k > 0 {
        let l = lines[k - 1].trim();
        if let Some(d) = l.strip_prefix("///") {
            doc.push(d.trim());
        } else if !(l.starts_with("#[") || l.starts_with(")]") || l.ends_with(",")) {
            break;
        }
        k -= 1;
    }
    doc.reverse();
    doc.join(" ")
}

/// Every production function over [`MAX_LINES`] lines in the workspace.
fn long_functions() -> Vec<Long> {
    let mut out = Vec::new();
    for krate in crates() {
        for f in module_files(&krate) {
            let text = fs::read_to_string(&f.file).unwrap();
            let file = format!(
                "{}/src/{}",
                krate.name,
                f.file.strip_prefix(&krate.src).unwrap().display()
            );
            let toks = &f.toks;
            walk(toks, |i, scope| {
                if scope.test || !toks[i].is("fn") {
                    return;
                }
                let Some(name) = toks.get(i + 1).filter(|t| t.is_word()) else {
                    return;
                };
                let Some(open) = body_of(toks, i) else {
                    return;
                };
                let end = toks[close_of(toks, open) - 1].line;
                let lines = end + 1 - toks[i].line;
                if lines > MAX_LINES {
                    out.push(Long {
                        file: file.clone(),
                        name: name.text.clone(),
                        line: toks[i].line,
                        lines,
                        reasoned: doc_above(&text, toks[i].line).contains(REASON),
                    });
                }
            });
        }
    }
    out.sort();
    out
}

#[test]
fn no_production_function_over_100_lines_without_a_reason_in_its_doc() {
    let long = long_functions();
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for l in &long {
        let listed = KNOWN_ELSEWHERE.contains(&(l.file.as_str(), l.name.as_str()));
        let state = if l.reasoned {
            "its doc says why"
        } else if listed {
            "known, being shortened elsewhere"
        } else {
            "NO REASON"
        };
        println!(
            "{}:{} fn {} ({} lines): {state}",
            l.file, l.line, l.name, l.lines
        );
        if !l.reasoned {
            if listed {
                seen.insert((l.file.as_str(), l.name.as_str()));
            } else {
                problems.push(format!(
                    "{}:{} fn {} is {} lines (over {MAX_LINES}): shorten it, or say why in its doc (\"{REASON} …\")",
                    l.file, l.line, l.name, l.lines
                ));
            }
        }
    }
    for (file, name) in KNOWN_ELSEWHERE {
        if !seen.contains(&(*file, *name)) {
            problems.push(format!(
                "{file} fn {name} is no longer a long function without a reason: take it off KNOWN_ELSEWHERE"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_function_is_measured_from_its_fn_to_its_closing_brace() {
    use crate::source::tokens;
    let src = "/// Short.\n/// Long because it must be.\n#[inline]\nfn f(a: [u8; 2]) -> u8 {\n    a[0]\n}\ntrait T { fn g(&self); }\n";
    let toks = tokens(src);
    let i = toks.iter().position(|t| t.is("fn")).unwrap();
    let open = body_of(&toks, i).unwrap();
    assert_eq!(toks[open].line, 4);
    assert_eq!(toks[close_of(&toks, open) - 1].line, 6);
    assert!(doc_above(src, 4).contains(REASON));
    let g = toks.iter().rposition(|t| t.is("fn")).unwrap();
    assert_eq!(body_of(&toks, g), None);
}
