//! Opening an input: sniff the compression from magic bytes, decompress on a reader thread
//! so that inflating a `.gz` overlaps with parsing, and count compressed bytes for progress.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;

/// Bytes handed from the reader thread to the parser at a time.
pub const CHUNK: usize = 4 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    pub fn sniff(head: &[u8]) -> Compression {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }
}

/// Counts bytes read from the file on disk.
struct Counting<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A decompressing reader over a file.
pub fn open(
    path: &Path,
    disk_read: Arc<AtomicU64>,
) -> io::Result<(Box<dyn Read + Send>, Compression)> {
    let mut f = File::open(path)?;
    let mut head = [0u8; 4];
    let n = read_full(&mut f, &mut head)?;
    let comp = Compression::sniff(&head[..n]);
    let f = File::open(path)?;
    let counted = Counting {
        inner: f,
        read: disk_read,
    };
    let r: Box<dyn Read + Send> = match comp {
        Compression::None => Box::new(counted),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(
            1 << 20,
            counted,
        ))),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(counted)?),
    };
    Ok((r, comp))
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Chunks of the decompressed stream, produced on a separate thread.
pub struct Chunks {
    rx: Receiver<io::Result<Vec<u8>>>,
    pub compression: Compression,
}

impl Chunks {
    pub fn open(path: &Path, disk_read: Arc<AtomicU64>) -> io::Result<Chunks> {
        let (mut r, compression) = open(path, disk_read)?;
        let (tx, rx) = sync_channel(2);
        std::thread::spawn(move || loop {
            let mut buf = vec![0u8; CHUNK];
            let res = read_full(&mut r, &mut buf).map(|n| {
                buf.truncate(n);
                buf
            });
            let stop = !matches!(&res, Ok(b) if !b.is_empty());
            if tx.send(res).is_err() || stop {
                return;
            }
        });
        Ok(Chunks { rx, compression })
    }

    /// The next chunk; `Ok(None)` at the end of the stream.
    pub fn next_chunk(&mut self) -> io::Result<Option<Vec<u8>>> {
        match self.rx.recv() {
            Ok(Ok(b)) if b.is_empty() => Ok(None),
            Ok(Ok(b)) => Ok(Some(b)),
            Ok(Err(e)) => Err(e),
            Err(_) => Ok(None),
        }
    }
}
