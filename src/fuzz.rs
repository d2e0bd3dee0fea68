//! The fuzz harnesses, one per cargo-fuzz target under `fuzz/` (and the stable mutation tests that
//! share them). They sit above every stage they drive, so the readers they exercise (`elf/`,
//! `fatbin/`) import nothing above themselves: the ELF harness runs the payload scan from
//! `analysis/` on what the ELF reader found, which the reader itself must not know about.
//!
//! Each harness takes arbitrary bytes. A clean error is the expected answer; any panic, hang or
//! unbounded allocation is a bug.

use crate::analysis::payload::{self, PayloadSpec};
use crate::analysis::plan::Plan;
use crate::elf::{DlopenEntry, ElfView, Priority};
use crate::fatbin::whatif;
use crate::progress::Progress;
use crate::recipe::emit::{RecipeFormat, render};
use crate::recipe::split::{Split, SplitOptions, check_recipe_path, payload_version};

/// The ELF readers (cargo-fuzz target `elf`): headers, dynamic tables, symbols through the hash
/// tables and versions, `.rodata` literals, `.symtab` translation units, the code run at load, the
/// payload scan and identity rule on top, and the `.note.dlopen` reader and writer (what the writer
/// adds must read back).
pub fn elf(data: &[u8]) {
    let Ok(view) = ElfView::parse(data) else {
        return;
    };
    let _ = view.translation_units();
    let _ = view.load_time_imports();
    let _ = view.dlopen_notes();
    let entry = DlopenEntry {
        soname: vec!["libfuzz.so.1".into()],
        feature: Some("f".into()),
        description: None,
        priority: Priority::Required,
    };
    if let Ok((out, _)) = crate::elf::note::add_note(data, entry.clone()) {
        let back = ElfView::parse(&out)
            .expect("a file add_note wrote parses")
            .dlopen_notes();
        assert!(
            back.entries.contains(&entry),
            "the note add_note wrote reads back: {back:?}"
        );
    }
    let mut spec = PayloadSpec::for_dep("magma", &[]);
    spec.deep = true;
    if let Ok(facts) = view.facts(&spec.mention_words(), None) {
        for name in [
            "magma_init",
            "dlopen",
            "_ZN2at4cuda6detail17set_magma_init_fnEPFvvE",
            "",
        ] {
            let _ = facts.symbols.defines(name);
        }
        let _ = facts.symbols.to_list();
        let pay = payload::scan(
            &view,
            &facts,
            "libtorch_cuda_linalg.so",
            data.len() as u64,
            &spec,
        );
        for with in [true, false] {
            let _ = payload::Presence::scan(&facts, &pay, &spec).rule(with);
        }
    }
}

/// Every fatbin reader (cargo-fuzz target `fatbin`, and the stable mutation test): the section
/// walk, the summary, each entry decompressed with the cap set low so a fuzzer does not spend its
/// time in memset, the device check, and the same through an ELF wrapper.
pub fn fatbin(data: &[u8]) {
    if let Ok(containers) = crate::fatbin::parse(data, 0) {
        let s = crate::fatbin::summarise(0, data.len() as u64, containers);
        for e in s.entries_in_order() {
            let _ = whatif::decompress_with_limit(data, 0, e, 1 << 20);
        }
        for cap in ["sm_75", "sm_90", "sm_121"] {
            let _ = crate::fatbin::device_check(&s, cap.parse().expect("static"));
        }
        let _ = crate::fatbin::total([&s]);
    }
    if let Ok(view) = ElfView::parse(data) {
        let _ = crate::fatbin::read(&view);
    }
}

/// Untrusted plans (cargo-fuzz target `plan_json`): a plan document from bytes, the split with
/// default options, and both recipe formats rendered. Whatever the plan says, a rendered file stays
/// inside the output directory and no tree path reaches a recipe unchecked.
pub fn plan_json(data: &[u8]) {
    let Ok(plan) = serde_json::from_slice::<Plan>(data) else {
        return;
    };
    let options = SplitOptions {
        core_name: "libtorch".into(),
        lazy_name: "libtorch-cuda-linalg".into(),
        version: "2.11.0".into(),
        build_number: 0,
        prefer: plan.options.dep.clone(),
        variant_key: "linalg_variant".into(),
        payload_packages: vec![format!("lib{}", plan.options.dep)],
        payload_version: payload_version(&plan),
        build_keys: "cuda13".into(),
        cuda_floor: None,
        external_depends: Vec::new(),
    };
    let Ok(split) = Split::from_plan(&plan, options) else {
        return;
    };
    if let Ok(out) = render(
        &plan,
        &split,
        &[RecipeFormat::RattlerBuild, RecipeFormat::CondaBuild],
        "stage",
        "fuzz",
        "fuzz",
    ) {
        for f in &out.files {
            assert!(
                f.path
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_))),
                "{} leaves the output directory",
                f.path.display()
            );
        }
        for p in split.lazy_files.iter().chain(&split.payload_files) {
            assert!(
                check_recipe_path(p).is_ok(),
                "{p:?} reached a recipe unchecked"
            );
        }
    }
}

/// The archive readers (cargo-fuzz target `archive`): the bytes as a `.whl`, a `.tar.bz2` or a
/// `.conda` (by their magic, else by the first byte), read the way `plan` reads them.
pub fn archive(data: &[u8]) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let ext = if data.starts_with(b"BZh") {
        "tar.bz2"
    } else if data.first().is_some_and(|b| b % 2 == 0) {
        "whl"
    } else {
        "conda"
    };
    let dir = std::env::temp_dir().join(format!("splitpkg-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("in{}.{ext}", N.fetch_add(1, Ordering::Relaxed) % 4));
    if std::fs::write(&path, data).is_ok() {
        let _ = crate::analysis::inspect::inspect(
            &path,
            &PayloadSpec::for_dep("magma", &[]),
            &Progress::hidden(),
        );
    }
    let _ = std::fs::remove_file(&path);
}

/// Recorded smoke documents (cargo-fuzz target `smoke_json`): the bytes as a `--replay` report,
/// judged again with the built-in tables and rendered as text and JSON, and as an `--expect` table
/// file, as `smoke --replay FILE [--expect FILE]` reads them. Both come from machines the user may
/// not control (a CI artifact, a colleague's run).
pub fn smoke_json(data: &[u8]) {
    use crate::smoke::{expect::Tables, parse_report, replay, text as report};
    use std::path::Path;
    static BUILTIN: std::sync::OnceLock<Tables> = std::sync::OnceLock::new();
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let from = Path::new("fuzz.json");
    let tables = match Tables::with_text(text, "fuzz-expect.json") {
        Ok(t) => t,
        Err(_) => BUILTIN.get_or_init(Tables::builtin).clone(),
    };
    if let Ok(rep) = parse_report(text, from)
        && let Ok(rep) = replay(rep, &tables, from, None)
    {
        let _ = report::text(&rep, true);
        let _ = serde_json::to_string(&rep);
        let _ = rep.exit();
    }
}
