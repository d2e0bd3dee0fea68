//! The split as packages: names, versions, build strings, dependencies, constraints and the
//! preference between the two variants of the lazy library.
//!
//! This is the one place that decides these relations. `emit` renders them into recipe syntax for
//! conda-build and rattler-build; `pack` writes them into `info/index.json`; `solve` checks them with
//! a real solver. The relations, and the 2024 conda-forge workaround each one replaces:
//!
//! * The lazy library is its own output with one build per variant; the build string carries the
//!   variant and the other keys that shape the binary (`cuda130_magma_h…_0`, `cuda130_nomagma_h…_0`).
//! * Preference: the non-preferred variant is deprioritised with `track_features` (rattler-build v1:
//!   `down_prioritize_variant`), never with build-number offsets (conda-forge used +50 on magma
//!   *and* track_features on nomagma).
//! * nomagma forbids every payload package with `<0.0a0` constraints (conda-forge first wrote
//!   `magma <0.0a0` and had to fix it to `libmagma <0.0a0`).
//! * magma depends on the payload packages, pinned from the host environment.
//! * Versions are tied both ways: core depends on the lazy package at exactly its version and build
//!   keys (either variant), and the lazy package constrains core to the same (conda-forge tied only
//!   the version, one way).

use serde::{Deserialize, Serialize};

use crate::analysis::pipeline::{SplitFor, require_confined};
use crate::analysis::plan::{Plan, Role};
use crate::analysis::verdict::{PayloadForm, WarningKind};
use crate::error::{Error, Result};
use crate::input::TreeKind;

/// Options that shape the packages; defaults come from the plan where it knows better.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SplitOptions {
    /// Name of the core package (`pytorch`), everything but the lazy library and the payload.
    pub core_name: String,
    /// Name of the lazy library's package (`libtorch-cuda-linalg`), one build per variant.
    pub lazy_name: String,
    /// Version of every package of the split (the input package's).
    pub version: String,
    /// Build number of every package of the split.
    pub build_number: u64,
    /// The variant a plain install gets: `magma` (default) or `nomagma`.
    pub prefer: String,
    /// Variant key confined to the lazy output.
    pub variant_key: String,
    /// Packages that provide the payload (`libmagma`); forbidden in nomagma, required by magma
    /// when the payload is a separate library.
    pub payload_packages: Vec<String>,
    /// Pin of the payload packages for the magma variant, as a version range (concrete packages)
    /// and as `x.x` upper bound (recipes).
    pub payload_version: String,
    /// Keys that shape the binary, joined into the build-string prefix (`cuda130`).
    pub build_keys: String,
    /// Extra run dependency on the driver (`__cuda >=12.4`) when the device code needs it.
    pub cuda_floor: Option<String>,
    /// Run dependencies of the core package on libraries the tree NEEDs but does not contain
    /// (`cuda-cudart >=13.0`). A real build gets these from the run-exports of its host
    /// environment, so `emit` leaves them out; `pack` has no build environment and fills them from
    /// the stand-in manifest's `provides` (see [`crate::channel::standin`]).
    #[serde(default)]
    pub external_depends: Vec<String>,
}

/// One variant of the lazy library.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SplitVariant {
    /// The variant's name (`magma`, `nomagma`).
    pub name: String,
    /// Whether this variant's lazy library carries the payload.
    pub with_payload: bool,
    /// Whether a plain install gets this variant (the other is deprioritised with
    /// `track_features`).
    pub preferred: bool,
}

/// The concrete metadata of one package, as `info/index.json` will carry it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PackageModel {
    /// The package name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Its build string: a hash of what shapes the package and the build number, after the build-key
    /// prefix where there is one.
    pub build: String,
    /// Its build number.
    pub build_number: u64,
    /// Run dependencies, as match specs.
    pub depends: Vec<String>,
    /// Run constraints (`run_constrained`), as match specs.
    pub constrains: Vec<String>,
    /// `track_features`: set on the non-preferred variant so that solvers pick the other.
    pub track_features: Vec<String>,
    /// Which variant of the lazy library, for the lazy packages.
    pub variant: Option<SplitVariant>,
}

/// The split, derived from a confined plan.
#[derive(Debug, Clone)]
pub struct Split {
    /// The options the packages are shaped by.
    pub options: SplitOptions,
    /// The two variants of the lazy library: the one with the payload first.
    pub variants: Vec<SplitVariant>,
    /// The payload is linked into the lazy library (wheel layout) rather than a separate package.
    pub payload_static: bool,
    /// Tree-relative paths of the lazy output and of the payload output (which is not repackaged:
    /// it belongs to the payload packages).
    pub lazy_files: Vec<String>,
    /// Tree-relative paths of the payload output.
    pub payload_files: Vec<String>,
    /// Where the tree's paths land in an environment, relative to the prefix: empty for prefixes
    /// and conda packages, `lib/pythonX.Y/site-packages/` for wheels (their paths are relative to
    /// site-packages; X.Y from the wheel's CPython tag).
    pub install_prefix: String,
    /// The plan warns that a core file holds state describing the payload (`torch.cuda.has_magma`):
    /// the core differs between variants in that flag.
    pub has_glue: bool,
}

