//! `speed`: speed balancing (Hofmeyr, Iancu, Blagojević, PPoPP 2010) for M cores: every
//! thread of a program gets the same share of time on the less loaded cores, planned
//! centrally, so that threads meeting at barriers make equal progress; and a guard that
//! gives the threads back to Linux when Linux does better.
//!
//! **What the paper balances.** With N threads on M < N cores, T = ⌊N/M⌋, the k = N mod M
//! *slow* cores hold T + 1 threads and the others T. Under a per-core fair scheduler a
//! thread on a slow core runs at 1/(T+1), on a fast one at 1/T. In a program that meets at
//! a barrier every S ms, the slow cores gate every phase unless the doubling *rotates
//! within the phase*. The paper rotates with one balancer per core that, every interval,
//! pulls one thread from a slow core to a fast one; Lemma 1 counts 2·⌈SQ/FQ⌉ such steps
//! before every thread has run fast once. That count grows with the number of slow cores:
//! with 24 threads on 16 cores, eight slow cores, and one pull per core per interval plus
//! the two-interval post-migration block, the rotation does not finish inside a 10 ms
//! phase. Pulls also change the thread counts (3 + 1 from 2 + 2) when per-window speeds
//! are noisy, which is what makes distributed pulling thrash when N is a multiple of M.
//!
//! **The rotation (this design).** One planner sees every thread. Each thread carries a
//! *credit*: the time it was not held back (running, or not wanting a CPU: the window
//! minus its run-queue wait) minus the mean over the program's threads, summed over
//! windows and decayed with a 20 ms time constant — how far ahead of the others it is.
//! (Time asleep counts as not held back, so a pipeline stage that waits for work does not
//! look behind; the short decay keeps a lead earned asleep at a barrier from following a
//! thread into later phases.) Every round (one balance interval B) the planner, within
//! each NUMA node:
//! 1. measures each core's speed over the round: its threads' CPU time over the time they
//!    wanted a CPU, summed over the core's threads (so a 2 ms round is not at the mercy of
//!    which of two threads held a 3 ms slice: their sum is exact);
//! 2. levels the counts: while a core holds two threads more than another and is slower
//!    than `T_s` = 0.9 of it, the thread with the least credit on the fullest core moves to
//!    the emptiest;
//! 3. if all cores hold the same number of threads (N a multiple of M; N ≤ M does not
//!    get here, see below), stops: even pinning is already optimal, and moving only
//!    costs;
//! 4. if the heavy cores (T + 1 threads) are not slower than 0.9 of the light ones (T
//!    threads), stops too: their threads sleep or do not compete, and a rotation fixes
//!    nothing;
//! 5. otherwise pairs the heavy cores' threads, least credit first, with the light cores'
//!    threads, most credit first, and swaps each pair while the light thread is ahead:
//!    y − x > 0. When the threads block (the synchronization signals give a phase) and do
//!    equal work (barrier peers), a heavy core's thread *held back now* (it waited for
//!    its CPU through at least half of the last window) comes first and swaps whatever
//!    the credits say (see "Held back now" below). Counts never change. At
//!    most a quarter of the node's cores (at least 8) swap per round, the best pairs
//!    first: with 24 threads on 16 cores every one of the eight heavy cores hands a thread
//!    over each round. A round that comes k periods late (a live loop held to its CPU
//!    budget) may swap k times as many: with 96 threads on 64 cores, paced to a round
//!    every ~25 ms against 1 ms asked, a quarter of the cores a round turned over only
//!    half of the 32 heavy cores, and with 100 ms blocking phases `speed` ran 1.045×
//!    Linux's time; every heavy core a round, 0.944× (simulated).
//!
//! ```text
//!   window ─► credit_i ← credit_i·e^(−dt/τ) + (free_i − mean_j free_j),  free = dt − wait
//!                 │
//!   every B:  heavy cores (T+1 threads)  x₁ ≤ x₂ ≤ …   (credit, ascending)
//!             light cores (T threads)    y₁ ≥ y₂ ≥ …   (credit, descending)
//!             swap (xᵢ, yᵢ) while yᵢ − xᵢ > 0  ─► 1 move per pair (xᵢ's core-mate
//!             joins yᵢ) where heavy cores hold 2 and light ones 1, else 2 moves
//!             (threads that block: the xᵢ held back now first, swapped whatever yᵢ − xᵢ)
//! ```
//!
//! **One move a swap.** Where the heavy cores hold two threads and the light ones one
//! (M < N < 2M: 17–31 threads on 16 cores, 3 on 2), heavy core x+z and light core y
//! end a swap of x and y as z+y and x. Moving z to y's core ends with the same threads
//! sharing, by one move: x stays, alone now. Only where neither core was changed by an
//! earlier move of the round (then the swap is two moves, as before), and not where the
//! window's waits may be reported late (`Window::waits_late`, `schedstat`'s counters):
//! there z has just waited behind x, and sent onto y's busy core it would wait again, its
//! wait reported later still, where a swap gives the thread that waited a core of its
//! own (3 threads on 2 cores, 10 ms yield phases: 0.953× Linux's time against 0.930–0.935×
//! with swaps, simulated). The kernel lets the thread moved onto y's core preempt y,
//! which has run past its slice (`move_queued_task` calls `wakeup_preempt`), so z, the
//! one behind, runs first, as y would have waited behind z after a swap. The rounds'
//! moves fall by 25–50 % (the moved thread's refill and the tool's CPU time with them)
//! and against swaps the fair share is the same or better where the tick is fine:
//! simulated, 16 cores, seeds 1–3, free ticks, 24 threads 91.9–92.5 → 92.9–93.3 % with
//! 10 ms yield phases and the OpenMP stencil at 100 ms sweeps 94.8–95.1 → 96.1–96.2
//! (Linux 96.1–96.9); paced by the BPF counters' tick at HZ 1000, 24 threads with 10 ms
//! blocking phases 89.7–91.1 → 91.4–92.5. At HZ 250, where a paced round (~3.4 ms) is
//! shorter than a tick, 24 threads lose about a point against swaps (yield 90.3–90.5 →
//! 89.3–89.5 %) and 20 threads gain 1–2 (see "One move a swap" in
//! `docs/speed-rules.md`).
//!
//! **Held back now.** The credit is a memory of 20 ms; with blocking phases of a few
//! milliseconds it says who was ahead over the last phases, not who is stuck in this one.
//! At a blocking barrier both threads of a heavy core wake together, one runs its whole
//! phase in one kernel slice (3 ms) and the other waits. When the waiting one had been
//! ahead (lone cores in the phases before), its credit kept it off the swap list, and it
//! waited out the whole phase while the rounds swapped others: simulated, 16 cores, 20
//! threads with 3 ms blocking phases, 62 of 332 phases took 5.75 ms or more (the bound is
//! 3.75), none with yield barriers. A thread that waited for its CPU through at least half
//! of the last window (`HELD`) is held back now, whatever it earned before: it goes first
//! and is swapped with the light thread of most credit. Only when the threads block: a
//! yielding thread that waits on a shared core may have finished its phase and be
//! spinning at the barrier, and its wait says nothing of its work (with yield barriers the
//! rule cost up to 8 points at 10 ms phases). And only while they do equal work (CPU
//! shares within 15 %, `fine::equal_work`): a pipeline's stages are not peers, and
//! `two-stage-pipeline` on 2 cores ran up to 1 % longer with the rule. And only while a
//! thread's work between two blocking points (`work_phase_ns`) is shorter than the
//! credit's memory: with longer phases the credit is this phase's own account, and it
//! decides. The phase on the wall clock (`phase_ns`) cannot tell: it counts every switch,
//! and where rounds are shorter than a kernel tick (HZ 250) each round's arrival preempts,
//! so 3 threads on 2 cores with 100 ms blocking phases and rounds every 2 ms read a 3 ms
//! phase. There one thread of the shared core has always waited through the last round;
//! put first every round, it left the credit no say, and a thread behind by its credit
//! waited every third round all the same, up to 25 ms of a 150 ms phase (simulated:
//! 95.8 % of the fair share, 98.4–98.6 with the test; see "Held back now" in
//! `docs/speed-rules.md`).
//!
//! So the whole rotation is planned each round, whatever the number of slow cores: with 17
//! threads on 16 cores, both doubled-up threads are replaced every round and no thread
//! spends much more than B of a phase doubled. How much more depends on the kernel's slice:
//! when it is longer than B (3 ms on 16 cores), one of the two threads on a shared core
//! usually runs all round and the other none, so a turn costs a thread the whole round and
//! a 10 ms phase takes about 10 + B ms plus the tail instead of 20. Hence the 1 ms floor
//! (below): in the simulator 17 threads reach 86 % of the fair share with yield barriers at
//! B = 2 ms and 92 % at B = 1 ms (see the README). The margin of the swap
//! was −½ of a round's loss (swap unless the light thread is clearly behind) until the
//! simulator's Linux model learned the 16-core kernel: there a zero margin rotates a third
//! fewer threads at 17 threads on 16 cores for the same or better progress, and gains
//! 1–2 points with 3 threads on 2 cores (seeds 1–3). The credit is not reset by noise: a
//! thread that ran a whole slice in one window and none in the next has the same credit
//! two windows later. Every thread, at first sight or later, goes to the core with the
//! fewest threads, ties to the node and then the LLC with the fewest threads per core: so
//! the first window is a round-robin that spreads over nodes and LLCs in proportion to
//! their cores.
//!
//! **Nodes and LLCs.** Each node rotates its own threads, so the spread is what gives every
//! node heavy and light cores to rotate between: filled in core order, 24 threads on two
//! 8-core nodes were 16 + 8, two a core and one a core, and nothing rotated (simulated,
//! 10 ms yield phases: `speed` 2.065 s, Linux 2.069; spread, 1.634). Counts that drift
//! apart later (threads exit, or sleep and go back to Linux, on one node) are levelled one
//! thread a round, where giving the emptier node a thread leaves the fuller one at least as
//! full per core and its fullest core is measurably slower (`rotate.rs::level_nodes`): a
//! one-off move across nodes where Linux's balancer would make one too, never a rotation.
//! Without it, 20 threads on two 4-core nodes whose node-1 threads mostly exited left one
//! core idle beside 10 threads on 4 and ran 1.34× Linux's time (simulated). Within a node, a heavy
//! thread swaps with the light thread of most credit *behind its own LLC* when that one is
//! ahead of it, and with the node's best light thread only otherwise. With LLCs evenly
//! loaded (24 threads on two 8-core LLCs, 12 + 12) every turn then stays within an LLC and
//! refetches only the private caches; a turn across LLCs also refetches the thread's share
//! of the LLC, which for working sets of megabytes costs about as much as the turn gains
//! (simulated, 16 MiB a thread, 24 threads: placed in core order and paired across the
//! node, `speed` took 1.43× Linux's time; spread and paired behind LLCs, 0.98×). The
//! partner behind the heavy thread's LLC must be among the round's best light threads (as
//! many as may swap); where one LLC holds more threads per core than the others (17 on 9 + 8) its
//! threads fall behind theirs until none of its own ranks there, and only then are the
//! others reached. That costs 0.6–2 % against global pairs with small working sets (the
//! trade is measured in the README of the simulator).
//!
//! **Siblings.** Speed's own level is the logical CPU ([`crate::PolicyKind::default_level`]):
//! the kernel's run queue, on one socket or two, with SMT or without. A core's hardware
//! threads are *siblings*, and a thread whose sibling runs is slowed (the simulator's
//! `smt_factor`, 1.3 for its generic machine; the shared pipeline on real hardware), which
//! the CPU shares the rotation reads never show. Where queues are siblings (the CPU level on
//! an SMT machine; `Queue::core`), three rules keep every core as evenly loaded as every
//! CPU: placement takes the emptiest CPU of the emptiest core (`Speed::emptiest`), so 8
//! threads on 8 cores × 2 get a core each and 24 get three a core (one CPU doubled, its
//! sibling single); levelling moves from the fullest CPU of the fullest core to the
//! emptiest CPU of the emptiest core; and a one-move swap that would take a thread off one
//! core onto a core at least as full (24 threads, every core three: four and two after it,
//! the two of the emptied core then idle at a blocking barrier while the other core's four
//! run slowed) is an exchange instead, and where every core holds as many threads as every
//! other a heavy thread is paired with its sibling's thread first (a move within a core,
//! whose caches it shares). Where the cores are uneven (17 threads on 16 CPUs: one core of
//! three) the extra thread rotates over the emptier cores as before. Without SMT every
//! queue is its own core and none of this applies: the CPU level is the core level.
//!
//! **Why the old distributed balancers thrashed at N = 2M.** Each core's balancer judged
//! "slow" from per-thread speeds over its own span (2–4 ms), and counted only threads that
//! showed a speed. With 2 ms windows shorter than a slice, and a running thread's run time
//! advancing only at ticks or switches (`schedstat` reports the kernel's last update), a
//! span can show a thread that did not seem to want a CPU at all: that core then counted
//! one thread fewer, looked fast, and pulled from a neighbour — turning 2 + 2 into 3 + 1,
//! which is really slow and makes the next pull likely. That is the likeliest reading of
//! the 900 moves/s and 2.8× run time measured on 16 cores with 32 yield-spinning threads
//! (not verified there). The planner works from the counts it placed, which noise cannot
//! change, and from speeds summed per core over a round, and does nothing when the counts
//! are even.
//!
//! **Moves that do not raise progress back off.** A thread swapped onto a light core
//! should then run faster than it did before (1/T against 1/(T+1)). At the next round the
//! planner compares each moved thread's *speed*, its CPU time over the time it wanted a
//! CPU (not over the round: a thread moved to a light core that then sleeps at a blocking
//! barrier ran at full speed while it ran, though its share of the round fell), skipping
//! a thread that wanted a CPU less than 5 % of either round: when fewer than half of
//! the judged threads sped up by 10 %,
//! the rotation's period doubles (up to `max_interval`); the first round in which they did
//! brings it back to B. This is what stops the rotation when cores differ for reasons it
//! cannot fix (another program on a core, threads that do not compete).
//!
//! **Why the interval adapts.** A rotation step must be short against the phase. The
//! interval B is chosen from the program's synchronization signals:
//!
//! | signal (per running thread, smoothed over ~200 ms) | meaning | interval B |
//! |---|---|---|
//! | involuntary switches ≥ 2000/s | threads spin with `sched_yield` at synchronization points: phases finer than we can see | `min_interval` (1 ms) |
//! | context switches r/s (voluntary + involuntary) | threads block, yield or are preempted about once per phase: phase P ≈ 1/r | P / 16, clamped to [`min_interval`, `max_interval`] |
//! | neither | no synchronization seen | `max_interval` (100 ms, the paper's) |
//!
//! Context switches come from `status`, which a host may not read (it is the costliest
//! file); then every timeslice (each time a thread was given a CPU: its wake-ups plus its
//! preemptions, from `schedstat`) stands in for both counts. When the counts are even, the
//! interval backs off (×1.5 per round, up to `max_interval`) after 16 rounds: nothing is
//! being rotated, so there is nothing to sample often for. `Settings::interval` fixes B.
//!
//! Two rules keep the first rounds short. The signals are averaged over the windows seen
//! until those cover the 200 ms, then exponentially: an average started from zero would
//! believe a program's first phases only after ~200 ms (one switch per 10 ms phase would
//! read as 5/s after the first phase, a 200 ms phase, 12.5 ms rounds). And while the
//! rotation runs, B follows the signals down at once but up by at most ×1.5 a round: the
//! first rounds, before any phase has ended, see no synchronization and ask for 100 ms,
//! which followed at once left the doubled-up threads in place for the first 100 ms of a
//! run (a tenth of a one-second run at half speed).
//!
//! The floor is what the policy asks for, not a promise. A live host paces its ticks by a
//! CPU budget (0.8 % of a core), so rounds of 1 ms happen only where a tick costs under
//! 8 µs; elsewhere the rounds are as short as the budget allows, and the rotation is as good
//! as that length (2 ms: 86 % at 17 threads in the simulator, against 92 % at 1 ms).
//!
//! **Threads that mostly sleep are given back to Linux** (blocked more than 40 % of the
//! time, placed again below 25 %): they do not compete for cores, and pinning them costs
//! work conservation; a thread that has not run since it was first seen (a main thread
//! waiting in `join`) goes back after 20 ms, so it does not hold up a core's count while
//! its average catches up. Barrier peers are not sleepers: while the placed threads that
//! ran do equal work and are blocked 40 % or less on average, one that sleeps more than
//! that for a while (it sat on lone cores) stays placed (`speed/peers.rs`). **Threads
//! that are not CPU-bound peers go back to Linux
//! together** (`speed/peers.rs`): when the placed threads' duty cycles (blocked fraction
//! over about a second) differ by more than 0.2 *and* their CPU shares by more than 15 %,
//! for 150 ms, pinning them would cost more than any rotation wins (`uneven`, pipelines),
//! so every thread is Linux's for a stint of 4 s, doubling each time. Barrier peers differ
//! in duty cycle while the rotation has not evened them out (the doubled-up thread is the
//! slow one and waits least), never in CPU share: they all do the same phases. The duty
//! cycles and CPU shares count only while a thread is placed, from the end of its first
//! window there: time with Linux is Linux's placement, and the first window is the
//! start-up interval (up to 100 ms), which a live run showed with one worker idle through
//! it, outweighing all that came after for longer than the test waits.
//!
//! **Wait reported late is taken off what read as blocked.** `schedstat` adds a queued
//! thread's run-queue wait only when it runs again, and brings a running thread's run time
//! up to date only when its CPU's clock is, so over the windows a thread waits behind its
//! core's other thread it shows neither and reads as blocked, and as free; then the wait
//! arrives at once, more than its window can hold. The window reports that excess
//! (`ThreadRates::late`, `late_wait`), and the policy takes it off the blocked averages
//! and the credits, and adds the wait to the time the thread wanted a CPU. Without it, 3
//! threads on 2 cores under the kernel's counters (the simulator's
//! `Linux::schedstat_at_ticks`, seeds 1–3) were released as sleepers 2–12 times a run,
//! and `speed` took 0.998–1.014× Linux's time with 10 ms blocking phases and 0.956–0.966×
//! with yield ones; now at most one is released and the times are 0.981–0.995× and
//! 0.926–0.935×. With exact counters (the simulator's default) nothing changes.
//!
//! **No more busy threads than cores: none is pinned** (`speed/few.rs`). With N ≤ M the
//! counts are even and nothing rotates, and pinning one thread per core only takes from
//! Linux its work conservation next to the program's other threads (a pipeline's stages
//! that mostly wait, a main thread). So the busy threads are *lent* to Linux — at first
//! sight not placed at all — and placed again as soon as they outnumber the cores.
//!
//! **Phases finer than any round: barrier waiters are peers** (`speed/fine.rs`). When the
//! switches of blocking threads give a phase shorter than `min_interval` (an OpenMP loop
//! with a barrier every 0.13 ms), a thread blocked past 40 % is waiting at barriers, not
//! idle: it stays placed, the counts stay even and nothing is swapped, as pinning holds them.
//!
//! **Rounds too sparse for the phases: the threads are lent too** (`speed/sparse.rs`).
//! Where the host's CPU budget holds the rounds back to more than 1.5 phases apart (phases
//! of work read from blocking threads: a third of their switches voluntary, or asleep 5 %
//! of the time and more), a rotation cannot help and the pinning between
//! rounds takes Linux's work conservation away: every placed thread is lent to Linux until
//! rounds come within 0.8 phases again. Where the host says its budget allows a round only
//! every 100 ms or more (`Window::pace`) and the counts would rotate, the threads are lent
//! at once and looked at for one such round before they are placed again, rather than
//! pinned until the rounds show it.
//!
//! **Short slices** (Linux 6.12+). A round that comes every G ms leaves a thread moved to a
//! shared core there for G; but the thread already there is usually mid-slice, and the
//! kernel's slice is about 3 ms from 8 CPUs (0.7–0.75 ms × (1 + log₂ min(ncpu, 8)); 1.4 ms
//! on the 2-core VM's Linux 6.18), so with G of
//! 2–3 ms the newcomer often waits out the whole round and leaves again without its turn
//! (and by the same token the least credited there, it is the one sent back, while the
//! thread it joined stays: on 2 cores one worker was seen holding the shared core for a
//! whole run). While the rotation runs and the smoothed gap between rounds is within
//! 1.5–3.5 ms (once on, within 1.2–4.5 ms), every placed thread runs in 0.5 ms slices
//! (`sched_setattr`'s `sched_runtime`; `Plan::slices`), so the two threads of a shared
//! core take turns within the round: at HZ 1000 at every tick, and at any HZ a thread
//! moved in may take the CPU at once, its partner's slice being over. Released, lent or no
//! longer rotating, a thread gets its own slice back. The band is what the simulator
//! measured (16 cores, HZ 1000, 10 ms phases, 17–24 threads, seeds 1–3, `speed` against
//! `speed-long-slices`): rounds every 2–3 ms ran 0.91–0.99× the time, every 4–10 ms
//! 0.87–1.06× (a thread moved in gets its turn within a longer round anyway, and the extra
//! switches cost), and every 1 ms (free ticks) the rotation turns a doubled thread over
//! before any slice matters, while the extra switches cost memory-bound threads with
//! large working sets 2 % (24 threads, 16 MiB each, two 8-core LLCs: 0.991 → 1.015 s
//! against Linux's 1.012). With the BPF counters' tick paced as a live loop (a round
//! every ~3 ms) 17 threads reach 85–87 % of the fair share instead of 79–80 %, 20
//! threads 90–91 % instead of 87–89 %, 24 threads 89–91 % instead of 88–89 %. Preemptions
//! of threads running in our slices on a shared core are left out of the involuntary
//! switch rate that decides whether threads block, while other threads speak for it: they
//! are ours, not the program's, and counted they made blocking barriers read as yielding
//! ones (the yield and phase rates keep them: a yield on a shared core is an involuntary
//! switch too, and a thread alone on its core yields without one). The host puts slices back as it puts masks back, journal included
//! (`threadbalance_linux::slice`); `SpeedSettings::short_slices` turns them off.
//!
//! **Credits in paced rounds.** The credits forget with a time constant of 20 ms: a few
//! phases of a fine-grained program, twenty rounds of 1 ms. When the host holds the rounds
//! back (a live loop held to its CPU budget: a round every ~3 ms at 17–24 threads with the
//! BPF counters' tick), 20 ms is six or seven rounds, and the credit still counts turns on
//! the shared cores that later rounds have made up for. So while the rounds are held back
//! (`sparse`'s test: the smoothed gap, or the last two gaps, over twice the period asked)
//! the time constant is two smoothed gaps when that is shorter: a thread's credit is
//! about what the last two rounds did to it. Free ticks keep 20 ms (every free-tick figure
//! is unchanged): there a short constant lost up to 1.3 points of the fair share on the
//! 100 ms rows. Swept in the simulator (16 cores, the BPF tick, seeds 1–3) at 1, 1.5, 2
//! and 3 gaps, at HZ 1000 and HZ 250: 1–1.5 gaps gained most at 10 ms phases at HZ 1000
//! but lost 0.9–3.4 points summed over the rows at HZ 250 (100 ms phases: up to 2.8 on
//! one row); 2 gaps gained at both. With it, at HZ 1000, 20 and 24 threads reach
//! 90.6–91.8 % at 10 ms phases (89.1–91.3 before) and the 100 ms rows move by −0.3…+0.3;
//! at HZ 250, 24 threads gain 1.3–2.6 points at 10 ms phases, and the 100 ms rows lose up
//! to 1.2. Rounds 10 ms apart and more keep 20 ms. See "Credits in paced rounds" in
//! `docs/speed-rules.md`.
//!
//! **Rounds bought.** A live host holds its ticks to 0.8 % of one core, so a tick of
//! 25 µs (the BPF counters' on this VM, 17–24 threads) allows a round every ~3 ms, and a
//! round's gap is what a phase loses ("Where a paced phase goes" in
//! `docs/speed-rules.md`): 17 threads on 16 cores with 10 ms phases read 80 % of the fair
//! share at HZ 250 and 85–87 % at HZ 1000. The ticks cost the same on any machine; the
//! rounds serve every core the rotation turns over. So while the rotation turns (it has
//! rotated, and fewer than `QUIET_ROUNDS` rounds in a row found nothing to swap), or the
//! threads are lent or looked at for sparse rounds, `speed` asks the host
//! (`Policy::watch_budget`) to watch within 0.16 % of one core per core turned over, at
//! most 2.5 % (16 cores and more: a 25 µs tick every millisecond, the rounds' floor).
//! Up to 5 cores that is no more than the default, and nothing is asked: on the 2-core
//! machine the default's 0.8 % of one core is already 0.4 % of the machine, where 2.5 %
//! is 0.16 % of 16 cores. Not where the threads block between phases of 25 ms of work or
//! more (CPU time per voluntary switch, read wherever they block at all): there Linux's
//! own pull at each phase's end does much of a rotation's work, and more rounds mean more
//! moves, each refilling the moved thread's caches, which no CPU-time measure sees (24
//! threads with 100 ms phases half memory-bound ran 4.0–4.3 % slower than Linux with
//! the rounds bought, 1.5–1.7 % without). An operator's whole budget (`--cpu-budget`)
//! stands. Simulated, 16 cores, the BPF tick, seeds 1–3: 17 threads with 10 ms phases
//! 80 → 92 % at HZ 250 and 85–87 → 92 % at HZ 1000, 20 and 24 threads 87–92 → 92–94 %;
//! the moves a second rise with the rounds (24 threads 2,400 → 6,000–7,000). Measured on
//! 2 cores with a flat 2.5 % (real, the VM, five pairs each): +1 to +1.5 points at 10 ms
//! phases, −0.8 to −1.2 at 100 ms, the tool at 1.5–4.6 % of one core instead of
//! 1.3–1.6 % (on 2 cores the tool's own CPU time is taken from the program). See "Rounds
//! bought" in `docs/speed-rules.md`.
//!
//! **The guard** ([`guard`]) compares the program's progress rate — the CPU share of its
//! slowest busy thread — over the tail of a managed stretch with a short probe in which Linux
//! places every thread, and hands the threads back when the probe does 5 % (and 2 points
//! of a core) better;
//! management is then tried again after a back-off that doubles with every loss. A managed
//! rate at 90 % of the fair share or more skips the probe, and so do threads evenly pinned
//! (N a multiple of M) that progress alike (the slowest at 97 % of their mean or more):
//! no placement betters that. When the threads come back
//! (after a probe Linux lost, or a trial), a round runs at once from the shortest
//! interval: the rounds under Linux rotated nothing and had backed the interval off. The
//! policy's summary says when and why it handed back. The guard lives inside the policy rather than as a wrapper
//! around any policy because resuming means placing every thread again where the policy
//! keeps it, which only the policy knows; a wrapper would need every policy to replay its
//! placement on demand.
//!
//! Per tick the policy walks the window once, merging it with its own key-sorted table of
//! placed threads; buffers (the round's candidate lists too) are reused, so ticks at 1–2 ms
//! allocate only the plan's moves once the thread set is stable. One decision costs about
//! 5 µs with 64 threads and 0.1 ms with 1024 (`benches/speed.rs`).
//!
//! Where things are: this file holds the settings, the state and the tick (`decide`);
//! `speed/track.rs` keeps the books of each thread window by window (placement, run and
//! wait time, sleepers, credits); `speed/signals.rs` reads the synchronization signals and
//! picks the interval; `speed/rotate.rs` is the round (the rotation and the guard's
//! steps); `few`, `peers`, `fine`, `sparse` and `guard` are the rules above.

