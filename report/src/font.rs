//! The figures' font: read at run time, so neither the build nor the
//! repository carries one.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use plotters::style::{FontStyle, register_font};

use crate::ReportError;

/// The family name every figure asks for.
pub const FAMILY: &str = "sans-serif";

/// The Debian package that installs the first path of [`SEARCH`].
pub const PACKAGE: &str = "fonts-dejavu-core";

/// Where Debian and Ubuntu, Fedora and RHEL, and SUSE install DejaVu Sans.
const SEARCH: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/DejaVuSans.ttf",
];

/// The font registered so far; plotters keeps fonts for the whole process.
static REGISTERED: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Registers `explicit`, or the first DejaVu Sans found, as [`FAMILY`].
pub fn register(explicit: Option<&Path>) -> Result<(), ReportError> {
    let path = match explicit {
        Some(path) => path.to_path_buf(),
        None => find()?,
    };
    let mut registered = REGISTERED.lock().expect("font registry lock");
    if registered.as_ref() == Some(&path) {
        return Ok(());
    }
    let bytes = std::fs::read(&path).map_err(|source| crate::io_error(&path, source))?;
    // plotters holds fonts as 'static; one font per report command, so the
    // leak is bounded by the fonts a process ever asks for.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    register_font(FAMILY, FontStyle::Normal, bytes)
        .map_err(|_| ReportError::BadFont(path.clone()))?;
    *registered = Some(path);
    Ok(())
}

fn find() -> Result<PathBuf, ReportError> {
    SEARCH
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or_else(|| ReportError::NoFont {
            searched: SEARCH.join(", "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_a_font_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("fake.ttf");
        std::fs::write(&fake, "not a font").unwrap();
        let err = register(Some(&fake)).unwrap_err();
        assert!(
            matches!(err, ReportError::BadFont(ref p) if p == &fake),
            "{err}"
        );
    }

    #[test]
    fn the_missing_font_message_names_the_package() {
        let err = ReportError::NoFont {
            searched: SEARCH.join(", "),
        };
        assert!(
            err.to_string()
                .contains("apt-get install fonts-dejavu-core"),
            "{err}"
        );
    }
}
