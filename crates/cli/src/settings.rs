//! One vocabulary for the settings every command shares: the policy, the level, the
//! interval, the CPU list, dry runs and the seed.
//!
//! `run`, `attach`, `compare` and `sim` flatten the same [`SettingsArgs`] into their
//! options, so a value means the same and is refused the same way everywhere: the policy
//! and the level are the choices of a clap `ValueEnum` (their names come from
//! [`PolicyKind`] and [`Level`], nowhere else), an interval of 0 ms and a malformed CPU list
//! are refused while the command line is read, and every refusal is one line and exit
//! status 2 before anything runs.
//!
//! ```text
//!  --policy --level --interval --cpus --dry-run --seed
//!        │  parsed and checked by clap (ByName, interval_ms, cpu_list)
//!        ▼
//!  SettingsArgs ──settings()──────► policy::Settings (no --level: each policy's own)
//!               ──level(kind, topo)► the level `kind` runs at on the machine
//!               ──topology(topo)──► the machine cut down to --cpus
//!               ──child_args()────► the same options again, for compare's runs
//! ```
//!
//! `compare` and `sim` take a comma-separated list of policies; `run` and `attach` take
//! one ([`SettingsArgs::one_policy`]).

use crate::error::ValueError;
use crate::input_error;
use anyhow::Result;
use clap::builder::{PossibleValue, TypedValueParser};
use clap::error::ErrorKind;
use clap::{Args, ValueEnum};
use std::ffi::OsStr;
use std::fmt::Display;
use std::marker::PhantomData;
use std::str::FromStr;
use threadbalance_model::{CpuSet, Level, Nanos, Topology};
use threadbalance_policy::{Policy, PolicyKind, Settings};

/// The settings `run`, `attach`, `compare` and `sim` share.
#[derive(Debug, Clone, Args)]
pub struct SettingsArgs {
    /// Placement policy [default: tumbler]; `compare` and `sim` take a comma-separated
    /// list [default: none,tumbler].
    #[arg(
        long,
        short = 'p',
        alias = "policies",
        value_name = "POLICY",
        value_delimiter = ',',
        value_parser = ByName::<PolicyKind>::new()
    )]
    pub policy: Vec<PolicyKind>,
    /// Level whose domains play the papers' "sockets" [default: the policy's own: `cpu`
    /// for speed, `node` for the numa-* policies, the widest level with more than one
    /// domain for the others].
    #[arg(long, value_parser = ByName::<Level>::new())]
    pub level: Option<Level>,
    /// Fixed decision interval in milliseconds, at least 1 (overrides the policy's own
    /// choice).
    #[arg(long, value_name = "MS", value_parser = interval_ms)]
    pub interval: Option<u64>,
    /// Place threads only on these CPUs, in taskset's syntax (`0-3,8,10-11`); `run`
    /// starts the command confined to them, as `taskset -c LIST` would.
    #[arg(long, value_name = "LIST", value_parser = cpu_list)]
    pub cpus: Option<CpuSet>,
    /// Decide and report, but change no affinity.
    #[arg(long)]
    pub dry_run: bool,
    /// Seed of the policy's random generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

impl Default for SettingsArgs {
    /// What an empty command line gives: no policy named, seed 1.
    fn default() -> SettingsArgs {
        SettingsArgs {
            policy: Vec::new(),
            level: None,
            interval: None,
            cpus: None,
            dry_run: false,
            seed: 1,
        }
    }
}

impl SettingsArgs {
    /// The policies given, or `default`; and whether the default was taken.
    pub fn policies(&self, default: &[PolicyKind]) -> (Vec<PolicyKind>, bool) {
        if self.policy.is_empty() {
            (default.to_vec(), true)
        } else {
            (self.policy.clone(), false)
        }
    }

    /// The one policy of `run` or `attach` ([`PolicyKind::DEFAULT`] when none is given),
    /// and whether it is the default; a list is an input error.
    pub fn one_policy(&self, command: &str) -> Result<(PolicyKind, bool)> {
        match self.policy.as_slice() {
            [] => Ok((PolicyKind::DEFAULT, true)),
            [one] => Ok((*one, false)),
            many => Err(input_error(format!(
                "--policy: {command} takes one policy, not {} ({}); compare runs several",
                many.len(),
                names(many)
            ))),
        }
    }

    /// The level `kind` runs at on `topo`: the one given, or the policy's own
    /// ([`PolicyKind::default_level`]).
    pub fn level(&self, kind: PolicyKind, topo: &Topology) -> Level {
        self.settings().level_for(kind, topo)
    }

    /// The policy settings: the level given (none: each policy resolves its own when
    /// built), the interval, the seed.
    pub fn settings(&self) -> Settings {
        Settings {
            level: self.level,
            interval: self.interval.map(Nanos::from_millis),
            seed: self.seed,
            ..Settings::default()
        }
    }

