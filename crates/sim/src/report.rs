//! What a run measured, and policies side by side: a table, JSON and an SVG report.
//!
//! | metric | meaning | where it comes from |
//! |---|---|---|
//! | `runtime_s` | time until the last thread exited | simulated clock |
//! | `speedup_vs_none` | runtime under `none` / runtime under the policy | two runs, same seed |
//! | `socket_util` | busy fraction of each socket's CPUs over the run | CPU segments |
//! | `socket_util_cv` | σ/μ of `socket_util` (Tumbler Table II's spread) | derived |
//! | `cross_socket_handoff_frac` | lock acquisitions whose previous holder ran on another socket, over all hand-offs | lock model |
//! | `lock_time_frac` | time threads slept on user-level locks and condition variables (a mutex's sleep queue; a barrier's or queue's condition variable), over their lifetimes: Solaris `LCK`, the papers' lock time; not spinning, not `pthread_join`, not timed sleeps | lock model |
//! | `sync_wait_frac` | every wait for a mutex, barrier, queue or join, spinning included, over thread lifetimes (what the model counted as lock time before) | lock model |
//! | `remote_access_frac` | memory-bound work done on pages of another node, over all memory-bound work | first touch + placement + NUMA balancing |
//! | `run_wait_frac` | time threads waited on a run queue for a CPU, over their lifetimes (schedstat's wait) | scheduler |
//! | `page_migrations` | 4 KiB pages moved by automatic NUMA balancing | [`crate::autonuma`] |
//! | `migrations` | changes of a thread's CPU (wake-up placement, balancing, affinity) | scheduler |

use crate::run::{Sim, St, TimelinePoint};
use serde::Serialize;
use serde_json::{Value, json};
use std::fmt::Write as _;
use threadbalance_model::{Nanos, PolicySummary, coefficient_of_variation};

/// What one run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    /// Policy name.
    pub policy: String,
    /// Seed of the run.
    pub seed: u64,
    /// Time until the last thread exited (or the horizon), seconds.
    pub runtime_s: f64,
    /// Each application's runtime, seconds.
    pub app_runtime_s: Vec<(String, f64)>,
    /// Whether every thread exited before the horizon.
    pub finished: bool,
    /// Busy fraction of each socket over the run.
    pub socket_util: Vec<f64>,
    /// Coefficient of variation of `socket_util`.
    pub socket_util_cv: f64,
    /// Lock acquisitions that followed another acquisition.
    pub lock_handoffs: u64,
    /// Fraction of hand-offs whose previous holder ran on another socket.
    pub cross_socket_handoff_frac: f64,
    /// Fraction of thread lifetime asleep on user-level locks and condition variables
    /// (Solaris `LCK`).
    pub lock_time_frac: f64,
    /// Fraction of thread lifetime in any wait for a mutex, barrier, queue or join,
    /// spinning included.
    pub sync_wait_frac: f64,
    /// Fraction of memory-bound work done on remote pages.
    pub remote_access_frac: f64,
    /// Fraction of thread lifetime spent runnable but waiting for a CPU.
    pub run_wait_frac: f64,
    /// Pages moved by automatic NUMA balancing.
    pub page_migrations: u64,
    /// Thread migrations between CPUs.
    pub migrations: u64,
    /// Of those, migrations between sockets.
    pub cross_socket_migrations: u64,
    /// Policy ticks taken.
    pub policy_ticks: u64,
    /// CPU seconds the tool's own thread ran on the machine (`RunOptions::tool_cpu`; 0
    /// when free, and under `none`). Its migrations are not in `migrations`.
    pub tool_cpu_s: f64,
    /// Events handled.
    pub events: u64,
    /// CPU seconds each thread received, in thread order.
    pub thread_cpu_s: Vec<f64>,
    /// Migrations of each thread, in thread order.
    pub thread_migrations: Vec<u64>,
    /// Per-socket utilization and migrations over time.
    pub timeline: Vec<TimelinePoint>,
    /// The policy's own account, typed.
    pub policy_summary: PolicySummary,
    /// When each thread reached each barrier, when the run logged it
    /// (`RunOptions::phases`; empty otherwise). Not in the JSON: `sim --phases` writes it.
    #[serde(skip)]
    pub phases: Vec<crate::phases::PhaseArrival>,
}

