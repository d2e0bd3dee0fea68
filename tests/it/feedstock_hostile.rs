//! `splitpkg feedstock` on hostile feedstocks (issue 50), one test per class: links out of the
//! feedstock, files that are not regular, too large or not UTF-8, YAML injection at every place a
//! recipe value is copied, quadratic diffs and deep nesting, and the mode lines of the diff. Each
//! runs the real binary on a copy of fixtures/feedstock; a refusal is one line naming the file,
//! exit 2, and the tree is the same before and after, byte for byte (links and modes included).

use crate::common::*;
use crate::feedstock::{feedstock, mini, one_line_refusal, output, s};

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use serde_yaml::Value;
use splitpkg::recipe::feedstock::MAX_FEEDSTOCK_FILE_BYTES;

const CBC: &str = "recipe/conda_build_config.yaml";
const FILES: [&str; 3] = ["recipe/recipe.yaml", "recipe/build.sh", CBC];

/// Everything under `dir` without following a link or opening anything but a regular file: each
/// entry's kind, mode and bytes (a link's target).
fn state(dir: &Path) -> Vec<(String, &'static str, u32, Vec<u8>)> {
    walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .map(|e| {
            let e = e.unwrap();
            let m = e.path().symlink_metadata().unwrap();
            let t = m.file_type();
            let (kind, bytes) = if t.is_symlink() {
                let target = std::fs::read_link(e.path()).unwrap();
                ("link", target.into_os_string().into_encoded_bytes())
            } else if t.is_file() {
                ("file", std::fs::read(e.path()).unwrap())
            } else if t.is_dir() {
                ("dir", Vec::new())
            } else {
                ("special", Vec::new())
            };
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            (rel, kind, m.permissions().mode(), bytes)
        })
        .collect()
}

/// `feedstock --write` on `root` is refused with one line naming `file` and saying `why`, and
/// nothing under `watch` (the feedstock, or a directory holding it and what it links to) changed.
fn refused_untouched(watch: &Path, root: &Path, file: &str, why: &str) -> String {
    let before = state(watch);
    let o = feedstock(root, &["--write"]);
    one_line_refusal(&o, why);
    let err = stderr(&o);
    assert!(
        err.contains(&root.join(file).display().to_string()),
        "names {file}: {err}"
    );
    assert_eq!(state(watch), before, "{file}: nothing written");
    err
}

#[test]
fn a_recipe_directory_linked_elsewhere_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (root, elsewhere) = (d.path().join("feedstock"), d.path().join("elsewhere"));
    std::fs::create_dir(&root).unwrap();
    let copy = mini();
    std::fs::rename(copy.path().join(".ci_support"), root.join(".ci_support")).unwrap();
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::rename(copy.path().join("recipe"), elsewhere.join("recipe")).unwrap();
    std::os::unix::fs::symlink("../elsewhere/recipe", root.join("recipe")).unwrap();
    refused_untouched(
        d.path(),
        &root,
        "recipe/recipe.yaml",
        "recipe is a symlink; refusing to read or write through a link",
    );
}

#[test]
fn linked_feedstock_files_are_refused_and_never_printed() {
    let outside = tempfile::tempdir().unwrap();
    for (file, target) in [
        ("recipe/recipe.yaml", None),
        ("recipe/build.sh", None),
        (CBC, Some("/etc/passwd")),
        // A link that stays inside the feedstock is refused too: the rule is "no link".
        (CBC, Some("../recipe/recipe.yaml")),
        // A dangling link: --write would create the file wherever it points.
        (CBC, Some("/nonexistent-splitpkg/conda_build_config.yaml")),
    ] {
        let d = mini();
        let p = d.path().join(file);
        let target = target.map(std::path::PathBuf::from).unwrap_or_else(|| {
            // A valid copy outside: without the rule the patch would succeed through the link.
            let t = outside.path().join(p.file_name().unwrap());
            std::fs::copy(&p, &t).unwrap();
            t
        });
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(&target, &p).unwrap();
        let outside_before = state(outside.path());
        let err = refused_untouched(d.path(), d.path(), file, "is a symlink");
        assert!(!err.contains("root:"), "no line of the target: {err}");
        assert_eq!(state(outside.path()), outside_before, "{file}");
    }
}