    /// Builds `kind` on `topo`; a setting the policy refuses is an input error, and so is
    /// `--level llc` on a machine whose sysfs lists no cache.
    pub fn build(&self, kind: PolicyKind, topo: &Topology) -> Result<Box<dyn Policy>> {
        if self.level == Some(Level::Llc) && !topo.has_cache_info() {
            return Err(input_error(
                "--level llc: this machine's sysfs lists no cache, so its last-level caches \
                 are not known; choose package, node or core",
            ));
        }
        kind.build(&self.settings(), topo)
            .map_err(crate::error::bad_input)
    }

    /// `topo` cut down to `--cpus` (unchanged without it); a list that names none of
    /// `topo`'s CPUs is an input error naming those it has.
    pub fn topology(&self, topo: Topology) -> Result<Topology> {
        let Some(cpus) = &self.cpus else {
            return Ok(topo);
        };
        if topo.allowed_part(cpus).is_empty() {
            return Err(input_error(format!(
                "--cpus {cpus}: none of these CPUs may be used here (usable: {})",
                topo.online()
            )));
        }
        topo.restricted_to(cpus)
            .map_err(|e| crate::error::refused(format!("--cpus {cpus}"), e))
    }

    /// The options again as a command line, for a child `run` (`compare`): everything
    /// but the policy.
    pub fn child_args(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(l) = self.level {
            out.extend(["--level".to_string(), l.to_string()]);
        }
        if let Some(ms) = self.interval {
            out.extend(["--interval".to_string(), ms.to_string()]);
        }
        if let Some(c) = &self.cpus {
            out.extend(["--cpus".to_string(), c.to_string()]);
        }
        if self.dry_run {
            out.push("--dry-run".into());
        }
        out.extend(["--seed".to_string(), self.seed.to_string()]);
        out
    }
}

/// `none,tumbler`.
pub fn names(kinds: &[PolicyKind]) -> String {
    kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(",")
}

/// Parses a `ValueEnum` by its [`FromStr`], whose refusal says what was wrong in our words
/// (`unknown policy "bogus" (known: …)`), while help and completions list the enum's
/// choices.
#[derive(Debug)]
pub struct ByName<T>(PhantomData<fn() -> T>);

impl<T> ByName<T> {
    /// The parser.
    pub fn new() -> ByName<T> {
        ByName(PhantomData)
    }
}

impl<T> Clone for ByName<T> {
    fn clone(&self) -> ByName<T> {
        ByName::new()
    }
}

impl<T> TypedValueParser for ByName<T>
where
    T: ValueEnum + FromStr + Clone + Send + Sync + 'static,
    T::Err: Display,
{
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let text = value.to_string_lossy();
        text.parse::<T>().map_err(|e| {
            let flag = arg
                .and_then(clap::Arg::get_long)
                .map_or_else(String::new, |l| format!("--{l}: "));
            clap::Error::raw(ErrorKind::InvalidValue, format!("{flag}{e}\n")).with_cmd(cmd)
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            T::value_variants()
                .iter()
                .filter_map(ValueEnum::to_possible_value),
        ))
    }
}

/// `--interval MS`: a whole number of milliseconds, at least 1 (a policy that looks again
/// at once would spin).
pub fn interval_ms(text: &str) -> Result<u64, ValueError> {
    match text.trim().parse::<u64>() {
        Ok(0) => Err(ValueError::ZeroInterval),
        Ok(ms) => Ok(ms),
        Err(_) => Err(ValueError::Interval(text.into())),
    }
}