mod few;
mod fine;
pub mod guard;
mod peers;
mod signals;
mod sparse;
mod track;

use crate::{Policy, PolicyError, Settings};
use guard::Guard;
use signals::follow;
use threadbalance_model::{
    Level, Nanos, NodeId, Plan, PolicySummary, SpeedSummary, Target, ThreadKey, Topology, Window,
};

/// Settings of the `speed` policy.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeedSettings {
    /// Whether the rotation may move threads across NUMA nodes (blocked by default, as in
    /// the paper's §6.4): then every node rotates its own threads.
    pub allow_numa: bool,
    /// Shortest balance interval the adaptation may choose (1 ms). What the policy asks
    /// for, not a promise: a live host paces its ticks by a CPU budget, so rounds this
    /// short happen only where a tick is cheap enough.
    pub min_interval: Nanos,
    /// Longest balance interval, where it backs off to (100 ms, the paper's fixed value).
    pub max_interval: Nanos,
    /// Whether the guard may hand the threads back to Linux (see [`guard`]).
    pub guard: bool,
    /// Whether the threads it rotates run in short time slices (see "Short slices" in
    /// the module docs).
    pub short_slices: bool,
    /// Whether it asks a pacing host for a larger watching budget while its rotation turns
    /// over more than a few cores (see "Rounds bought" in the module docs). Off, rounds
    /// come as the host's default budget allows (the rules for sparse rounds and short
    /// slices are tested so, at the gaps they were written for).
    pub rounds_budget: bool,
}

