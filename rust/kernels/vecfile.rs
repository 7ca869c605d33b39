//! The vector file: L2-normalised f32 rows, memory-mapped, with the row ->
//! memory id map and an int8 copy beside it.
//!
//! Three files share a stem (`path`, `path.ids`, `path.q8`):
//!
//! ```text
//! path       header (4096 bytes) then rows: count x dim f32 LE, row-major
//!   0  8  magic  b"CTXVEC\0\x01"
//!   8  4  version u32 (FORMAT_VERSION)
//!  12  4  header_len u32 (4096)
//!  16  4  dim u32
//!  20  4  dtype u32 (1 = f32)
//!  24 16  uuid: random, repeated in the side files so that mixed-up files are caught
//!  40  4  model_id length u32 (<= 256)
//!  44 256 model_id UTF-8, zero padded
//! 504  8  FNV-1a 64 of bytes 0..504 (the immutable part)
//! 512  8  count u64: committed rows (the only field that changes)
//! 520  8  !count (a torn or corrupt count is detected)
//! path.ids   64-byte side header, then per row: memory id i64 LE, flags u64 LE
//!            (bit 0 = masked: deleted or superseded; never returned)
//! path.q8    64-byte side header, then per row: scale f32 LE, dim x u8 (see quant.rs)
//! side header: magic 8, version u32, header_len u32 (64), uuid 16, dim u32,
//!              reserved 20, FNV-1a 64 of bytes 0..56 at 56
//! ```
//!
//! The writer appends rows, ids and int8 records past the committed count and
//! then publishes the new count in the main header; readers map the files
//! read-only (shared pages, no copy) and see appended rows after `refresh`.
//! Bytes past the committed count (an interrupted append) are ignored and
//! overwritten by the next append. The int8 copy is derived data: when it is
//! missing, stale or damaged, the writer rebuilds it, and a reader scans the
//! rows it does not cover in f32.
//!
//! Only one writer at a time: it holds an exclusive `flock` on the main file.
//! `create` writes new files under temporary names and renames them into
//! place, so a reader keeps its (old) mapping valid: a mapped file is never
//! truncated under a reader by cortex. (Truncating it by other means would
//! still raise SIGBUS in a reader; that is the nature of mmap.)
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use memmap2::Mmap;

use super::quant;
use crate::errors::{Error, Result};

pub const MAGIC: &[u8; 8] = b"CTXVEC\0\x01";
pub const IDS_MAGIC: &[u8; 8] = b"CTXIDS\0\x01";
pub const Q8_MAGIC: &[u8; 8] = b"CTXQ8\0\0\x01";
pub const FORMAT_VERSION: u32 = 1;
pub const HEADER_LEN: usize = 4096;
pub const SIDE_HEADER_LEN: usize = 64;
pub const MAX_MODEL_ID: usize = 256;
pub const MAX_DIM: usize = 65_536;
const COUNT_AT: usize = 512;
const CHECKSUM_AT: usize = 504;
const SIDE_CHECKSUM_AT: usize = 56;
const ID_RECORD: usize = 16;
const FLAG_MASKED: u64 = 1;

/// FNV-1a 64: enough to tell a damaged header from a good one.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

pub fn ids_path(path: &Path) -> PathBuf {
    suffixed(path, ".ids")
}

pub fn q8_path(path: &Path) -> PathBuf {
    suffixed(path, ".q8")
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// The immutable facts of the main header.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    pub dim: usize,
    pub model_id: String,
    pub uuid: [u8; 16],
}

