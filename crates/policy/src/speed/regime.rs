//! The policy's mode: one [`Regime`], and one transition, [`Regime::next`], a pure function
//! of the regime and what the tick saw ([`Seen`]).
//!
//! Who places the threads is the first thing the regime says: `speed` itself
//! ([`Regime::Placed`]), Linux for the policy's own reasons ([`Regime::Lent`]: few busy
//! threads, threads that are not peers, rounds too sparse, a look at the host's pace), or
//! Linux under the guard ([`Regime::Linux`]: its probe, or a hand-back). Every variant but
//! [`Regime::Unstarted`] carries the rotation's clock ([`Rotation`]): rounds keep coming
//! while Linux places the threads, to see when they should be placed again, and count as
//! rounds without a swap.
//!
//! What reads the regime: the interval of the next round ([`Regime::interval_rule`]), the
//! short slices (only while `speed` places the threads and its last round turned some
//! over), the rounds budget asked of a pacing host, and the guard's "even pinning" test.
//! The rules that lend or hand back keep their own hysteresis (`few`, `peers`, `sparse`,
//! `guard`); their verdicts are what [`Seen`] reports.

use super::tuned::QUIET_ROUNDS;

/// Why Linux places the threads while the guard lets `speed` manage them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lent {
    /// No more busy threads than cores ([`super::few`]).
    Few,
    /// The busy threads are not CPU-bound peers ([`super::peers`]).
    NotPeers,
    /// Rounds come too sparsely for the phases ([`super::host::sparse`]); `looking`: lent
    /// for a look at the host's pace, not yet judged.
    Sparse {
        /// A look at the pace is under way.
        looking: bool,
    },
    /// A look at the pace whose lending the sparse-rounds rule has already ended; the look
    /// ends at its window.
    Look,
}

/// What happened to the rounds at this step of a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Round {
    /// No round (a step after the round, or a tick with none due).
    None,
    /// A round ran and turned threads over (some node had uneven counts to turn).
    Turned,
    /// A round ran and turned nothing over.
    Still,
    /// A round came while Linux placed the threads: not run, counted as without a swap;
    /// what the last round that ran did stays.
    Skipped,
    /// The guard placed the threads again: the rotation starts over, a round comes at once.
    Resumed,
}

/// What a tick saw, as the transition reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Seen {
    /// The guard lets `speed` place the threads (no guard, or its managed stint).
    pub(super) managing: bool,
    /// Why the threads are lent, when they are (the sparse-rounds reasons first: they are
    /// the ones the rounds and the budget follow).
    pub(super) lent: Option<Lent>,
    /// The lending for sparse rounds, while the guard's probe or hand-back holds.
    pub(super) sparse: bool,
    /// The rounds at this step.
    pub(super) round: Round,
}

/// The rotation's clock: how many rounds in a row turned nothing over, and whether the
/// last round that ran turned threads over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Rotation {
    /// Rounds in a row without a swap (0: the last round turned, or none has come since
    /// the start or a resumption).
    pub(super) quiet: u32,
    /// Whether the last round that ran turned threads over.
    pub(super) turned: bool,
}

impl Rotation {
    /// This clock after `round`.
    fn after(self, round: Round) -> Rotation {
        match round {
            Round::None => self,
            Round::Turned => Rotation {
                quiet: 0,
                turned: true,
            },
            Round::Still => Rotation {
                quiet: self.quiet.saturating_add(1),
                turned: false,
            },
            Round::Skipped => Rotation {
                quiet: self.quiet.saturating_add(1),
                ..self
            },
            Round::Resumed => Rotation { quiet: 0, ..self },
        }
    }
}

/// How the interval of the next round is chosen (see "The regime" in `docs/speed-rules.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IntervalRule {
    /// Follow the signals: down at once, up by at most `BACKOFF` a round (the rotation
    /// turns, or the threads are lent for sparse rounds and the rounds measure the gap).
    Follow,
    /// Fewer than `QUIET_ROUNDS` rounds without a swap: the signals' interval, never
    /// shorter than the one in force.
    Hold,
    /// `QUIET_ROUNDS` rounds or more without a swap: back off by `BACKOFF` a round.
    BackOff,
}

