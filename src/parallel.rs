//! Splitting work over the machine's cores (scoped threads; one thread in the browser).

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
    let chunks: Vec<&[T]> = items.chunks(per).collect();
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = chunks[1..].iter().map(|c| s.spawn(move || f(c))).collect();
        let mut out = vec![f(chunks[0])];
        for h in handles {
            match h.join() {
                Ok(v) => out.push(v),
                Err(e) => std::panic::resume_unwind(e),
            }
        }
        out
    })
}
