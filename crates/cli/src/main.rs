//! `threadbalance`: places the threads of unmodified multithreaded programs across the
//! packages, NUMA nodes, caches and cores of a Linux machine while they run.
//!
//! ```text
//! threadbalance run [--policy P] [--level L] [--interval MS] [--cpus LIST] [--dry-run] [--json FILE] -- CMD…
//! threadbalance attach --pid PID [--no-children] [same options]
//! threadbalance compare [--policy P1,P2…] [same options] [--repeat N] [--json] -- CMD…
//! threadbalance restore [--state-dir DIR]
//! threadbalance daemon --config FILE.toml [--oneshot] [--observe] [--metrics ADDR:PORT]
//! threadbalance ctl [--socket PATH] status|list|threads|pause PID|resume PID|release PID|reload
//! threadbalance top [--socket PATH] [--once] | top --pid PID [same options as attach]
//! threadbalance topo [--sysfs-root DIR | --synthetic SPEC] [--json]
//! threadbalance doctor [--json]
//! threadbalance bench [--quick] [--repeat N] [--work-ms MS] [--policies P1,P2…] [--json FILE] [--cost]
//! threadbalance sim --machine M --workload W --policy P1,P2… [--seed S] [--json] [--report F.svg]
//! threadbalance man | completions bash|zsh|fish
//! ```
//!
//! The policy, level, interval, CPU list, dry-run and seed options are one group
//! ([`settings::SettingsArgs`]) with the same meaning and checks in every command. Every
//! JSON output carries `schema_version` and follows `schema/threadbalance.schema.json`.
//!
//! `--json FILE` takes `-` for stdout: the JSON alone goes there, and what is meant for a
//! person (the summary, the table) to stderr. `--version` names the commit built from.
//!
//! Exit status: `run` exits with the command's status (128 + signal if it was killed);
//! every command exits 2 on bad input (unknown policy, bad pid, bad spec, a process that is
//! not a user program or is already managed) having changed nothing, and 1 on any other
//! failure, a mask that could not be restored among them. Each error is one line, each
//! cause said once; stdout is checked at the end: a full disk is an error (exit 1), a
//! closed pipe (`| head -1`) is not (see [`say`] and `docs/errors.md`).

#[macro_use]
mod say;
mod bench;
mod compare;
mod ctl;
mod daemon;
mod doctor;
mod error;
mod host;
mod jsonout;
mod manage;
mod manual;
mod recover;
mod runread;
mod schema;
mod settings;
mod sim;
mod summary;
mod top;
mod topo;
mod trace;
mod usable;

