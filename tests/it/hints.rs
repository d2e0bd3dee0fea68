//! Every hint works from every installed state (issue 53, item 3): the switch commands `plan`
//! prints for a pip environment are run exactly as printed, by `sh`, from a directory that is not
//! the wheels', with `pip` and `uv` on PATH acting on the environment (as in an activated venv),
//! and the public index reachable. Each installed state (pip, uv, uv in variant mode; the wheels
//! in a `--find-links` directory and in an index served over HTTP on 127.0.0.1) is switched to the
//! other variant and back, and each time torch stays the split's core.

use crate::common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

use splitpkg::analysis::plan::{Plan, SwitchTo};
use splitpkg::channel::document::EnvReport;

const CORE: &str = "torch-2.5.1+split";

fn nomagma_lib() -> PathBuf {
    fixture("conda-nomagma/lib/libtorch_cuda_linalg.so")
}

/// The fixture torch 2.5.1 split with both variants into `dir/wheels dir`.
fn split(dir: &Path) -> PathBuf {
    split_fixture_torch(dir).0
}

/// `splitpkg index` of `wheels`, served on 127.0.0.1.
fn serve(wheels: &Path, out: &Path) -> Server {
    let o = run(&["index", "--quiet", "--out", s(out), s(wheels)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    Server::start(out)
}

/// A fresh venv, and a directory of `pip` and `uv` commands that act on it: pip 26.3 and uv
/// 0.13.9 from the tools venv, as a user's activated environment would have them.
struct Env {
    venv: Venv,
    bin: PathBuf,
    root: PathBuf,
}

impl Env {
    fn new(root: &Path) -> Env {
        let venv = Venv::new(&root.join("venv"));
        let tools = wheel_tools();
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let script = |name: &str, body: String| {
            use std::os::unix::fs::PermissionsExt;
            let p = bin.join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        script(
            "pip",
            format!(
                "exec '{}' -m pip --disable-pip-version-check --no-cache-dir --python '{}' \"$@\"",
                tools.join("bin/python").display(),
                venv.python.display()
            ),
        );
        script(
            "uv",
            format!("exec '{}' \"$@\"", tools.join("bin/uv").display()),
        );
        Env {
            venv,
            bin,
            root: root.to_path_buf(),
        }
    }

    /// `line` run by `sh -c` in a fresh directory, with no installer settings from outside.
    fn sh(&self, line: &str) {
        let cwd = tempfile::tempdir_in(&self.root).unwrap();
        let mut cmd = sh_without_installer_env(line);
        cmd.current_dir(cwd.path());
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let venv = self.venv.python.parent().unwrap().parent().unwrap();
        let o = cmd
            .env("PATH", path)
            .env("VIRTUAL_ENV", venv)
            .env("UV_NO_CACHE", "1")
            .output()
            .unwrap();
        assert!(o.status.success(), "{line}: {}{}", stdout(&o), stderr(&o));
    }

    /// `plan` on the environment (`--wheels` when given): the installed variant, and the printed
    /// switch to `to`, whose text line shows the JSON's command.
    fn plan(&self, wheels: Option<&str>, to: &str) -> (String, SwitchTo) {
        let site = s(&self.venv.site).to_string();
        let mut args = vec!["plan", site.as_str(), "--quiet"];
        if let Some(w) = wheels {
            args.extend(["--wheels", w]);
        }
        let text = run(&args);
        // The verdict's code: 0 CONFINED (magma installed), 1 NOT PRESENT (nomagma).
        assert!(
            matches!(text.status.code(), Some(0 | 1)) && text.stderr.is_empty(),
            "{}",
            stderr(&text)
        );
        args.push("--json");
        let inst = typed::<Plan>(&run(&args)).installed.unwrap();
        let t = inst
            .switch
            .iter()
            .find(|t| t.variant == to)
            .unwrap_or_else(|| panic!("no switch to {to}: {inst:?}"))
            .clone();
        let line = stdout(&text)
            .lines()
            .find(|l| l.starts_with(&format!("  switch to {to}: ")))
            .unwrap_or_else(|| panic!("no switch line: {}", stdout(&text)))
            .to_string();
        assert!(line.ends_with(&format!(": {}", t.command)), "{line}\n{t:?}");
        (inst.variant.unwrap(), t)
    }

    /// The lazy library installed is `variant`'s, the core is the split's, and one distribution
    /// owns the lazy library.
    fn assert_variant(&self, variant: &str) {
        let lib = match variant {
            "magma" => fixture("pip-like").join(LAZY_LIB),
            _ => nomagma_lib(),
        };
        assert_eq!(
            self.venv.lazy_bytes().unwrap(),
            std::fs::read(lib).unwrap(),
            "{variant}"
        );
        let (dists, owners) = self.venv.state();
        assert_eq!((dists[0].as_str(), owners), (CORE, 1), "{dists:?}");
    }

    /// Switch from `from` to `to` with the printed command, then back with the command `plan`
    /// prints then; `wheels` is `plan --wheels` (None: what the environment recorded). Returns
    /// the two commands run.
    fn there_and_back(&self, wheels: Option<&str>, from: &str, to: &str) -> [String; 2] {
        self.assert_variant(from);
        let mut ran = Vec::new();
        for (now, next) in [(from, to), (to, from)] {
            let (installed, t) = self.plan(wheels, next);
            assert_eq!(installed, now);
            assert!(!t.needs_wheels, "{t:?}");
            let line = t.command.clone();
            // Pinned: the core and the variant (a requirement or its file).
            assert!(line.contains("torch==2.5.1+split"), "{line}");
            self.sh(&line);
            self.assert_variant(next);
            ran.push(line);
        }
        ran.try_into().unwrap()
    }
}

/// pip and uv with local-label wheels installed from a `--find-links` directory: nothing records
/// the directory, so `plan` prints the placeholder form marked as needing `--wheels`, and with
/// `--wheels DIR` the printed command switches and the next one switches back.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, pip and uv from PyPI with the public index: cargo test --release --features full-tests"
)]
fn local_label_switches_from_a_find_links_dir_with_pip_and_uv() {
    let d = tempfile::tempdir().unwrap();
    let wheels = split(d.path());
    let w = shell_word(&wheels);
    for (tool, form) in [("pip", "pip install"), ("uv", "uv pip install")] {
        let env = Env::new(&d.path().join(tool));
        env.sh(&format!(
            "{form} --find-links {w} torch==2.5.1+split torch-cuda-linalg==2.5.1+1.magma"
        ));
        // Not recorded: the placeholder, clearly marked.
        let (_, t) = env.plan(None, "nomagma");
        assert!(t.needs_wheels, "{t:?}");
        assert!(
            t.command
                .starts_with(&format!("{form} --find-links DIR torch==2.5.1+split ")),
            "{t:?}"
        );
        let text = stdout(&run(&["plan", s(&env.venv.site)]));
        assert!(
            text.contains("switch to nomagma: saves ")
                && text.contains(": needs --wheels DIR_OR_INDEX_URL ("),
            "{text}"
        );
        let ran = env.there_and_back(Some(s(&wheels)), "magma", "nomagma");
        assert!(
            ran[0].starts_with(&format!("{form} --find-links ")),
            "{ran:?}"
        );
        assert!(
            ran[0].ends_with(" torch-cuda-linalg==2.5.1+0.nomagma"),
            "{ran:?}"
        );
        assert!(
            ran[1].ends_with(" torch-cuda-linalg==2.5.1+1.magma"),
            "{ran:?}"
        );
    }
}

/// The same from an index served over HTTP: pip adds it with `--extra-index-url`, uv with
/// `--index`, the public index staying the default for anything else.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, pip and uv from PyPI with the public index: cargo test --release --features full-tests"
)]
fn local_label_switches_from_an_index_over_http_with_pip_and_uv() {
    let d = tempfile::tempdir().unwrap();
    let wheels = split(d.path());
    let server = serve(&wheels, &d.path().join("index"));
    let url = server.url.as_str();
    for (tool, form, option) in [
        ("pip", "pip install", "--extra-index-url"),
        ("uv", "uv pip install", "--index"),
    ] {
        let env = Env::new(&d.path().join(tool));
        env.sh(&format!(
            "{form} {option} {url} torch==2.5.1+split torch-cuda-linalg==2.5.1+1.magma"
        ));
        let ran = env.there_and_back(Some(url), "magma", "nomagma");
        assert!(
            ran.iter()
                .all(|r| r.starts_with(&format!("{form} {option} {url} "))),
            "{ran:?}"
        );
    }
}

