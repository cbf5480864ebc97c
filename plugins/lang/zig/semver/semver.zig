//! Semantic versions (SemVer 2.0.0) and npm-style ranges, and the three
//! tools of the semver plugin. Pure Zig with no WIT types, so `zig test
//! semver.zig` runs it natively; plugin.zig is the glue to the bindings.
const std = @import("std");
const Allocator = std.mem.Allocator;
const Order = std.math.Order;

// Bounds on hostile input: a tool call is small.
const max_version_len = 256;
const max_range_len = 1024;
const max_comparators = 64;
const max_versions = 1000;

/// Why a call failed, for the WIT `error-kind`.
pub const ErrorKind = enum { invalid_input, not_found, internal };

/// A tool's result: text for the model, or an error whose message names
/// the argument at fault. Both are allocated in the call's arena.
pub const Outcome = union(enum) {
    ok: []const u8,
    err: struct { kind: ErrorKind, message: []const u8 },
};

/// Set by a function that returns error.Invalid: the message to show.
const Diag = struct {
    arena: Allocator,
    message: []const u8 = "",

    fn fail(d: *Diag, comptime fmt: []const u8, args: anytype) error{ Invalid, OutOfMemory } {
        d.message = try std.fmt.allocPrint(d.arena, fmt, args);
        return error.Invalid;
    }
};
const Error = error{ Invalid, OutOfMemory };

// ---- versions ----

pub const Version = struct {
    major: u64,
    minor: u64,
    patch: u64,
    /// Pre-release identifiers ("alpha", "1"); empty for a release.
    pre: []const []const u8 = &.{},
    /// Build metadata: kept for display, ignored by precedence.
    build: []const u8 = "",

    /// SemVer precedence (section 11): numbers, then a release above its
    /// pre-releases, then the identifiers one by one.
    pub fn order(a: Version, b: Version) Order {
        inline for (.{ "major", "minor", "patch" }) |f| {
            const o = std.math.order(@field(a, f), @field(b, f));
            if (o != .eq) return o;
        }
        if (a.pre.len == 0 or b.pre.len == 0) return std.math.order(b.pre.len, a.pre.len);
        for (a.pre[0..@min(a.pre.len, b.pre.len)], b.pre[0..@min(a.pre.len, b.pre.len)]) |x, y| {
            const o = orderIdentifier(x, y);
            if (o != .eq) return o;
        }
        return std.math.order(a.pre.len, b.pre.len);
    }

    pub fn format(v: Version, w: *std.Io.Writer) std.Io.Writer.Error!void {
        try w.print("{d}.{d}.{d}", .{ v.major, v.minor, v.patch });
        for (v.pre, 0..) |id, i| try w.print("{s}{s}", .{ if (i == 0) "-" else ".", id });
        if (v.build.len > 0) try w.print("+{s}", .{v.build});
    }
};

fn isNumeric(id: []const u8) bool {
    for (id) |ch| if (!std.ascii.isDigit(ch)) return false;
    return true;
}

// Numeric identifiers compare as numbers and below alphanumeric ones.
fn orderIdentifier(x: []const u8, y: []const u8) Order {
    const xn = isNumeric(x);
    const yn = isNumeric(y);
    if (xn and yn) {
        // No leading zeros (checked at parse), so longer means larger.
        if (x.len != y.len) return std.math.order(x.len, y.len);
        return std.mem.order(u8, x, y);
    }
    if (xn != yn) return if (xn) .lt else .gt;
    return std.mem.order(u8, x, y);
}

/// A version in a range: a missing or wildcard part (`1.x`, `1.2`, `*`) is null.
const Partial = struct {
    major: ?u64 = null,
    minor: ?u64 = null,
    patch: ?u64 = null,
    pre: []const []const u8 = &.{},
    build: []const u8 = "",

    fn full(p: Partial) Version {
        return .{ .major = p.major orelse 0, .minor = p.minor orelse 0, .patch = p.patch orelse 0, .pre = p.pre, .build = p.build };
    }
};

