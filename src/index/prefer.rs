//! `index --prefer VARIANT`: one index per preference for the PEP 825 set.
//!
//! uv 0.13.9's variant mode has no choice of its own for a namespace with `static-properties` (no
//! option, setting or environment variable; provider plugins are never run): it takes a static
//! property's values as the ones the machine supports, in the order the index's `-variants.json`
//! lists them, and installs the variant whose value comes first. The preference is therefore the
//! index's: `--prefer nomagma` writes each `-variants.json` with `nomagma` first (the other values
//! in the publisher's order), and a user picks a preference by picking the index (`--index-url`,
//! `UV_DEFAULT_INDEX`, uv.toml). Everything here is judged before anything is written:
//!
//! - VARIANT must be a value of each set's one static property (`namespace :: feature`);
//! - the index must hold a VARIANT wheel for every platform the set's variant wheels are built
//!   for: a slim index without the slim wheel would give uv another variant without a word;
//! - every set already in the index must list the values as this run would: an index serves one
//!   preference. What a set was written with is read against the publisher's order, which every
//!   variant wheel's own `variant.json` carries.

use crate::error::Context;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use super::VARIANTS_SUFFIX;
use super::dist::{
    IndexedWheel, check_file_name, normalize, read_variant_json, variants_file_name,
};
use super::page::{ProjectPage, read_json};
use crate::error::{Error, Result};

/// A variant set's one static property: `namespace :: feature` and its values in the file's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticProperty {
    /// The property's namespace (`nvidia`).
    pub namespace: String,
    /// The feature within it (`cuda_version_lower_bound`).
    pub feature: String,
    /// Its values, in the order the file lists them (the first is preferred).
    pub values: Vec<String>,
}

impl StaticProperty {
    /// The one static property of a variant metadata document
    /// (`providers.NAMESPACE.static-properties.FEATURE`), or how many it has.
    pub fn of(doc: &Value) -> std::result::Result<StaticProperty, usize> {
        let mut all = Vec::new();
        for (namespace, provider) in doc
            .get("providers")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            for (feature, values) in provider
                .get("static-properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let values = values
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect();
                all.push(StaticProperty {
                    namespace: namespace.clone(),
                    feature: feature.clone(),
                    values,
                });
            }
        }
        if all.len() == 1 {
            Ok(all.remove(0))
        } else {
            Err(all.len())
        }
    }

    /// The values with `prefer` first, the others in their order.
    pub fn ordered(&self, prefer: Option<&str>) -> Vec<String> {
        let mut values = self.values.clone();
        if let Some(i) = prefer.and_then(|p| values.iter().position(|v| v == p)) {
            let v = values.remove(i);
            values.insert(0, v);
        }
        values
    }

    /// `other` is this property with its values in some order.
    fn same_but_order(&self, other: &StaticProperty) -> bool {
        let sorted = |v: &[String]| {
            let mut v = v.to_vec();
            v.sort();
            v
        };
        self.namespace == other.namespace
            && self.feature == other.feature
            && sorted(&self.values) == sorted(&other.values)
    }

    fn write(&self, doc: &mut Value, values: Vec<String>) {
        let escape = |s: &str| s.replace('~', "~0").replace('/', "~1");
        let at = format!(
            "/providers/{}/static-properties/{}",
            escape(&self.namespace),
            escape(&self.feature)
        );
        if let Some(slot) = doc.pointer_mut(&at) {
            *slot = Value::from(values);
        }
    }

    /// The labels of `doc` whose properties include `value` of this property.
    pub fn labels_with(&self, doc: &Value, value: &str) -> BTreeSet<String> {
        doc.get("variants")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(_, props)| {
                props
                    .get(&self.namespace)
                    .and_then(|f| f.get(&self.feature))
                    .and_then(Value::as_array)
                    .is_some_and(|vs| vs.iter().any(|v| v.as_str() == Some(value)))
            })
            .map(|(label, _)| label.clone())
            .collect()
    }

    fn name(&self) -> String {
        format!("{} :: {}", self.namespace, self.feature)
    }
}

