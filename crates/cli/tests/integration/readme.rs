//! Every shell command of the README and of `docs/*.md` is run by a test or by CI, and every
//! path they cite is inside the repository.
//!
//! **The rule.** Each line of a ```` ```sh ```` block of `README.md` or of a page under
//! `docs/` is one command (a
//! trailing `# comment` is dropped). Each must match one of these, or this test fails and
//! names it, so a command added to the README needs a rule here:
//!
//! - `threadbalance ARGS` or `cargo run --release -- ARGS`: run with the binary under test,
//!   from a temporary directory, and must exit 0 — as written when it takes a few seconds;
//!   a long one ([`LONG`]: the demo, the benchmark, the papers' suite, a 41 s simulation)
//!   must parse (`--parse-only` checks the arguments with the same parser and exits), and
//!   its quick form listed there is run instead, when the command has one. A `> FILE` at
//!   the end must receive output.
//! - a command CI runs ([`IN_CI`]): `.ci/run` must still hold the line that runs it.
//! - a command of the user's own program ([`PLACEHOLDERS`]: `./your-program`, the pid
//!   4242), or of the daemon, its control socket or a terminal (`daemon`, `ctl`, `top`) or
//!   of the machine's shared state (`restore`, as root): must parse; the tests of those
//!   commands run them against programs and daemons of their own.
//! - `cargo install --locked --path crates/cli …`: the install test runs the README's line
//!   (with `--offline --root` a temporary directory); `--no-default-features` and a
//!   `--features F` of `crates/cli` may follow.
//! - `cargo bench -p CRATE --bench NAME …`: `NAME` must be a bench target of `CRATE` (CI's
//!   `clippy --all-targets` compiles every one; timings are not a test's business).
//! - `sudo threadbalance …` and `sudo -u USER threadbalance …`: parsed as above (they need
//!   root, or another user, and a real program).
//!
//! And every line of a code block of `README.md` that starts with `threadbalance ` is one
//! of these commands: the README shows no command a test does not at least parse.

use crate::support::bin;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Long commands: a fragment that identifies them, and the quick form run instead (`None`:
/// parsing only; another test runs its quick form).
const LONG: &[(&str, Option<&[&str]>)] = &[
    (
        "demo",
        Some(&[
            "demo",
            "--repeat",
            "1",
            "--work-ms",
            "40",
            "--progress",
            "never",
        ]),
    ),
    // bench tests run `bench --quick` and `bench --cost --quick`.
    ("bench --json bench.json", None),
    ("bench --quick", None),
    ("bench --cost", None),
    // The sim tests run the suite.
    ("sim --suite papers", None),
    // 41 s in a debug build: the NUMA policies run with a short workload instead.
    (
        "--workload parsec-mix",
        Some(&[
            "sim",
            "--machine",
            "opteron6320-4x8",
            "--workload",
            "ep-barrier",
            "--threads",
            "8",
            "--policy",
            "numa-first-fit,numa-excl,numa-mb-plus",
        ]),
    ),
];

/// Words that stand for the user's own program or its pid: a command holding one is parsed,
/// not run.
const PLACEHOLDERS: &[&str] = &["./your-program", "4242"];

/// Subcommands parsed, not run: they need a running daemon, a terminal, or act on the whole
/// machine's state directory (the daemon, top and crash-recovery tests run them on their own).
const PARSE_ONLY: &[&str] = &["daemon", "ctl", "top", "restore"];

/// Commands CI runs: the README's command (after any `sudo`) and the line of `.ci/run`
/// that runs it (the same, or with the flags a script needs).
const IN_CI: &[(&str, &str)] = &[
    (
        "cargo test --workspace --locked",
        "cargo test --workspace --locked",
    ),
    (
        "scripts/install-test-deps.sh",
        "scripts/install-test-deps.sh",
    ),
    (
        "mount -t tracefs tracefs /sys/kernel/tracing",
        "mount -t tracefs tracefs /sys/kernel/tracing",
    ),
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The README and every page under `docs/`: (path from the repository, text).
fn documents() -> Vec<(String, String)> {
    let mut docs = vec![(
        "README.md".to_string(),
        std::fs::read_to_string(repo().join("README.md")).unwrap(),
    )];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    for p in pages {
        let name = format!("docs/{}", p.file_name().unwrap().to_string_lossy());
        docs.push((name, std::fs::read_to_string(&p).unwrap()));
    }
    docs
}

/// The commands of the ```sh blocks of `text`.
fn sh_commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            inside = !inside && t == "```sh";
            continue;
        }
        if inside {
            let cmd = strip_comment(t);
            if !cmd.is_empty() {
                out.push(cmd.to_string());
            }
        }
    }
    out
}

