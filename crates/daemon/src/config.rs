//! `threadbalance.toml`: the daemon's settings and its rules, turned from text into a
//! validated [`Config`] in one named step.
//!
//! ```text
//!   text ──toml──► RawFile { daemon: Table, rule: [Table] }     file-level keys checked
//!                     │  each table deserialized on its own      (unknown keys rejected,
//!                     ▼                                           with the rule's name)
//!                RawDaemon, RawRule…
//!                     │  validate: regexes compile, CPU lists parse, policy and level
//!                     ▼  exist, intervals > 0, names unique, no rule after a catch-all
//!                  Config { daemon: DaemonSettings, rules: Rules }
//! ```
//!
//! Every rejection is one [`ConfigError`] line naming the file, the line, the rule or key,
//! and what was wrong. Nothing is half-applied: [`Config::reload`] keeps the old config
//! whole when the new text is bad.
//!
//! ```
//! use threadbalance_daemon::Config;
//! let c = Config::parse("t.toml", "[daemon]\ncpus = \"0-3\"\n\n[[rule]]\nname = \"db\"\n\
//!                                  comm = \"^postgres$\"\npolicy = \"tumbler\"\n").unwrap();
//! assert_eq!(c.rules.rules[0].name, "db");
//! let e = Config::parse("t.toml", "[[rule]]\nname = \"db\"\npolicy = \"fastest\"\n").unwrap_err();
//! assert!(e.to_string().starts_with("t.toml:3: rule \"db\": policy: unknown policy \"fastest\""));
//! ```

use crate::error::ConfigError;
use crate::rule::{Action, CgroupPattern, Conditions, Placement, Rule, Rules, UserSpec};
// Defined next to the rules that hold a policy name (so that `rule` needs nothing from
// `config`), and reached from here as they always were.
pub use crate::rule::{parse_policy, policy_name};
use regex::Regex;
use serde::Deserialize;
use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::ops::Range;
use std::path::PathBuf;
use threadbalance_model::{CpuSet, Level, Nanos};

/// Where metrics are served when the config does not say: loopback only.
pub const DEFAULT_METRICS: &str = "127.0.0.1:9464";
/// The control socket when the config does not say.
pub const DEFAULT_CONTROL_SOCKET: &str = "/run/threadbalance/control.sock";
/// The state directory (restore journals, locks) when the config does not say.
pub const DEFAULT_STATE_DIR: &str = "/run/threadbalance";
/// The kernel's limit on a process name (`TASK_COMM_LEN` 16, less the NUL).
const COMM_MAX: usize = 15;

/// A validated config: what the daemon runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it came from, as named (used in every message about it).
    pub file: String,
    /// The `[daemon]` table.
    pub daemon: DaemonSettings,
    /// The `[[rule]]`s and the processes always left alone.
    pub rules: Rules,
}

/// The `[daemon]` table, validated, defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct DaemonSettings {
    /// `cpus`: the CPUs the daemon may place threads on (taskset's list syntax, `0-7,16`);
    /// `None` is every online CPU.
    pub cpus: Option<CpuSet>,
    /// `banned_cpus`: CPUs never used, added to the kernel's (see [`crate::banned`]).
    pub banned_cpus: CpuSet,
    /// `kernel_banned` (default true): whether the kernel's `isolcpus` and `nohz_full`
    /// CPUs are banned too; false leaves `banned_cpus` alone in charge.
    pub kernel_banned: bool,
    /// `hands_off_pid_files`: pid files whose processes are never managed.
    pub hands_off_pid_files: Vec<PathBuf>,
    /// `metrics` (default `127.0.0.1:9464`; `"off"` disables): where Prometheus metrics
    /// are served.
    pub metrics: Option<SocketAddr>,
    /// `metrics_remote` (default false): serve metrics on a non-loopback address (a
    /// cluster's Prometheus scraping the node); without it such an address is rejected.
    pub metrics_remote: bool,
    /// `control_socket`: the control socket's path.
    pub control_socket: PathBuf,
    /// `state_dir`: where restore journals and locks live.
    pub state_dir: PathBuf,
    /// `observe` (default false): decide and report, change nothing.
    pub observe: bool,
    /// `sample_ms` (default 1000): the window over which processes' CPU use is measured
    /// for matching, and how often new processes are looked for.
    pub sample_interval: Nanos,
    /// `busy_thread_percent` (default 50): the share of one core a thread must use over the
    /// window to count as busy.
    pub busy_thread_percent: f64,
}

