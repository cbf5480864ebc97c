use clap::Parser;

/// mimalloc rather than the C library's allocator: a turn makes a few
/// hundred small allocations, most freed on the thread that made them,
/// which mimalloc's per-thread free lists serve in fewer instructions (a
/// tenth fewer a turn, the allocator's share 17% -> 7%). Built without
/// transparent huge pages (`no_thp`): with them each thread's first pages
/// were 2 MB ones, a one-shot `run` peaked 8 MB higher, and turns took more
/// CPU. See the README's ninth round.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