impl Default for SpeedSettings {
    fn default() -> SpeedSettings {
        SpeedSettings {
            allow_numa: false,
            min_interval: Nanos::from_millis(1),
            max_interval: Nanos::from_millis(100),
            guard: true,
            short_slices: true,
            rounds_budget: true,
        }
    }
}

/// The time slice of a thread the rotation moves (see "Short slices" in the module docs):
/// half a millisecond, so that at HZ 1000 two threads on a core take turns at every tick.
const SHORT_SLICE: Nanos = Nanos::from_micros(500);
/// Short slices only while the rounds come at least this often (smoothed gap): shorter
/// than the kernel's own slice (about 3 ms from 8 CPUs), a round may end before a thread moved
/// to a shared core has had its turn there; with longer rounds the kernel's slices share
/// the core within the round already (see "Short slices" in the module docs).
const SHORT_SLICES_GAPS: (Nanos, Nanos) = (Nanos::from_micros(1_500), Nanos::from_micros(3_500));
/// Once on, short slices stay while the smoothed gap stays within this wider band.
const SHORT_SLICES_KEEP: (Nanos, Nanos) = (Nanos::from_micros(1_200), Nanos::from_micros(4_500));
/// Below this fraction of a span running or runnable, a thread counts as idle.
const IDLE: f64 = 0.05;
/// Threads that sleep this fraction of their time or more block, whatever their switches
/// say (see `speed/signals.rs`): with phases of 100 ms and more a thread blocks a few times
/// a second and is preempted hundreds of times on a shared core.
const SLEEPING: f64 = 0.05;
/// Involuntary switches per thread-second above which threads are taken to be yielding at
/// synchronization points (preemption alone gives a few hundred per second).
const YIELD_RATE: f64 = 2000.0;
/// The interval is this fraction of the estimated phase (see the module docs).
const PHASE_FRACTION: f64 = 0.0625;
/// Time constant of the smoothing of the synchronization signals, in seconds.
const SIGNAL_TAU_S: f64 = 0.2;
/// How stale the switch counts may be: a quarter of `SIGNAL_TAU_S`. The smoothing is
/// linear in the counts (a window's weight is its length over τ, its rate its count over
/// its length), so counts that arrive every 50 ms instead of every 1–2 ms tick average to
/// the same rates, a little later. `status`, which a live host reads for them, costs
/// about 17 µs a thread here (2-core VM): read every 10 ms, it took a tick with three
/// threads from 15 to 25 µs, and the budget-paced rounds from 800 to 500 in a run.
const SWITCHES_MAX_AGE: Nanos = Nanos::from_millis(50);
/// Time constant of the decay of the credits, in seconds: a few phases of a fine-grained
/// program, so a lead earned asleep at a barrier does not follow a thread for long.
const CREDIT_TAU_S: f64 = 0.02;
/// While the host holds the rounds back, the credits' time constant is at most this many
/// smoothed gaps between rounds (see "Credits in paced rounds" in the module docs).
const PACED_CREDIT_ROUNDS: f64 = 2.0;
/// The watching budget asked of a pacing host while the rotation turns, a share of one
/// core per core the rotation turns over (see "Rounds bought" in the module docs):
/// 0.16 %, so that 16 cores reach `ROUNDS_BUDGET_MAX` and up to 5 keep the host's
/// default (0.8 % of one core, which is 0.4 % of a 2-core machine).
const ROUNDS_BUDGET_PER_CORE: f64 = 0.0016;
/// At most this share of one core: a tick of 25 µs (this VM's BPF tick with 17–24
/// threads) then comes every millisecond, the rounds' floor.
const ROUNDS_BUDGET_MAX: f64 = 0.025;
/// Threads that block between phases of at least this much work (CPU time per voluntary
/// switch, s) are left to the default budget: Linux's own pull at each phase's end does
/// much of a rotation's work there, and each further round's moves cost refills.
const ROUNDS_BUDGET_PHASE_S: f64 = 0.025;
/// Time constant of the duty cycle the peer test compares, s.
const DUTY_TAU_S: f64 = 1.0;
/// Growth of the interval per round with even counts, once `QUIET_ROUNDS` rounds in a row
/// had nothing to rotate.
const BACKOFF: f64 = 1.5;
const QUIET_ROUNDS: u32 = 16;
/// A pair is swapped when the light thread's credit exceeds the heavy one's by more than
/// this many intervals on a heavy core cost (see the module docs).
const MARGIN_INTERVALS: f64 = 0.0;
/// Cores are levelled or rotated only when the fuller ones are measurably slower: their
/// threads' speed (exec over exec + run-queue wait, summed over the core's threads for the
/// round) below this fraction of the emptier ones' (the paper's `T_s`).
const SLOWER: f64 = 0.9;
/// Swaps per round and node: at most one per `SWAP_SHARE` cores, and at least
/// `MIN_SWAPS` (what moving costs the threads and the tool stays bounded; the best pairs
/// go first), times the periods asked a round spans when the host holds rounds back
/// (`sparse::Sparse::periods_per_round`).
const SWAP_SHARE: usize = 4;
const MIN_SWAPS: usize = 8;
/// A heavy core's thread that waited for a CPU through at least this fraction of the last
/// window is held back now and swaps first, whatever its credit, when the threads block
/// (see "Held back now" in the module docs).
const HELD: f64 = 0.5;
/// A thread moved to a light core "sped up" when its rate rose by this factor.
const SPED_UP: f64 = 1.1;
/// See `RELEASE_ABOVE`/`ADOPT_BELOW` in the module docs: threads that mostly sleep.
const RELEASE_ABOVE: f64 = 0.4;
const ADOPT_BELOW: f64 = 0.25;
/// A thread watched this long, ns, that ran or waited for a CPU less than `IDLE` of that
/// time is released at once (see `update_known`).
const ASLEEP_AGE: f64 = 20e6;
/// How stale last CPU and state may be for this policy (see `Policy::stat_max_age`): a
/// second. The policy never reads them; the summary's per-core utilization does, and may
/// lag by that much for threads Linux moves. Re-reading `stat` (3 µs a thread) on every
/// tick is what made slow, budget-paced ticks of many threads cost twice what they must.
const MAX_STAT_AGE: Nanos = Nanos::from_secs(1);
/// The guard measures over the last this-many intervals of a stint, and at least
/// `GUARD_MIN_MEASURE`.
const GUARD_INTERVALS: u64 = 50;
const GUARD_MIN_MEASURE: Nanos = Nanos::from_millis(200);

