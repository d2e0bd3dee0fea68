//! The payload: the optional component (MAGMA by default) as a shared library and as code linked
//! statically into other files, and the payload-aware "glue" that stays behind in core files.
//!
//! A file *holds payload code* when it is a payload DSO (`libmagma*.so*`) or defines payload
//! symbols (unmangled `magma_*` / `magmablas_*`, or C++ entities whose identifier starts that way).
//! A file *references* payload when it imports such symbols. Anything else whose symbol names or
//! read-only strings mention the payload is glue: it survives a split and can make the core report
//! the payload as present (PyTorch's `has_magma`).

use memchr::memmem;
use serde::{Deserialize, Serialize};

use crate::elf::{ElfView, SymTable, cstr_at};
use goblin::elf::sym;

/// How many example names a report keeps per category; counts are always complete.
const SAMPLES: usize = 8;

/// What the payload is: its name, and how to recognise its libraries and its code.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PayloadSpec {
    /// Human name, e.g. `magma`.
    pub name: String,
    /// File-name prefixes of payload DSOs, e.g. `libmagma` (matches `libmagma.so.2`, `libmagma_sparse.so`).
    pub dso_prefixes: Vec<String>,
    /// Prefixes of payload symbols, e.g. `magma_`, `magmablas_`.
    pub symbol_prefixes: Vec<String>,
    /// Also walk `.symtab` of every file for payload code with hidden visibility (not exported).
    /// Off by default: the symbol tables of torch's tree are ~170 MiB that the dynamic facts never need.
    pub deep: bool,
    /// The components when `--dep` names several (`name` is then their names joined by `_`, which
    /// names the variants: `cublas_cudnn` / `nocublas_cudnn`); empty for one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<String>,
}

impl PayloadSpec {
    /// The spec for `--dep NAME`. MAGMA's BLAS layer uses a second prefix (`magmablas_`); other
    /// components get `NAME_` and can add prefixes with `--dep-symbol`.
    pub fn for_dep(name: &str, extra_symbol_prefixes: &[String]) -> Self {
        let lower = name.to_ascii_lowercase();
        let mut symbol_prefixes = vec![format!("{lower}_")];
        if lower == "magma" {
            symbol_prefixes.push("magmablas_".to_string());
        }
        symbol_prefixes.extend(extra_symbol_prefixes.iter().cloned());
        PayloadSpec {
            name: lower.clone(),
            dso_prefixes: vec![format!("lib{lower}")],
            symbol_prefixes,
            deep: false,
            components: Vec::new(),
        }
    }

    /// The spec for `--dep A --dep B ...`: the union of each component's rules (libraries `libA*`
    /// and `libB*`, symbols `A_*` and `B_*`), named `a_b`. One name is [`Self::for_dep`].
    pub fn for_deps<S: AsRef<str>>(names: &[S], extra_symbol_prefixes: &[String]) -> Self {
        let mut components: Vec<String> = Vec::new();
        for n in names {
            let lower = n.as_ref().to_ascii_lowercase();
            if !components.contains(&lower) {
                components.push(lower);
            }
        }
        if components.len() <= 1 {
            return Self::for_dep(
                components.first().map(String::as_str).unwrap_or("magma"),
                extra_symbol_prefixes,
            );
        }
        let mut spec = PayloadSpec {
            name: components.join("_"),
            dso_prefixes: Vec::new(),
            symbol_prefixes: Vec::new(),
            deep: false,
            components: components.clone(),
        };
        for c in &components {
            let one = Self::for_dep(c, &[]);
            spec.dso_prefixes.extend(one.dso_prefixes);
            spec.symbol_prefixes.extend(one.symbol_prefixes);
        }
        spec.symbol_prefixes
            .extend(extra_symbol_prefixes.iter().cloned());
        spec
    }

