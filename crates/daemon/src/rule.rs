//! Which processes the daemon manages, and how: rules matched against facts about a
//! process, first match wins, and anything no rule claims is left alone.
//!
//! A rule is a set of conditions, all of which must hold, and an action. The facts are
//! plain values the shell read from `/proc` over one sampling window ([`crate::read`],
//! [`crate::process::facts_between`]), so matching is a pure function that tests drive
//! with literals:
//!
//! ```text
//!  ProcessFacts ──► kernel thread? ──► listed pid? ──► listed comm? ──► rule 1 ──► rule 2 … ──► hands off
//!                     │ yes              │ yes          │ yes           │ match     │ match
//!                     ▼                  ▼              ▼               ▼           ▼
//!                  HandsOff           HandsOff       HandsOff        its action  its action
//! ```
//!
//! A condition left out of a rule does not constrain it; a rule with no condition at all
//! matches every process (a catch-all, which must then be the last rule).
//!
//! ```
//! use threadbalance_daemon::{Config, Decision, ProcessFacts, match_process};
//! let config = Config::parse("t.toml", r#"
//!     [[rule]]
//!     name = "busy"
//!     min_busy_threads = 2
//!     policy = "speed"
//! "#).unwrap();
//! let mut facts = ProcessFacts::example("ffmpeg");
//! facts.busy_threads = 3;
//! assert!(matches!(match_process(&config.rules, &facts), Decision::Manage { .. }));
//! facts.busy_threads = 1;
//! assert!(matches!(match_process(&config.rules, &facts), Decision::HandsOff(_)));
//! ```

use crate::process::ProcessFacts;
use regex::Regex;
use std::collections::BTreeSet;
use std::fmt;
use threadbalance_model::{Level, Nanos, Pid};

/// The type a rule's policy is held in once validated. Today the name as the policy
/// registry spells it ([`threadbalance_policy::names`]). Only
/// [`parse_policy`] makes one and only [`policy_name`] looks
/// inside, so a typed policy enum replaces it by changing those two and this line.
pub type PolicyName = String;

/// Checks a rule's policy name and returns what a rule holds. The one place that knows
/// what a valid policy is: today a name from [`threadbalance_policy::names`]; when the
/// policy crate gains a typed policy enum, this becomes its `FromStr` (and
/// [`PolicyName`] that type).
///
/// ```
/// use threadbalance_daemon::config::parse_policy;
/// assert_eq!(parse_policy("speed").unwrap(), "speed");
/// assert!(parse_policy("fastest").unwrap_err().to_string().starts_with("unknown policy \"fastest\""));
/// ```
pub fn parse_policy(name: &str) -> Result<PolicyName, UnknownPolicy> {
    let known = threadbalance_policy::names();
    match known.contains(&name) {
        true => Ok(name.to_string()),
        false => Err(UnknownPolicy {
            name: name.to_string(),
            known,
        }),
    }
}

/// A rule's policy that is not one ([`parse_policy`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown policy {name:?} (known: {})", known.join(", "))]
pub struct UnknownPolicy {
    /// The name given.
    pub name: String,
    /// The names there are.
    pub known: Vec<&'static str>,
}

/// A rule's `cgroup` that is not a pattern ([`CgroupPattern::parse`]).
#[derive(Debug, Clone, thiserror::Error)]
pub enum CgroupPatternError {
    /// It does not start with `/`.
    #[error(
        "{0:?} is not an absolute cgroup path (as /proc/<pid>/cgroup writes them: \"/system.slice\")"
    )]
    NotAbsolute(String),
    /// Its glob made a regex the regex crate refused (one line of its message).
    #[error("{}", crate::error::one_line(&.0.to_string()))]
    Regex(regex::Error),
}

/// The registry name of a validated policy (`"speed"`), for messages, logs and
/// [`threadbalance_policy::build`]. With [`parse_policy`], the only code that knows what a
/// [`PolicyName`] is.
pub fn policy_name(policy: &PolicyName) -> &str {
    policy
}

/// A user, by name (`"postgres"`) or by uid (`999`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserSpec {
    /// A user name, compared with the name `/etc/passwd` gives the process's effective uid.
    Name(String),
    /// A numeric user id, compared with the process's effective uid.
    Uid(u32),
}