// Parses "1.2.3-rc.1+build", with a leading "v" or "=" allowed. With
// `partial`, parts may be missing or x/X/*; otherwise all three are required.
fn parsePartial(d: *Diag, what: []const u8, text: []const u8, partial: bool) Error!Partial {
    var s = text;
    if (s.len > max_version_len) return d.fail("{s} is longer than {d} characters", .{ what, max_version_len });
    if (s.len > 0 and (s[0] == 'v' or s[0] == 'V' or s[0] == '=')) s = s[1..];
    var p: Partial = .{};
    if (std.mem.indexOfScalar(u8, s, '+')) |plus| {
        p.build = s[plus + 1 ..];
        s = s[0..plus];
        try checkIdentifiers(d, what, text, p.build, false);
    }
    if (std.mem.indexOfScalar(u8, s, '-')) |dash| {
        const pre = s[dash + 1 ..];
        s = s[0..dash];
        try checkIdentifiers(d, what, text, pre, true);
        var ids: std.ArrayList([]const u8) = .empty;
        var it = std.mem.splitScalar(u8, pre, '.');
        while (it.next()) |id| try ids.append(d.arena, id);
        p.pre = ids.items;
    }
    var parts = std.mem.splitScalar(u8, s, '.');
    var n: usize = 0;
    var wildcard = false;
    while (parts.next()) |part| : (n += 1) {
        if (n == 3) return d.fail("{s} \"{s}\" has more than three numbers", .{ what, text });
        const value: ?u64 = if (partial and (std.mem.eql(u8, part, "x") or std.mem.eql(u8, part, "X") or std.mem.eql(u8, part, "*")))
            null
        else
            try parseNumber(d, what, text, part);
        // 1.x.3 says nothing sensible: after a wildcard only wildcards.
        if (value != null and wildcard) return d.fail("{s} \"{s}\" has a number after a wildcard", .{ what, text });
        wildcard = wildcard or value == null;
        switch (n) {
            0 => p.major = value,
            1 => p.minor = value,
            else => p.patch = value,
        }
    }
    if (!partial and n < 3) return d.fail("{s} \"{s}\" must be MAJOR.MINOR.PATCH, like 1.4.2", .{ what, text });
    if ((p.pre.len > 0 or p.build.len > 0) and p.patch == null)
        return d.fail("{s} \"{s}\": a pre-release or build needs all three numbers", .{ what, text });
    return p;
}

fn parseNumber(d: *Diag, what: []const u8, text: []const u8, part: []const u8) Error!u64 {
    if (part.len == 0 or !isNumeric(part))
        return d.fail("{s} \"{s}\" is not a version: \"{s}\" is not a number", .{ what, text, part });
    if (part.len > 1 and part[0] == '0')
        return d.fail("{s} \"{s}\" is not a version: \"{s}\" has a leading zero", .{ what, text, part });
    return std.fmt.parseUnsigned(u64, part, 10) catch
        return d.fail("{s} \"{s}\": {s} is too large", .{ what, text, part });
}

// Dot-separated, non-empty [0-9A-Za-z-] identifiers; numeric pre-release
// identifiers without leading zeros.
fn checkIdentifiers(d: *Diag, what: []const u8, text: []const u8, ids: []const u8, pre: bool) Error!void {
    var it = std.mem.splitScalar(u8, ids, '.');
    while (it.next()) |id| {
        if (id.len == 0) return d.fail("{s} \"{s}\" has an empty {s} identifier", .{ what, text, if (pre) "pre-release" else "build" });
        for (id) |ch| if (!std.ascii.isAlphanumeric(ch) and ch != '-')
            return d.fail("{s} \"{s}\" has a bad character in \"{s}\"", .{ what, text, id });
        if (pre and id.len > 1 and id[0] == '0' and isNumeric(id))
            return d.fail("{s} \"{s}\": pre-release \"{s}\" has a leading zero", .{ what, text, id });
    }
}

pub fn parseVersion(d: *Diag, what: []const u8, text: []const u8) Error!Version {
    const p = try parsePartial(d, what, std.mem.trim(u8, text, " \t"), false);
    return p.full();
}

// ---- ranges ----

const Op = enum {
    eq,
    lt,
    le,
    gt,
    ge,

    fn symbol(op: Op) []const u8 {
        return switch (op) {
            .eq => "=",
            .lt => "<",
            .le => "<=",
            .gt => ">",
            .ge => ">=",
        };
    }
};

const Comparator = struct {
    op: Op,
    v: Version,

    fn test_(c: Comparator, v: Version) bool {
        const o = v.order(c.v);
        return switch (c.op) {
            .eq => o == .eq,
            .lt => o == .lt,
            .le => o != .gt,
            .gt => o == .gt,
            .ge => o != .lt,
        };
    }
};

/// Comparators that must all hold; an empty set matches any version.
const Set = []const Comparator;

