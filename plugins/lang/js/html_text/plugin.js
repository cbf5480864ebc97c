// wasmclaw tool plugin `html_text` (world `tool-plugin` of wit/plugin.wit),
// in JavaScript, built by componentize-js (see build.sh).
//
// This file only wires tools.js to the WIT: the exported interface `tool` is
// an exported object named `tool` whose methods are the WIT functions in
// camelCase; the imported interface `log` is a module named by its WIT id.

import { log } from 'wasmclaw:plugin/log@0.2.0';
import { callTool, listTools, ToolError } from './tools.js';

export const tool = {
  listTools,

  // Returns the result string. An error result is a thrown plain object
  // shaped like `plugin-error`; anything else that escapes (an Error, say)
  // traps the instance, so every failure is caught here.
  callTool(ctx, name, argumentsJson) {
    try {
      const result = callTool(name, argumentsJson);
      log('debug', `${name}: ${argumentsJson.length} characters in, ${result.length} out`);
      return result;
    } catch (e) {
      if (e instanceof ToolError) {
        throw { kind: e.kind, message: e.message, retryable: false };
      }
      log('error', `${name}: ${e && e.stack ? e.stack : e}`);
      throw { kind: 'internal', message: `${name} failed: ${e}`, retryable: false };
    }
  },
};
