use clap::Parser;

fn main() -> std::process::ExitCode {
    wasmclaw::cli::exit_quietly_on_broken_pipe();
    let cli = wasmclaw::cli::Cli::parse();
    wasmclaw::cli::init_tracing(cli.verbose);
    let runtime = wasmclaw::cli::async_runtime().expect("starting the async runtime");
    let code = match runtime.block_on(cli.run()) {
        Ok(code) => code,
        Err(e) => {
            // Not `eprintln!`: on a closed stderr it would end the process
            // quietly with success, and this is a failure.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    };
    // A read of the terminal still waiting (an answer `chat` or `run` no
    // longer needs) cannot be cancelled: the process does not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    code
}