/// Where in the cgroup tree a process must be. Either form matches the cgroup it names and
/// everything below it.
#[derive(Debug, Clone)]
pub enum CgroupPattern {
    /// A path such as `/system.slice`, compared whole path component by whole path
    /// component: it matches `/system.slice/nginx.service` but not `/system.slicer`.
    Prefix(String),
    /// A glob such as `/user.slice/user-*.slice`: `*` is any run of characters within one
    /// component, `?` one such character, `**` any run across components.
    Glob {
        /// The glob as written.
        text: String,
        /// The glob translated to an anchored regex.
        regex: Regex,
    },
}

impl CgroupPattern {
    /// Whether the cgroup `path` (`/system.slice/nginx.service`) is at or below the pattern.
    ///
    /// ```
    /// use threadbalance_daemon::rule::CgroupPattern;
    /// let p = CgroupPattern::parse("/system.slice").unwrap();
    /// assert!(p.matches("/system.slice/nginx.service"));
    /// assert!(p.matches("/system.slice"));
    /// assert!(!p.matches("/system.slicer"));
    /// let g = CgroupPattern::parse("/user.slice/user-*.slice").unwrap();
    /// assert!(g.matches("/user.slice/user-1000.slice/session-2.scope"));
    /// assert!(!g.matches("/user.slice/other/user-1.slice"));
    /// ```
    pub fn matches(&self, path: &str) -> bool {
        match self {
            CgroupPattern::Prefix(prefix) => {
                let prefix = prefix.trim_end_matches('/');
                match path.strip_prefix(prefix) {
                    Some(rest) => rest.is_empty() || rest.starts_with('/') || prefix.is_empty(),
                    None => false,
                }
            }
            CgroupPattern::Glob { regex, .. } => regex.is_match(path),
        }
    }

    /// Reads a pattern: a glob when it holds `*` or `?`, a prefix otherwise. It must be an
    /// absolute cgroup path (start with `/`, as `/proc/<pid>/cgroup` writes them).
    pub fn parse(text: &str) -> Result<CgroupPattern, CgroupPatternError> {
        if !text.starts_with('/') {
            return Err(CgroupPatternError::NotAbsolute(text.to_string()));
        }
        if !text.contains(['*', '?']) {
            return Ok(CgroupPattern::Prefix(text.to_string()));
        }
        let mut re = String::from("^");
        let mut chars = text.trim_end_matches('/').chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '*' if chars.peek() == Some(&'*') => {
                    chars.next();
                    re.push_str(".*");
                }
                '*' => re.push_str("[^/]*"),
                '?' => re.push_str("[^/]"),
                c => re.push_str(&regex::escape(c.encode_utf8(&mut [0; 4]))),
            }
        }
        re.push_str("(/.*)?$");
        let regex = Regex::new(&re).map_err(CgroupPatternError::Regex)?;
        Ok(CgroupPattern::Glob {
            text: text.to_string(),
            regex,
        })
    }
}

/// The conditions of a rule. Each one given must hold; `None` does not constrain.
#[derive(Debug, Clone, Default)]
pub struct Conditions {
    /// Searched in the process name (`/proc/<pid>/comm`, at most 15 bytes); anchor it
    /// (`^postgres$`) to compare the whole name.
    pub comm: Option<Regex>,
    /// Searched in the command line (`/proc/<pid>/cmdline`, arguments joined by spaces).
    pub cmdline: Option<Regex>,
    /// The process's cgroup (v2, `0::` line of `/proc/<pid>/cgroup`) is at or below this.
    pub cgroup: Option<CgroupPattern>,
    /// The process's effective user.
    pub user: Option<UserSpec>,
    /// At least this many threads.
    pub min_threads: Option<u32>,
    /// At least this many busy threads (threads that used at least the daemon's
    /// `busy_thread_percent` of a core over the sampling window).
    pub min_busy_threads: Option<u32>,
    /// At least this CPU use over the sampling window, in percent of one core (`250` is two
    /// and a half cores).
    pub min_cpu_percent: Option<f64>,
}

