//! Splitting work over the machine's cores: rayon's pool natively, whose
//! threads live across calls (a thread started each training step cost
//! nearly as much as it saved), one thread in the browser (its workers are
//! separate trainers, `crate::app::host`).

#[cfg(not(target_arch = "wasm32"))]
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(not(target_arch = "wasm32"))]
use std::sync::{Mutex, OnceLock, PoisonError};

/// Applies `f` to consecutive chunks of `items` (each a multiple of `stride`
/// long) on up to `threads` threads; results come back in order.
pub fn map_chunks<T: Sync, R: Send>(
    items: &[T],
    stride: usize,
    threads: usize,
    f: impl Fn(&[T]) -> R + Sync,
) -> Vec<R> {
    let rows = items.len() / stride.max(1);
    let threads = threads.clamp(1, rows.max(1));
    if threads == 1 || cfg!(target_arch = "wasm32") {
        return vec![f(items)];
    }
    let per = rows.div_ceil(threads) * stride;
    let mut chunks: Vec<(&[T], Option<R>)> = items.chunks(per).map(|c| (c, None)).collect();
    on_pool(&mut chunks, threads, |(chunk, out)| *out = Some(f(chunk)));
    chunks.into_iter().filter_map(|(_, out)| out).collect()
}

/// Runs `f` on every item of `items`, shared over up to `threads` threads
/// (in order on this thread where `threads` is 1, and in the browser): the
/// items are usually disjoint blocks of slices that `f` writes.
pub fn for_each_mut<I: Send>(items: &mut [I], threads: usize, f: impl Fn(&mut I) + Sync) {
    if threads <= 1 || items.len() <= 1 {
        items.iter_mut().for_each(f);
    } else {
        on_pool(items, threads, f);
    }
}

/// Runs `f` on every item on a pool of `threads` threads (natively; in
/// order on this thread in the browser), each item taken by whichever
/// thread is free, and returns when all are done. A panic in any reaches the
/// caller once the others have finished.
#[cfg(not(target_arch = "wasm32"))]
fn on_pool<I: Send>(items: &mut [I], threads: usize, f: impl Fn(&mut I) + Sync) {
    match pool(threads) {
        Some(pool) => {
            let f = &f;
            pool.scope(|s| {
                for item in items.iter_mut() {
                    s.spawn(move |_| f(item));
                }
            });
        }
        None => items.iter_mut().for_each(f),
    }
}

#[cfg(target_arch = "wasm32")]
fn on_pool<I: Send>(items: &mut [I], _threads: usize, f: impl Fn(&mut I) + Sync) {
    items.iter_mut().for_each(f);
}

/// Runs `f` on one of the threads of the pool of `threads` (natively; the
/// browser's trainer runs it where it is), so that the work it splits there runs on the same
/// threads, the one that runs `f` among them: the serial work between splits
/// (a training step's batch, its optimizer step) then does not compete with
/// the pool's idle threads for the cores.
#[cfg(not(target_arch = "wasm32"))]
pub fn on_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    match (threads > 1).then(|| pool(threads)).flatten() {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

/// As the native [`on_threads`]: the browser's trainer has one thread.
#[cfg(target_arch = "wasm32")]
pub fn on_threads<R: Send>(_threads: usize, f: impl FnOnce() -> R + Send) -> R {
    f()
}

/// The pool of `threads` threads, started on first use and kept for the
/// process's life (one per thread count asked for); `None` where the system
/// refuses threads, and the caller then works alone.
#[cfg(not(target_arch = "wasm32"))]
fn pool(threads: usize) -> Option<std::sync::Arc<rayon::ThreadPool>> {
    use std::sync::{Arc, Mutex};
    static POOLS: Mutex<Vec<(usize, Arc<rayon::ThreadPool>)>> = Mutex::new(Vec::new());
    let mut pools = POOLS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, pool)) = pools.iter().find(|(n, _)| *n == threads) {
        return Some(pool.clone());
    }
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("flowplay-{i}"))
            .build()
            .ok()?,
    );
    pools.push((threads, pool.clone()));
    Some(pool)
}

