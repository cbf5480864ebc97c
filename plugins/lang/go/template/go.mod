// The module name is wit-bindgen's default: the bindings in gen/ import
// wit_component/gen/... and wit_component/export_wasmclaw_plugin_tool.
module wit_component

go 1.25

require go.bytecodealliance.org/pkg v0.2.3

// The bindings' runtime package is copied into pkg/, so builds need no
// module proxy (GOPROXY=off).
replace go.bytecodealliance.org/pkg => ./pkg
