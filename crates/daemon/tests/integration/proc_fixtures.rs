//! The readers on fixture trees: `daemon-host` (a small machine with every case the
//! daemon meets) and `daemon-malformed` (one broken file per reader).

use crate::repo;
use std::path::{Path, PathBuf};
use threadbalance_daemon::banned::usable_cpus;
use threadbalance_daemon::competitor::{Competitor, cpuset_changed};
use threadbalance_daemon::process::facts_between;
use threadbalance_daemon::read::{
    CpusetCgroup, Root, cpuset_cgroup, read_comms, read_competitors, read_config,
    read_cpuset_effective, read_kernel_bans, read_pid_files, read_process, read_users,
};
use threadbalance_daemon::{Config, Decision, match_process};
use threadbalance_model::{CpuSet, Nanos, Pid, Tid};

/// `stat`'s clock ticks per second in the fixtures.
const HZ: u64 = 100;

fn host() -> Root {
    Root::new(repo("fixtures/proc/daemon-host"))
}

fn malformed() -> Root {
    Root::new(repo("fixtures/proc/daemon-malformed"))
}

#[test]
fn read_process_multithreaded_process_gives_every_field() {
    let p = read_process(&host(), Pid(2100), HZ).unwrap().unwrap();
    assert_eq!(p.comm, "ffmpeg");
    assert_eq!(p.cmdline, "ffmpeg -i in.mkv -c:v libx264 out.mp4");
    assert_eq!(p.cgroup.as_deref(), Some("/system.slice/encoder.service"));
    assert_eq!((p.uid, p.start_time, p.kernel_thread), (1000, 5000, false));
    // Process: 8900 + 210 ticks at 100 Hz = 91.1 s.
    assert_eq!(p.cpu_time, Nanos::from_millis(91_100));
    // Threads: 1000+100, 4000+50, 3900+60 ticks.
    let threads: Vec<(Tid, Nanos)> = p.threads.into_iter().collect();
    assert_eq!(
        threads,
        [
            (Tid(2100), Nanos::from_millis(11_000)),
            (Tid(2101), Nanos::from_millis(40_500)),
            (Tid(2102), Nanos::from_millis(39_600)),
        ]
    );
}

#[test]
fn read_process_odd_names_and_kernel_threads() {
    let weird = read_process(&host(), Pid(3000), HZ).unwrap().unwrap();
    assert_eq!(weird.comm, "my (weird) app");
    assert_eq!(weird.cmdline, "./my app --x");
    let kthread = read_process(&host(), Pid(2), HZ).unwrap().unwrap();
    assert!(kthread.kernel_thread);
    assert_eq!(kthread.cmdline, "");
}

#[test]
fn read_process_missing_pid_is_none() {
    assert!(read_process(&host(), Pid(4), HZ).unwrap().is_none());
}

#[test]
fn read_comms_and_users_and_pid_files() {
    let comms = read_comms(&host()).unwrap();
    let names: Vec<(i32, &str)> = comms.iter().map(|(p, c)| (p.0, c.as_str())).collect();
    assert_eq!(
        names,
        [
            (1, "systemd"),
            (2, "kthreadd"),
            (812, "numad"),
            (1200, "postgres"),
            (2100, "ffmpeg"),
            (3000, "my (weird) app"),
        ]
    );
    let users = read_users(&host()).unwrap();
    assert_eq!(
        (users.name(0), users.name(999), users.name(1000)),
        (Some("root"), Some("postgres"), Some("alice"))
    );
    // A missing pid file is a program not running: no pid, no error.
    let files = [
        PathBuf::from("/run/postgresql.pid"),
        PathBuf::from("/run/gone.pid"),
    ];
    let read = read_pid_files(&host(), &files);
    assert!(read.bad.is_empty(), "{:?}", read.bad);
    let pids: Vec<Pid> = read.pids.into_iter().collect();
    assert_eq!(pids, [Pid(1200)]);
}