/// The fewest parts a training batch is split into, whatever the number of
/// threads: summed in their order, the parts' gradients are then the same
/// numbers on one thread or many, so a seeded run is the same run on any
/// machine.
pub const PARTS: usize = 8;

/// Rows a part holds at most beyond [`PARTS`] parts, so a large batch still
/// has parts for every core of a large machine.
pub const PART_ROWS: usize = 64;

/// Applies `f` to each of the consecutive parts of `items` (each a multiple
/// of `stride` long: at least [`PARTS`] parts, more for batches over
/// [`PARTS`] x [`PART_ROWS`] rows), the parts shared over up to `threads`
/// threads; results come back in the parts' order. Where the parts fall
/// depends on the number of rows only, never on `threads`.
pub fn map_parts<T: Sync, R: Send>(
    items: &[T],
    stride: usize,
    threads: usize,
    f: impl Fn(&[T]) -> R + Sync,
) -> Vec<R> {
    let parts = parts_of(items, stride);
    map_chunks(&parts, 1, threads, |group| {
        group.iter().map(|part| f(part)).collect::<Vec<R>>()
    })
    .into_iter()
    .flatten()
    .collect()
}

/// [`map_parts`] with a buffer per part that outlives the call: part `i` gets
/// `buffers[i]` (made by `new_buffer` where missing), so a caller that runs
/// every step (the CPU trainer's per-part gradients) reuses its memory
/// instead of asking the system for fresh pages each time.
pub fn map_parts_with<T: Sync, B: Send, R: Send>(
    items: &[T],
    stride: usize,
    threads: usize,
    buffers: &mut Vec<B>,
    new_buffer: impl Fn() -> B,
    f: impl Fn(&[T], &mut B) -> R + Sync,
) -> Vec<R> {
    let all = 0..part_count(items.len(), stride);
    map_some_parts_with(items, stride, all, threads, buffers, new_buffer, f)
}

/// [`map_parts_with`] over the items `draw` makes (`len` of them, where the
/// parts fall), drawn on this thread while the pool's other threads wake up;
/// every thread then takes parts one at a time, and this one waits for the
/// last by spinning. A training step is a few hundred microseconds: waking
/// a sleeping pool thread at its start and again at its end cost about 25 µs
/// each on a 2-core virtual machine, a tenth of the step. The results are
/// those of [`map_parts_with`] on the drawn items, on any number of threads
/// (it also serves where `draw` makes other than `len` items). `draw` must not
/// itself split work over the pool: this thread could then pick up a helper's
/// job, which waits for the draw.
pub fn map_drawn_parts_with<T: Send + Sync, B: Send, R: Send>(
    len: usize,
    stride: usize,
    threads: usize,
    draw: impl FnOnce() -> Vec<T> + Send,
    buffers: &mut Vec<B>,
    new_buffer: impl Fn() -> B,
    f: impl Fn(&[T], &mut B) -> R + Sync,
) -> Vec<R> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        // the pool of `threads` (the one a training step runs on, see
        // `on_threads`), and no more helpers than there are parts
        let helpers = threads.min(part_count(len, stride)).saturating_sub(1);
        if let Some(team) = (helpers > 0).then(|| pool(threads)).flatten() {
            return map_drawn_parts_on(&team, helpers, len, stride, draw, buffers, new_buffer, f);
        }
    }
    // one thread (the browser): the parts fall where the drawn items put them
    let _ = (len, threads);
    let items = draw();
    map_parts_with(&items, stride, 1, buffers, new_buffer, f)
}

