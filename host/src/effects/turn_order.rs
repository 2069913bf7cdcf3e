//! The order of one turn's calls when they run and are asked about together
//! ([`crate::approval::Asking::Together`]).
//!
//! Calls take their places in the root's [`super::order::PathOrder`] in the turn's order (a call takes
//! its ticket once every call before it took one or ended), so a later call on a path an earlier one
//! touches waits for that one, and calls on disjoint paths go at once. Whatever order the answers come
//! in, the calls apply in the turn's order: a call answered yes waits until every call before it is
//! done (applied, refused or failed), so a cancel that came meanwhile stops it, as it stops every call
//! not yet applied. All waits point to earlier calls, whose tickets are earlier too, so none can wait
//! for another in a circle.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Where the calls of one turn stand.
#[derive(Debug, Default)]
pub(crate) struct TurnOrder {
    calls: Mutex<BTreeMap<usize, Stage>>,
    changed: tokio::sync::Notify,
}

/// How far a call of the turn got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    /// Started, without a ticket yet.
    Started,
    /// Holds its ticket in the path order (or will never take one).
    Placed,
    /// Applied, refused or failed.
    Done,
}

/// One call's place in its turn; marks the call done when dropped.
#[derive(Debug)]
pub(crate) struct TurnPlace<'a> {
    order: &'a TurnOrder,
    position: usize,
}

impl TurnOrder {
    /// The place of the call at `position`; every call of the turn starts in order, so each takes its
    /// place before the calls after it start.
    pub(crate) fn start(&self, position: usize) -> TurnPlace<'_> {
        self.lock().insert(position, Stage::Started);
        TurnPlace {
            order: self,
            position,
        }
    }

    /// Waits until every call before `position` reached `stage`.
    async fn wait_until(&self, position: usize, stage: Stage) {
        loop {
            let changed = self.changed.notified();
            if self.lock().range(..position).all(|(_, s)| *s >= stage) {
                return;
            }
            changed.await;
        }
    }

    fn reach(&self, position: usize, stage: Stage) {
        if let Some(reached) = self.lock().get_mut(&position) {
            *reached = (*reached).max(stage);
        }
        self.changed.notify_waiters();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<usize, Stage>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl TurnPlace<'_> {
    /// The call's place in its turn.
    pub(crate) fn position(&self) -> usize {
        self.position
    }

    /// Waits until every earlier call of the turn holds its ticket (or ended).
    pub(crate) async fn before_taking_a_ticket(&self) {
        self.order.wait_until(self.position, Stage::Placed).await;
    }

    /// Says this call holds its ticket.
    pub(crate) fn placed(&self) {
        self.order.reach(self.position, Stage::Placed);
    }

    /// Waits until every earlier call of the turn is done.
    pub(crate) async fn before_applying(&self) {
        self.order.wait_until(self.position, Stage::Done).await;
    }
}

impl Drop for TurnPlace<'_> {
    fn drop(&mut self) {
        self.order.reach(self.position, Stage::Done);
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    /// Three calls: the third waits for the first two to take tickets and to be done, whichever of
    /// them gets there first.
    #[test]
    fn a_call_waits_for_every_earlier_call_of_its_turn_and_no_later_one() {
        let order = TurnOrder::default();
        let mut cx = Context::from_waker(Waker::noop());
        let first = order.start(0);
        let second = order.start(1);
        let third = order.start(2);
        assert!(
            pin!(first.before_applying()).poll(&mut cx).is_ready(),
            "the first call waits for nobody, later ones included"
        );
        assert!(
            pin!(third.before_taking_a_ticket())
                .poll(&mut cx)
                .is_pending()
        );
        second.placed();
        assert!(
            pin!(third.before_taking_a_ticket())
                .poll(&mut cx)
                .is_pending()
        );
        first.placed();
        assert!(
            pin!(third.before_taking_a_ticket())
                .poll(&mut cx)
                .is_ready()
        );
        let mut applying = pin!(third.before_applying());
        assert!(applying.as_mut().poll(&mut cx).is_pending());
        drop(second);
        assert!(applying.as_mut().poll(&mut cx).is_pending());
        drop(first);
        assert_eq!(applying.as_mut().poll(&mut cx), Poll::Ready(()));
    }
}