impl RunResult {
    pub(crate) fn measure(
        sim: &Sim,
        policy: &str,
        seed: u64,
        ticks: u64,
        policy_summary: PolicySummary,
    ) -> RunResult {
        let end = sim.world.now.max(Nanos(1));
        let finished = sim.user.live == 0;
        // The tool's own thread and its application (`RunOptions::tool_cpu`) come after the
        // programs' and are not measured with them; the CPUs' busy time includes it.
        let (programs, apps) = (sim.program_threads(), sim.program_apps());
        let app_runtime_s = sim.user.apps[..apps]
            .iter()
            .map(|a| (a.name.clone(), a.finished_at.unwrap_or(end).as_secs_f64()))
            .collect();
        let mut busy = vec![Nanos::ZERO; sim.world.hw.npkg];
        let mut ncpu = vec![0u64; sim.world.hw.npkg];
        for (c, cpu) in sim.user.cpus.iter().enumerate() {
            let p = sim.world.hw.pkg[c] as usize;
            busy[p] += cpu.busy_ns;
            ncpu[p] += 1;
        }
        let socket_util: Vec<f64> = busy
            .iter()
            .zip(&ncpu)
            .map(|(&b, &n)| b.0 as f64 / (end.0 as f64 * n.max(1) as f64))
            .collect();
        let (handoffs, cross) = sim
            .user
            .locks
            .iter()
            .fold((0, 0), |(h, x), l| (h + l.handoffs, x + l.cross));
        let (mut lock, mut sync, mut life, mut wait) =
            (Nanos::ZERO, Nanos::ZERO, Nanos::ZERO, Nanos::ZERO);
        for th in &sim.world.th[..programs] {
            if th.st == St::New {
                continue;
            }
            let died = if th.st == St::Done { th.died } else { end };
            life += died.saturating_sub(th.born);
            lock += th.lck_ns;
            sync += th.lock_ns;
            wait += th.wait;
        }
        let frac = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        let tool_migrations: u64 = sim.world.th[programs..].iter().map(|t| t.migrations).sum();
        RunResult {
            policy: policy.to_string(),
            seed,
            runtime_s: end.as_secs_f64(),
            app_runtime_s,
            finished,
            socket_util_cv: coefficient_of_variation(&socket_util),
            socket_util,
            lock_handoffs: handoffs,
            cross_socket_handoff_frac: frac(cross as f64, handoffs as f64),
            lock_time_frac: frac(lock.0 as f64, life.0 as f64),
            sync_wait_frac: frac(sync.0 as f64, life.0 as f64),
            remote_access_frac: frac(sim.world.stats.mem_remote, sim.world.stats.mem_total),
            run_wait_frac: frac(wait.0 as f64, life.0 as f64),
            page_migrations: sim.world.stats.page_migrations,
            migrations: sim.world.stats.migrations - tool_migrations,
            cross_socket_migrations: sim.world.stats.cross_migrations,
            policy_ticks: ticks,
            tool_cpu_s: sim.tool_cpu().1.as_secs_f64(),
            events: sim.world.stats.events,
            // A thread still running at the horizon has an open segment: count it.
            thread_cpu_s: sim.world.th[..programs]
                .iter()
                .map(|t| {
                    let open = if t.st == St::Running {
                        end.saturating_sub(sim.user.cpus[t.cpu.ix()].seg_start)
                    } else {
                        Nanos::ZERO
                    };
                    (t.run + open).as_secs_f64()
                })
                .collect(),
            thread_migrations: sim.world.th[..programs]
                .iter()
                .map(|t| t.migrations)
                .collect(),
            timeline: sim.timeline.clone(),
            policy_summary,
            phases: sim
                .user
                .phases
                .as_ref()
                .map_or_else(Vec::new, |p| p.rows.clone()),
        }
    }
}