/// uv in variant mode (the PEP 825 set) from the directory: the switch names the other variant's
/// file; installed by its path, uv records it (PEP 610), so the way back needs no `--wheels`.
/// Then from the variant index over HTTP, with `--wheels URL` both ways.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, uv from PyPI with the public index: cargo test --release --features full-tests"
)]
fn uv_variant_mode_switches_from_the_directory_and_the_index() {
    let d = tempfile::tempdir().unwrap();
    let wheels = split(d.path());
    let variants = wheels.join("variants");
    let preview = "uv pip install --preview-features wheel-variants";

    let env = Env::new(&d.path().join("dir"));
    env.sh(&format!(
        "{preview} --find-links {} torch==2.5.1+split",
        shell_word(&variants)
    ));
    env.assert_variant("magma");
    let (_, t) = env.plan(None, "nomagma");
    assert!(t.needs_wheels, "{t:?}");
    let (installed, t) = env.plan(Some(s(&variants)), "nomagma");
    assert_eq!(installed, "magma");
    let line = t.command.as_str();
    assert!(
        line.starts_with(preview) && line.ends_with("-nomagma.whl'"),
        "{line}"
    );
    env.sh(line);
    env.assert_variant("nomagma");
    // The way back from what uv recorded.
    let back = env.there_and_back(None, "nomagma", "magma");
    assert!(back[0].ends_with("-magma.whl'"), "{back:?}");

    let server = serve(&variants, &d.path().join("index"));
    let url = server.url.as_str();
    let env = Env::new(&d.path().join("index-env"));
    env.sh(&format!("{preview} --index {url} torch==2.5.1+split"));
    let ran = env.there_and_back(Some(url), "magma", "nomagma");
    assert!(
        ran[0].starts_with(&format!(
            "{preview} --index {url} torch==2.5.1+split {url}torch-cuda-linalg/"
        )),
        "{ran:?}"
    );
}

