//! Recipe generation: render the split (see [`crate::recipe::split`]) into conda-build `meta.yaml` and
//! rattler-build `recipe.yaml` (v1) outputs, with their variant files, install scripts, the one-job
//! build snippet, the symbol contract for `verify-variant`, and the has_magma note when the plan
//! found payload-aware glue in core files.
//!
//! Templates live in `templates/` and are compiled into the binary. They use `<< >>`/`<% %>` so the
//! recipes' own Jinja (`${{ }}`, `{{ }}`) passes through untouched. Output is deterministic: no
//! timestamps, no absolute paths.

use crate::error::Context;
use std::path::{Path, PathBuf};

use minijinja::{Environment, context, syntax::SyntaxConfig};
use serde::Serialize;

use crate::analysis::contract::ContractFile;
use crate::analysis::plan::Plan;
use crate::error::{Error, Result};
use crate::recipe::split::Split;

const TEMPLATES: &[(&str, &str)] = &[
    (
        "recipe.yaml",
        include_str!("../../templates/recipe.yaml.j2"),
    ),
    (
        "variants.yaml",
        include_str!("../../templates/variants.yaml.j2"),
    ),
    ("meta.yaml", include_str!("../../templates/meta.yaml.j2")),
    (
        "conda_build_config.yaml",
        include_str!("../../templates/conda_build_config.yaml.j2"),
    ),
    (
        "install_core.sh",
        include_str!("../../templates/install_core.sh.j2"),
    ),
    (
        "install_lazy.sh",
        include_str!("../../templates/install_lazy.sh.j2"),
    ),
    (
        "build-variants.sh",
        include_str!("../../templates/build-variants.sh.j2"),
    ),
    (
        "HAS_MAGMA.md",
        include_str!("../../templates/HAS_MAGMA.md.j2"),
    ),
    (
        "feedstock-output.yaml",
        include_str!("../../templates/feedstock-output.yaml.j2"),
    ),
    (
        "feedstock-stage.sh",
        include_str!("../../templates/feedstock-stage.sh.j2"),
    ),
];

/// One recipe format `emit` writes (`--format` picks one or both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecipeFormat {
    /// A rattler-build v1 recipe (`recipe.yaml`).
    RattlerBuild,
    /// A conda-build recipe (`meta.yaml`).
    CondaBuild,
}

impl RecipeFormat {
    /// The output subdirectory the format's recipe is written in (`rattler-build`, `conda-build`).
    pub fn dir(self) -> &'static str {
        match self {
            RecipeFormat::RattlerBuild => "rattler-build",
            RecipeFormat::CondaBuild => "conda-build",
        }
    }
}

/// One generated file, relative to the output directory.
#[derive(Debug, Clone)]
pub struct Generated {
    /// Path of the file, relative to the output directory.
    pub path: PathBuf,
    /// Its content.
    pub text: String,
    /// Whether to write it executable (scripts).
    pub executable: bool,
}

/// What `emit` generates: the files and what the maintainer must read.
pub struct Emitted {
    /// The generated files, one set per recipe format asked for.
    pub files: Vec<Generated>,
    /// Things the maintainer must read (printed on stderr by the CLI).
    pub warnings: Vec<String>,
}

/// The requirement the emitted recipes' tests put on splitpkg (`splitpkg verify-variant` reads the
/// contract.json this release wrote): this release up to the next breaking one, which before 1.0 is
/// the next minor (CHANGELOG.md). The package is recipe/recipe.yaml's.
pub fn splitpkg_requirement() -> String {
    let part = |v: &str| v.parse::<u64>().unwrap_or(0);
    let (major, minor) = (
        part(env!("CARGO_PKG_VERSION_MAJOR")),
        part(env!("CARGO_PKG_VERSION_MINOR")),
    );
    let lower = format!("{major}.{minor}.{}", env!("CARGO_PKG_VERSION_PATCH"));
    let upper = if major == 0 {
        format!("0.{}", minor + 1)
    } else {
        (major + 1).to_string()
    };
    format!("splitpkg >={lower},<{upper}")
}

