//! Runs as the command line and the page start them: the backend a run
//! trains on ([`backend`]), its JSON report ([`report`]), the model file both
//! read and write ([`model_file`]), and a phi^4 flow run ([`phi4`]).

pub mod backend;
pub mod model_file;
pub mod phi4;
pub mod report;
