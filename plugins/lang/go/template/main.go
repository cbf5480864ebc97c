// The __NAME__ plugin for wasmclaw. The logic is in tools/, the exported
// functions in export_wasmclaw_plugin_tool/, the generated bindings in gen/.
package main

import (
	"runtime/debug"

	// Linking the generated package brings in its //go:wasmexport functions.
	_ "wit_component/gen/wit_exports"
)

func init() {
	// No automatic garbage collection: a collection that starts inside
	// cabi_realloc (while the host copies the arguments in) calls a WASI
	// import, which traps ("cannot leave component instance"). Every call
	// runs in a fresh instance, and the memory limit bounds its garbage.
	debug.SetGCPercent(-1)
}

// Required by -buildmode=c-shared; never called in a reactor.
func main() {}
