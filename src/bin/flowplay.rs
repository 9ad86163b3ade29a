//! The `flowplay` command-line tool (see `flowplay help`); native only.

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(flowplay::cli::main(&argv));
}

#[cfg(target_arch = "wasm32")]
fn main() {}