/// pip with the lazy wheel installed by its path: pip records the directory (PEP 610
/// `direct_url.json`, the `+` percent-encoded), so `plan` alone prints a command that runs.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, pip from PyPI with the public index: cargo test --release --features full-tests"
)]
fn a_wheel_installed_by_its_path_records_where_the_other_variant_is() {
    let d = tempfile::tempdir().unwrap();
    let wheels = split(d.path());
    let env = Env::new(&d.path().join("pip"));
    let magma = wheels.join("torch_cuda_linalg-2.5.1+1.magma-cp311-cp311-linux_x86_64.whl");
    env.sh(&format!(
        "pip install --find-links {} torch==2.5.1+split {}",
        shell_word(&wheels),
        shell_word(&magma)
    ));
    let (_, t) = env.plan(None, "nomagma");
    assert!(!t.needs_wheels, "{t:?}");
    env.sh(&t.command);
    env.assert_variant("nomagma");
    // That command installed the nomagma wheel by its pin from --find-links, which pip does not
    // record: the way back is the placeholder form until --wheels says where.
    let (_, t) = env.plan(None, "magma");
    assert!(t.needs_wheels, "{t:?}");
    env.there_and_back(Some(s(&wheels)), "nomagma", "magma");
}

/// `--wheels` is refused in one line, with nothing written, where it cannot complete anything.
#[test]
fn wheels_option_refusals() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("plan.txt");
    for (args, says) in [
        (
            vec!["--wheels", "/nonexistent-splitpkg-wheels"],
            "--wheels: /nonexistent-splitpkg-wheels: not a directory",
        ),
        (
            vec!["--wheels", "http://127.0.0.1/a b"],
            "a control character or a space in the URL",
        ),
        (
            vec!["--wheels", s(d.path())],
            "not a pip environment with a split's lazy wheel",
        ),
    ] {
        let mut all = vec!["plan", "--quiet", "--out", s(&out)];
        all.extend(args);
        let o = run_path(&all, &fixture("pip-like"));
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(says) && e.trim_end().lines().count() == 1, "{e}");
        assert!(!out.exists());
    }
}

fn shell_word(p: &Path) -> String {
    splitpkg::sanitize::shell_word(s(p))
}

// --- conda: the commands `env` prints, and its notes ---------------------------------------------

