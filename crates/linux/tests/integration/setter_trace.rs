//! The trace of who sets masks: the committed BPF object matches its recorded hash
//! (always), and, with the `bpf` feature, the trace loads on this machine and tells the
//! tool's sets from everyone else's. The live test needs root and tracefs; it fails,
//! rather than passing silently, where the trace cannot load.

const OBJECT: &[u8] = include_bytes!("../../bpf/setaffinity.bpf.o");
const RECORDED: &str = include_str!("../../bpf/setaffinity.bpf.o.sha256");

#[test]
fn setaffinity_object_matches_recorded_sha256() {
    crate::util::assert_bpf_object("setaffinity.bpf.o", OBJECT, RECORDED);
}

#[cfg(feature = "bpf")]
mod live {
    use std::sync::Arc;
    use threadbalance_linux::origin::Setter;
    use threadbalance_linux::setbpf::SetterProbe;
    use threadbalance_linux::setters::{Trace, TraceState};
    use threadbalance_linux::{Root, affinity_of, read_start_time, set_affinity};
    use threadbalance_model::{Pid, ThreadKey, Tid};

    /// Runs `f` on a new thread of this process and returns its key (the thread has
    /// ended when this returns; its tid is not reused that soon).
    fn on_a_thread(f: impl FnOnce(Tid) + Send + 'static) -> ThreadKey {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            let tid = Tid(nix::unistd::gettid().as_raw());
            let me = Pid(std::process::id() as i32);
            let start = read_start_time(&Root::system(), me, tid).unwrap().unwrap();
            f(tid);
            tx.send(ThreadKey {
                pid: me,
                tid,
                start_time: start,
            })
            .unwrap();
            let _ = done_rx.recv();
        });
        let key = rx.recv().unwrap();
        drop(done_tx);
        h.join().unwrap();
        key
    }

    /// Sets the calling thread's mask to what it is (a set that changes nothing).
    fn set_own(tid: Tid) {
        let now = affinity_of(tid).unwrap();
        set_affinity(Tid(0), &now).unwrap();
    }

    #[test]
    fn setter_trace_tells_the_tools_sets_from_the_programs() {
        let tps = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .unwrap()
            .unwrap() as u64;
        // This process as the tool: its threads' own sets are the tool's.
        let probe = SetterProbe::load(std::process::id()).expect("the trace loads (run as root)");
        let trace = Trace::new(Arc::new(probe), tps);
        // Every thread here keeps the mask it was born with: the process's.
        let mask = affinity_of(Tid(std::process::id() as i32)).unwrap();
        let untouched = on_a_thread(|_| {});
        let ours = on_a_thread(set_own);
        assert_eq!(trace.setter(untouched, &mask), Setter::Unknown);
        assert_eq!(trace.setter(ours, &mask), Setter::Tool);
        drop(trace);
        // Another process as the tool (pid 1): the same sets are the program's, whether
        // made through pid 0 or the thread's own tid, and the record names the setter.
        let probe = Arc::new(SetterProbe::load(1).expect("the trace loads (run as root)"));
        let trace = Trace::new(probe.clone(), tps);
        let by_zero = on_a_thread(set_own);
        let by_tid = on_a_thread(|tid| {
            let now = affinity_of(tid).unwrap();
            set_affinity(tid, &now).unwrap();
        });
        assert_eq!(trace.setter(by_zero, &mask), Setter::Program);
        assert_eq!(trace.setter(by_tid, &mask), Setter::Program);
        let r = probe.record(by_tid.tid).unwrap();
        assert_eq!(r.program_sets, 1);
        assert_eq!(r.setter, (by_tid.pid, by_tid.tid));
        assert_eq!(r.asked.as_ref(), Some(&mask), "the mask asked for is kept");
        assert_eq!(r.ours_ns, 0);
        assert_eq!(probe.foreign(), 0);
        // A thread that pins itself to one CPU has asked for it: that mask is the
        // program's; a mask it did not ask for (still the one it had) is left to the masks.
        let first = threadbalance_model::CpuSet::single(mask.first().unwrap());
        let one = first.clone();
        let pinned = on_a_thread(move |tid| set_affinity(tid, &one).unwrap());
        assert_eq!(
            probe.record(pinned.tid).unwrap().asked.as_ref(),
            Some(&first)
        );
        assert_eq!(trace.setter(pinned, &first), Setter::Program);
        if mask.len() > 1 {
            assert_eq!(trace.setter(pinned, &mask), Setter::Unknown);
        }
        // A refused set (an empty mask) is no set.
        let refused = on_a_thread(|tid| {
            assert!(set_affinity(tid, &threadbalance_model::CpuSet::default()).is_err());
        });
        assert_eq!(trace.setter(refused, &mask), Setter::Unknown);
    }
}