/// The template environment: `<< >>`/`<% %>` delimiters, the quoting filters, every template of
/// `templates/` (emit's and feedstock's).
pub(crate) fn environment() -> Result<Environment<'static>> {
    let mut env = Environment::new();
    env.set_syntax(
        SyntaxConfig::builder()
            .block_delimiters("<%", "%>")
            .variable_delimiters("<<", ">>")
            .comment_delimiters("<#", "#>")
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(true)
            .build()
            .failed_at("template syntax")?,
    );
    env.add_filter("basename", |s: String| {
        crate::input::Tree::file_name(&s).to_string()
    });
    // Tree paths are checked by `split::check_recipe_path` and then quoted for where they land;
    // for ordinary paths every filter is the identity, so typical recipes read as before.
    env.add_filter("dq", |s: String| quote::shell_double(&s));
    env.add_filter("yq", |s: String| quote::yaml_double(&s));
    env.add_filter("yline", |s: String| quote::yaml_item(&s));
    env.add_filter("glob", |s: String| quote::glob_literal(&s));
    for (name, text) in TEMPLATES {
        env.add_template(name, text)
            .failed_at(format_args!("template {name}"))?;
    }

    Ok(env)
}

/// Render the recipes. `source` and `command` go into the generated headers; keep them free of
/// machine-specific paths so committed recipes do not drift between machines.
pub fn render(
    plan: &Plan,
    split: &Split,
    formats: &[RecipeFormat],
    stage: &str,
    source: &str,
    command: &str,
) -> Result<Emitted> {
    render_with(plan, split, formats, stage, source, command, None)
}

/// [`render`], with `build-variants.sh` ending in the `.note.dlopen` step when `note` is given
/// (`emit --dlopen-note`; see [`crate::recipe::note`]).
pub fn render_with(
    plan: &Plan,
    split: &Split,
    formats: &[RecipeFormat],
    stage: &str,
    source: &str,
    command: &str,
    note: Option<&crate::recipe::note::NoteStep>,
) -> Result<Emitted> {
    let env = environment()?;
    let recipe = Recipe::new(plan, split)?;
    let ctx = recipe.context(stage, source, command, note);
    let render = |name: &str| -> Result<String> {
        let mut text = env
            .get_template(name)
            .and_then(|t| t.render(&ctx))
            .failed_at(format_args!("rendering {name}"))?;
        // trim_blocks eats the newline after a closing tag at the end of a template.
        if !text.ends_with('\n') {
            text.push('\n');
        }
        Ok(text)
    };
    let files = recipe.files(formats, render)?;
    let mut warnings = Vec::new();
    if split.has_glue {
        warnings.push(format!(
            "{} state is compiled into core files: with the {} variant, torch.cuda.has_magma still reports True. See HAS_MAGMA.md next to the recipe.",
            recipe.with.to_uppercase(),
            recipe.without
        ));
    }
    Ok(Emitted { files, warnings })
}

/// What one render derives from the plan and the split, beyond the split's own fields: the
/// variant names, the checked core paths, the contract files and their names.
struct Recipe<'a> {
    plan: &'a Plan,
    split: &'a Split,
    /// The variant with the payload, and the slim one.
    with: String,
    without: String,
    /// The file name of the (first) lazy library.
    lazy_name: String,
    /// Files whose presence shows the core output is whole: the loaders of the lazy library.
    core_checks: Vec<String>,
    contracts: Vec<ContractFile>,
    contract_names: Vec<String>,
}

impl<'a> Recipe<'a> {
    fn new(plan: &'a Plan, split: &'a Split) -> Result<Self> {
        let with = split.variant_with_payload(true)?.name.clone();
        let without = split.variant_with_payload(false)?.name.clone();
        let core_checks = Self::core_checks(plan, split)?;
        let lazy_name = split
            .lazy_files
            .first()
            .map(|f| crate::input::Tree::file_name(f).to_string())
            .unwrap_or_default();
        // Several lazy libraries (one shared lazy output): each has its own contract file and target.
        let contracts = ContractFile::each(plan);
        if contracts.is_empty() {
            return Err(Error::Usage("the plan has no lazy library".into()));
        }
        let several = contracts.len() > 1;
        let contract_names = contracts
            .iter()
            .map(|c| contract_file(c, several))
            .collect();
        Ok(Recipe {
            plan,
            split,
            with,
            without,
            lazy_name,
            core_checks,
            contracts,
            contract_names,
        })
    }

    /// The loaders of the lazy libraries, as installed, each checked for the recipe contexts.
    fn core_checks(plan: &Plan, split: &Split) -> Result<Vec<String>> {
        let mut core_checks: Vec<String> = plan
            .all_lazy()
            .iter()
            .flat_map(|l| l.loaded_by.iter().map(|s| split.install_path(&s.from)))
            .collect();
        core_checks.sort();
        core_checks.dedup();
        for c in &core_checks {
            crate::recipe::split::check_recipe_path(c).map_err(|why| {
                Error::bad(
                    format!("{}:{c}", plan.input.path),
                    format!("cannot go into a generated recipe: {why}"),
                )
            })?;
        }
        Ok(core_checks)
    }

