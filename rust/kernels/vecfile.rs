//! The vector file: L2-normalised rows stored as f16, memory-mapped, with the
//! row -> memory id map and an int8 copy beside it.
//!
//! Four files share a stem (`path`, `path.ids`, `path.q8`, `path.sum`):
//!
//! ```text
//! path       header (4096 bytes) then rows: count x dim f16 LE, row-major
//!   0  8  magic  b"CTXVEC\0\x01"
//!   8  4  version u32 (FORMAT_VERSION)
//!  12  4  header_len u32 (4096)
//!  16  4  dim u32
//!  20  4  dtype u32 (2 = f16; version 2 files held 1 = f32)
//!  24 16  uuid: random, repeated in the side files so that mixed-up files are caught
//!  40  4  model_id length u32 (<= 256)
//!  44 256 model_id UTF-8, zero padded
//! 504  8  FNV-1a 64 of bytes 0..504 (the immutable part)
//! 512  8  count u64: committed rows (the only field that changes)
//! 520  8  !count (a torn or corrupt count is detected)
//! path.ids   64-byte side header, then per row: memory id i64 LE, flags u64 LE
//!            (bit 0 = masked: deleted or superseded; never returned)
//! path.q8    64-byte side header (version Q8_VERSION), then one record per row:
//!            dim x u8, scale, residual norm, row norm (f32 LE), padded (see quant.rs)
//! path.sum   64-byte side header, then per block of BLOCK_ROWS (4096) rows:
//!            rows covered u64 LE, checksum u64 LE (see [`block_sum`])
//! side header: magic 8, version u32, header_len u32 (64), uuid 16, dim u32,
//!              reserved 20, FNV-1a 64 of bytes 0..56 at 56
//! ```
//!
//! **Rows.** f16 (half the bytes of f32: 768 for 384 dimensions), the same
//! values SQLite stores (`cortex.vectors.encode_stored`: the unit vector
//! rounded to f16), so the file is one more copy of the source, never a
//! different one: a row normalised in f32 and rounded again to f16 gives back
//! the bits it came from. Kernels widen f16 to f32 exactly (simd.rs) and score
//! the widened row; the int8 records and their error bounds are of the widened
//! row too, so the screen's answer is still exactly the scan's.
//!
//! **Row checksums.** The block checksum is a wrapping sum of one term per row,
//! each a hash of the row's bytes, its memory id and its row number (not
//! its flags, which change). The writer adds the terms of appended rows and
//! writes the slots of the blocks they touch before it publishes the count, so
//! appends cost O(rows appended). A changed word of a row or id always changes
//! its term (every step of the hash is a bijection of its state), and so the
//! block's sum. [`VecFile::verify`] checks every block. Opening checks only the
//! last block (the one an interrupted append could leave inconsistent, ~1 ms):
//! `verify` of 1M x 384-d rows (1.5 GB, page cache warm) took 0.17-0.28 s on
//! the Zen 1 this was measured on (benches/vectors.md), and far longer from a
//! cold disk, so it is left to the caller: the Python layer (semantic.py) runs
//! `verify` (checksums and int8 records, [`VecFile::verify`]) once for each
//! index it opens and `verify_rows_from` for what is appended later, and checks
//! every row a search returns against SQLite. Version 1 files have no
//! checksums and version 2 files hold f32 rows: both fail to open with a
//! version error and are rebuilt.
//!
//! Every file must be a regular file (opened with `O_NONBLOCK` on unix): a FIFO
//! or a device in its place is a format error, never a hang or endless bytes.
//! What differs between platforms is in `files.rs`.
//!
//! The writer appends rows, ids and int8 records past the committed count and
//! then publishes the new count in the main header; readers map the files
//! read-only (shared pages, no copy) and see appended rows after `refresh`.
//! Bytes past the committed count (an interrupted append) are ignored and
//! overwritten by the next append. The int8 copy is derived data: when it is
//! missing, stale or damaged, the writer rebuilds it, and a reader scans the
//! rows it does not cover in f16. It is only written from [`Q8_MIN_ROWS`] rows
//! on (a new file starts without it: an empty `.q8`), the size from which
//! searches use it: below that it would cost 416 B a row (at 384-d) and never
//! be read. Once written (or made by `rebuild_q8`) it is kept in step.
//!
//! Only one writer at a time: it holds the exclusive lock of the main file
//! (`files::try_lock`: `flock` on unix, `LockFileEx` on Windows, which readers,
//! reading through their mapping only, never trip over).
//! `create` writes new files under temporary names and renames them into
//! place (`files::replace_file`: on Windows the old file is moved aside first),
//! so a reader keeps its (old) mapping valid: a mapped file is never
//! truncated under a reader by cortex. (A full rebuild is built at another
//! path and renamed over these files by semantic.py; the uuid in every header
//! tells a reader which set it has.) (Truncating it by other means would
//! still raise SIGBUS in a reader; that is the nature of mmap.)
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use memmap2::Mmap;

use super::files::{self, Open};
use super::quant;
use super::simd::{widen, F16};
use crate::errors::{Error, Result};