/// Sets of which one must hold (`||`).
pub const Range = struct {
    sets: []const Set,

    /// npm's rule: a pre-release version matches only a set that names a
    /// pre-release of the same MAJOR.MINOR.PATCH (so ^1.2.0 does not pick
    /// up 1.5.0-beta), unless `include_prerelease`.
    pub fn matches(r: Range, v: Version, include_prerelease: bool) bool {
        for (r.sets) |set| {
            const all = for (set) |c| {
                if (!c.test_(v)) break false;
            } else true;
            if (!all) continue;
            if (v.pre.len == 0 or include_prerelease) return true;
            for (set) |c| {
                if (c.v.pre.len > 0 and c.v.major == v.major and c.v.minor == v.minor and c.v.patch == v.patch) return true;
            }
        }
        return false;
    }

    /// The range with every shorthand spelled out: ">=1.2.0 <2.0.0-0".
    pub fn format(r: Range, w: *std.Io.Writer) std.Io.Writer.Error!void {
        for (r.sets, 0..) |set, i| {
            if (i > 0) try w.writeAll(" || ");
            if (set.len == 0) try w.writeAll("*");
            for (set, 0..) |c, j| try w.print("{s}{s}{f}", .{ if (j > 0) " " else "", c.op.symbol(), c.v });
        }
    }
};

// The lowest possible bound: "<0.0.0-0" matches nothing.
const nothing = [_]Comparator{.{ .op = .lt, .v = .{ .major = 0, .minor = 0, .patch = 0, .pre = &.{"0"} } }};

fn bump(d: *Diag, n: u64) Error!u64 {
    return std.math.add(u64, n, 1) catch return d.fail("argument `range`: {d} is too large to take a next version of", .{n});
}

// "<X.Y.Z-0": below every pre-release of X.Y.Z.
fn below(major: u64, minor: u64, patch: u64) Comparator {
    return .{ .op = .lt, .v = .{ .major = major, .minor = minor, .patch = patch, .pre = &.{"0"} } };
}

fn ge(v: Version) Comparator {
    return .{ .op = .ge, .v = v };
}

// One operator and (partial) version into plain comparators, as npm does.
fn desugar(d: *Diag, out: *std.ArrayList(Comparator), op: []const u8, p: Partial) Error!void {
    const a = d.arena;
    const M = p.major;
    const m = p.minor;
    if (std.mem.eql(u8, op, "^")) {
        const maj = M orelse return; // ^* is anything
        try out.append(a, ge(p.full()));
        const upper = if (maj > 0)
            below(try bump(d, maj), 0, 0)
        else if (m == null)
            below(1, 0, 0)
        else if (m.? > 0)
            below(0, try bump(d, m.?), 0)
        else if (p.patch == null)
            below(0, 1, 0)
        else
            below(0, 0, try bump(d, p.patch.?));
        return out.append(a, upper);
    }
    if (std.mem.eql(u8, op, "~") or std.mem.eql(u8, op, "~>")) {
        const maj = M orelse return;
        try out.append(a, ge(p.full()));
        return out.append(a, if (m) |min| below(maj, try bump(d, min), 0) else below(try bump(d, maj), 0, 0));
    }
    const full = p.patch != null;
    const kind: Op = if (op.len == 0 or std.mem.eql(u8, op, "=")) .eq else if (std.mem.eql(u8, op, "<")) .lt else if (std.mem.eql(u8, op, "<=")) .le else if (std.mem.eql(u8, op, ">")) .gt else .ge;
    if (full) return out.append(a, .{ .op = kind, .v = p.full() });
    // A partial version is the interval [low, high) of what it covers.
    // <* and >* match nothing; *, =*, >=*, <=* anything.
    const maj = M orelse {
        if (kind == .lt or kind == .gt) try out.appendSlice(a, &nothing);
        return;
    };
    const low = p.full();
    const high = if (m) |min| below(maj, try bump(d, min), 0) else below(try bump(d, maj), 0, 0);
    switch (kind) {
        .eq => {
            try out.append(a, ge(low));
            try out.append(a, high);
        },
        .ge => try out.append(a, ge(low)),
        .lt => try out.append(a, below(low.major, low.minor, low.patch)),
        .le => try out.append(a, high),
        // >1.2 : the first version past 1.2.x is 1.3.0.
        .gt => try out.append(a, ge(.{ .major = high.v.major, .minor = high.v.minor, .patch = high.v.patch })),
    }
}

fn isOpChar(ch: u8) bool {
    return ch == '<' or ch == '>' or ch == '=' or ch == '~' or ch == '^';
}

