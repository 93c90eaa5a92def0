//! DINO, the papers' last baseline: the rows of Tumbler's Table VI (and Shuffling's
//! Table 2) whose programs the simulator models, each run under `none` (the papers'
//! Solaris), `dino` and `tumbler`, 64 threads on the 4 × 16-core Opteron.
//!
//! The papers' ranking is judged by size as every claim is: Tumbler (and Shuffling) ahead
//! of DINO on each row, DINO ahead of the OS on the memory-intensive programs with little
//! lock contention, behind it on average. Ferret's and bodytrack's rows run in their own
//! groups (`tumbler_ferret`, `shuffling_bodytrack`), which hand their DINO results here
//! through [`DinoRow`] for the average.

use super::{Ctx, Runs, opteron};
use crate::scheduler::Baseline;
use crate::verdict::{Claim, Effect};
use crate::workload;

/// One program's DINO result, for the average over the rows.
#[derive(Debug, Clone)]
pub(super) struct DinoRow {
    /// The papers' short name (`SC`).
    pub name: &'static str,
    /// DINO's change over Solaris in Table VI, %.
    pub paper: f64,
    /// DINO's simulated change over `none`, %.
    pub simulated: f64,
}

/// A Table VI row the simulator models: short name, workload, Tumbler's and DINO's
/// changes over Solaris (%), and whether the papers count it among the memory-intensive
/// programs with little lock contention where DINO beats the OS (Tumbler §5.2: PB, FA,
/// RX, KM and SC; PBZIP2 and kmeans are not modeled).
type Row = (&'static str, &'static str, f64, f64, bool);

/// The rows (Tumbler Table VI: Tumbler, DINO columns), each program's input scaled so
/// that it runs about 10 s under the OS, as the papers' programs did (both exclude
/// programs that run less than 10 s): at its default input each runs 0.5–1.3 s, about one
/// DINO interval.
pub(super) const ROWS: [Row; 6] = [
    ("SC", "streamcluster:phases=2900", 27.8, 6.0, true),
    (
        "FA",
        "parsec-mix:only=fluidanimate,scale=14",
        6.8,
        2.1,
        true,
    ),
    (
        "RX",
        "parsec-mix:only=splash2x.radix,scale=10",
        11.1,
        5.0,
        true,
    ),
    ("FS", "parsec-mix:only=facesim,scale=17", 11.3, -13.2, false),
    (
        "RT",
        "parsec-mix:only=splash2x.raytrace,scale=12",
        19.2,
        -10.9,
        false,
    ),
    (
        "VL",
        "parsec-mix:only=splash2x.volrend,scale=29",
        19.0,
        -7.0,
        false,
    ),
];

/// Why DINO's rows come out as they do (worked out on the Solaris baseline, seeds 1–3).
const WHY_DINO: &str = "every thread of a modeled program runs the same code on the same data, so all read the same MPKI and fall into one class (all devils, 7–25 MPKI on this machine: 30–70 % memory-bound work); DINO deals them evenly over the four LLCs, which is where the OS already runs them (64 workers on 64 cores, the main thread asleep in join), confines each where it runs and never moves one again. Streamcluster, fluidanimate, facesim and radix then run exactly as under the OS: they declare no LLC working set beyond a core's share (their cache footprints, at most 1 MiB, fit a core's 1 MiB share of the LLC), so the model has no shared-cache contention for DINO to relieve, and equal streams per node leave the memory bandwidth as it was (radix's sockets stay as unevenly used as under the OS, 28–76 %, its threads waiting on remote pages). Raytrace and volrend, whose task queues leave sockets unevenly used under the OS, come out about 1 % faster confined, as under Tumbler. The one larger effect is confinement itself: bodytrack runs about 9 % faster with its workers held in their LLCs (the Solaris model's idle CPUs steal threads from any socket, which pbind's row shows costs it), the opposite of the paper's −5 %. The papers' gains and losses for DINO come from differences between threads and from lock hand-offs between sockets that these modeled programs do not show";

/// A paper claim of DINO's rows, with [`WHY_DINO`] as its reason (noted when the claim
/// runs on another kernel than the one the reason was worked out on).
fn judge(
    cx: &mut Ctx,
    claim: &str,
    paper: &str,
    simulated: String,
    direction: bool,
    effects: Vec<Effect>,
) {
    let why = if cx.baseline() == Baseline::Solaris {
        WHY_DINO.to_string()
    } else {
        format!("{WHY_DINO} [reason worked out on the solaris baseline; its figures are solaris's]")
    };
    cx.push(Claim::paper(
        claim, paper, simulated, direction, effects, &why, &why,
    ));
}

