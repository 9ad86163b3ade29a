//! A worker as a native thread: the same [`WorkerCore`] as in the browser,
//! its messages passed in their wire form (so the wire is tested natively).
//! Its helpers, when a run asks for some, are threads too.

use super::core::{Helper, WorkerCore};
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
        let reply = move |reply: FromWorker| outbox.send(reply.to_wire()).is_ok();
        spawn_worker("flowplay-trainer", inbox, reply)?;
        Ok(Self {
            to_worker,
            from_worker,
        })
    }
}

/// Starts a thread serving the messages of `inbox`, its replies (and, should
/// it panic, the panic's message) handed to `reply`.
fn spawn_worker(
    name: &str,
    inbox: Receiver<Wire>,
    reply: impl Fn(FromWorker) -> bool + Send + 'static,
) -> Result<(), String> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let served =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| serve(&inbox, &reply)));
            if let Err(panic) = served {
                reply(FromWorker::Failed(super::panic_message(panic.as_ref())));
            }
        })
        .map(|_| ())
        .map_err(|e| format!("no training thread: {e}"))
}

/// A helper thread, as its lead sees it.
struct ThreadHelper {
    to_helper: Sender<Wire>,
}

impl Helper for ThreadHelper {
    fn post(&self, message: &ToWorker) -> Result<(), String> {
        self.to_helper
            .send(message.to_wire())
            .map_err(|_| "the helper thread stopped".to_string())
    }
}

/// `count` helper threads whose answers come to `answers` (in the lead's
/// messages' wire form). A helper ends when its lead drops it.
fn spawn_helpers(count: usize, answers: &Sender<Wire>) -> Result<Vec<Box<dyn Helper>>, String> {
    (0..count)
        .map(|k| {
            let (to_helper, inbox) = channel::<Wire>();
            let answers = answers.clone();
            let reply = move |reply: FromWorker| match reply.for_lead() {
                Some(message) => answers.send(message.to_wire()).is_ok(),
                None => true,
            };
            spawn_worker(&format!("flowplay-helper-{k}"), inbox, reply)?;
            Ok(Box::new(ThreadHelper { to_helper }) as Box<dyn Helper>)
        })
        .collect()
}

/// The thread's loop: every waiting message first, then a stretch of
/// training; it waits for a message only when there is nothing to train,
/// and while a split step waits, for its helpers' answers only.
fn serve(inbox: &Receiver<Wire>, reply: &dyn Fn(FromWorker) -> bool) {
    let mut core = WorkerCore::new();
    let mut answers: Option<Receiver<Wire>> = None;
    loop {
        let wire = if core.awaiting_helpers() {
            match answers.as_ref().map(Receiver::recv) {
                Some(Ok(wire)) => Some(wire),
                _ => Some(ToWorker::HelperFailed("the helper threads stopped".into()).to_wire()),
            }
        } else if core.has_work() {
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
        match wire.map(ToWorker::from_wire) {
            Some(Ok(message)) => {
                if let ToWorker::Start(spec) = &message
                    && spec.helpers > 0
                {
                    let (to_lead, from_helpers) = channel::<Wire>();
                    // without them the worker trains alone (its answer says so)
                    core.set_helpers(spawn_helpers(spec.helpers, &to_lead).unwrap_or_default());
                    answers = Some(from_helpers);
                }
                core.handle(message);
            }
            Some(Err(e)) => {
                if !reply(FromWorker::Failed(format!(
                    "a message the worker cannot read: {e}"
                ))) {
                    return;
                }
            }
            None => core.work(CHUNK),
        }
        for answer in core.take_replies() {
            if !reply(answer) {
                return;
            }
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
