// The `when` plugin: date arithmetic, differences, time zone conversion and
// business days for agents. The logic is in dates/, the exported functions
// in export_wasmclaw_plugin_tool/, the generated bindings in gen/.
package main

import (
	"runtime/debug"

	// Linking the generated package brings in its //go:wasmexport functions.
	_ "wit_component/gen/wit_exports"
)

func init() {
	// No automatic garbage collection. The host copies each call's
	// arguments into the guest through cabi_realloc; a collection starting
	// there calls a WASI import, which the component model forbids inside
	// cabi_realloc, and the call traps ("cannot leave component instance").
	// Each call runs in a fresh instance, so the garbage of one call is all
	// there ever is, and the memory limit bounds it.
	debug.SetGCPercent(-1)
}

// Required by -buildmode=c-shared; never called in a reactor.
func main() {}