/// Parses an npm-style range: `^1.2.0`, `~1.4`, `>=1.0 <2.0`, `1.2.x`,
/// `1.2.3 - 2.0`, `*`, alternatives joined by `||`; commas also separate
/// comparators (`>=1.0, <2.0`).
pub fn parseRange(d: *Diag, text: []const u8) Error!Range {
    const a = d.arena;
    if (text.len > max_range_len) return d.fail("argument `range` is longer than {d} characters", .{max_range_len});
    var sets: std.ArrayList(Set) = .empty;
    var total: usize = 0;
    var alternatives = std.mem.splitSequence(u8, text, "||");
    while (alternatives.next()) |alt_raw| {
        var comps: std.ArrayList(Comparator) = .empty;
        // Commas are separators too; then split on whitespace.
        const alt = try a.dupe(u8, alt_raw);
        std.mem.replaceScalar(u8, alt, ',', ' ');
        var tokens: std.ArrayList([]const u8) = .empty;
        var it = std.mem.tokenizeAny(u8, alt, " \t\r\n");
        while (it.next()) |t| try tokens.append(a, t);

        if (tokens.items.len == 3 and std.mem.eql(u8, tokens.items[1], "-")) {
            // Hyphen range: inclusive, partial ends widened.
            const lo = try parsePartial(d, "argument `range`: version", tokens.items[0], true);
            const hi = try parsePartial(d, "argument `range`: version", tokens.items[2], true);
            if (lo.major != null) try comps.append(a, ge(lo.full()));
            try desugar(d, &comps, "<=", hi);
        } else {
            var i: usize = 0;
            while (i < tokens.items.len) : (i += 1) {
                var tok = tokens.items[i];
                var n: usize = 0;
                while (n < tok.len and isOpChar(tok[n])) n += 1;
                const op = tok[0..n];
                if (!isOperator(op)) return d.fail("argument `range` has an unknown operator \"{s}\" (use = < <= > >= ~ ^)", .{op});
                tok = tok[n..];
                // npm allows a space after the operator: ">= 1.2".
                if (tok.len == 0 and n > 0 and i + 1 < tokens.items.len) {
                    i += 1;
                    tok = tokens.items[i];
                }
                if (tok.len == 0) return d.fail("argument `range`: \"{s}\" has no version after it", .{op});
                if (std.mem.eql(u8, tok, "-")) return d.fail("argument `range`: a hyphen range is `A - B`, alone between ||", .{});
                const p = try parsePartial(d, "argument `range`: version", tok, true);
                try desugar(d, &comps, op, p);
            }
        }
        total += comps.items.len;
        if (total > max_comparators) return d.fail("argument `range` has more than {d} comparators", .{max_comparators});
        try sets.append(a, comps.items);
    }
    return .{ .sets = sets.items };
}

fn isOperator(op: []const u8) bool {
    const ops = [_][]const u8{ "", "=", "<", "<=", ">", ">=", "~", "~>", "^" };
    for (ops) |o| if (std.mem.eql(u8, o, op)) return true;
    return false;
}

// ---- arguments ----

const Args = struct {
    d: *Diag,
    obj: std.json.ObjectMap,

    fn parse(d: *Diag, json: []const u8, allowed: []const []const u8) Error!Args {
        // Numbers stay text (no argument is one): that skips float parsing
        // and its tables, a third of the module.
        const value = std.json.parseFromSliceLeaky(std.json.Value, d.arena, json, .{ .parse_numbers = false }) catch |e| switch (e) {
            error.OutOfMemory => return error.OutOfMemory,
            else => return d.fail("arguments are not valid JSON ({s})", .{@errorName(e)}),
        };
        if (value != .object) return d.fail("arguments must be a JSON object", .{});
        for (value.object.keys()) |key| {
            for (allowed) |name| {
                if (std.mem.eql(u8, name, key)) break;
            } else return d.fail("unknown argument `{s}`", .{key});
        }
        return .{ .d = d, .obj = value.object };
    }

    fn string(self: Args, name: []const u8) Error![]const u8 {
        const v = self.obj.get(name) orelse return self.d.fail("argument `{s}` is required", .{name});
        if (v != .string) return self.d.fail("argument `{s}` must be a string", .{name});
        return v.string;
    }

    fn optString(self: Args, name: []const u8) Error!?[]const u8 {
        if (self.obj.get(name) == null) return null;
        return try self.string(name);
    }

    fn optBool(self: Args, name: []const u8) Error!bool {
        const v = self.obj.get(name) orelse return false;
        if (v != .bool) return self.d.fail("argument `{s}` must be true or false", .{name});
        return v.bool;
    }
};

fn jsonText(a: Allocator, value: anytype) Error![]const u8 {
    return std.fmt.allocPrint(a, "{f}", .{std.json.fmt(value, .{})});
}

// ---- the tools ----

pub const Tool = struct { name: []const u8, description: []const u8, input_schema: []const u8 };

