// SPDX-License-Identifier: MIT OR GPL-2.0
//
// setaffinity.bpf.c: who set each thread's mask. Every sched_setaffinity on the machine is
// recorded against the thread it names, as the tool's own or as someone else's (the
// program, or anyone else but the tool), with the mask someone else asked for. Loaded by
// crates/linux/src/setbpf.rs (feature `bpf`). Rebuild with ./build.sh, which also records
// the object's SHA-256 in setaffinity.bpf.o.sha256; a test fails when the committed object
// does not match it.
//
//   sys_enter_sched_setaffinity(pid, len, mask)
//       pid 0 ──► the caller itself (its tid, as the kernel numbers it)
//       pid > 0 and the caller in the tool's pid namespace ──► that tid
//       pid > 0 from another pid namespace ──► foreign[0] += 1, not attributed
//         └─► sets[target]:
//               caller's tgid == config.tool ──► ours_ns = now
//               otherwise ──► program_sets += 1, program_ns = now,
//                             setter = caller (tgid << 32 | tid),
//                             asked = 1 + the bytes of the mask read (at most 64: 512
//                                     CPUs; 0: unreadable), mask = those bytes
//
// One tracepoint, at the call's entry: no exit program. A syscall tracepoint puts every
// task of the machine on the system-call slow path until the last one is detached, and
// the kernel detaches them one at a time, each after a grace period (about 60 ms here): a
// second tracepoint kept every system call of the machine slow that much longer. Whether a
// call took effect is told in user space instead, from the mask it asked for and the mask
// the thread has (crates/linux/src/setters.rs).
//
// Times are bpf_ktime_get_boot_ns (CLOCK_BOOTTIME), the clock of /proc's start times, so
// user space can tell a record of an earlier thread that had the same tid.
//
// No vmlinux.h and no libbpf headers, as futex.bpf.c: the record layout is tracefs'
// `format` file's (args at offset 16, 8 bytes each).

typedef unsigned long long u64;
typedef unsigned int u32;

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_LRU_HASH 9
#define BPF_ANY 0
#define BPF_NOEXIST 1

// The words of a record (see `sets`), and of the mask it keeps.
#define MASK_WORDS 8
#define RECORD_WORDS (5 + MASK_WORDS)

struct bpf_pidns_info {
	u32 pid;
	u32 tgid;
};

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
				   u64 flags) = (void *)2;
static u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;
static long (*bpf_get_ns_current_pid_tgid)(u64 dev, u64 ino, struct bpf_pidns_info *nsdata,
					   u32 size) = (void *)120;
static long (*bpf_probe_read_user)(void *dst, u32 size, const void *src) = (void *)112;
static u64 (*bpf_ktime_get_boot_ns)(void) = (void *)125;

struct sys_enter {
	u64 common;
	int nr;
	int pad;
	u64 args[6];
};

// config: [0] the tool's tgid, [1] and [2] the device and inode of its pid namespace
// (0 and 0: every caller is taken to share it). Filled by user space before attaching.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, u32);
	__type(value, u64);
} config SEC(".maps");

// sets: tid → { program sets, last program set ns, its setter, last set of the tool ns,
// 1 + the bytes of the mask the last program set asked for (0: unreadable), that mask }.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, u64[RECORD_WORDS]);
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
	u64 now = bpf_ktime_get_boot_ns();
	u64 *r = bpf_map_lookup_elem(&sets, &target);
	if (!r) {
		u64 init[RECORD_WORDS] = {};
		bpf_map_update_elem(&sets, &target, init, BPF_NOEXIST);
		r = bpf_map_lookup_elem(&sets, &target);
		if (!r)
			return 0;
	}
	if ((id >> 32) == config_of(0)) {
		r[3] = now;
		return 0;
	}
	u64 len = ctx->args[1] & 0xffffffff;
	if (len > MASK_WORDS * 8)
		len = MASK_WORDS * 8;
	// A bound the verifier can see whatever the compiler made of the one above.
	len &= 2 * MASK_WORDS * 8 - 1;
	for (int i = 0; i < MASK_WORDS; i++)
		r[5 + i] = 0;
	long err = bpf_probe_read_user(&r[5], len, (const void *)ctx->args[2]);
	r[4] = err == 0 ? 1 + len : 0;
	__sync_fetch_and_add(&r[0], 1);
	r[1] = now;
	r[2] = id;
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
