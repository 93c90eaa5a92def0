//! The building blocks of `threadbalance daemon`: the operator's config, which processes
//! it manages, which CPUs it leaves alone, and what else on the machine competes with it.
//!
//! A daemon for a whole machine decides, every sampling window, which processes to manage
//! and how. Everything that decides is a pure function over values; the one module that
//! reads files is [`read`], and the control socket, the metrics endpoint and the log are
//! shells around pure parts ([`control::parse_request`], [`metrics::Metrics`]):
//!
//! ```text
//!   threadbalance.toml ──read_config──► Config ─────────────┐  (config: validated once;
//!                                       │ daemon  rules     │   reload keeps the old one
//!   /proc/<pid>/… ──read_process──► ProcessReading ×2       │   when the new is bad)
//!                        facts_between ──► ProcessFacts ──► match_process ──► Decision
//!   /proc/cmdline, /sys/…/isolated ──read_kernel_bans──► KernelBans ──► usable_cpus
//!   sched_ext, numad, numa_balancing, cpusets ──read_competitors──► [Competitor] (warnings)
//! ```
//!
//! | module | what | I/O |
//! |---|---|---|
//! | [`config`] | `threadbalance.toml` → [`Config`], one-line [`ConfigError`]s, [`Config::reload`] | none |
//! | [`rule`] | rules, [`match_process`]: first match wins, default hands-off | none |
//! | [`process`] | [`ProcessFacts`] from two readings; `/proc` text parsers | none |
//! | [`allowed`] | a managed process's CPUs changed by its cpuset or by masks set outside the daemon ([`allowed::observe`]) | none |
//! | [`banned`] | `isolcpus=` / `nohz_full=` and the usable CPUs | none |
//! | [`competitor`] | sched_ext, numad, NUMA balancing, cpuset changes | none |
//! | [`group`] | which managed processes share one policy instance ([`group::form`]) | none |
//! | [`read`] | files under a [`read::Root`] → the values above | all of it |
//! | [`control`] | the control socket's JSON lines, [`control::Control`], [`control::parse_request`] | none |
//! | [`control::socket`] | the Unix socket server (0600, peer uid checked) and `ctl`'s client | the socket |
//! | [`control::channel`] | a [`control::Control`] that hands requests to the loop's thread | none |
//! | [`metrics`] | the Prometheus registry [`metrics::Metrics`] | none |
//! | [`metrics::exposition`] | `GET /metrics` on a loopback port | the port |
//! | [`log`] | `tracing` to stderr, one line per event, [`log::log_move`] | stderr |
//! | [`serve`] | the daemon's loop over a [`serve::DaemonHost`]: windows, groups, `ctl`, reload, hand-back | through the host |
//! | [`error`] | [`ConfigError`], [`ReadError`], [`ReloadError`], and [`error::Chain`] to print one with its sources | none |
//!
//! ```
//! use threadbalance_daemon::{Config, Decision, ProcessFacts, match_process};
//! let config = Config::parse("threadbalance.toml", r#"
//!     [[rule]]
//!     name = "databases"
//!     comm = "^(postgres|mysqld)$"
//!     hands_off = true
//!
//!     [[rule]]
//!     name = "busy"
//!     min_busy_threads = 2
//!     policy = "speed"
//! "#).unwrap();
//! let mut pg = ProcessFacts::example("postgres");
//! pg.busy_threads = 8;
//! // Busy, but the first rule that matches wins: the databases are left alone.
//! assert!(matches!(match_process(&config.rules, &pg), Decision::HandsOff(_)));
//! let mut make = ProcessFacts::example("cc1plus");
//! make.busy_threads = 2;
//! match match_process(&config.rules, &make) {
//!     Decision::Manage { rule, placement } => {
//!         assert_eq!((rule.name.as_str(), placement.policy_name()), ("busy", "speed"));
//!     }
//!     other => panic!("{other:?}"),
//! }
//! ```
#![forbid(unsafe_code)]

pub mod allowed;
pub mod banned;
pub mod competitor;
pub mod config;
pub mod control;
pub mod error;
pub mod group;
pub mod log;
pub mod metrics;
pub mod process;
pub mod read;
pub mod rule;
pub mod serve;

pub use config::{Config, DaemonSettings};
pub use error::{ConfigError, ParseError, ReadError, ReloadError};
pub use process::ProcessFacts;
pub use rule::{Decision, HandsOff, Rules, match_process};
