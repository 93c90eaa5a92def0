//! A private measurement harness for the `speed` policy until the CLI's `run` lands:
//! `balance <policy> <workload-binary> <scenario args…>` starts the workload as a child,
//! drives the engine with a minimal `/proc` host until it exits, prints the child's score
//! line and then one line with the policy's summary and the harness's own CPU cost.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use nix::sched::{CpuSet as NixCpuSet, sched_setaffinity};
use nix::unistd::Pid as NixPid;
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::process::Command;
use std::time::{Duration, Instant};
use threadbalance_model::{
    ApplyReport, CpuId, CpuSet, Level, MoveOutcome, Nanos, Pid, Plan, Sample, Snapshot, Target,
    ThreadKey, ThreadState, Tid, Topology,
};
use threadbalance_policy::{Engine, Host, Settings, build};

struct Task {
    stat: File,
    schedstat: File,
    status: File,
}

struct ProcHost {
    pid: i32,
    origin: Instant,
    tasks: BTreeMap<i32, Task>,
    buf: Vec<u8>,
    topo: Topology,
    read_status: bool,
}

fn read(f: &File, buf: &mut Vec<u8>) -> Option<usize> {
    buf.resize(4096, 0);
    f.read_at(buf, 0).ok()
}

impl ProcHost {
    fn sample_one(&mut self, tid: i32) -> Option<Sample> {
        let t = self.tasks.get(&tid)?;
        let n = read(&t.stat, &mut self.buf)?;
        let stat = std::str::from_utf8(&self.buf[..n]).ok()?.to_string();
        let after = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = after.split_whitespace().collect();
        // Fields from 3 on: state is f[0]; utime 14 → f[11]; stime f[12]; start 22 → f[19];
        // processor 39 → f[36].
        let state = ThreadState::from_letter(f.first()?.chars().next()?);
        let tick = 10_000_000u64;
        let utime = Nanos(f.get(11)?.parse::<u64>().ok()? * tick);
        let stime = Nanos(f.get(12)?.parse::<u64>().ok()? * tick);
        let start_time: u64 = f.get(19)?.parse().ok()?;
        let cpu: u32 = f.get(36)?.parse().ok()?;
        let n = read(&t.schedstat, &mut self.buf)?;
        let ss = std::str::from_utf8(&self.buf[..n]).ok()?;
        let mut it = ss.split_whitespace().map(|x| x.parse::<u64>().unwrap_or(0));
        let (run, wait, slices) = (it.next()?, it.next()?, it.next()?);
        let (mut vol, mut invol) = (0, 0);
        if self.read_status {
            let n = read(&t.status, &mut self.buf)?;
            let st = std::str::from_utf8(&self.buf[..n]).ok()?;
            for line in st.lines() {
                if let Some(v) = line.strip_prefix("voluntary_ctxt_switches:") {
                    vol = v.trim().parse().unwrap_or(0);
                } else if let Some(v) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
                    invol = v.trim().parse().unwrap_or(0);
                }
            }
        }
        Some(Sample {
            key: ThreadKey {
                pid: Pid(self.pid),
                tid: Tid(tid),
                start_time,
            },
            utime,
            stime,
            run: Nanos(run),
            wait: Nanos(wait),
            timeslices: slices,
            voluntary: vol,
            involuntary: invol,
            last_cpu: CpuId(cpu),
            state,
            lock: None,
            migrations: None,
        })
    }
}

impl Host for ProcHost {
    type Error = std::io::Error;

    fn now(&self) -> Nanos {
        Nanos(self.origin.elapsed().as_nanos() as u64)
    }