    /// The component names: `[name]` for one `--dep`, each of them for several.
    pub fn component_names(&self) -> Vec<&str> {
        if self.components.is_empty() {
            vec![self.name.as_str()]
        } else {
            self.components.iter().map(String::as_str).collect()
        }
    }

    /// `libmagma.so`, `libmagma.so.2`, `libmagma_sparse.so` — the name must continue with `.so`,
    /// `_`, `-` or a capital letter after the prefix (`libcublasLt.so.13` is cuBLAS's), so that
    /// `libmagmatic.so` is not taken for MAGMA.
    pub fn is_payload_library(&self, file_name: &str) -> bool {
        self.dso_prefixes.iter().any(|p| {
            file_name.strip_prefix(p.as_str()).is_some_and(|rest| {
                (rest.starts_with(".so")
                    || rest.starts_with(['_', '-'])
                    || rest.starts_with(|c: char| c.is_ascii_uppercase()))
                    && rest.contains(".so")
            })
        })
    }

    /// An unmangled `magma_*` name, or a mangled global-scope C++ function named that way.
    pub fn is_payload_symbol(&self, name: &str) -> bool {
        if name.starts_with("_Z") {
            return self
                .symbol_prefixes
                .iter()
                .any(|p| mangled_global_starts_with(name, p));
        }
        self.symbol_prefixes
            .iter()
            .any(|p| name.starts_with(p.as_str()))
    }

    /// Cheap pre-filter on the raw bytes of a name (running on to the end of the string table):
    /// could it pass [`Self::is_payload_symbol`]? Runs once per `.symtab` entry (80k in torch's
    /// linalg library), so it decides on the first bytes and parses a mangled length only for
    /// global-scope names.
    pub fn may_be_payload_symbol(&self, raw: &[u8]) -> bool {
        self.may_be_payload_ident(raw, global_ident(raw))
    }

    /// [`Self::may_be_payload_symbol`] with the name's [`global_ident`] already parsed.
    fn may_be_payload_ident(&self, raw: &[u8], ident: Option<&[u8]>) -> bool {
        match (raw, ident) {
            ([b'_', b'Z', ..], ident) => ident.is_some_and(|ident| {
                self.symbol_prefixes.iter().any(|p| {
                    ident.first() == p.as_bytes().first() && ident.starts_with(p.as_bytes())
                })
            }),
            ([first, ..], _) => self
                .symbol_prefixes
                .iter()
                .any(|p| p.as_bytes().first() == Some(first) && raw.starts_with(p.as_bytes())),
            ([], _) => false,
        }
    }

    /// The words searched (case-insensitively) in read-only strings: each component's name.
    pub fn mention_words(&self) -> Vec<&str> {
        self.component_names()
    }

    /// Spellings searched for in symbol names: the ones [`crate::elf::ElfView::facts`] already
    /// looked for in the string table, so the search reuses its hits.
    fn words(&self) -> Vec<String> {
        crate::elf::case_variants(&self.component_names())
    }
}

/// A mangled C++ name at global scope (`_Z<len><ident>…`, or `_ZL…` for internal linkage): the
/// identifier's declared length and the bytes from the identifier on. `None` for anything else,
/// including entities inside a namespace or class (`_ZN…`).
fn mangled_global(raw: &[u8]) -> Option<(usize, &[u8])> {
    let rest = raw.strip_prefix(b"_Z")?;
    let rest = rest.strip_prefix(b"L").unwrap_or(rest);
    // Runs for every global-scope name in a `.symtab` (55k of 83k in torch's linalg library):
    // digits by hand, not through `str::parse`.
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let len = rest[..digits].iter().try_fold(0usize, |n, &d| {
        n.checked_mul(10)?.checked_add((d - b'0') as usize)
    })?;
    Some((len, &rest[digits..]))
}

/// The identifier of a global-scope mangled name (what follows `_Z[L]<length>`), parsed once
/// for the several prefix checks a `.symtab` walk makes of each name.
fn global_ident(raw: &[u8]) -> Option<&[u8]> {
    match raw {
        [b'_', b'Z', ..] => mangled_global(raw).map(|(_, ident)| ident),
        _ => None,
    }
}

