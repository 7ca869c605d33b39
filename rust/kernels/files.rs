//! The file operations the vector files and the writer lock need, one
//! implementation per platform family behind one interface, so that nothing
//! above this module says `unix` or `windows`.
//!
//! - [`read_exact_at`] / [`write_all_at`]: positional I/O (`pread`/`pwrite` on
//!   unix; `seek_read`/`seek_write` on Windows, which move the handle's cursor:
//!   cortex never reads or writes at the cursor, so nothing depends on it).
//! - [`open_regular`]: open a file and refuse anything but a regular file (on
//!   unix with `O_NONBLOCK`, so that a FIFO put in its place never blocks the
//!   open; Windows has no FIFOs in the file system, and a device name is refused
//!   by the same check).
//! - [`try_lock`] / [`lock`] / [`unlock`]: an exclusive lock on a whole file, std's
//!   `File::try_lock`/`lock` (Rust 1.89): `flock` on unix (advisory: only
//!   processes that lock see it), `LockFileEx` on Windows (mandatory for
//!   `ReadFile`/`WriteFile` through other handles, not for mapped views, which
//!   page in through paging I/O; cortex reads a locked vector file only through
//!   its mapping, and the lock of `semantic.py` is a file nobody reads). Both
//!   are released when the handle is closed, also when the process dies.
//! - [`replace_file`]: rename `src` over `dst` atomically. On unix a rename
//!   replaces the name while readers keep their mapping of the old file. On
//!   Windows a file that is mapped cannot be deleted, so a rename over it fails;
//!   but it can be renamed (std opens every file with `FILE_SHARE_DELETE`). So
//!   [`replace_moving_aside`] moves the old file to `<dst>.old<pid>-<n>`, renames
//!   `src` into place, and deletes the old file if no one has it mapped any more
//!   (else a later replace of the same `dst` deletes it). Between the two renames
//!   `dst` does not exist for a moment: a reader opening then gets "not found", the
//!   same error it can retry as a reader that opens between the renames of the
//!   four files of an index (semantic.py retries both).
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Fill `buf` from `file` at `offset`.
pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::FileExt;
        let (mut buf, mut offset) = (buf, offset);
        while !buf.is_empty() {
            match file.seek_read(buf, offset) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "failed to fill whole buffer",
                    ))
                }
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Write all of `buf` to `file` at `offset` (extending the file if needed).
pub fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::FileExt;
        let (mut buf, mut offset) = (buf, offset);
        while !buf.is_empty() {
            match file.seek_write(buf, offset) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "failed to write whole buffer",
                    ))
                }
                Ok(n) => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// How [`open_regular`] opens a file.
#[derive(Clone, Copy, Debug, Default)]
pub struct Open {
    pub write: bool,
    pub create: bool,
    /// Refuse a symbolic link at the path instead of following it (unix:
    /// `O_NOFOLLOW`; Windows: links there are the user's own doing, followed).
    pub no_follow: bool,
}

/// Open `path` and check that it is a regular file. Anything else (a FIFO, a
/// device, a directory) is an `InvalidInput` error, never a hang or endless bytes.
pub fn open_regular(path: &Path, how: Open) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .write(how.write)
        .create(how.create)
        .truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let follow = if how.no_follow { libc::O_NOFOLLOW } else { 0 };
        options.custom_flags(libc::O_NONBLOCK | follow);
    }
    let f = options.open(path).map_err(|e| {
        // Windows refuses to open a folder as a file with "access denied": say what it is.
        let folder = e.kind() == io::ErrorKind::PermissionDenied
            && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
        if folder {
            io::Error::new(io::ErrorKind::InvalidInput, "not a regular file (a folder)")
        } else {
            e
        }
    })?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(f)
}

/// Take the exclusive lock of `file` if no other handle holds it: `Ok(false)`
/// when one does.
pub fn try_lock(file: &File) -> io::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// Take the exclusive lock of `file`, waiting for the handle that holds it.
pub fn lock(file: &File) -> io::Result<()> {
    file.lock()
}

/// Release the lock of `file` (closing the handle does too).
pub fn unlock(file: &File) -> io::Result<()> {
    match file.unlock() {
        // std unlocks twice on Windows (an exclusive and a shared lock may both be held)
        // and accepts ERROR_NOT_LOCKED from the second call; Wine answers that call with
        // ERROR_LOCK_VIOLATION (33) instead, when the lock is already released.
        #[cfg(windows)]
        Err(e) if e.raw_os_error() == Some(33) => Ok(()),
        other => other,
    }
}