/// One core (a domain at the balancing level).
#[derive(Debug, Clone)]
struct Queue {
    node: NodeId,
    /// Its last-level cache: the index of the LLC domain of its lowest CPU at the core
    /// level; at coarser levels each queue is its own (see [`Speed::new`]).
    llc: usize,
    /// Its physical core at the CPU level, where SMT siblings share one (see "Siblings" in
    /// the module docs); elsewhere each queue is its own.
    core: usize,
    /// Threads placed on it.
    load: u32,
}

/// A thread the policy has placed.
#[derive(Debug, Clone, Copy)]
struct Placed {
    key: ThreadKey,
    queue: usize,
    /// Cumulative exec and run-queue wait ns since we first saw it.
    exec: f64,
    wait: f64,
    /// Ns of the latest window in which it was not held back: running, or not wanting a
    /// CPU (window − run-queue wait, less the wait reported late: negative when that is
    /// more than the window).
    last_free: f64,
    /// Decayed lead over the mean, in exec ns.
    credit: f64,
    /// The fraction of the latest window it waited for a CPU (see [`HELD`]).
    held: f64,
    /// Smoothed fraction of time it was blocked (sleeping, not runnable).
    blocked: f64,
    /// How long it has been watched, ns.
    age: f64,
    /// How long it has been placed, ns, from the end of the first window after it was
    /// placed (`None` while with Linux and during that window): `duty` and `work` count
    /// from there (see [`peers`]). Time with Linux (lent while busy threads are few,
    /// released) is Linux's placement, not evidence of how the thread fares pinned; and
    /// the first window is the start-up interval (up to 100 ms before the program shows
    /// any synchronization), in which a live program was seen with one of three workers
    /// idle for its whole length, which then outweighed everything after it for longer
    /// than the peer test waits.
    started: Option<f64>,
    /// Its blocked fraction averaged over its life, or its last second once older: the
    /// peer test's duty cycle (see [`peers`]).
    duty: f64,
    /// Its CPU share (exec over wall time), averaged as `duty` is: the work it does, which
    /// barrier peers share equally wherever they run (see [`peers`]).
    work: f64,
    /// Its CPU share averaged the same way over every window since it was first seen,
    /// placed or with Linux: what the fine-phase rule reads (see [`fine`], "Lent before
    /// the shares settle"). `work` stands still while the thread is with Linux.
    life_work: f64,
    /// Given back to Linux because it mostly sleeps; counts on no queue meanwhile.
    released: bool,
    /// Released too, but busy: lent to Linux while the program has no more busy threads
    /// than cores (see [`few`]).
    lent: bool,
    /// Its `exec` and `wait` when the guard's measured span opened (see [`guard`]).
    seg: Mark,
    /// Its `exec` and `wait` when the sparse-rounds rule's measured span opened (see
    /// "Lending on trial" in [`sparse`]).
    trial: Mark,
    /// `exec` and `wait` at the last round, its speed over that round (exec over the time
    /// it wanted a CPU; `None` when it hardly wanted one), and that speed before it moved
    /// to a light core when it did in the last round.
    round_exec: f64,
    round_wait: f64,
    round_rate: Option<f64>,
    judge: Option<f64>,
    /// The slice last asked for it (`None`: its own).
    slice: Option<Nanos>,
}

