"""wasmclaw hook plugin `pii_guard` (world `hook-plugin` of wit/plugin.wit), in Python.

After a tool call it hides personal data in the result (or in the error
message) before the model sees it: e-mail addresses, phone numbers, IBANs and
payment card numbers become `[email]`, `[phone]`, `[iban]`, `[card]`. The
operator's settings come from the `[config]` table of pii_guard.toml (see
that file). The detection is in pii.py; this module only wires it to the WIT.

componentize-py generates the `wit_world` bindings at build time (build.sh).
The class implementing the exported interface `hooks` must be named `Hooks`.
A hook returns a decision and has no error result: an exception that escapes
traps the instance, and the host then applies the plugin's `fail` mode
(pii_guard.toml sets "closed": the result is withheld).
"""

import json
import re

from componentize_py_types import Err, Ok
from wit_world import exports
from wit_world.exports.hooks import (
    HookPoint,
    LlmDecision_Proceed,
    ResultDecision_Proceed,
    ResultDecision_Replace,
    Subscription,
    ToolDecision_Proceed,
)
from wit_world.imports import config, log
from wit_world.imports.types import PluginError

import pii

# After most other after-tool hooks (lowest runs first), so that it also sees
# what they put in; the operator may change it with [hooks] priority.
PRIORITY = 90

# What the host accepts as a tool pattern: a tool name with '*' wildcards.
_TOOL_PATTERN = re.compile(r"[A-Za-z0-9_*-]{1,64}")


def _settings():
    """(Guard, tool patterns) from the [config] table. A mistake there is
    logged and the defaults are used instead (every kind, every tool): hiding
    too much is safer than letting personal data through."""
    try:
        cfg = json.loads(config.get())
        tools = cfg.pop("tools", []) if isinstance(cfg, dict) else []
        if not isinstance(tools, list) or not all(
                isinstance(t, str) and _TOOL_PATTERN.fullmatch(t) for t in tools):
            raise pii.ConfigError("config.tools must be a list of tool names, '*' matching any run "
                                  f"of characters (\"files_*\"); got {tools!r}")
        return pii.Guard(cfg), tools
    except (ValueError, pii.ConfigError) as e:
        log.log(log.Level.ERROR, f"{e}; hiding every kind in the results of every tool")
        return pii.Guard({}), []


class Hooks(exports.Hooks):
    def subscriptions(self):
        _, tools = _settings()
        return [Subscription(point=HookPoint.AFTER_TOOL, priority=PRIORITY, tools=tools, events=[])]

    def after_tool(self, ctx, name, arguments, outcome):
        guard, _ = _settings()
        # outcome is Ok(result text) or Err(PluginError): an error message
        # may quote personal data too.
        text = outcome.value if isinstance(outcome, Ok) else outcome.value.message
        redacted, counts = guard.redact(text)
        if not counts:
            # Nothing found: proceed, so that the host records no decision.
            return ResultDecision_Proceed()
        found = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
        log.log(log.Level.INFO, f"hid {found} in the result of `{name}`")
        if isinstance(outcome, Ok):
            return ResultDecision_Replace(Ok(redacted))
        e = outcome.value
        return ResultDecision_Replace(Err(PluginError(kind=e.kind, message=redacted, retryable=e.retryable)))

    # Subscribed to after-tool only; the host never calls the others.

    def before_llm(self, ctx, request):
        return LlmDecision_Proceed()

    def after_llm(self, ctx, response):
        return LlmDecision_Proceed()

    def before_tool(self, ctx, name, arguments):
        return ToolDecision_Proceed()

    def on_event(self, ctx, event):
        pass
