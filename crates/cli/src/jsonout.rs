//! `--json FILE` with `-` for standard output, as `cat -` and `tar -f -` read it.
//!
//! Every command that takes a file for its JSON goes through here, so `--json -` means
//! the same everywhere: the JSON alone on stdout, everything meant for a person on stderr.

use anyhow::{Context, Result};
use std::path::Path;

/// Whether `path` names standard output (`-`).
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Writes `value` as pretty JSON, with a final newline, to `path` (or stdout for `-`).
pub fn write<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value)? + "\n";
    if is_stdout(path) {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .context("writing the JSON to stdout")
    } else {
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_stdout_dash_only_names_stdout() {
        assert!(is_stdout(Path::new("-")));
        assert!(!is_stdout(Path::new("./-")));
        assert!(!is_stdout(Path::new("--")));
        assert!(!is_stdout(Path::new("out.json")));
    }
}
