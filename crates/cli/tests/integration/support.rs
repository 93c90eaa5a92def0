//! Helpers: the binary, reading masks back from `/proc`, bounded waits.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Held by the tests whose measurement another test's load would skew (lock time
/// estimated from blocked time, which reads run-queue waits counted late as blocking)
/// and by the tests that load both CPUs for many seconds (the simulator suite, the
/// README's commands, the soak, 5000 threads): none of them runs while another does. The
/// other tests still run beside them.
pub fn alone() -> MutexGuard<'static, ()> {
    static ALONE: Mutex<()> = Mutex::new(());
    // A test that panicked while holding it leaves nothing half-done to protect.
    ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_threadbalance"))
}

/// Runs the binary to completion.
pub fn run(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().expect("runs")
}

/// Starts the binary with piped stdout/stderr.
pub fn spawn(args: &[&str]) -> Child {
    Command::new(bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawns")
}

/// `(tid, comm, Cpus_allowed_list)` of every thread of `pid`.
pub fn masks(pid: u32) -> Vec<(i32, String, String)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(tid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
        let mask = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|m| m.trim().to_string())
            .unwrap_or_default();
        out.push((tid, comm.trim().to_string(), mask));
    }
    out.sort();
    out
}

/// The workload threads (named `<scenario>-<i>`) of `pid` with their masks, by index.
pub fn worker_masks(pid: u32, scenario: &str) -> Vec<(usize, String)> {
    let prefix = format!("{scenario}-");
    let mut v: Vec<(usize, String)> = masks(pid)
        .into_iter()
        .filter_map(|(_, comm, mask)| Some((comm.strip_prefix(&prefix)?.parse().ok()?, mask)))
        .collect();
    v.sort();
    v
}

/// Polls `f` every 20 ms until it returns `Some`, for at most `limit`.
pub fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(v) = f() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// The pid of the first child process of `parent` (the command `run` launched).
pub fn child_of(parent: u32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The CPUs this machine has online, as the kernel lists them (`0-1`).
pub fn online() -> String {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .expect("online CPUs")
        .trim()
        .to_string()
}

/// Sends `sig` to `pid`.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill has no memory effects; the pid is a process this test started.
    unsafe {
        libc::kill(pid as i32, sig);
    }
}

/// Waits for `child` to exit, killing it after `limit`; returns its exit code (or 128+signal).
pub fn finish(child: &mut Child, limit: Duration) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            return st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0));
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("process {} did not finish within {limit:?}", child.id());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Builds the C program `rel` (a path from the repository's root) with OpenMP at `-O{opt}`
/// into `dir/name`: the tests that run third-party runtimes need a C compiler with libgomp,
/// which `.ci/run` installs.
pub fn build_openmp_c(rel: &str, opt: u8, dir: &std::path::Path, name: &str) -> PathBuf {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    let exe = dir.join(name);
    let out = Command::new("cc")
        .arg(format!("-O{opt}"))
        .arg("-fopenmp")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("a C compiler (cc) with OpenMP: .ci/run installs gcc");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The repository's JSON Schema (`schema/threadbalance.schema.json`).
pub fn schema() -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../schema/threadbalance.schema.json");
    serde_json::from_str(&std::fs::read_to_string(&path).expect("the schema file"))
        .expect("the schema is JSON")
}

/// The errors of `value` against the schema's definition `def` (`run`, `compare`, …),
/// one line each; empty when it is valid.
pub fn schema_errors(value: &serde_json::Value, def: &str) -> Vec<String> {
    let mut s = schema();
    let obj = s.as_object_mut().expect("the schema is an object");
    obj.remove("anyOf");
    obj.insert("$ref".into(), format!("#/$defs/{def}").into());
    let validator = jsonschema::validator_for(&s).expect("the schema compiles");
    validator
        .iter_errors(value)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// Asserts `value` follows the schema's definition `def`.
pub fn assert_schema(value: &serde_json::Value, def: &str) {
    let errors = schema_errors(value, def);
    assert!(
        errors.is_empty(),
        "{def} JSON does not follow the schema:\n{}\n{value:#}",
        errors.join("\n")
    );
}
