// Package export_wasmclaw_plugin_tool implements the exported `tool`
// interface: the generated glue in gen/wit_exports calls ListTools and
// CallTool here (the package name and path are fixed by wit-bindgen).
package export_wasmclaw_plugin_tool

import (
	"fmt"

	witTypes "go.bytecodealliance.org/pkg/wit/types"

	"wit_component/dates"
	"wit_component/gen/wasmclaw_plugin_log"
	"wit_component/gen/wasmclaw_plugin_types"
)

type (
	ToolSpec    = wasmclaw_plugin_types.ToolSpec
	CallContext = wasmclaw_plugin_types.CallContext
	PluginError = wasmclaw_plugin_types.PluginError
)

// ListTools is called once at load time, with no grants.
func ListTools() []ToolSpec {
	var specs []ToolSpec
	for _, s := range dates.Specs() {
		specs = append(specs, ToolSpec{Name: s.Name, Description: s.Description, InputSchema: s.InputSchema})
	}
	return specs
}

// CallTool runs one tool call.
func CallTool(ctx CallContext, name string, arguments string) (result witTypes.Result[string, PluginError]) {
	// A Go panic would trap the instance and the model would only see a
	// crash: report it as an internal error instead.
	defer func() {
		if p := recover(); p != nil {
			wasmclaw_plugin_log.Log(wasmclaw_plugin_log.LevelError, fmt.Sprintf("%s panicked: %v", name, p))
			result = fail(wasmclaw_plugin_types.ErrorKindInternal, fmt.Sprintf("%s failed: %v", name, p))
		}
	}()
	out, err := dates.Call(name, arguments)
	if err != nil {
		wasmclaw_plugin_log.Log(wasmclaw_plugin_log.LevelDebug, fmt.Sprintf("%s: %s", name, err.Message))
		return fail(kinds[err.Kind], err.Message)
	}
	wasmclaw_plugin_log.Log(wasmclaw_plugin_log.LevelDebug, fmt.Sprintf("%s: %d bytes in, %d out", name, len(arguments), len(out)))
	return witTypes.Ok[string, PluginError](out)
}

// The WIT error kinds of the plugin's own ones.
var kinds = map[dates.Kind]wasmclaw_plugin_types.ErrorKind{
	dates.InvalidInput: wasmclaw_plugin_types.ErrorKindInvalidInput,
	dates.NotFound:     wasmclaw_plugin_types.ErrorKindNotFound,
	dates.Internal:     wasmclaw_plugin_types.ErrorKindInternal,
}

func fail(kind wasmclaw_plugin_types.ErrorKind, message string) witTypes.Result[string, PluginError] {
	return witTypes.Err[string](PluginError{Kind: kind, Message: message, Retryable: false})
}
