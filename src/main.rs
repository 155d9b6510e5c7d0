//! The `fedbandits` binary: a thin shell around [`fedbandits::cli`].

fn main() -> std::process::ExitCode {
    fedbandits::cli::main_with_args()
}
