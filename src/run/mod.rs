//! Runs as the command line and the page start them: the backend a run
//! trains on ([`backend`]), its JSON report ([`report`]), the model file both
//! read and write ([`model_file`]), a model as a bijx script ([`bijx_script`]),
//! a phi^4 flow run ([`phi4`]), and the sizes and memory a run may ask for
//! ([`limits`]).

pub mod backend;
pub mod bijx_script;
pub mod limits;
pub mod model_file;
pub mod phi4;
pub mod report;

/// Why a run cannot be set up or finished on its backend.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RunError {
    #[error("--backend must be cpu or gpu, got '{0}'")]
    UnknownBackend(String),
    #[error(
        "the Z2 radial flow keeps its centre fixed, which only the CPU trainer does; use --backend cpu"
    )]
    FixedCentreOnGpu,
    #[error(
        "this build has no GPU backend for the command line (built without the 'gpu' feature); use --backend cpu"
    )]
    NoGpuBackend,
    #[error(transparent)]
    Limit(#[from] limits::LimitError),
    #[error(transparent)]
    Setup(#[from] crate::train::SetupError),
    #[error(transparent)]
    Flow(#[from] crate::flow::FlowError),
    #[cfg(feature = "gpu")]
    #[error(transparent)]
    Gpu(#[from] crate::gpu::GpuError),
    #[error(transparent)]
    Estimate(#[from] crate::phi4::EstimateError),
}

/// The message, where errors meet a person (the command line).
impl From<limits::LimitError> for String {
    fn from(e: limits::LimitError) -> String {
        e.to_string()
    }
}

/// The message, where errors meet a person (the command line, the page).
impl From<RunError> for String {
    fn from(e: RunError) -> String {
        e.to_string()
    }
}
