//! What the daemon counts, in Prometheus's terms, and the exposition text a scrape gets.
//!
//! The loop updates one [`Metrics`] (shared behind an `Arc`; every metric is atomic), and
//! the [`exposition`] server encodes it on each `GET /metrics`:
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `threadbalance_managed_processes` | gauge | | processes under a policy now |
//! | `threadbalance_managed_threads` | gauge | | their threads |
//! | `threadbalance_managed_groups` | gauge | | policy instances over them (processes sharing CPUs under one policy and level are one group) |
//! | `threadbalance_group_processes` | gauge | `group`, `policy` | processes in each group |
//! | `threadbalance_moves_total` | counter | `reason` | threads moved, by the policy's reason (`speed-rotate`, `regroup`, …) |
//! | `threadbalance_domain_utilization_ratio` | gauge | `domain` | busy share of a domain's CPUs over the last window, 0 to 1 (`node0`, `package1`) |
//! | `threadbalance_policy_decisions_total` | counter | `policy` | decisions taken (ticks of a policy) |
//! | `threadbalance_cpu_seconds_total` | counter | | CPU time the daemon itself used |
//! | `threadbalance_restore_failures_total` | counter | | masks that could not be put back |
//!
//! Two formats of the same samples, as Prometheus's own clients do: OpenMetrics 1.0 (what
//! prometheus-client writes, and what Prometheus asks for first) and the older text format
//! 0.0.4 for any other client (`curl`, `promtool check metrics`, which lints a counter's
//! `# HELP` under its `_total` name):
//!
//! ```
//! use threadbalance_daemon::metrics::Metrics;
//! let m = Metrics::new();
//! m.record_move("speed-rotate");
//! m.record_move("speed-rotate");
//! m.set_domain_utilization("node0", 0.75);
//! let text = m.encode().unwrap();
//! assert!(text.contains("threadbalance_moves_total{reason=\"speed-rotate\"} 2\n"));
//! assert!(text.contains("threadbalance_domain_utilization_ratio{domain=\"node0\"} 0.75\n"));
//! assert!(text.ends_with("# EOF\n"));
//! ```

pub mod exposition;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::AtomicU64;
use threadbalance_model::{Level, Reason};