    fn several(&self) -> bool {
        self.contracts.len() > 1
    }

    /// Shell words in build-variants.sh: a target is named after a file of the tree.
    fn cmake_target(&self) -> String {
        let target_of = |name: &str| {
            name.trim_start_matches("lib")
                .split(".so")
                .next()
                .unwrap_or_default()
                .to_string()
        };
        if self.several() {
            self.contracts
                .iter()
                .map(|c| quote::shell_word(&target_of(&c.library)))
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            quote::shell_word(&target_of(&self.lazy_name))
        }
    }

    /// What `build-variants.sh` verifies: each lazy library against its contract file.
    fn verify(&self) -> Vec<serde_json::Value> {
        if self.several() {
            self.plan
                .lazy_libraries
                .iter()
                .zip(&self.contract_names)
                .map(|(l, contract)| {
                    // A library without the payload in either build is checked as the slim variant.
                    let fixed = l
                        .contract
                        .as_ref()
                        .and_then(|c| c.carries_payload)
                        .is_some_and(|carries| !carries)
                        .then_some(&self.without);
                    serde_json::json!({"file": l.path, "contract": contract, "fixed": fixed})
                })
                .collect()
        } else {
            self.split
                .lazy_files
                .iter()
                .map(|f| serde_json::json!({"file": f, "contract": "contract.json"}))
                .collect()
        }
    }

    /// Everything the templates see.
    fn context(
        &self,
        stage: &str,
        source: &str,
        command: &str,
        note: Option<&crate::recipe::note::NoteStep>,
    ) -> minijinja::Value {
        let (plan, split, o) = (self.plan, self.split, &self.split.options);
        // Header comments: conda-build renders meta.yaml as Jinja and reads `# [...]` as a selector
        // even in comments, so the input path and command line are made inert there.
        let source = &quote::comment(source);
        let command = &quote::comment(command);
        let key_prefix = if o.build_keys.is_empty() {
            String::new()
        } else {
            format!("{}_", o.build_keys)
        };
        let lazy_globs: Vec<String> = split
            .lazy_files
            .iter()
            .map(|f| split.install_path(f))
            .collect();
        let glue: Vec<&crate::analysis::verdict::Warning> = plan
            .warnings
            .iter()
            .filter(|w| !w.examples.is_empty())
            .collect();
        let (with, without) = (&self.with, &self.without);
        context! {
            tool_version => env!("CARGO_PKG_VERSION"),
            splitpkg_requirement => splitpkg_requirement(),
            source => source,
            command => command,
            core => o.core_name.as_str(),
            lazy => o.lazy_name.as_str(),
            lazy_library => self.lazy_name.as_str(),
            version => o.version.as_str(),
            build_number => o.build_number,
            build_keys => o.build_keys.as_str(),
            key_prefix => key_prefix.as_str(),
            key_prefix_cb => key_prefix.as_str(),
            key => o.variant_key.as_str(),
            variants => to_value(&split.variants),
            preferred => split.preferred().name.as_str(),
            non_preferred => split.non_preferred().name.as_str(),
            with => with.as_str(),
            without => without.as_str(),
            with_upper => with.to_uppercase(),
            track_feature => split.track_feature(),
            payload_static => split.payload_static,
            payload_packages => to_value(&o.payload_packages),
            forbid => to_value(&split.forbid_payload()),
            lazy_files => to_value(&split.lazy_files),
            lazy_globs => to_value(&lazy_globs),
            verify => to_value(&self.verify()),
            contracts => to_value(&self.contract_names),
            payload_globs => to_value(&split.payload_files.iter().map(|f| split.install_path(f)).collect::<Vec<_>>()),
            payload_files => to_value(&split.payload_files),
            core_checks => to_value(&self.core_checks),
            install_root => install_root(split),
            install_root_cb => install_root(split),
            stage => stage,
            cmake_target => self.cmake_target(),
            cuda_floor => to_value(&o.cuda_floor),
            cuda_floor_why => plan.device_code.as_ref().map(|d| d.why.clone()).unwrap_or_default(),
            has_glue => split.has_glue,
            glue => to_value(&glue),
            note_step => note.map(|n| crate::recipe::note::note_step(n, "$INSTALL").trim_end().to_string()).unwrap_or_default(),
        }
    }