#[test]
fn read_kernel_bans_union_of_cmdline_and_sysfs() {
    let bans = read_kernel_bans(&host()).unwrap();
    assert_eq!(bans.cmdline.isolcpus.to_string(), "6-7"); // isolcpus=1 after `--` is init's
    assert_eq!(bans.cmdline.isolcpus_flags, ["domain", "managed_irq"]);
    assert_eq!(bans.cmdline.nohz_full.to_string(), "7,15");
    assert_eq!(bans.isolated.to_string(), "6-7");
    assert_eq!(bans.nohz_full.to_string(), "7,15");
    // 0-15 less {6,7} ∪ {7,15} = 0-5,8-14
    let config = Config::parse("t.toml", "").unwrap();
    let online = CpuSet::parse_list("0-15").unwrap();
    let usable = usable_cpus(&online, &config.daemon, &bans).unwrap();
    assert_eq!(usable.to_string(), "0-5,8-14");
}

#[test]
fn read_competitors_finds_all_three() {
    let root = host();
    let found = read_competitors(&root, &read_comms(&root).unwrap()).unwrap();
    assert_eq!(
        found,
        [
            Competitor::SchedExt {
                state: "enabled".into(),
                ops: Some("rusty_1.0.4".into())
            },
            Competitor::Numad { pid: Pid(812) },
            Competitor::NumaBalancing { mode: 1 },
        ]
    );
    for w in &found {
        assert!(!w.to_string().contains('\n'), "{w}");
    }
}

#[test]
fn read_competitors_quiet_machine_finds_none() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "sys/kernel/sched_ext/state", "disabled\n");
    write(dir.path(), "proc/sys/kernel/numa_balancing", "0\n");
    let root = Root::new(dir.path());
    assert_eq!(read_competitors(&root, &[]).unwrap(), []);
}

#[test]
fn read_cpuset_effective_change_between_two_reads_is_reported() {
    let encoder = read_process(&host(), Pid(2100), HZ).unwrap().unwrap();
    let cgroup = cpuset_cgroup(&encoder).unwrap();
    assert_eq!(
        cgroup,
        CpusetCgroup::V2("/system.slice/encoder.service".into())
    );
    let before = CpuSet::parse_list("0-15").unwrap();
    let now = read_cpuset_effective(&host(), &cgroup).unwrap().unwrap();
    assert_eq!(now.to_string(), "0-5,8-14");
    let w = cpuset_changed(Pid(2100), cgroup.path(), &before, &now).unwrap();
    assert!(
        w.to_string().contains("changed from 0-15 to 0-5,8-14"),
        "{w}"
    );
    let gone = CpusetCgroup::V2("/gone.slice".into());
    assert!(read_cpuset_effective(&host(), &gone).unwrap().is_none());
}