/// A mangled C++ function at global scope whose name starts with `prefix`. Entities inside a
/// namespace or class, such as `at::cuda::detail::magma_init_fn`, are the host project's glue, not
/// the component itself.
fn mangled_global_starts_with(name: &str, prefix: &str) -> bool {
    mangled_global(name.as_bytes()).is_some_and(|(len, ident)| {
        len >= prefix.len() && ident.len() >= len && ident.starts_with(prefix.as_bytes())
    })
}

/// Names found in one file: all counted, the first few kept as samples.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Names {
    /// How many there are.
    pub count: usize,
    /// The first few (up to 8), without duplicates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<String>,
}

impl Names {
    fn add(&mut self, s: &str) {
        self.add_with(s, str::to_string);
    }

    /// Count `s`; keep `show(s)` as a sample while there is room (demangling is not free).
    fn add_with(&mut self, s: &str, show: impl FnOnce(&str) -> String) {
        self.count += 1;
        if self.samples.len() < SAMPLES {
            let shown = show(s);
            if !self.samples.contains(&shown) {
                self.samples.push(shown);
            }
        }
    }

    /// Whether none was found.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// What one ELF file holds of the payload.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PayloadFacts {
    /// The file itself is a payload library (by file name or SONAME).
    pub library: bool,
    /// Payload symbols defined in the dynamic symbol table.
    pub defined: Names,
    /// Payload functions and objects defined only in `.symtab` (hidden visibility).
    pub defined_hidden: Names,
    /// Payload symbols imported.
    pub referenced: Names,
    /// Other dynamic symbols naming the payload (demangled where possible): glue.
    pub glue_symbols: Names,
    /// Read-only strings naming the payload (build-config text, messages).
    pub mentions: Names,
    /// How many bytes of the file are payload code and data, and what they are (an estimate);
    /// absent for a file that holds none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<PayloadEstimate>,
}

impl PayloadFacts {
    /// The file holds payload code: it is a payload library, or defines payload symbols (exported
    /// or hidden).
    pub fn holds_code(&self) -> bool {
        self.library || !self.defined.is_empty() || !self.defined_hidden.is_empty()
    }

    /// The file is glue: it holds other dynamic symbols naming the payload, or mentions it in
    /// read-only data.
    pub fn is_glue(&self) -> bool {
        !self.glue_symbols.is_empty() || !self.mentions.is_empty()
    }
}

/// What one build of the lazy library holds of the payload: the facts that say whether it is the
/// `magma` or the `nomagma` build. `verify-variant` (at package build time) and `smoke`'s identity
/// check (at run time, and again on `--replay`) judge these same facts with [`Presence::rule`], so
/// a library is never accepted by one and refused by the other.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Presence {
    /// Payload libraries in DT_NEEDED.
    pub needed: Vec<String>,
    /// Payload symbols defined (exported or hidden).
    pub defined: usize,
    /// One of the payload symbols defined (demangled), as an example.
    pub defined_example: Option<String>,
    /// Payload symbols imported.
    pub imported: usize,
    /// One of the payload symbols imported, as an example.
    pub imported_example: Option<String>,
}

/// One line of the identity rule.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleCheck {
    /// What the line checks (`payload present`, `no payload library NEEDED`, …).
    pub name: &'static str,
    /// Whether the library meets it.
    pub pass: bool,
    /// What was found, in one line.
    pub detail: String,
}

/// Whether a variant named `variant` must carry the payload `dep` (`magma`: yes, `nomagma`: no);
/// `None` for any other name. The one naming rule of `verify-variant` and `smoke`'s identity check.
/// The name of the variant built without the payload: `nomagma` for `magma`. The one place the
/// naming rule is written; [`variant_carries`] reads it back.
pub fn slim_variant(dep: &str) -> String {
    format!("no{dep}")
}

