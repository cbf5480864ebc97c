//! The WIT glue of the semver plugin: implements the two functions the C
//! bindings (plugins/lang/c/bindings, from wit-bindgen c) declare for the
//! exports, using semver.zig for the work.
//!
//! `tool_plugin.zig` is `zig translate-c` of tool_plugin.h, made by build.sh
//! (Zig 0.17 has no @cImport). Ownership follows wit-bindgen c: the
//! arguments are ours to free; the results must be malloc'd, because the
//! generated cabi_post_* functions free() them after the host copied them.
const std = @import("std");
const c = @import("tool_plugin.zig");
const semver = @import("semver.zig");

// Zig's default panic handler prints a trace to stderr through std.Io,
// which pulls ~30 WASI imports and ~150 KiB into the module. A panic (a
// bug: the code returns errors for bad input) goes to the host's log
// instead, then traps; the host reports the call as crashed.
pub const panic = std.debug.FullPanic(struct {
    fn panic(message: []const u8, _: ?usize) noreturn {
        var text: c.tool_plugin_string_t = .{ .ptr = @constCast(message.ptr), .len = message.len };
        c.wasmclaw_plugin_log_log(c.WASMCLAW_PLUGIN_LOG_LEVEL_ERROR, &text);
        @trap();
    }
}.panic);

// A malloc'd copy (what the bindings' post-return frees) of `s`.
fn dupString(ret: *c.tool_plugin_string_t, s: []const u8) void {
    c.tool_plugin_string_dup_n(ret, s.ptr, s.len);
}

export fn exports_wasmclaw_plugin_tool_list_tools(ret: *c.exports_wasmclaw_plugin_tool_list_tool_spec_t) void {
    const specs: [*]c.exports_wasmclaw_plugin_tool_tool_spec_t = @ptrCast(@alignCast(
        std.c.malloc(semver.tools.len * @sizeOf(c.exports_wasmclaw_plugin_tool_tool_spec_t)) orelse @panic("out of memory"),
    ));
    for (semver.tools, 0..) |t, i| {
        dupString(&specs[i].name, t.name);
        dupString(&specs[i].description, t.description);
        dupString(&specs[i].input_schema, t.input_schema);
    }
    ret.ptr = specs;
    ret.len = semver.tools.len;
}

export fn exports_wasmclaw_plugin_tool_call_tool(
    ctx: *c.exports_wasmclaw_plugin_tool_call_context_t,
    name: *c.tool_plugin_string_t,
    arguments: *c.exports_wasmclaw_plugin_tool_json_t,
    ret: *c.tool_plugin_string_t,
    err: *c.exports_wasmclaw_plugin_tool_plugin_error_t,
) bool {
    // The arguments are ours: free them when done.
    defer {
        c.exports_wasmclaw_plugin_tool_call_context_free(ctx);
        c.tool_plugin_string_free(name);
        c.exports_wasmclaw_plugin_tool_json_free(arguments);
    }
    // One arena per call, over malloc; all of it goes when the call ends.
    var arena = std.heap.ArenaAllocator.init(std.heap.c_allocator);
    defer arena.deinit();
    const outcome = semver.call(arena.allocator(), name.ptr[0..name.len], arguments.ptr[0..arguments.len]);
    switch (outcome) {
        .ok => |text| {
            dupString(ret, text);
            return true;
        },
        .err => |e| {
            err.kind = switch (e.kind) {
                .invalid_input => c.WASMCLAW_PLUGIN_TYPES_ERROR_KIND_INVALID_INPUT,
                .not_found => c.WASMCLAW_PLUGIN_TYPES_ERROR_KIND_NOT_FOUND,
                .internal => c.WASMCLAW_PLUGIN_TYPES_ERROR_KIND_INTERNAL,
            };
            err.retryable = false;
            dupString(&err.message, e.message);
            return false;
        },
    }
}
