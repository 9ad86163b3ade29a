//! A worker as a native thread: the same [`WorkerCore`] as in the browser,
//! its messages passed in their wire form (so the wire is tested natively).

use super::core::WorkerCore;
use super::protocol::{FromWorker, ToWorker, Wire};
use super::{CHUNK, Channel};
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};

/// The page's end of a training thread.
pub struct ThreadChannel {
    to_worker: Sender<Wire>,
    from_worker: Receiver<Wire>,
}

impl ThreadChannel {
    pub fn spawn() -> Result<Self, String> {
        let (to_worker, inbox) = channel::<Wire>();
        let (outbox, from_worker) = channel::<Wire>();
        std::thread::Builder::new()
            .name("flowplay-trainer".into())
            .spawn(move || {
                let failed = outbox.clone();
                let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    serve(&inbox, &outbox)
                }));
                if let Err(panic) = served {
                    let what = super::panic_message(panic.as_ref());
                    let _ = failed.send(FromWorker::Failed(what).to_wire());
                }
            })
            .map_err(|e| format!("no training thread: {e}"))?;
        Ok(Self {
            to_worker,
            from_worker,
        })
    }
}

/// The thread's loop: every waiting message first, then a stretch of
/// training; it waits for a message only when there is nothing to train.
fn serve(inbox: &Receiver<Wire>, outbox: &Sender<Wire>) {
    let mut core = WorkerCore::new();
    loop {
        let wire = if core.has_work() {
            match inbox.try_recv() {
                Ok(wire) => Some(wire),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => return,
            }
        } else {
            match inbox.recv() {
                Ok(wire) => Some(wire),
                Err(_) => return,
            }
        };
        let reply = match wire {
            Some(wire) => match ToWorker::from_wire(wire) {
                Ok(message) => core.handle(message),
                Err(e) => Some(FromWorker::Failed(format!(
                    "a message the worker cannot read: {e}"
                ))),
            },
            None => core.work(CHUNK),
        };
        if let Some(reply) = reply
            && outbox.send(reply.to_wire()).is_err()
        {
            return;
        }
    }
}

impl Channel for ThreadChannel {
    fn post(&self, message: &ToWorker) {
        // a thread that has stopped says so through `take`
        let _ = self.to_worker.send(message.to_wire());
    }

    fn take(&self) -> Vec<FromWorker> {
        let mut replies = Vec::new();
        loop {
            match self.from_worker.try_recv() {
                Ok(wire) => {
                    replies.push(FromWorker::from_wire(wire).unwrap_or_else(|e| {
                        FromWorker::Failed(format!("an unreadable reply: {e}"))
                    }))
                }
                Err(TryRecvError::Empty) => return replies,
                Err(TryRecvError::Disconnected) => {
                    replies.push(FromWorker::Failed("the training thread stopped".into()));
                    return replies;
                }
            }
        }
    }

    fn place(&self) -> &'static str {
        "thread"
    }
}