/// A thread's `exec` and `wait` when a measured span opened, and whether it was there
/// then (a thread first seen later has no mark, and does not count in the span).
#[derive(Debug, Clone, Copy, Default)]
struct Mark {
    exec: f64,
    wait: f64,
    valid: bool,
}

impl Mark {
    /// The mark of `p` now.
    fn of(p: &Placed) -> Mark {
        Mark {
            exec: p.exec,
            wait: p.wait,
            valid: true,
        }
    }
}

/// The speed balancing policy; see the module docs.
#[derive(Debug, Clone)]
pub struct Speed {
    cfg: SpeedSettings,
    level: Level,
    fixed: Option<Nanos>,
    queues: Vec<Queue>,
    /// Whether some queues are SMT siblings of one core (see "Siblings" in the module docs).
    siblings: bool,
    /// Threads placed and queues of each physical core ([`Queue::core`]), during a round.
    core_load: Vec<(u32, u32)>,
    /// Distinct nodes of the queues, for per-node rotation.
    nodes: Vec<NodeId>,
    placed: Vec<Placed>,
    spare: Vec<Placed>,
    /// Scratch lists of a round (indexes into `placed`).
    heavy: Vec<usize>,
    light: Vec<usize>,
    /// Which of `light` a round has paired.
    used: Vec<bool>,
    /// One move a swap (see the module docs): the two threads of each core that holds
    /// two, by queue, as the round found them; and the queues the round's moves changed.
    mates: Vec<[Option<usize>; 2]>,
    touched: Vec<bool>,
    /// Whether the last window's waits may be reported late (`Window::waits_late`): then
    /// a swap stays two moves ("One move a swap" in the module docs).
    waits_late: bool,
    /// Whether the last round rotated: some node has uneven counts with threads to turn.
    rotating_now: bool,
    /// Whether the placed threads run in short slices now.
    sliced: bool,
    /// The watching budget the last decision asked for ([`Speed::rounds_budget`]).
    asked_budget: Option<f64>,
    /// Threads and cores per node, for levelling the nodes (reused).
    node_load: Vec<(u32, u32)>,
    /// Exec and wanted (exec + run-queue wait) ns of each queue's threads over the last
    /// round.
    q_exec: Vec<f64>,
    q_want: Vec<f64>,
    started: bool,
    interval: Nanos,
    /// Rotation period multiplier from unhelpful moves (1 = every interval).
    slow_down: u64,
    next_round: Nanos,
    last_round: Nanos,
    /// When the policy first ran.
    started_at: Nanos,
    vol_rate: f64,
    /// CPU time per thread-second of the threads that switched, smoothed as the rates:
    /// with `vol_rate` it gives the work between blocking points (`work_phase_ns`).
    run_rate: f64,
    /// Fraction of the time the threads that switched spent asleep (late wait taken off),
    /// smoothed as the rates: the other sign that threads block (see `SLEEPING`).
    sleep_frac: f64,
    invol_rate: f64,
    /// `invol_rate` without the threads running in our short slices on a shared core,
    /// while others speak for it: the program's own, for the test whether threads block.
    invol_prog_rate: f64,
    slice_rate: f64,
    counted: bool,
    /// Seconds of windows the signals have been averaged over (see `observe_signals`).
    signals_age: f64,
    quiet_rounds: u32,
    guard: Option<Guard>,
    /// When the guard's measured span started (and whether it is open).
    seg_open: bool,
    seg_at: Nanos,
    /// Whether the busy threads are CPU-bound peers (see [`peers`]).
    peers: peers::Peers,
    /// Whether the busy threads are no more than the cores (see [`few`]).
    few: few::Few,
    /// Whether rounds come too sparsely for the phases (see [`sparse`]).
    sparse: sparse::Sparse,
    /// The phase the synchronization signals give, ns (`None` when they give none:
    /// yielding threads, or no synchronization seen).
    phase_ns: Option<f64>,
    /// The CPU time a thread runs between two blocking points, ns: the phase's work,
    /// whoever places the threads (`None` unless the threads block). The sparse-rounds
    /// rule holds the gap between rounds against it (see [`sparse`]).
    work_phase_ns: Option<f64>,
    /// Whether the phases are finer than any round, for equal-work threads (see [`fine`]).
    fine_now: bool,
    /// Whether the placed threads' sleep is the program's, not any one thread's: barrier
    /// peers, whom the sleeper rule leaves placed (see "Barrier peers are not sleepers"
    /// in [`peers`]). As of the window before.
    sleep_shared: bool,
    stats: Stats,
}