impl Header {
    fn encode(&self) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_LEN];
        h[0..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
        h[16..20].copy_from_slice(&(self.dim as u32).to_le_bytes());
        h[20..24].copy_from_slice(&1u32.to_le_bytes());
        h[24..40].copy_from_slice(&self.uuid);
        let m = self.model_id.as_bytes();
        h[40..44].copy_from_slice(&(m.len() as u32).to_le_bytes());
        h[44..44 + m.len()].copy_from_slice(m);
        let sum = fnv1a(&h[..CHECKSUM_AT]);
        h[CHECKSUM_AT..CHECKSUM_AT + 8].copy_from_slice(&sum.to_le_bytes());
        h[COUNT_AT..COUNT_AT + 8].copy_from_slice(&0u64.to_le_bytes());
        h[COUNT_AT + 8..COUNT_AT + 16].copy_from_slice(&(!0u64).to_le_bytes());
        h
    }

    /// Parse and check a main header. Every failure names the file and the fix.
    pub fn decode(b: &[u8], path: &Path) -> Result<Header> {
        let fix = "delete it and rebuild the index (`cortex reindex`)";
        let bad = |what: &str| Error::Format(format!("{}: {what}; {fix}", path.display()));
        if b.len() < 8 || &b[0..8] != MAGIC {
            return Err(bad("not a cortex vector file (wrong magic)"));
        }
        if b.len() < HEADER_LEN {
            return Err(bad(&format!(
                "truncated header ({} of {HEADER_LEN} bytes)",
                b.len()
            )));
        }
        let version = u32_at(b, 8);
        if version != FORMAT_VERSION {
            return Err(bad(&format!(
                "format version {version}, this cortex reads version {FORMAT_VERSION}"
            )));
        }
        if fnv1a(&b[..CHECKSUM_AT]) != u64_at(b, CHECKSUM_AT) {
            return Err(bad("header checksum mismatch (the header is corrupt)"));
        }
        let header_len = u32_at(b, 12) as usize;
        let dim = u32_at(b, 16) as usize;
        let dtype = u32_at(b, 20);
        let mlen = u32_at(b, 40) as usize;
        if header_len != HEADER_LEN
            || dtype != 1
            || dim == 0
            || dim > MAX_DIM
            || mlen > MAX_MODEL_ID
        {
            return Err(bad("header fields out of range"));
        }
        let model_id = std::str::from_utf8(&b[44..44 + mlen])
            .map_err(|_| bad("model id is not UTF-8"))?
            .to_owned();
        let uuid = b[24..40].try_into().expect("16 bytes");
        Ok(Header {
            dim,
            model_id,
            uuid,
        })
    }

    fn side(&self, magic: &[u8; 8]) -> [u8; SIDE_HEADER_LEN] {
        let mut h = [0u8; SIDE_HEADER_LEN];
        h[0..8].copy_from_slice(magic);
        h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&(SIDE_HEADER_LEN as u32).to_le_bytes());
        h[16..32].copy_from_slice(&self.uuid);
        h[32..36].copy_from_slice(&(self.dim as u32).to_le_bytes());
        let sum = fnv1a(&h[..SIDE_CHECKSUM_AT]);
        h[SIDE_CHECKSUM_AT..].copy_from_slice(&sum.to_le_bytes());
        h
    }

    /// Does `b` start with this index's side header of kind `magic`?
    fn side_matches(&self, magic: &[u8; 8], b: &[u8]) -> bool {
        b.len() >= SIDE_HEADER_LEN && b[..SIDE_HEADER_LEN] == self.side(magic)
    }
}

/// Read the committed count from a mapped main header (volatile: the writer
/// changes it under us). `None` if the two copies disagree (torn or corrupt).
fn read_count(map: &[u8]) -> Option<u64> {
    debug_assert!(map.len() >= HEADER_LEN);
    // SAFETY: COUNT_AT and COUNT_AT + 8 are 8-aligned offsets inside the header,
    // which is inside the page-aligned mapping; volatile because another process
    // may write these bytes at any time.
    let (c, check) = unsafe {
        let p = map.as_ptr().add(COUNT_AT) as *const u64;
        (
            std::ptr::read_volatile(p),
            std::ptr::read_volatile(p.add(1)),
        )
    };
    let (c, check) = (u64::from_le(c), u64::from_le(check));
    (c == !check).then_some(c)
}

fn overflow(path: &Path, count: usize) -> Error {
    Error::Format(format!(
        "{}: row count {count} is impossible (corrupt header); delete it and rebuild the index \
         (`cortex reindex`)",
        path.display()
    ))
}

fn random_uuid() -> [u8; 16] {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut out = [0u8; 16];
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(i as u64);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        h.write_u32(std::process::id());
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    out
}

fn map(file: &File, path: &Path) -> Result<Mmap> {
    // SAFETY: the mapping is read-only and shared. cortex never truncates a
    // file a reader may have mapped (`create` renames new files into place),
    // and the bytes a reader looks at (below the committed count) are never
    // rewritten, except the flags word of a masked row, read volatile.
    unsafe { Mmap::map(file) }.map_err(|e| Error::io("map", path, e))
}

/// Exclusive advisory lock for the one writer.
fn lock_exclusive(file: &File, path: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor we own; no memory is involved.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(Error::Storage(format!(
            "{} is open for writing in another process or handle; close it first \
             (one writer at a time), or open with writable=False to search",
            path.display()
        )));
    }
    Ok(())
}

/// (rows covered, (memory id, row) sorted by id then row).
type IdTable = (usize, Vec<(i64, u32)>);

struct Writer {
    main: File,
    ids: File,
    q8: File,
    /// memory id -> rows holding it that are not masked (at most one after an append).
    live: HashMap<i64, u32>,
}

