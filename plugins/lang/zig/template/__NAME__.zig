//! The logic of the __NAME__ plugin, free of WIT types so that
//! `zig test __NAME__.zig` runs it natively. plugin.zig is the glue.
const std = @import("std");

pub const Tool = struct { name: []const u8, description: []const u8, input_schema: []const u8 };

pub const tools = [_]Tool{.{
    .name = "__NAME___words",
    .description = "Count the lines, words (runs of non-whitespace) and characters of a text. Returns JSON.",
    .input_schema =
    \\{"type":"object","properties":{"text":{"type":"string","description":"The text to count."}},
    \\"required":["text"],"additionalProperties":false}
    ,
}};

pub const ErrorKind = enum { invalid_input, not_found, internal };

/// The result for the model, or an error whose message names the argument.
pub const Outcome = union(enum) {
    ok: []const u8,
    err: struct { kind: ErrorKind, message: []const u8 },
};

fn invalid(message: []const u8) Outcome {
    return .{ .err = .{ .kind = .invalid_input, .message = message } };
}

/// Runs the tool `name`; everything is allocated in `arena`.
pub fn call(arena: std.mem.Allocator, name: []const u8, json: []const u8) Outcome {
    if (!std.mem.eql(u8, name, "__NAME___words")) return .{ .err = .{ .kind = .not_found, .message = "no such tool" } };
    // The host has validated the arguments against the schema; check anyway.
    const Args = struct { text: []const u8 };
    const args = std.json.parseFromSliceLeaky(Args, arena, json, .{}) catch |e| return switch (e) {
        error.OutOfMemory => .{ .err = .{ .kind = .internal, .message = "out of memory" } },
        // std.json's errors name no field (MissingField, UnexpectedToken...):
        // say what is expected instead.
        else => invalid("arguments must be {\"text\": a string} and nothing else"),
    };
    const c = count(args.text);
    return .{ .ok = std.fmt.allocPrint(arena, "{f}", .{std.json.fmt(c, .{})}) catch
        return .{ .err = .{ .kind = .internal, .message = "out of memory" } } };
}

const Counts = struct { lines: usize, words: usize, characters: usize, bytes: usize };

fn count(text: []const u8) Counts {
    var c: Counts = .{ .lines = 0, .words = 0, .characters = 0, .bytes = text.len };
    var in_word = false;
    for (text) |b| {
        if (b & 0xc0 != 0x80) c.characters += 1; // UTF-8: count lead bytes only
        if (b == '\n') c.lines += 1;
        const space = std.ascii.isWhitespace(b);
        if (!space and !in_word) c.words += 1;
        in_word = !space;
    }
    if (text.len > 0 and text[text.len - 1] != '\n') c.lines += 1; // a last line without a newline
    return c;
}

test "counts" {
    var arena = std.heap.ArenaAllocator.init(std.testing.allocator);
    defer arena.deinit();
    const out = call(arena.allocator(), "__NAME___words", "{\"text\":\"h\\u00e9llo world\\nsecond line\"}");
    try std.testing.expectEqualStrings("{\"lines\":2,\"words\":4,\"characters\":23,\"bytes\":24}", out.ok);
    try std.testing.expectEqual(ErrorKind.invalid_input, call(arena.allocator(), "__NAME___words", "{}").err.kind);
}