/// The fixture's conda-like prefix packed into `channel` (version 2.5.2), with the nomagma build
/// when `slim` (else the channel has only the magma build).
fn pack_channel(channel: &Path, slim: bool) {
    let nomagma = format!("nomagma={}", nomagma_lib().display());
    let tree = fixture("conda-like");
    let mut args = vec![
        "pack",
        s(&tree),
        "--out",
        s(channel),
        "--quiet",
        "--version",
        "2.5.2",
        "--build-keys",
        "cuda126",
    ];
    if slim {
        args.extend(["--lazy-variant", nomagma.as_str()]);
    }
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// The default environment `solve --install` makes from `channel` (the magma build), at `envs`.
fn conda_env(channel: &Path, envs: &Path) -> PathBuf {
    let o = run(&["solve", s(channel), "--install", s(envs), "--quiet"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    envs.join("default")
}

fn env_report(prefix: &Path) -> EnvReport {
    let o = run(&["env", s(prefix), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    typed(&o)
}

/// The switch line `env` printed for `form` (`conda`, `mamba`, `pixi`).
fn switch_line<'a>(r: &'a EnvReport, form: &str) -> &'a str {
    let c = &r.switch.commands;
    match form {
        "conda" => &c.conda,
        "mamba" => &c.mamba,
        "pixi" => &c.pixi,
        _ => panic!("no {form} line"),
    }
}

/// The words `sh` makes of `line` (a printed command), as the installer it names would get them.
fn argv(line: &str) -> Vec<String> {
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("printf '%s\\n' {line}"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{line}");
    stdout(&o).lines().map(str::to_string).collect()
}

/// What a printed conda/mamba/pixi line asks for: its one spec, checked to be the whole command
/// (`conda install SPEC`, `mamba install SPEC`, `pixi add SPEC`).
fn printed_spec(line: &str) -> (String, &'static str) {
    let words = argv(line);
    let form = match words.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["conda", "install", _] | ["mamba", "install", _] => "conda",
        ["pixi", "add", _] => "pixi",
        _ => panic!("not a switch command: {line}"),
    };
    (words[2].clone(), form)
}

/// The spec run by py-rattler (rattler's parser, solver and installer, from PyPI) on `prefix`:
/// the builds it solved, name → build, or None when it is unsolvable (the prefix untouched).
fn rattler_switch(prefix: &Path, channel: &Path, line: &str) -> Option<Vec<(String, String)>> {
    let (spec, form) = printed_spec(line);
    let o = Command::new(python_env())
        .arg(repo().join("tests/py/conda_switch.py"))
        .args([s(prefix), s(channel), &spec, form])
        .output()
        .unwrap();
    assert!(o.status.success(), "py-rattler: {}", stderr(&o));
    let r = json(&o);
    r["solved"].as_array().map(|v| {
        v.iter()
            .map(|p| (p[0].as_str().unwrap().into(), p[2].as_str().unwrap().into()))
            .collect()
    })
}

/// A conda-compatible installer to run the printed line itself: `SPLITPKG_CONDA`, else conda,
/// mamba or micromamba on PATH.
fn real_conda() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SPLITPKG_CONDA") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    ["micromamba", "mamba", "conda"].iter().find_map(|n| {
        std::env::split_paths(&path)
            .map(|d| d.join(n))
            .find(|p| p.is_file())
    })
}

