//! When a run keeps a checkpoint of its parameters: often in its first steps,
//! so there is a good state to go back to early, then at a steady interval.

/// A checkpoint of the parameters is kept every this many steps (and at
/// [`EARLY_CHECKPOINTS`]), when the loss is healthy then.
pub const CHECKPOINT_EVERY: usize = 200;
/// Checkpoints in a run's first steps, so there is a good state to go back to
/// before the first regular one.
pub const EARLY_CHECKPOINTS: [usize; 3] = [10, 50, 100];

/// Whether step `step` is one to keep a checkpoint at.
pub fn checkpoint_due(step: usize) -> bool {
    EARLY_CHECKPOINTS.contains(&step) || step.is_multiple_of(CHECKPOINT_EVERY)
}

/// Whether the steps after `before` up to `after` pass a checkpoint step.
pub fn checkpoint_between(before: usize, after: usize) -> bool {
    (before + 1..=after).any(checkpoint_due)
}