/// Every line inside a code block of `text`, whatever its language.
fn code_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.trim().starts_with("```") {
            inside = !inside;
            continue;
        }
        if inside {
            out.push(line.to_string());
        }
    }
    out
}

/// `line` without a trailing ` # comment` (a `#` outside quotes after a space).
fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if prev.is_whitespace() => return line[..i].trim_end(),
            _ => {}
        }
        prev = c;
    }
    line.trim_end()
}

/// Splits a command line into words as sh would, for the quoting the README uses (single
/// and double quotes, no escapes).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (_, c) => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

/// What the README's command asks of the binary, if it is one of ours.
fn our_args(w: &[String]) -> Option<Vec<String>> {
    let w: Vec<&str> = w.iter().map(String::as_str).collect();
    match w.as_slice() {
        ["threadbalance", rest @ ..]
        | ["sudo", "threadbalance", rest @ ..]
        | ["sudo", "-u", _, "threadbalance", rest @ ..] => {
            Some(rest.iter().map(|s| s.to_string()).collect())
        }
        ["cargo", "run", "--release", "--", rest @ ..] => {
            Some(rest.iter().map(|s| s.to_string()).collect())
        }
        _ => None,
    }
}

/// Runs the binary with `args` in `cwd` and checks it exits 0; `> FILE` at the end sends
/// stdout to `cwd/FILE`, which must then not be empty.
fn run_ok(args: &[String], cwd: &Path, what: &str) {
    let (args, to) = match args.iter().position(|a| a == ">") {
        Some(i) => (&args[..i], args.get(i + 1)),
        None => (args, None),
    };
    // As after `cargo install`: `threadbalance` on PATH, for commands that run it again
    // (`run … -- threadbalance workload …`).
    let dir = bin().parent().unwrap().to_path_buf();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path =
        std::env::join_paths(std::iter::once(dir).chain(std::env::split_paths(&path))).unwrap();
    let out = Command::new(bin())
        .current_dir(cwd)
        .env("PATH", path)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "README command {what:?} ({args:?}) failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if let Some(file) = to {
        assert!(!out.stdout.is_empty(), "{what:?}: nothing to write");
        std::fs::write(cwd.join(file), &out.stdout).unwrap();
    }
}

#[test]
fn readme_every_shell_command_is_run_by_a_test_or_by_ci() {
    let _alone = crate::support::alone();
    // What CI runs: `.ci/run`, and the script it calls for the test dependencies.
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    assert!(ci.contains("\nscripts/install-test-deps.sh\n"), "{ci}");
    let ci = ci + &std::fs::read_to_string(repo().join("scripts/install-test-deps.sh")).unwrap();
    let cli_toml = std::fs::read_to_string(repo().join("crates/cli/Cargo.toml")).unwrap();
    let commands: Vec<String> = documents()
        .iter()
        .flat_map(|(_, text)| sh_commands(text))
        .collect();
    assert!(commands.len() >= 10, "{commands:?}");
    let cwd = tempfile::tempdir().unwrap();
    let mut unruled = Vec::new();
    for cmd in &commands {
        let w = words(cmd);
        if let Some(args) = our_args(&w) {
            let long = LONG.iter().find(|(frag, _)| cmd.contains(frag));
            let sudo = w[0] == "sudo"
                || w.iter().any(|x| PLACEHOLDERS.contains(&x.as_str()))
                || args
                    .first()
                    .is_some_and(|a| PARSE_ONLY.contains(&a.as_str()));
            match long {
                Some((_, quick)) => {
                    let mut parse = vec!["--parse-only".to_string()];
                    parse.extend(args.iter().cloned());
                    run_ok(&parse, cwd.path(), cmd);
                    if let Some(quick) = quick {
                        let quick: Vec<String> = quick.iter().map(|s| s.to_string()).collect();
                        run_ok(&quick, cwd.path(), cmd);
                    }
                }
                None if sudo => {
                    let mut parse = vec!["--parse-only".to_string()];
                    parse.extend(args.iter().cloned());
                    run_ok(&parse, cwd.path(), cmd);
                }
                None => run_ok(&args, cwd.path(), cmd),
            }
            continue;
        }
        let bare = cmd.strip_prefix("sudo ").unwrap_or(cmd);
        if let Some((_, line)) = IN_CI.iter().find(|(c, _)| *c == bare) {
            assert!(
                ci.contains(line),
                "{cmd:?}: .ci/run no longer runs {line:?}"
            );
            continue;
        }
        let v: Vec<&str> = w.iter().map(String::as_str).collect();
        match v.as_slice() {
            [
                "cargo",
                "install",
                "--locked",
                "--path",
                "crates/cli",
                rest @ ..,
            ] => {
                if let ["--features", f] = rest {
                    assert!(
                        cli_toml.contains(&format!("\n{f} = [")),
                        "{cmd:?}: crates/cli has no feature {f}"
                    );
                    assert!(ci.contains(&format!("--features {f}")), "{cmd:?}");
                } else {
                    assert!(
                        rest.is_empty() || rest == ["--no-default-features"],
                        "{cmd:?}: no rule for {rest:?}"
                    );
                }
            }
            ["cargo", "bench", "-p", krate, "--bench", name, ..] => {
                let dir = krate.strip_prefix("threadbalance-").unwrap_or("cli");
                let toml =
                    std::fs::read_to_string(repo().join("crates").join(dir).join("Cargo.toml"))
                        .unwrap();
                assert!(
                    toml.contains(&format!("name = \"{name}\"")),
                    "{cmd:?}: {krate} has no bench {name}"
                );
            }
            _ => unruled.push(cmd.clone()),
        }
    }
    assert!(
        unruled.is_empty(),
        "README commands no test or CI runs (add a rule): {unruled:?}"
    );
    // Every `threadbalance …` line of a code block of the README is one of the commands
    // above: shown in a ```sh block, so parsed at least.
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let shown = code_lines(&readme);
    let ours: Vec<&String> = shown
        .iter()
        .filter(|l| l.starts_with("threadbalance ") || l.starts_with("$ threadbalance "))
        .collect();
    assert!(ours.len() >= 15, "{ours:?}");
    for line in ours {
        let bare = strip_comment(line.trim_start_matches("$ "));
        assert!(
            commands.iter().any(|c| c == bare),
            "README shows {line:?} outside a ```sh block: no test parses it"
        );
    }
    // The simulator's report was written where the command was run.
    assert!(cwd.path().join("ferret.svg").is_file());
}