/// The printed `conda install …` / `mamba install …` line run by `sh` with `conda` and `mamba`
/// being `installer`, pointed at `prefix` and the file:// channel only (what an activated
/// environment and the user's channel configuration give it), or "not run: …" said.
fn run_real_conda(prefix: &Path, channel: &Path, line: &str) -> bool {
    let Some(installer) = real_conda() else {
        eprintln!(
            "not run: {line}: no conda, mamba or micromamba on PATH and SPLITPKG_CONDA unset (py-rattler ran its spec)"
        );
        return false;
    };
    let bin = prefix.parent().unwrap().join("conda-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let url = format!("file://{}", std::path::absolute(channel).unwrap().display());
    for name in ["conda", "mamba"] {
        use std::os::unix::fs::PermissionsExt;
        let p = bin.join(name);
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\ncmd=$1; shift\nexec '{}' \"$cmd\" -y -p '{}' --override-channels -c '{url}' \"$@\"\n",
                installer.display(),
                prefix.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new("sh")
        .arg("-c")
        .arg(line)
        .env("PATH", path)
        .env(
            "MAMBA_ROOT_PREFIX",
            prefix.parent().unwrap().join("mamba-root"),
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{line}: {}{}", stdout(&o), stderr(&o));
    true
}

fn installed_builds(prefix: &Path) -> Vec<(String, String)> {
    let r = env_report(prefix);
    let mut v: Vec<(String, String)> = r
        .packages
        .iter()
        .map(|p| (p.name.clone(), p.build.clone()))
        .collect();
    v.sort();
    v
}

/// Each switch line `env` prints (conda, mamba, pixi), its spec solved and installed by
/// py-rattler from the file:// channel into a copy of the environment: the other variant's build
/// is installed, libmagma leaves as the constraint note says, `env` then says the variant
/// changed, and the way back it prints runs too. A conda on PATH (or `SPLITPKG_CONDA`) runs the
/// printed conda and mamba lines themselves; the test says "not run" where none is.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, py-rattler in a pip venv: cargo test --release --features full-tests"
)]
fn conda_mamba_and_pixi_lines_switch_a_conda_environment() {
    let d = tempfile::tempdir().unwrap();
    let channel = d.path().join("channel");
    pack_channel(&channel, true);
    let default = conda_env(&channel, &d.path().join("envs"));
    let r = env_report(&default);
    assert!(
        r.notes.iter().any(|n| n
            .contains("the nomagma build constrains libmagma <0.0a0, so the solver removes libmagma when you switch")),
        "{r:?}"
    );
    for form in ["conda", "mamba", "pixi"] {
        let prefix = d.path().join(form).join("env");
        std::fs::create_dir_all(prefix.parent().unwrap()).unwrap();
        assert!(
            Command::new("cp")
                .arg("-a")
                .arg(&default)
                .arg(&prefix)
                .status()
                .unwrap()
                .success()
        );
        for (from, to) in [("magma", "nomagma"), ("nomagma", "magma")] {
            let r = env_report(&prefix);
            assert_eq!((r.variant.as_str(), r.switch.to.as_str()), (from, to));
            let line = switch_line(&r, form).to_string();
            let solved = rattler_switch(&prefix, &channel, &line)
                .unwrap_or_else(|| panic!("{line}: unsolvable"));
            let lazy = solved
                .iter()
                .find(|(n, _)| n == "libtorch-cuda-linalg")
                .map(|(_, b)| b.clone())
                .unwrap();
            assert!(lazy.contains(&format!("_{to}_")), "{line}: {solved:?}");
            // The note said so: the slim build has no libmagma beside it; the other way it comes back.
            let magma = solved.iter().any(|(n, _)| n == "libmagma");
            assert_eq!(magma, to == "magma", "{line}: {solved:?}");
            assert_eq!(installed_builds(&prefix), solved, "{line}");
            assert_eq!(env_report(&prefix).variant, to, "{line}");
            assert_eq!(prefix.join("lib/libmagma.so.2").exists(), to == "magma");
        }
    }
    // The printed lines themselves, by a real conda where there is one.
    let prefix = d.path().join("real").join("env");
    std::fs::create_dir_all(prefix.parent().unwrap()).unwrap();
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(&default)
            .arg(&prefix)
            .status()
            .unwrap()
            .success()
    );
    let line = env_report(&prefix).switch.commands.conda;
    if run_real_conda(&prefix, &channel, &line) {
        assert_eq!(env_report(&prefix).variant, "nomagma", "{line}");
    }
    eprintln!(
        "not run: {:?}: pixi add needs a pixi workspace; its spec was parsed strictly and installed by py-rattler (pixi's own library)",
        r.switch.commands.pixi
    );
}

/// `env`'s note on a channel without the other build is true: the printed switch fails (the
/// environment is untouched), and after the nomagma build is published the note is gone and the
/// same line switches.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier, py-rattler in a pip venv: cargo test --release --features full-tests"
)]
fn the_no_build_note_holds_until_the_build_is_published() {
    let d = tempfile::tempdir().unwrap();
    let channel = d.path().join("channel");
    pack_channel(&channel, false);
    let prefix = conda_env(&channel, &d.path().join("envs"));
    let r = env_report(&prefix);
    let note = "the channel has no nomagma build of libtorch-cuda-linalg 2.5.2: the switch commands fail until one is published";
    assert!(r.notes.iter().any(|n| n == note), "{r:?}");
    let text = stdout(&run(&["env", s(&prefix)]));
    assert!(text.contains(&format!("note: {note}")), "{text}");
    let before = walk(&prefix);
    for form in ["conda", "pixi"] {
        let line = switch_line(&r, form);
        assert_eq!(rattler_switch(&prefix, &channel, line), None, "{line}");
        assert_eq!(
            walk(&prefix),
            before,
            "{line}: the environment is untouched"
        );
    }
    pack_channel(&channel, true);
    let r = env_report(&prefix);
    assert!(
        !r.notes.iter().any(|n| n.contains("has no nomagma build")),
        "{r:?}"
    );
    let line = r.switch.commands.conda.as_str();
    let solved = rattler_switch(&prefix, &channel, line).expect("solvable once published");
    assert!(
        solved
            .iter()
            .any(|(n, b)| n == "libtorch-cuda-linalg" && b.contains("_nomagma_")),
        "{solved:?}"
    );
    assert_eq!(env_report(&prefix).variant, "nomagma");
}