pub use error::{InputError, input_error};

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Places the threads of multithreaded programs across sockets, NUMA nodes and cores.
#[derive(Debug, Parser)]
#[command(
    name = "threadbalance",
    version = env!("THREADBALANCE_VERSION"),
    about,
    long_about = None
)]
struct Cli {
    /// Check the arguments and exit 0 without doing anything (the README test parses its
    /// long commands with it).
    #[arg(long, hide = true, global = true)]
    parse_only: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Launch a command and manage its threads (and its children's) until it exits.
    Run(RunArgs),
    /// Manage the threads of a running process until it exits or the tool is interrupted.
    Attach(AttachArgs),
    /// Show the topology: packages, NUMA nodes, last-level caches, cores, CPUs.
    Topo(topo::TopoArgs),
    /// What this machine offers the tool and what competes with it, one line each.
    Doctor(doctor::DoctorArgs),
    /// Run a command under several policies in turn, interleaved, and compare them.
    Compare(compare::CompareArgs),
    /// Show on this machine what balancing does for a bundled workload (under a minute).
    Demo(compare::DemoArgs),
    /// Manage the whole machine as a config file's rules say (operator mode).
    Daemon(daemon::DaemonArgs),
    /// Ask the running daemon: status, list, threads, pause, resume, release, reload.
    Ctl(ctl::CtlArgs),
    /// A live view of managed threads by domain (the daemon's, or a process it manages
    /// itself with --pid); q quits, restoring what it changed.
    Top(top::TopArgs),
    /// Put back the masks left changed by instances that died (SIGKILL, OOM, a crash).
    Restore(recover::RestoreArgs),
    /// The many-core benchmark: thread counts from M to 2M on the M CPUs it may use, an
    /// OpenMP program, and fixed thread counts on fewer CPUs, under several policies.
    Bench(bench::BenchArgs),
    /// Simulate policies side by side on a modeled machine, or run the papers' claims.
    Sim(sim::SimArgs),
    /// Print the manual page (roff) to stdout.
    Man,
    /// Print a shell completion script to stdout.
    Completions(manual::CompletionsArgs),
    /// Run a built-in multithreaded workload and print its score as one JSON line.
    Workload {
        /// The scenario and its options.
        #[command(subcommand)]
        scenario: threadbalance_workload::Scenario,
    },
}

/// Options shared by `run` and `attach`.
#[derive(Debug, Clone, Args)]
pub struct ManageArgs {
    /// Policy, level, interval, CPU list, dry run, seed: as in every command.
    #[command(flatten)]
    pub settings: settings::SettingsArgs,
    /// Also write the summary as JSON to FILE (`-`: stdout, after the command has exited).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also draw the run to FILE.svg: each domain's utilization over time and the moves.
    #[arg(long, value_name = "FILE.svg")]
    pub report: Option<PathBuf>,
    /// Print each decision the policy explains, as it happens, and the whole summary at
    /// the end (threads, move outcomes, utilization per domain, pacing, lock time, the
    /// policy's account) instead of its first lines.
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Hold the tool's whole CPU time, moves included, to PCT % of one core (0.1–100)
    /// [default: its ticks to 0.8 %, up to 2.5 % while speed's rotation turns 6 cores or
    /// more over, and all of it, moves included, to 25 %].
    #[arg(long, value_name = "PCT", value_parser = cpu_budget)]
    pub cpu_budget: Option<f64>,
    /// Directory of journals and locks [default: /run/threadbalance for root,
    /// $XDG_RUNTIME_DIR/threadbalance otherwise, or $TMPDIR/threadbalance-UID (private,
    /// 0700) without XDG_RUNTIME_DIR].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Read each thread's hardware counters (instructions, cycles, last-level-cache
    /// misses) and report its IPC and MPKI, with any policy; refused (exit 2) on a machine
    /// without them, as a policy that needs them is.
    #[arg(long)]
    pub counters: bool,
    /// For tests: hardware counters of plain values (IPC 1.5, MPKI 2) instead of the PMU's.
    #[arg(long, hide = true)]
    pub fake_counters: bool,
    /// For tests of the setter trace: keep it whatever the machine's time in the kernel
    /// says it costs (docs/choices.md).
    #[arg(long, hide = true)]
    pub keep_trace: bool,
    /// For tests of crash recovery: panic after this many ticks.
    #[arg(long, hide = true, value_name = "TICKS")]
    pub fault_panic_after: Option<u64>,
}

/// `--cpu-budget PCT` as a share of one core.
pub(crate) fn cpu_budget(s: &str) -> std::result::Result<f64, error::ValueError> {
    let pct: f64 = s.trim().parse().map_err(|_| error::ValueError::NotA {
        given: s.into(),
        expected: "0.1 to 100 (% of one core)".into(),
    })?;
    Ok(threadbalance_model::pace::cpu_budget_from_pct(pct)?)
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    manage: ManageArgs,
    /// Manage only CMD's own threads, not those of processes it starts.
    #[arg(long)]
    no_children: bool,
    /// The command and its arguments.
    #[arg(required = true, last = true, value_name = "CMD")]
    command: Vec<String>,
}

#[derive(Debug, Args)]
struct AttachArgs {
    /// The process to manage.
    #[arg(long)]
    pid: i32,
    /// Manage only the process's own threads, not those of processes it starts.
    #[arg(long)]
    no_children: bool,
    #[command(flatten)]
    manage: ManageArgs,
}

/// `threadbalance workload`: runs the scenario, prints its score.
fn workload(scenario: &threadbalance_workload::Scenario) -> anyhow::Result<u8> {
    let score = threadbalance_workload::run(scenario).map_err(|e| match e {
        threadbalance_workload::WorkloadError::Invalid { .. } => error::bad_input(e),
        other => other.into(),
    })?;
    outln!("{}", score.to_json_line());
    Ok(0)
}

/// Reads the command line. A value refused while parsing (an unknown policy or level, an
/// interval of 0, a malformed CPU list) is one line, `threadbalance: …`, and exit status 2,
/// as every other input error; help, version and usage errors are clap's own.
fn parse_cli() -> Result<Cli, ExitCode> {
    use clap::error::ErrorKind;
    match Cli::try_parse() {
        Ok(cli) => Ok(cli),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::InvalidValue | ErrorKind::ValueValidation
            ) =>
        {
            let text = e.to_string();
            let line = text.lines().next().unwrap_or_default();
            errln!("threadbalance: {}", line.trim_start_matches("error: "));
            Err(ExitCode::from(2))
        }
        Err(e) => e.exit(),
    }
}

