//! RCCL kernels waiting for their collective (the JSON reader).
//!
//! Why: rocprofv3's JSON puts a process's dispatches before its `rccl_api` records, and an
//! `ncclDevKernel_Generic` kernel's collective is that of the RCCL call around its launch,
//! so such a kernel can only be written once the process's API records are read. Only these
//! kernels wait, each as the 13 integers a row needs (112 bytes); past `IN_MEMORY` of them
//! the rest wait in an unnamed temporary file in the run's staging directory (in the page
//! cache, not the process), so memory stays bounded whatever the number of RCCL kernels.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use bytemuck::{Pod, Zeroable};

use super::records::Rec;
use crate::source::read_full;

/// Held kernels kept in memory before the rest go to the file (7 MB).
const IN_MEMORY: usize = 1 << 16;

/// A held dispatch: the fields of `Rec` a kernel row uses, `present` saying which are set.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
struct HeldRec {
    vals: [i64; 13],
    present: u64,
}

impl HeldRec {
    fn of(r: &Rec) -> HeldRec {
        let fields = fields(r);
        let mut h = HeldRec::zeroed();
        for (i, v) in fields.iter().enumerate() {
            if let Some(v) = v {
                h.vals[i] = *v;
                h.present |= 1 << i;
            }
        }
        h
    }

    fn rec(&self) -> Rec {
        let v = |i: usize| (self.present & (1 << i) != 0).then_some(self.vals[i]);
        Rec {
            kernel_id: v(0),
            corr: v(1),
            ext: v(2),
            start: v(3),
            end: v(4),
            agent: v(5),
            stream: v(6),
            grid: [v(7), v(8), v(9)],
            workgroup: [v(10), v(11), v(12)],
            ..Rec::default()
        }
    }
}

/// The fields kept, in `HeldRec` order.
fn fields(r: &Rec) -> [Option<i64>; 13] {
    let [g0, g1, g2] = r.grid;
    let [w0, w1, w2] = r.workgroup;
    [
        r.kernel_id,
        r.corr,
        r.ext,
        r.start,
        r.end,
        r.agent,
        r.stream,
        g0,
        g1,
        g2,
        w0,
        w1,
        w2,
    ]
}

/// The kernels held, in the order they came.
pub(super) struct Held {
    dir: PathBuf,
    mem: Vec<HeldRec>,
    file: Option<File>,
}

impl Held {
    /// Holds kernels, spilling into `dir` when they are many.
    pub(super) fn new(dir: &Path) -> Held {
        Held {
            dir: dir.to_path_buf(),
            mem: Vec::new(),
            file: None,
        }
    }

    pub(super) fn push(&mut self, r: &Rec) -> io::Result<()> {
        self.mem.push(HeldRec::of(r));
        if self.mem.len() >= IN_MEMORY {
            let f = match &mut self.file {
                Some(f) => f,
                None => self.file.insert(tempfile::tempfile_in(&self.dir)?),
            };
            f.write_all(bytemuck::cast_slice(&self.mem))?;
            self.mem.clear();
        }
        Ok(())
    }

    /// The kernels held so far, leaving this empty.
    pub(super) fn take(&mut self) -> Held {
        Held {
            dir: self.dir.clone(),
            mem: std::mem::take(&mut self.mem),
            file: self.file.take(),
        }
    }

    /// Hands every held kernel to `f`, in order, and forgets them; a failure to read the
    /// file back becomes `io_err`'s error.
    pub(super) fn drain<E>(
        &mut self,
        mut f: impl FnMut(&Rec) -> Result<(), E>,
        io_err: impl Fn(io::Error) -> E,
    ) -> Result<(), E> {
        if let Some(mut file) = self.file.take() {
            file.seek(SeekFrom::Start(0)).map_err(&io_err)?;
            let mut chunk = vec![HeldRec::zeroed(); IN_MEMORY];
            loop {
                let bytes = bytemuck::cast_slice_mut(&mut chunk);
                let n = read_full(&mut file, bytes).map_err(&io_err)?;
                let n = n / std::mem::size_of::<HeldRec>();
                for h in &chunk[..n] {
                    f(&h.rec())?;
                }
                if n < IN_MEMORY {
                    break;
                }
            }
        }
        for h in std::mem::take(&mut self.mem) {
            f(&h.rec())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kernels held past the memory limit come back from the file, all of them, in order,
    /// with every field as it was.
    #[test]
    fn kernels_come_back_in_order_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut held = Held::new(dir.path());
        let n = IN_MEMORY * 2 + 17;
        let rec = |i: i64| Rec {
            kernel_id: Some(i % 7),
            corr: Some(i),
            ext: (i % 3 == 0).then_some(i * 10),
            start: Some(1000 + i),
            end: Some(2000 + i),
            agent: Some(20),
            stream: None,
            grid: [Some(i), Some(1), None],
            workgroup: [Some(256), None, Some(1)],
            ..Rec::default()
        };
        for i in 0..n as i64 {
            held.push(&rec(i)).unwrap();
        }
        assert!(held.file.is_some() && held.mem.len() == 17);
        let mut got = Vec::new();
        let mut taken = held.take();
        assert!(held.file.is_none() && held.mem.is_empty(), "taken whole");
        taken
            .drain(
                |r| {
                    got.push(format!("{r:?}"));
                    Ok(())
                },
                |e| e,
            )
            .unwrap();
        let want: Vec<String> = (0..n as i64).map(|i| format!("{:?}", rec(i))).collect();
        assert_eq!(got, want);
        let mut again = 0;
        taken
            .drain(
                |_| {
                    again += 1;
                    Ok(())
                },
                |e| e,
            )
            .unwrap();
        assert_eq!(again, 0, "drained once");
    }
}
