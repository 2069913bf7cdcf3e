//! Which edition of the tool world a component is built for, read from its bytes before it is compiled.
//!
//! A component built for WASI 0.3 uses the component model's async features (an `async func` export,
//! async lowering, streams, futures, tasks) and imports `@0.3` interfaces; it must be compiled and run by
//! an engine with concurrency support. One built for WASI 0.2 uses none of them and runs on the engine
//! without it, which is what keeps 0.2 calls as fast as before 0.3 existed (BENCHMARKS.md, "WASI 0.3
//! beside 0.2"). Only the bytes' sections are parsed, not validated: the engine validates what it
//! compiles, and a component that claims one edition and is the other fails there.

use wasmparser::{CanonicalFunction, CanonicalOption, ComponentType, Payload};

/// The engine a component needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Edition {
    /// WASI 0.2: the synchronous component model.
    Wasi02,
    /// WASI 0.3: the async component model.
    Wasi03,
}

impl Edition {
    /// The edition `component` is built for; [`Edition::Wasi02`] for bytes that do not parse, which the
    /// 0.2 engine then refuses with its own error.
    pub(crate) fn of(component: &[u8]) -> Edition {
        for payload in wasmparser::Parser::new(0).parse_all(component) {
            let uses_async = match payload {
                Ok(Payload::ComponentImportSection(section)) => section
                    .into_iter()
                    .flatten()
                    .any(|import| is_wasi_0_3(import.name.name)),
                Ok(Payload::ComponentTypeSection(section)) => section
                    .into_iter()
                    .flatten()
                    .any(|ty| matches!(ty, ComponentType::Func(f) if f.async_)),
                Ok(Payload::ComponentCanonicalSection(section)) => {
                    section.into_iter().flatten().any(|f| is_async_canon(&f))
                }
                Ok(_) => false,
                Err(_) => return Edition::Wasi02,
            };
            if uses_async {
                return Edition::Wasi03;
            }
        }
        Edition::Wasi02
    }
}

/// Whether a canonical function needs the async component model: an async lift or lower, or any
/// built-in beyond lifting, lowering and resources (tasks, subtasks, streams, futures, waitables).
fn is_async_canon(function: &CanonicalFunction) -> bool {
    let async_options = |options: &[CanonicalOption]| {
        options
            .iter()
            .any(|o| matches!(o, CanonicalOption::Async | CanonicalOption::Callback(_)))
    };
    match function {
        CanonicalFunction::Lift { options, .. } | CanonicalFunction::Lower { options, .. } => {
            async_options(options)
        }
        CanonicalFunction::ResourceNew { .. }
        | CanonicalFunction::ResourceDrop { .. }
        | CanonicalFunction::ResourceRep { .. } => false,
        _ => true,
    }
}

/// Whether an import is a WASI 0.3 interface (`wasi:cli/stdout@0.3.0`, or one of 0.3's release
/// candidates, which no host links).
pub(crate) fn is_wasi_0_3(import: &str) -> bool {
    import.starts_with("wasi:")
        && import
            .split_once('@')
            .is_some_and(|(_, version)| version.starts_with("0.3."))
}

/// The WASI generation a component's imports target: "0.3" when it imports any 0.3 interface (a 0.3
/// tool from a wasm32-wasip2 toolchain also imports 0.2 ones for its standard library), "0.2" when it
/// imports only 0.2 ones, `None` when it imports nothing of WASI.
pub(crate) fn generation(imports: &[String]) -> Option<&'static str> {
    if imports.iter().any(|name| is_wasi_0_3(name)) {
        Some("0.3")
    } else {
        imports
            .iter()
            .any(|name| name.starts_with("wasi:"))
            .then_some("0.2")
    }
}