/// [`map_drawn_parts_with`] on the pool `team`, this thread and `helpers`
/// of the pool's others taking the parts.
#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::too_many_arguments)]
fn map_drawn_parts_on<T: Send + Sync, B: Send, R: Send>(
    team: &rayon::ThreadPool,
    helpers: usize,
    len: usize,
    stride: usize,
    draw: impl FnOnce() -> Vec<T> + Send,
    buffers: &mut Vec<B>,
    new_buffer: impl Fn() -> B,
    f: impl Fn(&[T], &mut B) -> R + Sync,
) -> Vec<R> {
    let count = part_count(len, stride);
    if buffers.len() < count {
        buffers.resize_with(count, &new_buffer);
    }
    let slots: Vec<Mutex<(&mut B, Option<R>)>> = buffers[..count]
        .iter_mut()
        .map(|buffer| Mutex::new((buffer, None)))
        .collect();
    let drawn: OnceLock<Vec<T>> = OnceLock::new();
    let given_up = AtomicBool::new(false);
    let (next, finished) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let take_parts = || {
        let Some(items) = wait_for(|| drawn.get(), &given_up) else {
            return;
        };
        let parts = parts_of(items, stride);
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= count {
                break;
            }
            // counted even when `f` panics, so the wait below ends (and the
            // scope passes the panic on)
            let _finished = CountOnDrop(&finished);
            // a slot is poisoned only by its own part's panic, which the
            // scope passes on
            let mut slot = slots[i].lock().unwrap_or_else(PoisonError::into_inner);
            let (buffer, out) = &mut *slot;
            *out = Some(f(parts[i], buffer));
        }
    };
    let undrawn = team.scope(|scope| {
        for _ in 0..helpers {
            scope.spawn(|_| take_parts());
        }
        // the helpers give up if `draw` panics
        let give_up = SetOnDrop(&given_up);
        let items = draw();
        std::mem::forget(give_up);
        if part_count(items.len(), stride) != count {
            given_up.store(true, Ordering::Release);
            return Some(items);
        }
        // cannot fail: nothing else sets it
        let _ = drawn.set(items);
        take_parts();
        wait_for(
            || (finished.load(Ordering::Acquire) >= count).then_some(()),
            &given_up,
        );
        None
    });
    match undrawn {
        None => slots
            .into_iter()
            .filter_map(|slot| slot.into_inner().unwrap_or_else(PoisonError::into_inner).1)
            .collect(),
        // `draw` made other than `len` items: the parts fall elsewhere
        Some(items) => {
            drop(slots);
            map_parts_with(&items, stride, helpers + 1, buffers, new_buffer, f)
        }
    }
}

/// Sets its flag when dropped, as when a panic unwinds past it.
#[cfg(not(target_arch = "wasm32"))]
struct SetOnDrop<'a>(&'a AtomicBool);

#[cfg(not(target_arch = "wasm32"))]
impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Adds one to its count when dropped, a panic included.
#[cfg(not(target_arch = "wasm32"))]
struct CountOnDrop<'a>(&'a AtomicUsize);

#[cfg(not(target_arch = "wasm32"))]
impl Drop for CountOnDrop<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

/// Spins until `ready` gives a value, or `None` once `given_up` is set,
/// letting other threads have the core now and then (where there are more
/// threads than cores, the one waited for may need it).
#[cfg(not(target_arch = "wasm32"))]
fn wait_for<V>(ready: impl Fn() -> Option<V>, given_up: &AtomicBool) -> Option<V> {
    loop {
        for _ in 0..64 {
            if let Some(value) = ready() {
                return Some(value);
            }
            if given_up.load(Ordering::Acquire) {
                return None;
            }
            std::hint::spin_loop();
        }
        std::thread::yield_now();
    }
}