impl Split {
    /// The split of a confined plan: an error when the plan does not prove the payload confined, or
    /// the options contradict each other.
    pub fn from_plan(plan: &Plan, options: SplitOptions) -> Result<Split> {
        require_confined(plan, &plan.input.path, SplitFor::Recipes)?;
        let variants = variants_for(&plan.options.dep, &options.prefer)?;
        let files = |role| {
            plan.outputs
                .iter()
                .find(|o| o.role == role)
                .map(|o| o.files.clone())
                .unwrap_or_default()
        };
        let payload_static = plan
            .payload
            .files
            .iter()
            .any(|f| f.form == PayloadForm::Static);
        Ok(Split {
            variants,
            payload_static,
            lazy_files: files(Role::Lazy),
            payload_files: files(Role::Payload),
            install_prefix: if plan.input.kind == TreeKind::Wheel {
                site_packages_for(&plan.input.path)
            } else {
                String::new()
            },
            has_glue: plan
                .warnings
                .iter()
                .any(|w| w.kind() == WarningKind::CoreState),
            options,
        })
        .and_then(|split| {
            split.validate(&plan.input.path, &plan.options.dep)?;
            Ok(split)
        })
    }

    /// The split of a recipe that builds the library itself (`splitpkg feedstock`): no plan and no
    /// tree; `version` and `build_keys` are the recipe's own expressions (`${{ version }}`,
    /// `${{ flavor }}`), so only the names and the variant key are checked here.
    pub fn for_recipe(options: SplitOptions, dep: &str, lazy_library: &str) -> Result<Split> {
        let split = Split {
            variants: variants_for(dep, &options.prefer)?,
            payload_static: false,
            lazy_files: vec![format!("lib/{lazy_library}")],
            payload_files: Vec::new(),
            install_prefix: String::new(),
            has_glue: false,
            options,
        };
        split.validate_names(dep)?;
        for f in &split.lazy_files {
            check_recipe_path(f)
                .map_err(|why| Error::usage_source(format!("--lazy {lazy_library:?}"), why))?;
        }
        Ok(split)
    }

