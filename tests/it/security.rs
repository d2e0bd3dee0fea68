//! Hostile archives (docs/security.md): a member under a symlink, hard links to links, duplicate
//! names, absolute symlinks, ELF members above the inflation cap, for every archive kind they
//! apply to; and parallel packs into one channel. Every refusal: exit 2, one line naming
//! ARCHIVE:MEMBER, nothing written (no channel, no work directory, nothing outside).

use crate::common::*;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;

use splitpkg::analysis::plan::Plan;
use splitpkg::channel::info::ChannelInfo;

/// One archive member, in archive order.
#[derive(Clone, Copy)]
enum M<'a> {
    File(&'a str, &'a [u8]),
    Dir(&'a str),
    Symlink(&'a str, &'a str),
    Hardlink(&'a str, &'a str),
    /// A regular file whose header claims `size` bytes and whose data is `head` (then the archive ends).
    Claims(&'a str, u64, &'a [u8]),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Whl,
    TarBz2,
    Conda,
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Tar bytes, names written verbatim (no normalisation by the tar crate).
fn tar_bytes(members: &[M]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in members {
        let mut h = tar::Header::new_gnu();
        let (name, data): (&str, &[u8]) = match *m {
            M::File(p, d) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(d.len() as u64);
                (p, d)
            }
            M::Claims(p, size, d) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(size);
                (p, d)
            }
            M::Dir(p) => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
                (p, &[][..])
            }
            M::Symlink(p, t) | M::Hardlink(p, t) => {
                h.set_entry_type(if matches!(m, M::Symlink(..)) {
                    tar::EntryType::Symlink
                } else {
                    tar::EntryType::Link
                });
                h.set_size(0);
                h.set_link_name_literal(t).unwrap();
                (p, &[][..])
            }
        };
        h.set_mode(0o755);
        let slot = &mut h.as_gnu_mut().unwrap().name;
        slot[..name.len()].copy_from_slice(name.as_bytes());
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        if let M::Claims(..) = m {
            return out;
        }
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    out
}

const INDEX: &str = r#"{"name": "libtorch", "version": "2.5.1", "build": "h0_0", "build_number": 0, "subdir": "linux-64"}"#;

/// The archive of `kind` holding `members` (plus the metadata that kind needs).
fn archive(dir: &Path, kind: Kind, members: &[M]) -> PathBuf {
    match kind {
        Kind::TarBz2 => {
            let p = dir.join("libtorch-2.5.1-h0_0.tar.bz2");
            let mut all = vec![M::File("info/index.json", INDEX.as_bytes())];
            all.extend_from_slice(members);
            let mut enc = bzip2::write::BzEncoder::new(
                std::fs::File::create(&p).unwrap(),
                bzip2::Compression::fast(),
            );
            enc.write_all(&tar_bytes(&all)).unwrap();
            enc.finish().unwrap();
            p
        }
        Kind::Conda => {
            let p = dir.join("libtorch-2.5.1-h0_0.conda");
            let info = zstd::encode_all(
                &tar_bytes(&[M::File("info/index.json", INDEX.as_bytes())])[..],
                3,
            )
            .unwrap();
            let pkg = zstd::encode_all(&tar_bytes(members)[..], 3).unwrap();
            let mut z = zip::ZipWriter::new(std::fs::File::create(&p).unwrap());
            let stored = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Stored);
            z.start_file("metadata.json", stored).unwrap();
            z.write_all(br#"{"conda_pkg_format_version": 2}"#).unwrap();
            z.start_file("info-libtorch-2.5.1-h0_0.tar.zst", stored)
                .unwrap();
            z.write_all(&info).unwrap();
            z.start_file("pkg-libtorch-2.5.1-h0_0.tar.zst", stored)
                .unwrap();
            z.write_all(&pkg).unwrap();
            z.finish().unwrap();
            p
        }
        Kind::Whl => {
            let p = dir.join("torch-2.5.1-cp311-cp311-linux_x86_64.whl");
            let mut z = zip::ZipWriter::new(std::fs::File::create(&p).unwrap());
            let o = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated);
            // Raw duplicates: written under a placeholder of the same length, renamed in the bytes.
            let mut seen = std::collections::BTreeSet::new();
            let mut renames = Vec::new();
            for (i, m) in members.iter().enumerate() {
                let mut name = |p: &str| -> String {
                    if seen.insert(p.to_string()) {
                        p.to_string()
                    } else {
                        let alias = format!("{}{}", &p[..p.len() - 1], (b'A' + i as u8) as char);
                        renames.push((alias.clone(), p.to_string()));
                        alias
                    }
                };
                match *m {
                    M::File(p, d) => {
                        z.start_file(name(p), o).unwrap();
                        z.write_all(d).unwrap();
                    }
                    M::Dir(p) => z.add_directory(name(p), o).unwrap(),
                    M::Symlink(p, t) => z.add_symlink(name(p), t, o).unwrap(),
                    M::Hardlink(..) | M::Claims(..) => unreachable!("no such zip member"),
                }
            }
            z.finish().unwrap();
            let mut bytes = std::fs::read(&p).unwrap();
            for (alias, real) in renames {
                let (a, r) = (alias.as_bytes(), real.as_bytes());
                let mut i = 0;
                while i + a.len() <= bytes.len() {
                    if &bytes[i..i + a.len()] == a {
                        bytes[i..i + a.len()].copy_from_slice(r);
                    }
                    i += 1;
                }
            }
            std::fs::write(&p, bytes).unwrap();
            p
        }
    }
}

