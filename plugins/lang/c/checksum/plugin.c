// The WIT glue of the checksum plugin: turns the generated bindings'
// types (tool_plugin.h, from wit-bindgen c) into calls of checksum.c.
//
// Ownership (wit-bindgen c rules): every argument of an export is ours to
// free; everything we return must be malloc'd, because the generated
// cabi_post_* functions free() it after the host has copied it out. So no
// string literal goes into a result: use tool_plugin_string_dup, not _set.
#include <stdlib.h>
#include <string.h>

#include "checksum.h"
#include "tool_plugin.h"

// Takes ownership of a malloc'd NUL-terminated string without copying.
static tool_plugin_string_t take_string(char *s) {
  return (tool_plugin_string_t){(uint8_t *)s, strlen(s)};
}

void exports_wasmclaw_plugin_tool_list_tools(exports_wasmclaw_plugin_tool_list_tool_spec_t *ret) {
  ret->len = CHECKSUM_TOOL_COUNT;
  ret->ptr = calloc(CHECKSUM_TOOL_COUNT, sizeof *ret->ptr);
  if (!ret->ptr) abort();  // out of memory at load: nothing better to do
  for (size_t i = 0; i < CHECKSUM_TOOL_COUNT; i++) {
    tool_plugin_string_dup(&ret->ptr[i].name, CHECKSUM_TOOLS[i].name);
    tool_plugin_string_dup(&ret->ptr[i].description, CHECKSUM_TOOLS[i].description);
    tool_plugin_string_dup(&ret->ptr[i].input_schema, CHECKSUM_TOOLS[i].input_schema);
  }
}

bool exports_wasmclaw_plugin_tool_call_tool(exports_wasmclaw_plugin_tool_call_context_t *ctx,
                                            tool_plugin_string_t *name,
                                            exports_wasmclaw_plugin_tool_json_t *arguments,
                                            tool_plugin_string_t *ret,
                                            exports_wasmclaw_plugin_tool_plugin_error_t *err) {
  char *text = NULL;
  call_status st = checksum_call((const char *)name->ptr, name->len, (const char *)arguments->ptr,
                                 arguments->len, &text);
  // The arguments are ours: free them (the input can be large).
  exports_wasmclaw_plugin_tool_call_context_free(ctx);
  tool_plugin_string_free(name);
  exports_wasmclaw_plugin_tool_json_free(arguments);

  if (st == CALL_OK) {
    *ret = take_string(text);
    return true;
  }
  err->retryable = false;
  switch (st) {
    case CALL_INVALID_INPUT: err->kind = WASMCLAW_PLUGIN_TYPES_ERROR_KIND_INVALID_INPUT; break;
    case CALL_NOT_FOUND: err->kind = WASMCLAW_PLUGIN_TYPES_ERROR_KIND_NOT_FOUND; break;
    default: err->kind = WASMCLAW_PLUGIN_TYPES_ERROR_KIND_INTERNAL; break;
  }
  if (text) err->message = take_string(text);
  else tool_plugin_string_dup(&err->message, "checksum: out of memory; try a smaller input");
  return false;
}