    /// Every name and path that reaches a generated recipe, script or package, checked before
    /// anything is written: package names, versions and keys by conda's rules (so they need no
    /// quoting, and `../` can never become a file name); tree paths by the rules in
    /// [`check_recipe_path`], after which `emit` quotes them for each context.
    fn validate(&self, input: &str, dep: &str) -> Result<()> {
        self.validate_names(dep)?;
        let o = &self.options;
        let version_ok = |v: &str| {
            v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'+' | b'!'))
                && !v.starts_with('.')
        };
        if o.version.is_empty() || !version_ok(&o.version) {
            return Err(Error::Usage(format!(
                "--version {:?}: a conda version is letters, digits, '_', '.', '+' and '!'",
                o.version
            )));
        }
        if !version_ok(&o.payload_version) {
            return Err(Error::bad(
                input,
                format!(
                    "payload version {:?} is not a conda version",
                    o.payload_version
                ),
            ));
        }
        if !o
            .build_keys
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.'))
        {
            return Err(Error::Usage(format!(
                "--build-keys {:?}: a build string is letters, digits, '_' and '.'",
                o.build_keys
            )));
        }
        for f in self.lazy_files.iter().chain(&self.payload_files) {
            check_recipe_path(f).map_err(|why| {
                Error::bad(
                    format!("{input}:{f}"),
                    format!("cannot go into a generated recipe: {why}"),
                )
            })?;
        }
        Ok(())
    }

    /// Package names, the variant key and the component name.
    fn validate_names(&self, dep: &str) -> Result<()> {
        let o = &self.options;
        let name_ok = |n: &str| {
            !n.is_empty()
                && n.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-' | b'.')
                })
                && !n.starts_with(['.', '-'])
        };
        for (flag, n) in [("--core-name", &o.core_name), ("--lazy-name", &o.lazy_name)] {
            if !name_ok(n) {
                return Err(Error::Usage(format!(
                    "{flag} {n:?}: a conda package name is lowercase letters, digits, '_', '-' and '.', not starting with '.' or '-'"
                )));
            }
        }
        for n in &o.payload_packages {
            if !name_ok(n) {
                return Err(Error::Usage(format!(
                    "--payload-package {n:?}: a conda package name is lowercase letters, digits, '_', '-' and '.', not starting with '.' or '-'"
                )));
            }
        }
        if o.core_name == o.lazy_name {
            return Err(Error::Usage(format!(
                "--core-name and --lazy-name are both {:?}",
                o.core_name
            )));
        }
        let ident = |k: &str| {
            k.bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        };
        if !ident(&o.variant_key) {
            return Err(Error::Usage(format!(
                "--variant-key {:?}: a variant key is an identifier (letters, digits, '_')",
                o.variant_key
            )));
        }
        if !ident(dep) {
            return Err(Error::Usage(format!(
                "--dep {dep:?}: the component name names the variants and must be an identifier"
            )));
        }
        Ok(())
    }

    /// The variant with (or without) the payload; every split has both.
    pub fn variant_with_payload(&self, payload: bool) -> Result<&SplitVariant> {
        self.variants
            .iter()
            .find(|v| v.with_payload == payload)
            .ok_or_else(|| Error::internal("a split without both variants"))
    }

    /// The variant a plain install gets.
    pub fn preferred(&self) -> &SplitVariant {
        self.variants
            .iter()
            .find(|v| v.preferred)
            .expect("one preferred variant")
    }

    /// The variant a plain install does not get (deprioritised by `track_features`).
    pub fn non_preferred(&self) -> &SplitVariant {
        self.variants
            .iter()
            .find(|v| !v.preferred)
            .expect("one non-preferred variant")
    }

    /// `cuda130_` or empty: the build-string prefix shared by every package of the split.
    fn key_prefix(&self) -> String {
        if self.options.build_keys.is_empty() {
            String::new()
        } else {
            format!("{}_", self.options.build_keys)
        }
    }

    /// A match spec for `name` at exactly this version and these build keys, any variant.
    pub fn same_build(&self, name: &str) -> String {
        match self.key_prefix().as_str() {
            "" => format!("{name} =={}", self.options.version),
            p => format!("{name} =={} {p}*", self.options.version),
        }
    }

    /// [`Split::same_build`] tied to one build number as well (`libtorch ==2.12.0
    /// cuda130_generic_*_201`): a package of the same version and keys from another build — a
    /// pre-split one that still ships the lazy library — does not match. `build_number` is an
    /// expression of the recipe (`${{ build_number }}`).
    pub fn same_build_number(&self, name: &str, build_number: &str) -> String {
        format!(
            "{name} =={} {}*_{build_number}",
            self.options.version,
            self.key_prefix()
        )
    }

    /// The lazy package's build string: build keys, variant, hash, build number
    /// (`cuda130_magma_h…_0`). Recipes pass their own expressions for the parts
    /// (`${{ flavor }}`, `${{ linalg_variant }}`, `${{ hash }}`, `${{ build_number }}`).
    pub fn lazy_build_string(&self, variant: &str, hash: &str, build_number: &str) -> String {
        format!("{}{variant}_{hash}_{build_number}", self.key_prefix())
    }

    /// `libmagma <0.0a0` for every payload package: what nomagma constrains.
    pub fn forbid_payload(&self) -> Vec<String> {
        self.options
            .payload_packages
            .iter()
            .map(|p| format!("{p} <0.0a0"))
            .collect()
    }

    /// The magma variant's payload dependencies, pinned to the host's minor version (what
    /// `pin_compatible(..., upper_bound='x.x')` renders to). None when MAGMA is linked in.
    pub fn payload_depends(&self) -> Vec<String> {
        if self.payload_static {
            return Vec::new();
        }
        if self.options.payload_version.is_empty() {
            return self.options.payload_packages.clone();
        }
        let (lo, hi) = minor_range(&self.options.payload_version);
        self.options
            .payload_packages
            .iter()
            .map(|p| format!("{p} >={lo},<{hi}"))
            .collect()
    }

    /// Track feature rattler-build writes for `down_prioritize_variant: 1` (`{name}-p-0`); the
    /// concrete packages use the same name so `pack` output matches what the recipe builds.
    pub fn track_feature(&self) -> String {
        format!("{}-p-0", self.options.lazy_name)
    }

    /// The packages of the split with concrete metadata. `hash` gives the `h…` part of a build
    /// string for a variant (`None` for core); callers that build real packages pass the hash of
    /// their content or configuration.
    pub fn packages(&self) -> Vec<PackageModel> {
        let o = &self.options;
        let mut core_depends = vec![self.same_build(&o.lazy_name)];
        if let Some(c) = &o.cuda_floor {
            core_depends.push(c.clone());
        }
        core_depends.extend(o.external_depends.iter().cloned());
        let mut out = vec![PackageModel {
            name: o.core_name.clone(),
            version: o.version.clone(),
            build: format!(
                "{}h{}_{}",
                self.key_prefix(),
                short_hash(&[&o.core_name, &o.build_keys]),
                o.build_number
            ),
            build_number: o.build_number,
            depends: core_depends,
            constrains: Vec::new(),
            track_features: Vec::new(),
            variant: None,
        }];
        for v in &self.variants {
            // The preference changes a variant's metadata (its track_features), and a file name
            // must never change meaning: a flipped preference is part of the hash. The default
            // (the variant with the payload preferred) adds nothing, so the names stay those
            // earlier packs and recipes used.
            let mut hashed = vec![o.lazy_name.as_str(), &o.build_keys, &o.variant_key, &v.name];
            if v.preferred != v.with_payload {
                hashed.push("preference-flipped");
            }
            let mut constrains = vec![self.same_build(&o.core_name)];
            let depends = if v.with_payload {
                self.payload_depends()
            } else {
                constrains.extend(self.forbid_payload());
                Vec::new()
            };
            out.push(PackageModel {
                name: o.lazy_name.clone(),
                version: o.version.clone(),
                build: self.lazy_build_string(
                    &v.name,
                    &format!("h{}", short_hash(&hashed)),
                    &o.build_number.to_string(),
                ),
                build_number: o.build_number,
                depends,
                constrains,
                track_features: if v.preferred {
                    Vec::new()
                } else {
                    vec![self.track_feature()]
                },
                variant: Some(v.clone()),
            });
        }
        out
    }

    /// Where a tree path is installed relative to the environment prefix.
    pub fn install_path(&self, tree_path: &str) -> String {
        format!("{}{tree_path}", self.install_prefix)
    }

    /// A payload package built from the payload files in the tree (`libmagma` from
    /// `lib/libmagma.so*`). It has no relations of its own: the lazy variants point at it.
    pub fn payload_package(&self, name: &str, version: &str) -> PackageModel {
        PackageModel {
            name: name.to_string(),
            version: version.to_string(),
            build: format!("h{}_0", short_hash(&[name, version])),
            build_number: 0,
            depends: Vec::new(),
            constrains: Vec::new(),
            track_features: Vec::new(),
            variant: None,
        }
    }

    /// Which payload package a payload file of the tree belongs to: the one whose name (with `-`
    /// read as `_`) equals the file's stem (`libmagma_sparse.so` → `libmagma_sparse`), else the
    /// first payload package (`libmagma.so.2.8.0` → `libmagma`). Symlinks go with their name.
    pub fn payload_package_for(&self, tree_path: &str) -> Option<&str> {
        let name = crate::input::Tree::file_name(tree_path);
        let stem = name.split(".so").next().unwrap_or(name);
        let packages = &self.options.payload_packages;
        packages
            .iter()
            .find(|p| p.replace('-', "_") == stem)
            .or_else(|| packages.first())
            .map(String::as_str)
    }

    /// The variant a build string of the lazy package names (`cuda130_nomagma_h…_0` → nomagma).
    pub fn variant_of_build(&self, build: &str) -> Option<&SplitVariant> {
        variant_in_build(&self.variants, build)
    }

    /// The build-string glob that selects `variant` of the lazy package (see [`variant_glob`]).
    pub fn variant_glob(&self, variant: &str) -> String {
        let names: Vec<&str> = self.variants.iter().map(|v| v.name.as_str()).collect();
        variant_glob(variant, &names, self.options.build_keys.is_empty())
    }
}

