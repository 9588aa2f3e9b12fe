//! A folder of its own for one test, removed when the test ends (passing or not), so that a
//! test run leaves nothing behind in the temporary folder.

use std::path::{Path, PathBuf};

/// A scratch folder, removed with everything in it when dropped.
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A new scratch folder `lama-NAME-PID` in the temporary folder: NAME must be unique among the
/// tests of one test binary that may run at once.
pub fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("lama-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    Scratch(dir)
}
