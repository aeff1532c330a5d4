//! The `quest` command line: wiring only; each room's work lives in the library.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
