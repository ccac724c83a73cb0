//! Opening an input: sniff the compression from magic bytes, decompress on a reader thread
//! so that inflating a `.gz` overlaps with parsing, and count compressed bytes for progress.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use crate::error::{IngestError, Result};

/// Size and modification time (ns since the epoch) of a file.
pub(crate) fn stat(path: &Path) -> Result<(u64, i64)> {
    let m = std::fs::metadata(path).map_err(|e| IngestError::io(path, e))?;
    let mtime = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as i64);
    Ok((m.len(), mtime))
}

/// xxh3-128 of the file's bytes, as 32 hex digits.
pub(crate) fn content_hash(path: &Path) -> Result<(String, u64)> {
    let mut f = std::fs::File::open(path).map_err(|e| IngestError::io(path, e))?;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf).map_err(|e| IngestError::io(path, e))?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    Ok((format!("{:032x}", h.digest128()), n))
}

/// The content hash of an input: its file's, or for a group read as one (a rocprofv3 CSV
/// group), every file's with its name, in order. The manifest and every reader use this one
/// rule, so a re-ingest recognises an unchanged input.
pub(crate) fn hash_files(path: &Path, siblings: &[std::path::PathBuf]) -> Result<String> {
    if siblings.is_empty() {
        return content_hash(path).map(|h| h.0);
    }
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for f in std::iter::once(path).chain(siblings.iter().map(|p| p.as_path())) {
        let (one, _) = content_hash(f)?;
        h.update(f.file_name().unwrap_or_default().as_encoded_bytes());
        h.update(one.as_bytes());
    }
    Ok(format!("{:032x}", h.digest128()))
}

/// Bytes handed from the reader thread to the parser at a time.
pub(crate) const CHUNK: usize = 4 << 20;

/// How a file's bytes are compressed, told by its first bytes (never by its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compression {
    None,
    Gzip,
    Zstd,
    Xz,
    Bzip2,
    /// A container or compression aorta does not read, by name (`lz4`, `zip`, `7z`).
    Unsupported(&'static str),
}

/// Magic bytes → compression, checked in order.
const MAGIC: &[(&[u8], Compression)] = &[
    (&[0x1f, 0x8b], Compression::Gzip),
    (&[0x28, 0xb5, 0x2f, 0xfd], Compression::Zstd),
    (&[0xfd, b'7', b'z', b'X', b'Z', 0x00], Compression::Xz),
    (b"BZh", Compression::Bzip2),
    (&[0x04, 0x22, 0x4d, 0x18], Compression::Unsupported("lz4")),
    (b"PK\x03\x04", Compression::Unsupported("zip")),
    (
        &[b'7', b'z', 0xbc, 0xaf, 0x27, 0x1c],
        Compression::Unsupported("7z"),
    ),
];

/// Bytes `Compression::sniff` looks at.
pub(crate) const MAGIC_LEN: usize = 6;

impl Compression {
    pub(crate) fn sniff(head: &[u8]) -> Compression {
        MAGIC
            .iter()
            .find(|(m, _)| head.starts_with(m))
            .map_or(Compression::None, |&(_, c)| c)
    }
}

/// The content hash of a file, fed by whichever pass reads its bytes from disk.
pub(crate) type Hasher = Arc<Mutex<xxhash_rust::xxh3::Xxh3>>;

/// Counts (and optionally hashes) bytes read from the file on disk.
struct Counting<R> {
    inner: R,
    read: Arc<AtomicU64>,
    hash: Option<Hasher>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        if let Some(h) = &self.hash {
            h.lock().expect("hasher not poisoned").update(&buf[..n]);
        }
        Ok(n)
    }
}

/// xxh3-128 of what a `Hasher` saw, as 32 hex digits.
pub(crate) fn digest(h: &Hasher) -> String {
    format!(
        "{:032x}",
        h.lock().expect("hasher not poisoned").digest128()
    )
}

/// A decompressing reader over a file.
pub(crate) fn open(
    path: &Path,
    disk_read: Arc<AtomicU64>,
) -> io::Result<(Box<dyn Read + Send>, Compression)> {
    open_hashed(path, disk_read, None)
}

/// Like `open`, feeding the on-disk bytes to `hash` as they are read.
pub(crate) fn open_hashed(
    path: &Path,
    disk_read: Arc<AtomicU64>,
    hash: Option<Hasher>,
) -> io::Result<(Box<dyn Read + Send>, Compression)> {
    let (f, comp) = sniff_file(path)?;
    Ok((decoder(f, comp, disk_read, hash)?, comp))
}