impl Conditions {
    /// Whether no condition is given, so the rule matches every process.
    pub fn is_catch_all(&self) -> bool {
        self.comm.is_none()
            && self.cmdline.is_none()
            && self.cgroup.is_none()
            && self.user.is_none()
            && self.min_threads.is_none()
            && self.min_busy_threads.is_none()
            && self.min_cpu_percent.is_none()
    }

    /// Whether every condition given holds for `facts`. A cgroup condition fails when the
    /// process's cgroup is unknown; a user name condition fails when its uid has no name.
    pub fn hold_for(&self, facts: &ProcessFacts) -> bool {
        let regex_ok =
            |re: &Option<Regex>, text: &str| re.as_ref().is_none_or(|r| r.is_match(text));
        let at_least = |min: Option<u32>, n: u32| min.is_none_or(|m| n >= m);
        regex_ok(&self.comm, &facts.comm)
            && regex_ok(&self.cmdline, &facts.cmdline)
            && self
                .cgroup
                .as_ref()
                .is_none_or(|p| facts.cgroup.as_deref().is_some_and(|path| p.matches(path)))
            && self.user.as_ref().is_none_or(|u| match u {
                UserSpec::Uid(uid) => facts.uid == *uid,
                UserSpec::Name(name) => facts.user.as_deref() == Some(name.as_str()),
            })
            && at_least(self.min_threads, facts.threads)
            && at_least(self.min_busy_threads, facts.busy_threads)
            && self.min_cpu_percent.is_none_or(|m| facts.cpu_percent >= m)
    }
}

/// How a matched process is managed.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// The policy (validated against the registry).
    pub policy: PolicyName,
    /// The level whose domains play the papers' "sockets"; `None` leaves the choice to the
    /// daemon (the policy's own, `PolicyKind::default_level`, as `run` does).
    pub level: Option<Level>,
    /// Overrides the policy's own decision interval.
    pub interval: Option<Nanos>,
    /// Seed of the policy's random generator.
    pub seed: u64,
    /// `shuffling` only: lock-time fraction above which threads are shuffled.
    pub lock_threshold: Option<f64>,
    /// `speed` only: whether its rotation may cross NUMA nodes.
    pub allow_numa: Option<bool>,
    /// `speed` only: whether the threads it rotates may run in short time slices.
    pub short_slices: Option<bool>,
}

impl Placement {
    /// The policy's registry name (`"speed"`).
    pub fn policy_name(&self) -> &str {
        policy_name(&self.policy)
    }

    /// The policy settings this placement gives at `level` (the rule's own level when it
    /// names one, else the `level` the daemon chose), ready for
    /// [`threadbalance_policy::build`].
    ///
    /// ```
    /// use threadbalance_daemon::{config::parse_policy, rule::Placement};
    /// use threadbalance_model::{Level, Nanos};
    /// let p = Placement { policy: parse_policy("speed").unwrap(), level: None, interval: Some(Nanos::from_millis(50)),
    ///                     seed: 7, lock_threshold: None, allow_numa: Some(true),
    ///                     short_slices: Some(false) };
    /// let s = p.settings(Level::Node);
    /// assert_eq!((s.level, s.interval, s.seed, s.speed.allow_numa, s.speed.short_slices),
    ///            (Some(Level::Node), Some(Nanos::from_millis(50)), 7, true, false));
    /// ```
    pub fn settings(&self, level: Level) -> threadbalance_policy::Settings {
        let mut s = threadbalance_policy::Settings::new(self.level.unwrap_or(level));
        s.interval = self.interval;
        s.seed = self.seed;
        if let Some(t) = self.lock_threshold {
            s.lock_threshold = t;
        }
        if let Some(a) = self.allow_numa {
            s.speed.allow_numa = a;
        }
        if let Some(a) = self.short_slices {
            s.speed.short_slices = a;
        }
        s
    }
}

/// What a rule does with the processes it matches.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Manage them this way.
    Manage(Placement),
    /// Leave them alone (`hands_off = true`), whatever later rules say.
    HandsOff,
}