pub const tools = [_]Tool{
    .{
        .name = "semver_compare",
        .description = "Compare two semantic versions (SemVer 2.0.0 precedence: pre-releases sort below the release, build metadata is ignored). Returns JSON: comparison (-1, 0 or 1) and the relation.",
        .input_schema =
        \\{"type":"object","properties":{
        \\"a":{"type":"string","description":"A version, e.g. \"1.2.3\", \"v2.0.0-rc.1\"."},
        \\"b":{"type":"string","description":"The version to compare it with."}},
        \\"required":["a","b"],"additionalProperties":false}
        ,
    },
    .{
        .name = "semver_satisfies",
        .description = "Check whether a version satisfies an npm-style range: ^1.2.0, ~1.4, >=1.0 <2.0, 1.2.x, 1.2.3 - 2.0, alternatives with ||. Returns JSON: satisfies, and the range spelled out as plain comparators.",
        .input_schema =
        \\{"type":"object","properties":{
        \\"version":{"type":"string","description":"The version, e.g. \"1.4.2\"."},
        \\"range":{"type":"string","description":"The range, e.g. \"^1.2.0\" or \">=1.0 <2.0 || 3.x\"."},
        \\"include_prerelease":{"type":"boolean","description":"Let pre-releases match any range they fall in (default false: only ranges naming a pre-release of the same version, as npm does)."}},
        \\"required":["version","range"],"additionalProperties":false}
        ,
    },
    .{
        .name = "semver_sort",
        .description = "Sort semantic versions by precedence (ascending unless descending), optionally keeping only those that satisfy a range; the last of an ascending filtered list is the newest match. Returns a JSON array of the versions as given.",
        .input_schema =
        \\{"type":"object","properties":{
        \\"versions":{"type":"array","items":{"type":"string"},"maxItems":1000,"description":"The versions to sort."},
        \\"range":{"type":"string","description":"Keep only versions satisfying this npm-style range."},
        \\"descending":{"type":"boolean","description":"Newest first (default false)."},
        \\"include_prerelease":{"type":"boolean","description":"With range: let pre-releases match (default false)."}},
        \\"required":["versions"],"additionalProperties":false}
        ,
    },
};

fn compareTool(d: *Diag, json: []const u8) Error![]const u8 {
    const args = try Args.parse(d, json, &.{ "a", "b" });
    const a_text = std.mem.trim(u8, try args.string("a"), " \t");
    const b_text = std.mem.trim(u8, try args.string("b"), " \t");
    const a = try parseVersion(d, "argument `a`", a_text);
    const b = try parseVersion(d, "argument `b`", b_text);
    const o = a.order(b);
    const symbol = switch (o) {
        .lt => "<",
        .eq => "==",
        .gt => ">",
    };
    return jsonText(d.arena, .{
        .comparison = @as(i32, switch (o) {
            .lt => -1,
            .eq => 0,
            .gt => 1,
        }),
        .relation = try std.fmt.allocPrint(d.arena, "{s} {s} {s}", .{ a_text, symbol, b_text }),
    });
}

fn satisfiesTool(d: *Diag, json: []const u8) Error![]const u8 {
    const args = try Args.parse(d, json, &.{ "version", "range", "include_prerelease" });
    const v = try parseVersion(d, "argument `version`", try args.string("version"));
    const range = try parseRange(d, try args.string("range"));
    const include = try args.optBool("include_prerelease");
    return jsonText(d.arena, .{
        .satisfies = range.matches(v, include),
        .range = try std.fmt.allocPrint(d.arena, "{f}", .{range}),
    });
}

fn sortTool(d: *Diag, json: []const u8) Error![]const u8 {
    const args = try Args.parse(d, json, &.{ "versions", "range", "descending", "include_prerelease" });
    const list = args.obj.get("versions") orelse return d.fail("argument `versions` is required", .{});
    if (list != .array) return d.fail("argument `versions` must be an array of strings", .{});
    if (list.array.items.len > max_versions) return d.fail("argument `versions` has more than {d} items", .{max_versions});
    const range = if (try args.optString("range")) |r| try parseRange(d, r) else null;
    const include = try args.optBool("include_prerelease");
    const descending = try args.optBool("descending");

    const Item = struct { text: []const u8, v: Version };
    var items: std.ArrayList(Item) = .empty;
    for (list.array.items, 0..) |item, i| {
        if (item != .string) return d.fail("argument `versions`: item {d} is not a string", .{i});
        const what = try std.fmt.allocPrint(d.arena, "argument `versions`: item {d}", .{i});
        const v = try parseVersion(d, what, item.string);
        if (range) |r| if (!r.matches(v, include)) continue;
        try items.append(d.arena, .{ .text = item.string, .v = v });
    }
    // std.mem.sort is stable: versions of equal precedence (1.0.0+a,
    // 1.0.0+b) keep their given order.
    const Ctx = struct {
        desc: bool,
        fn less(ctx: @This(), x: Item, y: Item) bool {
            return x.v.order(y.v) == if (ctx.desc) Order.gt else Order.lt;
        }
    };
    std.mem.sort(Item, items.items, Ctx{ .desc = descending }, Ctx.less);
    const texts = try d.arena.alloc([]const u8, items.items.len);
    for (items.items, texts) |it, *t| t.* = it.text;
    return jsonText(d.arena, texts);
}