/// Opens `path` and sniffs its compression from the magic bytes; the file is rewound.
pub(crate) fn sniff_file(path: &Path) -> io::Result<(File, Compression)> {
    let mut f = File::open(path)?;
    let mut head = [0u8; MAGIC_LEN];
    let n = read_full(&mut f, &mut head)?;
    f.rewind()?;
    Ok((f, Compression::sniff(&head[..n])))
}

/// The decompressed bytes of `f`, counting (and hashing) the on-disk ones.
fn decoder(
    f: File,
    comp: Compression,
    disk_read: Arc<AtomicU64>,
    hash: Option<Hasher>,
) -> io::Result<Box<dyn Read + Send>> {
    let counted = Counting {
        inner: f,
        read: disk_read,
        hash,
    };
    Ok(match comp {
        Compression::None => Box::new(counted),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(
            1 << 20,
            counted,
        ))),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(counted)?),
        Compression::Xz => Box::new(liblzma::read::XzDecoder::new_multi_decoder(
            BufReader::with_capacity(1 << 20, counted),
        )),
        Compression::Bzip2 => Box::new(bzip2::read::MultiBzDecoder::new(
            BufReader::with_capacity(1 << 20, counted),
        )),
        Compression::Unsupported(what) => {
            return Err(io::Error::other(format!(
                "{what}-compressed: aorta reads plain, gzip, zstd, xz and bzip2 files; decompress it first"
            )))
        }
    })
}

/// Reads until `buf` is full or the input ends; the bytes read.
pub(crate) fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Most bytes a decompressor produces per read call.
pub(crate) const READ_CAP: usize = 64 << 10;

/// Caps each read at `READ_CAP`: a decoder that fails drops what the failing call produced,
/// so this bounds how far before the damage an error's offset can land.
struct Capped<R>(R);

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(READ_CAP);
        self.0.read(&mut buf[..n])
    }
}

/// The decompressed stream, appended to the caller's buffer a chunk at a time.
///
/// Plain files are read straight into that buffer (no copy, no thread). Compressed ones are
/// inflated on a separate thread so decompression overlaps parsing; its buffers come back
/// through a return channel, so steady state allocates nothing.
pub(crate) enum Chunks {
    Plain(Box<dyn Read + Send>),
    Threaded {
        rx: Receiver<io::Result<Vec<u8>>>,
        back: SyncSender<Vec<u8>>,
    },
}

impl Chunks {
    /// The chunks of `f` (already sniffed as `compression`).
    pub(crate) fn new(
        f: File,
        compression: Compression,
        disk_read: Arc<AtomicU64>,
        hash: Option<Hasher>,
    ) -> io::Result<Chunks> {
        let mut r = decoder(f, compression, disk_read, hash)?;
        if compression == Compression::None {
            return Ok(Chunks::Plain(r));
        }
        let (tx, rx) = sync_channel(2);
        let (back, spare) = sync_channel::<Vec<u8>>(4);
        std::thread::spawn(move || loop {
            let mut buf = spare.try_recv().unwrap_or_default();
            buf.clear();
            match Capped(&mut r).take(CHUNK as u64).read_to_end(&mut buf) {
                Ok(_) => {
                    let stop = buf.is_empty();
                    if tx.send(Ok(buf)).is_err() || stop {
                        return;
                    }
                }
                Err(e) => {
                    // The bytes inflated before the failure (read_to_end keeps them) go first,
                    // so the error's offset is where the stream broke, not this chunk's start.
                    if !buf.is_empty() && tx.send(Ok(buf)).is_err() {
                        return;
                    }
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        });
        Ok(Chunks::Threaded { rx, back })
    }

    /// Appends the next chunk to `buf`; `Ok(false)` at the end of the stream.
    pub(crate) fn next_into(&mut self, buf: &mut Vec<u8>) -> io::Result<bool> {
        match self {
            Chunks::Plain(r) => Ok(r.take(CHUNK as u64).read_to_end(buf)? > 0),
            Chunks::Threaded { rx, back } => match rx.recv() {
                Ok(Ok(b)) if b.is_empty() => Ok(false),
                Ok(Ok(b)) => {
                    buf.extend_from_slice(&b);
                    let _ = back.try_send(b);
                    Ok(true)
                }
                Ok(Err(e)) => Err(e),
                Err(_) => Ok(false),
            },
        }
    }
}
