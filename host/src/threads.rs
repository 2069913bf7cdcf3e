//! Threads that work is handed to: parked between jobs, one more made whenever all are busy. The
//! sandbox runs calls with a view on them (so that the caller can stop waiting at the wall-time limit
//! whatever the guest or a host call is doing), and the Node addon its work off the JavaScript thread.
//!
//! Threads are kept for the next job (starting one costs tens of microseconds, more than a small
//! call) up to [`MAX_IDLE`]; a job stuck in a host call keeps its thread until the host call returns,
//! and the pool simply starts another. The threads are detached, so a stuck one never holds up the
//! process's exit.
//!
//! A thread that finished a job keeps looking for the next one for [`LINGER`] before it sleeps, and
//! the caller looks for a job's answer as long before it sleeps ([`answer_of`]): waking a sleeping
//! thread costs far more than a small call on a virtual machine whose idle CPUs halt (a round trip to
//! a sleeping thread and back took 99 µs here, against 3.7 µs between two threads that were looking:
//! `cargo bench --bench sandbox`), and a job hands off twice. Both look with `sched_yield` between
//! looks, so another thread that has work gets the CPU at once. A caller that will need a thread can
//! wake one ahead ([`Threads::warm`]), while it checks the call and builds its view, so that the
//! thread is looking by the time the job is handed to it.

use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// Most threads kept parked for the next jobs.
const MAX_IDLE: usize = 16;

/// How long a thread that finished a job, or a caller waiting for a job's answer, keeps looking
/// before it sleeps: longer than a wake-up of a halted virtual CPU (about 50 µs here) and than the
/// thread's part of a small call (a read, a listing: about 100 µs here), short enough that the CPU time
/// it costs when nothing comes stays small beside a call's own.
pub const LINGER: Duration = Duration::from_micros(200);

/// The last part of a job, run once its thread is parked again: work nobody waits for (freeing what
/// the job used). A job handed to the thread meanwhile waits for it in the thread's queue, rather than
/// a thread being started for it.
pub type Tail = Box<dyn FnOnce() + Send>;

type Job = Box<dyn FnOnce() -> Option<Tail> + Send>;

/// What a parked thread is sent.
enum Message {
    /// Run this job.
    Run(Job),
    /// Wake up and look for a job during [`LINGER`]; stay parked.
    Linger,
}

/// A pool of threads.
#[derive(Clone)]
pub struct Threads {
    /// What the threads are called.
    name: &'static str,
    /// The parked threads, the most recently parked last: [`Threads::spawn`] takes it, and
    /// [`Threads::warm`] wakes it.
    idle: Arc<Mutex<Vec<Sender<Message>>>>,
}

impl Threads {
    /// A pool whose threads are called `name`; none is started until the first job.
    pub fn new(name: &'static str) -> Threads {
        Threads {
            name,
            idle: Arc::default(),
        }
    }

    /// Runs `job` on a parked thread, or on a new one when none is free.
    pub fn spawn(&self, job: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        self.hand(Box::new(move || {
            job();
            None
        }))
    }

    /// Runs `job` like [`Threads::spawn`], and the [`Tail`] it returns once its thread is parked again.
    pub fn spawn_with_tail(
        &self,
        job: impl FnOnce() -> Tail + Send + 'static,
    ) -> std::io::Result<()> {
        self.hand(Box::new(move || Some(job())))
    }

    fn hand(&self, mut job: Job) -> std::io::Result<()> {
        loop {
            let parked = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            match parked {
                Some(thread) => match thread.send(Message::Run(job)) {
                    Ok(()) => return Ok(()),
                    // That thread is gone; try the next one.
                    Err(returned) => match returned.0 {
                        Message::Run(returned) => job = returned,
                        Message::Linger => unreachable!("a call was sent"),
                    },
                },
                None => return self.start(job),
            }
        }
    }

    /// Wakes the thread the next [`Threads::spawn`] will take, if one is parked, so that it is
    /// looking for the job when the job comes.
    pub fn warm(&self) {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(thread) = idle.last() {
            let _ = thread.send(Message::Linger);
        }
    }

    fn start(&self, first: Job) -> std::io::Result<()> {
        let (send, receive) = channel::<Message>();
        let idle = self.idle.clone();
        std::thread::Builder::new()
            .name(self.name.into())
            .spawn(move || serve(first, &send, &receive, &idle))?;
        Ok(())
    }
}

fn serve(
    first: Job,
    send: &Sender<Message>,
    receive: &Receiver<Message>,
    idle: &Mutex<Vec<Sender<Message>>>,
) {
    let mut tail = first();
    loop {
        let parked = {
            let mut parked = idle.lock().unwrap_or_else(|e| e.into_inner());
            let room = parked.len() < MAX_IDLE;
            if room {
                parked.push(send.clone());
            }
            room
        };
        if let Some(tail) = tail.take() {
            tail();
        }
        if !parked {
            return;
        }
        match next_job(receive) {
            Some(job) => tail = job(),
            None => return,
        }
    }
}