pub const MAGIC: &[u8; 8] = b"CTXVEC\0\x01";
pub const IDS_MAGIC: &[u8; 8] = b"CTXIDS\0\x01";
pub const Q8_MAGIC: &[u8; 8] = b"CTXQ8\0\0\x01";
pub const SUM_MAGIC: &[u8; 8] = b"CTXSUM\0\x01";
/// Version of the main file and of the id and checksum side files. 2 added
/// the row checksums (`path.sum`); 3 stores the rows as f16.
pub const FORMAT_VERSION: u32 = 3;
/// The `dtype` header field of f16 rows.
const DTYPE_F16: u32 = 2;
/// Version of the int8 copy's records (in its side header). 2 added the
/// residual and row norms of the error bound (quant.rs); 3 sums those norms
/// in fixed lanes, so that a reader can check every record cheaply. A copy of
/// another version does not match and is rebuilt by the writer (readers scan
/// f32).
pub const Q8_VERSION: u32 = 3;
pub const HEADER_LEN: usize = 4096;
pub const SIDE_HEADER_LEN: usize = 64;
pub const MAX_MODEL_ID: usize = 256;
pub const MAX_DIM: usize = 65_536;
const COUNT_AT: usize = 512;
const CHECKSUM_AT: usize = 504;
const SIDE_CHECKSUM_AT: usize = 56;
const ID_RECORD: usize = 16;
/// Rows from which the writer keeps the int8 copy (and from which searches
/// use it by default: py_index.rs).
pub const Q8_MIN_ROWS: usize = 20_000;
/// Rows per checksum block.
pub const BLOCK_ROWS: usize = 4096;
const SUM_RECORD: usize = 16;
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

pub fn sum_path(path: &Path) -> PathBuf {
    suffixed(path, ".sum")
}

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;

/// 64-bit hash of `bytes` (a row): four independent multiply-rotate lanes over
/// 8-byte words, so it runs at memory speed. Each step `(lane ^ w) * P1` then a
/// rotation is a bijection of the lane for a fixed word, and the final combine
/// is a bijection of each lane given the others: inputs of the same length
/// that differ in one word always hash differently.
pub fn row_hash(bytes: &[u8]) -> u64 {
    let mut lanes = [P1, P2, P3, P1 ^ P2];
    let mut chunks = bytes.chunks_exact(32);
    for c in &mut chunks {
        for (l, w) in lanes.iter_mut().zip(c.chunks_exact(8)) {
            let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            *l = (*l ^ w).wrapping_mul(P1).rotate_left(31);
        }
    }
    for (i, w) in chunks.remainder().chunks(4).enumerate() {
        let mut b = [0u8; 4];
        b[..w.len()].copy_from_slice(w);
        let l = &mut lanes[i % 4];
        *l = (*l ^ u32::from_le_bytes(b) as u64)
            .wrapping_mul(P1)
            .rotate_left(31);
    }
    let mut h = bytes.len() as u64;
    for l in lanes {
        h = (h ^ l.wrapping_mul(P2).rotate_left(29)).wrapping_mul(P3);
    }
    h
}

/// The checksum term of one row: a bijection of the row hash for a fixed id
/// and row number, so a changed row always changes it.
fn row_term(row_bytes: &[u8], id: i64, row: u64) -> u64 {
    let h = row_hash(row_bytes) ^ (id as u64).wrapping_mul(P2) ^ row.wrapping_mul(P3);
    (h ^ (h >> 29)).wrapping_mul(P1)
}

