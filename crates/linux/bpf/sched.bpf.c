// SPDX-License-Identifier: MIT OR GPL-2.0
//
// sched.bpf.c: per-thread run time, run-queue wait, timeslices, voluntary and involuntary
// switches, last CPU and state, kept by the scheduler's own tracepoints for the threads
// user space names, in an array user space maps into its memory and reads with no system
// call at all. Loaded by crates/linux/src/schedbpf.rs (feature `bpf`). Rebuild with
// ./build.sh, which also records the object's SHA-256 in sched.bpf.o.sha256; a test fails
// when the committed object does not match it.
//
//   slot of a thread = tid & (SLOTS − 1); the slot says whose it is (its `tid` field)
//   user space seeds a free slot from /proc (claims it: 0 ─► tid|CLAIM, writes, publishes tid)
//   sched_wakeup_new  parent's tgid in targets, slot free or stale ──► slot = 0, queued since now
//   task_newtask      a traced process starts a process ──► spawns += 1
//   sched_wakeup      slot's tid is this tid? ──► queued since now
//   sched_switch      prev's slot? ──► run += now − on_since; voluntary or involuntary += 1;
//                                      runnable? queued since now
//                     next's slot? ──► wait += now − queued_since; slices += 1; on_since = now
//
// Only threads that own their slot are counted, so membership is the array itself: a thread
// gets its slot when user space first sees it, or when a traced process creates it. Two
// managed threads whose tids share a slot: the second is left to /proc. A slot costs a
// switch an array index and one compare (no hash lookup), and a read one load per field.
// The tracepoint records are laid out as tracefs' `format` files give them; no vmlinux.h,
// no libbpf. Needs the BPF v3 instruction set (compare-and-exchange: Linux 5.12+).

typedef unsigned long long u64;
typedef unsigned int u32;

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_F_MMAPABLE (1U << 10)

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static u64 (*bpf_ktime_get_ns)(void) = (void *)5;
static u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;
static u32 (*bpf_get_smp_processor_id)(void) = (void *)8;

// Slots in the array (a power of two); the entry past them counts births and deaths.
#define SLOTS 16384
#define HEADER SLOTS

// One thread's counters; user space reads them as [u64; 10] in this order (little-endian:
// `tid` is the low half of word 0, `cpu` the low half of word 4).
struct counters {
	u32 tid;          // whose slot it is: 0 free; tid | CLAIM while user space seeds it
	u32 seq;          // odd while the program writes the slot (user space re-reads)
	u64 run;          // ns on a CPU, up to the last switch (on_since adds the rest)
	u64 wait;         // ns runnable on a run queue, up to the last switch-in
	u64 slices;       // switch-ins
	u32 cpu;          // the CPU it last ran on
	u32 state;        // prev_state & 0xff at the last switch-out (0: runnable)
	u64 on_since;     // on a CPU since (ktime ns), 0 when not on one
	u64 queued_since; // runnable, waiting since (ktime ns), 0 when not
	u64 voluntary;    // switch-outs while blocking (the kernel's nvcsw)
	u64 involuntary;  // switch-outs while runnable: preempted or yielding (nivcsw)
	u64 seeded;       // 1 while the slot holds only what user space seeded
};

// Set in a slot's tid while user space seeds it (tids stay below 2^22).
#define CLAIM (1U << 31)

// prev_state bits: the report mask, and exited (X, Z).
#define STATE_MASK 0xff
#define STATE_EXITED (0x10 | 0x20)

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u64);
	__type(value, u64);
} targets SEC(".maps");

// SLOTS + 1 entries of 80 bytes (1.25 MiB), mapped by user space: a read is a load from
// memory, whatever the number of threads; there are no buckets to walk.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOTS + 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, u32);
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

// The slot thread `tid` owns, or none.
static __attribute__((always_inline)) struct counters *slot_of(u32 tid)
{
	if (tid == 0)
		return 0;
	u32 key = tid & (SLOTS - 1);
	struct counters *c = bpf_map_lookup_elem(&counters, &key);
	if (!c || c->tid != tid)
		return 0;
	return c;
}

// The header's counters: births (run) and deaths (wait) of the traced processes' threads,
// every one of them, so user space lists the task directories again only when they
// change; and the processes they start (slices), so it looks for new children only then.
#define BIRTHS 0
#define DEATHS 1
#define SPAWNS 2

static __attribute__((always_inline)) void bump(int which)
{
	u32 key = HEADER;
	struct counters *h = bpf_map_lookup_elem(&counters, &key);
	if (!h)
		return;
	if (which == DEATHS)
		__sync_fetch_and_add(&h->wait, 1);
	else if (which == SPAWNS)
		__sync_fetch_and_add(&h->slices, 1);
	else
		__sync_fetch_and_add(&h->run, 1);
}