/// Runs the tool `name`. Everything is allocated in `arena`; free it after
/// the result has been copied out.
pub fn call(arena: Allocator, name: []const u8, json: []const u8) Outcome {
    var d: Diag = .{ .arena = arena };
    const result = if (std.mem.eql(u8, name, "semver_compare"))
        compareTool(&d, json)
    else if (std.mem.eql(u8, name, "semver_satisfies"))
        satisfiesTool(&d, json)
    else if (std.mem.eql(u8, name, "semver_sort"))
        sortTool(&d, json)
    else
        return .{ .err = .{ .kind = .not_found, .message = "no such tool in the semver plugin" } };
    const text = result catch |e| return switch (e) {
        error.Invalid => .{ .err = .{ .kind = .invalid_input, .message = d.message } },
        error.OutOfMemory => .{ .err = .{ .kind = .internal, .message = "semver: out of memory" } },
    };
    return .{ .ok = text };
}

// ---- tests (zig test semver.zig) ----

const testing = std.testing;

fn expectCall(name: []const u8, json: []const u8, want: []const u8) !void {
    var arena = std.heap.ArenaAllocator.init(testing.allocator);
    defer arena.deinit();
    switch (call(arena.allocator(), name, json)) {
        .ok => |text| try testing.expectEqualStrings(want, text),
        .err => |e| {
            std.debug.print("unexpected error: {s}\n", .{e.message});
            return error.TestUnexpectedResult;
        },
    }
}

fn expectInvalid(name: []const u8, json: []const u8, want: []const u8) !void {
    var arena = std.heap.ArenaAllocator.init(testing.allocator);
    defer arena.deinit();
    switch (call(arena.allocator(), name, json)) {
        .ok => |text| {
            std.debug.print("unexpected success: {s}\n", .{text});
            return error.TestUnexpectedResult;
        },
        .err => |e| {
            try testing.expectEqual(ErrorKind.invalid_input, e.kind);
            try testing.expectEqualStrings(want, e.message);
        },
    }
}

fn satisfies(version: []const u8, range: []const u8) !bool {
    var arena = std.heap.ArenaAllocator.init(testing.allocator);
    defer arena.deinit();
    var d: Diag = .{ .arena = arena.allocator() };
    const r = parseRange(&d, range) catch |e| {
        std.debug.print("range {s}: {s}\n", .{ range, d.message });
        return e;
    };
    return r.matches(try parseVersion(&d, "v", version), false);
}

fn normalized(range: []const u8) ![]const u8 {
    var arena = std.heap.ArenaAllocator.init(testing.allocator);
    defer arena.deinit();
    var d: Diag = .{ .arena = arena.allocator() };
    const text = try std.fmt.allocPrint(arena.allocator(), "{f}", .{try parseRange(&d, range)});
    return testing.allocator.dupe(u8, text);
}

