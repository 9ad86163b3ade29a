//! The sizes a run may ask for, and the memory it will need, checked before
//! it starts: a request over a limit, or over the machine's free memory, is
//! refused in one line instead of failing an allocation of hundreds of
//! gigabytes or running silently for hours.

use crate::flow::{FlowConfig, FlowKind};
use crate::train::config::RunConfig;

/// The largest lattice side L (4,096 sites): the HMC reference's two-point
/// function costs V^2 a trajectory, hours beyond this.
pub const MAX_LATTICE: usize = 64;
/// The most samples (or fields) a training step may take.
pub const MAX_BATCH: usize = 65_536;
/// The most fresh samples drawn for the held-out metrics and estimates.
pub const MAX_SAMPLES: usize = 1_000_000;
/// The most HMC trajectories a reference may take.
pub const MAX_TRAJECTORIES: usize = 1_000_000;
/// The largest scalar stack (the bijection module's own limit), and the most
/// coupling layers, conditioner width (or channels) and residual blocks.
pub use crate::bijection::stack::MAX_STACK;
pub const MAX_LAYERS: usize = 64;
pub const MAX_WIDTH: usize = 1_024;
pub const MAX_DEPTH: usize = 16;

/// Why a run is refused before it starts.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LimitError {
    #[error("{what} {value} is over the limit of {max}")]
    OverLimit {
        what: &'static str,
        value: usize,
        max: usize,
    },
    #[error(
        "this run needs about {} of memory and the machine has {} free; use a smaller {}",
        gib(*need),
        gib(*free),
        largest
    )]
    OverMemory {
        need: u64,
        free: u64,
        /// what to make smaller, e.g. "batch (--batch)"
        largest: &'static str,
    },
}

/// Bytes as gibibytes for a person.
fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// Checks one size against its limit.
pub fn at_most(what: &'static str, value: usize, max: usize) -> Result<(), LimitError> {
    if value > max {
        return Err(LimitError::OverLimit { what, value, max });
    }
    Ok(())
}

/// Checks a lattice side against [`MAX_LATTICE`].
pub fn lattice(size: usize) -> Result<(), LimitError> {
    at_most("the lattice side L", size, MAX_LATTICE)
}

/// Checks a reference's HMC trajectories against [`MAX_TRAJECTORIES`].
pub fn trajectories(n: usize) -> Result<(), LimitError> {
    at_most("HMC trajectories", n, MAX_TRAJECTORIES)
}

/// Checks every size of `config` against its limit, then the memory it needs
/// against what the machine has free (where the system says).
pub fn check(config: &RunConfig) -> Result<(), LimitError> {
    let f = &config.flow;
    at_most("the batch", config.settings.batch, MAX_BATCH)?;
    at_most("the held-out samples", config.eval_samples, MAX_SAMPLES)?;
    at_most("the stack", f.stack, MAX_STACK)?;
    at_most("the coupling layers", f.layers, MAX_LAYERS)?;
    at_most("the conditioner width", f.width, MAX_WIDTH)?;
    at_most("the conditioner depth", f.depth, MAX_DEPTH)?;
    if let crate::target::Target::Phi4(model) = &config.target {
        lattice(model.size)?;
    }
    let need = training_bytes(config);
    match free_memory() {
        Some(free) if need > free => Err(LimitError::OverMemory {
            need,
            free,
            largest: "batch (--batch), flow (--layers, --width, --stack) or lattice",
        }),
        _ => Ok(()),
    }
}

/// Values the backward pass keeps for one sample of `dim` variables through
/// `flow`: an upper bound, by the shape of each architecture.
pub fn values_per_sample(flow: &FlowConfig, dim: usize) -> usize {
    let stack = flow.site_stack().layers().len().max(1);
    let (conv_width, conv_hidden) = conv_extent(flow);
    match flow.kind {
        FlowKind::Radial | FlowKind::RadialFourier => {
            4 * dim + 16 * stack * (2 * flow.fourier_order + 1)
        }
        FlowKind::Elementwise => 6 * dim * stack,
        // a fully connected conditioner of `depth` blocks at `width`
        FlowKind::Coupling => flow.layers * (6 * dim * stack + 4 * (flow.depth + 1) * flow.width),
        // a convolutional conditioner: up to `conv_width` channels at every site
        FlowKind::Lattice => flow.layers * dim * (6 * stack + 4 * conv_hidden * conv_width),
    }
}