/// Every path under `dir` (relative, sorted), directories included.
fn listing(dir: &Path) -> Vec<String> {
    walkdir::WalkDir::new(dir)
        .sort_by_file_name()
        .into_iter()
        .map(|e| {
            e.unwrap()
                .path()
                .strip_prefix(dir)
                .unwrap()
                .display()
                .to_string()
        })
        .collect()
}

/// The refusal contract: exit 2, one line naming the archive and the member, saying `says`.
fn refused(o: &Output, archive: &Path, member: &str, says: &str) {
    let e = stderr(o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "stdout: {}\nstderr: {e}",
        stdout(o)
    );
    assert_eq!(e.lines().count(), 1, "one line: {e}");
    assert!(e.starts_with("splitpkg: error: "), "{e}");
    assert!(
        e.contains(&format!("{}:{member}", archive.display())),
        "should name {}:{member}: {e}",
        archive.display()
    );
    assert!(e.contains(says), "should say {says:?}: {e}");
    assert!(o.stdout.is_empty());
}

/// `plan` and `pack` both refuse the archive; nothing is written anywhere.
fn both_refuse(kind: Kind, members: &[M], member: &str, says: &str) {
    let d = tempfile::tempdir().unwrap();
    let outside = d.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let src = d.path().join("src");
    std::fs::create_dir(&src).unwrap();
    // Symlink targets in the cases may name the outside directory.
    let members: Vec<M> = members.to_vec();
    let a = archive(&src, kind, &members);
    let before = listing(d.path());
    let plan_out = d.path().join("plan.json");
    refused(
        &run(&["plan", "--quiet", "--json", s(&a), "--out", s(&plan_out)]),
        &a,
        member,
        says,
    );
    let out = d.path().join("nested/channel");
    refused(
        &run(&["pack", s(&a), "--version", "1", "--quiet", "--out", s(&out)]),
        &a,
        member,
        says,
    );
    assert_eq!(
        listing(d.path()),
        before,
        "{kind:?}: nothing may be written"
    );
    assert!(listing(&outside).len() == 1, "{kind:?}: nothing outside");
}

const OUTSIDE: &str = "/tmp/splitpkg-security-test-outside-never-created";

