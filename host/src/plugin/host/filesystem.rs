//! `wasi:filesystem/types`, as wasmtime-wasi links it, with `open-at`
//! replaced by one that counts: it asks the call's descriptors for room
//! first and records what it opened after (see
//! [`crate::plugin::sandbox::descriptors`]).

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, DescriptorFlags, HostDescriptor, OpenFlags, PathFlags,
};

use crate::plugin::sandbox::state::PluginState;

/// The `wasi:filesystem/types` instance of the linked WASI version; every
/// 0.2.x a guest imports resolves to it.
const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

type OpenAtArgs = (
    Resource<Descriptor>,
    PathFlags,
    String,
    OpenFlags,
    DescriptorFlags,
);

/// Replaces `open-at` (linked by wasmtime-wasi) with one that counts.
pub fn add_to_linker(linker: &mut Linker<PluginState>) -> anyhow::Result<()> {
    linker.allow_shadowing(true);
    let mut fs_types = linker.instance(FILESYSTEM_TYPES)?;
    fs_types.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store: StoreContextMut<'_, PluginState>,
         (fd, path_flags, path, oflags, flags): OpenAtArgs| {
            Box::new(async move {
                let (mut fs, calls) = store.data_mut().filesystem_and_descriptors();
                let slot = match calls.reserve(&path) {
                    Ok(slot) => slot,
                    Err(code) => return Ok((Err(code),)),
                };
                match HostDescriptor::open_at(&mut fs, fd, path_flags, path, oflags, flags).await {
                    Ok(opened) => {
                        calls.opened(fs.table.get(&opened)?, slot);
                        Ok((Ok(opened),))
                    }
                    Err(e) => Ok((Err(types::Host::convert_error_code(&mut fs, e)?),)),
                }
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wrapper must replace wasmtime-wasi's `open-at`, not add one of a
    /// WASI version no guest resolves to: defining it again without
    /// shadowing fails only if it is there.
    #[test]
    fn open_at_of_the_linked_wasi_version_is_the_one_replaced() {
        let engine =
            wasmtime::Engine::new(&crate::plugin::sandbox::engine::compile_config()).unwrap();
        let mut linker = Linker::<PluginState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
        let defined_again = linker
            .instance(FILESYSTEM_TYPES)
            .unwrap()
            .func_wrap("[method]descriptor.open-at", |_, (): ()| Ok(()));
        assert!(defined_again.is_err(), "{FILESYSTEM_TYPES} is not linked");
        add_to_linker(&mut linker).unwrap();
    }
}
