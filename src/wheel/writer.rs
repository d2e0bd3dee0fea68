//! Writing wheels: members copied as raw streams or added fresh, RECORD last, the whole file's
//! SHA-256 computed while it is written, and every file kept under a temporary name until the
//! whole set is read back and committed.

use crate::error::Context;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Cursor, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::mpsc::SyncSender;
use std::thread::JoinHandle;

use sha2::{Digest, Sha256};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipArchive, ZipWriter};

use super::record::{self, RecordEntry};
use crate::error::Result;
use crate::output::{Pending, StagedFile};

/// Members of a written wheel copied as raw streams: path in the wheel → index in the input.
pub(super) type Copies = BTreeMap<String, usize>;

/// What one finished wheel is: its size, member count, raw copies and SHA-256 (hex).
pub(super) struct Finished {
    pub bytes: u64,
    pub members: usize,
    pub copies: Copies,
    pub sha256: String,
}

/// A wheel being written: its members and RECORD rows, in the order written.
pub(super) struct Writer {
    zip: ZipWriter<BufWriter<HashedFile>>,
    rows: Vec<RecordEntry>,
    copies: Copies,
    dist_info: String,
    /// Timestamp and mode of the new files: the input METADATA's, so the output is deterministic.
    time: DateTime,
}

impl Writer {
    /// Into `staged`, a new file opened for reading too (the hasher reads back what is written).
    pub fn create(staged: StagedFile, dist_info: String, time: DateTime) -> Result<Writer> {
        let tmp = &staged.path;
        let hashed = HashedFile::new(staged.file).at(tmp)?;
        Ok(Writer {
            zip: ZipWriter::new(hashed),
            rows: Vec::new(),
            copies: Copies::new(),
            dist_info,
            time,
        })
    }

    /// Copy member `index` of `archive` as its raw compressed stream, renamed to `to`; its RECORD
    /// row is `(hash, size)`, taken from the verified input RECORD.
    pub fn copy(
        &mut self,
        archive: &mut ZipArchive<Cursor<&[u8]>>,
        index: usize,
        at: &str,
        to: &str,
        row: (String, u64),
    ) -> Result<()> {
        let f = archive.by_index_raw(index).bad_in(at)?;
        self.zip
            .raw_copy_file_rename(f, to)
            .failed_at(format_args!("writing {to}"))?;
        self.copies.insert(to.to_string(), index);
        self.rows.push(RecordEntry {
            path: to.to_string(),
            hash: Some(row.0),
            size: Some(row.1),
        });
        Ok(())
    }

    /// A new member (deflated), e.g. METADATA or another build of the lazy library.
    pub fn add(&mut self, to: &str, content: impl Read, mode: u32) -> Result<()> {
        let (hash, size) = self.add_unlisted(to, content, mode)?;
        self.rows.push(RecordEntry {
            path: to.to_string(),
            hash: Some(hash),
            size: Some(size),
        });
        Ok(())
    }

    /// Deflate `content` into a one-member zip in memory, then raw-copy that member: the wheel's
    /// own writer never has to seek back to patch a local header (which it does for a member whose
    /// CRC and sizes are not known up front), so the file can be hashed as it goes.
    fn add_unlisted(
        &mut self,
        to: &str,
        mut content: impl Read,
        mode: u32,
    ) -> Result<(String, u64)> {
        let opts = SimpleFileOptions::default()
            .compression_method(CompressionMethod::Deflated)
            .last_modified_time(self.time)
            .unix_permissions(mode)
            .large_file(true);
        let mut one = ZipWriter::new(Cursor::new(Vec::new()));
        one.start_file(to, opts)
            .failed_at(format_args!("writing {to}"))?;
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut n = 0u64;
        loop {
            let k = content
                .read(&mut buf)
                .failed_at(format_args!("reading {to}"))?;
            if k == 0 {
                break;
            }
            h.update(&buf[..k]);
            one.write_all(&buf[..k])
                .failed_at(format_args!("writing {to}"))?;
            n += k as u64;
        }
        let zipped = one
            .finish()
            .failed_at(format_args!("writing {to}"))?
            .into_inner();
        let mut one = ZipArchive::new(Cursor::new(zipped.as_slice()))
            .failed_at(format_args!("writing {to}"))?;
        let f = one
            .by_index_raw(0)
            .failed_at(format_args!("writing {to}"))?;
        self.zip
            .raw_copy_file(f)
            .failed_at(format_args!("writing {to}"))?;
        Ok((record::hash_field(&h.finalize()), n))
    }