/// Rename `src` over `dst`, atomically where the platform can (see the module doc).
pub fn replace_file(src: &Path, dst: &Path) -> io::Result<()> {
    #[cfg(windows)]
    {
        replace_moving_aside(src, dst).map_err(|e| {
            // ERROR_SHARING_VIOLATION: a handle opened without delete sharing (a Python
            // reader's `open`) refuses the rename, as ERROR_ACCESS_DENIED does: one kind,
            // so that a caller can tell "in use, try again" from other failures.
            const ERROR_SHARING_VIOLATION: i32 = 32;
            if e.raw_os_error() == Some(ERROR_SHARING_VIOLATION) {
                io::Error::new(io::ErrorKind::PermissionDenied, e)
            } else {
                e
            }
        })
    }
    #[cfg(not(windows))]
    {
        std::fs::rename(src, dst)
    }
}

static ASIDE: AtomicU64 = AtomicU64::new(0);

/// The name of the file `<dst>.old<pid>-<n>` a replace moves `dst` to.
fn aside_path(dst: &Path) -> PathBuf {
    let n = ASIDE.fetch_add(1, Ordering::Relaxed);
    let mut name = dst.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".old{}-{n}", std::process::id()));
    dst.with_file_name(name)
}

/// Is `name` the name of a file `dst` was moved aside to (by any process)?
fn is_aside_of(name: &str, dst_name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix(dst_name)
        .and_then(|r| r.strip_prefix(".old"))
    else {
        return false;
    };
    let mut parts = rest.splitn(2, '-');
    let digits =
        |s: Option<&str>| s.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
    digits(parts.next()) && digits(parts.next())
}

