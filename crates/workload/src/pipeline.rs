//! `pipeline`: stages connected by bounded queues, each stage a pool of threads that take
//! an item, compute its per-item cost, and pass it on.
//!
//! The default is ferret's profile (Tumbler, Table I): load → segment → extract → vector →
//! rank → out, where the intermediate stages' mean CPU utilizations are 2 %, 1 %, 11 % and
//! 36 %: per-item costs in those proportions (100, 50, 550, 1800 µs), single-threaded
//! load and out stages of 20 µs, and a pool of `--pool` threads per intermediate stage.
//!
//! Fair share: the cores' total work / C and the slowest stage's work / its thread count
//! both bound the wall time; the larger is reported.

use crate::{Score, WorkloadError, compute, us_to_ns};
use serde::Serialize;
use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

/// One pipeline stage: `name:threads:cost_us` on the command line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageSpec {
    /// Its name.
    pub name: String,
    /// Threads in its pool.
    pub threads: u32,
    /// CPU time per item, in µs.
    pub cost_us: f64,
}

/// A `--stage` that is not `name:threads:cost_us`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadStage {
    /// Not three fields.
    #[error("{0:?} is not name:threads:cost_us")]
    Shape(String),
    /// The thread count is not a number.
    #[error("{0:?} is not a thread count")]
    Threads(String),
    /// The cost is not a number.
    #[error("{0:?} is not a cost in µs")]
    Cost(String),
    /// No thread, or a negative cost.
    #[error("{0:?}: threads must be ≥ 1 and cost ≥ 0")]
    Range(String),
}

impl FromStr for StageSpec {
    type Err = BadStage;
    fn from_str(s: &str) -> Result<StageSpec, BadStage> {
        let mut parts = s.split(':');
        let (Some(name), Some(t), Some(c), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(BadStage::Shape(s.into()));
        };
        let threads: u32 = t.parse().map_err(|_| BadStage::Threads(t.into()))?;
        let cost_us: f64 = c.parse().map_err(|_| BadStage::Cost(c.into()))?;
        if threads == 0 || cost_us.is_nan() || cost_us < 0.0 {
            return Err(BadStage::Range(s.into()));
        }
        Ok(StageSpec {
            name: name.to_string(),
            threads,
            cost_us,
        })
    }
}

/// Options of `workload pipeline`.
#[derive(Debug, Clone, PartialEq, Serialize, clap::Args)]
pub struct PipelineOpts {
    /// Items pushed through the pipeline.
    #[arg(long, default_value_t = 1000)]
    pub items: u32,
    /// Threads per intermediate stage of the default (ferret) profile.
    #[arg(long, default_value_t = 2)]
    pub pool: u32,
    /// Capacity of each queue between stages.
    #[arg(long, default_value_t = 16)]
    pub queue: u32,
    /// A stage as name:threads:cost_us, repeated in pipeline order; replaces the ferret
    /// profile.
    #[arg(long = "stage")]
    pub stages: Vec<StageSpec>,
}

impl PipelineOpts {
    /// The stages to run: `--stage`s, or ferret's profile with `--pool` threads per
    /// intermediate stage.
    pub fn resolved_stages(&self) -> Vec<StageSpec> {
        if !self.stages.is_empty() {
            return self.stages.clone();
        }
        let st = |name: &str, threads, cost_us| StageSpec {
            name: name.to_string(),
            threads,
            cost_us,
        };
        let n = self.pool.max(1);
        vec![
            st("load", 1, 20.0),
            st("segment", n, 100.0),
            st("extract", n, 50.0),
            st("vector", n, 550.0),
            st("rank", n, 1800.0),
            st("out", 1, 20.0),
        ]
    }
}

/// What a stage thread reads from and writes to.
struct Link {
    input: Option<Arc<Mutex<Receiver<u32>>>>,
    output: Option<SyncSender<u32>>,
    cost_ns: u64,
}

pub(crate) fn run(o: &PipelineOpts) -> Result<Score, WorkloadError> {
    let stages = o.resolved_stages();
    if stages.is_empty() || o.items == 0 {
        return Err(WorkloadError::Invalid {
            scenario: "pipeline",
            why: "needs at least one stage and one item".into(),
        });
    }
    // Queue i feeds stage i + 1.
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 1..stages.len() {
        let (tx, rx) = sync_channel::<u32>(o.queue.max(1) as usize);
        senders.push(tx);
        receivers.push(Arc::new(Mutex::new(rx)));
    }
    // One Link per thread, in stage order; each thread owns its clone of its output sender,
    // so a stage's queue closes when the last of its threads finishes.
    let mut links: Vec<Mutex<Option<Link>>> = Vec::new();
    for (i, s) in stages.iter().enumerate() {
        for _ in 0..s.threads {
            links.push(Mutex::new(Some(Link {
                input: i.checked_sub(1).map(|p| Arc::clone(&receivers[p])),
                output: senders.get(i).cloned(),
                cost_ns: us_to_ns(s.cost_us),
            })));
        }
    }
    drop(senders);
    drop(receivers);
    let items = o.items;
    // The first stage's threads share out the items to issue.
    let issued = AtomicU32::new(0);
    let (work, wall) = crate::run_threads("pipeline", links.len(), |t| {
        let link = links[t].lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(link) = link else { return 0.0 };
        let mut handled = 0u64;
        loop {
            let item = match &link.input {
                None => match issued.fetch_add(1, Ordering::Relaxed) {
                    i if i < items => i,
                    _ => break,
                },
                Some(rx) => match rx.lock().unwrap_or_else(|p| p.into_inner()).recv() {
                    Ok(item) => item,
                    Err(_) => break,
                },
            };
            compute::burn_cpu_ns(link.cost_ns);
            handled += 1;
            if let Some(tx) = &link.output
                && tx.send(item).is_err()
            {
                break;
            }
        }
        handled as f64 * link.cost_ns as f64 / 1e9
    })?;
    let params = serde_json::to_value(o).unwrap_or_default();
    let mut score = Score::new("pipeline", params, wall, &work);
    let slowest = stages
        .iter()
        .map(|s| f64::from(items) * s.cost_us / 1e6 / f64::from(s.threads))
        .fold(0.0, f64::max);
    let fair = (score.work_s / score.cores as f64).max(slowest);
    score.items_per_s = Some(f64::from(items) / wall.max(1e-9));
    Ok(score.with_fair_share(fair))
}
