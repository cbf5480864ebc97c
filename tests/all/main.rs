//! Integration tests of wasmclaw, one module per topic. The plugins they load
//! are real components built by `build.rs`; the model is a real HTTP server
//! on 127.0.0.1 (`wasmclaw_tests::fake_model`).

mod agent_cli;
mod chat_control;
mod cli;
mod examples;
mod hook_examples;
mod hooks;
mod isolation;
mod languages;
mod llm_faults;
mod loading;
mod network;
mod reload;
mod sandbox;
mod scheduler;
mod serve;
mod serve_openai;
mod sessions;
mod subturns;
mod turns;