/// The policy's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Regime {
    /// No window seen yet.
    #[default]
    Unstarted,
    /// `speed` places the threads.
    Placed(Rotation),
    /// Linux places the threads for one of the policy's own reasons; the guard lets
    /// `speed` manage.
    Lent(Lent, Rotation),
    /// Linux places the threads under the guard: its probe, or a hand-back. `sparse`:
    /// the threads were lent for sparse rounds too.
    Linux {
        /// Lent for sparse rounds as well.
        sparse: bool,
        /// The rotation's clock.
        rotation: Rotation,
    },
}

impl Regime {
    /// The regime after a step of a tick that saw `seen`: the one transition.
    pub(super) fn next(self, seen: &Seen) -> Regime {
        let rotation = self.rotation().after(seen.round);
        if !seen.managing {
            return Regime::Linux {
                sparse: seen.sparse,
                rotation,
            };
        }
        match seen.lent {
            Some(why) => Regime::Lent(why, rotation),
            None => Regime::Placed(rotation),
        }
    }

    /// Whether the policy has seen a window.
    pub(super) fn started(self) -> bool {
        self != Regime::Unstarted
    }

    /// The rotation's clock (a fresh one before the start).
    pub(super) fn rotation(self) -> Rotation {
        match self {
            Regime::Unstarted => Rotation::default(),
            Regime::Placed(r) | Regime::Lent(_, r) | Regime::Linux { rotation: r, .. } => r,
        }
    }

    /// Whether the guard lets `speed` manage the threads.
    pub(super) fn managing(self) -> bool {
        !matches!(self, Regime::Linux { .. })
    }

    /// Whether the threads are lent for sparse rounds (a look at the pace included).
    pub(super) fn lent_sparse(self) -> bool {
        matches!(
            self,
            Regime::Lent(Lent::Sparse { .. }, _) | Regime::Linux { sparse: true, .. }
        )
    }

    /// Whether the threads are lent for sparse rounds or looked at for them, while the
    /// guard lets `speed` manage.
    pub(super) fn lent_or_looking(self) -> bool {
        matches!(self, Regime::Lent(Lent::Sparse { .. } | Lent::Look, _))
    }

    /// Whether the rotation turns: `speed` manages and its last round turned threads over
    /// (what short slices follow).
    pub(super) fn turning(self) -> bool {
        self.managing() && self.rotation().turned
    }