// --- what the environment records, read as hostile input -----------------------------------------

/// The core and magma wheels of the split unpacked into `dir/site` (what an installer leaves,
/// RECORDs included, without INSTALLER); returns the site and the wheels directory.
fn unpacked_site(dir: &Path) -> (PathBuf, PathBuf) {
    let wheels = split(dir);
    let site = dir.join("site");
    for f in [
        "torch-2.5.1+split-cp311-cp311-linux_x86_64.whl",
        "torch_cuda_linalg-2.5.1+1.magma-cp311-cp311-linux_x86_64.whl",
    ] {
        let mut z = zip::ZipArchive::new(std::fs::File::open(wheels.join(f)).unwrap()).unwrap();
        z.extract(&site).unwrap();
    }
    (site, wheels)
}

const LAZY_DIST_INFO: &str = "torch_cuda_linalg-2.5.1+1.magma.dist-info";

fn switch_to_nomagma(site: &Path) -> SwitchTo {
    let o = run(&["plan", s(site), "--json", "--quiet"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    typed::<Plan>(&o).installed.unwrap().switch[0].clone()
}

/// A PEP 610 record of a path install names the directory (percent escapes decoded, quoted for
/// the shell); INSTALLER picks the form; a URL that is not a file's is no directory; a record that
/// is not JSON, a broken escape or a control character in the path is refused in one line.
#[test]
fn direct_url_and_installer_decide_the_command() {
    let d = tempfile::tempdir().unwrap();
    let (site, wheels) = unpacked_site(d.path());
    let pins = "torch==2.5.1+split torch-cuda-linalg==2.5.1+0.nomagma";
    let t = switch_to_nomagma(&site);
    assert_eq!(
        (t.needs_wheels, t.command.as_str()),
        (
            true,
            format!("pip install --find-links DIR {pins}").as_str()
        )
    );
    let record = site.join(LAZY_DIST_INFO).join("direct_url.json");
    let file = wheels.join("torch_cuda_linalg-2.5.1+1.magma-cp311-cp311-linux_x86_64.whl");
    let url = format!(
        "file://{}",
        s(&file).replace(' ', "%20").replace('+', "%2B")
    );
    std::fs::write(
        &record,
        format!(r#"{{"url": "{url}", "archive_info": {{}}}}"#),
    )
    .unwrap();
    let t = switch_to_nomagma(&site);
    assert!(!t.needs_wheels, "{t:?}");
    assert_eq!(
        t.command,
        format!("pip install --find-links {} {pins}", shell_word(&wheels))
    );
    std::fs::write(site.join(LAZY_DIST_INFO).join("INSTALLER"), "uv\n").unwrap();
    assert_eq!(
        switch_to_nomagma(&site).command,
        format!("uv pip install --find-links {} {pins}", shell_word(&wheels))
    );
    std::fs::write(
        &record,
        r#"{"url": "https://example.org/w/x.whl", "archive_info": {}}"#,
    )
    .unwrap();
    assert!(switch_to_nomagma(&site).needs_wheels);
    for (content, says) in [
        ("not json", "not a PEP 610 direct_url.json"),
        (r#"{"url": "file:///w/%zz.whl"}"#, "not a file URL"),
        (
            r#"{"url": "file:///w/a%1b%5b2Jb/x.whl"}"#,
            "a control character in the path",
        ),
    ] {
        std::fs::write(&record, content).unwrap();
        let out = d.path().join("plan.txt");
        let o = run(&["plan", s(&site), "--quiet", "--out", s(&out)]);
        assert_eq!(o.status.code(), Some(2), "{content}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains("direct_url.json") && e.contains(says) && e.trim_end().lines().count() == 1,
            "{e}"
        );
        assert!(!e.contains('\x1b'), "{e:?}");
        assert!(!out.exists());
    }
}
