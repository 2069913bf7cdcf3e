//! The order in which calls on one root may touch the same paths.
//!
//! Calls on disjoint paths run at once; calls that overlap (one path at or beneath the other) and where
//! either writes go one after the other, in the order they arrived. Each call takes a ticket with the
//! locations its approval grants and waits until no earlier ticket still in play overlaps it; it holds
//! the ticket from before its view is taken until its changes are applied. So two concurrent edits of
//! one file never both read the old content: the second sees the first's result.
//!
//! A call that writes beneath a directory that is not there yet holds that directory too
//! ([`held_paths`]): it would make it, and so would a call writing beside it, and the second to apply
//! would find the directory its view did not have. Held, the second waits and its view sees the first's
//! directory.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::descriptor::Access;
use crate::lower::Lower;
use crate::names::NameMatch;
use crate::resolve::{EntryKind, RelPath};
use crate::root::Root;

/// The tickets of one root.
#[derive(Debug, Default)]
pub(crate) struct PathOrder {
    tickets: Mutex<Tickets>,
    changed: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct Tickets {
    next: u64,
    held: BTreeMap<u64, Vec<(RelPath, Access)>>,
}

/// A call's place in the order; dropping it lets the calls waiting on it go.
#[derive(Debug)]
pub(crate) struct Ticket<'a> {
    order: &'a PathOrder,
    number: u64,
}