/// Whether a variant named `variant` must carry the payload `dep` (`magma`: yes, `nomagma`: no);
/// None for any other name. The one naming rule of `verify-variant` and `smoke`'s identity check.
pub fn variant_carries(variant: &str, dep: &str) -> Option<bool> {
    if variant == dep {
        Some(true)
    } else if variant.strip_prefix("no") == Some(dep) {
        Some(false)
    } else {
        None
    }
}

impl Presence {
    /// What one build of the lazy library holds of the payload, from its ELF facts and its payload
    /// scan.
    pub fn scan(facts: &crate::elf::ElfFacts, pay: &PayloadFacts, spec: &PayloadSpec) -> Presence {
        Presence {
            needed: facts
                .needed
                .iter()
                .filter(|n| spec.is_payload_library(n))
                .cloned()
                .collect(),
            defined: pay.defined.count + pay.defined_hidden.count,
            defined_example: pay
                .defined
                .samples
                .first()
                .or(pay.defined_hidden.samples.first())
                .cloned(),
            imported: pay.referenced.count,
            imported_example: pay.referenced.samples.first().cloned(),
        }
    }

    /// The library carries the payload: defines its code or loads a payload library.
    pub fn contains(&self) -> bool {
        !self.needed.is_empty() || self.defined > 0
    }

    /// The rule for a build that must carry the payload (`with_payload`) or must not.
    pub fn rule(&self, with_payload: bool) -> Vec<RuleCheck> {
        let example = |e: &Option<String>| {
            e.as_ref()
                .map(|x| format!(" (e.g. {x})"))
                .unwrap_or_default()
        };
        if with_payload {
            return vec![RuleCheck {
                name: "payload present",
                pass: self.contains(),
                detail: format!(
                    "{} payload libraries NEEDED ({}), {} payload symbols defined",
                    self.needed.len(),
                    self.needed.join(", "),
                    self.defined
                ),
            }];
        }
        vec![
            RuleCheck {
                name: "no payload library NEEDED",
                pass: self.needed.is_empty(),
                detail: if self.needed.is_empty() {
                    "none".into()
                } else {
                    self.needed.join(", ")
                },
            },
            RuleCheck {
                name: "no payload symbols defined",
                pass: self.defined == 0,
                detail: format!("{} defined{}", self.defined, example(&self.defined_example)),
            },
            RuleCheck {
                name: "no payload symbols imported",
                pass: self.imported == 0,
                detail: format!(
                    "{} imported{}",
                    self.imported,
                    example(&self.imported_example)
                ),
            },
        ]
    }
}

/// An estimate of how many bytes of a file are payload, with the way each part was counted.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Estimate")]
pub struct PayloadEstimate {
    /// Payload bytes in the file: the sum of `parts`.
    pub bytes: u64,
    /// How the file was counted: `the whole file is a payload library`, or `static payload: …` for
    /// payload linked into the file (its span in `.text`, CUDA units inside it, a share of tables).
    pub method: String,
    /// The parts counted, each with its bytes and how they were found.
    pub parts: Vec<EstimatePart>,
}

/// One part of a payload estimate: which part of the file, its bytes and how they were counted.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EstimatePart {
    /// The part of the file: `file`, `.text`, `data`, `.nv_fatbin` or
    /// `debug, symbol and unwind tables`.
    pub what: PartKind,
    /// Payload bytes attributed to that part; `.nv_fatbin` counts 0 when no CUDA registration
    /// symbol tells whose device code it is.
    pub bytes: u64,
    /// How they were counted, one phrase (`in proportion to the payload share of .text`).
    pub how: String,
}