/// The file as TOML sees it: only the two top-level keys; their contents are checked
/// table by table so that errors can name the rule.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    daemon: Option<toml::Spanned<toml::Table>>,
    #[serde(default)]
    rule: Vec<toml::Spanned<toml::Table>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDaemon {
    cpus: Option<String>,
    banned_cpus: Option<String>,
    kernel_banned: Option<bool>,
    #[serde(default)]
    hands_off_comm: Vec<String>,
    #[serde(default)]
    hands_off_pid_files: Vec<String>,
    metrics: Option<String>,
    metrics_remote: Option<bool>,
    control_socket: Option<String>,
    state_dir: Option<String>,
    observe: Option<bool>,
    sample_ms: Option<u64>,
    busy_thread_percent: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    name: String,
    comm: Option<String>,
    cmdline: Option<String>,
    cgroup: Option<String>,
    user: Option<RawUser>,
    min_threads: Option<u32>,
    min_busy_threads: Option<u32>,
    min_cpu_percent: Option<f64>,
    hands_off: Option<bool>,
    policy: Option<String>,
    level: Option<String>,
    interval_ms: Option<u64>,
    seed: Option<u64>,
    lock_threshold: Option<f64>,
    allow_numa: Option<bool>,
    short_slices: Option<bool>,
}

/// `user = "name"` or `user = 1000`.
struct RawUser(UserSpec);

impl<'de> Deserialize<'de> for RawUser {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RawUser, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = RawUser;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a user name or a numeric uid")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawUser, E> {
                Ok(RawUser(UserSpec::Name(v.to_string())))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RawUser, E> {
                u32::try_from(v)
                    .map(|uid| RawUser(UserSpec::Uid(uid)))
                    .map_err(|_| E::custom(format!("uid {v} is out of range")))
            }
        }
        d.deserialize_any(V)
    }
}

/// The 1-based line holding byte `at` of `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.get(..at).map_or(0, |t| t.matches('\n').count()) + 1
}

/// The lines of offsets asked for in increasing order, as [`line_of`] gives them, counting
/// each byte of the text once over all the calls (not once per call): the rules' lines in
/// time linear in the file, however many rules it has.
struct LineCounter<'t> {
    text: &'t str,
    /// The last offset asked for, and its line.
    at: usize,
    line: usize,
    /// Bytes counted so far (what makes the cost linear; the tests check it).
    scanned: usize,
}

impl<'t> LineCounter<'t> {
    fn new(text: &'t str) -> LineCounter<'t> {
        LineCounter {
            text,
            at: 0,
            line: 1,
            scanned: 0,
        }
    }

    /// The line of byte `at`: counted on from the last offset when `at` is not before it.
    fn line_of(&mut self, at: usize) -> usize {
        if at < self.at {
            self.at = 0;
            self.line = 1;
        }
        let more = self.text.get(self.at..at).unwrap_or("");
        self.line += more.bytes().filter(|&b| b == b'\n').count();
        self.scanned += more.len();
        self.at = at;
        self.line
    }
}

/// One table of the file: where it is, so errors about its keys can give their lines.
struct Place<'t> {
    file: &'t str,
    text: &'t str,
    /// Bytes from the table's header to the next header.
    region: Range<usize>,
    /// How errors name it: `rule "busy"`, `daemon`.
    what: String,
}