/// The next job: looked for during [`LINGER`] (from now, and again from each [`Message::Linger`]),
/// then waited for asleep. `None` once the pool is gone.
fn next_job(receive: &Receiver<Message>) -> Option<Job> {
    let mut since = Instant::now();
    loop {
        let message = if since.elapsed() < LINGER {
            match receive.try_recv() {
                Ok(message) => message,
                Err(TryRecvError::Empty) => {
                    std::thread::yield_now();
                    continue;
                }
                Err(TryRecvError::Disconnected) => return None,
            }
        } else {
            receive.recv().ok()?
        };
        match message {
            Message::Run(job) => return Some(job),
            Message::Linger => since = Instant::now(),
        }
    }
}

/// A job's answer: looked for during [`LINGER`] (yielding to the caller's other tasks between looks),
/// then awaited. `None` if the job ended without one.
pub async fn answer_of<T>(answer: &mut oneshot::Receiver<T>) -> Option<T> {
    let since = Instant::now();
    while since.elapsed() < LINGER {
        match answer.try_recv() {
            Ok(value) => return Some(value),
            Err(oneshot::error::TryRecvError::Empty) => tokio::task::yield_now().await,
            Err(oneshot::error::TryRecvError::Closed) => return None,
        }
    }
    answer.await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `job` on the pool and waits for it; answers the thread it ran on.
    fn run_on(pool: &Threads) -> std::thread::ThreadId {
        let (send, receive) = channel();
        pool.spawn(move || {
            let _ = send.send(std::thread::current().id());
        })
        .unwrap();
        receive.recv().unwrap()
    }

    /// Waits until `count` threads are parked.
    fn parked(pool: &Threads, count: usize) {
        while pool.idle.lock().unwrap().len() != count {
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_warmed_thread_stays_parked_and_takes_the_next_call() {
        let pool = Threads::new("test");
        let first = run_on(&pool);
        parked(&pool, 1);
        pool.warm();
        assert_eq!(
            pool.idle.lock().unwrap().len(),
            1,
            "warming takes no thread"
        );
        assert_eq!(run_on(&pool), first, "no second thread was started");
        parked(&pool, 1);
    }

    #[test]
    fn a_thread_that_stopped_looking_still_takes_the_next_call() {
        let pool = Threads::new("test");
        let first = run_on(&pool);
        parked(&pool, 1);
        std::thread::sleep(LINGER * 10);
        assert_eq!(run_on(&pool), first);
        // Warmed and left alone, it goes back to sleep and wakes for a call all the same.
        pool.warm();
        std::thread::sleep(LINGER * 10);
        assert_eq!(run_on(&pool), first);
    }

    #[test]
    fn a_job_handed_while_a_tail_runs_waits_for_it_on_the_same_thread() {
        let pool = Threads::new("test");
        let (answered, answer) = channel();
        // The tail runs until the test lets it end, so the order does not depend on timing.
        let (release, released) = channel::<()>();
        let tail_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let done = tail_done.clone();
        pool.spawn_with_tail(move || {
            let _ = answered.send(std::thread::current().id());
            Box::new(move || {
                let _ = released.recv();
                done.store(true, std::sync::atomic::Ordering::SeqCst);
            })
        })
        .unwrap();
        let first = answer.recv().unwrap();
        // A thread that ran its tail before parking would stay blocked in it, never parked.
        let since = Instant::now();
        while pool.idle.lock().unwrap().is_empty() {
            assert!(
                since.elapsed() < Duration::from_secs(10),
                "the thread parks before its tail runs"
            );
            std::thread::yield_now();
        }
        let (ran, seen) = channel();
        pool.spawn(move || {
            let tail_was_done = tail_done.load(std::sync::atomic::Ordering::SeqCst);
            let _ = ran.send((std::thread::current().id(), tail_was_done));
        })
        .unwrap();
        release.send(()).unwrap();
        assert_eq!(
            seen.recv().unwrap(),
            (first, true),
            "the same thread, after the tail"
        );
    }

    #[tokio::test]
    async fn an_answer_is_found_whether_it_came_while_looking_or_after() {
        let (send, mut answer) = oneshot::channel();
        send.send(1).unwrap();
        assert_eq!(answer_of(&mut answer).await, Some(1));

        let (send, mut answer) = oneshot::channel();
        std::thread::spawn(move || {
            std::thread::sleep(LINGER * 10);
            send.send(2).unwrap();
        });
        assert_eq!(answer_of(&mut answer).await, Some(2));

        let (send, mut answer) = oneshot::channel::<i32>();
        drop(send);
        assert_eq!(answer_of(&mut answer).await, None);
    }
}