/// `doc` (a set's metadata, its values in the publisher's order) with `prefer` listed first.
pub fn apply(doc: &mut Value, prefer: Option<&str>) {
    if let (Some(p), Ok(sp)) = (prefer, StaticProperty::of(doc)) {
        let values = sp.ordered(Some(p));
        sp.write(doc, values);
    }
}

/// `existing` (a `-variants.json` of the index) with its values in `reference`'s order when they
/// are the same values: the file as it was before a preference reordered it, to merge with the
/// wheels' own `variant.json`.
pub fn in_order_of(existing: &Value, reference: &Value) -> Value {
    let mut out = existing.clone();
    if let (Ok(a), Ok(b)) = (StaticProperty::of(existing), StaticProperty::of(reference))
        && a.same_but_order(&b)
    {
        a.write(&mut out, b.values);
    }
    out
}

/// The refusals of `--prefer` (and of a run without it on an index written with one), judged before
/// anything is written. `wheels` are the run's wheels.
pub fn check(out: &Path, wheels: &[IndexedWheel], prefer: Option<&str>) -> Result<()> {
    let mut given: BTreeMap<(String, String), Vec<&IndexedWheel>> = BTreeMap::new();
    for w in wheels.iter().filter(|w| w.variant.is_some()) {
        given
            .entry((w.project.clone(), variants_file_name(w)))
            .or_default()
            .push(w);
    }
    let on_disk = sets_on_disk(out)?;
    if let Some(p) = prefer
        && given.is_empty()
        && on_disk.is_empty()
    {
        return Err(Error::Usage(format!(
            "--prefer {p}: no PEP 825 variant set among the wheels given or in {}; --prefer orders a set's -variants.json (the local-label set is chosen by its version labels: pin ==VERSION+0.{p})",
            out.display()
        )));
    }
    for ((project, file), members) in &given {
        let dir = out.join(project);
        let page = page_files(&dir)?;
        let path = dir.join(file);
        let existing: Option<Value> = if is_plain_file(&path) {
            Some(read_json(&path)?)
        } else {
            None
        };
        let Some((_, publisher)) = &members[0].variant else {
            continue;
        };
        judge(&path, publisher, existing.as_ref(), prefer)?;
        if let Some(p) = prefer {
            holds_preferred(&dir, file, members, existing.as_ref(), &page, p)?;
        }
    }
    for (project, file, page) in &on_disk {
        if given.contains_key(&(project.clone(), file.clone())) {
            continue;
        }
        let dir = out.join(project);
        let path = dir.join(file);
        let existing: Value = read_json(&path)?;
        // The publisher's order: the `variant.json` of one of the set's variant wheels.
        let prefix = format!("{}-", file.trim_end_matches(VARIANTS_SUFFIX));
        let labels: BTreeSet<&String> = existing
            .get("variants")
            .and_then(Value::as_object)
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        let wheel = page.iter().find(|f| {
            f.starts_with(&prefix)
                && label_of(f).is_some_and(|(_, l)| labels.contains(&l.to_string()))
        });
        let Some(wheel) = wheel.filter(|w| is_plain_file(&dir.join(w))) else {
            continue;
        };
        let publisher = read_variant_json(&dir.join(wheel))?;
        judge(&path, &publisher, Some(&existing), prefer)?;
    }
    Ok(())
}

/// `prefer` against one set: a value of its one static property, and the order the index has the
/// same as this run would write.
fn judge(
    path: &Path,
    publisher: &Value,
    existing: Option<&Value>,
    prefer: Option<&str>,
) -> Result<()> {
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let sp = match (StaticProperty::of(publisher), prefer) {
        (Ok(sp), _) => sp,
        (Err(n), Some(p)) => {
            return Err(Error::Usage(format!(
                "--prefer {p}: {file} has {n} static properties; --prefer orders a set with one (namespace :: feature, as `splitpkg wheel` writes)"
            )));
        }
        (Err(_), None) => return Ok(()),
    };
    if let Some(p) = prefer.filter(|p| !sp.values.iter().any(|v| v == p)) {
        return Err(Error::Usage(format!(
            "--prefer {p}: not a value of {} in {file} (its values: {}); the wheels have no {p} variant",
            sp.name(),
            sp.values.join(", ")
        )));
    }
    let expected = sp.ordered(prefer);
    let Some(on) = existing.and_then(|e| StaticProperty::of(e).ok()) else {
        return Ok(());
    };
    if !on.same_but_order(&sp) || on.values == expected {
        // Other values are the merge's to refuse (it names the wheel); the same order is the same preference.
        return Ok(());
    }
    let first = |v: &[String]| v.first().cloned().unwrap_or_default();
    let (was, hint) = if on.values.first() == sp.values.first() {
        (
            "written without --prefer".to_string(),
            "run without --prefer".to_string(),
        )
    } else {
        (
            format!("written with --prefer {}", first(&on.values)),
            format!("run with --prefer {}", first(&on.values)),
        )
    };
    Err(Error::Usage(format!(
        "{}: lists {} first ({was}); this run would list {} first: an index serves one preference; {hint}, or write this one into another index (docs/wheel.md)",
        path.display(),
        first(&on.values),
        first(&expected)
    )))
}