impl Place<'_> {
    /// An error about `key` of this table, on the key's own line when it can be found.
    fn err(&self, key: &str, why: impl std::fmt::Display) -> ConfigError {
        let region = self.text.get(self.region.clone()).unwrap_or("");
        let line = region
            .lines()
            .position(|l| {
                let l = l.trim_start();
                l.strip_prefix(key)
                    .is_some_and(|rest| rest.trim_start().starts_with('='))
            })
            .map(|i| line_of(self.text, self.region.start) + i)
            .unwrap_or_else(|| line_of(self.text, self.region.start));
        let at = match key {
            "" => self.what.clone(),
            key => format!("{}: {key}", self.what),
        };
        ConfigError::new(self.file, Some(line), at, why.to_string())
    }

    /// The error of deserializing this table: `unknown field` and `in \`key\`` are
    /// turned into the key they name.
    fn serde_err(&self, e: &toml::de::Error) -> ConfigError {
        // A table deserialized on its own prints its message, then "in `key`".
        let msg = readable(&e.to_string());
        let first = msg.lines().next().unwrap_or("").trim();
        let within = msg
            .lines()
            .find_map(|l| l.trim().strip_prefix("in `")?.strip_suffix('`'));
        if let Some(key) = within {
            return self.err(key, first);
        }
        let unknown = first
            .strip_prefix("unknown field `")
            .and_then(|r| r.split_once('`'));
        if let Some((key, expected)) = unknown {
            let expected = expected.trim_start_matches(',').trim();
            return self.err(key, format!("unknown key `{key}`, {expected}"));
        }
        self.err("", first)
    }
}

impl Config {
    /// Parses and validates `text`, the contents of the config file named `file`.
    pub fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| file_error(file, text, &e))?;
        let mut starts: Vec<usize> = raw.rule.iter().map(|r| r.span().start).collect();
        starts.extend(raw.daemon.as_ref().map(|d| d.span().start));
        starts.sort_unstable();
        // The next table's start by binary search: a linear search per rule made parsing
        // quadratic in the number of rules.
        let region = |start: usize| {
            let next = starts.partition_point(|&s| s <= start);
            start..starts.get(next).copied().unwrap_or(text.len())
        };
        let place = |start: usize, what: String| Place {
            file,
            text,
            region: region(start),
            what,
        };

        let (daemon, hands_off_comms) = match &raw.daemon {
            None => validate_daemon(RawDaemon::default(), &place(0, "daemon".into()))?,
            Some(table) => {
                let p = place(table.span().start, "daemon".into());
                let d =
                    RawDaemon::deserialize(table.get_ref().clone()).map_err(|e| p.serde_err(&e))?;
                validate_daemon(d, &p)?
            }
        };

        let mut rules: Vec<Rule> = Vec::new();
        // Each rule's name and line, and the first catch-all's name: looked up, not
        // searched for, so each rule costs the same however many came before it.
        let mut named: HashMap<String, Option<usize>> = HashMap::new();
        let mut catch_all: Option<String> = None;
        let mut lines = LineCounter::new(text);
        for (i, table) in raw.rule.iter().enumerate() {
            let what = match table.get_ref().get("name").and_then(|n| n.as_str()) {
                Some(name) => format!("rule {name:?}"),
                None => format!("rule #{}", i + 1),
            };
            let p = place(table.span().start, what);
            let r = RawRule::deserialize(table.get_ref().clone()).map_err(|e| p.serde_err(&e))?;
            if let Some(first) = named.get(&r.name) {
                let at = first.map_or(String::new(), |l| format!(" (line {l})"));
                return Err(p.err(
                    "name",
                    format!("a rule named {:?} already exists{at}", r.name),
                ));
            }
            if let Some(all) = &catch_all {
                return Err(p.err(
                    "",
                    format!(
                        "can never match: rule {all:?} before it has no conditions and matches every process"
                    ),
                ));
            }
            let mut rule = validate_rule(r, &p)?;
            rule.line = Some(lines.line_of(table.span().start));
            named.insert(rule.name.clone(), rule.line);
            if rule.conditions.is_catch_all() {
                catch_all = Some(rule.name.clone());
            }
            rules.push(rule);
        }
        Ok(Config {
            file: file.to_string(),
            daemon,
            rules: Rules {
                rules,
                hands_off_comms,
                hands_off_pids: BTreeSet::new(),
            },
        })
    }

    /// One line saying what the daemon runs with, to log at start and after a reload:
    ///
    /// ```
    /// use threadbalance_daemon::Config;
    /// let c = Config::parse("t.toml", "[daemon]\nobserve = true\nmetrics = \"off\"\n\n\
    ///                                  [[rule]]\nname = \"busy\"\nmin_busy_threads = 2\npolicy = \"speed\"\n").unwrap();
    /// assert_eq!(c.summary(), "t.toml: 1 rule (busy), cpus all, banned config none + kernel's, \
    ///                          observe, metrics off");
    /// ```
    pub fn summary(&self) -> String {
        let d = &self.daemon;
        let rules = &self.rules.rules;
        let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
        let rules = match rules.len() {
            0 => "no rules (every process left alone)".to_string(),
            1 => format!("1 rule ({})", names.join(", ")),
            n => format!("{n} rules ({})", names.join(", ")),
        };
        let set = |s: &CpuSet| match s.is_empty() {
            true => "none".to_string(),
            false => s.to_string(),
        };
        format!(
            "{}: {rules}, cpus {}, banned config {}{}, {}, metrics {}",
            self.file,
            d.cpus.as_ref().map_or("all".to_string(), |c| c.to_string()),
            set(&d.banned_cpus),
            if d.kernel_banned {
                " + kernel's"
            } else {
                " only"
            },
            if d.observe { "observe" } else { "manage" },
            d.metrics.map_or("off".to_string(), |m| m.to_string()),
        )
    }

    /// The config to run with after a reload (SIGHUP, `ctl reload`) read `new_text`:
    /// the new config when it is valid, else the old one, unchanged, with the one line to
    /// log. Validation comes first, so a bad file never half-applies.
    ///
    /// ```
    /// use threadbalance_daemon::Config;
    /// let old = Config::parse("t.toml", "[daemon]\nobserve = true\n").unwrap();
    /// let (kept, line) = Config::reload(old, "[daemon]\nobserve = maybe\n").unwrap_err();
    /// assert!(kept.daemon.observe);
    /// assert!(line.starts_with("reload rejected, keeping the running config: t.toml:2:"));
    /// ```
    #[expect(
        clippy::result_large_err,
        reason = "the error hands the running config back by value, once per reload"
    )]
    pub fn reload(old: Config, new_text: &str) -> Result<Config, (Config, String)> {
        match Config::parse(&old.file, new_text) {
            Ok(new) => Ok(new),
            Err(e) => Err((
                old,
                format!("reload rejected, keeping the running config: {e}"),
            )),
        }
    }
}

