// SPDX-License-Identifier: MIT OR GPL-2.0
//
// setaffinity.bpf.c: who set each thread's mask. Every successful sched_setaffinity on the
// machine is recorded against the thread it changed, as the tool's own or as someone
// else's (the program, or anyone else but the tool). Loaded by crates/linux/src/setters.rs
// (feature `bpf`). Rebuild with ./build.sh, which also records the object's SHA-256 in
// setaffinity.bpf.o.sha256; a test fails when the committed object does not match it.
//
//   sys_enter_sched_setaffinity(pid, len, mask)
//       pid 0 ──► the caller itself (its tid, as the kernel numbers it)
//       pid > 0 and the caller in the tool's pid namespace ──► that tid
//       pid > 0 from another pid namespace ──► foreign[0] += 1, not attributed
//         └─► inflight[caller tid] = target
//   sys_exit_sched_setaffinity(ret)
//       inflight[caller tid]? and ret == 0 ──► sets[target]:
//           caller's tgid == config.tool ──► ours_ns = now
//           otherwise                    ──► program_sets += 1, program_ns = now,
//                                            setter = caller (tgid << 32 | tid)
//
// Times are bpf_ktime_get_boot_ns (CLOCK_BOOTTIME), the clock of /proc's start times, so
// user space can tell a record of an earlier thread that had the same tid.
//
// No vmlinux.h and no libbpf headers, as futex.bpf.c: the record layouts are tracefs'
// `format` files' (args at offset 16, 8 bytes each; the exit value at 16).

typedef unsigned long long u64;
typedef unsigned int u32;
typedef long long s64;

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_LRU_HASH 9
#define BPF_ANY 0

struct bpf_pidns_info {
	u32 pid;
	u32 tgid;
};

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
				   u64 flags) = (void *)2;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)3;
static u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;
static long (*bpf_get_ns_current_pid_tgid)(u64 dev, u64 ino, struct bpf_pidns_info *nsdata,
					   u32 size) = (void *)120;
static u64 (*bpf_ktime_get_boot_ns)(void) = (void *)125;

struct sys_enter {
	u64 common;
	int nr;
	int pad;
	u64 args[6];
};

struct sys_exit {
	u64 common;
	int nr;
	int pad;
	s64 ret;
};

// config: [0] the tool's tgid, [1] and [2] the device and inode of its pid namespace
// (0 and 0: every caller is taken to share it). Filled by user space before attaching.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, u32);
	__type(value, u64);
} config SEC(".maps");

// inflight: caller tid → the tid its call names.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, u64);
	__type(value, u64);
} inflight SEC(".maps");

// sets: tid → { program sets, last program set ns, its setter, last set of the tool ns }.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, u64[4]);
} sets SEC(".maps");

// foreign[0]: sets naming another thread from another pid namespace (not attributed).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} foreign SEC(".maps");

static __attribute__((always_inline)) u64 config_of(u32 i)
{
	u64 *v = bpf_map_lookup_elem(&config, &i);
	return v ? *v : 0;
}

SEC("tracepoint/syscalls/sys_enter_sched_setaffinity")
int setaffinity_enter(struct sys_enter *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u64 caller = id & 0xffffffff;
	int pid = (int)ctx->args[0];
	u64 target;
	if (pid < 0)
		return 0;
	if (pid == 0) {
		target = caller;
	} else {
		u64 dev = config_of(1);
		u64 ino = config_of(2);
		struct bpf_pidns_info ns = {};
		if (ino != 0 &&
		    bpf_get_ns_current_pid_tgid(dev, ino, &ns, sizeof(ns)) != 0) {
			u32 zero = 0;
			u64 *n = bpf_map_lookup_elem(&foreign, &zero);
			if (n)
				__sync_fetch_and_add(n, 1);
			return 0;
		}
		target = (u64)pid;
	}
	bpf_map_update_elem(&inflight, &caller, &target, BPF_ANY);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_sched_setaffinity")
int setaffinity_exit(struct sys_exit *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u64 caller = id & 0xffffffff;
	u64 *t = bpf_map_lookup_elem(&inflight, &caller);
	if (!t)
		return 0;
	u64 target = *t;
	bpf_map_delete_elem(&inflight, &caller);
	if (ctx->ret != 0)
		return 0;
	u64 now = bpf_ktime_get_boot_ns();
	int ours = (id >> 32) == config_of(0);
	u64 *r = bpf_map_lookup_elem(&sets, &target);
	if (r) {
		if (ours) {
			r[3] = now;
		} else {
			__sync_fetch_and_add(&r[0], 1);
			r[1] = now;
			r[2] = id;
		}
		return 0;
	}
	u64 init[4] = { 0, 0, 0, 0 };
	if (ours) {
		init[3] = now;
	} else {
		init[0] = 1;
		init[1] = now;
		init[2] = id;
	}
	bpf_map_update_elem(&sets, &target, init, BPF_ANY);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
