"""wasmclaw hook plugin `__NAME__` (world `hook-plugin` of wit/plugin.wit), in Python.

Before each tool call it denies the call when its arguments contain one of the
words in `deny` of the `[config]` table of __NAME__.toml (by default
"rm -rf"); the model reads the reason as the tool's result. Build it with
./build.sh; the result is __NAME__.wasm.

componentize-py generates the `wit_world` bindings while it builds. The class
implementing the exported interface `hooks` must be named `Hooks`. A hook
returns a decision and has no error result: an exception that escapes traps
the instance, and the host applies the plugin's `fail` mode (a before-tool
hook fails closed by default: the call is denied).
"""

import json

from wit_world import exports
from wit_world.exports.hooks import (
    HookPoint,
    LlmDecision_Proceed,
    ResultDecision_Proceed,
    Subscription,
    ToolDecision_Deny,
    ToolDecision_Proceed,
)
from wit_world.imports import config, log

# Hooks at one point run lowest first; the operator may override it with
# [hooks] priority.
PRIORITY = 50

# What it denies when the grants file sets no `deny`.
DEFAULT_DENY = ["rm -rf"]


def deny_words():
    """`deny` of the [config] table, or the default. A mistake there is
    logged and the default used."""
    try:
        words = json.loads(config.get()).get("deny", DEFAULT_DENY)
    except (ValueError, AttributeError):
        words = DEFAULT_DENY
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        log.log(log.Level.ERROR, f"config.deny must be a list of strings, got {words!r}; using {DEFAULT_DENY!r}")
        return DEFAULT_DENY
    return words


class Hooks(exports.Hooks):
    def subscriptions(self):
        # Every tool (tools=[]); or names, '*' matching any run of characters.
        return [Subscription(point=HookPoint.BEFORE_TOOL, priority=PRIORITY, tools=[], events=[])]

    def before_tool(self, ctx, name, arguments):
        for word in deny_words():
            if word in arguments:
                log.log(log.Level.INFO, f"denied a call of `{name}`: it mentions {word!r}")
                # The model reads "denied by hook '__NAME__': " and this.
                return ToolDecision_Deny(f"its arguments mention {word!r}")
        return ToolDecision_Proceed()

    # Subscribed to before-tool only; the host never calls the others.

    def before_llm(self, ctx, request):
        return LlmDecision_Proceed()

    def after_llm(self, ctx, response):
        return LlmDecision_Proceed()

    def after_tool(self, ctx, name, arguments, outcome):
        return ResultDecision_Proceed()

    def on_event(self, ctx, event):
        pass
