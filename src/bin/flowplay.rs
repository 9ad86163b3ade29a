//! The `flowplay` command-line tool (see `flowplay help`).

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(flowplay::cli::main(&argv));
}