    /// The files of each format, each rendered by `render` from its template; every format gets
    /// `build-variants.sh` and the contract files.
    fn files(
        &self,
        formats: &[RecipeFormat],
        render: impl Fn(&str) -> Result<String>,
    ) -> Result<Vec<Generated>> {
        let o = &self.split.options;
        let mut contract_texts = Vec::new();
        for (c, name) in self.contracts.iter().zip(&self.contract_names) {
            contract_texts.push((
                name.clone(),
                serde_json::to_string_pretty(c).failed_at("JSON")? + "\n",
            ));
        }
        let mut files = Vec::new();
        for &f in formats {
            let dir = Path::new(f.dir());
            let mut add = |name: &str, text: String, executable: bool| {
                files.push(Generated {
                    path: dir.join(name),
                    text,
                    executable,
                })
            };
            match f {
                RecipeFormat::RattlerBuild => {
                    add("recipe.yaml", render("recipe.yaml")?, false);
                    add("variants.yaml", render("variants.yaml")?, false);
                }
                RecipeFormat::CondaBuild => {
                    add("meta.yaml", render("meta.yaml")?, false);
                    add(
                        "conda_build_config.yaml",
                        render("conda_build_config.yaml")?,
                        false,
                    );
                    add(
                        &format!("install_{}.sh", o.core_name),
                        render("install_core.sh")?,
                        true,
                    );
                    add(
                        &format!("install_{}.sh", o.lazy_name),
                        render("install_lazy.sh")?,
                        true,
                    );
                }
            }
            add("build-variants.sh", render("build-variants.sh")?, true);
            for (name, text) in &contract_texts {
                add(name, text.clone(), false);
            }
            if self.split.has_glue {
                add("HAS_MAGMA.md", render("HAS_MAGMA.md")?, false);
            }
        }
        Ok(files)
    }
}

/// The name of a contract file next to the recipe: `contract.json`, or one per lazy library
/// named after it when there are several.
fn contract_file(c: &ContractFile, several: bool) -> String {
    if several {
        format!(
            "contract-{}.json",
            c.library.replace(
                |ch: char| !(ch.is_ascii_alphanumeric() || "._-".contains(ch)),
                "_"
            )
        )
    } else {
        "contract.json".to_string()
    }
}

/// Where the split's files are installed, as the install scripts name it.
fn install_root(split: &Split) -> String {
    if split.install_prefix.is_empty() {
        "$PREFIX".to_string()
    } else {
        format!("$PREFIX/{}", split.install_prefix.trim_end_matches('/'))
    }
}

/// Template values from serde types, through JSON (minijinja 3 takes plain values).
fn to_value<T: Serialize>(v: &T) -> minijinja::Value {
    template_value(serde_json::to_value(v).unwrap_or(serde_json::Value::Null))
}

/// A template value from JSON; the one conversion for every template (recipes and the report).
/// Integers stay integers (unsigned first, so sizes past `i64::MAX` too), other numbers are floats.
pub(crate) fn template_value(v: serde_json::Value) -> minijinja::Value {
    use minijinja::Value;
    match v {
        serde_json::Value::Null => Value::from(()),
        serde_json::Value::Bool(b) => Value::from(b),
        serde_json::Value::Number(n) => n
            .as_u64()
            .map(Value::from)
            .or_else(|| n.as_i64().map(Value::from))
            .unwrap_or_else(|| Value::from(n.as_f64().unwrap_or(0.0))),
        serde_json::Value::String(s) => Value::from(s),
        serde_json::Value::Array(a) => {
            Value::from(a.into_iter().map(template_value).collect::<Vec<_>>())
        }
        serde_json::Value::Object(o) => Value::from(
            o.into_iter()
                .map(|(k, v)| (k, template_value(v)))
                .collect::<std::collections::BTreeMap<String, Value>>(),
        ),
    }
}

/// Write every generated file atomically under `out`.
pub fn write(out: &Path, emitted: &Emitted) -> Result<()> {
    for g in &emitted.files {
        // Contract file names come from the plan's library names: the one rule for input paths.
        let rel = g.path.to_string_lossy();
        let path = crate::confine::join_inside(out, &rel).bad_at(out.display(), "not written")?;
        let mode = g.executable.then_some(0o755);
        crate::output::write_atomic_as(&path, g.text.as_bytes(), mode)?;
    }
    Ok(())
}

/// Quoting for the contexts a (checked) tree path reaches in generated files: the one sanitiser
/// ([`crate::sanitize`]), under the name the templates' filters use.
pub use crate::sanitize as quote;

