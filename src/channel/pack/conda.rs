//! Writing a `.conda` in one pass: the bytes `rattler_package_streaming` 0.28.3's
//! `write_conda_package` writes, from the same `zip`, `tar` and `zstd` crates with the same
//! headers, order, timestamps and zstd parameters, but with each inner tar streamed into zstd.
//!
//! rattler's writer first writes each inner archive as an uncompressed tar to a temporary file and
//! then compresses that file: for torch's 1 GB core that is a gigabyte written and read again
//! before compression starts (the two-pass row in BENCHMARKS.md). The only thing the temporary
//! file gives it is the tar's size for zstd's frame header (`set_pledged_src_size`), and that size
//! is known before writing: the headers' bytes (a dry run of the same `tar::Builder` with empty
//! data) plus each file padded to 512. `tests::same_bytes_as_rattler` writes the same stage with
//! both writers and compares every byte, so the packages stay rattler's packages.

use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

use rattler_conda_types::package::PackageMetadata;
use sha2::{Digest, Sha256};

use crate::input::unpack::{InArchive, PositionedFile};

/// The timestamp rattler gives every tar member and zip entry when none is given (reproducible
/// builds): 2023-01-01 00:00:00 UTC.
const MTIME: u64 = 1_672_531_200;

/// One member of an inner archive: its path in the package, its tar header (without the path),
/// and where its bytes come from.
pub(super) struct TarMember {
    path: PathBuf,
    header: tar::Header,
    data: Data,
}

enum Data {
    File(PathBuf),
    Link(PathBuf),
    /// A member of the input archive, inflated while it is written, and checked against the
    /// digest it had when it was read.
    Archive {
        archive: zip::ZipArchive<PositionedFile>,
        member: InArchive,
    },
}

impl TarMember {
    /// `base/rel` as rattler's writer archives it: the header from `symlink_metadata` in tar's
    /// deterministic mode (owner's execute bit kept, uid/gid 0), rattler's fixed mtime, and the
    /// GNU header rattler starts from (its name field first set to `././@LongLink`).
    pub fn from_disk(base: &Path, rel: &Path) -> io::Result<TarMember> {
        let full = base.join(rel);
        let meta = std::fs::symlink_metadata(&full)?;
        let mut header = rattler_header();
        header.set_metadata_in_mode(&meta, tar::HeaderMode::Deterministic);
        header.set_mtime(MTIME);
        let data = if meta.file_type().is_file() {
            Data::File(full)
        } else if meta.file_type().is_symlink() {
            Data::Link(std::fs::read_link(&full)?)
        } else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: not a regular file or symlink", full.display()),
            ));
        };
        Ok(TarMember {
            path: rel.to_path_buf(),
            header,
            data,
        })
    }

    /// `rel`, a regular file member of `archive`, with the header [`TarMember::from_disk`] gives the
    /// same file unpacked (mode 0o755 or 0o644 by its execute bit, as `unpack` writes it): the
    /// test `archive_member_header_is_the_unpacked_files` holds the two together.
    pub fn from_archive(
        rel: &Path,
        archive: &zip::ZipArchive<PositionedFile>,
        member: &InArchive,
    ) -> TarMember {
        let mut header = rattler_header();
        header.set_uid(0);
        header.set_gid(0);
        header.set_mode(if member.exec { 0o755 } else { 0o644 });
        header.set_entry_type(tar::EntryType::file());
        header.set_size(member.size);
        if let Some(gnu) = header.as_gnu_mut() {
            gnu.set_device_major(0);
            gnu.set_device_minor(0);
        }
        header.set_mtime(MTIME);
        TarMember {
            path: rel.to_path_buf(),
            header,
            data: Data::Archive {
                archive: archive.clone(),
                member: member.clone(),
            },
        }
    }

    fn file_size(&self) -> u64 {
        match self.data {
            Data::File(_) | Data::Archive { .. } => self.header.size().unwrap_or(0),
            Data::Link(_) => 0,
        }
    }

    /// Append to `archive` as rattler does (`append_data` for files, `append_link` for links);
    /// with `dry_run`, files are appended without their bytes (only the headers are measured).
    fn append(
        &self,
        archive: &mut tar::Builder<impl Write>,
        dry_run: bool,
        progress: &dyn Fn(u64),
    ) -> io::Result<()> {
        let mut header = self.header.clone();
        match &self.data {
            Data::File(_) | Data::Archive { .. } if dry_run => {
                archive.append_data(&mut header, &self.path, io::empty())
            }
            Data::Archive {
                archive: zip,
                member,
            } => {
                let mut zip = zip.clone();
                let f = zip.by_index(member.index).map_err(io::Error::other)?;
                let mut reader = Counted {
                    inner: Hashed {
                        inner: f.take(member.size),
                        hasher: Sha256::new(),
                    },
                    progress,
                };
                archive.append_data(&mut header, &self.path, &mut reader)?;
                let Hashed { inner, hasher } = reader.inner;
                if inner.limit() != 0 || hasher.finalize() != member.sha256 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "{}: changed in the archive while packing",
                            self.path.display()
                        ),
                    ));
                }
                Ok(())
            }
            Data::File(path) => {
                let f = crate::input::open_nofollow(path).map_err(|source| {
                    let kind = source.kind();
                    io::Error::new(
                        kind,
                        OpenFailed {
                            path: path.clone(),
                            source,
                        },
                    )
                })?;
                let size = self.file_size();
                let mut reader = Counted {
                    inner: f.take(size),
                    progress,
                };
                archive.append_data(&mut header, &self.path, &mut reader)?;
                if reader.inner.limit() != 0 {
                    // The pledged size is already in the frame header: a file that shrank since
                    // it was staged must fail the write, not shift the archive.
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("{}: changed while packing", path.display()),
                    ));
                }
                Ok(())
            }
            Data::Link(target) => archive.append_link(&mut header, &self.path, target),
        }
    }
}

