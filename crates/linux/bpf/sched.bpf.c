// SPDX-License-Identifier: MIT OR GPL-2.0
//
// sched.bpf.c: per-thread run time, run-queue wait, timeslices, last CPU and state, kept
// by the scheduler's own tracepoints for the threads user space names, so that a sampler
// reads every thread in one batch instead of two /proc files per thread. Loaded by
// crates/linux/src/schedbpf.rs (feature `bpf`). Rebuild with ./build.sh, which also
// records the object's SHA-256 in sched.bpf.o.sha256; a test fails when the committed
// object does not match it.
//
//   user space seeds counters[tid] from /proc (NOEXIST: never over what the program wrote)
//   sched_wakeup_new  parent's tgid in targets ──► counters[child] = 0, queued since now
//   sched_wakeup      counters[tid]? ──► queued since now
//   sched_switch      counters[prev]? ──► run += now − on_since;  runnable? queued since now
//                     counters[next]? ──► wait += now − queued_since; slices += 1; on_since = now
//
// Only threads with an entry are counted, so membership is the map itself: a thread gets
// one when user space first sees it, or when a traced process creates it. The tracepoint
// records are laid out as tracefs' `format` files give them; no vmlinux.h, no libbpf.

typedef unsigned long long u64;
typedef unsigned int u32;
typedef long long s64;

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

#define BPF_MAP_TYPE_HASH 1
#define BPF_ANY 0

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
				   u64 flags) = (void *)2;
static u64 (*bpf_ktime_get_ns)(void) = (void *)5;
static u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;
static u32 (*bpf_get_smp_processor_id)(void) = (void *)8;

// One thread's counters; user space reads them as [u64; 8] in this order.
struct counters {
	u64 run;          // ns on a CPU, up to the last switch (on_since adds the rest)
	u64 wait;         // ns runnable on a run queue, up to the last switch-in
	u64 slices;       // switch-ins
	u64 cpu;          // the CPU it last ran on
	u64 on_since;     // on a CPU since (ktime ns), 0 when not on one
	u64 queued_since; // runnable, waiting since (ktime ns), 0 when not
	u64 state;        // prev_state & 0xff at the last switch-out (0: runnable)
	u64 seeded;       // 1 while the entry holds only what user space seeded
};

// The keys past any tid (tids are below 2^22) count births and deaths of traced threads,
// so user space knows when to list the task directories again.
#define KEY_BIRTHS (1ULL << 32)
#define KEY_DEATHS ((1ULL << 32) + 1)

// prev_state bits: the report mask, and exited (X, Z).
#define STATE_MASK 0xff
#define STATE_EXITED (0x10 | 0x20)

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u64);
	__type(value, u64);
} targets SEC(".maps");

// 4096 entries: a batch read walks every bucket, full or empty (about 5 ns each), so the
// size is what a read costs. Threads past it are not counted here (user space reads them
// from /proc).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u64);
	__type(value, struct counters);
} counters SEC(".maps");

struct switch_args {
	u64 common;
	char prev_comm[16];
	int prev_pid;
	int prev_prio;
	long prev_state;
	char next_comm[16];
	int next_pid;
	int next_prio;
};

struct wakeup_args {
	u64 common;
	char comm[16];
	int pid;
	int prio;
	int target_cpu;
};

static __attribute__((always_inline)) void bump(u64 key)
{
	struct counters *c = bpf_map_lookup_elem(&counters, &key);
	if (c) {
		__sync_fetch_and_add(&c->run, 1);
		return;
	}
	struct counters one = { .run = 1 };
	bpf_map_update_elem(&counters, &key, &one, BPF_ANY);
}

SEC("tracepoint/sched/sched_switch")
int on_switch(struct switch_args *ctx)
{
	u64 now = bpf_ktime_get_ns();
	u64 cpu = bpf_get_smp_processor_id();
	u64 prev = (u32)ctx->prev_pid;
	u64 next = (u32)ctx->next_pid;
	struct counters *c;
	if (prev != 0 && (c = bpf_map_lookup_elem(&counters, &prev))) {
		if (c->on_since && now > c->on_since)
			c->run += now - c->on_since;
		u64 state = (u64)ctx->prev_state & STATE_MASK;
		c->on_since = 0;
		c->cpu = cpu;
		c->state = state;
		c->queued_since = state == 0 ? now : 0;
		c->seeded = 0;
		if (state & STATE_EXITED)
			bump(KEY_DEATHS);
	}
	if (next != 0 && (c = bpf_map_lookup_elem(&counters, &next))) {
		if (c->queued_since && now > c->queued_since)
			c->wait += now - c->queued_since;
		c->queued_since = 0;
		c->on_since = now;
		c->slices += 1;
		c->cpu = cpu;
		c->state = 0;
		c->seeded = 0;
	}
	return 0;
}

SEC("tracepoint/sched/sched_wakeup")
int on_wakeup(struct wakeup_args *ctx)
{
	u64 tid = (u32)ctx->pid;
	struct counters *c = bpf_map_lookup_elem(&counters, &tid);
	if (c && !c->on_since) {
		c->queued_since = bpf_ktime_get_ns();
		c->state = 0;
		c->seeded = 0;
	}
	return 0;
}

// Fires in the parent: a thread of a traced process creates a thread (same tgid) or a
// process (its child, which user space adopts when it follows children).
SEC("tracepoint/sched/sched_wakeup_new")
int on_wakeup_new(struct wakeup_args *ctx)
{
	u64 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!bpf_map_lookup_elem(&targets, &tgid))
		return 0;
	u64 tid = (u32)ctx->pid;
	struct counters c = {
		.cpu = (u64)(u32)ctx->target_cpu,
		.queued_since = bpf_ktime_get_ns(),
	};
	bpf_map_update_elem(&counters, &tid, &c, BPF_ANY);
	bump(KEY_BIRTHS);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
