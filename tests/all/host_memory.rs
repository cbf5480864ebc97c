//! What the host holds for a call (`wasi:http` header objects and bodies)
//! counts against the call's memory limit, and the objects a call holds at
//! once are bounded by its resource table: a plugin that makes header
//! objects in a loop is stopped with an error that says which limit.

use wasmclaw::plugin::{ErrorKind, ToolError};
use wasmclaw_tests::{PluginDir, ctx};

const MIB: u64 = 1 << 20;

#[tokio::test(flavor = "multi_thread")]
async fn header_objects_count_against_the_memory_limit_and_stop_the_call_within_it() {
    let dir = PluginDir::new();
    dir.add("hostile");
    let plugins = dir.load().await;
    // 1000 objects of 100 KiB: 100 MB of headers for a plugin of 64 MiB.
    let err = plugins
        .call(&ctx(), "header_objects", r#"{"count":1000,"kib":100}"#)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Internal);
    let held = err
        .message
        .strip_prefix("plugin 'hostile' exceeded its memory limit of 64 MiB with what the host holds for it (")
        .and_then(|rest| rest.strip_suffix(" of HTTP header objects, bodies and answers) and was stopped"))
        .unwrap_or_else(|| panic!("{}", err.message));
    // What the host held when it stopped the call: most of the limit, never
    // more (the guest's own memory is the rest).
    let bytes: u64 = match held.split_once(' ') {
        Some((n, "bytes")) => n.parse().unwrap(),
        Some((n, "KiB")) => n.parse::<u64>().unwrap() << 10,
        Some((n, "MiB")) => n.parse::<u64>().unwrap() << 20,
        _ => panic!("{held}"),
    };
    assert!((32 * MIB..=64 * MIB).contains(&bytes), "{held}");

    // Within the limit, the same tool works.
    let ok = plugins
        .call(&ctx(), "header_objects", r#"{"count":100,"kib":100}"#)
        .await;
    assert_eq!(ok, Ok("made 100 header objects".to_string()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_holds_at_most_4096_host_resources_at_once() {
    let dir = PluginDir::new();
    dir.add("hostile");
    let plugins = dir.load().await;
    // Small objects, well within the memory limit: the table bounds them.
    let err = plugins
        .call(&ctx(), "header_objects", r#"{"count":10000,"kib":0}"#)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::new(
            ErrorKind::Internal,
            "plugin 'hostile' held more than 4096 host resources at once (open files, streams, HTTP objects), its limit, and was stopped"
        )
    );
}