SEC("tracepoint/sched/sched_switch")
int on_switch(struct switch_args *ctx)
{
	u64 now = bpf_ktime_get_ns();
	u32 cpu = bpf_get_smp_processor_id();
	struct counters *c = slot_of((u32)ctx->prev_pid);
	if (c) {
		__sync_fetch_and_add(&c->seq, 1);
		if (c->on_since && now > c->on_since)
			c->run += now - c->on_since;
		u32 state = (u32)ctx->prev_state & STATE_MASK;
		c->on_since = 0;
		c->cpu = cpu;
		c->state = state;
		c->queued_since = state == 0 ? now : 0;
		// The kernel counts a switch as voluntary when the task blocks (a state other
		// than runnable, not preempted: preemption reports 0x100, masked off above).
		if (state)
			c->voluntary += 1;
		else
			c->involuntary += 1;
		c->seeded = 0;
		__sync_fetch_and_add(&c->seq, 1);
	}
	// A thread's last switch-out (X or Z): counted for every thread of a traced process,
	// with a slot or without (the switch runs in the exiting thread: current is prev).
	if ((u32)ctx->prev_state & STATE_EXITED) {
		u64 tgid = bpf_get_current_pid_tgid() >> 32;
		if (bpf_map_lookup_elem(&targets, &tgid))
			bump(DEATHS);
	}
	c = slot_of((u32)ctx->next_pid);
	if (c) {
		__sync_fetch_and_add(&c->seq, 1);
		if (c->queued_since && now > c->queued_since)
			c->wait += now - c->queued_since;
		c->queued_since = 0;
		c->on_since = now;
		c->slices += 1;
		c->cpu = cpu;
		c->state = 0;
		c->seeded = 0;
		__sync_fetch_and_add(&c->seq, 1);
	}
	return 0;
}

SEC("tracepoint/sched/sched_wakeup")
int on_wakeup(struct wakeup_args *ctx)
{
	struct counters *c = slot_of((u32)ctx->pid);
	if (c && !c->on_since) {
		__sync_fetch_and_add(&c->seq, 1);
		c->queued_since = bpf_ktime_get_ns();
		c->state = 0;
		c->seeded = 0;
		__sync_fetch_and_add(&c->seq, 1);
	}
	return 0;
}

// Fires in the parent: a thread of a traced process creates a thread (same tgid) or a
// process (its child, which user space adopts when it follows children). The child takes
// its slot when the slot is free, still names it (a tid used again), or names a thread
// that has exited; a slot another live thread owns leaves the child to /proc.
SEC("tracepoint/sched/sched_wakeup_new")
int on_wakeup_new(struct wakeup_args *ctx)
{
	u64 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!bpf_map_lookup_elem(&targets, &tgid))
		return 0;
	u32 tid = (u32)ctx->pid;
	if (tid == 0)
		return 0;
	// Counted whether or not the child gets a slot: user space lists the task
	// directories again, and looks for new child processes, when births change.
	bump(BIRTHS);
	u32 key = tid & (SLOTS - 1);
	struct counters *c = bpf_map_lookup_elem(&counters, &key);
	if (!c)
		return 0;
	u32 owner = c->tid;
	if (owner != tid) {
		// Free, or an exited thread's (its last switch-out said X or Z) and not being
		// seeded by user space right now (the claim bit): taken over.
		if (owner != 0 && ((owner & CLAIM) || !(c->state & STATE_EXITED)))
			return 0;
		if (__sync_val_compare_and_swap(&c->tid, owner, tid) != owner)
			return 0;
	}
	__sync_fetch_and_add(&c->seq, 1);
	c->run = 0;
	c->wait = 0;
	c->slices = 0;
	c->cpu = (u32)ctx->target_cpu;
	c->state = 0;
	c->on_since = 0;
	c->queued_since = bpf_ktime_get_ns();
	c->voluntary = 0;
	c->involuntary = 0;
	c->seeded = 0;
	__sync_fetch_and_add(&c->seq, 1);
	return 0;
}

struct newtask_args {
	u64 common;
	int pid;
	char comm[16];
	u64 clone_flags;
};

#define CLONE_THREAD 0x00010000

// Fires in the parent once the new task is linked in (so it is already among the parent's
// `children`): a traced process started another process.
SEC("tracepoint/task/task_newtask")
int on_newtask(struct newtask_args *ctx)
{
	if (ctx->clone_flags & CLONE_THREAD)
		return 0;
	u64 tgid = bpf_get_current_pid_tgid() >> 32;
	if (bpf_map_lookup_elem(&targets, &tgid))
		bump(SPAWNS);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