/// What part of a file an [`EstimatePart`] counts; written as the label (`.nv_fatbin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum PartKind {
    /// The whole file (a payload library).
    #[serde(rename = "file")]
    File,
    /// Payload code: the address span from the first payload function in `.text` to the end of
    /// the last.
    #[serde(rename = ".text")]
    Text,
    /// Payload data objects.
    #[serde(rename = "data")]
    Data,
    /// CUDA device code.
    #[serde(rename = ".nv_fatbin")]
    NvFatbin,
    /// Sections never loaded at run time.
    #[serde(rename = "debug, symbol and unwind tables")]
    Tables,
}

impl PartKind {
    /// The part as tables print it (`.text`, `.nv_fatbin`, …).
    pub fn label(self) -> &'static str {
        match self {
            PartKind::File => "file",
            PartKind::Text => ".text",
            PartKind::Data => "data",
            PartKind::NvFatbin => ".nv_fatbin",
            PartKind::Tables => "debug, symbol and unwind tables",
        }
    }
}

/// Scan one ELF file for the payload. `file_size` is the whole file; `soname` and `file_name`
/// decide whether the file is itself a payload library.
pub fn scan(
    view: &ElfView<'_>,
    facts: &crate::elf::ElfFacts,
    file_name: &str,
    file_size: u64,
    spec: &PayloadSpec,
) -> PayloadFacts {
    let mut out = scan_names(view, facts, file_name, file_size, spec);
    if out.estimate.is_none() {
        out.estimate = static_estimate(view, facts, &out, spec);
    }
    out
}

/// The static estimate [`scan`] adds to what [`scan_names`] found: `None` unless the file holds
/// payload code without being a payload library. A separate step so that a reader can run it
/// beside other work on the same file (it walks the whole `.symtab`).
pub fn static_estimate(
    view: &ElfView<'_>,
    facts: &crate::elf::ElfFacts,
    found: &PayloadFacts,
    spec: &PayloadSpec,
) -> Option<PayloadEstimate> {
    (found.holds_code() && !found.library).then(|| estimate_static(view, facts, spec))
}

/// [`scan`] without the static estimate ([`static_estimate`]); a payload library's whole-file
/// estimate is set.
pub fn scan_names(
    view: &ElfView<'_>,
    facts: &crate::elf::ElfFacts,
    file_name: &str,
    file_size: u64,
    spec: &PayloadSpec,
) -> PayloadFacts {
    let mut out = PayloadFacts {
        library: spec.is_payload_library(file_name)
            || facts
                .soname
                .as_deref()
                .is_some_and(|s| spec.is_payload_library(s)),
        ..Default::default()
    };
    let words = spec.words();

    // Only names containing the payload word can be payload or glue: search the name arena for
    // the word rather than test ~100k exports one by one.
    let word_refs: Vec<&str> = words.iter().map(String::as_str).collect();
    for sym in facts.symbols.containing(&word_refs) {
        if spec.is_payload_symbol(sym.name) {
            if sym.defined {
                out.defined.add(sym.name)
            } else {
                out.referenced.add(sym.name)
            }
        } else {
            out.glue_symbols.add_with(sym.name, demangle);
        }
    }
    out.mentions = Names {
        count: facts.mentions.count,
        samples: facts.mentions.samples.clone(),
    };

    if out.library {
        out.estimate = Some(PayloadEstimate {
            bytes: file_size,
            method: "the whole file is a payload library".into(),
            parts: vec![EstimatePart {
                what: PartKind::File,
                bytes: file_size,
                how: "payload library by name".into(),
            }],
        });
        return out;
    }

    // Hidden payload code only shows in .symtab (with `--deep`). Its string table is large
    // (149 MiB over torch's tree), so look for the prefixes there first and walk it only on a hit.
    if spec.deep
        && let Some((table, strs)) = view.symtab()
        && spec
            .symbol_prefixes
            .iter()
            .any(|p| memmem::find(strs, p.as_bytes()).is_some())
    {
        for s in table.iter() {
            if !s.defined() || !(s.kind() == sym::STT_FUNC || s.kind() == sym::STT_OBJECT) {
                continue;
            }
            // Most names are namespaced C++ (`_ZN…`): reject on the first bytes before cutting a string.
            if !spec.may_be_payload_symbol(strs.get(s.name as usize..).unwrap_or(&[])) {
                continue;
            }
            let Some(name) = cstr_at(strs, s.name as usize) else {
                continue;
            };
            if spec.is_payload_symbol(name) && !facts.symbols.defines(name) {
                out.defined_hidden.add(name);
            }
        }
    }

    out
}