/// A file to pack that would not open. The writer's API is `io::Result`, so this travels inside an
/// `io::Error` of the same kind, with the path in its text and the open's error kept as the cause
/// (`path: cause`, the words a formatted message carried before).
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
struct OpenFailed {
    path: PathBuf,
    #[source]
    source: io::Error,
}

/// A reader that reports how many bytes it has handed out.
struct Counted<'a, R> {
    inner: R,
    progress: &'a dyn Fn(u64),
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        (self.progress)(n as u64);
        Ok(n)
    }
}

/// A reader that hashes what it hands out.
struct Hashed<R> {
    inner: R,
    hasher: Sha256,
}

impl<R: Read> Read for Hashed<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// The GNU header rattler starts every member from: its name field first set to `././@LongLink`
/// (the path set later overwrites it, except where a short path leaves its tail).
fn rattler_header() -> tar::Header {
    let mut header = tar::Header::new_gnu();
    let name = b"././@LongLink";
    header.as_gnu_mut().expect("a GNU header").name[..name.len()].copy_from_slice(name);
    header
}

/// Bytes written, nothing kept.
#[derive(Default)]
struct Count(u64);

impl Write for Count {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The size of the tar `members` make: headers (with GNU long-name entries) and the end
/// marker from a dry run of the same builder, plus every file's bytes padded to 512.
fn tar_size(members: &[TarMember]) -> io::Result<u64> {
    let mut dry = tar::Builder::new(Count::default());
    dry.follow_symlinks(false);
    for m in members {
        m.append(&mut dry, true, &|_| {})?;
    }
    let headers = dry.into_inner()?.0;
    Ok(headers
        + members
            .iter()
            .map(|m| m.file_size().div_ceil(512) * 512)
            .sum::<u64>())
}

/// One inner archive: `members` as a tar, compressed with zstd as rattler compresses its
/// temporary tar (level, worker threads, pledged size, content size in the frame header).
fn write_tar_zst(
    writer: impl Write,
    members: &[TarMember],
    level: i32,
    threads: u32,
    progress: &dyn Fn(u64),
) -> io::Result<()> {
    let size = tar_size(members)?;
    let mut zst = zstd::Encoder::new(writer, level)?;
    zst.multithread(threads)?;
    zst.set_pledged_src_size(Some(size))?;
    zst.include_contentsize(true)?;
    let mut archive = tar::Builder::new(zst);
    archive.follow_symlinks(false);
    for m in members {
        m.append(&mut archive, false, progress)?;
    }
    archive.into_inner()?.finish()?;
    Ok(())
}

/// Write `members` as the `.conda` `out_name` to `writer`: `metadata.json`, `pkg-OUT_NAME.tar.zst`
/// (every member outside `info/`), `info-OUT_NAME.tar.zst`, each inner archive sorted as rattler
/// sorts (by path components). `progress` is called with the content bytes read.
pub(super) fn write_conda<W: Write + Seek>(
    writer: W,
    members: Vec<TarMember>,
    level: i32,
    threads: u32,
    out_name: &str,
    progress: &dyn Fn(u64),
) -> io::Result<W> {
    let (mut info, mut pkg): (Vec<TarMember>, Vec<TarMember>) = members
        .into_iter()
        .partition(|m| m.path.starts_with(Path::new("info/")));
    info.sort_by(|a, b| a.path.cmp(&b.path));
    pkg.sort_by(|a, b| a.path.cmp(&b.path));

    let mut zip = zip::ZipWriter::new(writer);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .last_modified_time(
            zip::DateTime::from_date_and_time(2023, 1, 1, 0, 0, 0).expect("a valid date"),
        )
        .large_file(true);
    let metadata = serde_json::to_string(&PackageMetadata::default()).map_err(io::Error::other)?;
    zip.start_file("metadata.json", options)?;
    zip.write_all(metadata.as_bytes())?;
    zip.start_file(format!("pkg-{out_name}.tar.zst"), options)?;
    write_tar_zst(&mut zip, &pkg, level, threads, progress)?;
    zip.start_file(format!("info-{out_name}.tar.zst"), options)?;
    write_tar_zst(&mut zip, &info, level, threads, &|_| {})?;
    Ok(zip.finish()?)
}

#[cfg(test)]
// Tests read back the files they wrote; the opener guards the tool, not its tests.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::io::Cursor;