/// An open vector file.
pub struct VecFile {
    path: PathBuf,
    header: Header,
    main_file: File,
    ids_file: File,
    q8_file: Option<File>,
    main: Mmap,
    ids: Mmap,
    q8: Option<Mmap>,
    count: usize,
    writer: Option<Writer>,
    /// (memory id, row) sorted, for mapping `allowed` ids to rows; built lazily.
    by_id: Mutex<Option<IdTable>>,
}

impl VecFile {
    /// Create an empty index at `path` (replacing any present), open for writing.
    pub fn create(path: &Path, dim: usize, model_id: &str) -> Result<VecFile> {
        if dim == 0 || dim > MAX_DIM {
            return Err(Error::Invalid(format!(
                "dim must be in 1..={MAX_DIM}, got {dim}"
            )));
        }
        if model_id.len() > MAX_MODEL_ID {
            return Err(Error::Invalid(format!(
                "model_id is {} bytes; at most {MAX_MODEL_ID}",
                model_id.len()
            )));
        }
        let header = Header {
            dim,
            model_id: model_id.to_owned(),
            uuid: random_uuid(),
        };
        let tmp = |p: &Path| suffixed(p, &format!(".tmp{}", std::process::id()));
        let parts: [(PathBuf, Vec<u8>); 3] = [
            (ids_path(path), header.side(IDS_MAGIC).to_vec()),
            (q8_path(path), header.side(Q8_MAGIC).to_vec()),
            (path.to_path_buf(), header.encode()),
        ];
        for (p, bytes) in &parts {
            let t = tmp(p);
            std::fs::write(&t, bytes).map_err(|e| Error::io("write", &t, e))?;
        }
        // Side files first: a reader that opens between two renames sees a
        // uuid mismatch (an error it can retry), never a wrong pairing.
        for (p, _) in &parts {
            std::fs::rename(tmp(p), p).map_err(|e| Error::io("rename into", p, e))?;
        }
        VecFile::open(path, true)
    }