    /// RECORD last, then the archive closed; `pending` flushes it to disk in the background
    /// (the disk works while the next wheel is written) and waits for that before committing.
    pub fn finish(mut self, tmp: &Path, pending: &mut Pending) -> Result<Finished> {
        let record_path = format!("{}/RECORD", self.dist_info);
        let mut rows = std::mem::take(&mut self.rows);
        rows.push(RecordEntry {
            path: record_path.clone(),
            hash: None,
            size: None,
        });
        self.add_unlisted(&record_path, record::write(&rows).as_bytes(), 0o644)?;
        let hashed = self
            .zip
            .finish()
            .failed_at(format_args!("finishing {}", tmp.display()))?;
        let (file, bytes, digest) = HashedFile::finish(hashed).at(tmp)?;
        pending.sync_in_background(tmp, file);
        Ok(Finished {
            bytes,
            members: rows.len(),
            copies: self.copies,
            sha256: crate::output::hex(&digest),
        })
    }
}

/// The buffer in front of [`HashedFile`]: one `write` and one message to the hasher per MiB.
/// (4 MiB writes took 0.3 s more system time for the torch core on the 2-core test VM.)
const CHUNK: usize = 1 << 20;

/// A file hashed as it is written, so the SHA-256 of a 470 MiB wheel costs no time on the writing
/// thread and no second pass afterwards: a helper thread reads each range back with `pread` right
/// after it is written (from the page cache) and hashes it. It only appends: a seek anywhere but
/// the current end is an error, which would show a zip writer that patches what it wrote.
struct HashedFile {
    file: File,
    pos: u64,
    /// How far the file is written, for the hasher.
    written: Option<SyncSender<u64>>,
    hasher: Option<JoinHandle<std::io::Result<[u8; 32]>>>,
}

impl HashedFile {
    fn new(file: File) -> std::io::Result<BufWriter<HashedFile>> {
        use std::os::unix::fs::FileExt;
        let reader = file.try_clone()?;
        let (written, ends) = std::sync::mpsc::sync_channel::<u64>(64);
        let hasher = std::thread::spawn(move || {
            let (mut h, mut buf, mut done) = (Sha256::new(), vec![0u8; CHUNK], 0u64);
            for end in ends {
                while done < end {
                    let want = usize::try_from(end - done).unwrap_or(CHUNK).min(CHUNK);
                    let n = reader.read_at(&mut buf[..want], done)?;
                    if n == 0 {
                        return Err(std::io::Error::other(
                            "the written file is shorter than what was written",
                        ));
                    }
                    h.update(&buf[..n]);
                    done += n as u64;
                }
            }
            Ok(h.finalize().into())
        });
        // The buffer in front makes `io::copy` of a raw stream read straight into it (std
        // specialises copies into a BufWriter) and hands whole chunks down.
        Ok(BufWriter::with_capacity(
            CHUNK,
            HashedFile {
                file,
                pos: 0,
                written: Some(written),
                hasher: Some(hasher),
            },
        ))
    }

    /// Everything written and hashed: the file, its length and its SHA-256.
    fn finish(w: BufWriter<HashedFile>) -> std::io::Result<(File, u64, [u8; 32])> {
        let mut this = w.into_inner().map_err(|e| e.into_error())?;
        let digest = this.stop_hasher()?;
        Ok((this.file, this.pos, digest))
    }

    /// Tell the hasher nothing more comes, and take its digest or its error.
    fn stop_hasher(&mut self) -> std::io::Result<[u8; 32]> {
        drop(self.written.take());
        match self.hasher.take().map(|h| h.join()) {
            Some(Ok(digest)) => digest,
            _ => Err(std::io::Error::other("the hashing thread failed")),
        }
    }
}

impl Write for HashedFile {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(data)?;
        self.pos += n as u64;
        if self
            .written
            .as_ref()
            .is_none_or(|w| w.send(self.pos).is_err())
        {
            // The hasher gave up: its error is the one to report.
            return Err(self
                .stop_hasher()
                .err()
                .unwrap_or_else(|| std::io::Error::other("the hashing thread stopped")));
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Seek for HashedFile {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        match to {
            SeekFrom::Current(0) | SeekFrom::End(0) => Ok(self.pos),
            SeekFrom::Start(p) if p == self.pos => Ok(self.pos),
            other => Err(std::io::Error::other(format!(
                "a wheel is written front to back; the zip writer asked for {other:?}"
            ))),
        }
    }
}

#[cfg(test)]
// Tests read back the files they wrote; the opener guards the tool, not its tests.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    #[test]
    fn hashed_file_digest_is_the_files_and_seeking_back_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("f");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let mut w = HashedFile::new(f).unwrap();
        // More than one buffer's worth, in uneven pieces, so several ranges reach the hasher.
        let data: Vec<u8> = (0..(CHUNK * 2 + 12_345)).map(|i| (i % 251) as u8).collect();
        for piece in data.chunks(70_001) {
            w.write_all(piece).unwrap();
        }
        assert_eq!(w.stream_position().unwrap(), data.len() as u64);
        assert!(
            w.seek(SeekFrom::Start(0)).is_err(),
            "a seek back must be refused"
        );
        let (_, n, digest) = HashedFile::finish(w).unwrap();
        assert_eq!(n, data.len() as u64);
        assert_eq!(std::fs::read(&path).unwrap(), data);
        assert_eq!(digest, <[u8; 32]>::from(Sha256::digest(&data)));
    }
}