/// Several policies run on the same machine, workload and seed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Machine name.
    pub machine: String,
    /// Machine description (`4 packages, …`).
    pub topology: String,
    /// Workload name.
    pub workload: String,
    /// Threads in the workload.
    pub threads: usize,
    /// Seed.
    pub seed: u64,
    /// The `none` run every speedup is relative to.
    pub baseline: RunResult,
    /// One run per requested policy, in the order requested.
    pub results: Vec<RunResult>,
}

fn round(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

impl Comparison {
    /// Runtime under `none` over runtime under `r`.
    pub fn speedup(&self, r: &RunResult) -> f64 {
        if r.runtime_s > 0.0 {
            self.baseline.runtime_s / r.runtime_s
        } else {
            0.0
        }
    }

    /// Policies side by side, one row each.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "machine {} ({}), workload {} ({} threads), seed {}",
            self.machine, self.topology, self.workload, self.threads, self.seed
        );
        let header = [
            "policy",
            "runtime s",
            "speedup",
            "socket util %",
            "util CV",
            "x-socket hand-offs",
            "lock time",
            "remote mem",
            "migrations",
        ];
        let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| (*s).to_string()).collect()];
        for r in &self.results {
            let (lo, hi) = r
                .socket_util
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), &u| (a.min(u), b.max(u)));
            rows.push(vec![
                r.policy.clone(),
                format!("{:.3}{}", r.runtime_s, if r.finished { "" } else { "+" }),
                format!("{:.3}", self.speedup(r)),
                format!("{:.0}–{:.0}", lo * 100.0, hi * 100.0),
                format!("{:.3}", r.socket_util_cv),
                if r.lock_handoffs == 0 {
                    "-".into()
                } else {
                    format!("{:.1} %", r.cross_socket_handoff_frac * 100.0)
                },
                format!("{:.1} %", r.lock_time_frac * 100.0),
                format!("{:.1} %", r.remote_access_frac * 100.0),
                r.migrations.to_string(),
            ]);
        }
        let widths: Vec<usize> = (0..header.len())
            .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
            .collect();
        for (k, row) in rows.iter().enumerate() {
            let line: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (cell, &w))| {
                    let pad = w - cell.chars().count();
                    if i == 0 {
                        format!("{cell}{}", " ".repeat(pad))
                    } else {
                        format!("{}{cell}", " ".repeat(pad))
                    }
                })
                .collect();
            let _ = writeln!(out, "{}", line.join("  "));
            if k == 0 {
                let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
                let _ = writeln!(out, "{}", "-".repeat(total));
            }
        }
        if self.results.iter().any(|r| !r.finished) {
            let _ = writeln!(out, "+ stopped at the horizon before every thread exited");
        }
        out
    }

    /// One JSON object with a `results` array, one entry per policy.
    pub fn to_json(&self) -> Value {
        let results: Vec<Value> = self
            .results
            .iter()
            .map(|r| {
                json!({
                    "policy": r.policy,
                    "runtime_s": round(r.runtime_s),
                    "speedup_vs_none": round(self.speedup(r)),
                    "finished": r.finished,
                    "socket_util": r.socket_util.iter().map(|&u| round(u)).collect::<Vec<_>>(),
                    "socket_util_cv": round(r.socket_util_cv),
                    "lock_handoffs": r.lock_handoffs,
                    "cross_socket_handoff_frac": round(r.cross_socket_handoff_frac),
                    "lock_time_frac": round(r.lock_time_frac),
                    "sync_wait_frac": round(r.sync_wait_frac),
                    "remote_access_frac": round(r.remote_access_frac),
                    "run_wait_frac": round(r.run_wait_frac),
                    "page_migrations": r.page_migrations,
                    "migrations": r.migrations,
                    "cross_socket_migrations": r.cross_socket_migrations,
                    "app_runtime_s": r.app_runtime_s.iter().map(|(n, s)| json!({"app": n, "runtime_s": round(*s)})).collect::<Vec<_>>(),
                    "policy_ticks": r.policy_ticks,
                    "policy_summary": r.policy_summary,
                    "events": r.events,
                })
            })
            .zip(&self.results)
            .map(|(mut v, r)| {
                // Only where the tool's thread ran, so that runs without it read as before.
                if r.tool_cpu_s > 0.0
                    && let Some(o) = v.as_object_mut()
                {
                    o.insert("tool_cpu_s".into(), round(r.tool_cpu_s).into());
                }
                v
            })
            .collect();
        json!({
            "machine": self.machine,
            "topology": self.topology,
            "workload": self.workload,
            "threads": self.threads,
            "seed": self.seed,
            "results": results,
        })
    }

    /// Per-socket utilization over time, one panel per policy on one scale; then moves
    /// per second and, when the workload does memory-bound work, the share of it done on
    /// remote pages, one line per policy (see [`crate::plot`]).
    pub fn to_svg(&self) -> String {
        use crate::plot::{Panel, Series, timeline_svg};
        let t_max = self
            .results
            .iter()
            .map(|r| r.runtime_s)
            .fold(1e-9, f64::max);
        let mut panels: Vec<Panel> = self
            .results
            .iter()
            .map(|r| {
                let sockets = r.timeline.first().map_or(0, |p| p.socket_util.len());
                Panel {
                    title: format!(
                        "{}: {:.3} s, speedup {:.3}, utilization CV {:.3}",
                        r.policy,
                        r.runtime_s,
                        self.speedup(r),
                        r.socket_util_cv
                    ),
                    y_desc: "socket utilization (%)".into(),
                    y_range: (0.0, 100.0),
                    series: (0..sockets)
                        .map(|k| Series {
                            name: format!("socket {k}"),
                            points: r
                                .timeline
                                .iter()
                                .map(|p| {
                                    (p.t_s, 100.0 * p.socket_util.get(k).copied().unwrap_or(0.0))
                                })
                                .collect(),
                        })
                        .collect(),
                }
            })
            .collect();
        let per_s = |r: &RunResult| -> Vec<(f64, f64)> {
            let mut prev = 0.0;
            r.timeline
                .iter()
                .map(|p| {
                    let dt = (p.t_s - prev).max(1e-9);
                    prev = p.t_s;
                    (p.t_s, p.migrations as f64 / dt)
                })
                .collect()
        };
        let moves: Vec<Series> = self
            .results
            .iter()
            .map(|r| Series {
                name: r.policy.clone(),
                points: per_s(r),
            })
            .collect();
        let top = moves
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(1.0, f64::max);
        panels.push(Panel {
            title: "thread migrations between CPUs (all policies, one scale)".into(),
            y_desc: "migrations (per s)".into(),
            y_range: (0.0, top * 1.05),
            series: moves,
        });
        if self.results.iter().any(|r| r.remote_access_frac > 0.0) {
            panels.push(Panel {
                title: "memory-bound work on remote pages (all policies, one scale)".into(),
                y_desc: "remote accesses (%)".into(),
                y_range: (0.0, 100.0),
                series: self
                    .results
                    .iter()
                    .map(|r| Series {
                        name: r.policy.clone(),
                        points: r
                            .timeline
                            .iter()
                            .map(|p| (p.t_s, 100.0 * p.remote_frac))
                            .collect(),
                    })
                    .collect(),
            });
        }
        timeline_svg(
            &format!("{} on {} ({})", self.workload, self.machine, self.topology),
            t_max,
            &panels,
        )
    }
}