/// [`map_parts_with`] for the parts numbered `chosen` only (their results in
/// order): a share of a batch split between several workers, each part the
/// same rows and the same numbers as when one worker takes them all.
pub fn map_some_parts_with<T: Sync, B: Send, R: Send>(
    items: &[T],
    stride: usize,
    chosen: std::ops::Range<usize>,
    threads: usize,
    buffers: &mut Vec<B>,
    new_buffer: impl Fn() -> B,
    f: impl Fn(&[T], &mut B) -> R + Sync,
) -> Vec<R> {
    let parts = parts_of(items, stride);
    if buffers.len() < parts.len() {
        buffers.resize_with(parts.len(), new_buffer);
    }
    let chosen = chosen.start.min(parts.len())..chosen.end.min(parts.len());
    let work: Vec<(&[T], &mut B)> = parts[chosen.clone()]
        .iter()
        .copied()
        .zip(buffers[chosen].iter_mut())
        .collect();
    let threads = threads.clamp(1, work.len().max(1));
    let mut results: Vec<Slot<T, B, R>> = work.into_iter().map(|part| (part, None)).collect();
    let run = |((part, buffer), out): &mut Slot<T, B, R>| {
        *out = Some(f(part, buffer));
    };
    if threads == 1 || cfg!(target_arch = "wasm32") {
        results.iter_mut().for_each(run);
    } else {
        on_pool(&mut results, threads, run);
    }
    results.into_iter().filter_map(|(_, out)| out).collect()
}

/// A part, its buffer, and its result once computed.
type Slot<'a, T, B, R> = ((&'a [T], &'a mut B), Option<R>);

/// How many parts [`map_parts`] splits `len` items (rows of `stride`) into.
pub fn part_count(len: usize, stride: usize) -> usize {
    let rows = len / stride.max(1);
    rows.div_ceil(rows_per_part(rows))
}

/// The rows in each part but the last: at least [`PARTS`] parts (fewer only
/// for fewer rows), each at most [`PART_ROWS`] rows beyond that.
fn rows_per_part(rows: usize) -> usize {
    let parts = PARTS.max(rows.div_ceil(PART_ROWS)).min(rows).max(1);
    rows.div_ceil(parts).max(1)
}