/// Estimate the payload share of a file that links the payload statically.
///
/// A static archive's members are laid out contiguously by the linker, so the address span from the
/// first to the last payload function in `.text` is taken as payload code (it includes the
/// payload's own unnamed helpers). Device code is attributed by counting CUDA translation units
/// (one `__sti____cudaRegisterAll` per unit) inside that span. Sections never loaded at run time
/// (debug info, symbol tables, unwind tables) are attributed in proportion to the `.text` share.
fn estimate_static(
    view: &ElfView<'_>,
    facts: &crate::elf::ElfFacts,
    spec: &PayloadSpec,
) -> PayloadEstimate {
    let text_size = facts.sections.text;
    let span = PayloadSpan::scan(view, spec);

    let mut parts = Vec::new();
    let text_part = span.hi.saturating_sub(span.lo).min(text_size);
    parts.push(EstimatePart {
        what: PartKind::Text,
        bytes: text_part,
        how: format!(
            "address span of payload functions in {} ({} bytes in named payload functions)",
            span.source, span.named_bytes
        ),
    });
    if span.object_bytes > 0 {
        parts.push(EstimatePart {
            what: PartKind::Data,
            bytes: span.object_bytes,
            how: format!("sizes of payload data objects in {}", span.source),
        });
    }
    if facts.sections.nv_fatbin > 0 {
        parts.push(span.device_code(facts.sections.nv_fatbin));
    }
    let unloaded = facts.sections.debug + facts.sections.symtab + view.unwind_bytes();
    if unloaded > 0 && text_size > 0 {
        parts.push(EstimatePart {
            what: PartKind::Tables,
            bytes: (unloaded as u128 * text_part as u128 / text_size as u128) as u64,
            how: "in proportion to the payload share of .text".into(),
        });
    }
    PayloadEstimate {
        bytes: parts.iter().map(|p| p.bytes).sum(),
        method: "static payload: contiguous archive span in .text, CUDA units inside it, proportional share of tables".into(),
        parts,
    }
}

/// The payload's functions and data in a file's symbol table: the address span of its functions
/// in `.text`, and where the CUDA translation units register.
struct PayloadSpan {
    /// The table read: `.symtab`, or `.dynsym` for a stripped file.
    source: &'static str,
    lo: u64,
    hi: u64,
    /// Bytes in named payload functions inside `.text`.
    named_bytes: u64,
    /// Bytes of payload data objects.
    object_bytes: u64,
    /// Addresses of the CUDA registration functions (one per translation unit).
    cuda_units: Vec<u64>,
}

impl PayloadSpan {
    fn scan(view: &ElfView<'_>, spec: &PayloadSpec) -> Self {
        let text_idx = view
            .shdrs
            .iter()
            .position(|s| view.section_name(s) == ".text");
        let (table, strs, source) = match view.symtab() {
            Some((t, s)) => (Some(t), s, ".symtab"),
            None => match view.dynsym_table() {
                Some((t, s)) => (Some(t), s, ".dynsym"),
                None => (None, &[][..], ".dynsym"),
            },
        };
        let Some(table) = table else {
            return PayloadSpan::empty(source);
        };
        // Two halves side by side: this walk runs beside the load graph, and the graph's thread,
        // done first, takes the second half (80k entries in torch 2.11's linalg library).
        let (first, second) = table.split_at(table.len() / 2);
        let (a, b) = rayon::join(
            || PayloadSpan::scan_part(first, strs, text_idx, source, spec),
            || PayloadSpan::scan_part(second, strs, text_idx, source, spec),
        );
        a.merge(b)
    }

