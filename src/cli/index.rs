//! `index`: write or update a static simple index (PEP 503/691) of wheels.

use std::path::PathBuf;

use clap::Args;

use splitpkg::Exit;
use splitpkg::error::Result;
use splitpkg::index;
use splitpkg::output::emit;
use splitpkg::progress::Progress;
use splitpkg::provenance;

use super::to_json;

pub const INDEX_HELP: &str = "Writes into INDEX (created, or updated in place):
  index.html, index.json            the projects (PEP 503 HTML and PEP 691 JSON side by side)
  NAME/index.html, NAME/index.json  each project's files: #sha256= fragments, data-requires-python, data-core-metadata (PEP 658/714), yanked flags as the JSON page has them
  NAME/FILE.whl, NAME/FILE.whl.metadata   the wheel and its METADATA
  NAME/DIST-VERSION-variants.json   for PEP 825 variant wheels: every variant of that version (the union of their variant.json)

An update keeps every file already there (under INDEX/.splitpkg.lock); the same file again changes nothing; another file under a published name is refused. To yank a file, set \"yanked\" in its project's index.json; index keeps it.

One index holds one of `splitpkg wheel`'s sets: the local-label wheels (DIR) or the PEP 825 set (DIR/variants). Installers compare versions before variants, so a +1.magma label would beat every variant: a project with both is refused. A directory argument gives the .whl files directly in it.

One index serves one preference of the PEP 825 set. uv's variant mode installs the variant whose value a -variants.json lists first and offers no choice of its own, so --prefer VARIANT writes an index of the same wheels with VARIANT listed first: users choose it as their index (--index-url, UV_DEFAULT_INDEX, uv.toml). It leaves out the plain fallback (the publisher's default build, which pip would install) and refuses a set without VARIANT, an index that would lack a VARIANT wheel for one of the set's platforms, and an index written with another preference.

--share-with DEFAULT hard-links every wheel DEFAULT (another index, on the same file system) holds with the same name and bytes, so the --prefer twin of an index costs no second copy of the core; a wheel DEFAULT lacks, or that cannot be linked (another file system), is copied, and the report says why (sharing.notes). DEFAULT is only read; a symbolic link, FIFO or device where it keeps a wheel is refused.

Serve INDEX with any static server (docs/wheel.md has nginx and S3 notes). --url says where (default http://127.0.0.1:8000/): the printed commands install from it, and for a loopback http URL the serve command binds its host and port and serves the directory whose URL path it is (INDEX for /, the directory holding INDEX for /NAME/ when INDEX is named NAME: one server for indexes side by side). The commands printed at the end pin every project of INDEX to its newest version there: with the public index reachable, an unpinned `torch` installs the newest monolithic torch. pip has no index precedence (the pin decides); uv takes a package from the first index that has it (--index comes ahead of its default index). torch's own dependencies come from the index your installer is set up with. An index written with --prefer has no pip command: pip does not read variant wheels and the fallback is left out. The other variant is printed too: a local-label set's by its pin, a PEP 825 set's by its variant wheel's URL on the index.

Exit codes: 0 written, 2 bad input (a broken or hostile wheel, a published name with other bytes, the two sets in one index, --out a file, a --prefer the wheels or INDEX cannot take, a symbolic link, FIFO or device where INDEX keeps a file, page, project directory or its lock, a page listing a file that is not there, a --url that is not an http(s) URL, a --share-with that is not a directory or keeps a wheel as a link, FIFO or device).

Pages are regenerated from INDEX's own files on every run: a URL or key an earlier page carried is not served again; only `yanked` and `upload-time` set by hand are kept.

Examples:
  splitpkg index wheels/ --out index/
  splitpkg index wheels/variants/ --out index-variants/
  splitpkg index wheels/variants/ --out srv/simple-variants/ \\
    --url http://127.0.0.1:8001/simple-variants/
  splitpkg index wheels/variants/ --out srv/simple-variants-slim/ \\
    --prefer nomagma --share-with srv/simple-variants/ \\
    --url http://127.0.0.1:8001/simple-variants-slim/
  python3 -m http.server --bind 127.0.0.1 --directory index/ 8000
  pip install --extra-index-url http://127.0.0.1:8000/ torch==2.11.0+split \\
    torch-cuda-linalg==2.11.0+1.magma
  # uv, variant mode: both served from srv/ on 8001
  python3 -m http.server --bind 127.0.0.1 --directory srv 8001
  uv pip install --preview-features wheel-variants \\
    --index http://127.0.0.1:8001/simple-variants/ \\
    torch==2.11.0+split torch-cuda-linalg==2.11.0
  uv pip install --preview-features wheel-variants \\
    --index http://127.0.0.1:8001/simple-variants-slim/ \\
    torch==2.11.0+split torch-cuda-linalg==2.11.0";

#[derive(Args)]
pub struct IndexArgs {
    /// Wheels, or directories of wheels (the .whl files directly in them).
    #[arg(required = true, value_name = "WHEEL_OR_DIR")]
    inputs: Vec<PathBuf>,
    /// The index directory (created, or updated in place).
    #[arg(long, short, value_name = "INDEX")]
    out: PathBuf,
    /// PEP 825 sets: list VARIANT first in every -variants.json, so uv's variant mode installs it from this index (one index per preference).
    #[arg(long, value_name = "VARIANT")]
    prefer: Option<String>,
    /// The URL the index will be served at, for the printed commands (http or https; a loopback http URL gets the python3 -m http.server command that serves it).
    #[arg(long, value_name = "URL", default_value = index::commands::DEFAULT_URL)]
    url: String,
    /// Hard-link the wheels this index (the default index of the same wheels) has with the same name and bytes, instead of copying them; a copy, with a note, where no link can be made (another file system).
    #[arg(long, value_name = "INDEX")]
    share_with: Option<PathBuf>,
    /// JSON report: every file of the index, what this run did with it, and how to serve it.
    #[arg(long)]
    json: bool,
}

pub fn index(a: IndexArgs, quiet: bool) -> Result<Exit> {
    let progress = Progress::new(!quiet);
    let opts = index::IndexOptions {
        out: a.out,
        prefer: a.prefer,
        url: Some(a.url),
        share_with: a.share_with,
        progress: &progress,
    };
    let mut report = index::update_index(&a.inputs, &opts)?;
    report.stamp = provenance::Stamp::reproducible();
    let text = if a.json {
        to_json(&report)?
    } else {
        index::report_text(&report)
    };
    emit(None, &text)?;
    Ok(Exit::Success)
}