#[derive(Debug, Clone, Default)]
struct Stats {
    rounds: u64,
    rotating_rounds: u64,
    swaps: u64,
    levels: u64,
    initial: u64,
    released: u64,
    backoffs: u64,
    /// Ticks after which the policy asked for a larger watching budget
    /// ([`Speed::rounds_budget`]).
    bought: u64,
    /// The share of one core last asked for.
    bought_share: f64,
    interval_sum_ms: f64,
    min_seen: Option<Nanos>,
    max_seen: Option<Nanos>,
    reason: &'static str,
}

impl Speed {
    /// Builds the policy: one queue per domain at `settings.level` (by default `cpu`, the
    /// kernel's run queues; `core` is the paper's),
    /// checking the speed settings.
    pub fn new(settings: &Settings, topo: &Topology) -> Result<Speed, PolicyError> {
        let cfg = settings.speed.clone();
        let bad = |why: String| PolicyError::Invalid {
            policy: "speed",
            why,
        };
        if cfg.min_interval.0 == 0 || cfg.min_interval > cfg.max_interval {
            return Err(bad(format!(
                "interval range {}..{} is empty",
                cfg.min_interval, cfg.max_interval
            )));
        }
        if settings.interval.is_some_and(|i| i.0 == 0) {
            return Err(bad("interval must be positive".into()));
        }
        let level = settings.level_for(crate::PolicyKind::Speed, topo);
        // Cores group by LLC only where a domain lies inside one; at the LLC level or above
        // every queue is its own group, and nothing prefers one pair over another.
        let llc_of = |d: &threadbalance_model::Domain| match level {
            Level::Core | Level::Cpu => d
                .cpus
                .iter()
                .next()
                .and_then(|c| topo.domain_of(c, Level::Llc))
                .unwrap_or(d.index),
            _ => d.index,
        };
        // Queues share a physical core only at the CPU level (SMT siblings).
        let core_of = |d: &threadbalance_model::Domain| match level {
            Level::Cpu => d
                .cpus
                .first()
                .and_then(|c| topo.domain_of(c, Level::Core))
                .unwrap_or(d.index),
            _ => d.index,
        };
        let queues: Vec<Queue> = topo
            .domains(level)
            .iter()
            .map(|d| Queue {
                node: d.node,
                llc: llc_of(d),
                core: core_of(d),
                load: 0,
            })
            .collect();
        let mut cores: Vec<usize> = queues.iter().map(|q| q.core).collect();
        cores.sort_unstable();
        cores.dedup();
        let siblings = cores.len() < queues.len();
        let mut nodes: Vec<NodeId> = queues.iter().map(|q| q.node).collect();
        nodes.sort_unstable();
        nodes.dedup();
        Ok(Speed {
            interval: settings.interval.unwrap_or(cfg.min_interval),
            fixed: settings.interval,
            cfg,
            level,
            queues,
            siblings,
            core_load: Vec::new(),
            nodes,
            placed: Vec::new(),
            spare: Vec::new(),
            heavy: Vec::new(),
            light: Vec::new(),
            used: Vec::new(),
            mates: Vec::new(),
            touched: Vec::new(),
            waits_late: false,
            rotating_now: false,
            sliced: false,
            asked_budget: None,
            node_load: Vec::new(),
            q_exec: Vec::new(),
            q_want: Vec::new(),
            started: false,
            slow_down: 1,
            next_round: Nanos::ZERO,
            last_round: Nanos::ZERO,
            started_at: Nanos::ZERO,
            vol_rate: 0.0,
            run_rate: 0.0,
            sleep_frac: 0.0,
            invol_rate: 0.0,
            invol_prog_rate: 0.0,
            slice_rate: 0.0,
            counted: false,
            signals_age: 0.0,
            quiet_rounds: 0,
            guard: None,
            seg_open: false,
            seg_at: Nanos::ZERO,
            peers: peers::Peers::default(),
            few: few::Few::default(),
            sparse: sparse::Sparse::default(),
            phase_ns: None,
            work_phase_ns: None,
            fine_now: false,
            sleep_shared: false,
            stats: Stats {
                reason: "no synchronization seen yet",
                ..Stats::default()
            },
        })
    }