/// An error of the file as a whole (not TOML, or a top-level key that is not `daemon` or
/// `rule`), with the top-level key named when the error is about one.
fn file_error(file: &str, text: &str, e: &toml::de::Error) -> ConfigError {
    let line = e.span().map(|s| line_of(text, s.start));
    let msg = readable(e.message());
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        let key = rest.split('`').next().unwrap_or("");
        let expected = rest
            .split_once('`')
            .map_or("", |(_, x)| x.trim_start_matches(','));
        return ConfigError::new(file, line, "", format!("unknown key `{key}`,{expected}"));
    }
    // A type error on a top-level key points at its table header: `[rule]`.
    let header = line
        .and_then(|l| text.lines().nth(l - 1))
        .map(str::trim)
        .and_then(|h| h.strip_prefix('[')?.strip_suffix(']'))
        .filter(|h| !h.starts_with('['));
    match header {
        Some("rule") if msg.contains("expected a sequence") => ConfigError::new(
            file,
            line,
            "rule",
            "a single [rule] table: write each rule as [[rule]]",
        ),
        Some(key) => ConfigError::new(file, line, key, msg),
        None => ConfigError::new(file, line, key_on_line(text, line).unwrap_or_default(), msg),
    }
}

/// Where a value the TOML parser refused is (`u64 value was too large`): the key on the
/// error's line, within its table as the other errors name it (`daemon: interval_ms`,
/// `rule #2: interval_ms`), found from the error's span.
fn key_on_line(text: &str, line: Option<usize>) -> Option<String> {
    let line = line?;
    let lines: Vec<&str> = text.lines().take(line).collect();
    let (key, _) = lines.last()?.split_once('=')?;
    let key = key.trim().trim_matches('"');
    if key.is_empty() || key.starts_with('[') {
        return None;
    }
    let header = lines
        .iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| l.starts_with('['));
    let table = match header {
        Some("[[rule]]") => {
            let n = lines.iter().filter(|l| l.trim() == "[[rule]]").count();
            format!("rule #{n}: ")
        }
        Some(h) => format!("{}: ", h.trim_matches(|c| c == '[' || c == ']')),
        None => String::new(),
    };
    Some(format!("{table}{key}"))
}

