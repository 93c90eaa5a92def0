// SPDX-License-Identifier: MIT OR GPL-2.0
//
// futex.bpf.c: per-thread futex wait time by operation and address, and wake edges, for
// the processes user space names in `targets`. Loaded by crates/linux/src/bpf.rs (feature
// `bpf`). Rebuild with ./build.sh, which also records the object's SHA-256 in
// futex.bpf.o.sha256; a test fails when the committed object does not match it.
//
//   sys_enter_futex / _futex_wait / _futex_waitv   (a wait starts)
//       tgid in targets? ── no ──► nothing
//         │ yes
//         └─► inflight[tid] = { now, uaddr, class }
//   sys_exit_futex / _futex_wait / _futex_waitv     (the wait ends)
//       inflight[tid]? ──► waits[{tgid:tid, uaddr, class}] += { now − start, 1 }
//                          woken (ret 0) and last_waker[{tgid, uaddr}] = w ──► edges[{w, tid}] += 1
//   sys_enter_futex (WAKE, WAKE_BITSET, UNLOCK_PI) / _futex_wake   (a wake)
//       wakes[{tgid:tid, uaddr, one or many}] += 1;  last_waker[{tgid, uaddr}] = tid
//
// Every key and value is made of u64s so that user space reads them without a layout of
// its own: a thread is tgid << 32 | tid.
//
// No vmlinux.h and no libbpf headers: the few helpers and map macros are declared here, and
// the tracepoint records are laid out as tracefs' `format` files give them (x86-64 and
// every 64-bit architecture: args at offset 16, 8 bytes each; the exit value at 16).

typedef unsigned long long u64;
typedef unsigned int u32;
typedef long long s64;

#define SEC(name) __attribute__((section(name), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_LRU_HASH 9
#define BPF_ANY 0

static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
				   u64 flags) = (void *)2;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)3;
static u64 (*bpf_ktime_get_ns)(void) = (void *)5;
static u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;

// Futex commands (op & FUTEX_CMD_MASK).
#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define FUTEX_LOCK_PI 6
#define FUTEX_UNLOCK_PI 7
#define FUTEX_WAIT_BITSET 9
#define FUTEX_WAKE_BITSET 10
#define FUTEX_WAIT_REQUEUE_PI 11
#define FUTEX_LOCK_PI2 13
#define FUTEX_CMD_MASK (~(128 | 256))

// Wait classes; the order is user space's `WaitOp`.
#define CLASS_WAIT 0
#define CLASS_WAIT_BITSET 1
#define CLASS_LOCK_PI 2
#define CLASS_WAIT_REQUEUE_PI 3
#define CLASS_FUTEX_WAIT 4
#define CLASS_FUTEX_WAITV 5

// Wake kinds.
#define WAKE_ONE 0
#define WAKE_MANY 1

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

struct inflight {
	u64 start;
	u64 uaddr;
	u64 class;
};

// targets: tgid → 1, filled by user space.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u64);
	__type(value, u64);
} targets SEC(".maps");

// inflight: thread → the wait it is in.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u64);
	__type(value, struct inflight);
} inflight SEC(".maps");

// waits: { thread, uaddr, class } → { wait ns, count }.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64[3]);
	__type(value, u64[2]);
} waits SEC(".maps");

// wakes: { thread, uaddr, kind } → count.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64[3]);
	__type(value, u64);
} wakes SEC(".maps");

// last_waker: { tgid, uaddr } → the thread that last woke it.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u64[2]);
	__type(value, u64);
} last_waker SEC(".maps");

// edges: { waker thread, woken thread } → count.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64[2]);
	__type(value, u64);
} edges SEC(".maps");

// dropped[0]: updates lost because a map was full.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} dropped SEC(".maps");

static __attribute__((always_inline)) int traced(u64 pid_tgid)
{
	u64 tgid = pid_tgid >> 32;
	return bpf_map_lookup_elem(&targets, &tgid) != 0;
}

static __attribute__((always_inline)) u64 thread_of(u64 pid_tgid)
{
	// bpf_get_current_pid_tgid is tgid << 32 | tid already.
	return pid_tgid;
}

static __attribute__((always_inline)) void lost(void)
{
	u32 zero = 0;
	u64 *n = bpf_map_lookup_elem(&dropped, &zero);
	if (n)
		__sync_fetch_and_add(n, 1);
}

static __attribute__((always_inline)) void add_u64(void *map, const void *key, u64 by)
{
	u64 *v = bpf_map_lookup_elem(map, key);
	if (v) {
		__sync_fetch_and_add(v, by);
		return;
	}
	if (bpf_map_update_elem(map, key, &by, BPF_ANY) != 0)
		lost();
}