#[test]
fn fifos_and_devices_in_the_feedstock_are_refused_without_blocking() {
    for file in ["recipe/build.sh", CBC, "recipe/recipe.yaml"] {
        let d = mini();
        let p = d.path().join(file);
        std::fs::remove_file(&p).unwrap();
        let c = std::ffi::CString::new(s(&p)).unwrap();
        // SAFETY: mkfifo(3) on a path in our own temporary directory.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        refused_untouched(d.path(), d.path(), file, "a FIFO, not a regular file");
    }
    // A character device (a copy of /dev/zero) can only be made as root; as root it is refused by
    // the regular-file check, not read until memory runs out.
    let d = mini();
    let p = d.path().join(CBC);
    std::fs::remove_file(&p).unwrap();
    let c = std::ffi::CString::new(s(&p)).unwrap();
    // SAFETY: mknod(2) on a path in our own temporary directory; fails unless root.
    if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o644, libc::makedev(1, 5)) } == 0 {
        refused_untouched(
            d.path(),
            d.path(),
            CBC,
            "a character device, not a regular file",
        );
    } else {
        eprintln!("not root: the character-device case is covered by input::file's unit test");
    }
}

#[test]
fn a_feedstock_file_above_the_size_cap_is_refused() {
    for file in FILES {
        let d = mini();
        // Sparse: the size is refused from the file's length before a byte is read.
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(d.path().join(file))
            .unwrap();
        f.set_len(MAX_FEEDSTOCK_FILE_BYTES + 1).unwrap();
        drop(f);
        refused_untouched(d.path(), d.path(), file, "larger than the 16.0 MiB limit");
    }
}

#[test]
fn a_feedstock_file_that_is_not_utf8_is_refused_not_replaced() {
    for file in FILES {
        let d = mini();
        let p = d.path().join(file);
        let mut bytes = std::fs::read(&p).unwrap();
        bytes.extend_from_slice(b"# caf\xe9\n");
        std::fs::write(&p, bytes).unwrap();
        refused_untouched(d.path(), d.path(), file, "is not UTF-8 text");
    }
}

// --- YAML injection: one test per place a recipe value is copied -------------------------------

/// What an attacker's quoted string tries: new keys from a newline, a comment from ` #`.
const SUFFIXES: [&str; 2] = ["\ninjected: 1", " #not a comment"];

/// `v` as a YAML double-quoted string (JSON's is one).
fn q(v: &str) -> String {
    serde_json::to_string(v).unwrap()
}