#[test]
fn readme_cites_only_paths_inside_the_repository() {
    let docs = documents();
    assert!(docs.len() >= 2, "no page under docs/");
    let mut checked = 0;
    for (name, text) in &docs {
        checked += cited_paths_exist(name, text);
    }
    assert!(checked >= 5, "{checked}");
}

/// Checks the paths `text` (the document `name`) cites: its links stay inside the
/// repository and lead to files that exist, and every `dir/...` path in backquotes under
/// one of the repository's folders exists. Returns how many it checked.
fn cited_paths_exist(name: &str, text: &str) -> usize {
    let base = Path::new(name).parent().unwrap_or(Path::new(""));
    assert!(
        !text.contains("../shared"),
        "{name} cites a folder outside the repository"
    );
    let mut checked = 0;
    for link in text.split("](").skip(1) {
        let target = link.split(')').next().unwrap().split('#').next().unwrap();
        if target.is_empty() || target.contains("://") {
            continue;
        }
        let path = repo().join(base).join(target);
        let inside = path
            .canonicalize()
            .is_ok_and(|p| p.starts_with(repo().canonicalize().unwrap()));
        assert!(
            inside,
            "{name} links to {target:?}: not a file of the repository"
        );
        checked += 1;
    }
    // Every `dir/...` path in backquotes under one of the repository's folders exists.
    let roots = [
        "calibration/",
        "crates/",
        "scenarios/",
        "fixtures/",
        "bench/",
        "docs/",
    ];
    for quoted in text.split('`').skip(1).step_by(2) {
        if quoted.contains(' ') || !roots.iter().any(|r| quoted.starts_with(r)) {
            continue;
        }
        // `crates/linux/src/read.rs`, `scenarios/`, `calibration/linux-6.18-16core.md`:
        // `{a,b}` alternatives are checked by their stem.
        let path = quoted.split('{').next().unwrap().trim_end_matches(':');
        assert!(
            repo().join(path).exists(),
            "{name} cites {quoted:?}: not in the repository"
        );
        checked += 1;
    }
    checked
}

#[test]
fn readme_helpers_split_like_sh() {
    assert_eq!(
        words(r#"sim --machine "package:1 core:16 pu:1" --x 'a b'"#),
        ["sim", "--machine", "package:1 core:16 pu:1", "--x", "a b"]
    );
    assert_eq!(
        strip_comment("bench --quick     # a smoke run"),
        "bench --quick"
    );
    assert_eq!(strip_comment(r#"echo "a # b""#), r#"echo "a # b""#);
    let md = "x\n```sh\na b  # c\n\n```\n```text\nnot me\n```\n";
    assert_eq!(sh_commands(md), ["a b"]);
}