    fn empty(source: &'static str) -> Self {
        PayloadSpan {
            source,
            lo: u64::MAX,
            hi: 0,
            named_bytes: 0,
            object_bytes: 0,
            cuda_units: Vec::new(),
        }
    }

    /// Both halves' findings as one walk over the whole table would have them (the units in table
    /// order; sizes saturate as they did when added one by one).
    fn merge(mut self, other: PayloadSpan) -> Self {
        self.lo = self.lo.min(other.lo);
        self.hi = self.hi.max(other.hi);
        self.named_bytes = self.named_bytes.saturating_add(other.named_bytes);
        self.object_bytes = self.object_bytes.saturating_add(other.object_bytes);
        self.cuda_units.extend(other.cuda_units);
        self
    }

    fn scan_part(
        table: SymTable<'_>,
        strs: &[u8],
        text_idx: Option<usize>,
        source: &'static str,
        spec: &PayloadSpec,
    ) -> Self {
        let mut span = PayloadSpan::empty(source);
        for s in table.iter() {
            if !s.defined() {
                continue;
            }
            let raw = strs.get(s.name as usize..).unwrap_or(&[]);
            let ident = global_ident(raw);
            let kind = s.kind();
            if !(spec.may_be_payload_ident(raw, ident)
                || (kind == sym::STT_FUNC && is_cuda_registration(raw, ident)))
            {
                continue;
            }
            let Some(name) = cstr_at(strs, s.name as usize) else {
                continue;
            };
            if kind == sym::STT_FUNC && name.contains("__sti____cudaRegisterAll") {
                span.cuda_units.push(s.value);
                continue;
            }
            if !spec.is_payload_symbol(name) {
                continue;
            }
            if kind == sym::STT_FUNC && Some(s.shndx as usize) == text_idx && s.size > 0 {
                span.lo = span.lo.min(s.value);
                // Symbol values and sizes come from the file: saturate rather than wrap.
                span.hi = span.hi.max(s.value.saturating_add(s.size));
                span.named_bytes = span.named_bytes.saturating_add(s.size);
            } else if kind == sym::STT_OBJECT {
                span.object_bytes = span.object_bytes.saturating_add(s.size);
            }
        }
        span
    }

    /// The payload's share of `nv_fatbin` bytes of device code: the CUDA translation units that
    /// register from inside the span, out of all of them.
    fn device_code(&self, nv_fatbin: u64) -> EstimatePart {
        let units = &self.cuda_units;
        let inside = units
            .iter()
            .filter(|&&a| a >= self.lo && a < self.hi)
            .count();
        let (bytes, how) = if units.is_empty() {
            (
                0,
                "not attributed: no CUDA registration symbols to tell whose device code it is"
                    .to_string(),
            )
        } else {
            (
                nv_fatbin * inside as u64 / units.len() as u64,
                format!(
                    "{inside} of {} CUDA translation units register from inside the payload span",
                    units.len()
                ),
            )
        };
        EstimatePart {
            what: PartKind::NvFatbin,
            bytes,
            how,
        }
    }
}

/// A CUDA translation unit's registration function (one per unit): `__sti____cudaRegisterAll…` in
/// C, or that identifier mangled at global scope with internal (`_ZL24__sti____cudaRegisterAllv`)
/// or external linkage (`_Z24…`, 625 of torch 1.10's 1,354 units).
fn is_cuda_registration(raw: &[u8], ident: Option<&[u8]>) -> bool {
    const NAME: &[u8] = b"__sti____cudaRegisterAll";
    // Nearly every name differs in its first two bytes: compare those before calling memcmp for
    // the whole prefix (asked of each of linalg's ~80k `.symtab` functions).
    let starts = |s: &[u8]| s.get(..2) == Some(&NAME[..2]) && s.starts_with(NAME);
    starts(raw) || ident.is_some_and(starts)
}

