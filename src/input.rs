//! Opening the files a user names as inputs (job files, edge lists, data
//! sets): only a regular file is read, at most a stated number of bytes.
//! A named pipe would block the reader forever (until some process writes
//! to it), a device may never end, a socket cannot be read as a file and a
//! directory holds no text: each is refused with its kind, as an
//! [`std::io::Error`] of kind `InvalidInput` whose message the caller
//! prints after the path. The type is checked on the path and again on the
//! opened file (opened without blocking, so that a pipe put in the path's
//! place between the two is refused too, not waited on).

use std::fs::{File, FileType};
use std::io::{Error, ErrorKind, Read};
use std::path::Path;

/// What a file that is not a regular file is, in words.
fn kind(t: FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a named pipe (FIFO)";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

fn refuse(t: FileType) -> Error {
    Error::new(ErrorKind::InvalidInput, format!("{}, not a regular file", kind(t)))
}

/// Opens `path` (symbolic links followed) for reading if it is a regular
/// file; otherwise an `InvalidInput` error naming what it is.
pub fn open_regular(path: &Path) -> Result<File, Error> {
    let t = std::fs::metadata(path)?.file_type();
    if !t.is_file() {
        return Err(refuse(t));
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Reads of a regular file ignore the flag.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let t = file.metadata()?.file_type();
    if !t.is_file() {
        return Err(refuse(t));
    }
    Ok(file)
}

/// The bytes of the regular file `path`, at most `limit` (a longer file
/// gives `limit` bytes and the caller, comparing, refuses it).
pub fn read_capped(path: &Path, limit: usize) -> Result<Vec<u8>, Error> {
    let mut bytes = Vec::new();
    open_regular(path)?.take(limit as u64).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A named pipe, a directory and a character device are refused at
    /// once, by kind (the pipe would block a plain open forever); a regular
    /// file is read, at most `limit` bytes.
    #[test]
    fn only_regular_files_are_read() {
        let dir = std::env::temp_dir().join(format!("fedbandits-input-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("edges.txt");
        std::fs::write(&file, "0 1\n1 2\n").unwrap();
        assert_eq!(read_capped(&file, 100).unwrap(), b"0 1\n1 2\n");
        assert_eq!(read_capped(&file, 3).unwrap(), b"0 1");
        let e = read_capped(&dir, 100).unwrap_err();
        assert_eq!(
            (e.kind(), e.to_string()),
            (ErrorKind::InvalidInput, "a directory, not a regular file".into())
        );
        let e = read_capped(Path::new("/dev/zero"), 100).unwrap_err();
        assert_eq!(e.to_string(), "a character device, not a regular file");
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            let fifo = dir.join("pipe");
            let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            let e = read_capped(&fifo, 100).unwrap_err();
            assert_eq!(e.to_string(), "a named pipe (FIFO), not a regular file");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