/// A value copied from an input recipe into a YAML file splitpkg writes (`feedstock`), as one
/// scalar that reads back as exactly that string wherever it lands: a block list item, a mapping
/// value or a mapping key. serde_yaml's own rendering where that is one line (plain where YAML
/// allows it, quoted where the text would read as a number, a comment, a key, …), else
/// double-quoted with every character outside printable ASCII escaped, so a newline in the value
/// never becomes a line of the file. `None` when neither reads back unchanged: the caller refuses
/// the input rather than write YAML that means something else.
pub fn yaml_scalar(s: &str) -> Option<String> {
    let emitted = serde_yaml::to_string(s).ok()?;
    let line = emitted.strip_suffix('\n').unwrap_or(&emitted);
    [line.to_string(), yaml_escaped(s)]
        .into_iter()
        .filter(|c| !c.contains(['\n', '\r']))
        .find(|c| yaml_reads_back(c, s))
}

/// `s` double-quoted, only printable ASCII left as it is.
fn yaml_escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            c if u32::from(c) <= 0xFFFF => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push_str(&format!("\\U{:08X}", u32::from(c))),
        }
    }
    out.push('"');
    out
}

/// Whether `scalar` parses back as the one string `s` as a list item, a value and a key.
fn yaml_reads_back(scalar: &str, s: &str) -> bool {
    use serde_yaml::{Mapping, Value};
    let want = Value::String(s.to_string());
    let parse = |doc: String| serde_yaml::from_str::<Value>(&doc).ok();
    let item = parse(format!("- {scalar}\n- next\n"));
    let value = parse(format!("k: {scalar}\nnext: 1\n"));
    let key = parse(format!("{scalar}: v\n"));
    let mut as_key = Mapping::new();
    as_key.insert(want.clone(), Value::String("v".into()));
    item == Some(Value::Sequence(vec![
        want.clone(),
        Value::String("next".into()),
    ])) && value.as_ref().and_then(|v| v.get("k")) == Some(&want)
        && value.as_ref().and_then(Value::as_mapping).map(Mapping::len) == Some(2)
        && key == Some(Value::Mapping(as_key))
}

#[cfg(test)]
// Tests read back the files they wrote; the opener guards the tool, not its tests.
#[allow(clippy::disallowed_methods)]
mod tests {
    //! The quoting filters checked by reading their output back with the tool that reads each
    //! context (bash, a YAML parser, Jinja, bash pattern matching), and the render rules on the plan
    //! of a small gcc-built tree (see [`crate::analysis::testkit`]).
    use std::process::Command;

    use super::quote::*;
    use super::*;
    use crate::analysis::testkit::{LAZY, conda_prefix, loader};
    use crate::recipe::split::{SplitOptions, check_recipe_path, payload_version};

    /// Names that attack each context: shell expansion, quotes, YAML indicators and comments,
    /// glob metacharacters, and a few that are harmless but unusual.
    const HOSTILE: &[&str] = &[
        "lib/libmagma_$(touch PWNED).so",
        "lib/libmagma_`touch PWNED`.so",
        "lib/libmagma_${IFS}x.so",
        "lib/a\"b'c.so",
        "lib/a: b.so",
        "lib/a #b.so",
        "lib/trailing:",
        "lib/trailing ",
        "-leading-dash",
        "? question",
        "'quoted'",
        "\"double\"",
        "*star.so",
        "&anchor",
        "!tag",
        "|pipe",
        ">fold",
        "%percent",
        "@at",
        "`tick",
        "[flow]",
        "{flow}",
        ",comma",
        "lib/lib*?.so",
        "lib/lib[1-3].so",
        "lib/lib{a,b}.so",
        "lib/ünïcödé ✓.so",
        "lib/yes",
        "null",
        "~",
        "0x10",
        "1e3",
        "lib/a\\$b",
        "lib/x\ny.so",
        "lib/x\ty.so",
        "lib/x\u{85}y.so",
    ];

