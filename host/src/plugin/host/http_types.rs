//! `wasi:http/types`, as wasmtime-wasi-http links it, with the functions
//! that make the host hold memory for the guest (header objects, body
//! buffers) replaced by ones that charge it to the call first (see
//! [`crate::plugin::sandbox::host_memory`]).

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi_http::FieldMap;
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::HeaderError;
use wasmtime_wasi_http::p2::bindings::http::types::{self, HostFields};
use wasmtime_wasi_http::p2::body::HostOutgoingBody;
use wasmtime_wasi_http::p2::types::{HostOutgoingRequest, HostOutgoingResponse};

use crate::plugin::sandbox::host_memory::BODY_CHUNK;
use crate::plugin::sandbox::state::PluginState;

/// The `wasi:http/types` instance of the linked version; every 0.2.x a
/// guest imports resolves to it.
const HTTP_TYPES: &str = "wasi:http/types@0.2.12";

/// What one body being written may hold in the host.
const BODY_BUFFER: u64 = 2 * BODY_CHUNK as u64;

/// What a header object costs beyond its entries.
const FIELDS_SIZE: u64 = (size_of::<FieldMap>() + size_of::<http::HeaderMap>()) as u64;

/// What one header costs, as wasmtime-wasi-http counts it.
fn entry_size(name: &str, value: &[u8]) -> u64 {
    (name.len() + size_of::<http::HeaderName>() + value.len() + size_of::<http::HeaderValue>())
        as u64
}

fn header_result<T>(
    state: &mut PluginState,
    result: Result<T, HeaderError>,
) -> wasmtime::Result<Result<T, types::HeaderError>> {
    match result {
        Ok(v) => Ok(Ok(v)),
        Err(e) => Ok(Err(types::Host::convert_header_error(
            &mut state.http(),
            e,
        )?)),
    }
}

type Store<'a> = StoreContextMut<'a, PluginState>;
type Fields = Resource<FieldMap>;
type Body = Result<Resource<HostOutgoingBody>, ()>;

/// Replaces the functions of `wasi:http/types` that make the host hold
/// memory with ones that charge it to the call first.
pub fn add_to_linker(linker: &mut Linker<PluginState>) -> anyhow::Result<()> {
    linker.allow_shadowing(true);
    let mut http = linker.instance(HTTP_TYPES)?;
    http.func_wrap("[constructor]fields", |mut store: Store<'_>, (): ()| {
        let state = store.data_mut();
        state.hold(FIELDS_SIZE)?;
        Ok((HostFields::new(&mut state.http())?,))
    })?;
    http.func_wrap(
        "[static]fields.from-list",
        |mut store: Store<'_>, (entries,): (Vec<(String, Vec<u8>)>,)| {
            let state = store.data_mut();
            let bytes: u64 = entries.iter().map(|(n, v)| entry_size(n, v)).sum();
            state.hold(FIELDS_SIZE + bytes)?;
            let result = HostFields::from_list(&mut state.http(), entries);
            Ok((header_result(state, result)?,))
        },
    )?;
    http.func_wrap(
        "[method]fields.set",
        |mut store: Store<'_>, (fields, name, values): (Fields, String, Vec<Vec<u8>>)| {
            let state = store.data_mut();
            let bytes: u64 = values.iter().map(|v| entry_size(&name, v)).sum();
            state.hold(bytes)?;
            let result = HostFields::set(&mut state.http(), fields, name, values);
            Ok((header_result(state, result)?,))
        },
    )?;
    http.func_wrap(
        "[method]fields.append",
        |mut store: Store<'_>, (fields, name, value): (Fields, String, Vec<u8>)| {
            let state = store.data_mut();
            state.hold(entry_size(&name, &value))?;
            let result = HostFields::append(&mut state.http(), fields, name, value);
            Ok((header_result(state, result)?,))
        },
    )?;
    http.func_wrap(
        "[method]fields.clone",
        |mut store: Store<'_>, (fields,): (Fields,)| {
            let state = store.data_mut();
            let map = state.http().table.get(&fields)?;
            let bytes = FIELDS_SIZE
                + map
                    .keys()
                    .map(|k| (k.as_str().len() + size_of::<http::HeaderName>()) as u64)
                    .chain(
                        map.values()
                            .map(|v| (v.len() + size_of::<http::HeaderValue>()) as u64),
                    )
                    .sum::<u64>();
            state.hold(bytes)?;
            Ok((HostFields::clone(&mut state.http(), fields)?,))
        },
    )?;
    http.func_wrap(
        "[method]outgoing-request.body",
        |mut store: Store<'_>,
         (request,): (Resource<HostOutgoingRequest>,)|
         -> wasmtime::Result<(Body,)> {
            let state = store.data_mut();
            state.hold(BODY_BUFFER)?;
            Ok((types::HostOutgoingRequest::body(
                &mut state.http(),
                request,
            )?,))
        },
    )?;
    http.func_wrap(
        "[method]outgoing-response.body",
        |mut store: Store<'_>,
         (response,): (Resource<HostOutgoingResponse>,)|
         -> wasmtime::Result<(Body,)> {
            let state = store.data_mut();
            state.hold(BODY_BUFFER)?;
            Ok((types::HostOutgoingResponse::body(
                &mut state.http(),
                response,
            )?,))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wrappers must replace wasmtime-wasi-http's functions, not add
    /// ones of a version no guest resolves to.
    #[test]
    fn the_functions_of_the_linked_wasi_http_version_are_the_ones_replaced() {
        let engine =
            wasmtime::Engine::new(&crate::plugin::sandbox::engine::compile_config()).unwrap();
        let mut linker = Linker::<PluginState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).unwrap();
        for name in [
            "[constructor]fields",
            "[static]fields.from-list",
            "[method]fields.set",
            "[method]fields.append",
            "[method]fields.clone",
            "[method]outgoing-request.body",
            "[method]outgoing-response.body",
        ] {
            let defined_again = linker
                .instance(HTTP_TYPES)
                .unwrap()
                .func_wrap(name, |_, (): ()| Ok(()));
            assert!(defined_again.is_err(), "{HTTP_TYPES} has no {name}");
        }
        add_to_linker(&mut linker).unwrap();
    }
}
