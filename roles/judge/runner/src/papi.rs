//! PAPI counters around each timed call, with libpapi loaded at run time.
//!
//! PAPI checks that the caller was built against its major version; the
//! runner is not built against any, so it offers the versions it knows.

use std::ffi::{CString, c_char, c_int, c_longlong};

const PAPI_OK: c_int = 0;
const PAPI_NULL: c_int = -1;
/// `PAPI_VER_CURRENT` of the major versions this runner can talk to.
const VERSIONS: &[c_int] = &[0x0700_0000, 0x0701_0000, 0x0600_0000, 0x0500_0000];

/// Why PAPI could not be loaded, or a call of it failed.
#[derive(Debug, thiserror::Error)]
pub enum PapiError {
    #[error("PAPI (libpapi.so) is not installed on this node")]
    NotInstalled,
    #[error("PAPI_library_init refused every PAPI version this runner knows")]
    Version,
    #[error("bad event name {0:?}")]
    EventName(String),
    #[error("{name}: {error}")]
    Symbol {
        name: &'static str,
        error: libloading::Error,
    },
    /// A call PAPI refused (`what`), with its `PAPI_strerror` text.
    #[error("{what}: {text}")]
    Call { what: String, text: String },
}

pub struct Papi {
    lib: libloading::Library,
    event_set: c_int,
    names: Vec<String>,
}

impl Papi {
    /// Loads libpapi and prepares an event set with `events` (PAPI names).
    pub fn open(events: &[String]) -> Result<Papi, PapiError> {
        // SAFETY: loading the vendor library; its initializers are trusted.
        let lib = [
            "libpapi.so",
            "libpapi.so.7.0",
            "libpapi.so.7",
            "libpapi.so.6.0",
        ]
        .iter()
        .find_map(|name| unsafe { libloading::Library::new(*name) }.ok())
        .ok_or(PapiError::NotInstalled)?;
        let mut papi = Papi {
            lib,
            event_set: PAPI_NULL,
            names: events.to_vec(),
        };
        let init = papi.symbol::<unsafe extern "C" fn(c_int) -> c_int>("PAPI_library_init")?;
        // SAFETY: documented signature; any version mismatch is reported, not UB.
        if !VERSIONS.iter().any(|v| unsafe { init(*v) } == *v) {
            return Err(PapiError::Version);
        }
        let create =
            papi.symbol::<unsafe extern "C" fn(*mut c_int) -> c_int>("PAPI_create_eventset")?;
        let mut set = PAPI_NULL;
        // SAFETY: writes the new set's handle into `set`.
        papi.check("PAPI_create_eventset", unsafe { create(&mut set) })?;
        papi.event_set = set;
        let add = papi.symbol::<unsafe extern "C" fn(c_int, *const c_char) -> c_int>(
            "PAPI_add_named_event",
        )?;
        for name in events {
            let c = CString::new(name.as_str()).map_err(|_| PapiError::EventName(name.clone()))?;
            // SAFETY: a valid set and a NUL-terminated name.
            papi.check(&format!("event {name}"), unsafe { add(set, c.as_ptr()) })?;
        }
        Ok(papi)
    }

    fn symbol<F: Copy>(&self, name: &'static str) -> Result<F, PapiError> {
        // SAFETY: callers name PAPI functions with their documented types.
        unsafe { self.lib.get::<F>(name.as_bytes()) }
            .map(|f| *f)
            .map_err(|error| PapiError::Symbol { name, error })
    }

    pub fn start(&self) -> Result<(), PapiError> {
        let start = self.symbol::<unsafe extern "C" fn(c_int) -> c_int>("PAPI_start")?;
        // SAFETY: the set was created in `open`.
        self.check("PAPI_start", unsafe { start(self.event_set) })
    }

    /// Stops counting; returns each event's count since `start`.
    pub fn stop(&self) -> Result<Vec<(String, f64)>, PapiError> {
        let stop =
            self.symbol::<unsafe extern "C" fn(c_int, *mut c_longlong) -> c_int>("PAPI_stop")?;
        let mut values = vec![0 as c_longlong; self.names.len()];
        // SAFETY: `values` has one slot per event in the set.
        self.check("PAPI_stop", unsafe {
            stop(self.event_set, values.as_mut_ptr())
        })?;
        Ok(self
            .names
            .iter()
            .cloned()
            .zip(values.into_iter().map(|v| v as f64))
            .collect())
    }
}

impl Papi {
    /// Fails with what PAPI says `code` means (`PAPI_strerror`).
    fn check(&self, what: &str, code: c_int) -> Result<(), PapiError> {
        if code == PAPI_OK {
            return Ok(());
        }
        let strerror = self.symbol::<unsafe extern "C" fn(c_int) -> *const c_char>("PAPI_strerror");
        // SAFETY: PAPI returns a static NUL-terminated string, or NULL.
        let text = strerror
            .ok()
            .map(|f| unsafe { f(code) })
            .filter(|p| !p.is_null())
            .map(|p| {
                // SAFETY: not NULL (filtered above), so PAPI's static string.
                unsafe { std::ffi::CStr::from_ptr(p) }
                    .to_string_lossy()
                    .into_owned()
            })
            .unwrap_or_else(|| format!("error {code}"));
        Err(PapiError::Call {
            what: what.to_string(),
            text,
        })
    }
}
