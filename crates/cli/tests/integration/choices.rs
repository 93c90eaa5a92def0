//! Live: the program's own choices win over ours. See: issue 39, items 5 and 6.
//!
//! The target is this test binary run as a helper process (below): four threads of uneven
//! duty, which `tumbler` (or `speed`) moves between the two cores at `--level core`. The first
//! thread that has been on both single CPUs pins itself back to the one it had first: a
//! mask threadbalance set on it once, not the last one. After threadbalance stops, that
//! thread must still be on it, and the summary must count it as the program's choice.
//!
//! With the trace of `sched_setaffinity` (root, BPF): a thread that pins itself to the very
//! mask threadbalance set on it last, which no comparison of masks can tell from ours, is
//! the program's all the same.

use crate::support::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use threadbalance_model::{CpuId, CpuSet, Tid};

const LIMIT: Duration = Duration::from_secs(90);

/// The helper process: four threads of duties 1, 1, 0.5 and 0.25 (10 ms periods), which
/// `tumbler` regroups, or, with `THREADBALANCE_PIN_HELPER=rotate`, three always-busy
/// threads, which `speed` rotates over the two cores all the time (four uneven ones may sit
/// evenly enough that `speed` leaves them where they are, or hands them back to Linux,
/// and no thread ever sees both CPUs). Each watches its own mask; the first that was on
/// one single CPU and is now on another pins itself back to the first ("pinned <tid>
/// <cpu>"). Lives until its stdin closes.
#[test]
#[ignore = "helper process of the choices test; runs only when started by it"]
fn helper_process_pinning_a_thread_to_an_earlier_mask() {
    let Some(kind) = std::env::var_os("THREADBALANCE_PIN_HELPER") else {
        return;
    };
    static PINNED: AtomicBool = AtomicBool::new(false);
    let duties: &[f64] = if kind == "rotate" {
        &[1.0, 1.0, 1.0]
    } else {
        &[1.0, 1.0, 0.5, 0.25]
    };
    // "same": pin to the single CPU we are on (the mask threadbalance set last), at once.
    let same = std::env::var_os("THREADBALANCE_PIN_TO").is_some_and(|v| v == "same");
    for &duty in duties {
        std::thread::spawn(move || {
            let me = Tid(nix::unistd::gettid().as_raw());
            let mut first: Option<CpuSet> = None;
            loop {
                let start = Instant::now();
                while start.elapsed() < Duration::from_micros((10_000.0 * duty) as u64) {
                    std::hint::spin_loop();
                }
                std::thread::sleep(Duration::from_micros((10_000.0 * (1.0 - duty)) as u64));
                let Ok(now) = threadbalance_linux::affinity_of(me) else {
                    continue;
                };
                if now.len() != 1 || PINNED.load(Ordering::SeqCst) {
                    continue;
                }
                match &first {
                    None if same => {
                        if PINNED.swap(true, Ordering::SeqCst) {
                            continue;
                        }
                        threadbalance_linux::set_affinity(me, &now).unwrap();
                        println!("pinned {} {now}", me.0);
                    }
                    None => first = Some(now),
                    Some(f) if *f != now => {
                        if PINNED.swap(true, Ordering::SeqCst) {
                            continue;
                        }
                        threadbalance_linux::set_affinity(me, f).unwrap();
                        println!("pinned {} {f}", me.0);
                    }
                    Some(_) => {}
                }
            }
        });
    }
    println!("helper ready");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

#[test]
fn live_attach_thread_pinning_itself_to_an_earlier_mask_of_ours_keeps_it_and_is_counted() {
    pinning_to_an_earlier_mask_under("tumbler", false);
}

#[test]
fn live_attach_speed_thread_pinning_itself_to_an_earlier_mask_of_ours_keeps_it() {
    pinning_to_an_earlier_mask_under("speed", false);
}

/// Needs the trace (root, BPF, tracefs): the masks alone cannot tell this choice from ours.
#[test]
fn live_attach_thread_pinning_itself_to_the_last_mask_of_ours_keeps_it_with_the_trace() {
    pinning_to_an_earlier_mask_under("tumbler", true);
}

/// Attaches `policy` at `--level core` to the helper until one of its threads pins itself
/// to an earlier mask of ours (`same`: to the mask we set last on it), stops it, and checks
/// that thread kept its mask, every other thread got its own back, and the summary counted
/// the program's choice.
fn pinning_to_an_earlier_mask_under(policy: &str, same: bool) {
    let all = online();
    assert!(all.contains('-'), "this test needs two CPUs, have {all}");
    let mut helper = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "choices::helper_process_pinning_a_thread_to_an_earlier_mask",
        ])
        .args(["--nocapture", "--test-threads=1"])
        .env(
            "THREADBALANCE_PIN_HELPER",
            if policy == "speed" {
                "rotate"
            } else {
                "uneven"
            },
        )
        .env(
            "THREADBALANCE_PIN_TO",
            if same { "same" } else { "earlier" },
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let hpid = helper.id();
    let (tx, rx) = std::sync::mpsc::channel();
    let out = BufReader::new(helper.stdout.take().unwrap());
    std::thread::spawn(move || {
        for l in out.lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    // The first line holding `what`, within LIMIT (libtest prints lines of its own).
    let line_with = |what: &str| {
        let until = Instant::now() + LIMIT;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(l) if l.contains(what) => return Some(l),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    };
    let ready = line_with("helper ready").unwrap_or_default();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let state = dir.path().join("state");
    let pid = hpid.to_string();
    // The trace stays whatever the machine's time in the kernel says it costs: other
    // tests busy beside this one would have it let go (docs/choices.md).
    let mut tb = spawn(&[
        "attach",
        "--pid",
        &pid,
        "--policy",
        policy,
        "--level",
        "core",
        "--json",
        json.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "--keep-trace",
    ]);
    // "pinned <tid> <cpu>", once a thread has been moved between the two CPUs.
    let pinned = line_with("pinned ").and_then(|l| {
        let mut w = l.strip_prefix("pinned ")?.split(' ');
        Some((w.next()?.parse::<i32>().ok()?, w.next()?.to_string()))
    });
    // A few of tumbler's intervals (800 ms at most) with the thread pinned.
    std::thread::sleep(Duration::from_millis(1500));
    signal(tb.id(), libc::SIGINT);
    let code = finish(&mut tb, LIMIT);
    let after = masks(hpid);
    drop(helper.stdin.take());
    let _ = helper.kill();
    let _ = helper.wait();
    assert!(ready.contains("helper ready"), "{ready}");
    let (tid, cpu) = pinned.expect("a thread was moved between both CPUs and pinned itself");
    assert_eq!(code, 0);
    let cpu = CpuSet::single(CpuId(cpu.parse().unwrap())).to_string();
    for (t, comm, mask) in &after {
        if *t == tid {
            assert_eq!(*mask, cpu, "the program's choice stands: {after:?}");
        } else {
            assert_eq!(*mask, all, "thread {t} ({comm}) restored: {after:?}");
        }
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    if same {
        let choices = v["choices"].as_str().unwrap_or_default();
        assert!(
            choices.starts_with("masks set by the program traced"),
            "this test needs the trace of sched_setaffinity (root, BPF, tracefs): {choices}"
        );
    }
    assert!(v["program_chose"].as_u64().unwrap() >= 1, "{v}");
    assert_eq!(v["unrestored"], 0, "{v}");
    assert_schema(&v, "run");
}