    /// How the interval of the next round is chosen, right after a round.
    pub(super) fn interval_rule(self) -> IntervalRule {
        let r = self.rotation();
        // The round just run turned threads over (only a turning round leaves the quiet
        // count at 0 and the turn on: a resumption is followed by its round at once).
        if (r.quiet == 0 && r.turned) || self.lent_sparse() {
            IntervalRule::Follow
        } else if r.quiet < QUIET_ROUNDS {
            IntervalRule::Hold
        } else {
            IntervalRule::BackOff
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(round: Round) -> Seen {
        Seen {
            managing: true,
            lent: None,
            sparse: false,
            round,
        }
    }

    fn placed(quiet: u32, turned: bool) -> Regime {
        Regime::Placed(Rotation { quiet, turned })
    }

    #[test]
    fn the_first_tick_starts_placed_with_a_fresh_clock() {
        let r = Regime::Unstarted.next(&seen(Round::None));
        assert_eq!(r, placed(0, false));
        assert!(r.started() && !Regime::Unstarted.started());
    }

    #[test]
    fn a_turning_round_rotates_and_follows_the_signals() {
        let r = placed(5, false).next(&seen(Round::Turned));
        assert_eq!(r, placed(0, true));
        assert!(r.turning());
        assert_eq!(r.interval_rule(), IntervalRule::Follow);
    }

    #[test]
    fn a_still_round_counts_quiet_and_holds_then_backs_off() {
        let r = placed(0, true).next(&seen(Round::Still));
        assert_eq!(r, placed(1, false));
        assert!(!r.turning());
        assert_eq!(r.interval_rule(), IntervalRule::Hold);
        let r = placed(QUIET_ROUNDS - 2, false).next(&seen(Round::Still));
        assert_eq!(r.interval_rule(), IntervalRule::Hold);
        let r = r.next(&seen(Round::Still));
        assert_eq!(r.rotation().quiet, QUIET_ROUNDS);
        assert_eq!(r.interval_rule(), IntervalRule::BackOff);
    }

    #[test]
    fn a_step_without_a_round_keeps_the_clock() {
        let r = placed(3, true).next(&seen(Round::None));
        assert_eq!(r, placed(3, true));
    }

    #[test]
    fn the_guard_taking_the_threads_makes_linux_place_them_and_rounds_skip() {
        let linux = Seen {
            managing: false,
            ..seen(Round::Skipped)
        };
        let r = placed(0, true).next(&linux);
        assert_eq!(
            r,
            Regime::Linux {
                sparse: false,
                rotation: Rotation {
                    quiet: 1,
                    turned: true
                }
            }
        );
        // Under Linux nothing turns, whatever the last round did, and the interval is the
        // quiet one's.
        assert!(!r.managing() && !r.turning());
        assert_eq!(r.interval_rule(), IntervalRule::Hold);
    }

    #[test]
    fn a_resumption_restarts_the_quiet_count() {
        let linux = Regime::Linux {
            sparse: false,
            rotation: Rotation {
                quiet: 40,
                turned: false,
            },
        };
        let r = linux.next(&seen(Round::Resumed));
        assert_eq!(r, placed(0, false));
        // Its round follows at once and decides.
        assert_eq!(
            r.next(&seen(Round::Still)).interval_rule(),
            IntervalRule::Hold
        );
    }

    #[test]
    fn lending_for_sparse_rounds_keeps_following_the_signals() {
        let lent = Seen {
            lent: Some(Lent::Sparse { looking: false }),
            ..seen(Round::Still)
        };
        let r = placed(30, false).next(&lent);
        assert_eq!(
            r,
            Regime::Lent(
                Lent::Sparse { looking: false },
                Rotation {
                    quiet: 31,
                    turned: false
                }
            )
        );
        assert!(r.lent_sparse() && r.lent_or_looking());
        assert_eq!(r.interval_rule(), IntervalRule::Follow);
    }

    #[test]
    fn a_look_whose_lending_ended_is_looked_at_but_not_lent() {
        let look = Seen {
            lent: Some(Lent::Look),
            ..seen(Round::None)
        };
        let r = placed(2, false).next(&look);
        assert!(r.lent_or_looking() && !r.lent_sparse());
    }

    #[test]
    fn lent_for_few_threads_or_non_peers_the_rounds_go_quiet() {
        for why in [Lent::Few, Lent::NotPeers] {
            let s = Seen {
                lent: Some(why),
                ..seen(Round::Still)
            };
            let r = placed(QUIET_ROUNDS - 1, true).next(&s);
            assert_eq!(
                r,
                Regime::Lent(
                    why,
                    Rotation {
                        quiet: QUIET_ROUNDS,
                        turned: false
                    }
                )
            );
            assert!(!r.lent_sparse() && !r.lent_or_looking());
            assert_eq!(r.interval_rule(), IntervalRule::BackOff);
        }
    }

    #[test]
    fn lent_for_sparse_rounds_under_the_guard_still_follows() {
        let s = Seen {
            managing: false,
            lent: None,
            sparse: true,
            round: Round::Skipped,
        };
        let r = placed(0, false).next(&s);
        assert!(r.lent_sparse() && !r.lent_or_looking() && !r.managing());
        assert_eq!(r.interval_rule(), IntervalRule::Follow);
    }

    #[test]
    fn placed_again_after_a_lending_keeps_the_clock() {
        let lent = Regime::Lent(
            Lent::Sparse { looking: false },
            Rotation {
                quiet: 7,
                turned: false,
            },
        );
        assert_eq!(lent.next(&seen(Round::None)), placed(7, false));
    }
}
