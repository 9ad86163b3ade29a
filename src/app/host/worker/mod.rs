//! Training off the page's thread. A CPU run can train in a worker: in a
//! browser a Web Worker running this same program ([`web`]), natively a
//! thread ([`thread`]). Either way the worker's side is [`core::WorkerCore`],
//! a CPU trainer driven by the messages of [`protocol`], and the page's side
//! is a [`Channel`] the [`TrainerHost`](super::TrainerHost) posts to and
//! takes replies from once a frame. The page draws at its own pace however
//! long the steps take; the steps go on however slowly the page draws. The
//! worker also draws the playground's views when asked (`ToWorker::Draw`, with
//! the playground's own `picture::cpu_picture_from`), so the page's thread
//! only shows them.

pub mod core;
pub mod protocol;
#[cfg(not(target_arch = "wasm32"))]
pub mod thread;
#[cfg(target_arch = "wasm32")]
pub mod web;

use protocol::{FromWorker, ToWorker};
use std::cell::Cell;
use web_time::Duration;

/// The longest stretch a worker trains before it looks at its messages.
pub const CHUNK: Duration = Duration::from_millis(12);

/// The page's end of a worker.
pub trait Channel {
    /// Sends a message (a worker that cannot be reached says so through
    /// [`Channel::take`]).
    fn post(&self, message: &ToWorker);
    /// The replies that arrived since the last call, in order.
    fn take(&self) -> Vec<FromWorker>;
    /// Where the worker runs, for the device's label ("Web Worker", "thread").
    fn place(&self) -> &'static str;
}

thread_local! {
    /// Whether new CPU runs train in a worker: in a browser unless a link
    /// says `worker=off`; natively when asked.
    static WANTED: Cell<bool> = const { Cell::new(cfg!(target_arch = "wasm32")) };
}

/// Whether CPU runs started from now on train in a worker.
pub fn set_wanted(wanted: bool) {
    WANTED.with(|w| w.set(wanted));
}

/// Whether CPU runs train in a worker when one can be started.
pub fn wanted() -> bool {
    WANTED.with(Cell::get)
}

/// The most workers a run's steps are split over (a link's `workers=N`).
pub const MAX_WORKERS: usize = 8;

thread_local! {
    /// The further workers a worker's run splits its steps with; `None`
    /// until a link or a test says, then [`default_helpers`].
    static HELPERS: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Splits the steps of CPU runs started from now on over `workers` workers
/// in all (at least 1, at most [`MAX_WORKERS`]).
pub fn set_workers(workers: usize) {
    HELPERS.with(|h| h.set(Some(workers.clamp(1, MAX_WORKERS) - 1)));
}

/// The workers a link (or a test) chose to split steps over, if one did:
/// the page's address keeps that choice.
pub fn workers_chosen() -> Option<usize> {
    HELPERS.with(Cell::get).map(|h| h + 1)
}

/// The further workers a new worker splits its steps with.
pub fn helpers() -> usize {
    HELPERS.with(Cell::get).unwrap_or_else(default_helpers)
}

/// Without a word from the link: in a browser, one helper where there are
/// four cores or more (a core for the page, one each for two workers, and
/// one left for everything else); natively none (the thread splits its
/// batch over the machine's cores itself).
fn default_helpers() -> usize {
    #[cfg(target_arch = "wasm32")]
    {
        let cores = web::hardware_concurrency();
        usize::from(cores >= 4)
    }
    #[cfg(not(target_arch = "wasm32"))]
    0
}

/// What a panic says, from its payload (a text, or "an internal error").
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "an internal error".into())
}

/// A new worker, when they are wanted and one can be started; otherwise
/// why not (the run then trains on the page's thread).
pub fn spawn() -> Result<Box<dyn Channel>, String> {
    if !wanted() {
        return Err("workers are off".into());
    }
    #[cfg(target_arch = "wasm32")]
    let channel = web::WebChannel::spawn().map(|c| Box::new(c) as Box<dyn Channel>);
    #[cfg(not(target_arch = "wasm32"))]
    let channel = thread::ThreadChannel::spawn().map(|c| Box::new(c) as Box<dyn Channel>);
    channel
}