/// A C++ symbol name demangled; any other name (or one that does not demangle) as it is.
pub fn demangle(name: &str) -> String {
    if name.starts_with("_Z")
        && let Ok(sym) = cpp_demangle::Symbol::new(name)
        && let Ok(s) = sym.demangle()
    {
        return s;
    }
    name.to_string()
}

impl<'a> ElfView<'a> {
    /// `.eh_frame`, `.eh_frame_hdr` and `.gcc_except_table` bytes.
    pub fn unwind_bytes(&self) -> u64 {
        self.shdrs
            .iter()
            .filter(|s| {
                matches!(
                    self.section_name(s),
                    ".eh_frame" | ".eh_frame_hdr" | ".gcc_except_table"
                )
            })
            .map(|s| s.sh_size)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_names() {
        let spec = PayloadSpec::for_dep("magma", &[]);
        assert!(spec.is_payload_library("libmagma.so"));
        assert!(spec.is_payload_library("libmagma.so.2"));
        assert!(spec.is_payload_library("libmagma_sparse.so"));
        assert!(!spec.is_payload_library("libmagmatic.so"));
        assert!(!spec.is_payload_library("libtorch_cuda.so"));
        assert!(spec.is_payload_symbol("magma_dgetrf_gpu"));
        assert!(spec.is_payload_symbol("magmablas_dgemm"));
        assert!(spec.is_payload_symbol("_Z20magmablas_dgemm_fooPv"));
        assert!(!spec.is_payload_symbol("_ZN2at4cuda6detail17set_magma_init_fnEPFvvE"));
        assert!(!spec.is_payload_symbol("has_magma"));
        assert!(!spec.is_payload_symbol("_ZN2at4cuda6detailL13magma_init_fnE"));
        assert!(!spec.is_payload_symbol("_ZTS19magma_slaqtrsd_task"));
        assert!(spec.is_payload_symbol("_ZL15magma_zlarfb_xPi"));
        assert!(
            !spec.is_payload_library("libmagmatic.so") && !spec.is_payload_library("libmagma2.so")
        );
        assert!(
            PayloadSpec::for_dep("cublas", &[]).is_payload_library("libcublasLt.so.13"),
            "a capital letter continues the family"
        );
    }

    #[test]
    fn several_components_are_one_payload() {
        let spec = PayloadSpec::for_deps(&["cuBLAS", "cudnn", "cublas"], &["cudnn".to_string()]);
        assert_eq!(
            (spec.name.as_str(), spec.components.as_slice()),
            (
                "cublas_cudnn",
                ["cublas".to_string(), "cudnn".to_string()].as_slice()
            )
        );
        assert_eq!(spec.dso_prefixes, vec!["libcublas", "libcudnn"]);
        assert_eq!(spec.symbol_prefixes, vec!["cublas_", "cudnn_", "cudnn"]);
        for lib in [
            "libcublas.so.13",
            "libcublasLt.so.13",
            "libcudnn.so.9",
            "libcudnn_ops.so.9",
        ] {
            assert!(spec.is_payload_library(lib), "{lib}");
        }
        assert!(spec.is_payload_symbol("cudnnCreate") && !spec.is_payload_symbol("cufftPlan1d"));
        assert_eq!(spec.mention_words(), vec!["cublas", "cudnn"]);
        assert_eq!(spec.words().len(), 6);
        // One name is the single-component spec, unchanged (and serialised without `components`).
        let one = PayloadSpec::for_deps(&["magma"], &[]);
        assert_eq!(
            serde_json::to_value(&one).unwrap(),
            serde_json::to_value(PayloadSpec::for_dep("magma", &[])).unwrap()
        );
        assert!(
            serde_json::to_value(&one)
                .unwrap()
                .get("components")
                .is_none()
        );
    }
}