#[test]
fn member_under_a_symlink_is_refused() {
    for kind in [Kind::Whl, Kind::TarBz2, Kind::Conda] {
        // The reported exploit: a link out of the tree, then a member through it.
        both_refuse(
            kind,
            &[
                M::Symlink("torch/evil", OUTSIDE),
                M::File("torch/evil/x.txt", b"pwned"),
            ],
            "torch/evil/x.txt",
            "is a symlink",
        );
        // A link that stays inside is refused all the same: the rule is about the member's path.
        both_refuse(
            kind,
            &[
                M::Dir("torch/lib"),
                M::Symlink("torch/l", "lib"),
                M::File("torch/l/x.txt", b"x"),
            ],
            "torch/l/x.txt",
            "is a symlink",
        );
        // The other order: the directory first, then a link of the same name.
        both_refuse(
            kind,
            &[
                M::File("torch/evil/x.txt", b"x"),
                M::Symlink("torch/evil", OUTSIDE),
            ],
            "torch/evil",
            "directory",
        );
    }
    assert!(!Path::new(OUTSIDE).exists());
}

#[test]
fn hard_links_resolve_against_members_only() {
    for kind in [Kind::TarBz2, Kind::Conda] {
        // A hard link to a name that is, at that point, a symlink to a host file; the name is
        // then redefined as a regular file.
        both_refuse(
            kind,
            &[
                M::Symlink("torch/a", "/etc/shadow"),
                M::Hardlink("torch/b", "torch/a"),
                M::File("torch/a", b"innocent"),
            ],
            "torch/b",
            "hard link to torch/a, which is a symlink",
        );
        // A hard link to a member that comes later, or never.
        both_refuse(
            kind,
            &[M::Hardlink("torch/b", "torch/a"), M::File("torch/a", b"x")],
            "torch/b",
            "not an earlier regular file",
        );
        both_refuse(
            kind,
            &[M::Hardlink("torch/b", "etc/passwd")],
            "torch/b",
            "not an earlier regular file",
        );
    }
}

#[test]
fn duplicate_member_names_are_refused() {
    for kind in [Kind::Whl, Kind::TarBz2, Kind::Conda] {
        both_refuse(
            kind,
            &[M::File("torch/a.txt", b"1"), M::File("torch/a.txt", b"2")],
            "torch/a.txt",
            "twice",
        );
        // A symlink and a file of one name, in either order.
        both_refuse(
            kind,
            &[
                M::Symlink("torch/a.txt", "b"),
                M::File("torch/b", b"b"),
                M::File("torch/a.txt", b"2"),
            ],
            "torch/a.txt",
            "twice",
        );
        // A file used as a directory.
        both_refuse(
            kind,
            &[M::File("torch/a", b"1"), M::File("torch/a/b", b"2")],
            "torch/a/b",
            "is a file",
        );
    }
    for kind in [Kind::TarBz2, Kind::Conda] {
        // Names that differ only in spelling are one path.
        both_refuse(
            kind,
            &[
                M::File("torch/a.txt", b"1"),
                M::File("./torch//a.txt", b"2"),
            ],
            "torch/a.txt",
            "twice",
        );
    }
    // A directory listed twice is harmless and accepted (tar does it): the archive below is
    // refused for its missing library, not for the directory.
    let d = tempfile::tempdir().unwrap();
    let a = archive(
        d.path(),
        Kind::TarBz2,
        &[
            M::Dir("torch"),
            M::Dir("torch/"),
            M::File("torch/a.txt", b"1"),
        ],
    );
    let o = run(&["plan", "--quiet", "--json", s(&a)]);
    assert!(!stderr(&o).contains("twice"), "{}", stderr(&o));
}

const GIB: u64 = 1 << 30;

