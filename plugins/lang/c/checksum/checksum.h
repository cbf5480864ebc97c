// The checksum plugin's tools, independent of the WIT bindings so the same
// code runs in the native tests (test.sh) and in the component (plugin.c).
#ifndef CHECKSUM_CHECKSUM_H
#define CHECKSUM_CHECKSUM_H

#include <stddef.h>

typedef struct {
  const char *name;
  const char *description;
  const char *input_schema;  // JSON Schema text
} tool_def;

extern const tool_def CHECKSUM_TOOLS[];
extern const size_t CHECKSUM_TOOL_COUNT;

// How a call ended; plugin.c maps these onto the WIT `error-kind`.
typedef enum { CALL_OK, CALL_INVALID_INPUT, CALL_NOT_FOUND, CALL_INTERNAL } call_status;

// Runs the tool `name` with the JSON `args`. Neither needs a NUL
// terminator. `*text` receives a malloc'd, NUL-terminated, valid UTF-8
// string: the result for CALL_OK, else the error message. The caller frees it.
call_status checksum_call(const char *name, size_t name_len, const char *args, size_t args_len,
                          char **text);

#endif