/// The content type of [`Metrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of [`Metrics::encode_text`]'s text.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DomainLabel {
    domain: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabel {
    group: String,
    policy: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabel {
    policy: String,
}

/// The daemon's metrics. Cheap to update from any thread.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    managed_processes: Gauge,
    managed_threads: Gauge,
    managed_groups: Gauge,
    group_processes: Family<GroupLabel, Gauge>,
    moves: Family<ReasonLabel, Counter>,
    domain_utilization: Family<DomainLabel, Gauge<f64, AtomicU64>>,
    decisions: Family<PolicyLabel, Counter>,
    cpu_seconds: Counter<f64, AtomicU64>,
    restore_failures: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// All metrics at zero, registered under the `threadbalance_` prefix.
    pub fn new() -> Metrics {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("threadbalance");
        let m = Metrics {
            registry: Registry::default(),
            managed_processes: Gauge::default(),
            managed_threads: Gauge::default(),
            managed_groups: Gauge::default(),
            group_processes: Family::default(),
            moves: Family::default(),
            domain_utilization: Family::default(),
            decisions: Family::default(),
            cpu_seconds: Counter::default(),
            restore_failures: Counter::default(),
        };
        registry.register(
            "managed_processes",
            "Processes under a policy now",
            m.managed_processes.clone(),
        );
        registry.register(
            "managed_threads",
            "Threads of the managed processes",
            m.managed_threads.clone(),
        );
        registry.register(
            "managed_groups",
            "Policy instances, each over the managed processes that share CPUs",
            m.managed_groups.clone(),
        );
        registry.register(
            "group_processes",
            "Managed processes in each group",
            m.group_processes.clone(),
        );
        registry.register(
            "moves",
            "Threads moved, by the policy's reason",
            m.moves.clone(),
        );
        registry.register_with_unit(
            "domain_utilization",
            "Busy share of a domain's CPUs over the last window",
            Unit::Other("ratio".into()),
            m.domain_utilization.clone(),
        );
        registry.register(
            "policy_decisions",
            "Decisions taken by the policies",
            m.decisions.clone(),
        );
        registry.register_with_unit(
            "cpu",
            "CPU time used by the daemon itself",
            Unit::Seconds,
            m.cpu_seconds.clone(),
        );
        registry.register(
            "restore_failures",
            "Affinity masks that could not be restored",
            m.restore_failures.clone(),
        );
        Metrics {
            registry: root,
            ..m
        }
    }

    /// Sets the numbers of managed processes and of their threads.
    pub fn set_managed(&self, processes: u64, threads: u64) {
        self.managed_processes.set(clamp_i64(processes));
        self.managed_threads.set(clamp_i64(threads));
    }

    /// Sets the groups: each group's number, policy and number of processes (groups gone
    /// since the last call are dropped).
    pub fn set_groups<'a>(&self, groups: impl Iterator<Item = (u64, &'a str, u64)>) {
        self.group_processes.clear();
        let mut n = 0;
        for (id, policy, processes) in groups {
            n += 1;
            self.group_processes
                .get_or_create(&GroupLabel {
                    group: id.to_string(),
                    policy: policy.to_string(),
                })
                .set(clamp_i64(processes));
        }
        self.managed_groups.set(n);
    }

    /// Counts one move with its reason's name (see [`reason_name`]).
    pub fn record_move(&self, reason: &str) {
        self.moves
            .get_or_create(&ReasonLabel {
                reason: reason.to_string(),
            })
            .inc();
    }

    /// Sets a domain's utilization, a ratio from 0 to 1 (values outside are clamped).
    pub fn set_domain_utilization(&self, domain: &str, ratio: f64) {
        let ratio = if ratio.is_nan() {
            0.0
        } else {
            ratio.clamp(0.0, 1.0)
        };
        self.domain_utilization
            .get_or_create(&DomainLabel {
                domain: domain.to_string(),
            })
            .set(ratio);
    }

    /// Drops every domain's utilization (after a reload changes the domains).
    pub fn clear_domains(&self) {
        self.domain_utilization.clear();
    }

    /// Counts one decision of `policy`.
    pub fn record_decision(&self, policy: &str) {
        self.decisions
            .get_or_create(&PolicyLabel {
                policy: policy.to_string(),
            })
            .inc();
    }

    /// Sets the daemon's own CPU time so far, in seconds (a counter: a smaller value than
    /// the last one is ignored).
    pub fn set_own_cpu_seconds(&self, total: f64) {
        let now = self.cpu_seconds.get();
        if total > now {
            self.cpu_seconds.inc_by(total - now);
        }
    }

    /// Counts masks that could not be restored.
    pub fn record_restore_failures(&self, n: u64) {
        self.restore_failures.inc_by(n);
    }

    /// The exposition text in the text format 0.0.4 (see [`to_text_format`]).
    pub fn encode_text(&self) -> Result<String, std::fmt::Error> {
        Ok(to_text_format(&self.encode()?))
    }

    /// The exposition text (OpenMetrics, ending with `# EOF`).
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// OpenMetrics text made into the text format 0.0.4: a counter's `# HELP` and `# TYPE`
/// name its samples' `_total` name, and the `# UNIT` and `# EOF` lines go (the samples
/// themselves are the same in both).
///
/// ```
/// use threadbalance_daemon::metrics::to_text_format;
/// let om = [
///     "# HELP x_moves Moves.", "# TYPE x_moves counter", "x_moves_total 3",
///     "# HELP x_cpu_seconds CPU.", "# TYPE x_cpu_seconds counter",
///     "# UNIT x_cpu_seconds seconds", "x_cpu_seconds_total 1", "# EOF", "",
/// ].join("\n");
/// let text = [
///     "# HELP x_moves_total Moves.", "# TYPE x_moves_total counter", "x_moves_total 3",
///     "# HELP x_cpu_seconds_total CPU.", "# TYPE x_cpu_seconds_total counter",
///     "x_cpu_seconds_total 1", "",
/// ].join("\n");
/// assert_eq!(to_text_format(&om), text);
/// ```
pub fn to_text_format(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // A family's HELP line waits for its TYPE line, which says whether it is a counter.
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest);
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (family, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let name = if kind == "counter" && !family.ends_with("_total") {
                format!("{family}_total")
            } else {
                family.to_string()
            };
            if let Some(h) = help.take() {
                let text = h.split_once(' ').map_or("", |(_, t)| t);
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
        } else if line == "# EOF" || line.starts_with("# UNIT ") {
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn clamp_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The `domain` label of a domain: its level's name and its dense index (`node0`,
/// `package1`, `llc3`, `core12`), as the logs name a move's target too.
///
/// ```
/// use threadbalance_daemon::metrics::domain_label;
/// use threadbalance_model::Level;
/// assert_eq!(domain_label(Level::Node, 1), "node1");
/// assert_eq!(domain_label(Level::Llc, 0), "llc0");
/// ```
pub fn domain_label(level: Level, index: usize) -> String {
    let name = match level {
        Level::Package => "package",
        Level::Node => "node",
        Level::Llc => "llc",
        Level::Core => "core",
        Level::Cpu => "cpu",
    };
    format!("{name}{index}")
}

/// The CPU time this process has used so far (user and system), in seconds, for
/// [`Metrics::set_own_cpu_seconds`].
pub fn own_cpu_seconds() -> Result<f64, nix::Error> {
    use nix::sys::resource::{UsageWho, getrusage};
    let usage = getrusage(UsageWho::RUSAGE_SELF)?;
    let seconds = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Ok(seconds(usage.user_time()) + seconds(usage.system_time()))
}

/// The short name of a move's reason, as the `reason` label and the logs use it: the
/// kebab-case kind of [`Reason`] (`speed-rotate`, `regroup`, `numa-balance`, …).
///
/// ```
/// use threadbalance_daemon::metrics::reason_name;
/// use threadbalance_model::{Level, Reason};
/// assert_eq!(reason_name(&Reason::SpeedRotate { lead_ms: 3.0 }), "speed-rotate");
/// assert_eq!(reason_name(&Reason::Initial), "initial");
/// ```
pub fn reason_name(reason: &Reason) -> String {
    // The serialized form carries the kind as the tag, so a reason added to the model
    // later gets its name here without a change.
    match serde_json::to_value(reason) {
        Ok(serde_json::Value::Object(o)) => match o.get("kind") {
            Some(serde_json::Value::String(k)) => k.clone(),
            _ => "unknown".into(),
        },
        _ => "unknown".into(),
    }
}

#[cfg(test)]
mod tests;
