//! Writing results: atomically (temp file in the same directory, fsync, rename), so an interrupted
//! run never leaves a half-written plan or recipe where a CI job expects a whole one.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Where `path` is written before it is renamed into place: a hidden name in the same directory
/// (so the rename is atomic), matched by `.gitignore` (`*.splitpkg-tmp-*`).
pub fn temp_path(dir: &Path, file: &str) -> PathBuf {
    dir.join(format!(".{file}.splitpkg-tmp-{}", std::process::id()))
}

pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    let tmp = temp_path(dir, &name);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    Ok(())
}

/// Write to `path`, or to stdout when `path` is `None` or `-`. Every report goes through here:
/// control characters that came from an input (an escape sequence in a member name) are escaped
/// (`crate::sanitize::terminal_text`), so no output can drive the terminal that shows it.
pub fn emit(path: Option<&Path>, data: &str) -> Result<()> {
    let data = &*crate::sanitize::terminal_text(data);
    match path {
        Some(p) if p != Path::new("-") => write_atomic(p, data.as_bytes()),
        _ => {
            let mut out = std::io::stdout().lock();
            // A closed pipe (`| head`) is the reader's choice, not an error worth a message.
            match out.write_all(data.as_bytes()).and_then(|_| out.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                Err(e) => Err(Error::failed("writing to stdout", e)),
                Ok(()) => Ok(()),
            }
        }
    }
}

/// `1536` → `1.5 KiB` (binary units, one decimal).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{n} B") } else { format!("{v:.1} {}", UNITS[u]) }
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