    /// Open an existing index; `writable` takes the writer lock.
    pub fn open(path: &Path, writable: bool) -> Result<VecFile> {
        let main_file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Error::Storage(format!(
                    "no vector index at {}; create it with VectorIndex.create(path, dim, model_id)",
                    path.display()
                )),
                _ => Error::io("open", path, e),
            })?;
        if writable {
            lock_exclusive(&main_file, path)?;
        }
        let main = map(&main_file, path)?;
        let header = Header::decode(&main, path)?;
        let ip = ids_path(path);
        let ids_file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(&ip)
            .map_err(|e| {
                Error::Format(format!(
                    "{}: cannot open the id map {} ({e}); rebuild the index (`cortex reindex`)",
                    path.display(),
                    ip.display()
                ))
            })?;
        let ids = map(&ids_file, &ip)?;
        if !header.side_matches(IDS_MAGIC, &ids) {
            return Err(Error::Format(format!(
                "{} does not belong to {} (wrong magic, version or uuid); rebuild the index \
                 (`cortex reindex`)",
                ip.display(),
                path.display()
            )));
        }
        let qp = q8_path(path);
        let q8_file = OpenOptions::new()
            .read(true)
            .write(writable)
            .create(writable)
            .truncate(false)
            .open(&qp)
            .ok();
        let q8 = match &q8_file {
            Some(f) => map(f, &qp)
                .ok()
                .filter(|m| header.side_matches(Q8_MAGIC, m)),
            None => None,
        };
        let mut vf = VecFile {
            path: path.to_path_buf(),
            header,
            main_file,
            ids_file,
            q8_file,
            main,
            ids,
            q8,
            count: 0,
            writer: None,
            by_id: Mutex::new(None),
        };
        vf.refresh()?;
        if writable {
            vf.start_writer()?;
        }
        Ok(vf)
    }

    fn start_writer(&mut self) -> Result<()> {
        let mut live = HashMap::with_capacity(self.count);
        for r in 0..self.count {
            let (id, flags) = self.id_record(r);
            if flags & FLAG_MASKED == 0 {
                live.insert(id, r as u32);
            }
        }
        let qp = q8_path(&self.path);
        let q8 = self
            .q8_file
            .take()
            .ok_or_else(|| Error::Storage(format!("cannot open {} for writing", qp.display())))?;
        self.writer = Some(Writer {
            main: self
                .main_file
                .try_clone()
                .map_err(|e| Error::io("reopen", &self.path, e))?,
            ids: self
                .ids_file
                .try_clone()
                .map_err(|e| Error::io("reopen", &self.path, e))?,
            q8,
            live,
        });
        if self.q8.is_none() || self.q8_rows() < self.count {
            self.rebuild_q8()?;
        }
        Ok(())
    }

    pub fn dim(&self) -> usize {
        self.header.dim
    }
    pub fn model_id(&self) -> &str {
        &self.header.model_id
    }
    pub fn count(&self) -> usize {
        self.count
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn writable(&self) -> bool {
        self.writer.is_some()
    }

    fn row_bytes(&self) -> usize {
        self.header.dim * 4
    }

    /// Re-read the committed count and map what was appended since. Cheap when
    /// nothing changed (one volatile read).
    pub fn refresh(&mut self) -> Result<()> {
        let mut count = None;
        for _ in 0..100 {
            if let Some(c) = read_count(&self.main) {
                count = Some(c);
                break;
            }
            std::thread::yield_now();
        }
        let count = count.ok_or_else(|| {
            Error::Format(format!(
                "{}: row count is corrupt; delete it and rebuild the index (`cortex reindex`)",
                self.path.display()
            ))
        })?;
        let count = usize::try_from(count).map_err(|_| overflow(&self.path, usize::MAX))?;
        let need_main = count
            .checked_mul(self.row_bytes())
            .and_then(|b| b.checked_add(HEADER_LEN))
            .ok_or_else(|| overflow(&self.path, count))?;
        let need_ids = count
            .checked_mul(ID_RECORD)
            .and_then(|b| b.checked_add(SIDE_HEADER_LEN))
            .ok_or_else(|| overflow(&self.path, count))?;
        if self.main.len() < need_main {
            self.main = map(&self.main_file, &self.path)?;
        }
        if self.ids.len() < need_ids {
            self.ids = map(&self.ids_file, &ids_path(&self.path))?;
        }
        if self.main.len() < need_main || self.ids.len() < need_ids {
            return Err(Error::Format(format!(
                "{}: truncated: the header says {count} rows but the files hold {} rows and {} ids; \
                 rebuild the index (`cortex reindex`)",
                self.path.display(),
                (self.main.len().saturating_sub(HEADER_LEN)) / self.row_bytes(),
                self.ids.len().saturating_sub(SIDE_HEADER_LEN) / ID_RECORD
            )));
        }
        if count != self.count {
            self.count = count;
            // The int8 copy grows with the rows; remap it to see the new records.
            let stride = quant::record_len(self.header.dim);
            let want = SIDE_HEADER_LEN + count * stride;
            if self.q8.as_ref().map_or(true, |m| m.len() < want) && self.writer.is_none() {
                // The copy may have been rebuilt (renamed into place) since we
                // mapped it: map it again by path. Not covering every row is
                // fine: the rows past it are scanned in f32.
                let qp = q8_path(&self.path);
                if let Ok(f) = File::open(&qp) {
                    if let Some(m) = map(&f, &qp)
                        .ok()
                        .filter(|m| self.header.side_matches(Q8_MAGIC, m))
                    {
                        if m.len() >= self.q8.as_ref().map_or(0, |o| o.len()) {
                            self.q8 = Some(m);
                            self.q8_file = Some(f);
                        }
                    }
                }
            } else if let (true, Some(w)) = (
                self.q8.as_ref().map_or(true, |m| m.len() < want),
                &self.writer,
            ) {
                self.q8 = map(&w.q8, &q8_path(&self.path))
                    .ok()
                    .filter(|m| self.header.side_matches(Q8_MAGIC, m));
            }
        }
        Ok(())
    }

    /// The committed rows, `count * dim` f32.
    pub fn rows(&self) -> &[f32] {
        let bytes = &self.main[HEADER_LEN..HEADER_LEN + self.count * self.row_bytes()];
        // SAFETY: the mapping is page aligned and HEADER_LEN is 4096, so `bytes`
        // is 4-aligned; its length is a multiple of 4; every bit pattern is a
        // valid f32; the slice borrows `self`, which owns the mapping.
        unsafe { std::slice::from_raw_parts(bytes.as_ptr() as *const f32, bytes.len() / 4) }
    }

    /// The int8 records covering rows `0..q8_rows()`.
    pub fn q8(&self) -> &[u8] {
        let n = self.q8_rows();
        match &self.q8 {
            Some(m) => {
                &m[SIDE_HEADER_LEN..SIDE_HEADER_LEN + n * quant::record_len(self.header.dim)]
            }
            None => &[],
        }
    }

    /// Rows covered by the int8 copy.
    pub fn q8_rows(&self) -> usize {
        let stride = quant::record_len(self.header.dim);
        self.q8.as_ref().map_or(0, |m| {
            (m.len().saturating_sub(SIDE_HEADER_LEN) / stride).min(self.count)
        })
    }

    /// (memory id, flags) of `row`.
    fn id_record(&self, row: usize) -> (i64, u64) {
        let at = SIDE_HEADER_LEN + row * ID_RECORD;
        let id = i64::from_le_bytes(self.ids[at..at + 8].try_into().expect("8 bytes"));
        (id, self.flags(row))
    }

    fn flags(&self, row: usize) -> u64 {
        let at = SIDE_HEADER_LEN + row * ID_RECORD + 8;
        assert!(at + 8 <= self.ids.len());
        // SAFETY: in bounds (asserted); the ids mapping is page aligned and
        // records are 16 bytes after a 64-byte header, so `at` is 8-aligned.
        // Volatile: the writer sets the flag in another process.
        u64::from_le(unsafe { std::ptr::read_volatile(self.ids.as_ptr().add(at) as *const u64) })
    }

    /// The memory id of `row` (< count).
    pub fn id(&self, row: u32) -> i64 {
        self.id_record(row as usize).0
    }

    /// Is `row` live (not masked)?
    pub fn is_live(&self, row: u32) -> bool {
        self.flags(row as usize) & FLAG_MASKED == 0
    }

    /// Live rows.
    pub fn live_count(&self) -> usize {
        (0..self.count).filter(|r| self.is_live(*r as u32)).count()
    }

    /// Rows holding any of `ids` (masked ones included; the scan skips them),
    /// ascending.
    pub fn rows_for_ids(&self, ids: &[i64]) -> Vec<u32> {
        let mut guard = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        let stale = guard.as_ref().map_or(true, |(n, _)| *n != self.count);
        if stale {
            let (start, mut table) = match guard.take() {
                Some((n, t)) if n <= self.count => (n, t),
                _ => (0, Vec::with_capacity(self.count)),
            };
            let sorted_before = table.len();
            for r in start..self.count {
                table.push((self.id(r as u32), r as u32));
            }
            // Ids usually arrive in increasing order: then the table stays sorted.
            let still_sorted = table
                .windows(2)
                .skip(sorted_before.saturating_sub(1))
                .all(|w| w[0] <= w[1]);
            if !still_sorted {
                table.sort_unstable();
            }
            *guard = Some((self.count, table));
        }
        let table = &guard.as_ref().expect("built above").1;
        let mut out = Vec::with_capacity(ids.len());
        let sorted = ids.windows(2).all(|w| w[0] <= w[1]);
        // Every entry before `from` holds an id below the current one.
        let mut from = 0;
        for id in ids {
            let lo = if sorted {
                // Sorted ids (the usual case) gallop forward from the previous
                // hit: a few cache lines per id instead of a cold binary search
                // over the whole table.
                let mut bound = 1;
                while from + bound < table.len() && table[from + bound].0 < *id {
                    bound *= 2;
                }
                let end = (from + bound + 1).min(table.len());
                from + table[from..end].partition_point(|(i, _)| i < id)
            } else {
                table.partition_point(|(i, _)| i < id)
            };
            out.extend(
                table[lo..]
                    .iter()
                    .take_while(|(i, _)| i == id)
                    .map(|(_, r)| *r),
            );
            if sorted {
                from = lo;
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    fn writer(&mut self) -> Result<&mut Writer> {
        self.writer.as_mut().ok_or_else(|| {
            Error::State(
                "this vector index is open read-only; open it with writable=True to change it"
                    .into(),
            )
        })
    }

    /// Append rows (already validated: finite, L2-normalised, `ids.len()` rows).
    /// A memory id that already has a live row supersedes it: the old row is masked.
    pub fn append(&mut self, ids: &[i64], rows: &[f32]) -> Result<()> {
        let dim = self.header.dim;
        assert_eq!(rows.len(), ids.len() * dim);
        let n0 = self.count;
        let path = self.path.clone();
        let stride = quant::record_len(dim);
        let q8_ok = self.q8_rows() == n0;
        let w = self.writer()?;
        if ids.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::with_capacity(rows.len() * 4);
        for v in rows {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        w.main
            .write_all_at(&bytes, (HEADER_LEN + n0 * dim * 4) as u64)
            .map_err(|e| Error::io("append rows to", &path, e))?;
        let mut rec = Vec::with_capacity(ids.len() * ID_RECORD);
        for id in ids {
            rec.extend_from_slice(&id.to_le_bytes());
            rec.extend_from_slice(&0u64.to_le_bytes());
        }
        w.ids
            .write_all_at(&rec, (SIDE_HEADER_LEN + n0 * ID_RECORD) as u64)
            .map_err(|e| Error::io("append ids to", &ids_path(&path), e))?;
        if q8_ok {
            let mut q = vec![0u8; ids.len() * stride];
            for (r, out) in rows.chunks_exact(dim).zip(q.chunks_exact_mut(stride)) {
                quant::quantize_row(r, out);
            }
            w.q8.write_all_at(&q, (SIDE_HEADER_LEN + n0 * stride) as u64)
                .map_err(|e| Error::io("append to", &q8_path(&path), e))?;
        }
        // Publish: from here readers that refresh see the new rows.
        let n1 = (n0 + ids.len()) as u64;
        let mut c = [0u8; 16];
        c[..8].copy_from_slice(&n1.to_le_bytes());
        c[8..].copy_from_slice(&(!n1).to_le_bytes());
        w.main
            .write_all_at(&c, COUNT_AT as u64)
            .map_err(|e| Error::io("write", &path, e))?;
        // Supersede older rows of the same ids.
        let mut old = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            if let Some(prev) = w.live.insert(*id, (n0 + i) as u32) {
                old.push(prev);
            }
        }
        self.set_masked(&old)?;
        self.refresh()?;
        if !q8_ok {
            self.rebuild_q8()?;
        }
        Ok(())
    }

    fn set_masked(&mut self, rows: &[u32]) -> Result<()> {
        let path = ids_path(&self.path);
        let w = self.writer()?;
        for r in rows {
            let at = SIDE_HEADER_LEN + *r as usize * ID_RECORD + 8;
            w.ids
                .write_all_at(&FLAG_MASKED.to_le_bytes(), at as u64)
                .map_err(|e| Error::io("write", &path, e))?;
        }
        Ok(())
    }

    /// Mask the live rows of `ids`; returns how many rows were masked. Unknown
    /// ids are ignored (masking is idempotent).
    pub fn mask(&mut self, ids: &[i64]) -> Result<usize> {
        let w = self.writer()?;
        let rows: Vec<u32> = ids.iter().filter_map(|id| w.live.remove(id)).collect();
        self.set_masked(&rows)?;
        Ok(rows.len())
    }

    /// Rewrite the int8 copy from the f32 rows.
    pub fn rebuild_q8(&mut self) -> Result<()> {
        let dim = self.header.dim;
        let stride = quant::record_len(dim);
        let qp = q8_path(&self.path);
        let mut buf = Vec::with_capacity(SIDE_HEADER_LEN + self.count * stride);
        buf.extend_from_slice(&self.header.side(Q8_MAGIC));
        buf.resize(SIDE_HEADER_LEN + self.count * stride, 0);
        for (r, out) in self
            .rows()
            .chunks_exact(dim)
            .zip(buf[SIDE_HEADER_LEN..].chunks_exact_mut(stride))
        {
            quant::quantize_row(r, out);
        }
        // Renamed into place: a reader's mapping of the old copy stays valid.
        let tmp = suffixed(&qp, &format!(".tmp{}", std::process::id()));
        std::fs::write(&tmp, &buf).map_err(|e| Error::io("write", &tmp, e))?;
        std::fs::rename(&tmp, &qp).map_err(|e| Error::io("rename into", &qp, e))?;
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&qp)
            .map_err(|e| Error::io("open", &qp, e))?;
        self.q8 = Some(map(&f, &qp)?);
        self.writer()?.q8 = f;
        Ok(())
    }

    /// Flush the written bytes to disk (the index is derived data, so this is
    /// only needed to survive a power cut without a rebuild).
    pub fn sync(&self) -> Result<()> {
        if let Some(w) = &self.writer {
            for (f, p) in [
                (&w.main, self.path.clone()),
                (&w.ids, ids_path(&self.path)),
                (&w.q8, q8_path(&self.path)),
            ] {
                f.sync_data().map_err(|e| Error::io("sync", &p, e))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cortex-vecfile-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn unit(dim: usize, seed: usize) -> Vec<f32> {
        let mut v: Vec<f32> = (0..dim)
            .map(|i| ((i * 31 + seed * 17) % 13) as f32 - 6.0)
            .collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
        v.iter_mut().for_each(|x| *x /= n);
        v
    }

    #[test]
    fn create_append_reopen_refresh_mask() {
        let dir = tmpdir("basic");
        let p = dir.join("v.cvx");
        let dim = 40;
        let mut w = VecFile::create(&p, dim, "test-model").unwrap();
        assert_eq!((w.count(), w.dim(), w.model_id()), (0, dim, "test-model"));
        let rows: Vec<f32> = (0..5).flat_map(|i| unit(dim, i)).collect();
        w.append(&[10, 11, 12, 13, 14], &rows).unwrap();
        assert_eq!(w.count(), 5);
        assert_eq!(w.q8_rows(), 5);

        let mut r = VecFile::open(&p, false).unwrap();
        assert_eq!(r.count(), 5);
        assert_eq!(r.rows(), &rows[..]);
        assert!(
            VecFile::open(&p, true).is_err(),
            "a second writer must be refused"
        );

        w.append(&[15, 11], &[unit(dim, 5), unit(dim, 6)].concat())
            .unwrap();
        assert_eq!(r.count(), 5, "a reader sees new rows only after refresh");
        r.refresh().unwrap();
        assert_eq!(r.count(), 7);
        assert_eq!(r.id(6), 11);
        assert!(!r.is_live(1), "id 11 was superseded by row 6");
        assert_eq!(w.mask(&[12, 99]).unwrap(), 1);
        assert!(!r.is_live(2), "a reader sees masks at once");
        assert_eq!(r.live_count(), 5);
        assert_eq!(r.rows_for_ids(&[11, 14, 1000]), vec![1, 4, 6]);
        assert!(matches!(
            r.append(&[1], &unit(dim, 1)),
            Err(Error::State(_))
        ));
        drop(w);
        drop(r);
        // The lock goes with the writer.
        let w2 = VecFile::open(&p, true).unwrap();
        assert_eq!(w2.count(), 7);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_missing_int8_copy_is_rebuilt_by_the_writer_and_optional_for_readers() {
        let dir = tmpdir("q8");
        let p = dir.join("v.cvx");
        let dim = 16;
        let mut w = VecFile::create(&p, dim, "m").unwrap();
        w.append(
            &[1, 2, 3],
            &[unit(dim, 1), unit(dim, 2), unit(dim, 3)].concat(),
        )
        .unwrap();
        drop(w);
        std::fs::remove_file(q8_path(&p)).unwrap();
        let r = VecFile::open(&p, false).unwrap();
        assert_eq!(r.q8_rows(), 0);
        let w = VecFile::open(&p, true).unwrap();
        assert_eq!(w.q8_rows(), 3);
        std::fs::remove_dir_all(&dir).ok();
    }

    // ---- fuzzing the reader: no input may panic (let alone crash) ----------

    use crate::kernels::simd::Isa;
    use crate::kernels::topk;
    use proptest::prelude::*;

    /// Open whatever is at `p` and, if it opens, search it: must not panic.
    fn open_and_search(p: &Path) -> Result<usize> {
        let vf = VecFile::open(p, false)?;
        let q = vec![1.0 / (vf.dim() as f32).sqrt(); vf.dim()];
        let live = |r: u32| vf.is_live(r);
        let k = 5;
        let a = topk::exact(Isa::detect(), vf.rows(), &q, k, &live, 2);
        let b = topk::quantized(Isa::detect(), vf.rows(), vf.q8(), &q, k, 20, &live, 1);
        let _ = vf.rows_for_ids(&[0, 1, 2]);
        for h in a.iter().chain(&b) {
            assert!((h.row as usize) < vf.count());
            let _ = vf.id(h.row);
        }
        Ok(vf.count())
    }

    fn sample_index(dir: &Path, dim: usize, n: usize) -> PathBuf {
        let p = dir.join("v.cvx");
        let mut w = VecFile::create(&p, dim, "fuzz-model").unwrap();
        let rows: Vec<f32> = (0..n).flat_map(|i| unit(dim, i)).collect();
        let ids: Vec<i64> = (0..n as i64).collect();
        w.append(&ids, &rows).unwrap();
        p
    }

    fn write(p: &Path, bytes: &[u8]) {
        std::fs::write(p, bytes).unwrap();
    }

    #[test]
    fn every_truncation_of_every_file_is_an_error_or_a_consistent_index() {
        let dir = tmpdir("trunc");
        let (dim, n) = (8, 6);
        let p = sample_index(&dir, dim, n);
        let originals: Vec<(PathBuf, Vec<u8>)> = [p.clone(), ids_path(&p), q8_path(&p)]
            .into_iter()
            .map(|f| (f.clone(), std::fs::read(&f).unwrap()))
            .collect();
        for (f, bytes) in &originals {
            for len in 0..bytes.len() {
                write(f, &bytes[..len]);
                match open_and_search(&p) {
                    Ok(c) => assert_eq!(c, n, "{} cut to {len} opened with {c} rows", f.display()),
                    Err(Error::Format(_)) => {}
                    Err(e) => panic!("{} cut to {len}: unexpected {e:?}", f.display()),
                }
            }
            write(f, bytes);
        }
        // The main file cut: only the int8 copy may be shorter and still open.
        assert_eq!(open_and_search(&p).unwrap(), n);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn regression_count_overflow_and_tiny_dim() {
        // A count whose byte size overflows usize once the id records are added
        // (dim 1): an overflow panic before `need_ids` used checked arithmetic.
        let dir = tmpdir("overflow");
        let p = sample_index(&dir, 1, 2);
        let mut b = std::fs::read(&p).unwrap();
        let c: u64 = u64::MAX / 4;
        b[COUNT_AT..COUNT_AT + 8].copy_from_slice(&c.to_le_bytes());
        b[COUNT_AT + 8..COUNT_AT + 16].copy_from_slice(&(!c).to_le_bytes());
        write(&p, &b);
        assert!(matches!(open_and_search(&p), Err(Error::Format(_))));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_wrong_version_and_a_wrong_magic_say_so() {
        let dir = tmpdir("version");
        let p = sample_index(&dir, 4, 1);
        let good = std::fs::read(&p).unwrap();
        let mut b = good.clone();
        b[8] = 9;
        write(&p, &b);
        let e = open_and_search(&p).unwrap_err().to_string();
        assert!(e.contains("version 9"), "{e}");
        let mut b = good.clone();
        b[0] = b'X';
        write(&p, &b);
        let e = open_and_search(&p).unwrap_err().to_string();
        assert!(e.contains("wrong magic"), "{e}");
        let mut b = good;
        b[100] ^= 1; // inside the model id: the checksum catches it
        write(&p, &b);
        let e = open_and_search(&p).unwrap_err().to_string();
        assert!(e.contains("checksum"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Random bytes in place of each file (keeping the real magic some of
        /// the time so that parsing goes past the first check).
        #[test]
        fn random_files_never_panic(
            which in 0usize..3,
            keep in 0usize..600,
            junk in proptest::collection::vec(any::<u8>(), 0..6000),
            flips in proptest::collection::vec((0usize..5000, any::<u8>()), 0..8),
        ) {
            let dir = tmpdir(&format!("prop{which}-{keep}-{}", junk.len()));
            let p = sample_index(&dir, 16, 5);
            let f = [p.clone(), ids_path(&p), q8_path(&p)][which].clone();
            let mut bytes = std::fs::read(&f).unwrap();
            let keep = keep.min(bytes.len());
            bytes.truncate(keep);
            bytes.extend_from_slice(&junk);
            for (at, v) in &flips {
                if let Some(b) = bytes.get_mut(*at) {
                    *b ^= v;
                }
            }
            write(&f, &bytes);
            let r = open_and_search(&p);
            prop_assert!(matches!(r, Ok(_) | Err(Error::Format(_))), "{:?}", r.err());
            std::fs::remove_dir_all(&dir).ok();
        }

        /// `rows_for_ids` (galloping for sorted input, binary search otherwise)
        /// agrees with a linear scan, whatever order the ids were appended in.
        #[test]
        fn rows_for_ids_matches_a_linear_scan(
            stored in proptest::collection::hash_set(-50i64..50, 1..40),
            wanted in proptest::collection::vec(-60i64..60, 0..30),
        ) {
            let dir = tmpdir(&format!("ids{}-{}", stored.len(), wanted.len()));
            let p = dir.join("v.cvx");
            let stored: Vec<i64> = stored.into_iter().collect();
            let mut w = VecFile::create(&p, 4, "m").unwrap();
            let rows: Vec<f32> = (0..stored.len()).flat_map(|i| unit(4, i)).collect();
            w.append(&stored, &rows).unwrap();
            let mut sorted = wanted.clone();
            sorted.sort_unstable();
            for ids in [&wanted, &sorted] {
                let mut want: Vec<u32> = (0..stored.len() as u32)
                    .filter(|r| ids.contains(&stored[*r as usize]))
                    .collect();
                want.sort_unstable();
                prop_assert_eq!(w.rows_for_ids(ids), want);
            }
            std::fs::remove_dir_all(&dir).ok();
        }

        /// A valid header with a random count: an error unless the files hold it.
        #[test]
        fn random_counts_never_panic(c in any::<u64>(), dim in 1usize..40) {
            let dir = tmpdir(&format!("count{c}-{dim}"));
            let p = sample_index(&dir, dim, 3);
            let mut b = std::fs::read(&p).unwrap();
            b[COUNT_AT..COUNT_AT + 8].copy_from_slice(&c.to_le_bytes());
            b[COUNT_AT + 8..COUNT_AT + 16].copy_from_slice(&(!c).to_le_bytes());
            write(&p, &b);
            match open_and_search(&p) {
                Ok(n) => prop_assert!(n <= 3),
                Err(Error::Format(_)) => {}
                Err(e) => prop_assert!(false, "{e:?}"),
            }
            std::fs::remove_dir_all(&dir).ok();
        }
    }
}
