"""wasmclaw tool plugin `csv_stats` (world `tool-plugin` of wit/plugin.wit), in Python.

Tools: `csv_summary` (row count, per-column type guess, numeric statistics,
distinct counts) and `csv_query` (filter, sort, select, limit). The logic is in
csvstats.py; this module only wires it to the WIT exports.

componentize-py generates the `wit_world` bindings at build time (build.sh).
The class implementing the exported interface `tool` must be named `Tool`.
Errors reach the host only as `raise Err(PluginError(...))`: any other
exception that escapes a call traps the instance, and the model sees a crash
instead of a message it can act on.
"""

import json
import traceback

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import log
from wit_world.imports.types import CallContext, ErrorKind, PluginError, ToolSpec

import csvstats


def _error(kind, message):
    return Err(PluginError(kind=kind, message=message, retryable=False))


class Tool(exports.Tool):
    def list_tools(self):
        return [ToolSpec(name=n, description=d, input_schema=s) for n, d, s in csvstats.schemas()]

    def call_tool(self, ctx: CallContext, name: str, arguments: str) -> str:
        try:
            args = json.loads(arguments)
        except ValueError as e:
            raise _error(ErrorKind.INVALID_INPUT, f"arguments are not JSON: {e}")
        if not isinstance(args, dict):
            raise _error(ErrorKind.INVALID_INPUT, "arguments must be a JSON object")
        if name not in csvstats.TOOL_NAMES:
            raise _error(ErrorKind.NOT_FOUND, f"this plugin has no tool named {name!r}")
        try:
            result = csvstats.call(name, args)
        except csvstats.InputError as e:
            raise _error(ErrorKind.INVALID_INPUT, str(e))
        except MemoryError:
            raise _error(ErrorKind.INVALID_INPUT, "the CSV is too large for this plugin's memory limit; pass fewer rows")
        except Exception as e:  # a bug here: report it instead of trapping
            log.log(log.Level.ERROR, f"{name}: {traceback.format_exc()}")
            raise _error(ErrorKind.INTERNAL, f"{name} failed: {type(e).__name__}: {e}")
        log.log(log.Level.DEBUG, f"{name}: {len(arguments)} bytes in, {len(result)} out")
        return result