/// The speed change of `runs` over `none`, %.
fn change(none: &Runs, runs: &Runs) -> f64 {
    let r = runs.runtime();
    if r > 0.0 {
        (none.runtime() / r - 1.0) * 100.0
    } else {
        0.0
    }
}

/// DINO's row for a program whose `none` and `leader` (Tumbler or Shuffling) runs are
/// already made: runs `dino`, judges "`leader` ahead of DINO" with both sizes, and keeps
/// the row for the average.
#[allow(clippy::too_many_arguments)]
pub(super) fn dino_row(
    cx: &mut Ctx,
    m: &crate::Machine,
    w: &crate::Workload,
    none: &Runs,
    leader: (&str, &Runs, f64),
    row: (&'static str, &str, f64),
) {
    let (lname, lruns, lpaper) = leader;
    let (name, program, dpaper) = row;
    let claim = format!("{program} ({name}), {lname} ahead of dino, both against the OS");
    let paper = format!("{lname} {lpaper:+.1} %, DINO {dpaper:+.1} % over Solaris");
    let Some(d) = cx.run(m, w, "dino", None) else {
        cx.missing(&claim, &paper, "dino");
        return;
    };
    let (dg, lg) = (change(none, &d), change(none, lruns));
    cx.dino_rows.push(DinoRow {
        name,
        paper: dpaper,
        simulated: dg,
    });
    judge(
        cx,
        &claim,
        &paper,
        format!("{lname} {lg:+.1} %, dino {dg:+.1} %"),
        lg > dg + 1.0,
        vec![
            Effect::new(
                &format!("{lname} speed change over none, %"),
                Some(lpaper),
                lg,
            ),
            Effect::new("dino speed change over none, %", Some(dpaper), dg),
        ],
    );
}

/// The rows of Table VI run here, then the two claims over all rows.
pub(super) fn dino_baseline(cx: &mut Ctx) {
    let Some(m) = opteron() else { return };
    let mut ahead = Vec::new();
    for (name, spec, tpaper, dpaper, memory) in ROWS {
        let Ok(w) = workload(spec, Some(64), None) else {
            continue;
        };
        let program = w.apps.first().map_or(spec, |a| a.name.as_str()).to_string();
        let Some(none) = cx.run(&m, &w, "none", None) else {
            continue;
        };
        let Some(t) = cx.run(&m, &w, "tumbler", None) else {
            cx.missing(&format!("{program} ({name}), dino"), "Table VI", "tumbler");
            continue;
        };
        let before = cx.dino_rows.len();
        dino_row(
            cx,
            &m,
            &w,
            &none,
            ("tumbler", &t, tpaper),
            (name, &program, dpaper),
        );
        if memory && let Some(r) = cx.dino_rows.get(before) {
            ahead.push(r.clone());
        }
    }
    if !ahead.is_empty() {
        let names: Vec<&str> = ahead.iter().map(|r| r.name).collect();
        let text: Vec<String> = ahead
            .iter()
            .map(|r| format!("{} {:+.1} %", r.name, r.simulated))
            .collect();
        judge(
            cx,
            &format!(
                "dino ahead of the OS (by ≥ 1 %) on the memory-intensive programs with little lock contention ({})",
                names.join(", ")
            ),
            "Tumbler §5.2 and Table VI, Shuffling Table 2: DINO beats Solaris on PB, FA, RX, KM and SC",
            text.join(", "),
            ahead.iter().all(|r| r.simulated >= 1.0),
            ahead
                .iter()
                .map(|r| {
                    Effect::new(
                        &format!("{} dino speed change over none, %", r.name),
                        Some(r.paper),
                        r.simulated,
                    )
                })
                .collect(),
        );
    }
    let rows = &cx.dino_rows;
    if rows.is_empty() {
        return;
    }
    let n = rows.len() as f64;
    let paper = rows.iter().map(|r| r.paper).sum::<f64>() / n;
    let sim = rows.iter().map(|r| r.simulated).sum::<f64>() / n;
    let names: Vec<&str> = rows.iter().map(|r| r.name).collect();
    judge(
        cx,
        &format!(
            "dino behind the OS on average over the rows run ({})",
            names.join(", ")
        ),
        &format!(
            "Tumbler §5.2, Shuffling §4.2: Solaris is better than DINO on average (these rows of Table VI: {paper:+.1} %)"
        ),
        format!("mean {sim:+.1} %"),
        sim < 0.0,
        vec![Effect::new(
            "mean dino speed change over none, %",
            Some(paper),
            sim,
        )],
    );
}
