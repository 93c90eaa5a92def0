//! `threadbalance man` and `threadbalance completions SHELL`: the manual page and the shell
//! completions, generated from the same argument definitions the program parses with, so
//! they cannot drift from it.
//!
//! ```text
//! threadbalance man > ~/.local/share/man/man1/threadbalance.1
//! threadbalance completions bash > ~/.local/share/bash-completion/completions/threadbalance
//! threadbalance completions zsh > ~/.zfunc/_threadbalance
//! threadbalance completions fish > ~/.config/fish/completions/threadbalance.fish
//! ```

use anyhow::{Context, Result};
use clap::{Args, Command};
use clap_complete::Shell;

/// Options of `completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Writes the manual page (roff, section 1) of `cmd` to stdout.
pub fn man(cmd: Command) -> Result<u8> {
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut page)
        .context("rendering the manual page")?;
    write_stdout(&page)
}

/// Writes the completion script of `cmd` for `shell` to stdout.
pub fn completions(mut cmd: Command, shell: Shell) -> Result<u8> {
    let mut script = Vec::new();
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut cmd, name, &mut script);
    write_stdout(&script)
}

fn write_stdout(bytes: &[u8]) -> Result<u8> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(0),
        // `threadbalance man | head`: a closed pipe is the reader's choice.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(e).context("writing to stdout"),
    }
}