    /// The balance interval in force.
    pub fn interval(&self) -> Nanos {
        self.interval
    }

    fn target(&self, q: usize) -> Target {
        Target::Domain {
            level: self.level,
            index: q,
        }
    }

    fn managing(&self) -> bool {
        self.guard.as_ref().is_none_or(|g| g.mode.managing())
    }

    /// The watching budget to ask of a pacing host, a share of one core (see "Rounds
    /// bought" in the module docs): `ROUNDS_BUDGET_PER_CORE` per core the rotation turns
    /// over, at most `ROUNDS_BUDGET_MAX`, while the policy manages and its rotation turns
    /// (it has rotated, and not `QUIET_ROUNDS` rounds in a row went by without a swap: with
    /// blocking barriers a round at a phase's end often finds nothing to swap) or the
    /// threads are lent or looked at for sparse rounds (so that the gaps that judge the
    /// lending are the rotation's); unless the threads block between long phases of work.
    /// `None` where that is no more than the host's default.
    fn rounds_budget(&self) -> Option<f64> {
        if !self.cfg.rounds_budget {
            return None;
        }
        let turning = self.stats.rotating_rounds > 0 && self.quiet_rounds < QUIET_ROUNDS;
        let turning = turning || self.sparse.active || self.sparse.looking;
        // The work between two blocking points, wherever the threads block at all: not
        // only where they count as blocking (`work_phase_ns`), since with phases of 100 ms
        // a rotation's preemptions outnumber the voluntary switches many times over.
        let long = self.counted
            && self.vol_rate > 0.0
            && self.run_rate >= ROUNDS_BUDGET_PHASE_S * self.vol_rate;
        let share = (ROUNDS_BUDGET_PER_CORE * self.queues.len() as f64).min(ROUNDS_BUDGET_MAX);
        (turning && self.managing() && !long && share > threadbalance_model::pace::BUDGET)
            .then_some(share)
    }

    /// The queue with the fewest placed threads; ties go to the core whose node, then
    /// whose LLC, holds the fewest threads per core, then to the lowest index.
    ///
    /// So threads spread over nodes and LLCs in proportion to their cores, as Linux's
    /// balancer spreads them: with 24 threads on two 8-core nodes each gets 12, and each
    /// node's rotation (which never crosses nodes) has heavy and light cores to rotate
    /// between. Filled in index order instead, node 0 got 16 (two a core) and node 1 eight
    /// (one a core): even counts in both, nothing rotated, and `speed` ran as `pbind`
    /// (2.065 s against 1.607 on one 16-core node; simulated, ep-barrier, 10 ms yield
    /// phases). Within a node, an even spread over LLCs lets most swaps stay within an
    /// LLC (see `rotate.rs`).
    ///
    /// Where queues are SMT siblings (the CPU level on an SMT machine), the emptiest CPU
    /// of the emptiest physical core comes first: a thread whose sibling runs is slowed
    /// down (about 1.3× in the simulator), so with 8 threads on 8 cores × 2 every core gets
    /// one, as the kernel's `select_idle_sibling` gives them, and not CPUs 0–7 (four cores
    /// doubled up, four idle); with 24, every core gets three.
    fn emptiest(&self) -> usize {
        let (mut node_load, mut llc_load, mut core_load) = (Vec::new(), Vec::new(), Vec::new());
        self.tally(|q| self.node_ix(q), &mut node_load);
        self.tally(|q| q.llc, &mut llc_load);
        if self.siblings {
            self.tally(|q| q.core, &mut core_load);
        }
        (0..self.queues.len())
            .min_by(|&a, &b| {
                let (qa, qb) = (&self.queues[a], &self.queues[b]);
                qa.load
                    .cmp(&qb.load)
                    .then_with(|| match (core_load.get(qa.core), core_load.get(qb.core)) {
                        (Some(&ca), Some(&cb)) => per_core_cmp(ca, cb),
                        _ => std::cmp::Ordering::Equal,
                    })
                    .then_with(|| {
                        per_core_cmp(node_load[self.node_ix(qa)], node_load[self.node_ix(qb)])
                    })
                    .then_with(|| per_core_cmp(llc_load[qa.llc], llc_load[qb.llc]))
                    .then(a.cmp(&b))
            })
            .unwrap_or(0)
    }

    /// The credits' time constant, ns: `CREDIT_TAU_S`, or `PACED_CREDIT_ROUNDS` smoothed
    /// gaps between rounds when the host holds the rounds back and that is shorter.
    fn credit_tau_ns(&self) -> f64 {
        let tau = CREDIT_TAU_S * 1e9;
        match self.sparse.gap() {
            Some(gap) if self.sparse.held() => (PACED_CREDIT_ROUNDS * gap).clamp(1.0, tau),
            _ => tau,
        }
    }

    /// The index in `nodes` of queue `q`'s node.
    fn node_ix(&self, q: &Queue) -> usize {
        self.nodes.binary_search(&q.node).unwrap_or(0)
    }

    /// Fills `into` with (threads placed, cores) per group of queues, the group of each
    /// queue given by `group` (a node's index, an LLC).
    fn tally(&self, group: impl Fn(&Queue) -> usize, into: &mut Vec<(u32, u32)>) {
        into.clear();
        for q in &self.queues {
            let g = group(q);
            if into.len() <= g {
                into.resize(g + 1, (0, 0));
            }
            into[g].0 += q.load;
            into[g].1 += 1;
        }
    }
}

/// Compares two groups' threads per core, given as (threads, cores), exactly: a/b
/// against c/d as a·d against c·b.
fn per_core_cmp((a, b): (u32, u32), (c, d): (u32, u32)) -> std::cmp::Ordering {
    (u64::from(a) * u64::from(d)).cmp(&(u64::from(c) * u64::from(b)))
}

mod rotate;