#[test]
fn elf_members_above_the_cap_are_refused_before_inflating() {
    let mut head = b"\x7fELF\x02\x01\x01".to_vec();
    head.resize(4096, 0);
    for kind in [Kind::TarBz2, Kind::Conda] {
        both_refuse(
            kind,
            &[M::Claims("torch/lib/libbomb.so", 5 * GIB, &head)],
            "torch/lib/libbomb.so",
            "above the 4 GiB cap",
        );
    }
    // The same in a wheel: a zip64 entry that claims 5 GiB.
    let d = tempfile::tempdir().unwrap();
    let whl = d.path().join("torch-0.0.1-py3-none-any.whl");
    std::fs::write(&whl, zip64_claiming("torch/lib/libbomb.so", 5 * GIB, &head)).unwrap();
    refused(
        &run(&["plan", "--quiet", "--json", s(&whl)]),
        &whl,
        "torch/lib/libbomb.so",
        "above the 4 GiB cap",
    );
    let out = d.path().join("channel");
    refused(
        &run(&[
            "pack",
            s(&whl),
            "--version",
            "1",
            "--quiet",
            "--out",
            s(&out),
        ]),
        &whl,
        "torch/lib/libbomb.so",
        "above the 4 GiB cap",
    );
    assert_eq!(
        listing(d.path()),
        vec!["".to_string(), "torch-0.0.1-py3-none-any.whl".into()]
    );
}

/// A one-member zip64 archive (stored) whose headers claim `size` bytes for `data`.
fn zip64_claiming(name: &str, size: u64, data: &[u8]) -> Vec<u8> {
    let crc = 0u32;
    let n = name.as_bytes();
    let mut z = Vec::new();
    let extra = [
        &1u16.to_le_bytes()[..],
        &16u16.to_le_bytes(),
        &size.to_le_bytes(),
        &(data.len() as u64).to_le_bytes(),
    ]
    .concat();
    for v in [
        &0x04034b50u32.to_le_bytes()[..],
        &45u16.to_le_bytes(),
        &0u16.to_le_bytes(),
        &0u16.to_le_bytes(),
        &0u32.to_le_bytes(),
        &crc.to_le_bytes(),
        &u32::MAX.to_le_bytes(),
        &u32::MAX.to_le_bytes(),
        &(n.len() as u16).to_le_bytes(),
        &(extra.len() as u16).to_le_bytes(),
        n,
        &extra,
        data,
    ] {
        z.extend_from_slice(v);
    }
    let cd = z.len() as u64;
    let extra = [
        &1u16.to_le_bytes()[..],
        &24u16.to_le_bytes(),
        &size.to_le_bytes(),
        &(data.len() as u64).to_le_bytes(),
        &0u64.to_le_bytes(),
    ]
    .concat();
    for v in [
        &0x02014b50u32.to_le_bytes()[..],
        &((3u16 << 8) | 45).to_le_bytes(),
        &45u16.to_le_bytes(),
        &0u16.to_le_bytes(),
        &0u16.to_le_bytes(),
        &0u32.to_le_bytes(),
        &crc.to_le_bytes(),
        &u32::MAX.to_le_bytes(),
        &u32::MAX.to_le_bytes(),
        &(n.len() as u16).to_le_bytes(),
        &(extra.len() as u16).to_le_bytes(),
        &0u16.to_le_bytes(),
        &0u16.to_le_bytes(),
        &0u16.to_le_bytes(),
        &(0o100755u32 << 16).to_le_bytes(),
        &u32::MAX.to_le_bytes(),
        n,
        &extra,
    ] {
        z.extend_from_slice(v);
    }
    let end = z.len() as u64;
    for v in [
        &0x06064b50u32.to_le_bytes()[..],
        &44u64.to_le_bytes(),
        &45u16.to_le_bytes(),
        &45u16.to_le_bytes(),
        &0u32.to_le_bytes(),
        &0u32.to_le_bytes(),
        &1u64.to_le_bytes(),
        &1u64.to_le_bytes(),
        &(end - cd).to_le_bytes(),
        &cd.to_le_bytes(),
        &0x07064b50u32.to_le_bytes(),
        &0u32.to_le_bytes(),
        &end.to_le_bytes(),
        &1u32.to_le_bytes(),
        &0x06054b50u32.to_le_bytes(),
        &0u16.to_le_bytes(),
        &0u16.to_le_bytes(),
        &u16::MAX.to_le_bytes(),
        &u16::MAX.to_le_bytes(),
        &u32::MAX.to_le_bytes(),
        &u32::MAX.to_le_bytes(),
        &0u16.to_le_bytes(),
    ] {
        z.extend_from_slice(v);
    }
    z
}