/// One `[[rule]]` of the config.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Its name, unique in the file (used in logs, metrics and the control socket).
    pub name: String,
    /// The line of its `[[rule]]` header, when it came from a file.
    pub line: Option<usize>,
    /// What a process must look like.
    pub conditions: Conditions,
    /// What is done with it.
    pub action: Action,
}

/// The rules of a config in file order, and the processes always left alone.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// The rules, first match wins.
    pub rules: Vec<Rule>,
    /// Process names never managed (`hands_off_comm`), compared whole.
    pub hands_off_comms: BTreeSet<String>,
    /// Processes never managed: the pids the shell read from `hands_off_pid_files`, and
    /// the daemon's own. The shell refreshes them; the config only names the files.
    pub hands_off_pids: BTreeSet<Pid>,
}

/// Why a process is left alone.
#[derive(Debug, Clone, Copy)]
pub enum HandsOff<'r> {
    /// It is a kernel thread (no user memory; its affinity is the kernel's business).
    KernelThread,
    /// Its pid is listed (a pid file, or the daemon itself).
    ListedPid,
    /// Its name is in `hands_off_comm`.
    ListedComm,
    /// The first rule it matched says `hands_off = true`.
    Rule(&'r Rule),
    /// No rule matched: the default.
    NoRule,
}

/// What the daemon does with one process.
#[derive(Debug, Clone, Copy)]
pub enum Decision<'r> {
    /// Manage it as the first matching rule says.
    Manage {
        /// The rule that matched.
        rule: &'r Rule,
        /// Its placement.
        placement: &'r Placement,
    },
    /// Leave it alone, and why.
    HandsOff(HandsOff<'r>),
}

impl fmt::Display for Decision<'_> {
    /// One line for the daemon's log: `managed by rule "busy" (policy speed)`,
    /// `left alone: no rule matched`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Manage { rule, placement } => write!(
                f,
                "managed by rule {:?} (policy {})",
                rule.name,
                placement.policy_name()
            ),
            Decision::HandsOff(why) => match why {
                HandsOff::KernelThread => f.write_str("left alone: kernel thread"),
                HandsOff::ListedPid => {
                    f.write_str("left alone: pid listed (hands_off_pid_files, or the daemon)")
                }
                HandsOff::ListedComm => f.write_str("left alone: name in hands_off_comm"),
                HandsOff::Rule(rule) => {
                    write!(f, "left alone by rule {:?} (hands_off = true)", rule.name)
                }
                HandsOff::NoRule => f.write_str("left alone: no rule matched"),
            },
        }
    }
}

/// Decides what to do with a process: kernel threads and listed processes are left
/// alone, then the first rule whose conditions all hold decides, and a process no rule
/// matches is left alone. Pure.
pub fn match_process<'r>(rules: &'r Rules, facts: &ProcessFacts) -> Decision<'r> {
    if facts.kernel_thread {
        return Decision::HandsOff(HandsOff::KernelThread);
    }
    if rules.hands_off_pids.contains(&facts.pid) {
        return Decision::HandsOff(HandsOff::ListedPid);
    }
    if rules.hands_off_comms.contains(&facts.comm) {
        return Decision::HandsOff(HandsOff::ListedComm);
    }
    match rules.rules.iter().find(|r| r.conditions.hold_for(facts)) {
        Some(rule) => match &rule.action {
            Action::Manage(placement) => Decision::Manage { rule, placement },
            Action::HandsOff => Decision::HandsOff(HandsOff::Rule(rule)),
        },
        None => Decision::HandsOff(HandsOff::NoRule),
    }
}

/// A rule that almost matched a process no rule manages, and why it did not: what the
/// daemon logs and `ctl list --all` shows.
#[derive(Debug, Clone)]
pub struct NearMiss<'r> {
    /// The rule.
    pub rule: &'r Rule,
    /// The conditions that failed, with the numbers, joined by "; ".
    pub why: String,
}

/// The share of a numeric condition a process must reach to count as almost matched: half.
/// Lower, and every idle process on the machine would be a "candidate" of a rule with only
/// thresholds (the packaged `min_busy_threads = 2` is not met by an idle shell with 0 busy
/// threads, and saying so for each of hundreds of processes tells nothing); higher, and a
/// compressor whose threads each use 18 % of a core against a 50 % threshold would not be
/// explained.
pub const NEAR: f64 = 0.5;

