//! The git commit this build is made from, for `splitpkg --version` and every JSON document's
//! `tool.commit` (src/provenance.rs), passed to rustc as `SPLITPKG_BUILD_COMMIT`. The first of:
//!
//! 1. `SPLITPKG_COMMIT` from the environment: a packager building from a tarball says which commit
//!    it is (hex, 7 to 64 digits; anything else fails the build rather than record a wrong one);
//! 2. `git rev-parse HEAD`, when this crate is the top of a git work tree (not merely somewhere
//!    inside another repository, as an unpacked sdist can be);
//! 3. `.cargo_vcs_info.json`, which `cargo package` writes (crates.io, `cargo install splitpkg`);
//! 4. `.git-commit`, which `git archive` fills in (`export-subst` in .gitattributes; GitHub's
//!    release tarballs are made that way);
//! 5. `unknown` (an sdist without any of these).
//!
//! Deterministic: the value depends only on the commit, never on the time or the machine, and the
//! script reruns only when the variable, HEAD or the branch it points to changes.

// A build script talks to cargo on stdout (`cargo:` lines) and reads its own repository's files
// (.cargo_vcs_info.json, .git-commit), not user input.
#![allow(clippy::print_stdout, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::Command;

const ENV: &str = "SPLITPKG_COMMIT";

fn main() {
    println!("cargo:rerun-if-env-changed={ENV}");
    println!("cargo:rerun-if-changed=build.rs");
    let dir = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let commit = from_env()
        .or_else(|| from_git(&dir))
        .or_else(|| from_cargo_vcs_info(&dir))
        .or_else(|| from_archive(&dir))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=SPLITPKG_BUILD_COMMIT={commit}");
}

fn is_commit(s: &str) -> bool {
    (7..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn from_env() -> Option<String> {
    // Empty counts as unset (a recipe that passes the variable through when it has none).
    let v = std::env::var(ENV)
        .ok()
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty())?;
    assert!(
        is_commit(&v),
        "{ENV}={v:?} is not a git commit (7 to 64 hex digits)"
    );
    Some(v)
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn from_git(dir: &Path) -> Option<String> {
    let top = git(dir, &["rev-parse", "--show-toplevel"])?;
    if std::fs::canonicalize(&top).ok()? != std::fs::canonicalize(dir).ok()? {
        return None;
    }
    let head = git(dir, &["rev-parse", "HEAD"]).filter(|h| is_commit(h))?;
    watch_head(dir);
    Some(head)
}

/// Rerun when HEAD moves: HEAD itself (a checkout), the branch's loose ref (a commit) or, when the
/// branch is packed, packed-refs and the folder a new loose ref would appear in. Only existing
/// paths: cargo treats a missing one as always changed.
fn watch_head(dir: &Path) {
    let path = |p: &str| git(dir, &["rev-parse", "--git-path", p]).map(|g| dir.join(g));
    let mut watch = vec![path("HEAD"), path("packed-refs")];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        let loose = path(&branch);
        watch.push(loose.as_ref().and_then(|l| {
            if l.exists() {
                Some(l.clone())
            } else {
                l.parent().map(Path::to_path_buf)
            }
        }));
    }
    for p in watch.into_iter().flatten().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
}

fn from_cargo_vcs_info(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(".cargo_vcs_info.json")).ok()?;
    // {"git": {"sha1": "<hex>"}, ...}: the one hex string after "sha1".
    let rest = &text[text.find("\"sha1\"")? + 6..];
    let start = rest.find('"')? + 1;
    let end = start + rest[start..].find('"')?;
    Some(rest[start..end].to_string()).filter(|c| is_commit(c))
}

fn from_archive(dir: &Path) -> Option<String> {
    let path = dir.join(".git-commit");
    println!("cargo:rerun-if-changed={}", path.display());
    // Unsubstituted (`$Format:%H$`) in a checkout: not a commit, so skipped.
    Some(std::fs::read_to_string(path).ok()?.trim().to_string()).filter(|c| is_commit(c))
}