static __attribute__((always_inline)) void wait_begins(u64 uaddr, u64 class)
{
	u64 id = bpf_get_current_pid_tgid();
	if (!traced(id))
		return;
	u64 t = thread_of(id);
	struct inflight w = { .start = bpf_ktime_get_ns(), .uaddr = uaddr, .class = class };
	bpf_map_update_elem(&inflight, &t, &w, BPF_ANY);
}

static __attribute__((always_inline)) void wake(u64 uaddr, u64 many)
{
	u64 id = bpf_get_current_pid_tgid();
	if (!traced(id))
		return;
	u64 t = thread_of(id);
	u64 key[3] = { t, uaddr, many };
	add_u64(&wakes, key, 1);
	u64 addr[2] = { id >> 32, uaddr };
	bpf_map_update_elem(&last_waker, addr, &t, BPF_ANY);
}

static __attribute__((always_inline)) void wait_ends(s64 ret)
{
	u64 id = bpf_get_current_pid_tgid();
	u64 t = thread_of(id);
	struct inflight *w = bpf_map_lookup_elem(&inflight, &t);
	if (!w)
		return;
	u64 now = bpf_ktime_get_ns();
	u64 ns = now > w->start ? now - w->start : 0;
	u64 key[3] = { t, w->uaddr, w->class };
	u64 *v = bpf_map_lookup_elem(&waits, key);
	if (v) {
		__sync_fetch_and_add(&v[0], ns);
		__sync_fetch_and_add(&v[1], 1);
	} else {
		u64 init[2] = { ns, 1 };
		if (bpf_map_update_elem(&waits, key, init, BPF_ANY) != 0)
			lost();
	}
	if (ret == 0 && w->class != CLASS_FUTEX_WAITV) {
		u64 addr[2] = { id >> 32, w->uaddr };
		u64 *waker = bpf_map_lookup_elem(&last_waker, addr);
		if (waker && *waker != t) {
			u64 edge[2] = { *waker, t };
			add_u64(&edges, edge, 1);
		}
	}
	bpf_map_delete_elem(&inflight, &t);
}

SEC("tracepoint/syscalls/sys_enter_futex")
int futex_enter(struct sys_enter *ctx)
{
	u64 uaddr = ctx->args[0];
	int cmd = (int)ctx->args[1] & FUTEX_CMD_MASK;
	u64 val = ctx->args[2];
	switch (cmd) {
	case FUTEX_WAIT:
		wait_begins(uaddr, CLASS_WAIT);
		break;
	case FUTEX_WAIT_BITSET:
		wait_begins(uaddr, CLASS_WAIT_BITSET);
		break;
	case FUTEX_LOCK_PI:
	case FUTEX_LOCK_PI2:
		wait_begins(uaddr, CLASS_LOCK_PI);
		break;
	case FUTEX_WAIT_REQUEUE_PI:
		wait_begins(uaddr, CLASS_WAIT_REQUEUE_PI);
		break;
	case FUTEX_WAKE:
	case FUTEX_WAKE_BITSET:
		wake(uaddr, val > 1 ? WAKE_MANY : WAKE_ONE);
		break;
	case FUTEX_UNLOCK_PI:
		wake(uaddr, WAKE_ONE);
		break;
	default:
		break;
	}
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex")
int futex_exit(struct sys_exit *ctx)
{
	wait_ends(ctx->ret);
	return 0;
}

// futex_wait(uaddr, val, mask, flags, timeout, clockid)
SEC("tracepoint/syscalls/sys_enter_futex_wait")
int futex_wait_enter(struct sys_enter *ctx)
{
	wait_begins(ctx->args[0], CLASS_FUTEX_WAIT);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex_wait")
int futex_wait_exit(struct sys_exit *ctx)
{
	wait_ends(ctx->ret);
	return 0;
}

// futex_waitv(waiters, nr_futexes, flags, timeout, clockid): several addresses at once;
// the array's address stands for them.
SEC("tracepoint/syscalls/sys_enter_futex_waitv")
int futex_waitv_enter(struct sys_enter *ctx)
{
	wait_begins(ctx->args[0], CLASS_FUTEX_WAITV);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex_waitv")
int futex_waitv_exit(struct sys_exit *ctx)
{
	wait_ends(ctx->ret);
	return 0;
}

// futex_wake(uaddr, mask, nr, flags)
SEC("tracepoint/syscalls/sys_enter_futex_wake")
int futex_wake_enter(struct sys_enter *ctx)
{
	wake(ctx->args[0], ctx->args[2] > 1 ? WAKE_MANY : WAKE_ONE);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