#[test]
fn read_cpuset_effective_hybrid_host_reads_the_v1_hierarchy() {
    // Pid 3000's rules see its v2 cgroup; its CPUs come from the v1 cpuset hierarchy.
    let p = read_process(&host(), Pid(3000), HZ).unwrap().unwrap();
    assert_eq!(p.cgroup.as_deref(), Some("/user.slice/user-1000.slice"));
    let cgroup = cpuset_cgroup(&p).unwrap();
    assert_eq!(cgroup, CpusetCgroup::V1("/legacy".into()));
    let cpus = read_cpuset_effective(&host(), &cgroup).unwrap().unwrap();
    assert_eq!(cpus.to_string(), "0-3");
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Adds `ticks` to the `utime` (field 14) of the `stat` file at `path`.
fn add_utime(path: &Path, ticks: u64) {
    let text = std::fs::read_to_string(path).unwrap();
    let close = text.rfind(')').unwrap();
    let (head, tail) = text.split_at(close + 2);
    let mut fields: Vec<String> = tail.split(' ').map(str::to_string).collect();
    // tail starts at field 3, so field 14 is at index 11.
    let utime: u64 = fields[11].parse().unwrap();
    fields[11] = (utime + ticks).to_string();
    std::fs::write(path, format!("{head}{}", fields.join(" "))).unwrap();
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

#[test]
fn read_two_windows_then_match_the_example_manages_the_busy_encoder() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(host().path(), dir.path());
    let root = Root::new(dir.path());
    let config = read_config(&repo("packaging/threadbalance.toml")).unwrap();
    let users = read_users(&root).unwrap();
    let before = read_process(&root, Pid(2100), HZ).unwrap().unwrap();
    let pg_before = read_process(&root, Pid(1200), HZ).unwrap().unwrap();
    // One second later: threads 2101 and 2102 ran 90 and 60 ticks (90 % and 60 % of a
    // core), 2100 ran 1 tick; the process 151 ticks. Postgres did nothing.
    let task = |tid: i32| dir.path().join(format!("proc/2100/task/{tid}/stat"));
    add_utime(&task(2101), 90);
    add_utime(&task(2102), 60);
    add_utime(&task(2100), 1);
    add_utime(&dir.path().join("proc/2100/stat"), 151);
    let after = read_process(&root, Pid(2100), HZ).unwrap().unwrap();
    let pg_after = read_process(&root, Pid(1200), HZ).unwrap().unwrap();

    let window = config.daemon.sample_interval; // 1 s
    let busy = config.daemon.busy_thread_percent; // 50 %
    let f = facts_between(&before, &after, window, busy, &users);
    // Busy: 2101 (90 %) and 2102 (60 %), not 2100 (1 %). CPU: 151 ticks = 1.51 s in 1 s.
    assert_eq!((f.threads, f.busy_threads), (3, 2));
    assert!((f.cpu_percent - 151.0).abs() < 1e-9, "{}", f.cpu_percent);
    assert_eq!(f.user.as_deref(), Some("alice"));
    match match_process(&config.rules, &f) {
        Decision::Manage { rule, placement } => {
            assert_eq!(
                (rule.name.as_str(), placement.policy_name()),
                ("busy", "speed")
            );
        }
        other => panic!("the encoder should be managed: {other:?}"),
    }
    let pg = facts_between(&pg_before, &pg_after, window, busy, &users);
    assert_eq!((pg.threads, pg.busy_threads), (3, 0));
    assert!(matches!(
        match_process(&config.rules, &pg),
        Decision::HandsOff(_)
    ));
}

#[test]
fn read_malformed_files_give_one_line_naming_the_file() {
    let root = malformed();
    let at = |rel: &str| root.join(rel).display().to_string();
    let cases: Vec<(String, String)> = vec![
        (
            read_process(&root, Pid(10), HZ).unwrap_err().to_string(),
            format!(
                "parsing {}: truncated: field 4 is missing",
                at("proc/10/stat")
            ),
        ),
        (
            read_process(&root, Pid(11), HZ).unwrap_err().to_string(),
            format!("parsing {}: no Uid: line", at("proc/11/status")),
        ),
        (
            read_process(&root, Pid(12), HZ).unwrap_err().to_string(),
            format!(
                "parsing {}: line 2: \"not a cgroup line\" is not hierarchy-id:controllers:path",
                at("proc/12/cgroup")
            ),
        ),
        (
            read_process(&root, Pid(13), HZ).unwrap_err().to_string(),
            format!(
                "parsing {}: field 14 is not a number",
                at("proc/13/task/14/stat")
            ),
        ),
        (
            read_kernel_bans(&root).unwrap_err().to_string(),
            format!(
                "parsing {}: isolcpus=domain: flag \"domain\" is not followed by a CPU list",
                at("proc/cmdline")
            ),
        ),
        (
            read_competitors(&root, &[]).unwrap_err().to_string(),
            format!(
                "parsing {}: \"on\" is not a numa_balancing mode",
                at("proc/sys/kernel/numa_balancing")
            ),
        ),
        (
            read_cpuset_effective(&root, &CpusetCgroup::V2("/bad.slice".into()))
                .unwrap_err()
                .to_string(),
            format!(
                "parsing {}: bad CPU list \"zero\": \"zero\" is not a CPU number",
                at("sys/fs/cgroup/bad.slice/cpuset.cpus.effective")
            ),
        ),
        (
            read_pid_files(&root, &[PathBuf::from("/run/bad.pid")]).bad[0].to_string(),
            format!("parsing {}: \"abc\" is not a pid", at("run/bad.pid")),
        ),
    ];
    for (got, want) in cases {
        assert!(!got.contains('\n'), "more than one line: {got}");
        assert_eq!(got, want);
    }
}

#[test]
fn read_kernel_bans_malformed_sysfs_names_the_file() {
    // The malformed tree's command line fails first; this file is read alone.
    let dir = tempfile::tempdir().unwrap();
    let rel = "sys/devices/system/cpu/nohz_full";
    std::fs::create_dir_all(dir.path().join(rel).parent().unwrap()).unwrap();
    std::fs::copy(malformed().join(rel), dir.path().join(rel)).unwrap();
    let e = read_kernel_bans(&Root::new(dir.path()))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!(
            "parsing {}: bad CPU list \"7-3\": range 7-3 runs backwards",
            dir.path().join(rel).display()
        )
    );
}
