//! Logging the phases (`RunOptions::phases`): when each thread reached each barrier and
//! how long it waited for a CPU on the way (see [`crate::phases`]).

use super::{ThreadIdx, Userspace, World};
use crate::phases::PhaseArrival;
use crate::state::AppIdx;
use threadbalance_model::Nanos;

impl Userspace {
    /// Thread `t`'s run-queue wait up to now, an open wait included.
    fn queued_until_now(&self, world: &World, t: ThreadIdx) -> Nanos {
        let th = &world.th[t];
        let open = if th.st == super::St::Runnable {
            world.now.saturating_sub(th.runnable_since)
        } else {
            Nanos::ZERO
        };
        th.wait + open
    }

    /// A barrier of application `app` opened: a phase starts for each of its threads.
    pub(crate) fn log_opening(&mut self, world: &mut World, app: AppIdx) {
        if self.phases.is_none() {
            return;
        }
        let now = world.now;
        let starts: Vec<(usize, Nanos)> = self.apps[app]
            .members()
            .map(|t| (t, self.queued_until_now(world, ThreadIdx::from(t))))
            .collect();
        let threads = world.th.len();
        if let Some(log) = self.phases.as_mut() {
            log.since.resize(threads, None);
            for (t, queued) in starts {
                log.since[t] = Some((now, queued));
            }
        }
    }

    /// Thread `t` of application `app` arrived at a barrier that has opened `phase` times.
    pub(crate) fn log_arrival(&mut self, world: &mut World, app: AppIdx, t: ThreadIdx, phase: u64) {
        let Some(Some((start, q0))) = self
            .phases
            .as_ref()
            .map(|log| log.since.get(t.ix()).copied().flatten())
        else {
            return;
        };
        let queued = self.queued_until_now(world, t).saturating_sub(q0);
        let row = PhaseArrival {
            app: app.ix(),
            phase,
            thread: t.ix(),
            start,
            arrive: world.now,
            queued,
        };
        if let Some(log) = self.phases.as_mut() {
            log.rows.push(row);
        }
    }
}