impl PathOrder {
    /// Waits until the call that will touch `paths` may go ([`PathOrder::take`], then
    /// [`Ticket::ready`]).
    #[cfg(test)]
    async fn enter(&self, paths: Vec<(RelPath, Access)>) -> Ticket<'_> {
        let ticket = self.take(paths);
        ticket.ready().await;
        ticket
    }

    /// The place of the call that will touch `paths`: after every ticket taken before it.
    pub(crate) fn take(&self, paths: Vec<(RelPath, Access)>) -> Ticket<'_> {
        let mut tickets = self.lock();
        let number = tickets.next;
        tickets.next += 1;
        tickets.held.insert(number, paths);
        Ticket {
            order: self,
            number,
        }
    }

    /// Whether an earlier ticket overlaps ticket `number`.
    fn waits(&self, number: u64) -> bool {
        let tickets = self.lock();
        let Some(mine) = tickets.held.get(&number) else {
            return false;
        };
        tickets
            .held
            .range(..number)
            .any(|(_, theirs)| overlaps(mine, theirs))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tickets> {
        self.tickets.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Ticket<'_> {
    /// Waits until no earlier ticket still in play overlaps this one.
    pub(crate) async fn ready(&self) {
        loop {
            let changed = self.order.changed.notified();
            if !self.order.waits(self.number) {
                return;
            }
            changed.await;
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.order.lock().held.remove(&self.number);
        self.order.changed.notify_waiters();
    }
}

/// What a call granted `granted` holds in the order: the granted paths and, for each path it may
/// write, the outermost of its parents that is not a directory in `root` now (the call may make it).
pub(crate) fn held_paths(root: &Root, granted: &[(RelPath, Access)]) -> Vec<(RelPath, Access)> {
    let mut held = granted.to_vec();
    let mut lower = None;
    for (path, access) in granted {
        if *access != Access::Write {
            continue;
        }
        let mut parent = RelPath::root();
        let mut components = path.components().peekable();
        while let Some(name) = components.next() {
            if components.peek().is_none() {
                break;
            }
            parent = parent.join(name);
            let lower = lower.get_or_insert_with(|| Lower::of(root));
            if !matches!(lower.entry(&parent), Ok(Some(entry)) if entry.kind == EntryKind::Dir) {
                held.push((parent, Access::Write));
                break;
            }
        }
    }
    held
}

/// Whether two calls' paths overlap where either writes; compared folded, as a directory that folds
/// names would (on one that does not, two names differing only in case wait for each other needlessly
/// but safely).
fn overlaps(a: &[(RelPath, Access)], b: &[(RelPath, Access)]) -> bool {
    let folding = NameMatch::Folding;
    a.iter().any(|(pa, aa)| {
        b.iter().any(|(pb, ab)| {
            (*aa == Access::Write || *ab == Access::Write)
                && (pa.is_within_as(pb, folding) || pb.is_within_as(pa, folding))
        })
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn paths(list: &[(&str, Access)]) -> Vec<(RelPath, Access)> {
        list.iter()
            .map(|(p, a)| (RelPath::parse(p).unwrap(), *a))
            .collect()
    }

    #[test]
    fn a_write_beneath_a_missing_directory_holds_the_outermost_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("have")).unwrap();
        std::fs::write(dir.path().join("file"), "").unwrap();
        let root = Root::open(dir.path()).unwrap();
        let held = |list: &[(&str, Access)]| held_paths(&root, &paths(list));
        // Parents that are there, and reads, hold nothing more.
        for list in [
            &[("top.txt", Access::Write)][..],
            &[("have/a.txt", Access::Write)],
            &[("gone/a.txt", Access::Read)],
        ] {
            assert_eq!(held(list), paths(list));
        }
        assert_eq!(
            held(&[("have/new/deeper/a.txt", Access::Write)]),
            paths(&[
                ("have/new/deeper/a.txt", Access::Write),
                ("have/new", Access::Write)
            ])
        );
        // A file where a directory would be: the call may not make it, but holds it all the same.
        assert_eq!(
            held(&[("file/a.txt", Access::Write)]),
            paths(&[("file/a.txt", Access::Write), ("file", Access::Write)])
        );
        // Two writes beside each other in a directory neither has overlap.
        assert!(overlaps(
            &held(&[("new/x/a.txt", Access::Write)]),
            &held(&[("new/y/b.txt", Access::Write)])
        ));
    }

    /// Three calls on one file arrive while a fourth holds it; polled latest first, each time only
    /// the earliest still waiting may go: the order is their arrival, not who looks first.
    #[test]
    fn overlapping_calls_go_in_the_order_they_arrived_whoever_looks_first() {
        use std::future::Future;
        use std::pin::pin;
        use std::task::{Context, Poll, Waker};
        let order = PathOrder::default();
        let file = || paths(&[("notes.txt", Access::Write)]);
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(first) = pin!(order.enter(file())).poll(&mut cx) else {
            panic!("nobody holds the file yet");
        };
        let mut second = pin!(order.enter(file()));
        let mut third = pin!(order.enter(file()));
        let mut fourth = pin!(order.enter(file()));
        // In arrival order, each takes its ticket and waits.
        assert!(second.as_mut().poll(&mut cx).is_pending());
        assert!(third.as_mut().poll(&mut cx).is_pending());
        assert!(fourth.as_mut().poll(&mut cx).is_pending());
        drop(first);
        assert!(fourth.as_mut().poll(&mut cx).is_pending());
        assert!(third.as_mut().poll(&mut cx).is_pending());
        let Poll::Ready(second_ticket) = second.as_mut().poll(&mut cx) else {
            panic!("the earliest waiting call did not go");
        };
        assert!(fourth.as_mut().poll(&mut cx).is_pending());
        drop(second_ticket);
        assert!(fourth.as_mut().poll(&mut cx).is_pending());
        let Poll::Ready(third_ticket) = third.as_mut().poll(&mut cx) else {
            panic!("the third did not go after the second");
        };
        drop(third_ticket);
        assert!(fourth.as_mut().poll(&mut cx).is_ready());
    }

    #[tokio::test]
    async fn overlapping_writes_wait_and_disjoint_ones_do_not() {
        let order = Arc::new(PathOrder::default());
        let first = order.enter(paths(&[("notes.txt", Access::Write)])).await;
        // Disjoint, or both reading: no wait.
        let other = order.enter(paths(&[("drafts/a.txt", Access::Write)])).await;
        drop(other);
        // A read of a directory holding the file waits for the write.
        let waiting = {
            let order = order.clone();
            tokio::spawn(async move {
                let _ticket = order.enter(paths(&[(".", Access::Read)])).await;
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "an overlapping call waits");
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("it goes once the earlier call is done")
            .unwrap();
    }
}