/// The two variants of a component (`magma` with it, `nomagma` without), `prefer` the one a plain
/// install gets.
fn variants_for(dep: &str, prefer: &str) -> Result<Vec<SplitVariant>> {
    let without = crate::analysis::payload::slim_variant(dep);
    let with = dep.to_string();
    if prefer != with && prefer != without {
        return Err(Error::Usage(format!(
            "--prefer must be {with} or {without}, not {prefer}"
        )));
    }
    Ok(vec![
        SplitVariant {
            name: with.clone(),
            with_payload: true,
            preferred: prefer == with,
        },
        SplitVariant {
            name: without.clone(),
            with_payload: false,
            preferred: prefer == without,
        },
    ])
}

/// A stand-in for a package the channel lacks (see [`crate::channel::standin`]): no relations, and a build
/// string that says what it is wherever the package is listed (`conda list`, `pixi list`).
pub fn standin_package(name: &str, version: &str) -> PackageModel {
    PackageModel {
        name: name.to_string(),
        version: version.to_string(),
        build: format!("standin_h{}_0", short_hash(&[name, version, "stand-in"])),
        build_number: 0,
        depends: Vec::new(),
        constrains: Vec::new(),
        track_features: Vec::new(),
        variant: None,
    }
}

/// The variant whose name is a run of whole `_`-separated tokens of `build` (so `nomagma` never
/// reads as `magma`, and a payload of several components, `cublas_cudnn`, spans two tokens).
pub fn variant_in_build<'a>(variants: &'a [SplitVariant], build: &str) -> Option<&'a SplitVariant> {
    let bounded = format!("_{build}_");
    variants
        .iter()
        .find(|v| bounded.contains(&format!("_{}_", v.name)))
}

/// The build-string glob that selects one variant of the lazy package: `*nomagma*` when no other
/// variant's name contains this one; otherwise bounded by `_` so that it cannot match the other
/// (`*_magma_*` after a key prefix such as `cuda130_`, `magma_*` without one).
pub fn variant_glob(variant: &str, others: &[&str], key_prefix_empty: bool) -> String {
    if !others.iter().any(|o| *o != variant && o.contains(variant)) {
        format!("*{variant}*")
    } else if key_prefix_empty {
        format!("{variant}_*")
    } else {
        format!("*_{variant}_*")
    }
}

/// `lib/python3.11/site-packages/` from a wheel named `…-cp311-…whl`; `lib/python3/site-packages/`
/// when the tag says nothing.
fn site_packages_for(wheel: &str) -> String {
    let name = crate::input::Tree::file_name(wheel);
    let tag = name.split('-').find_map(|p| {
        p.strip_prefix("cp")
            .filter(|d| d.len() >= 2 && d.bytes().all(|b| b.is_ascii_digit()))
    });
    match tag {
        Some(d) => format!("lib/python{}.{}/site-packages/", &d[..1], &d[1..]),
        None => "lib/python3/site-packages/".to_string(),
    }
}

/// Whether a tree path may be written into generated recipes and scripts, where `emit` quotes it
/// for the shell, YAML and glob contexts it lands in. Refused, because no quoting makes them
/// inert in every one of those contexts: empty, absolute, `.`/`..` components (an install script
/// would reach outside `$PREFIX`), control characters (a newline ends a YAML item or a shell
/// command), backslashes, `#` (conda-build reads `# [...]` anywhere on a line as a selector) and
/// Jinja delimiters (`{{`, `{%`, `{#`, and their closers: conda-build renders all of meta.yaml as
/// Jinja before reading it, rattler-build renders `${{ }}` in every string).
pub fn check_recipe_path(p: &str) -> std::result::Result<(), RecipePathError> {
    if p.is_empty() {
        return Err(RecipePathError::Empty);
    }
    if p.starts_with('/') {
        return Err(RecipePathError::Absolute);
    }
    if p.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err(RecipePathError::Component);
    }
    if let Some(c) = p.chars().find(|c| c.is_control()) {
        return Err(RecipePathError::Control(c));
    }
    if p.contains('\\') {
        return Err(RecipePathError::Backslash);
    }
    if p.contains('#') {
        return Err(RecipePathError::Selector);
    }
    if let Some(d) = ["{{", "{%", "{#", "}}", "%}", "#}"]
        .into_iter()
        .find(|d| p.contains(d))
    {
        return Err(RecipePathError::Jinja(d));
    }
    Ok(())
}

