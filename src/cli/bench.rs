//! `flowplay bench`: throughput of the reference recipes, for comparing releases.
pub const HELP: &str = "";
pub fn run(_argv: &[String]) -> Result<(), String> {
    Err("bench: not yet".into())
}