    /// A file that would not open reads as `path: cause`, as the formatted message did, and the
    /// open's error stays the cause (io::Error hands on its payload's source).
    #[test]
    fn an_unopenable_file_keeps_the_open_error_as_the_cause() {
        let path = PathBuf::from("/nonexistent/lib/x.so");
        let open = crate::input::open_nofollow(&path).unwrap_err();
        let text = format!("{}: {open}", path.display());
        let kind = open.kind();
        let e = io::Error::new(kind, OpenFailed { path, source: open });
        assert_eq!(e.to_string(), text);
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let cause = std::error::Error::source(&e).expect("the open's error");
        assert!(cause.is::<io::Error>() && text.ends_with(&cause.to_string()));
    }

    /// A stage with what packages hold and what tar encodes specially: a path and a link target
    /// longer than the 100 bytes of a header's name field (GNU long-name entries), an executable,
    /// an empty file, sizes on and off the 512-byte block, links, nested `info/`, and a file large
    /// enough for zstd to cut the input into several jobs.
    fn stage() -> (tempfile::TempDir, Vec<PathBuf>) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        let long = format!("lib/{}/libdeep.so", "d".repeat(120));
        let big: Vec<u8> = (0..12u32 << 20)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 & 0x3f)
            .collect();
        let files: Vec<(&str, Vec<u8>)> = vec![
            ("lib/libtorch_cuda_linalg.so", big),
            ("lib/empty", Vec::new()),
            ("lib/block", vec![7u8; 512]),
            ("lib/odd", vec![9u8; 8193]),
            ("bin/tool", b"#!/bin/sh\n".to_vec()),
            (long.as_str(), b"deep".to_vec()),
            ("info/index.json", b"{\"name\":\"x\"}".to_vec()),
            ("info/paths.json", b"{\"paths\":[]}".to_vec()),
            ("info/recipe/meta.yaml", b"package: {}\n".to_vec()),
            ("a.b", b"sorted between a and a/".to_vec()),
            ("a/b", b"component order".to_vec()),
        ];
        let mut paths = Vec::new();
        for (rel, bytes) in &files {
            let p = base.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, bytes).unwrap();
            paths.push(p);
        }
        std::fs::set_permissions(
            base.join("bin/tool"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::os::unix::fs::symlink(
            "libtorch_cuda_linalg.so",
            base.join("lib/libtorch_cuda_linalg.so.2"),
        )
        .unwrap();
        std::os::unix::fs::symlink(format!("../{long}"), base.join("lib/farlink")).unwrap();
        paths.push(base.join("lib/libtorch_cuda_linalg.so.2"));
        paths.push(base.join("lib/farlink"));
        (dir, paths)
    }

    fn from_disk(base: &Path, paths: &[PathBuf]) -> Vec<TarMember> {
        paths
            .iter()
            .map(|p| TarMember::from_disk(base, p.strip_prefix(base).unwrap()).unwrap())
            .collect()
    }

    #[test]
    fn same_bytes_as_rattler() {
        let (dir, paths) = stage();
        for threads in [1, 2] {
            let mut theirs = Cursor::new(Vec::new());
            rattler_package_streaming::write::write_conda_package(
                &mut theirs,
                dir.path(),
                &paths,
                rattler_conda_types::compression_level::CompressionLevel::Numeric(3),
                Some(threads),
                "pkg-1.0-h0_0",
                None,
                None,
            )
            .unwrap();
            let read = std::cell::Cell::new(0u64);
            let ours = write_conda(
                Cursor::new(Vec::new()),
                from_disk(dir.path(), &paths),
                3,
                threads,
                "pkg-1.0-h0_0",
                &|n| read.set(read.get() + n),
            )
            .unwrap()
            .into_inner();
            assert_eq!(
                ours.len(),
                theirs.get_ref().len(),
                "{threads} threads: sizes differ"
            );
            assert!(
                ours == *theirs.get_ref(),
                "{threads} threads: the bytes differ from rattler's writer"
            );
            let content: u64 = paths
                .iter()
                .filter(|p| !p.starts_with(dir.path().join("info")))
                .filter_map(|p| std::fs::symlink_metadata(p).ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum();
            assert_eq!(
                read.get(),
                content,
                "progress counts every content byte once"
            );
        }
    }

    /// rattler's bytes again, with every regular file outside `info/` taken from a zip of the
    /// stage (as a wheel's members that `pack` leaves in the archive) instead of from the disk.
    #[test]
    fn archive_members_give_the_same_bytes_as_their_unpacked_files() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, paths) = stage();
        let zip_path = dir.path().join("input.whl");
        let mut zw = zip::ZipWriter::new(File::create(&zip_path).unwrap());
        let mut entries = Vec::new();
        for (index, p) in paths
            .iter()
            .filter(|p| p.is_file() && !p.is_symlink() && !p.starts_with(dir.path().join("info")))
            .enumerate()
        {
            let rel = p.strip_prefix(dir.path()).unwrap().to_path_buf();
            let bytes = std::fs::read(p).unwrap();
            let mode = std::fs::metadata(p).unwrap().permissions().mode();
            let opts = zip::write::SimpleFileOptions::default().unix_permissions(mode & 0o777);
            zw.start_file(rel.to_string_lossy(), opts).unwrap();
            zw.write_all(&bytes).unwrap();
            let sha256 = Sha256::digest(&bytes);
            entries.push((
                rel,
                InArchive {
                    index,
                    size: bytes.len() as u64,
                    sha256,
                    exec: mode & 0o100 != 0,
                },
            ));
        }
        zw.finish().unwrap();
        let archive =
            zip::ZipArchive::new(PositionedFile::new(File::open(&zip_path).unwrap()).unwrap())
                .unwrap();
        let mut members: Vec<TarMember> = entries
            .iter()
            .map(|(rel, m)| TarMember::from_archive(rel, &archive, m))
            .collect();
        let from_zip: std::collections::BTreeSet<&Path> =
            entries.iter().map(|(rel, _)| rel.as_path()).collect();
        let rest: Vec<PathBuf> = paths
            .iter()
            .filter(|p| !from_zip.contains(p.strip_prefix(dir.path()).unwrap()))
            .cloned()
            .collect();
        members.extend(from_disk(dir.path(), &rest));
        let mut theirs = Cursor::new(Vec::new());
        let level = rattler_conda_types::compression_level::CompressionLevel::Numeric(3);
        rattler_package_streaming::write::write_conda_package(
            &mut theirs,
            dir.path(),
            &paths,
            level,
            Some(2),
            "p-1-0",
            None,
            None,
        )
        .unwrap();
        let ours = write_conda(Cursor::new(Vec::new()), members, 3, 2, "p-1-0", &|_| {})
            .unwrap()
            .into_inner();
        assert!(
            ours == *theirs.get_ref(),
            "archive members: the bytes differ from rattler's writer over the unpacked files"
        );

        // A member whose bytes are not what was read (its digest) fails the write.
        let (rel, m) = &entries[1];
        let wrong = InArchive {
            sha256: Sha256::digest(b"something else"),
            ..m.clone()
        };
        let err = write_tar_zst(
            Vec::new(),
            &[TarMember::from_archive(rel, &archive, &wrong)],
            3,
            1,
            &|_| {},
        )
        .unwrap_err();
        assert!(err.to_string().contains("changed in the archive"), "{err}");
    }

    #[test]
    fn a_file_that_shrank_fails_the_write() {
        let (dir, paths) = stage();
        let victim = dir.path().join("lib/odd");
        let members: Vec<TarMember> = paths
            .iter()
            .map(|p| TarMember::from_disk(dir.path(), p.strip_prefix(dir.path()).unwrap()).unwrap())
            .collect();
        std::fs::write(&victim, b"short").unwrap();
        let err = write_tar_zst(Vec::new(), &members, 3, 1, &|_| {}).unwrap_err();
        assert!(err.to_string().contains("lib/odd"), "{err}");
    }
}