/// The consecutive parts [`map_parts`] splits `items` into (rows of `stride`).
fn parts_of<T>(items: &[T], stride: usize) -> Vec<&[T]> {
    let stride = stride.max(1);
    let rows = items.len() / stride;
    items.chunks(rows_per_part(rows) * stride).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_fall_in_the_same_places_on_any_number_of_threads() {
        let items: Vec<u32> = (0..3 * 21).collect();
        let bounds = |threads| map_parts(&items, 3, threads, |p| (p[0], p.len()));
        let one = bounds(1);
        assert_eq!(one.len(), 7, "21 rows in parts of 3 rows");
        assert!(one.iter().all(|&(_, len)| len == 9));
        for threads in [2, 3, 8, 64] {
            assert_eq!(bounds(threads), one, "{threads} threads");
        }
        assert_eq!(
            map_parts(&items[..0], 3, 4, |p| p.len()),
            Vec::<usize>::new()
        );
        // a large batch: parts of at most 64 rows, for many cores
        let rows: Vec<u8> = vec![0; 1000];
        let lens = map_parts(&rows, 1, 3, |p| p.len());
        assert_eq!(lens.len(), 16);
        assert_eq!(lens.iter().sum::<usize>(), 1000);
        assert_eq!(map_parts(&rows, 1, 16, |p| p.len()), lens);
        assert_eq!(map_parts(&items[..6], 3, 4, |p| p.len()), vec![3, 3]);
        for (len, stride) in [(63, 3), (0, 3), (6, 3), (1000, 1), (500 * 2, 2), (5, 1)] {
            let counted = map_parts(&rows[..len], stride, 1, |_| ()).len();
            assert_eq!(
                part_count(len, stride),
                counted,
                "{len} items in rows of {stride}"
            );
        }
    }

    #[test]
    #[should_panic(expected = "part 3 failed")]
    fn a_panic_in_a_part_reaches_the_caller() {
        let rows: Vec<u32> = (0..64).collect();
        map_parts(&rows, 1, 2, |p| {
            assert!(p[0] != 24, "part 3 failed");
            p.len()
        });
    }

    #[test]
    fn some_parts_are_the_same_numbers_as_all_parts() {
        let rows: Vec<u32> = (0..1000).collect();
        let mut all_buffers: Vec<u32> = Vec::new();
        let all = map_parts_with(
            &rows,
            1,
            2,
            &mut all_buffers,
            || 0,
            |p, b| {
                *b = p[0];
                p.iter().sum::<u32>()
            },
        );
        let mut buffers: Vec<u32> = Vec::new();
        let mut pieced = Vec::new();
        for chosen in [0..5, 5..6, 6..16, 16..20] {
            pieced.extend(map_some_parts_with(
                &rows,
                1,
                chosen,
                3,
                &mut buffers,
                || 0,
                |p, b| {
                    *b = p[0];
                    p.iter().sum::<u32>()
                },
            ));
        }
        assert_eq!(pieced, all);
        assert_eq!(buffers, all_buffers);
    }

    #[test]
    fn drawn_parts_are_the_same_numbers_as_parts_of_the_drawn_items() {
        let rows: Vec<u32> = (0..1000).map(|i| i * 7 % 13).collect();
        let sum_and_mark = |p: &[u32], b: &mut Vec<u32>| {
            b.push(p[0]);
            p.iter().sum::<u32>()
        };
        let mut plain_buffers = Vec::new();
        let plain = map_parts_with(&rows, 2, 1, &mut plain_buffers, Vec::new, sum_and_mark);
        for threads in [1, 2, 3, 16] {
            let mut buffers = Vec::new();
            let drawn = map_drawn_parts_with(
                rows.len(),
                2,
                threads,
                || rows.clone(),
                &mut buffers,
                Vec::new,
                sum_and_mark,
            );
            assert_eq!(drawn, plain, "{threads} threads");
            assert_eq!(buffers, plain_buffers, "{threads} threads");
        }
        // a draw of other than the announced length: the parts of what it drew
        // (3 rows in 3 parts where 500 rows would be 8)
        assert_ne!(part_count(6, 2), part_count(rows.len(), 2));
        let mut buffers = Vec::new();
        let short = map_drawn_parts_with(
            rows.len(),
            2,
            2,
            || rows[..6].to_vec(),
            &mut buffers,
            Vec::new,
            sum_and_mark,
        );
        let mut plain_buffers = Vec::new();
        let expected = map_parts_with(&rows[..6], 2, 1, &mut plain_buffers, Vec::new, sum_and_mark);
        assert_eq!(short, expected);
    }

    #[test]
    #[should_panic(expected = "part 2 failed")]
    fn a_panic_in_a_drawn_part_reaches_the_caller() {
        let mut buffers: Vec<()> = Vec::new();
        map_drawn_parts_with(
            64,
            1,
            2,
            || (0..64u32).collect::<Vec<_>>(),
            &mut buffers,
            || (),
            |p, _| {
                assert!(p[0] != 16, "part 2 failed");
                p.len()
            },
        );
    }

    #[test]
    #[should_panic(expected = "the draw failed")]
    fn a_panic_in_the_draw_reaches_the_caller_and_frees_the_other_threads() {
        let mut buffers: Vec<()> = Vec::new();
        map_drawn_parts_with(
            64,
            1,
            2,
            || -> Vec<u32> { panic!("the draw failed") },
            &mut buffers,
            || (),
            |p, _| p.len(),
        );
    }

    #[test]
    fn buffered_parts_match_the_plain_parts_and_keep_their_buffers() {
        let rows: Vec<u32> = (0..1000).collect();
        let plain = map_parts(&rows, 1, 1, |p| (p[0], p.len()));
        let mut buffers: Vec<Vec<u32>> = Vec::new();
        for threads in [1, 2, 3, 16] {
            let with = map_parts_with(&rows, 1, threads, &mut buffers, Vec::new, |p, b| {
                b.push(p[0]);
                (p[0], p.len())
            });
            assert_eq!(with, plain, "{threads} threads");
        }
        // each part kept its own buffer over the four calls
        assert_eq!(buffers.len(), plain.len());
        for (b, &(first, _)) in buffers.iter().zip(&plain) {
            assert_eq!(b, &vec![first; 4]);
        }
    }
}