/// The mini feedstock's recipe with each `(from, to)` edit applied (every occurrence), patched
/// with --write; the patched recipe, parsed, with no `injected` key anywhere in it.
fn patched_with(edits: &[(&str, String)]) -> Value {
    let d = mini();
    let p = d.path().join("recipe/recipe.yaml");
    let mut t = std::fs::read_to_string(&p).unwrap();
    for (from, to) in edits {
        assert!(t.contains(from), "{from:?} in the recipe");
        t = t.replace(from, to);
    }
    std::fs::write(&p, t).unwrap();
    let o = feedstock(d.path(), &["--write"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&p).unwrap();
    let recipe: Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(!keys(&recipe).contains(&"injected".to_string()), "{text}");
    recipe
}

/// Every mapping key under `v`.
fn keys(v: &Value) -> Vec<String> {
    match v {
        Value::Sequence(items) => items.iter().flat_map(keys).collect(),
        Value::Mapping(m) => m
            .iter()
            .flat_map(|(k, v)| {
                let mut out = keys(v);
                out.extend(k.as_str().map(str::to_string));
                out
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn lazy(recipe: &Value) -> &Value {
    output(recipe, "libtorch-cuda-linalg")
}

fn has(list: &Value, want: &str) -> bool {
    list.as_sequence()
        .is_some_and(|l| l.iter().any(|v| v.as_str() == Some(want)))
}

#[test]
fn injection_in_the_staging_name_and_inherit_stays_one_string() {
    for x in SUFFIXES.map(|s| format!("libtorch-build{s}")) {
        let r = patched_with(&[
            (
                "      name: libtorch-build\n",
                format!("      name: {}\n", q(&x)),
            ),
            (
                "    inherit: libtorch-build\n",
                format!("    inherit: {}\n", q(&x)),
            ),
        ]);
        assert_eq!(lazy(&r)["inherit"].as_str(), Some(x.as_str()));
    }
}

#[test]
fn injection_in_variant_ignore_keys_stays_one_string() {
    for x in SUFFIXES.map(|s| format!("cuda_compiler{s}")) {
        let r = patched_with(&[(
            "      script:\n        env:\n          MINI_BUILD_STAGE: libtorch\n",
            format!(
                "      variant:\n        ignore_keys:\n          - {}\n      script:\n        env:\n          MINI_BUILD_STAGE: libtorch\n",
                q(&x)
            ),
        )]);
        assert!(has(&lazy(&r)["build"]["variant"]["ignore_keys"], &x));
    }
}

#[test]
fn injection_in_ignore_run_exports_by_name_stays_one_string() {
    for x in SUFFIXES.map(|s| format!("libfoo{s}")) {
        let r = patched_with(&[(
            "          - libmagma_sparse\n    tests:",
            format!(
                "          - libmagma_sparse\n          - {}\n    tests:",
                q(&x)
            ),
        )]);
        assert!(has(
            &lazy(&r)["requirements"]["ignore_run_exports"]["by_name"],
            &x
        ));
    }
}

#[test]
fn injection_in_host_requirements_stays_one_string() {
    for x in SUFFIXES.map(|s| format!("cuda-version{s}")) {
        let r = patched_with(&[(
            "      host:\n        - if: cuda_compiler_version",
            format!(
                "      host:\n        - {}\n        - if: cuda_compiler_version",
                q(&x)
            ),
        )]);
        assert!(has(&lazy(&r)["requirements"]["host"], &x));
    }
}

#[test]
fn injection_in_compiler_requirements_stays_one_string() {
    for x in SUFFIXES.map(|s| format!("${{{{ compiler('cxx') }}}}{s}")) {
        let r = patched_with(&[(
            "        - ${{ compiler('cxx') }}\n      host:",
            format!(
                "        - ${{{{ compiler('cxx') }}}}\n        - {}\n      host:",
                q(&x)
            ),
        )]);
        assert!(has(&lazy(&r)["requirements"]["build"], &x));
    }
}

#[test]
fn injection_in_script_env_values_stays_one_string() {
    for x in SUFFIXES.map(|s| format!("value{s}")) {
        let r = patched_with(&[(
            "          MINI_BUILD_STAGE: libtorch\n",
            format!(
                "          MINI_BUILD_STAGE: libtorch\n          EXTRA: {}\n          JOBS: 4\n",
                q(&x)
            ),
        )]);
        let env = &lazy(&r)["build"]["script"]["env"];
        assert_eq!(env["EXTRA"].as_str(), Some(x.as_str()));
        assert_eq!(
            env["JOBS"].as_u64(),
            Some(4),
            "a number is kept, not dropped"
        );
    }
}

#[test]
fn injection_in_script_env_keys_stays_one_string() {
    for x in SUFFIXES.map(|s| format!("KEY{s}")) {
        let r = patched_with(&[(
            "          MINI_BUILD_STAGE: libtorch\n",
            format!(
                "          MINI_BUILD_STAGE: libtorch\n          {}: v\n",
                q(&x)
            ),
        )]);
        assert_eq!(
            lazy(&r)["build"]["script"]["env"][x.as_str()].as_str(),
            Some("v")
        );
    }
}

#[test]
fn injection_in_the_build_string_stays_one_string() {
    for keys in SUFFIXES.map(|s| format!("${{{{ flavor }}}}{s}")) {
        let r = patched_with(&[(
            "      string: ${{ flavor }}_${{ hash }}_${{ build_number }}\n      script:\n        env:\n          MINI_BUILD_STAGE: libtorch\n",
            format!(
                "      string: {}\n      script:\n        env:\n          MINI_BUILD_STAGE: libtorch\n",
                q(&format!("{keys}_${{{{ hash }}}}_${{{{ build_number }}}}"))
            ),
        )]);
        let l = lazy(&r);
        assert_eq!(
            l["build"]["string"].as_str(),
            Some(
                format!("{keys}_${{{{ linalg_variant }}}}_${{{{ hash }}}}_${{{{ build_number }}}}")
                    .as_str()
            )
        );
        let spec = format!("libtorch ==${{{{ version }}}} {keys}_*_${{{{ build_number }}}}");
        assert!(has(&l["requirements"]["run_constraints"], &spec), "{spec}");
    }
}

#[test]
fn injection_in_the_test_condition_stays_one_string() {
    let plain = r#"cuda_compiler_version != "None" and linux"#;
    for cond in SUFFIXES.map(|s| format!("{plain}{s}")) {
        let r = patched_with(&[(
            &format!("            - if: {plain}\n"),
            format!("            - if: {}\n", q(&cond)),
        )]);
        assert_eq!(
            lazy(&r)["build"]["skip"].as_str(),
            Some(format!("${{{{ not ({cond}) }}}}").as_str())
        );
        let run = &output(&r, "libtorch")["requirements"]["run"];
        assert!(
            run.as_sequence()
                .unwrap()
                .iter()
                .any(|e| e["if"].as_str() == Some(cond.as_str())),
            "{run:?}"
        );
    }
}

// --- linear time, bounded memory, the diff -----------------------------------------------------

/// `diff` applied with patch(1) to a fresh copy prepared by `prepare` gives exactly the files
/// `--write` gives on another such copy, and the same executable bits.
fn diff_is_the_write(prepare: impl Fn(&Path), diff: &str) {
    let (by_patch, by_write) = (mini(), mini());
    prepare(by_patch.path());
    prepare(by_write.path());
    let mut p = Command::new("patch")
        .args(["-p1", "-s", "-d", s(by_patch.path())])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(p.stdin.as_mut().unwrap(), diff.as_bytes()).unwrap();
    assert!(p.wait().unwrap().success(), "patch -p1 applies the diff");
    let w = feedstock(by_write.path(), &["--write"]);
    assert_eq!(w.status.code(), Some(0), "{}", stderr(&w));
    assert_eq!(stdout(&w), diff, "--write prints the same diff");
    for f in FILES {
        let (a, b) = (by_patch.path().join(f), by_write.path().join(f));
        assert_eq!(
            std::fs::read(&a).unwrap(),
            std::fs::read(&b).unwrap(),
            "{f}"
        );
        let exec = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o111 != 0;
        assert_eq!(exec(&a), exec(&b), "{f}: the executable bit");
    }
}

#[test]
fn a_40000_line_conda_build_config_diffs_in_one_pass() {
    let long = |dir: &Path| {
        let mut t: String = (0..40_000).map(|i| format!("# comment {i}\n")).collect();
        t.push_str("blas_impl:\n  - generic\n");
        std::fs::write(dir.join(CBC), t).unwrap();
    };
    let d = mini();
    long(d.path());
    let o = feedstock(d.path(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let diff = stdout(&o);
    let start = diff.find(&format!("diff --git a/{CBC}")).unwrap();
    // Up to the next file's part (the has_magma source patch follows).
    let end = diff[start + 1..]
        .find("\ndiff --git ")
        .map_or(diff.len(), |i| start + 2 + i);
    let cbc = &diff[start..end];
    let lines: Vec<&str> = cbc.lines().collect();
    assert_eq!(lines[1], format!("--- a/{CBC}"));
    // One hunk: the last three lines as context, the six added lines after them.
    assert_eq!(lines[3], "@@ -40000,3 +40000,9 @@", "{cbc}");
    assert_eq!(
        lines[4..7],
        ["# comment 39999", "blas_impl:", "  - generic"].map(|l| format!(" {l}"))
    );
    assert_eq!(lines.len(), 13, "{cbc}");
    assert!(lines[7..].iter().all(|l| l.starts_with('+')), "{cbc}");
    assert!(lines.contains(&"+linalg_variant:"), "{cbc}");
    diff_is_the_write(long, &diff);
}

#[test]
fn a_recipe_nested_deeper_than_the_limit_is_refused_before_parsing() {
    let deep = 100_000;
    let stairs: String = (0..200)
        .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
        .collect();
    for nested in [
        format!("deep: {}{}\n", "[".repeat(deep), "]".repeat(deep)),
        format!("deep: {}1{}\n", "{a: ".repeat(deep), "}".repeat(deep)),
        format!("deep:\n  {}x\n", "- ".repeat(deep)),
        format!("deep:\n{stairs}"),
    ] {
        let d = mini();
        let p = d.path().join("recipe/recipe.yaml");
        let t = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, t + &nested).unwrap();
        refused_untouched(
            d.path(),
            d.path(),
            "recipe/recipe.yaml",
            "YAML nested more than 64 levels deep; refusing to parse it",
        );
    }
}

#[test]
fn the_diff_shows_a_new_file_and_its_mode_as_git_does() {
    let no_cbc = |dir: &Path| std::fs::remove_file(dir.join(CBC)).unwrap();
    let d = mini();
    no_cbc(d.path());
    let o = feedstock(d.path(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let diff = stdout(&o);
    assert!(
        diff.contains(&format!(
            "diff --git a/{CBC} b/{CBC}\nnew file mode 100644\n--- /dev/null\n+++ b/{CBC}\n@@ -0,0 +1,"
        )),
        "{diff}"
    );
    assert!(
        diff.contains("diff --git a/recipe/build.sh b/recipe/build.sh\n--- a/recipe/build.sh\n"),
        "build.sh keeps its mode: no mode lines\n{diff}"
    );
    // Two new files: conda_build_config.yaml and the has_magma source patch.
    assert!(
        diff.contains(
            "+++ b/recipe/patches/0001-splitpkg-hasMAGMA-answers-from-installed-files.patch\n"
        ) && diff.contains("new file mode 100644\n--- /dev/null\n+++ b/recipe/patches/"),
        "{diff}"
    );
    assert_eq!(diff.matches("mode ").count(), 2, "{diff}");
    diff_is_the_write(no_cbc, &diff);
}