/// serde's words for the types a key takes, in the config's words.
fn readable(msg: &str) -> String {
    msg.replace(
        "u64 value was too large",
        "too large (TOML whole numbers go up to 9223372036854775807)",
    )
    .replace("expected u32", "expected a whole number ≥ 0")
    .replace("expected u64", "expected a whole number ≥ 0")
    .replace("expected f64", "expected a number")
}

fn cpu_list(p: &Place<'_>, key: &str, text: &str) -> Result<CpuSet, ConfigError> {
    CpuSet::parse_list(text).map_err(|e| p.err(key, e))
}

fn absolute(p: &Place<'_>, key: &str, path: String) -> Result<PathBuf, ConfigError> {
    match path.starts_with('/') {
        true => Ok(PathBuf::from(path)),
        false => Err(p.err(key, format!("{path:?} is not an absolute path"))),
    }
}

fn validate_daemon(
    d: RawDaemon,
    p: &Place<'_>,
) -> Result<(DaemonSettings, BTreeSet<String>), ConfigError> {
    let cpus = match d.cpus {
        None => None,
        Some(text) => {
            let set = cpu_list(p, "cpus", &text)?;
            if set.is_empty() {
                return Err(p.err("cpus", "empty CPU list (leave cpus out to use every CPU)"));
            }
            Some(set)
        }
    };
    let banned_cpus = match d.banned_cpus {
        None => CpuSet::new(),
        Some(text) => cpu_list(p, "banned_cpus", &text)?,
    };
    if let Some(cpus) = cpus.as_ref().filter(|c| c.is_subset(&banned_cpus)) {
        return Err(p.err(
            "banned_cpus",
            format!("bans every CPU of cpus = \"{cpus}\", leaving none to use"),
        ));
    }
    let mut comms = BTreeSet::new();
    for comm in d.hands_off_comm {
        if comm.is_empty() || comm.len() > COMM_MAX {
            return Err(p.err(
                "hands_off_comm",
                format!("{comm:?} can never match: a process name has 1 to {COMM_MAX} bytes"),
            ));
        }
        comms.insert(comm);
    }
    let pid_files = d
        .hands_off_pid_files
        .into_iter()
        .map(|f| absolute(p, "hands_off_pid_files", f))
        .collect::<Result<Vec<_>, _>>()?;
    let metrics = match d.metrics.as_deref().unwrap_or(DEFAULT_METRICS) {
        "off" => None,
        addr => Some(addr.parse::<SocketAddr>().map_err(|_| {
            p.err(
                "metrics",
                format!(
                    "{addr:?} is not an address:port such as \"{DEFAULT_METRICS}\" (or \"off\")"
                ),
            )
        })?),
    };
    let metrics_remote = d.metrics_remote.unwrap_or(false);
    if let Some(addr) = metrics
        && !addr.ip().is_loopback()
        && !metrics_remote
    {
        return Err(p.err(
                "metrics",
                format!(
                    "{addr} is not a loopback address; set metrics_remote = true to serve metrics beyond this machine"
                ),
            ));
    }
    let control_socket = absolute(
        p,
        "control_socket",
        d.control_socket
            .unwrap_or_else(|| DEFAULT_CONTROL_SOCKET.into()),
    )?;
    let state_dir = absolute(
        p,
        "state_dir",
        d.state_dir.unwrap_or_else(|| DEFAULT_STATE_DIR.into()),
    )?;
    let sample_ms = d.sample_ms.unwrap_or(1000);
    if sample_ms == 0 {
        return Err(p.err("sample_ms", "must be greater than 0"));
    }
    let busy = d.busy_thread_percent.unwrap_or(50.0);
    if !(busy > 0.0 && busy <= 100.0) {
        return Err(p.err(
            "busy_thread_percent",
            format!("{busy} is not a share of one core in (0, 100]"),
        ));
    }
    let settings = DaemonSettings {
        cpus,
        banned_cpus,
        kernel_banned: d.kernel_banned.unwrap_or(true),
        hands_off_pid_files: pid_files,
        metrics,
        metrics_remote,
        control_socket,
        state_dir,
        observe: d.observe.unwrap_or(false),
        sample_interval: Nanos::from_millis(sample_ms),
        busy_thread_percent: busy,
    };
    Ok((settings, comms))
}

