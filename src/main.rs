//! The `hermesd` binary: a thin shell over the library's CLI.

fn main() -> std::process::ExitCode {
    hermesd::cli::main()
}