fn main() -> ExitCode {
    let cli = match parse_cli() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    if cli.parse_only {
        return ExitCode::SUCCESS;
    }
    let result = match cli.command {
        Command::Run(a) => manage::run(&a.manage, &a.command, !a.no_children),
        Command::Attach(a) => manage::attach(&a.manage, a.pid, !a.no_children),
        Command::Restore(a) => recover::restore(&a),
        Command::Daemon(a) => daemon::run(&a),
        Command::Ctl(a) => ctl::run(&a),
        Command::Top(a) => top::run(&a),
        Command::Topo(a) => topo::topo(&a).map(|()| 0),
        Command::Doctor(a) => doctor::run(&a),
        Command::Workload { scenario } => workload(&scenario),
        Command::Compare(a) => compare::run(&a),
        Command::Demo(a) => compare::demo(&a),
        Command::Bench(a) => bench::run(&a),
        Command::Sim(a) => sim::run(&a),
        Command::Man => manual::man(<Cli as clap::CommandFactory>::command()),
        Command::Completions(a) => {
            manual::completions(<Cli as clap::CommandFactory>::command(), a.shell)
        }
    };
    let code = match result {
        Ok(code) => code,
        // The reader of our stdout went away (`… | head -1`): not a failure of ours.
        Err(e) if broken_pipe(&e) => 0,
        Err(e) => {
            errln!("threadbalance: {}", error::one_line(&e));
            if e.chain().any(|c| c.downcast_ref::<InputError>().is_some()) {
                2
            } else {
                1
            }
        }
    };
    ExitCode::from(checked_stdout(code))
}

/// The exit status once stdout is flushed: `code`, unless what was printed could not be
/// written (a full disk, `>/dev/full`: one line, and 1 when `code` said success). A closed
/// pipe changes nothing (see [`say`]).
fn checked_stdout(code: u8) -> u8 {
    match say::stdout_error() {
        None => code,
        Some(e) if say::is_broken_pipe(&e) => code,
        Some(e) => {
            errln!("threadbalance: writing to stdout: {e}");
            if code == 0 { 1 } else { code }
        }
    }
}

/// Whether `e` comes from a closed pipe (an export or JSON written to stdout).
fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(say::is_broken_pipe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broken_pipe_is_found_under_contexts() {
        let e = anyhow::Error::new(std::io::Error::from_raw_os_error(32)).context("writing");
        assert!(broken_pipe(&e));
        let e = anyhow::Error::new(std::io::Error::from_raw_os_error(28)).context("writing");
        assert!(!broken_pipe(&e));
    }
}