test "precedence follows SemVer 2.0.0 section 11" {
    // The spec's own example chain, each lower than the next.
    const chain = [_][]const u8{ "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "1.10.0", "2.0.0" };
    var arena = std.heap.ArenaAllocator.init(testing.allocator);
    defer arena.deinit();
    var d: Diag = .{ .arena = arena.allocator() };
    for (chain[0 .. chain.len - 1], chain[1..]) |lo, hi| {
        const a = try parseVersion(&d, "a", lo);
        const b = try parseVersion(&d, "b", hi);
        try testing.expectEqual(Order.lt, a.order(b));
        try testing.expectEqual(Order.gt, b.order(a));
    }
    const x = try parseVersion(&d, "a", "1.0.0+build.1");
    const y = try parseVersion(&d, "a", "v1.0.0+other");
    try testing.expectEqual(Order.eq, x.order(y));
}

test "bad versions are refused with the argument named" {
    try expectInvalid("semver_compare", "{\"a\":\"1.2\",\"b\":\"1.0.0\"}", "argument `a` \"1.2\" must be MAJOR.MINOR.PATCH, like 1.4.2");
    try expectInvalid("semver_compare", "{\"a\":\"1.0.0\",\"b\":\"01.0.0\"}", "argument `b` \"01.0.0\" is not a version: \"01\" has a leading zero");
    try expectInvalid("semver_compare", "{\"a\":\"1.0.0-\",\"b\":\"1.0.0\"}", "argument `a` \"1.0.0-\" has an empty pre-release identifier");
    try expectInvalid("semver_compare", "{\"a\":\"1.0.0-a_b\",\"b\":\"1.0.0\"}", "argument `a` \"1.0.0-a_b\" has a bad character in \"a_b\"");
    try expectInvalid("semver_compare", "{\"a\":\"1.0.0-01\",\"b\":\"1.0.0\"}", "argument `a` \"1.0.0-01\": pre-release \"01\" has a leading zero");
    try expectInvalid("semver_compare", "{\"a\":\"1.0.0.0\",\"b\":\"1.0.0\"}", "argument `a` \"1.0.0.0\" has more than three numbers");
    try expectInvalid("semver_compare", "{\"a\":\"1.x.0\",\"b\":\"1.0.0\"}", "argument `a` \"1.x.0\" is not a version: \"x\" is not a number");
    try expectInvalid("semver_compare", "{\"a\":\"99999999999999999999.0.0\",\"b\":\"1.0.0\"}", "argument `a` \"99999999999999999999.0.0\": 99999999999999999999 is too large");
    try expectInvalid("semver_compare", "{\"a\":\"1.0.0\"}", "argument `b` is required");
    try expectInvalid("semver_compare", "{\"a\":\"1.0.0\",\"b\":2}", "argument `b` must be a string");
    try expectInvalid("semver_compare", "{\"a\":\"1.0.0\",\"b\":\"1.0.0\",\"c\":1}", "unknown argument `c`");
    try expectInvalid("semver_compare", "{\"a\":\"1.0.0\",", "arguments are not valid JSON (UnexpectedEndOfInput)");
    try expectInvalid("semver_compare", "[]", "arguments must be a JSON object");
}

test "compare" {
    try expectCall("semver_compare", "{\"a\":\"1.2.3\",\"b\":\"1.10.0\"}", "{\"comparison\":-1,\"relation\":\"1.2.3 < 1.10.0\"}");
    try expectCall("semver_compare", "{\"a\":\"2.0.0\",\"b\":\"2.0.0-rc.1\"}", "{\"comparison\":1,\"relation\":\"2.0.0 > 2.0.0-rc.1\"}");
    try expectCall("semver_compare", "{\"a\":\"v1.0.0+x\",\"b\":\"1.0.0\"}", "{\"comparison\":0,\"relation\":\"v1.0.0+x == 1.0.0\"}");
}

test "ranges desugar as npm does" {
    const cases = [_][2][]const u8{
        .{ "^1.2.3", ">=1.2.3 <2.0.0-0" },
        .{ "^0.2.3", ">=0.2.3 <0.3.0-0" },
        .{ "^0.0.3", ">=0.0.3 <0.0.4-0" },
        .{ "^1.2", ">=1.2.0 <2.0.0-0" },
        .{ "^0.0", ">=0.0.0 <0.1.0-0" },
        .{ "^0", ">=0.0.0 <1.0.0-0" },
        .{ "~1.2.3", ">=1.2.3 <1.3.0-0" },
        .{ "~1.4", ">=1.4.0 <1.5.0-0" },
        .{ "~1", ">=1.0.0 <2.0.0-0" },
        .{ "1.2.x", ">=1.2.0 <1.3.0-0" },
        .{ "1", ">=1.0.0 <2.0.0-0" },
        .{ "*", "*" },
        .{ "", "*" },
        .{ ">1.2", ">=1.3.0" },
        .{ "<=1.2", "<1.3.0-0" },
        .{ "<1.2", "<1.2.0-0" },
        .{ ">= 1.0, < 2.0", ">=1.0.0 <2.0.0-0" },
        .{ "1.2.3 - 2.3", ">=1.2.3 <2.4.0-0" },
        .{ "1.2 - 2.3.4", ">=1.2.0 <=2.3.4" },
        .{ "=1.2.3 || >=2.0.0-beta <2.1", "=1.2.3 || >=2.0.0-beta <2.1.0-0" },
    };
    for (cases) |c| {
        const got = try normalized(c[0]);
        defer testing.allocator.free(got);
        try testing.expectEqualStrings(c[1], got);
    }
}

test "satisfies" {
    try testing.expect(try satisfies("1.4.2", "^1.2.0"));
    try testing.expect(!try satisfies("2.0.0", "^1.2.0"));
    try testing.expect(!try satisfies("0.3.0", "^0.2.3"));
    try testing.expect(try satisfies("1.4.9", "~1.4"));
    try testing.expect(!try satisfies("1.5.0", "~1.4"));
    try testing.expect(try satisfies("1.9.9", ">=1.0 <2.0"));
    try testing.expect(try satisfies("3.1.0", "<1.0.0 || 3.x"));
    try testing.expect(try satisfies("2.3.4", "1.2.3 - 2.3.4"));
    try testing.expect(!try satisfies("2.3.5", "1.2.3 - 2.3.4"));
    // Pre-releases only match a range that names one of the same version.
    try testing.expect(!try satisfies("1.5.0-beta", "^1.2.0"));
    try testing.expect(try satisfies("1.2.0-rc.2", "^1.2.0-rc.1"));
    try testing.expect(!try satisfies("1.3.0-rc.2", "^1.2.0-rc.1"));
    try testing.expect(!try satisfies("1.0.0", "<*"));
}

test "satisfies and sort tools" {
    try expectCall("semver_satisfies", "{\"version\":\"1.4.2\",\"range\":\"^1.2.0\"}", "{\"satisfies\":true,\"range\":\">=1.2.0 <2.0.0-0\"}");
    try expectCall("semver_satisfies", "{\"version\":\"1.5.0-beta\",\"range\":\"^1.2.0\",\"include_prerelease\":true}", "{\"satisfies\":true,\"range\":\">=1.2.0 <2.0.0-0\"}");
    try expectCall("semver_sort", "{\"versions\":[\"1.10.0\",\"1.2.3\",\"v1.2.3-rc.1\",\"0.9.0\"]}", "[\"0.9.0\",\"v1.2.3-rc.1\",\"1.2.3\",\"1.10.0\"]");
    try expectCall("semver_sort", "{\"versions\":[\"1.10.0\",\"1.2.3\",\"2.0.0\",\"1.2.3-rc.1\"],\"range\":\"^1\",\"descending\":true}", "[\"1.10.0\",\"1.2.3\"]");
    try expectCall("semver_sort", "{\"versions\":[]}", "[]");
    try expectInvalid("semver_sort", "{\"versions\":[\"1.0.0\",\"x\"]}", "argument `versions`: item 1 \"x\" is not a version: \"x\" is not a number");
    try expectInvalid("semver_sort", "{\"versions\":[\"1.0.0\",3]}", "argument `versions`: item 1 is not a string");
    try expectInvalid("semver_sort", "{\"versions\":\"1.0.0\"}", "argument `versions` must be an array of strings");
    try expectInvalid("semver_satisfies", "{\"version\":\"1.0.0\",\"range\":\"!1.0\"}", "argument `range`: version \"!1.0\" is not a version: \"!1\" is not a number");
    try expectInvalid("semver_satisfies", "{\"version\":\"1.0.0\",\"range\":\"=>1.0\"}", "argument `range` has an unknown operator \"=>\" (use = < <= > >= ~ ^)");
    try expectInvalid("semver_satisfies", "{\"version\":\"1.0.0\",\"range\":\">=\"}", "argument `range`: \">=\" has no version after it");
    try expectInvalid("semver_satisfies", "{\"version\":\"1.0.0\",\"range\":\"^18446744073709551615\"}", "argument `range`: 18446744073709551615 is too large to take a next version of");
    try expectInvalid("semver_satisfies", "{\"version\":\"1.0.0\",\"range\":\"1 - 2 - 3\"}", "argument `range`: a hyphen range is `A - B`, alone between ||");
}

test "hostile input stays bounded" {
    var arena = std.heap.ArenaAllocator.init(testing.allocator);
    defer arena.deinit();
    const a = arena.allocator();
    // Many comparators, a long range, a long version, deep JSON nesting.
    var many: std.ArrayList(u8) = .empty;
    for (0..100) |_| try many.appendSlice(a, ">=1.0.0 ");
    const args = try std.fmt.allocPrint(a, "{{\"version\":\"1.0.0\",\"range\":\"{s}\"}}", .{many.items});
    try testing.expectEqualStrings("argument `range` has more than 64 comparators", call(a, "semver_satisfies", args).err.message);
    const deep = try a.alloc(u8, 5000);
    @memset(deep[0..2500], '[');
    @memset(deep[2500..], ']');
    try testing.expectEqual(ErrorKind.invalid_input, call(a, "semver_sort", deep).err.kind);
    try testing.expectEqual(ErrorKind.not_found, call(a, "nope", "{}").err.kind);
}