/// The fixture's confined conda-like prefix with one more member: `lib/abs` → `/etc/shadow`.
fn with_absolute_symlink(d: &Path) -> PathBuf {
    let tree = d.join("tree");
    let ok = std::process::Command::new("cp")
        .arg("-a")
        .arg(fixture("conda-like"))
        .arg(&tree)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    std::os::unix::fs::symlink("/etc/shadow", tree.join("lib/abs")).unwrap();
    tree
}

#[test]
fn absolute_symlinks_are_noted_by_plan_and_refused_by_pack_unless_allowed() {
    let d = tempfile::tempdir().unwrap();
    let tree = with_absolute_symlink(d.path());
    let bz2 = d.path().join("libtorch-2.5.1-cuda126_h0_0.tar.bz2");
    make_tar_bz2(&tree, &bz2);
    let conda = d.path().join("libtorch-2.5.1-cuda126_h0_0.conda");
    make_conda(&tree, &conda);
    let whl = d.path().join("torch-2.5.1-py3-none-any.whl");
    make_wheel(&tree, &whl);
    for input in [&tree, &bz2, &conda, &whl] {
        // plan: a note, not a failure.
        let o = run(&["plan", "--quiet", "--json", s(input)]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let warnings = format!("{:?}", typed::<Plan>(&o).warnings);
        assert!(
            warnings.contains("lib/abs")
                && warnings.contains("symlink to /etc/shadow points outside the tree"),
            "{warnings}"
        );
        // pack: refused, nothing written.
        let before = listing(d.path());
        let out = d.path().join("channels/ch");
        let o = run(&[
            "pack",
            s(input),
            "--version",
            "2.5.1",
            "--quiet",
            "--out",
            s(&out),
        ]);
        if input == &tree {
            // A directory names the file itself.
            assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
            assert!(
                stderr(&o).contains(&format!(
                    "{}: symlink to /etc/shadow",
                    tree.join("lib/abs").display()
                )),
                "{}",
                stderr(&o)
            );
        } else {
            refused(&o, input, "lib/abs", "--allow-absolute-symlinks");
        }
        assert_eq!(listing(d.path()), before);
        // With the flag: packed, the link as it is.
        let o = run(&[
            "pack",
            s(input),
            "--version",
            "2.5.1",
            "--quiet",
            "--json",
            "--allow-absolute-symlinks",
            "--out",
            s(&out),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        std::fs::remove_dir_all(d.path().join("channels")).unwrap();
    }
}

#[test]
fn parallel_packs_into_one_channel_are_all_recorded() {
    let d = tempfile::tempdir().unwrap();
    let ch = d.path().join("channel");
    let versions = ["2.5.1", "2.5.2", "2.5.3", "2.5.4"];
    let children: Vec<_> = versions
        .iter()
        .map(|v| {
            std::process::Command::new(bin())
                .args([
                    "pack",
                    s(&fixture("conda-like")),
                    "--version",
                    v,
                    "--build-keys",
                    "cuda126",
                    "--quiet",
                    "--out",
                    s(&ch),
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let info: ChannelInfo = typed_file(&ch.join("splitpkg.json"));
    let recorded: Vec<&str> = info.packs.iter().map(|p| p.version.as_str()).collect();
    assert_eq!(recorded, versions);
    let repodata: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ch.join("linux-64/repodata.json")).unwrap())
            .unwrap();
    let mut cores: Vec<String> = repodata["packages.conda"]
        .as_object()
        .unwrap()
        .values()
        .filter(|r| r["name"] == "libtorch")
        .map(|r| r["version"].as_str().unwrap().to_string())
        .collect();
    cores.sort();
    assert_eq!(cores, versions);
    // Every recorded package is in the channel; no work directories or index leftovers.
    for p in info.packs.iter().flat_map(|p| &p.packages) {
        assert!(ch.join(&p.file).exists(), "{p:?}");
    }
    assert!(!ch.join(".tmp").exists());
    let names: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["channel".to_string()]);
    // solve reads the channel back.
    let o = run(&["solve", s(&ch), "--json", "--quiet"]);
    assert!(
        o.status.code() == Some(0) || o.status.code() == Some(1),
        "{}",
        stderr(&o)
    );
}

/// Disk: an archive that unpacks to more than `pack` may write is refused before it fills the
/// disk. Hard links in a tar cost nothing in the archive but are staged as copies, and zeros
/// deflate a thousandfold: a 4 MiB member named by ten hard links (`.tar.bz2`) or five 4 MiB
/// members (`.whl`) around a packable fixture tree pass `--max-unpacked 16M` at the member that
/// crosses it (a wheel is charged in archive order before anything is unpacked): exit 2, one line naming
/// ARCHIVE:MEMBER, nothing written. Without the flag (the
/// default is the free space of the disk) the same archives pack.
#[test]
fn archives_unpacking_past_the_disk_budget_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let zeros = vec![0u8; 4 << 20];
    // .tar.bz2: the conda-like fixture, then share/big and ten hard links to it.
    let tbz = d.path().join("libtorch-2.5.1-h0_0.tar.bz2");
    {
        let enc = bzip2::write::BzEncoder::new(
            std::fs::File::create(&tbz).unwrap(),
            bzip2::Compression::fast(),
        );
        let mut t = tar::Builder::new(enc);
        t.append_dir_all(".", fixture("conda-like")).unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_size(zeros.len() as u64);
        h.set_mode(0o644);
        t.append_data(&mut h, "share/big", &zeros[..]).unwrap();
        for i in 0..10 {
            let mut l = tar::Header::new_gnu();
            l.set_entry_type(tar::EntryType::Link);
            l.set_size(0);
            t.append_link(&mut l, format!("share/big.{i}"), "share/big")
                .unwrap();
        }
        t.into_inner().unwrap().finish().unwrap();
    }
    // .whl: the pip-like fixture, then five members of zeros.
    let whl = d.path().join("torch-2.5.1-cp311-cp311-linux_x86_64.whl");
    {
        let mut z = zip::ZipWriter::new(std::fs::File::create(&whl).unwrap());
        let o = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for e in walkdir::WalkDir::new(fixture("pip-like")).sort_by_file_name() {
            let e = e.unwrap();
            if e.file_type().is_file() {
                let rel = e
                    .path()
                    .strip_prefix(fixture("pip-like"))
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_string();
                z.start_file(rel, o).unwrap();
                z.write_all(&std::fs::read(e.path()).unwrap()).unwrap();
            }
        }
        for i in 0..5 {
            z.start_file(format!("torch/share/big.{i}"), o).unwrap();
            z.write_all(&zeros).unwrap();
        }
        z.finish().unwrap();
    }
    assert!(
        std::fs::metadata(&tbz).unwrap().len() < 64 << 10
            && std::fs::metadata(&whl).unwrap().len() < 256 << 10
    );
    for (a, member) in [(&tbz, "share/big.2"), (&whl, "torch/share/big.3")] {
        let before = listing(d.path());
        let out = d.path().join("nested/channel");
        let o = run(&[
            "pack",
            s(a),
            "--version",
            "2.5.1",
            "--quiet",
            "--max-unpacked",
            "16M",
            "--out",
            s(&out),
        ]);
        refused(&o, a, member, "more than --max-unpacked 16.0 MiB");
        assert_eq!(
            listing(d.path()),
            before,
            "{}: nothing may be written",
            a.display()
        );
        let ok = d.path().join("ok-channel");
        let o = run(&[
            "pack",
            s(a),
            "--version",
            "2.5.1",
            "--quiet",
            "--out",
            s(&ok),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}: {}", a.display(), stderr(&o));
        std::fs::remove_dir_all(&ok).unwrap();
    }
}
