//! The command that switches an installed pip environment to another variant of its lazy wheel,
//! as `plan` prints it: run as printed, in a shell, from any directory (issue 53).
//!
//! It names where the wheels are, since the public index has none of them: the `--wheels` the
//! user gave, else the directory PEP 610's `direct_url.json` recorded for a wheel installed by its
//! path; without either, the placeholder `DIR`, and the command says it needs `--wheels`. It pins
//! the split (the lazy wheel's own pin of its core, and the other variant's version or file): an
//! unpinned name resolves to the newest public torch. A requirement is given in the form of the
//! installer that installed the lazy wheel (pip or uv); a PEP 825 variant wheel is uv's alone, in
//! variant mode (pip reads the variant label as a build tag: `Invalid build number: cp311`).

use crate::input::pip::normalize;
use std::path::{Path, PathBuf};

use crate::input::pip::{Installer, Owner};
use crate::sanitize::shell_word;

/// Where the split's wheels are (`plan --wheels`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wheels {
    /// A directory of wheels (`--find-links`), absolute.
    Dir(PathBuf),
    /// A simple index (`splitpkg index`'s layout: a project's files under `URL/PROJECT/`), its URL
    /// ending in `/`.
    Index(String),
}

/// Why `--wheels` is refused.
#[derive(Debug, thiserror::Error)]
pub enum WheelsError {
    /// The URL holds a control character or a space.
    #[error("{}: a control character or a space in the URL", crate::sanitize::quoted(.0))]
    Url(String),
    /// The path is not a directory.
    #[error("{}: not a directory (give a directory of wheels or an http(s) index URL)", .0.display())]
    NotDir(PathBuf),
}

impl Wheels {
    /// An `http://` or `https://` URL is an index; anything else a directory, which must exist
    /// (it is printed absolute, so the command runs from any directory).
    pub fn parse(arg: &str) -> Result<Wheels, WheelsError> {
        if arg.starts_with("http://") || arg.starts_with("https://") {
            if arg.chars().any(|c| c.is_control() || c.is_whitespace()) {
                return Err(WheelsError::Url(arg.to_string()));
            }
            let slash = if arg.ends_with('/') { "" } else { "/" };
            return Ok(Wheels::Index(format!("{arg}{slash}")));
        }
        let dir = Path::new(arg);
        if !dir.is_dir() {
            return Err(WheelsError::NotDir(dir.to_path_buf()));
        }
        std::path::absolute(dir)
            .map(Wheels::Dir)
            .map_err(|_| WheelsError::NotDir(dir.to_path_buf()))
    }
}

/// A switch command, and whether it still needs `--wheels` (it holds the placeholder `DIR`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchCommand {
    /// The command line.
    pub line: String,
    /// Whether it still holds the placeholder `DIR`, to be replaced by where the wheels are
    /// (`--wheels`).
    pub needs_wheels: bool,
}

/// The command that installs `install` (the marker's requirement or variant wheel file name) over
/// the lazy wheel `owner`, from `wheels`, else from where `owner` came from, else from `DIR`.
pub fn command(install: &str, owner: &Owner, wheels: Option<&Wheels>) -> SwitchCommand {
    let recorded = owner.source.as_ref().map(|d| Wheels::Dir(PathBuf::from(d)));
    let (from, needs_wheels) = match wheels.or(recorded.as_ref()) {
        Some(w) => (w.clone(), false),
        None => (Wheels::Dir(PathBuf::from("DIR")), true),
    };
    let lazy = normalize(&owner.name);
    let mut words: Vec<String> = owner
        .pins
        .iter()
        .filter(|p| p.split_once("==").is_none_or(|(n, _)| normalize(n) != lazy))
        .map(|p| shell_word(p))
        .collect();
    let line = if install.ends_with(".whl") {
        let (option, file) = match &from {
            Wheels::Dir(d) => ("--find-links", d.join(install).display().to_string()),
            Wheels::Index(u) => ("--index", format!("{u}{lazy}/{install}")),
        };
        words.push(shell_word(&file));
        format!(
            "uv pip install --preview-features wheel-variants {option} {} {}",
            location(&from),
            words.join(" ")
        )
    } else {
        words.push(shell_word(install));
        let (tool, option) = match (owner.installer, &from) {
            (Installer::Uv, Wheels::Dir(_)) => ("uv pip", "--find-links"),
            (Installer::Uv, Wheels::Index(_)) => ("uv pip", "--index"),
            // pip's --extra-index-url keeps the public index for torch's own dependencies; the
            // pins select the split's files, which no other index holds.
            (_, Wheels::Dir(_)) => ("pip", "--find-links"),
            (_, Wheels::Index(_)) => ("pip", "--extra-index-url"),
        };
        format!(
            "{tool} install {option} {} {}",
            location(&from),
            words.join(" ")
        )
    };
    SwitchCommand { line, needs_wheels }
}

fn location(w: &Wheels) -> String {
    match w {
        Wheels::Dir(d) => shell_word(&d.display().to_string()),
        Wheels::Index(u) => shell_word(u),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(installer: Installer, source: Option<&str>) -> Owner {
        Owner {
            dist_info: "torch_cuda_linalg-2.5.1+1.magma.dist-info".into(),
            name: "torch-cuda-linalg".into(),
            version: "2.5.1+1.magma".into(),
            marker: None,
            pep825_variant: false,
            installer,
            source: source.map(str::to_string),
            pins: vec!["torch==2.5.1+split".into()],
        }
    }

    #[test]
    fn forms_by_installer_and_source() {
        let req = "torch-cuda-linalg==2.5.1+0.nomagma";
        let c = command(req, &owner(Installer::Pip, None), None);
        assert_eq!(
            c.line,
            "pip install --find-links DIR torch==2.5.1+split torch-cuda-linalg==2.5.1+0.nomagma"
        );
        assert!(c.needs_wheels);
        let c = command(req, &owner(Installer::Uv, Some("/w/a b")), None);
        assert_eq!(
            c.line,
            "uv pip install --find-links '/w/a b' torch==2.5.1+split torch-cuda-linalg==2.5.1+0.nomagma"
        );
        assert!(!c.needs_wheels);
        let idx = Wheels::Index("http://127.0.0.1:8000/".into());
        let c = command(req, &owner(Installer::Pip, Some("/w")), Some(&idx));
        assert_eq!(
            c.line,
            "pip install --extra-index-url http://127.0.0.1:8000/ torch==2.5.1+split torch-cuda-linalg==2.5.1+0.nomagma"
        );
        let file = "torch_cuda_linalg-2.5.1-cp311-cp311-linux_x86_64-nomagma.whl";
        let c = command(file, &owner(Installer::Uv, None), Some(&idx));
        assert_eq!(
            c.line,
            format!(
                "uv pip install --preview-features wheel-variants --index http://127.0.0.1:8000/ torch==2.5.1+split http://127.0.0.1:8000/torch-cuda-linalg/{file}"
            )
        );
    }

    #[test]
    fn wheels_option() {
        assert_eq!(
            Wheels::parse("https://h/simple").unwrap(),
            Wheels::Index("https://h/simple/".into())
        );
        assert!(Wheels::parse("http://h/a b").is_err());
        assert!(Wheels::parse("/nonexistent-splitpkg-dir").is_err());
        assert!(matches!(Wheels::parse("."), Ok(Wheels::Dir(d)) if d.is_absolute()));
    }
}
