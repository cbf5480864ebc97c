// The __NAME__ plugin: one tool, `__NAME___words`, counting the lines,
// words and characters of a text. Start here: add tools to TOOLS and a
// branch to exports_wasmclaw_plugin_tool_call_tool.
//
// Memory rules of the generated bindings (bindings/tool_plugin.h, from
// `wit-bindgen c`): the arguments of an export are ours to free; what we
// return must be malloc'd, because the generated cabi_post_* functions
// free() it after the host has copied it. So never return a string
// literal: copy it with tool_plugin_string_dup.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "tool_plugin.h"

static const struct {
  const char *name, *description, *input_schema;
} TOOLS[] = {
    {"__NAME___words",
     "Count the lines, words (runs of non-whitespace) and characters of a text. Returns JSON.",
     "{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\","
     "\"description\":\"The text to count.\"}},\"required\":[\"text\"],\"additionalProperties\":false}"},
};
#define TOOL_COUNT (sizeof TOOLS / sizeof TOOLS[0])

void exports_wasmclaw_plugin_tool_list_tools(exports_wasmclaw_plugin_tool_list_tool_spec_t *ret) {
  ret->len = TOOL_COUNT;
  ret->ptr = calloc(TOOL_COUNT, sizeof *ret->ptr);
  if (!ret->ptr) abort();
  for (size_t i = 0; i < TOOL_COUNT; i++) {
    tool_plugin_string_dup(&ret->ptr[i].name, TOOLS[i].name);
    tool_plugin_string_dup(&ret->ptr[i].description, TOOLS[i].description);
    tool_plugin_string_dup(&ret->ptr[i].input_schema, TOOLS[i].input_schema);
  }
}

// Sets an `invalid-input` error: the message is what the model reads, so
// name the argument and say what is expected.
static bool invalid_input(exports_wasmclaw_plugin_tool_plugin_error_t *err, const char *message) {
  err->kind = WASMCLAW_PLUGIN_TYPES_ERROR_KIND_INVALID_INPUT;
  err->retryable = false;
  tool_plugin_string_dup(&err->message, message);
  return false;
}

// The counts as JSON, malloc'd.
static char *count_words(const char *text, size_t len) {
  size_t lines = 0, words = 0, chars = 0;
  bool in_word = false;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)text[i];
    if ((c & 0xc0) != 0x80) chars++;  // UTF-8: count lead bytes only
    if (c == '\n') lines++;
    bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
    if (!space && !in_word) words++;
    in_word = !space;
  }
  if (len > 0 && text[len - 1] != '\n') lines++;  // a last line without a newline
  char *out = malloc(128);
  if (out)
    snprintf(out, 128, "{\"lines\":%zu,\"words\":%zu,\"characters\":%zu,\"bytes\":%zu}", lines, words,
             chars, len);
  return out;
}

bool exports_wasmclaw_plugin_tool_call_tool(exports_wasmclaw_plugin_tool_call_context_t *ctx,
                                            tool_plugin_string_t *name,
                                            exports_wasmclaw_plugin_tool_json_t *arguments,
                                            tool_plugin_string_t *ret,
                                            exports_wasmclaw_plugin_tool_plugin_error_t *err) {
  bool ok = false;
  char why[128];
  json_object args;
  // The host has validated the arguments against the schema; check anyway.
  if (!json_parse_object((const char *)arguments->ptr, arguments->len, &args, why, sizeof why)) {
    char message[160];
    snprintf(message, sizeof message, "arguments are not a valid JSON object: %s", why);
    invalid_input(err, message);
  } else {
    const json_member *text = json_get(&args, "text");
    if (!text || text->kind != JSON_STRING) {
      invalid_input(err, "argument `text` is required and must be a string");
    } else {
      char *result = count_words(text->str, text->str_len);
      if (result) {
        *ret = (tool_plugin_string_t){(uint8_t *)result, strlen(result)};  // ownership passes on
        ok = true;
      } else {
        err->kind = WASMCLAW_PLUGIN_TYPES_ERROR_KIND_INTERNAL;
        err->retryable = false;
        tool_plugin_string_dup(&err->message, "out of memory");
      }
    }
    json_object_free(&args);
  }
  (void)name;  // one tool; with more, compare name->ptr/name->len to pick one
  // The arguments are ours: free them.
  exports_wasmclaw_plugin_tool_call_context_free(ctx);
  tool_plugin_string_free(name);
  exports_wasmclaw_plugin_tool_json_free(arguments);
  return ok;
}
