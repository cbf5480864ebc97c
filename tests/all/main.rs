//! Integration tests of wasmclaw, one module per topic. The plugins they load
//! are real components built by `build.rs`.

mod cli;
mod examples;
mod loading;
mod reload;
mod sandbox;