fn regex(p: &Place<'_>, key: &str, text: Option<String>) -> Result<Option<Regex>, ConfigError> {
    text.map(|t| {
        Regex::new(&t).map_err(|e| {
            let why = crate::error::one_line(&e.to_string());
            p.err(key, format!("bad regex {t:?}: {why}"))
        })
    })
    .transpose()
}

fn validate_rule(r: RawRule, p: &Place<'_>) -> Result<Rule, ConfigError> {
    let name_ok = !r.name.is_empty()
        && r.name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !name_ok {
        return Err(p.err(
            "name",
            format!("{:?}: use letters, digits, '-', '_' and '.' only", r.name),
        ));
    }
    let user = match r.user.as_ref().map(|u| u.0.clone()) {
        Some(UserSpec::Name(n)) if n.is_empty() => {
            return Err(p.err("user", "empty user name"));
        }
        other => other,
    };
    if let Some(m) = r.min_cpu_percent.filter(|m| !(m.is_finite() && *m >= 0.0)) {
        return Err(p.err(
            "min_cpu_percent",
            format!("{m} is not a percentage of a core ≥ 0"),
        ));
    }
    let conditions = Conditions {
        comm: regex(p, "comm", r.comm.clone())?,
        cmdline: regex(p, "cmdline", r.cmdline.clone())?,
        cgroup: r
            .cgroup
            .as_ref()
            .map(|c| CgroupPattern::parse(c).map_err(|why| p.err("cgroup", why)))
            .transpose()?,
        user,
        min_threads: r.min_threads,
        min_busy_threads: r.min_busy_threads,
        min_cpu_percent: r.min_cpu_percent,
    };
    let name = r.name.clone();
    let action = if r.hands_off == Some(true) {
        let given = [
            ("policy", r.policy.is_some()),
            ("level", r.level.is_some()),
            ("interval_ms", r.interval_ms.is_some()),
            ("seed", r.seed.is_some()),
            ("lock_threshold", r.lock_threshold.is_some()),
            ("allow_numa", r.allow_numa.is_some()),
            ("short_slices", r.short_slices.is_some()),
        ];
        if let Some((key, _)) = given.iter().find(|(_, g)| *g) {
            return Err(p.err(
                key,
                "a hands_off rule manages nothing, so it takes no placement",
            ));
        }
        Action::HandsOff
    } else {
        Action::Manage(validate_placement(&r, p)?)
    };
    Ok(Rule {
        name,
        line: None,
        conditions,
        action,
    })
}

fn validate_placement(r: &RawRule, p: &Place<'_>) -> Result<Placement, ConfigError> {
    let Some(policy) = &r.policy else {
        return Err(p.err("", "no policy (give policy = \"…\", or hands_off = true)"));
    };
    let policy = parse_policy(policy).map_err(|why| p.err("policy", why))?;
    let level = r
        .level
        .as_deref()
        .map(|l| l.parse::<Level>().map_err(|e| p.err("level", e)))
        .transpose()?;
    if r.interval_ms == Some(0) {
        return Err(p.err("interval_ms", "must be greater than 0"));
    }
    let name = policy_name(&policy);
    if let Some(t) = r.lock_threshold {
        if name != "shuffling" {
            return Err(p.err(
                "lock_threshold",
                format!("applies to policy shuffling only, not {name}"),
            ));
        }
        if !(0.0..=1.0).contains(&t) {
            return Err(p.err("lock_threshold", format!("{t} is not a fraction in [0, 1]")));
        }
    }
    for (key, given) in [
        ("allow_numa", r.allow_numa.is_some()),
        ("short_slices", r.short_slices.is_some()),
    ] {
        if given && name != "speed" {
            return Err(p.err(key, format!("applies to policy speed only, not {name}")));
        }
    }
    Ok(Placement {
        policy,
        level,
        interval: r.interval_ms.map(Nanos::from_millis),
        seed: r.seed.unwrap_or(1),
        lock_threshold: r.lock_threshold,
        allow_numa: r.allow_numa,
        short_slices: r.short_slices,
    })
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