/// `--cpus LIST`: taskset's CPU list (`0-3,8,10-11`), not empty.
pub fn cpu_list(text: &str) -> Result<CpuSet, ValueError> {
    let set = CpuSet::parse_list(text)?;
    if set.is_empty() {
        return Err(ValueError::EmptyCpuList);
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        s: SettingsArgs,
    }

    fn parse(args: &[&str]) -> Result<SettingsArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied())).map(|c| c.s)
    }

    #[test]
    fn settings_args_policy_list_parses_by_name_and_one_policy_refuses_a_list() {
        let s = parse(&["--policy", "none,numa-tm"]).unwrap();
        assert_eq!(s.policy, [PolicyKind::None, PolicyKind::NumaTm]);
        assert!(s.one_policy("run").is_err());
        // `--policies` is the same option (compare's old name).
        let s = parse(&["--policies", "speed"]).unwrap();
        assert_eq!(s.one_policy("run").unwrap(), (PolicyKind::Speed, false));
        assert_eq!(
            parse(&[]).unwrap().one_policy("run").unwrap(),
            (PolicyKind::DEFAULT, true)
        );
    }

    #[test]
    fn settings_args_bad_values_are_refused_in_our_words() {
        let e = parse(&["--policy", "bogus"]).unwrap_err().to_string();
        assert!(e.contains("--policy: unknown policy \"bogus\""), "{e}");
        let e = parse(&["--level", "rack"]).unwrap_err().to_string();
        assert!(e.contains("--level: unknown level \"rack\""), "{e}");
        let e = parse(&["--interval", "0"]).unwrap_err().to_string();
        assert!(e.contains("must be at least 1 ms"), "{e}");
        let e = parse(&["--cpus", "3-1"]).unwrap_err().to_string();
        assert!(e.contains("bad CPU list"), "{e}");
        let e = parse(&["--cpus", ""]).unwrap_err().to_string();
        assert!(e.contains("empty CPU list"), "{e}");
    }

    #[test]
    fn settings_args_level_llc_is_refused_where_no_cache_is_known() {
        // See: issue 39: a machine whose sysfs lists no cache has no known LLC.
        let topo = Topology::synthetic("package:2 core:2 pu:1")
            .unwrap()
            .without_cache_info();
        let s = parse(&["--level", "llc"]).unwrap();
        let e = s
            .build(PolicyKind::DEFAULT, &topo)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("--level llc: this machine's sysfs lists no cache"),
            "{e}"
        );
        // Any other level, or the same level where caches are known, builds.
        assert!(
            parse(&["--level", "core"])
                .unwrap()
                .build(PolicyKind::DEFAULT, &topo)
                .is_ok()
        );
        let known = Topology::synthetic("package:2 core:2 pu:1").unwrap();
        assert!(s.build(PolicyKind::DEFAULT, &known).is_ok());
    }

    #[test]
    fn settings_args_level_aliases_and_settings_resolve_on_the_machine() {
        let topo = Topology::synthetic("package:2 core:2 pu:1").unwrap();
        let s = parse(&["--level", "socket", "--interval", "20", "--seed", "7"]).unwrap();
        let settings = s.settings();
        assert_eq!(settings.level, Some(Level::Package));
        assert_eq!(settings.interval, Some(Nanos::from_millis(20)));
        assert_eq!(settings.seed, 7);
        assert_eq!(s.level(PolicyKind::Speed, &topo), Level::Package);
        // No level: the machine's widest level with more than one domain for Tumbler.
        let none = parse(&[]).unwrap();
        assert_eq!(none.settings().level, None);
        assert_eq!(none.level(PolicyKind::Tumbler, &topo), Level::Package);
        let s = parse(&["--level", "cpu"]).unwrap();
        assert_eq!(s.level, Some(Level::Cpu));
    }

    #[test]
    fn settings_args_no_level_gives_each_policy_its_own() {
        // See: issue 38. Two sockets of 8 cores × 2: a user who names only the policy gets
        // speed on the logical CPUs, Tumbler on the sockets, NUMA balancing on the nodes.
        let topo = Topology::synthetic("package:2 core:8 pu:2").unwrap();
        let s = parse(&["--policy", "speed"]).unwrap();
        assert_eq!(s.level(PolicyKind::Speed, &topo), Level::Cpu);
        assert_eq!(s.level(PolicyKind::Tumbler, &topo), Level::Package);
        assert_eq!(s.level(PolicyKind::Handoff, &topo), Level::Package);
        assert_eq!(s.level(PolicyKind::NumaTm, &topo), Level::Node);
        let topo = Topology::synthetic("package:1 core:8 pu:2").unwrap();
        assert_eq!(s.level(PolicyKind::Speed, &topo), Level::Cpu);
        assert_eq!(s.level(PolicyKind::Shuffling, &topo), Level::Core);
    }

    #[test]
    fn settings_args_cpus_cut_the_machine_down_or_are_refused() {
        // Two packages of two cores, CPUs 0-3: `--cpus 2-3,9` keeps package 1 (CPU 9
        // does not exist here and is ignored, as taskset ignores offline CPUs).
        let topo = Topology::synthetic("package:2 core:2 pu:1").unwrap();
        let s = parse(&["--cpus", "2-3,9"]).unwrap();
        let t = s.topology(topo.clone()).unwrap();
        assert_eq!(t.online().to_string(), "2-3");
        assert_eq!(t.domains(Level::Package).len(), 1);
        let s = parse(&["--cpus", "8-9"]).unwrap();
        let e = s.topology(topo).unwrap_err().to_string();
        assert!(e.contains("none of these CPUs"), "{e}");
    }

    #[test]
    fn settings_args_child_args_round_trip() {
        let s = parse(&[
            "--level",
            "core",
            "--interval",
            "5",
            "--cpus",
            "0-1",
            "--dry-run",
        ])
        .unwrap();
        let again = parse(
            &s.child_args()
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )
        .unwrap();
        assert_eq!(again.level, s.level);
        assert_eq!(again.interval, s.interval);
        assert_eq!(again.cpus, s.cpus);
        assert!(again.dry_run);
        assert_eq!(again.seed, 1);
    }
}
