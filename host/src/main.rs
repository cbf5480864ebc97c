use clap::Parser;

fn main() -> std::process::ExitCode {
    wasmclaw::cli::exit_quietly_on_broken_pipe();
    let cli = wasmclaw::cli::Cli::parse();
    wasmclaw::cli::init_tracing(cli.verbose);
    let runtime = runtime().expect("starting the async runtime");
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

/// The runtime that serves the network and runs the turns (and writes
/// them to the store, as a rule: see the store's docs). Guest code runs on
/// the plugin pool's threads and the rest of SQLite's work on the blocking
/// pool, so it has half as many worker threads as the machine has cores
/// (at least one): each thread fewer is fewer hand-offs between threads
/// per turn, which is most of a turn's CPU. `TOKIO_WORKER_THREADS` sets
/// another number.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        builder.worker_threads((cores / 2).max(1));
    }
    builder.enable_all().build()
}