impl Speed {
    /// The slices to change: while the rotation runs, every placed thread runs in short
    /// slices ([`SHORT_SLICE`]); otherwise (no rotation, the guard's probe or hand-back),
    /// and once released or lent, in its own (see "Short slices" in the module docs).
    fn slices(&mut self) -> Vec<threadbalance_model::SliceChange> {
        // On inside the band, off outside a wider one: a gap near an edge does not turn the
        // slices over every round.
        let (lo, hi) = if self.sliced {
            SHORT_SLICES_KEEP
        } else {
            SHORT_SLICES_GAPS
        };
        let often = self
            .sparse
            .gap()
            .is_some_and(|g| g > lo.0 as f64 && g <= hi.0 as f64);
        // Under the guard's probe, or handed back, Linux places the threads: its own slices.
        self.sliced = self.cfg.short_slices && self.managing() && self.rotating_now && often;
        let short = self.sliced.then_some(SHORT_SLICE);
        let mut out = Vec::new();
        for p in self.placed.iter_mut() {
            let want = if p.released { None } else { short };
            if want != p.slice {
                p.slice = want;
                out.push(threadbalance_model::SliceChange {
                    thread: p.key,
                    slice: want,
                });
            }
        }
        out
    }

    /// Whether `key` ran in a short slice of ours on a core it shares with another placed
    /// thread. Without short slices on, no thread has one (`slices` clears them all), so
    /// the usual tick does not search.
    fn sliced_and_shared(&self, key: ThreadKey) -> bool {
        self.sliced
            && self
                .placed
                .binary_search_by(|p| p.key.cmp(&key))
                .ok()
                .map(|i| &self.placed[i])
                .is_some_and(|p| p.slice.is_some() && !p.released && self.queues[p.queue].load >= 2)
    }
}

impl Policy for Speed {
    /// Speed reads only run time and run-queue wait (fresh from `schedstat` on every
    /// sample) and knows where it placed every thread, so last CPU and state may be as old
    /// as its longest interval.
    fn stat_max_age(&self) -> Option<Nanos> {
        Some(MAX_STAT_AGE)
    }

    /// The synchronization signals read voluntary and involuntary switches: blocking and
    /// yielding threads, hence the phases the sparse-rounds and fine-phase rules go by.
    fn reads_switches(&self) -> Option<Nanos> {
        Some(SWITCHES_MAX_AGE)
    }

    fn name(&self) -> &'static str {
        "speed"
    }

    /// More than the host's default while the rotation turns over more than a few cores
    /// (see "Rounds bought" in the module docs).
    fn watch_budget(&self) -> Option<f64> {
        self.asked_budget
    }

    fn decide(&mut self, _topo: &Topology, w: &Window) -> Plan {
        let now = w.end;
        let mut moves = Vec::new();
        self.sparse.note_pace(w.pace);
        self.waits_late = w.waits_late;
        self.track(w, &mut moves);
        let managing = self.managing();
        self.check_peers(now, managing, &mut moves);
        self.check_few(managing, &mut moves);
        let wanted = self.observe_signals(w);
        self.fine_now = self.fine_now_from_signals();
        let mut guard_note = None;
        if !self.started {
            self.started = true;
            self.next_round = now + self.interval;
            self.last_round = now;
            self.started_at = now;
            if self.cfg.guard {
                let measure = Nanos(
                    self.cfg
                        .max_interval
                        .0
                        .max(self.cfg.min_interval.0 * GUARD_INTERVALS),
                )
                .max(GUARD_MIN_MEASURE);
                self.guard = Some(Guard::new(now, measure));
            }
        } else {
            if let Some(g) = self.guard.as_mut() {
                g.observe(w);
            }
            let events = |g: &Guard| (g.handbacks, g.resumes);
            let before = self.guard.as_ref().map(events);
            self.guard_step(now, &mut moves);
            // A hand-back or a resumption is said in the plan's note (`run --verbose`
            // prints it, `run --report` marks it).
            guard_note = self
                .guard
                .as_ref()
                .filter(|g| Some(events(g)) != before)
                .and_then(|g| g.last.as_ref())
                .map(|last| format!("guard: {last}"));
            // Rounds due within half an interval run now: fewer ticks, longer windows.
            let due = now + Nanos(self.interval.0 / 2);
            if self.next_round <= due {
                self.sparse.round_at(now, self.started_at);
                let rotating = self.managing() && self.round(now, &mut moves);
                let managing = self.managing();
                self.check_sparse(now, rotating, managing, w.waits_late, &mut moves);
                self.quiet_rounds = if rotating {
                    0
                } else {
                    self.quiet_rounds.saturating_add(1)
                };
                self.interval = match self.fixed {
                    Some(f) => f,
                    // Lent for sparse rounds: keep asking for what a rotation would, to
                    // see when rounds come fast enough again.
                    None if rotating || self.sparse.active => follow(self.interval, wanted),
                    None if self.quiet_rounds < QUIET_ROUNDS => wanted.max(self.interval),
                    None => Nanos((self.interval.0 as f64 * BACKOFF) as u64)
                        .clamp(wanted, self.cfg.max_interval),
                };
                self.note_interval();
                let period = Nanos(self.interval.0.saturating_mul(self.slow_down))
                    .min(self.cfg.max_interval.max(self.interval));
                self.next_round = now + period;
                self.sparse.ask(period);
            }
        }
        let managing = self.managing();
        if self.started_at != now {
            self.start_look(w, managing, &mut moves);
        }
        self.check_look(now, w, managing, &mut moves);
        let mut next = self.next_round;
        if let Some(g) = &self.guard {
            let at = if self.seg_open {
                g.until
            } else {
                g.measure_from()
            };
            next = next.min(at.max(now));
            if let Some(cap) = g.tick_cap(now) {
                next = next.min(now + cap);
            }
        }
        let floor = Nanos(self.cfg.min_interval.0 / 4);
        let slices = self.slices();
        self.asked_budget = self.rounds_budget();
        if let Some(share) = self.asked_budget {
            self.stats.bought += 1;
            self.stats.bought_share = share;
        }
        Plan {
            slices,
            moves,
            next_in: next.saturating_sub(now).max(floor),
            note: guard_note,
        }
    }

    fn summary(&self) -> PolicySummary {
        let s = &self.stats;
        PolicySummary::Speed(Box::new(SpeedSummary {
            balance_interval_ms: self.interval.as_millis_f64(),
            interval_reason: s.reason.to_string(),
            interval_min_ms: s.min_seen.map(Nanos::as_millis_f64),
            interval_max_ms: s.max_seen.map(Nanos::as_millis_f64),
            interval_mean_ms: s.interval_sum_ms / s.rounds.max(1) as f64,
            voluntary_switches_per_thread_s: self.vol_rate,
            involuntary_switches_per_thread_s: self.invol_rate,
            switches_counted: self.counted,
            timeslices_per_thread_s: self.slice_rate,
            rounds: s.rounds,
            rotating_rounds: s.rotating_rounds,
            rotation_swaps: s.swaps,
            levelling_moves: s.levels,
            backoffs: s.backoffs,
            initial_placements: s.initial,
            released_to_linux: s.released,
            peer_hand_backs: self.peers.hand_backs,
            peers_apart_now: self.peers.apart,
            few_hand_backs: self.few.hand_backs,
            few_now: self.few.active,
            sparse_hand_backs: self.sparse.hand_backs,
            sparse_now: self.sparse.active,
            sparse_last: self.sparse.last.clone(),
            sparse_trials_lost: self.sparse.trials_lost(),
            rounds_budget_ticks: s.bought,
            rounds_budget_pct: s.bought_share * 100.0,
            guard: self.guard_summary(),
        }))
    }
}

#[cfg(test)]
mod tests;