/// The widest hidden layer of a lattice flow's conditioner and the number of
/// hidden layers.
fn conv_extent(flow: &FlowConfig) -> (usize, usize) {
    match &flow.conv.channels {
        Some(list) => (list.iter().copied().max().unwrap_or(1), list.len()),
        None => (flow.width, flow.depth + 1),
    }
}

/// Parameters of `flow` on `dim` variables, an upper bound.
fn params_bound(flow: &FlowConfig, dim: usize) -> usize {
    let (w, d) = (flow.width, flow.depth + 2);
    let stack = flow.site_stack().layers().len();
    let (conv_width, conv_hidden) = conv_extent(flow);
    let taps = flow.conv.kernel * flow.conv.kernel;
    match flow.kind {
        FlowKind::Radial | FlowKind::RadialFourier => {
            2 * dim + 8 * flow.stack * (2 * flow.fourier_order + 1)
        }
        FlowKind::Elementwise => 8 * flow.stack * dim,
        FlowKind::Coupling => flow.layers * d * w * (w + dim + 8 * flow.stack),
        FlowKind::Lattice => {
            flow.layers * (conv_hidden + 1) * taps * conv_width * (conv_width + 8 * stack)
        }
    }
}

/// The memory a run of `config` needs, roughly and from above: per sample of
/// the batch the values its backward pass keeps; the parameters with Adam's
/// two moments and one gradient per thread; and the held-out samples.
pub fn training_bytes(config: &RunConfig) -> u64 {
    const VALUE: u64 = 8; // f64, the wider of the two precisions
    let dim = config.target.dim() as u64;
    let per_sample = values_per_sample(&config.flow, config.target.dim()) as u64;
    let batch = config.settings.batch as u64;
    let params = params_bound(&config.flow, config.target.dim()) as u64;
    let copies = 3 + config.settings.threads.max(1) as u64;
    let held_out = config.eval_samples as u64 * (dim + 2);
    VALUE * (2 * batch * per_sample + copies * params + held_out)
}

/// The memory the system has free for a new process (Linux: MemAvailable),
/// or `None` where it does not say.
pub fn free_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Target;
    use crate::target::phi4::{Couplings, Phi4};
    use crate::train::config::Precision;
    use crate::train::{Loss, TrainSettings};

    fn config(target: Target, flow: FlowConfig, batch: usize) -> RunConfig {
        RunConfig {
            target,
            flow,
            steps: 10,
            settings: TrainSettings {
                batch,
                learning_rate: 1e-3,
                seed: 0,
                loss: Loss::ReverseKl,
                threads: 2,
            },
            precision: Precision::F32,
            eval_samples: 20_000,
        }
    }

    fn phi4(size: usize) -> Target {
        let couplings = Couplings {
            m2: -4.0,
            lambda: 8.0,
        };
        Target::Phi4(Phi4::new(size, couplings).unwrap())
    }

    #[test]
    fn sizes_over_their_limits_are_named() {
        assert_eq!(
            lattice(100_000).unwrap_err().to_string(),
            "the lattice side L 100000 is over the limit of 64"
        );
        let spiral = Target::parse("spiral").unwrap();
        let radial = FlowConfig::defaults(FlowKind::RadialFourier);
        let err = check(&config(spiral, radial, 100_000_000)).unwrap_err();
        assert_eq!(
            err,
            LimitError::OverLimit {
                what: "the batch",
                value: 100_000_000,
                max: MAX_BATCH
            }
        );
        assert!(trajectories(MAX_TRAJECTORIES).is_ok() && trajectories(2_000_000).is_err());
    }

    #[test]
    fn the_memory_estimate_grows_with_what_a_run_keeps() {
        // the lab's design: 8 layers with 8 channels, one map a site
        let lattice_flow = FlowConfig {
            stack: 1,
            width: 8,
            depth: 1,
            ..FlowConfig::defaults(FlowKind::Lattice)
        };
        let small = training_bytes(&config(phi4(8), lattice_flow.clone(), 256));
        let wide = training_bytes(&config(phi4(64), lattice_flow.clone(), 65_536));
        // the page's lab at L = 8 needs at most a few hundred megabytes (an
        // upper bound); L = 64 at the largest batch, terabytes
        assert!(small < 1 << 30, "{small}");
        assert!(wide > 1 << 40, "{wide}");
        assert!(training_bytes(&config(phi4(8), lattice_flow, 512)) > small);
    }

    #[test]
    fn the_free_memory_is_read_where_the_system_says() {
        if cfg!(target_os = "linux") {
            let free = free_memory().expect("MemAvailable in /proc/meminfo");
            assert!(free > 1 << 20);
        }
    }
}
