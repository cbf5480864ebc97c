"""wasmclaw tool plugin `__NAME__` (world `tool-plugin` of wit/plugin.wit), in Python.

One tool, `__NAME___words`: counts the lines, words and characters of a text.
Build it with ./build.sh; the result is __NAME__.wasm.

componentize-py generates the `wit_world` bindings while it builds. The class
implementing the exported interface `tool` must be named `Tool`. An error
reaches the model only as `raise Err(PluginError(...))`: any other exception
that escapes a call traps the instance, and the model sees a crash.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import log
from wit_world.imports.types import ErrorKind, PluginError, ToolSpec

MAX_TEXT = 1 << 20  # characters; a bigger text is an invalid-input error

SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "The text to count."},
    },
    "required": ["text"],
    "additionalProperties": False,
}


def count(text):
    """Lines, words and characters of text, as the tool's JSON result."""
    return json.dumps({
        "lines": len(text.splitlines()),
        "words": len(text.split()),
        "characters": len(text),
        "bytes": len(text.encode()),
    })


def invalid(message):
    return Err(PluginError(kind=ErrorKind.INVALID_INPUT, message=message, retryable=False))


class Tool(exports.Tool):
    def list_tools(self):
        # Runs once at load time, with no grants: no environment, no files.
        return [ToolSpec(
            name="__NAME___words",
            description="Count the lines, words, characters and UTF-8 bytes of a text.",
            input_schema=json.dumps(SCHEMA),
        )]

    def call_tool(self, ctx, name, arguments):
        if name != "__NAME___words":
            raise Err(PluginError(kind=ErrorKind.NOT_FOUND, message=f"no tool named {name!r}", retryable=False))
        # The host has checked the arguments against SCHEMA; check what it cannot.
        text = json.loads(arguments)["text"]
        if len(text) > MAX_TEXT:
            raise invalid(f"text is {len(text)} characters long; at most {MAX_TEXT} are accepted")
        log.log(log.Level.DEBUG, f"counting {len(text)} characters")
        return count(text)