/// Why [`check_recipe_path`] refuses a tree path; callers name the path and the input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecipePathError {
    /// The path is empty.
    #[error("empty path")]
    Empty,
    /// The path is absolute.
    #[error("absolute path")]
    Absolute,
    /// A component is empty, `.` or `..`.
    #[error("empty, '.' or '..' path component")]
    Component,
    /// The path holds a control character.
    #[error("control character {0:?}")]
    Control(char),
    /// The path holds a backslash.
    #[error("backslash")]
    Backslash,
    /// The path holds `#`, which conda-build reads as a selector.
    #[error("'#' (conda-build selectors)")]
    Selector,
    /// The path holds a Jinja delimiter (`{{`, `{%`, `{#` or their closing forms), which the recipe
    /// would render.
    #[error("Jinja delimiter {0:?}")]
    Jinja(&'static str),
}

/// `2.8.0` → (`2.8.0`, `2.9.0a0`): what an `x.x` upper bound pins to.
pub fn minor_range(version: &str) -> (String, String) {
    let parts: Vec<&str> = version.split('.').collect();
    let major = parts.first().copied().unwrap_or("0");
    let minor: u64 = parts.get(1).and_then(|m| m.parse().ok()).unwrap_or(0);
    (version.to_string(), format!("{major}.{}.0a0", minor + 1))
}

/// Seven hex digits of SHA-256 over the parts: stable, short, like conda's `h` hashes.
pub fn short_hash(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    let d = h.finalize();
    d.iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect::<String>()[..7]
        .to_string()
}

/// The payload version, when a payload library in the plan names it (`libmagma.so.2.8.0` → `2.8.0`).
pub fn payload_version(plan: &Plan) -> String {
    plan.payload
        .files
        .iter()
        .filter(|f| f.form == PayloadForm::Library)
        .filter_map(|f| {
            let name = crate::input::Tree::file_name(&f.path);
            let v = name.split(".so.").nth(1)?;
            crate::version::parse(v)
                .is_some_and(|p| p.len() >= 2)
                .then(|| v.to_string())
        })
        // The highest version; of equal ones (`2.8`, `2.8.0`) the longer spelling.
        .max_by(|a, b| {
            crate::version::compare(a, b)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(a.len().cmp(&b.len()))
        })
        .unwrap_or_default()
}

/// The payload packages a split constrains when `--payload-package` is not given: for each payload
/// component (`--dep`), the conda packages `data/providers.json` names for its external libraries
/// (`libcudnn.so.9` → `cudnn`), or `lib<component>` when the tree holds its payload itself or the
/// table does not know the provider. In the order of the components, each once.
pub fn default_payload_packages(plan: &Plan) -> Vec<String> {
    let components: Vec<String> = if plan.options.deps.is_empty() {
        vec![plan.options.dep.clone()]
    } else {
        plan.options.deps.clone()
    };
    let mut out: Vec<String> = Vec::new();
    let mut add = |p: String| {
        if !out.contains(&p) {
            out.push(p);
        }
    };
    for c in &components {
        let spec = crate::analysis::payload::PayloadSpec::for_dep(c, &[]);
        let files: Vec<_> = plan
            .payload
            .files
            .iter()
            .filter(|f| spec.is_payload_library(crate::input::Tree::file_name(&f.path)))
            .collect();
        let known: Vec<String> = files
            .iter()
            .filter(|f| f.form == PayloadForm::External)
            .filter_map(|f| f.provider.as_ref().and_then(|p| p.conda.clone()))
            .collect();
        let in_tree_or_unknown = files.is_empty()
            || files.iter().any(|f| {
                f.form != PayloadForm::External
                    || f.provider.as_ref().is_none_or(|p| p.conda.is_none())
            });
        for k in known {
            add(k);
        }
        if in_tree_or_unknown {
            add(format!("lib{c}"));
        }
    }
    out
}

