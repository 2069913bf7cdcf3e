//! The threads calls run on: parked between calls, one more made whenever all are busy.
//!
//! A call runs on a thread of its own so that the caller can stop waiting at the wall-time limit
//! whatever the guest or a host call is doing. Threads are kept for the next call (starting one costs
//! tens of microseconds, more than a small call) up to [`MAX_IDLE`]; a call stuck in a host call keeps
//! its thread until the host call returns, and the pool simply starts another. The threads are
//! detached, so a stuck one never holds up the process's exit.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

/// Most threads kept parked for the next calls.
const MAX_IDLE: usize = 16;

type Job = Box<dyn FnOnce() + Send>;

/// A pool of call threads.
#[derive(Default, Clone)]
pub(crate) struct CallThreads {
    idle: Arc<Mutex<Vec<Sender<Job>>>>,
}

impl CallThreads {
    /// Runs `job` on a parked thread, or on a new one when none is free.
    pub(crate) fn spawn(&self, job: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        let mut job: Job = Box::new(job);
        loop {
            let parked = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            match parked {
                Some(thread) => match thread.send(job) {
                    Ok(()) => return Ok(()),
                    // That thread is gone; try the next one.
                    Err(returned) => job = returned.0,
                },
                None => return self.start(job),
            }
        }
    }

    fn start(&self, first: Job) -> std::io::Result<()> {
        let (send, receive) = channel::<Job>();
        let idle = self.idle.clone();
        std::thread::Builder::new()
            .name("turngate-call".into())
            .spawn(move || serve(first, &send, &receive, &idle))?;
        Ok(())
    }
}

fn serve(first: Job, send: &Sender<Job>, receive: &Receiver<Job>, idle: &Mutex<Vec<Sender<Job>>>) {
    first();
    loop {
        {
            let mut parked = idle.lock().unwrap_or_else(|e| e.into_inner());
            if parked.len() >= MAX_IDLE {
                return;
            }
            parked.push(send.clone());
        }
        match receive.recv() {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}