/// The first managing rule that `facts` almost matched, when no rule matched: every
/// condition on names, command line, cgroup and user holds, and each threshold that failed
/// was reached at least [`NEAR`] of the way. For `min_busy_threads` the way is measured in
/// CPU: the process's CPU use against the busy threads asked for times
/// `busy_thread_percent` (threads that share a core's worth of work between them are
/// close, whatever each one's share). `None` for a process a rule matches, one left alone
/// on purpose (kernel thread, listed), or one far from every rule. Pure.
///
/// ```
/// use threadbalance_daemon::{Config, ProcessFacts, rule::near_miss};
/// let config = Config::parse("t.toml", r#"
///     [[rule]]
///     name = "busy"
///     min_busy_threads = 2
///     policy = "speed"
/// "#).unwrap();
/// // pbzip2 on a loaded machine: four threads at 18 % each.
/// let mut facts = ProcessFacts::example("pbzip2");
/// (facts.threads, facts.cpu_percent, facts.busiest_percent) = (4, 72.0, 18.0);
/// let miss = near_miss(&config.rules, &facts, 50.0).unwrap();
/// assert_eq!(miss.why, "0 busy threads (using 50 % of a core or more; its busiest used 18 %), \
///                       the rule needs 2 (4 threads using 72 % of a core in all)");
/// ```
pub fn near_miss<'r>(
    rules: &'r Rules,
    facts: &ProcessFacts,
    busy_thread_percent: f64,
) -> Option<NearMiss<'r>> {
    if !matches!(
        match_process(rules, facts),
        Decision::HandsOff(HandsOff::NoRule)
    ) {
        return None;
    }
    rules.rules.iter().find_map(|rule| {
        if !matches!(rule.action, Action::Manage(_)) {
            return None;
        }
        let why = rule.conditions.shortfall(facts, busy_thread_percent)?;
        Some(NearMiss { rule, why })
    })
}

impl Conditions {
    /// Why a process that these conditions do not match is close to them (see
    /// [`near_miss`]); `None` when it is not close, or when they match.
    fn shortfall(&self, facts: &ProcessFacts, busy_thread_percent: f64) -> Option<String> {
        let only_thresholds = Conditions {
            min_threads: None,
            min_busy_threads: None,
            min_cpu_percent: None,
            ..self.clone()
        };
        if !only_thresholds.hold_for(facts) {
            return None;
        }
        let mut why = Vec::new();
        if let Some(min) = self.min_threads.filter(|&m| facts.threads < m) {
            if f64::from(facts.threads) < NEAR * f64::from(min) {
                return None;
            }
            why.push(format!("{} threads, the rule needs {min}", facts.threads));
        }
        if let Some(min) = self.min_busy_threads.filter(|&m| facts.busy_threads < m) {
            if facts.cpu_percent < NEAR * f64::from(min) * busy_thread_percent {
                return None;
            }
            let plural = if facts.busy_threads == 1 { "" } else { "s" };
            let mut line = format!(
                "{} busy thread{plural} (using {busy_thread_percent:.0} % of a core or more; \
                 its busiest used {:.0} %), the rule needs {min} ({} thread{} using {:.0} % of \
                 a core in all)",
                facts.busy_threads,
                facts.busiest_percent,
                facts.threads,
                if facts.threads == 1 { "" } else { "s" },
                facts.cpu_percent
            );
            if facts.threads == 1 {
                line.push_str(
                    "; a rule counts the threads of one process, and forked workers are \
                     processes of one thread each",
                );
            }
            why.push(line);
        }
        if let Some(min) = self.min_cpu_percent.filter(|&m| facts.cpu_percent < m) {
            if facts.cpu_percent < NEAR * min {
                return None;
            }
            why.push(format!(
                "{:.0} % of a core, the rule needs {min:.0} %",
                facts.cpu_percent
            ));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }
}

#[cfg(test)]
#[path = "rule_tests.rs"]
mod tests;