/// The index (the set's wheels given and those it has) must hold a `prefer` variant wheel for every
/// platform (`PY-ABI-PLATFORM`) the set has variant wheels for.
fn holds_preferred(
    dir: &Path,
    file: &str,
    members: &[&IndexedWheel],
    existing: Option<&Value>,
    page: &[String],
    p: &str,
) -> Result<()> {
    let Some((_, publisher)) = &members[0].variant else {
        return Ok(());
    };
    let Ok(sp) = StaticProperty::of(publisher) else {
        return Ok(());
    };
    let docs = members
        .iter()
        .filter_map(|w| w.variant.as_ref().map(|(_, d)| d))
        .chain(existing);
    let mut labels = BTreeSet::new();
    let mut preferred = BTreeSet::new();
    for doc in docs {
        labels.extend(
            doc.get("variants")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(l, _)| l.clone()),
        );
        preferred.extend(sp.labels_with(doc, p));
    }
    let prefix = format!("{}-", file.trim_end_matches(VARIANTS_SUFFIX));
    let mut platforms: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let names = members
        .iter()
        .map(|w| w.filename.as_str())
        .chain(page.iter().map(String::as_str));
    for (tags, label) in names
        .filter(|n| n.starts_with(&prefix))
        .filter_map(label_of)
    {
        if labels.contains(label) {
            platforms.entry(tags).or_default().insert(label.to_string());
        }
    }
    for (tags, has) in &platforms {
        if has.is_disjoint(&preferred) {
            let others: Vec<&str> = has.iter().map(String::as_str).collect();
            return Err(Error::Usage(format!(
                "--prefer {p}: {} would hold no {p} wheel of {} for {tags} (only {}): uv would install {} from it without a word; give the {p} variant wheel too",
                dir.display(),
                file.trim_end_matches(VARIANTS_SUFFIX),
                others.join(", "),
                others[0]
            )));
        }
    }
    Ok(())
}

/// A variant wheel's platform tags (`PY-ABI-PLATFORM`) and label, from its file name.
pub fn label_of(name: &str) -> Option<(String, &str)> {
    let parts: Vec<&str> = name.strip_suffix(".whl")?.split('-').collect();
    if parts.len() < 6 {
        return None;
    }
    let n = parts.len();
    Some((parts[n - 4..n - 1].join("-"), parts[n - 1]))
}

fn is_plain_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

/// The file names on a project's page (none when it has no page yet).
fn page_files(dir: &Path) -> Result<Vec<String>> {
    let path = dir.join("index.json");
    if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) || !is_plain_file(&path) {
        return Ok(Vec::new());
    }
    let page: ProjectPage = read_json(&path)?;
    Ok(page.files.into_iter().map(|f| f.filename).collect())
}