    fn sample(&mut self, into: &mut Snapshot) -> Result<(), std::io::Error> {
        into.clear();
        into.at = self.now();
        let dir = format!("/proc/{}/task", self.pid);
        let mut seen = Vec::new();
        for e in std::fs::read_dir(&dir)? {
            let Some(tid) = e?.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            seen.push(tid);
            if let std::collections::btree_map::Entry::Vacant(slot) = self.tasks.entry(tid) {
                let open = |f: &str| File::open(format!("{dir}/{tid}/{f}"));
                if let (Ok(stat), Ok(schedstat), Ok(status)) =
                    (open("stat"), open("schedstat"), open("status"))
                {
                    slot.insert(Task {
                        stat,
                        schedstat,
                        status,
                    });
                }
            }
        }
        self.tasks.retain(|t, _| seen.contains(t));
        let tids: Vec<i32> = self.tasks.keys().copied().collect();
        for tid in tids {
            if let Some(s) = self.sample_one(tid) {
                into.threads.push(s);
            }
        }
        into.sort();
        Ok(())
    }

    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        let mut r = ApplyReport::default();
        for m in &plan.moves {
            let cpus: CpuSet = match m.to {
                Target::Cpu(c) => CpuSet::single(c),
                Target::Domain { level, index } => self
                    .topo
                    .domains(level)
                    .get(index)
                    .map(|d| d.cpus.clone())
                    .unwrap_or_default(),
                Target::Original => self.topo.online().clone(),
            };
            let mut set = NixCpuSet::new();
            for c in cpus.iter() {
                let _ = set.set(c.0 as usize);
            }
            let out = match sched_setaffinity(NixPid::from_raw(m.thread.tid.0), &set) {
                Ok(()) => MoveOutcome::Done,
                Err(nix::errno::Errno::ESRCH) => MoveOutcome::Vanished,
                Err(_) => MoveOutcome::Denied,
            };
            r.count(out);
        }
        r
    }
}

fn cpu_time() -> Duration {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID) {
        Ok(ts) => Duration::new(ts.tv_sec() as u64, ts.tv_nsec() as u32),
        Err(_) => Duration::ZERO,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: balance <policy>[:key=value,…] <program> [args…]");
        std::process::exit(2);
    }
    let (policy_name, opts) = args[1].split_once(':').unwrap_or((&args[1], ""));
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let Ok(topo) = Topology::synthetic(&format!("package:1 core:{ncpu} pu:1")) else {
        std::process::exit(2);
    };
    let mut settings = Settings::new(Level::Core);
    let mut read_status = true;
    for kv in opts.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let ms = || Nanos((v.parse::<f64>().unwrap_or(1.0) * 1e6) as u64);
        match k {
            "interval" => settings.interval = Some(ms()),
            "min" => settings.speed.min_interval = ms(),
            "max" => settings.speed.max_interval = ms(),
            "ts" => settings.speed.threshold = v.parse().unwrap_or(0.9),
            "seed" => settings.seed = v.parse().unwrap_or(1),
            "runnable" => {
                settings.speed.measure = threadbalance_policy::speed::SpeedMeasure::Runnable
            }
            "nostatus" => read_status = false,
            _ => eprintln!("unknown option {k}"),
        }
    }
    let mut policy = match build(policy_name, &settings, &topo) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let mut child = match Command::new(&args[2]).args(&args[3..]).spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let mut host = ProcHost {
        pid: child.id() as i32,
        origin: Instant::now(),
        tasks: BTreeMap::new(),
        buf: Vec::new(),
        topo: topo.clone(),
        read_status,
    };
    let mut engine = Engine::new();
    let (t0, c0) = (Instant::now(), cpu_time());
    let mut tick_cpu = Duration::ZERO;
    let mut ticks = 0u64;
    let mut min_next = u64::MAX;
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        let c = cpu_time();
        let next = match engine.tick(&mut host, &topo, policy.as_mut()) {
            Ok(r) => r.next_in,
            Err(_) => Nanos::from_millis(1),
        };
        tick_cpu += cpu_time().saturating_sub(c);
        ticks += 1;
        min_next = min_next.min(next.0);
        std::thread::sleep(Duration::from_nanos(next.0));
    }
    let _ = child.wait();
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_time().saturating_sub(c0).as_secs_f64();
    let summary: Vec<String> = policy
        .summary()
        .into_iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    let t = engine.totals();
    println!(
        "{{\"policy\":\"{}\",\"ticks\":{},\"moves\":{},\"done\":{},\"cpu_pct\":{:.3},\"tick_cpu_pct\":{:.3},\"us_per_tick\":{:.1},\"min_next_ms\":{:.2},\"summary\":{:?}}}",
        policy.name(),
        ticks,
        t.moves,
        t.applied.done,
        100.0 * cpu / wall,
        100.0 * tick_cpu.as_secs_f64() / wall,
        1e6 * tick_cpu.as_secs_f64() / ticks.max(1) as f64,
        min_next as f64 / 1e6,
        summary.join("; ")
    );
}
