// The module name is wit-bindgen's default: the bindings in gen/ import
// wit_component/gen/... and wit_component/export_wasmclaw_plugin_tool, so
// every Go plugin shares it (and the same generated files).
module wit_component

go 1.25

require go.bytecodealliance.org/pkg v0.2.3

// A copy of the bindings' runtime package lives in the repository, so
// builds need no module proxy (GOPROXY=off). See ../pkg/README.md.
replace go.bytecodealliance.org/pkg => ../pkg