/// Every `-variants.json` the index has: (project, file, the project's file names).
fn sets_on_disk(out: &Path) -> Result<Vec<(String, String, Vec<String>)>> {
    let mut sets = Vec::new();
    if !std::fs::symlink_metadata(out).is_ok_and(|m| m.is_dir()) {
        return Ok(sets);
    }
    let mut projects: Vec<String> = std::fs::read_dir(out)
        .at(out)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| check_file_name(n, "").is_ok() && normalize(n) == *n)
        .collect();
    projects.sort();
    for project in projects {
        let files = page_files(&out.join(&project))?;
        for f in files.iter().filter(|f| f.ends_with(VARIANTS_SUFFIX)) {
            if check_file_name(f, "").is_ok() && is_plain_file(&out.join(&project).join(f)) {
                sets.push((project.clone(), f.clone(), files.clone()));
            }
        }
    }
    Ok(sets)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(labels: &[&str], order: &[&str]) -> Value {
        let variants: serde_json::Map<String, Value> = labels
            .iter()
            .map(|l| (l.to_string(), json!({"torch": {"torch_cuda_linalg": [l]}})))
            .collect();
        json!({
            "$schema": "s",
            "default-priorities": {"namespace": ["torch"]},
            "providers": {"torch": {"static-properties": {"torch_cuda_linalg": order}}},
            "variants": variants,
        })
    }

    #[test]
    fn prefer_moves_one_value_first_and_keeps_the_rest_in_order() {
        let sp = StaticProperty::of(&doc(&["a"], &["a", "b", "c"])).unwrap();
        assert_eq!(sp.ordered(Some("c")), ["c", "a", "b"]);
        assert_eq!(sp.ordered(Some("a")), ["a", "b", "c"]);
        assert_eq!(sp.ordered(None), ["a", "b", "c"]);
        let mut d = doc(&["magma", "nomagma"], &["magma", "nomagma"]);
        apply(&mut d, Some("nomagma"));
        assert_eq!(
            d["providers"]["torch"]["static-properties"]["torch_cuda_linalg"],
            json!(["nomagma", "magma"])
        );
        assert_eq!(
            d["variants"],
            doc(&["magma", "nomagma"], &["magma", "nomagma"])["variants"],
            "only the order changes"
        );
        let back = in_order_of(&d, &doc(&["magma"], &["magma", "nomagma"]));
        assert_eq!(back, doc(&["magma", "nomagma"], &["magma", "nomagma"]));
        assert_eq!(
            sp.labels_with(&d, "nomagma"),
            BTreeSet::from(["nomagma".to_string()])
        );
        let mut two = doc(&["a"], &["a"]);
        two["providers"]["torch"]["static-properties"]["other"] = json!(["x"]);
        assert_eq!(StaticProperty::of(&two), Err(2));
    }

    #[test]
    fn judge_refuses_a_value_the_set_lacks_and_another_preference() {
        let p = Path::new("idx/t/torch_cuda_linalg-2.5.1-variants.json");
        let publisher = doc(&["magma"], &["magma", "nomagma"]);
        assert!(judge(p, &publisher, None, Some("nomagma")).is_ok());
        let e = judge(p, &doc(&["magma"], &["magma"]), None, Some("nomagma"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("not a value of torch :: torch_cuda_linalg")
                && e.contains("(its values: magma)"),
            "{e}"
        );
        let slim = doc(&["magma", "nomagma"], &["nomagma", "magma"]);
        let plain = doc(&["magma", "nomagma"], &["magma", "nomagma"]);
        assert!(
            judge(p, &publisher, Some(&slim), Some("nomagma")).is_ok(),
            "the same preference again"
        );
        assert!(judge(p, &publisher, Some(&plain), None).is_ok());
        assert!(
            judge(p, &publisher, Some(&plain), Some("magma")).is_ok(),
            "--prefer the publisher's first is no preference"
        );
        let e = judge(p, &publisher, Some(&slim), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("lists nomagma first (written with --prefer nomagma); this run would list magma first")
                && e.contains("run with --prefer nomagma"),
            "{e}"
        );
        let e = judge(p, &publisher, Some(&plain), Some("nomagma"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("(written without --prefer)") && e.contains("run without --prefer"),
            "{e}"
        );
    }

    #[test]
    fn platforms_and_labels_from_file_names() {
        assert_eq!(
            label_of("t-2.5.1-cp311-cp311-linux_x86_64-nomagma.whl"),
            Some(("cp311-cp311-linux_x86_64".into(), "nomagma"))
        );
        assert_eq!(label_of("t-2.5.1-cp311-cp311-linux_x86_64.whl"), None);
        assert_eq!(label_of("t-2.5.1-variants.json"), None);
    }
}