    fn bash(script: &str, dir: &Path) -> String {
        let o = Command::new("bash")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .output()
            .expect("run bash");
        assert!(
            o.status.success(),
            "bash: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }

    #[test]
    fn shell_double_reads_back_literally_and_runs_nothing() {
        let d = tempfile::tempdir().unwrap();
        let script: String = HOSTILE
            .iter()
            .map(|s| format!("printf '%s\\0' \"{}\"\n", shell_double(s)))
            .collect();
        let out = bash(&script, d.path());
        let back: Vec<&str> = out.split_terminator('\0').collect();
        assert_eq!(back, HOSTILE);
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            0,
            "a name ran as code"
        );
    }

    #[test]
    fn yaml_scalars_read_back_as_one_string() {
        let injected = [
            "a\ninjected: key",
            "x\n- item",
            "libmagma-devel #comment",
            "a: b",
            "'single' \"double\"",
            "line\u{2028}separator\u{85}next\u{feff}",
            "tab\tand\rcr",
            "${{ compiler('cuda') }}",
            "- dash",
            "? key",
            "*alias",
            "&anchor",
            "!!binary x",
            "123",
            "true",
            "null",
            "~",
            "",
            " padded ",
            "trailing:",
            "{flow: map}",
            "[flow]",
            "\u{1F600} ümlaut",
        ];
        for s in HOSTILE.iter().copied().chain(injected) {
            let y = yaml_scalar(s).unwrap_or_else(|| panic!("{s:?} has no scalar"));
            assert!(!y.contains('\n'), "{s:?} -> {y:?} on one line");
            let doc = format!("a:\n  - {y}\n  - {y}: {y}\nb: {y}\n");
            let back: serde_yaml::Value = serde_yaml::from_str(&doc).unwrap();
            assert_eq!(back["a"][0].as_str(), Some(s), "{doc}");
            assert_eq!(back["a"][1][s].as_str(), Some(s), "{doc}");
            assert_eq!(back["b"].as_str(), Some(s), "{doc}");
            assert_eq!(back.as_mapping().unwrap().len(), 2, "{doc}");
        }
        assert_eq!(
            yaml_scalar("${{ flavor }}_${{ hash }}").as_deref(),
            Some("${{ flavor }}_${{ hash }}"),
            "an ordinary value stays as the maintainer wrote it"
        );
    }

    #[test]
    fn yaml_quotes_read_back_literally() {
        // What check_recipe_path lets through (the filters are only ever given checked paths).
        let checked: Vec<&str> = HOSTILE
            .iter()
            .copied()
            .filter(|s| check_recipe_path(s).is_ok())
            .collect();
        let doc: String = checked
            .iter()
            .map(|s| format!("- \"{}\"\n- {}\n", yaml_double(s), yaml_item(s)))
            .collect();
        let back: Vec<String> = serde_yaml::from_str(&doc).unwrap_or_else(|e| panic!("{e}\n{doc}"));
        let want: Vec<&str> = checked.iter().flat_map(|s| [*s, *s]).collect();
        assert_eq!(back, want, "{doc}");
        // Plain where YAML reads the text back unchanged: recipes stay readable.
        for s in [
            "lib/libtorch_cuda_linalg.so",
            "test -f \"$PREFIX/lib/x.so\"",
            "a:b",
            "a#b",
        ] {
            assert_eq!(yaml_item(s), s);
        }
    }

    #[test]
    fn a_literal_glob_matches_its_own_name_only() {
        // bash pattern matching: every metacharacter of the name must match only itself.
        let d = tempfile::tempdir().unwrap();
        let siblings = |s: &str| -> Vec<String> {
            let mut v: Vec<String> = ["*", "?", "[", "]", "{", "}"]
                .iter()
                .filter(|m| s.contains(**m))
                .map(|m| s.replacen(m, "X", 1))
                .collect();
            v.push(format!("{s}x"));
            v
        };
        // The pattern comes from a variable: `[[ $s == $p ]]` matches against its value as a
        // pattern, with no further expansion.
        let mut script = String::from("shopt -u extglob\n");
        let test = |name: &str, glob: &str| {
            format!(
                "s=\"{}\" p=\"{}\"; [[ $s == $p ]] && printf 1 || printf 0\n",
                shell_double(name),
                shell_double(glob)
            )
        };
        for s in HOSTILE.iter().filter(|s| check_recipe_path(s).is_ok()) {
            let g = glob_literal(s);
            script.push_str(&test(s, &g));
            for other in siblings(s) {
                script.push_str(&test(&other, &g));
            }
        }
        let out = bash(&script, d.path());
        let mut expect = String::new();
        for s in HOSTILE.iter().filter(|s| check_recipe_path(s).is_ok()) {
            expect.push('1');
            expect.push_str(&"0".repeat(siblings(s).len()));
        }
        assert_eq!(out, expect);
    }

    #[test]
    fn comments_are_inert_for_jinja_and_selectors() {
        let env = minijinja::Environment::new();
        for s in HOSTILE.iter().copied().chain([
            "{{ 7*7 }}",
            "{% if x %}",
            "{# c #}",
            "# [win]",
            "a}}b{%c",
        ]) {
            let c = comment(s);
            assert!(
                !c.chars().any(|ch| ch.is_control() || "{}[]".contains(ch)),
                "{c:?}"
            );
            let line = format!("# {c}");
            assert_eq!(
                env.render_str(&line, ()).unwrap(),
                line,
                "Jinja changed {c:?}"
            );
            assert_eq!(
                c.chars().count(),
                s.chars().count(),
                "one character for one: the comment stays recognisable"
            );
        }
    }

    #[test]
    fn recipe_paths_are_refused_by_rule() {
        for ok in [
            "lib/libtorch_cuda_linalg.so",
            "torch/lib/libmagma.so.2",
            "lib/a b$c`d'e\"f: g.so",
            "lib/ünï.so",
            "a",
        ] {
            assert_eq!(check_recipe_path(ok), Ok(()), "{ok:?}");
        }
        for (bad, why) in [
            ("", "empty path"),
            ("/lib/x.so", "absolute path"),
            ("lib/../x.so", "'..' path component"),
            ("./x.so", "'.' or '..'"),
            ("lib//x.so", "empty,"),
            ("lib/", "empty,"),
            ("lib/x\ny.so", "control character '\\n'"),
            ("lib/x\u{85}y.so", "control character"),
            ("lib\\x.so", "backslash"),
            ("lib/x#y.so", "selectors"),
            ("lib/{{x", "Jinja delimiter \"{{\""),
            ("lib/{%x", "Jinja delimiter"),
            ("lib/x%}", "Jinja delimiter"),
            ("lib/x}}", "Jinja delimiter"),
        ] {
            let e = check_recipe_path(bad).expect_err(bad).to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    fn split_of(plan: &Plan) -> Split {
        let options = SplitOptions {
            core_name: "libtorch".into(),
            lazy_name: "libtorch-cuda-linalg".into(),
            version: "2.5.1".into(),
            build_number: 0,
            prefer: "magma".into(),
            variant_key: "linalg_variant".into(),
            payload_packages: vec!["libmagma".into()],
            payload_version: payload_version(plan),
            build_keys: "cuda126".into(),
            cuda_floor: None,
            external_depends: Vec::new(),
        };
        Split::from_plan(plan, options).unwrap()
    }

    const BOTH: &[RecipeFormat] = &[RecipeFormat::RattlerBuild, RecipeFormat::CondaBuild];

    #[test]
    fn render_writes_each_format_in_its_own_directory_with_the_contract() {
        let plan = conda_prefix().plan();
        let split = split_of(&plan);
        let out = render(&plan, &split, BOTH, "stage", "tree", "splitpkg emit tree").unwrap();
        let listed: Vec<(String, bool)> = out
            .files
            .iter()
            .map(|g| (g.path.display().to_string(), g.executable))
            .collect();
        let want: Vec<(String, bool)> = [
            ("rattler-build/recipe.yaml", false),
            ("rattler-build/variants.yaml", false),
            ("rattler-build/build-variants.sh", true),
            ("rattler-build/contract.json", false),
            ("conda-build/meta.yaml", false),
            ("conda-build/conda_build_config.yaml", false),
            ("conda-build/install_libtorch.sh", true),
            ("conda-build/install_libtorch-cuda-linalg.sh", true),
            ("conda-build/build-variants.sh", true),
            ("conda-build/contract.json", false),
        ]
        .iter()
        .map(|(p, x)| (p.to_string(), *x))
        .collect();
        assert_eq!(listed, want, "no glue in this tree: no HAS_MAGMA.md");
        assert!(out.warnings.is_empty());
        let contract: ContractFile = serde_json::from_str(&out.files[3].text).unwrap();
        assert_eq!(Some(contract.clone()), ContractFile::from_plan(&plan));
        assert_eq!(
            (
                contract.library.as_str(),
                contract.loader_lookups.as_slice()
            ),
            (LAZY, ["linalg_entry".to_string()].as_slice())
        );
        let recipe: serde_yaml::Value = serde_yaml::from_str(&out.files[0].text).unwrap();
        let packages: Vec<&str> = recipe["outputs"]
            .as_sequence()
            .unwrap()
            .iter()
            .filter_map(|o| o["package"]["name"].as_str())
            .collect();
        assert_eq!(
            packages,
            vec!["libtorch", "libtorch-cuda-linalg"],
            "{recipe:?}"
        );
        // Deterministic.
        let again = render(&plan, &split, BOTH, "stage", "tree", "splitpkg emit tree").unwrap();
        assert!(
            out.files
                .iter()
                .zip(&again.files)
                .all(|(a, b)| a.path == b.path && a.text == b.text)
        );
        // One format alone writes only its directory.
        let rb = render(
            &plan,
            &split,
            &[RecipeFormat::RattlerBuild],
            "stage",
            "tree",
            "c",
        )
        .unwrap();
        assert!(rb.files.iter().all(|g| g.path.starts_with("rattler-build")));
    }

    #[test]
    fn glue_in_the_core_brings_the_has_magma_note() {
        let mut s = conda_prefix();
        let glue = "void set_magma_init_fn(void (*fn)(void)) __asm__(\"_ZN2at4cuda6detail17set_magma_init_fnEPFvvE\");\n\
                    void set_magma_init_fn(void (*fn)(void)) { (void)fn; }\n";
        s.lib(
            "lib/libtorch_cuda.so",
            &format!(
                "{glue}{}",
                loader("torch_cuda_linalg_call", LAZY, "linalg_entry")
            ),
            &["lib/libtorch_cpu.so"],
        );
        let plan = s.plan();
        let split = split_of(&plan);
        assert!(split.has_glue);
        let out = render(&plan, &split, BOTH, "stage", "tree", "c").unwrap();
        let notes: Vec<String> = out
            .files
            .iter()
            .filter(|g| g.path.ends_with("HAS_MAGMA.md"))
            .map(|g| g.path.display().to_string())
            .collect();
        assert_eq!(
            notes,
            vec!["rattler-build/HAS_MAGMA.md", "conda-build/HAS_MAGMA.md"]
        );
        assert_eq!(out.warnings.len(), 1);
        assert!(
            out.warnings[0]
                .starts_with("MAGMA state is compiled into core files: with the nomagma variant"),
            "{}",
            out.warnings[0]
        );
    }

    #[test]
    fn hostile_names_reach_the_recipes_quoted_and_headers_stay_inert() {
        let mut s = conda_prefix();
        let evil = "lib/libmagma_$(touch PWNED)`x`'q\": b [c]*.so";
        std::fs::copy(s.tree().join("lib/libmagma_helper.so"), s.tree().join(evil)).unwrap();
        s.file("lib/unused.txt", b"");
        let plan = s.plan();
        let split = split_of(&plan);
        assert!(
            split.payload_files.iter().any(|f| f == evil),
            "{:?}",
            split.payload_files
        );
        let out = render(
            &plan,
            &split,
            BOTH,
            "stage",
            "in{{ 7*7 }}[win]\nput",
            "splitpkg emit {% x %} # [osx]",
        )
        .unwrap();
        // The rattler-build recipe parses, and the payload exclusion is the literal glob.
        let recipe: serde_yaml::Value = serde_yaml::from_str(&out.files[0].text).unwrap();
        let text = serde_json::to_string(&recipe).unwrap();
        assert!(
            text.contains(&serde_json::to_string(&glob_literal(evil)).unwrap()),
            "{text}"
        );
        // Header comments carry the source and command without Jinja or selectors.
        for g in &out.files {
            for bad in ["{{ 7*7 }}", "[win]", "{% x %}", "[osx]"] {
                assert!(!g.text.contains(bad), "{} contains {bad}", g.path.display());
            }
        }
        // A loader path that cannot be quoted everywhere is refused, naming it.
        let mut plan = plan;
        plan.lazy_library.as_mut().unwrap().loaded_by[0].from = "lib/x#y.so".into();
        let err = render(&plan, &split, BOTH, "stage", "tree", "c")
            .err()
            .expect("refused")
            .to_string();
        assert!(
            err.contains("lib/x#y.so") && err.contains("cannot go into a generated recipe"),
            "{err}"
        );
    }

    /// U+2028/U+2029 are not control characters, so `check_recipe_path` lets them through, but
    /// YAML 1.1 readers (libyaml behind serde_yaml, PyYAML behind conda-build) take them for line
    /// breaks: a plain item breaks the document, a quoted one is folded to a space. Fails today.
    #[test]
    #[ignore = "known gap: check_recipe_path accepts U+2028/U+2029, which YAML 1.1 reads as line breaks (reported to the lead)"]
    fn unicode_line_separators_are_refused_or_quoted() {
        for s in ["lib/x\u{2028}y.so", "lib/x\u{2029}- y.so"] {
            if check_recipe_path(s).is_err() {
                continue;
            }
            let doc = format!("- \"{}\"\n- {}\n", yaml_double(s), yaml_item(s));
            let back: Result<Vec<String>, _> = serde_yaml::from_str(&doc);
            assert_eq!(
                back.map_err(|e| e.to_string()),
                Ok(vec![s.to_string(), s.to_string()]),
                "{s:?}"
            );
        }
    }
}