/// Delete the files `dst` was moved aside to before; those still mapped (on
/// Windows) stay until a later call.
fn sweep_asides(dst: &Path) {
    let (Some(dir), Some(dst_name)) = (dst.parent(), dst.file_name().and_then(|n| n.to_str()))
    else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry
            .file_name()
            .to_str()
            .is_some_and(|n| is_aside_of(n, dst_name))
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Replace `dst` by `src` for a platform that cannot rename over a mapped file:
/// try the plain rename; if it fails and `dst` exists, move `dst` aside, rename
/// `src` into place (moving `dst` back if that fails), and delete what was moved
/// aside when it can be. Used on Windows; compiled and tested everywhere.
pub fn replace_moving_aside(src: &Path, dst: &Path) -> io::Result<()> {
    let first = match std::fs::rename(src, dst) {
        Ok(()) => {
            sweep_asides(dst);
            return Ok(());
        }
        Err(e) => e,
    };
    if std::fs::symlink_metadata(src).is_err() || std::fs::symlink_metadata(dst).is_err() {
        return Err(first); // nothing to move aside: the rename failed for another reason
    }
    let aside = aside_path(dst);
    std::fs::rename(dst, &aside)?;
    if let Err(e) = std::fs::rename(src, dst) {
        let _ = std::fs::rename(&aside, dst);
        return Err(e);
    }
    sweep_asides(dst);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let n = ASIDE.fetch_add(1, Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!("cortex-files-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn positional_io_round_trips_and_extends() {
        let d = dir();
        let p = d.join("f");
        let f = open_regular(
            &p,
            Open {
                write: true,
                create: true,
                no_follow: true,
            },
        )
        .unwrap();
        write_all_at(&f, b"world", 6).unwrap();
        write_all_at(&f, b"hello ", 0).unwrap();
        let mut buf = [0u8; 11];
        read_exact_at(&f, &mut buf, 0).unwrap();
        assert_eq!(&buf, b"hello world");
        let err = read_exact_at(&f, &mut [0u8; 4], 9).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        drop(f); // (Windows removes no folder with an open file in it)
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn open_regular_refuses_a_directory_and_a_missing_file() {
        let d = dir();
        let err = open_regular(&d, Open::default()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let err = open_regular(&d.join("missing"), Open::default()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        std::fs::remove_dir_all(d).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn no_follow_refuses_a_symlink() {
        let d = dir();
        std::fs::write(d.join("target"), b"x").unwrap();
        std::os::unix::fs::symlink(d.join("target"), d.join("link")).unwrap();
        let how = Open {
            write: true,
            create: true,
            no_follow: true,
        };
        assert!(open_regular(&d.join("link"), how).is_err());
        assert!(open_regular(&d.join("link"), Open::default()).is_ok());
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn a_second_handle_cannot_take_a_held_lock() {
        let d = dir();
        let p = d.join("lock");
        let how = Open {
            write: true,
            create: true,
            no_follow: true,
        };
        let (a, b) = (
            open_regular(&p, how).unwrap(),
            open_regular(&p, how).unwrap(),
        );
        assert!(try_lock(&a).unwrap());
        assert!(!try_lock(&b).unwrap());
        unlock(&a).unwrap();
        assert!(try_lock(&b).unwrap());
        drop(b); // closing releases it
        lock(&a).unwrap();
        drop(a);
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn replace_moving_aside_replaces_and_sweeps() {
        let d = dir();
        let (src, dst) = (d.join("new"), d.join("index"));
        std::fs::write(&dst, b"old").unwrap();
        // what an earlier replace could not delete (mapped then), and a stranger
        std::fs::write(d.join("index.old7-3"), b"stale").unwrap();
        std::fs::write(d.join("index.older"), b"keep").unwrap();
        std::fs::write(&src, b"new").unwrap();
        replace_moving_aside(&src, &dst).unwrap();
        assert_eq!(std::fs::read(&dst).unwrap(), b"new");
        assert!(!src.exists());
        let mut left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["index", "index.older"]);
        // a missing source is an error and leaves the destination alone
        assert!(replace_moving_aside(&src, &dst).is_err());
        assert_eq!(std::fs::read(&dst).unwrap(), b"new");
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn only_the_asides_of_the_same_file_are_swept() {
        assert!(is_aside_of("vectors.old12-0", "vectors"));
        assert!(!is_aside_of("vectors.old12", "vectors"));
        assert!(!is_aside_of("vectors.old-0", "vectors"));
        assert!(!is_aside_of("vectors.old1-2x", "vectors"));
        assert!(!is_aside_of("vectors.ids.old1-2", "vectors"));
        assert!(!is_aside_of("other.old1-2", "vectors"));
    }

    /// The case `replace_file` exists for: a reader has `dst` open and mapped (as a
    /// `VecFile` has, through std: share modes read, write and delete on Windows).
    /// On unix the rename replaces the name; on Windows the old file is moved aside and
    /// swept by the next replace once it is unmapped.
    #[test]
    fn replace_file_keeps_a_reader_mapping_of_the_old_file() {
        let d = dir();
        let (src, dst) = (d.join("new"), d.join("index"));
        std::fs::write(&dst, vec![1u8; 4096]).unwrap();
        let f = File::open(&dst).unwrap();
        // SAFETY: a private test file nobody else writes or truncates.
        let old = unsafe { memmap2::Mmap::map(&f) }.unwrap();
        std::fs::write(&src, vec![2u8; 4096]).unwrap();
        replace_file(&src, &dst).unwrap();
        assert!(old.iter().all(|b| *b == 1));
        assert!(std::fs::read(&dst).unwrap().iter().all(|b| *b == 2));
        assert!(!src.exists());
        drop(old);
        drop(f);
        // once nothing maps the old file, the next replace leaves only the new one
        std::fs::write(&src, vec![3u8; 4096]).unwrap();
        replace_file(&src, &dst).unwrap();
        let left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, ["index"]);
        assert!(std::fs::read(&dst).unwrap().iter().all(|b| *b == 3));
        std::fs::remove_dir_all(d).unwrap();
    }

    /// A handle without delete sharing (what Python's `open` makes on Windows) refuses
    /// the replace with PermissionDenied (semantic.py tries again); closed, it does not.
    #[cfg(windows)]
    #[test]
    fn a_handle_without_delete_sharing_refuses_the_replace_until_closed() {
        use std::os::windows::fs::OpenOptionsExt;
        const FILE_SHARE_READ: u32 = 1;
        let d = dir();
        let (src, dst) = (d.join("new"), d.join("state"));
        std::fs::write(&dst, b"old").unwrap();
        std::fs::write(&src, b"new").unwrap();
        let reader = OpenOptions::new()
            .read(true)
            .share_mode(FILE_SHARE_READ)
            .open(&dst)
            .unwrap();
        let err = replace_file(&src, &dst).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
        assert_eq!(std::fs::read(&dst).unwrap(), b"old");
        assert_eq!(std::fs::read(&src).unwrap(), b"new");
        drop(reader);
        replace_file(&src, &dst).unwrap();
        assert_eq!(std::fs::read(&dst).unwrap(), b"new");
        std::fs::remove_dir_all(d).unwrap();
    }
}
