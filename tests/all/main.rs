//! Integration tests of wasmclaw, one module per topic. The plugins they load
//! are real components built by `build.rs`; the model is a real HTTP server
//! on 127.0.0.1 (`wasmclaw_tests::fake_model`).

mod agent_cli;
mod approvals;
mod cache_bound;
mod chat_control;
mod cli;
mod commands;
mod config;
mod config_reload;
mod core;
mod descriptors;
mod examples;
mod hardening;
mod home;
mod hook_budgets;
mod hook_examples;
mod hooks;
mod host_memory;
mod install;
mod isolation;
mod languages;
mod llm_faults;
mod llm_replies;
mod load_bounds;
mod loading;
mod named_agents;
mod network;
mod no_answer;
mod refused_loops;
mod reload;
mod sandbox;
mod scheduler;
mod scrub;
mod serve;
mod serve_openai;
mod sessions;
mod subturn_bounds;
mod subturns;
mod turn_table;
mod turns;
mod winding_down;
mod wit_versions;
