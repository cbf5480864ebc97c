//! Host memory a call holds for its guest outside the guest's linear
//! memory, counted against the call's memory limit (`limits.memory_mib`).
//!
//! `wasi:http` objects live in host memory: header objects (`fields`), the
//! buffers of request bodies being written, the answers the host has read
//! for the guest. Uncounted, a plugin limited to 64 MiB could make the host
//! hold gigabytes for it. So linear memory and these bytes share one
//! budget, [`CallMemory`]:
//!
//! - header objects: what each creation or change asks the host to hold
//!   (names, values, and the size of the objects themselves), from then to
//!   the end of the call;
//! - a request or response body being written: its buffer, at most
//!   [`BODY_CHUNK`] bytes per write and two writes buffered, from then to
//!   the end of the call;
//! - an answer read for the guest, as each piece of it arrives (and the
//!   copy the credential scrub makes of it), until the guest has let go of
//!   it;
//! - a request body, as each piece of it is collected to be sent.
//!
//! A header object or body over the budget stops the call, as growing
//! linear memory past the limit does; an answer over it is refused, like
//! one over `network.max_response_kib`. How many objects a call holds at
//! once is bounded by the size of its resource table (see
//! [`super::state`]).
//!
//! The header functions and the body constructors of `wasi:http/types` are
//! replaced in the linker by wrappers that charge first, then call
//! wasmtime-wasi-http's own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi_http::FieldMap;
use wasmtime_wasi_http::p2::HeaderError;
use wasmtime_wasi_http::p2::bindings::http::types::{self, HostFields};
use wasmtime_wasi_http::p2::body::HostOutgoingBody;
use wasmtime_wasi_http::p2::types::{HostOutgoingRequest, HostOutgoingResponse};

use wasmtime_wasi_http::WasiHttpView;

use super::state::PluginState;

/// The `wasi:http/types` instance of the linked version; every 0.2.x a
/// guest imports resolves to it.
const HTTP_TYPES: &str = "wasi:http/types@0.2.12";

/// The most a guest may write to a body at once (wasmtime-wasi-http
/// buffers two such writes per body).
pub const BODY_CHUNK: usize = 64 << 10;

/// What one body being written may hold in the host.
const BODY_BUFFER: u64 = 2 * BODY_CHUNK as u64;

/// A call's memory budget: its linear memory and what the host holds for
/// it, together.
#[derive(Debug)]
pub struct CallMemory {
    limit: u64,
    used: Mutex<Used>,
    /// The limit was reached by something the host holds.
    host_breach: AtomicBool,
}

#[derive(Debug, Default, Clone, Copy)]
struct Used {
    linear: u64,
    host: u64,
}

/// Bytes the host holds for a call, given back when dropped.
#[derive(Debug)]
pub struct Charge {
    memory: Arc<CallMemory>,
    bytes: u64,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.memory.used().host -= self.bytes;
    }
}

impl Charge {
    /// Holds `bytes` in all instead, if the budget has them: a running
    /// charge for something the host builds up piece by piece. Unchanged
    /// when it does not fit.
    pub fn resize(&mut self, bytes: u64) -> Result<(), OverLimit> {
        let mut used = self.memory.used();
        if bytes > self.bytes {
            let more = bytes - self.bytes;
            if used.linear + used.host + more > self.memory.limit {
                return Err(OverLimit {
                    asked: more,
                    limit: self.memory.limit,
                });
            }
            used.host += more;
        } else {
            used.host -= self.bytes - bytes;
        }
        self.bytes = bytes;
        Ok(())
    }
}

/// Bytes that would put a call over its memory limit.
#[derive(Debug, thiserror::Error)]
#[error(
    "the host would hold {asked} bytes more for the call, over its memory limit of {limit} bytes"
)]
pub struct OverLimit {
    pub asked: u64,
    pub limit: u64,
}

impl CallMemory {
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(CallMemory {
            limit,
            used: Mutex::default(),
            host_breach: AtomicBool::new(false),
        })
    }

    fn used(&self) -> std::sync::MutexGuard<'_, Used> {
        self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Linear memory grows by `grow` bytes, if the budget has them.
    pub fn grow_linear(&self, grow: u64) -> bool {
        let mut used = self.used();
        let fits = used.linear + used.host + grow <= self.limit;
        if fits {
            used.linear += grow;
        }
        fits
    }

    /// A growth granted by [`CallMemory::grow_linear`] did not happen.
    pub fn undo_linear(&self, grow: u64) {
        self.used().linear -= grow;
    }

    /// Holds `bytes` for the host, if the budget has them.
    pub fn charge(self: &Arc<Self>, bytes: u64) -> Result<Charge, OverLimit> {
        let mut used = self.used();
        if used.linear + used.host + bytes > self.limit {
            return Err(OverLimit {
                asked: bytes,
                limit: self.limit,
            });
        }
        used.host += bytes;
        Ok(Charge {
            memory: self.clone(),
            bytes,
        })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes the host holds for the call now.
    pub fn host_bytes(&self) -> u64 {
        self.used().host
    }

    /// The call is stopped because the host was to hold more than the
    /// limit allows.
    fn mark_host_breach(&self) {
        self.host_breach.store(true, Ordering::SeqCst);
    }

    /// Whether the call was stopped by something the host was to hold.
    pub fn host_breached(&self) -> bool {
        self.host_breach.load(Ordering::SeqCst)
    }
}

/// What the host holds for a call until it ends: header objects and body
/// buffers.
#[derive(Debug, Default)]
pub struct CallCharges {
    held: Vec<Charge>,
}

impl PluginState {
    /// Charges `bytes` to the call until it ends; over the limit, a trap
    /// that stops it.
    fn hold(&mut self, bytes: u64) -> wasmtime::Result<()> {
        let memory = self.memory();
        let charge = memory
            .charge(bytes)
            .inspect_err(|_| memory.mark_host_breach())?;
        self.charges().held.push(charge);
        Ok(())
    }
}

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

    #[test]
    fn a_running_charge_grows_within_the_limit_and_is_given_back_when_dropped() {
        let memory = CallMemory::new(100);
        assert!(memory.grow_linear(40));
        let mut charge = memory.charge(0).unwrap();
        charge.resize(50).unwrap();
        assert_eq!(memory.host_bytes(), 50);
        let over = charge.resize(61).unwrap_err();
        assert_eq!((over.asked, over.limit), (11, 100));
        // Unchanged by the refusal; it may shrink, and grow again to fit.
        assert_eq!(memory.host_bytes(), 50);
        charge.resize(20).unwrap();
        charge.resize(60).unwrap();
        assert_eq!(memory.host_bytes(), 60);
        drop(charge);
        assert_eq!(memory.host_bytes(), 0);
    }

    /// The wrappers must replace wasmtime-wasi-http's functions, not add
    /// ones of a version no guest resolves to.
    #[test]
    fn the_functions_of_the_linked_wasi_http_version_are_the_ones_replaced() {
        let engine = wasmtime::Engine::new(&super::super::engine::compile_config()).unwrap();
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

    #[test]
    fn linear_memory_and_host_charges_share_one_limit() {
        let memory = CallMemory::new(100);
        assert!(memory.grow_linear(60));
        let charge = memory.charge(40).unwrap();
        assert!(!memory.grow_linear(1));
        let over = memory.charge(1).unwrap_err();
        assert_eq!((over.asked, over.limit), (1, 100));
        // Given back when dropped.
        drop(charge);
        assert_eq!(memory.host_bytes(), 0);
        assert!(memory.grow_linear(40));
        memory.undo_linear(40);
        assert!(memory.charge(40).is_ok());
    }
}