/// Defaults derived from a plan: version without its local part, build keys from the local part
/// (`2.11.0+cu130` → `cuda130`) or else from the CUDA runtime the tree NEEDs (`cuda13`).
pub fn default_version_and_keys(plan: &Plan) -> (Option<String>, String) {
    let version = plan.input.package.as_ref().map(|p| p.version.clone());
    let (base, local) = match &version {
        Some(v) => match v.split_once('+') {
            Some((b, l)) => (Some(b.to_string()), l.to_string()),
            None => (Some(v.clone()), String::new()),
        },
        None => (None, String::new()),
    };
    let keys = if let Some(cu) = local.strip_prefix("cu") {
        format!("cuda{cu}")
    } else if !local.is_empty() {
        local
    } else if let Some(major) = plan.input.cuda_runtime {
        format!("cuda{major}")
    } else {
        String::new()
    };
    (base, keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minor_pins() {
        assert_eq!(minor_range("2.8.0"), ("2.8.0".into(), "2.9.0a0".into()));
        assert_eq!(minor_range("2.10"), ("2.10".into(), "2.11.0a0".into()));
    }

    #[test]
    fn variant_tokens() {
        let vs = vec![
            SplitVariant {
                name: "magma".into(),
                with_payload: true,
                preferred: true,
            },
            SplitVariant {
                name: "nomagma".into(),
                with_payload: false,
                preferred: false,
            },
        ];
        assert_eq!(
            variant_in_build(&vs, "cuda130_nomagma_h1234567_0")
                .unwrap()
                .name,
            "nomagma"
        );
        assert_eq!(
            variant_in_build(&vs, "cuda130_magma_h1234567_0")
                .unwrap()
                .name,
            "magma"
        );
        assert!(variant_in_build(&vs, "cuda130_h1234567_0").is_none());
        let two = vec![
            SplitVariant {
                name: "cublas_cudnn".into(),
                with_payload: true,
                preferred: true,
            },
            SplitVariant {
                name: "nocublas_cudnn".into(),
                with_payload: false,
                preferred: false,
            },
        ];
        assert_eq!(
            variant_in_build(&two, "cuda13_nocublas_cudnn_h1234567_0")
                .unwrap()
                .name,
            "nocublas_cudnn"
        );
        assert_eq!(
            variant_in_build(&two, "cuda13_cublas_cudnn_h1234567_0")
                .unwrap()
                .name,
            "cublas_cudnn"
        );
        assert_eq!(
            variant_in_build(&two, "cublas_cudnn_h1234567_0")
                .unwrap()
                .name,
            "cublas_cudnn"
        );
        assert!(variant_in_build(&two, "cuda13_cublas_h1234567_0").is_none());
        assert_eq!(
            variant_glob("nomagma", &["magma", "nomagma"], false),
            "*nomagma*"
        );
        assert_eq!(
            variant_glob("magma", &["magma", "nomagma"], false),
            "*_magma_*"
        );
        assert_eq!(
            variant_glob("magma", &["magma", "nomagma"], true),
            "magma_*"
        );
    }

    #[test]
    fn hashes_are_stable() {
        assert_eq!(short_hash(&["a", "b"]), short_hash(&["a", "b"]));
        assert_ne!(short_hash(&["a", "b"]), short_hash(&["ab"]));
        assert_eq!(short_hash(&["x"]).len(), 7);
    }
}

#[cfg(test)]
mod rules {
    //! The package relations, checked with rattler's own match-spec semantics on plans of small
    //! gcc-built trees (see [`crate::analysis::testkit`]).
    use std::str::FromStr;

    use rattler_conda_types::package::BuildString;
    use rattler_conda_types::{
        MatchSpec, Matches, PackageName, PackageRecord, ParseStrictness, VersionWithSource,
    };

    use super::*;
    use crate::analysis::plan::Plan;
    use crate::analysis::testkit::{conda_layout, conda_prefix, wheel_layout};

    fn options(plan: &Plan, prefer: &str, keys: &str) -> SplitOptions {
        SplitOptions {
            core_name: "libtorch".into(),
            lazy_name: "libtorch-cuda-linalg".into(),
            version: "2.5.1".into(),
            build_number: 0,
            prefer: prefer.into(),
            variant_key: "linalg_variant".into(),
            payload_packages: vec!["libmagma".into()],
            payload_version: payload_version(plan),
            build_keys: keys.into(),
            cuda_floor: None,
            external_depends: Vec::new(),
        }
    }

    fn record(name: &str, version: &str, build: &str) -> PackageRecord {
        PackageRecord::new(
            PackageName::from_str(name).unwrap(),
            VersionWithSource::from_str(version).unwrap(),
            BuildString::from_str(build)
                .unwrap_or_else(|e| panic!("{build:?} is not a valid build string: {e}")),
        )
    }

    fn of(p: &PackageModel) -> PackageRecord {
        record(&p.name, &p.version, &p.build)
    }

    fn spec(s: &str) -> MatchSpec {
        MatchSpec::from_str(s, ParseStrictness::Strict)
            .unwrap_or_else(|e| panic!("{s:?} does not parse strictly: {e}"))
    }

    /// Whether any spec of `specs` names `r`'s package, and all of those match it.
    fn allows(specs: &[String], r: &PackageRecord) -> bool {
        specs
            .iter()
            .map(|s| spec(s))
            .filter(|m| m.name.matches(&r.name))
            .all(|m| m.matches(r))
    }

    #[test]
    fn versions_are_tied_both_ways_and_nomagma_forbids_the_payload() {
        let plan = conda_prefix().plan();
        let split = Split::from_plan(&plan, options(&plan, "magma", "cuda126")).unwrap();
        let pkgs = split.packages();
        let names: Vec<(&str, Option<&str>)> = pkgs
            .iter()
            .map(|p| (p.name.as_str(), p.variant.as_ref().map(|v| v.name.as_str())))
            .collect();
        assert_eq!(
            names,
            vec![
                ("libtorch", None),
                ("libtorch-cuda-linalg", Some("magma")),
                ("libtorch-cuda-linalg", Some("nomagma"))
            ]
        );
        let (core, magma, nomagma) = (&pkgs[0], &pkgs[1], &pkgs[2]);
        // Core depends on the lazy package at its version and keys, either variant.
        assert_eq!(core.depends.len(), 1);
        assert!(
            spec(&core.depends[0]).matches(&of(magma))
                && spec(&core.depends[0]).matches(&of(nomagma))
        );
        let skewed = record("libtorch-cuda-linalg", "2.5.2", &magma.build);
        let other_keys = record(
            "libtorch-cuda-linalg",
            "2.5.1",
            &magma.build.replace("cuda126_", "cuda118_"),
        );
        assert!(
            !spec(&core.depends[0]).matches(&skewed)
                && !spec(&core.depends[0]).matches(&other_keys)
        );
        // Each lazy build constrains core the same way back.
        for lazy in [magma, nomagma] {
            assert!(allows(&lazy.constrains, &of(core)), "{:?}", lazy.constrains);
            assert!(!allows(
                &lazy.constrains,
                &record("libtorch", "2.5.2", &core.build)
            ));
        }
        // magma needs libmagma from the host's minor series; nomagma allows no libmagma at all.
        let libmagma = |v: &str| of(&split.payload_package("libmagma", v));
        assert!(
            allows(&magma.depends, &libmagma("2.8.0"))
                && allows(&magma.depends, &libmagma("2.8.9"))
        );
        assert!(
            !allows(&magma.depends, &libmagma("2.9.0"))
                && !allows(&magma.depends, &libmagma("2.7.2"))
        );
        for v in ["0.0.1", "2.8.0", "99"] {
            assert!(
                !allows(&nomagma.constrains, &libmagma(v)),
                "nomagma must forbid libmagma {v}"
            );
            assert!(
                allows(&magma.constrains, &libmagma(v)),
                "magma does not constrain libmagma"
            );
        }
        assert!(nomagma.depends.is_empty());
        // Preference through track_features only: same build number, the other variant weighed down.
        assert_eq!((magma.build_number, nomagma.build_number), (0, 0));
        assert!(magma.track_features.is_empty());
        assert_eq!(nomagma.track_features, vec!["libtorch-cuda-linalg-p-0"]);
        let flipped = Split::from_plan(&plan, options(&plan, "nomagma", "cuda126"))
            .unwrap()
            .packages();
        assert_eq!(
            (
                flipped[1].track_features.len(),
                flipped[2].track_features.len()
            ),
            (1, 0)
        );
        // The preference changes track_features, so it changes the file name (a name never
        // changes meaning, issue 23); the default preference keeps the names it always had.
        assert_ne!(
            flipped[1].build, magma.build,
            "a flipped preference is part of the build hash"
        );
        assert_ne!(
            flipped[2].build, nomagma.build,
            "a flipped preference is part of the build hash"
        );
        assert_eq!(
            split.packages()[1].build,
            magma.build,
            "the default names do not move"
        );
    }

    #[test]
    fn variant_globs_select_exactly_their_own_build() {
        let plan = conda_prefix().plan();
        for keys in ["cuda126", ""] {
            let split = Split::from_plan(&plan, options(&plan, "magma", keys)).unwrap();
            let lazy: Vec<PackageModel> = split
                .packages()
                .into_iter()
                .filter(|p| p.variant.is_some())
                .collect();
            for v in &split.variants {
                let glob = split.variant_glob(&v.name);
                let m = spec(&format!("libtorch-cuda-linalg * {glob}"));
                let hits: Vec<&str> = lazy
                    .iter()
                    .filter(|p| m.matches(&of(p)))
                    .map(|p| p.variant.as_ref().unwrap().name.as_str())
                    .collect();
                assert_eq!(
                    hits,
                    vec![v.name.as_str()],
                    "keys {keys:?}: {glob} selects {hits:?}"
                );
                assert_eq!(
                    split.variant_of_build(
                        &lazy
                            .iter()
                            .find(|p| p.variant.as_ref() == Some(v))
                            .unwrap()
                            .build
                    ),
                    Some(v)
                );
            }
            for p in &lazy {
                assert!(
                    p.build.starts_with(&split.key_prefix()),
                    "{} starts with the keys",
                    p.build
                );
            }
        }
    }

    #[test]
    fn a_static_payload_is_no_dependency_and_a_wheel_installs_into_site_packages() {
        let mut plan = wheel_layout().plan();
        let split = Split::from_plan(&plan, options(&plan, "magma", "")).unwrap();
        assert!(split.payload_static);
        assert!(split.payload_depends().is_empty());
        assert!(
            split.packages()[1].depends.is_empty(),
            "MAGMA is inside the library"
        );
        assert_eq!(split.install_prefix, "", "a directory tree keeps its paths");
        assert_eq!(split.lazy_files, vec!["torch/lib/libtorch_cuda_linalg.so"]);
        assert!(split.payload_files.is_empty());
        plan.input.kind = TreeKind::Wheel;
        for (wheel, prefix) in [
            (
                "/x/torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl",
                "lib/python3.11/site-packages/",
            ),
            (
                "torch-1.10.0-cp39-cp39-manylinux1_x86_64.whl",
                "lib/python3.9/site-packages/",
            ),
            ("torch-0.1-py3-none-any.whl", "lib/python3/site-packages/"),
        ] {
            plan.input.path = wheel.into();
            let split = Split::from_plan(&plan, options(&plan, "magma", "")).unwrap();
            assert_eq!(
                split.install_path("torch/lib/x.so"),
                format!("{prefix}torch/lib/x.so")
            );
        }
    }

    #[test]
    fn only_a_confined_plan_with_sound_names_is_split() {
        let mut plan = conda_layout().plan();
        let err = Split::from_plan(&plan, options(&plan, "both", ""))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--prefer must be magma or nomagma, not both"),
            "{err}"
        );
        for (edit, flag) in [
            (
                &(|o: &mut SplitOptions| o.core_name = "../escape".into())
                    as &dyn Fn(&mut SplitOptions),
                "--core-name",
            ),
            (
                &|o: &mut SplitOptions| o.lazy_name = "Lib".into(),
                "--lazy-name",
            ),
            (
                &|o: &mut SplitOptions| o.lazy_name = "libtorch".into(),
                "--core-name and --lazy-name",
            ),
            (
                &|o: &mut SplitOptions| o.payload_packages = vec!["lib magma".into()],
                "--payload-package",
            ),
            (
                &|o: &mut SplitOptions| o.version = "1.0/../x".into(),
                "--version",
            ),
            (
                &|o: &mut SplitOptions| o.version = String::new(),
                "--version",
            ),
            (
                &|o: &mut SplitOptions| o.build_keys = "cu$(id)".into(),
                "--build-keys",
            ),
            (
                &|o: &mut SplitOptions| o.variant_key = "1key".into(),
                "--variant-key",
            ),
        ] {
            let mut o = options(&plan, "magma", "");
            edit(&mut o);
            let err = Split::from_plan(&plan, o).unwrap_err().to_string();
            assert!(err.contains(flag), "{flag}: {err}");
        }
        // A tree path no quoting makes inert everywhere is refused, naming it.
        let lazy = plan
            .outputs
            .iter_mut()
            .find(|o| o.role == Role::Lazy)
            .unwrap();
        lazy.files.push("lib/{{ x }}.so".into());
        let err = Split::from_plan(&plan, options(&plan, "magma", ""))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("lib/{{ x }}.so") && err.contains("Jinja delimiter"),
            "{err}"
        );
        // Not confined: no split at all.
        plan.verdict = crate::analysis::verdict::Verdict::NotConfined;
        let err = Split::from_plan(&plan, options(&plan, "magma", ""))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("is NOT CONFINED: there is no safe split"),
            "{err}"
        );
    }

    #[test]
    fn payload_version_and_package_come_from_the_file_names() {
        assert_eq!(
            payload_version(&conda_prefix().plan()),
            "2.8.0",
            "libmagma.so.2.8.0"
        );
        assert_eq!(
            payload_version(&conda_layout().plan()),
            "",
            "libmagma.so.2 names no minor version"
        );
        assert_eq!(
            payload_version(&wheel_layout().plan()),
            "",
            "no payload library"
        );
        let plan = conda_prefix().plan();
        let mut o = options(&plan, "magma", "");
        o.payload_packages = vec!["libmagma".into(), "libmagma-sparse".into()];
        let split = Split::from_plan(&plan, o).unwrap();
        for (path, pkg) in [
            ("lib/libmagma_sparse.so", "libmagma-sparse"),
            ("lib/libmagma.so.2.8.0", "libmagma"),
            ("lib/libmagma.so", "libmagma"),
            ("lib/libmagma_helper.so", "libmagma"),
        ] {
            assert_eq!(split.payload_package_for(path), Some(pkg), "{path}");
        }
        assert_eq!(
            split.forbid_payload(),
            vec!["libmagma <0.0a0", "libmagma-sparse <0.0a0"]
        );
    }

    #[test]
    fn default_version_and_keys_follow_the_package_then_the_cuda_runtime() {
        let mut plan = conda_layout().plan();
        let meta = |v: &str| {
            Some(crate::input::PackageMeta {
                name: "torch".into(),
                version: v.into(),
                build: None,
                subdir: None,
            })
        };
        for (version, runtime, want) in [
            (meta("2.11.0+cu130"), None, (Some("2.11.0"), "cuda130")),
            (meta("2.11.0+cu130"), Some(12), (Some("2.11.0"), "cuda130")),
            (meta("2.5.1+rocm6"), None, (Some("2.5.1"), "rocm6")),
            (meta("2.5.1"), Some(12), (Some("2.5.1"), "cuda12")),
            (None, Some(13), (None, "cuda13")),
            (None, None, (None, "")),
        ] {
            plan.input.package = version;
            plan.input.cuda_runtime = runtime;
            let (v, k) = default_version_and_keys(&plan);
            assert_eq!((v.as_deref(), k.as_str()), want);
        }
    }

    #[test]
    fn a_variant_glob_never_matches_the_other_variant() {
        // The variants are always `DEP` and `noDEP` (DEP an identifier): for any DEP, with and
        // without a key prefix, each glob selects its own build string and not the other, as
        // conda's build-string matching reads it, and the build string names its variant.
        for dep in ["magma", "cpu", "a", "no", "on", "o", "magma2"] {
            let variants = [
                SplitVariant {
                    name: dep.to_string(),
                    with_payload: true,
                    preferred: true,
                },
                SplitVariant {
                    name: format!("no{dep}"),
                    with_payload: false,
                    preferred: false,
                },
            ];
            let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
            for prefix in ["cuda130_", ""] {
                let builds: Vec<String> = names
                    .iter()
                    .map(|n| format!("{prefix}{n}_h1234567_0"))
                    .collect();
                for (i, v) in variants.iter().enumerate() {
                    let glob = variant_glob(&v.name, &names, prefix.is_empty());
                    let m = spec(&format!("x * {glob}"));
                    let hits: Vec<&str> = builds
                        .iter()
                        .filter(|b| m.matches(&record("x", "1", b)))
                        .map(String::as_str)
                        .collect();
                    assert_eq!(hits, vec![builds[i].as_str()], "{dep} {prefix:?}: {glob}");
                    assert_eq!(
                        variant_in_build(&variants, &builds[i]),
                        Some(v),
                        "{}",
                        builds[i]
                    );
                }
            }
        }
    }
}