/// The checksum of rows `start..end` (one block or part of it): the wrapping
/// sum of their terms.
pub fn block_sum(rows: &[u8], ids: &[i64], start: usize, row_bytes: usize) -> u64 {
    rows.chunks_exact(row_bytes)
        .zip(ids)
        .enumerate()
        .fold(0u64, |s, (i, (r, id))| {
            s.wrapping_add(row_term(r, *id, (start + i) as u64))
        })
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
        h[20..24].copy_from_slice(&DTYPE_F16.to_le_bytes());
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
            || dtype != DTYPE_F16
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
        let version = if magic == Q8_MAGIC {
            Q8_VERSION
        } else {
            FORMAT_VERSION
        };
        h[8..12].copy_from_slice(&version.to_le_bytes());
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

/// Open one of the index files, refusing anything but a regular file (a FIFO put
/// in its place would block the open and a device would map endless bytes).
/// A file that is not regular is an `InvalidInput` error.
fn open_regular(path: &Path, writable: bool, create: bool) -> std::io::Result<File> {
    let how = Open {
        write: writable,
        create,
        no_follow: false,
    };
    files::open_regular(path, how)
}

/// The exclusive lock of the one writer.
fn lock_exclusive(file: &File, path: &Path) -> Result<()> {
    if !files::try_lock(file).map_err(|e| Error::io("lock", path, e))? {
        return Err(Error::Storage(format!(
            "{} is open for writing in another process or handle; close it first \
             (one writer at a time), or open with writable=False to search",
            path.display()
        )));
    }
    Ok(())
}

/// (rows covered, (memory id, row) sorted by id then row).
struct IdTable {
    /// Rows covered.
    rows: usize,
    /// (memory id, row), sorted.
    table: Vec<(i64, u32)>,
    /// When the ids are dense (memory ids are SQLite rowids, so they usually
    /// are): `pos[id - min]` = the first index of `id` in `table`, or
    /// `u32::MAX`. One independent load per id instead of a chain of
    /// dependent probes: at 1M rows the galloping search cost ~0.45 µs per
    /// id (each probe a cache miss in a 16 MB table), 4.5 ms for a 1 % filter,
    /// three times the scan of the admitted rows itself.
    pos: Option<(i64, Vec<u32>)>,
}

impl IdTable {
    /// Build `pos` (from scratch, or extending it when only `table[from..]` is
    /// new and ids kept increasing), if the ids are dense enough.
    fn index(&mut self, from: usize) {
        let (Some(first), Some(last)) = (self.table.first(), self.table.last()) else {
            self.pos = None;
            return;
        };
        let range = last.0 as i128 - first.0 as i128 + 1;
        if range > 4 * self.table.len() as i128 + 4096 || self.table.len() >= u32::MAX as usize {
            self.pos = None;
            return;
        }
        let from = match &self.pos {
            Some((min, _)) if *min == first.0 => from,
            _ => 0,
        };
        let min = first.0;
        let mut pos = match self.pos.take() {
            Some((_, p)) if from > 0 => p,
            _ => Vec::new(),
        };
        pos.resize(range as usize, u32::MAX);
        for (i, (id, _)) in self.table.iter().enumerate().skip(from) {
            let slot = &mut pos[(*id as i128 - min as i128) as usize];
            if *slot == u32::MAX {
                *slot = i as u32;
            }
        }
        self.pos = Some((min, pos));
    }
}

struct Writer {
    main: File,
    ids: File,
    q8: File,
    sum: File,
    /// (rows covered, checksum) of every block, as in the checksum file.
    blocks: Vec<(u64, u64)>,
    /// memory id -> rows holding it that are not masked (at most one after an append).
    live: HashMap<i64, u32>,
}

/// An open vector file.
pub struct VecFile {
    path: PathBuf,
    header: Header,
    main_file: File,
    ids_file: File,
    sum_file: File,
    q8_file: Option<File>,
    main: Mmap,
    ids: Mmap,
    q8: Option<Mmap>,
    count: usize,
    /// A reader's cap on `count` (see [`VecFile::open_upto`]): rows past it are
    /// not seen even once the header counts them.
    limit: Option<usize>,
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
        let parts: [(PathBuf, Vec<u8>); 4] = [
            (ids_path(path), header.side(IDS_MAGIC).to_vec()),
            (sum_path(path), header.side(SUM_MAGIC).to_vec()),
            // No int8 copy until Q8_MIN_ROWS rows (see the module doc).
            (q8_path(path), Vec::new()),
            (path.to_path_buf(), header.encode()),
        ];
        for (p, bytes) in &parts {
            let t = tmp(p);
            std::fs::write(&t, bytes).map_err(|e| Error::io("write", &t, e))?;
        }
        // Side files first: a reader that opens between two renames sees a
        // uuid mismatch (an error it can retry), never a wrong pairing.
        for (p, _) in &parts {
            files::replace_file(&tmp(p), p).map_err(|e| Error::io("rename into", p, e))?;
        }
        VecFile::open(path, true)
    }

    /// Open an existing index; `writable` takes the writer lock.
    pub fn open(path: &Path, writable: bool) -> Result<VecFile> {
        VecFile::open_upto(path, writable, None)
    }

    /// [`VecFile::open`] of a file whose rows past `upto` are not committed
    /// anywhere else yet (semantic.py: the vector file is the source of truth,
    /// appended and synced before the SQLite transaction that counts its rows
    /// commits). A reader sees rows `0..upto` only, whatever the header says
    /// (another process's append in flight, or the rows of one that died
    /// before its commit); a writer takes the rows past `upto` back (the
    /// header count is set to `upto`, so the next append overwrites them). A
    /// file holding fewer than `upto` rows is a format error: rows the
    /// database counts are missing.
    pub fn open_upto(path: &Path, writable: bool, upto: Option<usize>) -> Result<VecFile> {
        let main_file = open_regular(path, writable, false).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::Storage(format!(
                "no vector index at {}; create it with VectorIndex.create(path, dim, model_id)",
                path.display()
            )),
            std::io::ErrorKind::InvalidInput => Error::Format(format!(
                "{} is not a regular file; delete it and rebuild the index (`cortex reindex`)",
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
        let ids_file = open_regular(&ip, writable, false).map_err(|e| {
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
        let sp = sum_path(path);
        let sum_file = open_regular(&sp, writable, false).map_err(|e| {
            Error::Format(format!(
                "{}: cannot open the checksums {} ({e}); rebuild the index (`cortex reindex`)",
                path.display(),
                sp.display()
            ))
        })?;
        let mut side = [0u8; SIDE_HEADER_LEN];
        if files::read_exact_at(&sum_file, &mut side, 0).is_err()
            || !header.side_matches(SUM_MAGIC, &side)
        {
            return Err(Error::Format(format!(
                "{} does not belong to {} (wrong magic, version or uuid); rebuild the index \
                 (`cortex reindex`)",
                sp.display(),
                path.display()
            )));
        }
        let qp = q8_path(path);
        let q8_file = open_regular(&qp, writable, writable).ok();
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
            sum_file,
            q8_file,
            main,
            ids,
            q8,
            count: 0,
            limit: if writable { None } else { upto },
            writer: None,
            by_id: Mutex::new(None),
        };
        vf.refresh()?;
        if let (true, Some(n)) = (writable, upto) {
            vf.take_back(n)?;
        }
        if writable {
            vf.start_writer()?;
        }
        // The last block only (see the module doc); `verify` checks them all.
        vf.verify_from(vf.count.saturating_sub(1) / BLOCK_ROWS)?;
        Ok(vf)
    }

    /// Set the committed count back to `n` (writer, before `start_writer`):
    /// the rows past it become the bytes of an interrupted append.
    fn take_back(&mut self, n: usize) -> Result<()> {
        if n > self.count {
            return Err(self.fewer_rows(n));
        }
        if n < self.count {
            let n64 = n as u64;
            let mut c = [0u8; 16];
            c[..8].copy_from_slice(&n64.to_le_bytes());
            c[8..].copy_from_slice(&(!n64).to_le_bytes());
            files::write_all_at(&self.main_file, &c, COUNT_AT as u64)
                .map_err(|e| Error::io("write", &self.path, e))?;
            self.main_file
                .sync_data()
                .map_err(|e| Error::io("sync", &self.path, e))?;
            self.count = n;
        }
        Ok(())
    }

    fn fewer_rows(&self, n: usize) -> Error {
        Error::Format(format!(
            "{}: holds {} rows but the database counts {n}: rows are missing",
            self.path.display(),
            self.count
        ))
    }

    /// [`VecFile::refresh`] with a new cap on the rows seen (readers; see
    /// [`VecFile::open_upto`]).
    pub fn refresh_upto(&mut self, upto: Option<usize>) -> Result<()> {
        if self.writer.is_none() {
            self.limit = upto;
        }
        self.refresh()?;
        match upto {
            Some(n) if n > self.count => Err(self.fewer_rows(n)),
            _ => Ok(()),
        }
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
        // The checksum slots of the committed blocks. A last block that covers
        // more rows than are committed is the trace of an interrupted append:
        // its checksum is recomputed from the committed rows.
        let nb = self.count.div_ceil(BLOCK_ROWS);
        let mut blocks = self.read_slots(nb)?;
        if let Some(last) = nb.checked_sub(1) {
            let (start, end) = (last * BLOCK_ROWS, self.count);
            if blocks[last].0 > (end - start) as u64 {
                blocks[last] = ((end - start) as u64, self.block_checksum(start, end));
                self.write_slots(&self.sum_file, last, &blocks[last..])?;
            }
        }
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
            sum: self
                .sum_file
                .try_clone()
                .map_err(|e| Error::io("reopen", &sum_path(&self.path), e))?,
            blocks,
            live,
        });
        // A copy that exists is kept in step; a missing (or damaged) one is
        // made again once the rows are enough for searches to use it.
        let stale = self.q8.is_some() && self.q8_rows() < self.count;
        if stale || (self.q8.is_none() && self.count >= Q8_MIN_ROWS) {
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
        self.header.dim * 2
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
        let count = self.limit.map_or(count, |l| count.min(l));
        if self.limit.is_some_and(|l| l > count) {
            return Err(self.fewer_rows(self.limit.unwrap_or(0)));
        }
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
            if self.q8.as_ref().is_none_or(|m| m.len() < want) && self.writer.is_none() {
                // The copy may have been rebuilt (renamed into place) since we
                // mapped it: map it again by path. Not covering every row is
                // fine: the rows past it are scanned in f32.
                let qp = q8_path(&self.path);
                if let Ok(f) = open_regular(&qp, false, false) {
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
                self.q8.as_ref().is_none_or(|m| m.len() < want),
                &self.writer,
            ) {
                self.q8 = map(&w.q8, &q8_path(&self.path))
                    .ok()
                    .filter(|m| self.header.side_matches(Q8_MAGIC, m));
            }
        }
        Ok(())
    }

    /// The committed rows, `count * dim` f16.
    pub fn rows(&self) -> &[F16] {
        let bytes = &self.main[HEADER_LEN..HEADER_LEN + self.count * self.row_bytes()];
        // SAFETY: the mapping is page aligned and HEADER_LEN is 4096, so `bytes`
        // is 2-aligned; its length is a multiple of 2; F16 is a transparent u16,
        // for which every bit pattern is valid (the file is little-endian, as
        // every target this builds for); the slice borrows `self`, which owns
        // the mapping.
        unsafe { std::slice::from_raw_parts(bytes.as_ptr() as *const F16, bytes.len() / 2) }
    }

    /// The bytes of the committed rows (what a plain scan reads).
    pub fn row_bytes_all(&self) -> &[u8] {
        &self.main[HEADER_LEN..HEADER_LEN + self.count * self.row_bytes()]
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
        let stale = guard.as_ref().is_none_or(|t| t.rows != self.count);
        if stale {
            let (start, mut table, pos) = match guard.take() {
                Some(t) if t.rows <= self.count => (t.rows, t.table, t.pos),
                _ => (0, Vec::with_capacity(self.count), None),
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
            let mut t = IdTable {
                rows: self.count,
                table,
                pos,
            };
            t.index(if still_sorted { sorted_before } else { 0 });
            *guard = Some(t);
        }
        let t = guard.as_ref().expect("built above");
        let table = &t.table;
        let mut out = Vec::with_capacity(ids.len());
        if let Some((min, pos)) = &t.pos {
            for id in ids {
                let slot = usize::try_from(*id as i128 - *min as i128).ok();
                let Some(&p) = slot.and_then(|s| pos.get(s)) else {
                    continue;
                };
                if p != u32::MAX {
                    out.extend(
                        table[p as usize..]
                            .iter()
                            .take_while(|(i, _)| i == id)
                            .map(|(_, r)| *r),
                    );
                }
            }
            out.sort_unstable();
            out.dedup();
            return out;
        }
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

    /// Checksum slots `0..nb` of the checksum file.
    fn read_slots(&self, nb: usize) -> Result<Vec<(u64, u64)>> {
        let sp = sum_path(&self.path);
        let mut buf = vec![0u8; nb * SUM_RECORD];
        files::read_exact_at(&self.sum_file, &mut buf, SIDE_HEADER_LEN as u64).map_err(|_| {
            Error::Format(format!(
                "{}: truncated: fewer checksums than the {} rows need; rebuild the index \
                     (`cortex reindex`)",
                sp.display(),
                self.count
            ))
        })?;
        Ok(buf
            .chunks_exact(SUM_RECORD)
            .map(|s| (u64_at(s, 0), u64_at(s, 8)))
            .collect())
    }

    fn write_slots(&self, file: &File, first: usize, slots: &[(u64, u64)]) -> Result<()> {
        let mut buf = Vec::with_capacity(slots.len() * SUM_RECORD);
        for (rows, sum) in slots {
            buf.extend_from_slice(&rows.to_le_bytes());
            buf.extend_from_slice(&sum.to_le_bytes());
        }
        files::write_all_at(file, &buf, (SIDE_HEADER_LEN + first * SUM_RECORD) as u64)
            .map_err(|e| Error::io("write", &sum_path(&self.path), e))
    }

    /// The checksum of committed rows `start..end`.
    fn block_checksum(&self, start: usize, end: usize) -> u64 {
        let rb = self.row_bytes();
        let bytes = &self.main[HEADER_LEN + start * rb..HEADER_LEN + end * rb];
        let ids: Vec<i64> = (start..end).map(|r| self.id(r as u32)).collect();
        block_sum(bytes, &ids, start, rb)
    }

    /// Check every row (and memory id) against the block checksums written
    /// with it, and every int8 record against its f32 row. Fails with a format
    /// error that names the first damaged block.
    pub fn verify(&self) -> Result<()> {
        self.verify_from(0)?;
        self.verify_q8(0)
    }

    /// [`VecFile::verify`] of the blocks holding rows `from_row..count` only:
    /// after an append, the rows a handle has not checked yet.
    pub fn verify_rows_from(&self, from_row: usize) -> Result<()> {
        let from_row = from_row.min(self.count);
        self.verify_from(from_row / BLOCK_ROWS)?;
        self.verify_q8(from_row)
    }

    fn verify_from(&self, first: usize) -> Result<()> {
        let nb = self.count.div_ceil(BLOCK_ROWS);
        let slots = self.read_slots(nb)?;
        let bad_block = |b: usize| {
            let (covered, sum) = slots[b];
            let start = b * BLOCK_ROWS;
            let end = (start + BLOCK_ROWS).min(self.count);
            let want = (end - start) as u64;
            // The writer has appended to the last block since this handle's
            // count (or an append was interrupted): checked once committed.
            if b + 1 == nb && covered > want && covered <= BLOCK_ROWS as u64 {
                return false;
            }
            covered != want || self.block_checksum(start, end) != sum
        };
        // Blocks are independent: check them on every core (a full check of
        // 1M rows is memory-bound, ~1.5 GB read).
        let todo = nb.saturating_sub(first);
        let threads = std::thread::available_parallelism()
            .map_or(1, |t| t.get())
            .min(todo)
            .max(1);
        let bad = if threads <= 1 {
            (first..nb).find(|b| bad_block(*b))
        } else {
            let per = todo.div_ceil(threads);
            std::thread::scope(|s| {
                let parts: Vec<_> = (first..nb)
                    .step_by(per)
                    .map(|lo| {
                        let bad_block = &bad_block;
                        s.spawn(move || (lo..(lo + per).min(nb)).find(|b| bad_block(*b)))
                    })
                    .collect();
                parts
                    .into_iter()
                    .filter_map(|p| p.join().ok().flatten())
                    .min()
            })
        };
        match bad {
            None => Ok(()),
            Some(b) => {
                let start = b * BLOCK_ROWS;
                let end = (start + BLOCK_ROWS).min(self.count);
                Err(Error::Format(format!(
                    "{}: rows {start}..{end} (checksum block {b}) do not match their checksum; \
                     the file is damaged: delete it and rebuild the index (`cortex reindex`)",
                    self.path.display()
                )))
            }
        }
    }

    /// Check the int8 records of rows `from_row..q8_rows()` against their f32
    /// rows ([`quant::check_record`]: the error bound each record claims holds
    /// for its row). The int8 screen trusts that bound to rule a row out, so a
    /// damaged record could hide a row without this; the f32 rows themselves
    /// are covered by the block checksums. Rows are checked in parallel.
    fn verify_q8(&self, from_row: usize) -> Result<()> {
        let n = self.q8_rows();
        if from_row >= n {
            return Ok(());
        }
        let dim = self.header.dim;
        let stride = quant::record_len(dim);
        let rows = self.rows();
        let q8 = self.q8();
        let threads = std::thread::available_parallelism()
            .map_or(1, |t| t.get())
            .min((n - from_row).div_ceil(4096));
        let chunk = (n - from_row).div_ceil(threads.max(1));
        let bad = std::thread::scope(|s| {
            let parts: Vec<_> = (from_row..n)
                .step_by(chunk.max(1))
                .map(|start| {
                    let end = (start + chunk).min(n);
                    s.spawn(move || {
                        let mut x = vec![0.0f32; dim];
                        (start..end).find(|&r| {
                            widen(&rows[r * dim..(r + 1) * dim], &mut x);
                            !quant::check_record(&x, &q8[r * stride..(r + 1) * stride])
                        })
                    })
                })
                .collect();
            parts
                .into_iter()
                .filter_map(|p| p.join().ok().flatten())
                .min()
        });
        match bad {
            None => Ok(()),
            Some(r) => Err(Error::Format(format!(
                "{}: the int8 record of row {r} does not match its row (the .q8 file is \
                 damaged); rebuild the index (`cortex reindex`)",
                self.path.display()
            ))),
        }
    }

    /// The random id written in every file of this index when it was created:
    /// a rebuild (a new set of files renamed into place) has another one.
    pub fn uuid(&self) -> [u8; 16] {
        self.header.uuid
    }

    fn writer(&mut self) -> Result<&mut Writer> {
        self.writer.as_mut().ok_or_else(|| {
            Error::State(
                "this vector index is open read-only; open it with writable=True to change it"
                    .into(),
            )
        })
    }

    /// Append rows (already validated: finite, L2-normalised, `ids.len()` rows),
    /// stored rounded to f16. A memory id that already has a live row supersedes
    /// it: the old row is masked.
    pub fn append(&mut self, ids: &[i64], rows: &[f32]) -> Result<()> {
        let dim = self.header.dim;
        assert_eq!(rows.len(), ids.len() * dim);
        let n0 = self.count;
        let path = self.path.clone();
        let stride = quant::record_len(dim);
        let q8_on = self.q8.is_some();
        let q8_ok = q8_on && self.q8_rows() == n0;
        let w = self.writer()?;
        if ids.is_empty() {
            return Ok(());
        }
        let half: Vec<F16> = rows.iter().map(|v| F16::from_f32(*v)).collect();
        let mut bytes = Vec::with_capacity(rows.len() * 2);
        for v in &half {
            bytes.extend_from_slice(&v.0.to_le_bytes());
        }
        files::write_all_at(&w.main, &bytes, (HEADER_LEN + n0 * dim * 2) as u64)
            .map_err(|e| Error::io("append rows to", &path, e))?;
        let mut rec = Vec::with_capacity(ids.len() * ID_RECORD);
        for id in ids {
            rec.extend_from_slice(&id.to_le_bytes());
            rec.extend_from_slice(&0u64.to_le_bytes());
        }
        files::write_all_at(&w.ids, &rec, (SIDE_HEADER_LEN + n0 * ID_RECORD) as u64)
            .map_err(|e| Error::io("append ids to", &ids_path(&path), e))?;
        if q8_ok {
            // Records of the stored (f16) rows, widened: the bound is about them.
            let mut q = vec![0u8; ids.len() * stride];
            let mut x = vec![0.0f32; dim];
            for (r, out) in half.chunks_exact(dim).zip(q.chunks_exact_mut(stride)) {
                widen(r, &mut x);
                quant::quantize_row(&x, out);
            }
            files::write_all_at(&w.q8, &q, (SIDE_HEADER_LEN + n0 * stride) as u64)
                .map_err(|e| Error::io("append to", &q8_path(&path), e))?;
        }
        // Checksums of the blocks the new rows fall in, written before the count.
        let rb = dim * 2;
        let n1 = n0 + ids.len();
        let first = n0 / BLOCK_ROWS;
        w.blocks.truncate(n0.div_ceil(BLOCK_ROWS));
        let mut r = n0;
        while r < n1 {
            let b = r / BLOCK_ROWS;
            let end = ((b + 1) * BLOCK_ROWS).min(n1);
            let s = block_sum(
                &bytes[(r - n0) * rb..(end - n0) * rb],
                &ids[r - n0..end - n0],
                r,
                rb,
            );
            if w.blocks.len() <= b {
                w.blocks.push((0, 0));
            }
            let (covered, sum) = w.blocks[b];
            w.blocks[b] = (covered + (end - r) as u64, sum.wrapping_add(s));
            r = end;
        }
        let mut slots = Vec::with_capacity((w.blocks.len() - first) * SUM_RECORD);
        for (rows, sum) in &w.blocks[first..] {
            slots.extend_from_slice(&rows.to_le_bytes());
            slots.extend_from_slice(&sum.to_le_bytes());
        }
        files::write_all_at(
            &w.sum,
            &slots,
            (SIDE_HEADER_LEN + first * SUM_RECORD) as u64,
        )
        .map_err(|e| Error::io("append to", &sum_path(&path), e))?;
        // Publish: from here readers that refresh see the new rows.
        let n1 = n1 as u64;
        let mut c = [0u8; 16];
        c[..8].copy_from_slice(&n1.to_le_bytes());
        c[8..].copy_from_slice(&(!n1).to_le_bytes());
        files::write_all_at(&w.main, &c, COUNT_AT as u64)
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
        if !q8_ok && (q8_on || n1 as usize >= Q8_MIN_ROWS) {
            self.rebuild_q8()?;
        }
        Ok(())
    }

    fn set_masked(&mut self, rows: &[u32]) -> Result<()> {
        let path = ids_path(&self.path);
        let w = self.writer()?;
        for r in rows {
            let at = SIDE_HEADER_LEN + *r as usize * ID_RECORD + 8;
            files::write_all_at(&w.ids, &FLAG_MASKED.to_le_bytes(), at as u64)
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

    /// Rewrite the int8 copy from the rows.
    pub fn rebuild_q8(&mut self) -> Result<()> {
        let dim = self.header.dim;
        let stride = quant::record_len(dim);
        let qp = q8_path(&self.path);
        let mut buf = Vec::with_capacity(SIDE_HEADER_LEN + self.count * stride);
        buf.extend_from_slice(&self.header.side(Q8_MAGIC));
        buf.resize(SIDE_HEADER_LEN + self.count * stride, 0);
        let mut x = vec![0.0f32; dim];
        for (r, out) in self
            .rows()
            .chunks_exact(dim)
            .zip(buf[SIDE_HEADER_LEN..].chunks_exact_mut(stride))
        {
            widen(r, &mut x);
            quant::quantize_row(&x, out);
        }
        // Renamed into place: a reader's mapping of the old copy stays valid.
        let tmp = suffixed(&qp, &format!(".tmp{}", std::process::id()));
        std::fs::write(&tmp, &buf).map_err(|e| Error::io("write", &tmp, e))?;
        files::replace_file(&tmp, &qp).map_err(|e| Error::io("rename into", &qp, e))?;
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
                (&w.sum, sum_path(&self.path)),
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
        assert!(w.q8.is_none(), "no int8 copy below Q8_MIN_ROWS");
        w.rebuild_q8().unwrap(); // asked for: kept in step from now on
        let rows: Vec<f32> = (0..5).flat_map(|i| unit(dim, i)).collect();
        w.append(&[10, 11, 12, 13, 14], &rows).unwrap();
        assert_eq!(w.count(), 5);
        assert_eq!(w.q8_rows(), 5);

        let mut r = VecFile::open(&p, false).unwrap();
        assert_eq!(r.count(), 5);
        // stored as f16: each value rounded to nearest
        let half: Vec<F16> = rows.iter().map(|v| F16::from_f32(*v)).collect();
        assert_eq!(r.rows(), &half[..]);
        for (h, v) in r.rows().iter().zip(&rows) {
            assert!((h.to_f32() - v).abs() <= v.abs() * (1.0 / 2048.0) + 1e-7);
        }
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
    fn readers_see_rows_up_to_their_cap_and_a_writer_takes_the_rest_back() {
        let dir = tmpdir("upto");
        let p = dir.join("v");
        let dim = 8;
        let mut w = VecFile::create(&p, dim, "m").unwrap();
        let rows: Vec<f32> = (0..5).flat_map(|i| unit(dim, i)).collect();
        w.append(&[1, 2, 3, 4, 5], &rows).unwrap();
        w.sync().unwrap();
        drop(w);
        let mut r = VecFile::open_upto(&p, false, Some(3)).unwrap();
        assert_eq!(r.count(), 3);
        r.refresh().unwrap();
        assert_eq!(r.count(), 3, "a refresh keeps the cap");
        r.refresh_upto(Some(4)).unwrap();
        assert_eq!(r.count(), 4);
        assert!(
            r.refresh_upto(Some(6)).is_err(),
            "rows the database counts are missing"
        );
        assert!(VecFile::open_upto(&p, false, Some(6)).is_err());
        drop(r);
        // a writer takes rows 3.. back: the next append overwrites them
        let mut w = VecFile::open_upto(&p, true, Some(3)).unwrap();
        assert_eq!(w.count(), 3);
        w.append(&[9], &unit(dim, 9)).unwrap();
        drop(w);
        let r = VecFile::open(&p, false).unwrap();
        assert_eq!(r.count(), 4);
        assert_eq!(
            (0..4).map(|i| r.id(i)).collect::<Vec<_>>(),
            vec![1, 2, 3, 9]
        );
        r.verify().unwrap();
    }

    #[test]
    fn a_missing_int8_copy_is_rebuilt_by_the_writer_and_optional_for_readers() {
        let dir = tmpdir("q8");
        let p = dir.join("v.cvx");
        let dim = 16;
        let n = Q8_MIN_ROWS;
        let mut w = VecFile::create(&p, dim, "m").unwrap();
        let ids: Vec<i64> = (0..n as i64 - 1).collect();
        let rows: Vec<f32> = (0..n - 1).flat_map(|i| unit(dim, i)).collect();
        w.append(&ids, &rows).unwrap();
        assert_eq!(w.q8_rows(), 0, "not below Q8_MIN_ROWS");
        w.append(&[n as i64], &unit(dim, 7)).unwrap();
        assert_eq!(w.q8_rows(), n, "made when the rows reach it");
        drop(w);
        std::fs::remove_file(q8_path(&p)).unwrap();
        let r = VecFile::open(&p, false).unwrap();
        assert_eq!(r.q8_rows(), 0);
        let w = VecFile::open(&p, true).unwrap();
        assert_eq!(w.q8_rows(), n);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn an_int8_copy_of_an_older_version_is_ignored_then_rebuilt() {
        let dir = tmpdir("q8old");
        let p = dir.join("v.cvx");
        let dim = 16;
        let mut w = VecFile::create(&p, dim, "m").unwrap();
        w.rebuild_q8().unwrap();
        w.append(&[1, 2], &[unit(dim, 1), unit(dim, 2)].concat())
            .unwrap();
        assert_eq!(w.q8_rows(), 2);
        drop(w);
        // Version 1 of the copy: same magic, records without the bound's norms.
        let qp = q8_path(&p);
        let mut b = std::fs::read(&qp).unwrap();
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        let sum = fnv1a(&b[..SIDE_CHECKSUM_AT]);
        b[SIDE_CHECKSUM_AT..SIDE_HEADER_LEN].copy_from_slice(&sum.to_le_bytes());
        write(&qp, &b);
        let r = VecFile::open(&p, false).unwrap();
        assert_eq!(r.q8_rows(), 0, "a reader must not read old records");
        drop(r);
        // Below Q8_MIN_ROWS a copy the writer cannot read is left (readers
        // scan f16); its next rebuild replaces it.
        let mut w = VecFile::open(&p, true).unwrap();
        assert_eq!(w.q8_rows(), 0);
        w.rebuild_q8().unwrap();
        assert_eq!(w.q8_rows(), 2, "the writer rebuilds the copy");
        let b = std::fs::read(&qp).unwrap();
        assert_eq!(u32_at(&b, 8), Q8_VERSION);
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A byte flipped in any row or id: `verify` fails and names the block.
    #[test]
    fn verify_finds_a_flipped_byte_in_any_block() {
        let dir = tmpdir("verify");
        let dim = 4;
        let n = 2 * BLOCK_ROWS + 100;
        let p = dir.join("v.cvx");
        let mut w = VecFile::create(&p, dim, "m").unwrap();
        // Appends of uneven sizes that straddle block boundaries.
        let mut start = 0;
        for size in [1usize, 4000, 200, 3990, 101] {
            let ids: Vec<i64> = (start as i64..(start + size) as i64).collect();
            let rows: Vec<f32> = (start..start + size).flat_map(|i| unit(dim, i)).collect();
            w.append(&ids, &rows).unwrap();
            start += size;
        }
        assert_eq!(w.count(), n);
        w.verify().unwrap();
        drop(w);
        VecFile::open(&p, false).unwrap().verify().unwrap();
        let good = std::fs::read(&p).unwrap();
        for (row, block) in [(0usize, 0usize), (BLOCK_ROWS + 7, 1), (n - 1, 2)] {
            let mut b = good.clone();
            b[HEADER_LEN + row * dim * 2 + 5] ^= 0x10;
            write(&p, &b);
            // Opening checks the last block only.
            match VecFile::open(&p, false) {
                Ok(r) => {
                    assert_ne!(block, 2, "the last block is checked on open");
                    let e = r.verify().unwrap_err();
                    assert!(matches!(e, Error::Format(_)), "{e:?}");
                    assert!(
                        e.to_string().contains(&format!("checksum block {block}")),
                        "{e}"
                    );
                }
                Err(e) => {
                    assert_eq!(block, 2, "{e}");
                    assert!(e.to_string().contains("checksum block 2"), "{e}");
                }
            }
        }
        write(&p, &good);
        // A memory id scribbled over is caught too.
        let ip = ids_path(&p);
        let ids_good = std::fs::read(&ip).unwrap();
        let mut b = ids_good.clone();
        b[SIDE_HEADER_LEN + 10 * ID_RECORD] ^= 1;
        write(&ip, &b);
        let e = VecFile::open(&p, false).unwrap().verify().unwrap_err();
        assert!(e.to_string().contains("checksum block 0"), "{e}");
        write(&ip, &ids_good);
        // Masking (a flags write) keeps the checksums valid.
        let mut w = VecFile::open(&p, true).unwrap();
        assert_eq!(w.mask(&[3, 5000]).unwrap(), 2);
        w.verify().unwrap();
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn an_interrupted_append_leaves_a_verifiable_index() {
        let dir = tmpdir("interrupted");
        let dim = 4;
        let p = dir.join("v.cvx");
        let mut w = VecFile::create(&p, dim, "m").unwrap();
        w.append(
            &[1, 2, 3],
            &[unit(dim, 1), unit(dim, 2), unit(dim, 3)].concat(),
        )
        .unwrap();
        let header = std::fs::read(&p).unwrap()[..HEADER_LEN].to_vec();
        w.append(&[4, 5], &[unit(dim, 4), unit(dim, 5)].concat())
            .unwrap();
        drop(w);
        // The count of before the second append: its rows and checksum are
        // written, its count never published.
        let mut b = std::fs::read(&p).unwrap();
        b[..HEADER_LEN].copy_from_slice(&header);
        write(&p, &b);
        let r = VecFile::open(&p, false).unwrap();
        assert_eq!(r.count(), 3);
        r.verify().unwrap();
        drop(r);
        let mut w = VecFile::open(&p, true).unwrap();
        w.verify().unwrap();
        w.append(&[6], &unit(dim, 6)).unwrap();
        assert_eq!(w.count(), 4);
        w.verify().unwrap();
        drop(w);
        VecFile::open(&p, false).unwrap().verify().unwrap();
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_version_one_file_is_refused_with_the_fix() {
        let dir = tmpdir("v1");
        let p = sample_index(&dir, 4, 3);
        let mut b = std::fs::read(&p).unwrap();
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        let sum = fnv1a(&b[..CHECKSUM_AT]);
        b[CHECKSUM_AT..CHECKSUM_AT + 8].copy_from_slice(&sum.to_le_bytes());
        write(&p, &b);
        let e = VecFile::open(&p, false).err().expect("refused").to_string();
        assert!(
            e.contains("format version 1") && e.contains("rebuild"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn row_hash_sees_every_single_word_change() {
        let row: Vec<u8> = (0..100u8).collect();
        let h = row_hash(&row);
        for i in 0..row.len() {
            for bit in [1u8, 0x80] {
                let mut r = row.clone();
                r[i] ^= bit;
                assert_ne!(row_hash(&r), h, "byte {i} bit {bit}");
            }
        }
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
        let d = vf.dim();
        let a = topk::exact(Isa::detect(), vf.rows(), &q, d, k, &live, 2).remove(0);
        let keep = topk::Keep::Bound;
        let b = topk::screened(
            Isa::detect(),
            vf.rows(),
            vf.q8(),
            &q,
            d,
            k,
            None,
            keep,
            &live,
            1,
        );
        // No equality with `a` here: a damaged int8 copy may mislead the
        // screen (the bound trusts the stored residual norms); it must not panic.
        let b = b.concat();
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
        let originals: Vec<(PathBuf, Vec<u8>)> =
            [p.clone(), ids_path(&p), q8_path(&p), sum_path(&p)]
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
            which in 0usize..4,
            keep in 0usize..600,
            junk in proptest::collection::vec(any::<u8>(), 0..6000),
            flips in proptest::collection::vec((0usize..5000, any::<u8>()), 0..8),
        ) {
            let dir = tmpdir(&format!("prop{which}-{keep}-{}", junk.len()));
            let p = sample_index(&dir, 16, 5);
            let f = [p.clone(), ids_path(&p), q8_path(&p), sum_path(&p)][which].clone();
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

        /// `rows_for_ids` (the dense position index, or galloping / binary
        /// search when the ids are sparse) agrees with a linear scan, whatever
        /// order and spread the ids were appended in, after every append (the
        /// index is extended or rebuilt), superseded rows included.
        #[test]
        fn rows_for_ids_matches_a_linear_scan(
            batches in proptest::collection::vec(proptest::collection::hash_set(-50i64..50, 1..20), 1..4),
            sparse in any::<bool>(),
            wanted in proptest::collection::vec(-60i64..60, 0..30),
        ) {
            let spread = |id: i64| if sparse { id.wrapping_mul(1 << 50) } else { id };
            let dir = tmpdir(&format!("ids{}-{}-{sparse}", batches.len(), wanted.len()));
            let p = dir.join("v.cvx");
            let mut w = VecFile::create(&p, 4, "m").unwrap();
            let wanted: Vec<i64> = wanted.into_iter().map(spread).collect();
            let mut sorted = wanted.clone();
            sorted.sort_unstable();
            for batch in batches {
                let ids: Vec<i64> = batch.into_iter().map(spread).collect();
                let rows: Vec<f32> = (0..ids.len()).flat_map(|i| unit(4, i)).collect();
                w.append(&ids, &rows).unwrap();
                for ids in [&wanted, &sorted] {
                    let want: Vec<u32> = (0..w.count() as u32)
                        .filter(|r| ids.contains(&w.id(*r)))
                        .collect();
                    prop_assert_eq!(w.rows_for_ids(ids), want);
                }
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
