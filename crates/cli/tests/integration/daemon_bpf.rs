//! The daemon built with `--features bpf` (root, tracefs mounted, as CI runs it): one BPF
//! probe for every managed process, said in one log line; each process's sampler reads its
//! own threads through it, and a released process leaves the probe to the others. Fails,
//! saying so, where the probe cannot load (it never skips itself into green).
//!
//! Every process started here is stopped by pid from a guard; every mask is checked to be
//! back as it was found.

#[cfg(feature = "bpf")]
mod live {
    use crate::daemon::{Daemon, LIMIT, Tagged, config_text, second_rule, socket, tagged};
    use crate::support::{finish, signal, wait_for, worker_masks};
    use std::time::Duration;

    /// BPF programs the process `pid` holds (`/proc/PID/fd` links to `anon_inode:bpf-prog`):
    /// each attached program keeps one.
    /// The BPF programs the daemon holds whatever the number of processes it manages: the
    /// run-time counters' four and the setaffinity trace's one.
    const PROGRAMS: usize = 4 + 1;

    fn bpf_programs(pid: u32) -> usize {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|l| l.to_string_lossy() == "anon_inode:bpf-prog")
            })
            .count()
    }

    /// Waits until `ctl threads` has shown the threads of `pid` in two windows (the answer
    /// is published once a window; their rows, utilization and CPU included, differ from
    /// one window of theirs to the next): the process was sampled at least twice. Its first
    /// sample seeds the shared counters from `/proc` (none counts by them yet), so a
    /// release right after it, as CI's load once allowed, reads "0 threads counted … (of
    /// 1)".
    fn wait_two_windows(d: &Daemon, pid: u32) {
        let mut first: Option<Vec<String>> = None;
        wait_for(LIMIT, || {
            let out = d.ctl(&["threads"]);
            let rows: Vec<String> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| l.split_whitespace().next() == Some(pid.to_string().as_str()))
                .map(str::to_string)
                .collect();
            match &first {
                _ if rows.is_empty() => None,
                None => {
                    first = Some(rows);
                    None
                }
                Some(f) => (*f != rows).then_some(()),
            }
        })
        .unwrap_or_else(|| panic!("ctl threads never showed {pid} twice; log {:#?}", d.log()));
    }

    /// Two `spmd` workloads tagged `tags` and a config under `dir` with a `speed` rule for
    /// each: the config's path and the workloads.
    fn two_workloads(
        dir: &std::path::Path,
        (tag_a, tag_b): (u32, u32),
    ) -> (std::path::PathBuf, Tagged, Tagged) {
        let path = dir.join("threadbalance.toml");
        let text = config_text(dir, tag_a, "off") + &second_rule(tag_b, "");
        std::fs::write(&path, text).unwrap();
        (path, tagged(tag_a), tagged(tag_b))
    }

    /// `(threads counted at its last sample, slots freed)` from a release line.
    fn counted_and_freed(line: &str) -> (u64, u64) {
        let number_before = |text: &str| -> u64 {
            let head = &line[..line
                .find(text)
                .unwrap_or_else(|| panic!("no {text:?} in {line}"))];
            head.trim_end()
                .rsplit([' ', ';'])
                .next()
                .and_then(|w| w.parse().ok())
                .unwrap_or_else(|| panic!("no number before {text:?} in {line}"))
        };
        (
            number_before("threads counted by the shared BPF counters"),
            number_before("counter slots freed"),
        )
    }

    #[test]
    fn daemon_bpf_two_workloads_share_one_probe_and_one_released_leaves_the_other_counted() {
        let dir = tempfile::tempdir().unwrap();
        let (path, a, b) = two_workloads(dir.path(), (3_600_301, 3_600_302));
        let (pa, pb) = (a.pid, b.pid);
        let (before_a, before_b) = (a.before.clone(), b.before.clone());
        // `--keep-trace`: the trace's programs are counted here, whatever the machine's
        // time in the kernel (the yielding workloads, other tests) says the trace costs.
        let mut d = Daemon::start(&path, &["--keep-trace"], socket(dir.path()));
        d.wait_listed(&[(pa, "test-spmd"), (pb, "test-spmd-b")]);

        // One probe: its four programs (sched_switch, sched_wakeup, sched_wakeup_new,
        // task_newtask), not four per managed process; and one trace of sched_setaffinity
        // (sys_enter: who set each mask), also one for the whole daemon.
        let line = d.wait_line("run time from");
        assert!(
            line.contains("BPF sched_switch counters (one probe shared by every managed process)"),
            "the probe did not load (run as root with tracefs mounted): {line}"
        );
        assert_eq!(bpf_programs(d.pid()), PROGRAMS, "log {:#?}", d.log());

        // A released: its masks back, and its handle counted its threads and freed their
        // slots.
        wait_two_windows(&d, pa);
        let out = d.ctl(&["release", &pa.to_string()]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(worker_masks(pa, "spmd"), before_a);
        let gone = d.wait_line(&format!("pid {pa} (threadbalance) released (ctl release)"));
        let (counted, freed) = counted_and_freed(&gone);
        assert!(counted >= 1, "{gone}");
        assert!(freed >= 1, "{gone}");
        assert_eq!(bpf_programs(d.pid()), PROGRAMS, "the probe stays for B");

        // B goes on being sampled through the probe (its group ticks many times in 2 s),
        // and counted at its last sample, which came after A's release.
        std::thread::sleep(Duration::from_secs(2));
        d.wait_listed(&[(pb, "test-spmd-b")]);
        let mut child = d.child.take().expect("running");
        signal(child.id(), libc::SIGTERM);
        assert_eq!(finish(&mut child, LIMIT), 0, "{:#?}", d.log());
        assert_eq!(worker_masks(pb, "spmd"), before_b);
        assert_eq!(worker_masks(pa, "spmd"), before_a);
        let last = d.wait_line(&format!(
            "pid {pb} (threadbalance) released (the daemon is stopping)"
        ));
        let (counted, freed) = counted_and_freed(&last);
        assert!(counted >= 1, "{last}");
        assert!(freed >= 1, "{last}");
        // One line said which counters, for both processes.
        d.wait_line("stopped by SIGTERM");
        let log = d.log();
        let said: Vec<&String> = log.iter().filter(|l| l.contains("run time from")).collect();
        assert_eq!(said.len(), 1, "{said:#?}");
    }

    #[test]
    fn daemon_bpf_lets_the_setter_trace_go_when_the_machine_lives_in_system_calls_and_says_so_once()
    {
        // Two yielding workloads: their threads live in `sched_yield`, most of a core in
        // the kernel, where the trace puts every call on the slow path. The daemon lets it
        // go for every process it manages, and says so once.
        let dir = tempfile::tempdir().unwrap();
        let (path, a, b) = two_workloads(dir.path(), (3_600_303, 3_600_304));
        let (pa, pb) = (a.pid, b.pid);
        let (before_a, before_b) = (a.before.clone(), b.before.clone());
        let mut d = Daemon::start(&path, &[], socket(dir.path()));
        d.wait_listed(&[(pa, "test-spmd"), (pb, "test-spmd-b")]);
        let line = d.wait_line("the trace of sched_setaffinity was let go");
        assert!(
            line.contains("for every managed process: the machine spent "),
            "{line}"
        );
        // Its two programs are gone (once the kernel has detached them); the counters'
        // four stay.
        wait_for(LIMIT, || (bpf_programs(d.pid()) == 4).then_some(())).unwrap_or_else(|| {
            panic!(
                "{} programs held; log {:#?}",
                bpf_programs(d.pid()),
                d.log()
            )
        });
        let mut child = d.child.take().expect("running");
        signal(child.id(), libc::SIGTERM);
        assert_eq!(finish(&mut child, LIMIT), 0, "{:#?}", d.log());
        let log = d.log();
        assert_eq!(worker_masks(pa, "spmd"), before_a, "{log:#?}");
        assert_eq!(worker_masks(pb, "spmd"), before_b, "{log:#?}");
        let said = log.iter().filter(|l| l.contains("was let go")).count();
        assert_eq!(said, 1, "{log:#?}");
    }
}
